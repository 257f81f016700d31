"""BEVFusion backend edges, checked against mmdet3d's own nuScenes export on real mmdet3d types.

Skipped where the OpenMMLab stack is not installed (CI); run in an environment with mmdet3d
(README, section "BEVFusion").
"""

from __future__ import annotations

import types

import numpy as np
import pytest

mmdet3d = pytest.importorskip("mmdet3d")
torch = pytest.importorskip("torch")

from mmdet3d.evaluation.metrics.nuscenes_metric import (  # noqa: E402
    lidar_nusc_box_to_global,
    output_to_nusc_box,
)
from mmdet3d.structures import (  # noqa: E402
    CameraInstance3DBoxes,
    Det3DDataSample,
    LiDARInstance3DBoxes,
)
from mmengine.structures import InstanceData  # noqa: E402
from nuscenes.eval.common.utils import quaternion_yaw  # noqa: E402
from pyquaternion import Quaternion  # noqa: E402

from autolabel.classes import DETECTION_CLASSES  # noqa: E402
from autolabel.clip import CameraImage, Frame, LidarSweep  # noqa: E402
from autolabel.sensors import CameraCalibration, LidarCalibration  # noqa: E402
from calib.se3 import SE3  # noqa: E402
from detectors.bevfusion import (  # noqa: E402
    MMDET3D_CAMERA_ORDER,
    DetectorUnavailableError,
    boxes_from_det3d_sample,
    class_index_map,
    frame_data_info,
)

#: BEVFusion's class order (projects/BEVFusion configs), not the devkit's.
BEVFUSION_CLASSES = [
    "car", "truck", "construction_vehicle", "bus", "trailer",
    "barrier", "motorcycle", "bicycle", "pedestrian", "traffic_cone",
]  # fmt: skip


def _poses() -> tuple[SE3, SE3]:
    q_ego = Quaternion(axis=[0, 0, 1], angle=2.1) * Quaternion(axis=[1, 0, 0], angle=0.02)
    global_SE3_ego = SE3(q_ego.rotation_matrix, np.array([411.3, 1180.9, 0.4]))
    # nuScenes LIDAR_TOP: x to the right, y forward (about -90 deg about z), slightly tilted.
    q_lidar = Quaternion(axis=[0, 0, 1], angle=-np.pi / 2) * Quaternion(axis=[0, 1, 0], angle=0.01)
    ego_SE3_lidar = SE3(q_lidar.rotation_matrix, np.array([0.94, 0.0, 1.84]))
    return global_SE3_ego, ego_SE3_lidar


def _sample(n: int, seed: int = 0, box_dim: int = 9) -> Det3DDataSample:
    rng = np.random.default_rng(seed)
    tensor = np.column_stack(
        [
            rng.uniform(-40, 40, (n, 2)),
            rng.uniform(-2.5, 0.0, n),
            rng.uniform(0.4, 12.0, (n, 3)),
            rng.uniform(-np.pi, np.pi, n),
            rng.normal(0, 4, (n, 2)),
        ]
    )[:, :box_dim]
    pred = InstanceData()
    pred.bboxes_3d = LiDARInstance3DBoxes(
        torch.tensor(tensor, dtype=torch.float32), box_dim=box_dim
    )
    pred.scores_3d = torch.tensor(rng.uniform(0, 1, n), dtype=torch.float32)
    pred.labels_3d = torch.tensor(rng.integers(0, len(BEVFUSION_CLASSES), n))
    sample = Det3DDataSample()
    sample.pred_instances_3d = pred
    return sample


