"""Track-centric refinement over a whole clip (an auto-labeler sees past and future).

Per track, over every keyframe of its observed span (:mod:`autolabel.refine.track_table`):

1. duplicates: a track that follows another one's object under a runner-up class votes for
   that track's class and goes; one whose boxes sit inside a heavier track's larger boxes (a
   motorcycle's box on a car's cluster) goes without a vote (:mod:`autolabel.refine.duplicates`);
2. fragments: tracks of one object split by the online tracker (no keyframe in common, classes
   of one group, each where the other's trajectory puts it) are joined
   (:mod:`autolabel.refine.joining`);
3. class: the score-weighted vote of its boxes (and its duplicates'), then the point evidence of
   :mod:`autolabel.refine.classify` where LiDAR returns were gathered (a large-vehicle track
   with a car's roof becomes a car, of a car's size against its boxes' near faces); clutter
   (vegetation, facades, returns only high above the ground, a static truck without a side
   panel: a fence's rail over its posts) and tracks seen fewer than
   ``min_observations`` times are removed;
4. trajectory: a forward Kalman filter and a backward RTS pass over the span
   (:mod:`autolabel.refine.smoothing`), fusing the detector's velocity where it gives one, so
   centres and velocities are lag-free and keyframes missed inside the span are filled;
   nothing is added outside it but what step 9 finds;
5. static or moving: slow and not displaced tracks are static: one centre (the median of its
   detections, or of its accumulated returns) and velocity zero;
6. heading: a mover heads where it goes where it is fast enough; elsewhere the detector's
   heading is turned by pi to agree with the nearest direction of travel; a static track has one
   heading (axial mean of its boxes', or of its accumulated returns' outline), pointed by the
   traffic beside it (not on or against its own footprint; across the centre line the flow
   counts reversed, as parked cars face the traffic of their own side) or by its cabin, so no
   box of a track is flipped against the others;
7. size: one per track (a quantile of its boxes', and at least the extent of its accumulated
   returns), the box's bottom kept on the detected ground;
8. score: the mean score of its boxes, times a term growing with how often it was seen;
9. extension: where LiDAR returns were gathered, each track is carried outwards from its span to
   the keyframes where its box (a static track's one pose; a moving one's at its end velocity,
   for a short time) still holds the returns of the keyframe sweep, at a reduced score
   (:mod:`autolabel.refine.extension`): the detector lost the object, the LiDAR did not;
10. rescoring: where LiDAR returns were gathered, each refined track's score is scaled by the
   evidence of the returns inside its refined boxes (one size and pose per track, unlike the
   detector's boxes), taken from the keyframe returns gathered for step 3
   (:func:`autolabel.refine.classify.rescore_tracks`): walls and fences rank below objects (and,
   on request, two-wheelers hugged by returns: pieces of something larger).

Before step 9, refined bicycle and motorcycle tracks that ride along a refined vehicle (on its
axis, just past its ends, at its velocity) are pieces of it and go
(:func:`autolabel.refine.duplicates.riding_along`); and, where LiDAR returns were gathered, a
moving two-wheeler track whose returns spread as wide as a car's back or front in one surface
is a car seen end-on: it takes a car's footprint behind that face, and goes where the car has
a car track of its own (:mod:`autolabel.refine.end_faces`).

Arrays throughout: the per-track work is grouped reductions and numba kernels over all rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numba
import numpy as np

from autolabel.boxes import Boxes3D
from autolabel.classes import DETECTION_CLASSES
from autolabel.refine.config import RefineConfig
from autolabel.refine.duplicates import duplicate_of, riding_along
from autolabel.refine.joining import join_fragments
from autolabel.refine.smoothing import smooth_tracks
from autolabel.refine.track_table import TrackTable, build_track_table, clip_boxes, frame_sets
from autolabel.refine.traffic_side import resolved_traffic_side
from calib.rotation import wrap_angle

#: Classes that never move: always static, whatever their boxes do.
STATIC_CLASSES = np.isin(np.asarray(DETECTION_CLASSES), ["traffic_cone", "barrier"])
#: Classes whose cabin sits behind the middle of the body (cars: the bonnet outlasts the boot).
CABIN_CLASSES = np.array([DETECTION_CLASSES.index("car")])
CLASS_CAR = DETECTION_CLASSES.index("car")
TWO_WHEELERS = [DETECTION_CLASSES.index(c) for c in ("bicycle", "motorcycle")]
VEHICLES = [
    DETECTION_CLASSES.index(c) for c in ("car", "truck", "bus", "trailer", "construction_vehicle")
]


@dataclass
class RefineSummary:
    """What the refinement did to a clip's tracks (counts of tracks and boxes)."""

    tracks_in: int
    tracks_out: int
    duplicates: int
    too_short: int
    clutter: int
    static: int
    moving: int
    boxes_in: int
    boxes_out: int
    boxes_filled: int
    joined: int = 0
    boxes_extended: int = 0
    riding_along: int = 0
    # The traffic side the flow rule took (1: left-hand traffic) and whether the log's location
    # gave it (``traffic_side: auto``); counts, so that the manifest keeps them.
    left_hand_traffic: int = 0
    traffic_side_from_location: int = 0

    def counts(self) -> dict[str, int]:
        """The stage counts: every field, and ``tracks_rejected`` (in minus out)."""
        return {**vars(self), "tracks_rejected": self.tracks_in - self.tracks_out}


