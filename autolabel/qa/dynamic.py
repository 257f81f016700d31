"""Quantities of dynamic-object QA: actions, counts, temporal order, appearance and captions.

Registered into :data:`autolabel.qa.quantities.QUANTITIES` (imported there), so templates name
them like any other quantity and ``check-qa`` re-derives them from the attributes:

- action (4D-Bench "action"): ``motion_state``, ``speed_trend``, ``turn_direction``,
  ``lane_change``, ``range_trend``, ``comes_within`` (:mod:`autolabel.qa.motion` holds the rules);
- counting: ``count_visible`` (regions of a class group at the keyframe, over all six cameras:
  a region is one object, so an object two cameras show counts once) and ``count_crossing``
  (tracks of the group that crossed the ego's path ahead during the keyframe's window);
- temporal order (SPAR appearance order): ``first_seen_order``, ``appearance_order`` (ranked set
  by the time each track was first seen) and ``passes_first``;
- appearance: ``region_colour`` (the colour word of the median L*a*b* colour under the mask,
  :mod:`autolabel.colour`);
- captions: ``object_caption`` (one region: colour, class, size, position, action) and
  ``scene_caption`` (every marked region of one camera image, MetaVQA's describe_scenario).

Thresholds are parameters with defaults here; the packaged values are in the templates
(``qa_templates/action.yaml`` ...). Windows are relative to the keyframe, seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from autolabel.colour import DEFAULT_NAME_MARGIN, NAMED_COLOURS_RGB, name_colours
from autolabel.qa import motion
from autolabel.qa.quantities import (
    MAX_RANKED_SET,
    RANK_KEYS,
    QuantityInput,
    QuantityResult,
    quantity,
    role_orders,
)

ROLE_AB = ("A", "B")


def _tracks(q: QuantityInput, role: int = 0) -> np.ndarray:
    return np.asarray(q.attrs.track_id)[np.maximum(q.rows[:, role], 0)]


def _window(q: QuantityInput, start_s: float, end_s: float, role: int = 0) -> motion.TrackWindow:
    return motion.track_window(q.attrs, q.frame_index, _tracks(q, role), start_s, end_s)


def _check_window(p: Mapping[str, Any]) -> None:
    if not p["window_end_s"] > p["window_start_s"]:
        raise ValueError("window_end_s: must be after window_start_s")
    for key in ("window_start_s", "window_end_s"):
        if abs(p[key]) > 10:
            raise ValueError(f"{key}: must be within 10 s of the keyframe")


def _check_positive(*keys: str):
    def check(p: Mapping[str, Any]) -> None:
        for key in keys:
            if not p[key] > 0:
                raise ValueError(f"{key}: must be > 0, got {p[key]!r}")
        if "window_start_s" in p:
            _check_window(p)

    return check


# --------------------------------------------------------------------------------------------
# Action.

MOTION_STATE_DEFAULTS = {"moving_min_mps": 1.0, "stopped_max_mps": 0.3}


def _check_motion_state(p: Mapping[str, Any]) -> None:
    if not p["moving_min_mps"] > p["stopped_max_mps"] >= 0:
        raise ValueError("moving_min_mps: must be above stopped_max_mps (>= 0)")


@quantity(
    "motion_state",
    values=("speed_mps",),
    outcomes=("moving", "stopped"),
    defaults=MOTION_STATE_DEFAULTS,
    check_params=_check_motion_state,
)
def motion_state_q(q: QuantityInput) -> QuantityResult:
    """Whether the region is moving (speed >= ``moving_min_mps``) or stopped (<=
    ``stopped_max_mps``) at the keyframe; invalid between."""
    speed = q.column("speed_mps").astype(np.float64)
    out, valid = motion.motion_state(speed, q.params["moving_min_mps"], q.params["stopped_max_mps"])
    return QuantityResult(valid=valid, values={"speed_mps": speed}, outcome=out)


SPEED_TREND_DEFAULTS = {
    "window_start_s": -2.0,
    "window_end_s": 0.0,
    "accel_min_mps2": 0.5,
    "steady_max_mps2": 0.2,
    "moving_min_mps": 1.0,
}


def _check_speed_trend(p: Mapping[str, Any]) -> None:
    _check_window(p)
    if not p["accel_min_mps2"] > p["steady_max_mps2"] >= 0:
        raise ValueError("accel_min_mps2: must be above steady_max_mps2 (>= 0)")


@quantity(
    "speed_trend",
    values=("acceleration_mps2",),
    outcomes=("accelerating", "braking", "steady"),
    defaults=SPEED_TREND_DEFAULTS,
    check_params=_check_speed_trend,
)
def speed_trend_q(q: QuantityInput) -> QuantityResult:
    """Accelerating / braking / steady from the slope of the speed over the window (all samples
    observed; the region must move somewhere in it)."""
    p = q.params
    win = _window(q, p["window_start_s"], p["window_end_s"])
    out, valid, slope = motion.speed_trend(
        win.column(q.attrs, "speed_mps"),
        win.offset_s,
        p["accel_min_mps2"],
        p["steady_max_mps2"],
        p["moving_min_mps"],
    )
    return QuantityResult(
        valid=valid & win.complete, values={"acceleration_mps2": slope}, outcome=out
    )


PATH_DEFAULTS = {
    "window_start_s": -2.0,
    "window_end_s": 3.0,
    "heading_span_s": 1.0,
    "moving_min_mps": 2.0,
}


def _path(q: QuantityInput, p: Mapping[str, Any], frame_index=None, track_id=None):
    """Clip-frame path of each candidate's track over the window and its headings.

    Returns (window, positions (N, W, 2), start heading, heading change, moving (N,) bool: every
    sample observed and at least ``moving_min_mps``)."""
    fi = q.frame_index if frame_index is None else frame_index
    tid = _tracks(q) if track_id is None else track_id
    win = motion.track_window(q.attrs, fi, tid, p["window_start_s"], p["window_end_s"])
    pos = motion.clip_positions(q.attrs, win)
    span = max(1, int(round(p["heading_span_s"] / motion.WINDOW_STEP_S)))
    if span >= len(win.offset_s):
        raise ValueError("heading_span_s: longer than the window")
    # A heading needs the object to move at least moving_min over the span.
    min_travel = p["moving_min_mps"] * span * motion.WINDOW_STEP_S
    h0, _, dpsi = motion.travel_headings(pos, span, min_travel)
    speed = win.column(q.attrs, "speed_mps")
    with np.errstate(invalid="ignore"):
        moving = win.complete & np.all(speed >= p["moving_min_mps"], axis=1)
    return win, pos, h0, dpsi, moving & np.isfinite(dpsi)


def _check_turn(p: Mapping[str, Any]) -> None:
    _check_window(p)
    if not p["turn_min_deg"] > p["straight_max_deg"] >= 0:
        raise ValueError("turn_min_deg: must be above straight_max_deg (>= 0)")
    if not p["heading_span_s"] > 0 or not p["moving_min_mps"] > 0:
        raise ValueError("heading_span_s: heading_span_s and moving_min_mps must be > 0")


@quantity(
    "turn_direction",
    values=("heading_change_deg",),
    outcomes=("left", "right", "straight"),
    defaults={**PATH_DEFAULTS, "turn_min_deg": 20.0, "straight_max_deg": 5.0},
    check_params=_check_turn,
)
def turn_direction_q(q: QuantityInput) -> QuantityResult:
    """Left / right / straight from the change of the direction of travel over the window."""
    p = q.params
    _, _, _, dpsi, moving = _path(q, p)
    out, valid = motion.turn_direction(dpsi, p["turn_min_deg"], p["straight_max_deg"])
    return QuantityResult(valid=valid & moving, values={"heading_change_deg": dpsi}, outcome=out)


def _check_lane(p: Mapping[str, Any]) -> None:
    _check_window(p)
    if not p["change_min_m"] > p["keep_max_m"] >= 0:
        raise ValueError("change_min_m: must be above keep_max_m (>= 0)")
    if not p["heading_max_deg"] > 0 or not p["heading_span_s"] > 0:
        raise ValueError("heading_max_deg: heading_max_deg and heading_span_s must be > 0")


@quantity(
    "lane_change",
    values=("lateral_shift_m",),
    outcomes=("left", "right", "none"),
    defaults={**PATH_DEFAULTS, "change_min_m": 2.0, "keep_max_m": 0.5, "heading_max_deg": 10.0},
    check_params=_check_lane,
)
def lane_change_q(q: QuantityInput) -> QuantityResult:
    """Lane change to the left / right, or none, relative to the region's own initial heading."""
    p = q.params
    _, pos, h0, dpsi, moving = _path(q, p)
    shift, drift = motion.lateral_shift(pos, h0, dpsi)
    out, valid = motion.lane_change(
        shift, drift, dpsi, p["change_min_m"], p["keep_max_m"], p["heading_max_deg"]
    )
    return QuantityResult(valid=valid & moving, values={"lateral_shift_m": shift}, outcome=out)


