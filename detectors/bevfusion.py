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

Where the project's ``bev_pool`` extension is not compiled (it is CUDA-only), ``detectors.bev_pool``
stands in for it (same functions, plain PyTorch), so LiDAR + camera fusion also runs on CPU.

What the config does not say is read from the data or refused before the model runs: each image's
size is read from its file, and a camera whose test-time crop (the config's ``ImageAug3D``) would
leave out its principal point or reach past the image is refused, naming the file
(``image_window``); the number of earlier sweeps the model loads is ``earlier_sweeps``, which the
run checks against ``read.max_sweeps``.

Nothing here imports torch or the OpenMMLab stack at module import time.
"""

from __future__ import annotations

import copy
import importlib
import math
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
        device: torch device, ``cuda``, ``cuda:1`` or ``cpu`` (camera configs use the plain
            PyTorch ``bev_pool`` where the CUDA one is not compiled).
        batch_size: keyframes per forward pass.
        score_threshold: drop boxes scoring below this.
        allow_random_weights: run without a checkpoint (random weights): for plumbing and speed
            checks only; the boxes are meaningless.
        image_resize: the test-time image scale, in place of the mean of the config's
            ``ImageAug3D.resize_lim`` (set for nuScenes' 1600x900 images); for cameras of another
            size, so that the crop keeps each principal point (see ``image_window``).
    """

    mmdet3d_root: str | None = None
    config: str | None = None
    checkpoint: str | None = None
    device: str = "cuda"
    batch_size: int = 1
    score_threshold: float = 0.0
    allow_random_weights: bool = False
    image_resize: float | None = None

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"batch_size: must be >= 1, got {self.batch_size}")
        if self.image_resize is not None and not 0.0 < self.image_resize <= 10.0:
            raise ValueError(f"image_resize: must be in (0, 10], got {self.image_resize}")


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
    pose. ``ego2global`` and ``lidar2ego`` are the keyframe LiDAR's (the model does not read them;
    the output boxes go back to the global frame through them). Timestamps are seconds.
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
    ego_SE3_lidar = frame.lidar.ego_SE3_lidar or frame.lidar_calibration.ego_SE3_lidar
    info: dict[str, Any] = {
        "sample_idx": frame.index,
        "token": frame.token,
        "timestamp": frame.timestamp_us / 1e6,
        "ego2global": _matrix_list(frame.global_SE3_ego),
        # Det3DDataset.parse_data_info copies these two to the top level.
        "lidar_path": str(frame.lidar.path),
        "num_pts_feats": 5,
        "lidar_points": {
            "lidar_path": str(frame.lidar.path),
            "num_pts_feats": 5,
            "lidar2ego": _matrix_list(ego_SE3_lidar),
        },
    }
    if sweeps:
        # mmdet3d's info converter drops an empty sweep list (update_infos_to_v2's
        # clear_data_info_unused_keys); its loader then pads with copies of the keyframe sweep
        # (pad_empty_sweeps), which is what the model saw for a log's first keyframe.
        info["lidar_sweeps"] = sweeps
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


@dataclass(frozen=True)
class ImageWindow:
    """The part of an image that the config's test-time ``ImageAug3D`` shows the model.

    Attributes:
        resize: scale applied to the image before cropping.
        crop_px: (left, top, right, bottom) of the crop in the resized image, pixels; it may reach
            past the resized image, where the model sees black.
        resized_wh: (width, height) of the resized image, pixels.
    """

    resize: float
    crop_px: tuple[int, int, int, int]
    resized_wh: tuple[int, int]

    def original_px(self) -> tuple[float, float, float, float]:
        """The crop in the original image's pixels (left, top, right, bottom)."""
        left, top, right, bottom = self.crop_px
        return (left / self.resize, top / self.resize, right / self.resize, bottom / self.resize)


def image_window(image_wh: tuple[int, int], image_aug: dict[str, Any]) -> ImageWindow:
    """What ``ImageAug3D`` (test mode: no flip, no rotation) keeps of a ``W x H`` image.

    Mirrors its ``sample_augmentation``: resize by the mean of ``resize_lim``, then crop
    ``final_dim`` (H, W) centred horizontally and ending ``mean(bot_pct_lim)`` of the height
    above the bottom. ``image_wh`` is the size the loader gives the pipeline: the largest width
    and height over a keyframe's images (smaller ones are zero-padded at the right and bottom).
    """
    width, height = image_wh
    final_h, final_w = (int(v) for v in image_aug["final_dim"])
    resize = float(np.mean(image_aug["resize_lim"]))
    new_w, new_h = int(width * resize), int(height * resize)
    top = int((1 - float(np.mean(image_aug["bot_pct_lim"]))) * new_h) - final_h
    left = int(max(0, new_w - final_w) / 2)
    return ImageWindow(resize, (left, top, left + final_w, top + final_h), (new_w, new_h))


