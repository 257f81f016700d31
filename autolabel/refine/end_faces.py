"""Two-wheeler tracks that are cars seen end-on.

A car driving ahead of the ego or towards it shows the LiDAR little but its back or front: a
line of returns about as long as a motorcycle (1.6-2.1 m) and as high. A size-based detector
boxes that line as a two-wheeler lying along it, centred on the face (about 2 m short of the
car's centre, too far for a match), and the refinement then turns the box along the direction
of travel. Across its direction of travel a two-wheeler's returns spread no wider than its
handlebars and rider (under 1 m); a car's back or front spans the car's width (1.6-2 m) in
one unbroken surface. So a moving two-wheeler track whose returns, in a box widened across
its travel, spread that wide without a break is a car, whose body lies behind the face, away
from the sensor.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from autolabel.boxes import Boxes3D
from autolabel.refine.duplicates import inside_footprint
from autolabel.refine.points import KeyframeReturns, keyframes_evidence
from autolabel.refine.track_table import frame_rows, frame_sets

#: Width of the box the returns are taken from (metres, centred on the track's box): wider than
#: any car, narrower than a car and a lane-splitting rider beside it.
WIDENED_M = 2.6
#: A box with fewer returns than this has no width to measure.
MIN_BOX_RETURNS = 5
#: A box is wide only where its returns leave no gap wider than this across (metres): a rider
#: and the side of a car in the next lane are two objects, a car's back is one surface.
MAX_GAP_M = 0.3
#: A track is judged on at least this many boxes with returns, of which at least this share
#: must be wide.
MIN_BOXES, MIN_WIDE_SHARE = 3, 0.5


def across_spread(box: np.ndarray, across_m: np.ndarray, n_boxes: int) -> tuple[np.ndarray, ...]:
    """Per box: (N,) returns, the 5-95 % spread of their across positions (metres, NaN
    without returns) and the widest gap between neighbouring across positions within that
    spread (metres).

    ``box``: (P,) box of each return; ``across_m``: (P,) its position across the box.
    """
    count = np.bincount(box, minlength=n_boxes)
    spread = np.full(n_boxes, np.nan)
    gap = np.zeros(n_boxes)
    if len(box) == 0:
        return count, spread, gap
    order = np.lexsort((across_m, box))
    b, y = box[order], across_m[order]
    start = np.concatenate([[0], np.cumsum(count)[:-1]])
    has = count > 0
    # Nearest-rank quantiles of each box's sorted positions.
    lo_i = start + np.floor(0.05 * (count - 1)).astype(np.int64)
    hi_i = start + np.ceil(0.95 * (count - 1)).astype(np.int64)
    lo, hi = np.full(n_boxes, np.nan), np.full(n_boxes, np.nan)
    lo[has], hi[has] = y[lo_i[has]], y[hi_i[has]]
    spread[has] = hi[has] - lo[has]
    # Gaps between sorted neighbours of one box, both inside its spread.
    same = b[1:] == b[:-1]
    inside = (y[:-1] >= lo[b[:-1]]) & (y[1:] <= hi[b[1:]])
    step = np.where(same & inside, y[1:] - y[:-1], 0.0)
    np.maximum.at(gap, b[:-1], step)
    return count, spread, gap


def end_on_cars(
    boxes: Boxes3D,
    frame_of: np.ndarray,
    keyframes: Sequence[KeyframeReturns],
    min_width_m: float,
) -> np.ndarray:
    """Track ids among ``boxes`` that are cars seen end-on (see the module docstring).

    Args:
        boxes: (N,) refined boxes (global frame, one size per track) of the moving two-wheeler
            tracks to judge, each with its heading along its travel.
        frame_of: (N,) keyframe of each box (an index into ``keyframes``).
        keyframes: the clip's keyframe returns (``PointEvidence.keyframes``).
        min_width_m: a box is wide where its returns spread at least this much across it.

    Returns:
        The sorted unique ids of the tracks at least ``MIN_WIDE_SHARE`` of whose boxes with
        returns (at least ``MIN_BOXES`` of them) are wide.
    """
    if len(boxes) == 0:
        return np.empty(0, boxes.track_id.dtype)
    widened = boxes[np.arange(len(boxes))]
    size = widened.size_wlh_m.copy()
    size[:, 0] = np.maximum(size[:, 0], WIDENED_M)
    widened.size_wlh_m = size
    sets = frame_sets(widened, frame_of, len(keyframes))
    order = np.lexsort((boxes.track_id, frame_of))  # frame_sets' order
    evidence = keyframes_evidence(list(keyframes), sets, 0.0)
    # Evidence boxes are in frame order; back to the order of ``boxes``.
    box = order[evidence.box]
    count, spread, gap = across_spread(box, evidence.local_xyh_m[:, 1], len(boxes))
    measured = count >= MIN_BOX_RETURNS
    wide = measured & (spread >= min_width_m) & (gap <= MAX_GAP_M)
    ids, col = np.unique(boxes.track_id, return_inverse=True)
    n_measured = np.bincount(col, weights=measured, minlength=len(ids))
    n_wide = np.bincount(col, weights=wide, minlength=len(ids))
    return ids[(n_measured >= MIN_BOXES) & (n_wide >= MIN_WIDE_SHARE * n_measured)]


def covered_rows(
    boxes: Boxes3D, frame_of: np.ndarray, judged: np.ndarray, hosts: np.ndarray
) -> np.ndarray:
    """(N,) bool: the ``judged`` boxes that share a keyframe with a ``hosts`` box with one of
    the two centres inside the other's footprint (one object boxed twice).

    Args:
        boxes: (N,) refined boxes of a clip (global frame).
        frame_of: (N,) keyframe of each box.
        judged, hosts: (N,) bool, the boxes to test and those they may duplicate.
    """
    out = np.zeros(len(boxes), bool)
    xy, yaw, half = boxes.center_m[:, :2], boxes.yaw_rad, boxes.size_wlh_m[:, [1, 0]] / 2
    for rows in frame_rows(frame_of):  # keyframes (tens per clip), vectorised inside
        j, h = rows[judged[rows]], rows[hosts[rows]]
        if len(j) == 0 or len(h) == 0:
            continue
        rel = xy[j, None, :] - xy[None, h, :]
        # The judged centre inside a host's footprint, or a host's centre inside the judged's.
        hit = inside_footprint(rel, yaw[h][None, :], half[h][None, :, :])
        hit |= inside_footprint(-rel, yaw[j][:, None], half[j][:, None, :])
        out[j] = hit.any(axis=1)
    return out
