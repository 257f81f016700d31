"""LiDAR sweep simulation: geometry of returns, labels, rings, dropout, intensity, determinism."""

import numpy as np
import pytest

from autolabel.boxes import Boxes3D
from autolabel.sensors import LidarCalibration
from autolabel.synth.lidar_sim import (
    LidarNoise,
    LidarReflectance,
    beam_directions_lidar,
    simulate_sweep,
)
from autolabel.synth.raycast import HIT_GROUND, SceneBoxes, cast_rays
from calib.rotation import rotation_from_yaw
from calib.se3 import SE3

HEIGHT_M = 1.84


def lidar(beams: int = 16, step_deg: float = 1.0, max_range_m: float = 60.0) -> LidarCalibration:
    return LidarCalibration(
        "LIDAR_TOP",
        SE3.identity(),
        np.linspace(-30.0, 10.0, beams),
        azimuth_step_deg=step_deg,
        max_range_m=max_range_m,
    )


def pose(yaw_rad: float = 0.0, xy=(0.0, 0.0)) -> SE3:
    return SE3(rotation_from_yaw(yaw_rad), np.array([xy[0], xy[1], HEIGHT_M]))


def one_box(part: int = 0) -> SceneBoxes:
    return SceneBoxes(
        center=np.array([[8.0, 1.0, 1.0]]),
        size_wlh=np.array([[2.0, 4.5, 2.0]]),
        yaw=np.array([0.4]),
        colour=np.full((1, 3), 100, np.uint8),
        owner=np.zeros(1, np.int32),
        part=np.array([part], np.int8),
    )


def to_global(points_lidar: np.ndarray, global_SE3_lidar: SE3) -> np.ndarray:
    return global_SE3_lidar.transform_points(points_lidar[:, :3].astype(np.float64))


def test_ground_only_points_lie_on_the_ground():
    sensor, g_SE3_l = lidar(), pose(0.7, (5.0, -3.0))
    noise = LidarNoise(range_sigma_m=0.02, dropout_prob=0.0)
    points, box_index = simulate_sweep(
        sensor, g_SE3_l, SceneBoxes.empty(), np.random.default_rng(0), noise
    )
    assert points.dtype == np.float32 and points.shape[1] == 5
    assert (box_index == HIT_GROUND).all()
    z = to_global(points, g_SE3_l)[:, 2]
    # Range noise moves a point vertically by |sin(elevation)| <= sin(30 deg) times the noise.
    assert np.abs(z).max() < 5 * 0.02 * np.sin(np.radians(30.0))
    assert np.abs(z).mean() < 0.02 * np.sin(np.radians(30.0))
    # Downward beams whose ground hit lies within range return at every azimuth; others never.
    elevation = np.radians(sensor.beam_elevation_deg)
    reaching = (elevation < 0) & (HEIGHT_M / np.sin(-np.minimum(elevation, -1e-9)) <= 60.0)
    n_azimuth = 360
    assert len(points) == reaching.sum() * n_azimuth
    np.testing.assert_array_equal(np.unique(points[:, 4]), np.nonzero(reaching)[0])
    # Each ring's ground hits are at horizontal distance h / tan(-elevation) (within the noise).
    for ring in np.nonzero(reaching)[0]:
        r_xy = np.hypot(points[points[:, 4] == ring, 0], points[points[:, 4] == ring, 1])
        expected = HEIGHT_M / np.tan(-elevation[ring])
        np.testing.assert_allclose(r_xy, expected, atol=5 * 0.02)


def test_points_of_a_box_lie_inside_it():
    boxes = one_box()
    g_SE3_l = pose(-0.3, (0.5, 0.2))
    points, box_index = simulate_sweep(lidar(32, 0.5), g_SE3_l, boxes, np.random.default_rng(1))
    on_box = box_index == 0
    assert on_box.sum() > 100
    grown = Boxes3D(boxes.center, boxes.size_wlh + 2 * 0.1, boxes.yaw)  # 5 sigma of noise
    shrunk = Boxes3D(boxes.center, boxes.size_wlh - 2 * 0.1, boxes.yaw)
    points_global = to_global(points, g_SE3_l)
    assert grown.points_inside(points_global[on_box]).all()
    assert not shrunk.points_inside(points_global).any()  # returns come from the surface
    # Ground points are not inside the box and lie on the ground.
    ground = box_index == HIT_GROUND
    assert not grown.points_inside(
        points_global[ground & (np.abs(points_global[:, 2]) > 0.1)]
    ).any()
    assert np.abs(points_global[ground, 2]).max() < 0.1


def test_rings_in_range_and_firing_order():
    sensor = lidar(32, 2.0)
    directions, ring = beam_directions_lidar(sensor)
    assert directions.shape == (180 * 32, 3)
    np.testing.assert_allclose(np.linalg.norm(directions, axis=1), 1.0)
    np.testing.assert_array_equal(ring[:32], np.arange(32))
    np.testing.assert_allclose(np.degrees(np.arcsin(directions[:32, 2])), sensor.beam_elevation_deg)
    points, _ = simulate_sweep(sensor, pose(), one_box(), np.random.default_rng(2))
    assert points[:, 4].min() >= 0 and points[:, 4].max() <= 31
    assert np.array_equal(points[:, 4], np.rint(points[:, 4]))


def test_azimuth_count_for_a_step_that_does_not_divide_360():
    directions, _ = beam_directions_lidar(lidar(1, 0.33))
    assert len(directions) == 1091  # 0, 0.33, ..., 359.7 degrees
    last_deg = np.degrees(np.arctan2(directions[-1, 1], directions[-1, 0])) % 360
    assert last_deg == pytest.approx(1090 * 0.33)


