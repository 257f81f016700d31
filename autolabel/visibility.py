"""The visibility filter: which (image, object) candidates are reliable enough to ask about.

Rules (each configurable, checked in this order; a candidate is kept when none fails):

0. ``IMAGE``: the camera image could be read (a missing or unreadable image loses its own views
   only; the run's summary names it).
1. ``IN_IMAGE``: at least ``min_in_image_fraction`` of the projected 2D box lies in the image,
   or, where the caller measured it (``CameraViews.volume_in_image``), at least
   ``min_in_image_volume`` of the 3D box's volume is in view. Perspective stretches a near
   object's 2D box far beyond the image (a car parked beside the camera, most of it in view, has
   a few per cent of its 2D box inside), so the 2D share alone drops the nearest cars.
2. ``LIDAR_POINTS``: at least ``min_lidar_points`` LiDAR points inside the 3D box (MetaVQA drops
   objects "scanned by less than five rays of Lidar", seed 004, A.1).
3. ``TRACK_SCORE``: the view's track scores at least ``min_track_score`` (the label track's score:
   the refine stage's track score, or the detection score; ground-truth replay scores 1).
4. ``IMAGE_EVIDENCE``: where the segmenter measured image evidence that the object is there
   (``image_score``), at least ``min_image_support`` of the track's measured views have
   ``image_score > min_image_score`` (``track_image_support``). A segmenter that decides presence
   from geometry cannot tell a detector's false positive (a bush boxed as a truck) from an object:
   both have a hull and LiDAR returns; the geometric one measures image evidence for the tracks it
   does not trust (``GeometricConfig.image_evidence_below``). The rule judges the track, not the
   view: a colour model fails on some views of real objects (a dark car on asphalt), and a
   track's views then stay consistent across cameras and keyframes. The run measures evidence
   only on views that no rule reading neither mask nor image rejects (IN_IMAGE, LIDAR_POINTS,
   HULL_OCCLUDED, LIDAR_OCCLUDED: ``rejected_without_mask``, IN_IMAGE by the 2D box alone): a
   box cut by the image edge (a view kept on its volume share too) or a mostly hidden object is
   no view to judge its track by, and its evidence was most of the segment stage's cost. A
   track of a class in ``image_evidence_lidar_classes`` (the geometric segmenter's: cars)
   whose median view holds at least ``image_evidence_max_points`` LiDAR returns is judged by
   the LiDAR alone: on PandaSet-002 the colour model scored 10 real car
   tracks of 125-1,800 returns (cars parked beside the ego, grey on grey, cut by the image's
   edge) below the threshold and a single false positive (9 returns); the synthetic demo's false
   positives it catches hold 2-5. The larger classes keep the check: their known dense false
   positives (a bush as a truck, a facade as a trailer, a car and a small construction vehicle
   merged into one 7 m truck on PandaSet-002) are what the rule is for. The segmenter measures
   no evidence for exempt tracks either (``dense_track_views``), so none caps their mask score.
5. ``MASK_SCORE``: the segmenter's mask score exceeds ``min_mask_score`` (STRIDE-QA: SAM 2.1's
   predicted IoU > 0.8, seed 003).
6. ``BOX_IOU``: IoU of the projected box (clipped to the image) and the mask's tight box exceeds
   ``min_box_iou`` (STRIDE-QA: > 0.3).
7. ``COVERAGE``: the fraction of the mask's pixels inside the projected box exceeds
   ``min_coverage`` (STRIDE-QA: > 0.8).
8. ``VISIBLE_PIXELS``: at least ``min_visible_px`` pixels of the object remain after z-buffering
   against nearer objects of the same image (MetaVQA: a visible object has >= 1,200 pixels).
9. ``HULL_OCCLUDED``: at most ``max_hull_occluded_share`` of the object's projected 3D box hull is
   covered by nearer annotated boxes' hulls (box z-buffer; skipped when not given).
10. ``LIDAR_OCCLUDED``: at most ``max_lidar_occluded_share`` of the LiDAR-covered part of the hull
   has a return nearer than the object (something unannotated the LiDAR saw in front: a wall, a
   bush, a parked trailer); skipped where no return falls on the hull (geometry alone).

In the run, the views of a track that fails ``TRACK_SCORE`` hide nothing in the box and mask
z-buffers (``occluder_depth``): the filter does not trust that object to exist.

Thresholds depend on the segmenter (``visibility_defaults``): SAM2 and the LiDAR-seeded GrabCut
keep STRIDE-QA's (score > 0.8, box IoU > 0.3, coverage > 0.8); the geometric segmenter's score is
another quantity (own-return recall x unoccluded hull share) with its threshold measured on real
data (PandaSet-002, ``bench/bench_visibility_real.py``).

Pixels follow ``calib.projection``: u right, v down, a pixel (v, u) covers [u, u+1] x [v, v+1]
and is "inside" a box when its centre is.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numba
import numpy as np

from autolabel.classes import DETECTION_CLASSES
from autolabel.masks import MaskLike, mask_boxes_2d, masks_to_array
from calib.projection import box_iou_2d, clip_boxes_2d, in_image_fraction


class VisibilityRule(enum.IntFlag):
    """Bit of each rule in ``VisibilityDecision.failed_rules``."""

    IN_IMAGE = 1
    LIDAR_POINTS = 2
    MASK_SCORE = 4
    BOX_IOU = 8
    COVERAGE = 16
    VISIBLE_PIXELS = 32
    HULL_OCCLUDED = 64
    LIDAR_OCCLUDED = 128
    IMAGE = 256
    TRACK_SCORE = 512
    IMAGE_EVIDENCE = 1024


#: The order in which rules are checked; ``first_failed_rule`` is the first failing one.
RULE_ORDER: tuple[VisibilityRule, ...] = (
    VisibilityRule.IMAGE,
    VisibilityRule.IN_IMAGE,
    VisibilityRule.LIDAR_POINTS,
    VisibilityRule.TRACK_SCORE,
    VisibilityRule.IMAGE_EVIDENCE,
    VisibilityRule.MASK_SCORE,
    VisibilityRule.BOX_IOU,
    VisibilityRule.COVERAGE,
    VisibilityRule.VISIBLE_PIXELS,
    VisibilityRule.HULL_OCCLUDED,
    VisibilityRule.LIDAR_OCCLUDED,
)


@dataclass(frozen=True)
class VisibilityConfig:
    """Thresholds of the visibility filter (defaults: STRIDE-QA for IoU, coverage and score).

    Attributes:
        min_box_iou: IoU(projected box, mask box) must be strictly greater.
        min_coverage: fraction of mask pixels inside the projected box must be strictly greater.
        min_mask_score: the mask's score must be strictly greater.
        min_in_image_fraction: fraction of the projected box's area inside the image, at least.
        min_in_image_volume: ...or fraction of the 3D box's volume in view, at least (where
            measured). Above the area share's 0.5, which let the synthetic demo's buses and
            trailers with 0.55-0.63 of their volume in view change its multi-camera answers.
            Since boxes stand on the road, the demo answers alike at 0.6 and 0.65, and
            PandaSet-002's cars parked beside the ego have 0.6-0.95 (at 0.65 the BMW 3.8 m
            beside the front-right camera, 0.62-0.64, flickered in and out).
        min_visible_px: pixels left after occlusion by nearer objects, at least.
        min_lidar_points: LiDAR points in the 3D box, at least (skipped when none are given).
        zbuffer_with: ``"mask"`` z-buffers the objects' masks; ``"box"`` paints their clipped
            projected boxes instead, as MetaVQA does for nuScenes images without masks.
        max_hull_occluded_share: share of the hull covered by nearer boxes' hulls, at most.
        max_lidar_occluded_share: share of the LiDAR-covered hull with a nearer return, at most.
        min_track_score: the view's track score, at least (skipped where no score is given).
        min_image_score: a view supports its track when the segmenter's image evidence is
            strictly greater.
        min_image_support: share of a track's measured views that support it, at least (skipped
            for tracks without measured views).
        image_evidence_max_points: ``IMAGE_EVIDENCE`` does not judge the tracks of
            ``image_evidence_lidar_classes`` whose views hold a median of at least this many
            LiDAR points (0: it judges every track).
        image_evidence_lidar_classes: class names (``DETECTION_CLASSES``) whose dense tracks
            the LiDAR alone judges (a list is taken as a tuple).
        min_image_views: ``IMAGE_EVIDENCE`` judges only tracks with at least this many measured
            views: with one, a single colour failure (common on real objects) rejects a track.
    """

    min_box_iou: float = 0.3
    min_coverage: float = 0.8
    min_mask_score: float = 0.8
    min_in_image_fraction: float = 0.5
    min_in_image_volume: float = 0.6
    min_visible_px: int = 1200
    min_lidar_points: int = 5
    zbuffer_with: str = "mask"
    max_hull_occluded_share: float = 0.9
    max_lidar_occluded_share: float = 0.7
    min_track_score: float = 0.0
    min_image_score: float = 0.0
    min_image_support: float = 0.0
    image_evidence_max_points: int = 0
    image_evidence_lidar_classes: tuple[str, ...] = ()
    min_image_views: int = 1

    def __post_init__(self) -> None:
        classes = self.image_evidence_lidar_classes
        if isinstance(classes, str) or not all(c in DETECTION_CLASSES for c in classes):
            raise ValueError(
                f"image_evidence_lidar_classes: must be a list of {DETECTION_CLASSES}, "
                f"got {classes!r}"
            )
        object.__setattr__(self, "image_evidence_lidar_classes", tuple(classes))
        for name in (
            "min_box_iou", "min_coverage", "min_mask_score", "min_in_image_fraction",
            "min_in_image_volume",
            "max_hull_occluded_share", "max_lidar_occluded_share", "min_track_score",
            "min_image_score", "min_image_support",
        ):  # fmt: skip
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not 0 <= value <= 1
            ):
                raise ValueError(f"{name}: must be a number in [0, 1], got {value!r}")
        for name in (
            "min_visible_px", "min_lidar_points", "image_evidence_max_points", "min_image_views"
        ):  # fmt: skip
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
        failed_rules: uint16 bitmask of every failing ``VisibilityRule``.
        first_failed_rule: uint16, the first failing rule in ``RULE_ORDER`` (0 when kept).
        in_image_fraction, box_iou, coverage: float64 measurements.
        volume_in_image: float64 share of the 3D box's volume in view as given (NaN: not given).
        mask_score: float32 as given; lidar_points: int64 (-1 where not given).
        mask_px: int64 pixels of the mask; visible_px: int64 pixels left after z-buffering.
        mask_box_2d: (N, 4) tight box of the mask, NaN for empty masks.
        image_readable: bool, the view's camera image could be read.
        hull_occluded_share, lidar_occluded_share: float64 as given (NaN: not measured).
        track_score: float64 the view's track score as given (NaN: not given).
        image_support: float64 the track's image support as given (NaN: not measured).
    """

    keep: np.ndarray
    failed_rules: np.ndarray
    first_failed_rule: np.ndarray
    in_image_fraction: np.ndarray
    volume_in_image: np.ndarray
    box_iou: np.ndarray
    coverage: np.ndarray
    mask_score: np.ndarray
    lidar_points: np.ndarray
    mask_px: np.ndarray
    visible_px: np.ndarray
    mask_box_2d: np.ndarray
    image_readable: np.ndarray
    hull_occluded_share: np.ndarray
    lidar_occluded_share: np.ndarray
    track_score: np.ndarray
    image_support: np.ndarray

    def __len__(self) -> int:
        return len(self.keep)

    def failed_rule_names(self, index: int) -> list[str]:
        """Names of the rules candidate ``index`` failed, in check order."""
        bits = int(self.failed_rules[index])
        return [rule.name for rule in RULE_ORDER if bits & rule]


