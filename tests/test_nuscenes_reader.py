"""The nuScenes-format reader against nuscenes-devkit's view of hand-written datasets."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import numpy as np
import pytest
from nuscenes.eval.detection.utils import category_to_detection_name
from nuscenes.utils.data_classes import LidarPointCloud
from nuscenes_fixture import CATEGORY_DETECTION, T4_LAYOUT, Layout, write_dataset
from pyquaternion import Quaternion

from autolabel.classes import DETECTION_CLASSES
from autolabel.nuscenes_reader import (
    DatasetError,
    aggregate_sweeps,
    list_clips,
    load_lidar_points,
    open_dataset,
    read_clip,
)


def _se3_matrix(record: dict) -> np.ndarray:
    m = np.eye(4)
    m[:3, :3] = Quaternion(record["rotation"]).rotation_matrix
    m[:3, 3] = record["translation"]
    return m


@pytest.fixture(scope="module")
def nuscenes_ds(tmp_path_factory):
    written = write_dataset(tmp_path_factory.mktemp("nuscenes"), Layout())
    return written, open_dataset(written.root, written.layout.version)


@pytest.fixture(scope="module")
def t4_ds(tmp_path_factory):
    written = write_dataset(tmp_path_factory.mktemp("t4"), T4_LAYOUT)
    return written, open_dataset(written.root, written.layout.version)


def test_lists_scenes_as_clips(nuscenes_ds):
    written, nusc = nuscenes_ds
    assert list_clips(nusc) == written.scene_names
    assert list_clips(written.root, "v1.0-mini") == ["scene-0000", "scene-0001"]


def test_keyframes_poses_and_times_match_devkit_records(nuscenes_ds):
    written, nusc = nuscenes_ds
    clip = read_clip(nusc, "scene-0001")
    scene = next(s for s in nusc.scene if s["name"] == "scene-0001")
    assert clip.token == scene["token"] and clip.log_name == "n000-2024-01-01-00-00-00+0000"
    token, samples = scene["first_sample_token"], []
    while token:
        samples.append(nusc.get("sample", token))
        token = samples[-1]["next"]
    assert [f.token for f in clip.frames] == [s["token"] for s in samples]
    assert [f.index for f in clip.frames] == list(range(len(samples)))
    assert [f.timestamp_us for f in clip.frames] == [s["timestamp"] for s in samples]
    np.testing.assert_allclose([f.time_s for f in clip.frames], [0.0, 0.5, 1.0, 1.5], atol=1e-12)
    for frame, sample in zip(clip.frames, samples, strict=True):
        lidar_sd = nusc.get("sample_data", sample["data"]["LIDAR_TOP"])
        ego = nusc.get("ego_pose", lidar_sd["ego_pose_token"])
        np.testing.assert_allclose(frame.global_SE3_ego.as_matrix(), _se3_matrix(ego), atol=1e-12)
        cs = nusc.get("calibrated_sensor", lidar_sd["calibrated_sensor_token"])
        np.testing.assert_allclose(
            frame.lidar_calibration.ego_SE3_lidar.as_matrix(), _se3_matrix(cs), atol=1e-12
        )
        assert frame.lidar_calibration.channel == "LIDAR_TOP"
        assert frame.lidar.path == written.root / lidar_sd["filename"]
        assert frame.lidar.timestamp_us == lidar_sd["timestamp"]
        # Earlier sweeps: the devkit's prev chain, newest first, 9 of them (max_sweeps=10).
        chain, sd = [], lidar_sd
        while sd["prev"] and len(chain) < 9:
            sd = nusc.get("sample_data", sd["prev"])
            chain.append(sd["token"])
        assert [s.token for s in frame.sweeps] == chain


def test_cameras_have_their_own_ego_pose_and_calibration(nuscenes_ds):
    written, nusc = nuscenes_ds
    clip = read_clip(nusc, "scene-0000")
    for frame in clip.frames:
        sample = nusc.get("sample", frame.token)
        assert list(frame.cameras) == ["CAM_FRONT", "CAM_BACK"]  # rig order, data-driven
        for ch, image in frame.cameras.items():
            sd = nusc.get("sample_data", sample["data"][ch])
            cs = nusc.get("calibrated_sensor", sd["calibrated_sensor_token"])
            ego = nusc.get("ego_pose", sd["ego_pose_token"])
            assert image.path == written.root / sd["filename"]
            assert image.timestamp_us == sd["timestamp"] != frame.timestamp_us
            np.testing.assert_allclose(image.global_SE3_ego.as_matrix(), _se3_matrix(ego), atol=1e-12)  # fmt: skip
            cam = image.calibration
            np.testing.assert_allclose(cam.intrinsic, cs["camera_intrinsic"])
            np.testing.assert_allclose(cam.ego_SE3_camera.as_matrix(), _se3_matrix(cs), atol=1e-12)
            assert (cam.width_px, cam.height_px) == (sd["width"], sd["height"]) == (320, 180)
            assert cam.channel == ch


def test_ground_truth_matches_devkit_boxes(nuscenes_ds):
    _, nusc = nuscenes_ds
    clip = read_clip(nusc, "scene-0000")
    seen_instances = []
    for frame in clip.frames:
        sample = nusc.get("sample", frame.token)
        anns = [nusc.get("sample_annotation", t) for t in sample["anns"]]
        kept = [a for a in anns if category_to_detection_name(a["category_name"]) is not None]
        assert len(kept) < len(anns)  # the police car is dropped, as the devkit's eval does
        gt = frame.ground_truth
        assert list(gt.annotation_token) == [a["token"] for a in kept]
        boxes = gt.boxes
        assert boxes.frame == "global"
        for i, ann in enumerate(kept):
            box = nusc.get_box(ann["token"])
            np.testing.assert_allclose(boxes.center_m[i], box.center)
            np.testing.assert_allclose(boxes.size_wlh_m[i], box.wlh)
            np.testing.assert_allclose(boxes.corners()[i], box.corners().T, atol=1e-9)
            assert abs(boxes.yaw_rad[i] - box.orientation.yaw_pitch_roll[0]) < 1e-9
            np.testing.assert_array_equal(
                boxes.velocity_mps[i], nusc.box_velocity(ann["token"])[:2]
            )
            assert DETECTION_CLASSES[boxes.label[i]] == category_to_detection_name(
                ann["category_name"]
            )
            assert clip.instance_tokens[boxes.track_id[i]] == ann["instance_token"]
            assert gt.num_lidar_pts[i] == ann["num_lidar_pts"]
            assert gt.visibility_level[i] == int(ann["visibility_token"])
            names = [nusc.get("attribute", t)["name"] for t in ann["attribute_tokens"]]
            assert gt.attribute[i] == (names[0] if names else "")
            seen_instances.append(ann["instance_token"])
    assert set(clip.instance_tokens) == set(seen_instances)
    # The moving car has a velocity (4, 1) m/s; the barrier seen once has none.
    car = clip.frames[1].ground_truth.boxes
    np.testing.assert_allclose(car.velocity_mps[car.label == 0], [[4.0, 1.0]], atol=1e-9)
    barrier = clip.frames[2].ground_truth.boxes
    assert np.isnan(barrier.velocity_mps[barrier.label == DETECTION_CLASSES.index("barrier")]).all()  # fmt: skip


@pytest.mark.parametrize("n_sweeps", [1, 4, 10, 30])
def test_aggregate_sweeps_equals_devkit_multisweep(nuscenes_ds, n_sweeps):
    _, nusc = nuscenes_ds
    clip = read_clip(nusc, "scene-0000", max_sweeps=30)
    for frame in (clip.frames[0], clip.frames[2]):
        points, lag_s = aggregate_sweeps(frame, n_sweeps)
        sample = nusc.get("sample", frame.token)
        pc, times = LidarPointCloud.from_file_multisweep(
            nusc, sample, "LIDAR_TOP", "LIDAR_TOP", nsweeps=n_sweeps
        )
        assert points.shape == (pc.points.shape[1], 5)
        np.testing.assert_allclose(points[:, :4], pc.points.T, atol=2e-5)
        np.testing.assert_allclose(lag_s, times[0], atol=1e-6)  # devkit: float64 seconds since 1970
        assert (lag_s >= 0).all()
    # frame 2 has 2 + 3 + 3 earlier sweeps in the files; asking for more returns what exists.
    n_expected = min(n_sweeps, 1 + 2 + 2 * 4)
    assert len(np.unique(aggregate_sweeps(clip.frames[2], n_sweeps)[1])) == n_expected


def test_aggregate_sweeps_with_identity_motion_keeps_points(nuscenes_ds):
    _, nusc = nuscenes_ds
    frame = read_clip(nusc, "scene-0000").frames[1]
    raw = load_lidar_points(frame.lidar)
    assert raw.shape == (300, 5) and raw.dtype == np.float32
    points, lag_s = aggregate_sweeps(frame, 1, min_distance_m=0.0)
    np.testing.assert_allclose(points, raw, atol=1e-5)  # the keyframe's own sweep is not moved
    assert not lag_s.any()
    near = (np.abs(raw[:, 0]) < 1.0) & (np.abs(raw[:, 1]) < 1.0)
    assert len(aggregate_sweeps(frame, 1)[0]) == len(raw) - near.sum() < len(raw)


def test_t4_layout(t4_ds):
    """T4: tables under 'annotation/', LIDAR_CONCAT in base_link, other cameras, flat category
    names, visibility levels by name with empty tokens, no map table, dummy log."""
    written, nusc = t4_ds
    assert list_clips(written.root, "annotation") == written.scene_names
    clip = read_clip(nusc, written.scene_names[0])
    assert clip.version == "annotation"
    assert clip.log_name  # the dummy log has no logfile; the clip still names its log
    frame = clip.frames[1]
    assert frame.lidar_calibration.channel == "LIDAR_CONCAT"
    np.testing.assert_array_equal(frame.lidar_calibration.ego_SE3_lidar.as_matrix(), np.eye(4))
    assert frame.lidar.path.relative_to(written.root).parts[:2] == ("data", "LIDAR_CONCAT")
    assert list(frame.cameras) == ["CAM_FRONT", "CAM_FRONT_NARROW", "CAM_TRAFFIC_LIGHT_NEAR"]
    gt = frame.ground_truth
    # car and pedestrian kept, police_car dropped (as vehicle.emergency.police by the devkit)
    assert [DETECTION_CLASSES[i] for i in gt.boxes.label] == [
        c for c in CATEGORY_DETECTION if c in ("car", "pedestrian")
    ]
    sample = nusc.get("sample", frame.token)
    levels = {v["token"]: v["level"] for v in nusc.visibility}
    by_token = {a: nusc.get("sample_annotation", a) for a in sample["anns"]}
    expected = {"": 0, "none": 1, "partial": 2, "most": 3, "full": 4}
    for tok, level in zip(gt.annotation_token, gt.visibility_level, strict=True):
        vis_token = by_token[tok]["visibility_token"]
        assert level == expected[levels.get(vis_token, "")]
    assert 0 in gt.visibility_level  # the pedestrian's empty visibility token
    points, _ = aggregate_sweeps(frame, 3)
    pc, _ = LidarPointCloud.from_file_multisweep(nusc, sample, "LIDAR_CONCAT", "LIDAR_CONCAT", 3)
    np.testing.assert_allclose(points[:, :4], pc.points.T, atol=2e-5)


def test_lidar_channel_choice(tmp_path):
    layout = replace(Layout(), extra_lidar_channels=("LIDAR_FRONT",), n_scenes=1)
    written = write_dataset(tmp_path, layout)
    nusc = open_dataset(written.root, layout.version)
    assert read_clip(nusc, "scene-0000").frames[0].lidar_calibration.channel == "LIDAR_TOP"
    front = read_clip(nusc, "scene-0000", lidar_channel="LIDAR_FRONT").frames[0]
    assert front.lidar.path.parent.name == "LIDAR_FRONT"
    with pytest.raises(DatasetError, match="LIDAR_SIDE.*present.*LIDAR_FRONT"):
        read_clip(nusc, "scene-0000", lidar_channel="LIDAR_SIDE")
    only = read_clip(nusc, "scene-0000", camera_channels=["CAM_BACK"]).frames[0]
    assert list(only.cameras) == ["CAM_BACK"]
    with pytest.raises(DatasetError, match="CAM_FRONT_LEFT"):
        read_clip(nusc, "scene-0000", camera_channels=["CAM_FRONT_LEFT"])


def test_missing_optional_tables(tmp_path):
    layout = replace(Layout(), n_scenes=1, with_map=False, with_visibility_table=False)
    written = write_dataset(tmp_path, layout)
    gt = read_clip(written.root, "scene-0000", "v1.0-mini").frames[0].ground_truth
    assert len(gt.boxes) == 1 and (gt.visibility_level == 0).all()


@pytest.fixture()
def small_ds(tmp_path):
    return write_dataset(tmp_path / "ds", replace(Layout(), n_scenes=1, n_keyframes=2))


def test_error_missing_dataroot_and_version(tmp_path, small_ds):
    with pytest.raises(DatasetError, match=f"dataroot {tmp_path / 'nope'} does not exist"):
        open_dataset(tmp_path / "nope", "v1.0-mini")
    with pytest.raises(DatasetError, match=r"v1.0-trainval does not exist.*\['v1.0-mini'\]"):
        open_dataset(small_ds.root, "v1.0-trainval")


def test_error_missing_table_names_file(small_ds):
    (small_ds.root / "v1.0-mini" / "sample_data.json").unlink()
    with pytest.raises(DatasetError, match=r"v1.0-mini/sample_data.json: table 'sample_data' is missing"):  # fmt: skip
        open_dataset(small_ds.root, "v1.0-mini")


def test_error_broken_json_names_file(small_ds):
    path = small_ds.root / "v1.0-mini" / "ego_pose.json"
    path.write_text(path.read_text()[:-20])
    with pytest.raises(DatasetError, match=r"v1.0-mini/ego_pose.json: not valid JSON"):
        open_dataset(small_ds.root, "v1.0-mini")
    path.write_text(json.dumps({"token": "x"}))
    with pytest.raises(DatasetError, match=r"ego_pose.json: expected a JSON list"):
        open_dataset(small_ds.root, "v1.0-mini")


def test_error_broken_reference_and_record(small_ds):
    table = small_ds.root / "v1.0-mini" / "sample_data.json"
    good = table.read_text()
    records = json.loads(good)
    records[0]["calibrated_sensor_token"] = "does-not-exist"
    table.write_text(json.dumps(records))
    with pytest.raises(DatasetError, match="references a missing record.*does-not-exist"):
        open_dataset(small_ds.root, "v1.0-mini")
    table.write_text(good)
    ego = small_ds.root / "v1.0-mini" / "ego_pose.json"
    records = json.loads(ego.read_text())
    records[0]["rotation"] = [0, 0, 0, 0]
    ego.write_text(json.dumps(records))
    with pytest.raises(DatasetError, match=r"ego_pose.json: record .* non-zero 4-number"):
        read_clip(small_ds.root, "scene-0000", "v1.0-mini")


def test_error_unknown_scene_and_bad_lidar_file(small_ds):
    with pytest.raises(KeyError, match="scene-9999.*scene-0000"):
        read_clip(small_ds.root, "scene-9999", "v1.0-mini")
    frame = read_clip(small_ds.root, "scene-0000", "v1.0-mini").frames[0]
    with open(frame.lidar.path, "ab") as f:
        f.write(b"\0" * 4)
    with pytest.raises(DatasetError, match=f"{frame.lidar.path}: .* not a whole number"):
        load_lidar_points(frame.lidar)
    shutil.rmtree(frame.lidar.path.parent)
    with pytest.raises(FileNotFoundError, match=str(frame.lidar.path)):
        aggregate_sweeps(frame, 1)


def test_cli_lists_clips(t4_ds):
    from typer.testing import CliRunner

    from autolabel.cli import app

    written, _ = t4_ds
    result = CliRunner().invoke(app, ["clips", str(written.root), "--version", "annotation"])
    assert result.exit_code == 0, result.output
    (line,) = result.stdout.strip().splitlines()
    assert line.startswith(written.scene_names[0] + "\tkeyframes=4\tduration_s=1.5")
    assert "lidar=LIDAR_CONCAT" in line and "annotations=8" in line
    bad = CliRunner().invoke(app, ["clips", str(written.root), "--version", "v1.0-mini"])
    assert bad.exit_code == 1 and "table folders found" in bad.output


def test_error_record_of_the_wrong_shape(small_ds):
    table = small_ds.root / "v1.0-mini" / "sample_annotation.json"
    records = json.loads(table.read_text())
    records[0]["instance_token"] = ["not", "a", "token"]
    table.write_text(json.dumps(records))
    with pytest.raises(DatasetError, match=r"v1.0-mini: malformed tables \(TypeError"):
        open_dataset(small_ds.root, "v1.0-mini")
