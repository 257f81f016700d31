"""Sensor rigs as data: YAML files in ``calib/rigs/`` describe cameras and the LiDAR."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import yaml

from autolabel.sensors import CameraCalibration, LidarCalibration
from calib import stable_math
from calib.rotation import rotation_from_yaw
from calib.se3 import SE3

RIG_DIR = Path(__file__).parent / "rigs"

#: Columns of a camera frame (x right, y down, z forward) expressed in the ego frame (x forward,
#: y left, z up) for a camera looking straight ahead.
EGO_R_CAMERA_FORWARD = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])


@dataclass(frozen=True)
class Rig:
    """A sensor rig: six (or any number of) cameras and one LiDAR, all posed in the ego frame."""

    name: str
    cameras: tuple[CameraCalibration, ...]
    lidar: LidarCalibration

    @property
    def camera_channels(self) -> tuple[str, ...]:
        return tuple(c.channel for c in self.cameras)

    def camera(self, channel: str) -> CameraCalibration:
        for cam in self.cameras:
            if cam.channel == channel:
                return cam
        raise KeyError(
            f"rig {self.name!r} has no camera {channel!r}; it has {self.camera_channels}"
        )

    def scaled(self, width_px: int, height_px: int) -> Rig:
        """The same rig with every camera resized to width x height (intrinsics scaled with it).

        Cameras of other aspect ratios are scaled per axis; focal lengths follow the pixel scale.
        """
        cams = []
        for cam in self.cameras:
            sx, sy = width_px / cam.width_px, height_px / cam.height_px
            k = cam.intrinsic.copy()
            k[0, :] *= sx
            k[1, :] *= sy
            cams.append(replace(cam, intrinsic=k, width_px=width_px, height_px=height_px))
        return replace(self, cameras=tuple(cams))


def camera_rotation(yaw_deg: float, pitch_deg: float = 0.0, roll_deg: float = 0.0) -> np.ndarray:
    """``ego_R_camera`` for a camera turned by yaw (left positive), tilted down by pitch, rolled."""
    pitch, roll = np.radians(pitch_deg), np.radians(roll_deg)
    # Pitch down is a rotation about the camera's x axis (right) by -pitch in camera coordinates:
    # the optical axis (z) moves toward +y (down).
    cp, sp = np.cos(pitch), np.sin(pitch)
    r_pitch = np.array([[1, 0, 0], [0, cp, sp], [0, -sp, cp]], dtype=np.float64)
    cr, sr = np.cos(roll), np.sin(roll)
    r_roll = np.array([[cr, -sr, 0], [sr, cr, 0], [0, 0, 1]], dtype=np.float64)
    return rotation_from_yaw(np.radians(yaw_deg)) @ EGO_R_CAMERA_FORWARD @ r_pitch @ r_roll


def _require(record: dict, key: str, where: str):
    if key not in record:
        raise ValueError(f"{where}: missing key {key!r}")
    return record[key]


def _camera_from_record(rec: dict, where: str) -> CameraCalibration:
    channel = _require(rec, "channel", where)
    where = f"{where} camera {channel}"
    width, height = int(_require(rec, "width_px", where)), int(_require(rec, "height_px", where))
    if "focal_px" in rec:
        fx, fy = (float(v) for v in rec["focal_px"])
    elif "hfov_deg" in rec:
        fx = fy = width / 2 / stable_math.tan(np.radians(float(rec["hfov_deg"])) / 2)
    else:
        raise ValueError(f"{where}: give either 'focal_px' or 'hfov_deg'")
    cx, cy = (float(v) for v in rec.get("principal_px", (width / 2, height / 2)))
    translation = np.asarray(_require(rec, "translation_m", where), dtype=np.float64)
    if translation.shape != (3,):
        raise ValueError(f"{where}: 'translation_m' must have 3 numbers")
    rot = camera_rotation(
        float(_require(rec, "yaw_deg", where)),
        float(rec.get("pitch_deg", 0.0)),
        float(rec.get("roll_deg", 0.0)),
    )
    k = np.array([[fx, 0, cx], [0, fy, cy], [0, 0, 1]])
    return CameraCalibration(channel, k, SE3(rot, translation), width, height)


def _lidar_from_record(rec: dict, where: str) -> LidarCalibration:
    where = f"{where} lidar"
    lo, hi = (float(v) for v in _require(rec, "elevation_range_deg", where))
    beams = int(_require(rec, "beams", where))
    if beams < 1 or hi <= lo:
        raise ValueError(
            f"{where}: need beams >= 1 and elevation_range_deg [low, high] with low < high"
        )
    pose = SE3(
        rotation_from_yaw(np.radians(float(rec.get("yaw_deg", 0.0)))),
        _require(rec, "translation_m", where),
    )
    return LidarCalibration(
        channel=rec.get("channel", "LIDAR_TOP"),
        ego_SE3_lidar=pose,
        beam_elevation_deg=np.linspace(lo, hi, beams),
        azimuth_step_deg=float(rec.get("azimuth_step_deg", 0.33)),
        max_range_m=float(rec.get("max_range_m", 80.0)),
    )


def load_rig(name_or_path: str | Path = "nuscenes") -> Rig:
    """Load a rig by name (a file in ``calib/rigs``) or from a YAML path.

    Raises:
        FileNotFoundError: no such rig; ValueError: a key is missing or malformed (named in the message).
    """
    path = Path(name_or_path)
    if not path.suffix:
        path = RIG_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in RIG_DIR.glob("*.yaml"))
        raise FileNotFoundError(
            f"rig {name_or_path!r} not found (known rigs: {known}, or give a YAML path)"
        )
    data = yaml.safe_load(path.read_text())
    where = str(path)
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a mapping at the top level")
    cams = _require(data, "cameras", where)
    if not isinstance(cams, list) or not cams:
        raise ValueError(f"{where}: 'cameras' must be a non-empty list")
    cameras = tuple(_camera_from_record(c, where) for c in cams)
    lidar = _lidar_from_record(_require(data, "lidar", where), where)
    return Rig(name=str(data.get("name", path.stem)), cameras=cameras, lidar=lidar)
