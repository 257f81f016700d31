"""Plates behind a nearer vehicle are not blurred (issue 21): silhouettes worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from autolabel.anonymize.geometric import GeometricConfig, plate_and_head_regions
from autolabel.anonymize.occlusion import OcclusionConfig
from autolabel.boxes import Boxes3D
from autolabel.classes import CLASS_INDEX
from autolabel.sensors import CameraCalibration
from calib.se3 import SE3

# A camera at the ego origin, 1.5 m up, looking along ego +x (camera z = ego x).
CAMERA = CameraCalibration(
    "CAM_FRONT",
    np.array([[500.0, 0.0, 400.0], [0.0, 500.0, 300.0], [0.0, 0.0, 1.0]]),
    SE3(np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]]), np.array([0, 0, 1.5])),
    800,
    600,
)
# Rear plate centres 0.5 - 1.0 m high, a 0.5 x 0.1 m plate, no thickness and no uncertainty.
BARE = GeometricConfig(
    plate_sizes_m=((0.5, 0.1),), rear_plate_height_m=(0.5, 1.0), plate_depth_m=0.0, plate_recess_m=(0.0, 0.0),
    position_sigma_m=0.0, yaw_sigma_deg=0.0, time_sigma_s=0.0,
)  # fmt: skip


def _queue() -> Boxes3D:
    """Two 2 x 4 x 1.5 m cars heading +x on the optical axis, centres 10 m and 20 m ahead."""
    return Boxes3D(
        center_m=[[10.0, 0.0, 0.75], [20.0, 0.0, 0.75]],
        size_wlh_m=[[2.0, 4.0, 1.5]] * 2,
        yaw_rad=[0.0, 0.0],
        label=[CLASS_INDEX["car"]] * 2,
        track_id=[0, 1],
    )


def _plate_rows(regions) -> np.ndarray:
    """Image rows (v) spanned by each region."""
    return np.stack(
        [regions.polygon_px[..., 1].min(axis=1), regions.polygon_px[..., 1].max(axis=1)], 1
    )


def test_a_plate_wholly_behind_a_nearer_car_is_not_blurred():
    # Far car's rear plate patch: x = 18 m, z 0.45 .. 1.05 m, y -+0.25 m: v = 300 + 500 (1.5 - z)
    # / 18 = 312.5 .. 329.2, u = 400 -+ 6.9. The near car's body (inset 0.1 m: x 8.1 .. 11.9,
    # y -+0.9, z 0 .. 1.5) covers u 400 -+ 55.6, v 300 .. 392.6 from its nearest face, and its
    # farthest point (11.9 m) is nearer than 18 - 0.2 m: the far plate is hidden. The near car's
    # own plate (x = 8 m: v 328.1 .. 365.6) lies in front of its body: kept.
    cars = _queue()
    shown = plate_and_head_regions(cars, CAMERA, SE3.identity(), config=BARE)
    kept = plate_and_head_regions(
        cars, CAMERA, SE3.identity(), config=BARE, occlusion=OcclusionConfig()
    )
    assert len(shown) == 2 and len(kept) == 1
    assert np.allclose(_plate_rows(kept), [[300 + 500 * 0.45 / 8, 300 + 500 * 1.05 / 8]])
    far = shown[np.argmin(_plate_rows(shown)[:, 0])]
    assert np.allclose(_plate_rows(far), [[300 + 500 * 0.45 / 18, 300 + 500 * 1.05 / 18]])


def test_only_annotation_grade_boxes_hide_plates():
    # The near car as a run's box (extra margin): it may be a false positive, so it hides nothing.
    # The margin also grows its own patch, not the far car's.
    cars = _queue()
    regions = plate_and_head_regions(
        cars, CAMERA, SE3.identity(), config=BARE, extra_margin_m=[0.1, 0.0],
        occlusion=OcclusionConfig(),
    )  # fmt: skip
    assert len(regions) == 2


def test_a_plate_partly_beside_the_nearer_car_stays_blurred():
    # The far car 1.2 m to the left: its plate spans y 0.95 .. 1.45, u = 400 - 500 y / 18 =
    # 359.7 .. 373.6, inside the near body's u 344.4 .. 455.6; moved 2 m left (y 1.75 .. 2.25,
    # u 337.5 .. 351.4) it reaches past the body's edge at 344.4: part of it is seen, kept.
    for y, hidden in ((1.2, True), (2.0, False)):
        cars = _queue()
        cars.center_m[1, 1] = y
        kept = plate_and_head_regions(
            cars, CAMERA, SE3.identity(), config=BARE, occlusion=OcclusionConfig()
        )
        assert len(kept) == (1 if hidden else 2)


def test_a_moving_body_hides_only_what_it_hides_wherever_the_camera_saw_it():
    # The far car's plate centred 1.68 m left: y 1.43 .. 1.93, u = 400 - 500 y / 18 = 346.4 ..
    # 360.3. The near car standing still covers u from 400 - 500 * 0.9 / 8.1 = 344.4: hidden.
    # Driving at 10 m/s, it is unsure by 10 * 0.05 = 0.5 m along its heading, so its body starts
    # at 8.6 m and covers u from 400 - 500 * 0.9 / 8.6 = 347.7 only: the plate is kept.
    timed = GeometricConfig(**{**BARE.__dict__, "time_sigma_s": 0.05})
    for speed, hidden in ((0.0, True), (10.0, False)):
        cars = _queue()
        cars.center_m[1, 1] = 1.68
        cars.velocity_mps[0] = [speed, 0.0]
        cars.velocity_mps[1] = [0.0, 0.0]
        kept = plate_and_head_regions(
            cars, CAMERA, SE3.identity(), config=timed, occlusion=OcclusionConfig()
        )
        assert len(kept) == (1 if hidden else 2)


def test_ray_exit_depth_by_hand():
    from autolabel.anonymize.occlusion import _CameraBoxes, ray_exit_depth
    from autolabel.boxes import CORNER_SIGNS

    # Camera-frame boxes: x -1 .. 1, y -0.5 .. 0.5, z 8 .. 12; and the same behind the camera.
    half, centre = np.array([1.0, 0.5, 2.0]), np.array([0.0, 0.0, 10.0])
    ahead = centre + CORNER_SIGNS * half
    behind = ahead * np.array([1.0, 1.0, -1.0])
    rays = np.array([[0.0, 0.0, 1.0], [0.1, 0.0, 1.0], [0.2, 0.0, 1.0], [-0.1, 0.06, 1.0]])
    exit_m = ray_exit_depth(_CameraBoxes(np.stack([ahead, behind])), rays)
    # Along the axis: the far face (12); x = 0.1 t leaves the side x = 1 at 10; x = 0.2 t is
    # already at x = 1.6 when it reaches z = 8: a miss; y = 0.06 t leaves y = 0.5 at 8.33.
    assert np.allclose(exit_m[0], [12.0, 10.0, np.inf, 0.5 / 0.06])
    assert np.isinf(exit_m[1]).all()


def test_a_partly_hidden_plate_is_blurred_where_it_is_seen():
    # A 1 m high near car (centre 10 m ahead, x 8 .. 12) and a far car whose rear face is at
    # 14 m: its plate patch, z 0.45 .. 1.05 m, spans v = 300 + 500 (1.5 - z) / 14 = 316.1 ..
    # 337.5 and u = 400 -+ 500 * 0.25 / 14 = 391.07 .. 408.93. The near car's whole box (inset
    # 0.1 m) reaches z = 1.0, v = 300 + 500 * 0.5 / 11.9 = 321.0 at its far side: it does not
    # cover the plate, so the plate is not wholly hidden. Its partial body (whole height, inset
    # 0.25 m: x 8.25 .. 11.75, y -+0.75) is left by the rays below v = 300 + 500 * 0.5 / 11.75
    # = 321.28 before 14 - 0.2 m: those rows are left sharp, rows 316 .. 320 (pixel centres
    # 316.5 .. 320.5) blurred, columns 391 .. 408.
    from autolabel.anonymize.blur import BlurConfig, blur_regions

    cars = Boxes3D(
        center_m=[[10.0, 0.0, 0.5], [16.0, 0.0, 0.75]],
        size_wlh_m=[[2.0, 4.0, 1.0], [2.0, 4.0, 1.5]],
        yaw_rad=[0.0, 0.0],
        label=[CLASS_INDEX["car"]] * 2,
        track_id=[0, 1],
    )
    occ = OcclusionConfig(partial_height_fraction=1.0, partial_inset_m=0.25)
    regions = plate_and_head_regions(cars, CAMERA, SE3.identity(), config=BARE, occlusion=occ)
    assert len(regions) == 2
    far = int(np.argmin(_plate_rows(regions)[:, 0]))
    assert np.allclose(
        _plate_rows(regions[[far]]), [[300 + 500 * 0.45 / 14, 300 + 500 * 1.05 / 14]]
    )
    assert regions.hidden_px[far] is not None and regions.hidden_px[1 - far] is None
    image = np.zeros((600, 800, 3), np.uint8)
    _, mask = blur_regions(image, regions[[far]], BlurConfig(margin_px=0))
    rows, cols = np.nonzero(mask)
    assert (rows.min(), rows.max()) == (316, 320)
    assert (cols.min(), cols.max()) == (391, 408)
    # Without partial hiding the whole patch is blurred, down to row 337.
    whole = plate_and_head_regions(
        cars, CAMERA, SE3.identity(), config=BARE, occlusion=OcclusionConfig(partial=False)
    )
    far_whole = whole[[int(np.argmin(_plate_rows(whole)[:, 0]))]]
    assert np.nonzero(blur_regions(image, far_whole, BlurConfig(margin_px=0))[1])[0].max() == 337


def test_the_ego_body_hides_what_lies_behind_it():
    # The ego's hood as a box x 0.5 .. 2, y -+0.8, z 0.2 .. 1 m before the camera (1.5 m up on the
    # ego origin, looking along +x). A car's rear face 3 m ahead: its plate patch, z 0.45 .. 1.05
    # m, spans v = 300 + 500 (1.5 - z) / 3 = 375 .. 475 and u = 400 -+ 500 * 0.25 / 3. A ray below
    # v = 300 + 500 * 0.5 / 2 = 425 (the hood's far top edge) leaves the hood through its far
    # face at depth 2 m, before 3 - 0.2 m: rows 425 .. 474 show the hood, rows 375 .. 424 the
    # plate (pixel centres 375.5 .. 424.5; 424.5 passes 0.002 m over the edge).
    from autolabel.anonymize.blur import BlurConfig, blur_regions

    car = _queue()[[0]]
    car.center_m[0, 0] = 5.0
    hood = OcclusionConfig(ego_body_m=(0.5, 2.0, -0.8, 0.8, 0.2, 1.0))
    image = np.zeros((600, 800, 3), np.uint8)
    for occ, last_row in ((OcclusionConfig(), 474), (hood, 424)):
        regions = plate_and_head_regions(car, CAMERA, SE3.identity(), config=BARE, occlusion=occ)
        assert len(regions) == 1
        assert np.allclose(_plate_rows(regions), [[375.0, 475.0]])
        rows, cols = np.nonzero(blur_regions(image, regions, BlurConfig(margin_px=0))[1])
        assert (rows.min(), rows.max()) == (375, last_row)
        assert (cols.min(), cols.max()) == (358, 441)
    # The body hides whatever box the region comes from (a run's box too: the ego is there).
    run = plate_and_head_regions(
        car, CAMERA, SE3.identity(), config=BARE, extra_margin_m=[0.1], occlusion=hood
    )
    assert run.hidden_px[0] is not None
    # A camera inside the box means the box is not inside the body it is mounted on.
    inside = OcclusionConfig(ego_body_m=(-1.0, 2.0, -0.8, 0.8, 0.2, 1.6))
    with pytest.raises(ValueError, match="ego_body_m"):
        plate_and_head_regions(car, CAMERA, SE3.identity(), config=BARE, occlusion=inside)


@pytest.mark.parametrize(
    "ego", [(0.0, 1.0, -1.0, 1.0, 0.0), (1.0, 0.5, -1.0, 1.0, 0.0, 1.0), (0, 1, -1, 1, 0, np.inf)]
)
def test_ego_body_is_validated(ego):
    with pytest.raises(ValueError, match="ego_body_m"):
        OcclusionConfig(ego_body_m=ego)


def test_beyond_seam_by_hand():
    from autolabel.anonymize.geometric import beyond_seam

    # Box centres at azimuths 30, 170, 179, -100 degrees, 10 m from the ego origin; the camera
    # looks along +x (azimuth 0). Seam behind (170 .. 190): only the arcs 0 -> 170 and 0 -> 179
    # reach it (0 -> -100 turns clockwise, away from it). Seam through the axis (350 .. 10):
    # every arc starts inside it.
    az = np.radians([30.0, 170.0, 179.0, -100.0])
    boxes = Boxes3D(
        center_m=np.stack([10 * np.cos(az), 10 * np.sin(az), np.full(4, 0.75)], 1),
        size_wlh_m=[[2.0, 4.0, 1.5]] * 4,
        yaw_rad=np.zeros(4),
    )
    assert beyond_seam(boxes, CAMERA, SE3.identity(), (170.0, 190.0)).tolist() == [
        False, True, True, False
    ]  # fmt: skip
    assert beyond_seam(boxes, CAMERA, SE3.identity(), (350.0, 10.0)).all()


def test_the_sweep_bound_thins_a_moving_patch_only_away_from_the_seam():
    # A car 10 m ahead (rear face at 8 m) driving +x at 10 m/s. Its rear plate patch (z 0.45 ..
    # 1.05 m) is as thick as 10 m/s times the time's error each way: 50 ms (``time_sigma_s``)
    # puts its near side at 7.5 m and its lowest row at v = 300 + 500 * 1.05 / 7.5 = 370; the
    # beams cross this 77.3 degree camera (2 atan(400 / 500)) in 0.1 * 77.3 / 360 = 21.5 ms, so
    # with ``sweep_period_s`` 0.1 and the seam behind: 7.785 m, v = 367.44. With the seam in
    # front of the camera the time is unsure by the revolution: 370 again.
    timed = {**BARE.__dict__, "time_sigma_s": 0.05}
    car = _queue()[[0]]
    car.velocity_mps[0] = [10.0, 0.0]
    seen = 0.1 * np.degrees(2 * np.arctan(0.8)) / 360.0
    for extra, bottom in (
        ({}, 370.0),
        ({"sweep_period_s": 0.1, "sweep_seam_deg": (170.0, 190.0)}, 300 + 525 / (8 - 10 * seen)),
        ({"sweep_period_s": 0.1, "sweep_seam_deg": (350.0, 10.0)}, 370.0),
    ):
        cfg = GeometricConfig(**{**timed, **extra})
        regions = plate_and_head_regions(car, CAMERA, SE3.identity(), config=cfg)
        assert np.isclose(_plate_rows(regions)[0, 1], bottom)
    with pytest.raises(ValueError, match="sweep_seam_deg"):
        GeometricConfig(sweep_period_s=0.1)
    with pytest.raises(ValueError, match="sweep_seam_deg"):
        GeometricConfig(sweep_seam_deg=(1.0,))
