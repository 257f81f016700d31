"""Small hand-built keyframes for detector tests: a ray-cast LiDAR sweep of boxes on a ground plane.

Independent of the synthetic-dataset generator on purpose: the expected boxes are known exactly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from autolabel.boxes import Boxes3D
from autolabel.classes import class_index
from autolabel.clip import Frame, GroundTruth, LidarSweep
from autolabel.sensors import LidarCalibration
from calib.rotation import rotation_from_yaw
from calib.se3 import SE3

#: 32 beams from -30 to +10 degrees, as the nuScenes HDL-32E.
BEAM_ELEVATION_DEG = np.linspace(-30.0, 10.0, 32)
LIDAR_HEIGHT_M = 1.84


def ray_cast(
    boxes_ego: Boxes3D,
    sensor_ego: np.ndarray,
    ground_slope: tuple[float, float] = (0.0, 0.0),
    azimuth_step_deg: float = 0.3,
    max_range_m: float = 70.0,
) -> np.ndarray:
    """(P, 3) first hits (ego frame) of a spinning LiDAR's rays on boxes and the ground.

    The ground is ``z = a x + b y`` with ``(a, b) = ground_slope``. Slab test per ray and box,
    vectorized over rays x boxes.
    """
    az = np.deg2rad(np.arange(-180.0, 180.0, azimuth_step_deg))
    el = np.deg2rad(BEAM_ELEVATION_DEG)
    az, el = np.meshgrid(az, el)
    d = np.stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)], -1).reshape(-1, 3)
    o = np.asarray(sensor_ego, dtype=np.float64)
    a, b = ground_slope
    # Ground: o_z + t d_z = a (o_x + t d_x) + b (o_y + t d_y).
    denom = d[:, 2] - a * d[:, 0] - b * d[:, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        t_ground = (a * o[0] + b * o[1] - o[2]) / denom
    t_ground = np.where(t_ground > 0, t_ground, np.inf)
    t_best = t_ground
    if len(boxes_ego):
        c, s = np.cos(boxes_ego.yaw_rad), np.sin(boxes_ego.yaw_rad)
        rel = o[None, :] - boxes_ego.center_m  # (B, 3)
        # Box-local ray origin and directions: (B, 3) and (B, R, 3).
        o_loc = np.stack(
            [c * rel[:, 0] + s * rel[:, 1], -s * rel[:, 0] + c * rel[:, 1], rel[:, 2]], 1
        )
        d_loc = np.stack(
            [
                c[:, None] * d[None, :, 0] + s[:, None] * d[None, :, 1],
                -s[:, None] * d[None, :, 0] + c[:, None] * d[None, :, 1],
                np.broadcast_to(d[None, :, 2], (len(c), len(d))),
            ],
            -1,
        )
        half = boxes_ego.size_wlh_m[:, [1, 0, 2]] / 2  # along local x (length), y (width), z
        with np.errstate(divide="ignore", invalid="ignore"):
            t1 = (-half[:, None, :] - o_loc[:, None, :]) / d_loc
            t2 = (half[:, None, :] - o_loc[:, None, :]) / d_loc
        t_near = np.nanmax(np.minimum(t1, t2), axis=2)
        t_far = np.nanmin(np.maximum(t1, t2), axis=2)
        hit = (t_near <= t_far) & (t_near > 0)
        t_box = np.where(hit, t_near, np.inf).min(axis=0)
        t_best = np.minimum(t_best, t_box)
    ok = t_best < max_range_m
    return o + t_best[ok, None] * d[ok]


def box_set(rows: list[tuple[str, float, float, float, float, float, float]]) -> Boxes3D:
    """Boxes standing on z=0 from rows (class, x, y, yaw, w, l, h) in the ego frame."""
    names, x, y, yaw, w, length, h = zip(*rows, strict=True)
    h = np.asarray(h, dtype=np.float64)
    return Boxes3D(
        center_m=np.column_stack([x, y, h / 2]),
        size_wlh_m=np.column_stack([w, length, h]),
        yaw_rad=np.asarray(yaw, dtype=np.float64),
        label=[class_index(n) for n in names],
        frame="ego",
    )


def make_frame(
    tmp_dir: Path,
    boxes_ego: Boxes3D,
    token: str = "sample-0",
    global_SE3_ego: SE3 | None = None,
    ground_slope: tuple[float, float] = (0.0, 0.0),
    num_lidar_pts: np.ndarray | None = None,
) -> Frame:
    """A keyframe whose LiDAR file is a ray-cast sweep of ``boxes_ego`` (ground truth attached).

    The LiDAR sits 1.84 m up, rotated 90 degrees about z as on nuScenes cars, so the ego -> LiDAR
    transform is exercised.
    """
    global_SE3_ego = global_SE3_ego or SE3(rotation_from_yaw(0.7), np.array([300.0, 800.0, 0.5]))
    ego_SE3_lidar = SE3(rotation_from_yaw(np.pi / 2), np.array([0.94, 0.0, LIDAR_HEIGHT_M]))
    points_ego = ray_cast(boxes_ego, ego_SE3_lidar.translation, ground_slope)
    points_lidar = ego_SE3_lidar.inverse().transform_points(points_ego)
    cloud = np.zeros((len(points_lidar), 5), dtype=np.float32)
    cloud[:, :3] = points_lidar
    path = Path(tmp_dir) / f"{token}.pcd.bin"
    cloud.tofile(path)
    boxes_global = boxes_ego.transform(global_SE3_ego, "global", from_frame="ego")
    if num_lidar_pts is None:
        num_lidar_pts = boxes_ego.points_inside(points_ego).sum(axis=1)
    n = len(boxes_ego)
    gt = GroundTruth(
        boxes=boxes_global,
        annotation_token=np.array([f"{token}-ann-{i}" for i in range(n)], dtype=object),
        num_lidar_pts=np.asarray(num_lidar_pts),
        visibility_level=np.full(n, 4),
        attribute=np.array([""] * n, dtype=object),
    )
    return Frame(
        token=token,
        index=0,
        timestamp_us=1_500_000_000_000_000,
        time_s=0.0,
        global_SE3_ego=global_SE3_ego,
        lidar=LidarSweep(
            path=path, global_SE3_ego=global_SE3_ego, timestamp_us=1_500_000_000_000_000
        ),
        lidar_calibration=LidarCalibration(
            channel="LIDAR_TOP", ego_SE3_lidar=ego_SE3_lidar, beam_elevation_deg=BEAM_ELEVATION_DEG
        ),
        cameras={},
        ground_truth=gt,
    )
