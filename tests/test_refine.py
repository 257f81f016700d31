"""Offboard track refinement on constructed tracks: expected values computed here by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autolabel.attributes import compute_attributes
from autolabel.boxes import Boxes3D
from autolabel.classes import class_index
from autolabel.config import ConfigError, PipelineConfig
from autolabel.qa.dynamic import action_keys
from autolabel.qa.quantities import QUANTITIES, resolve_params
from autolabel.refine import RefineConfig, refine_tracks
from autolabel.refine.smoothing import smooth_tracks
from autolabel.refine.track_table import build_track_table
from autolabel.refine.tracks import endpoint_displacement
from calib.rotation import wrap_angle

TIMES = np.arange(0.0, 10.0, 0.5)


def track_boxes(
    tid: int, cls: str, xy: np.ndarray, yaw: np.ndarray, frames=None, score=0.8, velocity=None
) -> list[Boxes3D]:
    """One box of track ``tid`` in each of ``frames`` (default: every frame of TIMES)."""
    frames = np.arange(len(TIMES)) if frames is None else np.asarray(frames)
    out = []
    for f in range(len(TIMES)):
        if f not in frames:
            out.append(Boxes3D.empty())
            continue
        k = int(np.flatnonzero(frames == f)[0])
        v = np.full((1, 2), np.nan) if velocity is None else velocity[k : k + 1]
        out.append(
            Boxes3D(
                center_m=[[xy[k, 0], xy[k, 1], 0.8]],
                size_wlh_m=[[1.9, 4.5, 1.6]],
                yaw_rad=[yaw[k]],
                velocity_mps=v,
                label=[class_index(cls)],
                score=[score],
                track_id=[tid],
            )
        )
    return out


def merge(*clips: list[Boxes3D]) -> list[Boxes3D]:
    return [Boxes3D.concatenate([c[f] for c in clips]) for f in range(len(TIMES))]


def boxes_of(refined: list[Boxes3D], tid: int) -> tuple[np.ndarray, Boxes3D]:
    frames = [f for f, b in enumerate(refined) if np.any(b.track_id == tid)]
    return np.array(frames), Boxes3D.concatenate([b[b.track_id == tid] for b in refined])


def test_constant_velocity_is_reproduced_exactly_to_the_track_ends():
    # Noise-free centres of a constant-velocity object: the smoother's model holds exactly, so
    # positions and velocities come back unchanged at every row, the first and last included
    # (no lag at the ends, where a one-sided window slope would still be exact here but a
    # curved path would not).
    t = np.arange(8) * 0.5
    xy = np.column_stack([3.0 + 8.0 * t, -1.0 + 2.0 * t])
    pos, vel = smooth_tracks(
        np.array([0, 8]), t, xy, np.ones(8, bool), np.full((8, 2), np.nan),
        np.array([2.0]), np.array([0.4]), 1.0,
    )  # fmt: skip
    # (Within 1e-5: the first velocity's prior is diffuse, not infinite.)
    assert pos == pytest.approx(xy, abs=1e-5)
    assert vel == pytest.approx(np.tile([8.0, 2.0], (8, 1)), abs=1e-5)


def test_steady_speed_after_a_turn_is_steady_not_accelerating():
    # A car turns left on a 20 m circle at 8.94 m/s, then drives straight on at the same speed.
    # The detector measures its velocity (the tangent, 8.94 m/s) in every keyframe. A least-
    # squares slope of the centres over +-1 s cuts the arc's chord and reads the speed low in and
    # just after the turn (the "accelerating 0.742 m/s^2" of a steady car); fused with
    # the detector's velocity, the speed over the last 2 s must stay 8.94 m/s: steady.
    v, r = 8.94, 20.0
    t = TIMES
    t_turn = 0.5 * math.pi * r / v  # a quarter circle
    phase = np.minimum(t, t_turn) * v / r
    xy = np.column_stack([r * np.sin(phase), r - r * np.cos(phase)])
    after = t > t_turn
    xy[after] += np.column_stack([np.zeros(after.sum()), v * (t[after] - t_turn)])
    heading = np.where(after, math.pi / 2, phase)
    velocity = v * np.column_stack([np.cos(heading), np.sin(heading)])
    tracks = track_boxes(0, "car", xy, heading, velocity=velocity)
    refined, _ = refine_tracks(TIMES, tracks)
    _, boxes = boxes_of(refined, 0)
    speed = np.hypot(boxes.velocity_mps[:, 0], boxes.velocity_mps[:, 1])
    # In the turn a constant-velocity model cuts the corner a little (within 1 %); after it the
    # speed is the true one and its trend over the QA's 2 s window (five keyframes, the slope of
    # a line fit) is flat.
    assert speed == pytest.approx(np.full(len(TIMES), v), abs=0.09)
    after_turn = TIMES >= t_turn + 1.0
    assert speed[after_turn] == pytest.approx(np.full(after_turn.sum(), v), abs=0.02)
    first_window = np.flatnonzero(after_turn)[:5]
    assert abs(np.polyfit(TIMES[first_window], speed[first_window], 1)[0]) < 0.05
    # Headings from the motion: within 0.11 rad in the turn (its start sees the turning path
    # ahead), within 0.01 rad from 1 s after it.
    yaw_error = wrap_angle(boxes.yaw_rad - heading)
    assert np.abs(yaw_error).max() < 0.11
    assert yaw_error[after_turn] == pytest.approx(np.zeros(after_turn.sum()), abs=0.01)


def test_standing_pedestrian_is_static_and_captioned_standing_still():
    # A pedestrian standing at (5, 2) detected with +-0.15 m of centre noise: its track is
    # static, so its speed is exactly zero and the caption says "standing still" (the issue: the
    # noise's window slopes crossed the 0.3 m/s "stopped" gate, captioned "stopped").
    rng = np.random.default_rng(3)
    xy = np.array([5.0, 2.0]) + rng.uniform(-0.15, 0.15, size=(len(TIMES), 2))
    yaw = rng.uniform(-np.pi, np.pi, len(TIMES))
    tracks = track_boxes(0, "pedestrian", xy, yaw)
    refined, summary = refine_tracks(TIMES, tracks)
    assert summary.static == 1 and summary.moving == 0
    _, boxes = boxes_of(refined, 0)
    assert np.all(boxes.velocity_mps == 0.0)
    assert boxes.center_m[:, :2] == pytest.approx(
        np.tile(np.median(xy, axis=0), (len(TIMES), 1)), abs=0.08
    )  # the lower median of each axis, within the noise's spread between two samples
    assert np.ptp(boxes.yaw_rad) == 0.0
    poses = np.tile(np.eye(4), (len(TIMES), 1, 1))
    attrs = compute_attributes(TIMES, poses, refined)
    p = resolve_params(QUANTITIES["object_caption"], None, "caption")
    assert action_keys(attrs, np.array([8]), np.array([0]), p)[0] == "standing_still"


def test_static_car_gets_one_heading_and_no_flips():
    # A parked car whose detector heading flips by pi in 4 of 12 keyframes (+-0.05 rad noise):
    # one heading for the whole track, the one most boxes point to (the axis mean, 0.3 rad).
    rng = np.random.default_rng(0)
    n = 12
    yaw = 0.3 + rng.uniform(-0.05, 0.05, n)
    yaw[[1, 4, 7, 10]] += np.pi
    xy = np.tile([10.0, -6.0], (n, 1))
    tracks = track_boxes(0, "car", xy, wrap_angle(yaw), frames=np.arange(n))
    refined, _ = refine_tracks(TIMES, tracks, RefineConfig(static_heading_from_flow=False))
    _, boxes = boxes_of(refined, 0)
    assert np.ptp(boxes.yaw_rad) == 0.0
    axis = 0.5 * np.arctan2(np.sin(2 * yaw).sum(), np.cos(2 * yaw).sum())
    assert boxes.yaw_rad[0] == pytest.approx(axis, abs=1e-6)
    assert abs(boxes.yaw_rad[0] - 0.3) < 0.05


def test_parked_car_faces_the_traffic_of_its_side():
    # A parked car 3 m beside a lane where another car drives along -x: its outline says only
    # "along x"; the traffic says which way. Its boxes all point +x (as a detector that prefers
    # forward headings would give); refined, it points -x.
    n = len(TIMES)
    parked = track_boxes(0, "car", np.tile([0.0, 3.0], (n, 1)), np.zeros(n))
    mover_xy = np.column_stack([30.0 - 6.0 * TIMES, np.zeros(n)])
    mover = track_boxes(1, "car", mover_xy, np.full(n, np.pi))
    refined, _ = refine_tracks(TIMES, merge(parked, mover))
    _, boxes = boxes_of(refined, 0)
    assert np.all(np.abs(wrap_angle(boxes.yaw_rad - np.pi)) < 1e-6)


def test_moving_track_heads_where_it_goes_despite_flipped_boxes():
    n = len(TIMES)
    xy = np.column_stack([6.0 * TIMES, np.zeros(n)])
    yaw = np.zeros(n)
    yaw[::3] = np.pi  # every third box flipped
    refined, summary = refine_tracks(TIMES, track_boxes(0, "car", xy, yaw))
    assert summary.moving == 1
    _, boxes = boxes_of(refined, 0)
    assert np.all(np.abs(wrap_angle(boxes.yaw_rad)) < 1e-6)
    assert boxes.velocity_mps == pytest.approx(np.tile([6.0, 0.0], (n, 1)), abs=1e-4)


def test_slow_mover_heads_where_it_goes_not_where_its_boxes_point():
    # A bicycle riding +x at 0.8 m/s (under heading_from_motion_mps, 1.5): its boxes are
    # symmetric front/back and all point pi (backwards). It travels 0.8 * 9.5 = 7.6 m, far
    # over static_max_displacement_m, so it moves, and its direction of travel picks the end:
    # heading 0 (the +x axis; headings are counter-clockwise from +x), not pi.
    n = len(TIMES)
    xy = np.column_stack([0.8 * TIMES, np.full(n, 4.0)])
    refined, summary = refine_tracks(TIMES, track_boxes(0, "bicycle", xy, np.full(n, np.pi)))
    assert summary.moving == 1
    _, boxes = boxes_of(refined, 0)
    assert np.abs(wrap_angle(boxes.yaw_rad)).max() < 1e-6
    # The same track riding +y: heading +pi/2 (the sign convention), its boxes pointing -pi/2.
    xy = np.column_stack([np.full(n, 4.0), 0.8 * TIMES])
    refined, _ = refine_tracks(TIMES, track_boxes(0, "bicycle", xy, np.full(n, -np.pi / 2)))
    _, boxes = boxes_of(refined, 0)
    assert np.abs(wrap_angle(boxes.yaw_rad - np.pi / 2)).max() < 1e-6


def test_one_stray_last_box_does_not_make_a_still_track_move():
    # A parked bicycle at (2, 1) seen in keyframes 0-11 (+-0.05 m of noise), then one box of
    # something else 9 m away at keyframe 19 that the tracker gave the same track (the README
    # demo's track 42: a passing car's piece called a motorcycle, 7 s later). The mean of the
    # last three centres lies 9 / 3 = 3 m (+-0.1) from the first three's, over
    # static_max_displacement_m (2), the median of each coordinate (the middle of the three)
    # within 0.1 m: the track is still,
    # one pose at the median of its boxes (within the noise), velocity zero, and its heading is
    # its boxes' (0.6 rad), not the direction of the stray box (0).
    rng = np.random.default_rng(5)
    frames = np.r_[np.arange(12), 19]
    xy = np.array([2.0, 1.0]) + rng.uniform(-0.05, 0.05, size=(13, 2))
    xy[-1] = [11.0, 1.0]
    yaw = np.full(13, 0.6)
    tracks = track_boxes(0, "bicycle", xy, yaw, frames=frames)
    refined, summary = refine_tracks(TIMES, tracks, RefineConfig(static_heading_from_flow=False))
    assert summary.static == 1 and summary.moving == 0
    _, boxes = boxes_of(refined, 0)
    assert np.all(boxes.velocity_mps == 0.0)
    assert np.abs(boxes.center_m[:, :2] - [2.0, 1.0]).max() <= 0.05
    assert boxes.yaw_rad == pytest.approx(np.full(len(boxes), 0.6), abs=1e-6)


def test_endpoint_displacement_is_the_distance_of_the_end_medians():
    # Track 0: six centres on x at 0, 1, 9, 20, 21, 30 (three per end, medians 1 and 21, means
    # 3.3 and 23.7): displacement 20, not 20.3; track 1: two centres, (0, 0) and (3, 4): one
    # per end, 5; track 2: four centres 0, 2, 10, 13 along y: two per end, the means of the two
    # middle values (1 and 11.5), 10.5.
    ids = np.r_[np.zeros(6, int), np.ones(2, int), np.full(4, 2)]
    xy = np.array(
        [[0, 0], [1, 0], [9, 0], [20, 0], [21, 0], [30, 0], [0, 0], [3, 4],
         [0, 0], [0, 2], [0, 10], [0, 13]], dtype=float,
    )  # fmt: skip
    frame = np.r_[np.arange(6), np.arange(2), np.arange(4)]
    boxes = Boxes3D(
        center_m=np.column_stack([xy, np.zeros(len(xy))]),
        size_wlh_m=np.ones((len(xy), 3)),
        yaw_rad=np.zeros(len(xy)),
        velocity_mps=np.full((len(xy), 2), np.nan),
        label=np.zeros(len(xy), int),
        score=np.ones(len(xy)),
        track_id=ids,
    )
    table = build_track_table(boxes, frame)
    got = endpoint_displacement(table, table.boxes.center_m[:, :2], 3)
    assert got == pytest.approx([20.0, 5.0, 10.5])


def test_missed_keyframes_are_filled_inside_the_span_only():
    # Observed at frames 2, 3, 5, 6, 9 of a constant-velocity path: rows for 2..9, the missed
    # 4, 7, 8 on the path; nothing before 2 or after 9.
    frames = np.array([2, 3, 5, 6, 9])
    xy = np.column_stack([4.0 * TIMES[frames], np.full(len(frames), 1.0)])
    tracks = track_boxes(0, "car", xy, np.zeros(len(frames)), frames=frames)
    refined, summary = refine_tracks(TIMES, tracks)
    got_frames, boxes = boxes_of(refined, 0)
    assert list(got_frames) == list(range(2, 10))
    assert summary.boxes_filled == 3
    assert boxes.center_m[:, 0] == pytest.approx(4.0 * TIMES[2:10], abs=2e-6)


def test_runner_up_duplicate_votes_and_goes_short_tracks_go():
    n = len(TIMES)
    xy = np.column_stack([2.0 * TIMES, np.full(n, 5.0)])
    car = track_boxes(0, "car", xy, np.zeros(n), score=0.6)
    # The same cluster tracked as a truck (score 0.3) in 15 of 20 keyframes.
    truck = track_boxes(1, "truck", xy[:15], np.zeros(15), frames=np.arange(15), score=0.3)
    ghost = track_boxes(2, "pedestrian", np.array([[40.0, 40.0]]), [0.0], frames=[4], score=0.9)
    refined, summary = refine_tracks(TIMES, merge(car, truck, ghost))
    ids = np.unique(np.concatenate([b.track_id for b in refined]))
    assert list(ids) == [0]
    assert summary.duplicates == 1 and summary.too_short == 1
    _, boxes = boxes_of(refined, 0)
    assert np.all(boxes.label == class_index("car"))
    # Score: the mean of its boxes times 1 - exp(-20 / 3).
    assert boxes.score[0] == pytest.approx(0.6 * (1 - math.exp(-20 / 3)), rel=1e-6)


def test_a_track_inside_a_heavier_ones_boxes_is_its_duplicate():
    n = len(TIMES)
    xy = np.column_stack([2.0 * TIMES, np.full(n, 5.0)])
    car = track_boxes(0, "car", xy, np.zeros(n), score=0.6)  # 4.5 x 1.9 m

    def sized(tid, cls, offset, wl):
        boxes = track_boxes(tid, cls, xy + offset, np.zeros(n), score=0.3)
        for b in boxes:
            b.size_wlh_m[:, :2] = wl
        return boxes

    # A motorcycle box on the car's cluster, 1.5 m ahead of its centre (beyond the 1 m
    # distance gate, inside the car's 2.25 m half length); a cone against the car's side, inside
    # its footprint; a bus box whose centre lies inside the car's but which is larger.
    moto = sized(1, "motorcycle", [1.5, 0.0], [0.8, 2.1])
    cone = sized(2, "traffic_cone", [-1.5, 0.5], [0.4, 0.4])
    bus = sized(3, "bus", [-1.0, -0.8], [2.9, 11.0])
    clip = merge(car, moto, cone, bus)
    for cfg, kept in (
        (RefineConfig(duplicate_inside=False, drop_riding_along=False), [0, 1, 2, 3]),
        (RefineConfig(drop_riding_along=False), [0, 2, 3]),
    ):
        refined, summary = refine_tracks(TIMES, clip, cfg)
        assert np.unique(np.concatenate([b.track_id for b in refined])).tolist() == kept
        assert summary.duplicates == 4 - len(kept)
    # Not a duplicate, the motorcycle still rides on the car's axis at its velocity: a piece of
    # it (1.5 m from its centre, within the 2.25 + 1.5 m reach).
    refined, summary = refine_tracks(TIMES, clip, RefineConfig(duplicate_inside=False))
    assert np.unique(np.concatenate([b.track_id for b in refined])).tolist() == [0, 2, 3]
    assert summary.duplicates == 0 and summary.riding_along == 1


def test_an_inside_duplicate_does_not_vote_for_its_owners_class():
    n = len(TIMES)
    xy = np.column_stack([2.0 * TIMES, np.full(n, 5.0)])
    # A car tracked as a car in 12 keyframes, as a bus in 8 (votes 7.2 and 4.8, weight 12); a
    # motorcycle box 1.5 m ahead of its centre in every keyframe (weight and votes 10).
    car = track_boxes(0, "car", xy, np.zeros(n), score=0.6)
    for b in car[12:]:
        b.label[:] = class_index("bus")
    moto = track_boxes(1, "motorcycle", xy + [1.5, 0.0], np.zeros(n), score=0.5)
    for b in moto:
        b.size_wlh_m[:, :2] = [0.8, 2.1]
    refined, summary = refine_tracks(TIMES, merge(car, moto))
    assert summary.duplicates == 1
    _, boxes = boxes_of(refined, 0)
    # Had it voted, motorcycle (10) would beat car (7.2).
    assert np.all(boxes.label == class_index("car"))


def test_refine_config_is_validated_in_the_run_config():
    assert PipelineConfig().refine == "track"
    assert PipelineConfig(refine="none").refine == "none"
    with pytest.raises(ConfigError, match="refine"):
        PipelineConfig(refine="magic")
    with pytest.raises(ConfigError, match="refine_options.*min_observations"):
        PipelineConfig(refine_options={"min_observations": 0})
    with pytest.raises(ConfigError, match="refine_options.*unknown key 'bogus'"):
        PipelineConfig(refine_options={"bogus": 1})


def test_a_short_fast_track_is_moving():
    # Seen twice, 0.5 s apart, 5 m apart: 10 m/s, not a static object with both ends averaged
    # into one point.
    xy = np.array([[0.0, 0.0], [5.0, 0.0]])
    tracks = track_boxes(0, "car", xy, np.zeros(2), frames=[3, 4])
    refined, summary = refine_tracks(TIMES, tracks, RefineConfig(min_observations=2))
    assert summary.moving == 1
    _, boxes = boxes_of(refined, 0)
    assert boxes.velocity_mps == pytest.approx(np.tile([10.0, 0.0], (2, 1)), abs=1e-4)


def _car_returns(n_frames: int, roof_from_m: float, roof_to_m: float):
    """PointEvidence of one box per frame: a 4.6 m body (x in [-2.3, 2.3], 0.4-0.9 m high)
    and a roof (1.3-1.5 m high) over x in [roof_from_m, roof_to_m], in the box's frame."""
    from autolabel.refine.points import PointEvidence

    body_x = np.linspace(-2.3, 2.3, 24)
    roof_x = np.linspace(roof_from_m, roof_to_m, 12)
    one = np.concatenate(
        [
            np.column_stack([body_x, np.full(24, 0.9), np.full(24, 0.7)]),
            np.column_stack([roof_x, np.zeros(12), np.full(12, 1.45)]),
        ]
    )
    local = np.tile(one, (n_frames, 1))
    box = np.repeat(np.arange(n_frames), len(one))
    return PointEvidence(box, local, np.full(n_frames, len(one)), np.full(n_frames, 10.0))


