"""Anonymization of camera images: faces and licence plates blurred before anything is released.

Regions come from 3D boxes (:mod:`.geometric`: plate-sized patches where plates are mounted, and
heads, for any detector backend and without weights), narrowed to where the LiDAR sees
a plate's retro-reflective returns on that keyframe or another of the car's track
(:mod:`.lidar_plates`), refined by the image where the geometry is
unsure (:mod:`.plate_finder`: the plate found inside a patch replaces it; a CenterFace face inside
a head region replaces it), union the faces CenterFace finds anywhere (:mod:`.learned_faces`).
:func:`anonymize_image` blurs them as feathered polygons (:mod:`.blur`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import cv2
import numpy as np

from autolabel.anonymize.blur import BlurConfig, blur_regions
from autolabel.anonymize.geometric import (
    SOURCE_HEAD,
    SOURCE_NAMES,
    BlurRegions,
    GeometricConfig,
    plate_and_head_regions,
)
from autolabel.anonymize.learned_faces import CenterFaceDetector, LearnedFaceConfig
from autolabel.anonymize.lidar_plates import (
    ClipPlateAnchors,
    LidarPlateConfig,
    clip_plate_anchors,
    keyframe_plate_anchors,
)
from autolabel.anonymize.occlusion import OcclusionConfig
from autolabel.anonymize.plate_finder import PlateFinderConfig, refine_plate_regions
from autolabel.anonymize.track_fill import TrackFillConfig, fill_track_gaps
from autolabel.boxes import Boxes3D
from autolabel.clip import CameraImage

__all__ = [
    "AnonymizeConfig",
    "AnonymizedImage",
    "BlurConfig",
    "BlurRegions",
    "CenterFaceDetector",
    "ClipPlateAnchors",
    "GeometricConfig",
    "LearnedFaceConfig",
    "LidarPlateConfig",
    "OcclusionConfig",
    "PlateFinderConfig",
    "TrackFillConfig",
    "anonymize_image",
    "clip_plate_anchors",
    "fill_track_gaps",
    "keyframe_plate_anchors",
    "plate_and_head_regions",
]


#: ``AnonymizeConfig.box_time`` choices.
BOX_TIMES = ("auto", "keyframe", "capture")


def _run_track_fill() -> TrackFillConfig:
    # Detector tracks are fragmented and noisier than annotations: extrapolate less, only
    # tracks seen at least three times.
    return TrackFillConfig(max_extrapolate_s=1.0, min_track_boxes=3)


@dataclass(frozen=True)
class AnonymizeConfig:
    """What is blurred and how.

    Attributes:
        geometric: plate-patch and head regions from 3D boxes.
        lidar_plates: narrowing plate patches to where the LiDAR sees a plate's bright returns.
        occlusion: leaving out plates and heads behind a nearer annotated vehicle's body, wholly
            or where a part of them is.
        plate_finder: finding the plate inside a plate patch.
        learned_faces: also run CenterFace (``learned``) on every image.
        learned: CenterFace settings.
        face_replaces_head_score: a CenterFace face scoring at least this whose centre lies in a
            head region is blurred in place of that region (1.01: never).
        blur: kernel sizes.
        use_annotations: use the dataset's own annotations as boxes where it has them (nuScenes
            trainval, synthetic data), completed along their instances (``annotation_fill``).
        use_tracks: use the run's tracks (``labels/tracking.json``), completed (``track_fill``).
        use_detections: use the run's detections (``labels/detection.json``) scoring at least
            ``detection_min_score``.
        run_box_sigma_m: metres added to every side of the regions of the run's tracks and
            detections, on top of ``geometric.position_sigma_m`` (estimated boxes are less sure
            than annotations).
        box_time: when the boxes show their objects. ``keyframe``: at the keyframe's timestamp,
            every box is moved by its velocity to each image's capture time. ``capture``: already
            where each camera saw them, none is moved. ``auto`` (default): boxes without extra
            margin (a dataset's annotations at their own keyframe) are not moved, the others
            (filled in along a track, the run's) are. A spinning LiDAR's cameras fire as the
            beams sweep past them (nuScenes, PandaSet), so an object annotated on the sweep is
            drawn where the camera facing it saw it; moving it again by the camera's offset
            (up to 100 ms, 1.5 m at 15 m/s) pushes its plate off the plate.
    """

    geometric: GeometricConfig = field(default_factory=GeometricConfig)
    lidar_plates: LidarPlateConfig = field(default_factory=LidarPlateConfig)
    occlusion: OcclusionConfig = field(default_factory=OcclusionConfig)
    plate_finder: PlateFinderConfig = field(default_factory=PlateFinderConfig)
    learned_faces: bool = True
    learned: LearnedFaceConfig = field(default_factory=LearnedFaceConfig)
    face_replaces_head_score: float = 0.5
    blur: BlurConfig = field(default_factory=BlurConfig)
    use_annotations: bool = True
    annotation_fill: TrackFillConfig = field(default_factory=TrackFillConfig)
    use_tracks: bool = True
    track_fill: TrackFillConfig = field(default_factory=_run_track_fill)
    use_detections: bool = True
    detection_min_score: float = 0.0
    run_box_sigma_m: float = 0.1
    box_time: str = "auto"

    def __post_init__(self) -> None:
        if self.box_time not in BOX_TIMES:
            raise ValueError(f"box_time: must be one of {BOX_TIMES}, got {self.box_time!r}")
        if self.run_box_sigma_m < 0:
            raise ValueError(f"run_box_sigma_m: must be >= 0, got {self.run_box_sigma_m!r}")
        if not 0.0 <= self.detection_min_score <= 1.0:
            raise ValueError(
                f"detection_min_score: must be in [0, 1], got {self.detection_min_score!r}"
            )


@dataclass
class AnonymizedImage:
    """An anonymized image and what was blurred.

    Attributes:
        image_bgr: (H, W, 3) uint8.
        mask: (H, W) bool, the blurred pixels.
        regions: the polygons that were blurred.
    """

    image_bgr: np.ndarray
    mask: np.ndarray
    regions: BlurRegions

    def counts(self) -> dict[str, int]:
        """Regions per source (``plate``, ``head``, ``learned_face``, ``found_plate``)."""
        n = np.bincount(self.regions.source.astype(np.int64), minlength=len(SOURCE_NAMES))
        return {name: int(n[i]) for i, name in enumerate(SOURCE_NAMES)}


def anonymize_image(
    image_bgr: np.ndarray,
    camera_image: CameraImage,
    boxes_global: Boxes3D,
    boxes_time_us: int,
    config: AnonymizeConfig | None = None,
    face_detector: CenterFaceDetector | None = None,
    extra_margin_m: np.ndarray | None = None,
    plate_anchor_m: np.ndarray | None = None,
) -> AnonymizedImage:
    """Blur the plate patches and heads of the boxes and the faces CenterFace finds.

    Args:
        image_bgr: (H, W, 3) uint8, the camera image.
        camera_image: its calibration, ego pose at capture time and timestamp.
        boxes_global: (N,) boxes in the global frame at ``boxes_time_us`` (the keyframe's).
        boxes_time_us: time of the boxes, microseconds (same clock as the image's).
        config: what to blur.
        face_detector: CenterFace; required when ``config.learned_faces`` (build it once).
        extra_margin_m: (N,) metres added to each box's regions (track-completion uncertainty).
        plate_anchor_m: (N, 2, 6) where the LiDAR placed each box's plates, on this keyframe or
            lent by its track (:func:`clip_plate_anchors`; None: the geometric bands).
    """
    cfg = config or AnonymizeConfig()
    img = np.asarray(image_bgr)
    cal = camera_image.calibration
    if img.shape[:2] != (cal.height_px, cal.width_px):
        raise ValueError(
            f"{camera_image.path}: image is {img.shape[1]}x{img.shape[0]}, calibration says "
            f"{cal.width_px}x{cal.height_px}"
        )
    dt_s = box_motion_s(camera_image.timestamp_us - boxes_time_us, extra_margin_m,
                        len(boxes_global), cfg.box_time)  # fmt: skip
    geometric = plate_and_head_regions(
        boxes_global,
        cal,
        camera_image.global_SE3_ego,
        dt_s,
        cfg.geometric,
        extra_margin_m,
        plate_anchor_m,
        cfg.occlusion,
    )
    geometric, _ = refine_plate_regions(img, geometric, cfg.plate_finder)
    parts = [geometric]
    if cfg.learned_faces:
        if face_detector is None:
            raise ValueError("anonymize_image: learned_faces is on but no face_detector was given")
        faces, scores = face_detector.scored_regions(img)
        geometric = _heads_without_found_faces(
            geometric, faces, scores, cfg.face_replaces_head_score
        )
        parts = [geometric, faces]
    regions = BlurRegions.concatenate(parts)
    out, mask = blur_regions(img, regions, cfg.blur)
    return AnonymizedImage(out, mask, regions)


def box_motion_s(
    offset_us: int, extra_margin_m: np.ndarray | None, n: int, box_time: str
) -> np.ndarray:
    """(n,) seconds each box moves along its velocity to an image ``offset_us`` after the boxes'
    keyframe (see ``AnonymizeConfig.box_time``)."""
    dt = np.full(n, offset_us / 1e6)
    if box_time == "capture":
        dt[:] = 0.0
    elif box_time == "auto":
        extra = np.zeros(n) if extra_margin_m is None else np.asarray(extra_margin_m, np.float64)
        dt[extra <= 0] = 0.0
    return dt


def _heads_without_found_faces(
    regions: BlurRegions, face_regions: BlurRegions, scores: np.ndarray, min_score: float
) -> BlurRegions:
    """The regions less the head regions that hold the centre of a face scoring >= min_score."""
    heads = np.flatnonzero(regions.source == SOURCE_HEAD)
    sure = face_regions.polygon_px[scores >= min_score]
    if len(heads) == 0 or len(sure) == 0:
        return regions
    centres = sure[:, :4].mean(axis=1)
    drop = np.zeros(len(regions), bool)
    for i in heads:  # a few heads per image
        poly = regions.polygon_px[i].astype(np.float32)
        drop[i] = any(cv2.pointPolygonTest(poly, (float(x), float(y)), False) >= 0 for x, y in centres)  # fmt: skip
    return regions[~drop]
