"""Which refined boxes the tracker observed, and how long a gap the refinement filled elsewhere.

The refine stage gives a track a box at every keyframe of its span; keyframes where the tracker
had none are filled in by the smoother. A row inside a short gap (an object occluded for a
keyframe) is as sure as its neighbours; one inside a long gap is the smoother's guess, and may be
the product of a coasting track that joined a false positive to a later object.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from autolabel.boxes import Boxes3D


def filled_gap(
    frame_index: np.ndarray, track_id: np.ndarray, observed_tracks: Sequence[Boxes3D]
) -> np.ndarray:
    """(N,) int16 per (frame, track) row: 0 where ``observed_tracks[frame]`` holds the track,
    otherwise the number of consecutive rows of its track, in frame order, that the tracker did
    not observe around this one (the length of the filled gap it lies in).

    Args:
        frame_index, track_id: (N,) the rows (each track's rows cover consecutive keyframes, as
            the refined tracks do).
        observed_tracks: F box sets, the tracker's output before refinement.
    """
    frames = np.asarray(frame_index, dtype=np.int64)
    tracks = np.asarray(track_id, dtype=np.int64)
    if len(frames) == 0:
        return np.zeros(0, np.int16)
    n_frames = max(len(observed_tracks), int(frames.max()) + 1)
    seen_frame = np.concatenate(
        [np.full(len(t), f, np.int64) for f, t in enumerate(observed_tracks)]
        + [np.zeros(0, np.int64)]
    )
    seen_track = np.concatenate([t.track_id for t in observed_tracks] + [np.zeros(0, np.int64)])
    observed = np.isin(
        tracks * n_frames + frames, seen_track.astype(np.int64) * n_frames + seen_frame
    )
    order = np.lexsort((frames, tracks))
    obs_sorted, track_sorted = observed[order], tracks[order]
    new_run = np.ones(len(order), bool)
    new_run[1:] = (track_sorted[1:] != track_sorted[:-1]) | (obs_sorted[1:] != obs_sorted[:-1])
    run = np.cumsum(new_run) - 1
    run_length = np.bincount(run)
    gap = np.zeros(len(order), np.int16)
    gap[order] = np.where(obs_sorted, 0, run_length[run])
    return gap
