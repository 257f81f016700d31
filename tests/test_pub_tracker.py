"""PubTracker: association, gating, ageing and track velocities on constructed detections."""

from __future__ import annotations

import numpy as np
import pytest

from autolabel.boxes import Boxes3D
from autolabel.classes import class_index
from autolabel.config import ConfigError
from trackers import get_tracker
from trackers.pub_tracker import PubTracker, PubTrackerConfig, greedy_match, track_scores

DT_S = 0.5


def _frames(objects: list[dict], num_frames: int, with_velocity: bool = True) -> list[Boxes3D]:
    """Detections of constant-velocity objects; ``present`` (frame -> bool) hides an object.

    Each object: start (x, y) m, velocity (vx, vy) m/s, class name, score, optional ``present``.
    The returned boxes carry the object's index in ``track_id`` (the tracker ignores input ids).
    """
    frames = []
    for f in range(num_frames):
        rows = [(i, o) for i, o in enumerate(objects) if o.get("present", lambda _f: True)(f)]
        if not rows:
            frames.append(Boxes3D.empty())
            continue
        t = f * DT_S
        center = np.array(
            [
                [o["start"][0] + o["vel"][0] * t, o["start"][1] + o["vel"][1] * t, 1.0]
                for _, o in rows
            ]
        )
        velocity = np.array([o["vel"] for _, o in rows], dtype=float)
        if not with_velocity:
            velocity[:] = np.nan
        frames.append(
            Boxes3D(
                center_m=center,
                size_wlh_m=np.tile([1.8, 4.5, 1.6], (len(rows), 1)),
                yaw_rad=np.zeros(len(rows)),
                velocity_mps=velocity,
                label=[class_index(o.get("cls", "car")) for _, o in rows],
                score=[o.get("score", 0.9) for _, o in rows],
                track_id=[i for i, _ in rows],
            )
        )
    return frames


def _track(frames: list[Boxes3D], config: PubTrackerConfig | None = None) -> list[Boxes3D]:
    """Track constructed frames; the input ``track_id`` (object index) is ignored by the tracker."""
    return PubTracker(config).track_clip(np.arange(len(frames)) * DT_S, frames)


def _id_map(frames: list[Boxes3D], tracked: list[Boxes3D]) -> dict[int, set[int]]:
    """Object index -> the set of track ids it received (all detections tracked, input order)."""
    ids: dict[int, set[int]] = {}
    for det, trk in zip(frames, tracked, strict=True):
        np.testing.assert_array_equal(trk.center_m, det.center_m)
        for obj, track_id in zip(det.track_id, trk.track_id, strict=True):
            ids.setdefault(int(obj), set()).add(int(track_id))
    return ids


@pytest.mark.parametrize("with_velocity", [True, False])
def test_crossing_targets_keep_their_ids(with_velocity):
    # Two cars on perpendicular roads pass the origin 0.25 s apart (within each other's 4 m gate
    # for three keyframes; at 5 m per keyframe only velocity compensation links them), and two
    # pedestrians walk head-on past each other 0.4 m apart.
    objects = [
        {"start": (-25.0, 0.0), "vel": (10.0, 0.0)},
        {"start": (0.0, -27.5), "vel": (0.0, 10.0)},
        {"start": (-5.0, 20.0), "vel": (1.4, 0.0), "cls": "pedestrian"},
        {"start": (5.0, 20.4), "vel": (-1.4, 0.0), "cls": "pedestrian"},
    ]
    frames = _frames(objects, 12, with_velocity)
    ids = _id_map(frames, _track(frames))
    assert all(len(v) == 1 for v in ids.values()), ids
    assert len({next(iter(v)) for v in ids.values()}) == 4