def test_conversion_matches_mmdet3d_nuscenes_export():
    global_SE3_ego, ego_SE3_lidar = _poses()
    sample = _sample(40)
    ours = boxes_from_det3d_sample(
        sample, class_index_map(BEVFUSION_CLASSES), global_SE3_ego.compose(ego_SE3_lidar)
    )
    assert ours.frame == "global" and len(ours) == 40

    # Reference: mmdet3d's own nuScenes submission path (NuScenesMetric), with no range filter.
    pred = sample.pred_instances_3d
    ref_boxes, _ = output_to_nusc_box(
        {"bboxes_3d": pred.bboxes_3d, "scores_3d": pred.scores_3d, "labels_3d": pred.labels_3d}
    )
    info = {
        "lidar_points": {"lidar2ego": ego_SE3_lidar.as_matrix()},
        "ego2global": global_SE3_ego.as_matrix(),
    }
    no_range = types.SimpleNamespace(class_range=dict.fromkeys(BEVFUSION_CLASSES, 1e9))
    ref_boxes = lidar_nusc_box_to_global(info, ref_boxes, BEVFUSION_CLASSES, no_range)
    assert len(ref_boxes) == len(ours)
    for i, ref in enumerate(ref_boxes):
        np.testing.assert_allclose(ours.center_m[i], ref.center, atol=1e-4)
        np.testing.assert_allclose(ours.size_wlh_m[i], ref.wlh, atol=1e-5)
        # The devkit's yaw (heading of the box's x axis), as its orientation error uses.
        yaw_ref = quaternion_yaw(ref.orientation)
        assert np.cos(ours.yaw_rad[i] - yaw_ref) == pytest.approx(1.0, abs=1e-9)
        np.testing.assert_allclose(ours.velocity_mps[i], ref.velocity[:2], atol=1e-4)
        assert ours.class_name[i] == BEVFUSION_CLASSES[int(ref.label)]
        assert ours.score[i] == pytest.approx(float(ref.score))


def test_class_mapping_scores_and_threshold():
    mapping = class_index_map(BEVFUSION_CLASSES)
    assert [DETECTION_CLASSES[i] for i in mapping] == BEVFUSION_CLASSES
    sample = _sample(30, seed=2)
    boxes = boxes_from_det3d_sample(sample, mapping, SE3.identity(), score_threshold=0.5)
    scores = sample.pred_instances_3d.scores_3d.numpy()
    assert len(boxes) == int((scores >= 0.5).sum())
    assert (boxes.score >= 0.5).all()
    with pytest.raises(DetectorUnavailableError, match="'lorry'"):
        class_index_map(["car", "lorry"])


def test_identity_pose_keeps_lidar_geometry():
    sample = _sample(5, seed=3)
    boxes = boxes_from_det3d_sample(sample, class_index_map(BEVFUSION_CLASSES), SE3.identity())
    t = sample.pred_instances_3d.bboxes_3d.tensor.numpy().astype(np.float64)
    # mmdet3d boxes stand on their bottom centre; nuScenes boxes are centred.
    np.testing.assert_allclose(boxes.center_m[:, 2], t[:, 2] + t[:, 5] / 2, atol=1e-5)
    np.testing.assert_allclose(boxes.size_wlh_m, t[:, [4, 3, 5]], atol=1e-6)
    np.testing.assert_allclose(boxes.velocity_mps, t[:, 7:9], atol=1e-6)


def test_boxes_without_velocity_and_empty_predictions():
    boxes = boxes_from_det3d_sample(
        _sample(4, box_dim=7), class_index_map(BEVFUSION_CLASSES), SE3.identity()
    )
    assert np.isnan(boxes.velocity_mps).all()
    empty = boxes_from_det3d_sample(_sample(0), class_index_map(BEVFUSION_CLASSES), SE3.identity())
    assert len(empty) == 0 and empty.frame == "global"


def test_bad_model_output_is_refused():
    sample = _sample(3)
    with pytest.raises(ValueError, match="outside its 2 class names"):
        boxes_from_det3d_sample(sample, class_index_map(["car", "truck"]), SE3.identity())
    cam = Det3DDataSample()
    cam.pred_instances_3d = InstanceData(
        bboxes_3d=CameraInstance3DBoxes(torch.zeros((1, 7))),
        scores_3d=torch.ones(1),
        labels_3d=torch.zeros(1, dtype=torch.long),
    )
    with pytest.raises(TypeError, match="LiDARInstance3DBoxes"):
        boxes_from_det3d_sample(cam, class_index_map(BEVFUSION_CLASSES), SE3.identity())