def image_window_problem(
    window: ImageWindow, intrinsic: np.ndarray, image_aug: dict[str, Any]
) -> str | None:
    """Why ``window`` would feed the model a misleading view of one camera, or None.

    Refused: a crop reaching past the resized image (the model sees black bands it never saw
    in training) and a crop that leaves out the principal point (on nuScenes it sits inside
    the crop, about a quarter below its top: the horizon and everything standing on it).
    """
    left, top, right, bottom = window.crop_px
    new_w, new_h = window.resized_wh
    final_h, final_w = (int(v) for v in image_aug["final_dim"])
    shown = "x {:.0f}-{:.0f}, y {:.0f}-{:.0f}".format(*np.take(window.original_px(), [0, 2, 1, 3]))
    if left < 0 or top < 0 or right > new_w or bottom > new_h:
        return (
            f"resized by {window.resize:g} to {new_w}x{new_h} it is smaller than the model's "
            f"{final_w}x{final_h} input (crop {shown} in original pixels)"
        )
    cx, cy = float(intrinsic[0, 2]) * window.resize, float(intrinsic[1, 2]) * window.resize
    if not (left <= cx < right and top <= cy < bottom):
        return (
            f"the crop ({shown} in original pixels) leaves out its principal point "
            f"({intrinsic[0, 2]:.0f}, {intrinsic[1, 2]:.0f})"
        )
    return None


def _image_size(path: Path) -> tuple[int, int]:
    from PIL import Image

    try:
        with Image.open(path) as im:
            return im.size
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: cannot read the image size ({e})") from None


def check_image_windows(frame: Frame, image_aug: dict[str, Any]) -> ImageWindow:
    """The keyframe's test-time image window; raises ``ValueError`` naming the image when it
    would mislead the model (``image_window_problem``).

    Image sizes are read from the files (not from the dataset's tables), as the loader does.
    """
    sizes = {c: _image_size(frame.cameras[c].path) for c in MMDET3D_CAMERA_ORDER}
    padded = (max(w for w, _ in sizes.values()), max(h for _, h in sizes.values()))
    window = image_window(padded, image_aug)
    final_h, final_w = (int(v) for v in image_aug["final_dim"])
    for channel in MMDET3D_CAMERA_ORDER:
        cam = frame.cameras[channel]
        problem = image_window_problem(window, cam.calibration.intrinsic, image_aug)
        if problem:
            full_width = max(final_w / padded[0], final_h / padded[1])
            raise ValueError(
                f"{cam.path}: BEVFusion's test-time image crop does not fit this "
                f"{sizes[channel][0]}x{sizes[channel][1]} {channel} image: {problem}. The "
                f"config's ImageAug3D resize_lim {list(image_aug['resize_lim'])} was set for "
                f"nuScenes' 1600x900 cameras; pass detector_options image_resize=<scale> for "
                f"these (e.g. {math.ceil(full_width * 1000) / 1000:g} shows the full width)"
            )
    return window


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
    """Let BEVFusion import and run on a machine without the project's compiled ops.

    The project imports its ``bev_pool`` and voxelization extensions unconditionally.
    ``bev_pool`` (camera branch) has no CPU kernel: ``detectors.bev_pool`` implements the
    extension's two functions in plain PyTorch and stands in for it, under the project's own
    Python wrapper. The project's CPU voxelization kernel indexes its voxel grid in the wrong
    axis order (``coor_to_voxelidx`` is allocated (z, y, x) but indexed (x, y, z)) and crashes,
    so on CPU ``cpu_voxelization`` replaces the layer and the extension is never called; a module
    that fails loudly if it ever is stands in for it.
    """
    if not _compiled(mmdet3d_root, _BEV_POOL_EXT):
        sys.modules[_BEV_POOL_EXT] = importlib.import_module("detectors.bev_pool")
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


def _import_bevfusion_project(mmdet3d_root: Path) -> None:
    root = str(mmdet3d_root.resolve())
    if root not in sys.path:
        sys.path.insert(0, root)
    try:
        importlib.import_module(_PROJECT_PACKAGE)
        return
    except ImportError as e:
        message = str(e)
    if "bev_pool_ext" in message or "voxel_layer" in message:
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