@quantity(
    "range_trend",
    values=("range_rate_mps",),
    outcomes=("approaching", "receding"),
    defaults={"window_start_s": -2.0, "window_end_s": 0.0, "rate_min_mps": 0.5},
    check_params=_check_positive("rate_min_mps"),
)
def range_trend_q(q: QuantityInput) -> QuantityResult:
    """Approaching / moving away from the ego: the slope of its distance over the window."""
    p = q.params
    win = _window(q, p["window_start_s"], p["window_end_s"])
    out, valid, rate = motion.range_trend(
        win.column(q.attrs, "distance_m"), win.offset_s, p["rate_min_mps"]
    )
    return QuantityResult(valid=valid & win.complete, values={"range_rate_mps": rate}, outcome=out)


@quantity(
    "comes_within",
    values=("min_distance_m", "within_m", "within_horizon_s"),
    outcomes=("yes", "no"),
    defaults={"within_m": 10.0, "horizon_s": 3.0, "margin_m": 1.0},
    check_params=_check_positive("within_m", "horizon_s", "margin_m"),
)
def comes_within_q(q: QuantityInput) -> QuantityResult:
    """Whether the region comes within ``within_m`` of the ego in the next ``horizon_s``.

    Read from the observed future track only: ``yes`` when an observed future sample is within
    ``within_m - margin_m``; ``no`` when every sample up to the horizon is observed and at least
    ``within_m + margin_m`` away. Asked only of regions now farther than ``within_m +
    margin_m``.
    """
    p = q.params
    win = _window(q, motion.WINDOW_STEP_S, p["horizon_s"])
    dist = win.column(q.attrs, "distance_m")
    with np.errstate(invalid="ignore"):
        nearest = np.where(
            win.present.any(axis=1), np.nanmin(np.where(win.present, dist, np.inf), axis=1), np.nan
        )
    now = q.column("distance_m").astype(np.float64)
    yes = nearest <= p["within_m"] - p["margin_m"]
    no = win.complete & (nearest >= p["within_m"] + p["margin_m"])
    valid = (yes | no) & (now >= p["within_m"] + p["margin_m"])
    n = q.n
    return QuantityResult(
        valid=valid,
        values={
            "min_distance_m": nearest,
            "within_m": np.full(n, float(p["within_m"])),
            "within_horizon_s": np.full(n, float(p["horizon_s"])),
        },
        outcome=np.where(yes, "yes", "no").astype(object),
    )