@pytest.mark.parametrize("max_age", [1, 2, 3, 4])
@pytest.mark.parametrize("gap", [1, 2, 3, 4])
def test_occlusion_gap_relinks_only_within_max_age(max_age, gap):
    # A car at 12 m/s is missed for ``gap`` keyframes: 6 m a frame, beyond the 4 m gate, so
    # re-linking also needs the track to coast on its velocity while unmatched.
    objects = [{"start": (0.0, 0.0), "vel": (12.0, 0.0), "present": lambda f: not 4 <= f < 4 + gap}]
    frames = _frames(objects, 12)
    tracked = _track(frames, PubTrackerConfig(max_age=max_age))
    ids = _id_map(frames, tracked)[0]
    # CenterPoint's rule: re-matchable across at most max_age - 1 consecutive missed keyframes.
    assert (len(ids) == 1) == (gap <= max_age - 1)
    # Missed keyframes produce no box (no invented states).
    for f in range(4, 4 + gap):
        assert len(tracked[f]) == 0


def test_max_age_three_survives_two_missed_frames_without_detector_velocity():
    objects = [{"start": (0.0, 0.0), "vel": (8.0, 1.0), "present": lambda f: f not in (5, 6)}]
    frames = _frames(objects, 12, with_velocity=False)
    assert len(_id_map(frames, _track(frames))[0]) == 1


def test_class_gating_by_class_and_distance():
    # A pedestrian detection appears exactly where a car track is: different class, new track.
    car = {"start": (0.0, 0.0), "vel": (0.0, 0.0)}
    ped = {"start": (0.0, 0.0), "vel": (0.0, 0.0), "cls": "pedestrian", "present": lambda f: f == 3}
    car["present"] = lambda f: f != 3
    frames = _frames([car, ped], 6)
    ids = _id_map(frames, _track(frames))
    assert ids[0].isdisjoint(ids[1])


@pytest.mark.parametrize(
    ("cls", "jump_m", "same"),
    [
        ("pedestrian", 0.95, True),
        ("pedestrian", 1.05, False),
        ("car", 3.95, True),
        ("car", 4.05, False),
        ("bus", 5.45, True),
        ("bus", 5.55, False),
        ("motorcycle", 12.9, True),
        ("motorcycle", 13.1, False),
    ],
)
def test_distance_gate_is_per_class(cls, jump_m, same):
    # A stationary object (velocity 0) whose detection jumps sideways once.
    frames = _frames([{"start": (10.0, 10.0), "vel": (0.0, 0.0), "cls": cls}], 4)
    frames[2].center_m[0, 1] += jump_m
    frames[3].center_m[0, 1] += jump_m
    tracked = _track(frames)
    assert (tracked[1].track_id[0] == tracked[2].track_id[0]) == same


def test_gate_override_from_config():
    frames = _frames([{"start": (0.0, 0.0), "vel": (0.0, 0.0), "cls": "pedestrian"}], 3)
    frames[2].center_m[0, 0] += 1.5
    default = _track(frames)
    wide = _track(frames, PubTrackerConfig(match_distance_m={"pedestrian": 2.0}))
    assert default[2].track_id[0] != default[1].track_id[0]
    assert wide[2].track_id[0] == wide[1].track_id[0]


def test_stationary_object_one_track_zero_velocity():
    rng = np.random.default_rng(0)
    frames = _frames([{"start": (100.0, -40.0), "vel": (0.0, 0.0)}], 40)
    for f in frames:
        f.center_m[:, :2] += rng.normal(0, 0.1, size=(len(f), 2))
        f.velocity_mps[:] = rng.normal(0, 0.2, size=(len(f), 2))
    tracked = _track(frames)
    assert {int(t.track_id[0]) for t in tracked} == {0}
    # The detector gave a velocity in every frame: it is what the track reports.
    np.testing.assert_array_equal(
        np.concatenate([t.velocity_mps for t in tracked]),
        np.concatenate([f.velocity_mps for f in frames]),
    )
    # Without detector velocity, the least-squares slope over 5 samples 0.5 s apart of 0.1 m
    # noise (std 0.1/sqrt(2.5) = 0.063 per axis) stays small.
    for f in frames:
        f.velocity_mps[:] = np.nan
    speed = np.linalg.norm(np.concatenate([t.velocity_mps for t in _track(frames)]), axis=1)
    assert speed.max() < 0.4


