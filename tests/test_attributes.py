"""Ego-frame attributes: conventions on named cases, the all-vertices sidedness rule, velocities,
future states (never extrapolated), pairwise relations and the Parquet file."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from autolabel.attributes import (
    AttributeConfig,
    EgoShape,
    ObjectAttributes,
    compute_attributes,
    pairwise_relations,
    sidedness_all_vertices,
)
from autolabel.boxes import Boxes3D
from autolabel.classes import CLASS_INDEX
from calib.projection import project_points
from calib.rotation import rotation_from_yaw
from calib.se3 import SE3
from tests.realdata import NUSCENES_MMDET3D, realdata_dir, requires_realdata

EGO_YAW = math.radians(30.0)
EGO_XY = np.array([100.0, 50.0])


def ego_to_global_xy(x_ego: float, y_ego: float, ego_xy=EGO_XY, ego_yaw=EGO_YAW) -> list[float]:
    """By hand: rotate by the ego yaw, then add the ego position."""
    c, s = math.cos(ego_yaw), math.sin(ego_yaw)
    return [ego_xy[0] + c * x_ego - s * y_ego, ego_xy[1] + s * x_ego + c * y_ego]


def ego_pose(xy=EGO_XY, yaw=EGO_YAW) -> SE3:
    return SE3(rotation_from_yaw(yaw), np.array([xy[0], xy[1], 0.0]))


def boxes(xy_global, yaw_global, track_ids, size_wlh=(1.0, 1.0, 1.5), velocity=None, label=0):
    n = len(track_ids)
    centers = np.array([[x, y, 0.8] for x, y in xy_global]).reshape(n, 3)
    return Boxes3D(
        center_m=centers,
        size_wlh_m=np.tile(size_wlh, (n, 1)),
        yaw_rad=np.asarray(yaw_global, dtype=float),
        velocity_mps=None if velocity is None else np.asarray(velocity, dtype=float),
        label=np.full(n, label),
        track_id=np.asarray(track_ids),
    )


def single_frame(xy_ego_list, yaw_ego_deg=None, size_wlh=(1.0, 1.0, 1.5), config=None):
    """Objects given in the ego frame, converted by hand to the global frame, run through the pipeline."""
    n = len(xy_ego_list)
    yaw_ego = np.zeros(n) if yaw_ego_deg is None else np.radians(yaw_ego_deg)
    xy_global = [ego_to_global_xy(x, y) for x, y in xy_ego_list]
    frame = boxes(xy_global, yaw_ego + EGO_YAW, np.arange(n), size_wlh)
    return compute_attributes(np.array([0.0]), [ego_pose()], [frame], config)


class TestConventions:
    """Ahead = 0 deg and 12 o'clock, left = +90 and 9, right = -90 and 3, behind = 180 and 6."""

    def test_named_directions_through_a_rotated_ego(self):
        attrs = single_frame([(20.0, 0.0), (0.0, 20.0), (0.0, -20.0), (-20.0, 0.0)])
        np.testing.assert_allclose(attrs.bearing_deg, [0.0, 90.0, -90.0, 180.0], atol=1e-9)
        np.testing.assert_array_equal(attrs.clock, [12, 9, 3, 6])
        np.testing.assert_allclose(attrs.distance_m, 20.0)
        np.testing.assert_allclose(attrs.x_ego_m, [20.0, 0.0, 0.0, -20.0], atol=1e-9)
        np.testing.assert_allclose(attrs.y_ego_m, [0.0, 20.0, -20.0, 0.0], atol=1e-9)
        np.testing.assert_array_equal(attrs.is_front, [True, False, False, False])
        np.testing.assert_array_equal(attrs.is_left, [False, True, False, False])
        np.testing.assert_array_equal(attrs.is_right, [False, False, True, False])
        np.testing.assert_array_equal(attrs.is_behind, [False, False, False, True])

    def test_behind_is_plus_180_not_minus(self):
        # A point a hair to the right of straight behind has bearing close to -180; exactly
        # behind is +180 (range (-180, 180]).
        attrs = single_frame([(-10.0, 0.0), (-10.0, -1e-3), (-10.0, 1e-3)])
        assert attrs.bearing_deg[0] == pytest.approx(180.0)
        assert attrs.bearing_deg[1] == pytest.approx(-180.0 + math.degrees(1e-4), abs=1e-6)
        assert attrs.bearing_deg[2] == pytest.approx(180.0 - math.degrees(1e-4), abs=1e-6)
        np.testing.assert_array_equal(attrs.clock, [6, 6, 6])

    def test_intermediate_clock_hours(self):
        # 1 o'clock is 30 deg to the right, 10 o'clock 60 deg to the left, 4 o'clock 120 right.
        deg = np.radians([-30.0, 60.0, -120.0, 150.0])
        attrs = single_frame([(10 * math.cos(d), 10 * math.sin(d)) for d in deg])
        np.testing.assert_allclose(attrs.bearing_deg, [-30.0, 60.0, -120.0, 150.0], atol=1e-9)
        np.testing.assert_array_equal(attrs.clock, [1, 10, 4, 7])

    def test_distance_ground_plane_and_3d(self):
        pose = SE3(rotation_from_yaw(EGO_YAW), np.array([100.0, 50.0, 2.0]))
        xy = ego_to_global_xy(3.0, 4.0)
        frame = Boxes3D(
            np.array([[xy[0], xy[1], 2.0 + 12.0]]), np.ones((1, 3)), np.zeros(1), track_id=[7]
        )
        attrs = compute_attributes(np.array([0.0]), [pose], [frame])
        assert attrs.distance_m[0] == pytest.approx(5.0)
        assert attrs.distance_3d_m[0] == pytest.approx(13.0)
        assert attrs.z_ego_m[0] == pytest.approx(12.0)

    def test_relative_heading_and_ego_frame_velocity(self):
        # Object heading 45 deg left of the ego's heading, moving at 5 m/s straight to the ego's left.
        c, s = math.cos(EGO_YAW), math.sin(EGO_YAW)
        xy = ego_to_global_xy(10.0, 0.0)
        frame = boxes([xy], [EGO_YAW + math.radians(45.0)], [1], velocity=[[-5 * s, 5 * c]])
        attrs = compute_attributes(np.array([0.0]), [ego_pose()], [frame])
        assert attrs.relative_heading_deg[0] == pytest.approx(45.0)
        assert attrs.vx_ego_mps[0] == pytest.approx(0.0, abs=1e-12)
        assert attrs.vy_ego_mps[0] == pytest.approx(5.0)
        assert attrs.speed_mps[0] == pytest.approx(5.0)
        assert not attrs.velocity_from_positions[0]

    def test_relative_heading_wraps_to_plus_180(self):
        attrs = single_frame([(10.0, 0.0), (10.0, 5.0)], yaw_ego_deg=[180.0, -100.0])
        np.testing.assert_allclose(attrs.relative_heading_deg, [180.0, -100.0], atol=1e-9)

    def test_matches_nuscenes_devkit_global_to_ego(self):
        """Random boxes and a tilted ego pose against the devkit's Box.translate / Box.rotate."""
        from nuscenes.utils.data_classes import Box
        from pyquaternion import Quaternion

        rng = np.random.default_rng(0)
        n = 20
        q_ego = Quaternion(axis=[0.05, 0.02, 1.0], angle=1.1)
        t_ego = np.array([412.0, -1180.0, 0.7])
        pose = SE3(q_ego.rotation_matrix, t_ego)
        centers = t_ego + rng.uniform(-40, 40, (n, 3)) * [1, 1, 0.05]
        yaws = rng.uniform(-math.pi, math.pi, n)
        sizes = rng.uniform(0.5, 5.0, (n, 3))
        frame = Boxes3D(centers, sizes, yaws, track_id=np.arange(n))
        attrs = compute_attributes(np.array([0.0]), [pose], [frame])
        for i in range(n):
            box = Box(centers[i], sizes[i], Quaternion(axis=[0, 0, 1], angle=yaws[i]))
            box.translate(-t_ego)
            box.rotate(q_ego.inverse)
            np.testing.assert_allclose(
                [attrs.x_ego_m[i], attrs.y_ego_m[i], attrs.z_ego_m[i]], box.center, atol=1e-9
            )
            yaw_dev = math.atan2(
                box.orientation.rotation_matrix[1, 0], box.orientation.rotation_matrix[0, 0]
            )
            assert math.radians(attrs.relative_heading_deg[i]) == pytest.approx(yaw_dev, abs=1e-9)
            expected_bearing = math.degrees(math.atan2(box.center[1], box.center[0]))
            assert attrs.bearing_deg[i] == pytest.approx(expected_bearing, abs=1e-9)

    def test_size_columns_and_ego_comparison(self):
        ego = EgoShape(length_m=4.0, width_m=2.0, height_m=1.5, center_x_m=1.0)  # volume 12
        attrs = single_frame(
            [(20.0, 0.0)], size_wlh=(2.5, 10.0, 3.0), config=AttributeConfig(ego=ego)
        )
        assert (attrs.width_m[0], attrs.length_m[0], attrs.height_m[0]) == (2.5, 10.0, 3.0)
        assert attrs.footprint_m2[0] == pytest.approx(25.0)
        assert attrs.volume_m3[0] == pytest.approx(75.0)
        assert attrs.volume_ratio_to_ego[0] == pytest.approx(75.0 / 12.0)
        assert attrs.is_larger_than_ego[0]
        small = single_frame(
            [(20.0, 0.0)], size_wlh=(0.6, 0.6, 1.7), config=AttributeConfig(ego=ego)
        )
        assert not small.is_larger_than_ego[0]


