"""Plates placed by their LiDAR intensity (issue 21): bounds computed by hand in the box frame."""

from __future__ import annotations

import numpy as np
import pytest

from autolabel.anonymize.geometric import SOURCE_PLATE, GeometricConfig, region_cuboids
from autolabel.anonymize.lidar_plates import LidarPlateConfig, lend_track_anchors, plate_anchors
from autolabel.boxes import Boxes3D
from autolabel.classes import CLASS_INDEX

GEO = GeometricConfig()
LIDAR = LidarPlateConfig()
# A 1.8 x 4.5 x 1.5 m car; the sensor 10 m from its centre: bounds grow by
# margin 0.05 + 0.0035 * 10 = 0.085 m. Envelope 0.52 x 0.15 m.
GROW = 0.05 + 0.0035 * 10.0


def _car(yaw: float, center=(0.0, 0.0)) -> Boxes3D:
    return Boxes3D(
        center_m=[[center[0], center[1], 0.75]],
        size_wlh_m=[[1.8, 4.5, 1.5]],
        yaw_rad=[yaw],
        label=[CLASS_INDEX["car"]],
        track_id=[0],
    )


def _in_global(yaw: float, forward, lateral, height) -> np.ndarray:
    """Box-frame (forward, left, above the bottom) points of a car at the origin, globally."""
    c, s = np.cos(yaw), np.sin(yaw)
    f, lat, z = (np.asarray(v, dtype=np.float64) for v in (forward, lateral, height))
    return np.stack([c * f - s * lat, s * f + c * lat, z], axis=1)


@pytest.mark.parametrize("yaw", [0.0, np.pi / 2, -2.5])
def test_bright_returns_on_the_rear_face_bound_the_plate(yaw):
    # Plate returns 0.2 m inside the rear face (x = -2.25), lateral -0.1 .. 0.1 (left +),
    # 0.90 .. 0.95 m above the bottom; a rear lamp's reflector at lateral 0.7 (outside the band:
    # 0.26 + 2.25 sin 2 deg = 0.339 m) and a dim return at the face centre are not taken.
    points = _in_global(
        yaw,
        [-2.05, -2.05, -2.05, -2.1, -2.05],
        [-0.1, 0.1, 0.7, 0.0, 0.0],
        [0.90, 0.95, 0.9, 0.6, 0.92],
    )
    intensity = np.array([255.0, 250.0, 255.0, 40.0, 230.0])
    sensor = _in_global(yaw, [-10.0], [0.0], [0.75])[0]
    # The plate-size bound (the returns' lateral spread is not trusted to reach the plate's sides).
    plate_size = LidarPlateConfig(lateral_from_returns=False)
    anchors = plate_anchors(_car(yaw), points, intensity, sensor, GEO, plate_size)
    assert anchors.shape == (1, 2, 6)
    assert np.isnan(anchors[0, 0]).all()  # no bright return on the front
    # Depth: the returns lie 2.25 - 2.05 = 0.2 m behind the rear face, -+ the 0.05 m margin.
    expected = [0.1 - 0.52 - GROW, -0.1 + 0.52 + GROW, 0.95 - 0.15 - GROW, 0.90 + 0.15 + GROW]
    expected += [0.2 - 0.05, 0.2 + 0.05]
    assert np.allclose(anchors[0, 1], expected)


def _rings(lateral, heights, forward=-2.1):
    """Rear-face points of a car at the origin (yaw 0): every lateral on every ring height."""
    lat, z = np.meshgrid(np.asarray(lateral, float), np.asarray(heights, float))
    return _in_global(0.0, np.full(lat.size, forward), lat.ravel(), z.ravel())


