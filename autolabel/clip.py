"""Clips (nuScenes scenes) and their keyframes, as read from a dataset."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from autolabel.boxes import Boxes3D
from autolabel.sensors import CameraCalibration, LidarCalibration
from calib.se3 import SE3


@dataclass(frozen=True)
class CameraImage:
    """One camera image of a keyframe.

    Attributes:
        path: absolute path of the image file.
        calibration: the camera's intrinsics and ``ego_SE3_camera``.
        global_SE3_ego: ego pose at the image's own timestamp (cameras fire at other times than
            the LiDAR; nuScenes stores one ego pose per sample_data).
        timestamp_us: capture time, microseconds (nuScenes clock).
        token: nuScenes sample_data token.
    """

    path: Path
    calibration: CameraCalibration
    global_SE3_ego: SE3
    timestamp_us: int
    token: str = ""

    @property
    def global_SE3_camera(self) -> SE3:
        return self.global_SE3_ego.compose(self.calibration.ego_SE3_camera)


@dataclass(frozen=True)
class LidarSweep:
    """One LiDAR sweep (a keyframe's own or an earlier one).

    ``ego_SE3_lidar`` is the sweep's own calibration when the reader knows it (None: use the
    frame's ``lidar_calibration``).
    """

    path: Path
    global_SE3_ego: SE3
    timestamp_us: int
    token: str = ""
    ego_SE3_lidar: SE3 | None = None


@dataclass
class GroundTruth:
    """Ground-truth annotations of one keyframe, parallel to ``boxes`` (global frame).

    ``boxes.track_id`` indexes the clip's ``instance_tokens``.
    """

    boxes: Boxes3D
    annotation_token: np.ndarray  # (N,) str
    num_lidar_pts: np.ndarray  # (N,) int
    visibility_level: np.ndarray  # (N,) int, nuScenes visibility token 1..4 (0 unknown)
    attribute: np.ndarray  # (N,) str, '' where the class has none


@dataclass
class Frame:
    """A keyframe (nuScenes sample).

    Attributes:
        token: sample token.
        index: position of the keyframe in its clip, from 0.
        timestamp_us: sample timestamp (the LiDAR's), microseconds.
        time_s: seconds since the clip's first keyframe.
        global_SE3_ego: ego pose at the LiDAR timestamp.
        lidar: the keyframe's LiDAR sweep; ``sweeps`` holds the sweeps before it, newest first
            (the sample_data ``prev`` chain, as the devkit's multi-sweep loader walks it).
        lidar_calibration: ``ego_SE3_lidar`` and beam layout.
        cameras: channel -> image of this keyframe.
        ground_truth: annotations when the dataset has them.
    """

    token: str
    index: int
    timestamp_us: int
    time_s: float
    global_SE3_ego: SE3
    lidar: LidarSweep
    lidar_calibration: LidarCalibration
    cameras: dict[str, CameraImage]
    sweeps: list[LidarSweep] = field(default_factory=list)
    ground_truth: GroundTruth | None = None


@dataclass
class Clip:
    """A nuScenes scene: about 20 s of keyframes at 2 Hz.

    Attributes:
        name: scene name (unique within a dataset), e.g. ``scene-0061``.
        token: scene token.
        log_name: the log (drive) the scene was cut from; releases split by it.
        location: where the log was driven (nuScenes ``log.location``, e.g.
            ``singapore-onenorth``; empty when the dataset gives none).
        frames: keyframes in time order.
        instance_tokens: nuScenes instance token of each ground-truth track id.
        dataroot, version: where the clip was read from.
    """

    name: str
    token: str
    log_name: str
    frames: list[Frame]
    instance_tokens: tuple[str, ...] = ()
    dataroot: Path | None = None
    version: str = ""
    location: str = ""

    @property
    def duration_s(self) -> float:
        return self.frames[-1].time_s if self.frames else 0.0