def test_a_parked_cars_cabin_tells_its_front():
    # A parked car whose boxes all point +x, alone (no traffic to follow). Its roof returns sit
    # over x in [-1.2, 0.4]: centred 0.4 m behind the middle of its returns (x = 0): it faces +x
    # and keeps its heading. Mirrored (roof over [-0.4, 1.2], 0.4 m ahead): it faces -x.
    n = len(TIMES)
    tracks = track_boxes(0, "car", np.tile([8.0, 4.0], (n, 1)), np.zeros(n))
    for roof, expected in (((-1.2, 0.4), 0.0), ((-0.4, 1.2), np.pi)):
        refined, _ = refine_tracks(TIMES, tracks, None, _car_returns(n, *roof))
        _, boxes = boxes_of(refined, 0)
        assert np.all(np.abs(wrap_angle(boxes.yaw_rad - expected)) < 1e-6)


def test_refine_stage_keeps_ground_truth_replay_and_refine_none(tmp_path):
    from autolabel.stages import StageContext, refine_stage

    for config in (PipelineConfig(detector="gt"), PipelineConfig(refine="none")):
        ctx = StageContext(clip=None, config=config, clip_dir=tmp_path)
        ctx.results["tracks"] = ["the tracker's"]
        assert refine_stage(ctx) == ({"refined": 0}, [])
        assert ctx.results["tracks"] == ["the tracker's"] and not any(tmp_path.iterdir())


