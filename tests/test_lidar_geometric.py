"""The geometric LiDAR detector on ray-cast sweeps of known boxes."""

from __future__ import annotations

import numpy as np
import pytest
from detection_scenes import BEAM_ELEVATION_DEG, box_set, make_frame, ray_cast

from autolabel.boxes import Boxes3D
from autolabel.classes import class_index
from autolabel.clip import LidarSweep
from autolabel.nuscenes_reader import DatasetError, load_lidar_points
from calib.rotation import rotation_from_yaw, wrap_angle
from calib.se3 import SE3
from detectors.cluster_step import step_cuts
from detectors.lidar_geometric import (
    LidarGeometricConfig,
    LidarGeometricDetector,
    accept_joins,
    below_first_gap,
    below_overhangs,
    cell_tops_m,
    cluster_labels,
    detect_boxes_ego,
    estimate_ground,
    fit_rectangles,
    ring_elevations_rad,
    scan_neighbour_pairs,
    size_cost,
    supported_by_keyframe,
    top_headroom_m,
)
from detectors.lidar_points import keyframe_points_ego

SCENE = [
    ("car", 12.0, 4.0, 0.3, 1.9, 4.5, 1.6),
    ("pedestrian", 8.0, -4.0, 0.0, 0.6, 0.7, 1.75),
    ("truck", -15.0, 8.0, 1.2, 2.5, 7.0, 3.0),
    ("barrier", 6.0, 10.0, 0.0, 2.5, 0.5, 1.0),
    ("traffic_cone", 5.0, -8.0, 0.0, 0.4, 0.4, 1.0),
    ("bicycle", -8.0, -6.0, 2.0, 0.6, 1.7, 1.3),
    ("bus", 25.0, -12.0, 0.1, 2.9, 11.0, 3.4),
]


def test_finds_every_object_with_its_class_position_and_heading(tmp_path):
    truth = box_set(SCENE)
    frame = make_frame(tmp_path, truth)
    boxes = LidarGeometricDetector().detect_frames([frame])[0]
    assert boxes.frame == "global"
    truth_global = frame.ground_truth.boxes
    dist = np.linalg.norm(truth_global.center_m[:, None, :2] - boxes.center_m[None, :, :2], axis=2)
    # Each object's best-scoring box within 1 m (a runner-up class may add a lower-scored box).
    near = dist < 1.0
    assert near.any(axis=1).all()
    match = np.argmax(np.where(near, boxes.score[None, :], -1.0), axis=1)
    assert len(set(match.tolist())) == len(truth)
    # No box away from every object (a runner-up class's box is grown to that class's size).
    assert (dist.min(axis=0) < 3.0).all()
    # Centres within 0.35 m: the unseen far faces are filled in from the class's typical size.
    assert dist[np.arange(len(truth)), match].max() < 0.35
    np.testing.assert_array_equal(boxes.label[match], truth.label)
    # Heading up to the pi ambiguity of a single sweep (cones are round: skipped).
    not_cone = truth.label != class_index("traffic_cone")
    dyaw = wrap_angle(2 * (boxes.yaw_rad[match] - truth_global.yaw_rad))[not_cone] / 2
    assert np.degrees(np.abs(dyaw)).max() < 3.0
    np.testing.assert_allclose(boxes.size_wlh_m[match, 2], truth.size_wlh_m[:, 2], atol=0.2)
    assert ((boxes.score > 0) & (boxes.score <= 1)).all()
    assert np.isnan(boxes.velocity_mps).all()


def test_sloped_empty_ground_gives_no_boxes_and_the_plane_is_recovered(tmp_path):
    sensor = np.array([0.94, 0.0, 1.84])
    points = ray_cast(Boxes3D.empty("ego"), sensor, ground_slope=(0.04, -0.02))
    ground = estimate_ground(points, 52.0, 1.0, 0.3)
    np.testing.assert_allclose(ground.plane, [0.04, -0.02, 0.0], atol=2e-3)
    assert len(detect_boxes_ego(points, LidarGeometricConfig(), sensor[:2])) == 0


def _car_beside_the_ego_points() -> tuple[np.ndarray, tuple[float, float]]:
    """Flat road (z = 0) on a 0.25 m lattice, none seen within 6 m of a car parked beside the
    ego (the ego's body and the car hide it), and the car's near side and roof, whose lowest
    returns lie 0.4 m up: (P, 3) ego-frame points and the car's centre."""
    g = np.arange(-30.0, 30.0, 0.25)
    x, y = np.meshgrid(g, g, indexing="ij")
    road = np.column_stack([x.ravel(), y.ravel(), np.zeros(x.size)])
    car_xy = (5.0, 3.0)
    hidden = np.hypot(road[:, 0] - car_xy[0], road[:, 1] - car_xy[1]) < 6.0
    s, h = np.meshgrid(np.arange(-2.2, 2.21, 0.1), np.arange(0.4, 1.51, 0.1), indexing="ij")
    side = np.column_stack([car_xy[0] + s.ravel(), np.full(s.size, 2.1), h.ravel()])
    s, t = np.meshgrid(np.arange(-2.0, 2.01, 0.1), np.arange(2.2, 3.81, 0.1), indexing="ij")
    roof = np.column_stack([car_xy[0] + s.ravel(), t.ravel(), np.full(s.size, 1.5)])
    return np.concatenate([road[~hidden], side, roof]), car_xy