def test_dull_returns_inside_the_plates_heights_bound_its_sides():
    # Three rings (0.85, 0.90, 0.95 m) cross the rear plate: bright from lateral -0.15 to 0.05,
    # 0.15 m inside the rear face. On the middle ring, the return at 0.10 reads 190 (a beam
    # straddling the plate's edge: not dull), the next at 0.15 is dull, and so is the one at
    # -0.20. The middle ring lies inside the bright returns' heights (0.86 .. 0.94 after the
    # 0.01 m tolerance), so its dull returns bound the sides, + the 0.05 m margin: -0.25 .. 0.20.
    bright = _rings(np.linspace(-0.15, 0.05, 5), [0.85, 0.90, 0.95])
    edge = _rings([0.10, 0.15, -0.20], [0.90])
    points = np.concatenate([bright, edge])
    intensity = np.concatenate([np.full(15, 255.0), [190.0, 40.0, 40.0]])
    anchors = plate_anchors(_car(0.0), points, intensity, [-10, 0, 0.75], GEO, LIDAR)
    assert np.allclose(anchors[0, 1, :2], [-0.25, 0.20])
    # Height and depth keep their plate-size and returns' bounds: 0.95 - 0.15 - GROW ..
    # 0.85 + 0.15 + GROW; 0.15 -+ 0.05 m.
    assert np.allclose(anchors[0, 1, 2:], [0.80 - GROW, 1.0 + GROW, 0.10, 0.20])
    # The same dull returns on the outer rings (0.85, 0.95) do not bound a side: the plate may
    # end there through its bottom or top edge. Plate-size bounds: 0.05 - 0.52 - GROW,
    # -0.15 + 0.52 + GROW.
    outer = _rings([0.15, -0.20], [0.85, 0.95])
    intensity = np.concatenate([np.full(15, 255.0), np.full(4, 40.0)])
    anchors = plate_anchors(_car(0.0), np.concatenate([bright, outer]), intensity, [-10, 0, 0.75],
                            GEO, LIDAR)  # fmt: skip
    assert np.allclose(anchors[0, 1, :2], [0.05 - 0.52 - GROW, -0.15 + 0.52 + GROW])
    # A dull return in front of the plate (0.15 m before the face, an occluder) says nothing.
    front = _rings([0.15], [0.90], forward=-2.4)
    intensity = np.concatenate([np.full(15, 255.0), [40.0, 40.0]])
    points = np.concatenate([bright, front, _rings([-0.20], [0.90])])
    anchors = plate_anchors(_car(0.0), points, intensity, [-10, 0, 0.75], GEO, LIDAR)
    assert np.allclose(anchors[0, 1, :2], [-0.25, -0.15 + 0.52 + GROW])


def test_a_ring_slanted_across_the_plate_top_keeps_its_width():
    # Synthetic seed 5 (a construction vehicle's rear, 10 m): one ring rises 0.1 m per metre
    # across an EU plate (lateral -0.26 .. 0.26, top 0.93 m) and leaves it through the top edge
    # at lateral 0.05; the next return (0.10, 0.935 m high) is dull, as is the one before the
    # first bright (-0.30, 0.895 m). Neither lies inside the bright returns' heights: the
    # plate-size bound stays and holds the whole plate (the former span rule stopped at
    # 0.05 + 1.5 * 0.05 + 0.05 = 0.175).
    lateral = np.linspace(-0.25, 0.05, 7)
    height = 0.90 + 0.1 * (lateral + 0.25)
    dull_lat = np.array([0.10, -0.30])
    dull_h = 0.90 + 0.1 * (dull_lat + 0.25)
    points = _in_global(0.0, np.full(9, -2.1), np.r_[lateral, dull_lat], np.r_[height, dull_h])
    intensity = np.r_[np.full(7, 255.0), 40.0, 40.0]
    anchors = plate_anchors(_car(0.0), points, intensity, [-10, 0, 0.75], GEO, LIDAR)
    assert np.allclose(anchors[0, 1, :2], [0.05 - 0.52 - GROW, -0.25 + 0.52 + GROW])
    assert anchors[0, 1, 0] <= -0.26 and anchors[0, 1, 1] >= 0.26


