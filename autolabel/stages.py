"""The stages of ``autolabel run``, in order: each a small function of a ``StageContext``.

A stage reads what earlier stages left in ``ctx.results``, calls the library function of its
concept, writes its files atomically and returns ``(counts, written files relative to the clip
folder)``. The two model stages are split into a model part and an I/O part so that a Ray job can
run the model part on a GPU actor (``ray_jobs``) and the rest in CPU tasks with the very same
functions:

- detect: :func:`run_detector` (model) then :func:`write_detections`;
- segment: :func:`prepare_views`, :func:`segment_images` (model), :func:`write_masks`.

Per-clip outputs (under ``OUT/<clip>/``):

- ``labels/detection.json``, ``labels/tracking.json``: nuScenes submission files (devkit-ready);
  with ``refine: track`` (the default) they hold the refined tracks' boxes, and the detector's and
  tracker's own files are kept as ``labels/detection_online.json``, ``labels/tracking_online.json``;
- ``attributes.parquet``: ego-frame attributes per (keyframe, labelled track);
- ``masks/<frame:03d>.json``: per keyframe, every candidate view (camera x object): projected box,
  COCO RLE mask and mask score;
- ``visibility.parquet``: the visibility decision of every view and the first rule that rejected
  it; ``visibility_summary.json``: counts per rule;
- ``marks/<frame:03d>_<CAMERA>.png`` and ``marks/<frame:03d>_stitched.png`` per QA keyframe, and
  ``marks/regions.json`` (region id -> track, class, cameras per QA keyframe);
- ``qa.jsonl``: QA records grounded in those region ids (checked by ``check-qa`` in the run).
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from autolabel.atomic_io import atomic_write_bytes, atomic_write_json
from autolabel.boxes import Boxes3D
from autolabel.camera_views import CameraViews, build_camera_views
from autolabel.classes import DETECTION_CLASSES
from autolabel.clip import Clip
from autolabel.config import ConfigError, PipelineConfig
from autolabel.sweep_timing import triggered_sweep_timing

DETECTION_FILE = "labels/detection.json"
TRACKING_FILE = "labels/tracking.json"
#: The per-frame detector's and the tracker's own files, kept when ``refine`` replaces the above.
ONLINE_DETECTION_FILE = "labels/detection_online.json"
ONLINE_TRACKING_FILE = "labels/tracking_online.json"
ATTRIBUTES_FILE = "attributes.parquet"
MASKS_DIR = "masks"
VISIBILITY_FILE = "visibility.parquet"
VISIBILITY_SUMMARY_FILE = "visibility_summary.json"
MARKS_DIR = "marks"
REGIONS_FILE = "marks/regions.json"
QA_FILE = "qa.jsonl"

#: Seed of OpenCV's RNG before each image is segmented.
IMAGE_RNG_SEED = 0x5EED

Counts = dict[str, int]
StageResult = tuple[Counts, list[str]]


def check_sweeps_read(detector: str, earlier_sweeps: int, max_sweeps: int) -> None:
    """Refuse a run whose reader lists fewer sweeps per keyframe than its detector loads (the
    model would silently get fewer than it was trained with)."""
    if max_sweeps < earlier_sweeps + 1:
        raise ConfigError(
            f"read.max_sweeps: detector {detector!r} loads {earlier_sweeps} sweeps before each "
            f"keyframe's own, but read.max_sweeps is {max_sweeps}; set it to at least "
            f"{earlier_sweeps + 1}"
        )


def refined_chain(config) -> bool:
    """Whether the ``refine`` stage refines this run's tracks: not with ``refine: none``, nor
    with exact ground-truth replay, whose tracks are the annotations. Replay with a noise model
    stands for a detector, so its boxes go through the chain a detector's do."""
    if config.refine == "none":
        return False
    return config.detector != "gt" or config.detector_options.get("noise") is not None


class Models:
    """Backends built once per process (a local run, a Ray actor) and reused for every clip.

    Pickling keeps only the config: a model never travels between processes, each process builds
    its own on first use.
    """

    def __init__(self, config: PipelineConfig) -> None:
        self.config = config
        if config.cv_threads > 0:
            import cv2

            cv2.setNumThreads(config.cv_threads)
        self._detector = None
        self._tracker = None
        self._segmenter = None
        self._templates = None

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["config"])

    def detector(self):
        if self._detector is None:
            from detectors import get_detector

            detector = get_detector(self.config.detector, self.config.detector_options)
            check_sweeps_read(detector.name, detector.earlier_sweeps, self.config.read.max_sweeps)
            self._detector = detector
        return self._detector

    def tracker(self):
        if self._tracker is None:
            from trackers import get_tracker

            options = dict(self.config.tracker_options)
            if self.config.tracker == "pub" and refined_chain(self.config):
                # The refine stage votes one class per track: small road users a detector
                # confuses frame to frame may continue each other's tracks.
                from trackers.pub_tracker import REFINE_CLASS_GROUPS

                options.setdefault("class_groups", [list(g) for g in REFINE_CLASS_GROUPS])
            self._tracker = get_tracker(self.config.tracker, options)
        return self._tracker

    def segmenter(self):
        if self._segmenter is None:
            from autolabel.segmentation import get_segmenter

            options = dict(self.config.segmenter_options)
            if self.config.segmenter == "geometric":
                # Image evidence only for tracks the visibility filter may keep: it rejects the
                # views of tracks scoring below min_track_score whatever their evidence says.
                options.setdefault("image_evidence_from", self.config.visibility.min_track_score)
                # No seed-free evidence cut where its value cannot change a decision: the
                # filter's image-evidence threshold, and the mask score above which QA's
                # confidence tells none apart (when the filter keeps such masks anyway).
                options.setdefault("evidence_decided_above", self.config.visibility.min_image_score)
                full = self.config.qa.confidence.mask_score_full
                if full > self.config.visibility.min_mask_score:
                    options.setdefault("evidence_score_full", full)
            self._segmenter = get_segmenter(self.config.segmenter, options)
        return self._segmenter

    def templates(self):
        if self._templates is None:
            from autolabel.qa.templates import load_templates

            self._templates = load_templates()
        return self._templates


@dataclass
class StageContext:
    """What a stage sees: the clip, the run config, its output folder, earlier stages' results
    and the process's models."""

    clip: Clip
    config: PipelineConfig
    clip_dir: Path
    results: dict[str, Any] = field(default_factory=dict)
    models: Models | None = None

    def __post_init__(self) -> None:
        if self.models is None:
            self.models = Models(self.config)