def test_a_car_hiding_the_road_stands_on_the_road_not_on_its_underside():
    points, car_xy = _car_beside_the_ego_points()
    ground = estimate_ground(points, 52.0, 1.0, 0.3)
    centre = np.array([car_xy])
    # What separates objects from the ground: the car's cells sit at the 0.3 m bound (its
    # lowest returns, 0.4 m up, are no ground) ...
    np.testing.assert_allclose(ground.height_m(centre), [0.3], atol=1e-9)
    # ... but the road under it is the plane (z = 0), which the far road pins down.
    np.testing.assert_allclose(ground.road_height_m(centre), [0.0], atol=1e-9)
    np.testing.assert_allclose(ground.road_height_m(np.array([[20.0, -10.0]])), [0.0], atol=1e-9)
    boxes = detect_boxes_ego(points, LidarGeometricConfig(), np.zeros(2))
    dist = np.hypot(*(boxes.center_m[:, :2] - centre).T)
    car = np.argmin(dist)
    assert dist[car] < 1.0 and boxes.class_name[car] == "car"
    bottom = boxes.center_m[car, 2] - boxes.size_wlh_m[car, 2] / 2
    assert abs(bottom) < 1e-6


def test_objects_on_a_slope_are_found(tmp_path):
    rows = [("car", 15.0, 0.0, 0.0, 1.9, 4.6, 1.7), ("pedestrian", -10.0, 5.0, 0.0, 0.6, 0.7, 1.8)]
    truth = box_set(rows)
    slope = (0.03, 0.0)
    # Stand the boxes on the slope.
    truth.center_m[:, 2] += slope[0] * truth.center_m[:, 0]
    frame = make_frame(tmp_path, truth, ground_slope=slope)
    boxes = LidarGeometricDetector().detect_frames([frame])[0]
    top = boxes[np.argsort(-boxes.score)[:2]]
    assert sorted(top.class_name.tolist()) == ["car", "pedestrian"]


def test_walls_and_poles_are_not_objects():
    sensor = np.array([0.94, 0.0, 1.84])
    clutter = Boxes3D(
        center_m=[[0.0, 15.0, 1.5], [10.0, -6.0, 2.5]],
        size_wlh_m=[[0.3, 30.0, 3.0], [0.25, 0.25, 5.0]],  # a 30 m wall, a 5 m pole
        yaw_rad=[0.0, 0.0],
        frame="ego",
    )
    points = ray_cast(clutter, sensor)
    assert len(detect_boxes_ego(points, LidarGeometricConfig(), sensor[:2])) == 0


def test_fit_rectangles_recovers_an_l_shape():
    rng = np.random.default_rng(0)
    yaw = np.deg2rad(32.0)
    # Two visible faces of a 4 x 2 m rectangle centred at (10, 3).
    s = rng.uniform(-2, 2, 200)
    t = rng.uniform(-1, 1, 100)
    local = np.concatenate(
        [np.column_stack([s, np.full(200, -1.0)]), np.column_stack([np.full(100, -2.0), t])]
    )
    rot = rotation_from_yaw(yaw)[:2, :2]
    xy = local @ rot.T + [10.0, 3.0]
    ids, rects, _ = fit_rectangles(xy, np.zeros(len(xy), dtype=np.int64), 0.5, 0.1)
    assert ids.tolist() == [0]
    cx, cy, e1, e2, angle, edge_share = rects[0]
    assert (cx, cy) == pytest.approx((10.0, 3.0), abs=0.05)
    assert sorted([e1, e2]) == pytest.approx([2.0, 4.0], abs=0.05)
    long_angle = angle if e1 > e2 else angle + np.pi / 2
    assert abs(wrap_angle(2 * (long_angle - yaw))) / 2 < np.deg2rad(0.6)
    assert edge_share == pytest.approx(1.0)


def test_clusters_split_at_gaps_and_join_sparse_far_returns():
    near = np.array([[5.0, 0.0], [5.2, 0.0], [6.5, 0.0]])  # 1.3 m gap at 5 m: two clusters
    far = np.array([[40.0, 0.0], [40.0, 0.55]])  # 0.55 m gap at 40 m: one (returns thin out)
    labels = cluster_labels(np.concatenate([near, far]), 52.0, 0.3)
    assert labels[0] == labels[1] != labels[2]
    assert labels[3] == labels[4] and labels[3] not in labels[:3]


