"""Joining a track's fragments over the whole clip (``autolabel.refine.joining``): constructed
fragments whose residuals against each other's trajectories are computed here by hand."""

from __future__ import annotations

import numpy as np
import pytest

from autolabel.classes import class_index
from autolabel.refine import RefineConfig, refine_tracks
from autolabel.refine.joining import join_fragments
from tests.test_refine import TIMES, boxes_of, merge, track_boxes

CAR, TRUCK, PED = class_index("car"), class_index("truck"), class_index("pedestrian")
BARRIER = class_index("barrier")


def fragments(*parts: tuple[int, int, np.ndarray, np.ndarray]):
    """(track id, class, frames, (n, 2) centres) per fragment -> the join's flat inputs."""
    tid = np.concatenate([np.full(len(f), t) for t, _, f, _ in parts])
    label = np.concatenate([np.full(len(f), c) for _, c, f, _ in parts])
    frame = np.concatenate([np.asarray(f) for _, _, f, _ in parts])
    xy = np.concatenate([np.asarray(p, dtype=np.float64) for _, _, _, p in parts])
    return tid, frame, xy, label


def join(parts, gate_m=1.5, rate=0.5, min_obs=1):
    tid, frame, xy, label = fragments(*parts)
    return join_fragments(tid, frame, TIMES, xy, label, gate_m, rate, 3, min_obs), tid


def still(n: int, x: float, y: float) -> np.ndarray:
    return np.tile(np.array([x, y], dtype=np.float64), (n, 1))


def test_a_car_seen_as_a_truck_in_its_gap_is_one_track():
    # Parked at (10, 5): a truck track at frames 0-3 and 10-13 (its centre 0.3 m off, a longer
    # box) and a car track at 4-9 in the truck track's gap. The car's centres lie 0.3 m from
    # the truck track's interpolation (residual share 0.3 / 1.5 each), the truck's 0.3 m from
    # the car track's ends (slope zero): joined under the smaller id.
    truck_frames = np.r_[0:4, 10:14]
    got, tid = join(
        [(7, TRUCK, truck_frames, still(8, 10.3, 5.0)), (9, CAR, np.arange(4, 10), still(6, 10, 5))]
    )
    assert np.all(got == 7)


def test_a_mover_lost_for_a_second_continues_at_constant_velocity():
    # 5 m/s along x, observed at frames 0-5 (t 0-2.5 s) and again 8-13 (t 4-6.5 s); the second
    # fragment starts where constant velocity puts it (x = 20 at t = 4).
    first, second = np.arange(6), np.arange(8, 14)
    path = np.column_stack([5.0 * TIMES, np.zeros(len(TIMES))])
    got, _ = join([(0, CAR, first, path[first]), (1, CAR, second, path[second])])
    assert np.all(got == 0)
    # Beside that path, each fragment's boxes lie `off` from the other's extrapolation, 1.5 to
    # 4 s beyond its end: allowed 1.5 + 0.5 * tau = 2.25, 2.5, 2.75, 3.0, 3.25, 3.5 m, so the
    # mean residual share is off * 0.35580 and reaches 1 at off = 2.8106 m.
    allowed = 1.5 + 0.5 * np.array([1.5, 2.0, 2.5, 3.0, 3.5, 4.0])
    assert np.mean(1 / allowed) == pytest.approx(0.35580, abs=1e-5)
    for off, joined in ((2.80, True), (2.85, False), (4.0, False)):
        beside = path[second] + [0.0, off]
        got, tid = join([(0, CAR, first, path[first]), (1, CAR, second, beside)])
        assert np.all(got == 0) if joined else np.array_equal(got, tid), off


def test_one_stray_box_is_tolerated_up_to_twice_its_allowed_residual():
    # Parked at the origin, seen at frames 0-5 and 6-11; the second fragment's box at frame 9
    # (t 4.5 s, 2 s after the first fragment's last) strays sideways: allowed 1.5 + 0.5 * 2 =
    # 2.5 m. At 4.5 m its share is 1.8 (mean 0.3): joined; at 5.5 m it is 2.2 > 2: apart.
    for stray, joined in ((4.5, True), (5.5, False)):
        second = still(6, 0, 0)
        second[3, 1] = stray
        got, tid = join(
            [(0, CAR, np.arange(6), still(6, 0, 0)), (1, CAR, np.arange(6, 12), second)]
        )
        assert np.all(got == 0) if joined else np.array_equal(got, tid), stray


