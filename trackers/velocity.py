"""Velocities of tracked objects from their tracks: a local least-squares slope per observation.

Each observation's velocity is the slope of a straight-line fit, over time, of the track's centres
within ``half_window`` observations either side of it (fewer at the track's ends, where the window is
cut to the observed span). Observation times are used as they are, so missed keyframes (gaps) are
handled, and nothing is extrapolated: no state is produced outside the frames where the track was
observed, and a track observed once has no velocity (NaN).
"""

from __future__ import annotations

import numba
import numpy as np


def track_velocities_mps(
    track_id: np.ndarray,
    time_s: np.ndarray,
    center_xy_m: np.ndarray,
    half_window: int = 2,
    still_displacement_m: np.ndarray | None = None,
) -> np.ndarray:
    """Velocity of every observation of every track, in the frame of ``center_xy_m``.

    Args:
        track_id: (N,) int track id of each observation (any order, several tracks mixed).
        time_s: (N,) observation times, seconds; unique within a track.
        center_xy_m: (N, 2) observed centres, metres.
        half_window: observations taken either side of each one for the fit (>= 1); with 1 an
            interior observation gets the central difference of its neighbours.
        still_displacement_m: optional (N,) metres: an observation whose fitted displacement
            over its window (speed times the window's time span) is shorter than this is at
            rest, velocity zero (the window's centres moved no more than their noise).

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
    same_track = tid[1:] == tid[:-1]
    if np.any(same_track & (t[1:] == t[:-1])):
        raise ValueError("track_velocities_mps: a track has two observations at the same time")
    still = np.zeros(n) if still_displacement_m is None else np.asarray(still_displacement_m)
    if still.shape != (n,):
        raise ValueError(
            f"track_velocities_mps: expected still_displacement_m ({n},), got {still.shape}"
        )
    velocity[order] = _window_slopes(tid, t, xy, half_window, still[order].astype(np.float64))
    return velocity


@numba.njit(cache=True)
def _window_slopes(
    track_id: np.ndarray, time_s: np.ndarray, xy_m: np.ndarray, half_window: int,
    still_m: np.ndarray,
) -> np.ndarray:  # fmt: skip
    """(N, 2) least-squares slopes for observations sorted by (track, time); NaN if alone, zero
    where the fitted displacement over the window is shorter than ``still_m``."""
    n = track_id.shape[0]
    out = np.full((n, 2), np.nan)
    start = 0
    while start < n:
        end = start + 1
        while end < n and track_id[end] == track_id[start]:
            end += 1
        # Relative to the track's first observation, for conditioning.
        t0, x0, y0 = time_s[start], xy_m[start, 0], xy_m[start, 1]
        for k in range(start, end):
            lo = max(start, k - half_window)
            hi = min(end, k + half_window + 1)
            count = hi - lo
            if count < 2:
                continue
            st = stt = sx = sy = stx = sty = 0.0
            for q in range(lo, hi):
                t = time_s[q] - t0
                x = xy_m[q, 0] - x0
                y = xy_m[q, 1] - y0
                st += t
                stt += t * t
                sx += x
                sy += y
                stx += t * x
                sty += t * y
            denominator = count * stt - st * st
            vx = (count * stx - st * sx) / denominator
            vy = (count * sty - st * sy) / denominator
            if np.sqrt(vx * vx + vy * vy) * (time_s[hi - 1] - time_s[lo]) < still_m[k]:
                vx, vy = 0.0, 0.0
            out[k, 0] = vx
            out[k, 1] = vy
        start = end
    return out