def test_multi_sweep_points_are_moved_into_the_keyframe_ego_frame(tmp_path):
    frame = make_frame(tmp_path, box_set([("car", 10.0, 0.0, 0.0, 1.9, 4.6, 1.7)]))
    # An earlier sweep taken 2 m behind: its points, seen from there, are 2 m farther away.
    sweep_pose = frame.global_SE3_ego.compose(SE3(np.eye(3), np.array([-2.0, 0.0, 0.0])))
    key_points = load_lidar_points(frame.lidar.path)
    ego_SE3_lidar = frame.lidar_calibration.ego_SE3_lidar
    shifted = key_points.copy()
    sweep_lidar_SE3_key_lidar = (
        ego_SE3_lidar.inverse()
        .compose(SE3(np.eye(3), np.array([2.0, 0.0, 0.0])))
        .compose(ego_SE3_lidar)
    )
    shifted[:, :3] = sweep_lidar_SE3_key_lidar.transform_points(key_points[:, :3])
    sweep_path = tmp_path / "sweep.pcd.bin"
    shifted.tofile(sweep_path)
    frame.sweeps = [LidarSweep(sweep_path, sweep_pose, frame.timestamp_us - 50_000)]
    one, _ = keyframe_points_ego(frame, 1)
    two, age = keyframe_points_ego(frame, 2)
    assert len(two) == 2 * len(one)
    np.testing.assert_allclose(two[len(one) :], one, atol=1e-4)
    np.testing.assert_allclose(age[len(one) :], 0.05)
    boxes = LidarGeometricDetector(LidarGeometricConfig(num_sweeps=2)).detect_frames([frame])[0]
    assert boxes.class_name[np.argmax(boxes.score)] == "car"


def test_bad_lidar_file_is_named(tmp_path):
    path = tmp_path / "broken.pcd.bin"
    np.zeros(7, dtype=np.float32).tofile(path)
    with pytest.raises(DatasetError, match="broken.pcd.bin"):
        load_lidar_points(path)


def test_velocity_and_heading_from_an_earlier_sweep(tmp_path):
    pose = SE3(rotation_from_yaw(0.4), np.array([50.0, -20.0, 0.0]))
    # A car driving backwards in the ego frame (heading pi) at 10 m/s, seen now and 0.3 s before,
    # and a parked car that does not move.
    rows_now = [("car", 10.0, 7.0, np.pi, 1.9, 4.5, 1.6), ("car", -10.0, -6.0, 0.2, 1.9, 4.6, 1.5)]
    rows_before = [
        ("car", 13.0, 7.0, np.pi, 1.9, 4.5, 1.6),
        ("car", -10.0, -6.0, 0.2, 1.9, 4.6, 1.5),
    ]
    before = make_frame(tmp_path, box_set(rows_before), token="before", global_SE3_ego=pose)
    frame = make_frame(tmp_path, box_set(rows_now), token="now", global_SE3_ego=pose)
    frame.sweeps = [LidarSweep(before.lidar.path, pose, frame.timestamp_us - 300_000)]
    with_velocity = LidarGeometricDetector(LidarGeometricConfig(velocity_sweep_age_s=0.3))
    boxes = with_velocity.detect_frames([frame])[0]
    best = boxes[np.argsort(-boxes.score)[:2]]
    ego = best.transform(pose.inverse(), "ego", from_frame="global")
    moving = int(np.argmax(ego.center_m[:, 0]))
    # 10 m/s towards -x (ego), expressed in the global frame by the transform.
    np.testing.assert_allclose(ego.velocity_mps[moving], [-10.0, 0.0], atol=0.5)
    assert abs(wrap_angle(ego.yaw_rad[moving] - np.pi)) < np.deg2rad(3)
    np.testing.assert_allclose(ego.velocity_mps[1 - moving], [0.0, 0.0], atol=0.2)
    # By default, and without an earlier sweep, the velocity is unknown.
    assert np.isnan(LidarGeometricDetector().detect_frames([frame])[0].velocity_mps).all()
    frame.sweeps = []
    assert np.isnan(with_velocity.detect_frames([frame])[0].velocity_mps).all()


def _car_with_cabin(x: float, y: float, yaw: float) -> Boxes3D:
    """A car as two boxes: a 4.6 x 1.9 m body 1.0 m tall, and a 2.4 m cabin 1.5 m tall whose
    centre sits 0.6 m behind the body's (cabins sit behind the bonnet)."""
    back = -0.6 * np.array([np.cos(yaw), np.sin(yaw)])
    return Boxes3D(
        center_m=[[x, y, 0.5], [x + back[0], y + back[1], 0.75]],
        size_wlh_m=[[1.9, 4.6, 1.0], [1.8, 2.4, 1.5]],
        yaw_rad=[yaw, yaw],
        frame="ego",
    )


