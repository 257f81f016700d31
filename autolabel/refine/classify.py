"""Track-level evidence from the accumulated LiDAR returns: clutter rejection and the extent of
each track's returns in its own frame.

Per track (its returns from every keyframe, stacked): how many returns a box holds (median over
keyframes), how high they reach above the ground, and how much of them lie on the box's outline
(a vehicle's returns sit on its surfaces; vegetation fills its volume). Clutter: a static track
whose returns fill the volume (vegetation), or that is taller and longer than any vehicle its
class allows (a facade, a hedge row).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autolabel.classes import CLASS_INDEX
from autolabel.refine.points import PointEvidence
from autolabel.refine.track_table import TrackTable


@dataclass
class TrackEvidence:
    """Per track: ``returns`` (median returns per observed box), ``height_m`` (median over
    boxes of the highest return above ground), ``surface_share`` (share of all its returns within
    ``surface_m`` of the box outline)."""

    returns: np.ndarray
    height_m: np.ndarray
    surface_share: np.ndarray


def track_evidence(
    table: TrackTable, evidence: PointEvidence, evidence_row: np.ndarray, surface_m: float = 0.25
) -> TrackEvidence:
    """Evidence of every track of ``table``; ``evidence_row``: (K,) index of each table row's box
    in ``evidence`` (-1 where the row is not observed)."""
    from autolabel.refine.tracks import group_quantile

    n_tracks = table.n_tracks
    obs = evidence_row >= 0
    t_of_row = table.track_of_row
    count = np.where(obs, evidence.count[np.maximum(evidence_row, 0)], 0)
    returns = group_quantile(t_of_row[obs], count[obs], n_tracks, 0.5)
    # Per return: its table row (its track) and its distance inside the box outline.
    row_of_box = np.full(len(evidence.count), -1, np.int64)
    row_of_box[evidence_row[obs]] = np.flatnonzero(obs)
    ret_row = row_of_box[evidence.box]
    valid = ret_row >= 0
    ret_row = ret_row[valid]
    local = evidence.local_xyh_m[valid]
    half_l = table.boxes.size_wlh_m[ret_row, 1] / 2
    half_w = table.boxes.size_wlh_m[ret_row, 0] / 2
    inside = np.minimum(half_l - np.abs(local[:, 0]), half_w - np.abs(local[:, 1]))
    on_surface = inside < surface_m
    ret_track = t_of_row[ret_row]
    n_ret = np.bincount(ret_track, minlength=n_tracks)
    surface = np.bincount(ret_track, weights=on_surface, minlength=n_tracks) / np.maximum(n_ret, 1)
    surface = np.where(n_ret > 0, surface, np.nan)
    box_top = np.full(len(table.observed), np.nan)
    if len(ret_row):
        top = np.full(len(table.observed), -np.inf)
        np.maximum.at(top, ret_row, local[:, 2])
        box_top = np.where(np.isfinite(top), top, np.nan)
    has_top = np.isfinite(box_top)
    height = group_quantile(t_of_row[has_top], box_top[has_top], n_tracks, 0.5)
    return TrackEvidence(returns, height, surface)


def clutter_tracks(
    features: TrackEvidence,
    static: np.ndarray,
    max_surface_share: float,
    min_height_m: float,
    min_returns: float,
) -> np.ndarray:
    """(T,) bool: static tracks taller than ``min_height_m`` whose returns fill their volume
    (share on the outline below ``max_surface_share``: trees, hedges, facades seen through), or
    with fewer than ``min_returns`` returns per box (nothing solid there)."""
    with np.errstate(invalid="ignore"):
        volumetric = (features.surface_share < max_surface_share) & (
            features.height_m > min_height_m
        )
        empty = ~(features.returns >= min_returns)
    return static & (volumetric | empty)


def relabel_low_vehicles(
    features: TrackEvidence, label: np.ndarray, max_car_height_m: float, min_returns: float
) -> np.ndarray:
    """(T,) track classes with large-vehicle tracks (truck, bus, trailer, construction vehicle)
    whose returns, over the whole track, never reach above ``max_car_height_m`` turned into cars:
    a size-only classifier calls a car whose cluster merged with its neighbour a truck, but the
    roof line seen over many keyframes tells them apart. Needs ``min_returns`` per box."""
    big = np.isin(
        label, [CLASS_INDEX[c] for c in ("truck", "bus", "trailer", "construction_vehicle")]
    )
    with np.errstate(invalid="ignore"):
        low = (features.height_m < max_car_height_m) & (features.returns >= min_returns)
    return np.where(big & low, CLASS_INDEX["car"], label)


def cabin_side(
    table: TrackTable,
    evidence: PointEvidence,
    evidence_row: np.ndarray,
    track_center_xy: np.ndarray,
    track_yaw: np.ndarray,
    roof_fraction: float,
    min_offset_m: float,
) -> np.ndarray:
    """(T,) per track, where its roof sits along the heading ``track_yaw`` from the middle of its
    accumulated returns: -1 behind (a car's cabin sits behind its middle, the bonnet is longer
    than the boot), +1 ahead, 0 undecided (fewer than 10 roof returns, or within
    ``min_offset_m``). Returns of every keyframe are stacked in the track's frame
    (``track_center_xy`` (T, 2), ``track_yaw`` (T,)); the roof is what reaches above
    ``roof_fraction`` of the track's highest returns."""
    n_tracks = table.n_tracks
    out = np.zeros(n_tracks, np.int64)
    obs = evidence_row >= 0
    row_of_box = np.full(len(evidence.count), -1, np.int64)
    row_of_box[evidence_row[obs]] = np.flatnonzero(obs)
    ret_row = row_of_box[evidence.box]
    valid = ret_row >= 0
    ret_row, local = ret_row[valid], evidence.local_xyh_m[valid]
    if len(ret_row) == 0:
        return out
    boxes = table.boxes
    c, s = np.cos(boxes.yaw_rad[ret_row]), np.sin(boxes.yaw_rad[ret_row])
    gx = boxes.center_m[ret_row, 0] + c * local[:, 0] - s * local[:, 1]
    gy = boxes.center_m[ret_row, 1] + s * local[:, 0] + c * local[:, 1]
    track = table.track_of_row[ret_row]
    tc, ts = np.cos(track_yaw[track]), np.sin(track_yaw[track])
    along = tc * (gx - track_center_xy[track, 0]) + ts * (gy - track_center_xy[track, 1])
    height = local[:, 2]
    top = np.full(n_tracks, -np.inf)
    np.maximum.at(top, track, height)
    lo = np.full(n_tracks, np.inf)
    hi = np.full(n_tracks, -np.inf)
    np.minimum.at(lo, track, along)
    np.maximum.at(hi, track, along)
    middle = 0.5 * (lo + hi)
    roof = height >= roof_fraction * top[track]
    n_roof = np.bincount(track[roof], minlength=n_tracks)
    roof_along = np.bincount(track[roof], weights=along[roof], minlength=n_tracks) / np.maximum(
        n_roof, 1
    )
    offset = roof_along - middle
    decided = (n_roof >= 10) & (np.abs(offset) >= min_offset_m)
    out[decided] = np.sign(offset[decided]).astype(np.int64)
    return out
