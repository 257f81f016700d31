"""Visibility filter: each rule rejects exactly its own case; RLE and arrays agree; summaries."""

from __future__ import annotations

import numpy as np
import pytest
from pycocotools import mask as mask_utils

from autolabel.masks import box_masks, mask_boxes_2d, masks_to_array
from autolabel.visibility import (
    RULE_ORDER,
    VisibilityConfig,
    VisibilityRule,
    evaluate_visibility,
    rejected_without_mask,
    summarize,
)

W, H = 640, 240


def rect_mask(u0, v0, u1, v1):
    m = np.zeros((H, W), bool)
    m[v0:v1, u0:u1] = True
    return m


def scene():
    """Objects that each fail exactly one rule (by name), plus two that pass.

    Every object's mask equals its projected box (IoU 1, coverage 1) unless the case says so;
    scores 0.95, 50 LiDAR points, depths 10 m, boxes inside the image and apart.
    """
    cases = {}
    # name: (projected box, mask, score, lidar points, depth)
    cases["pass"] = ([10, 10, 60, 60], rect_mask(10, 10, 60, 60), 0.95, 50, 10.0)
    # 100 x 60 box of which 40 columns are in the image: 40 % inside < 50 %.
    cases["IN_IMAGE"] = ([-60, 80, 40, 140], rect_mask(0, 80, 40, 140), 0.95, 50, 10.0)
    cases["LIDAR_POINTS"] = ([70, 10, 120, 60], rect_mask(70, 10, 120, 60), 0.95, 2, 10.0)
    cases["MASK_SCORE"] = ([130, 10, 180, 60], rect_mask(130, 10, 180, 60), 0.5, 50, 10.0)
    # 100 x 100 box around a 40 x 40 mask: IoU 0.16, coverage 1.
    cases["BOX_IOU"] = ([190, 10, 290, 110], rect_mask(200, 20, 240, 60), 0.95, 50, 10.0)
    # 50 x 50 mask shifted 15 px right of its box: IoU 1750/3250 = 0.54, coverage 0.7.
    cases["COVERAGE"] = ([300, 10, 350, 60], rect_mask(315, 10, 365, 60), 0.95, 50, 10.0)
    # 40 x 40 object 30 m away, 25 of its 40 columns hidden by a nearer 50 x 60 one that passes.
    cases["VISIBLE_PIXELS"] = ([400, 20, 440, 60], rect_mask(400, 20, 440, 60), 0.95, 50, 30.0)
    cases["pass_occluder"] = ([375, 10, 425, 70], rect_mask(375, 10, 425, 70), 0.95, 50, 8.0)
    # A small unoccluded object: 30 x 30 = 900 px < 1200.
    cases["VISIBLE_PIXELS_small"] = (
        [500, 10, 530, 40],
        rect_mask(500, 10, 530, 40),
        0.95,
        50,
        10.0,
    )
    names = list(cases)
    boxes = np.array([cases[k][0] for k in names], dtype=float)
    masks = np.stack([cases[k][1] for k in names])
    score = np.array([cases[k][2] for k in names])
    points = np.array([cases[k][3] for k in names])
    depth = np.array([cases[k][4] for k in names])
    return names, boxes, masks, score, points, depth


def test_each_rule_rejects_exactly_its_own_object():
    names, boxes, masks, score, points, depth = scene()
    decision = evaluate_visibility(boxes, masks, score, depth, (W, H), lidar_points=points)
    for i, name in enumerate(names):
        if name.startswith("pass"):
            assert decision.keep[i], (name, decision.failed_rule_names(i))
            assert decision.failed_rules[i] == 0 and decision.first_failed_rule[i] == 0
            continue
        rule = VisibilityRule[name.removesuffix("_small")]
        assert not decision.keep[i], name
        assert decision.failed_rule_names(i) == [rule.name], name
        assert decision.failed_rules[i] == rule.value
        assert decision.first_failed_rule[i] == rule.value


