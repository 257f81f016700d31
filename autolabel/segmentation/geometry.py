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
convention of ``calib.projection``). The work is per image, in one numba kernel (``_paint_hulls``:
the scanlines of ``convex_polygon_mask`` in the same float64 operations, so the same pixels); each
object touches only the crop of its hull's bounding box, never the whole image.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

__all__ = ["ImageGeometry", "convex_polygon_mask", "image_geometry", "radius_px_from_angle"]


@dataclass
class ImageGeometry:
    """Per-object geometry of one image, all (N,) unless said otherwise.

    Each geometric mask is kept on its hull's crop only (``crop_mask``): a full-image stack costs
    a zeroed (N, H, W) buffer per image, which the segmenter that reads the masks fills again.

    Attributes:
        crop_pixels: bool, every object's geometric mask on its crop ``boxes_px[i]``, one after
            the other, each column-major ((u1 - u0, v1 - v0) C order; see ``crop_mask``).
        crop_offsets: (N + 1,) int64, where each object's crop starts in ``crop_pixels``.
        hull_px: int64 pixels of each hull (pixel centres inside it).
        zbuffered_px: int64 hull pixels not owned by a nearer hull.
        lidar_covered_px: int64 hull pixels with a LiDAR return within the disc.
        lidar_occluded_px: int64 hull pixels whose nearest such return is nearer than the object.
        geometric_px: int64 pixels of each geometric mask.
        boxes_px: (N, 4) int64 [u0, v0, u1, v1] bounding crop of each hull (empty: all 0).
        image_size_px: (width, height) of the image, pixels.
    """

    crop_pixels: np.ndarray
    crop_offsets: np.ndarray
    hull_px: np.ndarray
    zbuffered_px: np.ndarray
    lidar_covered_px: np.ndarray
    lidar_occluded_px: np.ndarray
    geometric_px: np.ndarray
    boxes_px: np.ndarray
    image_size_px: tuple[int, int]

    def crop_mask(self, i: int) -> np.ndarray:
        """(v1 - v0, u1 - u0) bool view of object ``i``'s geometric mask on its crop
        ``boxes_px[i]`` (column-major, as the full-image masks)."""
        u0, v0, u1, v1 = (int(x) for x in self.boxes_px[i])
        start, stop = self.crop_offsets[i], self.crop_offsets[i + 1]
        return self.crop_pixels[start:stop].reshape(u1 - u0, v1 - v0).T

    @property
    def masks(self) -> np.ndarray:
        """(N, H, W) bool geometric masks (see the module docstring), built on each call,
        column-major per mask ((N, W, H) storage: COCO RLE encodes it without a transposing
        copy)."""
        width_px, height_px = self.image_size_px
        n = len(self.boxes_px)
        masks = np.zeros((n, width_px, height_px), bool).transpose(0, 2, 1)
        for i, (u0, v0, u1, v1) in enumerate(self.boxes_px):
            masks[i, v0:v1, u0:u1] = self.crop_mask(i)
        return masks

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
    half-width around the return's pixel) of each pixel of the image crop ``region`` = (u0, v0,
    u1, v1); inf where none. Returns in the image up to ``radius_px`` outside the crop count;
    ``image_size_px`` is (width, height).

    Each return lowers the square around its pixel directly: the same map as splatting the
    returns and eroding with a (2 r + 1)^2 square (a minimum does not depend on the order), but
    an image's 2 000 to 20 000 returns cost less than filtering every pixel of the crop twice."""
    u0, v0, u1, v1 = region
    out = np.full((v1 - v0, u1 - u0), np.inf, np.float32)
    if len(scene_uvd) == 0:
        return out
    width_px, height_px = image_size_px
    # The returns of the grown crop cut to the image (a float32 pixel coordinate may round up
    # onto the image's edge: such a return falls outside, as it did on the grown grid).
    grown = (max(u0 - radius_px, 0), max(v0 - radius_px, 0))
    grown += (min(u1 + radius_px, width_px), min(v1 + radius_px, height_px))
    scene = np.ascontiguousarray(scene_uvd, np.float32)
    _splat_squares(out, scene, u0, v0, radius_px, *grown)
    return out