# --------------------------------------------------------------------------------------------
# Counting.


def _check_groups(p: Mapping[str, Any]) -> None:
    from autolabel.classes import DETECTION_CLASSES

    groups = p["groups"]
    if not isinstance(groups, (list, tuple)) or not groups:
        raise ValueError("groups: expected a non-empty list of {key, text, classes}")
    keys = []
    for i, g in enumerate(groups):
        if not isinstance(g, Mapping) or set(g) != {"key", "text", "classes"}:
            raise ValueError(f"groups[{i}]: expected a mapping with key, text, classes")
        if not isinstance(g["key"], str) or not isinstance(g["text"], str) or not g["text"]:
            raise ValueError(f"groups[{i}]: key and text must be strings")
        bad = (
            [c for c in g["classes"] if c not in DETECTION_CLASSES]
            if isinstance(g["classes"], (list, tuple))
            else [g["classes"]]
        )
        if bad or not g["classes"]:
            raise ValueError(f"groups[{i}].classes: unknown or missing classes {bad}")
        keys.append(g["key"])
    if len(set(keys)) != len(keys):
        raise ValueError("groups: duplicate keys")


def _group_label_mask(p: Mapping[str, Any], option: np.ndarray) -> np.ndarray:
    """(N, n_classes) bool: class index c belongs to the candidate's group."""
    from autolabel.classes import DETECTION_CLASSES

    member = np.array(
        [[c in g["classes"] for c in DETECTION_CLASSES] for g in p["groups"]], dtype=bool
    )
    return member[option]


