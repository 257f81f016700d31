"""Motion rules of the action, counting and temporal-order questions on constructed tracks.

Expected values are computed here from the paths by hand (closed forms) or with numpy's
polyfit, independently of ``autolabel.qa.motion``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from autolabel.qa import motion
from autolabel.qa.dynamic import action_keys, crossing_counts
from autolabel.qa.quantities import QUANTITIES, resolve_params
from tests.dynamic_tracks import (
    TIME_S,
    arc,
    ask,
    braking,
    frame_at,
    lane_change,
    scene_attributes,
    straight,
)

CONSTANT, BRAKING, LEFT_TURN, RIGHT_TURN, LANE_LEFT, LANE_RIGHT, BEND, PARKED = range(8)


@pytest.fixture(scope="module")
def movers():
    return scene_attributes(
        [
            ("car", straight(10.0, -3.5, 8.0)),
            ("car", braking(0.0, 3.5, 12.0, 3.0, 4.0)),  # stops at t = 8 s
            ("car", arc(20.0, 20.0, 15.0, 5.0, -math.pi / 2, left=True)),
            ("car", arc(20.0, -20.0, 15.0, 5.0, math.pi / 2, left=False)),
            ("car", lane_change(-30.0, -3.5, 10.0, 3.5, 5.0, 8.0)),
            ("car", lane_change(-30.0, 7.0, 10.0, -3.5, 5.0, 8.0)),
            ("car", arc(0.0, 300.0, 300.0, 10.0, -math.pi / 2, left=True)),  # a gentle bend
            ("car", straight(15.0, 3.0, 0.0)),
        ]
    )


def outcome(res, i=0):
    return res.outcome[i], bool(res.valid[i])


def test_constant_speed(movers):
    assert outcome(ask(movers, "motion_state", 6.0, [CONSTANT])) == ("moving", True)
    res = ask(movers, "speed_trend", 6.0, [CONSTANT])
    assert outcome(res) == ("steady", True)
    assert res.values["acceleration_mps2"][0] == pytest.approx(0.0, abs=1e-9)
    assert outcome(ask(movers, "turn_direction", 6.0, [CONSTANT])) == ("straight", True)
    res = ask(movers, "lane_change", 6.0, [CONSTANT])
    assert outcome(res) == ("none", True)
    assert res.values["lateral_shift_m"][0] == pytest.approx(0.0, abs=1e-9)
    assert ask(movers, "motion_state", 6.0, [CONSTANT]).values["speed_mps"][0] == pytest.approx(8)


def test_braking_and_stop(movers):
    # Speeds over [t - 2, t] at t = 6 s: central differences of the path, fitted by a line.
    path = braking(0.0, 3.5, 12.0, 3.0, 4.0)
    t = np.arange(4.0, 6.01, 0.5)
    speed = (path(t + 0.5)[:, 0] - path(t - 0.5)[:, 0]) / 1.0
    expected = np.polyfit(t, speed, 1)[0]
    res = ask(movers, "speed_trend", 6.0, [BRAKING])
    assert outcome(res) == ("braking", True)
    assert res.values["acceleration_mps2"][0] == pytest.approx(expected, rel=1e-9)
    assert expected == pytest.approx(-3.0, abs=0.3)
    # Stopped from t = 8 s: stopped, and neither braking nor accelerating any more.
    assert outcome(ask(movers, "motion_state", 10.0, [BRAKING])) == ("stopped", True)
    assert not ask(movers, "speed_trend", 10.0, [BRAKING]).valid[0]
    # At 3.0 m/s^2 from 12 m/s, at t = 7 s it is at 3 m/s: moving, then stopped in the window.
    p = resolve_params(QUANTITIES["object_caption"], None, "caption")
    keys = action_keys(movers, np.array([frame_at(7.0)]), np.array([BRAKING]), p)
    assert keys[0] == "slowing_to_a_stop"
    keys = action_keys(movers, np.array([frame_at(12.0)]), np.array([BRAKING]), p)
    assert keys[0] == "standing_still"


def test_turns(movers):
    # A circle at 5 m/s, radius 15 m: the travel direction over [t-2, t-1] is the tangent at
    # t - 1.5 and over [t+2, t+3] the one at t + 2.5, so it turns by omega * 4 s.
    expected_deg = math.degrees(5.0 / 15.0 * 4.0)
    res = ask(movers, "turn_direction", 6.0, [LEFT_TURN, RIGHT_TURN])
    assert list(res.outcome) == ["left", "right"] and res.valid.all()
    assert res.values["heading_change_deg"] == pytest.approx([expected_deg, -expected_deg])
    # A turn is not a lane change (its heading changes by far more than 10 degrees).
    assert not ask(movers, "lane_change", 6.0, [LEFT_TURN]).valid[0]
    p = resolve_params(QUANTITIES["object_caption"], None, "caption")
    keys = action_keys(movers, np.full(2, frame_at(6.0)), np.array([LEFT_TURN, RIGHT_TURN]), p)
    assert list(keys) == ["turning_left", "turning_right"]


def test_lane_changes(movers):
    # The shift happens between 5 and 8 s; the window of t = 6 s is [4, 9]: straight before
    # and after, so the heading does not change and the path moves 3.5 m sideways.
    res = ask(movers, "lane_change", 6.0, [LANE_LEFT, LANE_RIGHT])
    assert list(res.outcome) == ["left", "right"] and res.valid.all()
    assert res.values["lateral_shift_m"] == pytest.approx([3.5, -3.5])
    turn = ask(movers, "turn_direction", 6.0, [LANE_LEFT])
    assert outcome(turn) == ("straight", True)
    p = resolve_params(QUANTITIES["object_caption"], None, "caption")
    keys = action_keys(movers, np.full(2, frame_at(6.0)), np.array([LANE_LEFT, LANE_RIGHT]), p)
    assert list(keys) == ["changing_lanes_left", "changing_lanes_right"]
    # The first half only (window [1.5, 6.5] of t = 3.5 s: drifting left and turned out 8.6
    # degrees, so an arc would have drifted farther) decides nothing.
    assert not ask(movers, "lane_change", 3.5, [LANE_LEFT]).valid[0]


def test_bend_is_not_a_lane_change(movers):
    # Radius 300 m at 10 m/s: 7.6 degrees over the window's heading spans, a 5 s arc drifts
    # 50^2 / 600 = 4.2 m sideways, yet the arc explains all of it.
    res = ask(movers, "lane_change", 6.0, [BEND])
    assert outcome(res) == ("none", True)
    assert res.values["lateral_shift_m"][0] == pytest.approx(0.0, abs=1e-6)
    turn = ask(movers, "turn_direction", 6.0, [BEND])
    assert turn.values["heading_change_deg"][0] == pytest.approx(math.degrees(10 / 300 * 4))
    assert not turn.valid[0]  # between straight (5) and a turn (20 degrees)


def test_parked(movers):
    assert outcome(ask(movers, "motion_state", 6.0, [PARKED])) == ("stopped", True)
    for name in ("speed_trend", "turn_direction", "lane_change"):
        assert not ask(movers, name, 6.0, [PARKED]).valid[0], name
    p = resolve_params(QUANTITIES["object_caption"], None, "caption")
    assert action_keys(movers, np.array([frame_at(6.0)]), np.array([PARKED]), p)[0] == (
        "standing_still"
    )


def test_approaching_and_receding():
    attrs = scene_attributes(
        [("car", straight(60.0, 0.0, 0.0)), ("car", straight(10.0, 0.0, 8.0))],
        ego=straight(0.0, 0.0, 5.0),
    )
    res = ask(attrs, "range_trend", 4.0, [0, 1])
    assert list(res.outcome) == ["approaching", "receding"] and res.valid.all()
    assert res.values["range_rate_mps"] == pytest.approx([-5.0, 3.0])


def test_comes_within_uses_the_observed_future_only():
    attrs = scene_attributes(
        [
            ("car", straight(25.0, 3.0, -5.0)),  # x = 15 at t = 2, passes at 3 m at t = 5
            ("car", straight(40.0, 3.0, -1.0)),  # stays over 35 m away
            ("car", straight(25.0, 3.0, -5.0)),  # as the first, but tracked only until 3 s
            ("car", straight(10.5, 0.0, 0.0)),  # within 10 + 1 m now: not asked
        ],
        alive=[(0, 20), (0, 20), (0, 3.0), (0, 20)],
    )
    res = ask(attrs, "comes_within", 2.0, [0, 1, 2, 3])
    assert list(res.outcome[:2]) == ["yes", "no"]
    assert list(res.valid) == [True, True, False, False]
    assert res.values["min_distance_m"][0] == pytest.approx(3.0)
    assert res.values["min_distance_m"][1] == pytest.approx(math.hypot(35.0, 3.0))


def test_crossing_count_and_stability():
    ped = "pedestrian"
    attrs = scene_attributes(
        [
            (ped, straight(10.0, 5.0, 0.0, -2.0)),  # crosses ahead: y 3 -> -7 over [1, 6]
            (ped, straight(0.0, 5.0, 1.0)),  # walks along the kerb
            (ped, straight(-10.0, 5.0, 0.0, -2.0)),  # crosses behind the ego
            (ped, lambda t: np.stack([np.full_like(t, 20.0), np.maximum(5 - 2 * t, 0.5)], 1)),
            ("car", straight(25.0, -8.0, 0.0, 4.0)),  # crosses ahead, y -4 -> 16 over [1, 6]
        ]
    )
    groups = [
        {"key": "pedestrians", "text": "pedestrians", "classes": ["pedestrian"]},
        {"key": "vehicles", "text": "vehicles", "classes": ["car", "truck"]},
    ]
    res = ask(attrs, "count_crossing", 3.0, [[], []], {"groups": groups}, option=[0, 1])
    assert list(res.values["count"]) == [1, 1] and res.valid.all()
    # One that ends 1.6 m past the centre line crosses at side_min 1.5 but not at 2.0.
    barely = scene_attributes(
        [(ped, lambda t: np.stack([np.full_like(t, 8.0), np.maximum(3.0 - 1.5 * t, -1.6)], 1))]
    )
    res = ask(barely, "count_crossing", 3.0, [[]], {"groups": groups}, option=[0])
    assert not res.valid[0]
    # Several keyframes in one call count as each alone. Windows [-2, +3] s: at 0.5 s (clipped
    # to 0..3.5 s) the first pedestrian goes y 5 -> -2 and the car y -8 -> 6; at 3 s as above;
    # at 12 s both are far to one side (y -15 and 32 on).
    params = resolve_params(QUANTITIES["count_crossing"], {"groups": groups}, "count_crossing")
    kfs = np.array([frame_at(0.5), frame_at(3.0), frame_at(12.0)])
    counts, stable = crossing_counts(attrs, kfs, params)
    assert counts.tolist() == [[1, 1], [1, 1], [0, 0]] and stable.all()
    for k, kf in enumerate(kfs):
        one_counts, one_stable = crossing_counts(attrs, kf[None], params)
        assert one_counts.tolist() == [counts[k].tolist()]
        assert one_stable.tolist() == [stable[k].tolist()]
    empty_counts, empty_stable = crossing_counts(attrs, np.zeros(0, np.int64), params)
    assert empty_counts.shape == empty_stable.shape == (0, 2)


def test_passes_first():
    attrs = scene_attributes(
        [
            ("car", straight(21.0, 3.0, -5.0)),  # x = 0 at 4.2 s
            ("car", straight(31.0, 3.0, -5.0)),  # at 6.2 s
            ("car", straight(50.0, 3.0, 0.0)),  # never
            ("car", straight(22.0, 3.0, -5.0)),  # at 4.4 s: too close to the first
        ]
    )
    res = ask(attrs, "passes_first", 4.0, [[0, 1], [1, 0], [2, 0], [0, 3], [2, 2]])
    assert list(res.valid) == [True, True, True, False, False]
    assert list(res.outcome[:3]) == ["A", "B", "B"]
    assert res.values["first_pass_s"][:3] == pytest.approx([0.2, 0.2, 0.2])


def test_first_seen_and_appearance_order_with_ties():
    objects = [("car", straight(10.0 + 5 * i, 3.0, 0.0)) for i in range(6)]
    alive = [(0, 20), (0, 20), (3.0, 20), (6.0, 20), (9.0, 20), (3.5, 20)]
    attrs = scene_attributes(objects, alive=alive)
    res = ask(attrs, "first_seen_order", 12.0, [[0, 1], [2, 0], [2, 3], [2, 5]])
    # Both seen from the clip's first frame: a tie; 3.0 vs 3.5 s: within the 1 s margin.
    assert list(res.valid) == [False, True, True, False]
    assert list(res.outcome[1:3]) == ["B", "A"]
    assert res.values["first_seen_a_s"][1:3] == pytest.approx([3.0, 3.0])
    assert res.values["first_seen_b_s"][1:3] == pytest.approx([0.0, 6.0])
    order = ask(
        attrs,
        "appearance_order",
        12.0,
        [[4, 0, 3, 2], [0, 1, 2, 3], [2, 5, 3, 4]],
        {"size": 4},
    )
    # (9, 0, 6, 3) s -> B, D, C, A; two at 0 s, or 3.0 and 3.5 s, are ties.
    assert order.outcome[0] == "B,D,C,A"
    assert list(order.valid[:3]) == [True, False, False]
    three = ask(attrs, "appearance_order", 12.0, [[2, 0, 4]], {"size": 3})
    assert three.outcome[0] == "B,A,C" and three.valid[0]


def test_track_window_never_extrapolates():
    attrs = scene_attributes([("car", straight(10.0, 0.0, 2.0))], alive=[(2.0, 5.0)])
    win = motion.track_window(attrs, np.array([frame_at(4.0)]), np.array([0]), -2.0, 3.0)
    assert list(win.offset_s) == pytest.approx(list(np.arange(-2.0, 3.01, 0.5)))
    present = win.present[0]
    times = TIME_S[frame_at(4.0)] + win.offset_s
    assert list(present) == list((times >= 2.0 - 1e-9) & (times <= 5.0 + 1e-9))
    assert not win.complete[0]


def test_caption_turns_gate_on_the_path_speed_of_turn_direction():
    # A left circle at 1.5 m/s (radius 5 m): it turns by 1.5 / 5 * 4 s = 69 degrees over the
    # window, but below the 2 m/s that ``turn_direction`` (act_turn, SCHEMA.md) requires, so
    # neither the question nor the caption may call it a turn. Its chord speed is constant,
    # 2 * 5 * sin(0.15) = 1.494 m/s: above the motion state's 1 m/s, a steady mover.
    # At 2.5 m/s (radius 8 m) both call it turning left.
    slow = arc(0.0, 20.0, 5.0, 1.5, -math.pi / 2, left=True)
    fast = arc(0.0, -20.0, 8.0, 2.5, -math.pi / 2, left=True)
    attrs = scene_attributes([("car", slow), ("car", fast)])
    assert ask(attrs, "motion_state", 6.0, [0]).values["speed_mps"][0] == pytest.approx(
        2 * 5.0 * math.sin(0.15)
    )
    res = ask(attrs, "turn_direction", 6.0, [0, 1])
    assert list(res.valid) == [False, True] and res.outcome[1] == "left"
    p = resolve_params(QUANTITIES["object_caption"], None, "caption")
    assert p["path_moving_min_mps"] == 2.0 and p["moving_min_mps"] == 1.0
    keys = action_keys(attrs, np.full(2, frame_at(6.0)), np.array([0, 1]), p)
    assert list(keys) == ["steady", "turning_left"]