def test_finite_detector_velocity_is_kept_where_the_slope_lags():
    # A car at 10 m/s stops at x = 10 m (t = 1 s); the detector measures 10, 10, 10, 0, 0, 0 m/s
    # but gives no velocity in frame 1. Centres x = 0, 5, 10, 10, 10, 10 m, every 0.5 s.
    x = [0.0, 5.0, 10.0, 10.0, 10.0, 10.0]
    vx = [10.0, np.nan, 10.0, 0.0, 0.0, 0.0]
    frames = [
        Boxes3D(
            center_m=[[xi, 0.0, 1.0]],
            size_wlh_m=[[1.8, 4.5, 1.6]],
            yaw_rad=[0.0],
            velocity_mps=[[vi, 0.0 if np.isfinite(vi) else np.nan]],
            label=[class_index("car")],
            score=[0.9],
        )
        for xi, vi in zip(x, vx, strict=True)
    ]
    tracked = _track(frames)
    assert {int(t.track_id[0]) for t in tracked} == {0}
    velocity = np.concatenate([t.velocity_mps for t in tracked])
    # Frame 1 has no detector velocity: the slope over frames 0-3 (half window 2, cut at the
    # start), t = 0, .5, 1, 1.5 s, x = 0, 5, 10, 10 m: mean t 0.75, mean x 6.25,
    # sum dt*dx = 4.6875 + 0.3125 + 0.9375 + 2.8125 = 8.75, sum dt^2 = 1.25: 7.0 m/s.
    # The others keep the detector's: the stopped car stays at 0 where the slope over frames 1-5
    # (x = 5, 10, 10, 10, 10 m) would say 5 / 2.5 = 2.0 m/s in frame 3.
    np.testing.assert_allclose(velocity[:, 0], [10.0, 7.0, 10.0, 0.0, 0.0, 0.0], atol=1e-12)
    np.testing.assert_array_equal(velocity[:, 1], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0])


def test_object_leaving_and_reentering_gets_a_new_id():
    # Leaves for 6 keyframes (longer than max_age 3 allows), re-enters where it would be.
    objects = [
        {"start": (0.0, 0.0), "vel": (5.0, 0.0), "present": lambda f: not 5 <= f < 11},
        {"start": (0.0, 30.0), "vel": (0.0, 0.0)},
    ]
    frames = _frames(objects, 16)
    tracked = _track(frames, PubTrackerConfig(max_age=3))
    first = {int(t.track_id[t.center_m[:, 1] < 15][0]) for t in tracked[:5]}
    second = {int(t.track_id[t.center_m[:, 1] < 15][0]) for t in tracked[11:]}
    assert len(first) == 1 and len(second) == 1 and first != second
    # Ids are never reused and the other object's track is untouched.
    assert _id_map(frames, tracked)[1] == {1}
    assert second == {2}
    for f in range(5, 11):
        assert len(tracked[f]) == 1


def test_long_max_age_relinks_only_where_the_track_predicts():
    # With the default max_age (40) the same 6-keyframe absence is bridged when the object comes
    # back where its track predicts, but not when it comes back elsewhere (it turned around).
    present = lambda f: not 5 <= f < 11  # noqa: E731
    straight = _frames([{"start": (0.0, 0.0), "vel": (5.0, 0.0), "present": present}], 16)
    assert _id_map(straight, _track(straight)) == {0: {0}}
    turned = _frames([{"start": (0.0, 0.0), "vel": (5.0, 0.0), "present": present}], 16)
    # It comes back driving the other way: last seen at x = 10 m (t = 2 s) at +5 m/s, back at
    # x = 30 m (t = 5.5 s) at -5 m/s; the mean velocity is 0, so 20 m from where it was last seen
    # (beyond the 4 m gate).
    for f in range(11, 16):
        turned[f].center_m[0, 0] = 30.0 - 5.0 * (f - 11) * DT_S
        turned[f].velocity_mps[0] = [-5.0, 0.0]
    assert _id_map(turned, _track(turned)) == {0: {0, 1}}