def _crops(boxes: np.ndarray, width_px: int, height_px: int) -> np.ndarray:
    """(N, 4) int [u0, v0, u1, v1] pixel crops holding each box's pixels (centres inside, the
    convention of ``masks.box_masks``); an empty crop for NaN boxes."""
    raw = np.asarray(boxes, np.float64).reshape(-1, 4)
    b = np.nan_to_num(raw, nan=0.0)
    u0 = np.clip(np.ceil(b[:, 0] - 0.5), 0, width_px)
    u1 = np.clip(np.floor(b[:, 2] - 0.5) + 1, 0, width_px)
    v0 = np.clip(np.ceil(b[:, 1] - 0.5), 0, height_px)
    v1 = np.clip(np.floor(b[:, 3] - 0.5) + 1, 0, height_px)
    crops = np.stack([u0, v0, np.maximum(u1, u0), np.maximum(v1, v0)], axis=1).astype(np.int64)
    crops[~np.isfinite(raw).all(axis=1)] = 0
    return crops


def _zbuffer_visible_px(
    masks: np.ndarray | None, crops: np.ndarray, depth_m: np.ndarray, height_px: int, width_px: int
) -> np.ndarray:
    """(N,) pixels of each layer not covered by a nearer one (ties: the lower index wins).

    A layer is the mask inside its crop (``masks`` given) or the whole crop (box z-buffer). Layers
    are painted far to near into one owner map, each on its crop only; N is one image's objects.
    """
    return _mask_counts(masks, crops, crops, depth_m)[2]


