"""Seconds per keyframe and peak memory of the bevfusion backend on CPU, per config.

Builds the backend (random weights unless ``--checkpoint``) for each config, runs ``detect_frames``
on the first ``--frames`` keyframes of a dataroot's first scene once to warm up and ``--repeat``
times measured, and prints wall and CPU seconds per keyframe, the process's peak resident memory
after each config, and whether the camera branch ran on the plain-PyTorch ``bev_pool`` (calls
counted). Needs the OpenMMLab stack (README, "BEVFusion"). Example:

    python bench/bench_bevfusion_cpu.py --mmdet3d-root /tmp/mmdet3d --dataroot DATA \\
        --version v1.0-mini --frames 1
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CONFIGS = {
    "lidar": "projects/BEVFusion/configs/bevfusion_lidar_voxel0075_second_secfpn_8xb4-cyclic-20e_nus-3d.py",
    "lidar-cam": "projects/BEVFusion/configs/bevfusion_lidar-cam_voxel0075_second_secfpn_8xb4-cyclic-20e_nus-3d.py",
}


def _peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mmdet3d-root", required=True)
    parser.add_argument("--dataroot", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--configs", default="lidar,lidar-cam")
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--frames", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--image-resize", type=float, default=None)
    args = parser.parse_args(argv)

    import torch

    import detectors.bev_pool as bev_pool
    from autolabel.nuscenes_reader import read_clip
    from detectors import get_detector

    calls = {"n": 0}
    forward = bev_pool.bev_pool_forward

    def counted(*a, **k):
        calls["n"] += 1
        return forward(*a, **k)

    bev_pool.bev_pool_forward = counted
    from nuscenes.nuscenes import NuScenes

    nusc = NuScenes(args.version, args.dataroot, verbose=False)
    frames = read_clip(nusc, nusc.scene[0]["name"], with_ground_truth=False).frames[: args.frames]
    print(
        f"{len(frames)} keyframe(s) of {nusc.scene[0]['name']}; torch threads {torch.get_num_threads()}"
    )
    print(f"{'config':<10} {'build s':>8} {'wall s/frame':>13} {'cpu s/frame':>12} {'boxes':>6} "
          f"{'peak RSS GiB':>13} {'bev_pool calls':>15}")  # fmt: skip
    for name in args.configs.split(","):
        t0 = time.perf_counter()
        options = {"mmdet3d_root": args.mmdet3d_root, "config": CONFIGS[name], "device": "cpu"}
        options.update(
            {"checkpoint": args.checkpoint}
            if args.checkpoint
            else {"allow_random_weights": True, "image_resize": args.image_resize}
        )
        detector = get_detector("bevfusion", options)
        build = time.perf_counter() - t0
        detector.detect_frames(frames)  # warm-up
        calls["n"] = 0
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(args.repeat):
            boxes = detector.detect_frames(frames)
        n = args.repeat * len(frames)
        wall, cpu = (time.perf_counter() - wall) / n, (time.process_time() - cpu) / n
        print(f"{name:<10} {build:>8.1f} {wall:>13.2f} {cpu:>12.2f} {len(boxes[0]):>6} "
              f"{_peak_rss_gib():>13.2f} {calls['n'] // args.repeat:>15}")  # fmt: skip
        del detector
    return 0


if __name__ == "__main__":
    sys.exit(main())