def _frame_times_s(clip: Clip) -> np.ndarray:
    return np.array([f.time_s for f in clip.frames], dtype=np.float64)


# -- detect ------------------------------------------------------------------------------------


def run_detector(detector, frames: Sequence) -> list[Boxes3D]:
    """The model part of detection: global-frame boxes of each keyframe (any batch of them)."""
    return detector.detect_frames(list(frames))


def write_detections(ctx: StageContext, boxes: list[Boxes3D], meta: dict[str, bool]) -> StageResult:
    """Check the detector's output and write ``labels/detection.json`` (``meta``: the detector's
    submission meta block)."""
    from detectors.base import check_detections
    from detectors.detection_results import write_detection_submission

    check_detections(ctx.config.detector, ctx.clip.frames, boxes)
    ctx.results["detections"] = boxes
    tokens = [f.token for f in ctx.clip.frames]
    write_detection_submission(ctx.clip_dir / DETECTION_FILE, tokens, boxes, meta)
    return {"frames": len(boxes), "boxes": sum(len(b) for b in boxes)}, [DETECTION_FILE]


def detect_stage(ctx: StageContext) -> StageResult:
    """3D boxes per keyframe with the configured backend -> ``labels/detection.json``."""
    detector = ctx.models.detector()
    return write_detections(ctx, run_detector(detector, ctx.clip.frames), detector.meta)


# -- track -------------------------------------------------------------------------------------


def track_stage(ctx: StageContext) -> StageResult:
    """Consistent track ids and track velocities -> ``labels/tracking.json``."""
    from trackers.tracking_results import write_tracking_submission

    tracks = ctx.models.tracker().track_clip(_frame_times_s(ctx.clip), ctx.results["detections"])
    ctx.results["tracks"] = tracks
    tokens = [f.token for f in ctx.clip.frames]
    write_tracking_submission(ctx.clip_dir / TRACKING_FILE, tokens, tracks)
    ids = np.unique(np.concatenate([t.track_id for t in tracks])) if tracks else np.zeros(0)
    return {"tracks": len(ids), "boxes": sum(len(t) for t in tracks)}, [TRACKING_FILE]


# -- refine ------------------------------------------------------------------------------------


def ego_xy_yaw(clip: Clip) -> np.ndarray:
    """(F, 3) ego position (m) and heading (rad) per keyframe, global frame."""
    from calib.rotation import yaw_from_rotation

    return np.array(
        [
            [*f.global_SE3_ego.translation[:2], yaw_from_rotation(f.global_SE3_ego.rotation)]
            for f in clip.frames
        ],
        dtype=np.float64,
    ).reshape(-1, 3)


def refine_config(config, detector):
    """The run's ``RefineConfig``: ``refine_options`` over the defaults, with the detector's own
    ``size_quantile`` where the options set none."""
    from autolabel.config import dataclass_from_mapping
    from autolabel.refine import RefineConfig

    options = {"size_quantile": detector.size_quantile, **config.refine_options}
    return dataclass_from_mapping(RefineConfig, options, "refine_options")


def refine_stage(ctx: StageContext) -> StageResult:
    """Whole-clip track refinement (``autolabel.refine``): the refined tracks replace the
    tracker's for every later stage and in ``labels/detection.json`` / ``labels/tracking.json``
    (what ``autolabel eval det|track`` score); the online files are kept beside them. With
    ``refine: none``, or with exact ground-truth replay (the reference other runs are compared
    with, kept as annotated), nothing changes and nothing is written. Each dimension of a track's
    size is the detector's ``size_quantile`` of its boxes' unless ``refine_options`` sets one."""
    if not refined_chain(ctx.config):
        return {"refined": 0}, []
    from autolabel.refine import refine_tracks
    from autolabel.refine.points import gather_point_evidence
    from detectors.detection_results import write_detection_submission
    from trackers.tracking_results import write_tracking_submission

    config = refine_config(ctx.config, ctx.models.detector())
    online = ctx.results["tracks"]
    evidence = gather_point_evidence(ctx.clip, online) if config.use_points else None
    refined, summary = refine_tracks(
        _frame_times_s(ctx.clip), online, config, evidence, ego_xy_yaw(ctx.clip), ctx.clip.location
    )
    ctx.results["online_tracks"] = online
    ctx.results["tracks"] = refined
    for src, dst in (
        (DETECTION_FILE, ONLINE_DETECTION_FILE),
        (TRACKING_FILE, ONLINE_TRACKING_FILE),
    ):
        atomic_write_bytes(ctx.clip_dir / dst, (ctx.clip_dir / src).read_bytes())
    tokens = [f.token for f in ctx.clip.frames]
    # The detector's meta block, from its file (a Ray CPU task has no detector model).
    meta = json.loads((ctx.clip_dir / ONLINE_DETECTION_FILE).read_bytes())["meta"]
    write_detection_submission(ctx.clip_dir / DETECTION_FILE, tokens, refined, meta)
    write_tracking_submission(ctx.clip_dir / TRACKING_FILE, tokens, refined)
    written = [ONLINE_DETECTION_FILE, ONLINE_TRACKING_FILE, DETECTION_FILE, TRACKING_FILE]
    return summary.counts(), written


# -- attributes --------------------------------------------------------------------------------


def label_tracks(
    tracks: Sequence[Boxes3D], min_track_score: float, min_track_length: int
) -> tuple[list[Boxes3D], int]:
    """The tracked boxes of confident tracks: mean score >= ``min_track_score`` and at least
    ``min_track_length`` boxes. Returns the kept boxes per frame and the number of kept tracks."""
    if not tracks:
        return [], 0
    ids = np.concatenate([t.track_id for t in tracks])
    scores = np.concatenate([t.score for t in tracks]).astype(np.float64)
    uniq, inverse = np.unique(ids, return_inverse=True)
    length = np.bincount(inverse, minlength=len(uniq))
    mean_score = np.bincount(inverse, weights=scores, minlength=len(uniq)) / np.maximum(length, 1)
    kept = uniq[(mean_score >= min_track_score) & (length >= min_track_length)]
    return [t[np.isin(t.track_id, kept)] for t in tracks], len(kept)


