"""Velocities of tracked objects from their tracks: a local least-squares slope per observation.

Each observation's velocity is the slope of a straight-line fit, over time, of the track's centres
within ``half_window`` observations either side of it (fewer at the track's ends, where the window is
cut to the observed span). Observation times are used as they are, so missed keyframes (gaps) are
handled, and nothing is extrapolated: no state is produced outside the frames where the track was
observed, and a track observed once has no velocity (NaN).
"""

from __future__ import annotations

import numpy as np


def track_velocities_mps(
    track_id: np.ndarray, time_s: np.ndarray, center_xy_m: np.ndarray, half_window: int = 2
) -> np.ndarray:
    """Velocity of every observation of every track, in the frame of ``center_xy_m``.

    Args:
        track_id: (N,) int track id of each observation (any order, several tracks mixed).
        time_s: (N,) observation times, seconds; unique within a track.
        center_xy_m: (N, 2) observed centres, metres.
        half_window: observations taken either side of each one for the fit (>= 1); with 1 an
            interior observation gets the central difference of its neighbours.

    Returns:
        (N, 2) velocities, m/s, in the input order; NaN for tracks observed once.
    """
    track_id = np.asarray(track_id, dtype=np.int64)
    time_s = np.asarray(time_s, dtype=np.float64)
    center_xy_m = np.asarray(center_xy_m, dtype=np.float64)
    n = len(track_id)
    if time_s.shape != (n,) or center_xy_m.shape != (n, 2):
        raise ValueError(
            f"track_velocities_mps: expected time_s ({n},) and center_xy_m ({n}, 2), "
            f"got {time_s.shape} and {center_xy_m.shape}"
        )
    if half_window < 1:
        raise ValueError(f"track_velocities_mps: half_window must be >= 1, got {half_window}")
    velocity = np.full((n, 2), np.nan)
    if n == 0:
        return velocity

    order = np.lexsort((time_s, track_id))
    tid, t, xy = track_id[order], time_s[order], center_xy_m[order]
    first = np.ones(n, dtype=bool)
    first[1:] = tid[1:] != tid[:-1]
    if np.any((t[1:] == t[:-1]) & ~first[1:]):
        raise ValueError("track_velocities_mps: a track has two observations at the same time")
    start = np.maximum.accumulate(np.where(first, np.arange(n), 0))
    end = np.empty(n, dtype=np.int64)  # exclusive end of each observation's track
    track_starts = np.flatnonzero(first)
    track_ends = np.append(track_starts[1:], n)
    end[:] = np.repeat(track_ends, track_ends - track_starts)

    # Relative to the track's first observation, so the prefix sums stay well conditioned.
    rel_t = t - t[start]
    rel_xy = xy - xy[start]
    lo = np.maximum(start, np.arange(n) - half_window)
    hi = np.minimum(end, np.arange(n) + half_window + 1)  # exclusive

    def window_sum(values: np.ndarray) -> np.ndarray:
        prefix = np.concatenate([np.zeros((1,) + values.shape[1:]), np.cumsum(values, axis=0)])
        return prefix[hi] - prefix[lo]

    count = (hi - lo).astype(np.float64)
    sum_t = window_sum(rel_t)
    sum_tt = window_sum(rel_t * rel_t)
    sum_xy = window_sum(rel_xy)
    sum_txy = window_sum(rel_t[:, None] * rel_xy)
    # Windows never cross a track boundary, so differences of prefix sums over the whole array
    # are sums within one track.
    denominator = count * sum_tt - sum_t * sum_t
    fitted = count > 1
    slope = np.full((n, 2), np.nan)
    slope[fitted] = (
        count[fitted, None] * sum_txy[fitted] - sum_t[fitted, None] * sum_xy[fitted]
    ) / denominator[fitted, None]
    velocity[order] = slope
    return velocity