class TestSidednessMetaVQA:
    """MetaVQA appendix A.1 / Fig. 9: all vertices of B beyond A's extreme vertex along V's side."""

    EGO = EgoShape(
        length_m=4.0, width_m=2.0, height_m=1.5, center_x_m=1.0
    )  # x in [-1, 3], y in [-1, 1]

    def run(self, xy_ego, size_wlh, yaw_ego_deg=0.0):
        return single_frame(
            [xy_ego],
            yaw_ego_deg=[yaw_ego_deg],
            size_wlh=size_wlh,
            config=AttributeConfig(ego=self.EGO),
        )

    def flags(self, attrs):
        return (attrs.is_left[0], attrs.is_right[0], attrs.is_front[0], attrs.is_behind[0])

    def test_centre_left_but_a_vertex_inside_the_ego_lane_is_not_left(self):
        # Centre at y = 1.8 (bearing far to the left) but width 2 puts its right edge at 0.8 < 1.
        assert self.flags(self.run((0.0, 1.8), (2.0, 1.0, 1.5))) == (False, False, False, False)
        # Narrower box: right edge at 1.3 > 1 -> all vertices left of the ego's leftmost vertex.
        assert self.flags(self.run((0.0, 1.8), (1.0, 1.0, 1.5))) == (True, False, False, False)

    def test_rotation_of_b_moves_its_vertices(self):
        # Length 4 along ego x: y extent [2.4, 3.4] -> left. Rotated 90 deg: y extent [0.9, 4.9],
        # its lowest vertices inside the ego's lateral extent -> not left, though the centre is.
        assert self.flags(self.run((0.0, 2.9), (1.0, 4.0, 1.5))) == (True, False, False, False)
        assert self.flags(self.run((0.0, 2.9), (1.0, 4.0, 1.5), 90.0)) == (
            False,
            False,
            False,
            False,
        )
        # Rotated 45 deg: half-diagonal reach in y is (4 + 1) / 2 / sqrt(2) = 1.77 -> min y 1.13 > 1.
        assert self.flags(self.run((0.0, 2.9), (1.0, 4.0, 1.5), 45.0)) == (
            True,
            False,
            False,
            False,
        )

    def test_front_and_behind_use_the_ego_box_ends(self):
        # Ego front at x = 3: a box from x = 3.5 to 5.5 is in front; one from 2.5 to 4.5 is not.
        assert self.flags(self.run((4.5, 0.0), (1.0, 2.0, 1.5))) == (False, False, True, False)
        assert self.flags(self.run((3.5, 0.0), (1.0, 2.0, 1.5))) == (False, False, False, False)
        # Ego rear at x = -1: a box from -4 to -2 is behind.
        assert self.flags(self.run((-3.0, 0.0), (1.0, 2.0, 1.5))) == (False, False, False, True)

    def test_combined_edges_and_the_beside_case(self):
        # "lf": left and in front. "rb": right and behind. Beside the ego: left only.
        assert self.flags(self.run((10.0, 6.0), (2.0, 4.0, 1.5))) == (True, False, True, False)
        assert self.flags(self.run((-10.0, -6.0), (2.0, 4.0, 1.5))) == (False, True, False, True)
        assert self.flags(self.run((1.0, 4.0), (2.0, 4.0, 1.5))) == (True, False, False, False)

    def test_rule_between_two_objects_and_its_symmetry(self):
        a = np.array([[[1, 1], [1, -1], [-1, -1], [-1, 1]]], dtype=float)  # A: unit square
        straddling = a + [0.0, 1.5]  # B overlaps A's left edge (y from 0.5 to 2.5)
        clear = a + [0.0, 2.5]  # B from 1.5 to 3.5
        v = np.array([1.0, 0.0])
        assert [f[0] for f in sidedness_all_vertices(a, straddling, v)] == [
            False,
            False,
            False,
            False,
        ]
        assert [f[0] for f in sidedness_all_vertices(a, clear, v)] == [True, False, False, False]
        # Symmetric: A is to the right of B exactly when B is to the left of A.
        assert [f[0] for f in sidedness_all_vertices(clear, a, v)] == [False, True, False, False]
        # The reference vector matters: with V pointing along +y, "left" is -x and "front" is +y.
        assert [f[0] for f in sidedness_all_vertices(a, clear, np.array([0.0, 1.0]))] == [
            False,
            False,
            True,
            False,
        ]


