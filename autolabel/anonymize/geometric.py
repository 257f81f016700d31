"""Regions to blur from 3D boxes alone: licence-plate patches of vehicles, heads of people.

Works with any detector backend and needs no weights. Every box of a class that carries a plate
(vehicles) or a face (pedestrians, and the riders of bicycles and motorcycles) gives one or two
*region cuboids* in its own frame, projected into the image as the polygon they are (the convex
hull of the cuboid's corners and of the points where its edges pierce the camera's near plane):

- plate patches: on the front and rear faces of a vehicle's box, centred laterally (plates are
  mounted on the car's centre line), plate-sized: the envelope of the US (0.31 x 0.15 m) and EU
  (0.52 x 0.11 m) plates, over the heights where plates are mounted (front and rear ranges, the
  plate's centre above the box bottom), a little behind the face plane (the box's face is the
  bumper's; plates sit in recesses). Only faces that look toward the camera are kept (the
  face's outward normal points at the camera centre, within ``facing_min_cos``);
- heads: the top ``head_band_m`` of a pedestrian's box over its footprint, or of a cycle's over
  the rider's part of it (cycles are taken as ridden: a box cannot tell). A box lower than
  ``head_short_box_m`` reaches from ``head_bottom_max_m`` to ``head_top_min_m`` above its bottom,
  as LiDAR detectors underestimate the height of distant people (the top beams miss the head).

Every region grows, on each side, by the box's uncertainty, metres: ``position_sigma_m`` (the
error of an annotation-grade box; boxes a run estimated add ``run_box_sigma_m`` of
:class:`autolabel.anonymize.AnonymizeConfig` through the per-box extra), the lateral shift of the
face centre a yaw error of ``yaw_sigma_deg`` causes, and a per-box extra (e.g. the uncertainty of
a box interpolated or extrapolated along its track, :mod:`autolabel.anonymize.track_fill`). No constant margin covers the whole car.
The extra grows regions up and down by at most ``vertical_extra_max_m``: it says where on the road
the object went while unseen (up to metres), not how high its plates and heads are above the road.

Boxes are given at their keyframe's (LiDAR) time; the caller says how far each moves by its
velocity to the image's capture time (cameras fire up to ~100 ms apart; see ``box_time`` of
:class:`autolabel.anonymize.AnonymizeConfig`). The geometry is vectorized over
boxes; only the convex hull is taken region by region (OpenCV, a few dozen per image).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import cv2
import numpy as np

from autolabel.anonymize.occlusion import (
    OcclusionConfig,
    ego_body_camera,
    hidden_pixels,
    hidden_regions,
    nearest_body_depth,
    opaque_bodies,
)
from autolabel.boxes import Boxes3D
from autolabel.classes import DETECTION_CLASSES
from autolabel.clip import Clip
from autolabel.sensors import CameraCalibration
from autolabel.sweep_timing import triggered_sweep_timing
from calib.bearing import bearing_deg, wrap_deg
from calib.projection import NEAR_PLANE_M, box_silhouette_uv
from calib.se3 import SE3

#: Region sources, the ``source`` codes of :class:`BlurRegions`.
SOURCE_PLATE = 0
SOURCE_HEAD = 1
SOURCE_LEARNED_FACE = 2
SOURCE_FOUND_PLATE = 3
SOURCE_NAMES = ("plate", "head", "learned_face", "found_plate")

#: Vertices per stored polygon (a cuboid's clipped silhouette has at most 12 + 8 points; hulls are
#: padded by repeating their last vertex).
POLYGON_VERTICES = 20

_PLATE_CLASSES = ("car", "truck", "bus", "trailer", "construction_vehicle")
_HEAD_CLASSES = ("pedestrian", "bicycle", "motorcycle")
# Farther than this from the image, polygon vertices are pulled in (a point just in front of the
# near plane projects ~1e5 px away; int32 drawing must not overflow).
_FAR_PX = 1.0e6


@dataclass(frozen=True)
class GeometricConfig:
    """Sizes of the region cuboids and the uncertainty they grow by (metres, object frame).

    Attributes:
        plate_classes: detection classes whose front and rear faces carry plates.
        plate_sizes_m: (width, height) of the plates to cover; the patch is their envelope
            (US 0.31 x 0.15 m, EU 0.52 x 0.11 m).
        front_plate_height_m, rear_plate_height_m: range of the plate centre's height above the
            box bottom on the front and on the rear face (EU: plate edges 0.3 - 1.2 m above the
            road; US: rear plates 0.3 - 1.5 m, in practice on bumpers and tailgates below 1.2 m).
        plate_depth_m: thickness of the patch before the uncertainty.
        plate_recess_m: (front, rear) depth of the patch's centre behind the face plane: the
            box's face is the bumper's, plates sit in recesses and on tailgates behind it
            (PandaSet-002's plate returns, all 16 keyframes: median 0.08 m behind the front
            face, 0.19 m behind the rear face).
        position_sigma_m: error of a box's position and size, added to every side of its regions
            (0.05: annotation-grade boxes; on PandaSet-002's annotations every hand-labelled plate
            of the keyframes the margins were set on is covered even at 0, see the README).
        yaw_sigma_deg: heading error; moves the face centre sideways by half the length times
            its sine (added to the plate patch's sides).
        time_sigma_s: error of a box's time: a spinning LiDAR sees an object up to half a
            revolution (50 ms at 10 Hz) before or after the sweep's timestamp, so a moving box is
            unsure along its velocity by speed times this (added to the patch's thickness, and
            to the head region's footprint).
        sweep_period_s: the LiDAR's revolution when each camera is triggered as the beams sweep
            across it (nuScenes; PandaSet-002's six cameras fire 19 - 100 ms before the sweep's
            timestamp, in the order of their azimuths), 0 (default) when the cameras are not
            synchronized with it. A box not moved to the image's capture time (a dataset's
            annotation, fitted to the returns: where the LiDAR hit its object) then differs from
            where the camera saw the object by at most the beams' time across the image's field
            of view (14 ms for a 52 degree camera, 26 ms for a 92 degree one, at 10 Hz), not by
            ``time_sigma_s``. Only where annotations are at the beams' hit time (real spinning
            LiDARs; the synthetic generator with ``lidar_hit_time``), and not across the sweep's
            seam (objects past it are swept a revolution later), so it needs
            ``sweep_seam_deg``. Figures: README, "Releases".
        sweep_seam_deg: (from, to), degrees: the ego-frame azimuths (counter-clockwise from
            the ego's +x) between which, counter-clockwise from ``from`` to ``to``, the sweep's
            seam may lie (a rig's setting; its cameras fire in the beams' order, so it lies
            between the last camera to fire and the first, and trigger jitter and the LiDAR's
            offset from the ego origin widen that). A box whose direction from the ego origin
            is, seen from the camera's optical axis, on the seam's far side or within the
            interval keeps ``time_sigma_s``. Required with ``sweep_period_s``.
        sweep_from_files: with ``sweep_period_s`` 0, a release reads both per clip from the
            clip's own LiDAR files and camera times (:mod:`autolabel.sweep_timing`)
            and uses them only where its keyframe files hold their returns in firing order and
            its cameras fire steadily in the beams' order within one period; elsewhere the clip
            keeps ``time_sigma_s``.
        min_plate_px: plate patches whose plate envelope is narrower than this many pixels are
            not blurred (0, the default: every plate is blurred, however small; a release must
            cover every plate pixel, and a plate too small to read is also cheap to blur).
        head_classes: detection classes whose top holds a head (pedestrians, riders).
        head_band_m: depth of the head region below the box top.
        head_above_m: height of the head region above the box top.
        head_bottom_max_m, head_top_min_m: the head region of a box lower than
            ``head_short_box_m`` covers at least this height range above the box bottom.
        head_short_box_m: boxes lower than this may have lost the head (LiDAR detectors).
        rider_length_m, rider_offset_fraction: a cycle's head region spans this much of its
            length, centred this fraction of the length behind the box centre (the saddle).
        facing_min_cos: a face is kept when cos(angle between its outward normal and the ray to
            the camera) exceeds this (slightly negative: a yaw error must not drop a plate).
        min_score: boxes scoring below this are ignored (0: every box the run kept).
        vertical_extra_max_m: cap of the per-box extra on the regions' heights. Track
            completion's extra (up to 2 m) is horizontal: the road keeps a person's head and a
            car's plate at their heights above it wherever the object went. 0.1 m leaves a run
            box's own height error (``run_box_sigma_m``) in full. On PandaSet-002's exact run it
            took a pedestrian's extrapolated head region from a 3 m-tall block over the body to
            its head (all 16 keyframes, blurred 2.14 -> 1.98 %, every label still covered).
    """

    plate_classes: tuple[str, ...] = _PLATE_CLASSES
    plate_sizes_m: tuple[tuple[float, float], ...] = ((0.31, 0.15), (0.52, 0.11))
    front_plate_height_m: tuple[float, float] = (0.3, 0.75)
    rear_plate_height_m: tuple[float, float] = (0.35, 1.2)
    plate_depth_m: float = 0.3
    plate_recess_m: tuple[float, float] = (0.08, 0.19)
    position_sigma_m: float = 0.05
    yaw_sigma_deg: float = 2.0
    time_sigma_s: float = 0.05
    sweep_period_s: float = 0.0
    sweep_seam_deg: tuple[float, ...] = ()
    sweep_from_files: bool = True
    min_plate_px: float = 0.0
    head_classes: tuple[str, ...] = _HEAD_CLASSES
    head_band_m: float = 0.35
    head_above_m: float = 0.05
    head_bottom_max_m: float = 1.2
    head_top_min_m: float = 1.95
    head_short_box_m: float = 1.5
    rider_length_m: float = 0.8
    rider_offset_fraction: float = 0.1
    facing_min_cos: float = -0.15
    min_score: float = 0.0
    vertical_extra_max_m: float = 0.1

    def __post_init__(self) -> None:
        for name in ("plate_classes", "head_classes"):
            unknown = sorted(set(getattr(self, name)) - set(DETECTION_CLASSES))
            if unknown:
                raise ValueError(f"{name}: unknown detection classes {unknown}")
        sizes = np.asarray(self.plate_sizes_m, dtype=np.float64)
        if sizes.ndim != 2 or sizes.shape[1] != 2 or len(sizes) == 0 or (sizes <= 0).any():
            raise ValueError(f"plate_sizes_m: expected ((width, height), ...) > 0, got {sizes}")
        for name in ("front_plate_height_m", "rear_plate_height_m"):
            lo, hi = getattr(self, name)
            if not 0 <= lo <= hi:
                raise ValueError(f"{name}: expected 0 <= low <= high, got {(lo, hi)!r}")
        for name in (
            "plate_depth_m", "position_sigma_m", "yaw_sigma_deg", "head_band_m", "head_above_m",
            "head_short_box_m", "rider_length_m", "rider_offset_fraction",
            "time_sigma_s", "min_plate_px", "vertical_extra_max_m", "sweep_period_s",
        ):  # fmt: skip
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: must be >= 0, got {getattr(self, name)!r}")
        seam = np.asarray(self.sweep_seam_deg, dtype=np.float64)
        if len(seam) and (seam.shape != (2,) or not np.isfinite(seam).all()):
            raise ValueError(
                f"sweep_seam_deg: expected () or (from, to), got {self.sweep_seam_deg!r}"
            )
        if self.sweep_period_s > 0 and not len(seam):
            raise ValueError(
                "sweep_period_s: needs sweep_seam_deg (where the sweep starts and ends, the "
                "bound does not hold across it)"
            )
        if len(self.plate_recess_m) != 2 or not np.all(np.isfinite(self.plate_recess_m)):
            raise ValueError(
                f"plate_recess_m: expected (front, rear) metres, got {self.plate_recess_m!r}"
            )
        if self.head_band_m + self.head_above_m <= 0:
            raise ValueError("head_band_m + head_above_m: the head region must have a height")
        if not self.head_top_min_m > self.head_bottom_max_m:
            raise ValueError("head_top_min_m: must exceed head_bottom_max_m")
        if not -1.0 <= self.facing_min_cos <= 1.0:
            raise ValueError(f"facing_min_cos: must be in [-1, 1], got {self.facing_min_cos!r}")

    @property
    def plate_envelope_m(self) -> tuple[float, float]:
        """(width, height) covering every plate size."""
        sizes = np.asarray(self.plate_sizes_m, dtype=np.float64)
        return float(sizes[:, 0].max()), float(sizes[:, 1].max())


@dataclass
class BlurRegions:
    """Image regions to blur, as parallel arrays.

    Attributes:
        polygon_px: (R, POLYGON_VERTICES, 2) float64 convex polygons in pixels (u right, v down),
            padded by repeating the last vertex; they may reach outside the image.
        source: (R,) int8 ``SOURCE_*`` code.
        expected_px: (R, 2) expected width and height, pixels, of the plate (plate regions) or
            head (head regions) the region was made for, at its depth; 0 for the others.
        facing_cos: (R,) cosine between a plate's outward normal and the ray to the camera
            (1 for other regions): small when the plate is seen edge-on.
        hidden_px: (R,) per region None, or ``(u0, v0, mask)``: the (h, w) bool pixels from
            (u0, v0) that a nearer vehicle hides, left sharp (a partly hidden plate is blurred
            where it is seen only).
    """

    polygon_px: np.ndarray
    source: np.ndarray
    expected_px: np.ndarray | None = None
    facing_cos: np.ndarray | None = None
    hidden_px: list | None = None

    def __post_init__(self) -> None:
        self.polygon_px = np.asarray(self.polygon_px, np.float64).reshape(-1, POLYGON_VERTICES, 2)
        self.source = np.asarray(self.source, np.int8).reshape(-1)
        n = len(self.polygon_px)
        if self.expected_px is None:
            self.expected_px = np.zeros((n, 2))
        self.expected_px = np.asarray(self.expected_px, np.float64).reshape(-1, 2)
        if self.facing_cos is None:
            self.facing_cos = np.ones(n)
        self.facing_cos = np.asarray(self.facing_cos, np.float64).reshape(-1)
        self.hidden_px = [None] * n if self.hidden_px is None else list(self.hidden_px)
        if not len(self.source) == len(self.expected_px) == len(self.facing_cos) == n:
            raise ValueError("BlurRegions: arrays differ in length")
        if len(self.hidden_px) != n:
            raise ValueError("BlurRegions: hidden_px differs in length")

    @classmethod
    def empty(cls) -> BlurRegions:
        return cls(np.zeros((0, POLYGON_VERTICES, 2)), np.zeros(0, np.int8))

    @classmethod
    def from_rects(cls, rect_px: np.ndarray, source: np.ndarray) -> BlurRegions:
        """Regions from (R, 4) [u0, v0, u1, v1] rectangles (max exclusive)."""
        r = np.asarray(rect_px, np.float64).reshape(-1, 4)
        quad = np.stack([r[:, [0, 1]], r[:, [2, 1]], r[:, [2, 3]], r[:, [0, 3]]], axis=1)
        pad = np.repeat(quad[:, 3:4], POLYGON_VERTICES - 4, axis=1)
        return cls(np.concatenate([quad, pad], axis=1), np.broadcast_to(source, len(r)))

    @classmethod
    def concatenate(cls, parts: list[BlurRegions]) -> BlurRegions:
        if not parts:
            return cls.empty()
        return cls(
            np.concatenate([p.polygon_px for p in parts]),
            np.concatenate([p.source for p in parts]),
            np.concatenate([p.expected_px for p in parts]),
            np.concatenate([p.facing_cos for p in parts]),
            [h for p in parts for h in p.hidden_px],
        )

    def __len__(self) -> int:
        return len(self.polygon_px)

    def __getitem__(self, index) -> BlurRegions:
        rows = np.arange(len(self))[index]
        return BlurRegions(
            self.polygon_px[index],
            self.source[index],
            self.expected_px[index],
            self.facing_cos[index],
            [self.hidden_px[i] for i in np.atleast_1d(rows)],
        )

    def bounds_px(self, width_px: int, height_px: int) -> np.ndarray:
        """(R, 4) int64 [u0, v0, u1, v1] bounding rectangles clipped to the image (max
        exclusive; empty rows have u1 <= u0 or v1 <= v0)."""
        p = self.polygon_px
        lo = np.floor(p.min(axis=1))
        hi = np.ceil(p.max(axis=1))
        u0 = np.clip(lo[:, 0], 0, width_px)
        v0 = np.clip(lo[:, 1], 0, height_px)
        u1 = np.clip(hi[:, 0], 0, width_px)
        v1 = np.clip(hi[:, 1], 0, height_px)
        return np.stack([u0, v0, u1, v1], axis=1).astype(np.int64).reshape(-1, 4)


def rects_from_boxes_2d(
    boxes_2d: np.ndarray, width_px: int, height_px: int, margin_px: float, margin_fraction: float
) -> tuple[np.ndarray, np.ndarray]:
    """Grow (N, 4) float [u_min, v_min, u_max, v_max] boxes by a margin, round outward, clip.

    Returns:
        rects (K, 4) int64 [u0, v0, u1, v1] (max exclusive) and (K,) indices of the kept input
        rows (NaN rows and rows entirely outside the image are dropped).
    """
    b = np.asarray(boxes_2d, dtype=np.float64).reshape(-1, 4)
    inside = np.all(np.isfinite(b), axis=1)
    size = np.maximum(b[:, 2] - b[:, 0], b[:, 3] - b[:, 1])
    grow = margin_px + margin_fraction * np.where(inside, size, 0.0)
    with np.errstate(invalid="ignore"):
        lo = np.floor(np.where(inside[:, None], b[:, :2], 0.0) - grow[:, None])
        hi = np.ceil(np.where(inside[:, None], b[:, 2:], 0.0) + grow[:, None])
    u0 = np.clip(lo[:, 0], 0, width_px)
    v0 = np.clip(lo[:, 1], 0, height_px)
    u1 = np.clip(hi[:, 0], 0, width_px)
    v1 = np.clip(hi[:, 1], 0, height_px)
    keep = inside & (u1 > u0) & (v1 > v0)
    rects = np.stack([u0, v0, u1, v1], axis=1)[keep].astype(np.int64)
    return rects, np.flatnonzero(keep)


def boxes_at_time(boxes: Boxes3D, dt_s: float | np.ndarray) -> Boxes3D:
    """The boxes moved ``dt_s`` seconds (one for all, or (N,) per box) along their velocity
    (unchanged where it is unknown)."""
    dt = np.broadcast_to(np.asarray(dt_s, dtype=np.float64), (len(boxes),))
    shift = np.nan_to_num(np.asarray(boxes.velocity_mps, dtype=np.float64)) * dt[:, None]
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
    boxes: Boxes3D,
    config: GeometricConfig,
    extra_margin_m: np.ndarray | None = None,
    plate_anchor_m: np.ndarray | None = None,
    time_sigma_s: np.ndarray | None = None,
) -> tuple[Boxes3D, np.ndarray, np.ndarray]:
    """Plate patches and head cuboids of the boxes, in the boxes' frame.

    Args:
        boxes: (N,) boxes.
        config: region sizes and uncertainty.
        extra_margin_m: (N,) metres added to every side of each box's regions (None: 0).
        plate_anchor_m: (N, 2, 6) where the LiDAR placed each box's front and rear plate
            (``autolabel.anonymize.lidar_plates.ANCHOR_COLUMNS``, box frame); a face with an
            anchor gets a patch over the anchor's bound only (within the band, at the depth of
            its returns), one without keeps the band at ``plate_recess_m``.
        time_sigma_s: (N,) seconds each box's time is unsure by (None: ``config.time_sigma_s``).

    Returns:
        cuboids (M,) as ``Boxes3D`` (``track_id`` = row of the source box), (M,) int8 source
        codes and (M,) the face each patch sits on (+1 front, -1 rear, 0 for heads); rows are the
        plate patches (front faces, then rear faces) then the heads.
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
    unsure = cfg.position_sigma_m + extra
    unsure_z = cfg.position_sigma_m + np.minimum(extra, cfg.vertical_extra_max_m)
    speed = np.linalg.norm(np.nan_to_num(boxes.velocity_mps), axis=1)
    sigma_t = cfg.time_sigma_s if time_sigma_s is None else np.asarray(time_sigma_s, np.float64)
    moving = speed * sigma_t

    # Plate patches: centred on the front (+x) and rear (-x) faces, over the mounting heights.
    sign = np.concatenate([np.ones(len(plate)), -np.ones(len(plate))])
    rows_p = np.concatenate([plate, plate])
    e_p = unsure[rows_p]
    plate_w, plate_h = cfg.plate_envelope_m
    heights = np.where(
        sign[:, None] > 0,
        np.asarray(cfg.front_plate_height_m)[None, :],
        np.asarray(cfg.rear_plate_height_m)[None, :],
    ).reshape(-1, 2)
    bottom_p = -0.5 * h[rows_p]
    ez_p = unsure_z[rows_p]
    z_lo = bottom_p + heights[:, 0] - 0.5 * plate_h - ez_p
    z_hi = bottom_p + heights[:, 1] + 0.5 * plate_h + ez_p
    lateral = 0.5 * length[rows_p] * np.sin(np.radians(cfg.yaw_sigma_deg)) + e_p
    # A plate is no wider than the car (0.8 of its width: mounts, lamps beside it).
    half_w = np.minimum(np.minimum(0.5 * plate_w, 0.4 * w[rows_p]) + lateral, 0.5 * w[rows_p] + e_p)
    y_lo, y_hi = -half_w, half_w
    if plate_anchor_m is not None and len(rows_p):
        # The anchor is measured against the box itself, so the box's own error does not move
        # it; it narrows the band and never reaches beyond it.
        anchor = np.asarray(plate_anchor_m, dtype=np.float64)[rows_p, np.where(sign > 0, 0, 1)]
        has = np.all(np.isfinite(anchor), axis=1)
        # A face whose surface the LiDAR sees but not a plate on it has a depth only.
        deep = np.all(np.isfinite(anchor[:, 4:]), axis=1)
        a = np.where(np.isfinite(anchor), anchor, 0.0)
        y_lo = np.where(has, np.maximum(y_lo, a[:, 0]), y_lo)
        y_hi = np.where(has, np.minimum(y_hi, a[:, 1]), y_hi)
        z_lo = np.where(has, np.maximum(z_lo, bottom_p + a[:, 2]), z_lo)
        z_hi = np.where(has, np.minimum(z_hi, bottom_p + a[:, 3]), z_hi)
        y_hi, z_hi = np.maximum(y_hi, y_lo), np.maximum(z_hi, z_lo)
    left = np.stack([-np.sin(yaw), np.cos(yaw), np.zeros(n)], axis=1)
    recess = np.where(sign > 0, cfg.plate_recess_m[0], cfg.plate_recess_m[1])
    thickness = cfg.plate_depth_m + 2 * (e_p + moving[rows_p])
    if plate_anchor_m is not None and len(rows_p):
        # Its returns say how deep the plate (or the surface it is on) is; only the time it
        # was seen is still unsure.
        recess = np.where(deep, 0.5 * (a[:, 4] + a[:, 5]), recess)
        thickness = np.where(deep, a[:, 5] - a[:, 4] + 2 * moving[rows_p], thickness)
    plate_size = np.stack([y_hi - y_lo, thickness, z_hi - z_lo], axis=1)
    plate_center = (
        boxes.center_m[rows_p]
        + (sign * (0.5 * length[rows_p] - recess))[:, None] * forward[rows_p]
        + (0.5 * (y_lo + y_hi))[:, None] * left[rows_p]
        + np.stack([np.zeros(len(rows_p)), np.zeros(len(rows_p)), 0.5 * (z_lo + z_hi)], axis=1)
    )
    # Heads: the top band of the box over its footprint (a rider's: the rear part of a cycle's);
    # a box lower than a short adult is taken as a person whose head the sensor missed, and its
    # region reaches head_bottom_max_m .. head_top_min_m above its bottom.
    e_h, ez_h = unsure[head], unsure_z[head]
    top = 0.5 * h[head]
    bottom = -top
    short = h[head] < cfg.head_short_box_m
    z_lo = np.where(short, np.minimum(top - cfg.head_band_m, bottom + cfg.head_bottom_max_m),
                    top - cfg.head_band_m) - ez_h  # fmt: skip
    z_hi = np.where(short, np.maximum(top, bottom + cfg.head_top_min_m), top)
    z_hi = z_hi + cfg.head_above_m + ez_h
    cycle = names[head] != "pedestrian"
    head_len = np.where(cycle, np.minimum(length[head], cfg.rider_length_m), length[head])
    shift = np.where(cycle, -cfg.rider_offset_fraction * length[head], 0.0)
    head_center = boxes.center_m[head] + shift[:, None] * forward[head]
    head_center[:, 2] += 0.5 * (z_lo + z_hi)
    e_xy = e_h + moving[head]
    head_size = np.stack([w[head] + 2 * e_xy, head_len + 2 * e_xy, z_hi - z_lo], axis=1)
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


