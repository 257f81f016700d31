"""Which refined boxes the tracker observed, and how long a gap the refinement filled elsewhere.

The refine stage gives a track a box at every keyframe of its span; keyframes where the tracker
had none are filled in by the smoother. A row inside a short gap (an object occluded for a
keyframe) is as sure as its neighbours; one inside a long gap is the smoother's guess, and may be
the product of a coasting track that joined a false positive to a later object.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from autolabel.attributes import ObjectAttributes
from autolabel.boxes import Boxes3D
from autolabel.refine.track_table import clip_boxes


def filled_gap(attrs: ObjectAttributes, observed_tracks: Sequence[Boxes3D]) -> np.ndarray:
    """(N,) int16 per attribute row: 0 where ``observed_tracks[frame]`` holds the row's track,
    otherwise the number of consecutive rows of its track, in frame order, that the tracker did
    not observe around this one (the length of the filled gap it lies in).

    Args:
        attrs: the refined tracks' attributes (each track's rows cover consecutive keyframes).
        observed_tracks: F box sets, the tracker's output before refinement.
    """
    if len(attrs) == 0:
        return np.zeros(0, np.int16)
    seen, frame_of = clip_boxes(observed_tracks)
    rows = attrs.row_of(frame_of, seen.track_id)
    observed = np.zeros(len(attrs), bool)
    observed[rows[rows >= 0]] = True
    tracks = np.asarray(attrs.track_id, dtype=np.int64)
    order = np.lexsort((attrs.frame_index, tracks))
    obs_sorted, track_sorted = observed[order], tracks[order]
    new_run = np.ones(len(order), bool)
    new_run[1:] = (track_sorted[1:] != track_sorted[:-1]) | (obs_sorted[1:] != obs_sorted[:-1])
    run = np.cumsum(new_run) - 1
    gap = np.zeros(len(order), np.int16)
    gap[order] = np.where(obs_sorted, 0, np.bincount(run)[run])
    return gap
