"""Tracks carried to the keyframes where the LiDAR still sees them and the detector did not.

A detector that clusters single sweeps loses a parked car as the ego drives away from it (a car
at 40 m leaves a handful of returns, too few for a cluster) or before it comes near. Once the
whole clip has placed a static object (one pose for the track), its returns can be looked for
in every other keyframe: where the keyframe sweep still holds enough returns inside that box,
the object is observed there, by the LiDAR rather than by the detector. The track is extended
keyframe by keyframe outwards from its span while this holds, and stops at the first keyframe
where it does not (the object hidden, out of range, or gone: a parked car that drives off), or
where another kept track's box already stands (the same object under another track).

A moving track is carried the same way from each end of its span at its velocity there, for at
most ``max_moving_s`` seconds: the box must hold the returns where the constant-velocity path
puts it, and the error of that path grows with the time extrapolated.
"""

from __future__ import annotations

import numpy as np

from autolabel.boxes import Boxes3D
from autolabel.refine.points import KeyframeReturns, keyframes_evidence
from autolabel.refine.track_table import clip_boxes, frame_sets


def extension_frames(ok: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """(K, F) bool: the keyframes each of K tracks is extended to, outwards from its span
    ``[first, last]`` (keyframe indices), over the contiguous run of keyframes where ``ok``
    (K, F) holds next to the span on either side."""
    n_tracks, n_frames = ok.shape
    frame = np.arange(n_frames)[None, :]
    before = frame < first[:, None]
    after = frame > last[:, None]
    # The nearest refusal on each side ends the run.
    last_bad_before = np.where(before & ~ok, frame, -1).max(axis=1, initial=-1)
    first_bad_after = np.where(after & ~ok, frame, n_frames).min(axis=1, initial=n_frames)
    return (before & (frame > last_bad_before[:, None])) | (
        after & (frame < first_bad_after[:, None])
    )


def extend_tracks(
    refined: list[Boxes3D],
    times_s: np.ndarray,
    static_ids: np.ndarray,
    keyframes: list[KeyframeReturns],
    min_returns: int,
    clear_m: float,
    score_factor: float,
    margin_m: float,
    max_moving_s: float,
) -> tuple[list[Boxes3D], int]:
    """``refined`` (F global-frame box sets, one per keyframe at ``times_s``, seconds) with each
    track carried to the keyframes outside its span where its box holds at least
    ``min_returns`` returns of the keyframe sweep (above the ground, in the footprint grown by
    ``margin_m``, metres) and no other box's centre lies within ``clear_m`` (metres,
    bird's-eye) of its centre; contiguous with the span (see the module docstring). A static
    track (``static_ids``) keeps its pose; a moving one is carried at the velocity of its end
    row, at most ``max_moving_s`` seconds (0: movers are not carried). Extended boxes keep the
    track's size, heading, class and velocity, with its score times ``score_factor``. Returns
    the sets (sorted by track id in each keyframe) and the number of boxes added.

    Args:
        refined: the refined tracks (one box per keyframe of each track's span).
        static_ids: track ids of the static tracks among them.
        keyframes: the clip's keyframe returns (``PointEvidence.keyframes``), one per keyframe.
    """
    n_frames = len(refined)
    if len(keyframes) != n_frames:
        raise ValueError(f"extend_tracks: {len(keyframes)} keyframes for {n_frames} sets")
    times = np.asarray(times_s, dtype=np.float64)
    boxes, frame_of = clip_boxes(refined)
    if len(boxes) == 0:
        return refined, 0
    order = np.lexsort((frame_of, boxes.track_id))
    ids, start = np.unique(boxes.track_id[order], return_index=True)
    first_row = order[start]
    last_row = order[np.append(start[1:], len(order)) - 1]
    first, last = frame_of[first_row], frame_of[last_row]
    static = np.isin(ids, static_ids)
    reach_s = np.where(static, np.inf, max_moving_s)

    # Candidates: each track's box at every keyframe outside its span that its reach allows,
    # moved from the nearer end of its span at that end's velocity.
    frame = np.arange(n_frames)[None, :]
    before = frame < first[:, None]
    dt_before = times[None, :] - times[first][:, None]
    dt_after = times[None, :] - times[last][:, None]
    reach = np.where(before, -dt_before, dt_after) <= reach_s[:, None]
    k, f = np.nonzero((before | (frame > last[:, None])) & reach)
    if len(k) == 0:
        return refined, 0
    order = np.argsort(f, kind="stable")
    k, f = k[order], f[order]
    end_row = np.where(before[k, f], first_row[k], last_row[k])
    pose = boxes[end_row]
    dt = np.where(before[k, f], dt_before[k, f], dt_after[k, f])
    velocity = np.nan_to_num(pose.velocity_mps.astype(np.float64))
    pose.center_m = pose.center_m.copy()
    pose.center_m[:, :2] = np.round(pose.center_m[:, :2] + velocity * dt[:, None], 6)
    bounds = np.searchsorted(f, np.arange(n_frames + 1))
    candidates = [pose[bounds[j] : bounds[j + 1]] for j in range(n_frames)]
    count = keyframes_evidence(keyframes, candidates, margin_m).count

    # Another box already there: the object under another track (or a neighbour too close).
    clear = np.ones(len(k), bool)
    for j in range(n_frames):
        here, others = candidates[j], refined[j]
        if len(here) == 0 or len(others) == 0:
            continue
        d = np.linalg.norm(here.center_m[:, None, :2] - others.center_m[None, :, :2], axis=2)
        clear[bounds[j] : bounds[j + 1]] = ~np.any(d < clear_m, axis=1)

    ok = np.zeros((len(ids), n_frames), bool)
    ok[k, f] = (count >= min_returns) & clear
    extend = extension_frames(ok, first, last)
    take = extend[k, f]
    if not np.any(take):
        return refined, 0
    added, ef = pose[take], f[take]
    added.score = (added.score * score_factor).astype(added.score.dtype)
    merged = Boxes3D.concatenate([boxes, added])
    return frame_sets(merged, np.concatenate([frame_of, ef]), n_frames), len(ef)


__all__ = ["extend_tracks", "extension_frames"]