@numba.njit(cache=True)
def _splat_squares(out, scene_uvd, u0, v0, radius_px, gu0, gv0, gu1, gv1):
    """The kernel of ``_lidar_min_depth``: each return whose pixel (its coordinates truncated,
    as ``astype(int64)``) lies in [gu0, gu1) x [gv0, gv1) lowers ``out`` (the crop at (u0, v0))
    to its depth over the square of half-width ``radius_px`` around that pixel."""
    rows, cols = out.shape
    for k in range(len(scene_uvd)):
        u = np.int64(scene_uvd[k, 0])
        v = np.int64(scene_uvd[k, 1])
        if u < gu0 or u >= gu1 or v < gv0 or v >= gv1:
            continue
        d = scene_uvd[k, 2]
        c0 = max(u - radius_px - u0, 0)
        c1 = min(u + radius_px + 1 - u0, cols)
        for r in range(max(v - radius_px - v0, 0), min(v + radius_px + 1 - v0, rows)):
            for c in range(c0, c1):
                if d < out[r, c]:
                    out[r, c] = d


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
    counts = np.zeros((5, n), np.int64)
    boxes = np.zeros((n, 4), np.int64)
    size = (width_px, height_px)
    if n == 0:
        return ImageGeometry(np.zeros(0, bool), np.zeros(1, np.int64), *counts, boxes, size)
    polygons = [np.asarray(p, np.float64).reshape(-1, 2) for p in hulls]
    painted = np.zeros(n, bool)
    for i, polygon in enumerate(polygons):
        if len(polygon) >= 3:
            u0, v0 = np.maximum(np.floor(polygon.min(axis=0)).astype(int), 0)
            u1 = min(int(np.ceil(polygon[:, 0].max())), width_px)
            v1 = min(int(np.ceil(polygon[:, 1].max())), height_px)
            if u1 > u0 and v1 > v0:
                boxes[i] = (u0, v0, u1, v1)
                painted[i] = True
    offsets = np.zeros(n + 1, np.int64)
    offsets[1:] = np.cumsum((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]))
    crops = np.zeros(offsets[-1], bool)
    if not painted.any():
        return ImageGeometry(crops, offsets, *counts, boxes, size)
    # The owner map and the LiDAR depth cover the union of the hulls' crops only (nothing is
    # painted or read outside it).
    ru0, rv0 = boxes[painted, :2].min(axis=0)
    ru1, rv1 = boxes[painted, 2:].max(axis=0)
    lidar = _lidar_min_depth(
        np.asarray(scene_uvd, np.float32),
        (int(ru0), int(rv0), int(ru1), int(rv1)),
        radius_px,
        (width_px, height_px),
    )
    vertex_offsets = np.zeros(n + 1, np.int64)
    vertex_offsets[1:] = np.cumsum([len(p) for p in polygons])
    # A return is nearer when its float32 depth is below the threshold in float32 (the
    # comparison NumPy made of the float32 depth map with a float64 scalar).
    nearer_than = (near - margin_m).astype(np.float32)
    _paint_hulls(
        np.concatenate(polygons) if vertex_offsets[-1] else np.zeros((0, 2)),
        vertex_offsets,
        boxes,
        painted,
        np.lexsort((-np.arange(n), -depth)),  # far to near; equal depth: lower index last
        lidar,
        int(ru0),
        int(rv0),
        nearer_than,
        crops,
        offsets,
        counts,
    )
    return ImageGeometry(crops, offsets, *counts, boxes, size)


@numba.njit(cache=True)
def _row_span(polygon: np.ndarray, row: float) -> tuple[float, float]:
    """Left and right crossings of the horizontal line ``row`` with the convex ``polygon`` (the
    scanline of ``convex_polygon_mask``, edge by edge in the same float64 operations); (inf,
    -inf) where it misses."""
    left, right = np.inf, -np.inf
    k = len(polygon)
    for e in range(k):
        px, py = polygon[e, 0], polygon[e, 1]
        qx, qy = polygon[(e + 1) % k, 0], polygon[(e + 1) % k, 1]
        dy = qy - py
        if dy != 0 and row >= min(py, qy) and row < max(py, qy):
            x = px + (row - py) / dy * (qx - px)
            left = min(left, x)
            right = max(right, x)
    return left, right