def test_ground_truth_with_a_noise_model_is_refined_like_a_detector():
    from autolabel.stages import refined_chain

    assert not refined_chain(PipelineConfig(detector="gt"))
    assert not refined_chain(PipelineConfig(detector="gt", detector_options={"noise": None}))
    assert refined_chain(PipelineConfig(detector="gt", detector_options={"noise": "default"}))
    assert refined_chain(PipelineConfig(detector="lidar"))
    noisy_none = PipelineConfig(detector="gt", detector_options={"noise": "default"}, refine="none")
    assert not refined_chain(noisy_none)


def test_track_size_is_the_detectors_quantile_unless_the_options_set_one():
    from autolabel.stages import refine_config
    from detectors.gt_replay import GtReplayDetector
    from detectors.lidar_geometric import LidarGeometricDetector

    # One static car seen with lengths 4.0, 4.2, ..., 6.0 m (11 boxes). The quantile is the
    # lower order statistic floor(q * 10): the median is the 6th length (5.0 m), the 75th
    # percentile the 8th (5.4 m), q = 1 the longest (6.0 m).
    n = 11
    tracks = track_boxes(0, "car", np.tile([8.0, 4.0], (len(TIMES), 1)), np.zeros(len(TIMES)))
    for f in range(n):
        tracks[f].size_wlh_m[0, 1] = 4.0 + 0.2 * f
    tracks = [b if f < n else Boxes3D.empty() for f, b in enumerate(tracks)]
    lengths = {}
    for name, detector, options in (
        ("gt", GtReplayDetector(), {}),
        ("lidar", LidarGeometricDetector(), {}),
        ("override", GtReplayDetector(), {"size_quantile": 1.0}),
    ):
        config = PipelineConfig(refine_options={"use_points": False, **options})
        refined, _ = refine_tracks(TIMES, tracks, refine_config(config, detector))
        lengths[name] = boxes_of(refined, 0)[1].size_wlh_m[:, 1]
    assert np.allclose(lengths["gt"], 5.0)
    assert np.allclose(lengths["lidar"], 5.4)
    assert np.allclose(lengths["override"], 6.0)


