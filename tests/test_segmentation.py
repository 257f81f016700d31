"""Segmentation backends (LiDAR-seeded GrabCut, SAM2 with random weights) and COCO RLE."""

from __future__ import annotations

import json
import sys

import cv2
import numpy as np
import pytest
from pycocotools import mask as mask_utils

from autolabel.segmentation import SegmenterUnavailable, get_segmenter
from autolabel.segmentation.lidar_seeded import (
    SCORE_FEATURE_NAMES,
    LidarSeededConfig,
    LidarSeededSegmenter,
)
from autolabel.segmentation.rle import (
    decode_mask,
    decode_masks,
    dumps_masks_json,
    encode_mask,
    encode_masks,
    rle_area_px,
    rle_box_2d,
    write_masks_json,
)
from autolabel.segmentation.validation_scenes import make_validation_scene, mask_iou

HEIGHT, WIDTH = 240, 320


def textured_background(seed: int) -> np.ndarray:
    """Grey-green, noisy, blotchy texture (float32 RGB), unlike the objects' colours."""
    rng = np.random.default_rng(seed)
    blotches = cv2.resize(rng.normal(0, 1, (12, 16)).astype(np.float32), (WIDTH, HEIGHT))
    image = np.empty((HEIGHT, WIDTH, 3), np.float32)
    image[:] = (110, 120, 100)
    image += 25 * blotches[..., None]
    image += rng.normal(0, 8, image.shape).astype(np.float32)
    # Stripes, so the background is not one smooth colour.
    image[::17] = (60, 60, 60)
    return image


def ellipse_mask(center: tuple[int, int], axes: tuple[int, int]) -> np.ndarray:
    mask = np.zeros((HEIGHT, WIDTH), np.uint8)
    cv2.ellipse(mask, center, axes, 0, 0, 360, 1, -1)
    return mask.astype(bool)


def seeds_in(mask: np.ndarray, step: int = 6, offset=(0.0, 0.0)) -> np.ndarray:
    """LiDAR-like seeds: a grid of pixel centres inside ``mask``, optionally shifted."""
    v, u = np.mgrid[0:HEIGHT:step, 0:WIDTH:step]
    inside = mask[v, u]
    return np.column_stack([u[inside] + 0.5, v[inside] + 0.5]) + np.asarray(offset)


def loose_box(mask: np.ndarray, pad_px: float) -> np.ndarray:
    rows, cols = np.flatnonzero(mask.any(1)), np.flatnonzero(mask.any(0))
    return np.array(
        [cols[0] - pad_px, rows[0] - pad_px, cols[-1] + 1 + pad_px, rows[-1] + 1 + pad_px]
    )


