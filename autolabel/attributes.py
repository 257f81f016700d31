"""Per-frame, per-object attributes in the ego frame, vectorized over all objects of a clip.

Conventions (DESIGN.md, binding): ego frame x forward, y left, z up, origin at the ego pose;
bearing in degrees, 0 straight ahead, positive to the left, in (-180, 180]; clock 12 straight
ahead, 3 to the right; distance in the ground plane unless named ``_3d``; sizes w, l, h.

The computation is a pivot over (frame, track): every row of the clip (one object in one frame) is
gathered into ``(F, T)`` index arrays, and temporal quantities (finite-difference velocity, future
states) are read with index arithmetic, never with a Python loop over objects.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from autolabel.atomic_io import atomic_write_bytes
from autolabel.boxes import Boxes3D
from autolabel.classes import DETECTION_CLASSES
from calib import stable_math
from calib.bearing import bearing_deg, clock_from_bearing
from calib.rotation import wrap_angle
from calib.se3 import SE3


@dataclass(frozen=True)
class EgoShape:
    """The ego vehicle's box in its own ego frame, used by the all-vertices sidedness rule.

    The defaults approximate the nuScenes car (Renault Zoe, 4.084 x 1.730 x 1.562 m); the nuScenes
    ego origin is the rear axle's centre, so the box centre lies ``center_x_m`` ahead of it (about
    half the wheelbase). Set these for another rig.

    Attributes:
        length_m, width_m, height_m: box extent along ego x, y, z, metres.
        center_x_m: box centre's x in the ego frame, metres (ahead of the origin).
    """

    length_m: float = 4.084
    width_m: float = 1.730
    height_m: float = 1.562
    center_x_m: float = 1.3

    def __post_init__(self) -> None:
        for name in ("length_m", "width_m", "height_m"):
            value = getattr(self, name)
            if not np.isfinite(value) or value <= 0:
                raise ValueError(f"{name}: must be a positive number, got {value!r}")
        if not np.isfinite(self.center_x_m):
            raise ValueError(f"center_x_m: must be finite, got {self.center_x_m!r}")

    @property
    def volume_m3(self) -> float:
        return self.length_m * self.width_m * self.height_m

    def bev_corners(self) -> np.ndarray:
        """(4, 2) footprint corners in the ego frame (front-left, front-right, rear-right, rear-left)."""
        half_l, half_w = 0.5 * self.length_m, 0.5 * self.width_m
        cx = self.center_x_m
        return np.array(
            [
                [cx + half_l, half_w],
                [cx + half_l, -half_w],
                [cx - half_l, -half_w],
                [cx - half_l, half_w],
            ]
        )


@dataclass(frozen=True)
class AttributeConfig:
    """Settings of :func:`compute_attributes`.

    Attributes:
        future_horizons_s: look-ahead times of the future states, seconds.
        future_time_tolerance_s: a future state at ``t + h`` is read from the clip frame nearest to
            that time, and only if that frame is within this tolerance (nuScenes keyframes jitter by
            a few tens of ms around 0.5 s); the object must be observed by its track in that frame.
        velocity_from: ``"tracker"`` uses the track's velocity where it is finite and falls back to
            finite differences of the track's centres; ``"positions"`` always uses the differences
            (as STRIDE-QA estimates speed from centre displacement over time).
        ego: the ego vehicle's box for the sidedness rule and size comparisons.
    """

    future_horizons_s: tuple[float, ...] = (1.0, 2.0, 3.0)
    future_time_tolerance_s: float = 0.25
    velocity_from: str = "tracker"
    ego: EgoShape = field(default_factory=EgoShape)

    def __post_init__(self) -> None:
        horizons = tuple(float(h) for h in self.future_horizons_s)
        if not horizons or any(not np.isfinite(h) or h <= 0 for h in horizons):
            raise ValueError(
                f"future_horizons_s: must be non-empty positive seconds, got {self.future_horizons_s!r}"
            )
        if len(set(horizons)) != len(horizons):
            raise ValueError(f"future_horizons_s: duplicate horizons in {self.future_horizons_s!r}")
        object.__setattr__(self, "future_horizons_s", horizons)
        tol = self.future_time_tolerance_s
        if not np.isfinite(tol) or tol < 0:
            raise ValueError(f"future_time_tolerance_s: must be >= 0, got {tol!r}")
        if self.velocity_from not in ("tracker", "positions"):
            raise ValueError(
                f"velocity_from: must be 'tracker' or 'positions', got {self.velocity_from!r}"
            )
        if not isinstance(self.ego, EgoShape):
            raise ValueError(f"ego: expected an EgoShape, got {type(self.ego).__name__}")


def _clock(bearing: np.ndarray) -> np.ndarray:
    """int8 clock hours of bearings in degrees; 0 where the bearing is NaN (an absent state)."""
    finite = np.isfinite(bearing)
    hours = clock_from_bearing(np.where(finite, bearing, 0.0))
    return np.where(finite, hours, 0).astype(np.int8)


def _horizon_tag(horizon_s: float) -> str:
    return f"{horizon_s:g}s"


@dataclass
class ObjectAttributes:
    """Columnar attributes, one row per (frame, object), rows sorted by (frame_index, track_id).

    All positions, headings and velocities are in the ego frame of the row's own frame.

    Attributes:
        frame_index: (N,) int32 frame of the row, index into the clip's frames.
        time_s: (N,) seconds of that frame (as passed in).
        track_id: (N,) int64.
        label: (N,) int16 index into ``DETECTION_CLASSES``; score: (N,) float32.
        x_ego_m, y_ego_m, z_ego_m: (N,) box centre in the ego frame, metres.
        yaw_ego_rad: (N,) box heading in the ego frame, radians in (-pi, pi].
        distance_m: (N,) ground-plane distance from the ego origin; distance_3d_m: (N,) 3D.
        bearing_deg: (N,) in (-180, 180]; clock: (N,) int8 1..12.
        is_left, is_right, is_front, is_behind: (N,) bool, MetaVQA's all-vertices rule against the
            ego box (see :func:`sidedness_all_vertices`); at most one of left/right and of
            front/behind is true, and all four may be false (an object beside the ego's bumper).
        relative_heading_deg: (N,) box heading relative to the ego's heading, (-180, 180].
        width_m, length_m, height_m, footprint_m2 (w*l), volume_m3 (w*l*h): (N,).
        volume_ratio_to_ego: (N,) object volume / ego volume; is_larger_than_ego: (N,) bool.
        vx_ego_mps, vy_ego_mps: (N,) the object's velocity over ground, in ego axes, m/s; NaN where
            unknown (a single observation and no tracker velocity).
        speed_mps: (N,) ground-plane speed; velocity_from_positions: (N,) bool, True where the
            velocity came from finite differences of the track rather than from the tracker.
        ego_speed_mps: (N,) ego speed at the row's frame, from finite differences of the ego poses.
        ego_x_clip_m, ego_y_clip_m, ego_yaw_clip_rad: (N,) the ego pose of the row's frame in the
            clip frame (the ego frame of the clip's first frame, ground plane): it places a
            track's ego-frame positions and headings of different frames in one frame (motion
            questions: turns, lane changes) without global, identifying coordinates.
        future_horizons_s: the K look-ahead times, seconds.
        future_present: (N, K) bool, the track has the object at ``t + h`` (never extrapolated).
        future_frame_index: (N, K) int32 frame of the future state, -1 where absent.
        future_distance_m, future_bearing_deg: (N, K) the object relative to the ego *at that future
            time* (its ego frame then), NaN where absent; future_clock: (N, K) int8, 0 where absent.
        future_speed_mps, future_ego_speed_mps: (N, K) agent and ego speed then, NaN where absent.
        filled_gap: (N,) int16, 0 where the tracker observed the object at this frame, otherwise
            the length in keyframes of the gap the refine stage filled in around this row
            (:func:`autolabel.refine.filled_rows.filled_gap`); all 0 without refinement, and in
            files written before the column existed.
    """

    frame_index: np.ndarray
    time_s: np.ndarray
    track_id: np.ndarray
    label: np.ndarray
    score: np.ndarray
    x_ego_m: np.ndarray
    y_ego_m: np.ndarray
    z_ego_m: np.ndarray
    yaw_ego_rad: np.ndarray
    distance_m: np.ndarray
    distance_3d_m: np.ndarray
    bearing_deg: np.ndarray
    clock: np.ndarray
    is_left: np.ndarray
    is_right: np.ndarray
    is_front: np.ndarray
    is_behind: np.ndarray
    relative_heading_deg: np.ndarray
    width_m: np.ndarray
    length_m: np.ndarray
    height_m: np.ndarray
    footprint_m2: np.ndarray
    volume_m3: np.ndarray
    volume_ratio_to_ego: np.ndarray
    is_larger_than_ego: np.ndarray
    vx_ego_mps: np.ndarray
    vy_ego_mps: np.ndarray
    speed_mps: np.ndarray
    velocity_from_positions: np.ndarray
    ego_speed_mps: np.ndarray
    ego_x_clip_m: np.ndarray
    ego_y_clip_m: np.ndarray
    ego_yaw_clip_rad: np.ndarray
    future_horizons_s: tuple[float, ...]
    future_present: np.ndarray
    future_frame_index: np.ndarray
    future_distance_m: np.ndarray
    future_bearing_deg: np.ndarray
    future_clock: np.ndarray
    future_speed_mps: np.ndarray
    future_ego_speed_mps: np.ndarray
    filled_gap: np.ndarray = None  # type: ignore[assignment]

    _FUTURE = (
        "future_present",
        "future_frame_index",
        "future_distance_m",
        "future_bearing_deg",
        "future_clock",
        "future_speed_mps",
        "future_ego_speed_mps",
    )

    def __post_init__(self) -> None:
        if self.filled_gap is None:
            self.filled_gap = np.zeros(len(self.frame_index), np.int16)

    def __len__(self) -> int:
        return len(self.frame_index)

    def _row_columns(self) -> list[str]:
        return _row_column_names()

    @property
    def class_name(self) -> np.ndarray:
        """(N,) detection class names."""
        return np.asarray(DETECTION_CLASSES, dtype=object)[self.label]

    def _derived(self, name: str, columns: tuple[str, ...], compute: Callable[[], Any]) -> Any:
        """``compute()``, kept on the instance while the named columns are the same arrays
        (QA asks a thousand times per clip, on the attributes and their perturbed copies;
        a column replaced by another array recomputes)."""
        sources = tuple(getattr(self, c) for c in columns)
        cached = self.__dict__.get(name)
        if cached is not None and all(a is b for a, b in zip(cached[0], sources, strict=True)):
            return cached[1]
        value = compute()
        self.__dict__[name] = (sources, value)
        return value

    def _row_keys(self) -> tuple[np.ndarray, np.ndarray]:
        """The sorted track ids and each row's (frame, track rank) key of ``row_of``."""

        def keys() -> tuple[np.ndarray, np.ndarray]:
            uniq = np.unique(self.track_id)
            # Rows are sorted by (frame, track id), so (frame, rank of track id) is a sorted key.
            rank = np.searchsorted(uniq, self.track_id)
            return uniq, self.frame_index.astype(np.int64) * (len(uniq) + 1) + rank

        return self._derived("_row_keys_cache", ("frame_index", "track_id"), keys)

    def frame_times(self) -> tuple[np.ndarray, np.ndarray]:
        """(F,) frame indices that have rows and (F,) their times, seconds, sorted by frame
        (read-only arrays)."""

        def times() -> tuple[np.ndarray, np.ndarray]:
            frames, first = np.unique(np.asarray(self.frame_index, np.int64), return_index=True)
            at = np.asarray(self.time_s, dtype=np.float64)[first]
            frames.setflags(write=False)
            at.setflags(write=False)
            return frames, at

        return self._derived("_frame_times_cache", ("frame_index", "time_s"), times)

    def row_of(self, frame_index: np.ndarray, track_id: np.ndarray) -> np.ndarray:
        """Row index of each (frame_index, track_id) pair, arrays of equal shape; -1 where absent."""
        fi = np.asarray(frame_index, dtype=np.int64)
        tid = np.asarray(track_id, dtype=np.int64)
        if fi.shape != tid.shape:
            raise ValueError(f"frame_index {fi.shape} and track_id {tid.shape} differ in shape")
        uniq, keys = self._row_keys()
        if len(uniq) == 0:
            return np.full(fi.shape, -1, dtype=np.int64)
        stride = len(uniq) + 1
        rank = np.searchsorted(uniq, tid)
        known = uniq[np.minimum(rank, len(uniq) - 1)] == tid
        query = fi * stride + rank
        pos = np.minimum(np.searchsorted(keys, query), len(keys) - 1)
        found = known & (keys[pos] == query)
        return np.where(found, pos, -1)

    def to_arrow(self):
        """A ``pyarrow.Table``: one column per row attribute, future columns as ``future_<h>s_<name>``.

        The horizons are stored in the schema metadata (``future_horizons_s``) as well.
        """
        import pyarrow as pa

        columns = {name: getattr(self, name) for name in self._row_columns()}
        columns["class_name"] = self.class_name.astype(str)
        for k, horizon in enumerate(self.future_horizons_s):
            tag = _horizon_tag(horizon)
            for name in self._FUTURE:
                columns[name.replace("future_", f"future_{tag}_", 1)] = getattr(self, name)[:, k]
        table = pa.table({k: pa.array(v) for k, v in columns.items()})
        meta = {b"future_horizons_s": ",".join(repr(h) for h in self.future_horizons_s).encode()}
        return table.replace_schema_metadata(meta)

    def write_parquet(self, path: str | Path) -> Path:
        """Write :meth:`to_arrow` as Parquet atomically (temp file, then ``os.replace``)."""
        import pyarrow.parquet as pq

        buffer = io.BytesIO()
        pq.write_table(self.to_arrow(), buffer, compression="zstd")
        return atomic_write_bytes(path, buffer.getvalue())

    @classmethod
    def read_parquet(cls, path: str | Path) -> ObjectAttributes:
        """Read a file written by :meth:`write_parquet`; errors name the file and the missing column."""
        import pyarrow.parquet as pq

        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: attributes file not found")
        table = pq.read_table(path)
        meta = table.schema.metadata or {}
        if b"future_horizons_s" not in meta:
            raise ValueError(f"{path}: no future_horizons_s in the schema metadata")
        horizons = tuple(float(h) for h in meta[b"future_horizons_s"].decode().split(","))

        def column(name: str) -> np.ndarray:
            if name not in table.column_names:
                raise ValueError(f"{path}: missing column {name!r}")
            return table.column(name).to_numpy(zero_copy_only=False)

        names = _row_column_names()
        if "filled_gap" not in table.column_names:  # written before refinement recorded it
            names.remove("filled_gap")
        kwargs = {name: column(name) for name in names}
        for name in cls._FUTURE:
            per_h = [
                column(name.replace("future_", f"future_{_horizon_tag(h)}_", 1)) for h in horizons
            ]
            kwargs[name] = np.stack(per_h, axis=1) if per_h else np.zeros((len(table), 0))
        return cls(future_horizons_s=horizons, **kwargs)


def _row_column_names() -> list[str]:
    return [
        f.name
        for f in fields(ObjectAttributes)
        if f.name != "future_horizons_s" and f.name not in ObjectAttributes._FUTURE
    ]


def sidedness_all_vertices(
    corners_a_xy: np.ndarray, corners_b_xy: np.ndarray, forward_xy: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Where box B lies relative to box A by MetaVQA's all-vertices rule (appendix A.1).

    MetaVQA (seed 004, A.1, "Relative Spatial Relationships", Fig. 9): with the reference vector V
    as the front direction, find the leftmost and rightmost vertices of A; B is "left" of A if all
    vertices of B are to the left of A's leftmost vertex, "right" if all are to the right of A's
    rightmost vertex, otherwise neither. Front/back is decided the same way with V rotated 90 deg
    counter-clockwise: B is "front" if all its vertices are ahead of A's frontmost vertex, "behind"
    if all are behind A's rearmost vertex. V is the ego vehicle's heading. Comparisons are strict,
    so touching boxes are neither. The rule is symmetric: B left of A exactly when A right of B.

    Args:
        corners_a_xy: (N, P, 2) vertices of the A boxes (any number of vertices; footprint corners
            suffice, height does not enter), in a frame shared with B and ``forward_xy``.
        corners_b_xy: (N, Q, 2) vertices of the B boxes.
        forward_xy: (2,) or (N, 2) reference direction V (need not be unit length).

    Returns:
        (is_left, is_right, is_front, is_behind), each (N,) bool: where B lies relative to A.
    """
    a = np.asarray(corners_a_xy, dtype=np.float64)
    b = np.asarray(corners_b_xy, dtype=np.float64)
    fwd = np.broadcast_to(np.asarray(forward_xy, dtype=np.float64), (len(a), 2))
    left = np.stack([-fwd[:, 1], fwd[:, 0]], axis=1)  # V rotated +90 deg
    a_along, b_along = np.einsum("npk,nk->np", a, fwd), np.einsum("nqk,nk->nq", b, fwd)
    a_side, b_side = np.einsum("npk,nk->np", a, left), np.einsum("nqk,nk->nq", b, left)
    is_left = b_side.min(axis=1) > a_side.max(axis=1)
    is_right = b_side.max(axis=1) < a_side.min(axis=1)
    is_front = b_along.min(axis=1) > a_along.max(axis=1)
    is_behind = b_along.max(axis=1) < a_along.min(axis=1)
    return is_left, is_right, is_front, is_behind


def bev_corners(
    x_m: np.ndarray, y_m: np.ndarray, yaw_rad: np.ndarray, length_m: np.ndarray, width_m: np.ndarray
) -> np.ndarray:
    """(N, 4, 2) footprint corners of boxes (front-left, front-right, rear-right, rear-left)."""
    signs = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, -1.0], [-1.0, 1.0]])
    local_x = signs[None, :, 0] * (0.5 * np.asarray(length_m))[:, None]
    local_y = signs[None, :, 1] * (0.5 * np.asarray(width_m))[:, None]
    c, s = np.cos(yaw_rad)[:, None], np.sin(yaw_rad)[:, None]
    return np.stack(
        [
            c * local_x - s * local_y + np.asarray(x_m)[:, None],
            s * local_x + c * local_y + np.asarray(y_m)[:, None],
        ],
        axis=-1,
    )


def _ego_poses(
    global_SE3_ego: Sequence[SE3] | np.ndarray, n_frames: int
) -> tuple[np.ndarray, np.ndarray]:
    """(F, 3, 3) rotations and (F, 3) translations of the ego poses."""
    if isinstance(global_SE3_ego, np.ndarray):
        mats = np.asarray(global_SE3_ego, dtype=np.float64)
        if mats.shape != (n_frames, 4, 4):
            raise ValueError(f"global_SE3_ego: expected ({n_frames}, 4, 4), got {mats.shape}")
        rot, trans = mats[:, :3, :3], mats[:, :3, 3]
    else:
        poses = list(global_SE3_ego)
        if len(poses) != n_frames:
            raise ValueError(f"global_SE3_ego: {len(poses)} poses for {n_frames} frames")
        bad = [i for i, p in enumerate(poses) if not isinstance(p, SE3)]
        if bad:
            raise ValueError(
                f"global_SE3_ego[{bad[0]}]: expected an SE3, got {type(poses[bad[0]]).__name__}"
            )
        rot = np.stack([p.rotation for p in poses]) if poses else np.zeros((0, 3, 3))
        trans = np.stack([p.translation for p in poses]) if poses else np.zeros((0, 3))
    if not (np.all(np.isfinite(rot)) and np.all(np.isfinite(trans))):
        raise ValueError("global_SE3_ego: non-finite pose values")
    return rot, trans


def _finite_difference(values: np.ndarray, present: np.ndarray, time_s: np.ndarray) -> np.ndarray:
    """Time derivative along axis 0 of (F, ..., D) values observed where ``present`` (F, ...).

    Central difference where both neighbouring frames are observed, else a one-sided difference to
    the observed neighbour, else NaN. Only adjacent frames are used, so a gap is never bridged.
    """
    out = np.full(values.shape, np.nan)
    if len(values) < 2:
        return out
    shape = (-1,) + (1,) * (values.ndim - 1)
    dt_fwd = (time_s[1:] - time_s[:-1]).reshape(shape)
    fwd = np.full(values.shape, np.nan)
    fwd[:-1] = (values[1:] - values[:-1]) / dt_fwd
    bwd = np.full(values.shape, np.nan)
    bwd[1:] = fwd[:-1]
    cen = np.full(values.shape, np.nan)
    dt_cen = (time_s[2:] - time_s[:-2]).reshape(shape)
    cen[1:-1] = (values[2:] - values[:-2]) / dt_cen
    has_next = np.zeros(present.shape, bool)
    has_next[:-1] = present[1:] & present[:-1]
    has_prev = np.zeros(present.shape, bool)
    has_prev[1:] = present[:-1] & present[1:]
    both, only_next, only_prev = has_next & has_prev, has_next & ~has_prev, has_prev & ~has_next
    out[both] = cen[both]
    out[only_next] = fwd[only_next]
    out[only_prev] = bwd[only_prev]
    return out


def _validate_tracks(tracks: Sequence[Boxes3D], n_frames: int) -> None:
    if len(tracks) != n_frames:
        raise ValueError(f"tracks: {len(tracks)} frames of boxes for {n_frames} timestamps")
    for f, boxes in enumerate(tracks):
        if not isinstance(boxes, Boxes3D):
            raise ValueError(f"tracks[{f}]: expected Boxes3D, got {type(boxes).__name__}")
        if boxes.frame != "global":
            raise ValueError(f"tracks[{f}]: boxes must be in the global frame, got {boxes.frame!r}")
        if len(boxes) and boxes.track_id.min() < 0:
            raise ValueError(f"tracks[{f}]: untracked boxes (track_id -1); attributes need tracks")
        if len(np.unique(boxes.track_id)) != len(boxes):
            raise ValueError(f"tracks[{f}]: a track id occurs more than once in the frame")


def _rotate_transposed(rot: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``R^T v`` for stacks (..., 3, 3) and (..., 3), summed in a fixed order.

    ``np.einsum`` may sum these three products in a different order depending on how its
    operands happen to be aligned in memory, which changes the last bit between two runs of the
    same input; written out, the result is the same bytes every time.
    """
    return (
        rot[..., 0, :] * v[..., 0, None]
        + rot[..., 1, :] * v[..., 1, None]
        + rot[..., 2, :] * v[..., 2, None]
    )


def compute_attributes(
    timestamps_s: np.ndarray,
    global_SE3_ego: Sequence[SE3] | np.ndarray,
    tracks: Sequence[Boxes3D],
    config: AttributeConfig | None = None,
) -> ObjectAttributes:
    """Ego-frame attributes of every tracked object in every frame of a clip.

    Args:
        timestamps_s: (F,) frame times, seconds, strictly increasing.
        global_SE3_ego: F ego poses, a list of ``SE3`` or an (F, 4, 4) array.
        tracks: F ``Boxes3D`` in the global frame with ``track_id`` set (>= 0, unique per frame);
            ``velocity_mps`` is the tracker's global-frame velocity (NaN where unknown).
        config: settings; the defaults when None.

    Returns:
        One row per (frame, object), sorted by (frame_index, track_id); see ``ObjectAttributes``.
    """
    cfg = config or AttributeConfig()
    t = np.asarray(timestamps_s, dtype=np.float64)
    if t.ndim != 1 or len(t) == 0:
        raise ValueError(f"timestamps_s: expected shape (F,) with F >= 1, got {t.shape}")
    if not np.all(np.isfinite(t)) or np.any(np.diff(t) <= 0):
        raise ValueError("timestamps_s: must be finite and strictly increasing")
    n_frames = len(t)
    rot, trans = _ego_poses(global_SE3_ego, n_frames)
    _validate_tracks(tracks, n_frames)

    counts = np.array([len(b) for b in tracks], dtype=np.int64)
    boxes = Boxes3D.concatenate(list(tracks)) if n_frames else Boxes3D.empty()
    frame_of_row = np.repeat(np.arange(n_frames), counts)
    order = np.lexsort((boxes.track_id, frame_of_row))
    boxes = boxes[order]
    frame_of_row = frame_of_row[order]
    n = len(boxes)

    uniq_tracks, col = np.unique(boxes.track_id, return_inverse=True)
    n_tracks = len(uniq_tracks)
    pivot = np.full((n_frames, n_tracks), -1, dtype=np.int64)
    pivot[frame_of_row, col] = np.arange(n)
    present = pivot >= 0

    # Global -> ego of the row's frame: p_ego = R^T (p_global - t).
    rot_row, trans_row = rot[frame_of_row], trans[frame_of_row]
    center_ego = _rotate_transposed(rot_row, boxes.center_m - trans_row)
    heading_global = np.stack([np.cos(boxes.yaw_rad), np.sin(boxes.yaw_rad), np.zeros(n)], axis=1)
    heading_ego = _rotate_transposed(rot_row, heading_global)
    yaw_ego = wrap_angle(stable_math.arctan2(heading_ego[:, 1], heading_ego[:, 0]))

    # Velocity over ground in the global frame: the tracker's, else the track's displacement.
    centers_pivot = np.full((n_frames, n_tracks, 3), np.nan)
    centers_pivot[frame_of_row, col] = boxes.center_m
    vel_from_positions = _finite_difference(centers_pivot, present, t)[frame_of_row, col, :2]
    tracker_ok = np.all(np.isfinite(boxes.velocity_mps), axis=1)
    use_tracker = tracker_ok if cfg.velocity_from == "tracker" else np.zeros(n, bool)
    vel_global = np.where(use_tracker[:, None], boxes.velocity_mps, vel_from_positions)
    vel_ego = _rotate_transposed(rot_row, np.concatenate([vel_global, np.zeros((n, 1))], axis=1))[
        :, :2
    ]
    speed = np.hypot(vel_global[:, 0], vel_global[:, 1])

    ego_vel = _finite_difference(trans[:, :2], np.ones(n_frames, bool), t)
    # Ego pose in the clip frame (the first frame's ego frame): p_clip = R0^T (t_f - t0).
    ego_xy_clip = np.einsum("ji,fj->fi", rot[0], trans - trans[0])[:, :2]
    rot_clip = np.einsum("ji,fjk->fik", rot[0], rot)
    ego_yaw_clip = stable_math.arctan2(rot_clip[:, 1, 0], rot_clip[:, 0, 0])
    ego_speed_frame = np.hypot(ego_vel[:, 0], ego_vel[:, 1])

    # Sidedness against the ego box, MetaVQA's all-vertices rule with V = ego forward (+x).
    w, length, h = boxes.size_wlh_m[:, 0], boxes.size_wlh_m[:, 1], boxes.size_wlh_m[:, 2]
    corners = bev_corners(center_ego[:, 0], center_ego[:, 1], yaw_ego, length, w)
    ego_corners = np.broadcast_to(cfg.ego.bev_corners(), (n, 4, 2))
    is_left, is_right, is_front, is_behind = sidedness_all_vertices(
        ego_corners, corners, np.array([1.0, 0.0])
    )

    distance = np.hypot(center_ego[:, 0], center_ego[:, 1])
    bearing = bearing_deg(center_ego[:, :2])
    volume = w * length * h

    # Future states: the frame nearest t + h within tolerance, where the same track is observed.
    horizons = np.asarray(cfg.future_horizons_s)
    target = t[:, None] + horizons[None, :]  # (F, K)
    right = np.clip(np.searchsorted(t, target), 0, n_frames - 1)
    left = np.clip(right - 1, 0, None)
    nearest = np.where(np.abs(t[left] - target) <= np.abs(t[right] - target), left, right)
    frame_ok = np.abs(t[nearest] - target) <= cfg.future_time_tolerance_s + 1e-9
    future_frame_row = nearest[frame_of_row]  # (N, K)
    future_row = pivot[future_frame_row, col[:, None]]
    future_present = frame_ok[frame_of_row] & (future_row >= 0)
    future_row = np.where(future_present, future_row, 0)
    fut_frame = future_frame_row
    center_future_ego = _rotate_transposed(
        rot[fut_frame], boxes.center_m[future_row] - trans[fut_frame]
    )
    future_distance = np.where(
        future_present, np.hypot(center_future_ego[..., 0], center_future_ego[..., 1]), np.nan
    )
    future_bearing = np.where(future_present, bearing_deg(center_future_ego[..., :2]), np.nan)

    return ObjectAttributes(
        frame_index=frame_of_row.astype(np.int32),
        time_s=t[frame_of_row],
        track_id=boxes.track_id.copy(),
        label=boxes.label.copy(),
        score=boxes.score.copy(),
        x_ego_m=center_ego[:, 0],
        y_ego_m=center_ego[:, 1],
        z_ego_m=center_ego[:, 2],
        yaw_ego_rad=yaw_ego,
        distance_m=distance,
        distance_3d_m=np.linalg.norm(center_ego, axis=1),
        bearing_deg=bearing,
        clock=_clock(bearing),
        is_left=is_left,
        is_right=is_right,
        is_front=is_front,
        is_behind=is_behind,
        relative_heading_deg=np.degrees(yaw_ego),
        width_m=w.copy(),
        length_m=length.copy(),
        height_m=h.copy(),
        footprint_m2=w * length,
        volume_m3=volume,
        volume_ratio_to_ego=volume / cfg.ego.volume_m3,
        is_larger_than_ego=volume > cfg.ego.volume_m3,
        vx_ego_mps=vel_ego[:, 0],
        vy_ego_mps=vel_ego[:, 1],
        speed_mps=speed,
        velocity_from_positions=~use_tracker & np.all(np.isfinite(vel_from_positions), axis=1),
        ego_speed_mps=ego_speed_frame[frame_of_row],
        ego_x_clip_m=ego_xy_clip[frame_of_row, 0],
        ego_y_clip_m=ego_xy_clip[frame_of_row, 1],
        ego_yaw_clip_rad=ego_yaw_clip[frame_of_row],
        future_horizons_s=tuple(float(h) for h in horizons),
        future_present=future_present,
        future_frame_index=np.where(future_present, fut_frame, -1).astype(np.int32),
        future_distance_m=future_distance,
        future_bearing_deg=future_bearing,
        future_clock=_clock(future_bearing),
        future_speed_mps=np.where(future_present, speed[future_row], np.nan),
        future_ego_speed_mps=np.where(future_present, ego_speed_frame[fut_frame], np.nan),
    )


@dataclass
class PairRelations:
    """Relations of object B to object A in one frame, for M pairs, in that frame's ego frame.

    Attributes:
        row_a, row_b: (M,) rows of ``ObjectAttributes``.
        distance_m: (M,) ground-plane distance between the box centres; distance_3d_m: (M,) 3D.
        bearing_deg: (M,) direction of B seen from A, in ego axes (0 = the ego's forward).
        clock: (M,) int8 clock of ``bearing_deg`` (12 = the ego's forward).
        bearing_from_a_heading_deg: (M,) direction of B relative to A's own heading.
        clock_from_a: (M,) int8 clock from A's viewpoint (12 = where A is heading).
        b_is_left_of_a, b_is_right_of_a, b_is_front_of_a, b_is_behind_a: (M,) bool, MetaVQA's
            all-vertices rule with V = the ego's heading (:func:`sidedness_all_vertices`).
        relative_heading_deg: (M,) B's heading minus A's heading, (-180, 180].
        volume_ratio: (M,) volume of A / volume of B; a_is_bigger (volume), a_is_taller (h),
            a_is_longer (l), a_is_wider (w): (M,) bool, strict comparisons.
    """

    row_a: np.ndarray
    row_b: np.ndarray
    distance_m: np.ndarray
    distance_3d_m: np.ndarray
    bearing_deg: np.ndarray
    clock: np.ndarray
    bearing_from_a_heading_deg: np.ndarray
    clock_from_a: np.ndarray
    b_is_left_of_a: np.ndarray
    b_is_right_of_a: np.ndarray
    b_is_front_of_a: np.ndarray
    b_is_behind_a: np.ndarray
    relative_heading_deg: np.ndarray
    volume_ratio: np.ndarray
    a_is_bigger: np.ndarray
    a_is_taller: np.ndarray
    a_is_longer: np.ndarray
    a_is_wider: np.ndarray


def pairwise_relations(
    attrs: ObjectAttributes,
    frame_index: np.ndarray,
    track_a: np.ndarray,
    track_b: np.ndarray,
) -> PairRelations:
    """Relations of B to A for many (frame, A, B) triples at once.

    Args:
        attrs: the clip's attributes.
        frame_index, track_a, track_b: (M,) frame and the two track ids of each pair.

    Raises:
        ValueError: naming the first (frame, track) that has no row in ``attrs``.
    """
    fi = np.atleast_1d(np.asarray(frame_index, dtype=np.int64))
    ta = np.atleast_1d(np.asarray(track_a, dtype=np.int64))
    tb = np.atleast_1d(np.asarray(track_b, dtype=np.int64))
    fi, ta, tb = np.broadcast_arrays(fi, ta, tb)
    row_a, row_b = attrs.row_of(fi, ta), attrs.row_of(fi, tb)
    for rows, tracks in ((row_a, ta), (row_b, tb)):
        missing = np.flatnonzero(rows < 0)
        if len(missing):
            i = missing[0]
            raise ValueError(
                f"pairwise_relations: no object with track {tracks[i]} in frame {fi[i]}"
            )

    xa, ya, za = attrs.x_ego_m[row_a], attrs.y_ego_m[row_a], attrs.z_ego_m[row_a]
    xb, yb, zb = attrs.x_ego_m[row_b], attrs.y_ego_m[row_b], attrs.z_ego_m[row_b]
    dx, dy, dz = xb - xa, yb - ya, zb - za
    yaw_a, yaw_b = attrs.yaw_ego_rad[row_a], attrs.yaw_ego_rad[row_b]
    bearing = bearing_deg(np.stack([dx, dy], axis=1))
    # The same offset expressed in A's own axes (rotate by -yaw_a).
    ca, sa = np.cos(yaw_a), np.sin(yaw_a)
    bearing_from_a = bearing_deg(np.stack([ca * dx + sa * dy, -sa * dx + ca * dy], axis=1))
    corners_a = bev_corners(xa, ya, yaw_a, attrs.length_m[row_a], attrs.width_m[row_a])
    corners_b = bev_corners(xb, yb, yaw_b, attrs.length_m[row_b], attrs.width_m[row_b])
    left, right, front, behind = sidedness_all_vertices(corners_a, corners_b, np.array([1.0, 0.0]))
    vol_a, vol_b = attrs.volume_m3[row_a], attrs.volume_m3[row_b]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = vol_a / vol_b
    return PairRelations(
        row_a=row_a,
        row_b=row_b,
        distance_m=np.hypot(dx, dy),
        distance_3d_m=np.sqrt(dx * dx + dy * dy + dz * dz),
        bearing_deg=bearing,
        clock=_clock(bearing),
        bearing_from_a_heading_deg=bearing_from_a,
        clock_from_a=_clock(bearing_from_a),
        b_is_left_of_a=left,
        b_is_right_of_a=right,
        b_is_front_of_a=front,
        b_is_behind_a=behind,
        relative_heading_deg=np.degrees(wrap_angle(yaw_b - yaw_a)),
        volume_ratio=ratio,
        a_is_bigger=vol_a > vol_b,
        a_is_taller=attrs.height_m[row_a] > attrs.height_m[row_b],
        a_is_longer=attrs.length_m[row_a] > attrs.length_m[row_b],
        a_is_wider=attrs.width_m[row_a] > attrs.width_m[row_b],
    )