def attributes_stage(ctx: StageContext) -> StageResult:
    """Ego-frame attributes of the labelled tracks -> ``attributes.parquet``."""
    from autolabel.attributes import compute_attributes

    opts = ctx.config.labels
    tracks, n_kept = label_tracks(
        ctx.results["tracks"], opts.min_track_score, opts.min_track_length
    )
    ctx.results["label_tracks"] = tracks
    attrs = compute_attributes(
        _frame_times_s(ctx.clip),
        [f.global_SE3_ego for f in ctx.clip.frames],
        tracks,
        ctx.config.attributes,
    )
    if "online_tracks" in ctx.results:  # refined: mark the rows the smoother filled in
        from autolabel.refine.filled_rows import filled_gap

        attrs.filled_gap = filled_gap(attrs, ctx.results["online_tracks"])
    ctx.results["attributes"] = attrs
    attrs.write_parquet(ctx.clip_dir / ATTRIBUTES_FILE)
    n_all = len(np.unique(np.concatenate([t.track_id for t in ctx.results["tracks"]])))
    return {"tracks": n_kept, "tracks_rejected": n_all - n_kept, "rows": len(attrs)}, [
        ATTRIBUTES_FILE
    ]


# -- segment -----------------------------------------------------------------------------------


@dataclass
class ImageMasks:
    """Masks of the views of one image and what they rest on, in view order.

    Attributes:
        rles: COCO RLE dicts, one per view.
        score: (n,) float32 mask scores.
        hull_px: (n,) int64 pixels of each projected 3D box hull.
        hull_occluded_share: (n,) share of each hull covered by nearer boxes' hulls.
        lidar_occluded_share: (n,) share of each LiDAR-covered hull with a nearer return (NaN:
            no return on the hull).
        own_returns: (n,) int64 the object's own LiDAR returns projected into the image.
        own_return_recall: (n,) share of those inside the mask (NaN without returns).
        image_score: (n,) image evidence that the object is there (the geometric segmenter's, for
            untrusted tracks; NaN where not measured).
        stats: the masks' visibility measurements (``visibility.mask_statistics``), taken while
            the masks are in memory so that the visibility stage does not decode them again.
        error: why the image could not be read ('' when it was); its views get empty masks.
    """

    rles: list[dict[str, Any]]
    score: np.ndarray
    hull_px: np.ndarray
    hull_occluded_share: np.ndarray
    lidar_occluded_share: np.ndarray
    own_returns: np.ndarray
    own_return_recall: np.ndarray
    image_score: np.ndarray
    stats: Any = None
    error: str = ""


#: Per-view arrays of ``ImageMasks`` gathered by ``write_masks`` into ``ctx.results``.
IMAGE_MASK_FIELDS = (
    "score", "hull_px", "hull_occluded_share", "lidar_occluded_share", "own_returns",
    "own_return_recall", "image_score",
)  # fmt: skip


def prepare_views(ctx: StageContext) -> CameraViews:
    """The CPU part before segmentation: every labelled box projected into every camera, and each
    view's track score (``ctx.results["view_track_score"]``)."""
    options = ctx.config.segment
    sweep = triggered_sweep_timing(ctx.clip) if options.motion_compensate else None
    views = build_camera_views(ctx.clip, ctx.results["label_tracks"], options, sweep)
    ctx.results["views"] = views
    ctx.results["view_track_score"] = view_track_scores(views, ctx.results["label_tracks"])
    return views


