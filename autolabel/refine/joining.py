"""Fragments of one object's track joined over the whole clip (offline, both directions).

An online tracker loses an object when the detector calls it by another class for a few
keyframes (a parked car seen as a construction vehicle, a pedestrian as a cone) or misses it for
longer than its gate allows: the object's keyframes are then split between two or more tracks
that never share a keyframe. With the whole clip in view each fragment's trajectory is known on
both sides of the other's observations, so two fragments are the same object when each one's
observations lie where the other's trajectory puts them: inside a fragment's span its
observations interpolated linearly, outside it extrapolated at the fragment's end velocity
(constant velocity; a parked object's is near zero, the static hypothesis). The allowed residual
grows with the time extrapolated.

Pairs are chosen globally: cheapest first, each joining two groups of fragments that share no
keyframe (a fragment observed in the other one's gap, or after its end), so the result never
holds two boxes of a track in one keyframe.
"""

from __future__ import annotations

import numba
import numpy as np

from autolabel.classes import DETECTION_CLASSES

#: No single residual may exceed this multiple of its allowed residual (the mean must stay
#: within it): one stray box of a fragment (a class's box grown over a neighbour) is tolerated,
#: a fragment elsewhere is not.
MAX_RESIDUAL_SHARE = 2.0

#: Classes whose fragments may join: a size-based detector confuses the classes within each
#: group from frame to frame (a parked car called a construction vehicle or a truck, a
#: pedestrian a cone or a bicycle), never across groups.
#: Barriers join nothing: they stand in rows a metre or two apart, where a fragment of one is
#: where its neighbour's would be (synthetic seed 5: barrier AP 0.60 -> 0.53 when joined).
JOIN_CLASS_GROUPS: tuple[tuple[str, ...], ...] = (
    ("car", "truck", "bus", "trailer", "construction_vehicle"),
    ("pedestrian", "bicycle", "motorcycle", "traffic_cone"),
)


def class_groups(groups: tuple[tuple[str, ...], ...] = JOIN_CLASS_GROUPS) -> np.ndarray:
    """(C,) group index of each class of ``DETECTION_CLASSES``; -1 for classes in no group."""
    group = np.full(len(DETECTION_CLASSES), -1, dtype=np.int64)
    for k, names in enumerate(groups):
        group[[DETECTION_CLASSES.index(name) for name in names]] = k
    return group


@numba.njit(cache=True)
def _end_velocity(t: np.ndarray, xy: np.ndarray, lo: int, hi: int) -> tuple[float, float]:
    """Least-squares slope (m/s) of ``xy[lo:hi]`` over ``t[lo:hi]``; zero for one sample."""
    n = hi - lo
    if n < 2:
        return 0.0, 0.0
    mt = 0.0
    mx = 0.0
    my = 0.0
    for k in range(lo, hi):
        mt += t[k]
        mx += xy[k, 0]
        my += xy[k, 1]
    mt /= n
    mx /= n
    my /= n
    stt = 0.0
    stx = 0.0
    sty = 0.0
    for k in range(lo, hi):
        dt = t[k] - mt
        stt += dt * dt
        stx += dt * (xy[k, 0] - mx)
        sty += dt * (xy[k, 1] - my)
    return stx / stt, sty / stt


@numba.njit(cache=True)
def _predict(
    t: np.ndarray, xy: np.ndarray, lo: int, hi: int, v_start: np.ndarray, v_end: np.ndarray,
    at: float,
) -> tuple[float, float, float]:  # fmt: skip
    """Position of the fragment ``lo:hi`` (observations sorted by time) at time ``at`` and the
    seconds extrapolated beyond its span (0 inside it)."""
    if at <= t[lo]:
        tau = t[lo] - at
        return xy[lo, 0] - v_start[0] * tau, xy[lo, 1] - v_start[1] * tau, tau
    if at >= t[hi - 1]:
        tau = at - t[hi - 1]
        return xy[hi - 1, 0] + v_end[0] * tau, xy[hi - 1, 1] + v_end[1] * tau, tau
    k = lo
    while t[k + 1] < at:
        k += 1
    w = (at - t[k]) / (t[k + 1] - t[k])
    return (
        xy[k, 0] + w * (xy[k + 1, 0] - xy[k, 0]),
        xy[k, 1] + w * (xy[k + 1, 1] - xy[k, 1]),
        0.0,
    )


@numba.njit(cache=True)
def _direction_cost(
    t: np.ndarray, xy: np.ndarray, start: np.ndarray, v_start: np.ndarray, v_end: np.ndarray,
    src: int, dst: int, gate_m: float, gate_rate_mps: float,
) -> float:  # fmt: skip
    """Mean of ``dst``'s residuals against ``src``'s trajectory, each over its allowed residual
    (``gate_m + gate_rate_mps * seconds extrapolated``); inf where any residual exceeds it."""
    total = 0.0
    for k in range(start[dst], start[dst + 1]):
        px, py, tau = _predict(t, xy, start[src], start[src + 1], v_start[src], v_end[src], t[k])
        r = np.sqrt((xy[k, 0] - px) ** 2 + (xy[k, 1] - py) ** 2) / (gate_m + gate_rate_mps * tau)
        if r > MAX_RESIDUAL_SHARE:
            return np.inf
        total += r
    total /= start[dst + 1] - start[dst]
    return total if total <= 1.0 else np.inf


