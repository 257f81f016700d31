"""A keyframe's LiDAR points in its ego frame, through the reader's multi-sweep aggregation."""

from __future__ import annotations

import numpy as np

from autolabel.clip import Frame
from autolabel.nuscenes_reader import aggregate_sweeps


def keyframe_points_ego(frame: Frame, num_sweeps: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The keyframe's LiDAR points (and up to ``num_sweeps - 1`` earlier sweeps) in its ego frame.

    Earlier sweeps are moved into the keyframe's frame through the global frame
    (``aggregate_sweeps``), so static structure lines up and moving objects leave a trail.

    Returns:
        points_ego: (P, 3) float64 positions, metres, keyframe ego frame.
        dt_s: (P,) age of each point's sweep relative to the keyframe, seconds (>= 0).
    """
    points_lidar, dt_s = aggregate_sweeps(frame, num_sweeps)
    ego_SE3_lidar = frame.lidar.ego_SE3_lidar or frame.lidar_calibration.ego_SE3_lidar
    return ego_SE3_lidar.transform_points(points_lidar[:, :3].astype(np.float64)), dt_s