def test_traffic_heading_leaves_out_samples_inside_the_static_objects_own_footprint():
    # A parked car at the origin along x (4.5 x 1.9 m). Three moving samples inside its
    # footprint head +x (a track that merged with it); the lane 3 m beside it heads -x. Counted,
    # the near samples win (+x); left out, only the lane's samples remain: exactly -x.
    from autolabel.refine.tracks import traffic_heading

    xy = np.zeros((1, 2))
    flow_xy = np.array([[-1.0, 0.0], [0.0, 0.2], [1.0, -0.3], [-2.0, 3.0], [2.0, 3.0]])
    flow_yaw = np.array([0.0, 0.0, 0.0, np.pi, np.pi])
    assert traffic_heading(xy, flow_xy, flow_yaw, 4.0)[0] == pytest.approx(0.0, abs=1e-9)
    own = traffic_heading(xy, flow_xy, flow_yaw, 4.0, np.zeros(1), np.array([[2.25, 0.95]]))
    assert abs(wrap_angle(own[0] - np.pi)) < 1e-9
    # Turned by 90 degrees, the same footprint no longer holds the samples along x at y=+-0.3.
    turned = traffic_heading(
        xy, flow_xy, flow_yaw, 4.0, np.full(1, np.pi / 2), np.array([[2.25, 0.95]])
    )
    assert np.cos(turned[0]) > 0


