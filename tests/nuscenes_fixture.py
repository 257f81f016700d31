"""Write small nuScenes-format datasets by hand, in the nuScenes or the T4 (TIER IV) layout.

Used by the reader tests as input the devkit can also read: every record is written from first
principles (pyquaternion for the rotations), so what the reader returns can be checked against
the devkit's view of the same files.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pyquaternion import Quaternion

from autolabel.synth.nuscenes_writer import TABLE_NAMES


def token(*parts) -> str:
    return hashlib.md5("/".join(str(p) for p in parts).encode()).hexdigest()


@dataclass
class Layout:
    """What differs between a nuScenes dataset and a T4 one."""

    version: str = "v1.0-mini"
    lidar_channel: str = "LIDAR_TOP"
    #: (channel, yaw of the optical axis in the ego frame, degrees)
    cameras: tuple[tuple[str, float], ...] = (("CAM_FRONT", 0.0), ("CAM_BACK", 180.0))
    flat_categories: bool = False
    t4_visibility: bool = False
    with_map: bool = True
    with_visibility_table: bool = True
    lidar_in_base_link: bool = False
    file_prefix: str = "samples"  # T4: "data"
    extra_lidar_channels: tuple[str, ...] = ()
    n_scenes: int = 2
    n_keyframes: int = 4
    sweeps_between: int = 3
    sweeps_before_first: int = 2
    points_per_sweep: int = 300
    image_size: tuple[int, int] = (320, 180)
    extra_cars: int = 0  # more moving cars, for benchmarks


T4_LAYOUT = Layout(
    version="annotation",
    lidar_channel="LIDAR_CONCAT",
    cameras=(("CAM_FRONT", 0.0), ("CAM_FRONT_NARROW", 0.0), ("CAM_TRAFFIC_LIGHT_NEAR", 5.0)),
    flat_categories=True,
    t4_visibility=True,
    with_map=False,
    lidar_in_base_link=True,
    file_prefix="data",
    n_scenes=1,
)

CATEGORIES_NUSCENES = [
    "vehicle.car",
    "human.pedestrian.adult",
    "vehicle.emergency.police",
    "movable_object.barrier",
]
CATEGORIES_FLAT = ["car", "pedestrian", "police_car", "barrier"]
#: Detection class of each category above; None where the devkit drops it.
CATEGORY_DETECTION = ["car", "pedestrian", None, "barrier"]


@dataclass
class Written:
    root: Path
    layout: Layout
    scene_names: list[str] = field(default_factory=list)


def _ego_pose(t_s: float, scene: int) -> tuple[list[float], list[float]]:
    """A curving drive with a little pitch and roll: translation, quaternion [w, x, y, z]."""
    yaw = 0.3 + 0.08 * t_s + scene
    q = (
        Quaternion(axis=[0, 0, 1], angle=yaw)
        * Quaternion(axis=[0, 1, 0], angle=0.01 * np.sin(t_s))
        * Quaternion(axis=[1, 0, 0], angle=0.008 * np.cos(t_s))
    )
    trans = [100.0 + 6.0 * t_s * np.cos(0.3 + scene), 200.0 + 6.0 * t_s * np.sin(0.3), 0.0]
    return trans, list(q.elements)


def _camera_quat(yaw_deg: float) -> Quaternion:
    # Optical axis (camera z) along ego x, camera x along ego -y, camera y along ego -z, then yaw.
    base = Quaternion(matrix=np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]]))
    return Quaternion(axis=[0, 0, 1], angle=np.radians(yaw_deg)) * base


def write_dataset(root: Path, layout: Layout | None = None, seed: int = 0) -> Written:
    """Write ``layout``'s dataset under ``root`` (the dataroot); returns what was written."""
    layout = layout or Layout()
    rng = np.random.default_rng(seed)
    root = Path(root)
    tables: dict[str, list] = {name: [] for name in TABLE_NAMES}
    cat_names = CATEGORIES_FLAT if layout.flat_categories else CATEGORIES_NUSCENES
    for name in cat_names:
        tables["category"].append({"token": token("cat", name), "name": name, "description": ""})
    for name in ("vehicle.moving", "vehicle.parked", "pedestrian.moving"):
        tables["attribute"].append({"token": token("attr", name), "name": name, "description": ""})
    if layout.t4_visibility:
        vis_levels = ["none", "partial", "most", "full"]
        vis_tokens = [token("vis", lv) for lv in vis_levels]
    else:
        vis_levels = ["v0-40", "v40-60", "v60-80", "v80-100"]
        vis_tokens = ["1", "2", "3", "4"]
    for tok, lv in zip(vis_tokens, vis_levels, strict=True):
        tables["visibility"].append({"token": tok, "level": lv, "description": lv})

    lidar_channels = (layout.lidar_channel, *layout.extra_lidar_channels)
    sensor_tokens = {}
    for ch in lidar_channels:
        sensor_tokens[ch] = token("sensor", ch)
        tables["sensor"].append({"token": sensor_tokens[ch], "channel": ch, "modality": "lidar"})
    for ch, _ in layout.cameras:
        sensor_tokens[ch] = token("sensor", ch)
        tables["sensor"].append({"token": sensor_tokens[ch], "channel": ch, "modality": "camera"})

    width, height = layout.image_size
    calib_tokens = {}
    for ch in lidar_channels:
        if layout.lidar_in_base_link:
            trans, quat = [0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]
        else:
            q = Quaternion(axis=[0, 0, 1], angle=-np.pi / 2) * Quaternion(
                axis=[1, 0, 0], angle=0.01
            )
            trans, quat = [0.94, 0.0, 1.84], list(q.elements)
        calib_tokens[ch] = token("cs", ch)
        tables["calibrated_sensor"].append(
            {
                "token": calib_tokens[ch],
                "sensor_token": sensor_tokens[ch],
                "translation": trans,
                "rotation": quat,
                "camera_intrinsic": [],
            }
        )
    for i, (ch, yaw) in enumerate(layout.cameras):
        calib_tokens[ch] = token("cs", ch)
        fx = 0.8 * width + 10 * i
        tables["calibrated_sensor"].append(
            {
                "token": calib_tokens[ch],
                "sensor_token": sensor_tokens[ch],
                "translation": [1.5 - 0.2 * i, 0.1 * i, 1.5],
                "rotation": list(_camera_quat(yaw).elements),
                "camera_intrinsic": [
                    [fx, 0.0, width / 2 + i],
                    [0.0, fx, height / 2 - i],
                    [0.0, 0.0, 1.0],
                ],
            }
        )

    log_token = token("log")
    tables["log"].append(
        {
            "token": log_token,
            "logfile": "" if layout.flat_categories else "n000-2024-01-01-00-00-00+0000",
            "vehicle": "",
            "date_captured": "",
            "location": "",
        }
    )
    if layout.with_map:
        map_file = "maps/map0.png"
        (root / "maps").mkdir(parents=True, exist_ok=True)
        (root / map_file).write_bytes(b"")  # only its existence is checked on load
        tables["map"].append(
            {
                "token": token("map"),
                "log_tokens": [log_token],
                "category": "semantic_prior",
                "filename": map_file,
            }
        )

    written = Written(root=root, layout=layout)
    period_us = 500_000
    for sc in range(layout.n_scenes):
        scene_token = token("scene", sc)
        t0_us = 1_700_000_000_000_000 + sc * 100_000_000
        sample_tokens = [token("sample", sc, k) for k in range(layout.n_keyframes)]
        sample_ts = [t0_us + k * period_us for k in range(layout.n_keyframes)]
        for k, st in enumerate(sample_tokens):
            tables["sample"].append(
                {
                    "token": st,
                    "timestamp": sample_ts[k],
                    "scene_token": scene_token,
                    "prev": sample_tokens[k - 1] if k else "",
                    "next": sample_tokens[k + 1] if k + 1 < layout.n_keyframes else "",
                }
            )
        name = f"scene-{sc:04d}" if not layout.flat_categories else f"t4proj_{scene_token}"
        written.scene_names.append(name)
        tables["scene"].append(
            {
                "token": scene_token,
                "log_token": log_token,
                "nbr_samples": layout.n_keyframes,
                "first_sample_token": sample_tokens[0],
                "last_sample_token": sample_tokens[-1],
                "name": name,
                "description": "hand-written test scene",
            }
        )

        def add_sd(ch, ts, sample_token, key, modality, chain, ext, sc=sc, t0_us=t0_us, name=name):
            sd_token = token("sd", sc, ch, ts)
            ep_token = token("ep", sc, ch, ts)
            trans, quat = _ego_pose((ts - t0_us) * 1e-6, sc)
            tables["ego_pose"].append(
                {"token": ep_token, "timestamp": ts, "translation": trans, "rotation": quat}
            )
            folder = layout.file_prefix if key or layout.file_prefix == "data" else "sweeps"
            filename = f"{folder}/{ch}/{name}__{ch}__{ts}.{ext}"
            rec = {
                "token": sd_token,
                "sample_token": sample_token,
                "ego_pose_token": ep_token,
                "calibrated_sensor_token": calib_tokens[ch],
                "timestamp": ts,
                "fileformat": ext.split(".")[-1] if modality == "camera" else "pcd",
                "is_key_frame": key,
                "height": height if modality == "camera" else 0,
                "width": width if modality == "camera" else 0,
                "filename": filename,
                "prev": chain[-1]["token"] if chain else "",
                "next": "",
            }
            if chain:
                chain[-1]["next"] = sd_token
            chain.append(rec)
            tables["sample_data"].append(rec)
            if modality == "lidar":
                pts = np.empty((layout.points_per_sweep, 5), dtype=np.float32)
                pts[:, :3] = rng.uniform([-40, -40, -2], [40, 40, 3], (len(pts), 3))
                pts[:10, :2] = rng.uniform(-0.9, 0.9, (10, 2))  # within remove_close's 1 m
                pts[:, 3] = rng.uniform(0, 255, len(pts))
                pts[:, 4] = rng.integers(0, 32, len(pts))
                path = root / filename
                path.parent.mkdir(parents=True, exist_ok=True)
                pts.tofile(path)
            return rec

        for ch in lidar_channels:
            chain: list[dict] = []
            step = period_us // (layout.sweeps_between + 1)
            for j in range(layout.sweeps_before_first, 0, -1):
                add_sd(
                    ch, sample_ts[0] - j * step, sample_tokens[0], False, "lidar", chain, "pcd.bin"
                )
            for k in range(layout.n_keyframes):
                add_sd(ch, sample_ts[k], sample_tokens[k], True, "lidar", chain, "pcd.bin")
                if k + 1 < layout.n_keyframes:
                    for j in range(1, layout.sweeps_between + 1):
                        add_sd(ch, sample_ts[k] + j * step, sample_tokens[k + 1], False, "lidar", chain, "pcd.bin")  # fmt: skip
        for i, (ch, _) in enumerate(layout.cameras):
            chain = []
            for k in range(layout.n_keyframes):
                # Cameras fire around the LiDAR keyframe time, each at its own offset.
                ts = sample_ts[k] - 40_000 + 12_000 * i
                add_sd(ch, ts, sample_tokens[k], True, "camera", chain, "jpg")

        # Objects: a moving car in every keyframe, a pedestrian from keyframe 1, a police car
        # (dropped by the detection mapping) and a static barrier seen once (no velocity).
        objects = [
            (0, range(layout.n_keyframes), np.array([20.0, 5.0, 0.9]), np.array([4.0, 1.0, 0.0])),
            (
                1,
                range(1, layout.n_keyframes),
                np.array([10.0, -4.0, 0.8]),
                np.array([0.0, 1.2, 0.0]),
            ),  # fmt: skip
            (2, range(layout.n_keyframes), np.array([-15.0, 3.0, 0.9]), np.array([-3.0, 0.0, 0.0])),
            (
                3,
                range(layout.n_keyframes - 1, layout.n_keyframes)
                if layout.n_keyframes < 3
                else range(2, 3),
                np.array([8.0, 8.0, 0.5]),
                np.zeros(3),
            ),  # fmt: skip
        ]
        sizes = {0: [1.9, 4.6, 1.6], 1: [0.7, 0.6, 1.8], 2: [2.0, 5.0, 1.7], 3: [2.5, 0.4, 1.0]}
        for extra in range(layout.extra_cars):
            start = np.array([rng.uniform(-60, 60), rng.uniform(-60, 60), 0.9])
            objects.append((4 + extra, range(layout.n_keyframes), start, rng.normal(0, 4, 3) * [1, 1, 0]))  # fmt: skip
            sizes[4 + extra] = [1.9, 4.5, 1.6]
        for obj, frames_present, start, vel in objects:
            inst_token = token("inst", sc, obj)
            ann_tokens = [token("ann", sc, obj, k) for k in frames_present]
            tables["instance"].append(
                {
                    "token": inst_token,
                    "category_token": token("cat", cat_names[obj if obj < 4 else 0]),
                    "nbr_annotations": len(ann_tokens),
                    "first_annotation_token": ann_tokens[0],
                    "last_annotation_token": ann_tokens[-1],
                }
            )
            base_trans, _ = _ego_pose(0.0, sc)
            heading = np.arctan2(vel[1], vel[0]) if np.any(vel) else 0.7
            for n, k in enumerate(frames_present):
                t_s = k * period_us * 1e-6
                pos = np.asarray(base_trans) + start + vel * t_s
                attr = ["pedestrian.moving"] if obj == 1 else ([] if obj == 3 else ["vehicle.moving"])  # fmt: skip
                vis = vis_tokens[(obj + k) % 4]
                if layout.t4_visibility and obj == 1 and k == 1:
                    vis = ""  # T4 writes an empty token where no visibility was annotated
                tables["sample_annotation"].append(
                    {
                        "token": ann_tokens[n],
                        "sample_token": sample_tokens[k],
                        "instance_token": inst_token,
                        "visibility_token": vis,
                        "attribute_tokens": [token("attr", a) for a in attr],
                        "translation": pos.tolist(),
                        "size": sizes[obj],
                        "rotation": list(
                            Quaternion(axis=[0, 0, 1], angle=heading + 0.05 * k).elements
                        ),
                        "prev": ann_tokens[n - 1] if n else "",
                        "next": ann_tokens[n + 1] if n + 1 < len(ann_tokens) else "",
                        "num_lidar_pts": 10 * obj + k,
                        "num_radar_pts": 0,
                    }
                )

    table_dir = root / layout.version
    table_dir.mkdir(parents=True, exist_ok=True)
    for name, records in tables.items():
        if name == "map" and not layout.with_map:
            continue
        if name == "visibility" and not layout.with_visibility_table:
            continue
        (table_dir / f"{name}.json").write_text(json.dumps(records, indent=1))
    return written
