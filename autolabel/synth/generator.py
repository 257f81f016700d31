"""``generate_dataset``: synthetic drive logs written as a nuScenes v1.0 dataset.

Layout of ``out_dir`` (the dataroot)::

    <version>/*.json            the 13 nuScenes tables (+ splits.json: custom train/val splits)
    samples/CAM_*/*.jpg         keyframe images, six cameras
    samples/LIDAR_TOP/*.pcd.bin keyframe sweeps (float32 x, y, z, intensity, ring; LiDAR frame)
    sweeps/LIDAR_TOP/*.pcd.bin  intermediate sweeps (non-key sample_data)
    sweeps/CAM_*/*.jpg          intermediate images, only when ``camera_sweep_hz`` > 0
    maps/<map token>.png        drivable-area mask per log (0.1 m per pixel, as the devkit reads)
    synth_gt/                   per-image ground truth (see ``ground_truth_files``)

Each log is one world (two crossing roads); ``scenes_per_log`` scenes are cut from it, each with
its own ego drive and agents. Everything random derives from ``SynthConfig.seed``; tokens are
hashes, so the same config writes byte-identical files.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from tqdm import tqdm

from autolabel.atomic_io import atomic_write_bytes
from autolabel.classes import DETECTION_CLASSES
from autolabel.config import config_to_dict
from autolabel.sensors import CameraCalibration
from autolabel.synth.catalogue import visibility_token
from autolabel.synth.config import SynthConfig
from autolabel.synth.ego_motion import EgoPlan
from autolabel.synth.ground_truth_files import GT_DIR, relative_paths
from autolabel.synth.lidar_sim import LidarNoise, simulate_sweep
from autolabel.synth.nuscenes_writer import (
    NuScenesTables,
    encode_jpeg,
    encode_png_gray,
    write_pcd_bin,
)
from autolabel.synth.render import render_camera
from autolabel.synth.scenario import SceneAgents, sample_agents, sample_ego
from autolabel.synth.scene_boxes import (
    compose_scene,
    count_points_in_boxes,
    object_pixels,
    scenery_boxes,
)
from autolabel.synth.world import World, build_world, sample_layout
from calib.rig import Rig, load_rig
from calib.rotation import quat_wxyz_from_yaw, rotation_from_yaw
from calib.se3 import SE3

#: Microseconds since the epoch of the first log (2018-07-24, like nuScenes).
BASE_TIMESTAMP_US = 1_532_400_000_000_000
#: Time between the starts of two logs, and between two scenes of a log, beyond the clip, us.
LOG_SPACING_US = 3_600_000_000
SCENE_GAP_US = 30_000_000
#: Margin around the ego's route inside the square map, metres (the devkit's map views need
#: about 57 m around the ego).
MAP_MARGIN_M = 70.0
_OUTPUT_DIRS = ("samples", "sweeps", "maps", GT_DIR)


@dataclass(frozen=True)
class Timeline:
    """When each sensor fires, in microseconds relative to a scene's first keyframe.

    Attributes:
        lidar_us: (S,) sweep times, preroll sweeps first (negative times).
        lidar_keyframe: (S,) keyframe index of a key sweep, -1 for intermediate sweeps.
        lidar_sample: (S,) keyframe a sweep belongs to (the next one at or after it).
        camera_key_us: (K, C) keyframe image times per camera.
        camera_sweep_us: per camera, (n,) intermediate image times.
        camera_sweep_sample: per camera, (n,) keyframe each intermediate image belongs to.
        all_us: sorted unique times of all of the above.
    """

    lidar_us: np.ndarray
    lidar_keyframe: np.ndarray
    lidar_sample: np.ndarray
    camera_key_us: np.ndarray
    camera_sweep_us: tuple[np.ndarray, ...]
    camera_sweep_sample: tuple[np.ndarray, ...]
    all_us: np.ndarray

    @property
    def num_keyframes(self) -> int:
        return len(self.camera_key_us)


def camera_offsets_us(rig: Rig, spin_hz: float) -> np.ndarray:
    """(C,) delay of each camera after the LiDAR timestamp: the spinning LiDAR (clockwise seen from
    above, starting at its own x axis) triggers a camera when it sweeps across the camera's
    optical axis, as nuScenes does; microseconds in [0, 1 / spin_hz)."""
    lidar_az = rig.lidar.ego_SE3_lidar.yaw_rad
    out = []
    for cam in rig.cameras:
        axis = cam.ego_SE3_camera.rotation[:, 2]  # optical axis in the ego frame
        cam_az = np.arctan2(axis[1], axis[0])
        turn = np.mod(lidar_az - cam_az, 2 * np.pi) / (2 * np.pi)  # clockwise fraction
        out.append(int(round(turn * 1e6 / spin_hz)))
    return np.asarray(out, dtype=np.int64)


def build_timeline(cfg: SynthConfig, rig: Rig) -> Timeline:
    """Sensor firing times of one scene (the same for every scene of a dataset)."""
    spk = cfg.sweeps_per_keyframe
    sweep_us = int(round(1e6 / cfg.lidar_hz))
    k_count = cfg.num_keyframes
    n_pre = int(np.floor(cfg.lidar_preroll_s * cfg.lidar_hz + 1e-9))
    ordinal = np.arange(-n_pre, (k_count - 1) * spk + 1)
    lidar_us = ordinal * sweep_us
    is_key = (ordinal >= 0) & (ordinal % spk == 0)
    lidar_keyframe = np.where(is_key, ordinal // spk, -1)
    lidar_sample = np.clip(-(-ordinal // spk), 0, k_count - 1)
    key_us = np.arange(k_count) * spk * sweep_us
    offsets = (
        camera_offsets_us(rig, cfg.lidar_spin_hz)
        if cfg.camera_time_offsets
        else np.zeros(len(rig.cameras), np.int64)
    )
    camera_key_us = key_us[:, None] + offsets[None, :]
    sweeps, sweep_samples = [], []
    for c in range(len(rig.cameras)):
        times, samples = [], []
        if cfg.camera_sweep_hz > 0:
            period = 1e6 / cfg.camera_sweep_hz
            for j in range(k_count - 1):
                start, stop = camera_key_us[j, c], camera_key_us[j + 1, c]
                m = 1
                while start + m * period < stop - 0.5 * period:
                    times.append(int(round(start + m * period)))
                    samples.append(j + 1)
                    m += 1
        sweeps.append(np.asarray(times, dtype=np.int64))
        sweep_samples.append(np.asarray(samples, dtype=np.int64))
    all_us = np.unique(np.concatenate([lidar_us, camera_key_us.ravel(), *sweeps]))
    return Timeline(
        lidar_us, lidar_keyframe, lidar_sample, camera_key_us, tuple(sweeps), tuple(sweep_samples), all_us
    )  # fmt: skip


def attribute_names(
    class_index: np.ndarray, speed_mps: np.ndarray, parked: np.ndarray, has_rider: np.ndarray
) -> np.ndarray:
    """(A, T) nuScenes attribute of each object at each time ('' for classes without).

    Vehicles: moving above 0.3 m/s, else parked (still all scene, no intent to move) or stopped;
    pedestrians: moving above 0.2 m/s, else standing; cycles: with or without rider.
    """
    names = np.asarray(DETECTION_CLASSES, dtype=object)[class_index][:, None]
    speed = np.asarray(speed_mps)
    out = np.full(speed.shape, "", dtype=object)
    vehicle = np.isin(names, ["car", "truck", "bus", "trailer", "construction_vehicle"])
    still_vehicle = np.where(parked[:, None], "vehicle.parked", "vehicle.stopped")
    out = np.where(vehicle, np.where(speed > 0.3, "vehicle.moving", still_vehicle), out)
    ped = names == "pedestrian"
    out = np.where(ped, np.where(speed > 0.2, "pedestrian.moving", "pedestrian.standing"), out)
    cycle = np.isin(names, ["bicycle", "motorcycle"])
    rider = np.where(has_rider[:, None], "cycle.with_rider", "cycle.without_rider")
    out = np.where(cycle, np.broadcast_to(rider, speed.shape), out)
    return out.astype(object)


def _prepare_output(root: Path, version: str, overwrite: bool) -> None:
    targets = [root / version, *(root / d for d in _OUTPUT_DIRS)]
    existing = [p for p in targets if p.exists()]
    if existing and not overwrite:
        raise FileExistsError(
            f"{existing[0]}: already exists; choose an empty folder or pass overwrite=True (--force)"
        )
    for path in existing:
        shutil.rmtree(path)
    root.mkdir(parents=True, exist_ok=True)


def _world_half_extent(plans: list[EgoPlan], t0_s: float, t1_s: float) -> float:
    t = np.linspace(t0_s, t1_s, 200)
    reach = max(float(np.abs(p.road_u(t)).max()) for p in plans)
    return float(np.ceil((max(reach, 60.0) + MAP_MARGIN_M) / 10.0) * 10.0)


class _DatasetWriter:
    """Holds what all scenes share (config, rig, tables, timeline) and writes scene by scene."""

    def __init__(self, root: Path, cfg: SynthConfig, rig: Rig, progress: tqdm) -> None:
        self.root = root
        self.cfg = cfg
        self.rig = rig
        self.progress = progress
        self.tables = NuScenesTables(salt=f"autolabel-synth/{cfg.seed}/{cfg.version}")
        self.timeline = build_timeline(cfg, rig)
        self.noise = LidarNoise(
            range_sigma_m=cfg.lidar_range_noise_m, dropout_prob=cfg.lidar_dropout
        )
        self.sensor_token: dict[str, str] = {}
        for cam in rig.cameras:
            self._sensor(cam.channel, "camera")
        self._sensor(rig.lidar.channel, "lidar")
        self.class_counts = dict.fromkeys(DETECTION_CLASSES, 0)
        self.seconds: dict[str, float] = {}
        self.scene_facts: dict[str, dict] = {}

    @contextmanager
    def timed(self, stage: str):
        """Adds the wall time of the block to ``seconds[stage]`` (reported, never written)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - start

    def _sensor(self, channel: str, modality: str) -> None:
        token = self.tables.token("sensor", channel)
        self.sensor_token[channel] = token
        self.tables.add("sensor", {"token": token, "channel": channel, "modality": modality})

    # -- logs ----------------------------------------------------------------------------------
    def write_log(self, log_index: int, scene_indices: list[int]) -> list[str]:
        """Plan the log's scenes, build its world, write everything; returns the scene names."""
        cfg = self.cfg
        tl = self.timeline
        t0_s, t1_s = tl.all_us[0] / 1e6, tl.all_us[-1] / 1e6
        log_rng = np.random.default_rng([cfg.seed, log_index, 0])
        layout = sample_layout(log_rng, 0.0)
        scene_rngs = [np.random.default_rng([cfg.seed, log_index, 1, s]) for s in scene_indices]
        with self.timed("plan"):
            egos = [sample_ego(layout, rng, t0_s, t1_s) for rng in scene_rngs]
        half = _world_half_extent([e for e, _ in egos], t0_s, t1_s)
        layout = replace(layout, centre_xy=np.array([half, half]))
        with self.timed("world"):
            world = build_world(layout, half, log_rng)

        log_token = self.tables.token("log", log_index)
        map_token = self.tables.token("map", log_index)
        log_start_us = BASE_TIMESTAMP_US + cfg.seed % 1000 * 86_400_000_000
        log_start_us += log_index * LOG_SPACING_US
        date = dt.datetime.fromtimestamp(log_start_us / 1e6, dt.timezone.utc)
        logfile = f"synth{cfg.seed}-{date:%Y-%m-%d-%H-%M-%S}+0000-log{log_index:03d}"
        self.tables.add(
            "log",
            {
                "token": log_token,
                "logfile": logfile,
                "vehicle": "synth-zoe",
                "date_captured": f"{date:%Y-%m-%d}",
                "location": f"synth-crossroads-{cfg.seed}-{log_index}",
            },
        )
        map_file = f"maps/{map_token}.png"
        atomic_write_bytes(self.root / map_file, encode_png_gray(world.map_mask))
        self.tables.add(
            "map",
            {
                "token": map_token,
                "log_tokens": [log_token],
                "category": "semantic_prior",
                "filename": map_file,
            },
        )
        names = []
        clip_us = int(tl.all_us[-1] - tl.all_us[0])
        for k, (scene_index, rng, (ego, lead)) in enumerate(
            zip(scene_indices, scene_rngs, egos, strict=True)
        ):
            ego = ego.with_layout(layout)
            with self.timed("plan"):
                agents = sample_agents(
                    layout, ego, lead, rng, t0_s, t1_s, cfg.all_classes, cfg.extra_agents
                )
            start_us = log_start_us + k * (clip_us + SCENE_GAP_US) - int(tl.all_us[0])
            name = f"synth-{scene_index:04d}"
            description = (
                f"synthetic crossroads; ego {ego.scenario}"
                + (f", lead {lead.class_name}" + (f" turning {lead.turn}" if lead.turn else "") if lead else "")
                + f"; {len(agents)} agents"
            )  # fmt: skip
            self._write_scene(scene_index, name, description, log_token, logfile, world, ego, agents, start_us)  # fmt: skip
            names.append(name)
        return names

    # -- scenes --------------------------------------------------------------------------------
    def _write_scene(
        self,
        scene_index: int,
        name: str,
        description: str,
        log_token: str,
        logfile: str,
        world: World,
        ego: EgoPlan,
        agents: SceneAgents,
        start_us: int,
    ) -> None:
        cfg, rig, tl, tables = self.cfg, self.rig, self.timeline, self.tables
        tok = tables.token
        n_obj = len(agents)
        k_count = tl.num_keyframes
        t_s = tl.all_us / 1e6
        at = {int(u): i for i, u in enumerate(tl.all_us)}
        ego_xy, ego_yaw, _ = ego.poses(t_s)
        center, yaw, vel = agents.states(t_s)  # (A, T, ...)
        attrs = attribute_names(
            agents.class_index, np.linalg.norm(vel, axis=-1), agents.parked, agents.has_rider
        )
        scenery = scenery_boxes(
            world.building_center,
            world.building_size_wlh,
            world.building_yaw,
            world.building_colour,
        )
        rot_ego = rotation_from_yaw(ego_yaw)
        quat_ego = quat_wxyz_from_yaw(ego_yaw)

        def global_SE3_ego(i: int) -> SE3:
            return SE3(rot_ego[i], np.array([ego_xy[i, 0], ego_xy[i, 1], 0.0]))

        def boxes_at(i: int):
            return compose_scene(agents.parts, center[:, i], yaw[:, i], scenery)

        scene_token = tok("scene", scene_index)
        sample_tokens = [tok("sample", scene_index, j) for j in range(k_count)]
        cs_token = {}
        for cam in rig.cameras:
            cs_token[cam.channel] = tok("calibrated_sensor", scene_index, cam.channel)
            tables.calibrated_sensor(
                cs_token[cam.channel],
                self.sensor_token[cam.channel],
                cam.ego_SE3_camera.translation,
                cam.ego_SE3_camera.quat_wxyz,
                cam.intrinsic,
            )
        lidar = rig.lidar
        cs_token[lidar.channel] = tok("calibrated_sensor", scene_index, lidar.channel)
        tables.calibrated_sensor(
            cs_token[lidar.channel],
            self.sensor_token[lidar.channel],
            lidar.ego_SE3_lidar.translation,
            lidar.ego_SE3_lidar.quat_wxyz,
            None,
        )
        chains: dict[str, list[dict]] = {}

        def sample_data(channel, ordinal, i, sample_j, key, filename, width, height) -> dict:
            token = tok("sample_data", scene_index, channel, ordinal)
            timestamp = start_us + int(tl.all_us[i])
            tables.ego_pose(token, timestamp, [ego_xy[i, 0], ego_xy[i, 1], 0.0], quat_ego[i])
            rec = {
                "token": token,
                "sample_token": sample_tokens[sample_j],
                "ego_pose_token": token,
                "calibrated_sensor_token": cs_token[channel],
                "timestamp": timestamp,
                "fileformat": "pcd" if channel == lidar.channel else "jpg",
                "is_key_frame": bool(key),
                "height": int(height),
                "width": int(width),
                "filename": filename,
                "prev": "",
                "next": "",
            }
            chains.setdefault(channel, []).append(rec)
            return rec

        def swept_states(i: int, g_lidar: SE3):
            """Each object's centre, yaw and velocity where the sweep at time index i sees it."""
            if not cfg.lidar_hit_time:
                return center[:, i], yaw[:, i], vel[:, i]
            c, y, v = center[:, i], yaw[:, i], vel[:, i]
            # The beams reach an object at its azimuth's turn; the object moves meanwhile, so
            # the turn is taken again where it then is (one step: a 0.05 s move shifts the
            # azimuth by well under the beam spacing beyond 2 m).
            for _ in range(2):
                rel = g_lidar.inverse().transform_points(c)
                turn = np.mod(-np.arctan2(rel[:, 1], rel[:, 0]), 2 * np.pi) / (2 * np.pi)
                c, y, v = agents.states_each(t_s[i] + turn / cfg.lidar_spin_hz)
            return c, y, v

        # LiDAR: every sweep; points inside each object's box at the keyframes.
        num_pts = np.zeros((k_count, n_obj), np.int64)
        lidar_key_index = np.zeros(k_count, np.int64)
        key_center = np.zeros((k_count, n_obj, 3))
        key_yaw = np.zeros((k_count, n_obj))
        for k, t_us in enumerate(tl.lidar_us):
            i = at[int(t_us)]
            g_lidar = global_SE3_ego(i).compose(lidar.ego_SE3_lidar)
            c_hit, yaw_hit, _ = swept_states(i, g_lidar)
            rng = np.random.default_rng([cfg.seed, scene_index, 2, k])
            with self.timed("lidar"):
                swept = compose_scene(agents.parts, c_hit, yaw_hit, scenery)
                points, _ = simulate_sweep(lidar, g_lidar, swept, rng, self.noise)
            j = int(tl.lidar_keyframe[k])
            folder = "samples" if j >= 0 else "sweeps"
            filename = f"{folder}/{lidar.channel}/{logfile}__{lidar.channel}__{start_us + int(t_us)}.pcd.bin"
            with self.timed("write"):
                write_pcd_bin(self.root / filename, points)
            sample_data(lidar.channel, k, i, int(tl.lidar_sample[k]), j >= 0, filename, 0, 0)
            if j >= 0:
                lidar_key_index[j] = i
                key_center[j], key_yaw[j] = c_hit, yaw_hit
                points_global = g_lidar.transform_points(points[:, :3])
                num_pts[j] = count_points_in_boxes(points_global, c_hit, agents.size_wlh, yaw_hit)
            self.progress.update(1)

        annotated = num_pts >= cfg.min_lidar_points  # (K, A)
        has_instance = annotated.any(axis=0)
        inst_token = [
            tok("instance", scene_index, a) if has_instance[a] else None for a in range(n_obj)
        ]
        ann_token = [[tok("sample_annotation", scene_index, a, j) for a in range(n_obj)] for j in range(k_count)]  # fmt: skip

        self.scene_facts[name] = {
            "scene_token": scene_token,
            "ego_scenario": ego.scenario,
            "ego_lane": ego.lane,
            "ego_stop_window_s": list(ego.stop_window_s) if ego.stop_window_s else None,
            "objects": [
                {
                    "object_index": a,
                    "instance_token": inst_token[a],
                    "detection_name": DETECTION_CLASSES[agents.class_index[a]],
                    "category_name": str(agents.category[a]),
                    "situation": str(agents.situation[a]),
                    "has_rider": bool(agents.has_rider[a]),
                    "parked": bool(agents.parked[a]),
                }
                for a in range(n_obj)
            ],
        }

        # Cameras: keyframe images with their side files, then intermediate images.
        visible_sum = np.zeros((k_count, n_obj), np.int64)
        unoccluded_sum = np.zeros((k_count, n_obj), np.int64)
        for j in range(k_count):
            for c, cam in enumerate(rig.cameras):
                i = at[int(tl.camera_key_us[j, c])]
                filename = self._camera_file("samples", cam, logfile, start_us + int(tl.all_us[i]))
                rec = sample_data(cam.channel, j, i, j, True, filename, cam.width_px, cam.height_px)
                pix = self._render(
                    cam, global_SE3_ego(i), boxes_at(i), world, filename, n_obj, True
                )
                visible_sum[j] += pix.visible_px
                unoccluded_sum[j] += pix.unoccluded_px
                self._write_side_files(
                    rec, scene_token, cam, pix, agents, center[:, i], yaw[:, i], vel[:, i],
                    attrs[:, i], inst_token, ann_token[j], annotated[j],
                )  # fmt: skip
                self.progress.update(1)
        for c, cam in enumerate(rig.cameras):
            for m, (t_us, j) in enumerate(
                zip(tl.camera_sweep_us[c], tl.camera_sweep_sample[c], strict=True)
            ):
                i = at[int(t_us)]
                filename = self._camera_file("sweeps", cam, logfile, start_us + int(t_us))
                sample_data(cam.channel, k_count + m, i, int(j), False, filename, cam.width_px, cam.height_px)  # fmt: skip
                self._render(cam, global_SE3_ego(i), boxes_at(i), world, filename, n_obj, False)
                self.progress.update(1)

        # Tables of the scene.
        for j in range(k_count):
            i = lidar_key_index[j]
            tables.add(
                "sample",
                {
                    "token": sample_tokens[j],
                    "timestamp": start_us + int(tl.all_us[i]),
                    "prev": sample_tokens[j - 1] if j > 0 else "",
                    "next": sample_tokens[j + 1] if j + 1 < k_count else "",
                    "scene_token": scene_token,
                },
            )
        for channel in sorted(chains):
            recs = sorted(chains[channel], key=lambda r: r["timestamp"])
            for a, b in zip(recs[:-1], recs[1:], strict=True):
                a["next"], b["prev"] = b["token"], a["token"]
            for rec in recs:
                tables.add("sample_data", rec)
        with np.errstate(divide="ignore", invalid="ignore"):
            fraction = np.where(
                unoccluded_sum > 0, visible_sum / np.maximum(unoccluded_sum, 1), 0.0
            )
        vis_token = visibility_token(fraction.ravel()).reshape(fraction.shape)
        quat = quat_wxyz_from_yaw(key_yaw)  # (K, A, 4)
        for a in np.flatnonzero(has_instance):
            frames = np.flatnonzero(annotated[:, a])
            tokens = [ann_token[j][a] for j in frames]
            for n, j in enumerate(frames):
                i = lidar_key_index[j]
                attr = attrs[a, i]
                tables.add(
                    "sample_annotation",
                    {
                        "token": tokens[n],
                        "sample_token": sample_tokens[j],
                        "instance_token": inst_token[a],
                        "visibility_token": str(vis_token[j, a]),
                        "attribute_tokens": [tables.attribute_token(attr)] if attr else [],
                        "translation": _round(key_center[j, a]),
                        "size": _round(agents.size_wlh[a]),
                        "rotation": _round(quat[j, a], 9),
                        "prev": tokens[n - 1] if n > 0 else "",
                        "next": tokens[n + 1] if n + 1 < len(tokens) else "",
                        "num_lidar_pts": int(num_pts[j, a]),
                        "num_radar_pts": 0,
                    },
                )
            tables.add(
                "instance",
                {
                    "token": inst_token[a],
                    "category_token": tables.category_token(agents.category[a]),
                    "nbr_annotations": len(tokens),
                    "first_annotation_token": tokens[0],
                    "last_annotation_token": tokens[-1],
                },
            )
            self.class_counts[DETECTION_CLASSES[agents.class_index[a]]] += len(tokens)
        tables.add(
            "scene",
            {
                "token": scene_token,
                "log_token": log_token,
                "nbr_samples": k_count,
                "first_sample_token": sample_tokens[0],
                "last_sample_token": sample_tokens[-1],
                "name": name,
                "description": description,
            },
        )

    @staticmethod
    def _camera_file(folder: str, cam: CameraCalibration, logfile: str, timestamp: int) -> str:
        return f"{folder}/{cam.channel}/{logfile}__{cam.channel}__{timestamp}.jpg"

    def _render(self, cam, global_SE3_ego: SE3, boxes, world: World, filename: str, n_obj: int, stats: bool):  # fmt: skip
        g_cam = global_SE3_ego.compose(cam.ego_SE3_camera)
        with self.timed("render"):
            result = render_camera(cam, g_cam, boxes, world.ground)
        with self.timed("write"):
            atomic_write_bytes(
                self.root / filename, encode_jpeg(result.image, self.cfg.jpeg_quality)
            )
        if not stats:
            return None
        with self.timed("pixels"):
            return object_pixels(result, boxes, n_obj)

    def _write_side_files(
        self, rec, scene_token, cam, pix, agents, center, yaw, vel, attrs, inst_token, ann_token, annotated
    ) -> None:  # fmt: skip
        paths = relative_paths(cam.channel, rec["token"])
        quat = quat_wxyz_from_yaw(yaw)
        objects = []
        for k, a in enumerate(pix.object_ids):
            visible = int(pix.visible_px[a])
            objects.append(
                {
                    "id": k + 1,
                    "object_index": int(a),
                    "instance_token": inst_token[a],
                    "annotation_token": ann_token[a] if annotated[a] else None,
                    "category_name": str(agents.category[a]),
                    "detection_name": DETECTION_CLASSES[agents.class_index[a]],
                    "attribute_name": str(attrs[a]),
                    "visible_px": visible,
                    "unoccluded_px": int(pix.unoccluded_px[a]),
                    "face_px": int(pix.face_px[a]),
                    "plate_px": int(pix.plate_px[a]),
                    "bbox_px": [int(v) for v in pix.bbox_px[a]] if visible else None,
                    "box": {
                        "translation": _round(center[a]),
                        "size": _round(agents.size_wlh[a]),
                        "rotation": _round(quat[a], 9),
                    },
                    "velocity": _round(vel[a]),
                }
            )
        index = {
            "sample_data_token": rec["token"],
            "sample_token": rec["sample_token"],
            "scene_token": scene_token,
            "channel": cam.channel,
            "timestamp": rec["timestamp"],
            "width": cam.width_px,
            "height": cam.height_px,
            "ids_png": paths["ids_png"],
            "face_png": paths["face_png"],
            "plate_png": paths["plate_png"],
            "objects": objects,
        }
        root = self.root
        with self.timed("write"):
            atomic_write_bytes(root / paths["ids_png"], encode_png_gray(pix.ids))
            atomic_write_bytes(root / paths["face_png"], encode_png_gray(pix.face_mask > 0))
            atomic_write_bytes(root / paths["plate_png"], encode_png_gray(pix.plate_mask > 0))
            text = json.dumps(index, sort_keys=True, allow_nan=False)
            atomic_write_bytes(root / paths["index"], (text + "\n").encode("utf-8"))


