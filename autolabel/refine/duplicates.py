"""Tracks that follow the same object under another class (the detector's runner-up class of one
cluster is tracked separately): which track each of them duplicates; and two-wheeler tracks that
ride along a vehicle, pieces the detector cut off it (:func:`riding_along`)."""

from __future__ import annotations

import numpy as np

from autolabel.boxes import Boxes3D
from autolabel.refine.track_table import frame_rows


def duplicate_of(
    boxes: Boxes3D,
    frame_of: np.ndarray,
    track_weight: dict | np.ndarray,
    max_distance_m: float,
    min_shared: float,
    inside: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Which tracks are duplicates of another one.

    A track is a duplicate of a heavier one (larger ``track_weight``) when at least ``min_shared``
    of its boxes lie within ``max_distance_m`` (xy) of a box of that track in the same keyframe,
    or, for boxes marked ``inside`` ((N,) bool; None: none), have their centre inside that box's
    footprint and a footprint no larger (a motorcycle's box on a car's cluster: the detector
    grows each class's box to that class's footprint away from the sensor, so the two centres
    lie apart by half the difference of their lengths; no road user stands inside another one).

    Args:
        boxes: (N,) tracked boxes of the clip (global frame, ``track_id`` >= 0).
        frame_of: (N,) keyframe of each box.
        track_weight: (T,) weight of each track in ``np.unique(boxes.track_id)`` order.
        max_distance_m: centres closer than this are the same object.
        min_shared: fraction of a track's boxes that must coincide with the heavier track's.

    Returns:
        (T,) unique track ids and (T,) the id each duplicates (-1: none), in the same order.
    """
    uniq, col = np.unique(boxes.track_id, return_inverse=True)
    weight = np.asarray(track_weight, dtype=np.float64)
    owner = np.full(len(uniq), -1, np.int64)
    if len(boxes) == 0:
        return uniq, owner
    pair_a, pair_b = [], []
    xy = boxes.center_m[:, :2]
    for rows in frame_rows(frame_of):  # keyframes (tens per clip), vectorised inside
        if len(rows) < 2:
            continue
        rel = xy[rows, None, :] - xy[None, rows, :]
        near = np.linalg.norm(rel, axis=2) < max_distance_m
        if inside is not None:
            # Centre of row i in the footprint of box j.
            half_lw = boxes.size_wlh_m[rows][:, [1, 0]] / 2
            area = boxes.size_wlh_m[rows, 0] * boxes.size_wlh_m[rows, 1]
            near |= (
                inside_footprint(rel, boxes.yaw_rad[rows][None, :], half_lw[None, :, :])
                & (area[:, None] <= area[None, :])
                & inside[rows][:, None]
            )
        i, j = np.nonzero(near)
        keep = i != j
        pair_a.append(col[rows[i[keep]]])
        pair_b.append(col[rows[j[keep]]])
    if not pair_a:
        return uniq, owner
    a, b = np.concatenate(pair_a), np.concatenate(pair_b)
    n = len(uniq)
    # (a, b) counted once per keyframe where a box of a has one of b near it.
    key, shared = np.unique(a * n + b, return_counts=True)
    a, b = key // n, key % n
    length = np.bincount(col, minlength=n)
    heavier = (weight[b] > weight[a]) | ((weight[b] == weight[a]) & (b < a))
    dup = heavier & (shared >= min_shared * length[a])
    a, b = a[dup], b[dup]
    # Each duplicate goes to its heaviest partner.
    best = np.lexsort((-weight[b], a))
    a, b = a[best], b[best]
    first = np.unique(a, return_index=True)[1]
    owner[a[first]] = uniq[b[first]]
    return uniq, owner


def inside_footprint(offset: np.ndarray, yaw: np.ndarray, half_lw: np.ndarray) -> np.ndarray:
    """Whether points at ``offset`` (..., 2) from box centres lie inside those boxes' footprints
    (``yaw`` (...), ``half_lw`` (..., 2) half length and width, broadcast against them)."""
    c, s = np.cos(yaw), np.sin(yaw)
    along = np.abs(c * offset[..., 0] + s * offset[..., 1])
    across = np.abs(-s * offset[..., 0] + c * offset[..., 1])
    return (along <= half_lw[..., 0]) & (across <= half_lw[..., 1])


def riding_along(
    boxes: Boxes3D,
    frame_of: np.ndarray,
    riders: np.ndarray,
    hosts: np.ndarray,
    reach_m: float,
    max_dv_mps: float,
    min_shared: float,
    min_speed_mps: float = 0.0,
) -> np.ndarray:
    """Track ids of ``riders`` boxes that ride along a ``hosts`` box: in at least ``min_shared``
    of the rider track's keyframes, its centre lies on a host box's footprint lengthened by
    ``reach_m`` at both ends (across: within the host's half width) and its velocity differs
    from the host's by at most ``max_dv_mps``.

    A vehicle the detector cut in two leaves a two-wheeler-sized piece at its front or back (its
    bonnet, a trailer's drawbar end), in line with it and moving with it; a real two-wheeler
    does not hold station within a metre or so of a vehicle's end, on its axis, at its speed
    (riders keep a following distance; filtering between lanes puts them beside, not in
    line).

    Args:
        boxes: (N,) refined boxes of a clip (global frame, one size per track).
        frame_of: (N,) keyframe of each box.
        riders, hosts: (N,) bool, the boxes that may ride along (two-wheelers) and those they
            may ride along (vehicles).
        reach_m, max_dv_mps, min_shared: see above.
        min_speed_mps: only hosts moving at least this fast (m/s) carry riders (0: parked ones
            too).

    Returns:
        The sorted unique track ids of the rider tracks that ride along a host.
    """
    if not np.any(riders) or not np.any(hosts):
        return np.empty(0, boxes.track_id.dtype)
    xy, v = boxes.center_m[:, :2], np.nan_to_num(boxes.velocity_mps)
    on = np.zeros(len(boxes), bool)
    for rows in frame_rows(frame_of):  # keyframes (tens per clip), vectorised inside
        r, h = rows[riders[rows]], rows[hosts[rows]]
        if len(r) == 0 or len(h) == 0:
            continue
        rel = xy[r, None, :] - xy[None, h, :]
        c, s = np.cos(boxes.yaw_rad[h])[None, :], np.sin(boxes.yaw_rad[h])[None, :]
        along = np.abs(c * rel[..., 0] + s * rel[..., 1])
        across = np.abs(-s * rel[..., 0] + c * rel[..., 1])
        dv = np.linalg.norm(v[r, None, :] - v[None, h, :], axis=2)
        hit = (
            (along <= boxes.size_wlh_m[h, 1][None, :] / 2 + reach_m)
            & (across <= boxes.size_wlh_m[h, 0][None, :] / 2)
            & (dv <= max_dv_mps)
            & (np.linalg.norm(v[h], axis=1) >= min_speed_mps)[None, :]
        )
        on[r] = hit.any(axis=1)
    ids, col = np.unique(boxes.track_id[riders], return_inverse=True)
    share = np.bincount(col, weights=on[riders], minlength=len(ids)) / np.bincount(col)
    return ids[share >= min_shared]