def test_traffic_heading_reverses_the_flow_across_the_centre_line():
    # Convention (nuScenes, global frame): yaw 0 points +x, yaw pi/2 points +y, so the left of a
    # sample heading +x is +y. One sample at the origin heading +x (the ego driving on the right
    # of a two-way street). An object 10 m to its left (0, 10) is past the centre line and faces
    # the oncoming traffic: pi; one 3 m to its right (0, -3) faces the same way: 0; one 1.5 m to
    # its left, within the 2 m lane half width, is in its own lane: 0.
    from autolabel.refine.tracks import traffic_heading

    xy = np.array([[0.0, 10.0], [0.0, -3.0], [0.0, 1.5]])
    flow_xy, flow_yaw = np.zeros((1, 2)), np.zeros(1)
    right = traffic_heading(xy, flow_xy, flow_yaw, 4.0, traffic_side="right")
    assert abs(wrap_angle(right[0] - np.pi)) < 1e-9
    assert right[1:] == pytest.approx([0.0, 0.0], abs=1e-9)
    # Traffic keeping left (Singapore): the far kerb is on the right.
    left = traffic_heading(xy, flow_xy, flow_yaw, 4.0, traffic_side="left")
    assert left[0] == pytest.approx(0.0, abs=1e-9)
    assert abs(wrap_angle(left[1] - np.pi)) < 1e-9
    assert left[2] == pytest.approx(0.0, abs=1e-9)
    none = traffic_heading(xy, flow_xy, flow_yaw, 4.0, traffic_side="none")
    assert none == pytest.approx([0.0, 0.0, 0.0], abs=1e-9)
    # A sample heading +y (yaw pi/2) has its left at -x: an object at (-10, 0) faces -y.
    up = traffic_heading(
        np.array([[-10.0, 0.0], [10.0, 0.0]]), flow_xy, np.full(1, np.pi / 2), 4.0,
        traffic_side="right",
    )  # fmt: skip
    assert up == pytest.approx([-np.pi / 2, np.pi / 2], abs=1e-9)


def test_far_kerb_parked_car_faces_the_oncoming_traffic_with_only_the_ego_passing():
    # The ego drives +x along y = 0 at 6 m/s; nothing else moves. A car parked on the far kerb,
    # 9 m to the ego's left (y = +9), and one on the near kerb (y = -3); the detector gives both
    # heading 0 (+x) in every keyframe. With traffic keeping right the far one faces the
    # oncoming traffic (pi) and the near one the ego's way (0); with "none" the ego's path
    # points both +x, as before.
    n = len(TIMES)
    far = track_boxes(0, "car", np.tile([30.0, 9.0], (n, 1)), np.zeros(n))
    near = track_boxes(1, "car", np.tile([30.0, -3.0], (n, 1)), np.zeros(n))
    ego = np.column_stack([6.0 * TIMES, np.zeros(n), np.zeros(n)])
    refined, _ = refine_tracks(TIMES, merge(far, near), RefineConfig(), ego_xy_yaw=ego)
    assert np.all(np.abs(wrap_angle(boxes_of(refined, 0)[1].yaw_rad - np.pi)) < 1e-6)
    assert np.all(np.abs(boxes_of(refined, 1)[1].yaw_rad) < 1e-6)
    cfg = RefineConfig(traffic_side="none")
    refined, _ = refine_tracks(TIMES, merge(far, near), cfg, ego_xy_yaw=ego)
    assert np.all(np.abs(boxes_of(refined, 0)[1].yaw_rad) < 1e-6)