@numba.njit(cache=True)
def _share_a_keyframe(seen: np.ndarray, a: int, b: int) -> bool:
    for f in range(seen.shape[1]):
        if seen[a, f] and seen[b, f]:
            return True
    return False


@numba.njit(cache=True)
def _join(
    t: np.ndarray, xy: np.ndarray, start: np.ndarray, group: np.ndarray, frames: np.ndarray,
    n_end: int, gate_m: float, gate_rate_mps: float, min_observations: int,
) -> np.ndarray:  # fmt: skip
    """Root fragment of each fragment after joining (see :func:`join_fragments`)."""
    n = start.shape[0] - 1
    v_start = np.zeros((n, 2))
    v_end = np.zeros((n, 2))
    for i in range(n):
        lo, hi = start[i], start[i + 1]
        v_start[i] = _end_velocity(t, xy, lo, min(hi, lo + n_end))
        v_end[i] = _end_velocity(t, xy, max(lo, hi - n_end), hi)
    pair_a = []
    pair_b = []
    pair_cost = []
    for a in range(n):
        if group[a] < 0 or start[a + 1] - start[a] < min_observations:
            continue
        for b in range(a + 1, n):
            if group[a] != group[b] or start[b + 1] - start[b] < min_observations:
                continue
            if _share_a_keyframe(frames, a, b):
                continue
            na, nb = start[a + 1] - start[a], start[b + 1] - start[b]
            c_ab = _direction_cost(t, xy, start, v_start, v_end, a, b, gate_m, gate_rate_mps)
            c_ba = _direction_cost(t, xy, start, v_start, v_end, b, a, gate_m, gate_rate_mps)
            # A fragment seen once has no velocity of its own: only the other one predicts.
            if na == 1 and nb > 1:
                cost = c_ab
            elif nb == 1 and na > 1:
                cost = c_ba
            else:
                cost = 0.5 * (c_ab + c_ba)
            if np.isfinite(cost):
                pair_a.append(a)
                pair_b.append(b)
                pair_cost.append(cost)
    root = np.arange(n)
    used = frames.copy()
    order = np.argsort(np.array(pair_cost), kind="mergesort")
    for q in order:
        ra, rb = pair_a[q], pair_b[q]
        while root[ra] != ra:
            ra = root[ra]
        while root[rb] != rb:
            rb = root[rb]
        if ra == rb:
            continue
        if _share_a_keyframe(used, ra, rb):
            continue
        keep, gone = min(ra, rb), max(ra, rb)
        root[gone] = keep
        for f in range(used.shape[1]):
            used[keep, f] = used[keep, f] or used[gone, f]
    for i in range(n):
        r = i
        while root[r] != r:
            r = root[r]
        root[i] = r
    return root


def join_fragments(
    track_id: np.ndarray,
    frame_of: np.ndarray,
    times_s: np.ndarray,
    center_xy_m: np.ndarray,
    label: np.ndarray,
    gate_m: float,
    gate_rate_mps: float,
    end_observations: int = 3,
    min_observations: int = 1,
    groups: tuple[tuple[str, ...], ...] = JOIN_CLASS_GROUPS,
) -> np.ndarray:
    """Track ids after joining the fragments of one object (see the module docstring).

    Two fragments may join when no keyframe holds a box of both, their classes share a group of
    ``groups`` (classes in none never join) (a fragment's class: its most frequent box label), and every observation of one
    lies within ``gate_m + gate_rate_mps * tau`` metres (xy) of the other's trajectory, ``tau``
    the seconds extrapolated beyond the other's span (both directions checked and their mean
    residuals averaged, or only the one from the longer fragment where the other was seen
    once). End velocities: the least-squares slope of a fragment's first or last
    ``end_observations`` centres (zero for a fragment seen once). Fragments with fewer than
    ``min_observations`` boxes join nothing (clutter comes and goes in short fragments: joined,
    they would pass for one object seen often).

    Args:
        track_id: (N,) track of each box (>= 0); frame_of: (N,) its keyframe (one box per track
            and keyframe); times_s: (F,) keyframe times, seconds.
        center_xy_m: (N, 2) global centres, metres; label: (N,) class indices.
        gate_m, gate_rate_mps: allowed residual, metres, and its growth, m/s of extrapolation.

    Returns:
        (N,) track ids: each joined group takes the smallest id of its fragments.
    """
    track_id = np.asarray(track_id)
    if len(track_id) == 0:
        return track_id.copy()
    order = np.lexsort((frame_of, track_id))
    uniq, col = np.unique(track_id[order], return_inverse=True)
    start = np.searchsorted(col, np.arange(len(uniq) + 1)).astype(np.int64)
    n_cls = len(DETECTION_CLASSES)
    votes = np.bincount(col * n_cls + label[order].astype(np.int64), minlength=len(uniq) * n_cls)
    track_class = votes.reshape(len(uniq), n_cls).argmax(axis=1)
    frames = np.zeros((len(uniq), len(times_s)), bool)
    frames[col, frame_of[order]] = True
    root = _join(
        np.asarray(times_s, np.float64)[frame_of[order]],
        np.ascontiguousarray(center_xy_m[order], dtype=np.float64),
        start,
        class_groups(groups)[track_class],
        frames,
        int(end_observations),
        float(gate_m),
        float(gate_rate_mps),
        int(min_observations),
    )
    out = np.empty_like(track_id)
    out[order] = uniq[root][col]
    return out


__all__ = ["JOIN_CLASS_GROUPS", "class_groups", "join_fragments"]
