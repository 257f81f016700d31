"""The default segmenter: presence from geometry, the image only for the boundary. No weights.

Whether an object is seen, and where, comes from what the data gives exactly
(``autolabel.segmentation.geometry``): the object's projected 3D box hull, minus what nearer
annotated boxes cover (box z-buffer), minus where the LiDAR saw something nearer than the object
(LiDAR depth). That *geometric mask* decides presence; the image never adds an object or removes
one. The image only moves the boundary inside the geometric mask: a box hull is larger than the
car in it (rounded corners, wheel arches, the air above a sloped bonnet), so GrabCut, started with
the geometric mask as "probably foreground", the object's own LiDAR returns as "surely
foreground" and everything outside as "surely background", trims what the colours say is not the
object. A trim that would drop more than ``max_trim_share`` of the geometric mask is refused (a
colour model that cannot tell a dark car from asphalt must not erase it).

Score, the same on synthetic and real images because it uses no colour:

    score = own_return_recall * visible_share

- ``visible_share``: the share of the object's hull left in its geometric mask (not covered by a
  nearer box, not behind a nearer LiDAR return), in [0, 1];
- ``own_return_recall``: the share of the object's own projected LiDAR returns (points inside its
  3D box) that fall inside the final mask; 1 for an object with no returns in the image, which is
  then judged by geometry alone (``visibility.parquet`` says so in ``evidence``).

A fully visible object whose returns all land in its mask scores 1; an object half hidden behind
a nearer car scores about 0.5; one behind a wall the LiDAR saw scores near 0.

Geometry is only as right as the box. A detector's false positive (a bush boxed as a truck, a
facade as a trailer) has a hull and LiDAR returns too, so geometry alone would mark it. For the
objects of tracks scoring below ``image_evidence_below`` (``prompts["track_score"]``; exact
ground truth scores 1 and is never checked; tracks the visibility filter rejects on their score,
below ``image_evidence_from``, neither) the segmenter also measures *image evidence*: the
LiDAR-seeded GrabCut's calibrated score (``lidar_seeded.py``, the predicted IoU of a colour mask
seeded by the object's own returns) in ``SegmentationResult.image_score`` (NaN elsewhere), and
caps that object's score by it (``image_caps_score``). The visibility rule ``IMAGE_EVIDENCE``
judges the track by its checked views; the mask stays the geometric one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from autolabel.segmentation.core import SegmentationResult, validate_segment_inputs
from autolabel.segmentation.geometry import ImageGeometry
from autolabel.segmentation.grabcut import grab_cut

__all__ = ["GeometricConfig", "GeometricSegmenter"]


@dataclass(frozen=True)
class GeometricConfig:
    """Settings of the geometric segmenter's image refinement.

    Attributes:
        refine_iterations: GrabCut iterations of the boundary refinement (0: the geometric mask
            is the mask).
        refine_min_px: geometric masks smaller than this (pixels) are not refined.
        refine_min_visible_share: objects with less of their hull left in the geometric mask
            are not refined (mostly hidden: no question will be asked about them).
        working_max_side_px: longer side of the crop GrabCut runs on, pixels.
        seed_radius_px: radius of the "surely foreground" disc around each own return, working
            pixels.
        max_trim_share: the largest share of the geometric mask a refinement may remove; a larger
            trim is refused and the geometric mask kept.
        image_evidence_below: objects of tracks scoring below this (``prompts["track_score"]``)
            also get image evidence (``image_score``); 0: never measured.
        image_evidence_from: ...but not those of tracks scoring below this: a visibility
            filter that rejects such tracks (``min_track_score``) never reads their evidence,
            and measuring it is most of this segmenter's cost. ``autolabel run`` sets it to the
            run's ``visibility.min_track_score`` unless ``segmenter_options`` gives it.
        image_caps_score: an object with image evidence scores at most that evidence (its score
            then also says how sure the image is that it is there, which the QA confidence reads).
        evidence_working_max_side_px: longer side of the crop the image evidence's LiDAR-seeded
            GrabCut runs on, pixels (``LidarSeededConfig.working_max_side_px``).
        evidence_boxcut_max_side_px: longer side of the grid of the evidence's seed-free GrabCut,
            pixels (``LidarSeededConfig.boxcut_max_side_px``). Both as the LiDAR-seeded
            segmenter's, whose weights were fitted there: smaller grids cost about in proportion
            to their pixels, but the scores fall on real images. With the ``lidar`` detector at
            ``min_image_score`` 0.7, the views kept from real tracks on PandaSet-002 went from
            152 to 141 (96 / 80), 138 (80 / 64), 123 (64 / 64), while the segment stage of the
            20 s synthetic clip went from 13.98 to 11.11 CPU s at 80 / 64 (with
            ``working_max_side_px`` 48, which alone gained 4 % there and none on PandaSet-002);
            at 64 / 64 the unit test's false positive (bare background with LiDAR seeds over it)
            got no colour cut and scored 0.72 (0.55 at 96 / 96).
        evidence_decided_above: the score above which image evidence supports its track (the
            visibility filter's ``min_image_score``); with it, an object's seed-free evidence cut
            (``boxcut_iou``, the colour segmenter's costliest part after the seeded cut) is
            not run where no value of it could change what the run decides: its evidence falls
            on the same side of this threshold for ``boxcut_iou`` 0 and 1, and the score it
            caps stays the geometric one, or at least ``evidence_score_full``, either way (the
            score published is then the one with ``boxcut_iou`` 0.5, as when no cut is made).
            0: every cut runs. ``autolabel run`` sets it (and the next) from its visibility and
            QA configs unless ``segmenter_options`` gives them.
        evidence_score_full: a mask score at or above which nothing downstream tells scores
            apart (QA's ``mask_score_full``; it must exceed the filter's ``min_mask_score``);
            0: not used.
        refine_all_views: also refine the objects of ``prompts["refine_skip"]`` (the views the
            run's visibility filter rejects whatever their masks: no question is asked about
            them and no mark drawn). False keeps their geometric masks: on the 20 s synthetic
            clip and PandaSet-002 (``lidar`` detector) about two thirds of the refined views
            were such, and refining them was about a fifth of the segment stage's CPU.
    """

    refine_iterations: int = 1
    refine_min_px: int = 600
    refine_min_visible_share: float = 0.25
    working_max_side_px: int = 64
    seed_radius_px: int = 1
    max_trim_share: float = 0.35
    image_evidence_below: float = 0.8
    image_evidence_from: float = 0.0
    image_caps_score: bool = True
    evidence_working_max_side_px: int = 96
    evidence_boxcut_max_side_px: int = 96
    evidence_decided_above: float = 0.0
    evidence_score_full: float = 0.0
    refine_all_views: bool = False

    def __post_init__(self) -> None:
        for key in ("image_caps_score", "refine_all_views"):
            if not isinstance(getattr(self, key), (bool, np.bool_)):
                raise ValueError(
                    f"GeometricConfig.{key}: must be true or false, got {getattr(self, key)!r}"
                )
        for key in ("refine_iterations", "refine_min_px", "seed_radius_px"):
            if getattr(self, key) < 0:
                raise ValueError(f"GeometricConfig.{key}: must be >= 0, got {getattr(self, key)}")
        for key in (
            "working_max_side_px",
            "evidence_working_max_side_px",
            "evidence_boxcut_max_side_px",
        ):
            if getattr(self, key) < 16:
                raise ValueError(f"GeometricConfig.{key}: must be >= 16, got {getattr(self, key)}")
        if not 0.0 <= self.refine_min_visible_share <= 1.0:
            raise ValueError(
                "GeometricConfig.refine_min_visible_share: must be in [0, 1], got "
                f"{self.refine_min_visible_share}"
            )
        if not 0.0 <= self.image_evidence_below <= 1.0:
            raise ValueError(
                "GeometricConfig.image_evidence_below: must be in [0, 1], got "
                f"{self.image_evidence_below}"
            )
        for key in ("evidence_decided_above", "evidence_score_full"):
            if not 0.0 <= getattr(self, key) <= 1.0:
                raise ValueError(
                    f"GeometricConfig.{key}: must be in [0, 1], got {getattr(self, key)}"
                )
        if not 0.0 <= self.image_evidence_from <= 1.0:
            raise ValueError(
                "GeometricConfig.image_evidence_from: must be in [0, 1], got "
                f"{self.image_evidence_from}"
            )
        if not 0.0 <= self.max_trim_share <= 1.0:
            raise ValueError(
                f"GeometricConfig.max_trim_share: must be in [0, 1], got {self.max_trim_share}"
            )


def own_return_recall(masks: np.ndarray, seeds: list[np.ndarray]) -> np.ndarray:
    """(N,) share of each object's own projected returns inside its mask; NaN without returns."""
    n, height_px, width_px = masks.shape
    counts = np.array([len(s) for s in seeds], np.int64)
    if counts.sum() == 0:
        return np.full(n, np.nan)
    owner = np.repeat(np.arange(n), counts)
    uv = np.concatenate(seeds)
    u = np.clip(uv[:, 0].astype(np.int64), 0, width_px - 1)
    v = np.clip(uv[:, 1].astype(np.int64), 0, height_px - 1)
    hits = np.bincount(owner, weights=masks[owner, v, u], minlength=n)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(counts > 0, hits / counts, np.nan)


class GeometricSegmenter:
    """Geometric masks refined at the boundary by the image, behind the ``Segmenter`` interface."""

    name = "geometric"

    def __init__(self, config: GeometricConfig | None = None) -> None:
        self.config = config or GeometricConfig()
        self._colour = None  # the LiDAR-seeded segmenter of the image evidence, built on use

    def segment(
        self,
        image: np.ndarray,
        boxes_2d: np.ndarray,
        prompts: dict[str, Any] | None = None,
    ) -> SegmentationResult:
        """Masks and scores of the N objects of one image.

        Args:
            image: (H, W, 3) uint8 RGB.
            boxes_2d: (N, 4) projected boxes [u_min, v_min, u_max, v_max], pixels.
            prompts: ``"track_score"`` (optional): (N,) track scores; objects scoring below
                ``image_evidence_below`` get an ``image_score``; ``"image_evidence_skip"``
                (optional): (N,) bool, objects that get none whatever their track score (views
                the visibility filter rejects anyway); ``"refine_skip"`` (optional): (N,) bool,
                objects that keep their geometric mask unless ``refine_all_views`` (views the
                visibility filter rejects whatever their masks). ``"geometry"`` (required): the
                image's ``ImageGeometry`` (from
                ``geometry.image_geometry``); ``"points_uv"``: the objects' own projected returns.

        Returns:
            SegmentationResult: (N, H, W) masks inside the geometric masks, (N,) float32 scores
            ``own_return_recall * visible_share`` (at most the image evidence where measured and
            ``image_caps_score``), ``image_score`` (see the module docstring).

        Raises:
            ValueError: no ``geometry`` prompt, or one of another image size or object count, or
                a ``refine_skip`` of another object count.
        """
        image, boxes, seeds = validate_segment_inputs(image, boxes_2d, prompts)
        geometry = (prompts or {}).get("geometry")
        if not isinstance(geometry, ImageGeometry):
            raise ValueError(
                "segment: the geometric segmenter needs prompts['geometry'] (an ImageGeometry "
                "from autolabel.segmentation.geometry.image_geometry)"
            )
        n = len(boxes)
        if len(geometry.boxes_px) != n or tuple(geometry.image_size_px) != image.shape[1::-1]:
            width_px, height_px = geometry.image_size_px
            raise ValueError(
                f"segment: prompts['geometry'] has {len(geometry.boxes_px)} masks of a "
                f"{width_px}x{height_px} image for {n} boxes on a {image.shape[1]}x"
                f"{image.shape[0]} image"
            )
        if seeds is None:
            seeds = [np.zeros((0, 2))] * n
        # The geometric masks, copied crop by crop into a column-major buffer (as the geometry's,
        # so COCO RLE encodes it without a transposing copy; untouched pages stay unallocated).
        masks = np.zeros((n, image.shape[1], image.shape[0]), bool).transpose(0, 2, 1)
        for i, (u0, v0, u1, v1) in enumerate(geometry.boxes_px):
            masks[i, v0:v1, u0:u1] = geometry.crop_mask(i)
        for i in np.flatnonzero(self._refined(geometry, prompts or {}, n)):
            self._refine(image, masks[i], geometry.boxes_px[i], seeds[i])
        recall = own_return_recall(masks, seeds)
        score = np.where(np.isnan(recall), 1.0, recall) * geometry.visible_share
        image_score = self._image_evidence(image, boxes, seeds, prompts or {}, score)
        if image_score is not None and self.config.image_caps_score:
            score = np.where(np.isnan(image_score), score, np.minimum(score, image_score))
        return SegmentationResult(
            masks, score.astype(np.float32), image_score, geometry.boxes_px.copy()
        )

    def reads_image(self, n: int, prompts: dict[str, Any]) -> bool:
        """Whether ``segment`` reads the image's pixels for these N objects and prompts (same
        arguments): only refinement and image evidence do; without either, the masks and scores
        come from the geometry and the LiDAR returns alone, and the caller need not decode the
        image."""
        geometry = prompts.get("geometry")
        if not isinstance(geometry, ImageGeometry) or len(geometry.hull_px) != n:
            return True  # segment() will name the problem
        untrusted = self._untrusted(prompts, n)
        return bool(self._refined(geometry, prompts, n).any()) or (
            untrusted is not None and bool(untrusted.any())
        )

    def _refined(self, geometry: ImageGeometry, prompts: dict, n: int) -> np.ndarray:
        """(N,) bool: the objects whose geometric mask is refined by the image."""
        if self.config.refine_iterations == 0:
            return np.zeros(n, bool)
        worth = (geometry.geometric_px >= max(self.config.refine_min_px, 1)) & (
            geometry.visible_share >= self.config.refine_min_visible_share
        )
        skip = prompts.get("refine_skip")
        if skip is not None:
            skip = np.asarray(skip, bool).reshape(-1)
            if len(skip) != n:
                raise ValueError(
                    f"segment: prompts['refine_skip'] has {len(skip)} values for {n} boxes"
                )
            if not self.config.refine_all_views:
                worth &= ~skip
        return worth

    def _untrusted(self, prompts: dict, n: int) -> np.ndarray | None:
        """(N,) bool: the objects of untrusted tracks (scoring in [``image_evidence_from``,
        ``image_evidence_below``)) that get image evidence; None without track scores."""
        if prompts.get("track_score") is None:
            return None
        track_score = np.asarray(prompts["track_score"], np.float64).reshape(-1)
        if len(track_score) != n:
            raise ValueError(
                f"segment: prompts['track_score'] has {len(track_score)} values for {n} boxes"
            )
        untrusted = (track_score < self.config.image_evidence_below) & (
            track_score >= self.config.image_evidence_from
        )
        if prompts.get("image_evidence_skip") is not None:
            skip = np.asarray(prompts["image_evidence_skip"], bool).reshape(-1)
            if len(skip) != n:
                raise ValueError(
                    f"segment: prompts['image_evidence_skip'] has {len(skip)} values for {n} boxes"
                )
            untrusted &= ~skip
        return untrusted

    def _image_evidence(
        self,
        image: np.ndarray,
        boxes: np.ndarray,
        seeds: list[np.ndarray],
        prompts: dict,
        geometric_score: np.ndarray,
    ) -> np.ndarray | None:
        """(N,) float32 LiDAR-seeded GrabCut score of the objects of untrusted tracks
        (``_untrusted``), NaN for the others; None without track scores. ``geometric_score``:
        (N,) the scores the evidence caps (``evidence_decided_above``)."""
        untrusted = self._untrusted(prompts, len(boxes))
        if untrusted is None:
            return None
        out = np.full(len(boxes), np.nan, np.float32)
        if not untrusted.any():
            return out
        from autolabel.segmentation.lidar_seeded import (
            LidarSeededConfig,
            LidarSeededSegmenter,
            score_from_features,
        )

        if self._colour is None:
            self._colour = LidarSeededSegmenter(
                LidarSeededConfig(
                    working_max_side_px=self.config.evidence_working_max_side_px,
                    boxcut_max_side_px=self.config.evidence_boxcut_max_side_px,
                )
            )
        # The objects of the image as the LiDAR-seeded segmenter sees them: its masks give a
        # shared pixel to the nearest object, so the trusted objects that may take pixels from
        # an untrusted one are cut too (``wanted``: only those, and no score of their own).
        _, features = self._colour.segment_with_features(
            image,
            boxes,
            {"points_uv": seeds, "depth_m": prompts.get("depth_m")},
            untrusted,
            full_masks=False,
            boxcut_skip=(
                None
                if self.config.evidence_decided_above <= 0.0
                else lambda f: self._boxcut_decides_nothing(f, geometric_score)
            ),
        )
        out[untrusted] = score_from_features(features)[untrusted]
        return out

    def _boxcut_decides_nothing(
        self, features: np.ndarray, geometric_score: np.ndarray
    ) -> np.ndarray:
        """(N,) bool: the objects whose seed-free cut cannot change a decision of the run (see
        ``evidence_decided_above``), from their (N, 5) features without it. The score grows
        with ``boxcut_iou`` (positive weight), so its values for 0 and 1 bound every outcome."""
        from autolabel.segmentation.lidar_seeded import SCORE_FEATURE_NAMES, score_from_features

        column = SCORE_FEATURE_NAMES.index("boxcut_iou")
        low, high = features.copy(), features.copy()
        low[:, column], high[:, column] = 0.0, 1.0
        lo = score_from_features(low).astype(np.float64)
        hi = score_from_features(high).astype(np.float64)
        threshold = self.config.evidence_decided_above
        same_side = (lo > threshold) | (hi <= threshold)
        uncapped = lo >= geometric_score  # the cap leaves the geometric score either way
        full = self.config.evidence_score_full
        # Capped either way, but at or above the score where nothing downstream tells apart.
        saturated = (full > 0.0) & (np.minimum(geometric_score, lo) >= full)
        return same_side & (uncapped | saturated)

    def _refine(
        self, image_rgb: np.ndarray, mask: np.ndarray, box: np.ndarray, seeds: np.ndarray
    ) -> None:
        """Trim ``mask`` (a view into the (H, W) mask, changed in place) to the image boundary."""
        cfg = self.config
        height_px, width_px = mask.shape
        u0, v0, u1, v1 = (int(x) for x in box)
        margin = max(4, int(0.1 * max(u1 - u0, v1 - v0)))
        u0, v0 = max(0, u0 - margin), max(0, v0 - margin)
        u1, v1 = min(width_px, u1 + margin), min(height_px, v1 + margin)
        roi_w, roi_h = u1 - u0, v1 - v0
        scale = min(1.0, cfg.working_max_side_px / max(roi_w, roi_h))
        work = (max(2, int(round(roi_w * scale))), max(2, int(round(roi_h * scale))))
        geometric = mask[v0:v1, u0:u1]
        # The masks are column-major (for COCO RLE): the full-resolution mask work runs on the
        # transpose, which is contiguous there (nearest-neighbour resizing maps each axis on its
        # own, so resizing the transpose gives the transposed result, pixel for pixel).
        geometric_t = geometric.T
        # GrabCut's colour models are only defined up to channel order; keep OpenCV's BGR. The
        # channels are flipped after shrinking (resizing works per channel, so the pixels are
        # the same): copying the full-resolution crop cost more than the resize.
        crop = np.ascontiguousarray(
            cv2.resize(image_rgb[v0:v1, u0:u1], work, interpolation=cv2.INTER_AREA)[:, :, ::-1]
        )
        prior = np.ascontiguousarray(
            cv2.resize(geometric_t.view(np.uint8), work[::-1], interpolation=cv2.INTER_NEAREST).T
        )
        label = np.where(prior > 0, cv2.GC_PR_FGD, cv2.GC_BGD).astype(np.uint8)
        if not (label == cv2.GC_BGD).any():
            return  # the object fills the crop: no background to learn from
        su = ((seeds[:, 0] - u0) * work[0] / roi_w).astype(np.int64)
        sv = ((seeds[:, 1] - v0) * work[1] / roi_h).astype(np.int64)
        inside = (su >= 0) & (su < work[0]) & (sv >= 0) & (sv < work[1])
        sure = np.zeros(label.shape, np.uint8)
        sure[sv[inside], su[inside]] = 1
        if cfg.seed_radius_px > 0:
            size = 2 * cfg.seed_radius_px + 1
            sure = cv2.dilate(sure, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (size, size)))
        label[(sure > 0) & (prior > 0)] = cv2.GC_FGD
        try:
            grab_cut(crop, label, cfg.refine_iterations)
        except ValueError:
            return  # too few pixels of one kind for a colour model: keep the geometric mask
        cut = np.ascontiguousarray(((label == cv2.GC_FGD) | (label == cv2.GC_PR_FGD)).T, np.uint8)
        cut = cv2.resize(cut, (roi_h, roi_w), interpolation=cv2.INTER_NEAREST).view(bool)
        refined = geometric_t & cut
        kept = np.count_nonzero(refined)
        if kept >= (1.0 - cfg.max_trim_share) * np.count_nonzero(geometric_t):
            geometric_t[...] = refined
