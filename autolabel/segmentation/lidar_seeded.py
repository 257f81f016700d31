"""LiDAR-seeded segmenter: GrabCut inside the projected box, seeded by the object's LiDAR points.

A weightless segmenter (the default is ``geometric``, which uses it for image evidence). Per object:

1. Crop the projected box plus a margin and shrink it so its longer side is at most
   ``working_max_side_px`` (GrabCut's cost grows with the pixel count; the mask is scaled back).
2. Initialise GrabCut's label map: outside the box is sure background; inside, the convex hull
   of the object's own seed points and a small disc around each seed are "probably foreground",
   the rest of the box "probably background", and seed points of *other* objects that fall in
   this box "probably background" (a LiDAR return of another object means that object is what
   the camera sees there, up to parallax). Seeds are never forced to foreground, so a mask can
   disagree with bad seeds, and the score can see it.
3. Run GrabCut (colour GMMs plus a contrast-sensitive graph cut; ``grabcut.grab_cut``, started
   from a deterministic colour model), keep the connected parts that hold seeds, fill holes,
   scale back, and clip to the box. If GrabCut finds nothing (an object coloured like its
   surroundings), the seed hull itself is the mask.
4. A second, seed-free GrabCut from the box alone (on a grid of at most
   ``boxcut_max_side_px``) gives an independent mask for the score.

Overlaps: when ``prompts["depth_m"]`` is given, a pixel claimed by several masks goes to the
nearest object, so the masks are visible-pixel masks like SAM2's on a real image.

Score: the predicted IoU of the mask with the object's true visible mask, like SAM2's IoU head.
It is a logistic function of five mask features (``SCORE_FEATURE_NAMES``: agreement with the
seeds, agreement with the seed-free mask, GrabCut support, box fill, share kept after overlaps),
with weights fitted by ``bench/calibrate_lidar_seeded_score.py`` to the true IoU of constructed
scenes with known masks (``validation_scenes``), for the default config and with ``depth_m``
given; that script prints the weights and the held-out correlation between score and true IoU.

Objects are looped in Python, one OpenCV GrabCut call (plus a few small array operations on the
crop) each; the per-object work is in C++, and N is the number of objects of one image.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from autolabel.segmentation.core import SegmentationResult, validate_segment_inputs
from autolabel.segmentation.grabcut import grab_cut
from calib import stable_math

__all__ = [
    "LidarSeededConfig",
    "LidarSeededSegmenter",
    "SCORE_FEATURE_NAMES",
    "SCORE_WEIGHTS",
    "SCORE_BIAS",
    "score_from_features",
]

#: Features of a mask that the score is computed from, in this order (all in [0, 1]).
SCORE_FEATURE_NAMES = (
    "seed_recall",  # fraction of the object's own seeds inside the mask
    "boxcut_iou",  # IoU of the mask with the seed-free GrabCut mask from the box alone
    "cut_support",  # fraction of the mask that GrabCut itself found (0 on the hull fallback)
    "box_fill",  # mask area / box area
    "overlap_kept",  # fraction of the mask left after nearer objects take shared pixels
)
#: Logistic weights and bias of the score, fitted by bench/calibrate_lidar_seeded_score.py
#: (48 constructed 450x800 scenes, 480 objects; held-out Pearson 0.92 between score and IoU with
#: k-means++-started GrabCut, 0.934 with the brightness-bin start of ``grabcut.grab_cut``).
SCORE_WEIGHTS = np.array([2.0913, 1.5667, 0.9984, 0.8675, 3.1264])
SCORE_BIAS = -5.1112


@dataclass(frozen=True)
class LidarSeededConfig:
    """Settings of the LiDAR-seeded GrabCut segmenter.

    Attributes:
        working_max_side_px: longer side of the crop GrabCut runs on, pixels.
        box_margin_fraction: margin of background around the box in the crop, as a fraction of
            the box's longer side.
        box_margin_min_px: smallest such margin, pixels (full resolution).
        grabcut_iterations: GrabCut iterations of the seeded cut.
        boxcut_iterations: iterations of the seed-free cut used by the score (0 disables it and
            its feature counts as 0.5).
        boxcut_max_side_px: longer side of the grid the seed-free cut runs on, pixels (the
            working crop is shrunk further when its longer side exceeds it, and the cut scaled
            back to the working grid). At 64 px the cut costs less than half, but the score's held-out
            Pearson correlation with the true IoU on the calibration scenes fell from 0.92 to
            0.90 (``bench/calibrate_lidar_seeded_score.py``), so the default cuts at full size.
        seed_radius_px: radius of the disc marked around each seed, working pixels.
        hull_dilation_fraction: growth of the seeds' hull toward the object's outline, as a
            fraction of the box's longer side.
        min_box_side_px: boxes thinner than this (full-resolution pixels) get an empty mask and
            score 0.
        resolve_overlaps: give a pixel claimed by several masks to the nearest object when
            ``prompts["depth_m"]`` is given.
    """

    working_max_side_px: int = 96
    box_margin_fraction: float = 0.1
    box_margin_min_px: int = 4
    grabcut_iterations: int = 1
    boxcut_iterations: int = 1
    boxcut_max_side_px: int = 96
    seed_radius_px: int = 1
    hull_dilation_fraction: float = 0.12
    min_box_side_px: float = 3.0
    resolve_overlaps: bool = True

    def __post_init__(self) -> None:
        if self.working_max_side_px < 16:
            raise ValueError(
                f"LidarSeededConfig.working_max_side_px: must be >= 16, got {self.working_max_side_px}"
            )
        if self.boxcut_max_side_px < 16:
            raise ValueError(
                f"LidarSeededConfig.boxcut_max_side_px: must be >= 16, got {self.boxcut_max_side_px}"
            )
        if self.grabcut_iterations < 1:
            raise ValueError(
                f"LidarSeededConfig.grabcut_iterations: must be >= 1, got {self.grabcut_iterations}"
            )
        for key in ("boxcut_iterations", "seed_radius_px", "box_margin_min_px"):
            if getattr(self, key) < 0:
                raise ValueError(f"LidarSeededConfig.{key}: must be >= 0, got {getattr(self, key)}")
        if not 0.0 <= self.box_margin_fraction <= 1.0:
            raise ValueError(
                f"LidarSeededConfig.box_margin_fraction: must be in [0, 1], got {self.box_margin_fraction}"
            )
        if not 0.0 <= self.hull_dilation_fraction <= 0.5:
            raise ValueError(
                "LidarSeededConfig.hull_dilation_fraction: must be in [0, 0.5], got "
                f"{self.hull_dilation_fraction}"
            )
        if self.min_box_side_px < 1.0:
            raise ValueError(
                f"LidarSeededConfig.min_box_side_px: must be >= 1, got {self.min_box_side_px}"
            )


def score_from_features(features: np.ndarray) -> np.ndarray:
    """(N,) float32 predicted IoU from (N, 5) features ordered as ``SCORE_FEATURE_NAMES``."""
    logits = np.asarray(features, dtype=np.float64) @ SCORE_WEIGHTS + SCORE_BIAS
    return (1.0 / (1.0 + stable_math.exp(-logits))).astype(np.float32)


def _fill_holes(mask: np.ndarray) -> np.ndarray:
    padded = np.pad(~mask, 1, constant_values=True).astype(np.uint8)
    flood = padded.copy()
    cv2.floodFill(flood, None, (0, 0), 2)
    holes = flood[1:-1, 1:-1] == 1
    return mask | holes


def _takes_from_wanted(boxes: np.ndarray, depth_m: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """(N,) bool: the wanted objects, and those whose mask may take pixels from a wanted one in
    the overlap resolution (nearer in its order, with a box meeting the wanted one's box; a
    mask lies inside its box's pixel span)."""
    order = np.argsort(depth_m, kind="stable")
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    lo, hi = np.floor(boxes[:, :2]), np.ceil(boxes[:, 2:])
    meets = np.all(
        (lo[:, None, :] < hi[None, :, :]) & (lo[None, :, :] < hi[:, None, :]), axis=2
    )  # (N, N) box pixel spans intersect
    before = rank[:, None] < rank[None, :]  # [j, i]: j is resolved before i
    return wanted | np.any(meets & before & wanted[None, :], axis=1)


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    union = np.count_nonzero(a | b)
    return float(np.count_nonzero(a & b) / union) if union else 0.0


class LidarSeededSegmenter:
    """GrabCut seeded by projected LiDAR points, behind the ``Segmenter`` interface."""

    name = "lidar"

    def __init__(self, config: LidarSeededConfig | None = None) -> None:
        self.config = config or LidarSeededConfig()

    def segment(
        self,
        image: np.ndarray,
        boxes_2d: np.ndarray,
        prompts: dict[str, Any] | None = None,
    ) -> SegmentationResult:
        """Masks and predicted IoUs of the N boxed objects of one image.

        Args:
            image: (H, W, 3) uint8 RGB.
            boxes_2d: (N, 4) [u_min, v_min, u_max, v_max] pixels.
            prompts: ``"points_uv"``: N arrays (K_i, 2) of the objects' projected LiDAR points
                (without them each object is cut from its box alone, with a lower score);
                ``"depth_m"``: (N,) object depths used to resolve overlaps.

        Returns:
            SegmentationResult: (N, H, W) bool masks, (N,) float32 scores in [0, 1].
        """
        masks, features = self.segment_with_features(image, boxes_2d, prompts)
        return SegmentationResult(masks, score_from_features(features))

    def segment_with_features(
        self,
        image: np.ndarray,
        boxes_2d: np.ndarray,
        prompts: dict[str, Any] | None = None,
        wanted: np.ndarray | None = None,
        full_masks: bool = True,
        boxcut_skip: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> tuple[np.ndarray | None, np.ndarray]:
        """Like ``segment`` but returns ((N, H, W) bool masks, (N, 5) float64 score features).

        Boxes too thin to cut, and empty masks, get all-zero features (a score near 0).

        Args:
            wanted: (N,) bool, the objects whose masks and features are needed (all when None).
                The others are cut only where their mask may take pixels from a wanted one (a
                nearer object whose box's pixel span holds a pixel of a farther wanted mask)
                and get no seed-free cut; their rows are
                left as they come (not the masks and features they would have on their own).
                The wanted rows equal those of a run without ``wanted``: a cut draws no random
                numbers (``grabcut.grab_cut``), so a mask depends on its own inputs only.
            full_masks: False returns None for the masks (a caller that reads the features
                only: the masks then never leave their crops).
            boxcut_skip: the seed-free cuts run last, after the overlaps: called once with the
                (N, 5) features (``overlap_kept`` resolved, ``boxcut_iou`` NaN where the cut is
                still to run), it returns (N,) bool, the objects whose seed-free cut is not run
                (their ``boxcut_iou`` is 0.5, as when no cut is made). The rows of the others
                equal a run without it (a cut depends on its own inputs only, so their order
                changes nothing).
        """
        image, boxes, seeds = validate_segment_inputs(image, boxes_2d, prompts)
        height_px, width_px = image.shape[:2]
        n = len(boxes)
        if seeds is None:
            seeds = [np.zeros((0, 2))] * n
        depth_m = None
        if prompts and prompts.get("depth_m") is not None:
            depth_m = np.asarray(prompts["depth_m"], dtype=np.float64).reshape(-1)
            if len(depth_m) != n:
                raise ValueError(
                    f"segment: prompts['depth_m'] has {len(depth_m)} values for {n} boxes"
                )
        features = np.zeros((n, len(SCORE_FEATURE_NAMES)))
        if n == 0:
            return np.zeros((0, height_px, width_px), bool) if full_masks else None, features
        clipped = boxes.copy()
        clipped[:, [0, 2]] = clipped[:, [0, 2]].clip(0, width_px)
        clipped[:, [1, 3]] = clipped[:, [1, 3]].clip(0, height_px)
        seed_owner = np.concatenate([np.full(len(s), i) for i, s in enumerate(seeds)]).astype(int)
        all_seeds = np.concatenate(seeds) if n else np.zeros((0, 2))
        overlaps = depth_m is not None and self.config.resolve_overlaps
        wanted = np.ones(n, bool) if wanted is None else np.asarray(wanted, bool).reshape(-1)
        if len(wanted) != n:
            raise ValueError(f"segment: wanted has {len(wanted)} entries for {n} boxes")
        needed = _takes_from_wanted(clipped, depth_m, wanted) if overlaps else wanted
        # Each mask on its crop (the scaled-back crop; empty where not cut): overlaps work on
        # crops, and full-image masks are made only for the caller that wants them.
        rois = np.zeros((n, 4), np.int64)
        crop_masks = [np.zeros((0, 0), bool)] * n
        pending: dict[int, tuple] = {}  # object -> the seed-free cut's inputs, when deferred
        # The wanted objects first: an object cut only for the overlaps is then skipped where no
        # farther wanted mask has a pixel in its box's pixel span (its mask lies there), as its
        # mask could take nothing (a cut depends on its own inputs only: the order changes no
        # mask).
        cut_order = np.flatnonzero(needed)
        cut_order = np.r_[cut_order[wanted[cut_order]], cut_order[~wanted[cut_order]]]
        span = np.c_[np.floor(clipped[:, :2]), np.ceil(clipped[:, 2:])].astype(np.int64)
        rank = np.empty(n, np.int64)
        rank[np.argsort(depth_m, kind="stable") if overlaps else np.arange(n)] = np.arange(n)
        for i in cut_order:
            if not wanted[i]:
                u0, v0, u1, v1 = span[i]
                farther = np.flatnonzero(wanted & (rank > rank[i]))  # resolved after it
                if not any(
                    crop_masks[f][
                        max(v0, rois[f, 1]) - rois[f, 1] : max(0, min(v1, rois[f, 3]) - rois[f, 1]),
                        max(u0, rois[f, 0]) - rois[f, 0] : max(0, min(u1, rois[f, 2]) - rois[f, 0]),
                    ].any()
                    for f in farther
                ):
                    continue
            box = clipped[i]
            if (
                box[2] - box[0] < self.config.min_box_side_px
                or box[3] - box[1] < self.config.min_box_side_px
            ):
                continue
            try:
                mask_roi, roi, feats, boxcut_args = self._segment_one(
                    image,
                    box,
                    all_seeds,
                    seed_owner == i,
                    with_boxcut=bool(wanted[i]),
                    defer_boxcut=boxcut_skip is not None,
                )
            except (cv2.error, ValueError):
                # GrabCut cannot start when the working crop leaves it no background or no
                # foreground pixel (a sliver of a box at the image edge, shrunk below a pixel):
                # treat the box as too thin to cut.
                continue
            crop_masks[i] = mask_roi
            features[i] = feats
            rois[i] = roi
            if boxcut_args is not None:
                pending[i] = boxcut_args
        if overlaps:
            # Nearest first, each mask loses the pixels nearer masks hold; on crops (a mask is
            # empty outside its own), so the cost is the masked area, not N full images.
            area_before = np.zeros(n, np.int64)
            area_after = np.zeros(n, np.int64)
            claimed = np.zeros((height_px, width_px), dtype=bool)
            for i in np.argsort(depth_m, kind="stable"):
                u0, v0, u1, v1 = rois[i]
                mask = crop_masks[i]
                if mask.size == 0:
                    continue
                area_before[i] = np.count_nonzero(mask)
                mask &= ~claimed[v0:v1, u0:u1]
                claimed[v0:v1, u0:u1] |= mask
                area_after[i] = np.count_nonzero(mask)
            kept = np.where(area_before > 0, area_after / np.maximum(area_before, 1), 0.0)
            features[:, SCORE_FEATURE_NAMES.index("overlap_kept")] = kept
        if pending:
            column = SCORE_FEATURE_NAMES.index("boxcut_iou")
            skip = np.asarray(boxcut_skip(features.copy()), bool).reshape(-1)
            if len(skip) != n:
                raise ValueError(f"segment: boxcut_skip gave {len(skip)} values for {n} boxes")
            for i, (crop, box_work, mask_work) in pending.items():
                features[i, column] = (
                    0.5 if skip[i] else self._boxcut_iou(crop, box_work, mask_work)
                )
        if not full_masks:
            return None, features
        masks = np.zeros((n, height_px, width_px), dtype=bool)
        for i, (u0, v0, u1, v1) in enumerate(rois):
            masks[i, v0:v1, u0:u1] = crop_masks[i]
        return masks, features

    def _segment_one(
        self,
        image_rgb: np.ndarray,
        box: np.ndarray,
        all_seeds: np.ndarray,
        own: np.ndarray,
        with_boxcut: bool = True,
        defer_boxcut: bool = False,
    ) -> tuple[np.ndarray, tuple[int, int, int, int], np.ndarray, tuple | None]:
        """One object's mask on its crop, the crop, its features (``boxcut_iou`` 0.5 without
        the seed-free cut) and, with ``defer_boxcut``, the seed-free cut's arguments of
        ``_boxcut_iou`` (``boxcut_iou`` NaN) instead of its result (None when none is made)."""
        cfg = self.config
        height_px, width_px = image_rgb.shape[:2]
        box_w, box_h = box[2] - box[0], box[3] - box[1]
        margin = max(cfg.box_margin_min_px, cfg.box_margin_fraction * max(box_w, box_h))
        u0 = int(max(0, np.floor(box[0] - margin)))
        v0 = int(max(0, np.floor(box[1] - margin)))
        u1 = int(min(width_px, np.ceil(box[2] + margin)))
        v1 = int(min(height_px, np.ceil(box[3] + margin)))
        roi_w, roi_h = u1 - u0, v1 - v0
        scale = min(1.0, cfg.working_max_side_px / max(roi_w, roi_h))
        work_w, work_h = max(2, int(round(roi_w * scale))), max(2, int(round(roi_h * scale)))
        sx, sy = work_w / roi_w, work_h / roi_h
        # GrabCut's colour models are only defined up to channel order; keep OpenCV's BGR
        # (flipped after shrinking: resizing works per channel, so the pixels are the same, and
        # copying the full-resolution crop cost more than the resize).
        crop = image_rgb[v0:v1, u0:u1]
        if (work_w, work_h) != (roi_w, roi_h):
            crop = cv2.resize(crop, (work_w, work_h), interpolation=cv2.INTER_AREA)
        crop = np.ascontiguousarray(crop[:, :, ::-1])

        # Box and seeds in working pixels (pixel (c, r) covers [c, c+1) x [r, r+1)).
        bu0 = int(np.clip(np.floor((box[0] - u0) * sx), 0, work_w - 1))
        bv0 = int(np.clip(np.floor((box[1] - v0) * sy), 0, work_h - 1))
        bu1 = int(np.clip(np.ceil((box[2] - u0) * sx), bu0 + 1, work_w))
        bv1 = int(np.clip(np.ceil((box[3] - v0) * sy), bv0 + 1, work_h))
        in_box = (
            (all_seeds[:, 0] >= box[0])
            & (all_seeds[:, 0] < box[2])
            & (all_seeds[:, 1] >= box[1])
            & (all_seeds[:, 1] < box[3])
        )
        seeds_work = np.column_stack([(all_seeds[:, 0] - u0) * sx, (all_seeds[:, 1] - v0) * sy])
        seeds_px = np.floor(seeds_work).astype(np.int32)
        seeds_px[:, 0] = seeds_px[:, 0].clip(bu0, bu1 - 1)
        seeds_px[:, 1] = seeds_px[:, 1].clip(bv0, bv1 - 1)
        own_px = seeds_px[own & in_box]
        foreign_px = seeds_px[~own & in_box]

        label = np.full((work_h, work_w), cv2.GC_BGD, dtype=np.uint8)
        label[bv0:bv1, bu0:bu1] = cv2.GC_PR_BGD
        hull_mask = np.zeros((work_h, work_w), dtype=np.uint8)
        if len(own_px) >= 3:
            hull = cv2.convexHull(own_px.reshape(-1, 1, 2))
            cv2.fillConvexPoly(hull_mask, hull, 1)
        seed_mask = np.zeros((work_h, work_w), dtype=np.uint8)
        seed_mask[own_px[:, 1], own_px[:, 0]] = 1
        if cfg.seed_radius_px > 0 and len(own_px):
            size = 2 * cfg.seed_radius_px + 1
            seed_mask = cv2.dilate(
                seed_mask, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (size, size))
            )
        foreground_prior = (hull_mask | seed_mask).astype(bool)
        grow_px = int(round(cfg.hull_dilation_fraction * max(bu1 - bu0, bv1 - bv0)))
        if grow_px > 0 and foreground_prior.any():
            # LiDAR returns stop short of an object's outline (no beam hits the very edge, the
            # roof or the wheels); grow the prior toward it so that the background colour model
            # learns from the object as little as possible.
            disc = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * grow_px + 1, 2 * grow_px + 1))
            foreground_prior = cv2.dilate(foreground_prior.astype(np.uint8), disc).astype(bool)
        if len(own_px) < 3:
            # Too few seeds for a hull: add the classic box prior (the box's inner part).
            iu, iv = max(1, (bu1 - bu0) // 8), max(1, (bv1 - bv0) // 8)
            foreground_prior[
                bv0 + iv : max(bv0 + iv + 1, bv1 - iv), bu0 + iu : max(bu0 + iu + 1, bu1 - iu)
            ] = True
        foreground_prior[:bv0] = False
        foreground_prior[bv1:] = False
        foreground_prior[:, :bu0] = False
        foreground_prior[:, bu1:] = False
        label[foreground_prior] = cv2.GC_PR_FGD
        if len(foreign_px):
            label[foreign_px[:, 1], foreign_px[:, 0]] = cv2.GC_PR_BGD
            label[own_px[:, 1], own_px[:, 0]] = cv2.GC_PR_FGD
        background = (label == cv2.GC_BGD) | (label == cv2.GC_PR_BGD)
        if not background.any():
            # The box fills the crop and the seeds fill the box: give GrabCut a background ring.
            label[[0, -1], :] = cv2.GC_PR_BGD
            label[:, [0, -1]] = cv2.GC_PR_BGD

        grab_cut(crop, label, cfg.grabcut_iterations)
        cut = (label == cv2.GC_FGD) | (label == cv2.GC_PR_FGD)
        mask_work = self._keep_seeded_parts(cut, own_px)
        if not mask_work.any() and len(own_px) >= 3:
            # GrabCut found no colour boundary (an object coloured like its surroundings): fall
            # back to the LiDAR evidence alone; cut_support = 0 tells the score.
            mask_work = foreground_prior.copy()

        # Features, on the working grid.
        seed_recall = float(mask_work[own_px[:, 1], own_px[:, 0]].mean()) if len(own_px) else 0.0
        boxcut_args = None
        if (
            with_boxcut
            and cfg.boxcut_iterations > 0
            and (bu1 - bu0) >= 2
            and (bv1 - bv0) >= 2
            and background.any()
        ):
            if defer_boxcut:
                boxcut_args = (crop, (bu0, bv0, bu1, bv1), mask_work)
                boxcut_iou = np.nan
            else:
                boxcut_iou = self._boxcut_iou(crop, (bu0, bv0, bu1, bv1), mask_work)
        else:
            boxcut_iou = 0.5
        mask_area = np.count_nonzero(mask_work)
        cut_support = np.count_nonzero(mask_work & cut) / mask_area if mask_area else 0.0
        box_fill = mask_area / ((bu1 - bu0) * (bv1 - bv0))
        features = np.array(
            # overlap_kept: the whole mask until overlaps are resolved
            [seed_recall, boxcut_iou, cut_support, box_fill, 1.0 if mask_area else 0.0]
        )

        if (work_w, work_h) != (roi_w, roi_h):
            mask_roi = (
                cv2.resize(
                    mask_work.astype(np.uint8) * 255, (roi_w, roi_h), interpolation=cv2.INTER_LINEAR
                )
                > 127
            )
        else:
            mask_roi = mask_work
        # The object lies inside its projected box: clip the scaled-back mask to it.
        clip = np.zeros((roi_h, roi_w), dtype=bool)
        clip[
            int(np.floor(box[1])) - v0 : int(np.ceil(box[3])) - v0,
            int(np.floor(box[0])) - u0 : int(np.ceil(box[2])) - u0,
        ] = True
        return mask_roi & clip, (u0, v0, u1, v1), features, boxcut_args

    def _boxcut_iou(
        self, crop: np.ndarray, box: tuple[int, int, int, int], mask_work: np.ndarray
    ) -> float:
        """``boxcut_iou``: IoU of the seeded mask (working grid) with the seed-free cut of the
        working crop from the box (working pixels) alone; 0.5 where GrabCut cannot start."""
        try:
            return _iou(mask_work, self._boxcut(crop, box))
        except ValueError:  # a box covering the whole crop has no background to model
            return 0.5

    def _boxcut(self, crop: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
        """(h, w) bool seed-free GrabCut mask of the working crop from the box (working pixels
        [u0, v0, u1, v1]) alone, cut on a grid of at most ``boxcut_max_side_px`` and scaled back.

        Raises:
            ValueError: the box leaves GrabCut no background to model.
        """
        cfg = self.config
        work_h, work_w = crop.shape[:2]
        bu0, bv0, bu1, bv1 = box
        scale = min(1.0, cfg.boxcut_max_side_px / max(work_w, work_h))
        small_w, small_h = max(2, int(round(work_w * scale))), max(2, int(round(work_h * scale)))
        if (small_w, small_h) != (work_w, work_h):
            sx, sy = small_w / work_w, small_h / work_h
            crop = cv2.resize(crop, (small_w, small_h), interpolation=cv2.INTER_AREA)
            bu0, bv0 = int(np.floor(bu0 * sx)), int(np.floor(bv0 * sy))
            bu1 = max(bu0 + 1, min(small_w, int(np.ceil(bu1 * sx))))
            bv1 = max(bv0 + 1, min(small_h, int(np.ceil(bv1 * sy))))
        label = np.zeros((small_h, small_w), dtype=np.uint8)
        grab_cut(crop, label, cfg.boxcut_iterations, rect=(bu0, bv0, bu1 - bu0, bv1 - bv0))
        cut = ((label == cv2.GC_FGD) | (label == cv2.GC_PR_FGD)).astype(np.uint8)
        if (small_w, small_h) != (work_w, work_h):
            cut = cv2.resize(cut, (work_w, work_h), interpolation=cv2.INTER_NEAREST)
        return cut.view(bool)

    @staticmethod
    def _keep_seeded_parts(mask: np.ndarray, own_px: np.ndarray) -> np.ndarray:
        """Keep the connected parts of the mask that hold a seed (the largest if none do)."""
        if not mask.any():
            return mask
        count, parts = cv2.connectedComponents(mask.astype(np.uint8), connectivity=8)
        if count <= 2:
            return _fill_holes(mask)
        seeded = np.unique(parts[own_px[:, 1], own_px[:, 0]]) if len(own_px) else np.zeros(0, int)
        seeded = seeded[seeded > 0]
        if len(seeded) == 0:
            sizes = np.bincount(parts.ravel(), minlength=count)
            sizes[0] = 0
            seeded = np.array([int(np.argmax(sizes))])
        return _fill_holes(np.isin(parts, seeded))
