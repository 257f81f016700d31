"""One struct of arrays for the 3D boxes of a frame (or of a whole clip, with a frame index)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

from autolabel.classes import DETECTION_CLASSES
from calib import stable_math
from calib.rotation import wrap_angle
from calib.se3 import SE3

#: Unit-cube corner signs in the nuScenes ``Box.corners()`` order: 0-3 the front face (+x, along
#: the length), 4-7 the rear face; within each face: left-top, right-top, right-bottom, left-bottom.
CORNER_SIGNS = np.array(
    [
        [1, 1, 1], [1, -1, 1], [1, -1, -1], [1, 1, -1],
        [-1, 1, 1], [-1, -1, 1], [-1, -1, -1], [-1, 1, -1],
    ],
    dtype=np.float64,
)  # fmt: skip
#: The 12 edges of a box as pairs of corner indices.
BOX_EDGES = np.array(
    [[0, 1], [1, 2], [2, 3], [3, 0], [4, 5], [5, 6], [6, 7], [7, 4], [0, 4], [1, 5], [2, 6], [3, 7]]
)


def _as(arr, dtype, shape_tail: tuple[int, ...], n: int | None, name: str) -> np.ndarray:
    out = np.ascontiguousarray(arr, dtype=dtype)
    if (
        out.ndim != 1 + len(shape_tail)
        or out.shape[1:] != shape_tail
        or (n is not None and len(out) != n)
    ):
        raise ValueError(
            f"Boxes3D.{name}: expected shape ({n if n is not None else 'N'}, {shape_tail}), got {out.shape}"
        )
    return out


@dataclass
class Boxes3D:
    """N oriented 3D boxes in one frame, as parallel arrays (index with a mask or an index array).

    Attributes:
        center_m: (N, 3) box centres (gravity centre, as nuScenes), metres, in ``frame``.
        size_wlh_m: (N, 3) width (y extent), length (x extent), height (z extent), metres.
        yaw_rad: (N,) heading of the box's x (length) axis about +z, radians in ``frame``.
        velocity_mps: (N, 2) velocity in ``frame``'s xy plane, m/s; NaN where unknown.
        label: (N,) int index into ``DETECTION_CLASSES``.
        score: (N,) confidence in [0, 1]; 1 for ground truth.
        track_id: (N,) int64 track / instance id, -1 where not tracked.
        frame: name of the coordinate frame (``global``, ``ego``, ``lidar``), checked by transforms.
    """

    center_m: np.ndarray
    size_wlh_m: np.ndarray
    yaw_rad: np.ndarray
    velocity_mps: np.ndarray = None  # type: ignore[assignment]
    label: np.ndarray = None  # type: ignore[assignment]
    score: np.ndarray = None  # type: ignore[assignment]
    track_id: np.ndarray = None  # type: ignore[assignment]
    frame: str = field(default="global")

    def __post_init__(self) -> None:
        self.center_m = _as(self.center_m, np.float64, (3,), None, "center_m")
        n = len(self.center_m)
        self.size_wlh_m = _as(self.size_wlh_m, np.float64, (3,), n, "size_wlh_m")
        self.yaw_rad = _as(self.yaw_rad, np.float64, (), n, "yaw_rad")
        if self.velocity_mps is None:
            self.velocity_mps = np.full((n, 2), np.nan)
        self.velocity_mps = _as(self.velocity_mps, np.float64, (2,), n, "velocity_mps")
        self.label = _as(
            np.zeros(n) if self.label is None else self.label, np.int16, (), n, "label"
        )
        self.score = _as(
            np.ones(n) if self.score is None else self.score, np.float32, (), n, "score"
        )
        tid = np.full(n, -1) if self.track_id is None else self.track_id
        self.track_id = _as(tid, np.int64, (), n, "track_id")
        if n and (self.label.min() < 0 or self.label.max() >= len(DETECTION_CLASSES)):
            raise ValueError(
                f"Boxes3D.label: values must index DETECTION_CLASSES (0..{len(DETECTION_CLASSES) - 1})"
            )

    _ARRAYS = ("center_m", "size_wlh_m", "yaw_rad", "velocity_mps", "label", "score", "track_id")

    @classmethod
    def empty(cls, frame: str = "global") -> Boxes3D:
        return cls(np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0), frame=frame)

    @classmethod
    def concatenate(cls, parts: list[Boxes3D]) -> Boxes3D:
        """Stack box sets of one frame; all parts must share the coordinate frame."""
        if not parts:
            return cls.empty()
        frames = {p.frame for p in parts}
        if len(frames) != 1:
            raise ValueError(f"cannot concatenate boxes in different frames: {sorted(frames)}")
        arrays = {name: np.concatenate([getattr(p, name) for p in parts]) for name in cls._ARRAYS}
        return cls(**arrays, frame=parts[0].frame)

    def __len__(self) -> int:
        return len(self.center_m)

    def __getitem__(self, index) -> Boxes3D:
        """Boolean mask, index array or slice; always returns a ``Boxes3D``."""
        if isinstance(index, (int, np.integer)):
            index = [index]
        return Boxes3D(
            **{name: getattr(self, name)[index] for name in self._ARRAYS}, frame=self.frame
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Boxes3D) or other.frame != self.frame:
            return False
        return all(np.array_equal(getattr(self, f.name), getattr(other, f.name), equal_nan=f.name != "label" and f.name != "track_id") for f in fields(self) if f.name != "frame")  # fmt: skip

    @property
    def class_name(self) -> np.ndarray:
        """(N,) detection class names."""
        return np.asarray(DETECTION_CLASSES, dtype=object)[self.label]

    def transform(self, a_SE3_b: SE3, to_frame: str, from_frame: str | None = None) -> Boxes3D:
        """The same boxes expressed in frame ``a``; this set must be in ``from_frame`` when given.

        Centres are mapped as points, velocities as vectors, and yaw is the heading of the box's
        x axis after rotation (pitch and roll of the transform are dropped, as nuScenes does).
        """
        if from_frame is not None and from_frame != self.frame:
            raise ValueError(f"boxes are in frame {self.frame!r}, transform expects {from_frame!r}")
        heading_b = np.stack(
            [np.cos(self.yaw_rad), np.sin(self.yaw_rad), np.zeros(len(self))], axis=1
        )
        heading_a = a_SE3_b.rotate_vectors(heading_b)
        vel_b = np.concatenate([self.velocity_mps, np.zeros((len(self), 1))], axis=1)
        return Boxes3D(
            center_m=a_SE3_b.transform_points(self.center_m),
            size_wlh_m=self.size_wlh_m.copy(),
            yaw_rad=wrap_angle(stable_math.arctan2(heading_a[:, 1], heading_a[:, 0])),
            velocity_mps=a_SE3_b.rotate_vectors(vel_b)[:, :2],
            label=self.label.copy(),
            score=self.score.copy(),
            track_id=self.track_id.copy(),
            frame=to_frame,
        )

    def corners(self) -> np.ndarray:
        """(N, 8, 3) corners in ``frame``, in the nuScenes ``Box.corners()`` order (see CORNER_SIGNS)."""
        half_lwh = self.size_wlh_m[:, [1, 0, 2]] * 0.5
        local = CORNER_SIGNS[None, :, :] * half_lwh[:, None, :]
        c, s = np.cos(self.yaw_rad)[:, None], np.sin(self.yaw_rad)[:, None]
        x = c * local[..., 0] - s * local[..., 1]
        y = s * local[..., 0] + c * local[..., 1]
        return np.stack([x, y, local[..., 2]], axis=-1) + self.center_m[:, None, :]

    def bev_corners(self) -> np.ndarray:
        """(N, 4, 2) footprint corners in the xy plane (front-left, front-right, rear-right, rear-left)."""
        return self.corners()[:, [0, 1, 5, 4], :2]

    def points_inside(self, points: np.ndarray) -> np.ndarray:
        """(N, P) bool: which of the (P, 3) points (in ``frame``) lie inside each box."""
        pts = np.asarray(points, dtype=np.float64)[None, :, :] - self.center_m[:, None, :]
        c, s = np.cos(self.yaw_rad)[:, None], np.sin(self.yaw_rad)[:, None]
        local_x = c * pts[..., 0] + s * pts[..., 1]
        local_y = -s * pts[..., 0] + c * pts[..., 1]
        half = self.size_wlh_m * 0.5
        return (
            (np.abs(local_x) <= half[:, 1:2])
            & (np.abs(local_y) <= half[:, 0:1])
            & (np.abs(pts[..., 2]) <= half[:, 2:3])
        )
