"""Segmentation throughput: LiDAR-seeded fallback and SAM2 (random hiera-tiny) on CPU.

Images are constructed 1600x900 street scenes with 15 objects each
(``autolabel.segmentation.validation_scenes``, good seeds, depths given). Prints images/s and
ms/object of each backend, their ratio, and the fallback's mean IoU with the true visible masks
(SAM2 with random weights has no meaningful IoU, so only its speed is reported).

    python bench/bench_segmentation.py [--images 6] [--sam2-images 2] [--threads 1]

SAM2 needs the ``sam2`` package (see README "SAM2"); without it only the fallback is measured.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=6, help="images for the fallback")
    parser.add_argument("--sam2-images", type=int, default=2, help="images for SAM2 (0: skip)")
    parser.add_argument("--objects", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1, help="torch / OpenCV threads")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))

    import cv2

    from autolabel.segmentation import get_segmenter
    from autolabel.segmentation.validation_scenes import make_validation_scene, mask_iou

    cv2.setNumThreads(args.threads)
    n_scenes = max(args.images, args.sam2_images)
    scenes = [
        make_validation_scene(500 + k, 900, 1600, n_objects=args.objects) for k in range(n_scenes)
    ]
    print(f"{n_scenes} constructed scenes, 1600x900, {args.objects} objects each")

    lidar = get_segmenter("lidar")
    elapsed, ious = 0.0, []
    for scene in scenes[: args.images]:
        start = time.perf_counter()
        result = lidar.segment(
            scene.image, scene.boxes_2d, {"points_uv": scene.points_uv, "depth_m": scene.depth_m}
        )
        elapsed += time.perf_counter() - start
        visible = scene.visible_masks.sum(axis=(1, 2)) > 0
        ious.append(mask_iou(result.masks, scene.visible_masks)[visible])
    lidar_ips = args.images / elapsed
    print(
        f"lidar: {lidar_ips:.2f} images/s, {1000 * elapsed / (args.images * args.objects):.1f} "
        f"ms/object, mean IoU {np.concatenate(ious).mean():.3f} (visible objects)"
    )

    if args.sam2_images <= 0:
        return
    try:
        import torch
        from sam2.build_sam import build_sam2
    except ImportError as error:
        print(f"sam2: not installed ({error}); skipped")
        return
    from autolabel.segmentation.sam2_backend import Sam2Segmenter

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    start = time.perf_counter()
    model = build_sam2("configs/sam2.1/sam2.1_hiera_t.yaml", None, device="cpu")
    sam2 = Sam2Segmenter.from_model(model)
    print(f"sam2: hiera-tiny, random weights, built in {time.perf_counter() - start:.1f} s")
    elapsed = 0.0
    for scene in scenes[: args.sam2_images]:
        start = time.perf_counter()
        sam2.segment(scene.image, scene.boxes_2d)
        elapsed += time.perf_counter() - start
    sam2_ips = args.sam2_images / elapsed
    print(
        f"sam2 (CPU, {args.threads} thread(s)): {sam2_ips:.3f} images/s, "
        f"{1000 * elapsed / args.sam2_images:.0f} ms/image"
    )
    print(f"lidar / sam2 speed ratio: {lidar_ips / sam2_ips:.1f}x")


if __name__ == "__main__":
    main()