def test_a_face_without_plate_returns_gets_its_surface_depth():
    # No bright return on the rear face; dull ones across the band (lateral -0.3 .. 0.3, 0.6 m
    # high) 0.05 and 0.15 m behind it. The plate lies on that surface, in a recess of at most
    # max_recess_m (0.1): depth 0.05 - 0.05 .. 0.15 + 0.05 + 0.1; no lateral or height bound.
    lateral = np.linspace(-0.3, 0.3, 7)
    forward = np.where(np.arange(7) % 2 == 0, -2.2, -2.1)
    points = _in_global(0.0, forward, lateral, np.full(7, 0.6))
    anchors = plate_anchors(_car(0.0), points, np.full(7, 30.0), [-10, 0, 0.75], GEO, LIDAR)
    assert np.isnan(anchors[0, 1, :4]).all()
    assert np.allclose(anchors[0, 1, 4:], [0.0, 0.30])
    assert np.isnan(anchors[0, 0]).all()  # nothing on the front
    # Three returns within 0.04 m laterally (a pole before the face) are not its surface.
    pole = _in_global(0.0, np.full(3, -2.1), [-0.02, 0.0, 0.02], np.full(3, 0.6))
    anchors = plate_anchors(_car(0.0), pole, np.full(3, 30.0), [-10, 0, 0.75], GEO, LIDAR)
    assert np.isnan(anchors).all()
    # The patch of that face: the band's width and heights, the surface's depth (0.30 thick,
    # centred 0.15 behind the face at x = -2.25; the car stands, no time margin).
    anchor = np.full((1, 2, 6), np.nan)
    anchor[0, 1, 4:] = [0.0, 0.30]
    plain, source, face = region_cuboids(_car(0.0), GEO)
    deep, _, _ = region_cuboids(_car(0.0), GEO, plate_anchor_m=anchor)
    rear = np.flatnonzero((source == SOURCE_PLATE) & (face < 0))[0]
    assert np.isclose(deep.size_wlh_m[rear, 1], 0.30)
    assert np.isclose(deep.center_m[rear, 0], -2.25 + 0.15)
    assert np.allclose(deep.size_wlh_m[rear, [0, 2]], plain.size_wlh_m[rear, [0, 2]])
    assert np.allclose(deep.center_m[rear, 1:], plain.center_m[rear, 1:])


def test_returns_spread_beyond_a_plate_leave_the_band():
    # Two bright returns 0.66 m apart laterally, wider than the 0.52 m envelope plus the 0.085 m
    # growth on both sides (0.69 m allowed): still one plate. Returns 0.4 m apart in height
    # (0.15 + 0.17 m allowed): not one plate.
    ok = _in_global(0.0, [-2.1, -2.1], [-0.33, 0.33], [0.9, 0.9])
    found = plate_anchors(_car(0.0), ok, np.array([255.0, 255.0]), [-10, 0, 0.75], GEO, LIDAR)
    assert np.isfinite(found[0, 1]).all()
    points = _in_global(0.0, [-2.1, -2.1], [0.0, 0.0], [0.8, 1.2])
    anchors = plate_anchors(_car(0.0), points, np.array([255.0, 255.0]), [-10, 0, 0.75], GEO, LIDAR)
    assert np.isnan(anchors).all()


def test_only_vehicles_get_anchors():
    person = Boxes3D(
        center_m=[[0.0, 0.0, 0.85]],
        size_wlh_m=[[0.6, 0.6, 1.7]],
        yaw_rad=[0.0],
        label=[CLASS_INDEX["pedestrian"]],
        track_id=[0],
    )
    boxes = Boxes3D.concatenate([person, _car(0.0, (20.0, 0.0))])
    points = _in_global(0.0, [-0.25, 20.0 - 2.1], [0.0, 0.0], [0.9, 0.9])
    anchors = plate_anchors(boxes, points, np.array([255.0, 255.0]), [10, 0, 0.75], GEO, LIDAR)
    assert np.isnan(anchors[0]).all() and np.isfinite(anchors[1, 1]).all()


def test_an_anchor_narrows_the_rear_patch_and_never_widens_it():
    car = _car(0.0)
    anchor = np.full((1, 2, 6), np.nan)
    # Plate bound lateral 0.0 .. 0.6 (reaching past the band's 0.3385 m), 0.8 .. 1.1 m high,
    # 0.1 .. 0.3 m behind the rear face.
    anchor[0, 1] = [0.0, 0.6, 0.8, 1.1, 0.1, 0.3]
    plain, source, face = region_cuboids(car, GEO)
    narrowed, _, _ = region_cuboids(car, GEO, plate_anchor_m=anchor)
    rear = np.flatnonzero((source == SOURCE_PLATE) & (face < 0))[0]
    front = np.flatnonzero((source == SOURCE_PLATE) & (face > 0))[0]
    e = GEO.position_sigma_m
    band_half = 0.26 + 2.25 * np.sin(np.radians(GEO.yaw_sigma_deg)) + e
    # Lateral: [max(-band, 0.0), min(band, 0.6)] = [0, band_half]; centre band_half / 2 to the
    # left (+y at yaw 0). Height: the band is 0.35 - 0.075 - e .. 1.2 + 0.075 + e above the
    # bottom, so the anchor's 0.8 .. 1.1 stays; centre 0.95 above the bottom at z = 0.
    assert np.isclose(narrowed.size_wlh_m[rear, 0], band_half)
    assert np.isclose(narrowed.center_m[rear, 1], band_half / 2)
    assert np.isclose(narrowed.size_wlh_m[rear, 2], 0.3)
    assert np.isclose(narrowed.center_m[rear, 2], 0.95)
    # Depth: the anchor's 0.1 .. 0.3 m behind the face (x = -2.25), no margin (the car stands):
    # 0.2 m thick, centred at x = -2.05. Without it: plate_depth_m + 2 e thick, centred
    # plate_recess_m behind the face.
    assert np.isclose(narrowed.size_wlh_m[rear, 1], 0.2)
    assert np.isclose(narrowed.center_m[rear, 0], -2.05)
    assert np.isclose(plain.size_wlh_m[rear, 1], GEO.plate_depth_m + 2 * e)
    assert np.isclose(plain.center_m[rear, 0], -2.25 + GEO.plate_recess_m[1])
    assert np.isclose(plain.center_m[front, 0], 2.25 - GEO.plate_recess_m[0])
    # The front face had no anchor: its patch is the band, unchanged.
    assert np.allclose(narrowed.center_m[front], plain.center_m[front])
    assert np.allclose(narrowed.size_wlh_m[front], plain.size_wlh_m[front])
    assert np.isclose(plain.size_wlh_m[rear, 0], 2 * band_half)


