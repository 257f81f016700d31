"""Pinhole projection of points and 3D boxes into camera images, with near-plane clipping.

All functions take camera-frame coordinates (x right, y down, z along the optical axis), metres,
and return pixel coordinates (u right, v down) with the origin at the top-left pixel's corner.
"""

from __future__ import annotations

import numpy as np

#: Points closer to the image plane than this (metres along the optical axis) are clipped away.
NEAR_PLANE_M = 0.1

_EDGES = np.array(
    [[0, 1], [1, 2], [2, 3], [3, 0], [4, 5], [5, 6], [6, 7], [7, 4], [0, 4], [1, 5], [2, 6], [3, 7]]
)


def project_points(
    intrinsic: np.ndarray, points_camera: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Project (..., 3) camera-frame points with K; returns uv (..., 2) pixels and depth (..., ) m.

    Points at or behind the camera get NaN pixel coordinates; their depth is still returned.
    """
    pts = np.asarray(points_camera, dtype=np.float64)
    depth = pts[..., 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        homog = pts @ np.asarray(intrinsic, dtype=np.float64).T
        uv = homog[..., :2] / homog[..., 2:3]
    uv[depth <= 0] = np.nan
    return uv, depth


def box_silhouette_uv(
    intrinsic: np.ndarray, corners_camera: np.ndarray, near_m: float = NEAR_PLANE_M
) -> np.ndarray:
    """Image points whose convex hull is the exact silhouette of each box, (N, 20, 2) pixels.

    The box's 8 corners and the 12 points where its edges pierce the plane ``z = near_m``; corners
    behind that plane and edges that do not cross it give NaN rows. The projection of a convex
    solid is the convex hull of its (near-clipped) vertices, so the hull of the finite rows is the
    silhouette; all rows are NaN for a box entirely behind the plane.
    """
    corners = np.asarray(corners_camera, dtype=np.float64)
    p0, p1 = corners[:, _EDGES[:, 0]], corners[:, _EDGES[:, 1]]
    z0, z1 = p0[..., 2] - near_m, p1[..., 2] - near_m
    crossing = z0 * z1 < 0
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(crossing, z0 / (z0 - z1), 0.0)
    pierce = p0 + t[..., None] * (p1 - p0)
    pierce[..., 2] = near_m  # exact, against rounding
    candidates = np.concatenate([corners, pierce], axis=1)  # (N, 20, 3)
    valid = np.concatenate([corners[..., 2] >= near_m, crossing], axis=1)
    uv, _ = project_points(intrinsic, np.where(valid[..., None], candidates, 1.0))
    uv[~valid] = np.nan
    return uv


def box_2d_from_corners(
    intrinsic: np.ndarray, corners_camera: np.ndarray, near_m: float = NEAR_PLANE_M
) -> np.ndarray:
    """Unclipped 2D boxes of 3D boxes given by their (N, 8, 3) camera-frame corners.

    A box that crosses the plane ``z = near_m`` is first cut by it: the projected extent is that of
    the corners in front of the plane plus the points where the box's edges pierce it. This is
    exact for the box's silhouette (the projection of a convex solid is the hull of its vertices),
    unlike projecting only the corners in front of the camera (``box_silhouette_uv``).

    Returns:
        (N, 4) [u_min, v_min, u_max, v_max] in pixels; NaN rows for boxes entirely behind the plane.
    """
    uv = box_silhouette_uv(intrinsic, corners_camera, near_m)
    n = uv.shape[0]
    u, v = uv[..., 0], uv[..., 1]
    out = np.full((n, 4), np.nan)
    any_valid = np.isfinite(u).any(axis=1)
    if any_valid.any():
        out[any_valid] = np.stack(
            [
                np.nanmin(u[any_valid], 1),
                np.nanmin(v[any_valid], 1),
                np.nanmax(u[any_valid], 1),
                np.nanmax(v[any_valid], 1),
            ],
            axis=1,
        )
    return out


def clip_boxes_2d(boxes_2d: np.ndarray, width_px: int, height_px: int) -> np.ndarray:
    """Clip (N, 4) [u_min, v_min, u_max, v_max] boxes to the image; NaN rows where nothing is left."""
    b = np.asarray(boxes_2d, dtype=np.float64).copy()
    b[:, [0, 2]] = np.clip(b[:, [0, 2]], 0, width_px)
    b[:, [1, 3]] = np.clip(b[:, [1, 3]], 0, height_px)
    empty = ~((b[:, 2] > b[:, 0]) & (b[:, 3] > b[:, 1]))
    b[empty] = np.nan
    return b


def in_image_fraction(boxes_2d: np.ndarray, width_px: int, height_px: int) -> np.ndarray:
    """(N,) fraction of each unclipped 2D box's area that lies inside the image; 0 for NaN boxes."""
    b = np.asarray(boxes_2d, dtype=np.float64)
    area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    clipped = clip_boxes_2d(b, width_px, height_px)
    inside = (clipped[:, 2] - clipped[:, 0]) * (clipped[:, 3] - clipped[:, 1])
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = inside / area
    return np.nan_to_num(frac, nan=0.0)


#: Cells per box edge of ``volume_in_image_fraction``'s grid (8**3 = 512 cell centres per box).
VOLUME_GRID = 8


def volume_in_image_fraction(
    intrinsic: np.ndarray,
    corners_camera: np.ndarray,
    width_px: int,
    height_px: int,
    near_m: float = NEAR_PLANE_M,
    grid: int = VOLUME_GRID,
) -> np.ndarray:
    """(N,) share of each 3D box's volume inside the camera's view: in front of the plane
    ``z = near_m`` and projecting into the ``width_px`` x ``height_px`` image.

    The volume is sampled at the centres of a ``grid``^3 lattice of equal cells spanning the box
    (exact for a box cut by a plane through its centre parallel to a face, within 1 / ``grid``
    of the box's extent otherwise). Unlike ``in_image_fraction`` of the projected 2D box it does
    not depend on how perspective stretches the box: a car beside the camera whose nearest
    corner projects thousands of pixels outside the image, but most of which is in view, scores
    most of its volume, not the few per cent of its 2D box that the image holds.

    Args:
        intrinsic: (3, 3) camera matrix K.
        corners_camera: (N, 8, 3) camera-frame box corners in ``Boxes3D.corners()`` order
            (corner 0's neighbours along the box's edges are corners 1, 3 and 4), metres.
        width_px, height_px: image size.
    """
    corners = np.asarray(corners_camera, dtype=np.float64).reshape(-1, 8, 3)
    if len(corners) == 0:
        return np.zeros(0)
    t = (np.arange(grid) + 0.5) / grid
    weights = np.stack(np.meshgrid(t, t, t, indexing="ij"), axis=-1).reshape(-1, 3)  # (G, 3)
    edges = corners[:, [1, 3, 4]] - corners[:, :1]  # (N, 3, 3): the box's three edge vectors
    points = corners[:, :1] + weights @ edges  # (N, G, 3)
    uv, depth = project_points(intrinsic, points)
    inside = (
        (depth >= near_m)
        & (uv[..., 0] >= 0)
        & (uv[..., 0] <= width_px)
        & (uv[..., 1] >= 0)
        & (uv[..., 1] <= height_px)
    )
    return inside.mean(axis=1)


def box_iou_2d(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise IoU of (N, 4) boxes a and b ([u_min, v_min, u_max, v_max]); 0 where either is NaN."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    iw = np.minimum(a[:, 2], b[:, 2]) - np.maximum(a[:, 0], b[:, 0])
    ih = np.minimum(a[:, 3], b[:, 3]) - np.maximum(a[:, 1], b[:, 1])
    inter = np.clip(iw, 0, None) * np.clip(ih, 0, None)
    union = (
        (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
        + (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
        - inter
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = inter / union
    return np.nan_to_num(iou, nan=0.0)
