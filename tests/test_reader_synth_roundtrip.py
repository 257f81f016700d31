"""Round trip: the synthetic generator writes a nuScenes dataset, the reader reads it back.

Poses and calibrations must equal the devkit's records and the rig the generator used; ground
truth must equal the sample_annotation records; multi-sweep aggregation must equal the devkit's.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from nuscenes.eval.detection.utils import category_to_detection_name
from nuscenes.utils.data_classes import LidarPointCloud
from pyquaternion import Quaternion

from autolabel.classes import DETECTION_CLASSES
from autolabel.nuscenes_reader import aggregate_sweeps, list_clips, open_dataset, read_clip
from autolabel.sensors import CAMERA_CHANNELS
from autolabel.synth.config import SynthConfig
from autolabel.synth.generator import generate_dataset
from calib.rig import load_rig

WIDTH, HEIGHT = 160, 90


def _matrix(record: dict) -> np.ndarray:
    m = np.eye(4)
    m[:3, :3] = Quaternion(record["rotation"]).rotation_matrix
    m[:3, 3] = record["translation"]
    return m


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    root = tmp_path_factory.mktemp("synth")
    config = SynthConfig(
        scenes=1, seconds=2.0, width_px=WIDTH, height_px=HEIGHT, seed=3, extra_agents=2,
        progress=False,
    )  # fmt: skip
    summary = generate_dataset(root, config)
    nusc = open_dataset(root, config.version)
    return summary, nusc, read_clip(nusc, summary["scenes"][0])


def test_scenes_and_keyframes(synth):
    summary, nusc, clip = synth
    assert list_clips(nusc) == summary["scenes"]
    assert len(clip.frames) == summary["samples"] == 4
    np.testing.assert_allclose([f.time_s for f in clip.frames], [0.0, 0.5, 1.0, 1.5], atol=1e-6)


def test_poses_and_calibrations_equal_records_and_rig(synth):
    _, nusc, clip = synth
    rig = load_rig("nuscenes").scaled(WIDTH, HEIGHT)
    for frame in clip.frames:
        sample = nusc.get("sample", frame.token)
        lidar_sd = nusc.get("sample_data", sample["data"]["LIDAR_TOP"])
        ego = _matrix(nusc.get("ego_pose", lidar_sd["ego_pose_token"]))
        np.testing.assert_allclose(frame.global_SE3_ego.as_matrix(), ego, atol=1e-12)
        lidar_cs = nusc.get("calibrated_sensor", lidar_sd["calibrated_sensor_token"])
        ego_SE3_lidar = frame.lidar_calibration.ego_SE3_lidar.as_matrix()
        np.testing.assert_allclose(ego_SE3_lidar, _matrix(lidar_cs), atol=1e-12)
        # The files hold 6-digit rounded numbers; the rig is what the generator started from.
        np.testing.assert_allclose(ego_SE3_lidar, rig.lidar.ego_SE3_lidar.as_matrix(), atol=2e-6)
        assert tuple(frame.cameras) == CAMERA_CHANNELS == rig.camera_channels
        for ch, image in frame.cameras.items():
            sd = nusc.get("sample_data", sample["data"][ch])
            cs = nusc.get("calibrated_sensor", sd["calibrated_sensor_token"])
            np.testing.assert_allclose(
                image.global_SE3_ego.as_matrix(),
                _matrix(nusc.get("ego_pose", sd["ego_pose_token"])),
                atol=1e-12,
            )
            cam, rig_cam = image.calibration, rig.camera(ch)
            np.testing.assert_allclose(cam.intrinsic, cs["camera_intrinsic"], atol=1e-12)
            np.testing.assert_allclose(cam.ego_SE3_camera.as_matrix(), _matrix(cs), atol=1e-12)
            np.testing.assert_allclose(cam.intrinsic, rig_cam.intrinsic, atol=1e-5)
            np.testing.assert_allclose(
                cam.ego_SE3_camera.as_matrix(), rig_cam.ego_SE3_camera.as_matrix(), atol=2e-6
            )
            assert (cam.width_px, cam.height_px) == (WIDTH, HEIGHT)
            assert cv2.imread(str(image.path)).shape == (HEIGHT, WIDTH, 3)
    # Cameras fire at their own times (the LiDAR passing their axis), with their own poses.
    offsets = [im.timestamp_us - clip.frames[1].timestamp_us for im in clip.frames[1].cameras.values()]  # fmt: skip
    assert len(set(offsets)) == 6


def test_ground_truth_equals_sample_annotations(synth):
    summary, nusc, clip = synth
    n_kept = 0
    for frame in clip.frames:
        sample = nusc.get("sample", frame.token)
        records = [nusc.get("sample_annotation", t) for t in sample["anns"]]
        records = [r for r in records if category_to_detection_name(r["category_name"])]
        gt = frame.ground_truth
        assert list(gt.annotation_token) == [r["token"] for r in records]
        b = gt.boxes
        np.testing.assert_array_equal(b.center_m, [r["translation"] for r in records])
        np.testing.assert_array_equal(b.size_wlh_m, [r["size"] for r in records])
        yaw = [Quaternion(r["rotation"]).yaw_pitch_roll[0] for r in records]
        np.testing.assert_allclose(np.cos(b.yaw_rad - yaw), 1.0, atol=1e-12)
        assert [DETECTION_CLASSES[i] for i in b.label] == [
            category_to_detection_name(r["category_name"]) for r in records
        ]
        np.testing.assert_array_equal(
            b.velocity_mps, [nusc.box_velocity(r["token"])[:2] for r in records]
        )
        np.testing.assert_array_equal(gt.num_lidar_pts, [r["num_lidar_pts"] for r in records])
        assert [clip.instance_tokens[i] for i in b.track_id] == [r["instance_token"] for r in records]  # fmt: skip
        n_kept += len(records)
    assert n_kept == summary["sample_annotations"] == sum(summary["annotations_per_class"].values())


def test_aggregated_sweeps_equal_devkit(synth):
    _, nusc, clip = synth
    frame = clip.frames[2]
    points, lag_s = aggregate_sweeps(frame, 6)
    pc, times = LidarPointCloud.from_file_multisweep(
        nusc, nusc.get("sample", frame.token), "LIDAR_TOP", "LIDAR_TOP", nsweeps=6
    )
    assert len(points) > 1000
    np.testing.assert_allclose(points[:, :4], pc.points.T, atol=1e-4)
    # The devkit subtracts seconds since 1970 (~1.7e9) in float64: ~1e-7 s of rounding.
    np.testing.assert_allclose(lag_s, times[0], atol=1e-6)
    np.testing.assert_allclose(np.unique(lag_s), [0.0, 0.1, 0.2, 0.3, 0.4, 0.5], atol=1e-6)
