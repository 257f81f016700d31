"""Motion of tracked objects around a keyframe, from the attributes alone, vectorized.

Every rule here reads ``ObjectAttributes`` rows (one object in one frame) gathered into windows of
N candidates x W sample times around each candidate's keyframe (:func:`track_window`), so the QA
generator and ``autolabel check-qa`` derive the same answers from ``attributes.parquet``. Windows
sample the track every ``step_s`` (the 2 Hz keyframes); a sample takes the clip frame nearest its
time within ``tolerance_s`` and is missing where the track has no row there (a state is never
extrapolated past the track).

Positions of different frames are compared in the clip frame (the ego frame of the clip's first
frame, :attr:`ObjectAttributes.ego_x_clip_m` ...), so the ego's own motion does not enter an
object's turn or lane change; distances to the ego are each frame's own (``distance_m``), so
approaching and passing are relative to the moving ego.

Rules (thresholds are template parameters, ``qa_templates/action.yaml``):

- :func:`motion_state`: ``moving`` / ``stopped`` from the speed at the keyframe.
- :func:`speed_trend`: ``accelerating`` / ``braking`` / ``steady`` from the least-squares slope of
  the speed over the window.
- :func:`turn_direction`: ``left`` / ``right`` / ``straight`` from the change of the direction of
  travel (from positions, so a box yaw flipped by 180 degrees does not matter).
- :func:`lane_change`: ``left`` / ``right`` / ``none`` from the sideways drift of the path relative
  to the object's own initial heading, less the drift a constant-curvature arc with the observed
  heading change would give (so following a bend is not a lane change).
- :func:`range_trend`: ``approaching`` / ``receding`` from the slope of the distance to the ego.
- :func:`first_passage`: when the object draws level with the ego (its ego-frame x changes sign).
- :func:`crossings`: whether an object crossed the ego's path ahead (ego-frame y from one side to
  the other while ahead).

Every rule returns a validity flag: False where the data cannot decide (a value between the
thresholds of two outcomes, missing samples, too little motion to have a heading).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autolabel.attributes import ObjectAttributes
from calib import stable_math
from calib.bearing import wrap_deg

#: Sampling step of the windows, seconds (the 2 Hz keyframes).
WINDOW_STEP_S = 0.5
#: A sample takes the frame nearest its time within this tolerance, seconds.
WINDOW_TOLERANCE_S = 0.25


@dataclass(frozen=True)
class TrackWindow:
    """Attribute rows of N tracks at W sample times around their keyframes.

    Attributes:
        rows: (N, W) int64 attribute rows, -1 where the track has no row near that time.
        offset_s: (W,) sample times relative to the keyframe, seconds.
    """

    rows: np.ndarray
    offset_s: np.ndarray

    @property
    def present(self) -> np.ndarray:
        """(N, W) bool: the track has a row at the sample."""
        return self.rows >= 0

    @property
    def complete(self) -> np.ndarray:
        """(N,) bool: the track has a row at every sample of the window."""
        return np.all(self.rows >= 0, axis=1)

    def column(self, attrs: ObjectAttributes, name: str) -> np.ndarray:
        """(N, W) float attribute ``name`` at the samples, NaN where missing."""
        values = np.asarray(getattr(attrs, name), dtype=np.float64)
        if len(values) == 0:
            return np.full(self.rows.shape, np.nan)
        return np.where(self.present, values[np.maximum(self.rows, 0)], np.nan)


def clip_frame_times(attrs: ObjectAttributes) -> tuple[np.ndarray, np.ndarray]:
    """(F,) frame indices that have rows and (F,) their times, seconds, sorted by frame
    (read-only arrays; ``ObjectAttributes.frame_times``, kept on the attributes)."""
    return attrs.frame_times()


def sample_offsets(start_s: float, end_s: float, step_s: float = WINDOW_STEP_S) -> np.ndarray:
    """(W,) offsets from ``start_s`` to ``end_s`` inclusive every ``step_s``, seconds."""
    if not end_s >= start_s:
        raise ValueError(f"window: end {end_s} s before start {start_s} s")
    n = int(np.floor((end_s - start_s) / step_s + 1e-9))
    return start_s + step_s * np.arange(n + 1)


def track_window(
    attrs: ObjectAttributes,
    frame_index: np.ndarray,
    track_id: np.ndarray,
    start_s: float,
    end_s: float,
    step_s: float = WINDOW_STEP_S,
    tolerance_s: float = WINDOW_TOLERANCE_S,
) -> TrackWindow:
    """The rows of each track at times ``keyframe + start_s .. keyframe + end_s``.

    Args:
        attrs: the clip's attributes.
        frame_index: (N,) keyframe of each candidate (must have rows in the attributes).
        track_id: (N,) the track of each candidate.
        start_s, end_s: window relative to the keyframe, seconds (``start_s <= 0 <= end_s`` is
            not required).
        step_s, tolerance_s: sampling step and the largest distance of a frame from its sample
            time, seconds.
    """
    offsets = sample_offsets(start_s, end_s, step_s)
    fi = np.asarray(frame_index, dtype=np.int64).reshape(-1)
    tid = np.asarray(track_id, dtype=np.int64).reshape(-1)
    frames, times = clip_frame_times(attrs)
    if len(frames) == 0 or len(fi) == 0:
        return TrackWindow(np.full((len(fi), len(offsets)), -1, np.int64), offsets)
    pos = np.clip(np.searchsorted(frames, fi), 0, len(frames) - 1)
    if np.any(frames[pos] != fi):
        bad = fi[frames[pos] != fi][0]
        raise ValueError(f"track_window: keyframe {bad} has no rows in the attributes")
    target = times[pos][:, None] + offsets[None, :]
    right = np.clip(np.searchsorted(times, target), 0, len(times) - 1)
    left = np.clip(right - 1, 0, None)
    nearest = np.where(np.abs(times[left] - target) <= np.abs(times[right] - target), left, right)
    ok = np.abs(times[nearest] - target) <= tolerance_s + 1e-9
    rows = attrs.row_of(frames[nearest], np.broadcast_to(tid[:, None], nearest.shape))
    return TrackWindow(np.where(ok, rows, -1), offsets)


def clip_positions(attrs: ObjectAttributes, window: TrackWindow) -> np.ndarray:
    """(N, W, 2) box centres in the clip frame (ground plane), metres; NaN where missing."""
    x, y = window.column(attrs, "x_ego_m"), window.column(attrs, "y_ego_m")
    ex, ey = window.column(attrs, "ego_x_clip_m"), window.column(attrs, "ego_y_clip_m")
    yaw = window.column(attrs, "ego_yaw_clip_rad")
    c, s = np.cos(yaw), np.sin(yaw)
    return np.stack([ex + c * x - s * y, ey + s * x + c * y], axis=-1)


def slope_per_s(values: np.ndarray, offset_s: np.ndarray) -> np.ndarray:
    """(N,) least-squares slope of (N, W) values over the W sample times; NaN if any is missing."""
    t = np.asarray(offset_s, dtype=np.float64)
    tc = t - t.mean()
    denom = float(np.sum(tc * tc))
    v = np.asarray(values, dtype=np.float64)
    if denom == 0.0:
        return np.full(len(v), np.nan)
    return np.sum((v - v.mean(axis=1, keepdims=True)) * tc[None, :], axis=1) / denom


def classify_three(
    value: np.ndarray, up_min: float, flat_max: float, keys: tuple[str, str, str]
) -> tuple[np.ndarray, np.ndarray]:
    """Outcome ``keys[0]`` where value >= up_min, ``keys[1]`` where value <= -up_min, ``keys[2]``
    where |value| <= flat_max; invalid between the bands and where the value is NaN."""
    v = np.asarray(value, dtype=np.float64)
    up, down, flat = v >= up_min, v <= -up_min, np.abs(v) <= flat_max
    out = np.where(up, keys[0], np.where(down, keys[1], keys[2])).astype(object)
    return out, (up | down | flat) & np.isfinite(v)


def motion_state(
    speed_mps: np.ndarray, moving_min_mps: float, stopped_max_mps: float
) -> tuple[np.ndarray, np.ndarray]:
    """(N,) ``moving`` / ``stopped`` and validity from speeds at the keyframe, m/s."""
    v = np.asarray(speed_mps, dtype=np.float64)
    moving, stopped = v >= moving_min_mps, v <= stopped_max_mps
    return np.where(moving, "moving", "stopped").astype(object), (moving | stopped) & np.isfinite(v)


def speed_trend(
    speed_mps: np.ndarray,
    offset_s: np.ndarray,
    accel_min_mps2: float,
    steady_max_mps2: float,
    moving_min_mps: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Whether a track speeds up, slows down or keeps its speed over a window.

    Args:
        speed_mps: (N, W) speeds at the samples (NaN missing).
        offset_s: (W,) sample times.
        accel_min_mps2: |slope| at least this is ``accelerating`` / ``braking``.
        steady_max_mps2: |slope| at most this is ``steady``.
        moving_min_mps: the track must reach this speed somewhere in the window (a stationary
            object neither accelerates nor keeps a speed).

    Returns:
        (N,) outcome, (N,) validity, (N,) slope in m/s^2.
    """
    slope = slope_per_s(speed_mps, offset_s)
    out, valid = classify_three(
        slope, accel_min_mps2, steady_max_mps2, ("accelerating", "braking", "steady")
    )
    with np.errstate(invalid="ignore"):
        moving = np.nanmax(np.where(np.isfinite(speed_mps), speed_mps, -np.inf), axis=1) >= (
            moving_min_mps
        )
    return out, valid & moving, slope