class InputImageError(ValueError):
    """A camera image exists but cannot be decoded; ``path`` names it."""

    def __init__(self, path: str | Path, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = str(path)


def read_image_rgb(path: str | Path, width_px: int, height_px: int) -> np.ndarray:
    """(H, W, 3) uint8 RGB of an image file, checked against the camera's calibrated size."""
    import cv2

    if hasattr(cv2, "IMREAD_COLOR_RGB"):  # OpenCV >= 4.10: decoded to RGB, no conversion pass
        return _read_image(path, width_px, height_px, cv2.IMREAD_COLOR_RGB)
    return cv2.cvtColor(read_image_bgr(path, width_px, height_px), cv2.COLOR_BGR2RGB)


def read_image_bgr(path: str | Path, width_px: int, height_px: int) -> np.ndarray:
    """(H, W, 3) uint8 BGR (OpenCV's order) of an image file, checked against the camera's
    calibrated size."""
    import cv2

    return _read_image(path, width_px, height_px, cv2.IMREAD_COLOR)


def _read_image(path: str | Path, width_px: int, height_px: int, flags: int) -> np.ndarray:
    """(H, W, 3) uint8 of an image file read with OpenCV's ``flags``, checked against the
    camera's calibrated size."""
    import cv2

    image = cv2.imread(str(path), flags)
    if image is None:
        if not Path(path).is_file():
            raise FileNotFoundError(2, "camera image is missing", str(path))
        raise InputImageError(path, "camera image exists but cannot be decoded as an image")
    if image.shape[:2] != (height_px, width_px):
        raise ValueError(
            f"{path}: image is {image.shape[1]}x{image.shape[0]} px, the calibration says "
            f"{width_px}x{height_px}"
        )
    return image


def check_image_file(path: str | Path, width_px: int, height_px: int) -> None:
    """Raise what ``read_image_bgr`` raises for a missing file, one that is no image, or one of
    another size than the calibration's, from the file's header alone (no pixel is decoded)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            size = im.size
    except FileNotFoundError:
        raise FileNotFoundError(2, "camera image is missing", str(path)) from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as e:
        if not Path(path).is_file():
            raise FileNotFoundError(2, "camera image is missing", str(path)) from None
        raise InputImageError(path, "camera image exists but cannot be decoded as an image") from e
    if size != (width_px, height_px):
        raise ValueError(
            f"{path}: image is {size[0]}x{size[1]} px, the calibration says {width_px}x{height_px}"
        )


def lidar_judged_views(views: CameraViews, config) -> np.ndarray:
    """(V,) bool: the views ``IMAGE_EVIDENCE`` leaves to the LiDAR under the ``VisibilityConfig``
    (``visibility.dense_track_views`` of its ``image_evidence_lidar_classes``)."""
    from autolabel.classes import DETECTION_CLASSES
    from autolabel.visibility import dense_track_views

    labels = [DETECTION_CLASSES.index(c) for c in config.image_evidence_lidar_classes]
    return dense_track_views(
        views.track_id,
        views.lidar_points,
        config.image_evidence_max_points,
        np.isin(views.label, labels),
    )


def segment_images(
    segmenter,
    clip: Clip,
    views: CameraViews,
    images: Sequence[tuple[int, int, np.ndarray]],
    options=None,
    track_score: np.ndarray | None = None,
    visibility=None,
) -> list[ImageMasks]:
    """The model part of segmentation: masks of the views of each (frame, camera, rows) image.

    Each image's geometry (``segmentation.geometry.image_geometry``: z-buffered hulls, LiDAR
    occlusion) is computed first, whatever the backend: it is the geometric segmenter's prompt and
    every backend's occlusion evidence. An image that is missing or unreadable loses its own views
    only (empty masks, score 0, ``error`` set). OpenCV's RNG (GrabCut's k-means draws from it) is
    reseeded per image, so an image's masks do not depend on which images a process segmented
    before it (Ray actors see other sequences than a serial run).

    Args:
        options: ``SegmentOptions`` (occluder disc and margin); the defaults when None.
        track_score: (V,) each view's track score (``view_track_scores``), the segmenter's
            ``"track_score"`` prompt; not given when None.
        visibility: the run's ``VisibilityConfig``: views its rules reject before any mask
            (``visibility.rejected_without_mask``) get no image evidence (the segmenter's
            ``"image_evidence_skip"`` prompt; nor do the views of tracks dense in LiDAR returns,
            ``lidar_judged_views``), and those and the views of tracks scoring below
            its ``min_track_score`` no refinement (``"refine_skip"``); every view may get both
            when None.
    """
    import cv2

    from autolabel.config import SegmentOptions
    from autolabel.segmentation.geometric import own_return_recall
    from autolabel.segmentation.geometry import image_geometry, radius_px_from_angle
    from autolabel.segmentation.rle import encode_masks, rle_area_px, rle_box_2d
    from autolabel.visibility import mask_statistics, occluder_depth, rejected_without_mask

    opt = options or SegmentOptions()
    # The z-buffers' depths: views of tracks the filter rejects on their score hide nothing.
    occluding = (
        views.depth_m
        if visibility is None
        else occluder_depth(views.depth_m, track_score, visibility.min_track_score)
    )
    # Tracks dense in LiDAR returns are judged by the LiDAR alone (``IMAGE_EVIDENCE``): no image
    # evidence for their views, and so no cap of their score by it.
    dense = (
        np.zeros(len(views), bool) if visibility is None else lidar_judged_views(views, visibility)
    )
    reads_image = getattr(segmenter, "reads_image", None)
    out = []
    for frame_index, camera, rows in images:
        cv2.setRNGSeed(IMAGE_RNG_SEED)
        width_px, height_px = (int(v) for v in views.image_size_px[camera])
        image = clip.frames[frame_index].cameras[views.channels[camera]]
        geometry = image_geometry(
            views.hulls_of(rows),
            occluding[rows],
            views.near_depth_m[rows],
            views.scene_of(frame_index * len(views.channels) + camera),
            (width_px, height_px),
            radius_px_from_angle(image.calibration.intrinsic, opt.occluder_radius_deg),
            opt.occluder_margin_m,
        )
        seeds = views.seeds_of(rows)
        prompts = {"points_uv": seeds, "depth_m": views.depth_m[rows], "geometry": geometry}
        if track_score is not None:
            prompts["track_score"] = track_score[rows]
        if visibility is not None:
            view_args = (
                views.box_px[rows],
                (width_px, height_px),
                views.lidar_points[rows],
                geometry.hull_occluded_share,
                geometry.lidar_occluded_share,
                visibility,
            )
            # A view kept on its volume share alone is cut by the image's edge: no view to judge
            # its track's image evidence by (the colour model fails on it), so none is measured.
            prompts["image_evidence_skip"] = dense[rows] | rejected_without_mask(*view_args)
            volume = views.volume_in_image[rows]
            # A view whose track the filter drops is rejected whatever its mask too (its
            # image evidence is skipped by the segmenter's image_evidence_from instead).
            prompts["refine_skip"] = rejected_without_mask(
                *view_args, None if track_score is None else track_score[rows], volume
            )
        error = ""
        try:
            if reads_image is None or reads_image(len(rows), prompts):
                rgb = read_image_rgb(image.path, width_px, height_px)
            else:
                # The segmenter reads no pixel of this image (about a third of a clip's images
                # with the geometric one, each a full JPEG decode): check the file's header as the
                # decoder would and hand it zeros that take no memory.
                check_image_file(image.path, width_px, height_px)
                rgb = np.broadcast_to(np.zeros(3, np.uint8), (height_px, width_px, 3))
        except (OSError, ValueError) as e:
            error = str(e)
        if error:
            masks = np.zeros((len(rows), height_px, width_px), bool)
            crops = None
            score = np.zeros(len(rows), np.float32)
            image_score = np.full(len(rows), np.nan, np.float32)
        else:
            result = segmenter.segment(rgb, views.box_clipped_px[rows], prompts)
            masks, score, crops = result.masks, result.score, result.crops
            image_score = (
                np.full(len(rows), np.nan, np.float32)
                if result.image_score is None
                else result.image_score.astype(np.float32)
            )
        rles = encode_masks(masks, crops)
        # The masks' tight boxes from their runs (a full-image scan per mask costs more).
        tight = rle_box_2d(rles)
        tight[rle_area_px(rles) == 0] = np.nan
        out.append(
            ImageMasks(
                rles=rles,
                score=score.astype(np.float32),
                hull_px=geometry.hull_px,
                hull_occluded_share=geometry.hull_occluded_share,
                lidar_occluded_share=geometry.lidar_occluded_share,
                own_returns=np.array([len(s) for s in seeds], np.int64),
                own_return_recall=own_return_recall(masks, seeds),
                image_score=image_score,
                stats=mask_statistics(
                    views.box_px[rows], masks, occluding[rows], (width_px, height_px), tight
                ),
                error=error,
            )
        )
    return out


def _round_list(values: np.ndarray, digits: int) -> list[float]:
    return [round(float(v), digits) for v in values]


def write_masks(ctx: StageContext, views: CameraViews, masks: list[ImageMasks]) -> StageResult:
    """``masks/<frame:03d>.json`` per keyframe: each view's boxes, COCO RLE mask and score."""
    rles: list[dict[str, Any]] = [{}] * len(views)
    per_view = {
        name: np.zeros(len(views), np.asarray(getattr(masks[0], name)).dtype if masks else float)
        for name in IMAGE_MASK_FIELDS
    }
    readable = np.ones(len(views), bool)
    unreadable = []
    for (frame_index, camera, rows), image_masks in zip(views.image_rows(), masks, strict=True):
        for i, rle in zip(rows, image_masks.rles, strict=True):
            rles[i] = rle
        for name in IMAGE_MASK_FIELDS:
            per_view[name][rows] = getattr(image_masks, name)
        if image_masks.error:
            readable[rows] = False
            unreadable.append(
                {
                    "frame_index": frame_index,
                    "camera": views.channels[camera],
                    "error": image_masks.error,
                }
            )
    score = per_view["score"]
    ctx.results["masks"] = (rles, score)
    ctx.results["mask_evidence"] = {**per_view, "image_readable": readable}
    if masks and all(m.stats is not None for m in masks):
        from autolabel.visibility import MaskStatistics

        stats = MaskStatistics.concatenate([m.stats for m in masks])
        rows = np.concatenate([r for _, _, r in views.image_rows()])
        ctx.results["mask_evidence"]["mask_stats"] = stats.rows(np.argsort(rows))
    ctx.results["unreadable_images"] = unreadable
    names = np.asarray(DETECTION_CLASSES, dtype=object)
    written = []
    for f, frame in enumerate(ctx.clip.frames):
        rows = np.flatnonzero(views.frame_index == f)
        objects = [
            {
                "camera": views.channels[views.camera[i]],
                "image_token": frame.cameras[views.channels[views.camera[i]]].token,
                "track_id": int(views.track_id[i]),
                "class": names[views.label[i]],
                "box_px": _round_list(views.box_clipped_px[i], 2),
                "box_unclipped_px": _round_list(views.box_px[i], 2),
                "depth_m": round(float(views.depth_m[i]), 3),
                "lidar_points": int(views.lidar_points[i]),
                "mask_rle": rles[i],
                "score": round(float(score[i]), 4),
            }
            for i in rows
        ]
        rel = f"{MASKS_DIR}/{f:03d}.json"
        doc = {"frame_index": f, "sample_token": frame.token, "objects": objects}
        atomic_write_json(ctx.clip_dir / rel, doc)
        written.append(rel)
    counts = {"images": len(masks), "masks": len(views), "unreadable_images": len(unreadable)}
    return counts, written


