"""Read nuScenes-format datasets (nuScenes, and TIER IV's T4 derivatives) into ``Clip`` records.

The tables are loaded by nuscenes-devkit (``nuscenes.NuScenes``); this module only checks that they
are there and well formed, picks the sensors from the data and turns each scene into a ``Clip``
of keyframes with poses, calibrations, sensor file paths and ground truth as arrays.

Differences between the two layouts that are handled here (T4 format, tier4/t4-devkit docs):

- the table folder: ``<dataroot>/v1.0-*`` in nuScenes, ``<dataroot>/annotation`` in T4 (any name
  is accepted as the version);
- sensor channels: the LiDAR is ``LIDAR_TOP`` or ``LIDAR_CONCAT`` (points given in base_link, so
  its calibrated_sensor is the identity), cameras vary in number and name (``CAM_FRONT_NARROW``,
  ``CAM_TRAFFIC_LIGHT_NEAR``, ...): cameras are the channels of modality ``camera`` present in the
  keyframes, the LiDAR the one channel of modality ``lidar``;
- category names: flat (``car``, ``police_car``) as well as nuScenes' (``vehicle.car``);
- visibility levels: ``full``/``most``/``partial``/``none`` instead of ``v80-100`` ... ``v0-40``,
  and an empty ``visibility_token`` where none was annotated;
- optional tables (``visibility``, ``attribute``, ``map``, ``log``, and the annotation tables of a
  non-annotated dataset) may be missing or empty.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import numpy as np
from nuscenes import NuScenes

from autolabel.boxes import Boxes3D
from autolabel.classes import class_index, detection_class_of_category
from autolabel.clip import CameraImage, Clip, Frame, GroundTruth, LidarSweep
from autolabel.sensors import CAMERA_CHANNELS, CameraCalibration, LidarCalibration
from calib.rotation import rotation_from_quat_wxyz, yaw_from_rotation
from calib.se3 import SE3

#: Tables without which no clip can be read.
REQUIRED_TABLES = ("sensor", "calibrated_sensor", "ego_pose", "scene", "sample", "sample_data")
#: Tables that may be absent (then read as empty): T4 non-annotated datasets, datasets without maps.
OPTIONAL_TABLES = (
    "category",
    "attribute",
    "visibility",
    "instance",
    "sample_annotation",
    "log",
    "map",
)
#: LiDAR channels in order of preference when a dataset has more than one.
PREFERRED_LIDAR_CHANNELS = ("LIDAR_TOP", "LIDAR_CONCAT")
#: Number of values per point in a ``.pcd.bin`` LiDAR file (x, y, z, intensity, ring index).
LIDAR_POINT_DIMS = 5

#: Visibility level names -> the nuScenes visibility scale 1 (least visible) .. 4 (most visible).
VISIBILITY_LEVELS: dict[str, int] = {
    "v0-40": 1,
    "v40-60": 2,
    "v60-80": 3,
    "v80-100": 4,
    # T4: "none" (90-100 % occluded), "partial" (> 50 % occluded), "most" (< 50 % occluded), "full".
    "none": 1,
    "partial": 2,
    "most": 3,
    "full": 4,
}

#: T4 flat category names -> the nuScenes category they correspond to, so that the devkit's
#: detection mapping decides (and drops what it drops, e.g. emergency vehicles and strollers).
T4_CATEGORY_ALIASES: dict[str, str] = {
    "car": "vehicle.car",
    "truck": "vehicle.truck",
    "bus": "vehicle.bus.rigid",
    "trailer": "vehicle.trailer",
    "construction_vehicle": "vehicle.construction",
    "motorcycle": "vehicle.motorcycle",
    "bicycle": "vehicle.bicycle",
    "pedestrian": "human.pedestrian.adult",
    "construction_worker": "human.pedestrian.construction_worker",
    "police_officer": "human.pedestrian.police_officer",
    "stroller": "human.pedestrian.stroller",
    "wheelchair": "human.pedestrian.wheelchair",
    "personal_mobility": "human.pedestrian.personal_mobility",
    "police_car": "vehicle.emergency.police",
    "ambulance": "vehicle.emergency.ambulance",
    "fire_truck": "vehicle.emergency.fire_truck",
    "animal": "animal",
    "traffic_cone": "movable_object.trafficcone",
    "barrier": "movable_object.barrier",
}

#: nuScenes detection attributes; preferred when a T4 annotation carries several attributes.
_DETECTION_ATTRIBUTE_PREFIXES = ("vehicle.", "cycle.", "pedestrian.")

_DEFAULT_LIDAR_LAYOUT: LidarCalibration | None = None


class DatasetError(ValueError):
    """A nuScenes-format dataset is missing, malformed or inconsistent (the message names where)."""


class _CheckedNuScenes(NuScenes):
    """``nuscenes.NuScenes`` whose table loading names the file on every failure and tolerates
    absent optional tables; the tables themselves, the index and every query are the devkit's.

    Records that share a token are kept (the devkit's index keeps the last), but once the dataset
    is loaded, ``get`` of such a token raises: which record is meant cannot be told, and the last
    one may belong to another scene. Clips that never touch one read normally.
    """

    _ready = False

    def get(self, table_name: str, token: str) -> dict:
        if self._ready and token in self.duplicate_tokens.get(table_name, {}):
            raise DatasetError(
                f"{Path(self.table_root) / f'{table_name}.json'}: "
                f"{self.duplicate_tokens[table_name][token]} records share the token {token}; "
                "tokens must be unique (which record is meant cannot be told)"
            )
        return NuScenes.get(self, table_name, token)

    def __load_table__(self, table_name: str) -> list:  # overrides the devkit loader
        path = Path(self.table_root) / f"{table_name}.json"
        if not path.is_file():
            if table_name in OPTIONAL_TABLES:
                return []
            raise DatasetError(f"{path}: table {table_name!r} is missing")
        try:
            with open(path, encoding="utf-8") as f:
                table = json.load(f)
        except json.JSONDecodeError as e:
            raise DatasetError(f"{path}: not valid JSON ({e})") from None
        except UnicodeDecodeError as e:
            raise DatasetError(f"{path}: not UTF-8 text ({e})") from None
        if not isinstance(table, list):
            raise DatasetError(
                f"{path}: expected a JSON list of records, got {type(table).__name__}"
            )
        for i, record in enumerate(table):
            if not isinstance(record, dict) or "token" not in record:
                raise DatasetError(f"{path}: record {i} is not an object with a 'token'")
        counts = Counter(str(r["token"]) for r in table)
        if len(counts) < len(table):
            self.__dict__.setdefault("duplicate_tokens", {})[table_name] = {
                t: n for t, n in counts.items() if n > 1
            }
        if table_name == "map":
            # A map record makes the devkit open its mask file; keep only maps whose file exists.
            table = [m for m in table if (Path(self.dataroot) / m.get("filename", "")).is_file()]
        return table

    def __make_reverse_index__(self, verbose: bool) -> None:
        # The devkit indexes logs through the map table and fails when it is empty or misses a
        # log; index with a stand-in map record for the uncovered logs, then drop it again.
        covered = {t for m in self.map for t in m.get("log_tokens", [])}
        uncovered = [log["token"] for log in self.log if log["token"] not in covered]
        real_map = self.map
        if uncovered or not real_map:
            self.map = [*real_map, {"token": "", "log_tokens": uncovered}]
        try:
            NuScenes.__make_reverse_index__(self, verbose)
        finally:
            self.map = real_map
            self._token2ind["map"] = {m["token"]: i for i, m in enumerate(real_map)}
        self.__dict__.setdefault("duplicate_tokens", {})
        self._ready = True


def _table_root_candidates(dataroot: Path) -> list[str]:
    return sorted(p.parent.name for p in dataroot.glob("*/scene.json"))


def open_dataset(dataroot: str | Path, version: str) -> NuScenes:
    """Load a nuScenes-format dataset with nuscenes-devkit.

    Args:
        dataroot: folder holding the table folder and the sensor files (``samples/``, ``data/``).
        version: name of the table folder, e.g. ``v1.0-mini`` (nuScenes) or ``annotation`` (T4).

    Raises:
        DatasetError: the dataroot or version folder is missing, a required table is missing, a
            table is not valid JSON, or records reference missing records (the message says which).
    """
    root = Path(dataroot)
    if not root.is_dir():
        raise DatasetError(f"dataroot {root} does not exist or is not a folder")
    table_root = root / version
    if not table_root.is_dir():
        found = _table_root_candidates(root)
        raise DatasetError(
            f"version folder {table_root} does not exist"
            + (f"; table folders found in {root}: {found}" if found else "")
        )
    try:
        nusc = _CheckedNuScenes(version=version, dataroot=str(root), verbose=False)
    except KeyError as e:
        raise DatasetError(
            f"{table_root}: a record references a missing record or lacks a field: {e}"
        ) from None
    except (TypeError, AttributeError, IndexError, AssertionError) as e:
        # Records of the wrong shape (a string where an object belongs, ...) or, for lidarseg,
        # label files that do not match the table fail inside the devkit's indexing.
        raise DatasetError(f"{table_root}: malformed tables ({type(e).__name__}: {e})") from None
    return nusc


def _as_nusc(nusc_or_dataroot: NuScenes | str | Path, version: str | None) -> NuScenes:
    if isinstance(nusc_or_dataroot, NuScenes):
        return nusc_or_dataroot
    if version is None:
        raise ValueError("give the dataset version (table folder name) with a dataroot")
    return open_dataset(nusc_or_dataroot, version)


def list_clips(nusc_or_dataroot: NuScenes | str | Path, version: str | None = None) -> list[str]:
    """Scene names of a dataset, in the order of its scene table."""
    nusc = _as_nusc(nusc_or_dataroot, version)
    return [scene["name"] for scene in nusc.scene]


def _where(nusc: NuScenes, table: str) -> str:
    return str(Path(nusc.table_root) / f"{table}.json")


def _field(nusc: NuScenes, table: str, record: dict, key: str):
    try:
        return record[key]
    except KeyError:
        raise DatasetError(
            f"{_where(nusc, table)}: record {record.get('token', '?')} has no {key!r}"
        ) from None


def _pose(nusc: NuScenes, table: str, record: dict) -> SE3:
    quat = np.asarray(_field(nusc, table, record, "rotation"), dtype=np.float64)
    trans = np.asarray(_field(nusc, table, record, "translation"), dtype=np.float64)
    if (
        quat.shape != (4,)
        or trans.shape != (3,)
        or not np.any(quat)
        or not (np.isfinite(quat).all() and np.isfinite(trans).all())
    ):
        raise DatasetError(
            f"{_where(nusc, table)}: record {record['token']} needs a non-zero 4-number "
            f"'rotation' and a 3-number 'translation', all finite; got rotation "
            f"{record.get('rotation')!r}, translation {record.get('translation')!r}"
        )
    return SE3.from_quat_wxyz(quat, trans)


def _is_pinhole_intrinsic(k: np.ndarray) -> bool:
    return bool(
        np.isfinite(k).all()
        and k[0, 0] > 0
        and k[1, 1] > 0
        and np.array_equal(k[2], [0.0, 0.0, 1.0])
    )


def _sensor_channels(nusc: NuScenes, sample: dict, modality: str) -> list[str]:
    return [
        ch
        for ch, sd_token in sample["data"].items()
        if nusc.get("sample_data", sd_token)["sensor_modality"] == modality
    ]


def _choose_lidar(nusc: NuScenes, samples: list[dict], lidar_channel: str | None) -> str:
    present = sorted({ch for s in samples for ch in _sensor_channels(nusc, s, "lidar")})
    if lidar_channel is not None:
        if lidar_channel not in present:
            raise DatasetError(
                f"{nusc.table_root}: no LiDAR channel {lidar_channel!r} in the keyframes; "
                f"present: {present}"
            )
        return lidar_channel
    if len(present) == 1:
        return present[0]
    for ch in PREFERRED_LIDAR_CHANNELS:
        if ch in present:
            return ch
    raise DatasetError(
        f"{nusc.table_root}: cannot choose the LiDAR among {present}; pass lidar_channel="
    )


def _camera_order(channels: set[str]) -> list[str]:
    known = [c for c in CAMERA_CHANNELS if c in channels]
    return known + sorted(channels - set(known))


def _default_lidar_layout() -> LidarCalibration:
    # nuScenes-format data does not record the beam layout; use the nuScenes rig's.
    global _DEFAULT_LIDAR_LAYOUT
    if _DEFAULT_LIDAR_LAYOUT is None:
        from calib.rig import load_rig

        _DEFAULT_LIDAR_LAYOUT = load_rig("nuscenes").lidar
    return _DEFAULT_LIDAR_LAYOUT


def detection_label_of_category(category_name: str) -> int | None:
    """Index into DETECTION_CLASSES of a nuScenes or T4 category name; None if the devkit drops it."""
    name = T4_CATEGORY_ALIASES.get(category_name, category_name)
    det = detection_class_of_category(name)
    return None if det is None else class_index(det)


class _ClipReader:
    """Reads one scene; caches calibrations and poses by token (records are shared by frames)."""

    def __init__(self, nusc: NuScenes, lidar_channel: str | None, camera_channels, max_sweeps):
        self.nusc = nusc
        self.dataroot = Path(nusc.dataroot)
        self.lidar_channel_arg = lidar_channel
        self.camera_channels_arg = camera_channels
        self.max_sweeps = max_sweeps
        self._poses: dict[str, SE3] = {}
        self._sensor_poses: dict[str, SE3] = {}
        self._cameras: dict[tuple[str, int, int], CameraCalibration] = {}
        self._label_of_category: dict[str, int | None] = {}
        self._visibility = {
            v["token"]: VISIBILITY_LEVELS.get(
                str(v.get("level", "")), int(v["token"]) if str(v["token"]).isdigit() else 0
            )
            for v in nusc.visibility
        }
        self._attribute_name = {a["token"]: a.get("name", "") for a in nusc.attribute}

    def ego_pose(self, sd: dict) -> SE3:
        token = _field(self.nusc, "sample_data", sd, "ego_pose_token")
        if token not in self._poses:
            self._poses[token] = _pose(self.nusc, "ego_pose", self.nusc.get("ego_pose", token))
        return self._poses[token]

    def prefetch_ego_poses(self, sds: list[dict]) -> None:
        """Convert the ego poses of many sample_data at once (one batched quaternion conversion)."""
        tokens = list(
            dict.fromkeys(_field(self.nusc, "sample_data", sd, "ego_pose_token") for sd in sds)
        )
        tokens = [t for t in tokens if t not in self._poses]
        records = [self.nusc.get("ego_pose", t) for t in tokens]
        try:
            quat = np.array([r["rotation"] for r in records], dtype=np.float64).reshape(-1, 4)
            trans = np.array([r["translation"] for r in records], dtype=np.float64).reshape(-1, 3)
            if len(quat) != len(records) or len(trans) != len(records):
                raise ValueError
            if not (np.isfinite(quat).all() and np.isfinite(trans).all()):
                raise ValueError
            rot = rotation_from_quat_wxyz(quat)
        except (KeyError, ValueError):
            for r in records:  # find and name the malformed record
                _pose(self.nusc, "ego_pose", r)
            raise
        for t, r, tr in zip(tokens, rot, trans, strict=True):
            self._poses[t] = SE3(r, tr)

    def sensor_pose(self, sd: dict) -> SE3:
        token = _field(self.nusc, "sample_data", sd, "calibrated_sensor_token")
        if token not in self._sensor_poses:
            cs = self.nusc.get("calibrated_sensor", token)
            self._sensor_poses[token] = _pose(self.nusc, "calibrated_sensor", cs)
        return self._sensor_poses[token]

    def camera(self, sd: dict) -> CameraCalibration:
        width, height = int(sd.get("width") or 0), int(sd.get("height") or 0)
        key = (_field(self.nusc, "sample_data", sd, "calibrated_sensor_token"), width, height)
        if key not in self._cameras:
            cs = self.nusc.get("calibrated_sensor", sd["calibrated_sensor_token"])
            k = np.asarray(cs.get("camera_intrinsic") or [], dtype=np.float64)
            if k.shape != (3, 3) or width <= 0 or height <= 0:
                raise DatasetError(
                    f"{_where(self.nusc, 'calibrated_sensor')}: camera {sd['channel']} "
                    f"(calibrated_sensor {cs['token']}) needs a 3x3 'camera_intrinsic' and its "
                    f"sample_data {sd['token']} a positive 'width' and 'height'"
                )
            if not _is_pinhole_intrinsic(k):
                raise DatasetError(
                    f"{_where(self.nusc, 'calibrated_sensor')}: camera {sd['channel']} "
                    f"(calibrated_sensor {cs['token']}) has camera_intrinsic {k.tolist()}: "
                    "need finite numbers, focal lengths fx, fy > 0 and last row [0, 0, 1]"
                )
            self._cameras[key] = CameraCalibration(
                sd["channel"], k, self.sensor_pose(sd), width, height
            )
        return self._cameras[key]

    def path(self, sd: dict) -> Path:
        """The sensor file of a sample_data record, which must lie inside the dataroot."""
        filename = str(_field(self.nusc, "sample_data", sd, "filename"))
        normal = os.path.normpath(filename)
        if not filename or os.path.isabs(filename) or normal == ".." or normal.startswith("../"):
            raise DatasetError(
                f"{_where(self.nusc, 'sample_data')}: record {sd['token']} has filename "
                f"{filename!r}, which is not a path inside the dataroot {self.dataroot}; sensor "
                "files are only read from inside it"
            )
        return self.dataroot / normal

    def sweep(self, sd: dict) -> LidarSweep:
        return LidarSweep(
            path=self.path(sd),
            global_SE3_ego=self.ego_pose(sd),
            timestamp_us=int(_field(self.nusc, "sample_data", sd, "timestamp")),
            token=sd["token"],
            ego_SE3_lidar=self.sensor_pose(sd),
        )

    def earlier_sweeps(self, sd: dict) -> list[LidarSweep]:
        chain = []
        while len(chain) < self.max_sweeps - 1 and _field(self.nusc, "sample_data", sd, "prev"):
            sd = self.nusc.get("sample_data", sd["prev"])
            chain.append(sd)
        self.prefetch_ego_poses(chain)
        return [self.sweep(s) for s in chain]

    def label(self, category_name: str) -> int | None:
        if category_name not in self._label_of_category:
            self._label_of_category[category_name] = detection_label_of_category(category_name)
        return self._label_of_category[category_name]

    def attribute(self, tokens: list[str]) -> str:
        names = [self._attribute_name.get(t, "") for t in tokens]
        for name in names:
            if name.startswith(_DETECTION_ATTRIBUTE_PREFIXES):
                return name
        return names[0] if names else ""

    def ground_truth(self, sample: dict, instance_ids: dict[str, int]) -> GroundTruth:
        """Annotations of a sample mapped to detection classes (others dropped), global frame."""
        nusc = self.nusc
        anns = [nusc.get("sample_annotation", t) for t in sample["anns"]]
        labels = [self.label(a["category_name"]) for a in anns]
        anns = [a for a, lab in zip(anns, labels, strict=True) if lab is not None]
        label = np.array([lab for lab in labels if lab is not None], dtype=np.int16)
        n = len(anns)
        try:
            center = np.array([a["translation"] for a in anns], dtype=np.float64).reshape(n, 3)
            size = np.array([a["size"] for a in anns], dtype=np.float64).reshape(n, 3)
            quat = np.array([a["rotation"] for a in anns], dtype=np.float64).reshape(n, 4)
        except (KeyError, ValueError) as e:
            raise DatasetError(
                f"{_where(nusc, 'sample_annotation')}: sample {sample['token']} has an annotation "
                f"without a 3-number 'translation'/'size' or 4-number 'rotation' ({e})"
            ) from None
        yaw = yaw_from_rotation(rotation_from_quat_wxyz(quat)) if n else np.zeros(0)
        velocity = np.array([nusc.box_velocity(a["token"])[:2] for a in anns]).reshape(n, 2)
        for a in anns:
            instance_ids.setdefault(a["instance_token"], len(instance_ids))
        boxes = Boxes3D(
            center_m=center,
            size_wlh_m=size,
            yaw_rad=yaw,
            velocity_mps=velocity,
            label=label,
            score=np.ones(n),
            track_id=np.array([instance_ids[a["instance_token"]] for a in anns], dtype=np.int64),
            frame="global",
        )
        return GroundTruth(
            boxes=boxes,
            annotation_token=np.array([a["token"] for a in anns], dtype=object),
            num_lidar_pts=np.array([a.get("num_lidar_pts", -1) for a in anns], dtype=np.int64),
            visibility_level=np.array(
                [self._visibility.get(a.get("visibility_token") or "", 0) for a in anns],
                dtype=np.int8,
            ),
            attribute=np.array(
                [self.attribute(a.get("attribute_tokens") or []) for a in anns], dtype=object
            ),
        )

    def read(self, scene: dict, with_ground_truth: bool) -> Clip:
        nusc = self.nusc
        samples = []
        token = _field(nusc, "scene", scene, "first_sample_token")
        while token:
            try:
                sample = nusc.get("sample", token)
            except KeyError:
                raise DatasetError(
                    f"{_where(nusc, 'sample')}: scene {scene['name']!r} links to missing sample "
                    f"{token}"
                ) from None
            samples.append(sample)
            token = _field(nusc, "sample", sample, "next")
        lidar_channel = _choose_lidar(nusc, samples, self.lidar_channel_arg)
        present_cameras = {ch for s in samples for ch in _sensor_channels(nusc, s, "camera")}
        if self.camera_channels_arg is not None:
            missing = sorted(set(self.camera_channels_arg) - present_cameras)
            if missing:
                raise DatasetError(
                    f"{nusc.table_root}: scene {scene['name']!r} has no camera channels {missing}; "
                    f"present: {sorted(present_cameras)}"
                )
            camera_channels = list(self.camera_channels_arg)
        else:
            camera_channels = _camera_order(present_cameras)
        layout = _default_lidar_layout()
        keyframe_sds = [nusc.get("sample_data", t) for smp in samples for t in smp["data"].values()]
        self.prefetch_ego_poses(keyframe_sds)
        instance_ids: dict[str, int] = {}
        frames = []
        t0_us = None
        for index, sample in enumerate(samples):
            if lidar_channel not in sample["data"]:
                raise DatasetError(
                    f"{_where(nusc, 'sample_data')}: keyframe {sample['token']} of scene "
                    f"{scene['name']!r} has no {lidar_channel} sample_data"
                )
            lidar_sd = nusc.get("sample_data", sample["data"][lidar_channel])
            timestamp_us = int(_field(nusc, "sample", sample, "timestamp"))
            t0_us = timestamp_us if t0_us is None else t0_us
            cameras = {}
            for ch in camera_channels:
                if ch not in sample["data"]:
                    continue
                sd = nusc.get("sample_data", sample["data"][ch])
                cameras[ch] = CameraImage(
                    path=self.path(sd),
                    calibration=self.camera(sd),
                    global_SE3_ego=self.ego_pose(sd),
                    timestamp_us=int(_field(nusc, "sample_data", sd, "timestamp")),
                    token=sd["token"],
                )
            frames.append(
                Frame(
                    token=sample["token"],
                    index=index,
                    timestamp_us=timestamp_us,
                    time_s=(timestamp_us - t0_us) * 1e-6,
                    global_SE3_ego=self.ego_pose(lidar_sd),
                    lidar=self.sweep(lidar_sd),
                    lidar_calibration=LidarCalibration(
                        channel=lidar_channel,
                        ego_SE3_lidar=self.sensor_pose(lidar_sd),
                        beam_elevation_deg=layout.beam_elevation_deg,
                        azimuth_step_deg=layout.azimuth_step_deg,
                        max_range_m=layout.max_range_m,
                    ),
                    cameras=cameras,
                    sweeps=self.earlier_sweeps(lidar_sd),
                    ground_truth=self.ground_truth(sample, instance_ids)
                    if with_ground_truth
                    else None,
                )
            )
        log_name = location = ""
        if scene.get("log_token") and scene["log_token"] in nusc._token2ind["log"]:
            log = nusc.get("log", scene["log_token"])
            log_name = log.get("logfile") or ""
            location = str(log.get("location") or "")
        return Clip(
            name=scene["name"],
            token=scene["token"],
            log_name=log_name or scene.get("log_token") or scene["name"],
            frames=frames,
            instance_tokens=tuple(instance_ids),
            dataroot=Path(nusc.dataroot),
            version=nusc.version,
            location=location,
        )


def read_clip(
    nusc_or_dataroot: NuScenes | str | Path,
    scene_name: str,
    version: str | None = None,
    *,
    lidar_channel: str | None = None,
    camera_channels: list[str] | tuple[str, ...] | None = None,
    max_sweeps: int = 10,
    with_ground_truth: bool = True,
) -> Clip:
    """Read one scene as a ``Clip``.

    Args:
        nusc_or_dataroot: a loaded ``NuScenes`` (reuse it for many clips) or a dataroot folder.
        scene_name: the scene's ``name`` (``scene-0061``; a T4 dataset's ``{project}_{token}``).
        version: table folder name when a dataroot is given.
        lidar_channel: the LiDAR to use; by default the one LiDAR channel of the keyframes
            (``LIDAR_TOP`` or ``LIDAR_CONCAT`` first when there are several).
        camera_channels: the cameras to use; by default every camera channel of the keyframes,
            nuScenes' six in rig order first.
        max_sweeps: LiDAR sweeps to list per keyframe, its own included (``Frame.sweeps`` holds
            up to ``max_sweeps - 1`` earlier ones), as ``aggregate_sweeps`` uses them.
        with_ground_truth: attach ``GroundTruth`` (boxes in the global frame) to every frame.

    Raises:
        KeyError: no scene of that name (the message lists the names).
        DatasetError: the dataset is malformed (the message names the table and record).
    """
    if max_sweeps < 1:
        raise ValueError(f"max_sweeps must be >= 1, got {max_sweeps}")
    nusc = _as_nusc(nusc_or_dataroot, version)
    scenes = {s["name"]: s for s in nusc.scene}
    same_name = [s["token"] for s in nusc.scene if s["name"] == scene_name]
    if len(same_name) > 1:
        raise DatasetError(
            f"{_where(nusc, 'scene')}: {len(same_name)} scenes are named {scene_name!r} "
            f"(tokens {', '.join(same_name)}); scene names must be unique, each names its clip "
            "folder"
        )
    if scene_name not in scenes:
        raise KeyError(
            f"no scene {scene_name!r} in {nusc.table_root}; scenes: {sorted(scenes)[:20]}"
            + (" ..." if len(scenes) > 20 else "")
        )
    reader = _ClipReader(nusc, lidar_channel, camera_channels, max_sweeps)
    return reader.read(scenes[scene_name], with_ground_truth)


def load_lidar_points(sweep: LidarSweep | str | Path) -> np.ndarray:
    """(P, 5) float32 points of a ``.pcd.bin`` file: x, y, z (metres, LiDAR frame), intensity, ring.

    Raises:
        FileNotFoundError: the file is missing; DatasetError: its size is not a whole number of
            5-float points.
    """
    path = Path(sweep.path if isinstance(sweep, LidarSweep) else sweep)
    if not path.is_file():
        raise FileNotFoundError(f"LiDAR file {path} does not exist")
    size = os.path.getsize(path)
    if size % (4 * LIDAR_POINT_DIMS):
        raise DatasetError(
            f"{path}: {size} bytes is not a whole number of {LIDAR_POINT_DIMS}-float32 points"
        )
    return np.fromfile(path, dtype=np.float32).reshape(-1, LIDAR_POINT_DIMS)


def aggregate_sweeps(
    frame: Frame, n_sweeps: int, min_distance_m: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Points of a keyframe's sweep and earlier ones, motion-compensated into its LiDAR frame.

    Each sweep is mapped lidar(t) -> ego(t) -> global -> ego(key) -> lidar(key) with the ego
    poses of its own timestamp, as ``LidarPointCloud.from_file_multisweep`` does; points within
    ``min_distance_m`` of the sensor in both x and y are dropped first (the devkit's
    ``remove_close``). Uses at most the sweeps the frame holds (``read_clip(max_sweeps=...)``).

    Returns:
        points_lidar: (P, 5) float32 x, y, z (keyframe LiDAR frame, metres), intensity, ring.
        time_lag_s: (P,) seconds from each point's sweep to the keyframe (>= 0).
    """
    if n_sweeps < 1:
        raise ValueError(f"n_sweeps must be >= 1, got {n_sweeps}")
    key = frame.lidar
    fallback = frame.lidar_calibration.ego_SE3_lidar
    ego_SE3_key_lidar = key.ego_SE3_lidar if key.ego_SE3_lidar is not None else fallback
    key_lidar_SE3_global = frame.global_SE3_ego.compose(ego_SE3_key_lidar).inverse()
    parts, lags = [], []
    for sweep in [key, *frame.sweeps[: n_sweeps - 1]]:
        pts = load_lidar_points(sweep)
        pts = pts[~((np.abs(pts[:, 0]) < min_distance_m) & (np.abs(pts[:, 1]) < min_distance_m))]
        ego_SE3_lidar = sweep.ego_SE3_lidar if sweep.ego_SE3_lidar is not None else fallback
        key_SE3_sweep = key_lidar_SE3_global.compose(sweep.global_SE3_ego.compose(ego_SE3_lidar))
        pts[:, :3] = key_SE3_sweep.transform_points(pts[:, :3])  # float64 math, float32 storage
        parts.append(pts)
        lags.append(np.full(len(pts), (key.timestamp_us - sweep.timestamp_us) * 1e-6))
    return np.concatenate(parts), np.concatenate(lags)


def describe_clips(
    nusc_or_dataroot: NuScenes | str | Path, version: str | None = None
) -> list[dict]:
    """One summary per scene: ``name``, ``keyframes``, ``duration_s``, ``lidar``, ``cameras``,
    ``annotations`` (kept ground-truth boxes), read without loading any sensor file."""
    nusc = _as_nusc(nusc_or_dataroot, version)
    out = []
    for name in list_clips(nusc):
        clip = read_clip(nusc, name, max_sweeps=1)
        out.append(
            {
                "name": name,
                "keyframes": len(clip.frames),
                "duration_s": round(clip.duration_s, 3),
                "lidar": clip.frames[0].lidar_calibration.channel if clip.frames else "",
                "cameras": sorted({ch for f in clip.frames for ch in f.cameras}),
                "annotations": sum(len(f.ground_truth.boxes) for f in clip.frames),
            }
        )
    return out
