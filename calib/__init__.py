"""Coordinate frames, rigid transforms, camera projection and sensor-rig descriptions.

Frames follow nuScenes: ``global`` (map), ``ego`` (x forward, y left, z up, at the ego pose),
``lidar`` and ``camera`` (x right, y down, z along the optical axis). Transforms are named
``a_SE3_b``: they map coordinates in frame ``b`` to frame ``a``.
"""

from calib.rotation import (
    quat_wxyz_from_rotation,
    quat_wxyz_from_yaw,
    rotation_from_quat_wxyz,
    rotation_from_yaw,
    yaw_from_rotation,
)
from calib.se3 import SE3

__all__ = [
    "SE3",
    "quat_wxyz_from_rotation",
    "quat_wxyz_from_yaw",
    "rotation_from_quat_wxyz",
    "rotation_from_yaw",
    "yaw_from_rotation",
]
