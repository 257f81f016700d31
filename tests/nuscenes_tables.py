"""Write a minimal nuScenes-format database (tables only, no sensor files) for evaluation tests.

Enough for ``nuscenes.NuScenes`` and the devkit's detection/tracking evaluation: one LIDAR_TOP
keyframe per sample, ego poses, annotations with instances, and a map record whose mask file
exists. Objects move at constant velocity; ``present`` hides an object in some keyframes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

from calib.rotation import quat_wxyz_from_yaw

DT_S = 0.5


def _token(*parts: object) -> str:
    return hashlib.md5("/".join(map(str, parts)).encode()).hexdigest()


@dataclass
class GtObject:
    category: str  # nuScenes category, e.g. vehicle.car
    start_xy_m: tuple[float, float]
    velocity_mps: tuple[float, float]
    size_wlh_m: tuple[float, float, float] = (1.9, 4.6, 1.7)
    frames: tuple[int, ...] | None = None  # keyframes where it is annotated; None: all


@dataclass
class GtScene:
    name: str
    num_frames: int
    objects: list[GtObject] = field(default_factory=list)


def write_minimal_nuscenes(root: Path, version: str, scenes: list[GtScene]) -> dict:
    """Write the 13 tables under ``root/version`` and a 1x1 map mask; return per-scene truth.

    Returns:
        scene name -> {"sample_tokens": [...], "boxes": [(F,) list of per-frame lists of
        (instance token, category, translation, size, rotation)]}.
    """
    table_dir = root / version
    table_dir.mkdir(parents=True)
    (root / "maps").mkdir()
    # The devkit only checks that the map mask file exists; a 1x1 PNG will do.
    cv2.imwrite(str(root / "maps" / "map.png"), np.zeros((1, 1), np.uint8))
    categories = sorted({o.category for s in scenes for o in s.objects})
    tables: dict[str, list[dict]] = {
        "category": [{"token": _token("cat", c), "name": c, "description": c} for c in categories],
        "attribute": [],
        "visibility": [{"token": "4", "level": "v80-100", "description": "visible"}],
        "sensor": [{"token": _token("sensor"), "channel": "LIDAR_TOP", "modality": "lidar"}],
        "calibrated_sensor": [
            {
                "token": _token("cs"),
                "sensor_token": _token("sensor"),
                "translation": [0.9, 0.0, 1.8],
                "rotation": [1.0, 0.0, 0.0, 0.0],
                "camera_intrinsic": [],
            }
        ],
        "log": [
            {
                "token": _token("log"),
                "logfile": "log",
                "vehicle": "test",
                "date_captured": "2020-01-01",
                "location": "test",
            }
        ],
        "map": [
            {
                "token": _token("map"),
                "log_tokens": [_token("log")],
                "category": "semantic_prior",
                "filename": "maps/map.png",
            }
        ],
        "instance": [],
        "ego_pose": [],
        "scene": [],
        "sample": [],
        "sample_data": [],
        "sample_annotation": [],
    }
    truth: dict = {}
    for s_index, scene in enumerate(scenes):
        base_us = 1_600_000_000_000_000 + s_index * 100_000_000
        samples = [_token(scene.name, "sample", f) for f in range(scene.num_frames)]
        truth[scene.name] = {"sample_tokens": samples, "boxes": [[] for _ in samples]}
        tables["scene"].append(
            {
                "token": _token(scene.name),
                "name": scene.name,
                "description": "",
                "log_token": _token("log"),
                "nbr_samples": scene.num_frames,
                "first_sample_token": samples[0],
                "last_sample_token": samples[-1],
            }
        )
        for f, sample in enumerate(samples):
            timestamp = base_us + int(f * DT_S * 1e6)
            pose = _token(scene.name, "pose", f)
            tables["ego_pose"].append(
                {
                    "token": pose,
                    "timestamp": timestamp,
                    "translation": [500.0 + 2.0 * f, 800.0, 0.0],
                    "rotation": [1.0, 0.0, 0.0, 0.0],
                }
            )
            tables["sample"].append(
                {
                    "token": sample,
                    "timestamp": timestamp,
                    "scene_token": _token(scene.name),
                    "prev": samples[f - 1] if f else "",
                    "next": samples[f + 1] if f + 1 < len(samples) else "",
                }
            )
            sd = _token(scene.name, "sd", f)
            tables["sample_data"].append(
                {
                    "token": sd,
                    "sample_token": sample,
                    "ego_pose_token": pose,
                    "calibrated_sensor_token": _token("cs"),
                    "timestamp": timestamp,
                    "fileformat": "pcd",
                    "is_key_frame": True,
                    "height": 0,
                    "width": 0,
                    "filename": f"samples/LIDAR_TOP/{sd}.pcd.bin",
                    "prev": _token(scene.name, "sd", f - 1) if f else "",
                    "next": _token(scene.name, "sd", f + 1) if f + 1 < len(samples) else "",
                }
            )
        for o_index, obj in enumerate(scene.objects):
            instance = _token(scene.name, "instance", o_index)
            frames = list(obj.frames if obj.frames is not None else range(scene.num_frames))
            anns = [_token(scene.name, "ann", o_index, f) for f in frames]
            tables["instance"].append(
                {
                    "token": instance,
                    "category_token": _token("cat", obj.category),
                    "nbr_annotations": len(frames),
                    "first_annotation_token": anns[0],
                    "last_annotation_token": anns[-1],
                }
            )
            yaw = float(np.arctan2(obj.velocity_mps[1], obj.velocity_mps[0]))
            rotation = quat_wxyz_from_yaw(yaw).tolist()
            for k, f in enumerate(frames):
                t = f * DT_S
                translation = [
                    500.0 + obj.start_xy_m[0] + obj.velocity_mps[0] * t,
                    800.0 + obj.start_xy_m[1] + obj.velocity_mps[1] * t,
                    1.0,
                ]
                tables["sample_annotation"].append(
                    {
                        "token": anns[k],
                        "sample_token": samples[f],
                        "instance_token": instance,
                        "visibility_token": "4",
                        "attribute_tokens": [],
                        "translation": translation,
                        "size": list(obj.size_wlh_m),
                        "rotation": rotation,
                        "prev": anns[k - 1] if k else "",
                        "next": anns[k + 1] if k + 1 < len(anns) else "",
                        "num_lidar_pts": 20,
                        "num_radar_pts": 0,
                    }
                )
                truth[scene.name]["boxes"][f].append(
                    (instance, obj.category, translation, list(obj.size_wlh_m), rotation)
                )
    for name, rows in tables.items():
        (table_dir / f"{name}.json").write_text(json.dumps(rows))
    return truth
