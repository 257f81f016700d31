"""Set-of-Mark images: numbered, coloured marks on the objects that the QA names "Region [X]".

Region ids are integers from 0 per keyframe, stable for one object (track) across the keyframe's
context frames and cameras. Marks follow the Set-of-Mark paper as MetaVQA applies it (seed 004,
A.2): a box (``cv2.rectangle``, thickness 2), a translucent mask or a contour in the region's
colour; the id label at the interior point farthest from the mask's edge (the Set-of-Mark mark
allocation: masks by ascending area, each minus the smaller ones already labelled, then the
argmax of ``cv2.distanceTransform``), moved outside the box when the box encloses fewer than
1,600 pixels or when the label would cover much of it. The label sits on a filled background in
the region's colour with black or white text, whichever contrasts more (or MetaVQA's black
background with coloured text).

The colour of region k is a pure function of k (:func:`region_colours_bgr`), so a rendered label
can be read back to its id (:func:`region_id_from_colour`). Images are BGR uint8 (OpenCV order),
or RGB where ``channel_order="rgb"`` says so (the pipeline decodes its images as RGB: the PNG
encoder takes RGB, and no conversion pass is then needed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from autolabel.atomic_io import atomic_write_bytes
from autolabel.masks import MaskLike, mask_boxes_2d, masks_to_array, rle_crops
from autolabel.png import encode_png_bgr, encode_png_rgb
from calib.projection import clip_boxes_2d

#: Stitched layout of the six nuScenes cameras: front row, back row.
SIX_CAMERA_LAYOUT: tuple[tuple[str, str, str], tuple[str, str, str]] = (
    ("CAM_FRONT_LEFT", "CAM_FRONT", "CAM_FRONT_RIGHT"),
    ("CAM_BACK_LEFT", "CAM_BACK", "CAM_BACK_RIGHT"),
)

_GOLDEN = 0.6180339887498949


def region_colours_bgr(region_id: np.ndarray | int) -> np.ndarray:
    """Mark colours, (..., 3) uint8 BGR, a pure function of the region id (>= 0).

    Ids come in blocks of ten: within a block the hues are 36 deg apart and visited in steps of
    108 deg (so consecutive ids differ strongly); each block shifts the hues by a golden-ratio
    fraction of a step and changes saturation and value, so no two ids share a colour. Every
    colour is bright (value >= 0.8) to stand out on a black label background.
    """
    k = np.asarray(region_id, dtype=np.int64)
    if np.any(k < 0):
        raise ValueError("region ids must be >= 0")
    j, block = k % 10, k // 10
    hue = np.mod(((3 * j) % 10) / 10.0 + np.mod(block * _GOLDEN, 1.0) / 10.0, 1.0)
    sat = np.choose(block % 3, [0.9, 0.5, 0.7])
    val = np.where((block // 3) % 2 == 0, 1.0, 0.8)
    # HSV -> RGB, vectorized (the colorsys formulas).
    i = np.floor(hue * 6.0).astype(np.int64) % 6
    f = hue * 6.0 - np.floor(hue * 6.0)
    p, q, t = val * (1 - sat), val * (1 - sat * f), val * (1 - sat * (1 - f))
    r = np.choose(i, [val, q, p, p, t, val])
    g = np.choose(i, [t, val, val, q, p, p])
    b = np.choose(i, [p, p, t, val, val, q])
    return np.round(np.stack([b, g, r], axis=-1) * 255.0).astype(np.uint8)


def region_id_from_colour(colour_bgr: np.ndarray, candidate_ids: np.ndarray) -> np.ndarray:
    """The candidate region id whose mark colour is nearest to each (..., 3) BGR colour."""
    palette = region_colours_bgr(np.asarray(candidate_ids)).astype(np.int64)  # (K, 3)
    c = np.asarray(colour_bgr, dtype=np.int64)[..., None, :]
    return np.asarray(candidate_ids)[np.argmin(((c - palette) ** 2).sum(-1), axis=-1)]


def _relative_luminance(colour_bgr: np.ndarray) -> np.ndarray:
    srgb = np.asarray(colour_bgr, dtype=np.float64)[..., ::-1] / 255.0
    lin = np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)
    return lin @ np.array([0.2126, 0.7152, 0.0722])


def text_colours_bgr(background_bgr: np.ndarray) -> np.ndarray:
    """Black or white text, (..., 3) uint8, whichever has the higher WCAG contrast on the background."""
    lum = _relative_luminance(background_bgr)
    # Contrast with black (L + .05) / .05 beats white 1.05 / (L + .05) exactly when L > 0.179.
    black = (lum + 0.05) / 0.05 >= 1.05 / (lum + 0.05)
    return np.where(black[..., None], np.zeros(3), np.full(3, 255.0)).astype(np.uint8)


@dataclass(frozen=True)
class RegionIds:
    """Region ids of the objects of each keyframe.

    Attributes:
        keyframe: (K,) int64 keyframe of each entry; track_id: (K,) int64.
        region_id: (K,) int32, 0.. per keyframe.
        row_region_id: (M,) int32 region id of each input row of :func:`assign_region_ids`.
    """

    keyframe: np.ndarray
    track_id: np.ndarray
    region_id: np.ndarray
    row_region_id: np.ndarray

    def lookup(self, keyframe: np.ndarray, track_id: np.ndarray) -> np.ndarray:
        """Region id of each (keyframe, track_id) pair; -1 where the object has none."""
        kf, tid = np.broadcast_arrays(
            np.asarray(keyframe, dtype=np.int64), np.asarray(track_id, dtype=np.int64)
        )
        uniq = np.unique(self.track_id)
        if len(uniq) == 0:
            return np.full(kf.shape, -1, np.int32)
        stride = len(uniq) + 1
        keys = self.keyframe * stride + np.searchsorted(uniq, self.track_id)
        order = np.argsort(keys)
        keys = keys[order]
        rank = np.searchsorted(uniq, tid)
        known = uniq[np.minimum(rank, len(uniq) - 1)] == tid
        query = kf * stride + rank
        pos = np.minimum(np.searchsorted(keys, query), len(keys) - 1)
        found = known & (keys[pos] == query)
        return np.where(found, self.region_id[order][pos], -1).astype(np.int32)


def assign_region_ids(
    keyframe: np.ndarray,
    track_id: np.ndarray,
    distance_m: np.ndarray,
    at_keyframe: np.ndarray | None = None,
) -> RegionIds:
    """Number the objects of each keyframe 0, 1, 2, ... deterministically.

    Rows are the visible (kept) candidates of a keyframe's context window, any frame and camera.
    Within a keyframe, objects seen at the keyframe itself come first, ordered by their distance
    then (for ties) by track id; objects seen only in context frames follow, by their nearest
    distance, then track id. One object keeps one id across all of its rows.

    Args:
        keyframe: (M,) keyframe each row belongs to.
        track_id: (M,) the object's track id.
        distance_m: (M,) the object's distance from the ego in that row's frame, metres.
        at_keyframe: (M,) bool, the row is from the keyframe's own frame; all True when None.
    """
    kf = np.asarray(keyframe, dtype=np.int64).reshape(-1)
    tid = np.asarray(track_id, dtype=np.int64).reshape(-1)
    dist = np.asarray(distance_m, dtype=np.float64).reshape(-1)
    at_kf = np.ones(len(kf), bool) if at_keyframe is None else np.asarray(at_keyframe, bool)
    if not (len(tid) == len(dist) == len(at_kf) == len(kf)):
        raise ValueError(
            "assign_region_ids: keyframe, track_id, distance_m, at_keyframe differ in length"
        )
    if np.any(~np.isfinite(dist)):
        raise ValueError("assign_region_ids: distance_m must be finite")
    order = np.lexsort((tid, kf))
    kf_s, tid_s, dist_s, at_s = kf[order], tid[order], dist[order], at_kf[order]
    new_group = np.ones(len(kf_s), bool)
    new_group[1:] = (kf_s[1:] != kf_s[:-1]) | (tid_s[1:] != tid_s[:-1])
    starts = np.flatnonzero(new_group)
    group_of_sorted = np.cumsum(new_group) - 1
    if len(starts) == 0:
        empty = np.zeros(0, np.int64)
        return RegionIds(empty, empty, empty.astype(np.int32), np.zeros(0, np.int32))
    # Sort key per object: (seen at the keyframe first, distance there or nearest, track id).
    seen_at_kf = np.logical_or.reduceat(at_s, starts)
    dist_at_kf = np.minimum.reduceat(np.where(at_s, dist_s, np.inf), starts)
    dist_any = np.minimum.reduceat(dist_s, starts)
    g_kf, g_tid = kf_s[starts], tid_s[starts]
    g_dist = np.where(seen_at_kf, dist_at_kf, dist_any)
    g_order = np.lexsort((g_tid, g_dist, ~seen_at_kf, g_kf))
    ranked_kf = g_kf[g_order]
    first_of_kf = np.ones(len(ranked_kf), bool)
    first_of_kf[1:] = ranked_kf[1:] != ranked_kf[:-1]
    kf_start = np.maximum.accumulate(np.where(first_of_kf, np.arange(len(ranked_kf)), 0))
    region = np.empty(len(starts), np.int32)
    region[g_order] = np.arange(len(ranked_kf)) - kf_start
    row_region = np.empty(len(kf), np.int32)
    row_region[order] = region[group_of_sorted]
    return RegionIds(g_kf, g_tid, region, row_region)


#: Names of ``MarkStyle.style``.
MARK_STYLES = ("autolabel", "strideqa")


@dataclass(frozen=True)
class MarkStyle:
    """How marks look (defaults: MetaVQA's box scheme with Set-of-Mark label placement).

    Attributes:
        draw_box, draw_mask, draw_contour: which marks to draw (any combination).
        mask_alpha: opacity of a mask fill.
        line_thickness_px: box and contour thickness (MetaVQA: 2).
        font_scale, font_thickness: ``cv2.putText`` size (MetaVQA: 1.0 and 2).
        label_format: label text; ``{id}`` is the region id (questions say "Region [{id}]").
        label_background: ``"region"`` (filled with the region's colour, contrasting text) or
            ``"black"`` (MetaVQA: black background, text in the region's colour).
        label_padding_px: space around the text inside its background.
        small_box_area_px: boxes enclosing fewer pixels get their label outside (MetaVQA: 1,600).
        max_label_fraction: a label whose background would cover more than this fraction of its
            box also goes outside, so that it never hides a small object (a traffic cone's
            30 x 60 px box at 16 m passes MetaVQA's 1,600 px but a label would cover most of it).
        style: ``autolabel`` (the marks above) or ``strideqa``: STRIDE-QA-Bench's marks (green
            mask at 0.2, green outline, the bare id in white on black at their size and place;
            :mod:`autolabel.set_of_mark_strideqa`), which ignore the other fields.
        label_height_fraction: the label's digits are at least this share of the image height
            tall; font scale, font and line thickness and padding grow together from the values
            above, never below them (0: the fixed sizes above). At 0.04 a 1920x1080 image gets
            43 px digits (14 px once its stitched six-camera view is shown 1920 px wide), a
            1600x900 one 36 px; images up to ~550 px tall keep the fixed sizes.
    """

    draw_box: bool = True
    draw_mask: bool = False
    draw_contour: bool = False
    mask_alpha: float = 0.4
    line_thickness_px: int = 2
    font_scale: float = 1.0
    font_thickness: int = 2
    label_format: str = "{id}"
    label_background: str = "region"
    label_padding_px: int = 4
    small_box_area_px: float = 1600.0
    max_label_fraction: float = 0.3
    style: str = "autolabel"
    label_height_fraction: float = 0.04

    def __post_init__(self) -> None:
        if self.style not in MARK_STYLES:
            raise ValueError(f"style: must be one of {MARK_STYLES}, got {self.style!r}")
        if not (self.draw_box or self.draw_mask or self.draw_contour):
            raise ValueError("draw_box/draw_mask/draw_contour: at least one mark must be drawn")
        if not 0.0 <= self.mask_alpha <= 1.0:
            raise ValueError(f"mask_alpha: must be in [0, 1], got {self.mask_alpha!r}")
        for name in ("line_thickness_px", "font_thickness"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1, got {getattr(self, name)!r}")
        if self.font_scale <= 0:
            raise ValueError(f"font_scale: must be > 0, got {self.font_scale!r}")
        if self.label_background not in ("region", "black"):
            raise ValueError(
                f"label_background: must be 'region' or 'black', got {self.label_background!r}"
            )
        if "{id}" not in self.label_format:
            raise ValueError(f"label_format: must contain '{{id}}', got {self.label_format!r}")
        if self.label_padding_px < 0 or self.small_box_area_px < 0:
            raise ValueError("label_padding_px and small_box_area_px must be >= 0")
        if not 0.0 < self.max_label_fraction <= 1.0:
            raise ValueError(
                f"max_label_fraction: must be in (0, 1], got {self.max_label_fraction!r}"
            )
        if not 0.0 <= self.label_height_fraction <= 0.2:
            raise ValueError(
                f"label_height_fraction: must be in [0, 0.2], got {self.label_height_fraction!r}"
            )


def style_for_image(style: MarkStyle, height_px: int) -> MarkStyle:
    """``style`` with font, lines and padding grown so digits are ``label_height_fraction`` of
    the image height tall (unchanged when the fixed sizes are already that large)."""
    digit_px = cv2.getTextSize("0", _FONT, style.font_scale, style.font_thickness)[0][1]
    ratio = style.label_height_fraction * height_px / max(digit_px, 1)
    if ratio <= 1.0:
        return style
    return dataclasses.replace(
        style,
        font_scale=style.font_scale * ratio,
        font_thickness=max(style.font_thickness, round(style.font_thickness * ratio)),
        line_thickness_px=max(style.line_thickness_px, round(style.line_thickness_px * ratio)),
        label_padding_px=max(style.label_padding_px, round(style.label_padding_px * ratio)),
    )


@dataclass(frozen=True)
class LabelLayout:
    """Where each region's label goes.

    Attributes:
        anchor_uv: (R, 2) int pixel (u, v) the label is centred on (the mask's most interior
            point, or the spot outside a small box).
        rect: (R, 4) int label background [u0, v0, u1, v1] (inclusive corners), inside the image.
        outside: (R,) bool, the label was moved outside its small box.
        text_origin_uv: (R, 2) int bottom-left of the text for ``cv2.putText``.
    """

    anchor_uv: np.ndarray
    rect: np.ndarray
    outside: np.ndarray
    text_origin_uv: np.ndarray


_FONT = cv2.FONT_HERSHEY_SIMPLEX


@dataclass(frozen=True)
class _Region:
    """One region's pixels as a crop: ``crop`` (v1 - v0, u1 - u0) bool at [u0, u1) x [v0, v1)."""

    u0: int
    v0: int
    u1: int
    v1: int
    crop: np.ndarray

    @property
    def area_px(self) -> int:
        return int(self.crop.sum())

    def full(self, height_px: int, width_px: int) -> np.ndarray:
        out = np.zeros((height_px, width_px), bool)
        out[self.v0 : self.v1, self.u0 : self.u1] = self.crop
        return out


def _regions_from_masks(masks: np.ndarray) -> list[_Region]:
    """Crops of (R, H, W) bool masks around their pixels (empty masks: a 0 x 0 crop)."""
    boxes = mask_boxes_2d(masks)
    out = []
    for m, b in zip(masks, boxes, strict=True):
        if np.isnan(b[0]):
            out.append(_Region(0, 0, 0, 0, np.zeros((0, 0), bool)))
            continue
        u0, v0, u1, v1 = (int(x) for x in b)
        out.append(_Region(u0, v0, u1, v1, m[v0:v1, u0:u1]))
    return out


def _regions_from_boxes(boxes_2d: np.ndarray, height_px: int, width_px: int) -> list[_Region]:
    """Filled boxes as regions: the pixels whose centres lie inside (see ``box_masks``)."""
    out = []
    for b in np.asarray(boxes_2d, dtype=np.float64).reshape(-1, 4):
        if not np.all(np.isfinite(b)):
            out.append(_Region(0, 0, 0, 0, np.zeros((0, 0), bool)))
            continue
        # Pixel u is inside when u + 0.5 lies in [b0, b2]: u from ceil(b0 - 0.5) to floor(b2 - 0.5).
        u0 = max(0, int(np.ceil(b[0] - 0.5)))
        u1 = min(width_px, int(np.floor(b[2] - 0.5)) + 1)
        v0 = max(0, int(np.ceil(b[1] - 0.5)))
        v1 = min(height_px, int(np.floor(b[3] - 0.5)) + 1)
        if u1 <= u0 or v1 <= v0:
            out.append(_Region(0, 0, 0, 0, np.zeros((0, 0), bool)))
            continue
        out.append(_Region(u0, v0, u1, v1, np.ones((v1 - v0, u1 - u0), bool)))
    return out


def _most_interior_point(region: np.ndarray) -> tuple[int, int]:
    """(u, v) of the pixel farthest from the region's edge (the image border counts as an edge).

    The maximum of a distance transform is often a ridge (any elongated shape); of the pixels
    within half a pixel of the maximum, the one nearest to their mean is taken, so a rectangle's
    label sits at its centre rather than at one end of the ridge.
    """
    rows, cols = np.flatnonzero(region.any(axis=1)), np.flatnonzero(region.any(axis=0))
    v0, v1, u0, u1 = rows[0], rows[-1] + 1, cols[0], cols[-1] + 1
    crop = np.pad(region[v0:v1, u0:u1], 1).astype(np.uint8)
    dist = cv2.distanceTransform(crop, cv2.DIST_L2, cv2.DIST_MASK_PRECISE)
    near = np.argwhere(dist >= dist.max() - 0.5)  # (K, 2) v, u in row-major order
    centre = near.mean(axis=0)
    v, u = near[np.argmin(((near - centre) ** 2).sum(axis=1))]  # first on ties: deterministic
    return int(u0 + u - 1), int(v0 + v - 1)


def _layout(
    ids: np.ndarray, regions: list[_Region], width_px: int, height_px: int, st: MarkStyle
) -> LabelLayout:
    n = len(ids)
    areas = np.array([r.area_px for r in regions], dtype=np.int64)
    anchor = np.zeros((n, 2), np.int64)
    rect = np.zeros((n, 4), np.int64)
    origin = np.zeros((n, 2), np.int64)
    outside = np.zeros(n, bool)
    taken = np.zeros((height_px, width_px), bool)
    for i in np.lexsort((ids, areas)):  # ascending area, ties by id
        text = st.label_format.format(id=int(ids[i]))
        (tw, th), baseline = cv2.getTextSize(text, _FONT, st.font_scale, st.font_thickness)
        half_w = tw // 2 + st.label_padding_px
        half_h = (th + baseline) // 2 + st.label_padding_px
        reg = regions[i]
        if areas[i] == 0:
            anchor[i] = (width_px // 2, height_px // 2)
        else:
            box_area = (reg.u1 - reg.u0) * (reg.v1 - reg.v0)
            label_area = (2 * half_w + 1) * (2 * half_h + 1)
            if box_area < st.small_box_area_px or label_area > st.max_label_fraction * box_area:
                outside[i] = True
                u = int(round(0.5 * (reg.u0 + reg.u1)))
                above = reg.v0 - half_h - 1
                below = reg.v1 + half_h + 1
                anchor[i] = (u, above if above - half_h >= 0 else below)
            else:
                taken_crop = taken[reg.v0 : reg.v1, reg.u0 : reg.u1]
                own = reg.crop & ~taken_crop
                u, v = _most_interior_point(own if own.any() else reg.crop)
                anchor[i] = (reg.u0 + u, reg.v0 + v)
            taken[reg.v0 : reg.v1, reg.u0 : reg.u1] |= reg.crop
        # Keep the whole label inside the image.
        cu = int(np.clip(anchor[i, 0], half_w, max(half_w, width_px - 1 - half_w)))
        cv = int(np.clip(anchor[i, 1], half_h, max(half_h, height_px - 1 - half_h)))
        rect[i] = (cu - half_w, cv - half_h, cu + half_w, cv + half_h)
        origin[i] = (cu - tw // 2, cv + (th - baseline) // 2)
    return LabelLayout(anchor, rect, outside, origin)


def layout_labels(
    region_id: np.ndarray,
    masks: np.ndarray,
    image_size_px: tuple[int, int],
    style: MarkStyle | None = None,
) -> LabelLayout:
    """Place each region's label (Set-of-Mark mark allocation, MetaVQA's small-box relocation).

    Args:
        region_id: (R,) region ids (for the label text size).
        masks: (R, H, W) bool region pixels (a box region is its filled box).
        image_size_px: (width, height).
        style: label font and thresholds.

    The loop runs over the marks of one image: the allocation is sequential by definition (each
    mask excludes the smaller ones labelled before it).
    """
    width_px, height_px = image_size_px
    ids = np.asarray(region_id, dtype=np.int64).reshape(-1)
    masks = np.asarray(masks, dtype=bool)
    if masks.shape != (len(ids), height_px, width_px):
        raise ValueError(
            f"layout_labels: expected ({len(ids)}, {height_px}, {width_px}) masks, got {masks.shape}"
        )
    st = style_for_image(style or MarkStyle(), height_px)
    return _layout(ids, _regions_from_masks(masks), width_px, height_px, st)


def _regions_and_boxes(
    boxes_2d: np.ndarray | None,
    masks: np.ndarray | Sequence[MaskLike] | None,
    n: int,
    width_px: int,
    height_px: int,
) -> tuple[list[_Region], np.ndarray]:
    """Regions (mask crops) and (R, 4) boxes to draw, from whichever of the two is given."""
    if boxes_2d is None and masks is None:
        raise ValueError("render_marks: give boxes_2d, masks, or both")
    boxes = None
    if boxes_2d is not None:
        raw = np.asarray(boxes_2d, dtype=np.float64).reshape(-1, 4)
        if len(raw) != n:
            raise ValueError(f"render_marks: {n} region ids but {len(raw)} boxes")
        boxes = clip_boxes_2d(raw, width_px, height_px)
    if masks is not None:
        if len(masks) != n:
            raise ValueError(f"render_marks: {n} region ids but {len(masks)} masks")
        if not isinstance(masks, np.ndarray) and all(isinstance(m, dict) for m in masks):
            # RLE masks are read straight into crops (no full-image array per mask).
            bounds, crops = rle_crops(masks, height_px, width_px)
            regions = [_Region(*(int(x) for x in b), c) for b, c in zip(bounds, crops, strict=True)]
        else:
            regions = _regions_from_masks(masks_to_array(masks, height_px, width_px))
        if boxes is None:
            boxes = np.array(
                [[r.u0, r.v0, r.u1, r.v1] if r.crop.size else [np.nan] * 4 for r in regions],
                dtype=np.float64,
            ).reshape(-1, 4)
    else:
        regions = _regions_from_boxes(boxes, height_px, width_px)
    return regions, boxes


def render_marks(
    image_bgr: np.ndarray,
    region_id: np.ndarray,
    boxes_2d: np.ndarray | None = None,
    masks: np.ndarray | Sequence[MaskLike] | None = None,
    style: MarkStyle | None = None,
    channel_order: str = "bgr",
) -> np.ndarray:
    """A copy of the image with Set-of-Mark marks drawn.

    Args:
        image_bgr: (H, W, 3) uint8 BGR.
        region_id: (R,) region id of each mark (its colour and label).
        boxes_2d: (R, 4) [u_min, v_min, u_max, v_max] pixels (clipped to the image here).
        masks: (R, H, W) bool, or R (H, W) arrays / COCO RLE dicts / None. Without masks the
            filled boxes are the regions (as MetaVQA does for nuScenes).
        style: which marks and how; ``MarkStyle()`` when None.
        channel_order: ``"bgr"`` or ``"rgb"``, the image's (and the result's) channel order.
            Every drawing operation works on each channel alone, so an RGB image comes out as
            exactly the channel-swapped BGR result.

    Returns:
        (H, W, 3) uint8 image in ``channel_order``; the input is not modified. Marks are drawn
        in region-id order (masks, then contours, then boxes, then all labels on top); each
        works on its region's crop, so the cost grows with the marked area, not with image size
        times marks.
    """
    img = np.ascontiguousarray(image_bgr)
    if img.ndim != 3 or img.shape[2] != 3 or img.dtype != np.uint8:
        raise ValueError(
            f"render_marks: expected an (H, W, 3) uint8 image, got {img.shape} {img.dtype}"
        )
    if channel_order not in ("bgr", "rgb"):
        raise ValueError(
            f"render_marks: channel_order must be 'bgr' or 'rgb', got {channel_order!r}"
        )
    height_px, width_px = img.shape[:2]
    st = style_for_image(style or MarkStyle(), height_px)
    ids = np.asarray(region_id, dtype=np.int64).reshape(-1)
    n = len(ids)
    out = img.copy()
    if n == 0:
        return out
    regions, boxes = _regions_and_boxes(boxes_2d, masks, n, width_px, height_px)
    if st.style == "strideqa":
        from autolabel.set_of_mark_strideqa import render_strideqa_marks

        # Its colours (green, white, black) are the same in either channel order.
        return render_strideqa_marks(out, ids, [(r.u0, r.v0, r.crop) for r in regions])
    colours_bgr = region_colours_bgr(ids)
    # Drawn in the image's channel order; text contrast is judged on the BGR colours.
    swap = slice(None, None, -1) if channel_order == "rgb" else slice(None)
    colours = np.ascontiguousarray(colours_bgr[:, swap])
    draw_order = np.argsort(ids, kind="stable")
    if st.draw_mask:
        # One blended layer: pixels of several masks take the colour of the highest id.
        layer = out.copy()
        covered = np.zeros((height_px, width_px), bool)
        for i in draw_order:
            r = regions[i]
            layer[r.v0 : r.v1, r.u0 : r.u1][r.crop] = colours[i]
            covered[r.v0 : r.v1, r.u0 : r.u1] |= r.crop
        blended = cv2.addWeighted(layer, st.mask_alpha, out, 1.0 - st.mask_alpha, 0.0)
        np.copyto(out, blended, where=covered[..., None])
    if st.draw_contour:
        for i in draw_order:
            r = regions[i]
            if not r.crop.size:
                continue
            contours, _ = cv2.findContours(
                r.crop.astype(np.uint8),
                cv2.RETR_EXTERNAL,
                cv2.CHAIN_APPROX_NONE,
                offset=(r.u0, r.v0),
            )
            cv2.drawContours(out, contours, -1, colours[i].tolist(), st.line_thickness_px)
    if st.draw_box:
        for i in draw_order:
            if np.all(np.isfinite(boxes[i])):
                u0, v0 = int(np.floor(boxes[i, 0])), int(np.floor(boxes[i, 1]))
                u1, v1 = int(np.ceil(boxes[i, 2])) - 1, int(np.ceil(boxes[i, 3])) - 1
                cv2.rectangle(out, (u0, v0), (u1, v1), colours[i].tolist(), st.line_thickness_px)
    layout = _layout(ids, regions, width_px, height_px, st)
    text_colours = np.ascontiguousarray(text_colours_bgr(colours_bgr)[:, swap])
    for i in draw_order:
        u0, v0, u1, v1 = (int(x) for x in layout.rect[i])
        if st.label_background == "region":
            background, ink = colours[i], text_colours[i]
        else:
            background, ink = np.zeros(3, np.uint8), colours[i]
        cv2.rectangle(out, (u0, v0), (u1, v1), background.tolist(), cv2.FILLED)
        cv2.putText(
            out,
            st.label_format.format(id=int(ids[i])),
            tuple(int(x) for x in layout.text_origin_uv[i]),
            _FONT,
            st.font_scale,
            ink.tolist(),
            st.font_thickness,
            cv2.LINE_AA,
        )
    return out


def stitch_six(
    images_by_channel: Mapping[str, np.ndarray], tile_size_px: tuple[int, int] | None = None
) -> np.ndarray:
    """The six camera images in the nuScenes layout: front-left, front, front-right on top;
    back-left, back, back-right below.

    Args:
        images_by_channel: channel -> (H, W, 3) uint8 image; a missing channel is a black tile.
        tile_size_px: (width, height) of each tile; the first present image's size when None.
            Images of another size are resized (``cv2.INTER_AREA``).

    Returns:
        (2 * tile height, 3 * tile width, 3) uint8.
    """
    known = {c for row in SIX_CAMERA_LAYOUT for c in row}
    unknown = sorted(set(images_by_channel) - known)
    if unknown:
        raise ValueError(f"stitch_six: unknown channel {unknown[0]!r} (expected {sorted(known)})")
    present = [c for row in SIX_CAMERA_LAYOUT for c in row if c in images_by_channel]
    if not present:
        raise ValueError("stitch_six: no images given")
    if tile_size_px is None:
        h, w = images_by_channel[present[0]].shape[:2]
    else:
        w, h = (int(v) for v in tile_size_px)
    canvas = np.zeros((2 * h, 3 * w, 3), np.uint8)
    for r, row in enumerate(SIX_CAMERA_LAYOUT):
        for c, channel in enumerate(row):
            if channel not in images_by_channel:
                continue
            tile = np.asarray(images_by_channel[channel])
            if tile.ndim != 3 or tile.shape[2] != 3 or tile.dtype != np.uint8:
                raise ValueError(
                    f"stitch_six: {channel}: expected (H, W, 3) uint8, got {tile.shape}"
                )
            place = canvas[r * h : (r + 1) * h, c * w : (c + 1) * w]
            if tile.shape[:2] != (h, w):
                # Shrunk straight into its place: no tile-sized array per camera.
                cv2.resize(tile, (w, h), dst=place, interpolation=cv2.INTER_AREA)
            else:
                place[:] = tile
    return canvas


def encode_png(image_bgr: np.ndarray, channel_order: str = "bgr") -> bytes:
    """PNG bytes of a BGR image (deterministic for equal pixels): colour images by the fast
    encoder of :mod:`autolabel.png`, others (grey, 16-bit, alpha) by OpenCV. With
    ``channel_order="rgb"`` a colour image is taken as RGB (no channel swap before encoding)."""
    img = np.asarray(image_bgr)
    if channel_order not in ("bgr", "rgb"):
        raise ValueError(f"encode_png: channel_order must be 'bgr' or 'rgb', got {channel_order!r}")
    if img.ndim == 3 and img.shape[2] == 3 and img.dtype == np.uint8 and 0 not in img.shape:
        return encode_png_rgb(img) if channel_order == "rgb" else encode_png_bgr(img)
    ok, buf = cv2.imencode(".png", np.ascontiguousarray(img))
    if not ok:
        raise ValueError(f"could not encode a {np.shape(image_bgr)} image as PNG")
    return buf.tobytes()


def stitched_tile_size_px(
    image_size_px: tuple[int, int], max_width_px: int | None
) -> tuple[int, int] | None:
    """(width, height) of each tile of a stitched view at most ``max_width_px`` wide (three tiles
    across, the camera's aspect kept); None (camera size) when that fits or without a limit."""
    width_px, height_px = (int(v) for v in image_size_px)
    if not max_width_px or 3 * width_px <= max_width_px:
        return None
    tile_w = max(1, int(max_width_px) // 3)
    return tile_w, max(1, int(round(height_px * tile_w / width_px)))


def write_marked_images(
    out_dir: str | Path,
    keyframe_name: str,
    images_by_channel: Mapping[str, np.ndarray],
    stitched: bool = True,
    stitched_max_width_px: int | None = None,
    channel_order: str = "bgr",
) -> list[Path]:
    """Write ``<keyframe>_<channel>.png`` per camera and ``<keyframe>_stitched.png`` atomically.

    The stitched view is for people (the report shows it): at most ``stitched_max_width_px``
    wide (``stitched_tile_size_px``; camera resolution when None), since its PNG encoding costs
    as much as all six cameras' at full resolution. The per-camera images keep every pixel.
    ``channel_order``: the images' channel order, ``"bgr"`` or ``"rgb"`` (no swap to encode).

    Returns the written paths, cameras in ``SIX_CAMERA_LAYOUT`` order then others sorted.
    """
    out = Path(out_dir)
    order = [c for row in SIX_CAMERA_LAYOUT for c in row if c in images_by_channel]
    order += sorted(set(images_by_channel) - set(order))
    paths = [
        atomic_write_bytes(
            out / f"{keyframe_name}_{c}.png", encode_png(images_by_channel[c], channel_order)
        )
        for c in order
    ]
    six = {c: images_by_channel[c] for c in order if c in {x for r in SIX_CAMERA_LAYOUT for x in r}}
    if stitched and six:
        first = next(iter(six.values()))
        tile = stitched_tile_size_px(first.shape[1::-1], stitched_max_width_px)
        paths.append(
            atomic_write_bytes(
                out / f"{keyframe_name}_stitched.png",
                encode_png(stitch_six(six, tile), channel_order),
            )
        )
    return paths
