"""LiDAR point clouds of a keyframe: nuScenes ``.pcd.bin`` files, optionally several sweeps."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from autolabel.clip import Frame, LidarSweep

#: Columns of a nuScenes LiDAR file: x, y, z (m, LiDAR frame), intensity, ring index.
NUSCENES_POINT_DIMS = 5


def load_lidar_points(path: str | Path, dims: int = NUSCENES_POINT_DIMS) -> np.ndarray:
    """(P, dims) float32 points of a nuScenes ``.pcd.bin`` file, in the LiDAR frame.

    Raises:
        FileNotFoundError / ValueError: naming the file when it is missing or its size is not a
            whole number of ``dims`` float32 values.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: LiDAR file not found")
    raw = np.fromfile(path, dtype=np.float32)
    if raw.size % dims:
        raise ValueError(
            f"{path}: {raw.size} float32 values is not a whole number of {dims}-value points"
        )
    return raw.reshape(-1, dims)


def keyframe_points_ego(frame: Frame, num_sweeps: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The keyframe's LiDAR points (and up to ``num_sweeps - 1`` earlier sweeps) in its ego frame.

    Earlier sweeps are moved into the keyframe's ego frame through the global frame, so static
    structure lines up and moving objects leave a trail.

    Returns:
        points_ego: (P, 3) float64 positions, metres, keyframe ego frame.
        dt_s: (P,) float32 age of each point's sweep relative to the keyframe, seconds (>= 0).
    """
    ego_SE3_lidar = frame.lidar_calibration.ego_SE3_lidar
    sweeps: list[LidarSweep] = [frame.lidar, *frame.sweeps[: max(num_sweeps - 1, 0)]]
    ego_SE3_global = frame.global_SE3_ego.inverse()
    parts, ages = [], []
    for sweep in sweeps:
        points_lidar = load_lidar_points(sweep.path)[:, :3]
        if sweep is frame.lidar:
            key_ego_SE3_lidar = ego_SE3_lidar
        else:
            key_ego_SE3_lidar = ego_SE3_global.compose(sweep.global_SE3_ego).compose(ego_SE3_lidar)
        parts.append(key_ego_SE3_lidar.transform_points(points_lidar))
        age_s = max(frame.timestamp_us - sweep.timestamp_us, 0) * 1e-6
        ages.append(np.full(len(points_lidar), age_s, dtype=np.float32))
    return np.concatenate(parts), np.concatenate(ages)