def test_flow_samples_grazing_a_parked_car_are_left_out():
    # A parked car at the origin along x (4.5 x 1.9 m, half 2.25 x 0.95). A mover's sample 1.5 m
    # beside it (outside the footprint, inside it grown by the 1 m clearance) heads +x (a track
    # that ended on the car); the real lane, 3.5 m beside it, heads -x. Left out, the lane
    # decides: -x. Without clearance the grazing sample (weight exp(-1.5^2/32) = 0.93 against
    # exp(-3.5^2/32) = 0.68) wins: +x.
    from autolabel.refine.tracks import traffic_heading

    xy = np.zeros((1, 2))
    flow_xy = np.array([[0.0, 1.5], [0.0, 3.5]])
    flow_yaw = np.array([0.0, np.pi])
    half = np.array([[2.25, 0.95]])
    bare = traffic_heading(xy, flow_xy, flow_yaw, 4.0, np.zeros(1), half)
    assert bare[0] == pytest.approx(0.0, abs=1e-9)
    grown = traffic_heading(xy, flow_xy, flow_yaw, 4.0, np.zeros(1), half + 1.0)
    assert abs(wrap_angle(grown[0] - np.pi)) < 1e-9


@pytest.mark.parametrize(
    "key, value",
    [("traffic_side", "centre"), ("flow_lane_half_width_m", -1.0), ("flow_clearance_m", -0.5)],
)
def test_traffic_side_settings_are_validated(key, value):
    with pytest.raises(ValueError, match=key):
        RefineConfig(**{key: value})


def test_roof_is_where_the_stacked_profile_thins_out():
    from autolabel.refine.classify import roof_heights

    # Track 0, a car under a branch: 100 returns at 0.6 m, 200 at 1.1, 150 at 1.4, 20 at 1.6 and
    # 10 at 3.0. In 0.25 m bins the densest is [1.0, 1.25) (200); the first bin above it with
    # fewer than a quarter of that (50) is [1.5, 1.75) (20): roof 1.5 m, not the branch's 3 m.
    h0 = np.repeat([0.6, 1.1, 1.4, 1.6, 3.0], [100, 200, 150, 20, 10])
    # Track 1, a truck's side: returns spread evenly from 0.3 to 3.0 m: its roof is its top.
    h1 = np.linspace(0.3, 2.99, 1000)
    track = np.concatenate([np.zeros(len(h0), np.int64), np.ones(len(h1), np.int64)])
    roof = roof_heights(track, np.concatenate([h0, h1]), 3)
    assert roof[0] == 1.5 and roof[1] == 3.0 and np.isnan(roof[2])


def test_a_truck_box_over_a_car_under_a_tree_becomes_a_car_at_its_near_faces():
    # A parked "truck" (2.46 x 6.74 x 2.73 m boxes) at (10, 5) seen from the ego at the origin:
    # dense returns of a car body up to 1.5 m, sparse branches at 2.6-2.8 m. The boxes' highest
    # returns (2.8 m) say truck; the roof (1.5 m) says car. It takes a car's typical size
    # (1.95 x 4.61 x 1.72 m) against the boxes' faces towards the ego (-x, -y in its frame): its
    # centre moves by half the size difference, (6.74 - 4.61) / 2 along and (2.46 - 1.95) / 2
    # across.
    from autolabel.refine.points import PointEvidence

    n = len(TIMES)
    tracks = []
    for _ in range(n):
        tracks.append(
            Boxes3D(
                center_m=[[10.0, 5.0, 1.365]], size_wlh_m=[[2.46, 6.74, 2.73]], yaw_rad=[0.0],
                velocity_mps=[[np.nan, np.nan]], label=[class_index("truck")], score=[0.6],
                track_id=[3],
            )
        )  # fmt: skip
    # Body: 120 returns over x in [-2.3, 2.3], heights spread evenly over 0.4-1.45 m (23-29 per
    # 0.25 m bin from 0.5 m up); branches: 10 returns at 2.6-2.8 m. Roof: 1.5 m.
    x = np.linspace(-2.3, 2.3, 40)
    one = np.concatenate(
        [
            np.column_stack([np.tile(x, 3), np.full(120, -1.1), np.linspace(0.4, 1.45, 120)]),
            np.column_stack([x[::4], np.full(10, 0.0), np.linspace(2.6, 2.8, 10)]),
        ]
    )
    evidence = PointEvidence(
        np.repeat(np.arange(n), len(one)), np.tile(one, (n, 1)), np.full(n, len(one)),
        np.full(n, 11.2),
    )  # fmt: skip
    ego = np.zeros((n, 3))
    refined, _ = refine_tracks(TIMES, tracks, None, evidence, ego)
    _, boxes = boxes_of(refined, 3)
    assert np.all(boxes.label == class_index("car"))
    assert boxes.size_wlh_m == pytest.approx(np.tile([1.95, 4.61, 1.72], (n, 1)))
    assert boxes.center_m[:, 0] == pytest.approx(np.full(n, 10.0 - (6.74 - 4.61) / 2))
    assert boxes.center_m[:, 1] == pytest.approx(np.full(n, 5.0 - (2.46 - 1.95) / 2))
    # The bottom stays on the ground the boxes stood on.
    assert boxes.center_m[:, 2] == pytest.approx(np.full(n, 1.72 / 2))
    # The same profile over only 1.2 m of length (a trunk and bushes under a canopy, not a car's
    # body: the 5-95 % spread, 0.9 * 1.2 m, is below 2.5 m): it is no car. Its height profile
    # is no truck's side either: its top, the 0.98 quantile of the 20 x 130 stacked returns
    # (lower order statistic, the 2548th: the 8th branch, 2.6 + 7 * 0.2 / 9 = 2.756 m), gives
    # ceil((2.756 - 0.25) / 0.25) = 11 bins, of which only the body's 5 from 0.25 to 1.5 m
    # hold a quarter of the densest (12, 28, 29, 28, 23 per box; the branches' 7 and 3 do not):
    # 5 / 11 < 0.5, clutter. Without that test it stays a truck, at its boxes.
    short = one.copy()
    short[:120, 0] = np.tile(np.linspace(-0.6, 0.6, 40), 3)
    evidence.local_xyh_m = np.tile(short, (n, 1))
    refined, summary = refine_tracks(TIMES, tracks, None, evidence, ego)
    assert summary.clutter == 1 and len(boxes_of(refined, 3)[0]) == 0
    no_panel_test = RefineConfig(panel_min_fill=0.0)
    refined, _ = refine_tracks(TIMES, tracks, no_panel_test, evidence, ego)
    _, boxes = boxes_of(refined, 3)
    assert np.all(boxes.label == class_index("truck"))
    assert boxes.center_m[:, :2] == pytest.approx(np.tile([10.0, 5.0], (n, 1)))