def _one_box(x_m: float, vx_mps: float, cls: str = "motorcycle") -> Boxes3D:
    """One detection on the x axis moving along it."""
    return Boxes3D(
        center_m=[[x_m, 0.0, 1.0]],
        size_wlh_m=[[0.8, 2.1, 1.5]],
        yaw_rad=[0.0],
        velocity_mps=[[vx_mps, 0.0]],
        label=[class_index(cls)],
        score=[0.9],
    )


def test_coasted_track_is_not_taken_by_an_object_coming_the_other_way():
    # A motorcycle at +8 m/s is seen for 2 s (x = 0..16 m) and vanishes. At t = 5.5 s a motorcycle
    # at x = 44 m drives the other way (-8 m/s). CenterPoint's comparison (detection moved back
    # 0.5 s to 48 m, track coasted to 16 + 8 * 3 = 40 m) gives 8 m, inside the 13 m gate; the mean
    # velocity over the 3.5 s unseen is 0, so it is 44 - 16 = 28 m away: a new track. The same
    # detection driving on at +8 m/s is 44 - 8 * 3.5 - 16 = 0 m away and keeps the id.
    times = np.arange(12) * DT_S
    for vx, expected in ((-8.0, 1), (8.0, 0)):
        frames = [_one_box(8.0 * t, 8.0) for t in times[:5]] + [Boxes3D.empty()] * 6
        frames.append(_one_box(44.0, vx))
        tracked = PubTracker().track_clip(times, frames)
        assert tracked[11].track_id.tolist() == [expected]


def test_pedestrian_stopping_while_unseen_keeps_its_id():
    # Walks at 1.5 m/s (x = 0, 0.75, 1.5 m at t = 0, 0.5, 1 s), is hidden for 3 s while slowing
    # evenly to a stop, and reappears standing at 1.5 + 1.5 * 3 / 2 = 3.75 m. The mean of the two
    # velocities puts it exactly there; coasting at 1.5 m/s to t = 3.5 s (5.25 m) would leave it
    # 1.5 m away, beyond the 1 m pedestrian gate.
    times = np.arange(9) * DT_S
    frames = [_one_box(1.5 * t, 1.5, "pedestrian") for t in times[:3]] + [Boxes3D.empty()] * 5
    frames.append(_one_box(3.75, 0.0, "pedestrian"))
    tracked = PubTracker().track_clip(times, frames)
    assert [int(t.track_id[0]) for t in tracked if len(t)] == [0, 0, 0, 0]


def test_equal_scores_visit_the_nearest_detection_first():
    # A parked car at the origin; next frame two detections of equal score: a new car 3 m away
    # listed first (inside the 4 m gate) and the parked car itself. Input order would hand the
    # track to the new car; nearest-first keeps it with the parked one.
    first = _one_box(0.0, 0.0, "car")
    second = Boxes3D.concatenate([_one_box(3.0, 0.0, "car"), _one_box(0.0, 0.0, "car")])
    tracked = PubTracker().track_clip(np.array([0.0, 0.5]), [first, second])
    assert tracked[1].track_id.tolist() == [1, 0]


@pytest.mark.parametrize(("x_m", "same"), [(3.5, True), (6.0, False)])
def test_unknown_velocity_gate_grows_with_time_unseen(x_m, same):
    # A pedestrian seen once without velocity, then missed for two keyframes: 1.5 s later its
    # gate is 1 m + 3 m/s * 1.5 s = 5.5 m (one interval's widening, 2.5 m, would lose it at 3.5 m).
    ped = _one_box(0.0, np.nan, "pedestrian")
    later = _one_box(x_m, np.nan, "pedestrian")
    times = np.arange(4) * DT_S
    tracked = PubTracker().track_clip(times, [ped, Boxes3D.empty(), Boxes3D.empty(), later])
    assert bool(tracked[3].track_id[0] == 0) is same


