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

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from autolabel.boxes import Boxes3D
from autolabel.clip import Clip
from autolabel.config import SegmentOptions
from autolabel.nuscenes_reader import aggregate_sweeps
from calib.projection import box_2d_from_corners, clip_boxes_2d, in_image_fraction, project_points


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
        depth_m: (V,) box centre's depth along the camera's optical axis, metres.
        lidar_points: (V,) int64 LiDAR points of the keyframe sweep(s) inside the 3D box.
        seed_offsets: (V + 1,) int64; the seeds of view i are ``seed_uv[seed_offsets[i]:
            seed_offsets[i + 1]]``.
        seed_uv: (S, 2) float32 the object's LiDAR points projected into the image, pixels.
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
    depth_m: np.ndarray
    lidar_points: np.ndarray
    seed_offsets: np.ndarray
    seed_uv: np.ndarray

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


def object_points_global(
    frame_points_global: np.ndarray, boxes: Boxes3D
) -> tuple[np.ndarray, np.ndarray]:
    """The points inside each box, as (object index, point index) pairs sorted by object, then
    point (the order of ``np.nonzero(boxes.points_inside(points))``, without its (N, P) matrix).

    Candidates come from a KD-tree query of each box's circumscribed circle in the xy plane; the
    exact test (``Boxes3D.points_inside``'s, boundaries included) runs on those pairs only.

    Args:
        frame_points_global: (P, 3) LiDAR points, global frame, metres.
        boxes: N boxes in the global frame.

    Returns:
        owner: (M,) int64 box of each pair; point: (M,) int64 index into the points.
    """
    from scipy.spatial import cKDTree

    empty = np.zeros(0, np.int64)
    if len(boxes) == 0 or len(frame_points_global) == 0:
        return empty, empty
    points = np.asarray(frame_points_global, dtype=np.float64)
    radius = 0.5 * np.hypot(boxes.size_wlh_m[:, 0], boxes.size_wlh_m[:, 1]) + 1e-6
    near = cKDTree(points[:, :2]).query_ball_point(boxes.center_m[:, :2], r=radius)
    lengths = np.array([len(x) for x in near], dtype=np.int64)
    if lengths.sum() == 0:
        return empty, empty
    owner = np.repeat(np.arange(len(boxes), dtype=np.int64), lengths)
    point = np.concatenate([np.asarray(x, dtype=np.int64) for x in near])
    d = points[point] - boxes.center_m[owner]
    c, s = np.cos(boxes.yaw_rad[owner]), np.sin(boxes.yaw_rad[owner])
    half = 0.5 * boxes.size_wlh_m[owner]
    inside = (
        (np.abs(c * d[:, 0] + s * d[:, 1]) <= half[:, 1])
        & (np.abs(-s * d[:, 0] + c * d[:, 1]) <= half[:, 0])
        & (np.abs(d[:, 2]) <= half[:, 2])
    )
    owner, point = owner[inside], point[inside]
    order = np.lexsort((point, owner))
    return owner[order], point[order]


def _frame_points_global(clip: Clip, frame_index: int, sweeps: int) -> np.ndarray:
    frame = clip.frames[frame_index]
    points_lidar, _ = aggregate_sweeps(frame, sweeps)
    ego_SE3_lidar = frame.lidar.ego_SE3_lidar or frame.lidar_calibration.ego_SE3_lidar
    global_SE3_lidar = frame.global_SE3_ego.compose(ego_SE3_lidar)
    return global_SE3_lidar.transform_points(points_lidar[:, :3].astype(np.float64))


def clip_channels(clip: Clip) -> tuple[str, ...]:
    """The camera channels of a clip in rig order (those of its first keyframe)."""
    return tuple(clip.frames[0].cameras) if clip.frames else ()


def build_camera_views(
    clip: Clip, tracks: Sequence[Boxes3D], options: SegmentOptions | None = None
) -> CameraViews:
    """Candidate views of every tracked box in every camera image of every keyframe.

    Args:
        clip: the clip (keyframes with camera images, calibrations and ego poses, LiDAR sweeps).
        tracks: one global-frame ``Boxes3D`` per keyframe, ``track_id`` set, ``velocity_mps`` the
            track's (NaN: not moved between LiDAR and camera time).
        options: which views count as candidates; defaults when None.

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
    parts: dict[str, list[np.ndarray]] = {
        k: []
        for k in (
            "frame", "camera", "track", "label", "box", "clipped", "frac", "depth", "points",
            "seed_count", "seed_uv",
        )
    }  # fmt: skip
    for f, (frame, boxes) in enumerate(zip(clip.frames, tracks, strict=True)):
        if len(boxes) == 0:
            continue
        order = np.argsort(boxes.track_id, kind="stable")
        boxes = boxes[order]
        points_global = _frame_points_global(clip, f, opt.seed_sweeps)
        owner, point = object_points_global(points_global, boxes)
        n_points = np.bincount(owner, minlength=len(boxes)).astype(np.int64)
        velocity = np.nan_to_num(boxes.velocity_mps, nan=0.0)
        corners = boxes.corners()  # (N, 8, 3)
        for c, channel in enumerate(channels):
            image = frame.cameras.get(channel)
            if image is None:
                continue
            cal = image.calibration
            dt_s = (image.timestamp_us - frame.timestamp_us) * 1e-6 if opt.motion_compensate else 0
            shift = np.zeros((len(boxes), 3))
            shift[:, :2] = velocity * dt_s
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
            # Seeds: the kept objects' own points, moved with their object, in this image.
            pair = np.isin(owner, rows)
            pair_owner, pair_point = owner[pair], point[pair]
            pts_cam = camera_SE3_global.transform_points(
                points_global[pair_point] + shift[pair_owner]
            )
            uv, z = project_points(cal.intrinsic, pts_cam)
            inside = (
                (z > 0)
                & (uv[:, 0] >= 0)
                & (uv[:, 0] < cal.width_px)
                & (uv[:, 1] >= 0)
                & (uv[:, 1] < cal.height_px)
            )
            pair_owner, uv = pair_owner[inside], uv[inside]
            parts["frame"].append(np.full(len(rows), f, np.int64))
            parts["camera"].append(np.full(len(rows), c, np.int16))
            parts["track"].append(boxes.track_id[rows])
            parts["label"].append(boxes.label[rows])
            parts["box"].append(box[rows])
            parts["clipped"].append(clipped[rows])
            parts["frac"].append(frac[rows])
            parts["depth"].append(depth[rows])
            parts["points"].append(n_points[rows])
            # pair_owner is sorted (np.nonzero order), so the seeds come grouped by object.
            parts["seed_count"].append(np.bincount(pair_owner, minlength=len(boxes))[rows])
            parts["seed_uv"].append(uv.astype(np.float32))

    def cat(key: str, dtype, tail: tuple[int, ...] = ()) -> np.ndarray:
        return (
            np.concatenate(parts[key]).astype(dtype) if parts[key] else np.zeros((0, *tail), dtype)
        )

    seed_count = cat("seed_count", np.int64)
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
        depth_m=cat("depth", np.float64),
        lidar_points=cat("points", np.int64),
        seed_offsets=np.concatenate([[0], np.cumsum(seed_count)]).astype(np.int64),
        seed_uv=cat("seed_uv", np.float32, (2,)),
    )
