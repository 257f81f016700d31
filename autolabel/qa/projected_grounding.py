"""Region grounding from 3D boxes alone: project each track's box into the rig's cameras.

For runs without a segmenter, for tests and for benchmarks: the 2D box of a view is the clipped
projection of the object's 3D box (the same projected box the visibility filter compares with the
mask) and the mask fills that box, as COCO RLE. An object counts as
visible in a camera at a frame when at least ``min_in_image`` of its projected box lies inside the
image, the box covers at least ``min_box_px`` pixels and the object is within ``max_distance_m``.
There is no occlusion test here: real runs take visibility from ``autolabel.visibility``.

Region ids come from Set-of-Mark's rule (``autolabel.set_of_mark.assign_region_ids``: from 0 per
keyframe by distance at the keyframe, then track id), so the same object keeps its id in every
frame and camera of the window.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pycocotools import mask as mask_utils

from autolabel.attributes import ObjectAttributes
from autolabel.boxes import CORNER_SIGNS
from autolabel.qa.grounding import KeyframeRegions
from autolabel.sensors import CameraCalibration
from autolabel.set_of_mark import assign_region_ids
from calib.projection import box_2d_from_corners, clip_boxes_2d, in_image_fraction


@dataclass(frozen=True)
class ProjectionGroundingConfig:
    """Thresholds of :func:`regions_from_projection` (see the module docstring)."""

    min_in_image: float = 0.5
    min_box_px: float = 64.0
    max_distance_m: float = 60.0

    def __post_init__(self) -> None:
        if not 0 < self.min_in_image <= 1:
            raise ValueError(f"min_in_image: must be in (0, 1], got {self.min_in_image!r}")
        if self.min_box_px < 0 or self.max_distance_m <= 0:
            raise ValueError("min_box_px: must be >= 0 and max_distance_m > 0")


def corners_ego(attrs: ObjectAttributes, rows: np.ndarray) -> np.ndarray:
    """(N, 8, 3) box corners of attribute rows in their frame's ego frame (nuScenes order)."""
    rows = np.asarray(rows, dtype=np.int64)
    half = 0.5 * np.stack(
        [
            np.asarray(attrs.length_m)[rows],
            np.asarray(attrs.width_m)[rows],
            np.asarray(attrs.height_m)[rows],
        ],
        axis=1,
    )
    local = CORNER_SIGNS[None, :, :] * half[:, None, :]
    yaw = np.asarray(attrs.yaw_ego_rad)[rows]
    c, s = np.cos(yaw)[:, None], np.sin(yaw)[:, None]
    x = c * local[..., 0] - s * local[..., 1] + np.asarray(attrs.x_ego_m)[rows, None]
    y = s * local[..., 0] + c * local[..., 1] + np.asarray(attrs.y_ego_m)[rows, None]
    z = local[..., 2] + np.asarray(attrs.z_ego_m)[rows, None]
    return np.stack([x, y, z], axis=-1)


def _project(
    attrs: ObjectAttributes, rows: np.ndarray, camera: CameraCalibration
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    corners = corners_ego(attrs, rows)
    camera_SE3_ego = camera.ego_SE3_camera.inverse()
    pts = camera_SE3_ego.transform_points(corners.reshape(-1, 3)).reshape(corners.shape)
    raw = box_2d_from_corners(camera.intrinsic, pts)
    frac = in_image_fraction(np.nan_to_num(raw, nan=0.0), camera.width_px, camera.height_px)
    frac = np.where(np.isnan(raw).any(axis=1), 0.0, frac)
    return clip_boxes_2d(raw, camera.width_px, camera.height_px), frac, pts


def projected_boxes(
    attrs: ObjectAttributes, rows: np.ndarray, camera: CameraCalibration
) -> tuple[np.ndarray, np.ndarray]:
    """(N, 4) clipped projected boxes of attribute rows in one camera (NaN where nothing shows)
    and (N,) the fraction of each unclipped box inside the image."""
    boxes, frac, _ = _project(attrs, np.asarray(rows, dtype=np.int64), camera)
    return boxes, frac


def box_rles(boxes_px: np.ndarray, width_px: int, height_px: int) -> list[dict]:
    """COCO RLE masks filling (N, 4) ``[u_min, v_min, u_max, v_max]`` boxes (one C call)."""
    b = np.asarray(boxes_px, dtype=np.float64).reshape(-1, 4)
    if len(b) == 0:
        return []
    xywh = np.stack([b[:, 0], b[:, 1], b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]], axis=1)
    rles = mask_utils.frPyObjects(xywh, int(height_px), int(width_px))
    size = [int(height_px), int(width_px)]
    return [{"size": size, "counts": r["counts"].decode("ascii")} for r in rles]


