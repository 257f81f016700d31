"""Camera images of a synthetic scene by ray casting: colour, per-pixel box index and depth.

Each pixel shoots one ray through its centre ``(u + 0.5, v + 0.5)`` (u right, v down, origin at
the top-left pixel's corner, as ``calib.projection``), so the pixels a box covers are exactly those
whose centres fall inside the projection of the box: the rendered extent of a box and
``calib.projection.box_2d_from_corners`` of its corners agree to within one pixel.

The renderer tests each box only against the pixels of its screen rectangle (from
``box_2d_from_corners``, which clips boxes crossing the near plane), with a z-buffer along the
optical axis; the ground is a ray-plane intersection per pixel with a texture lookup, and rays that
hit nothing see a sky gradient. Box bodies are Lambert-shaded from a fixed sun so boxes read as 3D;
faces and plates keep their flat colour. Rendering is deterministic and single-threaded.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from autolabel.sensors import CameraCalibration
from autolabel.synth.raycast import (
    FACE_NONE,
    HIT_GROUND,
    HIT_NOTHING,
    PART_BODY,
    GroundTexture,
    SceneBoxes,
    _slab_entry,
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
    """

    image: np.ndarray
    box_index: np.ndarray
    depth_m: np.ndarray
    unoccluded_px: np.ndarray
    visible_px: np.ndarray


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


@njit(cache=True)
def _render_kernel(
    origin, ray_a, ray_b, ray_c, near_m,
    centers, half_xyz, cos_yaw, sin_yaw, rects, colours, shade,
    ground_z, tex, tex_origin, tex_res, outside_rgb, sky_horizon, sky_zenith,
    image, box_index, depth, face, unoccluded,
):  # fmt: skip
    """Fill image, box_index, depth (float64 z-buffer) and face; count unoccluded pixels.

    The ray of pixel (u, v) is ``origin + s (ray_a + (u + .5) ray_b + (v + .5) ray_c)`` in the
    global frame, with the direction scaled so that s is the depth along the optical axis.
    """
    height, width = box_index.shape
    ox, oy, oz = origin[0], origin[1], origin[2]
    tex_h, tex_w = tex.shape[0], tex.shape[1]
    above_ground = oz > ground_z
    # Ground and sky.
    for v in range(height):
        vc = v + 0.5
        rx = ray_a[0] + vc * ray_c[0]
        ry = ray_a[1] + vc * ray_c[1]
        rz = ray_a[2] + vc * ray_c[2]
        for u in range(width):
            uc = u + 0.5
            dz = rz + uc * ray_b[2]
            if above_ground and dz < 0.0:
                s = (ground_z - oz) / dz
                if s >= near_m:
                    gx = ox + s * (rx + uc * ray_b[0])
                    gy = oy + s * (ry + uc * ray_b[1])
                    col = np.floor((gx - tex_origin[0]) / tex_res)
                    row = np.floor((gy - tex_origin[1]) / tex_res)
                    if 0 <= row < tex_h and 0 <= col < tex_w:
                        ir, ic = int(row), int(col)
                        for k in range(3):
                            image[v, u, k] = tex[ir, ic, k]
                    else:
                        for k in range(3):
                            image[v, u, k] = outside_rgb[k]
                    depth[v, u] = s
                    box_index[v, u] = HIT_GROUND
                    face[v, u] = FACE_NONE
                    continue
            dx = rx + uc * ray_b[0]
            dy = ry + uc * ray_b[1]
            sin_elev = dz / np.sqrt(dx * dx + dy * dy + dz * dz)
            w = min(1.0, max(0.0, 2.0 * sin_elev))
            for k in range(3):
                image[v, u, k] = np.uint8(sky_horizon[k] * (1.0 - w) + sky_zenith[k] * w + 0.5)
            depth[v, u] = np.inf
            box_index[v, u] = HIT_NOTHING
            face[v, u] = FACE_NONE
    # Boxes, each against the pixels of its screen rectangle, z-buffered.
    for b in range(centers.shape[0]):
        u0, v0, u1, v1 = rects[b, 0], rects[b, 1], rects[b, 2], rects[b, 3]
        if u1 <= u0 or v1 <= v0:
            continue
        c, s_ = cos_yaw[b], sin_yaw[b]
        px, py, pz = ox - centers[b, 0], oy - centers[b, 1], oz - centers[b, 2]
        lox, loy, loz = c * px + s_ * py, -s_ * px + c * py, pz
        la0, la1, la2 = c * ray_a[0] + s_ * ray_a[1], -s_ * ray_a[0] + c * ray_a[1], ray_a[2]
        lb0, lb1, lb2 = c * ray_b[0] + s_ * ray_b[1], -s_ * ray_b[0] + c * ray_b[1], ray_b[2]
        lc0, lc1, lc2 = c * ray_c[0] + s_ * ray_c[1], -s_ * ray_c[0] + c * ray_c[1], ray_c[2]
        hx, hy, hz = half_xyz[b, 0], half_xyz[b, 1], half_xyz[b, 2]
        count = 0
        for v in range(v0, v1):
            vc = v + 0.5
            rx = la0 + vc * lc0
            ry = la1 + vc * lc1
            rz = la2 + vc * lc2
            for u in range(u0, u1):
                uc = u + 0.5
                t, f = _slab_entry(
                    lox, loy, loz, rx + uc * lb0, ry + uc * lb1, rz + uc * lb2, hx, hy, hz, near_m
                )
                if t == np.inf:
                    continue
                count += 1
                current = depth[v, u]
                if t < current or (t == current and box_index[v, u] == HIT_GROUND):
                    depth[v, u] = t
                    box_index[v, u] = b
                    face[v, u] = f
        unoccluded[b] = count
    # Colour of the box pixels.
    for v in range(height):
        for u in range(width):
            b = box_index[v, u]
            if b >= 0:
                k_shade = shade[b, face[v, u]]
                for k in range(3):
                    image[v, u, k] = np.uint8(min(255.0, colours[b, k] * k_shade + 0.5))


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
    _render_kernel(
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
        image,
        box_index,
        depth,
        face,
        unoccluded,
    )
    visible = np.bincount(box_index[box_index >= 0].ravel(), minlength=n).astype(np.int64)
    return RenderResult(image, box_index, depth.astype(np.float32), unoccluded, visible)