def _pipeline_step(pipeline: list, name: str) -> dict[str, Any] | None:
    steps = [step for step in pipeline if step.get("type") == name]
    if len(steps) > 1:
        raise DetectorUnavailableError(
            f"the test pipeline has {len(steps)} {name} steps; expected one"
        )
    return steps[0] if steps else None


def inference_pipeline(
    cfg: Any, config_path: Path, uses_camera: bool, image_resize: float | None
) -> list:
    """The config's test pipeline as the backend runs it, checked against what it feeds.

    Sweeps are taken newest first, deterministically (the loader's test mode); with
    ``image_resize`` the ``ImageAug3D`` step resizes by it. Raises ``DetectorUnavailableError``
    naming the step and key when the pipeline expects what the backend cannot give: LiDAR files
    of other than 5 float32 columns (nuScenes' ``.pcd.bin``, which the reader checks), or a camera
    config whose image step is not a test-mode ``ImageAug3D`` matching the view transform's
    ``image_size``.
    """
    pipeline = copy.deepcopy(cfg.test_dataloader.dataset.pipeline)
    for name in ("LoadPointsFromFile", "LoadPointsFromMultiSweeps"):
        step = _pipeline_step(pipeline, name)
        if step is not None and int(step.get("load_dim", 6)) != 5:
            raise DetectorUnavailableError(
                f"{config_path}: {name}.load_dim is {step.get('load_dim', 6)}; the backend feeds "
                "nuScenes LiDAR files of 5 float32 columns (x, y, z, intensity, ring)"
            )
    sweeps = _pipeline_step(pipeline, "LoadPointsFromMultiSweeps")
    if sweeps is not None:
        # Outside test mode the loader samples sweeps at random when there are more than it
        # uses; take the newest ones, deterministically, as its test mode does.
        sweeps["test_mode"] = True
    if uses_camera:
        aug = _pipeline_step(pipeline, "ImageAug3D")
        if aug is None or aug.get("is_train") or aug.get("rand_flip"):
            raise DetectorUnavailableError(
                f"{config_path}: the camera test pipeline needs one ImageAug3D step with "
                f"is_train=False and rand_flip=False (got {aug})"
            )
        view_size = list(cfg.model.view_transform.get("image_size", []))
        if list(aug["final_dim"]) != view_size:
            raise DetectorUnavailableError(
                f"{config_path}: ImageAug3D.final_dim {list(aug['final_dim'])} differs from "
                f"model.view_transform.image_size {view_size}"
            )
        if image_resize is not None:
            aug["resize_lim"] = [image_resize, image_resize]
    return pipeline


class ModelInputs:
    """Keyframes through a BEVFusion config's test pipeline: exactly what the backend feeds the
    model (``bench/bevfusion_input_equivalence.py`` compares it with mmdet3d's own path).

    Needs mmdet3d and the BEVFusion project imported (``load_bevfusion_project``): the pipeline's
    image steps are registered by the project.
    """

    def __init__(self, cfg: Any, config_path: Path, image_resize: float | None = None) -> None:
        from mmdet3d.registry import TRANSFORMS
        from mmdet3d.structures import get_box_type
        from mmengine.dataset import Compose

        self.uses_camera = cfg.model.get("view_transform") is not None
        steps = inference_pipeline(cfg, config_path, self.uses_camera, image_resize)
        self.image_aug = _pipeline_step(steps, "ImageAug3D") if self.uses_camera else None
        sweeps = _pipeline_step(steps, "LoadPointsFromMultiSweeps")
        #: Sweeps before the keyframe's own that the model loads.
        self.earlier_sweeps = int(sweeps.get("sweeps_num", 10)) if sweeps is not None else 0
        self.pipeline = Compose([TRANSFORMS.build(step) for step in steps])
        self._box_type_3d, self._box_mode_3d = get_box_type("LiDAR")

    def __call__(self, frame: Frame) -> dict[str, Any]:
        """One keyframe's packed ``inputs`` (points, images) and ``data_samples`` (camera
        matrices in their metainfo).

        Raises:
            ValueError: a camera image whose test-time crop would mislead the model, naming it.
        """
        if self.image_aug is not None:
            check_image_windows(frame, self.image_aug)
        info = frame_data_info(frame, self.uses_camera)
        info["box_type_3d"] = self._box_type_3d
        info["box_mode_3d"] = self._box_mode_3d
        return self.pipeline(info)