def regions_from_projection(
    attrs: ObjectAttributes,
    cameras: Sequence[CameraCalibration],
    keyframes: Sequence[int],
    window_frames: Sequence[Sequence[int]],
    config: ProjectionGroundingConfig | None = None,
) -> list[KeyframeRegions]:
    """Grounding of each keyframe from the tracks' projected 3D boxes.

    Args:
        attrs: the clip's attributes (positions, sizes, headings in each frame's ego frame).
        cameras: the rig's cameras (``Rig.cameras``).
        keyframes: QA keyframe frame indices.
        window_frames: for each keyframe, the frames whose views to include (context and future).
        config: visibility thresholds.
    """
    cfg = config or ProjectionGroundingConfig()
    out = []
    for kf, frames in zip(keyframes, window_frames, strict=True):
        at_kf = np.flatnonzero(np.asarray(attrs.frame_index) == kf)
        at_kf = at_kf[np.asarray(attrs.distance_m)[at_kf] <= cfg.max_distance_m]
        if len(at_kf) == 0:
            continue
        tracks = np.asarray(attrs.track_id)[at_kf]
        vis_kf = np.zeros((len(at_kf), len(cameras)), bool)
        for c, cam in enumerate(cameras):
            boxes, frac = projected_boxes(attrs, at_kf, cam)
            area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
            vis_kf[:, c] = (frac >= cfg.min_in_image) & (np.nan_to_num(area) >= cfg.min_box_px)
        keep = vis_kf.any(axis=1)
        if not keep.any():
            continue
        tracks = tracks[keep]
        ids = assign_region_ids(
            np.full(len(tracks), kf), tracks, np.asarray(attrs.distance_m)[at_kf[keep]]
        )
        region_id = ids.row_region_id.astype(np.int64)
        v_reg, v_cam, v_frame, v_box, v_rle, v_vis = [], [], [], [], [], []
        frame_arr = np.repeat(np.asarray(frames, dtype=np.int64), len(tracks))
        track_row = np.tile(np.arange(len(tracks)), len(frames))
        rows = attrs.row_of(frame_arr, tracks[track_row])
        present = np.flatnonzero(rows >= 0)
        for cam in cameras:
            boxes, frac = projected_boxes(attrs, rows[present], cam)
            area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
            vis = (frac >= cfg.min_in_image) & (np.nan_to_num(area) >= cfg.min_box_px)
            shown = np.flatnonzero(np.all(np.isfinite(boxes), axis=1))
            v_reg.append(track_row[present[shown]])
            v_cam.append(np.full(len(shown), cam.channel, dtype=object))
            v_frame.append(frame_arr[present[shown]])
            v_box.append(boxes[shown])
            v_rle += box_rles(boxes[shown], cam.width_px, cam.height_px)
            v_vis.append(vis[shown])
        out.append(
            KeyframeRegions(
                keyframe_index=int(kf),
                region_id=region_id,
                track_id=tracks,
                label=np.asarray(attrs.label)[attrs.row_of(np.full(len(tracks), kf), tracks)],
                view_region=np.concatenate(v_reg),
                view_camera=np.concatenate(v_cam),
                view_frame_index=np.concatenate(v_frame),
                view_box_px=np.concatenate(v_box),
                view_mask_rle=v_rle,
                view_visible=np.concatenate(v_vis),
            )
        )
    return out