def _count_bucket(count: np.ndarray) -> np.ndarray:
    return np.minimum(count, 3).astype(str).astype(object)


@quantity(
    "count_visible",
    values=("count",),
    defaults={"groups": []},
    check_params=_check_groups,
    options_param="groups",
)
def count_visible_q(q: QuantityInput) -> QuantityResult:
    """How many regions of the candidate's class group the keyframe has, over all cameras.

    The candidate's regions are the group's regions; each is one tracked object however many
    cameras show it, so the count is of objects, not of views.
    """
    in_group = _group_label_mask(q.params, q.options())
    labels = np.asarray(q.attrs.label, dtype=np.int64)[np.maximum(q.rows, 0)]
    counted = q.present & np.take_along_axis(in_group, labels, axis=1)
    count = counted.sum(axis=1).astype(np.float64)
    return QuantityResult(
        valid=np.ones(q.n, bool), values={"count": count}, balance=_count_bucket(count)
    )


CROSSING_DEFAULTS = {
    "groups": [],
    "window_start_s": -2.0,
    "window_end_s": 3.0,
    "side_min_m": 1.5,
    "ahead_max_m": 30.0,
    "stability_m": 0.5,
}


def _check_crossing(p: Mapping[str, Any]) -> None:
    _check_groups(p)
    _check_window(p)
    if not p["side_min_m"] > p["stability_m"] >= 0 or not p["ahead_max_m"] > p["stability_m"]:
        raise ValueError("side_min_m: side_min_m and ahead_max_m must exceed stability_m (>= 0)")


def crossing_counts(
    attrs, keyframes: np.ndarray, p: Mapping[str, Any]
) -> tuple[np.ndarray, np.ndarray]:
    """Per keyframe (K,) and class group (G): tracks that crossed the ego's path ahead.

    Every track with a row in the keyframe's window counts, whether or not it is a region.
    Returns (K, G) counts and (K, G) stability (the count is the same with ``side_min_m`` and
    ``ahead_max_m`` moved by +-``stability_m``; an object that barely crosses is ambiguous).
    """
    from autolabel.classes import DETECTION_CLASSES

    member = np.array(
        [[c in g["classes"] for c in DETECTION_CLASSES] for g in p["groups"]], dtype=bool
    )  # (G, n_classes)
    offsets = motion.sample_offsets(p["window_start_s"], p["window_end_s"])
    frames, times = motion.clip_frame_times(attrs)
    time_s = np.asarray(attrs.time_s, dtype=np.float64)
    kfs = np.asarray(keyframes, dtype=np.int64).reshape(-1)
    n_k, n_g = len(kfs), len(member)
    if n_k == 0:
        return np.zeros((n_k, n_g), np.int64), np.ones((n_k, n_g), bool)
    # Every keyframe at once: the (keyframe, track) pairs with a row in the keyframe's window,
    # each with its first row there (rows are in (frame, track) order), as one set of windows.
    t0 = times[np.searchsorted(frames, kfs)]
    lo = t0 + offsets[0] - motion.WINDOW_TOLERANCE_S - 1e-9
    hi = t0 + offsets[-1] + motion.WINDOW_TOLERANCE_S + 1e-9
    k_of, row = np.nonzero((time_s[None, :] >= lo[:, None]) & (time_s[None, :] <= hi[:, None]))
    track = np.asarray(attrs.track_id, dtype=np.int64)[row]
    order = np.lexsort((row, track, k_of))
    k_of, row, track = k_of[order], row[order], track[order]
    first = np.ones(len(k_of), bool)
    first[1:] = (k_of[1:] != k_of[:-1]) | (track[1:] != track[:-1])
    k_of, row, track = k_of[first], row[first], track[first]
    labels = np.asarray(attrs.label, dtype=np.int64)[row]
    win = motion.track_window(attrs, kfs[k_of], track, offsets[0], offsets[-1])
    x, y = win.column(attrs, "x_ego_m"), win.column(attrs, "y_ego_m")
    s, d = p["side_min_m"], p["stability_m"]
    a = p["ahead_max_m"]
    per = np.zeros((3, n_k, n_g), np.int64)
    for v, (side, ahead) in enumerate(((s, a), (s - d, a + d), (s + d, a - d))):
        crossed = motion.crossings(x, y, side, ahead)
        for g in range(n_g):
            hit = crossed & member[g, labels]
            per[v, :, g] = np.bincount(k_of[hit], minlength=n_k)
    return per[0], np.all(per == per[0], axis=0)