@pytest.mark.parametrize("yaw", [0.25, 0.25 + np.pi, -0.7, -0.7 + np.pi])
def test_a_parked_car_heads_away_from_its_cabin(yaw):
    # A single sweep cannot tell a car's front from its back by the outline (pi-ambiguous); its
    # profile can. Headings pointing backwards in the ego frame must be kept as they are.
    sensor = np.array([0.94, 0.0, 1.84])
    points = ray_cast(_car_with_cabin(9.0, 5.0, yaw), sensor)
    boxes = detect_boxes_ego(points, LidarGeometricConfig(), sensor[:2])
    best = int(np.argmax(boxes.score))
    assert boxes.class_name[best] == "car"
    assert abs(wrap_angle(boxes.yaw_rad[best] - yaw)) < np.deg2rad(3)
    # Without the profile cue the heading is the one pointing forward in the ego frame.
    plain = detect_boxes_ego(points, LidarGeometricConfig(roof_offset_min=0), sensor[:2])
    forward = wrap_angle(yaw + np.pi) if abs(wrap_angle(yaw)) > np.pi / 2 else yaw
    assert abs(wrap_angle(plain.yaw_rad[np.argmax(plain.score)] - forward)) < np.deg2rad(3)


def test_overhangs_above_a_gap_in_their_cell_are_dropped():
    # Cell A: a car's side from 0.3 to 1.5 m, canopy at 2.6 and 2.9 m (1.1 m gap above 1.5 m).
    # Cell B (2 m away): only canopy, nothing under it in that cell: kept (no gap above a return).
    xy = np.array([[5.05, 0.05]] * 7 + [[7.05, 0.05]] * 2)
    height = np.array([0.3, 0.7, 1.1, 1.5, 2.6, 2.9, 1.2, 2.7, 3.0])
    keep = below_overhangs(xy, height, cell_m=0.3, gap_m=0.6)
    np.testing.assert_array_equal(keep, [True] * 4 + [False, False, True, True, True])


def test_earlier_sweeps_count_only_next_to_keyframe_returns():
    # A parked car returns at x = 10 m now and before; a moving car was at x = 20 m 0.3 s ago and
    # is at 23 m now: its old returns are a trail and go, the parked car's older ones stay.
    xy = np.array([[10.0, 0.0], [23.0, 0.0], [10.2, 0.1], [20.0, 0.0]])
    lag = np.array([0.0, 0.0, 0.3, 0.3])
    keep = supported_by_keyframe(xy, lag, 52.0, 0.3, 0.3)
    np.testing.assert_array_equal(keep, [True, True, True, False])


def test_beam_elevations_are_read_off_the_returns():
    # Every beam that reaches the ground within range (below about -1.5 degrees from 1.84 m
    # over 70 m) is one ring, at its own elevation.
    sensor = np.array([0.94, 0.0, 1.84])
    points = ray_cast(Boxes3D.empty("ego"), sensor)
    rings = np.degrees(ring_elevations_rad(points, sensor))
    beams = BEAM_ELEVATION_DEG[BEAM_ELEVATION_DEG < -1.6]
    assert len(rings) == len(beams)
    np.testing.assert_allclose(rings, np.sort(beams), atol=0.05)


def test_headroom_reaches_the_next_beam_up():
    sensor = np.array([0.0, 0.0, 2.0])
    rings = np.radians([-3.0, -2.0, -1.0, 0.0])
    tan = np.tan(np.radians([-3.0, -2.0, -1.0, 0.0, 1.0]))
    top = np.array([[40.0, 0.0, 2.0 + 40 * tan[1]], [0.0, 30.0, 2.0 + 30 * tan[3]]])
    # On the -2 degree beam at 40 m: up to where the -1 degree beam crosses 40 m. On the top
    # ring found: up to the next beam at the same 1 degree spacing.
    expected = [40 * (tan[2] - tan[1]), 30 * (tan[4] - tan[3])]
    np.testing.assert_allclose(top_headroom_m(top, sensor, rings), expected, rtol=1e-9)
    # A ring too sparse to be found does not widen the gap beyond its neighbours' spacing.
    gappy = np.radians([-4.0, -3.0, -2.0, 0.0, 1.0])
    np.testing.assert_allclose(top_headroom_m(top[:1], sensor, gappy), expected[:1], rtol=1e-9)


def test_a_low_top_is_excused_by_the_headroom_not_a_high_one():
    car, barrier = class_index("car"), class_index("barrier")
    # A car's typical 4.61 x 1.95 m footprint whose highest return is 0.6 m up: by height alone it is a barrier
    # (typical 0.98 m) rather than a car (1.72 m); with the next beam 0.9 m higher the car's
    # deficit log(0.6 / 1.72) is judged with tolerance hypot(0.35, log(1 + 0.9 / 0.6)).
    args = (np.array([4.61]), np.array([1.95]), np.array([0.6]), 0.35)
    plain, excused = size_cost(*args)[0], size_cost(*args, np.array([0.9]))[0]
    deficit = np.log(0.6 / 1.72)
    assert plain[car] == pytest.approx((deficit / 0.35) ** 2, rel=1e-9)
    tolerance = np.hypot(0.35, np.log(1 + 0.9 / 0.6))
    assert excused[car] == pytest.approx((deficit / tolerance) ** 2, rel=1e-9)
    # A box taller than the class pays as before: the headroom only excuses missing height.
    tall = (np.array([0.49]), np.array([2.49]), np.array([1.5]), 0.35)
    assert size_cost(*tall, np.array([0.9]))[0, barrier] == pytest.approx(
        size_cost(*tall)[0, barrier], rel=1e-12
    )