def test_detections_without_velocity_track_fast_objects():
    # Two cars side by side 3.5 m apart at 14 m/s (7 m per keyframe, beyond the 4 m gate):
    # the second frame relies on the widened gate of tracks with unknown velocity, later frames
    # on the finite-difference velocity of the track.
    objects = [
        {"start": (0.0, 0.0), "vel": (14.0, 0.0)},
        {"start": (0.0, 3.5), "vel": (14.0, 0.0), "score": 0.8},
    ]
    frames = _frames(objects, 20, with_velocity=False)
    tracked = _track(frames)
    ids = _id_map(frames, tracked)
    assert ids == {0: {0}, 1: {1}}
    # Output velocity comes from the track (the detector gave none).
    velocity = np.concatenate([t.velocity_mps for t in tracked])
    np.testing.assert_allclose(velocity, np.tile([14.0, 0.0], (40, 1)), atol=1e-9)


def test_single_observation_keeps_detector_velocity_or_nan():
    frames = _frames([{"start": (0.0, 0.0), "vel": (3.0, 4.0)}], 1)
    np.testing.assert_array_equal(_track(frames)[0].velocity_mps, [[3.0, 4.0]])
    frames = _frames([{"start": (0.0, 0.0), "vel": (3.0, 4.0)}], 1, with_velocity=False)
    assert np.isnan(_track(frames)[0].velocity_mps).all()


def test_static_classes_have_zero_velocity():
    # A drifting traffic cone (detector claims 1 m/s) is tracked as static: zero velocity, and
    # its 0.5 m per-frame drift stays inside the 1 m gate without any velocity compensation.
    frames = _frames([{"start": (0.0, 0.0), "vel": (1.0, 0.0), "cls": "traffic_cone"}], 6)
    tracked = _track(frames)
    assert {int(t.track_id[0]) for t in tracked} == {0}
    assert all(np.array_equal(t.velocity_mps, [[0.0, 0.0]]) for t in tracked)


@pytest.mark.parametrize("with_velocity", [True, False])
def test_moving_construction_vehicle_keeps_one_track(with_velocity):
    # A truck the detector calls a construction vehicle drives at 6 m/s: 3 m a keyframe. As a
    # static class (zero velocity, 2 m gate) it started a new track every keyframe. Now its
    # motion is observed: one track, and its velocity is the detector's or, without one, the
    # slope of its centres, x = 3 m * f at t = 0.5 s * f: exactly (6, 0) m/s.
    frames = _frames(
        [{"start": (0.0, 0.0), "vel": (6.0, 0.0), "cls": "construction_vehicle"}], 8, with_velocity
    )
    tracked = _track(frames)
    assert {int(t.track_id[0]) for t in tracked} == {0}
    velocity = np.concatenate([t.velocity_mps for t in tracked])
    np.testing.assert_allclose(velocity, np.tile([6.0, 0.0], (8, 1)), atol=1e-9)


def test_parked_construction_vehicle_is_still_one_track_at_rest():
    # Observed motion, not the class, decides: a parked one (centres jittering by 0.3 m) has
    # one track, and its velocity is the slope of its centres, small: by hand over the window
    # of +-2 observations, x = 0, 0.3, 0, 0.3, 0 at t = 0, 0.5, ..., 2 s; at t = 1 s the slope
    # is sum((t - 1) * x) / sum((t - 1)^2) = (-0.5 * 0.3 + 0.5 * 0.3) / 2.5 = 0.
    frames = _frames(
        [{"start": (5.0, 5.0), "vel": (0.0, 0.0), "cls": "construction_vehicle"}], 5, False
    )
    for f in (1, 3):
        frames[f].center_m[0, 0] += 0.3
    tracked = _track(frames)
    assert {int(t.track_id[0]) for t in tracked} == {0}
    np.testing.assert_allclose(tracked[2].velocity_mps, [[0.0, 0.0]], atol=1e-12)