@numba.njit(cache=True)
def _row_columns(polygon: np.ndarray, row: int, u0: int, u1: int) -> tuple[int, int]:
    """[lo, hi): the columns in [u0, u1) of pixel row ``row`` whose centres lie in the convex
    ``polygon``, by the float64 tests of ``convex_polygon_mask`` (centre >= left crossing and
    <= right crossing), found from a rounded guess and checked exactly."""
    left, right = _row_span(polygon, row + 0.5)
    if not left <= right:
        return u0, u0
    lo = min(max(u0, int(np.ceil(left - 0.5))), u1)
    while lo > u0 and (lo - 1) + 0.5 >= left:
        lo -= 1
    while lo < u1 and not (lo + 0.5 >= left):
        lo += 1
    hi = max(min(u1, int(np.floor(right - 0.5)) + 1), lo)
    while hi < u1 and hi + 0.5 <= right:
        hi += 1
    while hi > lo and not ((hi - 1) + 0.5 <= right):
        hi -= 1
    return lo, hi


@numba.njit(cache=True)
def _paint_hulls(
    polygons,
    offsets,
    boxes,
    painted,
    order,
    lidar,
    ru0,
    rv0,
    nearer_than,
    crop_pixels,
    crop_offsets,
    counts,
):
    """The kernel of ``image_geometry``: z-buffers the painted hulls (``order``: far to near) on
    the union crop at (ru0, rv0), sets each geometric mask on its crop in ``crop_pixels`` (from
    ``crop_offsets[i]``, column-major: ``ImageGeometry.crop_pixels``) and writes ``counts`` (5,
    N): hull, own, covered, occluded, geometric pixels. ``lidar`` is the union crop's
    nearest-return map; a pixel is occluded where that return's depth is below
    ``nearer_than``."""
    n = len(boxes)
    owner = np.full(lidar.shape, -1, np.int32)
    # Each hull's columns, row by row, computed once (both passes read them).
    starts = np.zeros(n + 1, np.int64)
    for i in range(n):
        starts[i + 1] = starts[i] + (boxes[i, 3] - boxes[i, 1] if painted[i] else 0)
    columns = np.zeros((starts[n], 2), np.int64)
    for i in range(n):
        if painted[i]:
            polygon = polygons[offsets[i] : offsets[i + 1]]
            for r in range(boxes[i, 3] - boxes[i, 1]):
                lo, hi = _row_columns(polygon, boxes[i, 1] + r, boxes[i, 0], boxes[i, 2])
                columns[starts[i] + r, 0] = lo
                columns[starts[i] + r, 1] = hi
    for i in order:
        if painted[i]:
            for r in range(boxes[i, 3] - boxes[i, 1]):
                v = boxes[i, 1] + r
                for u in range(columns[starts[i] + r, 0], columns[starts[i] + r, 1]):
                    owner[v - rv0, u - ru0] = i
    for i in range(n):
        if not painted[i]:
            continue
        threshold = nearer_than[i]
        crop_h = boxes[i, 3] - boxes[i, 1]
        base = crop_offsets[i] - boxes[i, 0] * crop_h - boxes[i, 1]  # of pixel (u, v): + u*h + v
        hull = own = covered = occluded = geometric = 0
        for r in range(crop_h):
            v = boxes[i, 1] + r
            lo, hi = columns[starts[i] + r, 0], columns[starts[i] + r, 1]
            hull += hi - lo
            for u in range(lo, hi):
                is_own = owner[v - rv0, u - ru0] == i
                nearest = lidar[v - rv0, u - ru0]
                is_covered = np.isfinite(nearest)
                is_occluded = is_covered and nearest < threshold
                own += is_own
                covered += is_covered
                occluded += is_occluded
                if not is_occluded and (is_own or is_covered):
                    crop_pixels[base + u * crop_h + v] = True
                    geometric += 1
        counts[0, i] = hull
        counts[1, i] = own
        counts[2, i] = covered
        counts[3, i] = occluded
        counts[4, i] = geometric
