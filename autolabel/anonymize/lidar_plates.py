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
intensity) or where the bright returns spread wider than a plate, the whole band stays. Returns
that span a plate's width laterally have found both its sides: the bound then reaches a firing
spacing or so beyond them, not a plate width (``lateral_from_returns``).

Reflectors beside the plate (rear lamps, side markers) sit outside the band and are not taken.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from autolabel.anonymize.geometric import GeometricConfig
from autolabel.boxes import Boxes3D
from autolabel.clip import Frame

#: Per box and face (0: front, 1: rear): lateral low / high, height above the box bottom low /
#: high, and depth behind the face plane (inward, metres; negative: in front of it) low / high of
#: the plate's bound, metres in the box frame; NaN where the face has no anchor.
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
        lateral_from_returns: where the bright returns span at least the narrowest plate's width
            (less one firing spacing on both sides), the plate's sides are taken to lie within
            ``lateral_steps`` firing spacings (plus ``margin_m``) of the outermost returns, not one
            plate width beyond them: a spinning LiDAR's firings sweep across the whole plate, and
            a retro-reflective plate returns bright from edge to edge, so returns that span a
            plate's width have found both of its sides. The spacing is measured on the face (the
            widest lateral gap between neighbouring bright returns, at least ``range_spread_rad``
            times the range): sensors differ (PandaSet's Pandar64 fires every 0.2 degrees, the
            synthetic LiDAR every 0.33). Narrower returns (a plate partly hidden from the LiDAR,
            as a truck's plate behind a nearer car's mirror on PandaSet-002 keyframe 10) keep the
            plate-size bound.
        lateral_steps: firing spacings between a plate's side and its outermost bright return
            (1: the next firing missed the plate; 1.5, the default, leaves every synthetic plate
            pixel the 1-spacing bound left sharp blurred, see the README).
    """

    enabled: bool = True
    min_intensity: float = 200.0
    face_depth_m: float = 0.3
    range_spread_rad: float = 0.0035
    margin_m: float = 0.05
    lateral_from_returns: bool = True
    lateral_steps: float = 1.5

    def __post_init__(self) -> None:
        for name in (
            "min_intensity",
            "face_depth_m",
            "range_spread_rad",
            "margin_m",
            "lateral_steps",
        ):
            value = getattr(self, name)
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"{name}: must be a finite number >= 0, got {value!r}")


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
    bright = np.asarray(intensity) >= config.min_intensity
    vehicle = np.isin(boxes.class_name, geometric.plate_classes) if n else np.zeros(0, bool)
    if not (vehicle.any() and bright.any()):
        return out
    boxes = boxes[vehicle]
    pts = np.asarray(points_global_m, dtype=np.float64)[bright]
    yaw = boxes.yaw_rad
    cos, sin = np.cos(yaw)[:, None], np.sin(yaw)[:, None]
    dx = pts[None, :, 0] - boxes.center_m[:, 0:1]
    dy = pts[None, :, 1] - boxes.center_m[:, 1:2]
    forward = cos * dx + sin * dy  # (N, B) along the box's length
    lateral = -sin * dx + cos * dy  # (N, B) to the box's left
    height = pts[None, :, 2] - (boxes.center_m[:, 2:3] - 0.5 * boxes.size_wlh_m[:, 2:3])
    half_len = 0.5 * boxes.size_wlh_m[:, 1:2]
    plate_w, plate_h = geometric.plate_envelope_m
    plate_min_w = float(np.min(np.asarray(geometric.plate_sizes_m)[:, 0]))
    band_half_width = np.minimum(0.5 * plate_w, 0.4 * boxes.size_wlh_m[:, 0]) + half_len[
        :, 0
    ] * np.sin(np.radians(geometric.yaw_sigma_deg))
    band_height = (geometric.front_plate_height_m, geometric.rear_plate_height_m)
    spread = config.range_spread_rad * np.linalg.norm(
        boxes.center_m - np.asarray(sensor_global_m, dtype=np.float64)[None, :], axis=1
    )
    grow = config.margin_m + spread
    for face, sign in ((0, 1.0), (1, -1.0)):
        lo, hi = band_height[face]
        on = (
            (np.abs(sign * forward - half_len) <= config.face_depth_m)
            & (np.abs(lateral) <= band_half_width[:, None])
            & (height >= lo - 0.5 * plate_h)
            & (height <= hi + 0.5 * plate_h)
        )
        found = on.any(axis=1)
        y_lo = np.where(on, lateral, np.inf).min(axis=1)
        y_hi = np.where(on, lateral, -np.inf).max(axis=1)
        z_lo = np.where(on, height, np.inf).min(axis=1)
        z_hi = np.where(on, height, -np.inf).max(axis=1)
        inward = half_len - sign * forward
        d_lo = np.where(on, inward, np.inf).min(axis=1)
        d_hi = np.where(on, inward, -np.inf).max(axis=1)
        # Returns spread wider or higher than a plate (a beam's footprint and range error
        # allowed) are not one plate: keep the whole band.
        one_plate = (
            found & (y_hi - y_lo <= plate_w + 2 * grow) & (z_hi - z_lo <= plate_h + 2 * grow)
        )
        lat_lo, lat_hi = y_hi - plate_w - grow, y_lo + plate_w + grow
        if config.lateral_from_returns:
            # The firings' spacing on the plate, measured: the widest lateral gap between its
            # neighbouring bright returns (no less than the configured spacing); a plate's side
            # lies within a spacing of the outermost return that hit it (the next firing missed).
            ordered = np.sort(np.where(on, lateral, np.inf), axis=1)
            with np.errstate(invalid="ignore"):  # inf - inf past the face's last return
                gaps = np.diff(ordered, axis=1)
            gaps = np.where(np.isfinite(gaps), gaps, 0.0)
            step = np.maximum(spread, gaps.max(axis=1, initial=0.0))
            spans = (on.sum(axis=1) >= 2) & (y_hi - y_lo >= plate_min_w - 2 * step)
            reach = config.lateral_steps * step + config.margin_m
            lat_lo = np.where(spans, np.maximum(lat_lo, y_lo - reach), lat_lo)
            lat_hi = np.where(spans, np.minimum(lat_hi, y_hi + reach), lat_hi)
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
        out[np.flatnonzero(vehicle)[one_plate], face] = bound[one_plate]
    return out


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