@pytest.mark.parametrize(("still_m", "same"), [(1.5, True), (0.0, False)])
def test_parked_construction_vehicle_does_not_coast_on_its_jitter(still_m, same):
    # Parked at x = 0, detected at 0, 0, 0, 0.9 m (one jittered box) at t = 0 ... 1.5 s, then
    # missed for 3 s and seen again at x = 0 (t = 5 s). Its two last centres moved 0.9 m:
    # - below the class's 1.5 m still displacement it is at rest and waits at 0.9 m, 0.9 m
    #   from its next detection: the same track;
    # - taken as motion (0.9 / 0.5 = 1.8 m/s) it coasts 3.5 s to 0.9 + 6.3 = 7.2 m, beyond the
    #   4 m gate: a new track.
    frames = _frames(
        [{"start": (0.0, 0.0), "vel": (0.0, 0.0), "cls": "construction_vehicle",
          "present": lambda f: not 4 <= f < 10}],
        11,
        with_velocity=False,
    )  # fmt: skip
    frames[3].center_m[0, 0] += 0.9
    config = PubTrackerConfig(still_displacement_m={"construction_vehicle": still_m})
    tracked = _track(frames, config)
    assert (tracked[0].track_id[0] == tracked[10].track_id[0]) == same


def test_higher_score_claims_the_contested_track():
    # Frame 0: one car. Frame 1: two detections near it; the lower one listed first is nearer
    # but the higher-scoring one is visited first and takes the track.
    frames = _frames([{"start": (0.0, 0.0), "vel": (0.0, 0.0)}], 2)
    frames[1] = Boxes3D(
        center_m=[[0.5, 0.0, 1.0], [1.5, 0.0, 1.0]],
        size_wlh_m=np.ones((2, 3)),
        yaw_rad=np.zeros(2),
        velocity_mps=np.zeros((2, 2)),
        label=[0, 0],
        score=[0.3, 0.9],
        track_id=[-1, -1],
    )
    frames[0].track_id[:] = -1
    tracked = PubTracker().track_clip(np.array([0.0, 0.5]), frames)
    assert tracked[1].track_id.tolist() == [1, 0]


def test_new_track_min_score_drops_only_unmatched_low_scores():
    # Object 0 starts confidently then fades to 0.2 (kept: it extends its track); object 1 is
    # always at 0.2 (never starts a track).
    frames = _frames(
        [
            {"start": (0.0, 0.0), "vel": (5.0, 0.0)},
            {"start": (0.0, 20.0), "vel": (0.0, 0.0), "score": 0.2},
        ],
        6,
    )
    for f in frames[3:]:
        f.score[0] = 0.2
    tracked = _track(frames, PubTrackerConfig(new_track_min_score=0.5))
    assert [t.track_id.tolist() for t in tracked] == [[0]] * 6
    assert all(np.all(t.center_m[:, 1] < 10) for t in tracked)


def test_empty_frame_is_a_missed_frame():
    objects = [{"start": (0.0, 0.0), "vel": (10.0, 0.0), "present": lambda f: f != 3}]
    frames = _frames(objects, 8)
    assert len(frames[3]) == 0
    assert _id_map(frames, _track(frames)) == {0: {0}}


def test_deterministic_and_input_untouched():
    rng = np.random.default_rng(3)
    objects = [
        {
            "start": tuple(rng.uniform(-30, 30, 2)),
            "vel": tuple(rng.uniform(-8, 8, 2)),
            "score": float(s),
        }
        for s in rng.uniform(0.1, 1.0, 25)
    ]
    frames = _frames(objects, 20)
    before = [Boxes3D(**{k: getattr(f, k).copy() for k in Boxes3D._ARRAYS}) for f in frames]
    times = np.arange(20) * DT_S
    first = PubTracker().track_clip(times, frames)
    second = PubTracker().track_clip(times, frames)
    assert all(a == b for a, b in zip(first, second, strict=True))
    assert all(a == b for a, b in zip(frames, before, strict=True))