def test_measured_values():
    names, boxes, masks, score, points, depth = scene()
    d = evaluate_visibility(boxes, masks, score, depth, (W, H), lidar_points=points)
    at = {name: i for i, name in enumerate(names)}
    assert d.in_image_fraction[at["IN_IMAGE"]] == pytest.approx(0.4)
    assert d.box_iou[at["IN_IMAGE"]] == pytest.approx(1.0)  # against the clipped box
    assert d.box_iou[at["BOX_IOU"]] == pytest.approx(1600 / 10000)
    assert d.coverage[at["BOX_IOU"]] == pytest.approx(1.0)
    assert d.box_iou[at["COVERAGE"]] == pytest.approx(1750 / 3250)
    assert d.coverage[at["COVERAGE"]] == pytest.approx(0.7)
    assert d.mask_px[at["VISIBLE_PIXELS"]] == 1600
    assert d.visible_px[at["VISIBLE_PIXELS"]] == 15 * 40
    assert d.visible_px[at["pass_occluder"]] == 3000
    np.testing.assert_array_equal(d.mask_box_2d[at["COVERAGE"]], [315, 10, 365, 60])


def test_rle_masks_give_the_same_decision():
    names, boxes, masks, score, points, depth = scene()
    encoded = mask_utils.encode(np.asfortranarray(masks.transpose(1, 2, 0).astype(np.uint8)))
    # Mixed forms: str counts (as the segmenter writes them), bytes counts, a bool array.
    rles = [{"size": r["size"], "counts": r["counts"].decode("ascii")} for r in encoded]
    rles[1] = encoded[1]
    rles[2] = masks[2]
    a = evaluate_visibility(boxes, masks, score, depth, (W, H), lidar_points=points)
    b = evaluate_visibility(boxes, rles, score, depth, (W, H), lidar_points=points)
    for field in ("keep", "failed_rules", "box_iou", "coverage", "visible_px", "mask_px"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)


def test_several_failures_record_the_first_and_all():
    box = np.array([[10.0, 10.0, 110.0, 110.0]])
    mask = rect_mask(20, 20, 40, 40)[None]  # 400 px, IoU 0.04
    d = evaluate_visibility(box, mask, [0.1], [5.0], (W, H), lidar_points=[0])
    assert d.first_failed_rule[0] == VisibilityRule.LIDAR_POINTS
    assert d.failed_rule_names(0) == ["LIDAR_POINTS", "MASK_SCORE", "BOX_IOU", "VISIBLE_PIXELS"]
    s = summarize(d)
    assert s["rejected_by_first_rule"]["LIDAR_POINTS"] == 1
    assert s["failed_by_rule"]["BOX_IOU"] == 1 and s["failed_by_rule"]["COVERAGE"] == 0


def test_summary_counts_every_rule():
    names, boxes, masks, score, points, depth = scene()
    d = evaluate_visibility(boxes, masks, score, depth, (W, H), lidar_points=points)
    s = summarize(d)
    assert s["candidates"] == len(names) and s["kept"] == 2 and s["rejected"] == len(names) - 2
    assert list(s["rejected_by_first_rule"]) == [r.name for r in RULE_ORDER]
    assert s["rejected_by_first_rule"] == {
        "IMAGE": 0,
        "IN_IMAGE": 1,
        "LIDAR_POINTS": 1,
        "TRACK_SCORE": 0,
        "IMAGE_EVIDENCE": 0,
        "MASK_SCORE": 1,
        "BOX_IOU": 1,
        "COVERAGE": 1,
        "VISIBLE_PIXELS": 2,
        "HULL_OCCLUDED": 0,
        "LIDAR_OCCLUDED": 0,
    }


