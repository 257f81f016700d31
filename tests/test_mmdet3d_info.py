"""mmdet3d info import: the restricted unpickler, the bbox_3d conventions and the frame chain."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
from nuscenes.utils.data_classes import Box
from pyquaternion import Quaternion

from autolabel.classes import DETECTION_CLASSES
from autolabel.mmdet3d_info import (
    InfoFileError,
    boxes_from_bbox_3d,
    detect_box_convention,
    load_info_pickle,
    read_info_samples,
)

CLASSES = ("car", "truck", "trailer", "bus", "construction_vehicle", "bicycle", "motorcycle",
           "pedestrian", "traffic_cone", "barrier")  # fmt: skip


class _Exploit:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_pickle_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pkl"
    path.write_bytes(pickle.dumps({"data_list": [_Exploit(marker)]}, protocol=2))
    with pytest.raises(InfoFileError, match=rf"{path}: refusing to unpickle global posix\.system"):
        load_info_pickle(path)
    assert not marker.exists()
    # The same payload through eval, via protocol 4's STACK_GLOBAL.
    path.write_bytes(pickle.dumps({"x": eval}, protocol=4))  # noqa: S307 - pickled, not called
    with pytest.raises(InfoFileError, match=r"refusing to unpickle global builtins\.eval"):
        load_info_pickle(path)


def test_numpy_arrays_load_in_every_protocol_and_numpy2_names(tmp_path):
    info = {"data_list": [{"a": np.arange(6.0).reshape(2, 3), "s": np.float32(2.5)}]}
    for protocol in (2, 4, 5):
        path = tmp_path / f"p{protocol}.pkl"
        path.write_bytes(pickle.dumps(info, protocol=protocol))
        loaded = load_info_pickle(path)["data_list"][0]
        np.testing.assert_array_equal(loaded["a"], info["data_list"][0]["a"])
        assert loaded["s"] == np.float32(2.5)
    # numpy 2 writes numpy._core.*; those names resolve to numpy.core on numpy 1 and back.
    raw = pickle.dumps(info, protocol=2).replace(
        b"numpy.core.multiarray", b"numpy._core.multiarray"
    )
    assert b"numpy._core.multiarray" in raw
    (tmp_path / "np2.pkl").write_bytes(raw)
    np.testing.assert_array_equal(
        load_info_pickle(tmp_path / "np2.pkl")["data_list"][0]["a"], info["data_list"][0]["a"]
    )


def test_bad_files_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.pkl"):
        load_info_pickle(tmp_path / "nope.pkl")
    path = tmp_path / "cut.pkl"
    path.write_bytes(pickle.dumps({"data_list": [1, 2, 3]})[:-5])
    with pytest.raises(InfoFileError, match=rf"{path}: not a readable pickle"):
        load_info_pickle(path)
    path.write_bytes(pickle.dumps({"infos": []}))
    with pytest.raises(InfoFileError, match=rf"{path}: expected a dict with a 'data_list'"):
        load_info_pickle(path)


def _random_nuscenes_boxes(rng, n):
    center = rng.uniform(-30, 30, (n, 3))
    wlh = np.stack([rng.uniform(0.5, 2.5, n), rng.uniform(3.0, 9.0, n), rng.uniform(1, 3, n)], 1)
    yaw = rng.uniform(-np.pi, np.pi, n)
    return center, wlh, yaw


def test_both_conventions_give_the_devkit_box():
    rng = np.random.default_rng(3)
    center, wlh, yaw = _random_nuscenes_boxes(rng, 20)
    # mmdet3d < 1.0 converter: (x, y, z, w, l, h, -yaw - pi/2); >= 1.0: (x, y, z, l, w, h, yaw).
    legacy = np.concatenate([center, wlh, (-yaw - np.pi / 2)[:, None]], axis=1)
    v1 = np.concatenate([center, wlh[:, [1, 0, 2]], yaw[:, None]], axis=1)
    for rows, convention in ((legacy, "legacy"), (v1, "v1")):
        assert detect_box_convention(rows) == convention
        boxes = boxes_from_bbox_3d(rows, convention)
        assert boxes.frame == "lidar"
        for i in range(len(rows)):
            ref = Box(center[i], wlh[i], Quaternion(axis=[0, 0, 1], angle=yaw[i]))
            np.testing.assert_allclose(boxes.corners()[i], ref.corners().T, atol=1e-9)
    with pytest.raises(InfoFileError, match="cannot tell the bbox_3d size order"):
        detect_box_convention(np.array([[0, 0, 0, 1.0, 1.1, 1.5, 0.0]]), "x.pkl")
    with pytest.raises(ValueError, match="unknown bbox_3d convention"):
        boxes_from_bbox_3d(legacy, "kitti")


def _matrix(quat: Quaternion, trans) -> list[list[float]]:
    m = np.eye(4)
    m[:3, :3] = quat.rotation_matrix
    m[:3, 3] = trans
    return m.tolist()


def test_info_sample_to_global_boxes_and_cameras(tmp_path):
    rng = np.random.default_rng(5)
    center_g, wlh, yaw_g = _random_nuscenes_boxes(rng, 6)
    q_ego = Quaternion(axis=[0.02, -0.01, 1], angle=0.7)
    t_ego = np.array([600.0, 1600.0, 0.0])
    q_lidar = Quaternion(axis=[0, 0, 1], angle=-np.pi / 2)
    t_lidar = np.array([0.94, 0.0, 1.84])
    # Ground truth written the way the converter does: devkit boxes moved global -> ego -> lidar.
    rows, vel_lidar = [], []
    vel_g = rng.uniform(-5, 5, (6, 3))
    vel_g[:, 2] = 0
    for i in range(6):
        box = Box(center_g[i], wlh[i], Quaternion(axis=[0, 0, 1], angle=yaw_g[i]))
        box.translate(-t_ego)
        box.rotate(q_ego.inverse)
        box.translate(-t_lidar)
        box.rotate(q_lidar.inverse)
        rows.append([*box.center, *box.wlh, -box.orientation.yaw_pitch_roll[0] - np.pi / 2])
        vel_lidar.append((q_lidar.inverse.rotation_matrix @ q_ego.inverse.rotation_matrix @ vel_g[i])[:2])  # fmt: skip
    labels = [0, 7, 8, 9, -1, 1]  # -1: a class outside the file's classes, dropped
    k = [[1266.4, 0.0, 816.3], [0.0, 1266.4, 491.5], [0.0, 0.0, 1.0]]
    q_cam = Quaternion(matrix=np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]]))
    info = {
        "metainfo": {"categories": {c: i for i, c in enumerate(CLASSES)}, "version": "v1.0-mini"},
        "data_list": [
            {
                "token": "tok",
                "timestamp": 1533201470.448696,
                "ego2global": _matrix(q_ego, t_ego),
                "lidar_points": {"lidar2ego": _matrix(q_lidar, t_lidar), "lidar_path": "x.bin"},
                "images": {
                    "CAM_FRONT": {
                        "cam2img": k,
                        "cam2ego": _matrix(q_cam, [1.7, 0.0, 1.5]),
                        "img_path": "front.jpg",
                    }
                },
                "instances": [
                    {
                        "bbox_3d": rows[i],
                        "bbox_label_3d": labels[i],
                        "velocity": list(vel_lidar[i]),
                        "num_lidar_pts": 10 + i,
                        "bbox_3d_isvalid": i != 2,
                    }  # fmt: skip
                    for i in range(6)
                ],
            }
        ],
    }
    path = tmp_path / "info.pkl"
    path.write_bytes(pickle.dumps(info, protocol=4))
    (sample,) = read_info_samples(path, image_size_px=(1600, 900))
    keep = np.array(labels) >= 0
    assert sample.token == "tok" and sample.timestamp_us == 1533201470448696
    np.testing.assert_allclose(sample.global_SE3_ego.as_matrix(), _matrix(q_ego, t_ego), atol=1e-12)
    np.testing.assert_allclose(sample.boxes.center_m, center_g[keep], atol=1e-9)
    np.testing.assert_allclose(sample.boxes.size_wlh_m, wlh[keep], atol=1e-12)
    np.testing.assert_allclose(np.cos(sample.boxes.yaw_rad - yaw_g[keep]), 1.0, atol=1e-9)
    # Info files keep only the xy of the LiDAR-frame velocity; with the ego tilted by ~1 deg the
    # dropped z component is ~1e-3 of the speed.
    np.testing.assert_allclose(sample.boxes.velocity_mps, vel_g[keep, :2], atol=2e-3)
    assert [DETECTION_CLASSES[i] for i in sample.boxes.label] == [
        CLASSES[i] for i in np.array(labels)[keep]
    ]
    np.testing.assert_array_equal(sample.num_lidar_pts, [10, 11, 12, 13, 15])
    np.testing.assert_array_equal(sample.valid, [True, True, False, True, True])
    cam = sample.cameras["CAM_FRONT"]
    np.testing.assert_allclose(cam.intrinsic, k)
    np.testing.assert_allclose(cam.ego_SE3_camera.translation, [1.7, 0.0, 1.5])
    assert (cam.width_px, cam.height_px) == (1600, 900)
    assert sample.image_paths == {"CAM_FRONT": "front.jpg"}


def test_malformed_sample_names_the_key(tmp_path):
    path = tmp_path / "info.pkl"
    info = {"metainfo": {"classes": CLASSES}, "data_list": [{"token": "t", "instances": []}]}
    path.write_bytes(pickle.dumps(info))
    with pytest.raises(InfoFileError, match=r"data_list\[0\]: missing key 'ego2global'"):
        read_info_samples(path, box_convention="v1")


def _object_array_pickle(fake_pointer: bytes) -> bytes:
    """A protocol-2 pickle of a 2-element array whose dtype says object ('O8') with its flags
    state 0, holding raw bytes (what numpy would take for two object pointers)."""
    raw = pickle.dumps({"data_list": [np.zeros(2, dtype="f8")]}, protocol=2)
    raw = raw.replace(b"X\x02\x00\x00\x00f8", b"X\x02\x00\x00\x00O8")
    zeros = b"X\x10\x00\x00\x00" + b"\x00" * 16
    assert raw.count(zeros) == 1
    return raw.replace(zeros, b"X\x10\x00\x00\x00" + fake_pointer * 2)


def test_object_arrays_from_raw_bytes_are_refused_without_being_built(tmp_path):
    """Issue 20.2: numpy's own unpickling builds an object array from raw bytes (fake pointers)
    and crashes on them; the loader refuses the dtype before any array exists. Run in a child
    process so that a crash fails the test instead of killing it."""
    path = tmp_path / "evil.pkl"
    path.write_bytes(_object_array_pickle(b"\x41\x41\x41\x41\x41\x41\x41\x00"))
    code = (
        "import sys\n"
        "from autolabel.mmdet3d_info import InfoFileError, load_info_pickle\n"
        "try:\n"
        "    info = load_info_pickle(sys.argv[1])\n"
        "    print(repr(info['data_list'][0]))\n"
        "except InfoFileError as e:\n"
        "    print('refused:', e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.startswith(f"refused: {path}: refusing dtype 'O8'"), done.stdout


def test_arrays_of_every_plain_dtype_and_layout_round_trip(tmp_path):
    arrays = {
        "f4": np.arange(6, dtype=np.float32).reshape(2, 3),
        "big_endian": np.arange(4, dtype=">f8"),
        "fortran": np.asfortranarray(np.arange(12.0).reshape(3, 4)),
        "i8": np.array([-1, 2**40], dtype=np.int64),
        "bool": np.array([True, False]),
        "text": np.array(["CAM_FRONT", "x"]),
        "empty": np.zeros((0, 7)),
        "scalar": np.int64(7),
    }
    for protocol in (2, 4, 5):
        path = tmp_path / f"p{protocol}.pkl"
        path.write_bytes(pickle.dumps({"data_list": [arrays]}, protocol=protocol))
        loaded = load_info_pickle(path)["data_list"][0]
        for key, value in arrays.items():
            assert loaded[key].dtype == value.dtype, key
            np.testing.assert_array_equal(loaded[key], value)
            if isinstance(value, np.ndarray):
                assert loaded[key].flags.writeable
    # A structured dtype and a length that does not match the shape are refused, naming the file.
    path = tmp_path / "fields.pkl"
    path.write_bytes(pickle.dumps({"data_list": [np.zeros(2, dtype=[("a", "f4")])]}))
    with pytest.raises(InfoFileError, match=rf"{path}: refusing"):
        load_info_pickle(path)
    raw = pickle.dumps({"data_list": [np.zeros(2)]}, protocol=2)
    path.write_bytes(
        raw.replace(b"X\x10\x00\x00\x00" + b"\x00" * 16, b"X\x08\x00\x00\x00" + b"\x00" * 8)
    )
    with pytest.raises(InfoFileError, match=rf"{path}: array of shape \(2,\)"):
        load_info_pickle(path)
