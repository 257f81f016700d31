"""Two-sided trajectory smoothing of whole tracks: a constant-velocity Kalman filter run forward,
then the Rauch-Tung-Striebel pass backward, over every keyframe of each track's observed span.

Why this and not a sliding least-squares slope: the backward pass gives every state the evidence
of the whole track (past and future), so there is no lag at stops, turns or track ends, and a
velocity measured by the detector (where it gives one) is fused as what it is, an instantaneous
measurement, instead of being replaced by a slope over several keyframes. States exist only
between a track's first and last observation: keyframes missed inside that span are predicted
(and smoothed), nothing is extrapolated beyond it.

The x and y axes are independent (the same model, two filters run together). Units: metres,
seconds, m/s; any world-fixed frame.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def _rts_segment(t, pos, pos_ok, vel, vel_ok, q, r_pos, r_vel, v0_var, out_pos, out_vel):
    """Smooth one track's states in place: t (K,), pos/vel (K, 2), *_ok (K,) bool masks."""
    k_len = t.shape[0]
    # Filtered and predicted means/covariances per axis: state [p, v].
    xf = np.zeros((k_len, 2, 2))
    pf = np.zeros((k_len, 2, 2, 2))
    xp = np.zeros((k_len, 2, 2))
    pp = np.zeros((k_len, 2, 2, 2))
    for a in range(2):
        # Start at the first observation (a track's span starts with one).
        x = np.array([pos[0, a], vel[0, a] if vel_ok[0] else 0.0])
        p = np.array([[r_pos, 0.0], [0.0, r_vel if vel_ok[0] else v0_var]])
        for k in range(k_len):
            if k > 0:
                dt = t[k] - t[k - 1]
                x = np.array([x[0] + dt * x[1], x[1]])
                p00 = p[0, 0] + 2 * dt * p[0, 1] + dt * dt * p[1, 1] + q * dt**3 / 3.0
                p01 = p[0, 1] + dt * p[1, 1] + q * dt**2 / 2.0
                p11 = p[1, 1] + q * dt
                p = np.array([[p00, p01], [p01, p11]])
            xp[k, a] = x
            pp[k, a] = p
            # Row 0 initialised the state from its own measurements.
            if pos_ok[k] and k > 0:
                s = p[0, 0] + r_pos
                g0, g1 = p[0, 0] / s, p[1, 0] / s
                innov = pos[k, a] - x[0]
                x = np.array([x[0] + g0 * innov, x[1] + g1 * innov])
                p = np.array(
                    [
                        [p[0, 0] - g0 * p[0, 0], p[0, 1] - g0 * p[0, 1]],
                        [p[1, 0] - g1 * p[0, 0], p[1, 1] - g1 * p[0, 1]],
                    ]
                )
            if vel_ok[k] and k > 0:
                s = p[1, 1] + r_vel
                g0, g1 = p[0, 1] / s, p[1, 1] / s
                innov = vel[k, a] - x[1]
                x = np.array([x[0] + g0 * innov, x[1] + g1 * innov])
                p = np.array(
                    [
                        [p[0, 0] - g0 * p[1, 0], p[0, 1] - g0 * p[1, 1]],
                        [p[1, 0] - g1 * p[1, 0], p[1, 1] - g1 * p[1, 1]],
                    ]
                )
            xf[k, a] = x
            pf[k, a] = p
        # Backward (RTS) pass.
        xs = xf[k_len - 1, a].copy()
        ps = pf[k_len - 1, a].copy()
        out_pos[k_len - 1, a] = xs[0]
        out_vel[k_len - 1, a] = xs[1]
        for k in range(k_len - 2, -1, -1):
            dt = t[k + 1] - t[k]
            # C = Pf F^T Pp^-1
            pfk = pf[k, a]
            ppn = pp[k + 1, a]
            det = ppn[0, 0] * ppn[1, 1] - ppn[0, 1] * ppn[1, 0]
            inv = np.array([[ppn[1, 1], -ppn[0, 1]], [-ppn[1, 0], ppn[0, 0]]]) / det
            # Pf F^T: F = [[1, dt], [0, 1]]
            a00 = pfk[0, 0] + dt * pfk[0, 1]
            a01 = pfk[0, 1]
            a10 = pfk[1, 0] + dt * pfk[1, 1]
            a11 = pfk[1, 1]
            c = np.array(
                [
                    [a00 * inv[0, 0] + a01 * inv[1, 0], a00 * inv[0, 1] + a01 * inv[1, 1]],
                    [a10 * inv[0, 0] + a11 * inv[1, 0], a10 * inv[0, 1] + a11 * inv[1, 1]],
                ]
            )
            d0 = xs[0] - xp[k + 1, a, 0]
            d1 = xs[1] - xp[k + 1, a, 1]
            x0 = xf[k, a, 0] + c[0, 0] * d0 + c[0, 1] * d1
            x1 = xf[k, a, 1] + c[1, 0] * d0 + c[1, 1] * d1
            dp = ps - ppn
            ps = pfk + c @ dp @ c.T
            xs = np.array([x0, x1])
            out_pos[k, a] = x0
            out_vel[k, a] = x1


