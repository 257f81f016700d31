"""``bevfusion`` backend: BEVFusion (LiDAR + six cameras) through mmdet3d, with the user's weights.

BEVFusion is not in the mmdet3d wheel: it lives in the mmdetection3d repository's
``projects/BEVFusion``, so the backend takes the path of a checkout of that repository (with the
project's ops compiled), a BEVFusion config file and a checkpoint. See the README section
"BEVFusion" for the install (GPU and CPU) and an example.

Frames are turned into the data-info dicts mmdet3d's ``NuScenesDataset`` produces (LiDAR path,
earlier sweeps with their transforms, images with ``cam2img`` and ``lidar2cam``) and run through
the config's own test pipeline, so preprocessing matches what the model was trained with. The
model's ``Det3DDataSample`` outputs (boxes in the keyframe's LiDAR frame) are converted here, at
the edge, into global-frame ``Boxes3D`` by ``boxes_from_det3d_sample``.

The camera branch needs the project's CUDA ``bev_pool`` op, so LiDAR + camera fusion runs only on
a GPU; the LiDAR-only config also runs on CPU.

Nothing here imports torch or the OpenMMLab stack at module import time.
"""

from __future__ import annotations

import copy
import importlib
import sys
import types
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from autolabel.boxes import Boxes3D
from autolabel.classes import CLASS_INDEX, DETECTION_CLASSES
from autolabel.clip import Frame
from calib.se3 import SE3
from detectors.base import Detector, DetectorUnavailableError
from detectors.detection_results import submission_meta

#: Camera order of mmdet3d's nuScenes info files (the order the model saw during training).
MMDET3D_CAMERA_ORDER = (
    "CAM_FRONT",
    "CAM_FRONT_RIGHT",
    "CAM_FRONT_LEFT",
    "CAM_BACK",
    "CAM_BACK_LEFT",
    "CAM_BACK_RIGHT",
)
_PROJECT_PACKAGE = "projects.BEVFusion.bevfusion"
_BEV_POOL_EXT = "projects.BEVFusion.bevfusion.ops.bev_pool.bev_pool_ext"
_VOXEL_EXT = "projects.BEVFusion.bevfusion.ops.voxel.voxel_layer"

INSTALL_HINT = (
    "detector 'bevfusion' needs the OpenMMLab stack and an mmdetection3d checkout: "
    "pip install -e '.[bevfusion]' plus mmcv 2.1.0 built from source and spconv (see README, "
    "section 'BEVFusion'), then pass detector_options mmdet3d_root=<mmdetection3d checkout>, "
    "config=<projects/BEVFusion/configs/...py> and checkpoint=<.pth>"
)


@dataclass
class BevfusionConfig:
    """Options of the ``bevfusion`` backend.

    Attributes:
        mmdet3d_root: a checkout of open-mmlab/mmdetection3d whose ``projects/BEVFusion`` ops are
            compiled (``python projects/BEVFusion/setup.py develop``; CPU: see README).
        config: a BEVFusion config, e.g. ``projects/BEVFusion/configs/bevfusion_lidar-cam_voxel0075_
            second_secfpn_8xb4-cyclic-20e_nus-3d.py`` (relative paths are taken from mmdet3d_root).
        checkpoint: the trained weights (.pth). Required unless ``allow_random_weights``.
        device: torch device, ``cuda``, ``cuda:1`` or ``cpu`` (LiDAR-only configs only).
        batch_size: keyframes per forward pass.
        score_threshold: drop boxes scoring below this.
        allow_random_weights: run without a checkpoint (random weights): for plumbing and speed
            checks only; the boxes are meaningless.
    """

    mmdet3d_root: str | None = None
    config: str | None = None
    checkpoint: str | None = None
    device: str = "cuda"
    batch_size: int = 1
    score_threshold: float = 0.0
    allow_random_weights: bool = False

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"batch_size: must be >= 1, got {self.batch_size}")


def class_index_map(model_class_names: Sequence[str]) -> np.ndarray:
    """(K,) index into ``DETECTION_CLASSES`` of each of the model's K class names.

    Raises:
        DetectorUnavailableError: a name is not a nuScenes detection class.
    """
    unknown = [n for n in model_class_names if n not in CLASS_INDEX]
    if unknown:
        raise DetectorUnavailableError(
            f"BEVFusion model classes {unknown} are not nuScenes detection classes "
            f"{DETECTION_CLASSES}; use a model trained on nuScenes classes"
        )
    return np.array([CLASS_INDEX[n] for n in model_class_names], dtype=np.int64)


