"""Rotations as matrices and unit quaternions [w, x, y, z] (the nuScenes order), vectorized."""

from __future__ import annotations

import numpy as np

from calib import stable_math


def rotation_from_quat_wxyz(quat_wxyz: np.ndarray) -> np.ndarray:
    """Rotation matrices from quaternions [w, x, y, z].

    Args:
        quat_wxyz: (4,) or (N, 4); normalised here, so any non-zero scale is accepted.

    Returns:
        (3, 3) or (N, 3, 3) rotation matrices.
    """
    q = np.asarray(quat_wxyz, dtype=np.float64)
    norm = np.linalg.norm(q, axis=-1, keepdims=True)
    if np.any(norm == 0):
        raise ValueError("zero-length quaternion")
    w, x, y, z = np.moveaxis(q / norm, -1, 0)
    rot = np.stack(
        [
            1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
            2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
            2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y),
        ],
        axis=-1,
    )  # fmt: skip
    return rot.reshape(q.shape[:-1] + (3, 3))


def quat_wxyz_from_rotation(rotation: np.ndarray) -> np.ndarray:
    """Unit quaternions [w, x, y, z] with w >= 0 from rotation matrices (3, 3) or (N, 3, 3)."""
    r = np.asarray(rotation, dtype=np.float64)
    batch = r.reshape(-1, 3, 3)
    # Shepperd's method: pick the largest of w, x, y, z to divide by, for numerical stability.
    trace = np.trace(batch, axis1=1, axis2=2)
    diag = np.stack([trace, batch[:, 0, 0], batch[:, 1, 1], batch[:, 2, 2]], axis=1)
    pick = np.argmax(diag, axis=1)
    q = np.empty((len(batch), 4))
    m = batch
    for k in range(4):
        sel = pick == k
        if not np.any(sel):
            continue
        b = m[sel]
        if k == 0:
            s = np.sqrt(1.0 + trace[sel]) * 2
            q[sel] = np.stack(
                [
                    0.25 * s,
                    (b[:, 2, 1] - b[:, 1, 2]) / s,
                    (b[:, 0, 2] - b[:, 2, 0]) / s,
                    (b[:, 1, 0] - b[:, 0, 1]) / s,
                ],
                1,
            )
        elif k == 1:
            s = np.sqrt(1.0 + b[:, 0, 0] - b[:, 1, 1] - b[:, 2, 2]) * 2
            q[sel] = np.stack(
                [
                    (b[:, 2, 1] - b[:, 1, 2]) / s,
                    0.25 * s,
                    (b[:, 0, 1] + b[:, 1, 0]) / s,
                    (b[:, 0, 2] + b[:, 2, 0]) / s,
                ],
                1,
            )
        elif k == 2:
            s = np.sqrt(1.0 + b[:, 1, 1] - b[:, 0, 0] - b[:, 2, 2]) * 2
            q[sel] = np.stack(
                [
                    (b[:, 0, 2] - b[:, 2, 0]) / s,
                    (b[:, 0, 1] + b[:, 1, 0]) / s,
                    0.25 * s,
                    (b[:, 1, 2] + b[:, 2, 1]) / s,
                ],
                1,
            )
        else:
            s = np.sqrt(1.0 + b[:, 2, 2] - b[:, 0, 0] - b[:, 1, 1]) * 2
            q[sel] = np.stack([(b[:, 1, 0] - b[:, 0, 1]) / s, (b[:, 0, 2] + b[:, 2, 0]) / s, (b[:, 1, 2] + b[:, 2, 1]) / s, 0.25 * s], 1)  # fmt: skip
    q *= np.where(q[:, :1] < 0, -1.0, 1.0)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return q.reshape(r.shape[:-2] + (4,))


def rotation_from_yaw(yaw_rad: np.ndarray | float) -> np.ndarray:
    """Rotations about +z by ``yaw_rad`` (counter-clockwise seen from above): (3, 3) or (N, 3, 3)."""
    yaw = np.asarray(yaw_rad, dtype=np.float64)
    c, s = np.cos(yaw), np.sin(yaw)
    zero, one = np.zeros_like(yaw), np.ones_like(yaw)
    rot = np.stack([c, -s, zero, s, c, zero, zero, zero, one], axis=-1)
    return rot.reshape(yaw.shape + (3, 3))


def quat_wxyz_from_yaw(yaw_rad: np.ndarray | float) -> np.ndarray:
    """Quaternions [w, x, y, z] of rotations about +z: (4,) or (N, 4)."""
    half = 0.5 * np.asarray(yaw_rad, dtype=np.float64)
    zero = np.zeros_like(half)
    return np.stack([np.cos(half), zero, zero, np.sin(half)], axis=-1)


def yaw_from_rotation(rotation: np.ndarray) -> np.ndarray:
    """Heading of the rotated x axis in the xy plane, radians in (-pi, pi]: (3,3)->() or (N,3,3)->(N,).

    This is the yaw of a box whose rotation may carry small pitch and roll (as nuScenes poses do).
    """
    r = np.asarray(rotation, dtype=np.float64)
    return wrap_angle(stable_math.arctan2(r[..., 1, 0], r[..., 0, 0]))


def wrap_angle(angle_rad: np.ndarray | float) -> np.ndarray:
    """Wrap angles to (-pi, pi]."""
    a = np.asarray(angle_rad, dtype=np.float64)
    wrapped = np.mod(a + np.pi, 2 * np.pi) - np.pi
    return np.where(wrapped == -np.pi, np.pi, wrapped)
