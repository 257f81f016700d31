"""Boxes for the keyframes where a track was not seen: interpolated, or extrapolated a little.

A person next to the car sits in the LiDAR's blind zone, a distant one falls between beams: the
detector misses them at some keyframes while the camera still shows their face. Anonymization
needs a box there, so each track is completed over the keyframes of the clip:

- between two keyframes where the track has boxes: linear interpolation of centre and yaw (the
  shorter way round), size and class of the earlier box;
- up to ``max_extrapolate_s`` before its first or after its last box: the end box moved along its
  velocity (or left in place where the velocity is unknown).

Every added box carries an uncertainty, metres, that grows with the time to the nearest real box
(``growth_mps`` per second); anonymization widens its regions by it. Vectorized over
(track, keyframe) cells; no loop over tracks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from autolabel.boxes import Boxes3D
from calib.rotation import wrap_angle


@dataclass(frozen=True)
class TrackFillConfig:
    """How far and how loosely tracks are completed.

    Attributes:
        max_extrapolate_s: extrapolate this far before a track's first and after its last box.
        growth_mps: uncertainty added per second away from the nearest real box, metres/second.
        max_uncertainty_m: cap of that uncertainty.
        min_track_boxes: tracks with fewer real boxes are not completed (one-off false
            positives would otherwise be smeared over seconds).
    """

    max_extrapolate_s: float = 3.0
    growth_mps: float = 0.5
    max_uncertainty_m: float = 2.0
    min_track_boxes: int = 2

    def __post_init__(self) -> None:
        for name in ("max_extrapolate_s", "growth_mps", "max_uncertainty_m"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: must be >= 0, got {getattr(self, name)!r}")
        if self.min_track_boxes < 1:
            raise ValueError(f"min_track_boxes: must be >= 1, got {self.min_track_boxes!r}")


def fill_track_gaps(
    frame_time_s: np.ndarray,
    boxes_per_frame: Sequence[Boxes3D],
    config: TrackFillConfig | None = None,
) -> tuple[list[Boxes3D], list[np.ndarray]]:
    """Each frame's boxes plus the completed boxes of tracks missing there.

    Args:
        frame_time_s: (F,) keyframe times, seconds, increasing.
        boxes_per_frame: F box sets in one frame of reference (global); ``track_id`` >= 0 links
            boxes of one object (untracked boxes, id -1, are kept as they are).
        config: extrapolation range and uncertainty growth.

    Returns:
        F box sets (the frame's own boxes first, then the added ones) and F arrays (N_f,) of
        uncertainty in metres (0 for the frame's own boxes).
    """
    cfg = config or TrackFillConfig()
    t = np.asarray(frame_time_s, dtype=np.float64).reshape(-1)
    n_frames = len(t)
    if len(boxes_per_frame) != n_frames:
        raise ValueError(
            f"fill_track_gaps: {len(boxes_per_frame)} box sets for {n_frames} frame times"
        )
    own_uncertainty = [np.zeros(len(b)) for b in boxes_per_frame]
    if n_frames == 0:
        return [], []
    frames = {b.frame for b in boxes_per_frame}
    if len(frames) > 1:
        raise ValueError(f"fill_track_gaps: boxes in several frames of reference {sorted(frames)}")
    all_boxes = Boxes3D.concatenate(list(boxes_per_frame))
    frame_of = np.repeat(np.arange(n_frames), [len(b) for b in boxes_per_frame])
    tracked = all_boxes.track_id >= 0
    if not tracked.any():
        return list(boxes_per_frame), own_uncertainty
    rows = np.flatnonzero(tracked)
    ids, track_of = np.unique(all_boxes.track_id[rows], return_inverse=True)
    n_tracks = len(ids)
    # (T, F) row of each track's box per frame (-1: none); a duplicate id in a frame keeps the
    # highest-scoring box.
    order = np.lexsort((-all_boxes.score[rows], frame_of[rows], track_of))
    cell = track_of[order] * n_frames + frame_of[rows][order]
    first = np.ones(len(cell), bool)
    first[1:] = cell[1:] != cell[:-1]
    table = np.full(n_tracks * n_frames, -1, np.int64)
    table[cell[first]] = rows[order][first]
    table = table.reshape(n_tracks, n_frames)
    present = table >= 0
    present &= (present.sum(axis=1) >= cfg.min_track_boxes)[:, None]
    col = np.broadcast_to(np.arange(n_frames), (n_tracks, n_frames))
    prev_f = np.maximum.accumulate(np.where(present, col, -1), axis=1)
    next_f = np.minimum.accumulate(np.where(present, col, n_frames)[:, ::-1], axis=1)[:, ::-1]
    has_prev, has_next = prev_f >= 0, next_f < n_frames
    missing = ~present
    t_cell = t[col]
    dt_prev = np.where(has_prev, t_cell - t[np.clip(prev_f, 0, n_frames - 1)], np.inf)
    dt_next = np.where(has_next, t[np.clip(next_f, 0, n_frames - 1)] - t_cell, np.inf)
    interp = missing & has_prev & has_next
    extrap_fwd = missing & has_prev & ~has_next & (dt_prev <= cfg.max_extrapolate_s + 1e-9)
    extrap_back = missing & ~has_prev & has_next & (dt_next <= cfg.max_extrapolate_s + 1e-9)
    fill = interp | extrap_fwd | extrap_back
    if not fill.any():
        return list(boxes_per_frame), own_uncertainty
    ti, fi = np.nonzero(fill)
    row_prev = table[ti, np.clip(prev_f[ti, fi], 0, n_frames - 1)]
    row_next = table[ti, np.clip(next_f[ti, fi], 0, n_frames - 1)]
    is_interp = interp[ti, fi]
    is_fwd = extrap_fwd[ti, fi]
    # The box the new one is built from: the earlier one, except before a track's start.
    base = np.where(is_interp | is_fwd, row_prev, row_next)
    center = all_boxes.center_m[base].copy()
    yaw = all_boxes.yaw_rad[base].copy()
    dtp, dtn = dt_prev[ti, fi], dt_next[ti, fi]
    # Interpolation.
    with np.errstate(invalid="ignore", divide="ignore"):
        alpha = np.where(is_interp, dtp / (dtp + dtn), 0.0)
    c0, c1 = all_boxes.center_m[row_prev], all_boxes.center_m[row_next]
    center = np.where(is_interp[:, None], c0 + alpha[:, None] * (c1 - c0), center)
    dyaw = wrap_angle(all_boxes.yaw_rad[row_next] - all_boxes.yaw_rad[row_prev])
    yaw = np.where(is_interp, wrap_angle(all_boxes.yaw_rad[row_prev] + alpha * dyaw), yaw)
    # Extrapolation along the velocity (signed time from the base box).
    vel = np.nan_to_num(all_boxes.velocity_mps[base])
    dt_signed = np.where(is_fwd, dtp, np.where(is_interp, 0.0, -dtn))
    center[:, :2] += vel * dt_signed[:, None]
    uncertainty = np.minimum(cfg.growth_mps * np.minimum(dtp, dtn), cfg.max_uncertainty_m)
    added = Boxes3D(
        center_m=center,
        size_wlh_m=all_boxes.size_wlh_m[base],
        yaw_rad=yaw,
        velocity_mps=all_boxes.velocity_mps[base],
        label=all_boxes.label[base],
        score=all_boxes.score[base],
        track_id=all_boxes.track_id[base],
        frame=all_boxes.frame,
    )
    out_boxes, out_unc = [], []
    by_frame = np.argsort(fi, kind="stable")
    splits = np.searchsorted(fi[by_frame], np.arange(n_frames + 1))
    for f in range(n_frames):  # assembling per frame; the work above is vectorized
        sel = by_frame[splits[f] : splits[f + 1]]
        out_boxes.append(Boxes3D.concatenate([boxes_per_frame[f], added[sel]]))
        out_unc.append(np.concatenate([own_uncertainty[f], uncertainty[sel]]))
    return out_boxes, out_unc