def test_fragments_that_share_a_keyframe_or_no_class_group_stay_apart():
    # Same place, but both seen at frame 5: two objects (or a duplicate, not a fragment).
    got, tid = join(
        [(0, CAR, np.arange(0, 6), still(6, 0, 0)), (1, CAR, np.arange(5, 9), still(4, 0, 0))]
    )
    assert np.array_equal(got, tid)
    # A pedestrian where a car was: classes of different groups.
    got, tid = join(
        [(0, CAR, np.arange(0, 5), still(5, 0, 0)), (1, PED, np.arange(5, 9), still(4, 0, 0))]
    )
    assert np.array_equal(got, tid)
    # Barriers join nothing (a row of them: a fragment of one is where its neighbour stands).
    got, tid = join(
        [
            (0, BARRIER, np.arange(0, 5), still(5, 0, 0)),
            (1, BARRIER, np.arange(5, 9), still(4, 0, 0)),
        ]
    )
    assert np.array_equal(got, tid)


def test_short_fragments_join_nothing():
    # A two-box fragment exactly where a parked car was: below min_observations 3 it stays
    # apart (clutter comes and goes in short fragments); with min_observations 2 it joins.
    parts = [(0, CAR, np.arange(0, 5), still(5, 3, 3)), (1, CAR, [8, 9], still(2, 3, 3))]
    got, tid = join(parts, min_obs=3)
    assert np.array_equal(got, tid)
    got, _ = join(parts, min_obs=2)
    assert np.all(got == 0)


def test_the_cheapest_pair_wins_and_the_other_candidate_stays_apart():
    # A parked car at (0, 0) seen at frames 0-4; two later fragments at frames 6-10, one 0.2 m
    # away (residual share 0.2 / (1.5 + 0.5 tau)), the other 1.0 m away: both within the gate,
    # but they share keyframes, so only the cheaper one joins the first.
    got, tid = join(
        [
            (0, CAR, np.arange(5), still(5, 0, 0)),
            (1, CAR, np.arange(6, 11), still(5, 1.0, 0)),
            (2, CAR, np.arange(6, 11), still(5, 0.2, 0)),
        ]
    )
    assert list(np.unique(got[tid == 2])) == [0]
    assert list(np.unique(got[tid == 1])) == [1]


def test_refine_joins_a_parked_cars_fragments_and_votes_one_class():
    # The truck fragment at frames 0-3 and 10-13 (score 0.3) alone would keep its span 0-13 and
    # fill frames 4-9 over the car track's boxes there: two boxes on one car. Joined, one
    # track of 14 boxes; the class vote is car (6 x 0.8 = 4.8 against 8 x 0.3 = 2.4).
    truck_frames = np.r_[0:4, 10:14]
    truck = track_boxes(
        3, "truck", still(8, 10.2, 5.0), np.zeros(8), frames=truck_frames, score=0.3
    )
    for f in truck_frames:
        truck[f].size_wlh_m[:] = [2.5, 6.7, 2.7]
    car = track_boxes(4, "car", still(6, 10.0, 5.0), np.zeros(6), frames=np.arange(4, 10))
    refined, summary = refine_tracks(TIMES, merge(truck, car))
    assert summary.joined == 1 and summary.tracks_out == 1
    frames, boxes = boxes_of(refined, 3)
    assert list(frames) == list(range(14))
    assert np.all(boxes.label == CAR)
    # Its pose from its car boxes (the truck boxes sit 0.2 m off and are longer): the car's
    # centre and the car boxes' size.
    assert boxes.center_m[:, :2] == pytest.approx(np.tile([10.0, 5.0], (14, 1)), abs=1e-6)
    assert boxes.size_wlh_m[0] == pytest.approx([1.9, 4.5, 1.6])
    assert boxes.score[0] == pytest.approx((4.8 + 2.4) / 14 * (1 - np.exp(-14 / 3)), rel=1e-6)
    # Off: the two tracks stay, the truck's filled over the car's gap rows.
    refined, summary = refine_tracks(TIMES, merge(truck, car), RefineConfig(join_fragments=False))
    assert summary.joined == 0 and summary.tracks_out == 2
    assert list(boxes_of(refined, 3)[0]) == list(range(14))