def _polar(range_m, azimuth_deg, elevation_deg=0.0):
    """(N, 3) sensor-frame points at horizontal ranges and azimuths on one elevation."""
    range_m, az = np.asarray(range_m, dtype=np.float64), np.radians(azimuth_deg)
    z = range_m * np.tan(np.radians(elevation_deg))
    return np.column_stack(
        [range_m * np.cos(az), range_m * np.sin(az), np.broadcast_to(z, az.shape)]
    )


def test_scan_neighbours_are_consecutive_firings_of_one_beam_within_the_grazing_gap():
    # Beam at 0 degrees (a far car's side, a wall behind a gap, a point either side of the
    # azimuth wrap) and a ground beam at -2 degrees, 20 returns 0.2 degrees apart at 20 m: the
    # scanner's step is the median spacing, 0.2 degrees.
    side = _polar([40.0, 41.2, 44.0, 44.0, 44.0], [0.0, 0.2, 0.4, 0.8, 1.0])
    behind = _polar([30.0, 60.0, 30.0], [10.0, 10.2, 10.4])
    wrap = _polar([20.0, 20.0], [179.9, -179.9])
    ground = _polar(np.full(20, 20.0), 100.0 + 0.2 * np.arange(20), -2.0)
    points = np.concatenate([side, behind, wrap, ground])
    rings = np.radians([-2.0, 0.0])
    pairs = scan_neighbour_pairs(points, rings, np.radians(5.0), 2.0)
    # Allowed gap: near range * 0.2 degrees / sin(5 degrees), at most 2 m. Side: 40 -> 41.2 m is
    # a 1.208 m gap (sqrt(1.2^2 + 40 * 41.2 * step^2)) under 40 * 0.0349 / 0.0872 = 1.602 m:
    # joined; 41.2 -> 44 m is 2.80 m: not; 44 m at 0.4 -> 0.8 degrees skips a firing: not;
    # 0.8 -> 1.0 degrees at 44 m is 0.154 m: joined. Behind: the 60 m return between the two
    # 30 m ones separates them. Wrap: 179.9 -> -179.9 degrees is one step: joined. Ground: each
    # to the next (0.070 m).
    expected = {(0, 1), (3, 4), (8, 9)} | {(10 + k, 11 + k) for k in range(19)}
    assert {tuple(p) for p in pairs.tolist()} == expected
    step = np.radians(0.2)
    gap = np.sqrt(1.2**2 + 2 * 40.0 * 41.2 * (1 - np.cos(step)))
    assert gap == pytest.approx(1.2083, abs=1e-4) and 40 * step / np.sin(np.radians(5)) > gap
    # A cap under that gap drops the side's first pair; no grazing angle, no pairs.
    capped = scan_neighbour_pairs(points, rings, np.radians(5.0), 1.0)
    assert {tuple(p) for p in capped.tolist()} == expected - {(0, 1)}
    assert len(scan_neighbour_pairs(points, rings, 0.0, 2.0)) == 0


def test_a_far_cars_grazing_side_is_one_car_and_a_parked_row_stays_apart(tmp_path):
    # At 30 m in the next lane (7.6 degrees' grazing), a car's long side returns points 0.3
    # degrees apart, up to 0.9 m: the grid splits it (a barrier and a bicycle), the beam joins it.
    frame = make_frame(tmp_path, box_set([("car", 30.0, 4.0, 0.0, 1.9, 4.6, 1.6)]))
    ego = frame.global_SE3_ego.inverse()
    plain = LidarGeometricDetector().detect_frame(frame)  # scan links are off by default
    assert "car" not in plain.class_name.tolist()
    linked = LidarGeometricDetector(LidarGeometricConfig(scan_link_grazing_deg=5.0))
    boxes = linked.detect_frame(frame).transform(ego, "ego", from_frame="global")
    assert boxes.class_name.tolist() == ["car"]
    np.testing.assert_allclose(boxes.center_m[0, :2], [30.0, 4.0], atol=0.1)
    assert abs(wrap_angle(boxes.yaw_rad[0])) < np.deg2rad(3)
    # Two cars parked nose to tail 1 m apart at 12.7-22.9 m: the near one's side and rear join
    # into one car where the grid split them; the row does not join into one object (no box
    # longer than a car; the far car, partly hidden, stays in pieces as without the links).
    row = box_set([("car", 15.0, 4.0, 0.0, 1.9, 4.6, 1.6), ("car", 20.6, 4.0, 0.0, 1.9, 4.6, 1.6)])
    frame = make_frame(tmp_path, row, token="row")
    boxes = linked.detect_frame(frame).transform(ego, "ego", from_frame="global")
    near = np.hypot(boxes.center_m[:, 0] - 15.0, boxes.center_m[:, 1] - 4.0) < 0.1
    assert boxes.class_name[near].tolist() == ["car"]
    assert abs(wrap_angle(boxes.yaw_rad[near][0])) < np.deg2rad(3)
    assert boxes.size_wlh_m[:, 1].max() < 4.7
    plain = LidarGeometricDetector().detect_frame(frame).transform(ego, "ego", from_frame="global")
    assert not (np.hypot(plain.center_m[:, 0] - 15.0, plain.center_m[:, 1] - 4.0) < 0.1).any()