def travel_headings(
    positions: np.ndarray, span: int, min_travel_m: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Directions of travel at the start and end of each window, degrees in the clip frame.

    The start heading is the direction from sample 0 to sample ``span``, the end heading from
    sample W-1-span to W-1; each needs at least ``min_travel_m`` of displacement (else NaN).

    Returns:
        (N,) start heading, (N,) end heading, (N,) their change wrapped to (-180, 180] degrees.
    """
    p = np.asarray(positions, dtype=np.float64)
    w = p.shape[1]
    if span < 1 or span >= w:
        raise ValueError(f"heading span of {span} samples does not fit a window of {w}")
    d0 = p[:, span] - p[:, 0]
    d1 = p[:, -1] - p[:, -1 - span]
    ok0 = np.hypot(d0[:, 0], d0[:, 1]) >= min_travel_m
    ok1 = np.hypot(d1[:, 0], d1[:, 1]) >= min_travel_m
    h0 = np.where(ok0, np.degrees(stable_math.arctan2(d0[:, 1], d0[:, 0])), np.nan)
    h1 = np.where(ok1, np.degrees(stable_math.arctan2(d1[:, 1], d1[:, 0])), np.nan)
    return h0, h1, wrap_deg(h1 - h0)


def turn_direction(
    heading_change_deg: np.ndarray, turn_min_deg: float, straight_max_deg: float
) -> tuple[np.ndarray, np.ndarray]:
    """(N,) ``left`` / ``right`` / ``straight`` and validity from heading changes (+ = left)."""
    return classify_three(
        heading_change_deg, turn_min_deg, straight_max_deg, ("left", "right", "straight")
    )


def lateral_shift(
    positions: np.ndarray, start_heading_deg: np.ndarray, heading_change_deg: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Sideways motion of each path relative to its start heading, metres (+ left).

    In the frame of the start point and start heading, the end point lies ``drift`` to the left.
    An arc that turns by ``dpsi`` reaches its end along the chord at ``dpsi / 2`` from the start
    heading, so it drifts ``chord * sin(dpsi / 2)``; the rest is the ``shift`` a bend does not
    explain. A lane change keeps the heading and shifts (and drifts) a lane width; following a
    bend drifts but does not shift.

    Returns:
        (N,) shift (drift less the arc's) and (N,) drift.
    """
    p = np.asarray(positions, dtype=np.float64)
    d = p[:, -1] - p[:, 0]
    h0 = np.radians(start_heading_deg)
    drift = np.cos(h0) * d[:, 1] - np.sin(h0) * d[:, 0]
    chord = np.hypot(d[:, 0], d[:, 1])
    return drift - chord * np.sin(0.5 * np.radians(heading_change_deg)), drift


def lane_change(
    shift_m: np.ndarray,
    drift_m: np.ndarray,
    heading_change_deg: np.ndarray,
    change_min_m: float,
    keep_max_m: float,
    heading_max_deg: float,
) -> tuple[np.ndarray, np.ndarray]:
    """(N,) ``left`` / ``right`` / ``none`` and validity from lateral shifts (+ = left).

    A lane change needs the shift and the drift (:func:`lateral_shift`) both at least
    ``change_min_m`` to the same side (the first half of a lane change ends turned out, so the arc
    correction alone could read it backwards); ``none`` needs the shift within ``keep_max_m``. A
    path whose heading changes by more than ``heading_max_deg`` is a turn (invalid here).
    """
    s = np.asarray(shift_m, dtype=np.float64)
    d = np.asarray(drift_m, dtype=np.float64)
    left = (s >= change_min_m) & (d >= change_min_m)
    right = (s <= -change_min_m) & (d <= -change_min_m)
    none = np.abs(s) <= keep_max_m
    out = np.where(left, "left", np.where(right, "right", "none")).astype(object)
    straightish = np.abs(np.asarray(heading_change_deg, dtype=np.float64)) <= heading_max_deg
    return out, (left | right | none) & straightish & np.isfinite(s)


def range_trend(
    distance_m: np.ndarray, offset_s: np.ndarray, rate_min_mps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(N,) ``approaching`` / ``receding``, validity and (N,) range rate in m/s (slope of the
    distance to the ego over the window; |rate| below ``rate_min_mps`` is neither)."""
    rate = slope_per_s(distance_m, offset_s)
    approaching, receding = rate <= -rate_min_mps, rate >= rate_min_mps
    out = np.where(approaching, "approaching", "receding").astype(object)
    return out, (approaching | receding) & np.isfinite(rate), rate


def first_passage(
    x_ego_m: np.ndarray, y_ego_m: np.ndarray, offset_s: np.ndarray, lateral_max_m: float
) -> np.ndarray:
    """(N,) time (s, relative to the keyframe) each track first draws level with the ego.

    Drawing level: the ego-frame x of the box centre changes sign between two consecutive samples
    (the object goes from ahead of the ego origin to behind it or back) with ``|y|`` at most
    ``lateral_max_m`` at both; the time is interpolated linearly. ``inf`` where it never does in
    the samples (missing samples never count as a passage).
    """
    x = np.asarray(x_ego_m, dtype=np.float64)
    y = np.asarray(y_ego_m, dtype=np.float64)
    t = np.asarray(offset_s, dtype=np.float64)
    x0, x1 = x[:, :-1], x[:, 1:]
    near = (np.abs(y[:, :-1]) <= lateral_max_m) & (np.abs(y[:, 1:]) <= lateral_max_m)
    with np.errstate(invalid="ignore", divide="ignore"):
        cross = (np.sign(x0) != np.sign(x1)) & (x0 != 0) & np.isfinite(x0) & np.isfinite(x1) & near
        frac = np.where(cross, x0 / (x0 - x1), np.nan)
    when = t[:-1][None, :] + frac * np.diff(t)[None, :]
    when = np.where(cross, when, np.inf)
    return when.min(axis=1) if when.shape[1] else np.full(len(x), np.inf)


def crossings(
    x_ego_m: np.ndarray, y_ego_m: np.ndarray, side_min_m: float, ahead_max_m: float
) -> np.ndarray:
    """(N,) bool: the track crossed the ego's path ahead during the samples.

    Crossed: at one sample it is at least ``side_min_m`` to one side (ego-frame y) and at a later
    sample at least ``side_min_m`` to the other side, and at both it is ahead of the ego
    (0 < x <= ``ahead_max_m``). Missing samples (NaN) never count.
    """
    x = np.asarray(x_ego_m, dtype=np.float64)
    y = np.asarray(y_ego_m, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        ahead = (x > 0) & (x <= ahead_max_m)
        left = ahead & (y >= side_min_m)
        right = ahead & (y <= -side_min_m)
    w = x.shape[1]
    if w == 0:
        return np.zeros(len(x), bool)
    # Earliest sample on each side and latest on each side: a crossing is left then right or
    # right then left.
    idx = np.arange(w)[None, :]
    first_left = np.where(left, idx, w).min(axis=1)
    first_right = np.where(right, idx, w).min(axis=1)
    last_left = np.where(left, idx, -1).max(axis=1)
    last_right = np.where(right, idx, -1).max(axis=1)
    return (first_left < last_right) | (first_right < last_left)