def bevfusion_config_path(mmdet3d_root: Path, config: str | Path) -> Path:
    """The config file (``config`` relative to the checkout unless it exists as given).

    Raises:
        DetectorUnavailableError: not an mmdetection3d checkout, or no such config.
    """
    if not (mmdet3d_root / "projects" / "BEVFusion").is_dir():
        raise DetectorUnavailableError(
            f"{mmdet3d_root}: not an mmdetection3d checkout (no projects/BEVFusion); {INSTALL_HINT}"
        )
    config_path = Path(config)
    if not config_path.is_absolute() and not config_path.is_file():
        config_path = mmdet3d_root / config_path
    if not config_path.is_file():
        raise DetectorUnavailableError(f"{config_path}: BEVFusion config not found")
    return config_path


def load_bevfusion_config(mmdet3d_root: Path, config: str | Path) -> tuple[Any, Path]:
    """The BEVFusion config (``config`` relative to the checkout unless it exists as given),
    with every ``Pretrained`` download removed; imports mmdet3d and the project (with the plain
    PyTorch stand-ins for ops that were not compiled).

    Raises:
        DetectorUnavailableError: no checkout, no config, or the stack does not import.
    """
    config_path = bevfusion_config_path(mmdet3d_root, config)
    _require_mmdet3d()
    from mmengine.config import Config

    cfg = Config.fromfile(str(config_path), import_custom_modules=False)
    _drop_pretrained_downloads(cfg.model)
    _import_bevfusion_project(mmdet3d_root)
    return cfg, config_path


def _drop_pretrained_downloads(model_cfg: Any) -> None:
    """Remove ``init_cfg=dict(type='Pretrained', checkpoint=<URL or file>)`` from every module of
    the model config: building the model would fetch them (the camera backbone's ImageNet Swin
    weights, from GitHub) before the user's checkpoint replaces every weight anyway; without a
    checkpoint the modules keep their own random initialisation."""
    if isinstance(model_cfg, dict):
        init_cfg = model_cfg.get("init_cfg")
        if isinstance(init_cfg, dict) and init_cfg.get("type") == "Pretrained":
            model_cfg["init_cfg"] = None
        for value in model_cfg.values():
            _drop_pretrained_downloads(value)
    elif isinstance(model_cfg, (list, tuple)):
        for value in model_cfg:
            _drop_pretrained_downloads(value)


class BevfusionDetector(Detector):
    """BEVFusion inference on keyframes; boxes converted to the global frame at the edge."""

    name = "bevfusion"

    def __init__(self, config: BevfusionConfig | None = None) -> None:
        self.config = config = config or BevfusionConfig()
        if not config.mmdet3d_root or not config.config:
            raise DetectorUnavailableError(INSTALL_HINT)
        bevfusion_config_path(Path(config.mmdet3d_root), config.config)
        if config.checkpoint is None and not config.allow_random_weights:
            raise DetectorUnavailableError(
                "detector 'bevfusion' needs trained weights: pass detector_options "
                "checkpoint=<path to .pth> (no weights are downloaded)"
            )
        if config.checkpoint is not None and not Path(config.checkpoint).is_file():
            raise DetectorUnavailableError(f"{config.checkpoint}: BEVFusion checkpoint not found")
        _require_mmdet3d()
        import torch

        if config.device.startswith("cuda") and not torch.cuda.is_available():
            raise DetectorUnavailableError(
                "detector 'bevfusion': device 'cuda' asked for but torch sees no GPU; pass "
                "device=cpu"
            )
        cfg, config_path = load_bevfusion_config(Path(config.mmdet3d_root), config.config)
        self.inputs = ModelInputs(cfg, config_path, config.image_resize)
        self.uses_camera = self.inputs.uses_camera
        self.earlier_sweeps = self.inputs.earlier_sweeps

        from mmdet3d.apis import init_model

        self.model = init_model(cfg, config.checkpoint, device=config.device)
        if not config.device.startswith("cuda"):
            self.model.pts_voxel_layer = cpu_voxelization(self.model.pts_voxel_layer)
        class_names = (getattr(self.model, "dataset_meta", None) or {}).get("classes") or cfg.get(
            "class_names"
        )
        if not class_names:
            raise DetectorUnavailableError(f"{config_path}: no class_names in the config")
        self.model_to_class_index = class_index_map(list(class_names))
        self.meta = submission_meta(use_lidar=True, use_camera=self.uses_camera)

    def detect_frames(self, frames: Sequence[Frame]) -> list[Boxes3D]:
        import torch
        from mmengine.dataset import pseudo_collate

        out: list[Boxes3D] = []
        step = self.config.batch_size
        for start in range(0, len(frames), step):
            batch = frames[start : start + step]
            data = [self.inputs(frame) for frame in batch]
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