def test_a_join_stands_only_where_it_makes_one_car():
    # A 4.6 x 1.9 m car outline (side along y = 3 m, rear at x = 20 m), 1.5 m tall, split into
    # two pieces at x = 22 m; a row of two 2.5 m barrier faces 0.5 m apart along y = -5 m, 1.0 m
    # tall; two parked cars' sides 1 m apart along y = 8 m, 1.5 m tall. Each pair of pieces is
    # joined by scan links.
    side = np.column_stack([np.linspace(20.0, 24.6, 24), np.full(24, 3.0)])
    rear = np.column_stack([np.full(10, 20.0), np.linspace(3.1, 4.9, 10)])
    car = np.concatenate([side, rear])
    row = np.column_stack(
        [np.r_[np.linspace(10, 12.5, 10), np.linspace(13, 15.5, 10)], [-5.0] * 20]
    )
    parked = np.column_stack(
        [np.r_[np.linspace(30, 34.6, 12), np.linspace(35.6, 40.2, 12)], [8.0] * 24]
    )
    parked = np.concatenate([parked, [[30.0, 8.9], [30.0, 9.8]]])
    xy = np.concatenate([car, row, parked])
    height = np.r_[np.full(len(car), 1.5), np.full(20, 1.0), np.full(26, 1.5)]
    piece = np.r_[
        np.where(car[:, 0] < 22.0, 0, 1), np.repeat([2, 3], 10), np.repeat([4, 5], 12), 4, 4
    ]
    joined = np.repeat([0, 1, 2], [len(car), 20, 26])
    labels = accept_joins(xy, height, piece, joined, LidarGeometricConfig())
    # The car's rectangle is its typical size (car cost 0.16, the next class, truck, 4.3): one
    # cluster. The barrier row is best a car too (5.5 m long: (log(5.5 / 4.61) / 0.15)^2 = 1.4,
    # its thin side free, height (log(1.0 / 1.72) / 0.35)^2 = 2.4) but a line, not half a car
    # wide: its pieces stay apart. The parked pair (11.2 x 1.8 m) is best a bus, not a car.
    assert len(set(labels[: len(car)].tolist())) == 1
    # The other four pieces are four clusters, one each (labels and pieces pair one-to-one).
    rest = slice(len(car), None)
    pairs = set(zip(labels[rest].tolist(), piece[rest].tolist(), strict=True))
    assert len(pairs) == len({a for a, _ in pairs}) == len({b for _, b in pairs}) == 4
    assert len(set(labels.tolist())) == 5
    # Without classes allowed to join, nothing is joined.
    none = accept_joins(xy, height, piece, joined, LidarGeometricConfig(scan_link_classes=()))
    np.testing.assert_array_equal(none, piece)


def test_returns_above_a_gap_in_their_cluster_are_dropped():
    # Cluster 0: a car's side from 0.3 to 1.5 m and a sign's returns at 2.7 and 2.8 m (1.2 m gap).
    # Cluster 1: a truck's steps of 0.5 m up to 2.8 m (no gap of 0.6 m): all kept. The gap is
    # per point (the upper one decides): 1.5 m at the sign's returns keeps them.
    group = np.r_[np.zeros(7, dtype=np.int64), np.ones(6, dtype=np.int64)]
    height = np.array([1.5, 0.3, 2.8, 0.7, 1.1, 2.7, 1.3, 0.3, 0.8, 1.3, 1.8, 2.3, 2.8])
    keep = below_first_gap(group, height, 0.6)
    np.testing.assert_array_equal(keep, [True, True, False, True, True, False] + [True] * 7)
    wide = np.where(height > 2.5, 1.5, 0.6)
    assert below_first_gap(group, height, wide).all()


def test_cell_tops_are_the_highest_return_per_cell():
    # Cells of 0.3 m: (0.1, 0.1) and (0.2, 0.25) share cell (0, 0); (1.0, 1.0) is alone.
    xy = np.array([[0.1, 0.1], [0.2, 0.25], [1.0, 1.0]])
    np.testing.assert_allclose(cell_tops_m(xy, np.array([0.3, 1.0, 0.35]), 0.3), [1.0, 1.0, 0.35])