def moving_clip(n_frames=13, jitter_s=0.0, ego_speed_mps=10.0):
    """Ego driving straight at heading 30 deg; keyframes at 2 Hz (optionally jittered)."""
    rng = np.random.default_rng(1)
    t = 0.5 * np.arange(n_frames) + (rng.uniform(-jitter_s, jitter_s, n_frames) if jitter_s else 0)
    t[0] = 0.0
    heading = np.array([math.cos(EGO_YAW), math.sin(EGO_YAW)])
    ego_xy = EGO_XY + ego_speed_mps * t[:, None] * heading
    poses = [ego_pose(xy) for xy in ego_xy]
    return t, poses, ego_xy


class TestTemporal:
    def test_ego_speed_from_poses(self):
        t, poses, _ = moving_clip(jitter_s=0.03)
        frames = [boxes([ego_to_global_xy(30.0, 0.0)], [0.0], [1]) for _ in t]
        attrs = compute_attributes(t, poses, frames)
        np.testing.assert_allclose(attrs.ego_speed_mps, 10.0, rtol=1e-9)
        mats = np.stack([p.as_matrix() for p in poses])
        again = compute_attributes(t, mats, frames)  # (F, 4, 4) poses give the same result
        np.testing.assert_array_equal(again.ego_speed_mps, attrs.ego_speed_mps)

    def test_future_state_in_the_future_ego_frame(self):
        t, poses, _ = moving_clip()
        static = ego_to_global_xy(30.0, 0.0)  # stays put; the ego closes in at 10 m/s
        frames = [boxes([static], [0.0], [4], velocity=[[0.0, 0.0]]) for _ in t]
        attrs = compute_attributes(t, poses, frames)
        row0 = attrs.row_of(np.array([0]), np.array([4]))[0]
        np.testing.assert_array_equal(attrs.future_present[row0], [True, True, True])
        np.testing.assert_allclose(attrs.future_distance_m[row0], [20.0, 10.0, 0.0], atol=1e-9)
        np.testing.assert_allclose(attrs.future_bearing_deg[row0, :2], [0.0, 0.0], atol=1e-9)
        np.testing.assert_array_equal(attrs.future_frame_index[row0], [2, 4, 6])
        np.testing.assert_allclose(attrs.future_ego_speed_mps[row0], 10.0)
        np.testing.assert_allclose(attrs.future_speed_mps[row0], 0.0)

    def test_track_ending_at_t_plus_1_5_has_no_2s_or_3s_state(self):
        t, poses, _ = moving_clip()
        xy = ego_to_global_xy(30.0, 5.0)
        frames = [boxes([xy], [0.0], [9]) if ti <= 1.5 + 1e-9 else boxes([], [], []) for ti in t]
        attrs = compute_attributes(t, poses, frames)
        row0 = attrs.row_of(np.array([0]), np.array([9]))[0]
        np.testing.assert_array_equal(attrs.future_present[row0], [True, False, False])
        assert np.isfinite(attrs.future_distance_m[row0, 0])
        assert np.all(np.isnan(attrs.future_distance_m[row0, 1:]))
        assert np.all(np.isnan(attrs.future_bearing_deg[row0, 1:]))
        assert np.all(np.isnan(attrs.future_speed_mps[row0, 1:]))
        assert np.all(np.isnan(attrs.future_ego_speed_mps[row0, 1:]))
        np.testing.assert_array_equal(attrs.future_clock[row0, 1:], [0, 0])
        np.testing.assert_array_equal(attrs.future_frame_index[row0, 1:], [-1, -1])
        # The row at t = 1.0 s reaches t + 0.5 only: nothing at +1 s either.
        row2 = attrs.row_of(np.array([2]), np.array([9]))[0]
        assert not attrs.future_present[row2].any()

    def test_clip_end_and_gaps_are_absent_not_extrapolated(self):
        t, poses, _ = moving_clip(n_frames=7)  # 0 .. 3 s
        xy = ego_to_global_xy(30.0, 0.0)
        # The track misses the frame at 2.0 s (index 4).
        frames = [boxes([xy], [0.0], [3]) if f != 4 else boxes([], [], []) for f in range(len(t))]
        attrs = compute_attributes(t, poses, frames)
        row0 = attrs.row_of(np.array([0]), np.array([3]))[0]
        np.testing.assert_array_equal(attrs.future_present[row0], [True, False, True])
        row2 = attrs.row_of(np.array([2]), np.array([3]))[0]  # t = 1: +3 s is past the clip's end
        np.testing.assert_array_equal(attrs.future_present[row2], [False, True, False])

    def test_jittered_keyframes_find_the_nearest_frame(self):
        t, poses, _ = moving_clip(jitter_s=0.04)
        frames = [boxes([ego_to_global_xy(30.0, 0.0)], [0.0], [2]) for _ in t]
        attrs = compute_attributes(t, poses, frames)
        rows_with_room = attrs.time_s <= t[-1] - 3.0 - 0.1
        assert rows_with_room.sum() >= 5
        assert attrs.future_present[rows_with_room].all()
        # A tolerance below the jitter loses the states that are not exactly on a frame.
        strict = compute_attributes(t, poses, frames, AttributeConfig(future_time_tolerance_s=0.0))
        assert not strict.future_present[rows_with_room].all()

    def test_speed_from_track_positions_when_tracker_has_none(self):
        t, poses, _ = moving_clip(n_frames=5, jitter_s=0.03)
        vel = np.array([3.0, -4.0])
        start = np.array(ego_to_global_xy(10.0, 10.0))
        frames = [boxes([start + vel * ti], [0.0], [1]) for ti in t]  # velocity NaN
        frames.append(boxes([[0.0, 0.0]], [0.0], [2]))  # a one-frame track: no speed at all
        t = np.append(t, t[-1] + 0.5)
        poses.append(poses[-1])
        attrs = compute_attributes(t, poses, frames)
        track1 = attrs.track_id == 1
        np.testing.assert_allclose(attrs.speed_mps[track1], 5.0, rtol=1e-9)
        assert attrs.velocity_from_positions[track1].all()
        # Ego frame velocity: the global (3, -4) rotated by -30 deg.
        c, s = math.cos(EGO_YAW), math.sin(EGO_YAW)
        np.testing.assert_allclose(attrs.vx_ego_mps[track1], c * 3 + s * -4, rtol=1e-9)
        np.testing.assert_allclose(attrs.vy_ego_mps[track1], -s * 3 + c * -4, rtol=1e-9)
        track2 = attrs.track_id == 2
        assert np.isnan(attrs.speed_mps[track2]).all()
        assert not attrs.velocity_from_positions[track2].any()

    def test_tracker_velocity_preferred_unless_configured(self):
        t, poses, _ = moving_clip(n_frames=3)
        frames = [boxes([[float(i), 0.0]], [0.0], [1], velocity=[[0.0, 7.0]]) for i in range(3)]
        from_tracker = compute_attributes(t, poses, frames)
        np.testing.assert_allclose(from_tracker.speed_mps, 7.0)
        from_positions = compute_attributes(
            t, poses, frames, AttributeConfig(velocity_from="positions")
        )
        np.testing.assert_allclose(from_positions.speed_mps, 2.0)  # 1 m per 0.5 s