def test_occlusion_and_image_rules_reject_their_own_object():
    # Four passing 50 x 50 objects side by side; each new rule gets one failing measurement.
    boxes = np.array([[10.0 + 60 * k, 10.0, 60.0 + 60 * k, 60.0] for k in range(5)])
    masks = np.stack([rect_mask(*(int(x) for x in b)) for b in boxes])
    hull = np.array([0.1, 0.61, 0.0, 0.0, 0.6])  # 0.61 > 0.6; 0.6 is not > 0.6
    lidar = np.array([np.nan, 0.0, 0.51, 0.2, np.nan])  # NaN: no LiDAR evidence, skipped
    readable = np.array([True, True, True, False, True])
    d = evaluate_visibility(
        boxes, masks, np.full(5, 0.95), np.full(5, 10.0), (W, H), np.full(5, 50),
        config=VisibilityConfig(min_visible_px=100, max_hull_occluded_share=0.6,
                                max_lidar_occluded_share=0.5),
        hull_occluded_share=hull, lidar_occluded_share=lidar, image_readable=readable,
    )  # fmt: skip
    assert [d.failed_rule_names(i) for i in range(5)] == [
        [],
        ["HULL_OCCLUDED"],
        ["LIDAR_OCCLUDED"],
        ["IMAGE"],
        [],
    ]
    assert d.first_failed_rule[3] == VisibilityRule.IMAGE  # checked first
    np.testing.assert_array_equal(d.hull_occluded_share, hull)
    assert np.isnan(d.lidar_occluded_share[0]) and d.image_readable.tolist() == readable.tolist()


def test_rejected_without_mask_is_the_mask_free_rules_of_the_filter():
    # The scene's objects by hand: IN_IMAGE (40 % of the box inside) and LIDAR_POINTS (2 < 5)
    # fail without a mask; the mask rules (MASK_SCORE, BOX_IOU, ...) cannot be known before one.
    names, boxes, masks, score, points, depth = scene()
    n = len(names)
    hull = np.full(n, 0.1)
    hull[names.index("pass_occluder")] = 0.95  # > 0.9
    lidar = np.full(n, np.nan)  # no LiDAR evidence: the rule never fails
    lidar[names.index("MASK_SCORE")] = 0.71  # > 0.7
    lidar[names.index("BOX_IOU")] = 0.7  # not > 0.7
    before = rejected_without_mask(boxes, (W, H), points, hull, lidar)
    expected = {"IN_IMAGE", "LIDAR_POINTS", "pass_occluder", "MASK_SCORE"}
    assert [names[i] for i in np.flatnonzero(before)] == [k for k in names if k in expected]
    # Each such view is one the filter rejects, whatever its mask and score.
    d = evaluate_visibility(
        boxes, masks, np.ones(n), depth, (W, H), lidar_points=points,
        hull_occluded_share=hull, lidar_occluded_share=lidar,
    )  # fmt: skip
    assert not d.keep[before].any()
    mask_free = (
        VisibilityRule.IN_IMAGE | VisibilityRule.LIDAR_POINTS | VisibilityRule.HULL_OCCLUDED
        | VisibilityRule.LIDAR_OCCLUDED
    )  # fmt: skip
    np.testing.assert_array_equal(before, (d.failed_rules & mask_free) > 0)
    relaxed = VisibilityConfig(min_in_image_fraction=0.4, min_lidar_points=2)
    assert not rejected_without_mask(boxes, (W, H), points, np.zeros(n), np.zeros(n), relaxed).any()


def test_track_score_rule_rejects_untrusted_tracks_only():
    # Four passing 50 x 50 objects; only their track scores differ.
    boxes = np.array([[10.0 + 60 * k, 10.0, 60.0 + 60 * k, 60.0] for k in range(4)])
    masks = np.stack([rect_mask(*(int(x) for x in b)) for b in boxes])
    track = np.array([0.9, 0.3, 0.5, np.nan])  # 0.5 reaches 0.5; NaN: no score, skipped
    args = (boxes, masks, np.full(4, 0.95), np.full(4, 10.0), (W, H), np.full(4, 50))
    cfg = VisibilityConfig(min_visible_px=100, min_track_score=0.5)
    d = evaluate_visibility(*args, config=cfg, track_score=track)
    assert [d.failed_rule_names(i) for i in range(4)] == [[], ["TRACK_SCORE"], [], []]
    np.testing.assert_array_equal(d.track_score, track)
    # Without scores (or with the default threshold 0) the rule never fails.
    assert evaluate_visibility(*args, config=cfg).keep.all()
    assert evaluate_visibility(
        *args, config=VisibilityConfig(min_visible_px=100), track_score=track
    ).keep.all()


