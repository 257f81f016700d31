"""What the geometry says each object of one image shows: its hull, what hides it, its share.

Inputs are exact on any data set with 3D boxes and LiDAR: each object's projected 3D box hull (the
exact silhouette of its box, ``camera_views.image_hulls``), its depth, and the scene's LiDAR returns
projected into the same image with the image's own pose. Per image:

1. **Box z-buffer.** Hulls are painted far to near (box-centre depth; ties: the lower index is
   painted last, i.e. wins); the pixels an object still owns are its *z-buffered hull*.
2. **LiDAR depth.** Every return is splatted into a per-pixel minimum-depth map and spread by a
   square of half-width ``radius_px`` (about the beam spacing, so a return speaks for the pixels around it). A
   hull pixel is *LiDAR-covered* when a return lies within the disc, and *LiDAR-occluded* when that
   return is more than ``margin_m`` nearer than the object's nearest corner: something the LiDAR
   saw stands between the camera and the object there.
3. The *geometric mask* of an object is its hull minus its LiDAR-occluded pixels, and minus the
   pixels a nearer hull owns where no return was seen: where the LiDAR has evidence it decides
   (hulls are larger than the cars in them, so a nearer car's hull often covers pixels where this
   object's own returns show it is seen), elsewhere the box z-buffer decides.

Shares (all per object, in [0, 1]):

- ``hull_occluded_share = 1 - zbuffered_px / hull_px`` (covered by nearer annotated boxes);
- ``lidar_occluded_share = lidar_occluded_px / lidar_covered_px``, NaN where no return falls on
  the hull (no LiDAR evidence: the object is judged by the boxes alone);
- ``visible_share = geometric_px / hull_px``.

Hull pixels are those whose centres lie inside the hull (``convex_polygon_mask``, the pixel
convention of ``calib.projection``). The work is per image; each object touches only the crop of
its hull's bounding box (a few array operations per object), never the whole image.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

__all__ = ["ImageGeometry", "convex_polygon_mask", "image_geometry", "radius_px_from_angle"]


@dataclass
class ImageGeometry:
    """Per-object geometry of one image, all (N,) unless said otherwise.

    Attributes:
        masks: (N, H, W) bool geometric masks (see the module docstring).
        hull_px: int64 pixels of each hull (pixel centres inside it).
        zbuffered_px: int64 hull pixels not owned by a nearer hull.
        lidar_covered_px: int64 hull pixels with a LiDAR return within the disc.
        lidar_occluded_px: int64 hull pixels whose nearest such return is nearer than the object.
        geometric_px: int64 pixels of each geometric mask.
        boxes_px: (N, 4) int64 [u0, v0, u1, v1] bounding crop of each hull (empty: all 0).
    """

    masks: np.ndarray
    hull_px: np.ndarray
    zbuffered_px: np.ndarray
    lidar_covered_px: np.ndarray
    lidar_occluded_px: np.ndarray
    geometric_px: np.ndarray
    boxes_px: np.ndarray

    @property
    def hull_occluded_share(self) -> np.ndarray:
        """(N,) share of the hull covered by nearer hulls (1 for an empty hull)."""
        return 1.0 - self.zbuffered_px / np.maximum(self.hull_px, 1)

    @property
    def lidar_occluded_share(self) -> np.ndarray:
        """(N,) share of the LiDAR-covered hull where a return is nearer; NaN without returns."""
        with np.errstate(divide="ignore", invalid="ignore"):
            share = self.lidar_occluded_px / self.lidar_covered_px
        return np.where(self.lidar_covered_px > 0, share, np.nan)

    @property
    def visible_share(self) -> np.ndarray:
        """(N,) share of the hull left in the geometric mask (0 for an empty hull)."""
        return self.geometric_px / np.maximum(self.hull_px, 1)


def radius_px_from_angle(intrinsic: np.ndarray, angle_deg: float) -> int:
    """Pixels spanned by ``angle_deg`` at the image centre (focal length x tan), at least 1."""
    focal_px = 0.5 * (float(intrinsic[0][0]) + float(intrinsic[1][1]))
    return max(1, int(round(focal_px * np.tan(np.deg2rad(angle_deg)))))


def convex_polygon_mask(polygon: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
    """(v1 - v0, u1 - u0) bool: the pixels of crop ``box`` = (u0, v0, u1, v1) whose centres lie in
    the convex ``polygon`` ((K, 2) pixels, any winding).

    Pixel (v, u) covers [u, u + 1] x [v, v + 1] (``calib.projection``); a centre on a left or
    right edge is inside, rows are half-open (a centre on the top edge is in, on the bottom edge
    out), so two hulls sharing an edge never share a pixel row twice. One scanline per row, all
    rows at once.
    """
    u0, v0, u1, v1 = box
    p = np.asarray(polygon, np.float64)
    q = np.roll(p, -1, axis=0)
    rows = v0 + np.arange(v1 - v0) + 0.5
    dy = q[:, 1] - p[:, 1]
    lo, hi = np.minimum(p[:, 1], q[:, 1]), np.maximum(p[:, 1], q[:, 1])
    spans = (rows[:, None] >= lo) & (rows[:, None] < hi) & (dy != 0)  # (rows, edges)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = p[:, 0] + (rows[:, None] - p[:, 1]) / dy * (q[:, 0] - p[:, 0])
    left = np.where(spans, x, np.inf).min(axis=1)
    right = np.where(spans, x, -np.inf).max(axis=1)
    cols = u0 + np.arange(u1 - u0) + 0.5
    return (cols[None, :] >= left[:, None]) & (cols[None, :] <= right[:, None])


def _lidar_min_depth(
    scene_uvd: np.ndarray,
    region: tuple[int, int, int, int],
    radius_px: int,
    image_size_px: tuple[int, int],
) -> np.ndarray:
    """(v1 - v0, u1 - u0) float32 nearest return within ``radius_px`` (a square of that
    half-width, OpenCV's separable minimum filter) of each pixel of the image crop ``region`` =
    (u0, v0, u1, v1); inf where none. Returns in the image up to ``radius_px`` outside the crop
    count; ``image_size_px`` is (width, height)."""
    u0, v0, u1, v1 = region
    if len(scene_uvd) == 0:
        return np.full((v1 - v0, u1 - u0), np.inf, np.float32)
    # The returns are splatted on the crop grown by the radius (cut to the image), so the filter
    # sees every return that reaches a crop pixel; the grown border is dropped after filtering.
    width_px, height_px = image_size_px
    gu0, gv0 = max(u0 - radius_px, 0), max(v0 - radius_px, 0)
    gu1, gv1 = min(u1 + radius_px, width_px), min(v1 + radius_px, height_px)
    u = scene_uvd[:, 0].astype(np.int64)
    v = scene_uvd[:, 1].astype(np.int64)
    inside = (u >= gu0) & (u < gu1) & (v >= gv0) & (v < gv1)
    u, v, depth = u[inside] - gu0, v[inside] - gv0, scene_uvd[inside, 2]
    grown = np.full((gv1 - gv0, gu1 - gu0), np.inf, np.float32)
    order = np.argsort(-depth, kind="stable")  # nearest written last: it wins
    grown[v[order], u[order]] = depth[order]
    kernel = cv2.getStructuringElement(cv2.MORPH_RECT, (2 * radius_px + 1, 2 * radius_px + 1))
    grown = cv2.erode(grown, kernel, borderType=cv2.BORDER_CONSTANT, borderValue=np.inf)
    return grown[v0 - gv0 : v1 - gv0, u0 - gu0 : u1 - gu0]


def image_geometry(
    hulls: list[np.ndarray],
    depth_m: np.ndarray,
    near_depth_m: np.ndarray,
    scene_uvd: np.ndarray,
    image_size_px: tuple[int, int],
    radius_px: int,
    margin_m: float,
) -> ImageGeometry:
    """The z-buffered hulls, LiDAR occlusion and geometric masks of the N objects of one image.

    Args:
        hulls: N (K_i, 2) polygons in pixels, clipped to the image (empty: nothing to paint).
        depth_m: (N,) box-centre depth along the optical axis (z-buffer order), metres.
        near_depth_m: (N,) depth of each box's nearest corner, metres.
        scene_uvd: (Q, 3) u, v (pixels), depth (metres) of the LiDAR returns in this image.
        image_size_px: (width, height).
        radius_px: disc radius over which one return speaks, pixels.
        margin_m: a return is nearer than the object when its depth is below ``near_depth_m -
            margin_m``.
    """
    width_px, height_px = (int(x) for x in image_size_px)
    n = len(hulls)
    depth = np.asarray(depth_m, np.float64).reshape(-1)
    near = np.asarray(near_depth_m, np.float64).reshape(-1)
    # Column-major per mask ((N, W, H) storage): COCO RLE encodes it without a transposing copy.
    masks = np.zeros((n, width_px, height_px), bool).transpose(0, 2, 1)
    counts = np.zeros((5, n), np.int64)
    boxes = np.zeros((n, 4), np.int64)
    if n == 0:
        return ImageGeometry(masks, *counts, boxes)
    hull_masks: list[np.ndarray | None] = []
    for i, polygon in enumerate(hulls):
        hull = None
        if len(polygon) >= 3:
            u0, v0 = np.maximum(np.floor(polygon.min(axis=0)).astype(int), 0)
            u1 = min(int(np.ceil(polygon[:, 0].max())), width_px)
            v1 = min(int(np.ceil(polygon[:, 1].max())), height_px)
            if u1 > u0 and v1 > v0:
                boxes[i] = (u0, v0, u1, v1)
                hull = convex_polygon_mask(polygon, (u0, v0, u1, v1))
        hull_masks.append(hull)
    painted = np.array([h is not None for h in hull_masks])
    if not painted.any():
        return ImageGeometry(masks, *counts, boxes)
    # The owner map and the LiDAR depth cover the union of the hulls' crops only (nothing is
    # painted or read outside it).
    ru0, rv0 = boxes[painted, :2].min(axis=0)
    ru1, rv1 = boxes[painted, 2:].max(axis=0)
    owner = np.full((rv1 - rv0, ru1 - ru0), -1, np.int32)
    for i in np.lexsort((-np.arange(n), -depth)):  # far to near; equal depth: lower index last
        if hull_masks[i] is not None:
            u0, v0, u1, v1 = boxes[i]
            owner[v0 - rv0 : v1 - rv0, u0 - ru0 : u1 - ru0][hull_masks[i]] = i
    lidar = _lidar_min_depth(
        np.asarray(scene_uvd, np.float32),
        (int(ru0), int(rv0), int(ru1), int(rv1)),
        radius_px,
        (width_px, height_px),
    )
    for i, hull in enumerate(hull_masks):
        if hull is None:
            continue
        u0, v0, u1, v1 = boxes[i]
        own = owner[v0 - rv0 : v1 - rv0, u0 - ru0 : u1 - ru0] == i
        nearest = lidar[v0 - rv0 : v1 - rv0, u0 - ru0 : u1 - ru0]
        covered = hull & np.isfinite(nearest)
        occluded = covered & (nearest < near[i] - margin_m)
        # Where the LiDAR saw something, it decides (a hull is larger than the car in it, so a
        # nearer hull often covers pixels where this object's own returns say it is seen);
        # where it saw nothing, the box z-buffer does.
        geometric = hull & ~occluded & (own | covered)
        masks[i, v0:v1, u0:u1] = geometric
        counts[:, i] = (
            np.count_nonzero(hull),
            np.count_nonzero(own),
            np.count_nonzero(covered),
            np.count_nonzero(occluded),
            np.count_nonzero(geometric),
        )
    return ImageGeometry(masks, *counts, boxes)
