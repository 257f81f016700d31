"""The visibility filter: which (image, object) candidates are reliable enough to ask about.

Rules (each configurable, checked in this order; a candidate is kept when none fails):

1. ``IN_IMAGE``: at least ``min_in_image_fraction`` of the projected 2D box lies in the image.
2. ``LIDAR_POINTS``: at least ``min_lidar_points`` LiDAR points inside the 3D box (MetaVQA drops
   objects "scanned by less than five rays of Lidar", seed 004, A.1).
3. ``MASK_SCORE``: the segmenter's mask score exceeds ``min_mask_score`` (STRIDE-QA: SAM 2.1's
   predicted IoU > 0.8, seed 003).
4. ``BOX_IOU``: IoU of the projected box (clipped to the image) and the mask's tight box exceeds
   ``min_box_iou`` (STRIDE-QA: > 0.3).
5. ``COVERAGE``: the fraction of the mask's pixels inside the projected box exceeds
   ``min_coverage`` (STRIDE-QA: > 0.8).
6. ``VISIBLE_PIXELS``: at least ``min_visible_px`` pixels of the object remain after z-buffering
   against nearer objects of the same image (MetaVQA: a visible object has >= 1,200 pixels).

Pixels follow ``calib.projection``: u right, v down, a pixel (v, u) covers [u, u+1] x [v, v+1]
and is "inside" a box when its centre is.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from autolabel.masks import MaskLike, box_masks, mask_boxes_2d, masks_to_array
from calib.projection import box_iou_2d, clip_boxes_2d, in_image_fraction


class VisibilityRule(enum.IntFlag):
    """Bit of each rule in ``VisibilityDecision.failed_rules``."""

    IN_IMAGE = 1
    LIDAR_POINTS = 2
    MASK_SCORE = 4
    BOX_IOU = 8
    COVERAGE = 16
    VISIBLE_PIXELS = 32


#: The order in which rules are checked; ``first_failed_rule`` is the first failing one.
RULE_ORDER: tuple[VisibilityRule, ...] = tuple(VisibilityRule)


@dataclass(frozen=True)
class VisibilityConfig:
    """Thresholds of the visibility filter (defaults: STRIDE-QA for IoU, coverage and score).

    Attributes:
        min_box_iou: IoU(projected box, mask box) must be strictly greater.
        min_coverage: fraction of mask pixels inside the projected box must be strictly greater.
        min_mask_score: the mask's score must be strictly greater.
        min_in_image_fraction: fraction of the projected box's area inside the image, at least.
        min_visible_px: pixels left after occlusion by nearer objects, at least.
        min_lidar_points: LiDAR points in the 3D box, at least (skipped when none are given).
        zbuffer_with: ``"mask"`` z-buffers the objects' masks; ``"box"`` paints their clipped
            projected boxes instead, as MetaVQA does for nuScenes images without masks.
    """

    min_box_iou: float = 0.3
    min_coverage: float = 0.8
    min_mask_score: float = 0.8
    min_in_image_fraction: float = 0.5
    min_visible_px: int = 1200
    min_lidar_points: int = 5
    zbuffer_with: str = "mask"

    def __post_init__(self) -> None:
        for name in ("min_box_iou", "min_coverage", "min_mask_score", "min_in_image_fraction"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not 0 <= value <= 1
            ):
                raise ValueError(f"{name}: must be a number in [0, 1], got {value!r}")
        for name in ("min_visible_px", "min_lidar_points"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise ValueError(f"{name}: must be an integer >= 0, got {value!r}")
        if self.zbuffer_with not in ("mask", "box"):
            raise ValueError(f"zbuffer_with: must be 'mask' or 'box', got {self.zbuffer_with!r}")


@dataclass
class VisibilityDecision:
    """Per-candidate outcome and the measured quantities behind it, all (N,).

    Attributes:
        keep: bool, no rule failed.
        failed_rules: uint8 bitmask of every failing ``VisibilityRule``.
        first_failed_rule: uint8, the first failing rule in ``RULE_ORDER`` (0 when kept).
        in_image_fraction, box_iou, coverage: float64 measurements.
        mask_score: float32 as given; lidar_points: int64 (-1 where not given).
        mask_px: int64 pixels of the mask; visible_px: int64 pixels left after z-buffering.
        mask_box_2d: (N, 4) tight box of the mask, NaN for empty masks.
    """

    keep: np.ndarray
    failed_rules: np.ndarray
    first_failed_rule: np.ndarray
    in_image_fraction: np.ndarray
    box_iou: np.ndarray
    coverage: np.ndarray
    mask_score: np.ndarray
    lidar_points: np.ndarray
    mask_px: np.ndarray
    visible_px: np.ndarray
    mask_box_2d: np.ndarray

    def __len__(self) -> int:
        return len(self.keep)

    def failed_rule_names(self, index: int) -> list[str]:
        """Names of the rules candidate ``index`` failed, in check order."""
        bits = int(self.failed_rules[index])
        return [rule.name for rule in RULE_ORDER if bits & rule]


def _zbuffer_visible_px(layers: np.ndarray, depth_m: np.ndarray) -> np.ndarray:
    """(N,) pixels of each (N, H, W) layer not covered by a nearer layer (ties: lower index wins)."""
    n = len(layers)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((np.arange(n), depth_m))  # nearest first
    sorted_layers = layers[order]
    covered = sorted_layers.any(axis=0)
    owner_sorted = np.argmax(sorted_layers, axis=0)  # first (nearest) layer covering each pixel
    counts_sorted = np.bincount(owner_sorted[covered], minlength=n)
    visible = np.empty(n, dtype=np.int64)
    visible[order] = counts_sorted
    return visible


def _evaluate_image(
    boxes_2d: np.ndarray,
    masks: np.ndarray,
    depth_m: np.ndarray,
    width_px: int,
    height_px: int,
    zbuffer_with: str,
) -> tuple[np.ndarray, ...]:
    clipped = clip_boxes_2d(boxes_2d, width_px, height_px)
    mask_px = masks.sum(axis=(1, 2)).astype(np.int64)
    mask_box = mask_boxes_2d(masks)
    iou = box_iou_2d(clipped, mask_box)
    in_box = box_masks(clipped, height_px, width_px)
    with np.errstate(divide="ignore", invalid="ignore"):
        coverage = (masks & in_box).sum(axis=(1, 2)) / mask_px
    coverage = np.nan_to_num(coverage, nan=0.0)
    layers = masks if zbuffer_with == "mask" else in_box
    visible = _zbuffer_visible_px(layers, depth_m)
    return iou, coverage, mask_px, visible, mask_box


def evaluate_visibility(
    projected_boxes_2d: np.ndarray,
    masks: np.ndarray | Sequence[MaskLike],
    mask_score: np.ndarray,
    depth_m: np.ndarray,
    image_size_px: tuple[int, int],
    lidar_points: np.ndarray | None = None,
    image_id: np.ndarray | None = None,
    config: VisibilityConfig | None = None,
) -> VisibilityDecision:
    """Apply the visibility rules to N (image, object) candidates.

    Args:
        projected_boxes_2d: (N, 4) unclipped projected 3D boxes [u_min, v_min, u_max, v_max],
            pixels (``calib.projection.box_2d_from_corners``); NaN rows for boxes behind the camera.
        masks: (N, H, W) bool, or N entries each an (H, W) bool array, a COCO RLE dict or None.
        mask_score: (N,) segmenter score in [0, 1].
        depth_m: (N,) distance of each object from the camera, metres; nearer objects occlude.
        image_size_px: (width, height) of every image.
        lidar_points: (N,) LiDAR points inside each 3D box; the rule is skipped when None.
        image_id: (N,) which image each candidate is in (only objects of one image occlude each
            other); all one image when None.
        config: thresholds; the defaults when None.

    Returns:
        A ``VisibilityDecision`` with one entry per candidate, in input order.
    """
    cfg = config or VisibilityConfig()
    width_px, height_px = (int(v) for v in image_size_px)
    boxes = np.asarray(projected_boxes_2d, dtype=np.float64).reshape(-1, 4)
    n = len(boxes)
    score = np.asarray(mask_score, dtype=np.float32).reshape(-1)
    depth = np.asarray(depth_m, dtype=np.float64).reshape(-1)
    if len(score) != n or len(depth) != n or len(masks) != n:
        raise ValueError(
            f"evaluate_visibility: {n} boxes but {len(masks)} masks, {len(score)} scores, "
            f"{len(depth)} depths"
        )
    groups = np.zeros(n, np.int64) if image_id is None else np.asarray(image_id).reshape(-1)
    if len(groups) != n:
        raise ValueError(f"evaluate_visibility: image_id has {len(groups)} entries for {n} boxes")
    points = None if lidar_points is None else np.asarray(lidar_points, dtype=np.int64).reshape(-1)
    if points is not None and len(points) != n:
        raise ValueError(
            f"evaluate_visibility: lidar_points has {len(points)} entries for {n} boxes"
        )

    iou, coverage = np.zeros(n), np.zeros(n)
    mask_px, visible = np.zeros(n, np.int64), np.zeros(n, np.int64)
    mask_box = np.full((n, 4), np.nan)
    # One image at a time: masks are decoded per image, and only objects of one image occlude
    # each other. The loop is over images, never over objects.
    for gid in np.unique(groups):
        rows = np.flatnonzero(groups == gid)
        if isinstance(masks, np.ndarray):
            masks_img = masks_to_array(masks[rows], height_px, width_px)
        else:
            masks_img = masks_to_array(
                [masks[i] for i in rows], height_px, width_px, where=f"masks of image {gid}"
            )
        out = _evaluate_image(
            boxes[rows], masks_img, depth[rows], width_px, height_px, cfg.zbuffer_with
        )
        iou[rows], coverage[rows], mask_px[rows], visible[rows], mask_box[rows] = out

    fraction = in_image_fraction(boxes, width_px, height_px)
    failing = {
        VisibilityRule.IN_IMAGE: fraction < cfg.min_in_image_fraction,
        VisibilityRule.LIDAR_POINTS: (
            np.zeros(n, bool) if points is None else points < cfg.min_lidar_points
        ),
        VisibilityRule.MASK_SCORE: ~(score > cfg.min_mask_score),
        VisibilityRule.BOX_IOU: ~(iou > cfg.min_box_iou),
        VisibilityRule.COVERAGE: ~(coverage > cfg.min_coverage),
        VisibilityRule.VISIBLE_PIXELS: visible < cfg.min_visible_px,
    }
    failed = np.zeros(n, np.uint8)
    first = np.zeros(n, np.uint8)
    for rule in reversed(RULE_ORDER):  # the earliest failing rule is written last
        failed |= np.where(failing[rule], np.uint8(rule.value), np.uint8(0))
        first = np.where(failing[rule], np.uint8(rule.value), first)
    return VisibilityDecision(
        keep=failed == 0,
        failed_rules=failed,
        first_failed_rule=first.astype(np.uint8),
        in_image_fraction=fraction,
        box_iou=iou,
        coverage=coverage,
        mask_score=score,
        lidar_points=np.full(n, -1, np.int64) if points is None else points,
        mask_px=mask_px,
        visible_px=visible,
        mask_box_2d=mask_box,
    )


def summarize(decision: VisibilityDecision) -> dict:
    """Counts for a clip: candidates, kept, rejected, rejections by first failing rule and by any
    failing rule (keys in check order, every rule present), as a JSON-ready dict."""
    first = {
        rule.name: int(np.sum(decision.first_failed_rule == rule.value)) for rule in RULE_ORDER
    }
    any_failed = {
        rule.name: int(np.sum((decision.failed_rules & rule.value) != 0)) for rule in RULE_ORDER
    }
    kept = int(np.sum(decision.keep))
    return {
        "candidates": len(decision),
        "kept": kept,
        "rejected": len(decision) - kept,
        "rejected_by_first_rule": first,
        "failed_by_rule": any_failed,
    }