def _frame(tmp_path) -> Frame:
    global_SE3_ego, ego_SE3_lidar = _poses()
    rng = np.random.default_rng(0)
    pts = np.zeros((500, 5), dtype=np.float32)
    pts[:, :3] = rng.uniform(-20, 20, (500, 3))
    key_path = tmp_path / "key.pcd.bin"
    pts.tofile(key_path)
    sweeps = []
    for k in range(1, 3):
        # Earlier sweeps: the ego was k metres behind and turned a little.
        q = Quaternion(axis=[0, 0, 1], angle=-0.01 * k)
        pose = global_SE3_ego.compose(SE3(q.rotation_matrix, np.array([-1.0 * k, 0.1 * k, 0.0])))
        path = tmp_path / f"sweep{k}.pcd.bin"
        pts.tofile(path)
        sweeps.append(LidarSweep(path, pose, 1_000_000 - 50_000 * k))
    cameras = {}
    for i, channel in enumerate(MMDET3D_CAMERA_ORDER):
        yaw = np.deg2rad(60 * i)
        base = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])
        rot = Quaternion(axis=[0, 0, 1], angle=yaw).rotation_matrix @ base
        calib = CameraCalibration(
            channel, np.array([[800.0, 0, 400], [0, 800.0, 225], [0, 0, 1]]),
            SE3(rot, np.array([1.0, 0.0, 1.5])), 800, 450,
        )  # fmt: skip
        cam_pose = global_SE3_ego.compose(SE3(np.eye(3), np.array([0.02 * i, 0.0, 0.0])))
        cameras[channel] = CameraImage(tmp_path / f"{channel}.jpg", calib, cam_pose, 990_000)
    return Frame(
        token="tok",
        index=3,
        timestamp_us=1_000_000,
        time_s=1.5,
        global_SE3_ego=global_SE3_ego,
        lidar=LidarSweep(key_path, global_SE3_ego, 1_000_000),
        lidar_calibration=LidarCalibration("LIDAR_TOP", ego_SE3_lidar, np.zeros(32)),
        cameras=cameras,
        sweeps=sweeps,
    )


def test_data_info_feeds_mmdet3d_sweep_loader_like_its_converter(tmp_path):
    from mmdet3d.datasets.transforms import LoadPointsFromFile, LoadPointsFromMultiSweeps

    frame = _frame(tmp_path)
    info = frame_data_info(frame, use_camera=False)
    assert info["timestamp"] == pytest.approx(1.0)
    assert [s["timestamp"] for s in info["lidar_sweeps"]] == pytest.approx([0.95, 0.9])
    # mmdet3d's converter stores lidar2sensor = inverse(sensor2lidar) as [R^T, -R^T T].
    global_SE3_ego, ego_SE3_lidar = _poses()
    for sweep, rec in zip(frame.sweeps, info["lidar_sweeps"], strict=True):
        key_lidar_SE3_sweep_lidar = (
            global_SE3_ego.compose(ego_SE3_lidar).inverse().compose(sweep.global_SE3_ego)
        ).compose(ego_SE3_lidar)
        r, t = key_lidar_SE3_sweep_lidar.rotation, key_lidar_SE3_sweep_lidar.translation
        m = np.array(rec["lidar_points"]["lidar2sensor"])
        np.testing.assert_allclose(m[:3, :3], r.T, atol=1e-9)
        np.testing.assert_allclose(m[:3, 3], -r.T @ t, atol=1e-9)

    # The real loaders accept it: 3 sweeps of 500 points, time lags in column 4.
    results = LoadPointsFromFile(coord_type="LIDAR", load_dim=5, use_dim=5)(dict(info))
    results = LoadPointsFromMultiSweeps(sweeps_num=9, load_dim=5, use_dim=5, test_mode=True)(
        results
    )
    points = results["points"].tensor.numpy()
    assert len(points) == 1500
    np.testing.assert_allclose(sorted(set(np.round(points[:, 4], 3))), [0.0, 0.05, 0.1])