def _mask_counts(
    masks: np.ndarray | None, crops: np.ndarray, inner: np.ndarray, depth_m: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(N,) each layer's pixels, those of them inside its ``inner`` crop, and those not covered
    by a nearer layer (``_zbuffer_visible_px``), in one pass over the layers' crops."""
    n = len(crops)
    crops = np.asarray(crops, np.int64).reshape(n, 4)
    inner = np.asarray(inner, np.int64).reshape(n, 4)
    # The owner map covers only the union of the crops (nothing is painted outside it).
    painted = (crops[:, 2] > crops[:, 0]) & (crops[:, 3] > crops[:, 1])
    if not painted.any():
        return np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    order = np.lexsort((-np.arange(n), -np.asarray(depth_m, np.float64)))  # far to near
    if masks is None:
        return _box_zbuffer_kernel(crops, inner, painted, order)
    if masks[0].T.flags.c_contiguous:
        # Column-major masks (the geometric segmenter's): walk the transposes, column by column
        # as they lie in memory (the pixel counts do not depend on the axis order).
        swap = [1, 0, 3, 2]
        return _zbuffer_kernel(
            masks.transpose(0, 2, 1), crops[:, swap], inner[:, swap], painted, order, True
        )
    return _zbuffer_kernel(masks, crops, inner, painted, order, True)


@numba.njit(cache=True)
def _zbuffer_kernel(
    masks: np.ndarray,
    crops: np.ndarray,
    inner: np.ndarray,
    painted: np.ndarray,
    order: np.ndarray,
    use_masks: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_mask_counts`` on (N, rows, cols) ``masks`` (or whole crops without) with crops
    [col0, row0, col1, row1], far to near in ``order``."""
    n = len(crops)
    c0, r0 = 1 << 62, 1 << 62
    c1, r1 = 0, 0
    for i in range(n):
        if painted[i]:
            c0, r0 = min(c0, crops[i, 0]), min(r0, crops[i, 1])
            c1, r1 = max(c1, crops[i, 2]), max(r1, crops[i, 3])
    # Near to far, each pixel counts for the first layer that claims it: the layer a far-to-near
    # painting leaves on top (the order reversed: equal depths, the lower index first).
    claimed = np.zeros((r1 - r0, c1 - c0), np.bool_)
    total = np.zeros(n, np.int64)
    in_inner = np.zeros(n, np.int64)
    visible = np.zeros(n, np.int64)
    for k in range(n - 1, -1, -1):
        i = order[k]
        if not painted[i]:
            continue
        for r in range(crops[i, 1], crops[i, 3]):
            row_inner = inner[i, 1] <= r < inner[i, 3]
            for c in range(crops[i, 0], crops[i, 2]):
                if use_masks and not masks[i, r, c]:
                    continue
                total[i] += 1
                if row_inner and inner[i, 0] <= c < inner[i, 2]:
                    in_inner[i] += 1
                if not claimed[r - r0, c - c0]:
                    claimed[r - r0, c - c0] = True
                    visible[i] += 1
    return total, in_inner, visible


@numba.njit(cache=True)
def _box_zbuffer_kernel(
    crops: np.ndarray, inner: np.ndarray, painted: np.ndarray, order: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_zbuffer_kernel`` without masks (each layer its whole crop [col0, row0, col1, row1]),
    the same counts from rectangle arithmetic: the nearer crops that cover a row are the same
    over each band between their row edges, so a layer's unclaimed pixels are, band by band, its
    width less the union of their column spans times the band's height (O(N^3 log N) per image
    instead of every box pixel: a near car's box is a large share of a 1600 x 900 image)."""
    n = len(crops)
    total = np.zeros(n, np.int64)
    in_inner = np.zeros(n, np.int64)
    visible = np.zeros(n, np.int64)
    nearer = np.empty(n, np.int64)  # the painted layers claimed before this one
    n_nearer = 0
    edges = np.empty(2 * n + 2, np.int64)
    span_lo = np.empty(n, np.int64)
    span_hi = np.empty(n, np.int64)
    for k in range(n - 1, -1, -1):
        i = order[k]
        if not painted[i]:
            continue
        c0, r0, c1, r1 = crops[i, 0], crops[i, 1], crops[i, 2], crops[i, 3]
        total[i] = (c1 - c0) * (r1 - r0)
        in_inner[i] = max(0, min(c1, inner[i, 2]) - max(c0, inner[i, 0])) * max(
            0, min(r1, inner[i, 3]) - max(r0, inner[i, 1])
        )
        m = 0
        edges[m] = r0
        edges[m + 1] = r1
        m += 2
        for t in range(n_nearer):
            j = nearer[t]
            for edge in (crops[j, 1], crops[j, 3]):
                if r0 < edge < r1:
                    edges[m] = edge
                    m += 1
        bands = np.unique(edges[:m])
        unclaimed = 0
        for b in range(len(bands) - 1):
            a, z = bands[b], bands[b + 1]
            s = 0
            for t in range(n_nearer):
                j = nearer[t]
                if crops[j, 1] <= a and crops[j, 3] >= z:
                    lo, hi = max(crops[j, 0], c0), min(crops[j, 2], c1)
                    if lo < hi:
                        span_lo[s] = lo
                        span_hi[s] = hi
                        s += 1
            by_lo = np.argsort(span_lo[:s])
            covered = 0
            end = c0
            for t in range(s):
                lo, hi = max(span_lo[by_lo[t]], end), span_hi[by_lo[t]]
                if hi > lo:
                    covered += hi - lo
                    end = hi
            unclaimed += (c1 - c0 - covered) * (z - a)
        visible[i] = unclaimed
        nearer[n_nearer] = i
        n_nearer += 1
    return total, in_inner, visible


@dataclass
class MaskStatistics:
    """What the visibility rules measure on the masks of N views, all (N,) unless said otherwise.

    Computed by :func:`mask_statistics` where the masks are in memory (the segment stage), so the
    visibility stage need not decode them again; ``evaluate_visibility`` computes the same from
    the masks when none are given.

    Attributes:
        mask_px: int64 pixels of each mask.
        in_box_px: int64 of those inside the projected box (clipped to the image).
        mask_box_2d: (N, 4) tight box of each mask, NaN for empty masks.
        visible_px_mask: int64 mask pixels not covered by a nearer object's mask.
        visible_px_box: int64 box pixels not covered by a nearer object's box.
    """

    mask_px: np.ndarray
    in_box_px: np.ndarray
    mask_box_2d: np.ndarray
    visible_px_mask: np.ndarray
    visible_px_box: np.ndarray

    def rows(self, index: np.ndarray) -> MaskStatistics:
        """The statistics of the views ``index``."""
        return MaskStatistics(**{k: v[index] for k, v in vars(self).items()})

    @staticmethod
    def concatenate(parts: Sequence[MaskStatistics]) -> MaskStatistics:
        """One ``MaskStatistics`` of the views of ``parts``, in order."""
        names = [f.name for f in fields(MaskStatistics)]
        if not parts:
            return MaskStatistics(*(np.zeros((0, 4) if k == "mask_box_2d" else 0) for k in names))
        return MaskStatistics(**{k: np.concatenate([getattr(p, k) for p in parts]) for k in names})


def mask_statistics(
    projected_boxes_2d: np.ndarray,
    masks: np.ndarray,
    depth_m: np.ndarray,
    image_size_px: tuple[int, int],
    mask_box_2d: np.ndarray | None = None,
) -> MaskStatistics:
    """The visibility measurements of the (N, H, W) bool masks of one image's N views.

    Args:
        projected_boxes_2d: (N, 4) unclipped projected boxes, pixels (NaN: behind the camera).
        masks: (N, H, W) bool (any memory layout).
        depth_m: (N,) depth of each object (nearer objects occlude).
        image_size_px: (width, height).
        mask_box_2d: (N, 4) the masks' tight boxes (``masks.mask_boxes_2d``: NaN rows for empty
            masks) when already known, e.g. from their RLE (``segmentation.rle.rle_box_2d``),
            which saves scanning every full-image mask; computed from ``masks`` when None.
    """
    width_px, height_px = (int(v) for v in image_size_px)
    n = len(masks)
    clipped = clip_boxes_2d(
        np.asarray(projected_boxes_2d, np.float64).reshape(-1, 4), width_px, height_px
    )
    mask_box = (
        mask_boxes_2d(masks)
        if mask_box_2d is None
        else np.asarray(mask_box_2d, np.float64).reshape(n, 4)
    )
    mask_crops = _crops(mask_box, width_px, height_px)
    box_crops = _crops(clipped, width_px, height_px)
    # Each mask's pixels all lie in its tight box: count there, not over the whole image, in
    # the same pass as the mask z-buffer.
    mask_px, in_box_px, visible_px_mask = _mask_counts(masks, mask_crops, box_crops, depth_m)
    return MaskStatistics(
        mask_px=mask_px,
        in_box_px=in_box_px,
        mask_box_2d=mask_box,
        visible_px_mask=visible_px_mask,
        visible_px_box=_zbuffer_visible_px(None, box_crops, depth_m, height_px, width_px),
    )


def evaluate_visibility(
    projected_boxes_2d: np.ndarray,
    masks: np.ndarray | Sequence[MaskLike],
    mask_score: np.ndarray,
    depth_m: np.ndarray,
    image_size_px: tuple[int, int],
    lidar_points: np.ndarray | None = None,
    image_id: np.ndarray | None = None,
    config: VisibilityConfig | None = None,
    hull_occluded_share: np.ndarray | None = None,
    lidar_occluded_share: np.ndarray | None = None,
    image_readable: np.ndarray | None = None,
    mask_stats: MaskStatistics | None = None,
    track_score: np.ndarray | None = None,
    image_support: np.ndarray | None = None,
    volume_in_image: np.ndarray | None = None,
) -> VisibilityDecision:
    """Apply the visibility rules to N (image, object) candidates.

    Args:
        projected_boxes_2d: (N, 4) unclipped projected 3D boxes [u_min, v_min, u_max, v_max],
            pixels (``calib.projection.box_2d_from_corners``); NaN rows for boxes behind the camera.
        masks: (N, H, W) bool, or N entries each an (H, W) bool array, a COCO RLE dict or None
            (None as a whole when ``mask_stats`` is given).
        mask_score: (N,) segmenter score in [0, 1].
        depth_m: (N,) distance of each object from the camera, metres; nearer objects occlude.
        image_size_px: (width, height) of every image.
        lidar_points: (N,) LiDAR points inside each 3D box; the rule is skipped when None.
        image_id: (N,) which image each candidate is in (only objects of one image occlude each
            other); all one image when None.
        config: thresholds; the defaults when None.
        hull_occluded_share: (N,) share of each hull covered by nearer boxes' hulls; the
            ``HULL_OCCLUDED`` rule is skipped when None.
        lidar_occluded_share: (N,) share of each LiDAR-covered hull with a nearer return; NaN
            entries (no returns on the hull), or None, skip ``LIDAR_OCCLUDED``.
        image_readable: (N,) bool, whether each view's image could be read; all when None.
        mask_stats: the masks' measurements already computed (``mask_statistics``, e.g. by the
            segment stage); ``masks`` is then not decoded and may be None.
        track_score: (N,) score of each view's track; NaN entries, or None, skip ``TRACK_SCORE``.
        image_support: (N,) share of each view's track's image-checked views with image evidence
            (``track_image_support``); NaN entries, or None, skip ``IMAGE_EVIDENCE``.
        volume_in_image: (N,) share of each 3D box's volume in view (``CameraViews.
            volume_in_image``), a second way to pass ``IN_IMAGE``; NaN entries, or None: the 2D
            box's share alone decides.

    Returns:
        A ``VisibilityDecision`` with one entry per candidate, in input order.
    """
    cfg = config or VisibilityConfig()
    width_px, height_px = (int(v) for v in image_size_px)
    boxes = np.asarray(projected_boxes_2d, dtype=np.float64).reshape(-1, 4)
    n = len(boxes)
    score = np.asarray(mask_score, dtype=np.float32).reshape(-1)
    depth = np.asarray(depth_m, dtype=np.float64).reshape(-1)
    n_masks = n if masks is None and mask_stats is not None else len(masks)
    if len(score) != n or len(depth) != n or n_masks != n:
        raise ValueError(
            f"evaluate_visibility: {n} boxes but {n_masks} masks, {len(score)} scores, "
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

    if mask_stats is None:
        parts, order = [], []
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
            parts.append(
                mask_statistics(boxes[rows], masks_img, depth[rows], (width_px, height_px))
            )
            order.append(rows)
        stats = MaskStatistics.concatenate(parts)
        stats = stats.rows(np.argsort(np.concatenate(order) if order else np.zeros(0, int)))
    else:
        stats = mask_stats
        if len(stats.mask_px) != n:
            raise ValueError(
                f"evaluate_visibility: mask_stats has {len(stats.mask_px)} entries for {n} boxes"
            )
    mask_px, mask_box = stats.mask_px, stats.mask_box_2d
    iou = box_iou_2d(clip_boxes_2d(boxes, width_px, height_px), mask_box)
    coverage = np.where(mask_px > 0, stats.in_box_px / np.maximum(mask_px, 1), 0.0)
    visible = stats.visible_px_mask if cfg.zbuffer_with == "mask" else stats.visible_px_box

    fraction = in_image_fraction(boxes, width_px, height_px)
    volume = _optional(volume_in_image, n, "volume_in_image")
    hull_share = _optional(hull_occluded_share, n, "hull_occluded_share")
    lidar_share = _optional(lidar_occluded_share, n, "lidar_occluded_share")
    track = _optional(track_score, n, "track_score")
    support = _optional(image_support, n, "image_support")
    readable = (
        np.ones(n, bool) if image_readable is None else np.asarray(image_readable, bool).reshape(-1)
    )
    failing = {
        VisibilityRule.IMAGE: ~readable,
        VisibilityRule.IMAGE_EVIDENCE: support < cfg.min_image_support,
        VisibilityRule.MASK_SCORE: ~(score > cfg.min_mask_score),
        VisibilityRule.BOX_IOU: ~(iou > cfg.min_box_iou),
        VisibilityRule.COVERAGE: ~(coverage > cfg.min_coverage),
        VisibilityRule.VISIBLE_PIXELS: visible < cfg.min_visible_px,
        **_maskless_failing(fraction, volume, points, hull_share, lidar_share, track, cfg),
    }
    failed = np.zeros(n, np.uint16)
    first = np.zeros(n, np.uint16)
    for rule in reversed(RULE_ORDER):  # the earliest failing rule is written last
        failed |= np.where(failing[rule], np.uint16(rule.value), np.uint16(0))
        first = np.where(failing[rule], np.uint16(rule.value), first)
    return VisibilityDecision(
        keep=failed == 0,
        failed_rules=failed,
        first_failed_rule=first.astype(np.uint16),
        in_image_fraction=fraction,
        volume_in_image=volume,
        box_iou=iou,
        coverage=coverage,
        mask_score=score,
        lidar_points=np.full(n, -1, np.int64) if points is None else points,
        mask_px=mask_px,
        visible_px=visible,
        mask_box_2d=mask_box,
        image_readable=readable,
        hull_occluded_share=hull_share,
        lidar_occluded_share=lidar_share,
        track_score=track,
        image_support=support,
    )


def _maskless_failing(
    fraction: np.ndarray,
    volume: np.ndarray,
    points: np.ndarray | None,
    hull_share: np.ndarray,
    lidar_share: np.ndarray,
    track: np.ndarray,
    cfg: VisibilityConfig,
) -> dict[VisibilityRule, np.ndarray]:
    """The failing views of the rules that read neither a mask nor the image (IN_IMAGE,
    LIDAR_POINTS, TRACK_SCORE, HULL_OCCLUDED, LIDAR_OCCLUDED); ``points`` None skips
    LIDAR_POINTS, a NaN share or track score never fails its rule."""
    n = len(fraction)
    return {
        # NaN compares False: an unmeasured volume share never passes the rule by itself.
        VisibilityRule.IN_IMAGE: (fraction < cfg.min_in_image_fraction)
        & ~(volume >= cfg.min_in_image_volume),
        VisibilityRule.LIDAR_POINTS: (
            np.zeros(n, bool) if points is None else points < cfg.min_lidar_points
        ),
        # NaN compares False: an unmeasured share or score never fails its rule.
        VisibilityRule.TRACK_SCORE: track < cfg.min_track_score,
        VisibilityRule.HULL_OCCLUDED: hull_share > cfg.max_hull_occluded_share,
        VisibilityRule.LIDAR_OCCLUDED: lidar_share > cfg.max_lidar_occluded_share,
    }


def rejected_without_mask(
    boxes_2d: np.ndarray,
    image_size_px: tuple[int, int],
    lidar_points: np.ndarray,
    hull_occluded_share: np.ndarray,
    lidar_occluded_share: np.ndarray,
    config: VisibilityConfig | None = None,
    track_score: np.ndarray | None = None,
    volume_in_image: np.ndarray | None = None,
) -> np.ndarray:
    """(N,) bool: the views of one image that ``evaluate_visibility`` rejects whatever their masks
    and the image say (a rule of ``_maskless_failing`` fails), known before segmentation.

    Args:
        boxes_2d: (N, 4) unclipped projected boxes, pixels.
        image_size_px: (width, height).
        lidar_points: (N,) LiDAR points inside each 3D box.
        hull_occluded_share, lidar_occluded_share: (N,) as ``evaluate_visibility``'s (NaN: the
            rule never fails).
        track_score: (N,) each view's track score (None: TRACK_SCORE is not applied).
        volume_in_image: (N,) as ``evaluate_visibility``'s (None: not measured).
    """
    cfg = config or VisibilityConfig()
    width_px, height_px = image_size_px
    failing = _maskless_failing(
        in_image_fraction(np.asarray(boxes_2d, np.float64), width_px, height_px),
        _optional(volume_in_image, len(boxes_2d), "volume_in_image"),
        np.asarray(lidar_points, np.int64).reshape(-1),
        np.asarray(hull_occluded_share, np.float64).reshape(-1),
        np.asarray(lidar_occluded_share, np.float64).reshape(-1),
        _optional(track_score, len(boxes_2d), "track_score"),
        cfg,
    )
    return np.logical_or.reduce(list(failing.values()))


def occluder_depth(
    depth_m: np.ndarray, track_score: np.ndarray | None, min_track_score: float
) -> np.ndarray:
    """(N,) the depth by which each view occludes the others of its image (box and mask
    z-buffers), metres: its depth, or +inf for a view whose track fails ``TRACK_SCORE`` (track
    score below ``min_track_score``; NaN scores pass). A track the filter does not trust to
    exist hides nothing: on PandaSet-002 a ghost track (score 0.26) driving through the parked
    cars hid the grey SUV beside the ego, and a tree and a facade boxed as a construction
    vehicle and a bus (0.18, 0.13) the pickup parked ahead.

    Args:
        depth_m: (N,) box-centre depth along the optical axis, metres.
        track_score: (N,) each view's track score (None: every view occludes).
        min_track_score: ``VisibilityConfig.min_track_score``.
    """
    depth = np.asarray(depth_m, np.float64).reshape(-1)
    if track_score is None:
        return depth
    score = np.asarray(track_score, np.float64).reshape(-1)
    return np.where(score < min_track_score, np.inf, depth)


def track_image_support(
    track_key: np.ndarray,
    image_score: np.ndarray,
    min_image_score: float,
    lidar_judged: np.ndarray | None = None,
    min_views: int = 1,
) -> np.ndarray:
    """(N,) per view: the share of its track's views with measured image evidence (non-NaN
    ``image_score``) whose evidence exceeds ``min_image_score``; NaN for a track with fewer
    than ``min_views`` (at least 1) such views, and for the views ``lidar_judged`` marks
    (``dense_track_views``: judged by the LiDAR alone).

    Args:
        track_key: (N,) int track id of each view (all views of a clip).
        image_score: (N,) the segmenter's image evidence per view, NaN where not measured.
        min_image_score: a view supports its track above this.
        lidar_judged: (N,) bool, or None: none.
        min_views: ``VisibilityConfig.min_image_views``.
    """
    score = np.asarray(image_score, np.float64).reshape(-1)
    _, track = np.unique(np.asarray(track_key).reshape(-1), return_inverse=True)
    measured = np.isfinite(score)
    if lidar_judged is not None:
        measured &= ~np.asarray(lidar_judged, bool).reshape(-1)
    n_measured = np.bincount(track, weights=measured, minlength=track.max(initial=-1) + 1)
    n_support = np.bincount(
        track, weights=measured & (score > min_image_score), minlength=len(n_measured)
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        share = n_support / n_measured
    return np.where(n_measured >= max(min_views, 1), share, np.nan)[track]


def dense_track_views(
    track_key: np.ndarray,
    lidar_points: np.ndarray,
    max_points: int,
    eligible: np.ndarray | None = None,
) -> np.ndarray:
    """(N,) bool: the ``eligible`` views of tracks whose views hold a median of at least
    ``max_points`` LiDAR points (none when ``max_points`` is 0): views ``IMAGE_EVIDENCE`` leaves
    to the LiDAR, so the segmenter measures no image evidence for them (nor caps their mask
    score by it).

    Args:
        track_key: (N,) int track id of each view (all views of a clip: the median is the
            track's, whichever images a caller segments).
        lidar_points: (N,) LiDAR points inside each view's 3D box.
        max_points: ``VisibilityConfig.image_evidence_max_points``.
        eligible: (N,) bool, the views of a class the LiDAR may judge alone (``VisibilityConfig.
            image_evidence_lidar_classes``); all when None.
    """
    keys = np.asarray(track_key).reshape(-1)
    if max_points <= 0 or len(keys) == 0:
        return np.zeros(len(keys), bool)
    _, track = np.unique(keys, return_inverse=True)
    points = np.asarray(lidar_points, np.float64).reshape(-1)
    dense = (_group_median(track, points) >= max_points)[track]
    return dense if eligible is None else dense & np.asarray(eligible, bool).reshape(-1)


def _group_median(group: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(G,) median of ``values`` per group id 0..G-1 (every id present)."""
    order = np.lexsort((values, group))
    sorted_values = values[order]
    counts = np.bincount(group)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    lo = starts + (counts - 1) // 2
    hi = starts + counts // 2
    return 0.5 * (sorted_values[lo] + sorted_values[hi])


def _optional(values: np.ndarray | None, n: int, name: str) -> np.ndarray:
    if values is None:
        return np.full(n, np.nan)
    out = np.asarray(values, dtype=np.float64).reshape(-1)
    if len(out) != n:
        raise ValueError(f"evaluate_visibility: {name} has {len(out)} entries for {n} boxes")
    return out


#: Thresholds that differ from ``VisibilityConfig``'s defaults, per segmenter. The geometric
#: segmenter's score is own-return recall x unoccluded hull share, not a predicted IoU: its
#: threshold and the visible pixels (500 at 1920 x 1080: a far car a person still sees) were
#: measured on PandaSet-002 keyframes 0-7 (``bench/bench_visibility_real.py``); the track-score
#: and image-evidence thresholds, which only apply to a detector's tracks, on the synthetic demo
#: and the same keyframes with the ``lidar`` detector (``autolabel eval qa``).
SEGMENTER_VISIBILITY: dict[str, dict] = {
    "geometric": {
        "min_mask_score": 0.3,
        "min_visible_px": 500,
        "min_track_score": 0.4,
        "min_image_score": 0.7,
        "min_image_support": 0.25,
        "image_evidence_max_points": 100,
        "image_evidence_lidar_classes": ("car",),
        "min_image_views": 2,
    },
    "lidar": {},
    "sam2": {},
}


def visibility_defaults(segmenter: str) -> VisibilityConfig:
    """The visibility thresholds for ``segmenter`` (``VisibilityConfig()`` for an unknown name)."""
    return VisibilityConfig(**SEGMENTER_VISIBILITY.get(segmenter, {}))


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