class TestPairwise:
    def make(self):
        # A at 10 m ahead, heading +90 deg in the ego frame (facing the ego's left).
        # B1 at (10, 5): left of A in ego axes, straight ahead of A from A's own viewpoint.
        # B2 at (15, 0): ahead in ego axes, to A's right from A's viewpoint.
        attrs = single_frame(
            [(10.0, 0.0), (10.0, 5.0), (15.0, 0.0)],
            yaw_ego_deg=[90.0, 0.0, 0.0],
            size_wlh=(1.0, 2.0, 1.5),
        )
        return attrs

    def test_bearing_clock_and_viewpoint(self):
        rel = pairwise_relations(self.make(), [0, 0], [0, 0], [1, 2])
        np.testing.assert_allclose(rel.distance_m, [5.0, 5.0])
        np.testing.assert_allclose(rel.bearing_deg, [90.0, 0.0], atol=1e-9)
        np.testing.assert_array_equal(rel.clock, [9, 12])
        np.testing.assert_allclose(rel.bearing_from_a_heading_deg, [0.0, -90.0], atol=1e-9)
        np.testing.assert_array_equal(rel.clock_from_a, [12, 3])
        np.testing.assert_allclose(rel.relative_heading_deg, [-90.0, -90.0], atol=1e-9)
        # A is 2 m long along ego y (x extent [9.5, 10.5]); B1 (y from 4.5) left of A's y max 1.
        np.testing.assert_array_equal(rel.b_is_left_of_a, [True, False])
        np.testing.assert_array_equal(rel.b_is_front_of_a, [False, True])

    def test_reverse_pair_and_size_comparisons(self):
        attrs = self.make()
        rel = pairwise_relations(attrs, [0], [1], [0])
        assert rel.b_is_right_of_a[0] and not rel.b_is_left_of_a[0]
        assert rel.bearing_deg[0] == pytest.approx(-90.0)
        assert rel.volume_ratio[0] == pytest.approx(1.0)
        assert not rel.a_is_bigger[0]

    def test_missing_object_is_named(self):
        with pytest.raises(ValueError, match="track 99 in frame 0"):
            pairwise_relations(self.make(), [0], [0], [99])


