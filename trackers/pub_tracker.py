"""Pub-style greedy centre tracker (CenterPoint's ``PubTracker`` semantics) over one clip.

Per keyframe, each detection's centre is moved back to the previous keyframe's time by its own
velocity (``centre - velocity * dt``), or, when the detector gives no velocity, each live track is
moved forward by the track's velocity instead; the two are compared in the xy plane. Detections are
taken in order of descending score, each claiming the nearest live track of its own class within
its class's distance gate. Matched tracks jump to the detection; unmatched tracks survive while
their age (keyframes since the last match, counting the matched frame as 1) is below ``max_age``,
coasting on their velocity; unmatched detections scoring at least ``new_track_min_score`` start new
tracks, with the detection's velocity.

Differences from CenterPoint's reference implementation, all deliberate:

- an empty keyframe is a missed frame for every track (CenterPoint drops all tracks on one);
- classes outside the nuScenes tracking benchmark are tracked too, so that later stages can refer
  to them (the submission writer leaves them out): cones and barriers as static objects (zero
  velocity); construction vehicles as movers whose velocity stays zero until their centres have
  moved beyond their noise (``still_displacement_m``), since most stand still but a moving truck
  is often called one;
- a coasting track moves by its velocity times the current keyframe interval (CenterPoint reuses the
  interval of the frame where it was last matched; identical at a fixed 2 Hz);
- a detection without velocity is matched against the tracks' predicted centres, and a track matched
  by such a detection estimates its velocity from its last two observations; a track whose velocity
  is still unknown (seen once, by such a detector) widens its gate by the class's largest plausible
  displacement since it was seen (``max_speed_mps * time unseen``), since it cannot predict where it
  went, and a detection with velocity is moved back to the time such a track was seen;
- a track that missed keyframes is compared with a detection by the mean of the two velocities over
  the whole time unseen (constant acceleration from its last observation), not by the track's
  velocity up to the previous keyframe and the detection's over the last interval: the two agree
  when the velocities agree, but CenterPoint's lets an object coming the other way, or a parked
  one, take the track of an object that vanished nearby (``frame_distances``);
- detections with equal scores are visited nearest-first (``detection_order``): CenterPoint falls
  back to input order, so with saturated scores any detection could take the track that another
  continues exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numba
import numpy as np

from autolabel.boxes import Boxes3D
from autolabel.classes import DETECTION_CLASSES
from trackers.velocity import track_velocities_mps

#: CenterPoint's nuScenes gates (metres per keyframe interval, 99.9th percentile of the velocity
#: error) for the tracking classes; the static classes get gates from their position noise alone.
#: Construction vehicles mostly stand (their gate is their position noise's), but a size-based
#: detector calls moving trucks construction vehicles: a track not yet moving may be continued
#: as far as a truck drives (``DEFAULT_MAX_SPEED_MPS``), and its observed motion is followed.
DEFAULT_MATCH_DISTANCE_M: dict[str, float] = {
    "car": 4.0,
    "truck": 4.0,
    "bus": 5.5,
    "trailer": 3.0,
    "pedestrian": 1.0,
    "motorcycle": 13.0,
    "bicycle": 3.0,
    "construction_vehicle": 2.0,
    "traffic_cone": 1.0,
    "barrier": 1.0,
}
#: Largest plausible speed per class (m/s), used only to widen the gate of a track whose velocity
#: is not known yet (its single observation came without velocity).
DEFAULT_MAX_SPEED_MPS: dict[str, float] = {
    "car": 15.0,
    "truck": 15.0,
    "bus": 15.0,
    "trailer": 15.0,
    "pedestrian": 3.0,
    "motorcycle": 15.0,
    "bicycle": 8.0,
    "construction_vehicle": 15.0,
    "traffic_cone": 0.0,
    "barrier": 0.0,
}
#: Per class, how far (m) a track must move between two observations before it is taken to move
#: (``PubTrackerConfig.still_displacement_m``): construction vehicles are mostly parked, a prior
#: that their observed motion overrides.
DEFAULT_STILL_DISPLACEMENT_M: dict[str, float] = {
    name: 0.0 for name in DEFAULT_MATCH_DISTANCE_M
} | {"construction_vehicle": 1.5}
#: Small road users a size-based detector confuses from frame to frame (one motorcycle is seen
#: as a motorcycle, bicycle, pedestrian or cone): the pipeline lets them continue each other's
#: tracks when the ``refine`` stage follows to vote each track's class.
REFINE_CLASS_GROUPS: tuple[tuple[str, ...], ...] = (
    ("pedestrian", "bicycle", "motorcycle", "traffic_cone"),
)
#: Classes that never move, tracked with zero velocity. Not construction vehicles: they move, and
#: a moving truck the detector calls one must keep its track (with zero velocity and a 2 m gate
#: it started a new track every keyframe).
DEFAULT_STATIC_CLASSES: tuple[str, ...] = ("traffic_cone", "barrier")


def _per_class(value: object, defaults: dict[str, float], key: str, allow_zero: bool) -> dict:
    """``defaults`` overridden by the mapping ``value``; errors name ``PubTrackerConfig.<key>``."""
    if not isinstance(value, dict):
        raise ValueError(
            f"PubTrackerConfig.{key}: expected a mapping class -> number, got {type(value).__name__}"
        )
    merged = dict(defaults)
    for name, item in value.items():
        if name not in DETECTION_CLASSES:
            raise ValueError(
                f"PubTrackerConfig.{key}[{name!r}]: unknown class; expected one of {DETECTION_CLASSES}"
            )
        try:
            number = float(item)
        except (TypeError, ValueError):
            number = float("nan")
        if not np.isfinite(number) or number < 0 or (number == 0 and not allow_zero):
            bound = ">= 0" if allow_zero else "> 0"
            raise ValueError(
                f"PubTrackerConfig.{key}[{name!r}]: expected a finite number {bound}, got {item!r}"
            )
        merged[name] = number
    return merged


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


@dataclass
class PubTrackerConfig:
    """Settings of :class:`PubTracker`.

    Attributes:
        max_age: CenterPoint's ``max_age``: a track is re-matchable while fewer than ``max_age``
            keyframes have passed since its last match, i.e. across at most ``max_age - 1``
            consecutive missed keyframes. CenterPoint's online setting is 3; the default here, 40
            keyframes (a whole 20 s clip at 2 Hz), suits offline labelling: occluded objects
            (parked cars behind traffic) keep their id when they reappear where their motion
            predicts. On 10 held-out synthetic clips (seed 8) it scored the highest AMOTA of 3, 6,
            12, 20 and 40 for ground-truth and noisy ground-truth detections, and 0.005 below
            the best (20) for LiDAR detections (see ``bench/bench_tracking.py``).
        match_distance_m: per detection class, the largest xy distance (metres) between a
            back-projected detection and a track's centre that may be matched. Classes left out
            take ``DEFAULT_MATCH_DISTANCE_M``.
        max_speed_mps: per class, the speed (m/s) by which the gate of a track with still unknown
            velocity is widened (``gate + max_speed * dt``). Classes left out take
            ``DEFAULT_MAX_SPEED_MPS``.
        new_track_min_score: unmatched detections scoring below this start no track (they are
            dropped); 0 keeps CenterPoint's behaviour of starting a track for every detection.
        static_classes: classes tracked as static objects (their velocity is taken as zero).
        velocity_half_window: half width, in observations, of the least-squares window used for
            the output velocity of observations whose detector gave none (``trackers.velocity``).
        still_displacement_m: per class, a track matched by a detection without velocity that
            moved less than this since its previous observation is at rest: it predicts with
            zero velocity instead of its jitter, and its output velocity (the slope above) is
            zero where the slope's window moved less than this. The default, 1.5 m for
            construction vehicles only, is a prior that observed motion overrides
            (``DEFAULT_STILL_DISPLACEMENT_M``).
        track_score_length: every box of a track is scored by the track's evidence, the mean
            detection score of its boxes times ``1 - exp(-boxes / track_score_length)``, so a
            long, confidently detected track outranks a short one made of the same scores (the
            labeller sees the whole clip); 0 (the default) keeps each box's detection score
            (CenterPoint). The pipeline's ``refine`` stage scores tracks this way itself, from
            the detection scores; set it here for ``refine: none``.
        class_groups: groups of classes whose detections may continue each other's tracks
            (within the smaller of the two classes' gates); a track takes the class of its
            latest detection. A size-based detector calls one motorcycle a motorcycle, bicycle,
            pedestrian or cone from frame to frame: grouped, it stays one track and the
            ``refine`` stage votes its class. Empty (default): a track keeps its class
            (CenterPoint), which ``refine: none`` needs (one class per track). With ``refine``
            on, the pipeline uses ``REFINE_CLASS_GROUPS``, chosen on synthetic seed 5 with the
            LiDAR detector (refined mAP 0.434 -> 0.438, mAVE 0.20 -> 0.16, AMOTA unchanged);
            vehicles are not grouped (on PandaSet-002 that cost car AP and AOE).
    """

    max_age: int = 40
    match_distance_m: dict[str, float] = field(
        default_factory=lambda: dict(DEFAULT_MATCH_DISTANCE_M)
    )
    max_speed_mps: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_MAX_SPEED_MPS))
    new_track_min_score: float = 0.0
    static_classes: tuple[str, ...] = DEFAULT_STATIC_CLASSES
    velocity_half_window: int = 2
    still_displacement_m: dict[str, float] = field(
        default_factory=lambda: dict(DEFAULT_STILL_DISPLACEMENT_M)
    )
    track_score_length: float = 0.0
    class_groups: tuple[tuple[str, ...], ...] = ()

    def __post_init__(self) -> None:
        if not _is_int(self.max_age) or self.max_age < 1:
            raise ValueError(
                f"PubTrackerConfig.max_age: expected an int >= 1, got {self.max_age!r}"
            )
        self.match_distance_m = _per_class(
            self.match_distance_m, DEFAULT_MATCH_DISTANCE_M, "match_distance_m", allow_zero=False
        )
        self.max_speed_mps = _per_class(
            self.max_speed_mps, DEFAULT_MAX_SPEED_MPS, "max_speed_mps", allow_zero=True
        )
        self.still_displacement_m = _per_class(
            self.still_displacement_m,
            DEFAULT_STILL_DISPLACEMENT_M,
            "still_displacement_m",
            allow_zero=True,
        )
        score = self.new_track_min_score
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0 <= score <= 1:
            raise ValueError(
                f"PubTrackerConfig.new_track_min_score: expected a number in [0, 1], got {score!r}"
            )
        self.new_track_min_score = float(score)
        if isinstance(self.static_classes, str):
            raise ValueError(
                "PubTrackerConfig.static_classes: expected a list of class names, got a string"
            )
        self.static_classes = tuple(self.static_classes)
        for name in self.static_classes:
            if name not in DETECTION_CLASSES:
                raise ValueError(
                    f"PubTrackerConfig.static_classes: unknown class {name!r}; "
                    f"expected names from {DETECTION_CLASSES}"
                )
        if isinstance(self.class_groups, str) or any(isinstance(g, str) for g in self.class_groups):
            raise ValueError(
                "PubTrackerConfig.class_groups: expected a list of lists of class names"
            )
        self.class_groups = tuple(tuple(g) for g in self.class_groups)
        seen: set[str] = set()
        for names in self.class_groups:
            for name in names:
                if name not in DETECTION_CLASSES:
                    raise ValueError(
                        f"PubTrackerConfig.class_groups: unknown class {name!r}; "
                        f"expected names from {DETECTION_CLASSES}"
                    )
                if name in seen:
                    raise ValueError(
                        f"PubTrackerConfig.class_groups: class {name!r} is in two groups"
                    )
                seen.add(name)
        length = self.track_score_length
        if isinstance(length, bool) or not isinstance(length, (int, float)) or not length >= 0:
            raise ValueError(
                f"PubTrackerConfig.track_score_length: expected a number >= 0, got {length!r}"
            )
        self.track_score_length = float(length)
        if not _is_int(self.velocity_half_window) or self.velocity_half_window < 1:
            raise ValueError(
                "PubTrackerConfig.velocity_half_window: expected an int >= 1, "
                f"got {self.velocity_half_window!r}"
            )


@numba.njit(cache=True)
def greedy_match(dist_m: np.ndarray, allowed: np.ndarray, det_order: np.ndarray) -> np.ndarray:
    """Greedy one-to-one assignment of detections to tracks.

    Detections are visited in ``det_order``; each takes the allowed, still free track at the
    smallest distance (the lowest track index on ties) or stays unmatched.

    Args:
        dist_m: (N, M) float64 distances, detection x track.
        allowed: (N, M) bool, which pairs may be matched (class and gate).
        det_order: (N,) int64 visiting order of the detections (descending score).

    Returns:
        (N,) int64 matched track index per detection, -1 where unmatched.
    """
    n, m = dist_m.shape
    match = np.full(n, -1, dtype=np.int64)
    taken = np.zeros(m, dtype=np.bool_)
    for k in range(n):
        i = det_order[k]
        best = -1
        best_dist = np.inf
        for j in range(m):
            if allowed[i, j] and not taken[j] and dist_m[i, j] < best_dist:
                best = j
                best_dist = dist_m[i, j]
        if best >= 0:
            match[i] = best
            taken[best] = True
    return match


@numba.njit(cache=True)
def detection_order(score: np.ndarray, dist_m: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Visiting order of one keyframe's detections: descending score, ties by nearest allowed track.

    CenterPoint visits detections by score alone, so equal scores (ground truth, or a detector
    that saturates) fall back to input order and an arbitrary detection can take the track that
    another one continues exactly. Among equal scores the detection closest to its best allowed
    track goes first, then input order.

    Returns:
        (N,) int64 detection indices.
    """
    n, m = dist_m.shape
    nearest = np.full(n, np.inf)
    for i in range(n):
        for j in range(m):
            if allowed[i, j] and dist_m[i, j] < nearest[i]:
                nearest[i] = dist_m[i, j]
    by_distance = np.argsort(nearest, kind="mergesort")
    return by_distance[np.argsort(-score[by_distance], kind="mergesort")]


@numba.njit(cache=True)
def frame_distances(
    center_xy_m: np.ndarray,
    velocity_mps: np.ndarray,
    label: np.ndarray,
    track_xy_m: np.ndarray,
    track_velocity_mps: np.ndarray,
    track_velocity_known: np.ndarray,
    track_label: np.ndarray,
    track_seen_xy_m: np.ndarray,
    track_unseen_s: np.ndarray,
    track_missed: np.ndarray,
    dt_s: float,
    gate_m: np.ndarray,
    max_speed_mps: np.ndarray,
    class_group: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Distances and allowed pairs between one keyframe's detections and the live tracks.

    How a detection is compared with a track depends on which velocities are known:

    - both, track matched at the previous keyframe (CenterPoint): the detection moved back by
      ``velocity * dt`` against the track's centre;
    - both, track missed keyframes since it was last seen: the detection moved back over the whole
      time unseen by the mean of the two velocities (constant acceleration) against where the track
      was last seen. This equals CenterPoint's comparison when the velocities agree, and keeps an
      object coming the other way (or a parked one) from taking the track of one that vanished;
    - the detection's only: the detection moved back over the time unseen against where the track
      was last seen (the track stood still, having no velocity to coast on);
    - not the detection's (NaN): the detection against the track moved forward by the track's
      velocity; a track whose velocity is unknown too widens the gate by the class's
      ``max_speed * time unseen``.

    Args:
        center_xy_m: (N, 2) detection centres; velocity_mps: (N, 2), NaN where unknown.
        label: (N,) class indices.
        track_xy_m, track_velocity_mps, track_seen_xy_m: (M, 2) the live tracks' predicted centre
            at the previous keyframe, velocity, and centre when last matched.
        track_velocity_known, track_missed: (M,) bool; track_label: (M,) class indices;
        track_unseen_s: (M,) seconds from the last match to this keyframe.
        dt_s: seconds since the previous keyframe.
        gate_m, max_speed_mps: (C,) per class.
        class_group: (C,) group of each class: a detection may continue a track of its own class,
            or of another class of its group within the smaller of the two classes' gates.

    Returns:
        (N, M) float64 distances in metres, (N, M) bool allowed (same class or group, within the
        gate).
    """
    n, m = center_xy_m.shape[0], track_xy_m.shape[0]
    dist = np.empty((n, m))
    allowed = np.zeros((n, m), dtype=np.bool_)
    for i in range(n):
        vx, vy = velocity_mps[i, 0], velocity_mps[i, 1]
        has_velocity = np.isfinite(vx) and np.isfinite(vy)
        x, y = center_xy_m[i, 0], center_xy_m[i, 1]
        for j in range(m):
            if label[i] == track_label[j]:
                limit = gate_m[label[i]]
            elif class_group[label[i]] == class_group[track_label[j]]:
                limit = min(gate_m[label[i]], gate_m[track_label[j]])
            else:
                dist[i, j] = np.inf
                continue
            unseen = track_unseen_s[j]
            if has_velocity and track_velocity_known[j] and not track_missed[j]:
                dx = x - vx * dt_s - track_xy_m[j, 0]
                dy = y - vy * dt_s - track_xy_m[j, 1]
            elif has_velocity and track_velocity_known[j]:
                dx = x - 0.5 * (vx + track_velocity_mps[j, 0]) * unseen - track_seen_xy_m[j, 0]
                dy = y - 0.5 * (vy + track_velocity_mps[j, 1]) * unseen - track_seen_xy_m[j, 1]
            elif has_velocity:
                dx = x - vx * unseen - track_seen_xy_m[j, 0]
                dy = y - vy * unseen - track_seen_xy_m[j, 1]
            else:
                dx = x - track_xy_m[j, 0] - track_velocity_mps[j, 0] * dt_s
                dy = y - track_xy_m[j, 1] - track_velocity_mps[j, 1] * dt_s
                if not track_velocity_known[j]:
                    limit = limit + max_speed_mps[label[i]] * unseen
            d = np.sqrt(dx * dx + dy * dy)
            dist[i, j] = d
            allowed[i, j] = d <= limit
    return dist, allowed


@numba.njit(cache=True)
def associate_clip(
    times_s: np.ndarray,
    frame_start: np.ndarray,
    center_xy_m: np.ndarray,
    velocity_mps: np.ndarray,
    label: np.ndarray,
    score: np.ndarray,
    gate_m: np.ndarray,
    max_speed_mps: np.ndarray,
    max_age: int,
    new_track_min_score: float,
    class_group: np.ndarray,
    still_displacement_m: np.ndarray,
) -> np.ndarray:
    """Track ids of a whole clip's detections (the association; see the module docstring).

    Args:
        times_s: (F,) keyframe times, strictly increasing.
        frame_start: (F + 1,) detections of keyframe f are rows frame_start[f]:frame_start[f+1].
        center_xy_m: (N, 2) global xy centres; velocity_mps: (N, 2), NaN where unknown (zero
            for static classes).
        label: (N,) int64 class indices; score: (N,) float64.
        gate_m, max_speed_mps: (C,) per class; max_age, new_track_min_score: as in the config.
        class_group: (C,) group of each class (``frame_distances``); a track takes the class of
            its latest detection.
        still_displacement_m: (C,) per class: a track matched by a detection without velocity
            that moved less than this since its previous observation is at rest (velocity
            zero).

    Returns:
        (N,) int64 track ids (from 0, in order of creation), -1 for dropped detections.
    """
    n = center_xy_m.shape[0]
    ids = np.full(n, -1, dtype=np.int64)
    # One slot per track ever started (at most n); a track's id is its slot.
    t_label = np.empty(n, dtype=np.int64)
    t_xy = np.empty((n, 2))
    t_velocity = np.empty((n, 2))
    t_known = np.empty(n, dtype=np.bool_)
    t_age = np.empty(n, dtype=np.int64)
    t_seen_xy = np.empty((n, 2))
    t_seen_time = np.empty(n)
    live = np.empty(n, dtype=np.int64)  # live track ids, ascending
    n_live = 0
    n_tracks = 0
    for f in range(times_s.shape[0]):
        s, e = frame_start[f], frame_start[f + 1]
        now = times_s[f]
        dt_s = now - times_s[f - 1] if f > 0 else 0.0
        tracks = live[:n_live]
        dist, allowed = frame_distances(
            center_xy_m[s:e],
            velocity_mps[s:e],
            label[s:e],
            t_xy[tracks],
            t_velocity[tracks],
            t_known[tracks],
            t_label[tracks],
            t_seen_xy[tracks],
            now - t_seen_time[tracks],
            t_age[tracks] > 1,
            dt_s,
            gate_m,
            max_speed_mps,
            class_group,
        )
        order = detection_order(score[s:e], dist, allowed)
        match = greedy_match(dist, allowed, order)
        matched = np.zeros(n_live, dtype=np.bool_)
        for i in range(e - s):
            if match[i] < 0:
                continue
            d = s + i
            tr = tracks[match[i]]
            matched[match[i]] = True
            ids[d] = tr
            t_label[tr] = label[d]
            vx, vy = velocity_mps[d, 0], velocity_mps[d, 1]
            if np.isfinite(vx) and np.isfinite(vy):
                t_velocity[tr, 0] = vx
                t_velocity[tr, 1] = vy
            else:  # finite difference since the track's last observation
                dx = center_xy_m[d, 0] - t_seen_xy[tr, 0]
                dy = center_xy_m[d, 1] - t_seen_xy[tr, 1]
                if np.hypot(dx, dy) < still_displacement_m[label[d]]:
                    # Not moved beyond the class's noise: at rest (a velocity made of jitter,
                    # coasting through missed keyframes, would carry the track off its object).
                    dx, dy = 0.0, 0.0
                elapsed = now - t_seen_time[tr]
                t_velocity[tr, 0] = dx / elapsed
                t_velocity[tr, 1] = dy / elapsed
            t_known[tr] = True
            t_xy[tr, 0] = center_xy_m[d, 0]
            t_xy[tr, 1] = center_xy_m[d, 1]
            t_seen_xy[tr, 0] = center_xy_m[d, 0]
            t_seen_xy[tr, 1] = center_xy_m[d, 1]
            t_seen_time[tr] = now
            t_age[tr] = 1
        next_live = np.empty(n_live + e - s, dtype=np.int64)
        k = 0
        for j in range(n_live):
            tr = tracks[j]
            if matched[j]:
                next_live[k] = tr
                k += 1
            elif t_age[tr] < max_age:  # coast on the track's velocity
                t_xy[tr, 0] += t_velocity[tr, 0] * dt_s
                t_xy[tr, 1] += t_velocity[tr, 1] * dt_s
                t_age[tr] += 1
                next_live[k] = tr
                k += 1
        for q in range(e - s):
            i = order[q]
            d = s + i
            if match[i] >= 0 or score[d] < new_track_min_score:
                continue
            tr = n_tracks
            n_tracks += 1
            ids[d] = tr
            vx, vy = velocity_mps[d, 0], velocity_mps[d, 1]
            known = np.isfinite(vx) and np.isfinite(vy)
            t_label[tr] = label[d]
            t_xy[tr, 0] = center_xy_m[d, 0]
            t_xy[tr, 1] = center_xy_m[d, 1]
            t_velocity[tr, 0] = vx if known else 0.0
            t_velocity[tr, 1] = vy if known else 0.0
            t_known[tr] = known
            t_age[tr] = 1
            t_seen_xy[tr, 0] = center_xy_m[d, 0]
            t_seen_xy[tr, 1] = center_xy_m[d, 1]
            t_seen_time[tr] = now
            next_live[k] = tr
            k += 1
        live[:k] = next_live[:k]
        n_live = k
    return ids


def track_scores(track_id: np.ndarray, score: np.ndarray, length_scale: float) -> np.ndarray:
    """(N,) each box's track score: its track's mean score times ``1 - exp(-boxes / scale)``.

    Args:
        track_id: (N,) track of each box; score: (N,) detection scores in [0, 1].
        length_scale: boxes at which a track's evidence reaches ``1 - 1/e`` of its mean score.
    """
    _, inverse, count = np.unique(track_id, return_inverse=True, return_counts=True)
    mean = np.bincount(inverse, weights=np.asarray(score, dtype=np.float64)) / count
    return (mean * -np.expm1(-count / length_scale))[inverse]


class PubTracker:
    """Greedy centre tracker over a clip's keyframes (see the module docstring for the semantics)."""

    def __init__(self, config: PubTrackerConfig | None = None) -> None:
        self.config = config if config is not None else PubTrackerConfig()
        self._gate_m = np.array(
            [self.config.match_distance_m[name] for name in DETECTION_CLASSES], dtype=np.float64
        )
        self._max_speed_mps = np.array(
            [self.config.max_speed_mps[name] for name in DETECTION_CLASSES], dtype=np.float64
        )
        self._still_displacement_m = np.array(
            [self.config.still_displacement_m[name] for name in DETECTION_CLASSES],
            dtype=np.float64,
        )
        # Each class its own group unless ``class_groups`` joins it with others.
        group = np.arange(len(DETECTION_CLASSES), dtype=np.int64)
        for k, names in enumerate(self.config.class_groups):
            group[[DETECTION_CLASSES.index(name) for name in names]] = len(DETECTION_CLASSES) + k
        self._class_group = group
        self._is_static = np.array(
            [name in self.config.static_classes for name in DETECTION_CLASSES], dtype=bool
        )

    def track_clip(self, timestamps_s: np.ndarray, detections: list[Boxes3D]) -> list[Boxes3D]:
        """Track one clip.

        Args:
            timestamps_s: (F,) keyframe times, seconds, strictly increasing.
            detections: F box sets in the global frame (velocity NaN where the detector gives none).

        Returns:
            F box sets in the global frame: the detections that were matched to a track or started
            one, in their input order, with ``track_id`` >= 0 (ids from 0, unique within the clip)
            and ``velocity_mps`` the detector's where it is finite, else estimated from the track
            (``trackers.velocity``; NaN for a track observed once), zero for static classes;
            ``score``
            is the track's (``track_scores``) unless ``track_score_length`` is 0.
        """
        times = np.asarray(timestamps_s, dtype=np.float64)
        if times.ndim != 1 or len(times) != len(detections):
            raise ValueError(
                f"track_clip: timestamps_s must have shape ({len(detections)},) to match the "
                f"detections, got {times.shape}"
            )
        if not np.all(np.isfinite(times)) or np.any(np.diff(times) <= 0):
            raise ValueError("track_clip: timestamps_s must be finite and strictly increasing")
        for f, boxes in enumerate(detections):
            if boxes.frame != "global":
                raise ValueError(
                    f"track_clip: detections[{f}] are in frame {boxes.frame!r}, expected 'global'"
                )
        if not detections:
            return []
        clip = Boxes3D.concatenate(list(detections))
        counts = np.array([len(b) for b in detections], dtype=np.int64)
        frame_start = np.concatenate([[0], np.cumsum(counts)])
        label = clip.label.astype(np.int64)
        is_static = self._is_static[label]
        # Static classes have zero velocity by definition; others use the detector's when given.
        velocity = np.where(is_static[:, None], 0.0, clip.velocity_mps)
        ids = associate_clip(
            times,
            frame_start,
            np.ascontiguousarray(clip.center_m[:, :2]),
            velocity,
            label,
            clip.score.astype(np.float64),
            self._gate_m,
            self._max_speed_mps,
            self.config.max_age,
            self.config.new_track_min_score,
            self._class_group,
            self._still_displacement_m,
        )

        kept = ids >= 0
        tracked = clip[kept]
        tracked.track_id = ids[kept]
        frame_of = np.repeat(np.arange(len(times)), counts)[kept]
        # The detector's velocity where it gives one: it measures the object at that keyframe,
        # where a slope over neighbouring observations lags at stops, turns and track ends.
        # Where it gives none, the track's local slope (NaN for a track seen once).
        slope = track_velocities_mps(
            tracked.track_id,
            times[frame_of],
            tracked.center_m[:, :2],
            self.config.velocity_half_window,
            self._still_displacement_m[tracked.label.astype(np.int64)],
        )
        measured = np.isfinite(tracked.velocity_mps).all(axis=1)
        track_velocity = np.where(measured[:, None], tracked.velocity_mps, slope)
        track_velocity[is_static[kept]] = 0.0
        tracked.velocity_mps = track_velocity
        if self.config.track_score_length > 0:
            tracked.score = track_scores(
                tracked.track_id, tracked.score, self.config.track_score_length
            ).astype(tracked.score.dtype)
        bounds = np.searchsorted(frame_of, np.arange(len(times) + 1))
        return [tracked[bounds[f] : bounds[f + 1]] for f in range(len(times))]