def segment_stage(ctx: StageContext) -> StageResult:
    """Masks of every labelled object in every camera image -> ``masks/``."""
    views = prepare_views(ctx)
    masks = segment_images(
        ctx.models.segmenter(),
        ctx.clip,
        views,
        views.image_rows(),
        ctx.config.segment,
        ctx.results["view_track_score"],
        ctx.config.visibility,
    )
    return write_masks(ctx, views, masks)


# -- visibility --------------------------------------------------------------------------------


def _rule_names() -> np.ndarray:
    """Name of each single rule bit (``VisibilityRule`` values 1, 2, 4, ...); '' at 0."""
    from autolabel.visibility import RULE_ORDER

    names = np.full(max(r.value for r in RULE_ORDER) + 1, "", dtype=object)
    for rule in RULE_ORDER:
        names[rule.value] = rule.name
    return names


#: Per-view evidence ``evaluate_views`` passes on to ``evaluate_visibility`` when present.
OPTIONAL_EVIDENCE = (
    "hull_occluded_share", "lidar_occluded_share", "image_readable", "track_score",
    "image_support",
)  # fmt: skip


def evaluate_views(
    views: CameraViews,
    rles: list[dict[str, Any]],
    score: np.ndarray,
    config,
    evidence: dict[str, np.ndarray] | None = None,
):
    """The visibility decision of every view (one ``evaluate_visibility`` call per image size,
    images told apart by ``image_id`` so that only objects of one image occlude each other).

    ``evidence`` (``ctx.results["mask_evidence"]``) brings the occlusion shares and which images
    were readable, and ``track_score`` each view's track score (``view_track_scores``); without
    them those rules are skipped."""
    from autolabel.visibility import VisibilityDecision, evaluate_visibility, occluder_depth

    n = len(views)
    if n == 0:
        empty = np.zeros((0, 4))
        return evaluate_visibility(empty, [], np.zeros(0), np.zeros(0), (1, 1), config=config)
    evidence = evidence or {}
    # The mask z-buffer's depths, as the segment stage's (``segment_images``).
    depth = occluder_depth(views.depth_m, evidence.get("track_score"), config.min_track_score)
    sizes = views.image_size_px[views.camera]
    merged: dict[str, np.ndarray] = {}
    for size in np.unique(sizes, axis=0):
        rows = np.flatnonzero(np.all(sizes == size, axis=1))
        optional = {key: evidence[key][rows] for key in OPTIONAL_EVIDENCE if key in evidence}
        if "mask_stats" in evidence:
            optional["mask_stats"] = evidence["mask_stats"].rows(rows)
        decision = evaluate_visibility(
            views.box_px[rows],
            [rles[i] for i in rows],
            score[rows],
            depth[rows],
            (int(size[0]), int(size[1])),
            lidar_points=views.lidar_points[rows],
            image_id=views.image_key[rows],
            config=config,
            volume_in_image=views.volume_in_image[rows],
            **optional,
        )
        for name, values in vars(decision).items():
            if name not in merged:
                merged[name] = np.zeros((n, *values.shape[1:]), values.dtype)
            merged[name][rows] = values
    return VisibilityDecision(**merged)


#: What each ``visibility.parquet`` column means (also in the file's schema metadata).
VISIBILITY_COLUMNS = {
    "keep": "no rule failed: the view may be asked about and marked",
    "rejected_by": "the first failing rule in check order ('' when kept)",
    "failed_rules": "bitmask of every failing rule (bits in the 'failed_rules_bits' metadata)",
    "in_image_fraction": "share of the projected box's area inside the image",
    "volume_in_image": "share of the 3D box's volume in the camera's view (IN_IMAGE passes on "
    "either share)",
    "lidar_points": "LiDAR returns of the keyframe sweep inside the 3D box",
    "mask_score": "the segmenter's score (geometric: own_return_recall x unoccluded hull share; "
    "sam2/lidar: predicted IoU with the true visible mask)",
    "box_iou": "IoU of the projected box (clipped) and the mask's tight box",
    "coverage": "share of the mask's pixels inside the projected box",
    "mask_px": "pixels of the mask",
    "visible_px": "pixels of the mask not covered by a nearer object's mask (or box)",
    "hull_px": "pixels of the projected 3D box hull (exact silhouette of the box)",
    "hull_occluded_share": "share of the hull covered by nearer annotated boxes' hulls",
    "lidar_occluded_share": "share of the LiDAR-covered hull where a return is nearer than the "
    "object's nearest corner; NaN: no return on the hull",
    "own_returns": "the object's own LiDAR returns (points in its box, sweeps around the image "
    "time) projected into the image",
    "own_return_recall": "share of those inside the mask; NaN without returns",
    "evidence": "'lidar+geometry', or 'geometry' for an object with no own return in the image "
    "(judged by its hull and the box z-buffer alone)",
    "image_readable": "the camera image could be read (False: the view lost, IMAGE rule)",
    "image_score": "image evidence that the object is there (geometric segmenter, tracks scoring "
    "below its image_evidence_below: the LiDAR-seeded GrabCut's calibrated score); NaN: not "
    "measured",
    "image_support": "share of the track's views with an image_score whose image_score exceeds "
    "min_image_score (IMAGE_EVIDENCE); NaN: none measured (rule skipped)",
    "track_score": "score of the view's label track (refine's track score, or the mean detection "
    "score; ground-truth replay: 1); NaN: not known (TRACK_SCORE skipped)",
}