def boxes_from_det3d_sample(
    data_sample: Any,
    model_to_class_index: np.ndarray,
    global_SE3_lidar: SE3,
    score_threshold: float = 0.0,
) -> Boxes3D:
    """Global-frame boxes from one mmdet3d ``Det3DDataSample`` predicted in the LiDAR frame.

    mmdet3d (>= 1.0) LiDAR boxes are ``(x, y, z_bottom, dx, dy, dz, yaw[, vx, vy])``: ``dx`` is
    the length along the box's heading, ``dy`` its width, yaw counter-clockwise about +z from the
    LiDAR's x axis, velocity in the LiDAR frame. nuScenes sizes are ``[w, l, h]`` around the
    gravity centre, with the same yaw (as mmdet3d's own nuScenes export does).

    Args:
        data_sample: a ``Det3DDataSample`` with ``pred_instances_3d`` holding ``bboxes_3d``
            (``LiDARInstance3DBoxes``), ``scores_3d`` and ``labels_3d``.
        model_to_class_index: (K,) our class index of each model label (``class_index_map``).
        global_SE3_lidar: the keyframe LiDAR's pose in the global frame.
        score_threshold: boxes scoring below this are dropped.
    """
    pred = data_sample.pred_instances_3d
    bboxes = pred.bboxes_3d
    box_type = type(bboxes).__name__
    if box_type != "LiDARInstance3DBoxes":
        raise TypeError(f"expected LiDARInstance3DBoxes from a LiDAR detector, got {box_type}")
    tensor = bboxes.tensor.detach().cpu().double().numpy()
    centers_lidar = bboxes.gravity_center.detach().cpu().double().numpy()
    dims_lwh = tensor[:, 3:6]
    if tensor.shape[1] >= 9:
        velocity_lidar = tensor[:, 7:9]
    else:
        velocity_lidar = np.full((len(tensor), 2), np.nan)
    scores = pred.scores_3d.detach().cpu().double().numpy()
    labels = pred.labels_3d.detach().cpu().numpy().astype(np.int64)
    if len(labels) and (labels.min() < 0 or labels.max() >= len(model_to_class_index)):
        raise ValueError(
            f"model label {labels.max()} outside its {len(model_to_class_index)} class names"
        )
    boxes_lidar = Boxes3D(
        center_m=centers_lidar,
        size_wlh_m=dims_lwh[:, [1, 0, 2]],
        yaw_rad=tensor[:, 6],
        velocity_mps=velocity_lidar,
        label=model_to_class_index[labels],
        score=scores,
        frame="lidar",
    )
    boxes_lidar = boxes_lidar[boxes_lidar.score >= score_threshold]
    return boxes_lidar.transform(global_SE3_lidar, "global", from_frame="lidar")


def keyframe_global_SE3_lidar(frame: Frame) -> SE3:
    """The keyframe LiDAR's pose in the global frame (its own calibration when the sweep has one)."""
    ego_SE3_lidar = frame.lidar.ego_SE3_lidar or frame.lidar_calibration.ego_SE3_lidar
    return frame.global_SE3_ego.compose(ego_SE3_lidar)


def _matrix_list(se3: SE3) -> list[list[float]]:
    return se3.as_matrix().tolist()


def frame_data_info(frame: Frame, use_camera: bool) -> dict[str, Any]:
    """The mmdet3d (>= 1.0) nuScenes data-info dict of a keyframe, as ``NuScenesDataset`` builds it.

    Sweep and camera transforms follow mmdet3d's converter: ``lidar2sensor`` is the inverse of the
    sweep LiDAR's pose in the keyframe LiDAR frame (through the global frame, at each sweep's own
    ego pose), ``lidar2cam`` maps the keyframe LiDAR frame into the camera frame at the image's ego
    pose. Timestamps are seconds.
    """
    global_SE3_lidar = keyframe_global_SE3_lidar(frame)
    lidar_SE3_global = global_SE3_lidar.inverse()
    sweeps = []
    for sweep in frame.sweeps:
        ego_SE3_sweep_lidar = sweep.ego_SE3_lidar or frame.lidar_calibration.ego_SE3_lidar
        lidar_SE3_sweep = lidar_SE3_global.compose(sweep.global_SE3_ego).compose(
            ego_SE3_sweep_lidar
        )
        sweeps.append(
            {
                "lidar_points": {
                    "lidar_path": str(sweep.path),
                    "lidar2sensor": _matrix_list(lidar_SE3_sweep.inverse()),
                },
                "timestamp": sweep.timestamp_us / 1e6,
            }
        )
    info: dict[str, Any] = {
        "sample_idx": frame.index,
        "token": frame.token,
        "timestamp": frame.timestamp_us / 1e6,
        "lidar_points": {"lidar_path": str(frame.lidar.path), "num_pts_feats": 5},
        "lidar_sweeps": sweeps,
    }
    if use_camera:
        missing = [c for c in MMDET3D_CAMERA_ORDER if c not in frame.cameras]
        if missing:
            raise ValueError(f"sample {frame.token}: BEVFusion needs cameras {missing}")
        images = {}
        for channel in MMDET3D_CAMERA_ORDER:
            cam = frame.cameras[channel]
            camera_SE3_lidar = cam.global_SE3_camera.inverse().compose(global_SE3_lidar)
            images[channel] = {
                "img_path": str(cam.path),
                "cam2img": cam.calibration.intrinsic.tolist(),
                "lidar2cam": _matrix_list(camera_SE3_lidar),
                "timestamp": cam.timestamp_us / 1e6,
            }
        info["images"] = images
    return info


