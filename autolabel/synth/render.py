"""Camera images of a synthetic scene by ray casting: colour, per-pixel box index and depth.

Each pixel shoots one ray through its centre ``(u + 0.5, v + 0.5)`` (u right, v down, origin at
the top-left pixel's corner, as ``calib.projection``), so the pixels a box covers are exactly those
whose centres fall inside the projection of the box: the rendered extent of a box and
``calib.projection.box_2d_from_corners`` of its corners agree to within one pixel.

The renderer tests each box only against the pixels of its screen rectangle (from
``box_2d_from_corners``, which clips boxes crossing the near plane), with a z-buffer along the
optical axis; the ground is a ray-plane intersection per pixel with a texture lookup, and rays that
hit nothing see a sky gradient. Box bodies are Lambert-shaded from a fixed sun so boxes read as 3D;
faces and plates keep their flat colour. Surfaces nearer than ``NEAR_PLANE_M`` (0.1 m) along the
optical axis are clipped away, and a box around the camera is invisible from inside (as in
``raycast``). Rendering is deterministic and single-threaded; the numba kernel is
``raycast.render_kernel``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autolabel.sensors import CameraCalibration
from autolabel.synth.raycast import (
    PART_BODY,
    GroundTexture,
    SceneBoxes,
    render_kernel,
)
from calib.projection import NEAR_PLANE_M, box_2d_from_corners
from calib.se3 import SE3

__all__ = ["GroundTexture", "RenderResult", "SceneBoxes", "render_camera", "face_shading"]

#: Unit vector toward the sun in the global frame (high, from the front-left of +x).
SUN_DIRECTION_GLOBAL = np.array([0.45, 0.3, 0.84]) / np.linalg.norm([0.45, 0.3, 0.84])
#: Lambert shading of body faces: ``AMBIENT + DIFFUSE * max(0, n . sun)``.
AMBIENT = 0.45
DIFFUSE = 0.55
#: Sky colours at the horizon and at the zenith (RGB); the gradient follows the ray's elevation.
SKY_HORIZON_RGB = np.array([206.0, 219.0, 233.0])
SKY_ZENITH_RGB = np.array([108.0, 150.0, 212.0])

#: Outward normals of the faces 0..5 of a box in its own frame (see ``raycast``).
_FACE_NORMALS_BOX = np.array(
    [[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]], dtype=np.float64
)


@dataclass(frozen=True)
class RenderResult:
    """One rendered camera image.

    Attributes:
        image: (H, W, 3) uint8 RGB.
        box_index: (H, W) int32 index of the scene box seen at each pixel; -1 sky, -2 ground.
        depth_m: (H, W) float32 distance along the optical axis to the surface seen, metres;
            inf for sky.
        unoccluded_px: (B,) int64 pixels of the image each box would cover were it alone in the
            scene (no other boxes, no ground).
        visible_px: (B,) int64 pixels where each box is the surface seen (``box_index == b``).
        owner_unoccluded_px: (O,) int64, O = max(owner) + 1 (0 without owners): pixels the union
            of each owner's boxes would cover were that object alone in the scene.
        owner_visible_px: (O,) int64 pixels where one of each owner's boxes is seen.
    """

    image: np.ndarray
    box_index: np.ndarray
    depth_m: np.ndarray
    unoccluded_px: np.ndarray
    visible_px: np.ndarray
    owner_unoccluded_px: np.ndarray
    owner_visible_px: np.ndarray


def face_shading(boxes: SceneBoxes) -> np.ndarray:
    """(B, 6) brightness factor of each face 0..5 of each box: Lambert for bodies, 1 otherwise."""
    c, s = np.cos(boxes.yaw), np.sin(boxes.yaw)
    n = _FACE_NORMALS_BOX
    # Global normal of local (nx, ny, nz) is (c nx - s ny, s nx + c ny, nz).
    normal_x = c[:, None] * n[None, :, 0] - s[:, None] * n[None, :, 1]
    normal_y = s[:, None] * n[None, :, 0] + c[:, None] * n[None, :, 1]
    normal_z = np.broadcast_to(n[None, :, 2], normal_x.shape)
    sun = SUN_DIRECTION_GLOBAL
    lambert = np.maximum(0.0, normal_x * sun[0] + normal_y * sun[1] + normal_z * sun[2])
    shade = AMBIENT + DIFFUSE * lambert
    shade[boxes.part != PART_BODY] = 1.0
    return np.ascontiguousarray(shade)


def screen_rectangles(
    camera: CameraCalibration, camera_SE3_global: SE3, boxes: SceneBoxes
) -> np.ndarray:
    """(B, 4) int64 [u0, v0, u1, v1) pixel ranges that hold every pixel a box can cover.

    The range is the box's projected extent (clipped at the near plane) widened by one pixel on
    each side against rounding, cut to the image; boxes out of view get an empty range.
    """
    rects = np.zeros((len(boxes), 4), np.int64)
    if not len(boxes):
        return rects
    corners_camera = camera_SE3_global.transform_points(boxes.corners())
    extent = box_2d_from_corners(camera.intrinsic, corners_camera, NEAR_PLANE_M)
    ok = np.isfinite(extent).all(axis=1)
    w, h = camera.width_px, camera.height_px
    ext = np.where(ok[:, None], extent, 0.0)
    # Pixel u is tested when its centre u + 0.5 may lie in [u_min, u_max]; one spare pixel a side.
    rects[:, 0] = np.clip(np.floor(np.clip(ext[:, 0], -1e9, 1e9)) - 1, 0, w)
    rects[:, 1] = np.clip(np.floor(np.clip(ext[:, 1], -1e9, 1e9)) - 1, 0, h)
    rects[:, 2] = np.clip(np.ceil(np.clip(ext[:, 2], -1e9, 1e9)) + 1, 0, w)
    rects[:, 3] = np.clip(np.ceil(np.clip(ext[:, 3], -1e9, 1e9)) + 1, 0, h)
    rects[~ok] = 0
    return rects


def render_camera(
    camera: CameraCalibration,
    global_SE3_camera: SE3,
    boxes: SceneBoxes,
    ground: GroundTexture,
    ground_z: float = 0.0,
) -> RenderResult:
    """Render what ``camera`` sees of the scene (boxes on a textured ground plane, sky above).

    Args:
        camera: intrinsics and image size (its ``ego_SE3_camera`` is not used here).
        global_SE3_camera: camera pose in the global frame (camera x right, y down, z forward).
        boxes: the scene's boxes in the global frame.
        ground: texture of the ground plane ``z = ground_z``.

    Returns:
        A ``RenderResult`` (image, per-pixel box index and depth, per-box pixel counts).
    """
    k = camera.intrinsic
    if not np.allclose(k[2], [0.0, 0.0, 1.0]):
        raise ValueError(f"{camera.channel}: intrinsic's last row must be [0, 0, 1], got {k[2]}")
    width, height = int(camera.width_px), int(camera.height_px)
    if width < 1 or height < 1:
        raise ValueError(f"{camera.channel}: image size must be positive, got {width}x{height}")
    k_inv = np.linalg.inv(k)
    rot = global_SE3_camera.rotation
    # Camera-frame direction of pixel centre (uc, vc) is K^-1 [uc, vc, 1]: z = 1, so the ray
    # parameter along it is the depth along the optical axis.
    ray_a = np.ascontiguousarray(rot @ k_inv[:, 2])
    ray_b = np.ascontiguousarray(rot @ k_inv[:, 0])
    ray_c = np.ascontiguousarray(rot @ k_inv[:, 1])
    rects = screen_rectangles(camera, global_SE3_camera.inverse(), boxes)
    n = len(boxes)
    image = np.empty((height, width, 3), np.uint8)
    box_index = np.empty((height, width), np.int32)
    depth = np.empty((height, width), np.float64)
    face = np.empty((height, width), np.int8)
    unoccluded = np.zeros(n, np.int64)
    n_owners = int(boxes.owner.max()) + 1 if n else 0
    owner_unoccluded = np.zeros(max(n_owners, 0), np.int64)
    # Visit boxes grouped by owner so the union of an owner's boxes can be counted in one pass;
    # only owners of several boxes need the per-pixel stamp.
    order = np.argsort(boxes.owner, kind="stable").astype(np.int64)
    boxes_per_owner = np.bincount(boxes.owner[boxes.owner >= 0], minlength=max(n_owners, 1))
    shared_owner = (boxes.owner >= 0) & (boxes_per_owner[np.maximum(boxes.owner, 0)] > 1)
    owner_stamp = np.full((height, width) if shared_owner.any() else (1, 1), -1, np.int32)
    render_kernel(
        np.ascontiguousarray(global_SE3_camera.translation),
        ray_a,
        ray_b,
        ray_c,
        NEAR_PLANE_M,
        np.ascontiguousarray(boxes.center),
        boxes.half_extents_xyz(),
        np.cos(boxes.yaw),
        np.sin(boxes.yaw),
        rects,
        np.ascontiguousarray(boxes.colour),
        face_shading(boxes),
        float(ground_z),
        ground.rgb,
        ground.origin_xy,
        ground.resolution_m,
        ground.outside_rgb,
        SKY_HORIZON_RGB,
        SKY_ZENITH_RGB,
        order,
        boxes.owner,
        shared_owner,
        owner_stamp,
        image,
        box_index,
        depth,
        face,
        unoccluded,
        owner_unoccluded,
    )
    visible = np.bincount(box_index[box_index >= 0].ravel(), minlength=n).astype(np.int64)
    seen_owner = boxes.owner[box_index[box_index >= 0]]
    owner_visible = np.bincount(seen_owner[seen_owner >= 0], minlength=len(owner_unoccluded))
    return RenderResult(
        image,
        box_index,
        depth.astype(np.float32),
        unoccluded,
        visible,
        owner_unoccluded,
        owner_visible.astype(np.int64),
    )
