"""Confidence of a QA record: how sure the evidence behind its answer is, in [0, 1].

A question is as sure as its weakest part, so a record's confidence is the minimum of

- per region (subject), the evidence that the object exists as labelled, read from the
  attributes (``attributes.parquet``) and the camera views (``visibility.parquet``):

  ``track``     the track's length (``full_track_frames`` frames or more: 1) times its continuity
                (frames present over the frames it spans);
  ``score``     the track's mean detection score, linear from ``score_floor`` (0) to
                ``score_full`` (0.7: 1);
  ``lidar``     LiDAR returns in the box at the keyframe: ``1 - exp(-points / lidar_points_scale)``;
  ``mask``      the best mask score of the views that show it at the keyframe, over
                ``mask_score_full`` (the segmenter's own measure of how well the mask fits the object
                and how much of it is unoccluded);
  ``observed``  that the tracker saw the object at the keyframe: 1 where it did, otherwise
                ``0.5 ** (gap / fill_gap_half)`` of the length of the gap the refine stage
                filled in around it (``attributes.filled_gap``): a keyframe or two missed is an
                occlusion, a long gap is the smoother's guess across a coasting track;
  ``class``     class stability: the share of the track's frames with its most frequent class;
  ``size``      how well the box's size fits its class: a box larger than its class's typical
                size (``detectors.class_priors``) in any dimension is more likely something else
                (a facade or hedge cut at the detector's height limit, two objects merged), while
                a smaller one may be partly occluded: ``exp(-0.5 * sum_d (e_d / size_tolerance)^2)``
                over width, length and height of the excess ``e_d = max(0, ln(size_d /
                typical_d))``;
  ``overlap``   that no other object stands where it stands: one minus the track's mean share of
                its bird's-eye footprint inside other boxes of the same frame (two solid objects
                cannot overlap; a box mostly inside another is a fragment of it, e.g. a car's rear
                detected as a motorcycle);
  ``velocity``  motion answers only: agreement of the track's velocity with the displacement of
                its boxes, ``exp(-(residual / velocity_scale_mps)^2)`` of the mean residual;
  ``heading``   heading answers only: the box's heading against its track's neighbouring frames
                (a heading reported backwards differs from both by about 180 degrees): 1 up to
                45 degrees of mean difference, 0 from 135 degrees; for a track that never moves
                (every row below ``static_speed_mps``) at most ``static_heading``: a still box's
                outline gives its axis, not which end is the front (a pedestrian's or a cone's not
                even that), and the cues that pick the front (roof, traffic flow) are right about
                as often as not;

- the answer's margin to its nearest decision boundary (a bin edge, the left/right split, a
  tolerance, a threshold), measured for every question type the same way: the answer is
  re-derived ``samples`` times from attributes whose boxes are perturbed by the error model
  (position, size, heading and velocity errors of a good detector, growing with range), and the
  margin is the share of re-derivations that give an answer agreeing with it within the benchmark
  tolerances (exactly, for discrete answers). An answer on a bin edge scores about 0.5, one far
  from every boundary 1. A count's margin is at most ``set_completeness``: it is right only if no
  object of its group was missed, which the detected objects' evidence cannot show.

Every part is an array over all rows of the clip or all candidates of a question type at once.
The perturbations are drawn per attribute row from a hash of (seed, clip, the row's frame and box
centre), so a candidate's margin depends neither on which other candidates are computed with it
nor on how tracks are numbered, and ``check-qa`` re-derives it from ``attributes.parquet`` alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from autolabel.attributes import (
    EgoShape,
    ObjectAttributes,
    bev_corners,
    sidedness_all_vertices,
)

#: Quantities whose answer rests on the subject's motion (velocity consistency applies).
MOTION_QUANTITIES = frozenset(
    {
        "region_speed", "future_agent_speed", "future_position", "region_heading",
        "motion_state", "speed_trend", "turn_direction", "lane_change", "range_trend",
        "comes_within", "count_crossing", "passes_first", "object_caption", "scene_caption",
    }
)  # fmt: skip
#: Quantities whose answer claims a set is complete (a count: every object of a group found).
COUNT_QUANTITIES = frozenset({"count_visible", "count_crossing"})
#: Quantities whose answer is the subject's heading (heading stability applies).
HEADING_QUANTITIES = frozenset({"region_heading"})
#: Region evidence parts, in the order records list them.
REGION_PARTS = (
    "track", "score", "observed", "lidar", "mask", "class", "size", "overlap", "velocity",
    "heading",
)  # fmt: skip
#: Decimals of the stored confidence and its parts.
CONFIDENCE_DECIMALS = 3


@dataclass(frozen=True)
class ConfidenceModel:
    """How evidence becomes confidence (validated; errors name the key).

    Attributes:
        seed: seed of the perturbations (with the clip name), so ``check-qa`` draws the same.
        samples: perturbed re-derivations of each answer (the margin's resolution is 1/samples).
        full_track_frames: a track with at least this many frames has full length evidence.
        score_floor, score_full: mean detection score mapped linearly to 0 .. 1 between these
            (``score_full`` 0.7, chosen with the gate on synthetic validation seeds 11 and 12:
            a refined track's score is its mean detection score discounted for shortness, and
            many true pedestrians and cones score 0.4-0.7 while the confident false positives
            score higher; the other parts judge those).
        lidar_points_scale: LiDAR evidence ``1 - exp(-points / scale)``; views without a count
            (-1) are not judged on it.
        mask_score_full: mask evidence is ``min(1, best mask score / mask_score_full)``.
        fill_gap_half: observed evidence halves with every ``fill_gap_half`` keyframes of the
            filled gap a row lies in (2: a single missed keyframe passes the default gate, a gap
            of two or more does not).
        velocity_scale_mps: velocity evidence ``exp(-(residual / scale)^2)``, m/s.
        position_sigma_m, position_sigma_per_m: error model of a box centre per horizontal axis:
            ``sigma + sigma_per_m * distance``, metres.
        height_sigma_m: vertical centre error, metres.
        size_sigma_frac: std of the log of each size factor.
        yaw_sigma_rad: heading error, radians.
        velocity_sigma_mps: velocity error per axis, m/s.
        set_completeness: the margin of a count at most: a count is right only if no object of
            its group was missed, which no evidence of the detected objects can show (on the
            synthetic validation clips counts agree with ground truth 60-75 % of the time, even
            with ground-truth replay plus noise), so by default counts stay below the gate.
    """

    seed: int = 0
    samples: int = 16
    full_track_frames: int = 10
    score_floor: float = 0.0
    score_full: float = 0.7
    lidar_points_scale: float = 8.0
    mask_score_full: float = 0.8
    fill_gap_half: float = 2.0
    velocity_scale_mps: float = 1.5
    size_tolerance: float = 0.1
    static_speed_mps: float = 0.5
    static_heading: float = 0.5
    position_sigma_m: float = 0.15
    position_sigma_per_m: float = 0.004
    height_sigma_m: float = 0.1
    size_sigma_frac: float = 0.12
    yaw_sigma_rad: float = 0.15
    velocity_sigma_mps: float = 0.25
    set_completeness: float = 0.4

    def __post_init__(self) -> None:
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed: must be an integer >= 0, got {self.seed!r}")
        if isinstance(self.samples, bool) or not isinstance(self.samples, int) or self.samples < 1:
            raise ValueError(f"samples: must be an integer >= 1, got {self.samples!r}")
        if self.full_track_frames < 1:
            raise ValueError(f"full_track_frames: must be >= 1, got {self.full_track_frames!r}")
        if not 0 <= self.static_heading <= 1:
            raise ValueError(f"static_heading: must be in [0, 1], got {self.static_heading!r}")
        if not 0 <= self.score_floor < self.score_full:
            raise ValueError("score_floor: must be >= 0 and below score_full")
        for name in (
            "lidar_points_scale", "mask_score_full", "velocity_scale_mps", "size_tolerance",
            "fill_gap_half",
        ):  # fmt: skip
            v = getattr(self, name)
            if not (np.isfinite(v) and v > 0):
                raise ValueError(f"{name}: must be a finite number > 0, got {v!r}")
        for name in (
            "position_sigma_m", "position_sigma_per_m", "height_sigma_m", "size_sigma_frac",
            "yaw_sigma_rad", "velocity_sigma_mps", "set_completeness", "static_speed_mps",
        ):  # fmt: skip
            v = getattr(self, name)
            if not (np.isfinite(v) and v >= 0):
                raise ValueError(f"{name}: must be a finite number >= 0, got {v!r}")


# ------------------------------------------------------------------------------ view evidence


@dataclass(frozen=True)
class ViewEvidence:
    """Per camera view (frame x camera x track): what the images and LiDAR say, all (V,).

    Attributes:
        frame_index, track_id: the view's frame and track.
        keep: the view passed the visibility filter.
        mask_score: the segmenter's mask score.
        lidar_points: LiDAR points in the 3D box (-1: not counted).
    """

    frame_index: np.ndarray
    track_id: np.ndarray
    keep: np.ndarray
    mask_score: np.ndarray
    lidar_points: np.ndarray

    @classmethod
    def from_table(cls, table: Mapping[str, Any]) -> ViewEvidence:
        """From columns named as ``visibility.parquet``'s (a dict of arrays or a pyarrow table)."""

        def col(name: str, dtype: Any) -> np.ndarray:
            values = table[name]
            if hasattr(values, "to_numpy"):
                values = values.to_numpy()
            return np.asarray(values, dtype=dtype)

        return cls(
            frame_index=col("frame_index", np.int64),
            track_id=col("track_id", np.int64),
            keep=col("keep", bool),
            mask_score=col("mask_score", np.float64),
            lidar_points=col("lidar_points", np.int64),
        )

    @classmethod
    def read_parquet(cls, path: Any) -> ViewEvidence:
        """From a run's ``<clip>/visibility.parquet``."""
        import pyarrow.parquet as pq

        columns = ["frame_index", "track_id", "keep", "mask_score", "lidar_points"]
        return cls.from_table(pq.read_table(path, columns=columns))


def _row_max(attrs: ObjectAttributes, views: ViewEvidence, values: np.ndarray, fill: float):
    """(N,) per attribute row: the largest value over its kept views, ``fill`` where none."""
    out = np.full(len(attrs.track_id), fill, dtype=np.float64)
    if len(views.track_id) == 0:
        return out
    rows = attrs.row_of(views.frame_index, views.track_id)
    ok = views.keep & (rows >= 0) & np.isfinite(values)
    best = np.full(len(out), -np.inf)
    np.maximum.at(best, rows[ok], values[ok])
    return np.where(np.isfinite(best), best, out)


# ------------------------------------------------------------------------------ row evidence


def _track_index(attrs: ObjectAttributes) -> tuple[np.ndarray, np.ndarray]:
    """(unique track ids, (N,) index of each row's track)."""
    return np.unique(np.asarray(attrs.track_id, dtype=np.int64), return_inverse=True)


def track_evidence(attrs: ObjectAttributes, model: ConfidenceModel) -> np.ndarray:
    """(N,) per row: its track's length (up to ``full_track_frames``) times its continuity."""
    _, inv = _track_index(attrs)
    frames = np.asarray(attrs.frame_index, dtype=np.int64)
    n_tracks = inv.max() + 1 if len(inv) else 0
    length = np.bincount(inv, minlength=n_tracks)
    first = np.full(n_tracks, np.iinfo(np.int64).max)
    last = np.full(n_tracks, -1)
    np.minimum.at(first, inv, frames)
    np.maximum.at(last, inv, frames)
    # Frames the track spans, counting only frames the clip's attributes have (keyframes).
    clip_frames = np.unique(frames)
    span = np.searchsorted(clip_frames, last, "right") - np.searchsorted(clip_frames, first)
    continuity = length / np.maximum(span, 1)
    per_track = np.minimum(1.0, length / model.full_track_frames) * continuity
    return per_track[inv] if len(inv) else np.zeros(0)


def score_evidence(attrs: ObjectAttributes, model: ConfidenceModel) -> np.ndarray:
    """(N,) per row: its track's mean detection score, mapped linearly to [0, 1]."""
    _, inv = _track_index(attrs)
    if len(inv) == 0:
        return np.zeros(0)
    score = np.asarray(attrs.score, dtype=np.float64)
    mean = np.bincount(inv, weights=score) / np.bincount(inv)
    scaled = (mean - model.score_floor) / (model.score_full - model.score_floor)
    return np.clip(scaled, 0.0, 1.0)[inv]


def observed_evidence(attrs: ObjectAttributes, model: ConfidenceModel) -> np.ndarray:
    """(N,) per row: 1 where the tracker observed it, ``0.5 ** (gap / fill_gap_half)`` inside a
    gap of ``gap`` keyframes that the refine stage filled in."""
    gap = np.asarray(attrs.filled_gap, dtype=np.float64)
    return np.where(gap > 0, 0.5 ** (gap / model.fill_gap_half), 1.0)


def class_evidence(attrs: ObjectAttributes) -> np.ndarray:
    """(N,) per row: the share of its track's rows that have the track's most frequent class."""
    _, inv = _track_index(attrs)
    if len(inv) == 0:
        return np.zeros(0)
    labels = np.asarray(attrs.label, dtype=np.int64)
    n_labels = int(labels.max()) + 1
    counts = np.bincount(inv * n_labels + labels, minlength=(inv.max() + 1) * n_labels)
    counts = counts.reshape(-1, n_labels)
    return (counts.max(axis=1) / counts.sum(axis=1))[inv]


def size_evidence(attrs: ObjectAttributes, model: ConfidenceModel) -> np.ndarray:
    """(N,) per row: how well its track's size fits its class (see the module docstring).

    The track's size is the geometric mean of its boxes' sizes (per-box size errors average out);
    only a size larger than the class's typical size (nuScenes means, [w, l, h] as the attributes
    store them; a barrier's long side is its width in both) counts against it: occlusion and range
    hide parts of real objects, but nothing makes an object look larger than it is."""
    from detectors.class_priors import TYPICAL_SIZE_WLH_M

    _, inv = _track_index(attrs)
    if len(inv) == 0:
        return np.zeros(0)
    size = np.column_stack(
        [np.asarray(attrs.width_m), np.asarray(attrs.length_m), np.asarray(attrs.height_m)]
    ).astype(np.float64)
    typical = TYPICAL_SIZE_WLH_M[np.asarray(attrs.label, dtype=np.int64)]
    log_ratio = np.log(np.maximum(size, 1e-3) / typical)
    log_ratio = np.where(np.isfinite(log_ratio), log_ratio, 0.0)
    count = np.bincount(inv)
    mean = np.stack([np.bincount(inv, weights=log_ratio[:, d]) for d in range(3)], axis=1)
    excess = np.maximum(mean / count[:, None], 0.0)[inv]
    return np.exp(-0.5 * np.sum((excess / model.size_tolerance) ** 2, axis=1))


def footprint_overlap_share(attrs: ObjectAttributes) -> np.ndarray:
    """(N,) per row: the largest share of its bird's-eye footprint that lies inside another box
    of the same frame (0: free; shapely's polygon intersection over the pairs its STRtree finds
    touching)."""
    import shapely

    n = len(attrs.track_id)
    share = np.zeros(n)
    if n < 2:
        return share
    x, y = np.asarray(attrs.x_ego_m, np.float64), np.asarray(attrs.y_ego_m, np.float64)
    length, width = np.asarray(attrs.length_m, np.float64), np.asarray(attrs.width_m, np.float64)
    frame = np.asarray(attrs.frame_index, dtype=np.float64)
    corners = bev_corners(x, y, np.asarray(attrs.yaw_ego_rad, np.float64), length, width)
    polygons = shapely.polygons(corners)
    # The tree is searched with each frame's boxes moved along x past every other frame's, so
    # that only boxes of one frame meet; areas are taken on the boxes where they are.
    spacing = 2.0 * (np.abs(corners).max() + 1.0)
    moved = shapely.polygons(corners + np.stack([frame * spacing, 0 * frame], axis=1)[:, None])
    a, b = shapely.STRtree(moved).query(moved, predicate="intersects")
    a, b = a[a != b], b[a != b]
    if len(a) == 0:
        return share
    inter = shapely.area(shapely.intersection(polygons[a], polygons[b]))
    own = np.maximum(length * width, 1e-9)
    np.maximum.at(share, a, np.clip(inter / own[a], 0.0, 1.0))
    return share


def overlap_evidence(attrs: ObjectAttributes) -> np.ndarray:
    """(N,) per row: one minus its track's mean :func:`footprint_overlap_share`."""
    _, inv = _track_index(attrs)
    if len(inv) == 0:
        return np.zeros(0)
    mean = np.bincount(inv, weights=footprint_overlap_share(attrs)) / np.bincount(inv)
    return 1.0 - mean[inv]


def velocity_evidence(attrs: ObjectAttributes, model: ConfidenceModel) -> np.ndarray:
    """(N,) per row: how well its track's velocities agree with its boxes' displacement.

    Positions and velocities are taken to the clip frame; the displacement velocity of a row is
    the central difference over its track's neighbouring rows (one-sided at the ends). The
    evidence is ``exp(-(r / velocity_scale_mps)^2)`` of the track's mean residual r; a track of one
    row, or without velocities, has no evidence against it (1).
    """
    n = len(attrs.track_id)
    if n == 0:
        return np.zeros(0)
    _, inv = _track_index(attrs)
    order = np.lexsort((np.asarray(attrs.time_s), inv))
    yaw = np.asarray(attrs.ego_yaw_clip_rad)
    c, s = np.cos(yaw), np.sin(yaw)
    x, y = np.asarray(attrs.x_ego_m), np.asarray(attrs.y_ego_m)
    px = np.asarray(attrs.ego_x_clip_m) + c * x - s * y
    py = np.asarray(attrs.ego_y_clip_m) + s * x + c * y
    vx, vy = np.asarray(attrs.vx_ego_mps), np.asarray(attrs.vy_ego_mps)
    vcx, vcy = c * vx - s * vy, s * vx + c * vy
    t = np.asarray(attrs.time_s, dtype=np.float64)
    o = order
    same_prev = np.r_[False, inv[o][1:] == inv[o][:-1]]
    same_next = np.r_[inv[o][:-1] == inv[o][1:], False]
    prev = np.where(same_prev, np.r_[0, np.arange(n - 1)], np.arange(n))
    nxt = np.where(same_next, np.r_[np.arange(1, n), n - 1], np.arange(n))
    dt = t[o][nxt] - t[o][prev]
    with np.errstate(invalid="ignore", divide="ignore"):
        fdx = (px[o][nxt] - px[o][prev]) / dt
        fdy = (py[o][nxt] - py[o][prev]) / dt
    residual = np.hypot(fdx - vcx[o], fdy - vcy[o])
    ok = np.isfinite(residual) & (dt > 0)
    track = inv[o]
    total = np.bincount(track[ok], weights=residual[ok], minlength=inv.max() + 1)
    count = np.bincount(track[ok], minlength=inv.max() + 1)
    mean = np.where(count > 0, total / np.maximum(count, 1), 0.0)
    return np.exp(-((mean / model.velocity_scale_mps) ** 2))[inv]


def heading_evidence(attrs: ObjectAttributes, model: ConfidenceModel | None = None) -> np.ndarray:
    """(N,) per row: agreement of its box heading with the headings of the same track in the
    previous and next rows (clip frame): ``clip((135 - d) / 90, 0, 1)`` of the mean absolute
    difference d in degrees; a row without neighbours has no evidence against it (1). With a
    ``model``, a track that never moves gets at most ``model.static_heading``."""
    n = len(attrs.track_id)
    if n == 0:
        return np.zeros(0)
    _, inv = _track_index(attrs)
    o = np.lexsort((np.asarray(attrs.time_s), inv))
    yaw = (np.asarray(attrs.yaw_ego_rad) + np.asarray(attrs.ego_yaw_clip_rad))[o]
    track = inv[o]
    diff = np.abs(np.angle(np.exp(1j * (yaw[1:] - yaw[:-1]))))  # between consecutive rows
    same = track[1:] == track[:-1]
    to_prev = np.r_[np.nan, np.where(same, diff, np.nan)]
    to_next = np.r_[np.where(same, diff, np.nan), np.nan]
    both = np.stack([to_prev, to_next])
    count = np.isfinite(both).sum(axis=0)
    mean = np.degrees(np.where(count > 0, np.nansum(both, axis=0) / np.maximum(count, 1), 0.0))
    out = np.empty(n)
    out[o] = np.clip((135.0 - mean) / 90.0, 0.0, 1.0)
    if model is not None:
        speed = np.nan_to_num(np.asarray(attrs.speed_mps, dtype=np.float64), nan=0.0)
        fastest = np.zeros(inv.max() + 1)
        np.maximum.at(fastest, inv, speed)
        static = fastest[inv] < model.static_speed_mps
        out = np.where(static, np.minimum(out, model.static_heading), out)
    return out


@dataclass(frozen=True)
class RowEvidence:
    """Evidence parts per attribute row (see the module docstring), each (N,) in [0, 1]."""

    parts: dict[str, np.ndarray]

    def of(
        self, rows: np.ndarray, motion: bool, heading: bool = False
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """(min over parts, parts) at ``rows`` (any shape; -1: no region, evidence 1); the
        velocity part only for ``motion`` answers, the heading part only for ``heading`` ones."""
        only = {"velocity": motion, "heading": heading}
        names = [p for p in REGION_PARTS if p in self.parts and only.get(p, True)]
        safe = np.maximum(rows, 0)
        parts = {p: np.where(rows >= 0, self.parts[p][safe], 1.0) for p in names}
        low = np.minimum.reduce([parts[p] for p in names]) if names else np.ones(rows.shape)
        return low, parts


def row_evidence(
    attrs: ObjectAttributes, views: ViewEvidence | None, model: ConfidenceModel
) -> RowEvidence:
    """Every evidence part of every attribute row; without ``views`` only the attribute parts."""
    parts = {
        "track": track_evidence(attrs, model),
        "score": score_evidence(attrs, model),
        "observed": observed_evidence(attrs, model),
        "class": class_evidence(attrs),
        "size": size_evidence(attrs, model),
        "overlap": overlap_evidence(attrs),
        "velocity": velocity_evidence(attrs, model),
        "heading": heading_evidence(attrs, model),
    }
    if views is not None:
        points = _row_max(attrs, views, views.lidar_points.astype(np.float64), -1.0)
        parts["lidar"] = np.where(
            points >= 0, 1.0 - np.exp(-np.maximum(points, 0) / model.lidar_points_scale), 1.0
        )
        mask = _row_max(attrs, views, views.mask_score, 0.0)
        parts["mask"] = np.clip(mask / model.mask_score_full, 0.0, 1.0)
    return RowEvidence(parts)


# ------------------------------------------------------------------------------ answer margin


def _clock_of(bearing: np.ndarray) -> np.ndarray:
    from autolabel.attributes import _clock

    return _clock(bearing)


#: Standard normal draws per row and perturbation: position (3), size (3), heading, velocity (2).
DRAWS_PER_ROW = 9


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on uint64 arrays (wrapping arithmetic): a well-mixed hash."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def row_normals(attrs: ObjectAttributes, seed: int, clip: str, samples: int) -> np.ndarray:
    """(samples, N, DRAWS_PER_ROW) standard normals keyed by each row's content.

    Each row's draws come from a hash of (seed, clip, frame, its box centre to the millimetre,
    draw index), not from its position in the table: the same box gets the same errors whatever
    its track is numbered, and ``check-qa`` draws them again from ``attributes.parquet``.
    """
    import zlib

    n = len(attrs.track_id)
    key = np.full(n, (int(seed) << 32) ^ zlib.crc32(clip.encode("utf-8")), dtype=np.uint64)
    for column in (
        np.asarray(attrs.frame_index, dtype=np.int64),
        np.round(np.asarray(attrs.x_ego_m) * 1000.0).astype(np.int64),
        np.round(np.asarray(attrs.y_ego_m) * 1000.0).astype(np.int64),
    ):
        key = _splitmix64(key ^ column.astype(np.uint64))
    draw = np.arange(samples * DRAWS_PER_ROW * 2, dtype=np.uint64)
    bits = _splitmix64(key[None, :] ^ _splitmix64(draw)[:, None])  # (2 * S * D, N)
    u = ((bits >> np.uint64(11)).astype(np.float64) + 0.5) / float(1 << 53)  # (0, 1)
    u1, u2 = u[0::2], u[1::2]
    normal = np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)  # Box-Muller
    return normal.reshape(samples, DRAWS_PER_ROW, n).transpose(0, 2, 1)


def perturbed_attributes(
    attrs: ObjectAttributes,
    model: ConfidenceModel,
    normals: np.ndarray,
    ego: EgoShape | None = None,
) -> ObjectAttributes:
    """The attributes with every box moved, resized, turned and sped up by the error model.

    ``normals`` (N, DRAWS_PER_ROW) are the row's standard normal draws (:func:`row_normals`).
    Recomputes every column that depends on the box (distances, bearings, clocks, sidedness,
    volumes, speeds, future states); the ego's own columns are unchanged. Rows keep their order,
    so ``row_of`` is unchanged.
    """
    ego = ego or EgoShape()
    n = len(attrs.track_id)
    pos, size, yaw_n, vel = normals[:, 0:3], normals[:, 3:6], normals[:, 6], normals[:, 7:9]
    dist0 = np.asarray(attrs.distance_m)
    sigma = model.position_sigma_m + model.position_sigma_per_m * dist0
    x = attrs.x_ego_m + sigma * pos[:, 0]
    y = attrs.y_ego_m + sigma * pos[:, 1]
    z = attrs.z_ego_m + model.height_sigma_m * pos[:, 2]
    factor = np.exp(model.size_sigma_frac * size)
    w, length, h = (
        attrs.width_m * factor[:, 0],
        attrs.length_m * factor[:, 1],
        attrs.height_m * factor[:, 2],
    )
    yaw = np.angle(np.exp(1j * (attrs.yaw_ego_rad + model.yaw_sigma_rad * yaw_n)))
    vx = attrs.vx_ego_mps + model.velocity_sigma_mps * vel[:, 0]
    vy = attrs.vy_ego_mps + model.velocity_sigma_mps * vel[:, 1]
    distance = np.hypot(x, y)
    bearing = np.degrees(np.arctan2(y, x))
    bearing = np.where(bearing <= -180.0, 180.0, bearing)
    corners = bev_corners(x, y, yaw, length, w)
    ego_corners = np.broadcast_to(ego.bev_corners(), (n, 4, 2))
    is_left, is_right, is_front, is_behind = sidedness_all_vertices(
        ego_corners, corners, np.array([1.0, 0.0])
    )
    volume = w * length * h
    with np.errstate(invalid="ignore", divide="ignore"):
        ego_volume = np.nanmedian(attrs.volume_m3 / attrs.volume_ratio_to_ego) if n else 1.0
    speed = np.hypot(vx, vy)
    fut_frame = np.asarray(attrs.future_frame_index, dtype=np.int64)
    present = np.asarray(attrs.future_present, dtype=bool)
    tracks = np.broadcast_to(np.asarray(attrs.track_id)[:, None], fut_frame.shape)
    fut_row = np.where(present, attrs.row_of(np.maximum(fut_frame, 0), tracks), -1)
    ok = present & (fut_row >= 0)
    safe = np.maximum(fut_row, 0)
    future_bearing = np.where(ok, bearing[safe], np.nan)
    return dataclasses.replace(
        attrs,
        x_ego_m=x,
        y_ego_m=y,
        z_ego_m=z,
        yaw_ego_rad=yaw,
        distance_m=distance,
        distance_3d_m=np.sqrt(x**2 + y**2 + z**2),
        bearing_deg=bearing,
        clock=_clock_of(bearing),
        is_left=is_left,
        is_right=is_right,
        is_front=is_front,
        is_behind=is_behind,
        relative_heading_deg=np.degrees(yaw),
        width_m=w,
        length_m=length,
        height_m=h,
        footprint_m2=w * length,
        volume_m3=volume,
        volume_ratio_to_ego=volume / ego_volume,
        is_larger_than_ego=volume > ego_volume,
        vx_ego_mps=vx,
        vy_ego_mps=vy,
        speed_mps=speed,
        future_distance_m=np.where(ok, distance[safe], np.nan),
        future_bearing_deg=future_bearing,
        future_clock=np.where(ok, _clock_of(np.nan_to_num(future_bearing)), 0).astype(
            np.asarray(attrs.future_clock).dtype
        ),
        future_speed_mps=np.where(ok, speed[safe], np.nan),
    )


def perturbation_set(
    attrs: ObjectAttributes,
    model: ConfidenceModel,
    clip: str,
    ego: EgoShape | None = None,
) -> list[ObjectAttributes]:
    """``model.samples`` perturbed copies of a clip's attributes (draws keyed by ``model.seed``,
    the clip name and each row's box, :func:`row_normals`)."""
    normals = row_normals(attrs, model.seed, clip, model.samples)
    return [perturbed_attributes(attrs, model, z, ego) for z in normals]


def _type_answer_kind(qt: Any) -> str | None:
    """The benchmark answer kind of a type's structured answer (None: no answer key)."""
    from autolabel.benchmark.scoring import answer_kind

    probe = {"kind": qt.kind, "choices": [{}] if qt.choices else None, "answer_values": {}}
    try:
        return answer_kind(probe, qt)
    except ValueError:
        return None


def answers_agree(qt: Any, base: Any, other: Any) -> np.ndarray:
    """(N,) bool: ``other`` (a ``QuantityResult`` of the same candidates) is valid and gives the
    answer ``base`` gives: discrete parts exactly, numeric parts within the benchmark tolerance
    of the type's answer kind."""
    from autolabel.benchmark.scoring import NUMERIC_DIMENSIONS

    ok = np.asarray(other.valid, dtype=bool).copy()
    if base.outcome is not None:
        ok &= np.asarray(base.outcome, dtype=object) == np.asarray(other.outcome, dtype=object)
    for name, keys in base.facets.items():
        ok &= np.asarray(keys, dtype=object) == np.asarray(other.facets[name], dtype=object)
    for name, keys in base.item_facets.items():
        same = np.asarray(keys, dtype=object) == np.asarray(other.item_facets[name], dtype=object)
        ok &= same.reshape(len(ok), -1).all(axis=1)
    for name, lists in base.lists.items():
        ok &= np.array([a == b for a, b in zip(lists, other.lists[name], strict=True)], bool)
    kind = _type_answer_kind(qt)
    if kind in NUMERIC_DIMENSIONS:
        for name, success in NUMERIC_DIMENSIONS[kind]:
            if name in base.values:
                ok &= success(other.values[name], base.values[name])
    elif kind in ("clock", "count") and kind in base.values:
        ok &= np.asarray(base.values[kind]) == np.asarray(other.values[kind])
    return ok


def answer_margin(
    qt: Any,
    base: Any,
    make_input: Any,
    perturbed: Sequence[ObjectAttributes],
    model: ConfidenceModel | None = None,
) -> np.ndarray:
    """(N,) share of perturbed re-derivations whose answer agrees with ``base`` (for a count, at
    most ``model.set_completeness``).

    Args:
        qt: the question type.
        base: its ``QuantityResult`` on the unperturbed attributes.
        make_input: ``attrs -> QuantityInput`` of the same candidates on other attributes.
        perturbed: the perturbed attributes (:func:`perturbation_set`).
    """
    n = len(base.valid)
    agree = np.zeros(n)
    for attrs in perturbed:
        agree += answers_agree(qt, base, qt.quantity(make_input(attrs)))
    margin = agree / len(perturbed) if perturbed else np.ones(n)
    if model is not None and qt.quantity.name in COUNT_QUANTITIES:
        margin = np.minimum(margin, model.set_completeness)
    return margin


def rounded(x: np.ndarray | float) -> np.ndarray | float:
    """Confidence values as records store them (3 decimals, never -0.0)."""
    return np.round(np.asarray(x, dtype=np.float64), CONFIDENCE_DECIMALS) + 0.0
