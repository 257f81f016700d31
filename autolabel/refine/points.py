"""LiDAR returns of every tracked box over a clip: the evidence the refinement accumulates.

Per keyframe: the keyframe sweep in the ego frame, its ground (the ``lidar`` detector's ground
model) and the returns above it; each tracked box takes the returns inside its footprint (grown
by ``margin_m``) between the ground and its top. A return is kept as (box, local x along the
box's length, local y, height above ground), so a track's returns from every keyframe can be
stacked in the object's own frame.
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


@dataclass
class PointEvidence:
    """The returns of N boxes (``Boxes3D.concatenate(tracks)`` order).

    Attributes:
        box: (P,) index of the box each return lies in.
        local_xyh_m: (P, 3) the return in its box's frame: along the length, along the width
            (metres from the box centre), height above the ground.
        count: (N,) returns per box.
        range_m: (N,) distance of each box from the LiDAR, metres (returns thin out with it).
    """

    box: np.ndarray
    local_xyh_m: np.ndarray
    count: np.ndarray
    range_m: np.ndarray


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


def frame_returns(
    points_ego: np.ndarray, boxes_ego: Boxes3D, margin_m: float
) -> tuple[np.ndarray, np.ndarray]:
    """Returns above the ground inside each ego-frame box: (M,) box index, (M, 3) local
    (x along the length, y along the width, height above ground)."""
    from detectors.lidar_geometric import estimate_ground

    if len(points_ego) == 0 or len(boxes_ego) == 0:
        return np.zeros(0, np.int64), np.zeros((0, 3))
    ground = estimate_ground(points_ego, GROUND_RANGE_M, GROUND_CELL_M, GROUND_MAX_OFFSET_M)
    height = points_ego[:, 2] - ground.height_m(points_ego[:, :2])
    above = height > GROUND_CLEARANCE_M
    pts, h = np.ascontiguousarray(points_ego[above]), height[above]
    box_ground = ground.height_m(boxes_ego.center_m[:, :2])
    top = boxes_ego.center_m[:, 2] + boxes_ego.size_wlh_m[:, 2] / 2 - box_ground + 0.3
    half_lw = np.ascontiguousarray(boxes_ego.size_wlh_m[:, [1, 0]] / 2)
    box, p = _inside(
        pts,
        h,
        np.ascontiguousarray(boxes_ego.center_m[:, :2]),
        boxes_ego.yaw_rad,
        half_lw,
        top,
        float(margin_m),
    )
    d = pts[p, :2] - boxes_ego.center_m[box, :2]
    c, s = np.cos(boxes_ego.yaw_rad[box]), np.sin(boxes_ego.yaw_rad[box])
    local = np.column_stack([c * d[:, 0] + s * d[:, 1], -s * d[:, 0] + c * d[:, 1], h[p]])
    return box, local


def gather_point_evidence(
    clip: Clip, tracks: Sequence[Boxes3D], margin_m: float = 0.3
) -> PointEvidence:
    """The keyframe-sweep returns of every tracked box of a clip (see the module docstring)."""
    from detectors.lidar_points import keyframe_points_ego

    boxes_all, counts_box, ranges, local_all = [], [], [], []
    offset = 0
    for frame, boxes in zip(clip.frames, tracks, strict=True):
        n = len(boxes)
        if n:
            points_ego, _ = keyframe_points_ego(frame, 1)
            boxes_ego = boxes.transform(frame.global_SE3_ego.inverse(), "ego", "global")
            box, local = frame_returns(points_ego, boxes_ego, margin_m)
            boxes_all.append(box + offset)
            local_all.append(local)
            counts_box.append(np.bincount(box, minlength=n))
            ranges.append(np.hypot(boxes_ego.center_m[:, 0], boxes_ego.center_m[:, 1]))
        offset += n
    if not boxes_all:
        return PointEvidence(np.zeros(0, np.int64), np.zeros((0, 3)), np.zeros(0, np.int64),
                             np.zeros(0))  # fmt: skip
    return PointEvidence(
        np.concatenate(boxes_all),
        np.concatenate(local_all),
        np.concatenate(counts_box),
        np.concatenate(ranges),
    )