def silhouette_points(
    intrinsic: np.ndarray, corners_camera: np.ndarray, near_m: float = NEAR_PLANE_M
) -> tuple[np.ndarray, np.ndarray]:
    """Pixels whose convex hull is each cuboid's silhouette, cut by the near plane.

    Args:
        intrinsic: (3, 3) K.
        corners_camera: (N, 8, 3) camera-frame corners, metres.

    Returns:
        (N, 20, 2) pixels (the 8 corners, then the points where the 12 edges pierce the plane
        ``z = near_m``) and (N, 20) bool, which of them exist (corners in front of the plane,
        edges that cross it).
    """
    uv = box_silhouette_uv(intrinsic, corners_camera, near_m)
    valid = np.isfinite(uv).all(axis=-1)
    return np.clip(np.nan_to_num(uv), -_FAR_PX, _FAR_PX), valid


def convex_polygons(points_px: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(N, POLYGON_VERTICES, 2) convex hulls of the valid points of each row, and (N,) bool,
    rows with at least three points."""
    n = len(points_px)
    out = np.zeros((n, POLYGON_VERTICES, 2))
    ok = valid.sum(axis=1) >= 3
    for i in np.flatnonzero(ok):  # one OpenCV hull per region: a few dozen per image
        hull = cv2.convexHull(points_px[i][valid[i]].astype(np.float32)).reshape(-1, 2)
        k = min(len(hull), POLYGON_VERTICES)
        out[i, :k] = hull[:k]
        out[i, k:] = hull[k - 1]
    return out, ok


def clip_geometric_config(clip: Clip, config: GeometricConfig) -> GeometricConfig:
    """``config`` with the clip's own sweep period and seam (:mod:`autolabel.sweep_timing`) where
    ``config.sweep_from_files`` asks for them (a period set in the config wins) and the clip's
    keyframe files and cameras support them; else ``config`` itself."""
    if config.sweep_period_s > 0 or not config.sweep_from_files:
        return config
    timing = triggered_sweep_timing(clip)
    if timing is None:
        return config
    period_s, seam_deg = timing.release_settings
    return replace(config, sweep_period_s=period_s, sweep_seam_deg=seam_deg)


def beyond_seam(
    boxes_global: Boxes3D,
    camera: CameraCalibration,
    global_SE3_ego: SE3,
    seam_deg: tuple[float, ...],
) -> np.ndarray:
    """(N,) bool: the arc from the camera's optical axis to the box centre's azimuth (ego frame,
    the shorter way round) meets the interval counter-clockwise from ``seam_deg[0]`` to
    ``seam_deg[1]`` where the LiDAR's sweep may start and end: the beams may have crossed the box
    a revolution away from when they crossed the camera's axis."""
    axis_deg = camera.axis_bearing_deg
    centre = global_SE3_ego.inverse().transform_points(boxes_global.center_m)
    box_deg = bearing_deg(centre)
    turn = wrap_deg(box_deg - axis_deg)  # signed, shorter way
    start = np.where(turn >= 0, axis_deg, box_deg)  # the arc, counter-clockwise from start
    length = np.abs(turn)
    lo, hi = seam_deg
    width = np.mod(hi - lo, 360.0)
    return (np.mod(lo - start, 360.0) <= length) | (np.mod(start - lo, 360.0) <= width)


def plate_and_head_regions(
    boxes_global: Boxes3D,
    camera: CameraCalibration,
    global_SE3_ego: SE3,
    dt_s: float | np.ndarray = 0.0,
    config: GeometricConfig | None = None,
    extra_margin_m: np.ndarray | None = None,
    plate_anchor_m: np.ndarray | None = None,
    occlusion: OcclusionConfig | None = None,
) -> BlurRegions:
    """Image polygons of the plate patches and heads of the boxes, for one camera image.

    Args:
        boxes_global: (N,) boxes in the global frame at the keyframe's time.
        camera: the image's camera (intrinsics, ``ego_SE3_camera``, size).
        global_SE3_ego: ego pose at the image's capture time.
        dt_s: seconds each box moves by its velocity to reach the image's capture time (one for
            all, or (N,) per box; 0 for a box already where the camera saw it).
        config: cuboid sizes and uncertainty.
        extra_margin_m: (N,) metres added to every side of each box's regions (None: 0).
        plate_anchor_m: (N, 2, 6) LiDAR plate anchors (see ``region_cuboids``; None: none).
        occlusion: leave out regions wholly behind the opaque body of a nearer vehicle box
            without extra margin or of the ego itself (``ego_body_m``), and the pixels such a
            body hides (:mod:`autolabel.anonymize.occlusion`; None: keep every region).

    Returns:
        The regions that reach into the image, plates then heads, with the pixel size of a
        plate (envelope) or of the head band at the region's nearest depth.
    """
    cfg = config or GeometricConfig()
    if boxes_global.frame != "global":
        raise ValueError(f"plate_and_head_regions: boxes must be global, got {boxes_global.frame}")
    boxes = boxes_at_time(boxes_global, dt_s) if np.any(dt_s) else boxes_global
    sigma_t = np.full(len(boxes), cfg.time_sigma_s)
    if cfg.sweep_period_s > 0:
        seen = cfg.sweep_period_s * camera.horizontal_fov_deg / 360.0
        unmoved = np.broadcast_to(np.asarray(dt_s, np.float64), (len(boxes),)) == 0
        unmoved &= ~beyond_seam(boxes, camera, global_SE3_ego, cfg.sweep_seam_deg)
        sigma_t[unmoved] = np.minimum(cfg.time_sigma_s, seen)
    cuboids, source, face_sign = region_cuboids(boxes, cfg, extra_margin_m, plate_anchor_m, sigma_t)
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
    corners_camera = camera_SE3_global.transform_points(
        cuboids.corners()[keep].reshape(-1, 3)
    ).reshape(-1, 8, 3)
    points, valid = silhouette_points(camera.intrinsic, corners_camera)
    polygons, ok = convex_polygons(points, valid)
    depth = np.maximum(np.where(valid[:, :8], corners_camera[..., 2], np.inf).min(axis=1), 0.1)
    plate_w, plate_h = cfg.plate_envelope_m
    size_m = np.where(
        (source[keep] == SOURCE_PLATE)[:, None],
        np.array([[plate_w, plate_h]]),
        np.array([[cfg.head_band_m, cfg.head_band_m]]),
    )
    expected = size_m * camera.intrinsic[0, 0] / depth[:, None]
    facing = np.where(is_plate, cos, 1.0)[keep]
    regions = BlurRegions(polygons[ok], source[keep][ok], expected[ok], facing[ok])
    b = regions.bounds_px(camera.width_px, camera.height_px)
    readable = (regions.source != SOURCE_PLATE) | (regions.expected_px[:, 0] >= cfg.min_plate_px)
    shown = (b[:, 2] > b[:, 0]) & (b[:, 3] > b[:, 1]) & readable
    if occlusion is not None and occlusion.enabled and shown.any():
        extra = np.zeros(len(boxes)) if extra_margin_m is None else np.asarray(extra_margin_m)
        solid = np.isin(boxes.class_name, cfg.plate_classes) & (extra <= 0)
        bodies = opaque_bodies(boxes, solid, occlusion, cfg.time_sigma_s)
        ego = ego_body_camera(occlusion, camera)
        body_depth = nearest_body_depth(bodies, camera, camera_SE3_global, ego)
        idx = np.flatnonzero(shown)
        shown[idx] = ~hidden_regions(
            regions.polygon_px[idx], depth[ok][idx], body_depth, occlusion.depth_margin_m
        )
        if occlusion.partial and shown.any():
            lower = opaque_bodies(boxes, solid, occlusion, cfg.time_sigma_s, partial=True)
            idx = np.flatnonzero(shown)
            state, hidden = hidden_pixels(
                regions.polygon_px[idx],
                depth[ok][idx],
                cuboids.track_id[keep][ok][idx],
                lower,
                np.flatnonzero(solid),
                camera,
                camera_SE3_global,
                occlusion.depth_margin_m,
                camera_bodies=ego,
            )
            shown[idx[state == 2]] = False
            for i, h in zip(idx, hidden, strict=True):
                regions.hidden_px[i] = h
    return regions[shown]
