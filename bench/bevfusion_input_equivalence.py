"""Are the bevfusion backend's model inputs those of mmdet3d v1.4.0's own nuScenes path?

mmdet3d's side, as a user of mmdetection3d runs it: its nuScenes info converter
(``tools/dataset_converters/nuscenes_converter.py``, then ``update_infos_to_v2.py``) on the
dataroot, then ``NuScenesDataset`` from the BEVFusion config's test dataloader, with the config's
test pipeline, on that info file. The backend's side: autolabel's reader on the same dataroot,
then ``detectors.bevfusion.ModelInputs`` (what ``BevfusionDetector`` feeds the model). Every input
the model reads is compared sample by sample: points (keyframe and sweeps, time lags in column
4), images, ``lidar2img``, ``cam2img``, ``lidar2cam``, ``cam2lidar``, ``img_aug_matrix``,
``lidar_aug_matrix``, and the poses the output boxes go back to the global frame with
(``ego2global``, the keyframe LiDAR in the global frame).

Two changes are applied to mmdet3d's side, both to match a deterministic test: the sweep loader
runs in test mode (the config leaves it in training mode, where it draws 9 of the 10 converted
sweeps at random) and, with ``--image-resize``, ``ImageAug3D`` resizes by that scale (the same
option the backend takes for non-nuScenes cameras).

``--info FILE`` compares against an existing v2 info file instead of running the converter (for
``nuscenes-mmdet3d-tests``, which has no tables and no point clouds): then only the image steps
run (images that exist), and the backend's side is built from that info file through
``autolabel.mmdet3d_info``.

Needs the OpenMMLab stack (README, "BEVFusion") and an mmdetection3d v1.4.0 checkout; the
converter's own code is loaded from that checkout, nothing of it is copied here. Example:

    python bench/bevfusion_input_equivalence.py --mmdet3d-root /tmp/mmdet3d \\
        --dataroot /tmp/bev/synth --version v1.0-mini --json /tmp/bev/eq_synth.json
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autolabel.clip import CameraImage, Frame, LidarSweep  # noqa: E402
from autolabel.sensors import LidarCalibration  # noqa: E402
from detectors.bevfusion import (  # noqa: E402
    MMDET3D_CAMERA_ORDER,
    ModelInputs,
    frame_data_info,
    keyframe_global_SE3_lidar,
    load_bevfusion_config,
)

LIDAR_CAM_CONFIG = "projects/BEVFusion/configs/bevfusion_lidar-cam_voxel0075_second_secfpn_8xb4-cyclic-20e_nus-3d.py"
MATRIX_KEYS = ("lidar2img", "cam2img", "lidar2cam", "cam2lidar", "img_aug_matrix", "ori_cam2img")


def _load_by_path(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def _cwd(path: Path):
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def convert_infos(mmdet3d_root: Path, dataroot: Path, version: str, work: Path) -> Path:
    """mmdet3d's v2 info file of every sample of the dataroot, written by its own converters.

    ``create_nuscenes_infos`` only adds an assert on the three official version names and the
    official train/val scene lists around ``_fill_trainval_infos``; here every scene is taken
    (as val). ``update_nuscenes_infos`` reads the tables from ``./data/nuscenes`` (hard-coded),
    so it runs in a folder where that links to the dataroot.
    """
    import mmengine
    from nuscenes.nuscenes import NuScenes

    converters = mmdet3d_root / "tools" / "dataset_converters"
    nus_conv = _load_by_path("mmdet3d_nuscenes_converter", converters / "nuscenes_converter.py")
    to_v2 = _load_by_path("mmdet3d_update_infos_to_v2", converters / "update_infos_to_v2.py")
    nusc = NuScenes(version=version, dataroot=str(dataroot), verbose=False)
    _, infos = nus_conv._fill_trainval_infos(nusc, set(), set(), test=False, max_sweeps=10)
    work.mkdir(parents=True, exist_ok=True)
    v1 = work / "nuscenes_infos_val.pkl"
    mmengine.dump({"infos": infos, "metadata": {"version": version}}, str(v1))
    (work / "data").mkdir(exist_ok=True)
    link = work / "data" / "nuscenes"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(dataroot.resolve())
    out_dir = work / "v2"
    out_dir.mkdir(exist_ok=True)
    with _cwd(work):
        to_v2.update_pkl_infos("nuscenes", out_dir=str(out_dir), pkl_path=str(v1))
    return out_dir / v1.name


def mmdet3d_pipeline(cfg, image_resize: float | None) -> list[dict]:
    """The config's test pipeline with the two deterministic-test changes (module docstring)."""
    steps = copy.deepcopy(cfg.test_dataloader.dataset.pipeline)
    for step in steps:
        if step["type"] == "LoadPointsFromMultiSweeps":
            step["test_mode"] = True
        if step["type"] == "ImageAug3D" and image_resize is not None:
            step["resize_lim"] = [image_resize, image_resize]
    return steps


