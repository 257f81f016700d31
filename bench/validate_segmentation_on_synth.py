"""Validate the LiDAR-seeded segmenter and its score on synthetic nuScenes renders.

The synthetic generator (``autolabel.synth``) ray-casts camera images and LiDAR sweeps of 3D
scenes and saves each keyframe image's exact visible-pixel id buffer under ``synth_gt/``. This
script, for every keyframe camera image, prompts the segmenter the way the pipeline does:

* projected 2D box: the object's 3D box at the image's timestamp, projected with near-plane
  clipping (``calib.projection.box_2d_from_corners``) and clipped to the image;
* seeds: the keyframe LiDAR sweep's points inside the object's sample_annotation box (at the
  LiDAR's timestamp), moved to the camera at its own timestamp and projected;
* depth: the box centre's depth in the camera;

and compares each mask with the true visible mask. It prints the mean IoU, the share of masks
with IoU > 0.8, and the Pearson / Spearman correlation and mean absolute error between the
score and the true IoU (the score's weights were fitted on ``validation_scenes``, a different
renderer, so this is an out-of-distribution check of the calibration).

    python bench/validate_segmentation_on_synth.py [--dataroot DIR] [--scenes 1 --seconds 2]

Without ``--dataroot`` a small dataset is generated into a temporary folder first.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np
from scipy.stats import pearsonr, spearmanr


def collect(dataroot: Path, version: str, segmenter_name: str) -> dict[str, np.ndarray]:
    """Per object of every keyframe camera image: true IoU, score, visible pixels."""
    from nuscenes.nuscenes import NuScenes
    from nuscenes.utils.data_classes import LidarPointCloud

    from autolabel.boxes import Boxes3D
    from autolabel.segmentation import get_segmenter
    from autolabel.synth.ground_truth_files import load_image_ground_truth
    from calib.projection import box_2d_from_corners, clip_boxes_2d, project_points
    from calib.se3 import SE3

    nusc = NuScenes(version, str(dataroot), verbose=False)
    segmenter = get_segmenter(segmenter_name)

    def global_SE3_sensor(sample_data: dict) -> SE3:
        calibrated = nusc.get("calibrated_sensor", sample_data["calibrated_sensor_token"])
        pose = nusc.get("ego_pose", sample_data["ego_pose_token"])
        global_SE3_ego = SE3.from_quat_wxyz(pose["rotation"], pose["translation"])
        return global_SE3_ego.compose(
            SE3.from_quat_wxyz(calibrated["rotation"], calibrated["translation"])
        )

    def boxes_global(records: list[dict]) -> Boxes3D:
        yaw = [SE3.from_quat_wxyz(r["rotation"], np.zeros(3)).yaw_rad for r in records]
        return Boxes3D(
            center_m=np.array([r["translation"] for r in records]).reshape(-1, 3),
            size_wlh_m=np.array([r["size"] for r in records]).reshape(-1, 3),
            yaw_rad=np.array(yaw),
        )

    ious, scores, visible_px, classes, n_seeds, where = [], [], [], [], [], []
    seconds, images = 0.0, 0
    for sample in nusc.sample:
        lidar = nusc.get("sample_data", sample["data"]["LIDAR_TOP"])
        points_lidar = LidarPointCloud.from_file(str(dataroot / lidar["filename"])).points[:3].T
        points_global = global_SE3_sensor(lidar).transform_points(points_lidar)
        for channel, token in sorted(sample["data"].items()):
            if not channel.startswith("CAM"):
                continue
            camera = nusc.get("sample_data", token)
            truth = load_image_ground_truth(dataroot, channel, token)
            objects = [o for o in truth.index["objects"] if o["annotation_token"] is not None]
            if not objects:
                continue
            calibrated = nusc.get("calibrated_sensor", camera["calibrated_sensor_token"])
            intrinsic = np.array(calibrated["camera_intrinsic"])
            camera_SE3_global = global_SE3_sensor(camera).inverse()
            width_px, height_px = camera["width"], camera["height"]

            at_image = boxes_global([o["box"] for o in objects])
            corners_camera = camera_SE3_global.transform_points(at_image.corners())
            boxes_2d = clip_boxes_2d(
                box_2d_from_corners(intrinsic, corners_camera), width_px, height_px
            )
            depth_m = camera_SE3_global.transform_points(at_image.center_m)[:, 2]
            keep = np.isfinite(boxes_2d).all(axis=1) & (depth_m > 0)
            if not keep.any():
                continue
            objects = [o for o, k in zip(objects, keep, strict=True) if k]
            boxes_2d, depth_m = boxes_2d[keep], depth_m[keep]

            annotations = [nusc.get("sample_annotation", o["annotation_token"]) for o in objects]
            inside = boxes_global(annotations).points_inside(points_global)  # (N, P)
            points_uv, point_depth = project_points(
                intrinsic, camera_SE3_global.transform_points(points_global)
            )
            in_view = (
                (point_depth > 0)
                & (points_uv[:, 0] >= 0)
                & (points_uv[:, 0] < width_px)
                & (points_uv[:, 1] >= 0)
                & (points_uv[:, 1] < height_px)
            )
            seeds = [points_uv[row & in_view] for row in inside]

            image = cv2.imread(str(dataroot / camera["filename"]), cv2.IMREAD_COLOR)[:, :, ::-1]
            start = time.perf_counter()
            result = segmenter.segment(
                np.ascontiguousarray(image), boxes_2d, {"points_uv": seeds, "depth_m": depth_m}
            )
            seconds += time.perf_counter() - start
            images += 1
            true_masks = truth.ids[None] == np.array([o["id"] for o in objects])[:, None, None]
            inter = (result.masks & true_masks).sum(axis=(1, 2))
            union = (result.masks | true_masks).sum(axis=(1, 2))
            ious.append(np.where(union > 0, inter / np.maximum(union, 1), 0.0))
            scores.append(result.score)
            visible_px.append(true_masks.sum(axis=(1, 2)))
            classes += [o["detection_name"] for o in objects]
            n_seeds.append(np.array([len(s) for s in seeds]))
            where += [(token, o["id"]) for o in objects]
    return {
        "iou": np.concatenate(ious),
        "score": np.concatenate(scores),
        "visible_px": np.concatenate(visible_px),
        "detection_name": np.array(classes),
        "n_seeds": np.concatenate(n_seeds),
        "image_and_id": np.array(where),
        "seconds": np.array(seconds),
        "images": np.array(images),
    }


def report(name: str, iou: np.ndarray, score: np.ndarray) -> None:
    print(
        f"{name} (n={len(iou)}): mean IoU {iou.mean():.3f}, IoU > 0.8: {np.mean(iou > 0.8):.2f}; "
        f"score vs IoU: pearson {pearsonr(score, iou)[0]:.3f}, spearman "
        f"{spearmanr(score, iou)[0]:.3f}, MAE {np.mean(np.abs(score - iou)):.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataroot", type=Path, default=None)
    parser.add_argument("--version", default="v1.0-mini")
    parser.add_argument("--scenes", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--segmenter", default="lidar")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="synth_seg_") as tmp:
        dataroot = args.dataroot
        if dataroot is None:
            from autolabel.synth.config import SynthConfig
            from autolabel.synth.generator import generate_dataset

            dataroot = Path(tmp) / "synth"
            start = time.perf_counter()
            config = SynthConfig(
                scenes=args.scenes, seconds=args.seconds, seed=args.seed, progress=False
            )
            generate_dataset(dataroot, config)
            print(
                f"generated {args.scenes} scene(s) of {args.seconds} s in {time.perf_counter() - start:.0f} s"
            )
        data = collect(dataroot, args.version, args.segmenter)

    print(
        f"{args.segmenter}: {int(data['images'])} images, "
        f"{int(data['images']) / float(data['seconds']):.2f} images/s"
    )
    report("all annotated objects in view", data["iou"], data["score"])
    seen = data["visible_px"] >= 100
    report("objects with >= 100 visible px", data["iou"][seen], data["score"][seen])
    for name in sorted(set(data["detection_name"].tolist())):
        of_class = data["detection_name"] == name
        print(
            f"  {name:>20}: n={of_class.sum():3d}  mean IoU {data['iou'][of_class].mean():.3f}  "
            f"mean score {data['score'][of_class].mean():.3f}"
        )


if __name__ == "__main__":
    main()