@numba.njit(cache=True)
def _rts_tracks(starts, t, pos, pos_ok, vel, vel_ok, q, r_pos, r_vel, v0_var):
    n = t.shape[0]
    out_pos = np.zeros((n, 2))
    out_vel = np.zeros((n, 2))
    for s in range(starts.shape[0] - 1):
        lo, hi = starts[s], starts[s + 1]
        _rts_segment(
            t[lo:hi],
            pos[lo:hi],
            pos_ok[lo:hi],
            vel[lo:hi],
            vel_ok[lo:hi],
            q[s],
            r_pos[s],
            r_vel,
            v0_var,
            out_pos[lo:hi],
            out_vel[lo:hi],
        )
    return out_pos, out_vel


def smooth_tracks(
    track_start: np.ndarray,
    time_s: np.ndarray,
    center_xy_m: np.ndarray,
    observed: np.ndarray,
    velocity_mps: np.ndarray,
    accel_psd: np.ndarray,
    position_sigma_m: np.ndarray,
    velocity_sigma_mps: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Smoothed centres and velocities of many tracks, each over its span of keyframes.

    Args:
        track_start: (T + 1,) row offsets: track ``s`` owns rows ``track_start[s]:track_start[s+1]``,
            sorted by time, its first and last row observed.
        time_s: (K,) keyframe time of each row, seconds.
        center_xy_m: (K, 2) observed centre (any value where not ``observed``), metres.
        observed: (K,) bool, the row holds a detection (False: a keyframe missed inside the span).
        velocity_mps: (K, 2) detector velocity, NaN where it gives none (or not observed).
        accel_psd: (T,) white-acceleration spectral density per track, m^2/s^3 (how much it may
            change speed: larger follows manoeuvres closer, smooths less).
        position_sigma_m: (T,) standard deviation of a detected centre per track, metres.
        velocity_sigma_mps: standard deviation of a detector velocity, m/s.

    Returns:
        (K, 2) smoothed centres, metres, and (K, 2) velocities, m/s.
    """
    starts = np.asarray(track_start, dtype=np.int64)
    t = np.ascontiguousarray(time_s, dtype=np.float64)
    pos = np.ascontiguousarray(center_xy_m, dtype=np.float64)
    vel = np.asarray(velocity_mps, dtype=np.float64)
    ok = np.asarray(observed, dtype=bool)
    vel_ok = ok & np.all(np.isfinite(vel), axis=1)
    vel = np.ascontiguousarray(np.where(vel_ok[:, None], vel, 0.0))
    if len(t) == 0:
        return np.zeros((0, 2)), np.zeros((0, 2))
    return _rts_tracks(
        starts,
        t,
        pos,
        ok,
        vel,
        vel_ok,
        np.ascontiguousarray(accel_psd, dtype=np.float64),
        np.ascontiguousarray(np.square(position_sigma_m), dtype=np.float64),
        float(velocity_sigma_mps) ** 2,
        # A diffuse prior on the first velocity where the detector gives none: the track's own
        # motion decides it, not a bias towards zero.
        1e6,
    )
