"""Tracked 3D boxes seen from the cameras: one row per (keyframe, camera, object) candidate view.

For every keyframe and camera, each tracked box is moved to the camera's capture time (by its
track velocity; nuScenes cameras fire up to ~50 ms away from the LiDAR sweep), projected with
near-plane clipping (``calib.projection.box_2d_from_corners``) through the ego pose of the image's
own timestamp, and kept as a candidate when enough of it lands in the image. Each candidate also
carries the object's own LiDAR points (the keyframe sweep's points inside its 3D box, moved the
same way) projected into the image: the prompts of the segmenters.

The loops run over keyframes and cameras (images), never over objects; everything inside is
vectorized over the objects and points of one image.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numba
import numpy as np

from autolabel.boxes import Boxes3D
from autolabel.clip import Clip
from autolabel.config import SegmentOptions
from autolabel.nuscenes_reader import aggregate_sweeps
from autolabel.sweep_timing import SweepTiming
from calib.bearing import bearing_deg
from calib.projection import (
    NEAR_PLANE_M,
    box_2d_from_corners,
    box_silhouette_uv,
    clip_boxes_2d,
    in_image_fraction,
    project_points,
    volume_in_image_fraction,
)
from calib.se3 import SE3


@dataclass
class CameraViews:
    """Candidate views of one clip, rows sorted by (frame, camera, track id), as parallel arrays.

    Attributes:
        channels: camera channels; ``camera`` indexes them.
        image_size_px: (C, 2) int (width, height) of each camera.
        frame_index: (V,) int64 keyframe of each view.
        camera: (V,) int16 index into ``channels``.
        track_id: (V,) int64; label: (V,) int16 (``DETECTION_CLASSES``).
        box_px: (V, 4) unclipped projected box [u_min, v_min, u_max, v_max], pixels.
        box_clipped_px: (V, 4) the same, clipped to the image.
        in_image_fraction: (V,) fraction of the unclipped box's area inside the image.
        volume_in_image: (V,) share of the 3D box's volume in the camera's view
            (``calib.projection.volume_in_image_fraction``).
        depth_m: (V,) box centre's depth along the camera's optical axis, metres.
        near_depth_m: (V,) depth of the box's nearest corner (at least the near plane), metres.
        lidar_points: (V,) int64 LiDAR points of the keyframe sweep inside the 3D box.
        seed_offsets: (V + 1,) int64; the seeds of view i are ``seed_uv[seed_offsets[i]:
            seed_offsets[i + 1]]``.
        seed_uv: (S, 2) float32 the object's own LiDAR returns (``seed_sweeps`` sweeps, each
            tested against the box where the object was at that sweep's time) moved to the
            image's capture time and projected with the image's own pose, pixels.
        hull_offsets: (V + 1,) int64; the hull of view i is ``hull_uv[hull_offsets[i]:
            hull_offsets[i + 1]]``.
        hull_uv: (H, 2) float32 vertices of each projected 3D box's exact silhouette (convex
            hull, near-plane clipped) clipped to the image, pixels; empty when degenerate.
        scene_image_key: (I,) int64 ``image_key`` of each image with views (sorted).
        scene_offsets: (I + 1,) int64; the scene returns of image j are ``scene_uvd[
            scene_offsets[j]:scene_offsets[j + 1]]``.
        scene_uvd: (Q, 3) float32 u, v (pixels), depth (metres) of the keyframe sweep's returns
            at least ``occluder_min_height_m`` above the ego ground plane, each moved with the
            tracked object it belongs to: what the LiDAR saw that can hide an object.
    """

    channels: tuple[str, ...]
    image_size_px: np.ndarray
    frame_index: np.ndarray
    camera: np.ndarray
    track_id: np.ndarray
    label: np.ndarray
    box_px: np.ndarray
    box_clipped_px: np.ndarray
    in_image_fraction: np.ndarray
    volume_in_image: np.ndarray
    depth_m: np.ndarray
    near_depth_m: np.ndarray
    lidar_points: np.ndarray
    seed_offsets: np.ndarray
    seed_uv: np.ndarray
    hull_offsets: np.ndarray
    hull_uv: np.ndarray
    scene_image_key: np.ndarray
    scene_offsets: np.ndarray
    scene_uvd: np.ndarray

    def __len__(self) -> int:
        return len(self.frame_index)

    @property
    def image_key(self) -> np.ndarray:
        """(V,) int64 id of each view's image, ``frame_index * C + camera`` (sorted)."""
        return self.frame_index * len(self.channels) + self.camera

    def image_rows(self) -> list[tuple[int, int, np.ndarray]]:
        """(frame index, camera index, view rows) of every image that has views, in row order."""
        keys = self.image_key
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else []
        bounds = [*list(starts), len(keys)]
        c = len(self.channels)
        return [
            (int(keys[a] // c), int(keys[a] % c), np.arange(a, b))
            for a, b in zip(bounds[:-1], bounds[1:], strict=True)
        ]

    def seeds_of(self, rows: np.ndarray) -> list[np.ndarray]:
        """The (K_i, 2) seed pixels of each view in ``rows``."""
        return [self.seed_uv[self.seed_offsets[i] : self.seed_offsets[i + 1]] for i in rows]

    def hulls_of(self, rows: np.ndarray) -> list[np.ndarray]:
        """The (K_i, 2) image-clipped hull polygon of each view in ``rows``."""
        return [self.hull_uv[self.hull_offsets[i] : self.hull_offsets[i + 1]] for i in rows]

    def scene_of(self, image_key: int) -> np.ndarray:
        """(Q, 3) u, v, depth of the scene's LiDAR returns in image ``image_key``."""
        j = int(np.searchsorted(self.scene_image_key, image_key))
        if j == len(self.scene_image_key) or self.scene_image_key[j] != image_key:
            return np.zeros((0, 3), np.float32)
        return self.scene_uvd[self.scene_offsets[j] : self.scene_offsets[j + 1]]


#: Side of the grid cells that pair LiDAR returns with the boxes near them, metres (about a
#: pedestrian's size: a car's square spans some 50 cells, a return meets few boxes' squares).
PAIR_CELL_M = 1.0


def _cell_keys(cell_x: np.ndarray, cell_y: np.ndarray) -> np.ndarray:
    """One int64 key per grid cell: x cell in the high 32 bits, y cell (offset to >= 0) low."""
    return (cell_x << 32) + (cell_y + (1 << 31))


def pairs_in_squares(
    points_xy: np.ndarray, centres_xy: np.ndarray, radius_m: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(owner, point) pairs of each (N, 2) centre with the (P, 2) points in the grid cells that
    its square of half-side ``radius_m`` meets (a superset of the points within ``radius_m``).

    A sort-merge join of cell keys: every box's cells are listed, sorted, and each point's cell
    looked up there, so the cost is the P lookups plus the pairs, never P x N.
    """
    lo = np.floor((centres_xy - radius_m[:, None]) / PAIR_CELL_M).astype(np.int64)
    span = np.floor((centres_xy + radius_m[:, None]) / PAIR_CELL_M).astype(np.int64) - lo + 1
    counts = span[:, 0] * span[:, 1]
    box = np.repeat(np.arange(len(centres_xy), dtype=np.int64), counts)
    k = np.arange(counts.sum(), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    key = _cell_keys(lo[box, 0] + k // span[box, 1], lo[box, 1] + k % span[box, 1])
    order = np.argsort(key, kind="stable")
    key, box = key[order], box[order]
    cells = np.floor(points_xy / PAIR_CELL_M).astype(np.int64)
    point_key = _cell_keys(cells[:, 0], cells[:, 1])
    first = np.searchsorted(key, point_key, "left")
    hits = np.searchsorted(key, point_key, "right") - first
    point = np.repeat(np.arange(len(points_xy), dtype=np.int64), hits)
    at = np.repeat(first - np.cumsum(hits) + hits, hits) + np.arange(len(point), dtype=np.int64)
    return box[at], point


def object_points_global(
    frame_points_global: np.ndarray, boxes: Boxes3D
) -> tuple[np.ndarray, np.ndarray]:
    """The points inside each box, as (object index, point index) pairs sorted by object, then
    point (the order of ``np.nonzero(boxes.points_inside(points))``, without its (N, P) matrix).

    Candidates are the returns in the grid cells each box's circumscribed square meets in the
    xy plane (the cells of ``pairs_in_squares``); the exact test (``Boxes3D.points_inside``'s,
    boundaries included) runs on those pairs only. One numba pass over the points, with the
    boxes' cells in a dense grid over the squares' extent: a sweep of 10^5 returns met some
    10^5 candidate pairs, whose listing, test and sort in NumPy cost more than the rest of the
    views of a keyframe.

    Args:
        frame_points_global: (P, 3) LiDAR points, global frame, metres.
        boxes: N boxes in the global frame.

    Returns:
        owner: (M,) int64 box of each pair; point: (M,) int64 index into the points.
    """
    empty = np.zeros(0, np.int64)
    if len(boxes) == 0 or len(frame_points_global) == 0:
        return empty, empty
    points = np.ascontiguousarray(frame_points_global, dtype=np.float64)
    centres = np.ascontiguousarray(boxes.center_m, dtype=np.float64)
    radius = 0.5 * np.hypot(boxes.size_wlh_m[:, 0], boxes.size_wlh_m[:, 1]) + 1e-6
    lo = np.floor((centres[:, :2] - radius[:, None]) / PAIR_CELL_M).astype(np.int64)
    hi = np.floor((centres[:, :2] + radius[:, None]) / PAIR_CELL_M).astype(np.int64)
    grid_lo, grid_hi = lo.min(axis=0), hi.max(axis=0)
    if np.prod((grid_hi - grid_lo + 1).astype(np.float64)) > _MAX_GRID_CELLS:
        # Boxes spread over more than a dense grid should hold (none of a clip's keyframe):
        # the sort-merge join of the cells instead, the same pairs.
        owner, point = pairs_in_squares(points[:, :2], centres[:, :2], radius)
        if len(owner) == 0:
            return empty, empty
        inside = _inside(points[point] - centres[owner], boxes, owner)
        owner, point = owner[inside], point[inside]
        order = np.lexsort((point, owner))
        return owner[order], point[order]
    yaw = np.asarray(boxes.yaw_rad, np.float64)
    return _points_in_boxes_kernel(
        points,
        centres,
        np.cos(yaw),
        np.sin(yaw),
        0.5 * np.asarray(boxes.size_wlh_m, np.float64),
        lo,
        hi,
        grid_lo,
        grid_hi,
        PAIR_CELL_M,
    )


#: The most cells ``object_points_global``'s dense grid may have (64 MiB of int64 heads).
_MAX_GRID_CELLS = 1 << 23


def _inside(d: np.ndarray, boxes: Boxes3D, owner: np.ndarray) -> np.ndarray:
    """(M,) bool: offsets ``d`` (M, 3) from their boxes' centres inside those boxes
    (``Boxes3D.points_inside``'s test, boundaries included)."""
    c, s = np.cos(boxes.yaw_rad[owner]), np.sin(boxes.yaw_rad[owner])
    half = 0.5 * boxes.size_wlh_m[owner]
    return (
        (np.abs(c * d[:, 0] + s * d[:, 1]) <= half[:, 1])
        & (np.abs(-s * d[:, 0] + c * d[:, 1]) <= half[:, 0])
        & (np.abs(d[:, 2]) <= half[:, 2])
    )


@numba.njit(cache=True)
def _points_in_boxes_kernel(
    points, centres, cos_yaw, sin_yaw, half, lo, hi, grid_lo, grid_hi, cell_m
):
    """The kernel of ``object_points_global``: box n's cells are [lo[n], hi[n]] (x, y cell
    indices, inclusive), listed per cell of the grid [grid_lo, grid_hi]; each point is tested
    against the boxes of its cell, in ``_inside``'s float64 operations (no fused multiply-add:
    numba leaves them unfused without fastmath). Returns (owner, point) sorted by owner, then
    point."""
    n = len(centres)
    nx = grid_hi[0] - grid_lo[0] + 1
    ny = grid_hi[1] - grid_lo[1] + 1
    heads = np.zeros(nx * ny + 1, np.int64)
    for b in range(n):
        for x in range(lo[b, 0], hi[b, 0] + 1):
            for y in range(lo[b, 1], hi[b, 1] + 1):
                heads[(x - grid_lo[0]) * ny + (y - grid_lo[1]) + 1] += 1
    for k in range(nx * ny):
        heads[k + 1] += heads[k]
    cell_boxes = np.empty(heads[nx * ny], np.int64)
    fill = heads[:-1].copy()
    for b in range(n):  # ascending box order in every cell
        for x in range(lo[b, 0], hi[b, 0] + 1):
            for y in range(lo[b, 1], hi[b, 1] + 1):
                k = (x - grid_lo[0]) * ny + (y - grid_lo[1])
                cell_boxes[fill[k]] = b
                fill[k] += 1
    # Two passes over the points: count the pairs of each box, then write them in place, so
    # each box's points come out in ascending order without a sort.
    per_box = np.zeros(n + 1, np.int64)
    owner = np.empty(0, np.int64)
    point = np.empty(0, np.int64)
    at = np.empty(0, np.int64)
    for write in range(2):
        if write:
            for b in range(n):
                per_box[b + 1] += per_box[b]
            owner = np.empty(per_box[n], np.int64)
            point = np.empty(per_box[n], np.int64)
            at = per_box[:-1].copy()
        for p in range(len(points)):
            x = np.int64(np.floor(points[p, 0] / cell_m))
            y = np.int64(np.floor(points[p, 1] / cell_m))
            if x < grid_lo[0] or x > grid_hi[0] or y < grid_lo[1] or y > grid_hi[1]:
                continue
            k = (x - grid_lo[0]) * ny + (y - grid_lo[1])
            for j in range(heads[k], heads[k + 1]):
                b = cell_boxes[j]
                d0 = points[p, 0] - centres[b, 0]
                d1 = points[p, 1] - centres[b, 1]
                d2 = points[p, 2] - centres[b, 2]
                c, s = cos_yaw[b], sin_yaw[b]
                if (
                    abs(c * d0 + s * d1) <= half[b, 1]
                    and abs(-s * d0 + c * d1) <= half[b, 0]
                    and abs(d2) <= half[b, 2]
                ):
                    if write:
                        owner[at[b]] = b
                        point[at[b]] = p
                        at[b] += 1
                    else:
                        per_box[b + 1] += 1
    return owner, point


def _frame_points(
    clip: Clip, frame_index: int, sweeps: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The keyframe's sweep and the ``sweeps - 1`` before it: (P, 3) global points, metres, (P,)
    seconds from each point's sweep to the keyframe (>= 0) and (P,) height above the keyframe's
    ego ground plane, metres (ego z)."""
    frame = clip.frames[frame_index]
    points_lidar, lag_s = aggregate_sweeps(frame, sweeps)
    ego_SE3_lidar = frame.lidar.ego_SE3_lidar or frame.lidar_calibration.ego_SE3_lidar
    points_ego = ego_SE3_lidar.transform_points(points_lidar[:, :3].astype(np.float64))
    return frame.global_SE3_ego.transform_points(points_ego), lag_s, points_ego[:, 2]


def object_points_by_sweep(
    points_global: np.ndarray, lag_s: np.ndarray, boxes: Boxes3D, velocity_mps: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The points inside each box at the time of each point's own sweep.

    A moving object was ``velocity * lag`` behind its keyframe box when an earlier sweep hit it, so
    each sweep's points are tested against the boxes moved back by that much (boxes with unknown
    velocity stay put). Returns (owner, point) pairs as :func:`object_points_global`, sorted by
    owner then point.
    """
    owners, points = [], []
    for lag in np.unique(lag_s):
        idx = np.flatnonzero(lag_s == lag)
        shifted = boxes
        if lag > 0:
            center = boxes.center_m.copy()
            center[:, :2] -= velocity_mps * lag
            shifted = dataclasses.replace(boxes, center_m=center)
        owner, point = object_points_global(points_global[idx], shifted)
        owners.append(owner)
        points.append(idx[point])
    owner, point = np.concatenate(owners), np.concatenate(points)
    order = np.lexsort((point, owner))
    return owner[order], point[order]


def image_hulls(silhouette_uv: np.ndarray, width_px: int, height_px: int) -> list[np.ndarray]:
    """Each object's projected 3D box hull clipped to the image: N (K_i, 2) float32 polygons.

    ``silhouette_uv`` is ``calib.projection.box_silhouette_uv``'s (N, 20, 2) (NaN rows unused);
    a box whose hull misses the image, or is degenerate, gets a (0, 2) polygon. One OpenCV hull and
    one convex intersection per object (C calls; N is the objects of one image).
    """
    frame = np.array([[0, 0], [width_px, 0], [width_px, height_px], [0, height_px]], np.float32)
    out = []
    for points in silhouette_uv:
        points = points[np.isfinite(points).all(axis=1)].astype(np.float32)
        polygon = np.zeros((0, 2), np.float32)
        if len(points) >= 3:
            hull = cv2.convexHull(points.reshape(-1, 1, 2))
            area, clipped = cv2.intersectConvexConvex(hull, frame.reshape(-1, 1, 2))
            if area > 0 and clipped is not None:
                polygon = clipped.reshape(-1, 2).astype(np.float32)
        out.append(polygon)
    return out


#: Cells per side of ``_SceneCells``' grid at most (its test per camera is over the cells).
_SCENE_GRID = 32


class _SceneCells:
    """A keyframe's scene returns binned on a grid of the global xy plane, so that each camera
    projects only the returns of the cells its view can reach: a conservative cut (every return
    the image holds is kept, and projected with the same operations, so the same pixels), which
    leaves about a sixth of a sweep per camera instead of all of it.

    Args:
        points: (Q, 3) global-frame returns, metres.
    """

    def __init__(self, points: np.ndarray) -> None:
        self.points = points
        if len(points) == 0:
            self.cell = np.zeros(0, np.int64)
            self.centres = np.zeros((0, 3))
            self.half = np.zeros(3)
            return
        lo, hi = points.min(axis=0), points.max(axis=0)
        side = max(float((hi[:2] - lo[:2]).max()) / _SCENE_GRID, 1.0)
        ij = np.minimum(((points[:, :2] - lo[:2]) / side).astype(np.int64), _SCENE_GRID - 1)
        self.cell = ij[:, 0] * _SCENE_GRID + ij[:, 1]
        k = np.arange(_SCENE_GRID * _SCENE_GRID)
        self.centres = np.column_stack(
            [
                lo[0] + (k // _SCENE_GRID + 0.5) * side,
                lo[1] + (k % _SCENE_GRID + 0.5) * side,
                np.full(len(k), 0.5 * (lo[2] + hi[2])),
            ]
        )
        self.half = np.array([0.5 * side, 0.5 * side, 0.5 * (hi[2] - lo[2])])

    def reachable(
        self,
        intrinsic: np.ndarray,
        camera_SE3_global: SE3,
        width_px: int,
        height_px: int,
        margin_m: float,
    ) -> np.ndarray:
        """(Q,) bool: the returns of the cells that meet the camera's view (in front of it and
        projecting into the image) grown by ``margin_m``: every return that moves less than
        that and lands in the image is among them. All of them for a camera matrix whose last
        row is not (0, 0, 1)."""
        k = np.asarray(intrinsic, np.float64)
        if len(self.cell) == 0 or not np.array_equal(k[2], [0.0, 0.0, 1.0]):
            return np.ones(len(self.cell), bool)
        # In the camera frame a pixel (u, v) of the image and z > 0 mean n . p >= 0 for these
        # normals (u = K0 . p / z, v = K1 . p / z): the planes through the camera's centre and
        # the image's edges, and the image plane.
        normals = np.array([k[0], width_px * k[2] - k[0], k[1], height_px * k[2] - k[1], k[2]])
        normals /= np.linalg.norm(normals, axis=1, keepdims=True)
        global_normals = normals @ camera_SE3_global.rotation  # n . (R p + t), as (R^T n) . p
        offset = normals @ camera_SE3_global.translation
        # The largest signed distance of each cell's box from each plane (its farthest corner).
        reach = self.centres @ global_normals.T + np.abs(global_normals) @ self.half + offset
        # 1 mm covers the rounding of the cells' bounds and of the exact projection.
        cells = reach.min(axis=1) >= -(margin_m + 1e-3)
        return cells[self.cell]


def clip_channels(clip: Clip) -> tuple[str, ...]:
    """The camera channels of a clip in rig order (those of its first keyframe)."""
    return tuple(clip.frames[0].cameras) if clip.frames else ()


def build_camera_views(
    clip: Clip,
    tracks: Sequence[Boxes3D],
    options: SegmentOptions | None = None,
    sweep: SweepTiming | None = None,
) -> CameraViews:
    """Candidate views of every tracked box in every camera image of every keyframe.

    Args:
        clip: the clip (keyframes with camera images, calibrations and ego poses, LiDAR sweeps).
        tracks: one global-frame ``Boxes3D`` per keyframe, ``track_id`` set, ``velocity_mps`` the
            track's (NaN: not moved between LiDAR and camera time).
        options: which views count as candidates; defaults when None.
        sweep: the clip's sweep timing where its cameras fire as the beams pass them
            (:func:`autolabel.sweep_timing.triggered_sweep_timing`): a box and its returns are
            then where the beams crossed it, at the keyframe's time plus
            ``sweep.hit_offset_s`` of its azimuth, and ``motion_compensate`` moves them from
            there; None: every box at the keyframe's time.

    Raises:
        ValueError: ``tracks`` does not have one entry per keyframe.
    """
    opt = options or SegmentOptions()
    if len(tracks) != len(clip.frames):
        raise ValueError(f"{clip.name}: {len(tracks)} track sets for {len(clip.frames)} keyframes")
    channels = clip_channels(clip)
    sizes = np.zeros((len(channels), 2), np.int64)
    for c, channel in enumerate(channels):
        cal = clip.frames[0].cameras[channel].calibration
        sizes[c] = (cal.width_px, cal.height_px)
    keys = (
        "frame", "camera", "track", "label", "box", "clipped", "frac", "volume", "depth", "near",
        "points", "seed_count", "seed_uv", "hull_count", "hull_uv", "scene_key", "scene_count",
        "scene_uvd",
    )  # fmt: skip
    parts: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    for f, (frame, boxes) in enumerate(zip(clip.frames, tracks, strict=True)):
        if len(boxes) == 0:
            continue
        order = np.argsort(boxes.track_id, kind="stable")
        boxes = boxes[order]
        velocity = np.nan_to_num(boxes.velocity_mps, nan=0.0)
        points_global, lag_s, height_m = _frame_points(clip, f, opt.seed_sweeps)
        owner, point = object_points_by_sweep(points_global, lag_s, boxes, velocity)
        keyframe_pair = lag_s[point] == 0
        n_points = np.bincount(owner[keyframe_pair], minlength=len(boxes)).astype(np.int64)
        # The scene that can hide an object: the keyframe sweep's returns above the ground (road
        # returns are never in front of an object's silhouette, but smear into its lower rim).
        point_owner = np.full(len(points_global), -1, np.int64)
        point_owner[point[keyframe_pair]] = owner[keyframe_pair]
        scene = np.flatnonzero((lag_s == 0) & (height_m >= opt.occluder_min_height_m))
        # The same returns in every camera; only their motion to the image's time differs.
        scene_cells = _SceneCells(points_global[scene])
        scene_owner = point_owner[scene]
        corners = boxes.corners()  # (N, 8, 3)
        hit_s = np.zeros(len(boxes))
        if sweep is not None and opt.motion_compensate:
            centre_ego = frame.global_SE3_ego.inverse().transform_points(boxes.center_m)
            hit_s = sweep.hit_offset_s(bearing_deg(centre_ego))
        for c, channel in enumerate(channels):
            image = frame.cameras.get(channel)
            if image is None:
                continue
            cal = image.calibration
            # (N,) seconds from where each box was seen to the image's capture time.
            dt_s = np.zeros(len(boxes))
            if opt.motion_compensate:
                dt_s = (image.timestamp_us - frame.timestamp_us) * 1e-6 - hit_s
            shift = np.zeros((len(boxes), 3))
            shift[:, :2] = velocity * dt_s[:, None]
            camera_SE3_global = image.global_SE3_camera.inverse()
            corners_cam = camera_SE3_global.transform_points(
                (corners + shift[:, None, :]).reshape(-1, 3)
            ).reshape(-1, 8, 3)
            box = box_2d_from_corners(cal.intrinsic, corners_cam)
            clipped = clip_boxes_2d(box, cal.width_px, cal.height_px)
            frac = np.where(
                np.isnan(box).any(axis=1),
                0.0,
                in_image_fraction(np.nan_to_num(box), cal.width_px, cal.height_px),
            )
            depth = camera_SE3_global.transform_points(boxes.center_m + shift)[:, 2]
            area = np.nan_to_num((clipped[:, 2] - clipped[:, 0]) * (clipped[:, 3] - clipped[:, 1]))
            keep = (
                np.isfinite(clipped).all(axis=1)
                & (depth > 0)
                & (depth <= opt.max_distance_m)
                & (area >= opt.min_box_px)
                & (frac > 0)
                & (frac >= opt.min_in_image_fraction)
            )
            rows = np.flatnonzero(keep)
            if len(rows) == 0:
                continue
            near = np.maximum(corners_cam[rows, :, 2].min(axis=1), NEAR_PLANE_M)
            hulls = image_hulls(
                box_silhouette_uv(cal.intrinsic, corners_cam[rows]), cal.width_px, cal.height_px
            )
            # Seeds: the kept objects' own points of every sweep, moved with their object from
            # the sweep's time to the image's, projected with the image's own pose.
            keep = np.zeros(len(boxes), bool)
            keep[rows] = True
            pair = keep[owner]
            pair_owner, pair_point = owner[pair], point[pair]
            move_s = dt_s[pair_owner] + lag_s[pair_point] if opt.motion_compensate else 0.0
            moved = points_global[pair_point].copy()
            moved[:, :2] += velocity[pair_owner] * np.reshape(move_s, (-1, 1))
            uv, z = project_points(cal.intrinsic, camera_SE3_global.transform_points(moved))
            inside = _in_image(uv, z, cal.width_px, cal.height_px)
            pair_owner, uv = pair_owner[inside], uv[inside]
            # The scene's returns in this image, each moved with the object it belongs to (only
            # those of the cells the camera can see, grown by the largest move).
            reach = np.flatnonzero(
                scene_cells.reachable(
                    cal.intrinsic,
                    camera_SE3_global,
                    cal.width_px,
                    cal.height_px,
                    float(np.abs(shift).sum(axis=1).max(initial=0.0)),
                )
            )
            scene_global = scene_cells.points[reach]
            reach_owner = scene_owner[reach]
            tracked = np.flatnonzero(reach_owner >= 0)
            scene_global[tracked] += shift[reach_owner[tracked]]
            scene_uv, scene_z = project_points(
                cal.intrinsic, camera_SE3_global.transform_points(scene_global)
            )
            seen = _in_image(scene_uv, scene_z, cal.width_px, cal.height_px)
            parts["frame"].append(np.full(len(rows), f, np.int64))
            parts["camera"].append(np.full(len(rows), c, np.int16))
            parts["track"].append(boxes.track_id[rows])
            parts["label"].append(boxes.label[rows])
            parts["box"].append(box[rows])
            parts["clipped"].append(clipped[rows])
            parts["frac"].append(frac[rows])
            # Perspective stretches a near box's 2D extent far beyond the image (a car beside
            # the camera: a few per cent of its box, most of its volume in view).
            parts["volume"].append(
                volume_in_image_fraction(
                    cal.intrinsic, corners_cam[rows], cal.width_px, cal.height_px
                )
            )
            parts["depth"].append(depth[rows])
            parts["near"].append(near)
            parts["points"].append(n_points[rows])
            # pair_owner is sorted (np.nonzero order), so the seeds come grouped by object.
            parts["seed_count"].append(np.bincount(pair_owner, minlength=len(boxes))[rows])
            parts["seed_uv"].append(uv.astype(np.float32))
            parts["hull_count"].append(np.array([len(h) for h in hulls], np.int64))
            parts["hull_uv"].append(np.concatenate(hulls).astype(np.float32))
            parts["scene_key"].append(np.array([f * len(channels) + c], np.int64))
            parts["scene_count"].append(np.array([int(seen.sum())], np.int64))
            parts["scene_uvd"].append(
                np.column_stack([scene_uv[seen], scene_z[seen]]).astype(np.float32)
            )

    def cat(key: str, dtype, tail: tuple[int, ...] = ()) -> np.ndarray:
        return (
            np.concatenate(parts[key]).astype(dtype) if parts[key] else np.zeros((0, *tail), dtype)
        )

    def offsets(key: str) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(cat(key, np.int64))]).astype(np.int64)

    return CameraViews(
        channels=channels,
        image_size_px=sizes,
        frame_index=cat("frame", np.int64),
        camera=cat("camera", np.int16),
        track_id=cat("track", np.int64),
        label=cat("label", np.int16),
        box_px=cat("box", np.float64, (4,)),
        box_clipped_px=cat("clipped", np.float64, (4,)),
        in_image_fraction=cat("frac", np.float64),
        volume_in_image=cat("volume", np.float64),
        depth_m=cat("depth", np.float64),
        near_depth_m=cat("near", np.float64),
        lidar_points=cat("points", np.int64),
        seed_offsets=offsets("seed_count"),
        seed_uv=cat("seed_uv", np.float32, (2,)),
        hull_offsets=offsets("hull_count"),
        hull_uv=cat("hull_uv", np.float32, (2,)),
        scene_image_key=cat("scene_key", np.int64),
        scene_offsets=offsets("scene_count"),
        scene_uvd=cat("scene_uvd", np.float32, (3,)),
    )


def _in_image(uv: np.ndarray, z: np.ndarray, width_px: int, height_px: int) -> np.ndarray:
    return (
        (z > 0) & (uv[:, 0] >= 0) & (uv[:, 0] < width_px) & (uv[:, 1] >= 0) & (uv[:, 1] < height_px)
    )
