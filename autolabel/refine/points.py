"""LiDAR returns of every tracked box over a clip: the evidence the refinement accumulates.

Per keyframe: the keyframe sweep in the ego frame, its ground (the ``lidar`` detector's ground
model) and the returns above it; each tracked box takes the returns inside its footprint (grown
by ``margin_m``) between the ground and its top (plus ``TOP_MARGIN_M``). A return is kept as
(box, local x along the box's length, local y, height above ground), so a track's returns from
every keyframe can be stacked in the object's own frame. On request, the returns of the column
above each box (up to ``above_m`` higher) are kept apart: what stands over the box is not the
object, but tells a wall (it goes on up) from a car (open sky or a canopy above).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numba
import numpy as np

from autolabel.boxes import Boxes3D
from autolabel.clip import Clip

#: Returns closer than this to the ground are ground.
GROUND_CLEARANCE_M = 0.25
#: Ground model of the ``lidar`` detector: range, cell, bound of the local offset (metres).
GROUND_RANGE_M, GROUND_CELL_M, GROUND_MAX_OFFSET_M = 60.0, 1.0, 0.3
#: A box takes the returns up to this much above its top (its top is a quantile of detected
#: heights, and the detector's boxes may stop short of the object's roof).
TOP_MARGIN_M = 0.3


@dataclass
class KeyframeReturns:
    """One keyframe's returns above the ground, kept so that boxes drawn later (the refined
    tracks') take their returns without reading the sweep and fitting the ground again.

    Attributes:
        points_ego: (M, 3) returns above the ground, ego frame, metres.
        height_m: (M,) their height above the ground, metres.
        ground: the keyframe's ground model (``detectors.lidar_geometric.GroundModel``).
        ego_SE3_global: the transform of global-frame boxes into this keyframe's ego frame.
    """

    points_ego: np.ndarray
    height_m: np.ndarray
    ground: object
    ego_SE3_global: object


@dataclass
class PointEvidence:
    """The returns of N boxes (``Boxes3D.concatenate(tracks)`` order).

    Attributes:
        box: (P,) index of the box each return lies in.
        local_xyh_m: (P, 3) the return in its box's frame: along the length, along the width
            (metres from the box centre), height above the ground.
        count: (N,) returns per box.
        range_m: (N,) distance of each box from the LiDAR, metres (returns thin out with it).
        keyframes: the clip's keyframe returns they were taken from (one per keyframe; None
            where the evidence was not gathered from a clip), for :func:`boxes_evidence`.
        margin_m: the margin the footprints were grown by.
        above_box, above_local_xyh_m: (Q,) box and (Q, 3) local position (as ``box`` and
            ``local_xyh_m``) of the returns in the column over each box's footprint (grown by
            ``margin_m``) from its top (plus ``TOP_MARGIN_M``) up to ``above_m`` higher; empty
            where ``above_m`` is 0.
        above_m: the height of that column, metres.
    """

    box: np.ndarray
    local_xyh_m: np.ndarray
    count: np.ndarray
    range_m: np.ndarray
    keyframes: list[KeyframeReturns] | None = None
    margin_m: float = 0.3
    above_box: np.ndarray | None = None
    above_local_xyh_m: np.ndarray | None = None
    above_m: float = 0.0


@numba.njit(cache=True)
def _inside(points, height, centers, yaws, half_lw, top, margin):
    """(box, return) pairs with the return inside the grown footprint and below the top."""
    out_box = []
    out_pt = []
    nb = centers.shape[0]
    for b in range(nb):
        c, s = np.cos(yaws[b]), np.sin(yaws[b])
        reach = np.sqrt(half_lw[b, 0] ** 2 + half_lw[b, 1] ** 2) + margin
        for p in range(points.shape[0]):
            dx = points[p, 0] - centers[b, 0]
            dy = points[p, 1] - centers[b, 1]
            if abs(dx) > reach or abs(dy) > reach:
                continue
            lx = c * dx + s * dy
            ly = -s * dx + c * dy
            if abs(lx) <= half_lw[b, 0] + margin and abs(ly) <= half_lw[b, 1] + margin:
                if height[p] <= top[b]:
                    out_box.append(b)
                    out_pt.append(p)
    return np.array(out_box, dtype=np.int64), np.array(out_pt, dtype=np.int64)


def keyframe_returns(points_ego: np.ndarray, ego_SE3_global) -> KeyframeReturns:
    """The returns of ``points_ego`` (P, 3) above the ground (the ``lidar`` detector's ground
    model) and that model."""
    from detectors.lidar_geometric import estimate_ground

    points_ego = np.asarray(points_ego, dtype=np.float64).reshape(-1, 3)
    ground = estimate_ground(points_ego, GROUND_RANGE_M, GROUND_CELL_M, GROUND_MAX_OFFSET_M)
    height = points_ego[:, 2] - ground.height_m(points_ego[:, :2])
    above = height > GROUND_CLEARANCE_M
    return KeyframeReturns(
        np.ascontiguousarray(points_ego[above]), height[above], ground, ego_SE3_global
    )


def box_returns(
    keyframe: KeyframeReturns, boxes_ego: Boxes3D, margin_m: float, above_m: float = 0.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The returns of ``keyframe`` inside each ego-frame box: (M,) box index, (M, 3) local
    (x along the length, y along the width, height above ground), and (M,) bool: the return
    lies in the column above the box (higher than its top plus ``TOP_MARGIN_M``, by at most
    ``above_m``) rather than in the box."""
    pts, h, ground = keyframe.points_ego, keyframe.height_m, keyframe.ground
    if len(pts) == 0 or len(boxes_ego) == 0:
        return np.zeros(0, np.int64), np.zeros((0, 3)), np.zeros(0, bool)
    box_ground = ground.height_m(boxes_ego.center_m[:, :2])
    top = boxes_ego.center_m[:, 2] + boxes_ego.size_wlh_m[:, 2] / 2 - box_ground + TOP_MARGIN_M
    half_lw = np.ascontiguousarray(boxes_ego.size_wlh_m[:, [1, 0]] / 2)
    box, p = _inside(
        pts,
        h,
        np.ascontiguousarray(boxes_ego.center_m[:, :2]),
        boxes_ego.yaw_rad,
        half_lw,
        top + above_m,
        float(margin_m),
    )
    d = pts[p, :2] - boxes_ego.center_m[box, :2]
    c, s = np.cos(boxes_ego.yaw_rad[box]), np.sin(boxes_ego.yaw_rad[box])
    local = np.column_stack([c * d[:, 0] + s * d[:, 1], -s * d[:, 0] + c * d[:, 1], h[p]])
    return box, local, h[p] > top[box]


