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
- classes outside the nuScenes tracking benchmark are tracked too, as static objects (zero velocity),
  so that later stages can refer to them; the submission writer leaves them out;
- a coasting track moves by its velocity times the current keyframe interval (CenterPoint reuses the
  interval of the frame where it was last matched; identical at a fixed 2 Hz);
- a detection without velocity is matched against the tracks' predicted centres, and a track matched
  by such a detection estimates its velocity from its last two observations; a track whose velocity
  is still unknown (seen once, by such a detector) widens its gate by the class's largest plausible
  displacement over the interval (``max_speed_mps * dt``), since it cannot predict where it went.
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
    "construction_vehicle": 0.0,
    "traffic_cone": 0.0,
    "barrier": 0.0,
}
#: Classes the nuScenes tracking benchmark does not score; tracked with zero velocity.
DEFAULT_STATIC_CLASSES: tuple[str, ...] = ("construction_vehicle", "traffic_cone", "barrier")


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
            consecutive missed keyframes (CenterPoint's nuScenes setting is 3).
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
            the output velocity of each observation (see ``trackers.velocity``).
    """

    max_age: int = 3
    match_distance_m: dict[str, float] = field(
        default_factory=lambda: dict(DEFAULT_MATCH_DISTANCE_M)
    )
    max_speed_mps: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_MAX_SPEED_MPS))
    new_track_min_score: float = 0.0
    static_classes: tuple[str, ...] = DEFAULT_STATIC_CLASSES
    velocity_half_window: int = 2

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


@dataclass
class _Tracks:
    """Live tracks, as parallel arrays in ascending id order."""

    track_id: np.ndarray  # (M,) int64
    label: np.ndarray  # (M,) int64
    center_xy_m: np.ndarray  # (M, 2) last matched centre, moved forward while coasting
    velocity_mps: np.ndarray  # (M, 2) finite; zero where unknown
    velocity_known: np.ndarray  # (M,) bool
    age: np.ndarray  # (M,) int64, 1 on the frame of a match
    observed_xy_m: np.ndarray  # (M, 2) centre of the last matched detection
    observed_time_s: np.ndarray  # (M,) time of the last match

    @classmethod
    def empty(cls) -> _Tracks:
        return cls(
            track_id=np.zeros(0, np.int64),
            label=np.zeros(0, np.int64),
            center_xy_m=np.zeros((0, 2)),
            velocity_mps=np.zeros((0, 2)),
            velocity_known=np.zeros(0, bool),
            age=np.zeros(0, np.int64),
            observed_xy_m=np.zeros((0, 2)),
            observed_time_s=np.zeros(0),
        )

    def __len__(self) -> int:
        return len(self.track_id)


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
            and ``velocity_mps`` estimated from the track (``trackers.velocity``; zero for static
            classes; the detector's own velocity, or NaN, for a track observed once).
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

        tracks = _Tracks.empty()
        next_id = 0
        ids_per_frame: list[np.ndarray] = []
        for f, boxes in enumerate(detections):
            dt_s = float(times[f] - times[f - 1]) if f else 0.0
            tracks, ids, next_id = self._step(tracks, boxes, dt_s, float(times[f]), next_id)
            ids_per_frame.append(ids)
        return self._with_track_velocities(times, detections, ids_per_frame)

    def _step(
        self, tracks: _Tracks, boxes: Boxes3D, dt_s: float, time_s: float, next_id: int
    ) -> tuple[_Tracks, np.ndarray, int]:
        """One keyframe: the new live tracks, (N,) track id per detection (-1: dropped), next id."""
        cfg = self.config
        n, m = len(boxes), len(tracks)
        center_xy = boxes.center_m[:, :2]
        label = boxes.label.astype(np.int64)
        is_static = self._is_static[label]
        # Static classes have zero velocity by definition; others use the detector's when given.
        velocity = np.where(is_static[:, None], 0.0, boxes.velocity_mps)
        has_velocity = np.isfinite(velocity).all(axis=1)
        det_order = np.argsort(-boxes.score.astype(np.float64), kind="stable")

        match = np.full(n, -1, dtype=np.int64)
        if n and m:
            back_xy = np.where(has_velocity[:, None], center_xy - velocity * dt_s, center_xy)
            # A detection without velocity is compared with the tracks moved forward instead.
            no_velocity = ~has_velocity[:, None]
            track_step = tracks.velocity_mps * dt_s
            dx = back_xy[:, None, 0] - tracks.center_xy_m[None, :, 0]
            dx = dx - np.where(no_velocity, track_step[None, :, 0], 0.0)
            dy = back_xy[:, None, 1] - tracks.center_xy_m[None, :, 1]
            dy = dy - np.where(no_velocity, track_step[None, :, 1], 0.0)
            dist_m = np.sqrt(dx * dx + dy * dy)
            gate_m = self._gate_m[label][:, None] + np.where(
                no_velocity & ~tracks.velocity_known[None, :],
                self._max_speed_mps[label][:, None] * dt_s,
                0.0,
            )
            allowed = (dist_m <= gate_m) & (label[:, None] == tracks.label[None, :])
            match = greedy_match(dist_m, allowed, det_order)

        ids = np.full(n, -1, dtype=np.int64)
        det_matched = np.flatnonzero(match >= 0)
        track_matched = match[det_matched]
        ids[det_matched] = tracks.track_id[track_matched]

        # Matched tracks take the detection's centre and velocity (else a finite difference).
        elapsed_s = time_s - tracks.observed_time_s[track_matched]
        fd_velocity = (center_xy[det_matched] - tracks.observed_xy_m[track_matched]) / elapsed_s[
            :, None
        ]
        new_velocity = np.where(has_velocity[det_matched, None], velocity[det_matched], fd_velocity)
        center = tracks.center_xy_m.copy()
        vel = tracks.velocity_mps.copy()
        known = tracks.velocity_known.copy()
        age = tracks.age.copy()
        observed_xy = tracks.observed_xy_m.copy()
        observed_time = tracks.observed_time_s.copy()
        center[track_matched] = center_xy[det_matched]
        vel[track_matched] = new_velocity
        known[track_matched] = True
        age[track_matched] = 1
        observed_xy[track_matched] = center_xy[det_matched]
        observed_time[track_matched] = time_s

        # Unmatched tracks coast on their velocity while young enough.
        unmatched = np.ones(m, dtype=bool)
        unmatched[track_matched] = False
        keep = ~unmatched | (age < cfg.max_age)
        coasting = unmatched & keep
        center[coasting] += vel[coasting] * dt_s
        age[coasting] += 1

        # Unmatched confident detections start tracks, numbered in the order they were visited.
        det_unmatched = match < 0
        visit = det_order[det_unmatched[det_order]]
        starts = visit[boxes.score[visit] >= cfg.new_track_min_score]
        new_ids = next_id + np.arange(len(starts), dtype=np.int64)
        ids[starts] = new_ids

        live = _Tracks(
            track_id=np.concatenate([tracks.track_id[keep], new_ids]),
            label=np.concatenate([tracks.label[keep], label[starts]]),
            center_xy_m=np.concatenate([center[keep], center_xy[starts]]),
            velocity_mps=np.concatenate(
                [vel[keep], np.where(has_velocity[starts, None], velocity[starts], 0.0)]
            ),
            velocity_known=np.concatenate([known[keep], has_velocity[starts]]),
            age=np.concatenate([age[keep], np.ones(len(starts), np.int64)]),
            observed_xy_m=np.concatenate([observed_xy[keep], center_xy[starts]]),
            observed_time_s=np.concatenate([observed_time[keep], np.full(len(starts), time_s)]),
        )
        return live, ids, next_id + len(starts)

    def _with_track_velocities(
        self, times: np.ndarray, detections: list[Boxes3D], ids_per_frame: list[np.ndarray]
    ) -> list[Boxes3D]:
        """Keep the tracked detections, stamp ids and velocities estimated over each whole track."""
        kept = [boxes[ids >= 0] for boxes, ids in zip(detections, ids_per_frame, strict=True)]
        counts = np.array([len(k) for k in kept], dtype=np.int64)
        if counts.sum() == 0:
            return kept
        clip = Boxes3D.concatenate(kept)
        clip.track_id = np.concatenate([ids[ids >= 0] for ids in ids_per_frame])
        time_s = np.repeat(times, counts)
        velocity = track_velocities_mps(
            clip.track_id, time_s, clip.center_m[:, :2], self.config.velocity_half_window
        )
        # A track seen once has no motion of its own; keep what the detector said (or NaN).
        once = np.isnan(velocity).any(axis=1)
        velocity[once] = clip.velocity_mps[once]
        velocity[self._is_static[clip.label]] = 0.0
        clip.velocity_mps = velocity
        bounds = np.concatenate([[0], np.cumsum(counts)])
        return [clip[bounds[f] : bounds[f + 1]] for f in range(len(kept))]
