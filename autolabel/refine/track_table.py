"""A clip's tracks as one table: a row per (track, keyframe) over each track's observed span.

Rows are sorted by (track, time). Keyframes a track missed between its first and last observation
get a row with ``observed`` False (their values are filled by the refinement); nothing is added
before a track's first or after its last observation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from autolabel.boxes import Boxes3D


@dataclass
class TrackTable:
    """Rows of every track's span, sorted by (track, frame).

    Attributes:
        track_start: (T + 1,) row offsets of each track.
        track_id: (T,) id of each track.
        frame_index: (K,) keyframe of each row.
        observed: (K,) bool, the tracker gave a box at this row.
        box_row: (K,) index of the row's box in the clip's concatenated tracks (-1 where not
            observed).
        boxes: (K,) the rows' boxes (zeros/NaN velocity where not observed), global frame.
    """

    track_start: np.ndarray
    track_id: np.ndarray
    frame_index: np.ndarray
    observed: np.ndarray
    box_row: np.ndarray
    boxes: Boxes3D

    @property
    def n_tracks(self) -> int:
        return len(self.track_id)

    @property
    def track_of_row(self) -> np.ndarray:
        """(K,) track position (0..T-1) of each row."""
        return np.repeat(np.arange(self.n_tracks), np.diff(self.track_start))

    def per_track_sum(self, values: np.ndarray) -> np.ndarray:
        """(T, ...) sums of row values per track."""
        return np.add.reduceat(values, self.track_start[:-1], axis=0) if len(values) else values

    def per_track_count(self, mask: np.ndarray) -> np.ndarray:
        """(T,) number of rows per track where ``mask``."""
        return self.per_track_sum(mask.astype(np.int64))


def clip_boxes(tracks: Sequence[Boxes3D]) -> tuple[Boxes3D, np.ndarray]:
    """Every tracked box of the clip in one set, and (N,) the keyframe of each."""
    counts = np.array([len(b) for b in tracks], dtype=np.int64)
    return Boxes3D.concatenate(list(tracks)), np.repeat(np.arange(len(tracks)), counts)


def frame_rows(frame_of: np.ndarray) -> list[np.ndarray]:
    """Per keyframe ``0 .. frame_of.max()``, the row indices with ``frame_of == f``, in row
    order (empty for a keyframe without rows)."""
    frame_of = np.asarray(frame_of)
    order = np.argsort(frame_of, kind="stable")
    bounds = np.searchsorted(frame_of[order], np.arange(frame_of.max(initial=-1) + 2))
    return [order[bounds[f] : bounds[f + 1]] for f in range(len(bounds) - 1)]


def frame_sets(boxes: Boxes3D, frame_of: np.ndarray, n_frames: int) -> list[Boxes3D]:
    """The inverse of :func:`clip_boxes`: ``n_frames`` box sets, keyframe ``f`` holding the boxes
    with ``frame_of == f``, sorted by track id."""
    order = np.lexsort((boxes.track_id, frame_of))
    boxes, frame_of = boxes[order], np.asarray(frame_of)[order]
    bounds = np.searchsorted(frame_of, np.arange(n_frames + 1))
    return [boxes[bounds[f] : bounds[f + 1]] for f in range(n_frames)]


def build_track_table(boxes: Boxes3D, frame_of: np.ndarray) -> TrackTable:
    """The span table of tracked ``boxes`` (track_id >= 0, one box per track and keyframe)."""
    order = np.lexsort((frame_of, boxes.track_id))
    tid, frame = boxes.track_id[order], frame_of[order]
    uniq, first = np.unique(tid, return_index=True)
    last = np.append(first[1:], len(tid)) - 1
    span = frame[last] - frame[first] + 1
    track_start = np.concatenate([[0], np.cumsum(span)]).astype(np.int64)
    track_of_row = np.repeat(np.arange(len(uniq)), span)
    frame_index = frame[first][track_of_row] + (
        np.arange(track_start[-1]) - track_start[:-1][track_of_row]
    )
    row_of_box = track_start[:-1][np.searchsorted(uniq, tid)] + (
        frame - frame[first][np.searchsorted(uniq, tid)]
    )
    observed = np.zeros(track_start[-1], bool)
    observed[row_of_box] = True
    box_row = np.full(track_start[-1], -1, np.int64)
    box_row[row_of_box] = order
    # Missed rows take their track's nearest earlier observation as a placeholder.
    filled = np.maximum.accumulate(np.where(observed, np.arange(len(observed)), -1))
    src = box_row[filled]
    rows = boxes[src]
    rows.track_id = uniq[track_of_row]
    rows.velocity_mps = np.where(observed[:, None], rows.velocity_mps, np.nan)
    return TrackTable(track_start, uniq, frame_index, observed, box_row, rows)