def test_a_roof_over_the_whole_length_places_no_cabin():
    # Roof returns over x in [-2.1, 2.3] (span 4.4 of the 4.6 m body: 96 %), twice as dense
    # over [1.0, 2.3]: their mean lies 0.9 m ahead of the middle, which would turn the car
    # round; a roof that long is no cabin (a van, a merged cluster): the heading stays +x. The
    # same returns with the span rule off (share 1.0) turn it.
    from autolabel.refine.points import PointEvidence

    n = len(TIMES)
    tracks = track_boxes(0, "car", np.tile([8.0, 4.0], (n, 1)), np.zeros(n))
    body_x = np.linspace(-2.3, 2.3, 24)
    roof_x = np.concatenate([np.linspace(-2.1, 2.3, 12), np.linspace(1.0, 2.3, 12)])
    one = np.concatenate(
        [
            np.column_stack([body_x, np.full(24, 0.9), np.full(24, 0.7)]),
            np.column_stack([roof_x, np.zeros(24), np.full(24, 1.45)]),
        ]
    )
    evidence = PointEvidence(
        np.repeat(np.arange(n), len(one)), np.tile(one, (n, 1)), np.full(n, len(one)),
        np.full(n, 10.0),
    )  # fmt: skip
    for share, expected in ((0.85, 0.0), (1.0, np.pi)):
        refined, _ = refine_tracks(TIMES, tracks, RefineConfig(cabin_max_roof_span=share), evidence)
        _, boxes = boxes_of(refined, 0)
        assert np.all(np.abs(wrap_angle(boxes.yaw_rad - expected)) < 1e-6)


def _two_static_tracks(cls: str, local0: np.ndarray, local1: np.ndarray):
    """Two static ``cls`` tracks (0 at (8, 4), 1 at (8, -6)) in every keyframe, and the
    PointEvidence of their boxes: ``local0`` / ``local1`` (R, 3) box-frame returns in each."""
    from autolabel.refine.points import PointEvidence

    n = len(TIMES)
    tracks = merge(
        track_boxes(0, cls, np.tile([8.0, 4.0], (n, 1)), np.zeros(n)),
        track_boxes(1, cls, np.tile([8.0, -6.0], (n, 1)), np.zeros(n)),
    )
    # Boxes in concatenate order: frame by frame, track 0 then track 1.
    local = np.concatenate([np.concatenate([local0, local1]) for _ in range(n)])
    r = len(local0)
    assert len(local1) == r
    evidence = PointEvidence(
        np.repeat(np.arange(2 * n), r), local, np.full(2 * n, r), np.full(2 * n, 10.0)
    )
    return tracks, evidence


def test_a_track_seen_only_above_the_floor_height_is_clutter():
    # Two static car tracks with 40 returns per box: one's all between 4.5 and 5.0 m above the
    # ground (a canopy; nothing reaches down), the other's between 0.4 and 1.5 m.
    x = np.linspace(-2.2, 2.2, 40)
    high = np.column_stack([x, np.full(40, 0.9), np.linspace(4.5, 5.0, 40)])
    low = np.column_stack([x, np.full(40, 0.9), np.linspace(0.4, 1.5, 40)])
    tracks, evidence = _two_static_tracks("car", high, low)
    refined, summary = refine_tracks(TIMES, tracks, None, evidence)
    assert summary.clutter == 1
    assert len(boxes_of(refined, 0)[0]) == 0 and len(boxes_of(refined, 1)[0]) == len(TIMES)
    _, summary = refine_tracks(TIMES, tracks, RefineConfig(clutter_min_floor_m=5.0), evidence)
    assert summary.clutter == 0


def test_panel_fill_tells_a_trucks_side_from_a_fences_rail():
    from autolabel.refine.classify import panel_fill

    # 0.25 m bins from 0.25 m (ground clearance) up to the top. Track 0, a chain-link fence:
    # 10 returns in each bin of its posts (0.25-2.25 m) and 100 in each of its rail's two bins
    # (2.25-2.75 m); top 2.75 m: 10 bins, dense (>= 25, a quarter of 100) only the rail's 2:
    # 0.2. Track 1, a truck's side: 20 returns in each bin from 0.25 to 3.0 m (11 bins), all
    # dense: 1.0. Track 2: its top unknown (too few returns): NaN.
    centres = 0.375 + 0.25 * np.arange(11)
    h0 = np.concatenate([np.repeat(centres[:8], 10), np.repeat(centres[8:10], 100)])
    h1 = np.repeat(centres, 20)
    track = np.concatenate([np.zeros(len(h0), np.int64), np.ones(len(h1), np.int64)])
    fill = panel_fill(track, np.concatenate([h0, h1]), np.array([2.75, 3.0, np.nan]))
    assert fill[0] == pytest.approx(0.2) and fill[1] == 1.0 and np.isnan(fill[2])