@pytest.mark.parametrize("dropout", [0.0, 0.05, 0.3])
def test_dropout_fraction(dropout):
    sensor = lidar(32, 0.5)
    full, _ = simulate_sweep(
        sensor, pose(), one_box(), np.random.default_rng(3), LidarNoise(dropout_prob=0.0)
    )
    kept, _ = simulate_sweep(
        sensor, pose(), one_box(), np.random.default_rng(3), LidarNoise(dropout_prob=dropout)
    )
    fraction_lost = 1.0 - len(kept) / len(full)
    n = len(full)
    assert (
        abs(fraction_lost - dropout) < 4 * np.sqrt(max(dropout * (1 - dropout), 1e-12) / n) + 1e-12
    )


def test_same_seed_same_sweep_other_seed_other_noise():
    sensor, g_SE3_l = lidar(16, 1.0), pose(0.2)
    a, ia = simulate_sweep(sensor, g_SE3_l, one_box(), np.random.default_rng(5))
    b, ib = simulate_sweep(sensor, g_SE3_l, one_box(), np.random.default_rng(5))
    c, _ = simulate_sweep(sensor, g_SE3_l, one_box(), np.random.default_rng(6))
    assert a.tobytes() == b.tobytes() and ia.tobytes() == ib.tobytes()
    assert a.shape != c.shape or a.tobytes() != c.tobytes()


def test_intensity_by_material_and_angle():
    noise = LidarNoise(range_sigma_m=0.0, dropout_prob=0.0, intensity_sigma_frac=0.0)
    refl = LidarReflectance()
    sensor = lidar(32, 0.5)
    body_pts, body_idx = simulate_sweep(sensor, pose(), one_box(0), np.random.default_rng(0), noise)
    plate_pts, plate_idx = simulate_sweep(
        sensor, pose(), one_box(2), np.random.default_rng(0), noise
    )
    assert (body_pts[:, 3] >= 0).all() and (body_pts[:, 3] <= 255).all()
    body_i = body_pts[body_idx == 0, 3]
    plate_i = plate_pts[plate_idx == 0, 3]
    ground_i = body_pts[body_idx == HIT_GROUND, 3]
    assert (
        body_i.max() <= refl.body + 0.5
        and plate_i.min() >= refl.plate * (1 - refl.plate_falloff) - 0.5
    )
    assert ground_i.max() < body_i.mean() < plate_i.mean()
    # Ground seen under elevation e: cos(incidence) = sin(-e) for the +z normal.
    rings = body_pts[body_idx == HIT_GROUND, 4].astype(int)
    e = np.radians(sensor.beam_elevation_deg[rings])
    expected = refl.ground * (refl.diffuse_floor + (1 - refl.diffuse_floor) * np.sin(-e))
    np.testing.assert_array_equal(ground_i, np.rint(expected))


def test_range_limit():
    sensor = lidar(16, 1.0, max_range_m=5.0)
    points, _ = simulate_sweep(
        sensor, pose(), one_box(), np.random.default_rng(0), LidarNoise(range_sigma_m=0.0)
    )
    assert np.linalg.norm(points[:, :3], axis=1).max() <= 5.0 + 1e-5


def test_noise_config_errors_name_the_key():
    with pytest.raises(ValueError, match="dropout_prob"):
        LidarNoise(dropout_prob=1.0)
    with pytest.raises(ValueError, match="range_sigma_m"):
        LidarNoise(range_sigma_m=-0.1)
    with pytest.raises(ValueError, match="plate_falloff"):
        LidarReflectance(plate_falloff=2.0)


def test_sweep_matches_cast_rays_for_a_tilted_lidar_in_a_busy_scene():
    """The sweep's per-azimuth culling must not change any hit: compare with plain cast_rays."""
    rng = np.random.default_rng(11)
    n = 40
    centers = np.column_stack(
        [rng.uniform(-30, 30, n), rng.uniform(-30, 30, n), rng.uniform(0.5, 4, n)]
    )
    boxes = SceneBoxes(
        centers,
        rng.uniform(0.3, 8, (n, 3)),
        rng.uniform(-np.pi, np.pi, n),
        np.zeros((n, 3), np.uint8),
        np.arange(n, dtype=np.int32),
        rng.integers(0, 3, n).astype(np.int8),
    )
    tilt = np.radians(8.0)  # roll the LiDAR about its x axis, then yaw it
    roll = np.array([[1, 0, 0], [0, np.cos(tilt), -np.sin(tilt)], [0, np.sin(tilt), np.cos(tilt)]])
    g_SE3_l = SE3(rotation_from_yaw(0.9) @ roll, np.array([1.0, -2.0, HEIGHT_M]))
    sensor = lidar(32, 0.5, max_range_m=50.0)
    exact = LidarNoise(range_sigma_m=0.0, dropout_prob=0.0, intensity_sigma_frac=0.0)
    points, box_index = simulate_sweep(sensor, g_SE3_l, boxes, np.random.default_rng(0), exact)
    directions_lidar, ring = beam_directions_lidar(sensor)
    t, hit = cast_rays(g_SE3_l.translation, g_SE3_l.rotate_vectors(directions_lidar), boxes, 50.0)
    returned = hit != -1
    assert (hit >= 0).sum() > 1000
    np.testing.assert_array_equal(box_index, hit[returned])
    np.testing.assert_allclose(np.linalg.norm(points[:, :3], axis=1), t[returned], rtol=1e-6)
    np.testing.assert_array_equal(points[:, 4], ring[returned])
