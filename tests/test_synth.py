"""The synthetic drive-log generator: a dataset the nuScenes devkit loads, renders and evaluates."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import cv2
import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from nuscenes import NuScenes  # noqa: E402
from nuscenes.eval.common.config import config_factory  # noqa: E402
from nuscenes.eval.detection.evaluate import DetectionEval  # noqa: E402
from nuscenes.eval.detection.utils import category_to_detection_name  # noqa: E402
from pyquaternion import Quaternion  # noqa: E402
from shapely.geometry import Polygon  # noqa: E402

from autolabel.boxes import Boxes3D  # noqa: E402
from autolabel.classes import DEFAULT_ATTRIBUTE, DETECTION_CLASSES  # noqa: E402
from autolabel.sensors import CAMERA_CHANNELS  # noqa: E402
from autolabel.synth.config import SynthConfig  # noqa: E402
from autolabel.synth.generator import generate_dataset  # noqa: E402
from autolabel.synth.ground_truth_files import load_image_ground_truth  # noqa: E402
from calib.projection import box_2d_from_corners, box_iou_2d  # noqa: E402
from calib.se3 import SE3  # noqa: E402

VERSION = "v1.0-mini"
CONFIG = SynthConfig(scenes=2, seed=3, seconds=5.0, width_px=320, height_px=180, progress=False)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("synth")
    summary = generate_dataset(root, CONFIG)
    return root, summary


@pytest.fixture(scope="module")
def nusc(dataset) -> NuScenes:
    return NuScenes(VERSION, str(dataset[0]), verbose=False)


def _tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def test_devkit_loads_every_table_and_sensor(nusc):
    assert len(nusc.scene) == 2 and len(nusc.log) == 2 and len(nusc.map) == 2
    assert len(nusc.sample) == 2 * CONFIG.num_keyframes
    for sample in nusc.sample:
        assert set(sample["data"]) == {"LIDAR_TOP", *CAMERA_CHANNELS}
        cam = nusc.get("sample_data", sample["data"]["CAM_FRONT"])
        assert (cam["width"], cam["height"]) == (320, 180)
    for scene in nusc.scene:
        # The sample chain of a scene runs from its first to its last sample.
        tokens = [scene["first_sample_token"]]
        while nusc.get("sample", tokens[-1])["next"]:
            tokens.append(nusc.get("sample", tokens[-1])["next"])
        assert tokens[-1] == scene["last_sample_token"]
        assert len(tokens) == scene["nbr_samples"] == CONFIG.num_keyframes
    for table in ("sample_data", "ego_pose"):
        assert len(getattr(nusc, table)) == len(nusc.sample_data)


def test_lidar_sweeps_at_ten_hz_between_keyframes(nusc, dataset):
    root = dataset[0]
    sample = nusc.sample[3]
    key = nusc.get("sample_data", sample["data"]["LIDAR_TOP"])
    prev_key = nusc.get("sample_data", nusc.get("sample", sample["prev"])["data"]["LIDAR_TOP"])
    chain = [key]
    while chain[-1]["prev"] and chain[-1]["token"] != prev_key["token"]:
        chain.append(nusc.get("sample_data", chain[-1]["prev"]))
    assert chain[-1]["token"] == prev_key["token"]
    assert len(chain) == 6  # key, 4 sweeps, previous key
    assert [r["is_key_frame"] for r in chain] == [True, False, False, False, False, True]
    assert all(r["filename"].startswith("sweeps/LIDAR_TOP/") for r in chain[1:-1])
    assert np.allclose(np.diff([r["timestamp"] for r in chain]), -100_000)
    points = np.fromfile(root / key["filename"], dtype=np.float32).reshape(-1, 5)
    assert len(points) > 5000
    assert set(np.unique(points[:, 4]).astype(int)) <= set(range(32))
    assert np.linalg.norm(points[:, :3], axis=1).max() <= 80.5


def test_devkit_renders_camera_lidar_and_annotation(nusc, tmp_path):
    sample = nusc.sample[4]
    nusc.render_sample_data(
        sample["data"]["CAM_FRONT"], out_path=str(tmp_path / "cam.png"), verbose=False
    )
    nusc.render_sample_data(
        sample["data"]["LIDAR_TOP"], nsweeps=3, out_path=str(tmp_path / "lidar.png"), verbose=False
    )
    nusc.render_annotation(sample["anns"][0], out_path=str(tmp_path / "ann.png"))
    for name in ("cam.png", "lidar.png", "ann.png"):
        assert (tmp_path / name).stat().st_size > 10_000
    # The camera render draws each annotation's box in its category's colour (the devkit's
    # colormap): the colours of the boxes the devkit finds in that image are on it.
    _, boxes, _ = nusc.get_sample_data(sample["data"]["CAM_FRONT"])
    assert boxes
    image = cv2.imread(str(tmp_path / "cam.png"))[:, :, ::-1].astype(int)
    for box in boxes:
        colour = np.array(nusc.colormap[box.name])
        near = np.abs(image - colour).sum(-1) <= 12
        assert near.sum() >= 20, box.name


def test_every_scene_has_all_ten_classes_and_valid_annotations(nusc):
    attribute_name = {a["token"]: a["name"] for a in nusc.attribute}
    for scene in nusc.scene:
        classes = set()
        token = scene["first_sample_token"]
        while token:
            sample = nusc.get("sample", token)
            for ann_token in sample["anns"]:
                ann = nusc.get("sample_annotation", ann_token)
                name = category_to_detection_name(ann["category_name"])
                assert name in DETECTION_CLASSES
                classes.add(name)
                assert ann["num_lidar_pts"] > 0 and ann["num_radar_pts"] == 0
                assert ann["visibility_token"] in {"1", "2", "3", "4"}
                attrs = [attribute_name[t] for t in ann["attribute_tokens"]]
                options = DEFAULT_ATTRIBUTE[name]
                if options is None:
                    assert attrs == []
                else:
                    assert len(attrs) == 1
                    assert attrs[0].split(".")[0] == options[0].split(".")[0]
                assert np.isclose(np.linalg.norm(ann["rotation"]), 1.0)
            token = sample["next"]
        assert classes == set(DETECTION_CLASSES), scene["name"]


def test_instances_link_their_annotations(nusc):
    for inst in nusc.instance:
        chain = [nusc.get("sample_annotation", inst["first_annotation_token"])]
        while chain[-1]["next"]:
            nxt = nusc.get("sample_annotation", chain[-1]["next"])
            assert nxt["prev"] == chain[-1]["token"]
            chain.append(nxt)
        assert chain[-1]["token"] == inst["last_annotation_token"]
        assert len(chain) == inst["nbr_annotations"]
        assert all(a["instance_token"] == inst["token"] for a in chain)
        times = [nusc.get("sample", a["sample_token"])["timestamp"] for a in chain]
        assert times == sorted(times)


def test_no_two_objects_overlap_and_yaw_follows_motion(nusc):
    for sample in nusc.sample:
        anns = [nusc.get("sample_annotation", t) for t in sample["anns"]]
        polygons = []
        for ann in anns:
            yaw = Quaternion(ann["rotation"]).yaw_pitch_roll[0]
            box = Boxes3D(np.array([ann["translation"]]), np.array([ann["size"]]), np.array([yaw]))
            polygons.append(Polygon(box.bev_corners()[0]))
        for i in range(len(polygons)):
            for j in range(i + 1, len(polygons)):
                assert polygons[i].intersection(polygons[j]).area < 1e-9
        for ann in anns:
            velocity = nusc.box_velocity(ann["token"])[:2]
            if not np.all(np.isfinite(velocity)) or np.linalg.norm(velocity) < 2.0:
                continue
            yaw = Quaternion(ann["rotation"]).yaw_pitch_roll[0]
            diff = np.angle(np.exp(1j * (np.arctan2(velocity[1], velocity[0]) - yaw)))
            assert abs(diff) < np.radians(12), (ann["category_name"], np.degrees(diff))


def test_ego_stays_on_the_drivable_area_and_poses_follow_timestamps(nusc):
    for scene in nusc.scene:
        log = nusc.get("log", scene["log_token"])
        mask = nusc.get("map", log["map_token"])["mask"]
        sample = nusc.get("sample", scene["first_sample_token"])
        lidar = nusc.get("sample_data", sample["data"]["LIDAR_TOP"])
        records = [lidar]
        while records[-1]["next"]:
            records.append(nusc.get("sample_data", records[-1]["next"]))
        poses = [nusc.get("ego_pose", r["ego_pose_token"]) for r in records]
        xy = np.array([p["translation"][:2] for p in poses])
        assert mask.is_on_mask(xy[:, 0], xy[:, 1]).all()
        # Cameras fire after the LiDAR; their ego poses are at their own timestamps.
        cam = nusc.get("sample_data", sample["data"]["CAM_BACK"])
        cam_pose = nusc.get("ego_pose", cam["ego_pose_token"])
        assert cam["timestamp"] > lidar["timestamp"] and cam_pose["timestamp"] == cam["timestamp"]


def test_devkit_velocities_agree_with_the_true_motion(nusc, dataset):
    """The devkit's centred-difference velocity of an annotation (from its neighbours half a second
    either side) matches the object's true velocity (side file of the sample's front image, 37 ms
    later) where a finite difference can: on straight stretches of motion."""
    root = dataset[0]
    checked = 0
    for sample in nusc.sample:
        gt = load_image_ground_truth(root, "CAM_FRONT", sample["data"]["CAM_FRONT"])
        truth = {o["annotation_token"]: o for o in gt.index["objects"] if o["annotation_token"]}
        for ann_token in sample["anns"]:
            ann = nusc.get("sample_annotation", ann_token)
            if ann_token not in truth or not (ann["prev"] and ann["next"]):
                continue
            prev = nusc.get("sample_annotation", ann["prev"])
            nxt = nusc.get("sample_annotation", ann["next"])
            span_us = (
                nusc.get("sample", nxt["sample_token"])["timestamp"]
                - nusc.get("sample", prev["sample_token"])["timestamp"]
            )
            turn = Quaternion(nxt["rotation"]).yaw_pitch_roll[0]
            turn -= Quaternion(prev["rotation"]).yaw_pitch_roll[0]
            if span_us != 1_000_000 or abs(np.angle(np.exp(1j * turn))) > np.radians(5):
                continue
            estimate = nusc.box_velocity(ann_token)[:2]
            assert np.linalg.norm(estimate - np.array(truth[ann_token]["velocity"])) < 0.35
            checked += 1
    assert checked >= 20


def test_scene_facts_list_stride_qa_situations(nusc, dataset):
    facts = json.loads((dataset[0] / "synth_gt" / "scenes.json").read_text())
    assert set(facts) == {s["name"] for s in nusc.scene}
    instances = {i["token"] for i in nusc.instance}
    for scene in facts.values():
        situations = {o["situation"] for o in scene["objects"]}
        assert {"parked", "construction", "oncoming"} <= situations
        assert {o["instance_token"] for o in scene["objects"]} - {None} <= instances


def _global_SE3_camera(nusc, sd_token: str) -> tuple[SE3, np.ndarray]:
    sd = nusc.get("sample_data", sd_token)
    pose = nusc.get("ego_pose", sd["ego_pose_token"])
    cs = nusc.get("calibrated_sensor", sd["calibrated_sensor_token"])
    global_SE3_ego = SE3.from_quat_wxyz(np.array(pose["rotation"]), np.array(pose["translation"]))
    ego_SE3_cam = SE3.from_quat_wxyz(np.array(cs["rotation"]), np.array(cs["translation"]))
    return global_SE3_ego.compose(ego_SE3_cam), np.array(cs["camera_intrinsic"])


def test_projected_boxes_match_rendered_pixels_of_unoccluded_objects(nusc, dataset):
    root = dataset[0]
    ious = []
    for sample in nusc.sample:
        for channel in CAMERA_CHANNELS:
            sd_token = sample["data"][channel]
            gt = load_image_ground_truth(root, channel, sd_token)
            global_SE3_cam, k = _global_SE3_camera(nusc, sd_token)
            for obj in gt.index["objects"]:
                if obj["visible_px"] != obj["unoccluded_px"]:
                    continue
                box = obj["box"]
                yaw = Quaternion(box["rotation"]).yaw_pitch_roll[0]
                corners = Boxes3D(
                    np.array([box["translation"]]), np.array([box["size"]]), np.array([yaw])
                ).corners()
                projected = box_2d_from_corners(
                    k, global_SE3_cam.inverse().transform_points(corners)
                )
                u0, v0, u1, v1 = projected[0]
                inside = (
                    u0 >= 0 and v0 >= 0 and u1 <= gt.index["width"] and v1 <= gt.index["height"]
                )
                if not inside or min(u1 - u0, v1 - v0) < 30:
                    continue
                rows, cols = np.nonzero(gt.ids == obj["id"])
                rendered = np.array([[cols.min(), rows.min(), cols.max() + 1, rows.max() + 1]])
                assert rendered[0].tolist() == obj["bbox_px"]
                ious.append(box_iou_2d(projected, rendered)[0])
    assert len(ious) >= 10
    assert min(ious) >= 0.9, sorted(ious)[:5]


def test_side_files_mark_faces_on_people_and_plates_on_vehicles(nusc, dataset):
    root = dataset[0]
    faces = plates = 0
    for sample in nusc.sample[::3]:
        for channel in CAMERA_CHANNELS:
            gt = load_image_ground_truth(root, channel, sample["data"][channel])
            assert not (gt.face_mask & gt.plate_mask).any()
            assert (gt.ids[gt.face_mask | gt.plate_mask] > 0).all()
            for obj in gt.index["objects"]:
                mask = gt.object_mask(obj["id"])
                assert mask.sum() == obj["visible_px"] <= obj["unoccluded_px"]
                assert (mask & gt.face_mask).sum() == obj["face_px"]
                assert (mask & gt.plate_mask).sum() == obj["plate_px"]
                if obj["face_px"]:
                    assert obj["detection_name"] == "pedestrian" or (
                        obj["attribute_name"] == "cycle.with_rider"
                    )
                if obj["plate_px"]:
                    assert obj["detection_name"] in {
                        "car", "truck", "bus", "trailer", "construction_vehicle"
                    }  # fmt: skip
                if obj["annotation_token"]:
                    ann = nusc.get("sample_annotation", obj["annotation_token"])
                    assert ann["instance_token"] == obj["instance_token"]
                    assert ann["sample_token"] == sample["token"]
                faces += obj["face_px"] > 0
                plates += obj["plate_px"] > 0
    assert faces > 0 and plates > 0


def test_detection_eval_of_the_ground_truth_scores_perfectly(nusc, dataset, tmp_path):
    root, summary = dataset
    splits = json.loads((root / VERSION / "splits.json").read_text())
    assert set(splits) == set(CONFIG.split_names)
    assert len(splits["synth_train"]) == 1 and len(splits["synth_val"]) == 1
    val_scenes = set(splits["synth_val"])
    results = {}
    for sample in nusc.sample:
        if nusc.get("scene", sample["scene_token"])["name"] not in val_scenes:
            continue
        boxes = []
        for ann_token in sample["anns"]:
            ann = nusc.get("sample_annotation", ann_token)
            attrs = [nusc.get("attribute", t)["name"] for t in ann["attribute_tokens"]]
            boxes.append(
                {
                    "sample_token": sample["token"],
                    "translation": ann["translation"],
                    "size": ann["size"],
                    "rotation": ann["rotation"],
                    "velocity": [float(v) for v in nusc.box_velocity(ann_token)[:2]],
                    "detection_name": category_to_detection_name(ann["category_name"]),
                    "detection_score": 0.9,
                    "attribute_name": attrs[0] if attrs else "",
                }
            )
        results[sample["token"]] = boxes
    meta = {"use_camera": False, "use_lidar": True, "use_radar": False, "use_map": False}
    meta["use_external"] = False
    result_path = tmp_path / "results.json"
    result_path.write_text(json.dumps({"meta": meta, "results": results}))
    evaluator = DetectionEval(
        nusc,
        config_factory("detection_cvpr_2019"),
        str(result_path),
        eval_set="synth_val",
        output_dir=str(tmp_path / "eval"),
        verbose=False,
    )
    metrics, _ = evaluator.evaluate()
    assert metrics.mean_ap >= 0.99, metrics.mean_dist_aps


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    small = dict(scenes=1, seconds=1.5, width_px=64, height_px=36, extra_agents=3, progress=False)
    generate_dataset(tmp_path / "a", SynthConfig(seed=11, **small))
    generate_dataset(tmp_path / "b", SynthConfig(seed=11, **small))
    generate_dataset(tmp_path / "c", SynthConfig(seed=12, **small))
    digest_a = _tree_digest(tmp_path / "a")
    assert digest_a == _tree_digest(tmp_path / "b")
    assert digest_a != _tree_digest(tmp_path / "c")


def test_camera_sweeps_are_non_key_images_between_keyframes(tmp_path):
    config = SynthConfig(
        scenes=1, seconds=1.0, width_px=64, height_px=36, extra_agents=2, camera_sweep_hz=4.0,
        progress=False,
    )  # fmt: skip
    generate_dataset(tmp_path, config)
    nusc = NuScenes(VERSION, str(tmp_path), verbose=False)
    first = nusc.get("sample_data", nusc.sample[0]["data"]["CAM_FRONT_LEFT"])
    second = nusc.get("sample_data", first["next"])
    third = nusc.get("sample_data", second["next"])
    assert not second["is_key_frame"] and second["filename"].startswith("sweeps/CAM_FRONT_LEFT/")
    assert third["is_key_frame"] and third["token"] == nusc.sample[1]["data"]["CAM_FRONT_LEFT"]
    assert second["sample_token"] == nusc.sample[1]["token"]
    assert third["timestamp"] - first["timestamp"] == 500_000
    assert (tmp_path / second["filename"]).stat().st_size > 0


def test_refuses_to_overwrite_without_permission(tmp_path):
    small = SynthConfig(scenes=1, seconds=0.5, width_px=32, height_px=18, extra_agents=0, progress=False)  # fmt: skip
    generate_dataset(tmp_path, small)
    with pytest.raises(FileExistsError, match="v1.0-mini"):
        generate_dataset(tmp_path, small)
    generate_dataset(tmp_path, small, overwrite=True)


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"scenes": 0}, "scenes"),
        ({"lidar_hz": 3.0}, "lidar_hz"),
        ({"width_px": 320}, "width_px"),
        ({"split_names": ("train", "val")}, "split_names"),
        ({"jpeg_quality": 0}, "jpeg_quality"),
        ({"seconds": 0.1}, "seconds"),
    ],
)
def test_config_errors_name_the_key(kwargs, key):
    with pytest.raises(ValueError, match=f"SynthConfig.{key}"):
        SynthConfig(**kwargs)


def test_logs_hold_two_scenes_from_four_scenes_on():
    assert SynthConfig(scenes=3).logs_scenes == 1
    assert SynthConfig(scenes=4).logs_scenes == 2
    assert SynthConfig(scenes=4, scenes_per_log=3).logs_scenes == 3


def test_yaml_config_with_overrides_and_key_named_errors(tmp_path):
    from autolabel.config import ConfigError
    from autolabel.synth.config import load_synth_config

    path = tmp_path / "synth.yaml"
    path.write_text("scenes: 3\nseconds: 4.0\nsplit_names: [s_train, s_val]\n")
    config = load_synth_config(path, seconds=6.0, seed=None)
    assert (config.scenes, config.seconds, config.seed) == (3, 6.0, 0)
    assert config.split_names == ("s_train", "s_val")
    path.write_text("scenes: 3\nsplit_names: [train, val]\n")
    with pytest.raises(ConfigError, match="split_names"):
        load_synth_config(path)
    path.write_text("sceens: 3\n")
    with pytest.raises(ConfigError, match="unknown key 'sceens'"):
        load_synth_config(path)


def test_cli_synth_writes_a_loadable_dataset(tmp_path):
    from typer.testing import CliRunner

    from autolabel.cli import app

    args = ["synth", str(tmp_path), "--scenes", "1", "--seconds", "0.5", "--width", "48"]
    result = CliRunner().invoke(app, [*args, "--height", "27", "--seed", "2"])
    assert result.exit_code == 0, result.output
    assert "samples: 1" in result.output
    nusc = NuScenes(VERSION, str(tmp_path), verbose=False)
    assert len(nusc.sample) == 1 and nusc.scene[0]["name"] == "synth-0000"
    again = CliRunner().invoke(app, [*args, "--height", "27"])
    assert again.exit_code != 0 and "already exists" in again.output


def _annotations_against_camera_boxes(root: Path) -> np.ndarray:
    """Per (keyframe image, moving annotated object it shows): [|annotation - camera-time box -
    v (t_sweep - t_camera)|, same with the time the LiDAR's beams cross the object's centre
    instead of t_sweep, |v| x that crossing's delay]. Recomputed from the written tables: the
    beams turn clockwise from the LiDAR's x axis at ``lidar_spin_hz`` from the sweep's
    timestamp (the turn that fires the cameras)."""
    tables = {
        name: json.loads((root / VERSION / f"{name}.json").read_text())
        for name in ("sample_annotation", "sample_data", "ego_pose", "calibrated_sensor", "sample")
    }
    spin_hz = json.loads((root / "synth_gt" / "config.json").read_text())["lidar_spin_hz"]
    ann = {a["token"]: a for a in tables["sample_annotation"]}
    pose = {p["token"]: p for p in tables["ego_pose"]}
    calib = {c["token"]: c for c in tables["calibrated_sensor"]}
    sample_ts = {s["token"]: s["timestamp"] for s in tables["sample"]}
    lidar = {
        sd["sample_token"]: sd
        for sd in tables["sample_data"]
        if sd["is_key_frame"] and sd["filename"].startswith("samples/LIDAR_TOP/")
    }

    def se3(rec):
        return SE3(Quaternion(rec["rotation"]).rotation_matrix, np.asarray(rec["translation"]))

    rows = []
    for side in sorted((root / "synth_gt").glob("CAM_*/*.json")):
        index = json.loads(side.read_text())
        t_cam = index["timestamp"] / 1e6
        t_sweep = sample_ts[index["sample_token"]] / 1e6
        sd = lidar[index["sample_token"]]
        lidar_SE3_global = se3(pose[sd["ego_pose_token"]]).compose(
            se3(calib[sd["calibrated_sensor_token"]])
        ).inverse()  # fmt: skip
        for obj in index["objects"]:
            v = np.asarray(obj["velocity"])
            if obj["annotation_token"] is None or np.linalg.norm(v) < 1.0:
                continue
            a_xy = np.asarray(ann[obj["annotation_token"]]["translation"])
            x, y, _ = lidar_SE3_global.transform_points(a_xy[None])[0]
            delay = np.mod(-np.arctan2(y, x), 2 * np.pi) / (2 * np.pi) / spin_hz
            seen = np.asarray(obj["box"]["translation"])[:2]
            rows.append([
                np.linalg.norm(a_xy[:2] - seen - v * (t_sweep - t_cam)),
                np.linalg.norm(a_xy[:2] - seen - v * (t_sweep + delay - t_cam)),
                np.linalg.norm(v) * delay,
            ])  # fmt: skip
    return np.asarray(rows)


def test_objects_are_annotated_where_the_spinning_lidar_saw_them(tmp_path):
    # Instant sweeps (default): every object is annotated at the sweep's timestamp. With
    # ``lidar_hit_time``: where the beams crossed it, up to one turn (50 ms at 20 Hz) later, as
    # on a real spinning LiDAR; within 2 cm (the velocity is the camera time's, and the
    # objects accelerate and turn over those <= 50 ms).
    small = dict(scenes=1, seed=4, seconds=1.5, width_px=64, height_px=36, progress=False)
    for hit_time in (False, True):
        root = tmp_path / str(hit_time)
        generate_dataset(root, SynthConfig(lidar_hit_time=hit_time, **small))
        rows = _annotations_against_camera_boxes(root)
        assert len(rows) >= 10 and (rows[:, 2] > 0.1).sum() >= 3  # moving objects, late crossings
        assert rows[:, int(hit_time)].max() < 0.02
        far = rows[:, 2] > 0.1
        assert rows[far, 1 - int(hit_time)].min() > 0.08