def test_a_kerb_beside_a_car_leaves_its_box_alone():
    # A 4.5 x 1.9 x 1.6 m car at (12, 4) and a kerb 0.32 m tall (its returns 0.07 m above the
    # 0.25 m clearance) along its near side 0.1 m away.
    sensor = np.array([0.94, 0.0, 1.84])
    scene = Boxes3D(
        center_m=[[12.0, 4.0, 0.8], [12.0, 2.85, 0.16]],
        size_wlh_m=[[1.9, 4.5, 1.6], [0.2, 10.0, 0.32]],
        yaw_rad=[0.0, 0.0],
        frame="ego",
    )
    points = ray_cast(scene, sensor)
    fixed = detect_boxes_ego(points, LidarGeometricConfig(min_cell_top_m=0.4), sensor[:2])
    assert fixed.class_name.tolist() == ["car"]
    # The car's seen faces only: its typical width (1.95 m) grown away from the sensor.
    assert fixed.size_wlh_m[0, 0] == pytest.approx(1.95)
    assert np.hypot(*(fixed.center_m[0, :2] - [12.0, 4.0])) < 0.1
    # Without the cell test the kerb's returns join the car: its box reaches over the kerb.
    plain = detect_boxes_ego(points, LidarGeometricConfig(), sensor[:2])
    assert plain.size_wlh_m[0, 0] > 2.05
    assert plain.center_m[0, 1] < 3.85


STEP, NO_STEP = {"step_tall_m": 2.4}, {"step_tall_m": 0.0}


def _scene(rows: list[tuple[float, float, float, float, float, float, float]]) -> Boxes3D:
    """Boxes (x, y, yaw, w, l, bottom, top) in the ego frame, metres: a box may float (a crown)."""
    x, y, yaw, w, length, bottom, top = (
        np.array(v, dtype=np.float64) for v in zip(*rows, strict=True)
    )
    return Boxes3D(
        center_m=np.column_stack([x, y, (bottom + top) / 2]),
        size_wlh_m=np.column_stack([w, length, top - bottom]),
        yaw_rad=yaw,
        frame="ego",
    )


def _lattice(lo, hi, step: float = 0.1) -> np.ndarray:
    """(P, 3) points every ``step`` metres over the box [lo, hi] (a face where lo = hi on an axis)."""
    axes = [
        np.arange(a, b + 1e-9, step) if b > a else np.array([a])
        for a, b in zip(lo, hi, strict=True)
    ]
    return np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)


def test_a_car_beside_a_tree_is_cut_from_it():
    # A 4.5 x 1.9 x 1.5 m car parked along x at (10, -4), seen from the origin: its near side
    # (y = -3.05) and rear (x = 7.75) from 0.3 m up, its roof. A tree on the sidewalk beyond
    # it: a 0.3 m trunk 0.15 m from the car's far side (y -5.1 to -5.4), seen above the car
    # from 1.3 to 3.4 m, and its crown, foliage filling 3 m along x and y -4.5 to -7.0 from 2.0
    # to 3.4 m: 0.45 m over the car, 0.5 m above its roof (less than the 0.6 m overhang gap:
    # the crown stays). The grid joins them into one cluster.
    car = np.vstack(
        [
            _lattice((7.75, -3.05, 0.3), (12.25, -3.05, 1.5)),
            _lattice((7.75, -4.95, 0.3), (7.75, -3.05, 1.5)),
            _lattice((7.75, -4.95, 1.5), (12.25, -3.05, 1.5)),
        ]
    )
    trunk = _lattice((10.35, -5.1, 1.3), (10.65, -5.1, 3.4))
    crown = _lattice((9.0, -7.0, 2.0), (12.0, -4.5, 3.4), 0.25)
    ground = _lattice((-20.0, -20.0, 0.0), (20.0, 20.0, 0.0), 0.5)
    points = np.vstack([car, trunk, crown, ground])
    sensor_xy = np.zeros(2)
    merged = detect_boxes_ego(points, LidarGeometricConfig(**NO_STEP), sensor_xy)
    # One cluster from the car's near side to the crown's far side (3.95 m), up to 3.4 m: no
    # car box.
    assert "car" not in merged.class_name.tolist()
    boxes = detect_boxes_ego(points, LidarGeometricConfig(**STEP), sensor_xy)
    cars = boxes.class_name == "car"
    assert cars.sum() == 1
    # Cut where the crown begins, 1.45 m from the near side: the car's seen faces (4.5 m long)
    # are grown away from the sensor to the typical 4.61 x 1.95 m; its top is its roof's.
    np.testing.assert_allclose(boxes.size_wlh_m[cars], [[1.95, 4.61, 1.5]], atol=0.02)
    expected_xy = [7.75 + 4.61 / 2, -3.05 - 1.95 / 2]
    np.testing.assert_allclose(boxes.center_m[cars, :2], [expected_xy], atol=0.02)
    assert abs(wrap_angle(2 * boxes.yaw_rad[cars][0])) < np.deg2rad(1.5)
    # The tree (crown, trunk and the car's roof under the crown) is no car.
    assert (boxes.center_m[~cars, 1] < -4.5).all()