def view_track_scores(views: CameraViews, tracks: Sequence[Boxes3D]) -> np.ndarray:
    """(V,) float64 score of each view's box (its label track's score at that keyframe; NaN for a
    view whose box is not among ``tracks``, one ``Boxes3D`` per keyframe)."""
    out = np.full(len(views), np.nan)
    for f, boxes in enumerate(tracks):
        rows = np.flatnonzero(views.frame_index == f)
        if len(rows) == 0 or len(boxes) == 0:
            continue
        order = np.argsort(boxes.track_id, kind="stable")
        ids = np.asarray(boxes.track_id)[order]
        at = np.clip(np.searchsorted(ids, views.track_id[rows]), 0, len(ids) - 1)
        found = ids[at] == views.track_id[rows]
        out[rows[found]] = np.asarray(boxes.score, np.float64)[order][at[found]]
    return out


def visibility_stage(ctx: StageContext) -> StageResult:
    """The visibility filter on every view -> ``visibility.parquet`` (decision, first rule that
    rejected it, every measurement behind it) and ``visibility_summary.json`` (counts per rule,
    the thresholds, unreadable images)."""
    import dataclasses
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from autolabel.visibility import RULE_ORDER, summarize, track_image_support

    views: CameraViews = ctx.results["views"]
    rles, score = ctx.results["masks"]
    evidence = dict(ctx.results.get("mask_evidence", {}))
    if "view_track_score" in ctx.results:
        evidence["track_score"] = ctx.results["view_track_score"]
    if "image_score" in evidence:
        evidence["image_support"] = track_image_support(
            views.track_id,
            evidence["image_score"],
            ctx.config.visibility.min_image_score,
            lidar_judged_views(views, ctx.config.visibility),
            ctx.config.visibility.min_image_views,
        )
    decision = evaluate_views(views, rles, score, ctx.config.visibility, evidence)
    ctx.results["visible"] = decision.keep
    measured = (
        "in_image_fraction", "volume_in_image", "box_iou", "coverage", "mask_score",
        "lidar_points", "mask_px", "visible_px", "hull_occluded_share", "lidar_occluded_share",
        "image_readable", "track_score", "image_support",
    )  # fmt: skip
    n = len(views)
    own_returns = evidence.get("own_returns", np.zeros(n, np.int64))
    table = pa.table(
        {
            "frame_index": pa.array(views.frame_index.astype(np.int32)),
            "camera": pa.array(np.asarray(views.channels, dtype=object)[views.camera].astype(str)),
            "track_id": pa.array(views.track_id),
            "class_name": pa.array(
                np.asarray(DETECTION_CLASSES, dtype=object)[views.label].astype(str)
            ),
            "keep": pa.array(decision.keep),
            "rejected_by": pa.array(_rule_names()[decision.first_failed_rule].astype(str)),
            "failed_rules": pa.array(decision.failed_rules),
            **{name: pa.array(getattr(decision, name)) for name in measured},
            "hull_px": pa.array(evidence.get("hull_px", np.zeros(n, np.int64))),
            "own_returns": pa.array(own_returns),
            "own_return_recall": pa.array(evidence.get("own_return_recall", np.full(n, np.nan))),
            "image_score": pa.array(evidence.get("image_score", np.full(n, np.nan))),
            "evidence": pa.array(np.where(own_returns > 0, "lidar+geometry", "geometry")),
        }
    )
    bits = ",".join(f"{rule.name}={rule.value}" for rule in RULE_ORDER)
    table = table.replace_schema_metadata(
        {b"failed_rules_bits": bits.encode(), b"columns": json.dumps(VISIBILITY_COLUMNS).encode()}
    )
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd")
    atomic_write_bytes(ctx.clip_dir / VISIBILITY_FILE, buffer.getvalue())
    summary = summarize(decision)
    summary["segmenter"] = ctx.config.segmenter
    summary["thresholds"] = dataclasses.asdict(ctx.config.visibility)
    summary["unreadable_images"] = ctx.results.get("unreadable_images", [])
    atomic_write_json(ctx.clip_dir / VISIBILITY_SUMMARY_FILE, summary, indent=1)
    kept = int(decision.keep.sum())
    counts = {"candidates": len(views), "kept": kept, "rejected": len(views) - kept}
    return counts, [VISIBILITY_FILE, VISIBILITY_SUMMARY_FILE]


# -- marks -------------------------------------------------------------------------------------


def window_frames(windows, position: int, grounding_frames: str) -> np.ndarray:
    """Frame indices of QA keyframe ``position``'s window (context, and future when grounded)."""
    frames = windows.context[position]
    if grounding_frames == "context+future":
        future = windows.future[position]
        frames = np.concatenate([frames, future[future >= 0]])
    return np.unique(frames)


