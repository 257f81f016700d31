"""Rigid transforms in 3D, named by the frames they connect (``ego_SE3_lidar`` maps lidar to ego)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calib.rotation import quat_wxyz_from_rotation, rotation_from_quat_wxyz, yaw_from_rotation


@dataclass(frozen=True)
class SE3:
    """A rigid transform ``a_SE3_b``: ``p_a = rotation @ p_b + translation``.

    Attributes:
        rotation: (3, 3) rotation matrix.
        translation: (3,) translation in metres, the origin of ``b`` expressed in ``a``.
    """

    rotation: np.ndarray
    translation: np.ndarray

    def __post_init__(self) -> None:
        rot = np.asarray(self.rotation, dtype=np.float64)
        trans = np.asarray(self.translation, dtype=np.float64)
        if rot.shape != (3, 3) or trans.shape != (3,):
            raise ValueError(
                f"SE3 needs a (3,3) rotation and (3,) translation, got {rot.shape}, {trans.shape}"
            )
        object.__setattr__(self, "rotation", rot)
        object.__setattr__(self, "translation", trans)

    @classmethod
    def identity(cls) -> SE3:
        return cls(np.eye(3), np.zeros(3))

    @classmethod
    def from_quat_wxyz(cls, quat_wxyz: np.ndarray, translation: np.ndarray) -> SE3:
        """From a nuScenes-style record: ``rotation`` quaternion [w, x, y, z] and ``translation``."""
        return cls(rotation_from_quat_wxyz(quat_wxyz), translation)

    @classmethod
    def from_matrix(cls, matrix: np.ndarray) -> SE3:
        """From a (4, 4) homogeneous matrix."""
        m = np.asarray(matrix, dtype=np.float64)
        if m.shape != (4, 4):
            raise ValueError(f"expected a (4,4) matrix, got {m.shape}")
        return cls(m[:3, :3], m[:3, 3])

    def as_matrix(self) -> np.ndarray:
        """(4, 4) homogeneous matrix."""
        m = np.eye(4)
        m[:3, :3] = self.rotation
        m[:3, 3] = self.translation
        return m

    @property
    def quat_wxyz(self) -> np.ndarray:
        """(4,) unit quaternion [w, x, y, z] of the rotation, w >= 0."""
        return quat_wxyz_from_rotation(self.rotation)

    @property
    def yaw_rad(self) -> float:
        """Heading of frame ``b``'s x axis in frame ``a``'s xy plane, radians."""
        return float(yaw_from_rotation(self.rotation))

    def compose(self, b_SE3_c: SE3) -> SE3:
        """``a_SE3_b.compose(b_SE3_c)`` is ``a_SE3_c``."""
        return SE3(
            self.rotation @ b_SE3_c.rotation, self.rotation @ b_SE3_c.translation + self.translation
        )

    def inverse(self) -> SE3:
        """``a_SE3_b.inverse()`` is ``b_SE3_a``."""
        rot_t = self.rotation.T
        return SE3(rot_t, -rot_t @ self.translation)

    def transform_points(self, points_b: np.ndarray) -> np.ndarray:
        """Map points (..., 3) from frame ``b`` to frame ``a``."""
        pts = np.asarray(points_b, dtype=np.float64)
        # In place on the product: the same sums, without a second (..., 3) temporary (the
        # translation's pass cost as much as the rotation's on a sweep of 10^5 points).
        out = pts @ self.rotation.T
        out += self.translation
        return out

    def rotate_vectors(self, vectors_b: np.ndarray) -> np.ndarray:
        """Map free vectors (..., 3) such as velocities from ``b`` to ``a`` (no translation)."""
        return np.asarray(vectors_b, dtype=np.float64) @ self.rotation.T