def test_greedy_match_against_brute_force():
    rng = np.random.default_rng(7)
    for _ in range(50):
        n, m = rng.integers(0, 8, size=2)
        dist = rng.uniform(0, 10, size=(n, m)).round(1)  # rounded: ties happen
        allowed = rng.random((n, m)) < 0.7
        order = rng.permutation(n).astype(np.int64)
        expected = np.full(n, -1)
        free = set(range(m))
        for i in order:
            options = [(dist[i, j], j) for j in sorted(free) if allowed[i, j]]
            if options:
                expected[i] = min(options)[1]
                free.remove(expected[i])
        np.testing.assert_array_equal(greedy_match(dist, allowed, order), expected)


def test_greedy_is_not_hungarian():
    # det 0 (visited first) takes track 0 at 1.0 although the global optimum would give it
    # track 1 (1.5) and det 1 track 0 (0.2).
    dist = np.array([[1.0, 1.5], [0.2, 9.0]])
    allowed = np.array([[True, True], [True, False]])
    assert greedy_match(dist, allowed, np.array([0, 1])).tolist() == [0, -1]


def test_config_errors_name_the_key():
    with pytest.raises(ValueError, match="max_age"):
        PubTrackerConfig(max_age=0)
    with pytest.raises(ValueError, match=r"match_distance_m\['lorry'\]"):
        PubTrackerConfig(match_distance_m={"lorry": 3.0})
    with pytest.raises(ValueError, match=r"match_distance_m\['car'\]"):
        PubTrackerConfig(match_distance_m={"car": -1.0})
    with pytest.raises(ValueError, match="new_track_min_score"):
        PubTrackerConfig(new_track_min_score=1.5)
    with pytest.raises(ValueError, match="static_classes"):
        PubTrackerConfig(static_classes=("cone",))
    with pytest.raises(ValueError, match=r"still_displacement_m\['bus'\]"):
        PubTrackerConfig(still_displacement_m={"bus": float("nan")})
    with pytest.raises(ConfigError, match="tracker_options: unknown key 'maxage'"):
        get_tracker("pub", {"maxage": 2})
    with pytest.raises(KeyError, match="unknown tracker"):
        get_tracker("sort")
    # Partial per-class overrides keep the defaults of the other classes.
    config = get_tracker("pub", {"match_distance_m": {"car": 2.0}}).config
    assert config.match_distance_m["car"] == 2.0 and config.match_distance_m["bus"] == 5.5


def test_bad_inputs_are_rejected():
    frames = _frames([{"start": (0.0, 0.0), "vel": (0.0, 0.0)}], 3)
    with pytest.raises(ValueError, match="strictly increasing"):
        PubTracker().track_clip(np.array([0.0, 0.5, 0.5]), frames)
    with pytest.raises(ValueError, match="shape"):
        PubTracker().track_clip(np.array([0.0, 0.5]), frames)
    frames[1].frame = "ego"
    with pytest.raises(ValueError, match=r"detections\[1\].*'ego'"):
        PubTracker().track_clip(np.array([0.0, 0.5, 1.0]), frames)


def test_track_scores_weigh_the_mean_score_by_the_track_length():
    # Track 7: scores 0.9, 0.5, 0.7 (mean 0.7, 3 boxes); track 2: one box of 0.8.
    score = track_scores(np.array([7, 2, 7, 7]), np.array([0.9, 0.8, 0.5, 0.7]), 3.0)
    long_score = 0.7 * (1 - np.exp(-1.0))
    short_score = 0.8 * (1 - np.exp(-1 / 3))
    np.testing.assert_allclose(score, [long_score, short_score, long_score, long_score])


