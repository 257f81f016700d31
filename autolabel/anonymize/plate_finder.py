"""Finding the licence plate inside a geometric plate patch, from the image.

The geometric patch (:mod:`.geometric`) knows where a plate can be: centred on a vehicle's face,
somewhere between the lowest and highest mounting height. Inside it the plate is a bright
rectangle of a known size in pixels (from the box's depth) crowded with dark strokes, so its
horizontal gradients are dense. Candidates are connected components of (a) pixels brighter than
the patch's Otsu threshold and (b) closed horizontal-gradient blobs; a candidate is a plate when
its size fits a plate at that depth (width from half the US plate, for oblique views, to 1.4
of the EU plate; the nearer to a plate's width the better), its aspect ratio is a plate's, it is mostly filled, and it holds strokes
(gradient density and contrast). The best-scoring candidate wins; none found means the caller
blurs the whole patch.

OpenCV on one crop per patch; a few dozen patches per image.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from autolabel.anonymize.blur import polygons_mask
from autolabel.anonymize.geometric import SOURCE_FOUND_PLATE, SOURCE_PLATE, BlurRegions


@dataclass(frozen=True)
class PlateFinderConfig:
    """When and how plates are searched for inside plate patches.

    Attributes:
        enabled: search at all (off, the default: every patch is blurred whole; on, it still
            replaced a synthetic plate by a false find in 1 of ~600 images, see the README).
        min_plate_px: search only where the plate envelope is at least this wide in pixels
            (below, the patch is small and blurring it whole costs little).
        min_patch_ratio: search only where the patch's area is at least this multiple of the
            plate envelope's (the geometry is unsure); tighter patches are blurred whole.
        min_facing_cos: search only plates seen this squarely (cosine between the face's normal
            and the ray to the camera); a plate seen edge-on is a sliver no finder can trust.
        aspect_range: width / height of an accepted plate, in pixels.
        min_fill: share of the candidate's rectangle its component fills.
        min_edge_density: share of the candidate's pixels with a strong horizontal gradient.
        min_contrast: standard deviation of grey levels inside the candidate (0..255).
        grow_fraction: a found plate is blurred grown by this fraction of its size per side.
    """

    enabled: bool = False
    min_plate_px: float = 14.0
    min_patch_ratio: float = 2.0
    min_facing_cos: float = 0.5
    aspect_range: tuple[float, float] = (1.1, 6.0)
    min_fill: float = 0.55
    min_edge_density: float = 0.12
    min_contrast: float = 25.0
    grow_fraction: float = 0.2

    def __post_init__(self) -> None:
        lo, hi = self.aspect_range
        if not 0 < lo < hi:
            raise ValueError(f"aspect_range: expected 0 < low < high, got {self.aspect_range!r}")
        for name in ("min_plate_px", "min_patch_ratio", "min_facing_cos", "min_fill", "min_edge_density",
                     "min_contrast", "grow_fraction"):  # fmt: skip
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: must be >= 0, got {getattr(self, name)!r}")


def _components(binary: np.ndarray) -> np.ndarray:
    """(K, 5) [u, v, w, h, area] of the 8-connected components of a uint8 mask."""
    n, _, stats, _ = cv2.connectedComponentsWithStats(binary, connectivity=8)
    return stats[1:n].astype(np.float64).reshape(-1, 5)


def plate_in_patch(
    gray: np.ndarray, inside: np.ndarray, plate_px: tuple[float, float], config: PlateFinderConfig
) -> np.ndarray | None:
    """The plate's [u0, v0, u1, v1] in the crop's pixels, or None.

    Args:
        gray: (h, w) uint8 crop holding the patch.
        inside: (h, w) bool, the patch's pixels in the crop.
        plate_px: (width, height) of the plate envelope at the patch's depth, pixels.
        config: acceptance thresholds.
    """
    cfg = config
    env_w, env_h = plate_px
    vals = gray[inside]
    if vals.size < 16:
        return None
    otsu, _ = cv2.threshold(vals.reshape(-1, 1), 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU)
    bright = ((gray > otsu) & inside).astype(np.uint8)
    gx = np.abs(cv2.Sobel(gray, cv2.CV_32F, 1, 0, ksize=3))
    strong = (gx > max(40.0, float(np.percentile(gx[inside], 75)))) & inside
    kx = max(3, int(round(env_w / 8)))
    closed = cv2.morphologyEx(
        strong.astype(np.uint8), cv2.MORPH_CLOSE, cv2.getStructuringElement(cv2.MORPH_RECT, (kx, 3))
    )
    cand = np.concatenate([_components(bright), _components(closed & inside.astype(np.uint8))])
    if len(cand) == 0:
        return None
    u, v, w, h, area = cand.T
    aspect = w / np.maximum(h, 1)
    us_w = env_w * 0.31 / 0.52  # the narrowest plate (US) at this depth
    min_w = max(4.0, 0.5 * us_w)
    ok = (
        (w >= min_w)
        & (w <= 1.4 * env_w)
        & (h >= max(3.0, 0.3 * env_h))
        & (h <= 1.8 * env_h)
        & (aspect >= cfg.aspect_range[0])
        & (aspect <= cfg.aspect_range[1])
        & (area >= cfg.min_fill * w * h * 0.5)
    )
    best, best_score = None, 0.0
    for i in np.flatnonzero(ok):  # a handful of size-filtered candidates per patch
        a0, b0, a1, b1 = int(u[i]), int(v[i]), int(u[i] + w[i]), int(v[i] + h[i])
        crop = gray[b0:b1, a0:a1]
        fill = float(bright[b0:b1, a0:a1].mean())
        edges = float(strong[b0:b1, a0:a1].mean())
        contrast = float(crop.std())
        if fill < cfg.min_fill or edges < cfg.min_edge_density or contrast < cfg.min_contrast:
            continue
        # Prefer the candidate whose width is nearest a plate's at this depth (US .. EU).
        size = min(w[i] / us_w, 1.0, 1.4 * env_w / w[i])
        score = fill * edges * contrast * size**2
        if score > best_score:
            best, best_score = np.array([a0, b0, a1, b1], np.float64), score
    return best


def refine_plate_regions(
    image_bgr: np.ndarray, regions: BlurRegions, config: PlateFinderConfig | None = None
) -> tuple[BlurRegions, np.ndarray]:
    """Plate patches replaced by the plate found inside them, where one is found.

    Args:
        image_bgr: (H, W, 3) uint8.
        regions: any regions; only ``SOURCE_PLATE`` ones large and unsure enough are searched.
        config: search settings.

    Returns:
        The regions (found plates as ``SOURCE_FOUND_PLATE`` rectangles, grown by
        ``grow_fraction``, in place of their patch) and (R,) bool, which regions were replaced.
    """
    cfg = config or PlateFinderConfig()
    found = np.zeros(len(regions), bool)
    if not cfg.enabled or len(regions) == 0:
        return regions, found
    height_px, width_px = image_bgr.shape[:2]
    bounds = regions.bounds_px(width_px, height_px)
    area = (bounds[:, 2] - bounds[:, 0]) * (bounds[:, 3] - bounds[:, 1])
    env = regions.expected_px
    # A patch the image border cuts may hold a cut plate, which no size test recognizes.
    p = regions.polygon_px
    whole = (
        (p.min(axis=1) >= 0).all(axis=1)
        & (p[..., 0].max(axis=1) <= width_px)
        & (p[..., 1].max(axis=1) <= height_px)
    )
    search = (
        whole
        & (regions.source == SOURCE_PLATE)
        & (env[:, 0] >= cfg.min_plate_px)
        & (regions.facing_cos >= cfg.min_facing_cos)
        & (area >= cfg.min_patch_ratio * env[:, 0] * env[:, 1])
    )
    if not search.any():
        return regions, found
    gray_full = cv2.cvtColor(np.ascontiguousarray(image_bgr), cv2.COLOR_BGR2GRAY)
    polygons = regions.polygon_px.copy()
    source = regions.source.copy()
    for i in np.flatnonzero(search):  # one crop per plate patch
        u0, v0, u1, v1 = (int(x) for x in bounds[i])
        inside = polygons_mask(regions.polygon_px[i : i + 1], v1 - v0, u1 - u0, (u0, v0))
        box = plate_in_patch(gray_full[v0:v1, u0:u1], inside, tuple(env[i]), cfg)
        if box is None:
            continue
        g = cfg.grow_fraction * np.array([-1, -1, 1, 1]) * (box[2:] - box[:2]).max() + np.array(
            [u0, v0, u0, v0], np.float64
        )
        r = box + g
        found[i] = True
        polygons[i] = BlurRegions.from_rects(r[None], SOURCE_FOUND_PLATE).polygon_px[0]
        source[i] = SOURCE_FOUND_PLATE
    return (
        BlurRegions(polygons, source, regions.expected_px, regions.facing_cos, regions.hidden_px),
        found,
    )