def test_image_evidence_rule_judges_the_track_by_its_supporting_views():
    from autolabel.visibility import track_image_support

    # Track 7: 1 of 4 measured views above 0.7 (0.7 itself is not above); track 8: 0 of 2;
    # track 9: nothing measured (a trusted track), so its rule is skipped.
    track = np.array([7, 7, 7, 7, 8, 8, 9])
    score = np.array([0.9, 0.7, 0.2, 0.5, 0.6, 0.1, np.nan])
    support = track_image_support(track, score, 0.7)
    np.testing.assert_allclose(support[:6], [0.25] * 4 + [0.0] * 2)
    assert np.isnan(support[6])
    boxes = np.array([[10.0 + 60 * k, 10.0, 60.0 + 60 * k, 60.0] for k in range(7)])
    masks = np.stack([rect_mask(*(int(x) for x in b)) for b in boxes])
    d = evaluate_visibility(
        boxes, masks, np.full(7, 0.95), np.full(7, 10.0), (W, H), np.full(7, 50),
        config=VisibilityConfig(min_visible_px=100, min_image_support=0.25),
        image_support=support,
    )  # fmt: skip
    # Every view of track 7 is kept, the weak ones too; track 8 loses both.
    assert d.keep.tolist() == [True] * 4 + [False] * 2 + [True]
    assert d.failed_rule_names(4) == ["IMAGE_EVIDENCE"]
    np.testing.assert_array_equal(d.image_support, support)


def test_image_evidence_skips_tracks_dense_in_lidar_returns():
    from autolabel.visibility import dense_track_views, track_image_support

    # Track 7: views of 120, 80, 150 points (median 120 >= 100): dense. Track 8: 90 and 130
    # (median 110): dense. Track 9: 3, 250, 4, 5 (median 4.5): not. Track 10: 500: dense.
    track = np.array([7, 7, 7, 8, 8, 9, 9, 9, 9, 10])
    points = np.array([120, 80, 150, 90, 130, 3, 250, 4, 5, 500])
    dense = dense_track_views(track, points, 100)
    assert dense.tolist() == [True] * 5 + [False] * 4 + [True]
    assert not dense_track_views(track, points, 0).any()
    # Only eligible views (their class may be judged by the LiDAR): track 8's are not.
    eligible = np.array([True] * 3 + [False] * 2 + [True] * 5)
    assert dense_track_views(track, points, 100, eligible).tolist() == (
        [True] * 3 + [False] * 6 + [True]
    )
    # A median of exactly 100 is dense (at least max_points).
    assert dense_track_views(np.array([1, 1]), np.array([50, 150]), 100).all()
    # Judged by the LiDAR: no support (NaN, the rule skipped), whatever the image said; track 9:
    # 1 of its 4 measured views above 0.7; track 8 (not eligible): 0 of 2.
    score = np.array([0.1, 0.2, 0.3, 0.0, 0.6, 0.9, 0.1, 0.2, 0.3, np.nan])
    support = track_image_support(
        track, score, 0.7, dense_track_views(track, points, 100, eligible)
    )
    assert np.isnan(support[:3]).all() and np.isnan(support[9])
    np.testing.assert_allclose(support[3:9], [0, 0, 0.25, 0.25, 0.25, 0.25])
    np.testing.assert_allclose(track_image_support(track, score, 0.7)[:5], 0.0)
    # At least 3 measured views to judge a track: tracks 7 (3 views) and 9 (4) are judged, 8 (2)
    # and 10 (none) are not.
    few = track_image_support(track, score, 0.7, min_views=3)
    np.testing.assert_allclose(few[[0, 1, 2, 5, 6, 7, 8]], [0, 0, 0, 0.25, 0.25, 0.25, 0.25])
    assert np.isnan(few[[3, 4, 9]]).all()
    with pytest.raises(ValueError, match="image_evidence_max_points"):
        VisibilityConfig(image_evidence_max_points=-1)
    with pytest.raises(ValueError, match="image_evidence_lidar_classes"):
        VisibilityConfig(image_evidence_lidar_classes=("sedan",))
    assert VisibilityConfig(image_evidence_lidar_classes=["car"]).image_evidence_lidar_classes == (
        "car",
    )