def test_a_static_truck_without_a_side_panel_is_clutter():
    # Two static truck tracks, 40 returns per box on their outline (0.9 m off the axis of a
    # 1.9 m wide box). Track 0, a fence: 1 return in each of 8 post bins (0.375-2.125 m), 16 in
    # each of 2 rail bins (2.375, 2.625 m); its top (0.98 quantile, lower order statistic:
    # the 39th of 40) is 2.625 m, so ceil((2.625 - 0.25) / 0.25) = 10 bins, 2 of them dense
    # (>= 4): fill 0.2 < 0.5. Track 1, a truck's side: heights evenly 0.3-2.9 m, every bin
    # holds 3 or 4 returns (>= 1): fill 1.
    fence_h = np.concatenate([0.375 + 0.25 * np.arange(8), np.repeat([2.375, 2.625], 16)])
    x = np.linspace(-2.2, 2.2, 40)
    fence = np.column_stack([x, np.full(40, 0.9), fence_h])
    side = np.column_stack([x, np.full(40, 0.9), np.linspace(0.3, 2.9, 40)])
    tracks, evidence = _two_static_tracks("truck", fence, side)
    refined, summary = refine_tracks(TIMES, tracks, None, evidence)
    assert summary.clutter == 1
    assert len(boxes_of(refined, 0)[0]) == 0 and len(boxes_of(refined, 1)[0]) == len(TIMES)
    assert boxes_of(refined, 1)[1].label[0] == class_index("truck")
    # Off, or too few returns per box to judge a profile (40 < 50): kept.
    for options in ({"panel_min_fill": 0.0}, {"relabel_min_returns": 50.0}):
        _, summary = refine_tracks(TIMES, tracks, RefineConfig(**options), evidence)
        assert summary.clutter == 0
    with pytest.raises(ValueError, match="panel_min_fill"):
        RefineConfig(panel_min_fill=1.5)


def test_two_wheelers_riding_along_a_vehicle_are_pieces_of_it():
    from autolabel.refine.duplicates import riding_along

    # Keyframe 0: a car (4.5 x 1.9 m, heading +x at 10 m/s) at the origin and five two-wheelers.
    # (x, y, vx) of each: A 3.5 m ahead on its axis at 10.5 m/s (3.5 <= 2.25 + 1.5, dv 0.5): on
    # it; B 4 m ahead (beyond 3.75); C 1.2 m beside it (beyond the half width 0.95, filtering);
    # D in line but at 5 m/s (dv 5); E as A. Keyframes 1-3: A once more, E three more times, no
    # car: A rides along in 1 of its 2 keyframes (0.5 >= 0.3), E in 1 of 4 (0.25).
    rows = [  # frame, track, x, y, vx, vy, label
        (0, 0, 0.0, 0.0, 10.0, 0.0, "car"),
        (0, 1, 3.5, 0.3, 10.5, 0.0, "motorcycle"),
        (0, 2, 4.0, 0.0, 10.0, 0.0, "motorcycle"),
        (0, 3, 3.0, 1.2, 10.0, 0.0, "bicycle"),
        (0, 4, 3.0, 0.0, 5.0, 0.0, "bicycle"),
        (0, 5, -3.5, 0.0, 10.0, 0.0, "bicycle"),
        (1, 1, 8.5, 0.3, 10.5, 0.0, "motorcycle"),
        *[(f, 5, 5.0 * f, 0.0, 10.0, 0.0, "bicycle") for f in (1, 2, 3)],
    ]
    frame, tid, x, y, vx, vy, cls = (np.array(c) for c in zip(*rows, strict=True))
    label = np.array([class_index(c) for c in cls])
    n = len(rows)
    boxes = Boxes3D(
        center_m=np.column_stack([x, y, np.full(n, 0.8)]),
        size_wlh_m=np.where(
            (label == class_index("car"))[:, None], [1.9, 4.5, 1.6], [0.8, 2.1, 1.5]
        ),
        yaw_rad=np.zeros(n),
        velocity_mps=np.column_stack([vx, vy]),
        label=label,
        score=np.full(n, 0.5),
        track_id=tid,
    )
    car = label == class_index("car")
    assert riding_along(boxes, frame, ~car, car, 1.5, 2.0, 0.3).tolist() == [1]
    # E rides along in 1 of its 4 keyframes: with 0.25 it goes too.
    assert riding_along(boxes, frame, ~car, car, 1.5, 2.0, 0.25).tolist() == [1, 5]
    # Reaching 1.8 m past the car's end takes B (4 <= 2.25 + 1.8) as well.
    assert riding_along(boxes, frame, ~car, car, 1.8, 2.0, 0.3).tolist() == [1, 2]
    # Only hosts moving at >= 10 m/s count: the car does (10.0), so A still goes; at 10.5 none.
    assert riding_along(boxes, frame, ~car, car, 1.5, 2.0, 0.3, 10.0).tolist() == [1]
    assert riding_along(boxes, frame, ~car, car, 1.5, 2.0, 0.3, 10.5).tolist() == []
    for key, value in (
        ("riding_reach_m", -1.0), ("riding_min_shared", 0.0), ("riding_min_speed_mps", -0.5)
    ):  # fmt: skip
        with pytest.raises(ValueError, match=key):
            RefineConfig(**{key: value})