@quantity(
    "count_crossing",
    values=("count",),
    defaults=CROSSING_DEFAULTS,
    check_params=_check_crossing,
    options_param="groups",
)
def count_crossing_q(q: QuantityInput) -> QuantityResult:
    """How many tracks of the class group crossed the ego's path ahead during the window
    (:func:`autolabel.qa.motion.crossings`); invalid where the count is not stable."""
    option = q.options()
    kfs, inverse = np.unique(np.asarray(q.frame_index, dtype=np.int64), return_inverse=True)
    counts, stable = crossing_counts(q.attrs, kfs, q.params)
    count = counts[inverse, option].astype(np.float64)
    return QuantityResult(
        valid=stable[inverse, option], values={"count": count}, balance=_count_bucket(count)
    )


# --------------------------------------------------------------------------------------------
# Temporal order.


def first_seen_s(attrs, rows: np.ndarray) -> np.ndarray:
    """Time each row's track was first observed in the clip, seconds (same shape as ``rows``;
    NaN where a row is -1)."""
    rows = np.asarray(rows, dtype=np.int64)
    tid = np.asarray(attrs.track_id)
    if len(tid) == 0:
        return np.full(rows.shape, np.nan)
    uniq, inverse = np.unique(tid, return_inverse=True)
    first = np.full(len(uniq), np.inf)
    np.minimum.at(first, inverse, np.asarray(attrs.time_s, dtype=np.float64))
    out = first[inverse[np.maximum(rows, 0)]]
    return np.where(rows >= 0, out, np.nan)


RANK_KEYS["first_seen"] = first_seen_s


@quantity(
    "first_seen_order",
    values=("first_seen_a_s", "first_seen_b_s"),
    outcomes=ROLE_AB,
    outcome_kind="role",
    defaults={"min_gap_s": 1.0},
    check_params=_check_positive("min_gap_s"),
)
def first_seen_order_q(q: QuantityInput) -> QuantityResult:
    """Which of A and B was seen first in the clip (its track's first row); times at least
    ``min_gap_s`` apart (two objects seen from the clip's first frame are a tie)."""
    t = first_seen_s(q.attrs, q.rows[:, :2])
    valid = np.abs(t[:, 0] - t[:, 1]) >= q.params["min_gap_s"]
    return QuantityResult(
        valid=valid & np.all(np.isfinite(t), axis=1),
        values={"first_seen_a_s": t[:, 0], "first_seen_b_s": t[:, 1]},
        outcome=np.where(t[:, 0] < t[:, 1], "A", "B").astype(object),
    )


def _check_appearance(p: Mapping[str, Any]) -> None:
    if p["rank_by"] != "first_seen":
        raise ValueError(f"rank_by: must be first_seen, got {p['rank_by']!r}")
    if not 2 <= p["size"] <= MAX_RANKED_SET:
        raise ValueError(f"size: must be 2..{MAX_RANKED_SET}, got {p['size']!r}")
    if not p["margin_s"] > 0:
        raise ValueError(f"margin_s: must be > 0, got {p['margin_s']!r}")