def test_in_image_rule_passes_on_the_volume_share():
    # The IN_IMAGE case of ``scene``: 40 % of its 2D box inside. A caller that measured 70 % of
    # its volume in view (``CameraViews.volume_in_image``) keeps it; 55 % (< 0.6) does not, and
    # an unmeasured (NaN) share leaves the 2D box's share to decide.
    boxes = np.array([[-60.0, 80.0, 40.0, 140.0], [10.0, 10.0, 60.0, 60.0]])
    masks = np.stack([rect_mask(0, 80, 40, 140), rect_mask(10, 10, 60, 60)])
    args = (boxes, masks, np.full(2, 0.95), np.full(2, 10.0), (W, H), np.full(2, 50))
    assert VisibilityConfig().min_in_image_volume == 0.6
    assert evaluate_visibility(*args).failed_rule_names(0) == ["IN_IMAGE"]
    d = evaluate_visibility(*args, volume_in_image=[0.7, 0.1])
    assert d.keep.tolist() == [True, True]  # the second passes on its 2D box (100 %)
    np.testing.assert_allclose(d.in_image_fraction, [0.4, 1.0])
    np.testing.assert_allclose(d.volume_in_image, [0.7, 0.1])
    for volume in ([0.55, 1.0], [np.nan, 1.0]):
        assert evaluate_visibility(*args, volume_in_image=volume).keep.tolist() == [False, True]
    shares = (np.zeros(2), np.zeros(2))
    assert rejected_without_mask(boxes, (W, H), np.full(2, 50), *shares).tolist() == [True, False]
    assert not rejected_without_mask(
        boxes, (W, H), np.full(2, 50), *shares, volume_in_image=[0.7, 0.0]
    ).any()
    with pytest.raises(ValueError, match="volume_in_image has 1 entries"):
        evaluate_visibility(*args, volume_in_image=[0.7])
    with pytest.raises(ValueError, match="min_in_image_volume"):
        VisibilityConfig(min_in_image_volume=1.5)


def test_untrusted_tracks_hide_nothing():
    from autolabel.segmentation.geometry import image_geometry
    from autolabel.visibility import mask_statistics, occluder_depth

    depth = occluder_depth([5.0, 6.0, 7.0], [0.3, np.nan, 0.5], 0.4)
    np.testing.assert_array_equal(depth, [np.inf, 6.0, 7.0])
    np.testing.assert_array_equal(occluder_depth([5.0], None, 0.4), [5.0])
    # A 40 x 40 object at 10 m behind a 20 x 40 one at 5 m over its left half: 800 of its 1,600
    # pixels left when the nearer one is trusted, all 1,600 when its track fails TRACK_SCORE
    # (the nearer one then keeps only what the farther one does not cover: 0 of its 800).
    masks = np.stack([rect_mask(100, 10, 120, 50), rect_mask(100, 10, 140, 50)])
    boxes = np.array([[100.0, 10.0, 120.0, 50.0], [100.0, 10.0, 140.0, 50.0]])
    trusted = mask_statistics(boxes, masks, [5.0, 10.0], (W, H))
    untrusted = mask_statistics(boxes, masks, occluder_depth([5.0, 10.0], [0.2, 0.9], 0.4), (W, H))
    assert trusted.visible_px_mask.tolist() == [800, 800]
    assert untrusted.visible_px_mask.tolist() == [0, 1600]
    assert untrusted.visible_px_box.tolist() == [0, 1600]
    # The hull z-buffer of the segment stage: the same two as hulls, no LiDAR return.
    hulls = [np.array([[100, 10], [120, 10], [120, 50], [100, 50]], float),
             np.array([[100, 10], [140, 10], [140, 50], [100, 50]], float)]  # fmt: skip
    args = (np.array([4.0, 9.0]), np.zeros((0, 3)), (W, H), 2, 0.5)
    seen = image_geometry(hulls, [5.0, 10.0], *args)
    np.testing.assert_allclose(seen.hull_occluded_share, [0.0, 0.5])
    ghost = image_geometry(hulls, occluder_depth([5.0, 10.0], [0.2, 0.9], 0.4), *args)
    np.testing.assert_allclose(ghost.hull_occluded_share, [1.0, 0.0])