def mmdet3d_dataset(cfg, dataroot: Path, info_file: Path, pipeline: list[dict]):
    from mmdet3d.registry import DATASETS

    ds_cfg = copy.deepcopy(cfg.test_dataloader.dataset)
    ds_cfg.update(data_root=str(dataroot) + "/", ann_file=str(info_file), pipeline=pipeline)
    return DATASETS.build(ds_cfg)


def our_frames(dataroot: Path, version: str) -> dict[str, Frame]:
    """Every keyframe of the dataroot as autolabel's reader gives it (default ``max_sweeps``)."""
    from nuscenes.nuscenes import NuScenes

    from autolabel.config import ReadOptions
    from autolabel.nuscenes_reader import read_clip

    nusc = NuScenes(version=version, dataroot=str(dataroot), verbose=False)
    frames = {}
    for scene in nusc.scene:
        clip = read_clip(
            nusc, scene["name"], max_sweeps=ReadOptions().max_sweeps, with_ground_truth=False
        )
        frames.update({f.token: f for f in clip.frames})
    return frames


def _np(value) -> np.ndarray:
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    elif hasattr(value, "tensor"):
        value = value.tensor.detach().cpu().numpy()
    return np.asarray(value, dtype=np.float64)


class Table:
    """Per input: the largest absolute difference over samples, and how many samples had it."""

    def __init__(self) -> None:
        self.rows: dict[str, dict] = {}

    def add(self, name: str, ref, ours, note: str = "", relative: bool = False) -> None:
        """One sample of input ``name``; ``relative``: differences over max(1, |mmdet3d's|)."""
        row = self.rows.setdefault(name, {"max_abs_diff": 0.0, "samples": 0, "notes": []})
        a, b = _np(ref), _np(ours)
        if a.shape != b.shape:
            row["max_abs_diff"] = float("inf")
            row["notes"].append(f"shape {a.shape} vs ours {b.shape} {note}".strip())
        elif a.size:
            diff = np.abs(a - b) / (np.maximum(np.abs(a), 1.0) if relative else 1.0)
            row["max_abs_diff"] = max(row["max_abs_diff"], float(diff.max()))
        row["samples"] += 1

    def note(self, name: str, text: str) -> None:
        self.rows.setdefault(name, {"max_abs_diff": 0.0, "samples": 0, "notes": []})[
            "notes"
        ].append(text)

    def print(self, tol: float) -> bool:
        ok = True
        print(f"{'input':<26} {'max abs diff':>14} {'samples':>8}  verdict")
        for name, row in self.rows.items():
            good = row["max_abs_diff"] <= tol and row["samples"] > 0
            ok &= good
            verdict = "equal" if good else "DIFFERENT"
            print(f"{name:<26} {row['max_abs_diff']:>14.3g} {row['samples']:>8}  {verdict}")
            for text in sorted(set(row["notes"]))[:5]:
                print(f"{'':<28}{text}")
        return ok