def test_tracked_boxes_carry_their_track_score_or_the_detection_score():
    objects = [{"start": (0.0, 0.0), "vel": (5.0, 0.0), "score": 0.6}]
    frames = _frames(objects, 4)
    frames[1].score[:] = 0.2
    tracked = _track(frames, PubTrackerConfig(track_score_length=3))
    expected = np.mean([0.6, 0.2, 0.6, 0.6]) * (1 - np.exp(-4 / 3))
    np.testing.assert_allclose([t.score[0] for t in tracked], expected, rtol=1e-6)
    plain = _track(frames)  # the default: CenterPoint's detection scores
    np.testing.assert_allclose([t.score[0] for t in plain], [0.6, 0.2, 0.6, 0.6], rtol=1e-6)
    with pytest.raises(ValueError, match="track_score_length"):
        PubTrackerConfig(track_score_length=-1)


SMALL = (("pedestrian", "bicycle", "motorcycle", "traffic_cone"),)


def _relabelled(labels: list[str], offset_m: float = 0.0) -> list[Boxes3D]:
    """One object at 5 m/s along x, detected with velocity, under the given class per frame;
    frame 2's detection is moved ``offset_m`` sideways."""
    frames = _frames([{"start": (0.0, 0.0), "vel": (5.0, 0.0)}], len(labels))
    for f, name in enumerate(labels):
        frames[f].label[:] = class_index(name)
    frames[2].center_m[0, 1] += offset_m
    return frames


def test_class_groups_let_a_relabelled_object_keep_its_track():
    frames = _relabelled(["motorcycle", "motorcycle", "pedestrian", "bicycle", "motorcycle"])
    # Per class (CenterPoint): the pedestrian and bicycle detections start their own tracks;
    # the motorcycle track coasts and takes frame 4 back.
    ids = [int(t.track_id[0]) for t in _track(frames, PubTrackerConfig(class_groups=()))]
    assert ids == [0, 0, 1, 2, 0]
    grouped = _track(frames, PubTrackerConfig(class_groups=SMALL))
    assert [int(t.track_id[0]) for t in grouped] == [0, 0, 0, 0, 0]
    # Each box keeps its detection's class: the refine stage votes the track's.
    assert [int(t.label[0]) for t in grouped] == [int(f.label[0]) for f in frames]


def test_class_groups_use_the_smaller_gate_and_keep_groups_apart():
    # 1.5 m off the motorcycle track's prediction: inside the motorcycle gate (13 m) but not the
    # pedestrian's (1 m), which a pedestrian detection must meet to continue it.
    frames = _relabelled(["motorcycle", "motorcycle", "pedestrian"], offset_m=1.5)
    assert [int(t.track_id[0]) for t in _track(frames, PubTrackerConfig(class_groups=SMALL))] == [
        0,
        0,
        1,
    ]
    # A car never continues a grouped class's track (cars are not in the group).
    frames = _relabelled(["motorcycle", "motorcycle", "car"])
    assert [int(t.track_id[0]) for t in _track(frames, PubTrackerConfig(class_groups=SMALL))] == [
        0,
        0,
        1,
    ]


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        ("car", "lists of class names"),
        ([["car", "lorry"]], "unknown class 'lorry'"),
        ([["car", "truck"], ["truck"]], "'truck' is in two groups"),
    ],
)
def test_class_groups_are_validated(groups, message):
    with pytest.raises(ValueError, match=message):
        PubTrackerConfig(class_groups=groups)


def test_pipeline_groups_small_classes_only_when_refine_votes_the_class():
    from autolabel.config import PipelineConfig
    from autolabel.stages import Models
    from trackers.pub_tracker import REFINE_CLASS_GROUPS

    def groups(**kwargs):
        return Models(PipelineConfig(**kwargs)).tracker().config.class_groups

    assert groups(detector="lidar") == REFINE_CLASS_GROUPS
    # One class per track where the tracker's boxes are the labels.
    assert groups(detector="lidar", refine="none") == ()
    assert groups(detector="gt") == ()
    # The user's choice wins.
    assert groups(detector="lidar", tracker_options={"class_groups": []}) == ()