def test_segmenter_defaults_and_overrides():
    from autolabel.config import PipelineConfig
    from autolabel.visibility import visibility_defaults

    assert visibility_defaults("sam2") == VisibilityConfig()  # STRIDE-QA thresholds
    assert VisibilityConfig().min_mask_score == 0.8 and VisibilityConfig().min_box_iou == 0.3
    geometric = visibility_defaults("geometric")
    assert geometric.min_mask_score < 0.8
    # Only the geometric segmenter checks track scores and image evidence (its presence comes
    # from geometry, which a detector's false positive has too).
    assert geometric.min_track_score > 0 and geometric.min_image_support > 0
    assert VisibilityConfig().min_track_score == 0 and VisibilityConfig().min_image_support == 0
    cfg = PipelineConfig(segmenter="geometric", visibility={"min_box_iou": 0.4})
    assert cfg.visibility.min_box_iou == 0.4
    assert cfg.visibility.min_mask_score == geometric.min_mask_score
    assert PipelineConfig(segmenter="lidar").visibility.min_mask_score == 0.8
    # The weightless geometric segmenter is the default of both the library and the pipeline, and
    # the pipeline's default thresholds are its own (not STRIDE-QA's, which fit a predicted IoU).
    from autolabel.segmentation import DEFAULT_SEGMENTER

    assert PipelineConfig().segmenter == DEFAULT_SEGMENTER == "geometric"
    assert PipelineConfig().visibility == geometric
    with pytest.raises(ValueError, match="visibility: unknown key 'min_iou'"):
        PipelineConfig(visibility={"min_iou": 0.4})


def test_objects_in_different_images_do_not_occlude():
    names, boxes, masks, score, points, depth = scene()
    at = names.index("VISIBLE_PIXELS")
    image_id = np.zeros(len(names), int)
    image_id[names.index("pass_occluder")] = 1
    d = evaluate_visibility(boxes, masks, score, depth, (W, H), points, image_id=image_id)
    assert d.keep[at] and d.visible_px[at] == 1600


def test_box_zbuffer_and_no_lidar_rule():
    # Box-only candidates (no masks from a segmenter): masks are the boxes themselves.
    boxes = np.array([[100.0, 50.0, 200.0, 150.0], [150.0, 50.0, 250.0, 150.0]])
    masks = box_masks(boxes, H, W)
    cfg = VisibilityConfig(zbuffer_with="box", min_visible_px=6000)
    d = evaluate_visibility(boxes, masks, [0.9, 0.9], [20.0, 10.0], (W, H), config=cfg)
    # The far box loses its right half (50 of 100 columns) to the near one.
    np.testing.assert_array_equal(d.visible_px, [5000, 10000])
    np.testing.assert_array_equal(d.keep, [False, True])
    assert d.lidar_points[0] == -1  # no points given: rule skipped


def test_box_behind_camera_fails_in_image():
    boxes = np.array([[np.nan] * 4])
    d = evaluate_visibility(boxes, [None], [0.99], [3.0], (W, H), lidar_points=[100])
    assert d.first_failed_rule[0] == VisibilityRule.IN_IMAGE
    assert d.mask_px[0] == 0 and np.isnan(d.mask_box_2d[0]).all()


