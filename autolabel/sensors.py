"""Calibration records of the LiDAR and the cameras of a rig."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calib import stable_math
from calib.bearing import bearing_deg
from calib.se3 import SE3

#: The six nuScenes camera channels, clockwise from the front as the rig sees them.
CAMERA_CHANNELS: tuple[str, ...] = (
    "CAM_FRONT",
    "CAM_FRONT_RIGHT",
    "CAM_BACK_RIGHT",
    "CAM_BACK",
    "CAM_BACK_LEFT",
    "CAM_FRONT_LEFT",
)
LIDAR_CHANNEL = "LIDAR_TOP"


@dataclass(frozen=True)
class CameraCalibration:
    """A pinhole camera: camera frame x right, y down, z along the optical axis.

    Attributes:
        channel: sensor channel name, e.g. ``CAM_FRONT``.
        intrinsic: (3, 3) pinhole matrix K in pixels.
        ego_SE3_camera: camera pose in the ego frame.
        width_px, height_px: image size in pixels.
    """

    channel: str
    intrinsic: np.ndarray
    ego_SE3_camera: SE3
    width_px: int
    height_px: int

    def __post_init__(self) -> None:
        k = np.asarray(self.intrinsic, dtype=np.float64)
        if k.shape != (3, 3):
            raise ValueError(f"{self.channel}: intrinsic must be (3,3), got {k.shape}")
        object.__setattr__(self, "intrinsic", k)

    @property
    def horizontal_fov_deg(self) -> float:
        return float(np.degrees(2 * stable_math.arctan2(self.width_px / 2, self.intrinsic[0, 0])))

    @property
    def axis_bearing_deg(self) -> float:
        """Bearing of the optical axis (its +z) in the ego frame, degrees in (-180, 180]."""
        return float(bearing_deg(self.ego_SE3_camera.rotation[:2, 2]))


@dataclass(frozen=True)
class LidarCalibration:
    """A spinning LiDAR: its pose in the ego frame and its beam layout.

    Attributes:
        channel: sensor channel name, e.g. ``LIDAR_TOP``.
        ego_SE3_lidar: LiDAR pose in the ego frame.
        beam_elevation_deg: (B,) elevation of each beam above the sensor's xy plane, degrees.
        azimuth_step_deg: horizontal angle between firings, degrees.
        max_range_m: farthest return, metres.
    """

    channel: str
    ego_SE3_lidar: SE3
    beam_elevation_deg: np.ndarray
    azimuth_step_deg: float = 0.33
    max_range_m: float = 100.0