def _require_mmdet3d() -> None:
    try:
        importlib.import_module("mmengine")
        importlib.import_module("mmcv")
        importlib.import_module("mmdet3d")
    except ImportError as e:
        raise DetectorUnavailableError(f"{INSTALL_HINT} (import failed: {e})") from None


def _install_failing_module(module_name: str, functions: tuple[str, ...], message: str) -> None:
    """Stand in for a compiled op module that a code path imports but never calls here."""
    module = types.ModuleType(module_name)

    def _unavailable(*_args, **_kwargs):
        raise DetectorUnavailableError(message)

    for name in functions:
        setattr(module, name, _unavailable)
    sys.modules[module_name] = module


def _compiled(mmdet3d_root: Path, module_name: str) -> bool:
    """Whether the checkout holds a built extension for ``module_name`` (without importing it)."""
    *package, name = module_name.split(".")
    return any(mmdet3d_root.joinpath(*package).glob(f"{name}*.so"))


def _install_cpu_op_stand_ins(mmdet3d_root: Path) -> None:
    """Let a LiDAR-only BEVFusion import on a machine without the project's compiled ops.

    The project imports its ``bev_pool`` and voxelization extensions unconditionally. ``bev_pool``
    (camera branch only) has no CPU kernel; the project's CPU voxelization kernel indexes its voxel
    grid in the wrong axis order (``coor_to_voxelidx`` is allocated (z, y, x) but indexed
    (x, y, z)) and crashes, so on CPU ``cpu_voxelization`` replaces the layer. Neither extension
    is called on CPU; modules that fail loudly if they ever are stand in for them.
    """
    if not _compiled(mmdet3d_root, _BEV_POOL_EXT):
        _install_failing_module(
            _BEV_POOL_EXT,
            ("bev_pool_forward", "bev_pool_backward"),
            "BEVFusion's camera branch needs the CUDA bev_pool op (python "
            "projects/BEVFusion/setup.py develop on a CUDA machine); use a LiDAR-only config on CPU",
        )
    if not _compiled(mmdet3d_root, _VOXEL_EXT):
        _install_failing_module(
            _VOXEL_EXT,
            ("hard_voxelize", "dynamic_voxelize", "dynamic_point_to_voxel_forward",
             "dynamic_point_to_voxel_backward"),
            "BEVFusion's voxelization op is not compiled; on CPU the backend uses mmcv's",
        )  # fmt: skip