@pytest.mark.parametrize("bed_m", [5.5, 2.2])
def test_a_truck_with_a_low_bed_a_bus_and_a_van_stay_whole(bed_m):
    # Along x at y = -5: a flatbed truck, its cab 2.0 m long and 3.0 m tall, its bed 1.3 m tall
    # (a tall step along its length, none across it: the bed is longer than wide, or the cab's
    # tall returns cover the whole width of a short bed); along x at y = +6: a 2.5 m tall van
    # and an 11 m bus, flat roofs. Each is one box as without step cuts (with step_max_cover
    # above 1, the short bed is cut off its cab as a car).
    sensor = np.array([0.94, 0.0, 1.84])
    cab_x = 14.0
    bed_x = cab_x - 1.0 - bed_m / 2
    scene = _scene(
        [
            (cab_x, -5.0, 0.0, 2.5, 2.0, 0.0, 3.0),
            (bed_x, -5.0, 0.0, 2.5, bed_m, 0.0, 1.3),
            (-12.0, 6.0, 0.0, 2.0, 5.5, 0.0, 2.5),
            (14.0, 6.0, 0.0, 2.9, 11.0, 0.0, 3.2),
        ]
    )
    points = ray_cast(scene, sensor)
    plain = detect_boxes_ego(
        points, LidarGeometricConfig(**NO_STEP, second_class_margin=0.0), sensor[:2]
    )
    boxes = detect_boxes_ego(
        points, LidarGeometricConfig(**STEP, second_class_margin=0.0), sensor[:2]
    )
    np.testing.assert_array_equal(boxes.center_m, plain.center_m)
    np.testing.assert_array_equal(boxes.size_wlh_m, plain.size_wlh_m)
    np.testing.assert_array_equal(boxes.label, plain.label)
    truck = boxes.center_m[:, 1] < 0
    assert truck.sum() == 1
    # The truck's seen faces span its length (cab and bed), its top is the cab's.
    assert boxes.size_wlh_m[truck, 1][0] >= 2.0 + bed_m - 0.1
    assert boxes.size_wlh_m[truck, 2][0] == pytest.approx(3.0, abs=0.05)
    covered = LidarGeometricConfig(**STEP, second_class_margin=0.0, step_max_cover=2.0)
    cut = detect_boxes_ego(points, covered, sensor[:2])
    assert (cut.center_m[:, 1] < 0).sum() == (1 if bed_m > 2.5 else 2)


def test_step_cut_by_hand():
    # A car's returns at u in [0, 1.9) (0.1 m apart, v in [0, 4.5], 1.4 m high) and a tree's at
    # u in [2.0, 3.0] (v in [1, 3], 3.0 m high). Slices of 0.2 m from u = 0: slices 0-9 are
    # low, slice 10 (u from 2.0) holds tall returns: the cut is at u = 2.0, the low part below
    # it, holding the car's 19 x 46 returns.
    u_car, v_car = np.meshgrid(np.arange(0.0, 1.85, 0.1), np.arange(0.0, 4.55, 0.1))
    u_tree, v_tree = np.meshgrid(np.arange(2.0, 3.05, 0.1), np.arange(1.0, 3.05, 0.1))
    xy = np.column_stack(
        [np.r_[u_car.ravel(), u_tree.ravel()], np.r_[v_car.ravel(), v_tree.ravel()]]
    )
    height = np.r_[np.full(u_car.size, 1.4), np.full(u_tree.size, 3.0)]
    args = (0.2, 2.1, 2.4, 1.2, 1.0, 5)
    cuts = step_cuts(xy, height, np.array([0]), np.array([0.0]), *args)
    np.testing.assert_allclose(cuts, [[0.0, 2.0, 1.0, 19 * 46]], atol=1e-9)
    # The tree's tall returns cover 2 of the car's 4.5 m along the cut: under 0.4 of it, none.
    narrow = step_cuts(xy, height, np.array([0]), np.array([0.0]), *args, max_cover=0.4)
    assert narrow[0, 2] == 0.0
    # A low part narrower than 1.2 m across (u < 1.0), or longer across than along the cut
    # (the car's v only up to 1.5 m), is no vehicle's side: no cut.
    for keep in (~((xy[:, 0] >= 1.0) & (xy[:, 0] < 2.0)), (xy[:, 1] <= 1.5) | (height > 2.0)):
        cut = step_cuts(xy[keep], height[keep], np.array([0]), np.array([0.0]), *args)
        assert cut[0, 2] == 0.0


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"scan_link_classes": ("lorry",)}, "scan_link_classes"),
        ({"min_cell_top_m": -0.1}, "min_cell_top_m"),
        ({"step_tall_m": 2.0}, "step_tall_m"),
        ({"step_bin_m": 0.0}, "step_bin_m"),
        ({"step_max_cover": -0.1}, "step_max_cover"),
    ],
)
def test_bad_options_are_named(options, key):
    with pytest.raises(ValueError, match=key):
        LidarGeometricConfig(**options)
