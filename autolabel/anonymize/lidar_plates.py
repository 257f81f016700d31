"""Where on a vehicle's face its plate is, from the LiDAR returns the plate reflects.

Licence plates are retro-reflective: a spinning LiDAR's returns from a plate saturate its
intensity scale, while paint, glass and tyres return a small fraction of it. The returns above
``min_intensity`` that lie on a front or rear face of a vehicle's box, inside the band where the
geometric patch looks for a plate (centred on the car's centre line, over the mounting heights),
bound the plate: a plate holding them all lies within one plate size of their extremes (the beams'
footprint and range error allowed: on PandaSet-002 a plate 18 m away returns over 0.18 m of
height). The patch
then shrinks to that bound, grown by the box's and the returns' uncertainty; where no such return
lies on a face (the face hidden from the LiDAR, a plate that does not reflect, a sensor without
intensity) or where the bright returns spread wider than a plate, the whole band stays. A dull
return on the face beyond the plate's returns, at a height the plate spans, bounds that side of
the plate (``lateral_from_returns``).

Reflectors beside the plate (rear lamps, side markers) sit outside the band and are not taken.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from autolabel.anonymize.geometric import GeometricConfig
from autolabel.boxes import Boxes3D
from autolabel.camera_views import pairs_in_squares
from autolabel.clip import Frame

#: Per box and face (0: front, 1: rear): lateral low / high, height above the box bottom low /
#: high, and depth behind the face plane (inward, metres; negative: in front of it) low / high of
#: the plate's bound, metres in the box frame; NaN where the face has no anchor. A face without
#: a plate's bright returns whose surface the LiDAR sees has its depth columns only (the plate
#: lies on that surface; see ``LidarPlateConfig.surface_depth``).
ANCHOR_COLUMNS = (
    "lateral_lo_m", "lateral_hi_m", "height_lo_m", "height_hi_m", "depth_lo_m", "depth_hi_m",
)  # fmt: skip


@dataclass(frozen=True)
class LidarPlateConfig:
    """Finding plates by their LiDAR intensity.

    Attributes:
        enabled: use the keyframe's LiDAR returns to place plate patches.
        min_intensity: a return at least this bright is a plate candidate (the sensor's scale;
            nuScenes and PandaSet write 0-255, plates saturate at 250-255).
        face_depth_m: returns within this of a face plane (either side) lie on it.
        range_spread_rad: returns bound the plate only as closely as the beams' spacing: the
            bound grows by range times this on each side (0.2 degrees: a 64-beam LiDAR's
            spacing near the horizon).
        margin_m: further growth on each side of the bound (a return's range error, plate frames
            that reflect less than the plate).
        edge_intensity: returns at least this bright but below ``min_intensity`` may be a beam
            whose footprint straddles a plate's edge (it returns part of the plate's brightness:
            the synthetic LiDAR's plate-edge returns read 175-198): they do not anchor a plate,
            but they are taken as the plate's for its lateral extent. Returns below it are dull:
            they did not hit a plate.
        lateral_from_returns: a plate's side is bounded by the first dull return beyond its
            outermost plate return on that side (plus ``margin_m``): that return lies on the face
            (within ``face_depth_m``, not in front of the plate's returns) at a height the plate
            certainly spans (between its lowest and highest plate returns), so the plate, a
            rectangle, ends before it. A side with no such return (the plate's edge hidden from
            the LiDAR, as a truck's plate behind a nearer car's mirror on PandaSet-002 keyframe
            10; a ring that leaves the plate through its top or bottom edge, as a ring slanted
            across an oblique face does, so that only a plate seen by three or more rings has
            a ring certainly inside its height) keeps the plate-size bound. The earlier rule (the
            returns' span and spacing) took a ring leaving through the plate's top for its side,
            and partial plate hits for dull, and left plate pixels of three synthetic plates
            sharp (seed 5, see the README).
        height_tolerance_m: a dull return bounds a side only when it lies this far inside the
            plate returns' heights (a return's height is unsure by its range error times the
            beam's elevation sine, ~0.003 m for 0.02 m of range noise, and by the sensor's
            calibration).
    """

    enabled: bool = True
    min_intensity: float = 200.0
    face_depth_m: float = 0.3
    range_spread_rad: float = 0.0035
    margin_m: float = 0.05
    edge_intensity: float = 100.0
    lateral_from_returns: bool = True
    height_tolerance_m: float = 0.01
    surface_depth: bool = True
    surface_min_returns: int = 3
    max_recess_m: float = 0.1

    def __post_init__(self) -> None:
        for name in (
            "min_intensity",
            "face_depth_m",
            "range_spread_rad",
            "margin_m",
            "edge_intensity",
            "height_tolerance_m",
            "surface_min_returns",
            "max_recess_m",
        ):
            value = getattr(self, name)
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"{name}: must be a finite number >= 0, got {value!r}")
        if self.edge_intensity > self.min_intensity:
            raise ValueError(
                f"edge_intensity: must not exceed min_intensity ({self.min_intensity!r}), "
                f"got {self.edge_intensity!r}"
            )


def plate_anchors(
    boxes: Boxes3D,
    points_global_m: np.ndarray,
    intensity: np.ndarray,
    sensor_global_m: np.ndarray,
    geometric: GeometricConfig,
    config: LidarPlateConfig,
) -> np.ndarray:
    """(N, 2, 6) plate bounds per box and face (see ``ANCHOR_COLUMNS``), NaN where none.

    Only vehicles of ``geometric.plate_classes`` get anchors. The band a plate is looked for in
    is the geometric patch's before its uncertainty: centred on the face, as wide as the plate
    envelope (at most 0.8 of the box's width) plus the lateral shift a heading error causes, over
    the mounting heights.

    Args:
        boxes: (N,) boxes in the global frame, at the time of the sweep.
        points_global_m: (P, 3) the sweep's returns, global frame.
        intensity: (P,) their intensities.
        sensor_global_m: (3,) the LiDAR's position (ranges for the beam spread).
        geometric: the plate patches' geometry (classes, envelope, mounting heights).
        config: thresholds.
    """
    n = len(boxes)
    out = np.full((n, 2, len(ANCHOR_COLUMNS)), np.nan)
    value = np.asarray(intensity, dtype=np.float64)
    lit = value >= config.edge_intensity
    vehicle = np.isin(boxes.class_name, geometric.plate_classes) if n else np.zeros(0, bool)
    if not vehicle.any():
        return out
    rows = np.flatnonzero(vehicle)
    boxes = boxes[vehicle]
    all_pts = np.asarray(points_global_m, dtype=np.float64)
    pts = all_pts[lit]
    bright = value[lit] >= config.min_intensity  # (B,) of the lit returns
    half_len = 0.5 * boxes.size_wlh_m[:, 1:2]
    forward, lateral, height = _box_frame(boxes, pts)  # (N, B) each
    plate_w, plate_h = geometric.plate_envelope_m
    band_half_width = np.minimum(0.5 * plate_w, 0.4 * boxes.size_wlh_m[:, 0]) + half_len[
        :, 0
    ] * np.sin(np.radians(geometric.yaw_sigma_deg))
    band_height = (geometric.front_plate_height_m, geometric.rear_plate_height_m)
    spread = config.range_spread_rad * np.linalg.norm(
        boxes.center_m - np.asarray(sensor_global_m, dtype=np.float64)[None, :], axis=1
    )
    grow = config.margin_m + spread
    dull = None
    for face, sign in ((0, 1.0), (1, -1.0)):
        lo, hi = band_height[face]
        near = (
            (np.abs(sign * forward - half_len) <= config.face_depth_m)
            & (np.abs(lateral) <= band_half_width[:, None])
            & (height >= lo - 0.5 * plate_h)
            & (height <= hi + 0.5 * plate_h)
        )
        on = near & bright[None, :]
        found = on.any(axis=1)
        y_lo = np.where(on, lateral, np.inf).min(axis=1, initial=np.inf)
        y_hi = np.where(on, lateral, -np.inf).max(axis=1, initial=-np.inf)
        z_lo = np.where(on, height, np.inf).min(axis=1, initial=np.inf)
        z_hi = np.where(on, height, -np.inf).max(axis=1, initial=-np.inf)
        inward = half_len - sign * forward
        d_lo = np.where(on, inward, np.inf).min(axis=1, initial=np.inf)
        d_hi = np.where(on, inward, -np.inf).max(axis=1, initial=-np.inf)
        # Returns spread wider or higher than a plate (a beam's footprint and range error
        # allowed) are not one plate: keep the whole band.
        one_plate = (
            found & (y_hi - y_lo <= plate_w + 2 * grow) & (z_hi - z_lo <= plate_h + 2 * grow)
        )
        lat_lo, lat_hi = y_hi - plate_w - grow, y_lo + plate_w + grow
        if config.lateral_from_returns and one_plate.any():
            if dull is None:
                dull = all_pts[~lit]
            # The plate's returns, partial hits at its edges included (a face's lit returns
            # within a plate's size of its bright ones).
            touch = (
                near
                & (lateral >= (y_hi - plate_w - grow)[:, None])
                & (lateral <= (y_lo + plate_w + grow)[:, None])
                & (height >= (z_hi - plate_h - grow)[:, None])
                & (height <= (z_lo + plate_h + grow)[:, None])
            )
            t_lo = np.where(touch, lateral, np.inf).min(axis=1, initial=np.inf)
            t_hi = np.where(touch, lateral, -np.inf).max(axis=1, initial=-np.inf)
            # Heights the plate certainly spans: between its bright returns' lowest and highest
            # (a partial hit may be a ring grazing the plate's top or bottom edge), less the
            # heights' noise: a single ring, level or slanted, spans none.
            side_lo, side_hi = _dull_sides(
                boxes, sign, np.flatnonzero(one_plate), dull, t_lo, t_hi,
                z_lo + config.height_tolerance_m, z_hi - config.height_tolerance_m,
                d_lo - config.margin_m, lat_lo, lat_hi, config.face_depth_m,
            )  # fmt: skip
            lat_lo = np.maximum(lat_lo, side_lo - config.margin_m)
            lat_hi = np.minimum(lat_hi, side_hi + config.margin_m)
        bound = np.stack(
            [
                lat_lo,
                lat_hi,
                z_hi - plate_h - grow,
                z_lo + plate_h + grow,
                # The plate is a plane: its depth is where its returns are, give or take
                # their range error (the beams' spread is across the ray, not along it).
                d_lo - config.margin_m,
                d_hi + config.margin_m,
            ],
            axis=1,
        )
        out[rows[one_plate], face] = bound[one_plate]
        if config.surface_depth:
            # Faces without a plate's bright returns: their depth from the surface returns.
            rest = np.flatnonzero(~one_plate)
            s_lo, s_hi = _surface_depths(
                boxes, sign, rest, all_pts, band_half_width, lo - 0.5 * plate_h,
                hi + 0.5 * plate_h, config,
            )  # fmt: skip
            sure = rest[np.isfinite(s_lo[rest])]
            out[rows[sure], face, 4] = s_lo[sure] - config.margin_m
            out[rows[sure], face, 5] = s_hi[sure] + config.margin_m + config.max_recess_m
    return out


def _surface_depths(
    boxes: Boxes3D,
    sign: float,
    faces: np.ndarray,
    points_m: np.ndarray,
    band_half_width: np.ndarray,
    height_lo_m: float,
    height_hi_m: float,
    config: LidarPlateConfig,
) -> tuple[np.ndarray, np.ndarray]:
    """Per box, the depth behind the face plane (inward, metres) of the nearest and farthest
    return on the face inside the plate band (``faces`` only; NaN elsewhere and where fewer
    than ``config.surface_min_returns`` returns, or returns spread over less than half the band's
    width, lie there: a pole or a pedestrian in front of the face is not its surface)."""
    n = len(boxes)
    d_lo, d_hi = np.full(n, np.nan), np.full(n, np.nan)
    if len(faces) == 0 or len(points_m) == 0:
        return d_lo, d_hi
    radius = band_half_width[faces] + config.face_depth_m
    box, inward, lateral, height = _face_returns(
        boxes, sign, faces, points_m, np.zeros(len(faces)), radius
    )
    ok = (
        (np.abs(inward) <= config.face_depth_m)
        & (np.abs(lateral) <= band_half_width[box])
        & (height >= height_lo_m)
        & (height <= height_hi_m)
    )
    box, inward, lateral = box[ok], inward[ok], lateral[ok]
    lo, hi = np.full(n, np.inf), np.full(n, -np.inf)
    y_lo, y_hi = np.full(n, np.inf), np.full(n, -np.inf)
    np.minimum.at(lo, box, inward)
    np.maximum.at(hi, box, inward)
    np.minimum.at(y_lo, box, lateral)
    np.maximum.at(y_hi, box, lateral)
    many = np.bincount(box, minlength=n) >= config.surface_min_returns
    wide = y_hi - y_lo >= band_half_width
    sure = many & wide
    d_lo[sure], d_hi[sure] = lo[sure], hi[sure]
    return d_lo, d_hi


def _face_returns(
    boxes: Boxes3D,
    sign: float,
    faces: np.ndarray,
    points_m: np.ndarray,
    lateral_m: np.ndarray,
    radius_m: np.ndarray,
) -> tuple[np.ndarray, ...]:
    """The ``points_m`` (global) within ``radius_m`` (bird's-eye) of each face's
    point ``lateral_m`` to the left of its centre (``faces``: box indices; ``sign`` 1 the front,
    -1 the rear), as (M,) box, depth behind the face plane (inward), lateral and height above
    the box bottom, metres."""
    yaw = boxes.yaw_rad[faces]
    half_len = 0.5 * boxes.size_wlh_m[faces, 1]
    centre = (
        boxes.center_m[faces, :2]
        + (sign * half_len)[:, None] * np.stack([np.cos(yaw), np.sin(yaw)], axis=1)
        + lateral_m[:, None] * np.stack([-np.sin(yaw), np.cos(yaw)], axis=1)
    )
    which, point = pairs_in_squares(points_m[:, :2], centre, radius_m)
    box = faces[which]
    p = points_m[point]
    dx = p[:, 0] - boxes.center_m[box, 0]
    dy = p[:, 1] - boxes.center_m[box, 1]
    c, s = np.cos(boxes.yaw_rad[box]), np.sin(boxes.yaw_rad[box])
    inward = 0.5 * boxes.size_wlh_m[box, 1] - sign * (c * dx + s * dy)
    height = p[:, 2] - (boxes.center_m[box, 2] - 0.5 * boxes.size_wlh_m[box, 2])
    return box, inward, -s * dx + c * dy, height


def _box_frame(boxes: Boxes3D, points_m: np.ndarray) -> tuple[np.ndarray, ...]:
    """(N, P) forward, left and height above the box bottom of every point in every box's
    frame, metres."""
    yaw = boxes.yaw_rad
    cos, sin = np.cos(yaw)[:, None], np.sin(yaw)[:, None]
    dx = points_m[None, :, 0] - boxes.center_m[:, 0:1]
    dy = points_m[None, :, 1] - boxes.center_m[:, 1:2]
    height = points_m[None, :, 2] - (boxes.center_m[:, 2:3] - 0.5 * boxes.size_wlh_m[:, 2:3])
    return cos * dx + sin * dy, -sin * dx + cos * dy, height


def _dull_sides(
    boxes: Boxes3D,
    sign: float,
    faces: np.ndarray,
    dull_m: np.ndarray,
    t_lo: np.ndarray,
    t_hi: np.ndarray,
    h_lo: np.ndarray,
    h_hi: np.ndarray,
    min_inward_m: np.ndarray,
    lat_lo: np.ndarray,
    lat_hi: np.ndarray,
    face_depth_m: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Per box, the lateral position of the nearest dull return beyond the plate's returns on
    each side (low side: the highest one below ``t_lo``; -inf / +inf where none), for the boxes
    ``faces`` (others stay unbounded).

    A dull return counts when it lies on the face (within ``face_depth_m`` of its plane, no
    nearer the sensor than ``min_inward_m`` behind it: not an occluder in front of the plate),
    within the plate's height span ``h_lo .. h_hi`` and inside the plate-size bound
    ``lat_lo .. lat_hi`` (farther ones say nothing more). Candidates come from the bird's-eye
    grid join of ``camera_views.pairs_in_squares`` (a sweep has 10^5 returns, a face a few
    hundred).
    """
    n = len(boxes)
    side_lo, side_hi = np.full(n, -np.inf), np.full(n, np.inf)
    if len(faces) == 0 or len(dull_m) == 0:
        return side_lo, side_hi
    mid = 0.5 * (lat_lo[faces] + lat_hi[faces])
    radius = 0.5 * (lat_hi[faces] - lat_lo[faces]) + face_depth_m
    box, inward, lateral, height = _face_returns(boxes, sign, faces, dull_m, mid, radius)
    ok = (
        (np.abs(inward) <= face_depth_m)
        & (inward >= min_inward_m[box])
        & (height >= h_lo[box])
        & (height <= h_hi[box])
    )
    hi = ok & (lateral > t_hi[box]) & (lateral <= lat_hi[box])
    lo = ok & (lateral < t_lo[box]) & (lateral >= lat_lo[box])
    np.minimum.at(side_hi, box[hi], lateral[hi])
    np.maximum.at(side_lo, box[lo], lateral[lo])
    return side_lo, side_hi


def keyframe_plate_anchors(
    frame: Frame, boxes_global: Boxes3D, geometric: GeometricConfig, config: LidarPlateConfig
) -> np.ndarray:
    """``plate_anchors`` from the keyframe's own LiDAR sweep (taken at the boxes' time); all NaN
    when ``config.enabled`` is off."""
    if not config.enabled:
        return np.full((len(boxes_global), 2, len(ANCHOR_COLUMNS)), np.nan)
    from autolabel.nuscenes_reader import load_lidar_points

    sweep = frame.lidar
    ego_SE3_lidar = sweep.ego_SE3_lidar or frame.lidar_calibration.ego_SE3_lidar
    global_SE3_lidar = sweep.global_SE3_ego.compose(ego_SE3_lidar)
    points = load_lidar_points(sweep)
    return plate_anchors(
        boxes_global,
        global_SE3_lidar.transform_points(points[:, :3].astype(np.float64)),
        points[:, 3],
        global_SE3_lidar.translation,
        geometric,
        config,
    )


@dataclass
class ClipPlateAnchors:
    """Plate anchors of every keyframe of a clip.

    Attributes:
        anchors: per keyframe, (N_f, 2, 6) anchors of its boxes (``ANCHOR_COLUMNS``).
        borrowed: per keyframe, (N_f, 2) bool, the faces whose anchor came from another keyframe
            of the box's track.
        unreadable: keyframe index -> why its sweep gave no anchors (missing or unreadable file);
            its boxes keep the geometric bands unless their track lends an anchor.
    """

    anchors: list[np.ndarray]
    borrowed: list[np.ndarray]
    unreadable: dict[int, str]


def clip_plate_anchors(
    frames: Sequence[Frame],
    boxes_per_frame: Sequence[Boxes3D],
    margins_per_frame: Sequence[np.ndarray],
    geometric: GeometricConfig,
    config: LidarPlateConfig,
) -> ClipPlateAnchors:
    """Plate anchors of each keyframe, faces without one borrowing their track's.

    A plate is fixed on its car: an anchor found on one keyframe (box frame) holds on the
    track's other keyframes, where the face may be hidden from the LiDAR or too far for its
    beams. A face with no anchor of its own takes the one of the track's nearest keyframe in time
    that has one (ties: the earlier), grown on every side by the target box's uncertainty
    (``geometric.position_sigma_m`` plus its extra margin): the anchor is measured against the
    box it was found on, not against this one. Tracks are ``track_id`` >= 0, one id space per
    clip. A keyframe whose sweep is missing or unreadable is reported in ``unreadable`` and gets
    no anchors of its own.

    Args:
        frames: the clip's keyframes.
        boxes_per_frame: per keyframe, the boxes (global frame, at the keyframe's time).
        margins_per_frame: per keyframe, (N_f,) extra margin of each box, metres.
        geometric, config: as for :func:`plate_anchors`.
    """
    from autolabel.nuscenes_reader import DatasetError

    width = len(ANCHOR_COLUMNS)
    own, unreadable = [], {}
    for f, (frame, boxes) in enumerate(zip(frames, boxes_per_frame, strict=True)):
        try:
            own.append(keyframe_plate_anchors(frame, boxes, geometric, config))
        except (OSError, DatasetError) as e:
            unreadable[f] = str(e)
            own.append(np.full((len(boxes), 2, width), np.nan))
    if not config.enabled:
        borrowed = [np.zeros((len(b), 2), bool) for b in boxes_per_frame]
        return ClipPlateAnchors(own, borrowed, unreadable)
    times = np.array([fr.time_s for fr in frames], dtype=np.float64)
    anchors, borrowed = lend_track_anchors(
        own, [b.track_id for b in boxes_per_frame], margins_per_frame, times, geometric
    )
    return ClipPlateAnchors(anchors, borrowed, unreadable)


def lend_track_anchors(
    own: Sequence[np.ndarray],
    track_ids: Sequence[np.ndarray],
    margins_per_frame: Sequence[np.ndarray],
    time_s: np.ndarray,
    geometric: GeometricConfig,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Each keyframe's anchors with the faces that have none filled from their track
    (:func:`clip_plate_anchors`' rule), and (N_f, 2) bool, which were lent.

    Args:
        own: per keyframe, (N_f, 2, 6) anchors found on it (NaN: none).
        track_ids: per keyframe, (N_f,) track id of each box (-1: untracked; one box per track
            and keyframe).
        margins_per_frame: per keyframe, (N_f,) extra margin of each box, metres.
        time_s: (F,) keyframe times, seconds.
        geometric: ``position_sigma_m``, the uncertainty of every box.
    """
    width = len(ANCHOR_COLUMNS)
    anchors = [np.array(a, dtype=np.float64) for a in own]
    borrowed = [np.zeros((len(a), 2), bool) for a in own]
    ids = [np.asarray(t, np.int64) for t in track_ids]
    tracks = np.unique(np.concatenate(ids + [np.zeros(0, np.int64)]))
    tracks = tracks[tracks >= 0]
    if len(tracks) == 0 or len(own) < 2:
        return anchors, borrowed
    n_t, n_f = len(tracks), len(own)
    # (track, keyframe, face, column) table of the anchors found; a track has one box a keyframe.
    table = np.full((n_t, n_f, 2, width), np.nan)
    row_of = np.full((n_t, n_f), -1, np.int64)
    for f in range(n_f):  # 16-40 keyframes a clip; the boxes of each are arrays
        tracked = np.flatnonzero(ids[f] >= 0)
        t = np.searchsorted(tracks, ids[f][tracked])
        row_of[t, f] = tracked
        table[t, f] = anchors[f][tracked]
    found = np.isfinite(table).all(axis=3)  # (T, F, 2)
    time_s = np.asarray(time_s, dtype=np.float64)
    gap = np.abs(time_s[:, None] - time_s[None, :])  # (F target, F source)
    # Per (track, target keyframe, face): the nearest source keyframe with an anchor.
    cost = np.where(found[:, None, :, :], gap[None, :, :, None], np.inf)  # (T, F, F, 2)
    src = np.argmin(cost, axis=2)  # (T, F, 2); ties go to the earlier keyframe
    lend = np.isfinite(np.take_along_axis(cost, src[:, :, None, :], axis=2)[:, :, 0, :])
    lend &= ~found & (row_of >= 0)[:, :, None]
    for f in range(n_f):
        t_idx, face = np.nonzero(lend[:, f])
        if len(t_idx) == 0:
            continue
        rows = row_of[t_idx, f]
        a = table[t_idx, src[t_idx, f, face], face]
        grow = geometric.position_sigma_m + np.asarray(margins_per_frame[f], np.float64)[rows]
        a[:, 0::2] -= grow[:, None]
        a[:, 1::2] += grow[:, None]
        anchors[f][rows, face] = a
        borrowed[f][rows, face] = True
    return anchors, borrowed