def keyframes_evidence(
    keyframes: list[KeyframeReturns],
    tracks: Sequence[Boxes3D],
    margin_m: float,
    above_m: float = 0.0,
) -> PointEvidence:
    """The returns of every global-frame box of ``tracks`` (one set per keyframe), and those of
    the ``above_m`` high column over each box."""
    boxes_all, counts_box, ranges, local_all, above_all = [], [], [], [], []
    offset = 0
    for keyframe, boxes in zip(keyframes, tracks, strict=True):
        n = len(boxes)
        if n:
            boxes_ego = boxes.transform(keyframe.ego_SE3_global, "ego", "global")
            box, local, above = box_returns(keyframe, boxes_ego, margin_m, above_m)
            boxes_all.append(box + offset)
            local_all.append(local)
            above_all.append(above)
            counts_box.append(np.bincount(box[~above], minlength=n))
            ranges.append(np.hypot(boxes_ego.center_m[:, 0], boxes_ego.center_m[:, 1]))
        offset += n
    if not boxes_all:
        return PointEvidence(np.zeros(0, np.int64), np.zeros((0, 3)), np.zeros(0, np.int64),
                             np.zeros(0), keyframes, margin_m, np.zeros(0, np.int64),
                             np.zeros((0, 3)), above_m)  # fmt: skip
    box, local, above = (np.concatenate(a) for a in (boxes_all, local_all, above_all))
    return PointEvidence(
        box[~above],
        local[~above],
        np.concatenate(counts_box),
        np.concatenate(ranges),
        keyframes,
        margin_m,
        box[above],
        local[above],
        above_m,
    )


def boxes_evidence(
    evidence: PointEvidence, tracks: Sequence[Boxes3D], above_m: float = 0.0
) -> PointEvidence | None:
    """The returns of other boxes of the same clip (``tracks``: one global-frame set per
    keyframe, as the refined tracks), from the keyframe returns ``evidence`` kept, with its
    margin (and the ``above_m`` high column over each box); None where it kept none."""
    if evidence.keyframes is None:
        return None
    return keyframes_evidence(evidence.keyframes, tracks, evidence.margin_m, above_m)


def gather_point_evidence(
    clip: Clip, tracks: Sequence[Boxes3D], margin_m: float = 0.3
) -> PointEvidence:
    """The keyframe-sweep returns of every tracked box of a clip (see the module docstring)."""
    from detectors.lidar_points import keyframe_points_ego

    # Every keyframe, boxes or not: the refined tracks fill keyframes inside their spans.
    keyframes = [
        keyframe_returns(keyframe_points_ego(frame, 1)[0], frame.global_SE3_ego.inverse())
        for frame in clip.frames
    ]
    return keyframes_evidence(keyframes, tracks, margin_m)