def test_thresholds_are_strict_where_the_paper_says_greater():
    box = np.array([[0.0, 0.0, 50.0, 50.0]])
    mask = rect_mask(0, 0, 50, 50)[None]
    at_threshold = VisibilityConfig(min_mask_score=0.5, min_visible_px=2500, min_lidar_points=5)
    d = evaluate_visibility(box, mask, [0.5], [1.0], (W, H), [5], config=at_threshold)
    assert d.failed_rule_names(0) == ["MASK_SCORE"]  # 0.5 is not > 0.5; 2500 >= 2500; 5 >= 5


def test_config_errors_name_the_key():
    with pytest.raises(ValueError, match="min_box_iou"):
        VisibilityConfig(min_box_iou=1.5)
    with pytest.raises(ValueError, match="min_visible_px"):
        VisibilityConfig(min_visible_px=-1)
    with pytest.raises(ValueError, match="zbuffer_with"):
        VisibilityConfig(zbuffer_with="depth")


def test_bad_masks_name_the_entry():
    boxes = np.array([[0.0, 0.0, 10.0, 10.0]] * 2)
    with pytest.raises(ValueError, match=r"masks of image 0\[1\]: RLE size"):
        evaluate_visibility(
            boxes, [None, {"size": [10, 10], "counts": "0"}], [0.9, 0.9], [1.0, 2.0], (W, H)
        )
    with pytest.raises(ValueError, match="2 boxes but 1 masks"):
        evaluate_visibility(boxes, [None], [0.9, 0.9], [1.0, 2.0], (W, H))


def test_mask_helpers():
    m = np.zeros((2, 5, 7), bool)
    m[0, 1:3, 2:6] = True
    np.testing.assert_array_equal(mask_boxes_2d(m)[0], [2, 1, 6, 3])
    assert np.isnan(mask_boxes_2d(m)[1]).all()
    np.testing.assert_array_equal(box_masks(np.array([[2.0, 1.0, 6.0, 3.0]]), 5, 7)[0], m[0])
    rle = mask_utils.encode(np.asfortranarray(m[0].astype(np.uint8)))
    np.testing.assert_array_equal(masks_to_array([rle, None], 5, 7), m)


def test_mask_statistics_from_rle_boxes_equal_the_scan():
    """Tight boxes read from the masks' runs give the statistics of a scan of every mask."""
    from autolabel.segmentation.rle import encode_masks, rle_area_px, rle_box_2d
    from autolabel.visibility import mask_statistics

    rng = np.random.default_rng(3)
    height_px, width_px = 90, 130  # neither a multiple of 8: the scan's byte path
    # Column-major per mask, as the geometric segmenter stores them.
    masks = np.zeros((5, width_px, height_px), bool).transpose(0, 2, 1)
    masks[0, 10:40, 20:70] = rng.random((30, 50)) < 0.6
    masks[1, 0:1, 129:130] = True  # one corner pixel
    masks[2, 30:89, 0:5] = True
    masks[3, 5:6, 60:61] = True
    # masks[4] stays empty
    boxes = np.array([[15, 5, 80, 45], [120, -5, 140, 3], [-10, 25, 8, 95], [50, 0, 70, 10],
                      [np.nan] * 4])  # fmt: skip
    depth = np.array([10.0, 5.0, 7.0, 3.0, 9.0])
    rles = encode_masks(masks)
    tight = rle_box_2d(rles)
    tight[rle_area_px(rles) == 0] = np.nan
    np.testing.assert_array_equal(tight, mask_boxes_2d(masks))  # NaN rows compare equal
    np.testing.assert_array_equal(tight[1], [129, 0, 130, 1])
    scanned = mask_statistics(boxes, masks, depth, (width_px, height_px))
    given = mask_statistics(boxes, masks, depth, (width_px, height_px), tight)
    for name in vars(scanned):
        np.testing.assert_array_equal(getattr(given, name), getattr(scanned, name), err_msg=name)