def region_rows(
    views: CameraViews, keep: np.ndarray, attrs, windows, grounding_frames: str
) -> dict[str, np.ndarray]:
    """Kept views inside each QA keyframe's window, of objects tracked at that keyframe.

    Returns parallel arrays: ``keyframe``, ``view`` (row into ``views``), ``distance_m`` (the
    object's distance in the view's frame) and ``at_keyframe``.
    """
    kf, view, at_kf = [], [], []
    for pos, k in enumerate(windows.keyframe):
        frames = window_frames(windows, pos, grounding_frames)
        rows = np.flatnonzero(keep & np.isin(views.frame_index, frames))
        present = attrs.row_of(np.full(len(rows), k), views.track_id[rows]) >= 0
        rows = rows[present]
        kf.append(np.full(len(rows), k, np.int64))
        view.append(rows)
        at_kf.append(views.frame_index[rows] == k)
    kf_all = np.concatenate(kf) if kf else np.zeros(0, np.int64)
    view_all = np.concatenate(view) if view else np.zeros(0, np.int64)
    attr_rows = attrs.row_of(views.frame_index[view_all], views.track_id[view_all])
    return {
        "keyframe": kf_all,
        "view": view_all,
        "distance_m": np.asarray(attrs.distance_m)[attr_rows],
        "at_keyframe": np.concatenate(at_kf) if at_kf else np.zeros(0, bool),
    }


def marks_stage(ctx: StageContext) -> StageResult:
    """Region ids per QA keyframe and Set-of-Mark images -> ``marks/``."""
    from autolabel.qa.appearance import RegionColours, measure_region_colours
    from autolabel.qa.sampling import deduplicate_keyframes, select_keyframes
    from autolabel.set_of_mark import assign_region_ids, render_marks, write_marked_images

    views: CameraViews = ctx.results["views"]
    keep: np.ndarray = ctx.results["visible"]
    rles, _ = ctx.results["masks"]
    attrs = ctx.results["attributes"]
    clip = ctx.clip
    # QA keyframes whose ego pose barely moved since the last kept one get no marks or QA.
    windows = deduplicate_keyframes(
        select_keyframes(_frame_times_s(clip), ctx.config.qa),
        np.stack([f.global_SE3_ego.as_matrix() for f in clip.frames]),
        ctx.config.qa,
    )
    rr = region_rows(views, keep, attrs, windows, ctx.config.qa.grounding_frames)
    region_ids = assign_region_ids(
        rr["keyframe"], views.track_id[rr["view"]], rr["distance_m"], rr["at_keyframe"]
    )
    ctx.results["windows"] = windows
    ctx.results["region_ids"] = region_ids
    # QA measures colours under the keyframe masks in these very images: measured here while
    # each keyframe's images are decoded, so the qa stage reads no image (one keyframe's images
    # held at a time).
    regions = keyframe_regions(ctx)
    regions_at = {kr.keyframe_index: kr for kr in regions}
    colours = {}
    patches: dict[Path, Any] = {}
    written: list[str] = []
    regions_doc = []
    for k in windows.keyframe:
        frame = clip.frames[k]
        at_k = rr["at_keyframe"] & (rr["keyframe"] == k)
        marked = rr["view"][at_k]
        rid = region_ids.row_region_id[at_k]
        images, originals = {}, {}
        for c, channel in enumerate(views.channels):
            width_px, height_px = (int(v) for v in views.image_size_px[c])
            # Decoded as RGB, marked and encoded as RGB: the PNG encoder and the colour
            # measurement take RGB, so no pass converts the channel order.
            rgb = read_image_rgb(frame.cameras[channel].path, width_px, height_px)
            originals[channel] = rgb
            sel = views.camera[marked] == c
            images[channel] = render_marks(
                rgb,
                rid[sel],
                boxes_2d=views.box_clipped_px[marked[sel]],
                masks=[rles[i] for i in marked[sel]],
                style=ctx.config.marks,
                channel_order="rgb",
            )
        paths = write_marked_images(
            ctx.clip_dir / MARKS_DIR,
            f"{k:03d}",
            images,
            stitched=ctx.config.marks_stitched,
            stitched_max_width_px=ctx.config.marks_stitched_width_px or None,
            channel_order="rgb",
        )
        written += [str(p.relative_to(ctx.clip_dir)) for p in paths]
        regions_doc.append(_regions_entry(frame, k, region_ids, views, rr, attrs))
        if int(k) in regions_at:
            kr = regions_at[int(k)]
            colours[int(k)] = measure_region_colours(
                [kr], _keyframe_image_reader(ctx, int(k), originals)
            )
            if ctx.config.check_qa:
                patches.update(_keyframe_patches(frame, kr, originals))
    ctx.results["keyframe_regions"] = regions
    ctx.results["keyframe_patches"] = patches
    ctx.results["region_colours"] = RegionColours.concatenate(
        [colours[kr.keyframe_index] for kr in regions if kr.keyframe_index in colours]
    )
    atomic_write_json(ctx.clip_dir / REGIONS_FILE, {"keyframes": regions_doc}, indent=1)
    written.append(REGIONS_FILE)
    counts = {
        "keyframes": len(windows.keyframe),
        "regions": len(region_ids.region_id),
        "images": len(windows.keyframe) * len(views.channels),
    }
    return counts, written


def _keyframe_patches(frame, kr, rgb_by_channel: dict[str, np.ndarray]) -> dict[Path, Any]:
    """The decoded pixels under the visible keyframe masks of each camera of QA keyframe
    ``kr`` (``ImagePatch`` by image path): check-qa re-measures colours from them rather than
    decoding the images again, and only these pixels are held until then."""
    from autolabel.qa.appearance import ImagePatch

    at_key = np.flatnonzero(
        (kr.view_frame_index == kr.keyframe_index) & np.asarray(kr.view_visible, bool)
    )
    out = {}
    for cam in dict.fromkeys(kr.view_camera[at_key]):
        if str(cam) not in rgb_by_channel:
            continue
        rles = [kr.view_mask_rle[i] for i in at_key[kr.view_camera[at_key] == cam]]
        out[Path(frame.cameras[str(cam)].path)] = ImagePatch.around(rgb_by_channel[str(cam)], rles)
    return out


def _keyframe_image_reader(ctx: StageContext, k: int, rgb_by_channel: dict[str, np.ndarray]):
    """``read_image(camera, frame)`` of keyframe ``k``: the decoded RGB pixels given (the file
    is read only for a camera or frame not given)."""
    views: CameraViews = ctx.results["views"]

    def read_image(camera: str, frame: int) -> np.ndarray:
        if frame == k and camera in rgb_by_channel:
            return rgb_by_channel[camera]
        c = list(views.channels).index(camera)
        width_px, height_px = (int(v) for v in views.image_size_px[c])
        return read_image_rgb(ctx.clip.frames[frame].cameras[camera].path, width_px, height_px)

    return read_image


