"""What the bevfusion backend reads from the user's data instead of assuming it (no OpenMMLab
stack needed): the test-time image window for the actual image size, the sweep count against
``read.max_sweeps``, and the data-info dict of a keyframe without earlier sweeps.

The equality of every model input with mmdet3d's own path is checked by
``bench/bevfusion_input_equivalence.py`` and, where mmdet3d is installed, by
``tests/test_bevfusion_conversion.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from autolabel.clip import CameraImage, Frame, LidarSweep
from autolabel.config import ConfigError
from autolabel.sensors import CameraCalibration, LidarCalibration
from autolabel.stages import check_sweeps_read
from calib.se3 import SE3
from detectors.bevfusion import (
    MMDET3D_CAMERA_ORDER,
    check_image_windows,
    frame_data_info,
    image_window,
    image_window_problem,
)

#: The test-time ImageAug3D of projects/BEVFusion's lidar-cam config (mmdetection3d v1.4.0).
NUSCENES_TEST_AUG = {
    "final_dim": [256, 704],
    "resize_lim": [0.48, 0.48],
    "bot_pct_lim": [0.0, 0.0],
    "rot_lim": [0.0, 0.0],
    "rand_flip": False,
    "is_train": False,
}
NUSCENES_FRONT_K = np.array([[1266.4, 0.0, 816.3], [0.0, 1266.4, 491.5], [0.0, 0.0, 1.0]])
PANDASET_FRONT_K = np.array([[1970.0, 0.0, 970.0], [0.0, 1970.0, 483.3], [0.0, 0.0, 1.0]])


def test_window_on_nuscenes_images_by_hand():
    window = image_window((1600, 900), NUSCENES_TEST_AUG)
    # 1600x900 * 0.48 = 768x432; 704 wide centred: 32..736; 256 high ending at the bottom.
    assert window.resized_wh == (768, 432)
    assert window.crop_px == (32, 176, 736, 432)
    assert window.original_px() == pytest.approx((66.67, 366.67, 1533.33, 900.0), abs=0.01)
    assert image_window_problem(window, NUSCENES_FRONT_K, NUSCENES_TEST_AUG) is None


def test_window_on_1920x1080_images_cuts_off_the_horizon():
    window = image_window((1920, 1080), NUSCENES_TEST_AUG)
    # int(921.6) x int(518.4) = 921x518; left int(217 / 2) = 108; top 518 - 256 = 262.
    assert window.resized_wh == (921, 518)
    assert window.crop_px == (108, 262, 812, 518)
    # Principal point row 483.3 * 0.48 = 232 < 262: above the crop.
    problem = image_window_problem(window, PANDASET_FRONT_K, NUSCENES_TEST_AUG)
    assert "leaves out its principal point (970, 483)" in problem
    assert "y 546-1079" in problem
    # Scaled so that the width just fits, the principal point is inside.
    fitted = {**NUSCENES_TEST_AUG, "resize_lim": [0.367, 0.367]}
    window = image_window((1920, 1080), fitted)
    assert window.crop_px == (0, 140, 704, 396)
    assert image_window_problem(window, PANDASET_FRONT_K, fitted) is None


def test_window_on_small_images_would_show_black():
    window = image_window((480, 270), NUSCENES_TEST_AUG)
    assert window.crop_px[1] < 0
    problem = image_window_problem(window, NUSCENES_FRONT_K * 0.3, NUSCENES_TEST_AUG)
    assert "smaller than the model's 704x256 input" in problem


def _frame(tmp_path, size_wh, k, sweeps=()) -> Frame:
    global_SE3_ego = SE3(np.eye(3), np.array([100.0, 200.0, 0.0]))
    cameras = {}
    for channel in MMDET3D_CAMERA_ORDER:
        path = tmp_path / f"{channel}.jpg"
        Image.new("RGB", size_wh, (90, 90, 90)).save(path, quality=50)
        calib = CameraCalibration(channel, k, SE3.identity(), *size_wh)
        cameras[channel] = CameraImage(path, calib, global_SE3_ego, 1_000_000)
    lidar = tmp_path / "key.pcd.bin"
    np.zeros((3, 5), np.float32).tofile(lidar)
    return Frame(
        token="tok",
        index=0,
        timestamp_us=1_000_000,
        time_s=0.0,
        global_SE3_ego=global_SE3_ego,
        lidar=LidarSweep(lidar, global_SE3_ego, 1_000_000),
        lidar_calibration=LidarCalibration("LIDAR_TOP", SE3.identity(), np.zeros(32)),
        cameras=cameras,
        sweeps=list(sweeps),
    )


def test_image_size_is_read_from_the_file_and_a_bad_crop_names_it(tmp_path):
    # The tables may say 1600x900; the loader (and this check) read the files.
    frame = _frame(tmp_path, (1920, 1080), PANDASET_FRONT_K)
    with pytest.raises(ValueError) as err:
        check_image_windows(frame, NUSCENES_TEST_AUG)
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 'CAM_FRONT.jpg'}: ")
    assert "1920x1080 CAM_FRONT image" in message and "image_resize=" in message
    assert "e.g. 0.367" in message
    fitted = {**NUSCENES_TEST_AUG, "resize_lim": [0.367, 0.367]}
    assert check_image_windows(frame, fitted).crop_px == (0, 140, 704, 396)
    ok = _frame(tmp_path, (1600, 900), NUSCENES_FRONT_K)
    assert check_image_windows(ok, NUSCENES_TEST_AUG).crop_px == (32, 176, 736, 432)


def test_unreadable_image_is_named(tmp_path):
    frame = _frame(tmp_path, (1600, 900), NUSCENES_FRONT_K)
    frame.cameras["CAM_BACK"].path.write_bytes(b"not a jpeg")
    with pytest.raises(ValueError, match=r"CAM_BACK\.jpg: cannot read the image size"):
        check_image_windows(frame, NUSCENES_TEST_AUG)


def test_first_keyframe_has_no_sweep_list_as_mmdet3d_writes_it(tmp_path):
    # update_infos_to_v2 deletes an empty lidar_sweeps list; the loader then pads with the
    # keyframe (pad_empty_sweeps). An empty list would instead give the model one sweep.
    frame = _frame(tmp_path, (1600, 900), NUSCENES_FRONT_K)
    info = frame_data_info(frame, use_camera=False)
    assert "lidar_sweeps" not in info
    assert info["lidar_path"] == str(frame.lidar.path) and info["num_pts_feats"] == 5
    np.testing.assert_allclose(info["ego2global"], frame.global_SE3_ego.as_matrix())
    np.testing.assert_allclose(info["lidar_points"]["lidar2ego"], np.eye(4))
    sweep = LidarSweep(frame.lidar.path, frame.global_SE3_ego, 950_000)
    with_sweep = frame_data_info(_frame(tmp_path, (1600, 900), NUSCENES_FRONT_K, [sweep]), False)
    assert [s["timestamp"] for s in with_sweep["lidar_sweeps"]] == [0.95]


def test_reader_must_list_the_sweeps_the_detector_loads():
    check_sweeps_read("bevfusion", 9, 10)
    check_sweeps_read("lidar", 0, 1)
    with pytest.raises(
        ConfigError, match=r"read.max_sweeps: detector 'bevfusion' loads 9 .* 3; .* 10"
    ):
        check_sweeps_read("bevfusion", 9, 3)