@quantity(
    "appearance_order",
    values=("first_seen_a_s", "first_seen_b_s", "first_seen_c_s", "first_seen_d_s"),
    outcomes=lambda p, n: role_orders(n),
    outcome_kind="order",
    defaults={
        "rank_by": "first_seen",
        "size": 4,
        "margin_s": 1.0,
        "chain": True,
        "across_cameras": True,
    },  # fmt: skip
    check_params=_check_appearance,
)
def appearance_order_q(q: QuantityInput) -> QuantityResult:
    """The order in which 2..4 regions were first seen (SPAR's appearance order); consecutive
    first sightings at least ``margin_s`` apart (ties are not asked). ``across_cameras``: the
    regions may come from any camera (the question shows all six)."""
    t = first_seen_s(q.attrs, q.rows)
    order = np.argsort(t, axis=1, kind="stable")
    ts = np.take_along_axis(t, order, axis=1)
    valid = np.all(np.diff(ts, axis=1) >= q.params["margin_s"], axis=1)
    roles = np.array(["A", "B", "C", "D"], dtype=object)[order]
    padded = np.full((q.n, 4), np.nan)
    padded[:, : t.shape[1]] = t
    return QuantityResult(
        valid=valid & np.all(np.isfinite(t), axis=1),
        values={f"first_seen_{r}_s": padded[:, i] for i, r in enumerate("abcd")},
        outcome=np.array([",".join(r) for r in roles], dtype=object),
    )


@quantity(
    "passes_first",
    values=("first_pass_s",),
    outcomes=ROLE_AB,
    outcome_kind="role",
    defaults={"window_start_s": -2.0, "window_end_s": 3.0, "lateral_max_m": 20.0, "min_gap_s": 0.5},
    check_params=_check_positive("lateral_max_m", "min_gap_s"),
)
def passes_first_q(q: QuantityInput) -> QuantityResult:
    """Which of A and B first draws level with the ego during the window (its ego-frame x changes
    sign, :func:`autolabel.qa.motion.first_passage`); both tracks observed over the whole
    window, passages at least ``min_gap_s`` apart (a region that never passes comes last)."""
    p = q.params
    when = []
    complete = np.ones(q.n, bool)
    for role in (0, 1):
        win = _window(q, p["window_start_s"], p["window_end_s"], role)
        when.append(
            motion.first_passage(
                win.column(q.attrs, "x_ego_m"),
                win.column(q.attrs, "y_ego_m"),
                win.offset_s,
                p["lateral_max_m"],
            )
        )
        complete &= win.complete
    ta, tb = when
    first = np.minimum(ta, tb)
    with np.errstate(invalid="ignore"):
        gap = np.abs(ta - tb)
    valid = complete & np.isfinite(first) & (gap >= p["min_gap_s"])
    return QuantityResult(
        valid=valid,
        values={"first_pass_s": np.where(np.isfinite(first), first, np.nan)},
        outcome=np.where(ta < tb, "A", "B").astype(object),
    )


# --------------------------------------------------------------------------------------------
# Appearance and captions.

COLOUR_KEYS = (*NAMED_COLOURS_RGB, "unknown")


@quantity(
    "region_colour",
    outcomes=tuple(NAMED_COLOURS_RGB),
    defaults={"name_margin": DEFAULT_NAME_MARGIN},
    check_params=_check_positive("name_margin"),
)
def region_colour_q(q: QuantityInput) -> QuantityResult:
    """The region's colour word: the nearest palette colour to the median L*a*b* under its mask
    (measured from the image; invalid where unmeasured or ambiguous)."""
    names, valid = name_colours(q.colours()[:, 0, :], q.params["name_margin"])
    return QuantityResult(valid=valid, outcome=names)


POSITION_KEYS = (
    "ahead", "ahead_left", "left", "behind_left", "behind", "behind_right", "right", "ahead_right",
)  # fmt: skip
ACTION_KEYS = (
    "standing_still", "changing_lanes_left", "changing_lanes_right", "turning_left",
    "turning_right", "slowing_to_a_stop", "starting_to_move", "speeding_up", "slowing_down",
    "steady", "stopped", "moving",
)  # fmt: skip