def _regions_entry(frame, k: int, region_ids, views: CameraViews, rr, attrs) -> dict[str, Any]:
    """``regions.json`` entry of QA keyframe ``k``: each region's track, class and the cameras
    that show it at the keyframe."""
    of_k = np.flatnonzero(region_ids.keyframe == k)
    of_k = of_k[np.argsort(region_ids.region_id[of_k], kind="stable")]
    tracks = region_ids.track_id[of_k]
    at_k = rr["at_keyframe"] & (rr["keyframe"] == k)
    shown = np.zeros((len(tracks), len(views.channels)), bool)
    track_of_view = views.track_id[rr["view"][at_k]]
    order = np.argsort(tracks, kind="stable")
    pos = order[np.searchsorted(tracks[order], track_of_view)]
    shown[pos, views.camera[rr["view"][at_k]]] = True
    labels = np.asarray(attrs.label)[attrs.row_of(np.full(len(tracks), k), tracks)]
    names = np.asarray(DETECTION_CLASSES, dtype=object)
    channels = np.asarray(views.channels, dtype=object)
    return {
        "frame_index": int(k),
        "sample_token": frame.token,
        "regions": [
            {
                "region_id": int(region_ids.region_id[i]),
                "track_id": int(tracks[j]),
                "class": str(names[labels[j]]),
                "cameras_at_keyframe": sorted(channels[shown[j]].tolist()),
            }
            for j, i in enumerate(of_k)
        ],
    }


# -- qa ----------------------------------------------------------------------------------------


class QACheckError(ValueError):
    """Generated QA disagrees with the attributes (``check-qa`` found mismatches)."""


def keyframe_regions(ctx: StageContext) -> list:
    """The grounding of each QA keyframe: its regions and every view of them in its window
    (visible or not), via ``autolabel.qa.grounding.regions_from_views``."""
    from autolabel.qa.grounding import regions_from_views

    views: CameraViews = ctx.results["views"]
    rles, _ = ctx.results["masks"]
    windows = ctx.results["windows"]
    keyframe, rows = [], []
    for pos, k in enumerate(windows.keyframe):
        frames = window_frames(windows, pos, ctx.config.qa.grounding_frames)
        in_window = np.flatnonzero(np.isin(views.frame_index, frames))
        keyframe.append(np.full(len(in_window), k, np.int64))
        rows.append(in_window)
    kf = np.concatenate(keyframe) if keyframe else np.zeros(0, np.int64)
    row = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    return regions_from_views(
        kf,
        views.track_id[row],
        np.asarray(views.channels, dtype=object)[views.camera[row]],
        views.frame_index[row],
        views.box_clipped_px[row],
        [rles[i] for i in row],
        ctx.results["visible"][row],
        ctx.results["region_ids"],
    )


def view_evidence(ctx: StageContext):
    """What the camera views say about each object (``autolabel.qa.confidence.ViewEvidence``):
    the visibility decision, mask scores and LiDAR points of every view, as the segment and
    visibility stages left them (the same columns ``visibility.parquet`` stores)."""
    from autolabel.qa.confidence import ViewEvidence

    views: CameraViews = ctx.results["views"]
    _, score = ctx.results["masks"]
    return ViewEvidence.from_table(
        {
            "frame_index": views.frame_index,
            "track_id": views.track_id,
            "keep": ctx.results["visible"],
            "mask_score": score,
            "lidar_points": views.lidar_points,
        }
    )


def qa_stage(ctx: StageContext) -> StageResult:
    """QA records from templates x attributes x regions -> ``qa.jsonl``; then check-qa on them."""
    from autolabel.qa.appearance import measure_region_colours
    from autolabel.qa.check import check_clip_qa, load_clip_grounding
    from autolabel.qa.generate import generate_clip_qa, write_qa_jsonl
    from autolabel.qa.grounding import ClipQAMeta

    attrs = ctx.results["attributes"]
    templates = ctx.models.templates()
    # Colours are measured under the keyframe masks in the images (colour questions, captions):
    # by the marks stage, which has them decoded; here only when it has not.
    regions = ctx.results.get("keyframe_regions")
    if regions is None:
        regions = keyframe_regions(ctx)
    colours = ctx.results.get("region_colours")
    if colours is None:
        colours = measure_region_colours(regions, _keyframe_image_reader(ctx, -1, {}))
    evidence = view_evidence(ctx)
    records = generate_clip_qa(
        attrs, regions, ClipQAMeta.from_clip(ctx.clip), ctx.config.qa, templates, colours, evidence
    )
    write_qa_jsonl(ctx.clip_dir / QA_FILE, records)
    counts = {
        "records": len(records),
        "keyframes": len({r["keyframe"]["frame_index"] for r in records}),
    }
    for category in sorted({r["category"] for r in records}):
        counts[category] = sum(r["category"] == category for r in records)
    if ctx.config.check_qa:
        # No rig: check-qa's projection test projects through the LiDAR-time ego pose, while
        # views are projected through each image's own ego pose (as the devkit renders boxes),
        # which moves near objects by many pixels when the ego drives. Every answer, region ->
        # track link and mask-box agreement is still re-derived and checked.
        # With the dataset root, colours are re-measured from the images under the masks (the
        # pixels the marks stage decoded, kept around the keyframe masks; the file where a
        # record's mask leaves them); every region and view must be the one the marked images
        # and masks files of the clip show.
        mismatches = check_clip_qa(
            records,
            attrs,
            ctx.clip.name,
            templates,
            cameras=None,
            images_root=ctx.clip.dataroot,
            views=evidence,
            confidence=ctx.config.qa.confidence,
            grounding=load_clip_grounding(ctx.clip_dir),
            image_patches=ctx.results.pop("keyframe_patches", None),
        )
        counts["check_mismatches"] = len(mismatches)
        if mismatches:
            shown = "; ".join(str(m) for m in mismatches[:3])
            raise QACheckError(
                f"{ctx.clip_dir / QA_FILE}: check-qa found {len(mismatches)} mismatches: {shown}"
            )
    return counts, [QA_FILE]


#: The stages of ``autolabel run`` in order (``read`` happens before, in ``pipeline.run_clip``).
STAGES: list[tuple[str, Any]] = [
    ("detect", detect_stage),
    ("track", track_stage),
    ("refine", refine_stage),
    ("attributes", attributes_stage),
    ("segment", segment_stage),
    ("visibility", visibility_stage),
    ("marks", marks_stage),
    ("qa", qa_stage),
]
STAGE_NAMES: tuple[str, ...] = ("read", *(name for name, _ in STAGES))
