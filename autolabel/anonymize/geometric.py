"""Regions to blur from 3D boxes alone: licence-plate bands of vehicles, heads of people.

Works with any detector backend and needs no weights: every box of a class that carries a plate
(vehicles) or a face (pedestrians, and the riders of bicycles and motorcycles) gives one or two
*region cuboids* in its own frame, which are projected into the image with near-plane clipping
(``calib.projection.box_2d_from_corners``) and grown by a pixel margin:

- plate bands: the front and rear faces of a vehicle's box, between ``plate_band_bottom_m`` and
  ``plate_band_top_m`` above the box's bottom, over the face's whole width plus a lateral margin,
  as a slab ``2 * plate_depth_m`` thick around the face plane; only faces that look toward the
  camera (the face's outward normal points at the camera centre, within ``facing_min_cos``) are
  kept, so the back of a car seen from the front is not blurred;
- heads: the top ``head_band_m`` of a pedestrian's or cycle's box (cycles are taken as ridden:
  a box cannot tell, and blurring a handlebar costs little), ``head_above_m`` above its top,
  with a margin around the footprint. The region always reaches from ``head_bottom_max_m`` up to
  ``head_top_min_m`` above the box bottom: LiDAR detectors underestimate the height of distant
  people (the top beams miss the head), and a region at the top of a 1.1 m box would miss a
  1.8 m person's face.

Each box may carry an extra margin (metres, e.g. the position uncertainty of a box that was
interpolated or extrapolated along its track, :mod:`autolabel.anonymize.track_fill`), added to
every side of its regions.

Boxes are given at their keyframe's (LiDAR) time and moved to the image's capture time by their
velocity where it is known (cameras fire up to ~50 ms later). Everything is vectorized over
boxes; the only loop is none.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autolabel.boxes import Boxes3D
from autolabel.classes import DETECTION_CLASSES
from autolabel.sensors import CameraCalibration
from calib.projection import box_2d_from_corners, clip_boxes_2d
from calib.se3 import SE3

#: Region sources, the ``source`` codes of :class:`BlurRegions`.
SOURCE_PLATE = 0
SOURCE_HEAD = 1
SOURCE_LEARNED_FACE = 2
SOURCE_NAMES = ("plate", "head", "learned_face")

_PLATE_CLASSES = ("car", "truck", "bus", "trailer", "construction_vehicle")
_HEAD_CLASSES = ("pedestrian", "bicycle", "motorcycle")


@dataclass(frozen=True)
class GeometricConfig:
    """Sizes of the region cuboids and margins (metres in the object's frame, pixels in the image).

    Attributes:
        plate_classes: detection classes whose front and rear faces carry plates.
        plate_band_bottom_m, plate_band_top_m: the band's height above the box bottom (EU and US
            plates sit 0.3 - 1.2 m above the road; the defaults add room for height errors).
        plate_depth_m: half thickness of the slab around the face plane (covers length errors).
        plate_lateral_margin_m: added to each side of the face's width.
        head_classes: detection classes whose top holds a head (pedestrians, riders).
        head_band_m: depth of the head region below the box top.
        head_above_m: height of the head region above the box top (boxes that are too low).
        head_lateral_margin_m: added to each side of the footprint.
        head_bottom_max_m, head_top_min_m: the head region covers at least this height range
            above the box bottom, whatever the box's height.
        facing_min_cos: a face is kept when cos(angle between its outward normal and the ray to
            the camera) exceeds this (slightly negative: a yaw error must not drop a plate).
        margin_px: pixels added to each side of every projected region.
        margin_fraction: plus this fraction of the region's larger side, on each side.
        min_score: boxes scoring below this are ignored (0: every box the run kept).
    """

    plate_classes: tuple[str, ...] = _PLATE_CLASSES
    plate_band_bottom_m: float = 0.15
    plate_band_top_m: float = 1.35
    plate_depth_m: float = 0.3
    plate_lateral_margin_m: float = 0.2
    head_classes: tuple[str, ...] = _HEAD_CLASSES
    head_band_m: float = 0.5
    head_above_m: float = 0.2
    head_lateral_margin_m: float = 0.2
    head_bottom_max_m: float = 1.2
    head_top_min_m: float = 1.95
    facing_min_cos: float = -0.15
    margin_px: float = 3.0
    margin_fraction: float = 0.15
    min_score: float = 0.0

    def __post_init__(self) -> None:
        for name in ("plate_classes", "head_classes"):
            unknown = sorted(set(getattr(self, name)) - set(DETECTION_CLASSES))
            if unknown:
                raise ValueError(f"{name}: unknown detection classes {unknown}")
        if not self.plate_band_top_m > self.plate_band_bottom_m:
            raise ValueError("plate_band_top_m: must exceed plate_band_bottom_m")
        for name in (
            "plate_depth_m", "plate_lateral_margin_m", "head_band_m", "head_above_m",
            "head_lateral_margin_m", "margin_px", "margin_fraction",
        ):  # fmt: skip
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: must be >= 0, got {getattr(self, name)!r}")
        if self.head_band_m + self.head_above_m <= 0:
            raise ValueError("head_band_m + head_above_m: the head region must have a height")
        if not self.head_top_min_m > self.head_bottom_max_m:
            raise ValueError("head_top_min_m: must exceed head_bottom_max_m")
        if not -1.0 <= self.facing_min_cos <= 1.0:
            raise ValueError(f"facing_min_cos: must be in [-1, 1], got {self.facing_min_cos!r}")


@dataclass
class BlurRegions:
    """Image regions to blur, as parallel arrays.

    Attributes:
        rect_px: (R, 4) int64 [u0, v0, u1, v1] pixel rectangles, clipped to the image,
            max exclusive (non-empty).
        source: (R,) int8 ``SOURCE_PLATE`` / ``SOURCE_HEAD`` / ``SOURCE_LEARNED_FACE``.
    """

    rect_px: np.ndarray
    source: np.ndarray

    @classmethod
    def empty(cls) -> BlurRegions:
        return cls(np.zeros((0, 4), np.int64), np.zeros(0, np.int8))

    @classmethod
    def concatenate(cls, parts: list[BlurRegions]) -> BlurRegions:
        if not parts:
            return cls.empty()
        return cls(
            np.concatenate([p.rect_px for p in parts]).astype(np.int64).reshape(-1, 4),
            np.concatenate([p.source for p in parts]).astype(np.int8),
        )

    def __len__(self) -> int:
        return len(self.rect_px)


def rects_from_boxes_2d(
    boxes_2d: np.ndarray, width_px: int, height_px: int, margin_px: float, margin_fraction: float
) -> tuple[np.ndarray, np.ndarray]:
    """Grow (N, 4) float [u_min, v_min, u_max, v_max] boxes by a margin, round outward, clip.

    Returns:
        rects (K, 4) int64 [u0, v0, u1, v1] (max exclusive) and (K,) indices of the kept input
        rows (NaN rows and rows entirely outside the image are dropped).
    """
    b = np.asarray(boxes_2d, dtype=np.float64).reshape(-1, 4)
    # The margin grows with the part of the region inside the image: a region crossing the
    # camera's near plane is unbounded, and a fraction of that would cover the whole image.
    clipped = clip_boxes_2d(b, width_px, height_px)
    inside = np.all(np.isfinite(clipped), axis=1)
    size = np.maximum(clipped[:, 2] - clipped[:, 0], clipped[:, 3] - clipped[:, 1])
    grow = margin_px + margin_fraction * np.where(inside, size, 0.0)
    with np.errstate(invalid="ignore"):
        lo = np.floor(np.where(inside[:, None], clipped[:, :2], 0.0) - grow[:, None])
        hi = np.ceil(np.where(inside[:, None], clipped[:, 2:], 0.0) + grow[:, None])
    u0 = np.clip(lo[:, 0], 0, width_px)
    v0 = np.clip(lo[:, 1], 0, height_px)
    u1 = np.clip(hi[:, 0], 0, width_px)
    v1 = np.clip(hi[:, 1], 0, height_px)
    keep = inside & (u1 > u0) & (v1 > v0)
    rects = np.stack([u0, v0, u1, v1], axis=1)[keep].astype(np.int64)
    return rects, np.flatnonzero(keep)


def boxes_at_time(boxes: Boxes3D, dt_s: float) -> Boxes3D:
    """The boxes moved ``dt_s`` seconds along their velocity (unchanged where it is unknown)."""
    shift = np.nan_to_num(np.asarray(boxes.velocity_mps, dtype=np.float64)) * float(dt_s)
    center = boxes.center_m.copy()
    center[:, :2] += shift
    return Boxes3D(
        center,
        boxes.size_wlh_m,
        boxes.yaw_rad,
        boxes.velocity_mps,
        boxes.label,
        boxes.score,
        boxes.track_id,
        frame=boxes.frame,
    )


def region_cuboids(
    boxes: Boxes3D, config: GeometricConfig, extra_margin_m: np.ndarray | None = None
) -> tuple[Boxes3D, np.ndarray, np.ndarray]:
    """Plate slabs and head cuboids of the boxes, in the boxes' frame.

    Args:
        boxes: (N,) boxes.
        config: region sizes.
        extra_margin_m: (N,) metres added to every side of each box's regions (None: 0).

    Returns:
        cuboids (M,) as ``Boxes3D`` (``track_id`` = row of the source box), (M,) int8 source
        codes and (M,) the face each slab sits on (+1 front, -1 rear, 0 for heads); rows are the
        plate slabs (front faces, then rear faces) then the heads.
    """
    cfg = config
    n = len(boxes)
    extra = np.zeros(n) if extra_margin_m is None else np.asarray(extra_margin_m, np.float64)
    if extra.shape != (n,):
        raise ValueError(f"extra_margin_m: expected ({n},), got {extra.shape}")
    names = boxes.class_name if n else np.zeros(0, object)
    keep_score = boxes.score >= cfg.min_score
    plate = np.flatnonzero(np.isin(names, cfg.plate_classes) & keep_score)
    head = np.flatnonzero(np.isin(names, cfg.head_classes) & keep_score)
    w, length, h = (boxes.size_wlh_m[:, i] for i in range(3))
    yaw = boxes.yaw_rad
    forward = np.stack([np.cos(yaw), np.sin(yaw), np.zeros(n)], axis=1)

    # Plate slabs: centred on the front (+x) and rear (-x) faces.
    sign = np.concatenate([np.ones(len(plate)), -np.ones(len(plate))])
    rows_p = np.concatenate([plate, plate])
    e_p = extra[rows_p]
    bottom_p = -0.5 * h[rows_p]
    z_lo = bottom_p + cfg.plate_band_bottom_m - e_p
    z_hi = bottom_p + cfg.plate_band_top_m + e_p
    plate_center = (
        boxes.center_m[rows_p]
        + (sign * 0.5 * length[rows_p])[:, None] * forward[rows_p]
        + np.stack([np.zeros(len(rows_p)), np.zeros(len(rows_p)), 0.5 * (z_lo + z_hi)], axis=1)
    )
    plate_size = np.stack(
        [
            w[rows_p] + 2 * (cfg.plate_lateral_margin_m + e_p),
            2 * (cfg.plate_depth_m + e_p),
            z_hi - z_lo,
        ],
        axis=1,
    )
    # Heads: the top band of the box (at least head_bottom_max_m .. head_top_min_m above its
    # bottom), over its footprint plus a margin.
    e_h = extra[head]
    top = 0.5 * h[head]
    bottom = -top
    z_lo = np.minimum(top - cfg.head_band_m, bottom + cfg.head_bottom_max_m) - e_h
    z_hi = np.maximum(top, bottom + cfg.head_top_min_m) + cfg.head_above_m + e_h
    head_center = boxes.center_m[head].copy()
    head_center[:, 2] += 0.5 * (z_lo + z_hi)
    head_size = np.stack(
        [
            w[head] + 2 * (cfg.head_lateral_margin_m + e_h),
            length[head] + 2 * (cfg.head_lateral_margin_m + e_h),
            z_hi - z_lo,
        ],
        axis=1,
    )
    rows = np.concatenate([rows_p, head]).astype(np.int64)
    cuboids = Boxes3D(
        center_m=np.concatenate([plate_center, head_center]).reshape(-1, 3),
        size_wlh_m=np.concatenate([plate_size, head_size]).reshape(-1, 3),
        yaw_rad=yaw[rows],
        label=boxes.label[rows],
        track_id=rows,
        frame=boxes.frame,
    )
    source = np.concatenate(
        [np.full(len(rows_p), SOURCE_PLATE), np.full(len(head), SOURCE_HEAD)]
    ).astype(np.int8)
    face_sign = np.concatenate([sign, np.zeros(len(head))])
    return cuboids, source, face_sign


def plate_and_head_regions(
    boxes_global: Boxes3D,
    camera: CameraCalibration,
    global_SE3_ego: SE3,
    dt_s: float = 0.0,
    config: GeometricConfig | None = None,
    extra_margin_m: np.ndarray | None = None,
) -> BlurRegions:
    """Image rectangles of the plate bands and heads of the boxes, for one camera image.

    Args:
        boxes_global: (N,) boxes in the global frame at the keyframe's time.
        camera: the image's camera (intrinsics, ``ego_SE3_camera``, size).
        global_SE3_ego: ego pose at the image's capture time.
        dt_s: image capture time minus the boxes' time, seconds (boxes move by their velocity).
        config: cuboid sizes and margins.
        extra_margin_m: (N,) metres added to every side of each box's regions (None: 0).

    Returns:
        The regions, plates then heads (empty when no box qualifies or none is in view).
    """
    cfg = config or GeometricConfig()
    if boxes_global.frame != "global":
        raise ValueError(f"plate_and_head_regions: boxes must be global, got {boxes_global.frame}")
    boxes = boxes_at_time(boxes_global, dt_s) if dt_s else boxes_global
    cuboids, source, face_sign = region_cuboids(boxes, cfg, extra_margin_m)
    if len(cuboids) == 0:
        return BlurRegions.empty()
    global_SE3_camera = global_SE3_ego.compose(camera.ego_SE3_camera)
    camera_SE3_global = global_SE3_camera.inverse()
    # Faces look toward the camera when their outward normal points at the camera centre.
    is_plate = source == SOURCE_PLATE
    yaw = cuboids.yaw_rad
    outward = np.stack([np.cos(yaw), np.sin(yaw)], axis=1) * face_sign[:, None]
    to_camera = global_SE3_camera.translation[:2] - cuboids.center_m[:, :2]
    dist = np.linalg.norm(to_camera, axis=1)
    cos = np.einsum("ij,ij->i", outward, to_camera) / np.maximum(dist, 1e-9)
    keep = ~is_plate | (cos > cfg.facing_min_cos)
    corners_global = cuboids.corners()[keep]  # (M, 8, 3)
    corners_camera = camera_SE3_global.transform_points(corners_global.reshape(-1, 3)).reshape(
        -1, 8, 3
    )
    boxes_2d = box_2d_from_corners(camera.intrinsic, corners_camera)
    rects, kept = rects_from_boxes_2d(
        boxes_2d, camera.width_px, camera.height_px, cfg.margin_px, cfg.margin_fraction
    )
    return BlurRegions(rects, source[keep][kept])
