"""Set-of-Mark marks drawn as STRIDE-QA-Bench draws them (``marks.style: strideqa``).

Their renderer (``strideqa_bench/utils/som.py``, a detectron2 ``Visualizer`` drawing through
matplotlib at 100 dpi; their inference calls it with ``alpha=0.2`` and marks and masks on) draws
per region:

- the mask filled in pure green (0, 255, 0) at opacity 0.2;
- its outline (the mask's contours, pieces under 10 px left out) in opaque green, line width
  ``max(font_pt // 15, 1)`` points;
- a mask with holes is filled pixel by pixel instead, without an outline;
- the region id as a bare number ("2", not "Region [2]"), white DejaVu Sans of ``font_pt``
  points, ``font_pt = max(sqrt(H W) // 90, 10)`` (16 pt = 22 px on a 1920 x 1080 frame), on a black
  box at opacity 0.8 that hugs the text (0.7 pt padding); centred 2 px right of the mask's most
  interior pixel (the argmax of its distance transform, the middle one of ties in row order),
  its top 6 px above it. Labels are drawn over every mask.

This module reproduces those rules with OpenCV and Pillow (no matplotlib), so a model tuned on
STRIDE-QA sees familiar marks; ``bench/strideqa_marks.py`` measures the pixel difference to
their renderer.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import cv2
import numpy as np

#: Their mark colour (RGB green), fill opacity (their inference's ``alpha``) and label opacity.
GREEN_BGR = (0, 255, 0)
FILL_ALPHA = 0.2
LABEL_BOX_ALPHA = 0.8
#: matplotlib's default figure resolution: points to pixels.
_DPI = 100.0
_PX_PER_PT = _DPI / 72.0
#: Outline pieces whose polygon covers fewer pixels are not drawn (their ``area_threshold``).
_MIN_PIECE_AREA_PX = 10
_LABEL_PAD_PT = 0.7
_LABEL_DX_PX, _LABEL_DY_PX = 2, -6


def font_size_pt(height_px: int, width_px: int) -> float:
    """Their label size in points: ``max(sqrt(H W) // 90, 10)``."""
    return max(float(np.sqrt(height_px * width_px) // 90), 10.0)


@lru_cache(maxsize=8)
def _font(size_px: float):
    from PIL import ImageFont

    for name in ("DejaVuSans.ttf", "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"):
        try:
            return ImageFont.truetype(name, size_px)
        except OSError:
            continue
    try:  # matplotlib ships the font their renderer uses
        import matplotlib

        path = f"{matplotlib.get_data_path()}/fonts/ttf/DejaVuSans.ttf"
        return ImageFont.truetype(path, size_px)
    except (ImportError, OSError):
        return ImageFont.load_default(size_px)


def label_anchor_uv(crop: np.ndarray) -> tuple[int, int]:
    """(u, v) in the crop of their label anchor: of the pixels at the maximum of the mask's
    distance transform (the crop's border counts as an edge), the middle one in row order."""
    padded = np.pad(crop.astype(np.uint8), 1)
    dist = cv2.distanceTransform(padded, cv2.DIST_L2, cv2.DIST_MASK_PRECISE)[1:-1, 1:-1]
    vs, us = np.nonzero(dist == dist.max())
    k = len(vs) // 2
    return int(us[k]), int(vs[k])


def _outline_pieces(crop: np.ndarray, u0: int, v0: int) -> tuple[list[np.ndarray], bool]:
    """Contours of a mask crop in image pixels (+0.5, pixel centres), pieces under 10 px out;
    and whether the mask has holes."""
    import pycocotools.mask as mask_util

    found, hierarchy = cv2.findContours(
        np.ascontiguousarray(crop, dtype=np.uint8), cv2.RETR_CCOMP, cv2.CHAIN_APPROX_NONE
    )
    if hierarchy is None:
        return [], False
    has_holes = bool((hierarchy.reshape(-1, 4)[:, 3] >= 0).any())
    h, w = crop.shape
    pieces = []
    for c in found:
        if len(c) < 3:
            continue
        poly = c.reshape(-1, 2).astype(np.float64) + 0.5
        area = mask_util.area(mask_util.frPyObjects([poly.reshape(-1).tolist()], h, w))
        if int(np.sum(area)) < _MIN_PIECE_AREA_PX:
            continue
        pieces.append(poly + (u0, v0))
    return pieces, has_holes


def _blend(out: np.ndarray, where: np.ndarray, colour: Sequence[int], alpha: float) -> None:
    region = out[where].astype(np.float32)
    out[where] = np.round(region * (1.0 - alpha) + np.float32(colour) * alpha).astype(np.uint8)


def render_strideqa_marks(
    image_bgr: np.ndarray,
    region_id: np.ndarray,
    crops: Sequence[tuple[int, int, np.ndarray]],
) -> np.ndarray:
    """A copy of the image with STRIDE-QA-Bench marks (see the module docstring).

    Args:
        image_bgr: (H, W, 3) uint8 BGR.
        region_id: (R,) region ids (the label text).
        crops: per region (u0, v0, crop): the region's pixels as an (h, w) bool crop whose top
            left pixel is (u0, v0); an empty crop draws nothing.

    Returns:
        (H, W, 3) uint8 BGR image. Regions are drawn in the given order, labels last.
    """
    out = image_bgr.copy()
    height_px, width_px = out.shape[:2]
    font_pt = font_size_pt(height_px, width_px)
    line_px = max(1, int(round(max(font_pt // 15, 1.0) * _PX_PER_PT)))
    anchors: list[tuple[int, int, int]] = []
    for rid, (u0, v0, crop) in zip(np.asarray(region_id).tolist(), crops, strict=True):
        if crop.size == 0 or not crop.any():
            continue
        h, w = crop.shape
        pieces, has_holes = _outline_pieces(crop, u0, v0)
        _blend(out[v0 : v0 + h, u0 : u0 + w], crop, GREEN_BGR, FILL_ALPHA)
        if not has_holes:
            # Outlines through pixel centres, anti-aliased (cv2 takes fixed-point coordinates).
            shift = 4
            pts = [np.round(p * (1 << shift)).astype(np.int32).reshape(-1, 1, 2) for p in pieces]
            cv2.polylines(out, pts, True, GREEN_BGR, line_px, cv2.LINE_AA, shift)
        du, dv = label_anchor_uv(crop)
        anchors.append((int(rid), u0 + du, v0 + dv))
    for rid, u, v in anchors:
        _draw_label(out, str(rid), u + _LABEL_DX_PX, v + _LABEL_DY_PX, font_pt)
    return out


def _draw_label(out: np.ndarray, text: str, x_centre: float, y_top: float, font_pt: float) -> None:
    """White text on a black box at 0.8, centred on ``x_centre``, the text's line box from
    ``y_top`` down (matplotlib's ``va="top"``: the line is as tall as "lp")."""
    from PIL import Image, ImageDraw

    font = _font(font_pt * _PX_PER_PT)
    _, top_lp, _, bottom_lp = font.getbbox("lp", anchor="ls")
    x0_ink, _, x1_ink, _ = font.getbbox(text, anchor="ls")
    width = x1_ink - x0_ink
    height = bottom_lp - top_lp
    pad = _LABEL_PAD_PT * _PX_PER_PT
    left = x_centre - width / 2.0
    box = (left - pad, y_top - pad, left + width + pad, y_top + height + pad)
    h, w = out.shape[:2]
    b0, b1 = int(np.floor(max(box[0], 0))), int(np.ceil(min(box[2], w)))
    c0, c1 = int(np.floor(max(box[1], 0))), int(np.ceil(min(box[3], h)))
    if b1 <= b0 or c1 <= c0:
        return
    patch = out[c0:c1, b0:b1]
    patch[:] = np.round(patch.astype(np.float32) * (1.0 - LABEL_BOX_ALPHA)).astype(np.uint8)
    # Text as anti-aliased coverage, composited in white.
    layer = Image.new("L", (b1 - b0, c1 - c0), 0)
    ImageDraw.Draw(layer).text(
        (left - x0_ink - b0, y_top - top_lp - c0), text, fill=255, font=font, anchor="ls"
    )
    cover = np.asarray(layer, dtype=np.float32)[..., None] / 255.0
    patch[:] = np.round(patch * (1.0 - cover) + 255.0 * cover).astype(np.uint8)