def compare_sample(table: Table, ref: dict, ours: dict, ref_info: dict, frame: Frame) -> None:
    """Every model input of one sample, mmdet3d's (``ref``) against the backend's (``ours``)."""
    ref_in, our_in = ref["inputs"], ours["inputs"]
    table.add("points", ref_in["points"], our_in["points"])
    if "points" in ref_in:
        lags = np.unique(np.round(_np(ref_in["points"])[:, 4], 4))
        table.note("points", f"time lags (s) of sample {frame.token[:8]}: {lags.tolist()}")
    if "img" in ref_in or "img" in our_in:
        table.add("img (pixels 0-255)", ref_in["img"], our_in["img"])
    ref_meta, our_meta = ref["data_samples"].metainfo, ours["data_samples"].metainfo
    for key in MATRIX_KEYS:
        if key in ref_meta or key in our_meta:
            table.add(key, ref_meta[key], our_meta[key])
    table.add("num_pts_feats", ref_meta["num_pts_feats"], our_meta["num_pts_feats"])
    # Not packed by the test pipeline; the model then uses the identity for both.
    table.add(
        "lidar_aug_matrix",
        ref_meta.get("lidar_aug_matrix", np.eye(4)),
        our_meta.get("lidar_aug_matrix", np.eye(4)),
    )
    for key in ("img_path", "lidar_path"):
        if key in ref_meta:
            a = [str(Path(p).resolve()) for p in np.atleast_1d(ref_meta[key])]
            b = [str(Path(p).resolve()) for p in np.atleast_1d(our_meta[key])]
            if len(a) != len(b):
                table.note(f"{key} (files differ)", f"{len(a)} files vs ours {len(b)}")
                continue
            same = [float(x != y) for x, y in zip(a, b, strict=True)]
            table.add(f"{key} (files differ)", [0.0] * len(a), same)
    # mmdet3d's info keeps poses in float32: a global translation of 2 km only to ~1e-4 m, so
    # these two (which the model does not read) are compared relative to their size.
    table.add(
        "ego2global (relative)",
        ref_info["ego2global"],
        frame.global_SE3_ego.as_matrix(),
        relative=True,
    )
    ref_global_lidar = np.asarray(ref_info["ego2global"]) @ np.asarray(
        ref_info["lidar_points"]["lidar2ego"]
    )
    table.add(
        "global_SE3_lidar (relative)",
        ref_global_lidar,
        keyframe_global_SE3_lidar(frame).as_matrix(),
        relative=True,
    )


def run_converted(args, cfg, config_path) -> Table:
    work = Path(args.work)
    t0 = time.perf_counter()
    info_file = convert_infos(Path(args.mmdet3d_root), Path(args.dataroot), args.version, work)
    print(f"mmdet3d infos: {info_file} ({time.perf_counter() - t0:.1f} s)")
    dataset = mmdet3d_dataset(
        cfg, Path(args.dataroot), info_file, mmdet3d_pipeline(cfg, args.image_resize)
    )
    frames = our_frames(Path(args.dataroot), args.version)
    inputs = ModelInputs(cfg, config_path, args.image_resize)
    table = Table()
    n = len(dataset) if args.samples is None else min(args.samples, len(dataset))
    for i in range(n):
        ref_info = dataset.get_data_info(i)
        frame = frames[ref_info["token"]]
        ref = dataset[i]
        try:
            ours = inputs(frame)
        except ValueError as e:
            table.note("backend refused", str(e))
            table.rows["backend refused"]["max_abs_diff"] = float("inf")
            table.rows["backend refused"]["samples"] += 1
            continue
        compare_sample(table, ref, ours, ref_info, frame)
    return table


def frame_from_info(sample, info_dir: Path, data_prefix: dict) -> Frame:
    """A keyframe built from an info sample (no tables): every camera at the sample's ego pose
    (info files keep one ego pose per sample)."""
    cameras = {}
    for channel, calib in sample.cameras.items():
        path = info_dir / data_prefix.get(channel, "") / sample.image_paths[channel]
        cameras[channel] = CameraImage(path, calib, sample.global_SE3_ego, sample.timestamp_us)
    lidar_path = info_dir / data_prefix.get("pts", "") / sample.lidar_path
    return Frame(
        token=sample.token,
        index=0,
        timestamp_us=sample.timestamp_us,
        time_s=0.0,
        global_SE3_ego=sample.global_SE3_ego,
        lidar=LidarSweep(lidar_path, sample.global_SE3_ego, sample.timestamp_us),
        lidar_calibration=LidarCalibration("LIDAR_TOP", sample.ego_SE3_lidar, np.zeros(1)),
        cameras=cameras,
    )