CAPTION_DEFAULTS: dict[str, Any] = {
    "name_margin": DEFAULT_NAME_MARGIN,
    "ahead_max_deg": 20.0,
    "side_start_deg": 70.0,
    "side_end_deg": 110.0,
    "behind_min_deg": 160.0,
    **PATH_DEFAULTS,
    **MOTION_STATE_DEFAULTS,
    # The turn and lane-change rules gate on the path speed of ``turn_direction`` /
    # ``lane_change`` (PATH_DEFAULTS, 2 m/s), not on the motion state's 1 m/s: both set
    # ``moving_min_mps``, so the path gate has its own key here.
    "path_moving_min_mps": PATH_DEFAULTS["moving_min_mps"],
    "accel_min_mps2": 0.5,
    "steady_max_mps2": 0.2,
    "turn_min_deg": 20.0,
    "straight_max_deg": 5.0,
    "change_min_m": 2.0,
    "keep_max_m": 0.5,
    "heading_max_deg": 10.0,
}


def _check_caption(p: Mapping[str, Any]) -> None:
    _check_window(p)
    _check_motion_state(p)
    if not p["path_moving_min_mps"] > 0:
        raise ValueError(f"path_moving_min_mps: must be > 0, got {p['path_moving_min_mps']!r}")
    if (
        not 0
        < p["ahead_max_deg"]
        < p["side_start_deg"]
        < p["side_end_deg"]
        < p["behind_min_deg"]
        < 180
    ):
        raise ValueError(
            "ahead_max_deg: need 0 < ahead_max_deg < side_start_deg < side_end_deg < "
            "behind_min_deg < 180"
        )


def position_keys(bearing_deg: np.ndarray, p: Mapping[str, Any]) -> np.ndarray:
    """Where each object is seen from the ego: one of ``POSITION_KEYS`` from bearings (+ left)."""
    b = np.asarray(bearing_deg, dtype=np.float64)
    a = np.abs(b)
    side = np.where(b >= 0, "left", "right").astype(object)
    out = np.where(
        a <= p["ahead_max_deg"],
        "ahead",
        np.where(
            a <= p["side_start_deg"],
            "ahead_" + side,
            np.where(
                a <= p["side_end_deg"],
                side,
                np.where(a < p["behind_min_deg"], "behind_" + side, "behind"),
            ),
        ),
    )
    return out.astype(object)


def action_keys(
    attrs, frame_index: np.ndarray, track_id: np.ndarray, p: Mapping[str, Any]
) -> np.ndarray:
    """What each track does over the window, one of ``ACTION_KEYS``, by priority: standing still
    the whole window; changing lanes; turning; slowing to a stop; starting to move; speeding up /
    slowing down / steady; stopped or moving at the keyframe (when the window is too short or
    the rules disagree)."""
    fi = np.asarray(frame_index, dtype=np.int64)
    tid = np.asarray(track_id, dtype=np.int64)
    n = len(fi)
    if n == 0:
        return np.zeros(0, dtype=object)
    win = motion.track_window(attrs, fi, tid, p["window_start_s"], p["window_end_s"])
    speed = win.column(attrs, "speed_mps")
    present = win.present & np.isfinite(speed)
    with np.errstate(invalid="ignore"):
        still = (present.sum(axis=1) >= 3) & np.all(
            ~present | (speed <= p["stopped_max_mps"]), axis=1
        )
    pos = motion.clip_positions(attrs, win)
    span = max(1, int(round(p["heading_span_s"] / motion.WINDOW_STEP_S)))
    path_min_mps = p["path_moving_min_mps"]
    min_travel = path_min_mps * span * motion.WINDOW_STEP_S
    h0, _, dpsi = motion.travel_headings(pos, min(span, len(win.offset_s) - 1), min_travel)
    with np.errstate(invalid="ignore"):
        moving = win.complete & np.all(speed >= path_min_mps, axis=1) & np.isfinite(dpsi)
    shift, drift = motion.lateral_shift(pos, h0, dpsi)
    lane, lane_ok = motion.lane_change(
        shift, drift, dpsi, p["change_min_m"], p["keep_max_m"], p["heading_max_deg"]
    )
    turn, turn_ok = motion.turn_direction(dpsi, p["turn_min_deg"], p["straight_max_deg"])
    trend, trend_ok, _ = motion.speed_trend(
        speed, win.offset_s, p["accel_min_mps2"], p["steady_max_mps2"], p["moving_min_mps"]
    )
    with np.errstate(invalid="ignore"):
        stopping = (
            win.complete
            & (speed[:, 0] >= p["moving_min_mps"])
            & (speed[:, -1] <= p["stopped_max_mps"])
        )
        starting = (
            win.complete
            & (speed[:, 0] <= p["stopped_max_mps"])
            & (speed[:, -1] >= p["moving_min_mps"])
        )
    now = np.asarray(attrs.speed_mps, dtype=np.float64)[attrs.row_of(fi, tid)]
    out = np.where(now <= p["stopped_max_mps"], "stopped", "moving").astype(object)
    trend_key = {"accelerating": "speeding_up", "braking": "slowing_down", "steady": "steady"}
    trend_words = np.array([trend_key[t] for t in trend], dtype=object)
    # Lowest priority first; each later rule overrides where it applies.
    out = np.where(trend_ok & win.complete, trend_words, out)
    out = np.where(starting, "starting_to_move", out)
    out = np.where(stopping, "slowing_to_a_stop", out)
    is_turn = moving & turn_ok & (turn != "straight")
    out = np.where(is_turn, np.where(turn == "left", "turning_left", "turning_right"), out)
    is_lane = moving & lane_ok & (lane != "none")
    out = np.where(
        is_lane, np.where(lane == "left", "changing_lanes_left", "changing_lanes_right"), out
    )
    out = np.where(still, "standing_still", out)
    return out.astype(object)