def _round(values: np.ndarray, digits: int = 6) -> list[float]:
    return [float(v) + 0.0 for v in np.round(np.asarray(values, dtype=np.float64), digits)]


def _split_logs(n_logs: int, val_fraction: float) -> tuple[list[int], list[int]]:
    if n_logs == 1:
        return [], [0]
    n_val = min(n_logs - 1, max(1, int(round(n_logs * val_fraction))))
    return list(range(n_logs - n_val)), list(range(n_logs - n_val, n_logs))


def generate_dataset(
    out_dir: str | Path, config: SynthConfig | None = None, overwrite: bool = False
) -> dict:
    """Write a synthetic nuScenes-format dataset to ``out_dir``.

    Args:
        out_dir: the dataroot to create (``NuScenes(config.version, out_dir)`` loads it).
        config: what to generate; defaults to ``SynthConfig()``.
        overwrite: replace an earlier dataset in ``out_dir`` (only the folders this function
            writes are removed).

    Returns:
        A summary: dataroot, version, scene names, split scene lists, counts of records and
        annotations per detection class, and wall seconds per stage (plan, world, lidar, render,
        pixels, write, tables; not written anywhere, so outputs stay byte-identical).

    Raises:
        FileExistsError: ``out_dir`` already holds a dataset and ``overwrite`` is False.
    """
    cfg = config or SynthConfig()
    rig = load_rig(cfg.rig)
    if cfg.width_px is not None:
        rig = rig.scaled(cfg.width_px, cfg.height_px)
    root = Path(out_dir)
    _prepare_output(root, cfg.version, overwrite)
    per_log = cfg.logs_scenes
    n_logs = -(-cfg.scenes // per_log)
    timeline = build_timeline(cfg, rig)
    frames_per_scene = len(timeline.lidar_us) + timeline.camera_key_us.size
    frames_per_scene += sum(len(s) for s in timeline.camera_sweep_us)
    with tqdm(
        total=cfg.scenes * frames_per_scene, disable=not cfg.progress, unit="frame", desc="synth"
    ) as progress:
        writer = _DatasetWriter(root, cfg, rig, progress)
        names_by_log = []
        for log_index in range(n_logs):
            scenes = list(range(log_index * per_log, min(cfg.scenes, (log_index + 1) * per_log)))
            names_by_log.append(writer.write_log(log_index, scenes))
    train_logs, val_logs = _split_logs(n_logs, cfg.val_fraction)
    splits = {
        cfg.split_names[0]: [n for log in train_logs for n in names_by_log[log]],
        cfg.split_names[1]: [n for log in val_logs for n in names_by_log[log]],
    }
    table_root = root / cfg.version
    text = json.dumps(splits, indent=1, sort_keys=True)
    atomic_write_bytes(table_root / "splits.json", (text + "\n").encode("utf-8"))
    facts_text = json.dumps(writer.scene_facts, indent=1, sort_keys=True, allow_nan=False)
    atomic_write_bytes(root / GT_DIR / "scenes.json", (facts_text + "\n").encode("utf-8"))
    config_text = json.dumps(config_to_dict(cfg), indent=1, sort_keys=True)
    atomic_write_bytes(root / GT_DIR / "config.json", (config_text + "\n").encode("utf-8"))
    with writer.timed("tables"):
        writer.tables.write(table_root)  # last: a dataset is loadable only once complete
    t = writer.tables.tables
    return {
        "dataroot": str(root),
        "version": cfg.version,
        "scenes": [n for names in names_by_log for n in names],
        "splits": splits,
        "logs": len(t["log"]),
        "samples": len(t["sample"]),
        "sample_data": len(t["sample_data"]),
        "sample_annotations": len(t["sample_annotation"]),
        "instances": len(t["instance"]),
        "annotations_per_class": dict(writer.class_counts),
        "seconds_by_stage": {k: round(v, 3) for k, v in sorted(writer.seconds.items())},
    }