def cpu_voxelization(project_layer: Any) -> Any:
    """A CPU stand-in for the BEVFusion project's ``Voxelization`` layer, built on mmcv's op.

    Same hard voxelization (points taken in order; the first ``max_voxels`` voxels, at most
    ``max_num_points`` points each) from mmcv's CPU kernel, with its (z, y, x) voxel coordinates
    reordered to the (x, y, z) that the project's op returns and its sparse encoder expects.
    """
    import torch
    from mmcv.ops import Voxelization

    class CpuVoxelization(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mmcv_layer = Voxelization(
                voxel_size=list(project_layer.voxel_size),
                point_cloud_range=list(project_layer.point_cloud_range),
                max_num_points=project_layer.max_num_points,
                max_voxels=tuple(project_layer.max_voxels),
                deterministic=True,
            )

        def forward(self, points):
            self.mmcv_layer.train(self.training)
            out = self.mmcv_layer(points)
            if len(out) == 3:
                voxels, coors_zyx, num_points = out
                return voxels, coors_zyx[:, [2, 1, 0]].contiguous(), num_points
            return out[:, [2, 1, 0]].contiguous()

    return CpuVoxelization()


def _import_bevfusion_project(mmdet3d_root: Path, uses_camera: bool) -> None:
    root = str(mmdet3d_root.resolve())
    if root not in sys.path:
        sys.path.insert(0, root)
    try:
        importlib.import_module(_PROJECT_PACKAGE)
        return
    except ImportError as e:
        message = str(e)
    if ("bev_pool_ext" in message or "voxel_layer" in message) and not uses_camera:
        _install_cpu_op_stand_ins(mmdet3d_root)
        try:
            importlib.import_module(_PROJECT_PACKAGE)
            return
        except ImportError as e:
            message = str(e)
    raise DetectorUnavailableError(
        f"cannot import {_PROJECT_PACKAGE} from {mmdet3d_root}: {message}. Compile the project's "
        "ops in that checkout (GPU: python projects/BEVFusion/setup.py develop; CPU: README, "
        "section 'BEVFusion')"
    )


class BevfusionDetector(Detector):
    """BEVFusion inference on keyframes; boxes converted to the global frame at the edge."""

    name = "bevfusion"

    def __init__(self, config: BevfusionConfig | None = None) -> None:
        self.config = config = config or BevfusionConfig()
        if not config.mmdet3d_root or not config.config:
            raise DetectorUnavailableError(INSTALL_HINT)
        root = Path(config.mmdet3d_root)
        if not (root / "projects" / "BEVFusion").is_dir():
            raise DetectorUnavailableError(
                f"{root}: not an mmdetection3d checkout (no projects/BEVFusion); {INSTALL_HINT}"
            )
        config_path = Path(config.config)
        if not config_path.is_absolute() and not config_path.is_file():
            config_path = root / config_path
        if not config_path.is_file():
            raise DetectorUnavailableError(f"{config_path}: BEVFusion config not found")
        if config.checkpoint is None and not config.allow_random_weights:
            raise DetectorUnavailableError(
                "detector 'bevfusion' needs trained weights: pass detector_options "
                "checkpoint=<path to .pth> (no weights are downloaded)"
            )
        if config.checkpoint is not None and not Path(config.checkpoint).is_file():
            raise DetectorUnavailableError(f"{config.checkpoint}: BEVFusion checkpoint not found")
        _require_mmdet3d()

        import torch
        from mmengine.config import Config

        if config.device.startswith("cuda") and not torch.cuda.is_available():
            raise DetectorUnavailableError(
                "detector 'bevfusion': device 'cuda' asked for but torch sees no GPU; pass "
                "device=cpu with a LiDAR-only config"
            )
        cfg = Config.fromfile(str(config_path), import_custom_modules=False)
        self.uses_camera = cfg.model.get("view_transform") is not None
        if self.uses_camera and not config.device.startswith("cuda"):
            raise DetectorUnavailableError(
                f"{config_path}: the camera branch of BEVFusion needs CUDA (bev_pool); use "
                "device=cuda, or a LiDAR-only config on CPU"
            )
        _import_bevfusion_project(root, self.uses_camera)

        from mmdet3d.apis import init_model
        from mmengine.dataset import Compose

        self.model = init_model(cfg, config.checkpoint, device=config.device)
        if not config.device.startswith("cuda"):
            self.model.pts_voxel_layer = cpu_voxelization(self.model.pts_voxel_layer)
        class_names = (getattr(self.model, "dataset_meta", None) or {}).get("classes") or cfg.get(
            "class_names"
        )
        if not class_names:
            raise DetectorUnavailableError(f"{config_path}: no class_names in the config")
        self.model_to_class_index = class_index_map(list(class_names))
        pipeline = copy.deepcopy(cfg.test_dataloader.dataset.pipeline)
        for step in pipeline:
            if step.get("type") == "LoadPointsFromMultiSweeps":
                # Outside test mode the loader samples sweeps at random when there are more than
                # it uses; take the newest ones, deterministically, as its test mode does.
                step["test_mode"] = True
        self.pipeline = Compose(pipeline)
        self.meta = submission_meta(use_lidar=True, use_camera=self.uses_camera)
        from mmdet3d.structures import get_box_type

        self._box_type_3d, self._box_mode_3d = get_box_type("LiDAR")

    def detect_frames(self, frames: Sequence[Frame]) -> list[Boxes3D]:
        import torch
        from mmengine.dataset import pseudo_collate

        out: list[Boxes3D] = []
        step = self.config.batch_size
        for start in range(0, len(frames), step):
            batch = frames[start : start + step]
            data = []
            for frame in batch:
                info = frame_data_info(frame, self.uses_camera)
                info["box_type_3d"] = self._box_type_3d
                info["box_mode_3d"] = self._box_mode_3d
                data.append(self.pipeline(info))
            with torch.no_grad():
                samples = self.model.test_step(pseudo_collate(data))
            for frame, sample in zip(batch, samples, strict=True):
                out.append(
                    boxes_from_det3d_sample(
                        sample,
                        self.model_to_class_index,
                        keyframe_global_SE3_lidar(frame),
                        self.config.score_threshold,
                    )
                )
        return out