def test_mask_statistics_match_a_painter_on_full_images():
    """The one-pass counts equal full-image NumPy counts: pixels, pixels in the clipped box,
    and pixels left after painting far to near (equal depths: the lower index on top), for
    row- and column-major masks."""
    from autolabel.visibility import mask_statistics

    rng = np.random.default_rng(11)
    height_px, width_px = 70, 110
    for trial in range(40):
        n = int(rng.integers(1, 7))
        masks = np.zeros((n, height_px, width_px), bool)
        for i in range(n):
            u0, v0 = rng.integers(0, width_px - 1), rng.integers(0, height_px - 1)
            masks[i, v0 : v0 + rng.integers(1, 50), u0 : u0 + rng.integers(1, 70)] = True
            masks[i] &= rng.random((height_px, width_px)) < 0.85
        if trial % 2:
            masks = np.ascontiguousarray(masks.transpose(0, 2, 1)).transpose(0, 2, 1)
        corner = rng.uniform(-15, [width_px, height_px], (n, 2))
        boxes = np.c_[corner, corner + rng.uniform(1, 60, (n, 2))]
        depth = rng.integers(1, 4, n).astype(float)  # many equal depths
        stats = mask_statistics(boxes, masks, depth, (width_px, height_px))
        owner = np.full((height_px, width_px), -1)
        for i in sorted(range(n), key=lambda i: (-depth[i], -i)):  # far first; ties: low last
            owner[masks[i]] = i
        v, u = np.mgrid[:height_px, :width_px] + 0.5  # pixel centres
        for i in range(n):
            in_box = (
                (u >= boxes[i, 0]) & (u <= boxes[i, 2]) & (v >= boxes[i, 1]) & (v <= boxes[i, 3])
            )
            assert stats.mask_px[i] == masks[i].sum()
            assert stats.in_box_px[i] == (masks[i] & in_box).sum()
            assert stats.visible_px_mask[i] == (owner == i).sum()


def test_box_zbuffer_counts_match_a_painter_and_the_pixel_kernel():
    """The rectangle-arithmetic box z-buffer gives the per-pixel kernel's counts and a full-image
    painter's: each crop's pixels, those inside its ``inner`` crop, and those no nearer crop
    covers (equal depths: the lower index on top; empty crops paint nothing)."""
    from autolabel.visibility import _box_zbuffer_kernel, _zbuffer_kernel

    rng = np.random.default_rng(5)
    height_px, width_px = 60, 90
    for _ in range(200):
        n = int(rng.integers(1, 9))
        c0 = rng.integers(0, width_px, n)
        r0 = rng.integers(0, height_px, n)
        crops = np.c_[
            c0, r0, np.minimum(c0 + rng.integers(0, 60, n), width_px),
            np.minimum(r0 + rng.integers(0, 40, n), height_px),
        ].astype(np.int64)  # fmt: skip
        inner = np.sort(rng.integers(0, width_px, (n, 2)), axis=1)
        inner_rows = np.sort(rng.integers(0, height_px, (n, 2)), axis=1)
        inner = np.c_[inner[:, 0], inner_rows[:, 0], inner[:, 1], inner_rows[:, 1]].astype(np.int64)
        painted = (crops[:, 2] > crops[:, 0]) & (crops[:, 3] > crops[:, 1])
        if not painted.any():
            continue
        depth = rng.integers(1, 4, n).astype(float)
        order = np.lexsort((-np.arange(n), -depth))
        got = _box_zbuffer_kernel(crops, inner, painted, order)
        pixel = _zbuffer_kernel(np.zeros((0, 0, 0), bool), crops, inner, painted, order, False)
        owner = np.full((height_px, width_px), -1)
        for i in order:  # far to near
            owner[crops[i, 1] : crops[i, 3], crops[i, 0] : crops[i, 2]] = i
        for i in range(n):
            box = np.zeros((height_px, width_px), bool)
            box[crops[i, 1] : crops[i, 3], crops[i, 0] : crops[i, 2]] = True
            in_inner = np.zeros_like(box)
            in_inner[inner[i, 1] : inner[i, 3], inner[i, 0] : inner[i, 2]] = True
            assert got[0][i] == box.sum()
            assert got[1][i] == (box & in_inner).sum()
            assert got[2][i] == (owner == i).sum()
        for a, b in zip(got, pixel, strict=True):
            np.testing.assert_array_equal(a, b)