def group_quantile(group: np.ndarray, values: np.ndarray, n_groups: int, q: float) -> np.ndarray:
    """(G, D) per-group ``q`` quantile (lower order statistic) of (N, D) ``values``; NaN where a
    group is empty. ``group``: (N,) group index of each row."""
    values = np.asarray(values, dtype=np.float64)
    squeeze = values.ndim == 1
    values = values[:, None] if squeeze else values
    out = np.full((n_groups, values.shape[1]), np.nan)
    count = np.bincount(group, minlength=n_groups)
    start = np.concatenate([[0], np.cumsum(count)])[:-1]
    has = count > 0
    for d in range(values.shape[1]):  # the few columns of a box, not objects
        order = np.lexsort((values[:, d], group))
        pick = start[has] + np.floor(q * (count[has] - 1)).astype(np.int64)
        out[has, d] = values[order[pick], d]
    return out[:, 0] if squeeze else out


@numba.njit(cache=True)
def _fill_nearest(track_start: np.ndarray, valid: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per track, each row's value from the nearest valid row of the same track (earlier on
    ties); NaN for a track without one."""
    out = np.full(values.shape[0], np.nan)
    for s in range(track_start.shape[0] - 1):
        lo, hi = track_start[s], track_start[s + 1]
        for k in range(lo, hi):
            best, best_d = -1, 1 << 30
            for j in range(lo, hi):
                if valid[j] and abs(j - k) < best_d:
                    best, best_d = j, abs(j - k)
            if best >= 0:
                out[k] = values[best]
    return out


def endpoint_displacement(table: TrackTable, xy_m: np.ndarray, n_end: int) -> np.ndarray:
    """(T,) distance between the median of each track's first ``n_end`` observed centres and the
    median of its last ``n_end`` (half of its observations each when it has fewer than twice as
    many, its first and last when it has two or three; per coordinate, the mean of the two middle
    values for an even count): a track's net travel, robust to the noise of single boxes and to
    one box of something else (a still bicycle's track that took a passing car's piece as its
    last box seven seconds later travels by that box's offset under a mean, not under a median)."""
    obs = np.flatnonzero(table.observed)
    track = table.track_of_row[obs]
    n_obs = np.bincount(track, minlength=table.n_tracks)
    start = np.concatenate([[0], np.cumsum(n_obs)])[:-1]
    rank = np.arange(len(obs)) - start[track]
    k = np.maximum(np.minimum(n_end, n_obs // 2), 1)[track]
    head = rank < k
    tail = rank >= n_obs[track] - k
    ends = []
    for sel in (head, tail):
        grp = track[sel]
        count = np.bincount(grp, minlength=table.n_tracks)
        first = np.concatenate([[0], np.cumsum(count)])[:-1]
        has = count > 0
        lo = first[has] + (count[has] - 1) // 2
        hi = first[has] + count[has] // 2
        mid = np.zeros((table.n_tracks, 2))
        for d in range(2):  # the two coordinates, not objects
            v = xy_m[obs[sel], d]
            order = np.lexsort((v, grp))
            mid[has, d] = 0.5 * (v[order[lo]] + v[order[hi]])
        ends.append(mid)
    return np.linalg.norm(ends[1] - ends[0], axis=1)


def _interpolate_rows(observed: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Rows not observed take the linear interpolation (over row index) of their track's
    observed neighbours; a track's span starts and ends observed, so tracks never mix."""
    rows = np.arange(len(observed))
    known = np.flatnonzero(observed)
    return np.interp(rows, known, values[known])


def _axial_mean_heading(table: TrackTable, yaw: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """(T,) per track, the mean heading of ``yaw`` taken modulo pi, pointed to the side most boxes
    point to (a static object's detector headings are ambiguous by pi)."""
    c2 = table.per_track_sum(weight * np.cos(2 * yaw))
    s2 = table.per_track_sum(weight * np.sin(2 * yaw))
    axis = 0.5 * np.arctan2(s2, c2)
    along = table.per_track_sum(weight * np.cos(yaw - axis[table.track_of_row]))
    return wrap_angle(np.where(along < 0, axis + np.pi, axis))


def traffic_heading(
    xy_m: np.ndarray,
    flow_xy_m: np.ndarray,
    flow_yaw_rad: np.ndarray,
    scale_m: float,
    yaw_rad: np.ndarray | None = None,
    half_lw_m: np.ndarray | None = None,
    traffic_side: str = "none",
    lane_half_width_m: float = 2.0,
) -> np.ndarray:
    """(S,) the direction of the traffic near each of (S, 2) ``xy_m``: the axial mean of the
    headings of moving samples (M, 2) / (M,), weighted by ``exp(-(distance / scale_m)^2 / 2)``, taken
    modulo pi and pointed where most of the weight points. NaN where there is no sample.

    With ``yaw_rad`` (S,) and ``half_lw_m`` (S, 2) (half length, half width, metres) each static
    object's own footprint is known: samples inside it are left out, since they are the object
    itself (a moving track that merged with it, or its own jittering boxes), not the traffic
    beside it.

    Parked vehicles face the traffic of their side of the street; a static box's outline alone
    cannot tell its front from its back. With ``traffic_side`` "right" (traffic keeps right, a
    two-way street) a sample counts turned by pi for an object more than ``lane_half_width_m``
    to its left (the object is across the centre line, beside the opposite flow), "left" the
    mirror image; "none" takes every sample's heading as it is. So the ego's path and a car
    overtaking it point the parked cars on the far kerb the way the oncoming traffic goes, even
    where no oncoming vehicle passed them.
    """
    if len(flow_xy_m) == 0 or len(xy_m) == 0:
        return np.full(len(xy_m), np.nan)
    rel = flow_xy_m[None, :, :] - xy_m[:, None, :]
    d = np.linalg.norm(rel, axis=2)
    w = np.exp(-0.5 * np.square(d / scale_m))
    if yaw_rad is not None and half_lw_m is not None:
        c, s = np.cos(yaw_rad)[:, None], np.sin(yaw_rad)[:, None]
        along = np.abs(c * rel[..., 0] + s * rel[..., 1])
        across = np.abs(-s * rel[..., 0] + c * rel[..., 1])
        own = (along <= half_lw_m[:, 0:1]) & (across <= half_lw_m[:, 1:2])
        w = np.where(own, 0.0, w)
    fc, fs = np.cos(flow_yaw_rad)[None, :], np.sin(flow_yaw_rad)[None, :]
    if traffic_side != "none":
        # The object's offset to the sample's left (rel points from the object to the sample).
        left_m = fs * rel[..., 0] - fc * rel[..., 1]
        across = (
            left_m > lane_half_width_m if traffic_side == "right" else left_m < -lane_half_width_m
        )
        sign = np.where(across, -1.0, 1.0)
        fc, fs = fc * sign, fs * sign
    # The nearest flow decides: the weight of farther lanes falls off quickly.
    vx = (w * fc).sum(axis=1)
    vy = (w * fs).sum(axis=1)
    return np.where(w.sum(axis=1) > 0, np.arctan2(vy, vx), np.nan)


def _aligned(yaw: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``yaw`` turned by pi where it points away from ``reference`` (NaN reference: unchanged)."""
    flip = np.cos(yaw - reference) < 0
    return wrap_angle(np.where(np.isfinite(reference) & flip, yaw + np.pi, yaw))


def _shrink_to_near_faces(
    table: TrackTable,
    to_car: np.ndarray,
    static: np.ndarray,
    size: np.ndarray,
    center_xy: np.ndarray,
    yaw: np.ndarray,
    ego_xy_yaw: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Tracks ``to_car`` (T,) (large-vehicle boxes the point evidence called a car) take a car's
    typical size, no larger than their boxes', placed against their boxes' near faces: the
    detector's box grew over what stood beside or above the car (a hedge, a canopy) on the sides
    the LiDAR sees, while the car's far faces are unseen. The near side is the one facing the
    ego (per row; a static track's from the median ego position over its span, so it keeps one
    pose). Without ego positions the box shrinks about its centre. Returns (T, 3) sizes and
    (K, 2) centres."""
    from detectors.class_priors import TYPICAL_SIZE_WLH_M

    size = size.copy()
    old = size[to_car].copy()
    size[to_car] = np.minimum(old, TYPICAL_SIZE_WLH_M[CLASS_CAR])
    if ego_xy_yaw is None:
        return size, center_xy
    t_of_row = table.track_of_row
    sensor = np.asarray(ego_xy_yaw, dtype=np.float64)[table.frame_index, :2]
    static_sensor = group_quantile(t_of_row, sensor, table.n_tracks, 0.5)
    sensor = np.where(static[t_of_row][:, None], static_sensor[t_of_row], sensor)
    rows = to_car[t_of_row]
    c, s = np.cos(yaw[rows]), np.sin(yaw[rows])
    d = sensor[rows] - center_xy[rows]
    along = np.sign(c * d[:, 0] + s * d[:, 1])
    across = np.sign(-s * d[:, 0] + c * d[:, 1])
    slack = np.zeros((table.n_tracks, 2))
    slack[to_car] = (old[:, [1, 0]] - size[to_car][:, [1, 0]]) / 2
    shift_l = along * slack[t_of_row[rows], 0]
    shift_w = across * slack[t_of_row[rows], 1]
    center_xy = center_xy.copy()
    center_xy[rows, 0] += c * shift_l - s * shift_w
    center_xy[rows, 1] += s * shift_l + c * shift_w
    return size, center_xy


def _end_on_cars(
    table: TrackTable,
    moving: np.ndarray,
    label: np.ndarray,
    speed: np.ndarray,
    center_xy: np.ndarray,
    bottom: np.ndarray,
    size: np.ndarray,
    yaw: np.ndarray,
    velocity: np.ndarray,
    keyframes,
    cfg: RefineConfig,
) -> np.ndarray:
    """(T,) bool: the ``moving`` two-wheeler tracks, at least ``cfg.end_on_min_speed_mps`` fast
    (median over their rows), that are cars seen end-on
    (:func:`autolabel.refine.end_faces.end_on_cars`, on their observed rows' refined boxes)."""
    from autolabel.refine.end_faces import end_on_cars

    t_of_row = table.track_of_row
    median_speed = group_quantile(t_of_row, speed[:, None], table.n_tracks, 0.5)[:, 0]
    judged = moving & np.isin(label, TWO_WHEELERS) & (median_speed >= cfg.end_on_min_speed_mps)
    r = np.flatnonzero(judged[t_of_row] & table.observed)
    if len(r) == 0:
        return np.zeros(table.n_tracks, bool)
    t = t_of_row[r]
    boxes = Boxes3D(
        center_m=np.column_stack([center_xy[r], bottom[r] + size[t, 2] / 2]),
        size_wlh_m=size[t],
        yaw_rad=yaw[r],
        velocity_mps=velocity[r],
        label=label[t],
        score=np.ones(len(r), np.float32),
        track_id=table.track_id[t],
        frame="global",
    )
    ids = end_on_cars(boxes, table.frame_index[r], keyframes, cfg.end_on_min_width_m)
    return np.isin(table.track_id, ids)


def _behind_end_faces(
    table: TrackTable,
    end_on: np.ndarray,
    size: np.ndarray,
    center_xy: np.ndarray,
    yaw: np.ndarray,
    ego_xy_yaw: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Tracks ``end_on`` (T,) (two-wheeler boxes on a car's back or front) take a car's typical
    footprint (their own height: the face shows it), grown along their heading away from the
    ego in each row: the box sat on the face the LiDAR sees, and the body lies behind it.
    Without ego positions the box grows about its centre. Returns (T, 3) sizes and (K, 2)
    centres."""
    from detectors.class_priors import TYPICAL_SIZE_WLH_M

    size = size.copy()
    old_length = size[end_on, 1].copy()
    size[end_on, :2] = TYPICAL_SIZE_WLH_M[CLASS_CAR, :2]
    if ego_xy_yaw is None:
        return size, center_xy
    t_of_row = table.track_of_row
    rows = end_on[t_of_row]
    sensor = np.asarray(ego_xy_yaw, dtype=np.float64)[table.frame_index[rows], :2]
    c, s = np.cos(yaw[rows]), np.sin(yaw[rows])
    d = sensor - center_xy[rows]
    away = -np.sign(c * d[:, 0] + s * d[:, 1])
    grow = np.zeros(table.n_tracks)
    grow[end_on] = (size[end_on, 1] - old_length) / 2
    shift = away * grow[t_of_row[rows]]
    center_xy = center_xy.copy()
    center_xy[rows, 0] += c * shift
    center_xy[rows, 1] += s * shift
    return size, center_xy


def track_classes(
    table: TrackTable,
    weight: np.ndarray,
    extra_track: np.ndarray,
    extra_label: np.ndarray,
    extra_weight: np.ndarray,
) -> np.ndarray:
    """(T,) per track, the class with the largest summed ``weight`` over its observed rows plus
    the ``extra_*`` votes (duplicates' boxes: (M,) track position, label, weight)."""
    n_cls = len(DETECTION_CLASSES)
    votes = np.zeros((table.n_tracks, n_cls))
    obs = table.observed
    np.add.at(
        votes,
        (table.track_of_row[obs], table.boxes.label[obs].astype(np.int64)),
        weight[obs],
    )
    np.add.at(votes, (extra_track, extra_label.astype(np.int64)), extra_weight)
    return votes.argmax(axis=1)


def refine_tracks(
    times_s: np.ndarray,
    tracks: Sequence[Boxes3D],
    config: RefineConfig | None = None,
    evidence=None,
    ego_xy_yaw: np.ndarray | None = None,
    location: str = "",
) -> tuple[list[Boxes3D], RefineSummary]:
    """Refine a clip's tracks with the whole clip (see the module docstring).

    Args:
        times_s: (F,) keyframe times, seconds, strictly increasing.
        tracks: F global-frame tracked box sets (``track_id`` >= 0), as a tracker returns them.
        config: settings (defaults when None).
        evidence: optional :class:`autolabel.refine.points.PointEvidence` of these boxes (LiDAR
            returns gathered per box; ``boxes.concatenate(tracks)`` order).
        ego_xy_yaw: optional (F, 3) ego position (m) and heading (rad) per keyframe, global
            frame: the ego's path is part of the traffic flow that points static objects.
        location: where the log was driven (``Clip.location``): ``traffic_side: auto`` takes
            its side of the road from it.

    Returns:
        F refined box sets (global frame, one box per kept track and keyframe of its span,
        sorted by track id) and a summary.
    """
    cfg = config or RefineConfig()
    traffic_side, side_from_location = resolved_traffic_side(cfg.traffic_side, location)
    times = np.asarray(times_s, dtype=np.float64)
    if len(times) != len(tracks):
        raise ValueError(f"refine_tracks: {len(times)} times for {len(tracks)} keyframes")
    boxes, frame_of = clip_boxes(tracks)
    if len(boxes) == 0:
        empty = RefineSummary(
            *(0,) * 12, left_hand_traffic=int(traffic_side == "left"),
            traffic_side_from_location=int(side_from_location),
        )  # fmt: skip
        return [Boxes3D.empty() for _ in tracks], empty
    if np.any(boxes.track_id < 0):
        raise ValueError("refine_tracks: untracked boxes (track_id -1)")

    uniq, col = np.unique(boxes.track_id, return_inverse=True)
    score = boxes.score.astype(np.float64)
    track_weight = np.bincount(col, weights=score, minlength=len(uniq))
    dup_args = (boxes, frame_of, track_weight, cfg.duplicate_distance_m, cfg.duplicate_min_shared)
    _, owner = duplicate_of(*dup_args)
    # Near duplicates are the same cluster under a runner-up class and vote for their owner's
    # class; a box inside a larger one is another class's box grown over part of it (a
    # motorcycle's on a car) and goes without a vote, which would turn a car into a motorcycle.
    votes = owner >= 0
    if cfg.duplicate_inside:
        # Cones and barriers stand against vehicles (a work zone, a parked truck): a vehicle's box
        # grown over them is no reason to drop them.
        _, owner_inside = duplicate_of(*dup_args, ~STATIC_CLASSES[boxes.label])
        owner = np.where(votes, owner, owner_inside)
    # Follow duplicate chains to the track that stays.
    root = np.arange(len(uniq))
    is_dup = owner >= 0
    root[is_dup] = np.searchsorted(uniq, owner[is_dup])
    for _ in range(len(uniq)):
        nxt = root[root]
        if np.array_equal(nxt, root):
            break
        root = nxt
    dup_box = is_dup[col]

    kept_src = np.flatnonzero(~dup_box)
    kept_boxes = boxes[kept_src]
    kept_frame = frame_of[kept_src]
    n_joined = 0
    owner_id = uniq[root[col[dup_box]]]
    joined_ids = np.empty(0, kept_boxes.track_id.dtype)
    if cfg.join_fragments:
        joined = join_fragments(
            kept_boxes.track_id,
            kept_frame,
            times,
            kept_boxes.center_m[:, :2],
            kept_boxes.label,
            cfg.join_gate_m,
            cfg.join_gate_rate_mps,
            cfg.endpoint_observations,
            cfg.min_observations,
        )
        old_ids, first = np.unique(kept_boxes.track_id, return_index=True)
        n_joined = len(old_ids) - len(np.unique(joined))
        # Duplicates vote for the joined track of the one they followed.
        owner_id = joined[first][np.searchsorted(old_ids, owner_id)]
        joined_ids = np.unique(joined[joined != kept_boxes.track_id])
        kept_boxes.track_id = joined
    table = build_track_table(kept_boxes, kept_frame)
    rows = table.boxes
    obs = table.observed
    t_of_row = table.track_of_row
    n_tracks = table.n_tracks
    row_weight = np.where(obs, rows.score.astype(np.float64), 0.0)

    # Class: score-weighted vote, duplicates voting for the track they follow.
    extra_track = np.searchsorted(table.track_id, owner_id)
    vote_weight = np.where(votes[col[dup_box]], score[dup_box], 0.0)
    label = track_classes(table, row_weight, extra_track, boxes.label[dup_box], vote_weight)
    n_obs = table.per_track_count(obs)
    mean_score = table.per_track_sum(row_weight) / np.maximum(n_obs, 1)
    track_score = mean_score * (1.0 - np.exp(-n_obs / cfg.score_length_scale))

    # Trajectory: two-sided smoothing of every track's span.
    span_t = times[table.frame_index]
    center_xy, velocity = smooth_tracks(
        table.track_start,
        span_t,
        rows.center_m[:, :2],
        obs,
        rows.velocity_mps,
        np.full(n_tracks, cfg.accel_psd),
        np.full(n_tracks, cfg.position_sigma_m),
        cfg.velocity_sigma_mps,
    )
    speed = np.hypot(velocity[:, 0], velocity[:, 1])
    first, last = table.track_start[:-1], table.track_start[1:] - 1
    displacement = endpoint_displacement(table, rows.center_m[:, :2], cfg.endpoint_observations)
    duration = np.maximum(span_t[last] - span_t[first], 1e-6)
    static = (
        (displacement < cfg.static_max_displacement_m)
        & (displacement / duration < cfg.static_max_speed_mps)
    ) | STATIC_CLASSES[label]

    keep = n_obs >= cfg.min_observations
    voted = label.copy()
    joined_track = np.isin(table.track_id, joined_ids)
    to_car = np.zeros(n_tracks, bool)
    too_short = int((~keep).sum())
    clutter = np.zeros(n_tracks, bool)
    features = None
    if evidence is not None and cfg.reject_clutter:
        from autolabel.refine import classify

        evidence_row = np.where(obs, kept_src[np.maximum(table.box_row, 0)], -1)
        features = classify.track_evidence(table, evidence, evidence_row)
        clutter = keep & classify.clutter_tracks(
            features,
            static,
            cfg.clutter_max_surface_share,
            cfg.clutter_min_height_m,
            cfg.clutter_min_returns,
            cfg.clutter_min_floor_m,
        )
        keep &= ~clutter
        relabelled = classify.relabel_low_vehicles(
            features,
            label,
            cfg.car_max_height_m,
            cfg.relabel_min_returns,
            cfg.canopy_min_gap_m,
            cfg.canopy_min_body_m,
        )
        to_car = relabelled != label
        label = relabelled
        # After the relabelling: a car under a tree's canopy has no panel up to the canopy
        # either, but is a car.
        fence = keep & classify.open_panels(
            features, label, static, cfg.panel_min_fill, cfg.relabel_min_returns
        )
        clutter |= fence
        keep &= ~fence
    keep &= track_score >= cfg.min_track_score

    # Static tracks: one pose; velocity zero.
    obs_rows = np.flatnonzero(obs)
    if cfg.pose_from_own_class and np.any(joined_track):
        # A joined track's pose from its boxes of the voted class only: its fragments split
        # where the detector changed class, and a size-based detector draws each class's box at
        # that class's size (a car called a construction vehicle for a few keyframes gets a
        # 6.4 m box there, centred off the car).
        own = obs & ((rows.label == voted[t_of_row]) | ~joined_track[t_of_row])
        has_own = table.per_track_count(own) > 0
        obs_rows = np.flatnonzero(own | (obs & ~has_own[t_of_row]))
    static_xy = group_quantile(t_of_row[obs_rows], rows.center_m[obs_rows, :2], n_tracks, 0.5)
    static_row = static[t_of_row]
    center_xy = np.where(static_row[:, None], static_xy[t_of_row], center_xy)
    velocity = np.where(static_row[:, None], 0.0, velocity)

    # Heading.
    det_yaw = rows.yaw_rad
    static_yaw = _axial_mean_heading(table, det_yaw, row_weight)
    motion_yaw = np.arctan2(velocity[:, 1], velocity[:, 0])
    fast = ~static_row & (speed >= cfg.heading_from_motion_mps)
    nearest_motion = _fill_nearest(table.track_start, fast, motion_yaw)
    # A mover never fast enough: its overall direction of travel.
    travel = center_xy[last] - center_xy[first]
    travel_yaw = np.arctan2(travel[:, 1], travel[:, 0])[t_of_row]
    nearest_motion = np.where(np.isfinite(nearest_motion), nearest_motion, travel_yaw)
    yaw = np.where(fast, motion_yaw, _aligned(det_yaw, nearest_motion))
    # Size: one per track (the bottom is placed below).
    size = group_quantile(
        t_of_row[obs_rows], rows.size_wlh_m[obs_rows], n_tracks, cfg.size_quantile
    )
    if cfg.static_heading_from_flow:
        flow_xy = center_xy[fast]
        flow_yaw = motion_yaw[fast]
        if ego_xy_yaw is not None:
            flow_xy = np.concatenate([flow_xy, ego_xy_yaw[:, :2]])
            flow_yaw = np.concatenate([flow_yaw, ego_xy_yaw[:, 2]])
        flow = traffic_heading(
            static_xy,
            flow_xy,
            flow_yaw,
            cfg.flow_distance_m,
            static_yaw,
            size[:, [1, 0]] / 2 + cfg.flow_clearance_m,
            traffic_side,
            cfg.flow_lane_half_width_m,
        )
        static_yaw = _aligned(static_yaw, flow)
    if features is not None and cfg.static_heading_from_cabin:
        from autolabel.refine import classify

        side = classify.cabin_side(
            table,
            evidence,
            evidence_row,
            static_xy,
            static_yaw,
            0.8,
            cfg.cabin_min_offset_m,
            cfg.cabin_max_roof_span,
        )
        turn = static & np.isin(label, CABIN_CLASSES) & (side > 0)
        static_yaw = np.where(turn, wrap_angle(static_yaw + np.pi), static_yaw)
    yaw = np.where(static_row, static_yaw[t_of_row], yaw)

    # The bottom stays on the detected ground.
    bottom = rows.center_m[:, 2] - rows.size_wlh_m[:, 2] / 2
    bottom = _interpolate_rows(obs, bottom)
    if np.any(static):
        static_bottom = group_quantile(t_of_row[obs_rows], bottom[obs_rows], n_tracks, 0.5)
        bottom = np.where(static_row, static_bottom[t_of_row], bottom)
        # The height reaches the boxes' tops from the bottom the track keeps: a box whose
        # ground was seen lower (beside the ego) is taller by as much, not the object.
        top = rows.center_m[:, 2] + rows.size_wlh_m[:, 2] / 2
        size[:, 2] = group_quantile(
            t_of_row[obs_rows], top[obs_rows] - bottom[obs_rows], n_tracks, cfg.size_quantile
        )
    if np.any(to_car):
        size, center_xy = _shrink_to_near_faces(
            table, to_car, static, size, center_xy, yaw, ego_xy_yaw
        )
    end_on = np.zeros(n_tracks, bool)
    if cfg.end_on_min_width_m > 0 and evidence is not None and evidence.keyframes is not None:
        end_on = _end_on_cars(
            table, keep & ~static, label, speed, center_xy, bottom, size, yaw, velocity,
            evidence.keyframes, cfg,
        )  # fmt: skip
        if np.any(end_on):
            label = np.where(end_on, CLASS_CAR, label)
            size, center_xy = _behind_end_faces(table, end_on, size, center_xy, yaw, ego_xy_yaw)
    size_row = size[t_of_row]
    center = np.column_stack([center_xy, bottom + size_row[:, 2] / 2])

    # Rounded to a micrometre / microradian: numpy's vectorised sin, cos and arctan2 may differ
    # in the last bit with the memory alignment of their operands, which must not reach the
    # outputs (same input and config give the same bytes).
    out = Boxes3D(
        center_m=np.round(center, 6),
        size_wlh_m=np.round(size_row, 6),
        yaw_rad=wrap_angle(np.round(yaw, 6)),
        velocity_mps=np.round(velocity, 6),
        label=label[t_of_row],
        score=track_score[t_of_row],
        track_id=rows.track_id,
        frame="global",
    )
    keep_row = keep[t_of_row]
    n_riding = 0
    if cfg.drop_riding_along:
        # On the refined boxes: one size per track and lag-free velocities.
        kept = np.flatnonzero(keep_row)
        riding = riding_along(
            out[kept],
            table.frame_index[kept],
            np.isin(label, TWO_WHEELERS)[t_of_row[kept]],
            np.isin(label, VEHICLES)[t_of_row[kept]],
            cfg.riding_reach_m,
            cfg.riding_max_dv_mps,
            cfg.riding_min_shared,
            cfg.riding_min_speed_mps,
        )
        dropped = np.isin(table.track_id, riding)
        n_riding = int(dropped.sum())
        keep &= ~dropped
        keep_row = keep[t_of_row]
    if np.any(end_on & keep):
        # Where the car was also tracked as a car, its end-on track's boxes are duplicates.
        from autolabel.refine.end_faces import covered_rows

        kept = np.flatnonzero(keep_row)
        covered = covered_rows(
            out[kept],
            table.frame_index[kept],
            end_on[t_of_row[kept]],
            np.isin(label, VEHICLES)[t_of_row[kept]] & ~end_on[t_of_row[kept]],
        )
        keep_row[kept[covered]] = False
        # Mostly a duplicate: all of it goes (what is left would switch ids with the car's own).
        left = table.per_track_count(keep_row & obs)
        share = left / np.maximum(table.per_track_count(keep[t_of_row] & obs), 1)
        keep &= ~end_on | ((left >= cfg.min_observations) & (share >= 0.5))
        keep_row &= keep[t_of_row]
    out = out[keep_row]
    refined = frame_sets(out, table.frame_index[keep_row], len(times))
    n_extended = 0
    if cfg.extend_tracks and evidence is not None and evidence.keyframes is not None:
        from autolabel.refine.extension import extend_tracks

        refined, n_extended = extend_tracks(
            refined,
            times,
            table.track_id[static & keep],
            evidence.keyframes,
            cfg.extend_min_returns,
            cfg.extend_clear_m,
            cfg.extend_score_factor,
            evidence.margin_m,
            cfg.extend_moving_s,
        )
    if evidence is not None and cfg.evidence_score:
        refined = _rescored(refined, evidence, cfg)
    summary = RefineSummary(
        tracks_in=len(uniq),
        tracks_out=int(keep.sum()),
        duplicates=int(is_dup.sum()),
        too_short=too_short,
        clutter=int(clutter.sum()),
        static=int((static & keep).sum()),
        moving=int((~static & keep).sum()),
        boxes_in=len(boxes),
        boxes_out=len(out) + n_extended,
        boxes_filled=int((~obs[keep_row]).sum()),
        joined=n_joined,
        boxes_extended=n_extended,
        riding_along=n_riding,
        left_hand_traffic=int(traffic_side == "left"),
        traffic_side_from_location=int(side_from_location),
    )
    return refined, summary


def _rescored(refined: list[Boxes3D], evidence, cfg: RefineConfig) -> list[Boxes3D]:
    """Step 9: ``refined`` rescored from their own returns, taken from the keyframe returns
    ``evidence`` kept (unchanged where it kept none, as evidence not gathered from a clip)."""
    from autolabel.refine import classify
    from autolabel.refine.points import boxes_evidence

    refined_evidence = boxes_evidence(evidence, refined, cfg.wall_column_m)
    if refined_evidence is None:
        return refined
    return classify.rescore_tracks(
        refined,
        refined_evidence,
        cfg.support_returns_scale,
        cfg.facade_max_flatness,
        cfg.static_max_speed_mps,
        cfg.facade_score_factor,
        tower_min_m=cfg.tower_min_height_m,
        tower_factor=cfg.tower_score_factor,
        wall_min_overlap=cfg.wall_min_overlap,
        wall_min_density=cfg.wall_min_density,
        wall_factor=cfg.wall_score_factor,
        hugging_max_ratio=cfg.hugging_max_ratio,
        hugging_factor=cfg.hugging_score_factor,
    )


__all__ = ["RefineSummary", "group_quantile", "refine_tracks", "track_classes"]
