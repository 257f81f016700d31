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