def test_a_track_lends_its_anchor_to_its_keyframes_without_one():
    # Keyframes at 0, 0.5 and 1.0 s. Track 7: a rear anchor on keyframe 0 only; on keyframe 1 its
    # box (row 1 there, extra margin 0.2 m) borrows it grown by 0.05 + 0.2 m a side; on keyframe 2
    # (row 0, no extra) grown by 0.05 m; its front face, never seen, stays NaN. Track 9: rear
    # anchors on keyframes 0 and 2, none on 1: both are 0.5 s away, the earlier lends. An
    # untracked box (-1) borrows nothing.
    a7 = np.array([-0.2, 0.2, 0.8, 1.0, 0.1, 0.2])
    a9 = np.array([-0.3, 0.1, 0.5, 0.7, 0.0, 0.1])
    b9 = a9 + 0.05
    nan = np.full(6, np.nan)
    own = [
        np.array([[nan, a7], [nan, a9]]),
        np.array([[nan, nan], [nan, nan], [nan, nan]]),
        np.array([[nan, nan], [nan, b9]]),
    ]
    ids = [np.array([7, 9]), np.array([9, 7, -1]), np.array([7, 9])]
    margins = [np.zeros(2), np.array([0.0, 0.2, 0.0]), np.zeros(2)]
    got, lent = lend_track_anchors(own, ids, margins, np.array([0.0, 0.5, 1.0]), GEO)
    sign = np.array([-1, 1, -1, 1, -1, 1])  # lows grow down, highs up
    assert np.allclose(got[1][1, 1], a7 + sign * 0.25)
    assert np.allclose(got[2][0, 1], a7 + sign * 0.05)
    assert np.allclose(got[1][0, 1], a9 + sign * 0.05)
    assert np.isnan(got[1][2]).all() and np.isnan(got[1][:, 0]).all()
    assert np.allclose(got[0][1, 1], a9) and np.allclose(got[2][1, 1], b9)  # own ones kept
    assert lent[1].tolist() == [[False, True], [False, True], [False, False]]
    assert lent[2].tolist() == [[False, True], [False, False]]
    assert not lent[0].any()


def test_a_moving_box_patch_is_as_thick_as_its_time_is_unsure():
    # A car at 10 m/s: the rear patch is plate_depth_m + 2 (position_sigma_m + 10 m/s x the
    # time's error) thick: 0.3 + 2 (0.05 + 0.5) = 1.4 m with the default 50 ms, 0.3 + 2 (0.05 +
    # 0.2) = 0.8 m with 20 ms (a camera the beams cross in that time, ``sweep_period_s``).
    car = _car(0.0)
    car.velocity_mps = np.array([[10.0, 0.0]])
    slow, source, face = region_cuboids(car, GEO, time_sigma_s=np.array([0.02]))
    fast, _, _ = region_cuboids(car, GEO)
    rear = np.flatnonzero((source == SOURCE_PLATE) & (face < 0))[0]
    assert np.isclose(fast.size_wlh_m[rear, 1], 1.4)
    assert np.isclose(slow.size_wlh_m[rear, 1], 0.8)
    with pytest.raises(ValueError, match="sweep_period_s"):
        GeometricConfig(sweep_period_s=-0.1)