@pytest.fixture(scope="module")
def ellipse_scene() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A red, shaded ellipse on a textured background with a blue post behind its right end.

    Returns (image, true visible mask of the ellipse, its loose projected box). The post (a
    background structure inside the box) is what misplaced seeds land on.
    """
    image = textured_background(0)
    truth = ellipse_mask((150, 120), (60, 40))
    post = np.zeros((HEIGHT, WIDTH), bool)
    post[60:175, 196:226] = True
    image[post] = (40, 70, 200)
    shade = np.linspace(1.1, 0.8, HEIGHT, dtype=np.float32)[:, None, None]
    red = np.broadcast_to(np.array([200, 40, 50], np.float32) * shade, image.shape)
    image[truth] = red[truth]
    image = np.clip(image, 0, 255).astype(np.uint8)
    return image, truth, loose_box(truth, 8)


def test_lidar_seeded_mask_matches_truth_and_score_drops_for_bad_seeds(ellipse_scene):
    image, truth, box = ellipse_scene
    segmenter = get_segmenter("lidar")
    good = segmenter.segment(image, box[None], {"points_uv": [seeds_in(truth)]})
    assert good.masks.shape == (1, HEIGHT, WIDTH) and good.masks.dtype == bool
    assert good.score.dtype == np.float32
    assert mask_iou(good.masks, truth[None])[0] > 0.8
    u0, v0 = np.floor(box[:2]).astype(int)
    u1, v1 = np.ceil(box[2:]).astype(int)
    assert good.masks[0].sum() == good.masks[0][v0:v1, u0:u1].sum()  # inside the box
    assert good.score[0] > 0.8

    # A calibration error puts the seeds on the post and the background beside the object.
    # GrabCut still finds the red ellipse (the post's colour is also outside the box, so it is
    # modelled as background), but the seeds disagree with the mask and the score drops.
    post = (image == (40, 70, 200)).all(axis=2)
    in_box = np.zeros_like(truth)
    in_box[v0:v1, u0:u1] = True
    for wrong in (seeds_in(post & ~truth, step=5), seeds_in(in_box & ~truth & ~post, step=4)):
        bad = segmenter.segment(image, box[None], {"points_uv": [wrong]})
        assert bad.score[0] < good.score[0] - 0.15

    # Seeds shifted by half the object's height: the mask holds, the score dips a little.
    shifted = segmenter.segment(image, box[None], {"points_uv": [seeds_in(truth, offset=(0, 45))]})
    assert mask_iou(shifted.masks, truth[None])[0] > 0.8
    assert bad.score[0] < shifted.score[0] < good.score[0]


def test_lidar_seeded_without_seeds_cuts_from_the_box(ellipse_scene):
    image, truth, box = ellipse_scene
    result = get_segmenter("lidar").segment(image, box[None])
    assert mask_iou(result.masks, truth[None])[0] > 0.7
    seeded = get_segmenter("lidar").segment(image, box[None], {"points_uv": [seeds_in(truth)]})
    assert result.score[0] < seeded.score[0]


def test_lidar_seeded_rectangle_and_overlap_by_depth():
    """A near blue rectangle hides part of a far yellow ellipse; depth gives shared pixels away."""
    image = textured_background(2)
    far_full = ellipse_mask((120, 110), (70, 50))
    near = np.zeros((HEIGHT, WIDTH), bool)
    near[90:200, 150:260] = True
    far_visible = far_full & ~near
    image[far_full] = (230, 210, 40)
    image[near] = (40, 60, 210)
    image = np.clip(image, 0, 255).astype(np.uint8)
    boxes = np.stack([loose_box(far_full, 6), loose_box(near, 6)])
    prompts = {
        "points_uv": [seeds_in(far_visible), seeds_in(near)],
        "depth_m": np.array([30.0, 10.0]),
    }
    result = get_segmenter("lidar").segment(image, boxes, prompts)
    iou = mask_iou(result.masks, np.stack([far_visible, near]))
    assert (iou > 0.8).all(), iou
    assert not (result.masks[0] & result.masks[1]).any()
    assert (result.score > 0.6).all()


def test_lidar_seeded_is_deterministic_and_handles_edge_cases(ellipse_scene):
    image, truth, box = ellipse_scene
    segmenter = LidarSeededSegmenter()
    boxes = np.stack([box, [0, 0, 2, 2], [-50, -20, 40, 30]])  # normal, too thin, off-image part
    prompts = {"points_uv": [seeds_in(truth), np.zeros((0, 2)), np.array([[5.0, 5.0]])]}
    first = segmenter.segment(image, boxes, prompts)
    second = segmenter.segment(image, boxes, prompts)
    assert np.array_equal(first.masks, second.masks)
    assert first.score.tobytes() == second.score.tobytes()
    assert not first.masks[1].any() and first.score[1] < 0.05
    assert not first.masks[2][30:].any() and not first.masks[2][:, 40:].any()
    empty = segmenter.segment(image, np.zeros((0, 4)))
    assert empty.masks.shape == (0, HEIGHT, WIDTH) and empty.score.shape == (0,)


def test_lidar_seeded_score_tracks_true_iou_on_constructed_scenes():
    """On scenes whose seeds range from good to offset/outlier-ridden, score follows true IoU."""
    segmenter = LidarSeededSegmenter()
    scores, ious = [], []
    for seed, offset in [(7, (0.0, 0.03)), (8, (0.1, 0.4)), (9, (0.0, 0.25))]:
        scene = make_validation_scene(seed, 270, 480, n_objects=8, seed_offset_fraction=offset)
        result = segmenter.segment(
            scene.image, scene.boxes_2d, {"points_uv": scene.points_uv, "depth_m": scene.depth_m}
        )
        scores.append(result.score)
        ious.append(mask_iou(result.masks, scene.visible_masks))
    scores, ious = np.concatenate(scores), np.concatenate(ious)
    assert np.corrcoef(scores, ious)[0, 1] > 0.6
    assert np.abs(scores - ious).mean() < 0.25


def test_lidar_seeded_wanted_objects_match_a_full_run_on_overlapping_scenes():
    """Cutting only the wanted objects (and the nearer ones whose boxes meet theirs) gives the
    wanted masks and features of a run over every object, byte for byte."""
    segmenter = LidarSeededSegmenter()
    scene = make_validation_scene(8, 270, 480, n_objects=8, seed_offset_fraction=(0.0, 0.1))
    prompts = {"points_uv": scene.points_uv, "depth_m": scene.depth_m}
    masks, features = segmenter.segment_with_features(scene.image, scene.boxes_2d, prompts)
    n = len(scene.boxes_2d)
    boxes = scene.boxes_2d
    lo, hi = np.floor(boxes[:, :2].clip(0)), np.ceil(boxes[:, 2:])
    overlapping = 0
    for k in range(n):
        wanted = np.arange(n) == k
        part_masks, part_features = segmenter.segment_with_features(
            scene.image, boxes, prompts, wanted
        )
        assert part_masks[k].tobytes() == masks[k].tobytes()
        assert part_features[k].tobytes() == features[k].tobytes()
        # Objects that cannot take pixels from k (farther, or boxes apart) are not cut.
        meets = np.all((lo < hi[k]) & (lo[k] < hi), axis=1)
        nearer = scene.depth_m < scene.depth_m[k]
        overlapping += int((meets & nearer).sum())
        for j in np.flatnonzero(~wanted & ~(meets & nearer)):
            assert not part_masks[j].any() and not part_features[j].any()
    assert overlapping > 0  # the scene has occluders, so the nearer cuts were exercised
    with pytest.raises(ValueError, match="wanted has 1 entries"):
        segmenter.segment_with_features(scene.image, boxes, prompts, np.ones(1, bool))


def test_lidar_seeded_deferred_seed_free_cuts_equal_the_inline_ones():
    """Seed-free cuts run after the overlaps give the features of the inline run, byte for
    byte; those the caller skips get boxcut_iou 0.5 and every other feature unchanged. The
    callback sees overlap_kept resolved and NaN where a cut is pending."""
    segmenter = LidarSeededSegmenter()
    scene = make_validation_scene(8, 270, 480, n_objects=8, seed_offset_fraction=(0.0, 0.1))
    prompts = {"points_uv": scene.points_uv, "depth_m": scene.depth_m}
    masks, features = segmenter.segment_with_features(scene.image, scene.boxes_2d, prompts)
    seen = []

    def run_all(f):
        seen.append(f.copy())
        return np.zeros(len(f), bool)

    deferred_masks, deferred = segmenter.segment_with_features(
        scene.image, scene.boxes_2d, prompts, boxcut_skip=run_all
    )
    assert deferred.tobytes() == features.tobytes()
    assert deferred_masks.tobytes() == masks.tobytes()
    (given,) = seen
    column = SCORE_FEATURE_NAMES.index("boxcut_iou")
    pending = np.isnan(given[:, column])
    assert pending.sum() >= 4  # most objects have a seed-free cut
    other = np.arange(len(SCORE_FEATURE_NAMES)) != column
    assert given[:, other].tobytes() == features[:, other].tobytes()  # overlap_kept resolved
    skip = np.arange(len(features)) % 2 == 0
    _, skipped = segmenter.segment_with_features(
        scene.image, scene.boxes_2d, prompts, boxcut_skip=lambda f: skip
    )
    assert np.all(skipped[skip & pending, column] == 0.5)
    assert skipped[~skip].tobytes() == features[~skip].tobytes()
    assert skipped[:, other].tobytes() == features[:, other].tobytes()
    assert np.any(features[skip & pending, column] != 0.5)  # the skip did change something
    with pytest.raises(ValueError, match="boxcut_skip gave 1 values"):
        segmenter.segment_with_features(
            scene.image, scene.boxes_2d, prompts, boxcut_skip=lambda f: np.ones(1, bool)
        )


def test_geometric_evidence_skips_only_seed_free_cuts_that_decide_nothing():
    """Where the segmenter skips an object's seed-free cut, every boxcut_iou in [0, 1] gives
    the same side of the evidence threshold, and a capped score that is the geometric one, or
    at least evidence_score_full, for all of them (checked on a fine grid of values)."""
    from autolabel.segmentation.geometric import GeometricConfig, GeometricSegmenter
    from autolabel.segmentation.lidar_seeded import score_from_features

    threshold, full = 0.7, 0.8
    segmenter = GeometricSegmenter(
        GeometricConfig(evidence_decided_above=threshold, evidence_score_full=full)
    )
    rng = np.random.default_rng(3)
    # seed_recall, boxcut_iou (replaced), cut_support, box_fill, overlap_kept: as on real views
    features = rng.uniform([0.5, 0, 0.5, 0.2, 0.6], [1, 1, 1, 0.9, 1], (4000, 5))
    features[rng.random(len(features)) < 0.5, -1] = 1.0
    geometric = rng.choice([1.0, 0.95, 0.6], len(features)) * rng.uniform(0.5, 1, len(features))
    skip = segmenter._boxcut_decides_nothing(features, geometric)
    column = SCORE_FEATURE_NAMES.index("boxcut_iou")
    outcomes = []
    for value in np.linspace(0, 1, 101):
        f = features.copy()
        f[:, column] = value
        evidence = score_from_features(f).astype(np.float64)
        capped = np.minimum(geometric, evidence)
        outcomes.append((evidence > threshold, capped == geometric, capped >= full))
    above, uncapped, saturated = (np.array(o) for o in zip(*outcomes, strict=True))
    decided = np.all(above == above[:1], axis=0)
    harmless = np.all(uncapped, axis=0) | np.all(saturated, axis=0)
    assert np.all(decided[skip] & harmless[skip])
    # Not a trivial answer: many cuts are skipped, and every object the bounds cannot settle
    # is cut.
    assert 0.05 < skip.mean() < 0.95
    assert not np.any(skip & ~decided)
    off = GeometricSegmenter(GeometricConfig(evidence_decided_above=threshold))
    assert np.all(off._boxcut_decides_nothing(features, geometric) <= skip)
    with pytest.raises(ValueError, match="GeometricConfig.evidence_score_full"):
        GeometricConfig(evidence_score_full=1.5)


def test_segment_input_errors_name_the_argument(ellipse_scene):
    image, _, box = ellipse_scene
    segmenter = LidarSeededSegmenter()
    with pytest.raises(ValueError, match="uint8"):
        segmenter.segment(image.astype(np.float32), box[None])
    with pytest.raises(ValueError, match=r"boxes_2d must be \(N, 4\)"):
        segmenter.segment(image, box[:3][None])
    with pytest.raises(ValueError, match="u_max < u_min"):
        segmenter.segment(image, np.array([[10, 10, 5, 20]]))
    with pytest.raises(ValueError, match=r"points_uv'\] has 2 entries for 1 boxes"):
        segmenter.segment(image, box[None], {"points_uv": [np.zeros((0, 2))] * 2})
    with pytest.raises(ValueError, match="unknown prompt keys"):
        segmenter.segment(image, box[None], {"point_uv": []})


def test_get_segmenter_names_and_config_keys():
    with pytest.raises(ValueError, match="unknown segmenter 'mask_rcnn'"):
        get_segmenter("mask_rcnn")
    with pytest.raises(ValueError, match="unknown config key 'working_side'"):
        get_segmenter("lidar", {"working_side": 32})
    with pytest.raises(ValueError, match="grabcut_iterations"):
        LidarSeededConfig(grabcut_iterations=0)
    with pytest.raises(ValueError, match="boxcut_max_side_px"):
        LidarSeededConfig(boxcut_max_side_px=8)
    segmenter = get_segmenter("lidar", {"working_max_side_px": 48})
    assert segmenter.config.working_max_side_px == 48


def test_lidar_seeded_boxcut_on_a_coarser_grid_finds_the_object():
    # A 60 x 40 px red rectangle on grey, its box one pixel larger all round, in a 96 x 72 crop:
    # the seed-free cut on a 32 px grid, scaled back, must cover the rectangle (IoU by hand).
    crop = np.full((72, 96, 3), 128, np.uint8)
    crop[16:56, 18:78] = (0, 0, 220)
    truth = np.zeros((72, 96), bool)
    truth[16:56, 18:78] = True
    segmenter = LidarSeededSegmenter(LidarSeededConfig(boxcut_max_side_px=32))
    cut = segmenter._boxcut(crop, (17, 15, 79, 57))
    assert cut.shape == truth.shape and cut.dtype == np.bool_
    assert np.count_nonzero(cut & truth) / np.count_nonzero(cut | truth) > 0.9


# --- RLE ---------------------------------------------------------------------------------------


def test_rle_round_trip_area_box_and_json():
    rng = np.random.default_rng(3)
    masks = np.zeros((4, 37, 53), bool)
    masks[0] = rng.random((37, 53)) < 0.3
    masks[1, 5:9, 10:30] = True
    masks[3] = True  # masks[2] stays empty
    rles = encode_masks(masks)
    assert all(isinstance(r["counts"], str) and r["size"] == [37, 53] for r in rles)
    assert np.array_equal(decode_masks(rles), masks)
    assert np.array_equal(decode_mask(encode_mask(masks[1])), masks[1])
    # pycocotools reads our JSON form directly once counts are bytes again.
    for rle, mask in zip(rles, masks, strict=True):
        decoded = mask_utils.decode({"size": rle["size"], "counts": rle["counts"].encode()})
        assert np.array_equal(decoded.astype(bool), mask)
    assert rle_area_px(rles).tolist() == masks.sum(axis=(1, 2)).tolist()
    assert rle_box_2d(rles)[1].tolist() == [10.0, 5.0, 30.0, 9.0]
    assert rle_box_2d(rles)[3].tolist() == [0.0, 0.0, 53.0, 37.0]
    # Uncompressed COCO counts (run lengths, column-major, starting with zeros) decode too.
    assert np.array_equal(decode_mask({"size": [2, 2], "counts": [1, 2, 1]}), [[0, 1], [1, 0]])
    text = dumps_masks_json([{"rle": r, "id": i} for i, r in enumerate(rles)])
    assert text == dumps_masks_json(json.loads(text))
    assert decode_masks([], 4, 5).shape == (0, 4, 5)
    with pytest.raises(ValueError, match="'size' and 'counts'"):
        decode_masks([{"counts": "abc"}])


def test_write_masks_json_is_atomic_and_deterministic(tmp_path):
    records = [{"rle": encode_mask(np.eye(6, dtype=bool)), "token": "a"}]
    path = write_masks_json(tmp_path / "masks" / "cam.json", records)
    first = path.read_bytes()
    write_masks_json(path, records)
    assert path.read_bytes() == first
    assert json.loads(first) == json.loads(json.dumps(records))
    assert [p.name for p in path.parent.iterdir()] == ["cam.json"]


# --- SAM2 --------------------------------------------------------------------------------------


def test_sam2_unavailable_without_checkpoint(tmp_path):
    with pytest.raises(SegmenterUnavailable, match="checkpoint_path.*model_config"):
        get_segmenter("sam2")
    with pytest.raises(SegmenterUnavailable, match="not a file"):
        get_segmenter(
            "sam2",
            {
                "checkpoint_path": str(tmp_path / "missing.pt"),
                "model_config": "configs/sam2.1/sam2.1_hiera_t.yaml",
            },
        )
    with pytest.raises(ValueError, match="Sam2Config.device"):
        get_segmenter("sam2", {"device": "tpu"})


def test_torchvision_shim_matches_reference_transforms():
    """Resize = PIL's antialiased bilinear (torchvision's tensor Resize matches it by design)."""
    import torch
    from PIL import Image

    from autolabel.segmentation._torchvision_shim import Normalize, Resize, ToTensor

    rng = np.random.default_rng(4)
    plane = rng.random((45, 80)).astype(np.float32)
    for size in [(32, 32), (128, 128), (20, 100)]:
        reference = np.asarray(Image.fromarray(plane, mode="F").resize(size[::-1], Image.BILINEAR))
        resized = Resize(size)(torch.from_numpy(plane)[None])[0].numpy()
        np.testing.assert_allclose(resized, reference, atol=2e-5)
    image = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
    tensor = ToTensor()(image)
    assert tensor.shape == (3, 5, 7) and tensor.dtype == torch.float32
    np.testing.assert_allclose(tensor.numpy(), image.transpose(2, 0, 1) / 255.0, rtol=1e-6)
    normalized = Normalize([0.5, 0.25, 0.0], [0.5, 2.0, 1.0])(tensor).numpy()
    expected = (
        image.transpose(2, 0, 1) / 255.0 - np.array([0.5, 0.25, 0.0])[:, None, None]
    ) / np.array([0.5, 2.0, 1.0])[:, None, None]
    np.testing.assert_allclose(normalized, expected, rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def sam2_random():
    """SAM2 hiera-tiny with random weights (no checkpoint), wrapped as a segmenter."""
    import torch
    from sam2.build_sam import build_sam2

    from autolabel.segmentation.sam2_backend import Sam2Segmenter

    torch.manual_seed(0)
    model = build_sam2("configs/sam2.1/sam2.1_hiera_t.yaml", None, device="cpu")
    return Sam2Segmenter.from_model(model)


def test_sam2_random_weights_batched_masks_scores_and_rle(sam2_random, ellipse_scene):
    image, _, box = ellipse_scene
    boxes = np.stack([box, [0, 0, 100, 80], [200, 100, 330, 250]])  # last one leaves the image
    result = sam2_random.segment(image, boxes)
    assert result.masks.shape == (3, HEIGHT, WIDTH) and result.masks.dtype == bool
    assert result.score.shape == (3,) and result.score.dtype == np.float32
    assert ((result.score >= 0) & (result.score <= 1)).all()
    # torchvision was either real or only lent to sam2's import.
    shim = sys.modules.get("torchvision")
    assert shim is None or "autolabel shim" not in (shim.__doc__ or "")

    # The batched call returns, in order, what the predictor gives for each box on its own
    # (segment leaves the image's embedding set in the predictor).
    predictor = sam2_random.predictor
    clipped = boxes.clip(0, [WIDTH, HEIGHT, WIDTH, HEIGHT]).astype(np.float32)
    for i in range(3):
        masks_i, iou_i, _ = predictor.predict(box=clipped[i], multimask_output=False)
        assert masks_i.shape == (1, HEIGHT, WIDTH)
        np.testing.assert_allclose(result.score[i], iou_i[0], atol=1e-4)
        agreement = np.mean(result.masks[i] == (masks_i[0] > 0.5))
        assert agreement > 0.999

    rles = encode_masks(result.masks)
    assert np.array_equal(decode_masks(rles), result.masks)
    assert rle_area_px(rles).tolist() == result.masks.sum(axis=(1, 2)).tolist()


def test_sam2_builds_from_a_checkpoint_path(sam2_random, tmp_path):
    """The user path: get_segmenter('sam2', checkpoint + config) loads the weights from disk."""
    import torch

    checkpoint = tmp_path / "sam2_random_tiny.pt"
    torch.save({"model": sam2_random.model.state_dict()}, checkpoint)
    segmenter = get_segmenter(
        "sam2",
        {
            "checkpoint_path": str(checkpoint),
            "model_config": "configs/sam2.1/sam2.1_hiera_t.yaml",
            "device": "cpu",
        },
    )
    assert segmenter.device == "cpu"
    loaded = segmenter.model.state_dict()
    for name, tensor in sam2_random.model.state_dict().items():
        assert torch.equal(loaded[name], tensor), name
    with pytest.raises(SegmenterUnavailable, match="could not build model_config"):
        get_segmenter(
            "sam2",
            {
                "checkpoint_path": str(checkpoint),
                "model_config": "configs/sam2.1/sam2.1_hiera_tiny.yaml",  # no such config
                "device": "cpu",
            },
        )


def test_sam2_no_boxes(sam2_random, ellipse_scene):
    image, _, _ = ellipse_scene
    empty = sam2_random.segment(image, np.zeros((0, 4)))
    assert empty.masks.shape == (0, HEIGHT, WIDTH) and empty.score.shape == (0,)


# -- geometric segmenter ----------------------------------------------------------------------


def rect_polygon(u0: float, v0: float, u1: float, v1: float) -> np.ndarray:
    return np.array([[u0, v0], [u1, v0], [u1, v1], [u0, v1]], np.float32)


def test_image_geometry_zbuffer_and_lidar_shares_by_hand():
    from autolabel.segmentation.geometry import image_geometry

    # Far object A: 100 x 60 px; near object B covers its right 30 columns; C has no returns.
    hulls = [rect_polygon(20, 40, 120, 100), rect_polygon(90, 30, 150, 110)]
    hulls.append(rect_polygon(200, 40, 240, 80))
    # Returns: a row of 10 on A's left half at A's depth, 10 on its uncovered middle that are
    # 5 m nearer (a post in front), all 1 px apart so the 0-radius discs do not overlap.
    own = np.column_stack([np.arange(25, 35) + 0.5, np.full(10, 50.5), np.full(10, 20.0)])
    post = np.column_stack([np.arange(60, 70) + 0.5, np.full(10, 70.5), np.full(10, 15.0)])
    g = image_geometry(
        hulls,
        depth_m=np.array([20.0, 10.0, 30.0]),
        near_depth_m=np.array([19.0, 9.0, 29.0]),
        scene_uvd=np.concatenate([own, post]).astype(np.float32),
        image_size_px=(WIDTH, HEIGHT),
        radius_px=0,
        margin_m=0.5,
    )
    np.testing.assert_array_equal(g.hull_px, [6000, 4800, 1600])
    np.testing.assert_array_equal(g.zbuffered_px, [6000 - 30 * 60, 4800, 1600])
    np.testing.assert_allclose(g.hull_occluded_share, [0.3, 0.0, 0.0])
    # The post's returns lie left of B (u < 90): B has no LiDAR evidence.
    np.testing.assert_array_equal(g.lidar_covered_px, [20, 0, 0])
    np.testing.assert_array_equal(g.lidar_occluded_px, [10, 0, 0])
    assert g.lidar_occluded_share[0] == 0.5 and np.isnan(g.lidar_occluded_share[1:]).all()
    np.testing.assert_array_equal(g.geometric_px, [6000 - 1800 - 10, 4800, 1600])
    assert not g.masks[0, 70, 60:70].any() and g.masks[0, 50, 25:35].all()


def test_geometric_segmenter_presence_from_geometry_not_colour():
    from autolabel.segmentation.geometric import GeometricSegmenter
    from autolabel.segmentation.geometry import image_geometry

    # A flat grey image: no colour tells the object from its surroundings.
    image = np.full((HEIGHT, WIDTH, 3), 90, np.uint8)
    hulls = [rect_polygon(40, 60, 140, 140), rect_polygon(100, 80, 200, 160)]
    g = image_geometry(
        hulls, np.array([20.0, 10.0]), np.array([19.0, 9.0]), np.zeros((0, 3), np.float32),
        (WIDTH, HEIGHT), 1, 0.5,
    )  # fmt: skip
    seeds = [seeds_in(g.masks[0]), np.zeros((0, 2))]  # the near object has no returns
    result = get_segmenter("geometric").segment(
        image,
        np.array([[40, 60, 140, 140], [100, 80, 200, 160]]),
        {"points_uv": seeds, "geometry": g},
    )
    # Presence and extent come from the geometry: the masks stay within it and keep most of it.
    assert not (result.masks & ~g.masks).any()
    assert (mask_iou(result.masks, g.masks) > 0.9).all()
    visible_far = 1 - (40 * 60) / (100 * 80)  # B covers columns 100-140, rows 80-140 of A
    recall_far = result.masks[0][seeds[0][:, 1].astype(int), seeds[0][:, 0].astype(int)].mean()
    # The object without returns is judged by geometry alone: its score is its visible share.
    np.testing.assert_allclose(result.score, [recall_far * visible_far, 1.0], atol=1e-6)
    assert isinstance(get_segmenter(), GeometricSegmenter)
    with pytest.raises(ValueError, match=r"prompts\['geometry'\]"):
        GeometricSegmenter().segment(image, np.array([[40, 60, 140, 140]]))


def test_geometric_segmenter_trims_the_boundary_to_the_object(ellipse_scene):
    from autolabel.segmentation.geometric import GeometricSegmenter, own_return_recall
    from autolabel.segmentation.geometry import image_geometry

    image, truth, _ = ellipse_scene
    box = loose_box(truth, 2)  # a box hull around a round object: its corners are not the object
    g = image_geometry(
        [rect_polygon(*box)], np.array([10.0]), np.array([9.0]), np.zeros((0, 3), np.float32),
        (WIDTH, HEIGHT), 1, 0.5,
    )  # fmt: skip
    seeds = [seeds_in(truth, step=9)]
    result = GeometricSegmenter().segment(image, box[None], {"points_uv": seeds, "geometry": g})
    refined, geometric = mask_iou(result.masks, truth[None])[0], mask_iou(g.masks, truth[None])[0]
    assert refined > geometric + 0.05 and refined > 0.85
    assert not (result.masks[0] & ~g.masks[0]).any()  # never outside the geometry
    assert own_return_recall(result.masks, seeds)[0] == pytest.approx(result.score[0], abs=1e-6)


def test_geometric_segmenter_keeps_the_geometric_mask_of_views_rejected_anyway(ellipse_scene):
    from autolabel.segmentation.geometric import GeometricConfig, GeometricSegmenter
    from autolabel.segmentation.geometry import image_geometry

    image, truth, _ = ellipse_scene
    box = loose_box(truth, 2)
    g = image_geometry(
        [rect_polygon(*box)], np.array([10.0]), np.array([9.0]), np.zeros((0, 3), np.float32),
        (WIDTH, HEIGHT), 1, 0.5,
    )  # fmt: skip
    seeds = {"points_uv": [seeds_in(truth, step=9)], "geometry": g}
    refined = GeometricSegmenter().segment(image, box[None], seeds).masks[0]
    geometric = g.masks[0]
    # The hull (the loose box's rectangle) is the geometric mask; refinement trims its corners.
    u0, v0 = np.floor(box[:2]).astype(int)
    u1, v1 = np.ceil(box[2:]).astype(int)
    assert geometric.sum() == (u1 - u0) * (v1 - v0)
    assert refined.sum() < geometric.sum()

    skipped = GeometricSegmenter().segment(
        image, box[None], {**seeds, "refine_skip": np.array([True])}
    )
    assert np.array_equal(skipped.masks[0], geometric)  # no refinement: the hull itself
    kept = GeometricSegmenter().segment(image, box[None], {**seeds, "refine_skip": [False]})
    assert np.array_equal(kept.masks[0], refined)
    everything = GeometricSegmenter(GeometricConfig(refine_all_views=True)).segment(
        image, box[None], {**seeds, "refine_skip": [True]}
    )
    assert np.array_equal(everything.masks[0], refined)
    with pytest.raises(ValueError, match="refine_skip"):
        GeometricSegmenter().segment(image, box[None], {**seeds, "refine_skip": [True, False]})
    with pytest.raises(ValueError, match="GeometricConfig.refine_all_views"):
        GeometricConfig(refine_all_views="no")


def test_image_geometry_lidar_decides_where_it_saw_the_object():
    from autolabel.segmentation.geometry import image_geometry

    # B's hull covers A's right part, but a return at A's own depth falls there: the LiDAR saw A
    # through B's (too large) hull, so that pixel stays in A's mask; the rest of the overlap,
    # without returns, goes to the nearer B as the box z-buffer says.
    hulls = [rect_polygon(20, 40, 120, 100), rect_polygon(90, 30, 150, 110)]
    seen = np.array([[100.5, 60.5, 20.0]], np.float32)
    g = image_geometry(
        hulls, np.array([20.0, 10.0]), np.array([19.0, 9.0]), seen, (WIDTH, HEIGHT), 0, 0.5
    )
    assert g.masks[0, 60, 100] and not g.masks[0, 61, 100] and not g.masks[0, 60, 101]
    assert g.geometric_px[0] == 6000 - 1800 + 1 and g.lidar_occluded_px[0] == 0
    assert g.masks[1, 60, 100]  # a farther return does not hide B


def test_geometric_segmenter_measures_image_evidence_for_untrusted_tracks(ellipse_scene):
    from autolabel.segmentation.geometric import GeometricConfig, GeometricSegmenter
    from autolabel.segmentation.geometry import image_geometry
    from autolabel.visibility import visibility_defaults

    image, truth, box = ellipse_scene
    # A second box on bare background (a detector's false positive), returns spread over it.
    ghost = np.array([235.0, 20.0, 300.0, 70.0])
    ghost_mask = np.zeros_like(truth)
    ghost_mask[20:70, 235:300] = True
    boxes = np.stack([box, ghost])
    g = image_geometry(
        [rect_polygon(*box), rect_polygon(*ghost)], np.array([10.0, 12.0]),
        np.array([9.0, 11.0]), np.zeros((0, 3), np.float32), (WIDTH, HEIGHT), 1, 0.5,
    )  # fmt: skip
    seeds = [seeds_in(truth, step=9), seeds_in(ghost_mask, step=9)]
    prompts = {"points_uv": seeds, "geometry": g, "depth_m": np.array([10.0, 12.0])}
    segmenter = GeometricSegmenter()
    plain = segmenter.segment(image, boxes, prompts)
    assert plain.image_score is None  # no track scores: nothing to judge by the image
    checked = segmenter.segment(image, boxes, {**prompts, "track_score": np.array([0.5, 0.5])})
    # Presence and masks stay geometric; the image evidence is the LiDAR-seeded GrabCut's score,
    # and it caps the score of the objects it checked.
    np.testing.assert_array_equal(checked.masks, plain.masks)
    grids = GeometricConfig()  # the evidence's own working grids
    colour = LidarSeededSegmenter(
        LidarSeededConfig(
            working_max_side_px=grids.evidence_working_max_side_px,
            boxcut_max_side_px=grids.evidence_boxcut_max_side_px,
        )
    ).segment(image, boxes, prompts)
    np.testing.assert_allclose(checked.image_score, colour.score, atol=1e-6)
    threshold = visibility_defaults("geometric").min_image_score
    assert checked.image_score[0] > threshold > checked.image_score[1]
    for key in ("evidence_working_max_side_px", "evidence_boxcut_max_side_px"):
        with pytest.raises(ValueError, match=f"GeometricConfig.{key}"):
            GeometricConfig(**{key: 8})
    np.testing.assert_allclose(checked.score, np.minimum(plain.score, colour.score), atol=1e-6)
    uncapped = GeometricSegmenter(GeometricConfig(image_caps_score=False))
    kept = uncapped.segment(image, boxes, {**prompts, "track_score": np.array([0.5, 0.5])})
    np.testing.assert_array_equal(kept.score, plain.score)
    # A trusted track (at or above image_evidence_below) is not checked.
    trusted = segmenter.segment(image, boxes, {**prompts, "track_score": np.array([0.8, 0.5])})
    assert np.isnan(trusted.image_score[0])
    assert trusted.image_score[1] == pytest.approx(checked.image_score[1], abs=1e-6)
    # Nor is one the visibility filter rejects on its score (below image_evidence_from).
    floor = GeometricSegmenter(GeometricConfig(image_evidence_from=0.4))
    rejected = floor.segment(image, boxes, {**prompts, "track_score": np.array([0.5, 0.3])})
    assert np.isnan(rejected.image_score[1]) and rejected.score[1] == plain.score[1]
    assert rejected.image_score[0] == checked.image_score[0]
    # Nor one the caller skips (a view the visibility filter rejects before any mask): the
    # other object's evidence is the same as when both are measured.
    skipped = segmenter.segment(
        image, boxes,
        {**prompts, "track_score": np.array([0.5, 0.5]), "image_evidence_skip": [True, False]},
    )  # fmt: skip
    assert np.isnan(skipped.image_score[0]) and skipped.score[0] == plain.score[0]
    assert skipped.image_score[1] == checked.image_score[1]
    np.testing.assert_array_equal(skipped.masks, plain.masks)
    with pytest.raises(ValueError, match=r"track_score'\] has 1 values for 2 boxes"):
        segmenter.segment(image, boxes, {**prompts, "track_score": np.array([0.5])})
    with pytest.raises(ValueError, match=r"image_evidence_skip'\] has 1 values for 2 boxes"):
        segmenter.segment(
            image, boxes,
            {**prompts, "track_score": np.array([0.5, 0.5]), "image_evidence_skip": [True]},
        )  # fmt: skip


def test_run_measures_image_evidence_only_for_tracks_the_filter_may_keep():
    from autolabel.config import PipelineConfig
    from autolabel.stages import Models

    config = PipelineConfig(segmenter="geometric")
    assert config.visibility.min_track_score == 0.4
    assert Models(config).segmenter().config.image_evidence_from == 0.4
    given = PipelineConfig(segmenter="geometric", segmenter_options={"image_evidence_from": 0.0})
    assert Models(given).segmenter().config.image_evidence_from == 0.0
    # The seed-free evidence cuts are skipped by the run's own thresholds.
    seg_config = Models(config).segmenter().config
    assert seg_config.evidence_decided_above == config.visibility.min_image_score == 0.7
    assert seg_config.evidence_score_full == config.qa.confidence.mask_score_full == 0.8
    every = PipelineConfig(segmenter="geometric", segmenter_options={"evidence_decided_above": 0.0})
    assert Models(every).segmenter().config.evidence_decided_above == 0.0


def _reference_geometry(hulls, depth, near, lidar_min, margin_m, width_px, height_px):
    """image_geometry's masks and counts by whole-image NumPy arrays: hull masks from
    ``convex_polygon_mask``, a far-to-near owner map, and the nearest-return map given."""
    from autolabel.segmentation.geometry import convex_polygon_mask

    n = len(hulls)
    hull = np.zeros((n, height_px, width_px), bool)
    for i, polygon in enumerate(hulls):
        if len(polygon) >= 3:
            hull[i] = convex_polygon_mask(polygon, (0, 0, width_px, height_px))
    owner = np.full((height_px, width_px), -1)
    for i in sorted(range(n), key=lambda i: (-depth[i], -i)):  # far first; ties: low last
        owner[hull[i]] = i
    covered = hull & np.isfinite(lidar_min)[None]
    occluded = covered & (lidar_min[None] < (near - margin_m).astype(np.float32)[:, None, None])
    geometric = hull & ~occluded & ((owner[None] == np.arange(n)[:, None, None]) | covered)
    counts = [hull, hull & (owner[None] == np.arange(n)[:, None, None]), covered, occluded]
    return geometric, [c.sum(axis=(1, 2)) for c in [*counts, geometric]]


def test_lidar_min_depth_is_the_nearest_return_in_each_pixels_square():
    """The splatted and eroded depth map against a brute-force minimum over the returns whose
    pixel lies within the square of half-width radius_px (returns sharing pixels, equal depths,
    returns outside the crop but within the radius, and beyond it)."""
    from autolabel.segmentation.geometry import _lidar_min_depth

    rng = np.random.default_rng(11)
    width_px, height_px = 40, 30
    for trial in range(20):
        n = int(rng.integers(0, 60))
        uv = rng.uniform(0, [width_px, height_px], (n, 2))
        if trial % 2:
            uv = np.floor(uv / 4) * 4 + 0.5  # many returns on the same pixels
        depth = rng.choice([3.0, 5.0, 5.0, 7.5], n) if trial % 3 else rng.uniform(1, 9, n)
        scene = np.c_[uv, depth].astype(np.float32)
        radius = int(rng.integers(0, 4))
        region = (5, 4, 31, 22)
        got = _lidar_min_depth(scene, region, radius, (width_px, height_px))
        expected = np.full((region[3] - region[1], region[2] - region[0]), np.inf, np.float32)
        for (u, v), d in zip(scene[:, :2].astype(int), scene[:, 2], strict=True):
            rows = slice(max(v - radius, region[1]), max(min(v + radius + 1, region[3]), 0))
            cols = slice(max(u - radius, region[0]), max(min(u + radius + 1, region[2]), 0))
            rows = slice(rows.start - region[1], max(rows.stop - region[1], 0))
            cols = slice(cols.start - region[0], max(cols.stop - region[0], 0))
            if rows.start < rows.stop and cols.start < cols.stop:
                expected[rows, cols] = np.minimum(expected[rows, cols], d)
        np.testing.assert_array_equal(got, expected)


def test_image_geometry_equals_whole_image_painting_on_random_hulls():
    """The kernel's hull pixels are convex_polygon_mask's (vertices on pixel centres and edges
    included), its z-buffer and LiDAR tests those of whole-image arrays."""
    from autolabel.segmentation.geometry import _lidar_min_depth, image_geometry

    rng = np.random.default_rng(5)
    width_px, height_px = 120, 80
    for trial in range(60):
        n = int(rng.integers(1, 6))
        hulls = []
        for _ in range(n):
            centre = rng.uniform([-10, -10], [width_px + 10, height_px + 10])
            angles = np.sort(rng.uniform(0, 2 * np.pi, int(rng.integers(3, 8))))
            radius = rng.uniform(2, 40, (1, 2))
            points = centre + radius * np.c_[np.cos(angles), np.sin(angles)]
            if trial % 3 == 0:
                points = np.round(points * 2) / 2  # vertices on pixel centres and edges
            points = cv2.convexHull(points.astype(np.float32)).reshape(-1, 2)
            hulls.append(np.clip(points, 0, [width_px, height_px]).astype(np.float32))
        depth = rng.integers(5, 9, n).astype(float)  # equal depths happen
        near = depth - rng.uniform(0, 1, n)
        scene = np.c_[
            rng.uniform(0, width_px, 60), rng.uniform(0, height_px, 60), rng.uniform(3, 10, 60)
        ].astype(np.float32)
        g = image_geometry(hulls, depth, near, scene, (width_px, height_px), 2, 0.5)
        lidar = _lidar_min_depth(scene, (0, 0, width_px, height_px), 2, (width_px, height_px))
        masks, counts = _reference_geometry(hulls, depth, near, lidar, 0.5, width_px, height_px)
        np.testing.assert_array_equal(g.masks, masks)
        for name, expected in zip(
            ("hull_px", "zbuffered_px", "lidar_covered_px", "lidar_occluded_px", "geometric_px"),
            counts,
            strict=True,
        ):
            np.testing.assert_array_equal(getattr(g, name), expected, err_msg=name)
        assert g.masks[0].T.flags.c_contiguous  # column-major, for COCO RLE


def test_geometric_segmenter_reads_no_pixel_when_nothing_is_refined_or_checked(
    ellipse_scene, tmp_path
):
    """reads_image says whether segment looks at the image: without refinement or evidence the
    result is the same on any image, so the run checks the file's header instead of decoding."""
    from autolabel.segmentation.geometric import GeometricSegmenter
    from autolabel.segmentation.geometry import image_geometry
    from autolabel.stages import InputImageError, check_image_file, read_image_bgr

    image, truth, box = ellipse_scene
    g = image_geometry(
        [rect_polygon(*box)], np.array([10.0]), np.array([9.0]), np.zeros((0, 3), np.float32),
        (WIDTH, HEIGHT), 1, 0.5,
    )  # fmt: skip
    seeds = {"points_uv": [seeds_in(truth, step=9)], "geometry": g}
    segmenter = GeometricSegmenter()
    assert segmenter.reads_image(1, seeds)  # the mask is refined
    assert segmenter.reads_image(1, {**seeds, "refine_skip": [True], "track_score": [0.5]})
    idle = {**seeds, "refine_skip": [True], "track_score": [0.9]}
    assert not segmenter.reads_image(1, idle)
    blank = np.zeros_like(image)
    a, b = segmenter.segment(image, box[None], idle), segmenter.segment(blank, box[None], idle)
    np.testing.assert_array_equal(a.masks, b.masks)
    np.testing.assert_array_equal(a.score, b.score)

    # The header check raises what decoding raises.
    good = tmp_path / "good.jpg"
    cv2.imwrite(str(good), image)
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"not an image at all")
    for path, size, error in (
        (tmp_path / "missing.jpg", (WIDTH, HEIGHT), FileNotFoundError),
        (bad, (WIDTH, HEIGHT), InputImageError),
        (good, (WIDTH + 1, HEIGHT), ValueError),
    ):
        with pytest.raises(error) as decoded:
            read_image_bgr(path, *size)
        with pytest.raises(error) as checked:
            check_image_file(path, *size)
        assert str(checked.value) == str(decoded.value)
    check_image_file(good, WIDTH, HEIGHT)