class TestRecord:
    def test_rows_sorted_and_row_lookup(self):
        t, poses, _ = moving_clip(n_frames=3)
        frames = [boxes([[1.0, 2.0], [3.0, 4.0]], [0.0, 0.0], [20, 5]) for _ in t]
        attrs = compute_attributes(t, poses, frames)
        np.testing.assert_array_equal(attrs.frame_index, [0, 0, 1, 1, 2, 2])
        np.testing.assert_array_equal(attrs.track_id, [5, 20] * 3)
        np.testing.assert_array_equal(attrs.row_of([1, 2, 2, 3], [20, 5, 7, 5]), [3, 4, -1, -1])
        # The lookup keys kept on the instance follow its columns: other track ids (as a copy
        # with new columns, or an attribute set anew) are looked up in their own rows.
        renumbered = dataclasses.replace(attrs, track_id=np.array([5, 21] * 3))
        np.testing.assert_array_equal(renumbered.row_of([1, 1, 2], [20, 21, 5]), [-1, 3, 4])
        np.testing.assert_array_equal(attrs.row_of([1], [20]), [3])
        attrs.track_id = np.array([6, 20] * 3)
        np.testing.assert_array_equal(attrs.row_of([0, 2, 2], [5, 6, 20]), [-1, 4, 5])

    def test_parquet_round_trip_is_byte_identical(self, tmp_path):
        t, poses, _ = moving_clip(n_frames=9)
        frames = [boxes([ego_to_global_xy(20.0, 3.0)], [0.3], [1], label=8) for _ in t]
        attrs = compute_attributes(t, poses, frames)
        a = attrs.write_parquet(tmp_path / "a" / "attributes.parquet")
        b = compute_attributes(t, poses, frames).write_parquet(tmp_path / "b.parquet")
        assert a.read_bytes() == b.read_bytes()
        table = attrs.to_arrow()
        assert "future_2s_distance_m" in table.column_names
        assert table.column("class_name").to_pylist()[0] == "traffic_cone"
        back = ObjectAttributes.read_parquet(a)
        for name in ("bearing_deg", "clock", "is_left", "future_present", "future_distance_m"):
            np.testing.assert_array_equal(getattr(back, name), getattr(attrs, name))
        assert back.future_horizons_s == attrs.future_horizons_s
        assert not list(tmp_path.glob("a/.*"))  # no temp file left behind

    def test_bad_inputs_name_the_problem(self):
        t, poses, _ = moving_clip(n_frames=2)
        frame = boxes([[0.0, 0.0]], [0.0], [1])
        with pytest.raises(ValueError, match="tracks: 1 frames of boxes for 2 timestamps"):
            compute_attributes(t, poses, [frame])
        with pytest.raises(ValueError, match=r"tracks\[1\]: untracked"):
            compute_attributes(t, poses, [frame, boxes([[0.0, 0.0]], [0.0], [-1])])
        with pytest.raises(ValueError, match="global frame"):
            compute_attributes(t, poses, [frame, frame.transform(SE3.identity(), "ego")])
        with pytest.raises(ValueError, match="strictly increasing"):
            compute_attributes(t[::-1], poses, [frame, frame])
        with pytest.raises(ValueError, match="future_horizons_s"):
            AttributeConfig(future_horizons_s=(1.0, -2.0))
        with pytest.raises(ValueError, match="velocity_from"):
            AttributeConfig(velocity_from="magic")