def run_info_file(args, cfg) -> Table:
    """Against an existing v2 info file: the image steps on the images that exist."""
    from mmdet3d.registry import TRANSFORMS
    from mmengine.dataset import Compose

    from autolabel.mmdet3d_info import read_info_samples

    info_file, root = Path(args.info), Path(args.dataroot)
    steps = [
        s
        for s in mmdet3d_pipeline(cfg, args.image_resize)
        if s["type"] in ("BEVLoadMultiViewImageFromFiles", "ImageAug3D")
    ]
    pipeline = Compose([TRANSFORMS.build(s) for s in steps])
    data_prefix = dict(cfg.test_dataloader.dataset.data_prefix)
    dataset = mmdet3d_dataset(cfg, root, info_file, [])
    table = Table()
    samples = {s.token: s for s in read_info_samples(info_file)}
    n = len(dataset) if args.samples is None else min(args.samples, len(dataset))
    for i in range(n):
        ref_info = dataset.get_data_info(i)
        frame = frame_from_info(samples[ref_info["token"]], root, data_prefix)
        our_info = frame_data_info(frame, use_camera=True)
        present = [
            c for c in MMDET3D_CAMERA_ORDER if Path(ref_info["images"][c]["img_path"]).is_file()
        ]
        table.note("images", f"sample {frame.token[:8]}: images present {present}")
        if args.stand_in_image:
            # Pixels from one file for both sides: what is compared is the camera matrices.
            for info in (ref_info, our_info):
                for c in MMDET3D_CAMERA_ORDER:
                    if c not in present:
                        info["images"][c]["img_path"] = str(args.stand_in_image)
            present = list(MMDET3D_CAMERA_ORDER)
            table.note("images", f"missing images read from {args.stand_in_image} on both sides")
        if not present:
            continue
        ref_info["images"] = {c: ref_info["images"][c] for c in present}
        our_info["images"] = {c: our_info["images"][c] for c in present}
        ref = pipeline(copy.deepcopy(ref_info))
        ours = pipeline(our_info)
        table.add("img (pixels 0-255)", np.stack(ref["img"]), np.stack(ours["img"]))
        for key in MATRIX_KEYS:
            table.add(key, ref[key], ours[key])
        ref_l2c, our_l2c = np.asarray(ref["lidar2cam"]), np.asarray(ours["lidar2cam"])
        table.add("lidar2cam rotation", ref_l2c[:, :3, :3], our_l2c[:, :3, :3])
        table.add("lidar2cam translation", ref_l2c[:, :3, 3], our_l2c[:, :3, 3])
        table.add(
            "ego2global (relative)",
            ref_info["ego2global"],
            frame.global_SE3_ego.as_matrix(),
            relative=True,
        )
    table.note("points", "the data set holds no point clouds")
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mmdet3d-root", required=True, help="mmdetection3d v1.4.0 checkout")
    parser.add_argument("--dataroot", required=True)
    parser.add_argument("--version", help="dataset version (tables folder)")
    parser.add_argument("--config", default=LIDAR_CAM_CONFIG)
    parser.add_argument("--info", help="an existing mmdet3d v2 info file (no converter run)")
    parser.add_argument("--image-resize", type=float, default=None)
    parser.add_argument(
        "--stand-in-image",
        help="with --info: read this image for every missing image file, on both sides",
    )
    parser.add_argument("--samples", type=int, default=None, help="compare the first N samples")
    parser.add_argument("--work", default="/tmp/bevfusion_equivalence")
    parser.add_argument("--tol", type=float, default=1e-5)
    parser.add_argument("--json", help="write the table here")
    args = parser.parse_args(argv)
    if args.info is None and args.version is None:
        parser.error("--version is needed unless --info is given")

    cfg, config_path = load_bevfusion_config(Path(args.mmdet3d_root), args.config)
    from mmengine.registry import init_default_scope

    init_default_scope("mmdet3d")
    t0 = time.perf_counter()
    table = run_info_file(args, cfg) if args.info else run_converted(args, cfg, config_path)
    print(f"dataroot {args.dataroot}, config {config_path.name}, image_resize {args.image_resize}")
    ok = table.print(args.tol)
    print(
        f"{'all inputs equal' if ok else 'INPUTS DIFFER'} to {args.tol:g} ({time.perf_counter() - t0:.1f} s)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(table.rows, indent=1, default=float))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