def _caption_facet_keys(p: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    return {"colour": COLOUR_KEYS, "position": POSITION_KEYS, "action": ACTION_KEYS}


@quantity(
    "object_caption",
    values=("distance_m", "length_m", "width_m", "height_m"),
    facets=("colour", "position", "action"),
    facet_keys=_caption_facet_keys,
    defaults=CAPTION_DEFAULTS,
    check_params=_check_caption,
)
def object_caption_q(q: QuantityInput) -> QuantityResult:
    """A dense caption of one region from measured quantities: colour word (``unknown`` when
    unmeasured or ambiguous), size, where it is (bearing sector), distance and what it does over
    the window (:func:`action_keys`)."""
    p = q.params
    colour, _ = name_colours(q.colours()[:, 0, :], p["name_margin"])
    return QuantityResult(
        valid=np.ones(q.n, bool),
        values={
            "distance_m": q.column("distance_m").astype(np.float64),
            "length_m": q.column("length_m").astype(np.float64),
            "width_m": q.column("width_m").astype(np.float64),
            "height_m": q.column("height_m").astype(np.float64),
        },
        facets={
            "colour": colour,
            "position": position_keys(q.column("bearing_deg"), p),
            "action": action_keys(q.attrs, q.frame_index, _tracks(q), p),
        },
    )


@quantity(
    "scene_caption",
    values=("count",),
    item_values=("distance_m",),
    item_facets=("colour", "position", "action"),
    facet_keys=_caption_facet_keys,
    defaults=CAPTION_DEFAULTS,
    check_params=_check_caption,
)
def scene_caption_q(q: QuantityInput) -> QuantityResult:
    """A description of every marked region of one camera image (MetaVQA's describe_scenario):
    per region its colour word, class, position, distance and action, as for
    ``object_caption``."""
    p = q.params
    present = q.present
    n, k = q.rows.shape
    rows = q.rows[present]
    fi = np.broadcast_to(np.asarray(q.frame_index)[:, None], (n, k))[present]
    tid = np.asarray(q.attrs.track_id)[rows]

    def spread(values: np.ndarray, fill: Any, dtype: Any) -> np.ndarray:
        out = np.full((n, k), fill, dtype=dtype)
        out[present] = values
        return out

    colour, _ = name_colours(q.colours()[present], p["name_margin"])
    bearing = np.asarray(q.attrs.bearing_deg, dtype=np.float64)[rows]
    return QuantityResult(
        valid=present.any(axis=1),
        values={"count": present.sum(axis=1).astype(np.float64)},
        item_values={
            "distance_m": spread(np.asarray(q.attrs.distance_m, np.float64)[rows], np.nan, float)
        },
        item_facets={
            "colour": spread(colour, "", object),
            "position": spread(position_keys(bearing, p), "", object),
            "action": spread(action_keys(q.attrs, fi, tid, p), "", object),
        },
    )


#: Quantities whose answers depend on the regions' measured colours (records carry them).
COLOUR_QUANTITIES = frozenset({"region_colour", "object_caption", "scene_caption"})