def test_data_info_cameras_project_lidar_points(tmp_path):
    frame = _frame(tmp_path)
    info = frame_data_info(frame, use_camera=True)
    assert list(info["images"]) == list(MMDET3D_CAMERA_ORDER)
    _, ego_SE3_lidar = _poses()
    p_lidar = np.array([3.0, 12.0, -0.5])
    for channel, rec in info["images"].items():
        cam = frame.cameras[channel]
        # Independent route: lidar -> ego(lidar time) -> global -> ego(camera time) -> camera.
        p_global = frame.global_SE3_ego.transform_points(ego_SE3_lidar.transform_points(p_lidar))
        p_cam_ego = cam.global_SE3_ego.inverse().transform_points(p_global)
        e_SE3_c = cam.calibration.ego_SE3_camera
        expected = e_SE3_c.rotation.T @ (p_cam_ego - e_SE3_c.translation)
        lidar2cam = np.array(rec["lidar2cam"])
        np.testing.assert_allclose(
            lidar2cam[:3, :3] @ p_lidar + lidar2cam[:3, 3], expected, atol=1e-9
        )
        np.testing.assert_allclose(rec["cam2img"], cam.calibration.intrinsic)


def test_cpu_voxelization_is_first_come_hard_voxelization_in_xyz_order():
    from detectors.bevfusion import cpu_voxelization

    project_layer = types.SimpleNamespace(
        voxel_size=[0.5, 0.5, 1.0],
        point_cloud_range=[-4.0, -4.0, -2.0, 4.0, 4.0, 2.0],
        max_num_points=3,
        max_voxels=[40, 50],
    )
    layer = cpu_voxelization(project_layer).eval()
    rng = np.random.default_rng(0)
    points = rng.uniform([-5, -5, -2.5, 0, 0], [5, 5, 2.5, 1, 1], (400, 5)).astype(np.float32)
    voxels, coors, counts = (t.numpy() for t in layer(torch.from_numpy(points)))

    # Reference: voxel (x, y, z) index of each in-range point; voxels in order of first point,
    # at most 50 (test-time max) voxels, at most 3 points each, in point order.
    idx = np.floor((points[:, :3] - [-4.0, -4.0, -2.0]) / [0.5, 0.5, 1.0]).astype(int)
    inside = ((idx >= 0) & (idx < [16, 16, 4])).all(axis=1)
    order, members = [], {}
    for i in np.flatnonzero(inside):
        key = tuple(idx[i])
        if key not in members:
            if len(order) == 50:
                continue
            order.append(key)
            members[key] = []
        members[key].append(i)
    assert coors.tolist() == [list(k) for k in order]
    assert counts.tolist() == [min(len(members[k]), 3) for k in order]
    for v, key in enumerate(order):
        np.testing.assert_array_equal(voxels[v, : counts[v]], points[members[key][:3]])


def test_cuda_without_a_gpu_is_refused_before_anything_is_imported(tmp_path):
    from detectors import get_detector

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    root = tmp_path / "mmdetection3d"
    (root / "projects" / "BEVFusion").mkdir(parents=True)
    cfg = root / "fusion.py"
    cfg.write_text(
        "model = dict(type='BEVFusion', view_transform=dict(type='DepthLSSTransform'))\n"
    )
    options = {"mmdet3d_root": str(root), "config": str(cfg), "allow_random_weights": True}
    with pytest.raises(DetectorUnavailableError, match="torch sees no GPU; pass device=cpu"):
        get_detector("bevfusion", {**options, "device": "cuda"})