REALDATA = realdata_dir(NUSCENES_MMDET3D)


@requires_realdata(NUSCENES_MMDET3D)
def test_real_nuscenes_boxes_through_the_attribute_pipeline():
    """Real annotations (coco ``bbox_cam3d``, 6 cameras, each with its own ego pose) taken to the
    global frame, run through ``compute_attributes``; the ego-frame centres, carried back into
    each camera, must land on the official projected centres ``center2d``."""
    coco = json.loads((REALDATA / "nus_infos_mono3d.coco.json").read_text())
    images = sorted(coco["images"], key=lambda im: int(im["file_name"].rsplit("__", 1)[1][:-4]))
    times_us = [int(im["file_name"].rsplit("__", 1)[1][:-4]) for im in images]
    poses, frames, cams, expected = [], [], [], []
    for image in images:
        anns = [a for a in coco["annotations"] if a["image_id"] == image["id"]]
        global_SE3_ego = SE3.from_quat_wxyz(
            image["ego2global_rotation"], image["ego2global_translation"]
        )
        ego_SE3_cam = SE3.from_quat_wxyz(image["cam2ego_rotation"], image["cam2ego_translation"])
        global_SE3_cam = global_SE3_ego.compose(ego_SE3_cam)
        cam3d = np.array([a["bbox_cam3d"] for a in anns]).reshape(-1, 7)
        # Convention established on the reader branch: gravity centre, (w, l, h), heading
        # (cos r, 0, sin r) in the camera frame.
        r = cam3d[:, 6]
        heading = global_SE3_cam.rotate_vectors(np.stack([np.cos(r), 0 * r, np.sin(r)], 1))
        frames.append(
            Boxes3D(
                global_SE3_cam.transform_points(cam3d[:, :3]),
                cam3d[:, 3:6],
                np.arctan2(heading[:, 1], heading[:, 0]),
                label=[CLASS_INDEX[a["category_name"]] for a in anns],
                track_id=[a["id"] for a in anns],
            )
        )
        poses.append(global_SE3_ego)
        cams.append((ego_SE3_cam, np.array(image["cam_intrinsic"])))
        expected.append({a["id"]: a["center2d"] for a in anns})
    t = (np.array(times_us) - times_us[0]) * 1e-6
    attrs = compute_attributes(t, poses, frames)
    assert len(attrs) == 11
    for row in range(len(attrs)):
        ego_SE3_cam, k = cams[attrs.frame_index[row]]
        centre_ego = np.array([attrs.x_ego_m[row], attrs.y_ego_m[row], attrs.z_ego_m[row]])
        uv, depth = project_points(k, ego_SE3_cam.inverse().transform_points(centre_ego))
        u, v, d = expected[attrs.frame_index[row]][attrs.track_id[row]]
        np.testing.assert_allclose([uv[0], uv[1], depth], [u, v, d], atol=1e-6)
        # The bearing points into the camera's side of the car: within 90 deg of its optical axis.
        axis = ego_SE3_cam.rotation[:, 2]
        axis_deg = math.degrees(math.atan2(axis[1], axis[0]))
        assert abs((attrs.bearing_deg[row] - axis_deg + 180) % 360 - 180) < 90
