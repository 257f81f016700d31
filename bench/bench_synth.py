"""Speed of the synthetic drive-log generator: seconds per 20 s clip, full and small resolution.

Generates one scene (``--seconds`` long, default 20 s: 40 keyframes x 6 cameras, 10 Hz LiDAR)
at the rig's resolution (1600x900 for nuScenes) and at a small one (320x180), into a temporary
folder, and prints wall and CPU seconds per clip with the time spent per stage (plan, world,
lidar, render, pixels, write, tables). A first small warm-up run loads the numba caches so they
are not counted. CPU seconds are the figure to compare on a shared machine.

    python bench/bench_synth.py [--seconds 20] [--small 320x180] [--skip-full]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from autolabel.synth.config import SynthConfig
from autolabel.synth.generator import generate_dataset


def _clip(root: Path, seconds: float, size: tuple[int, int] | None, seed: int) -> dict:
    config = SynthConfig(
        scenes=1,
        seed=seed,
        seconds=seconds,
        width_px=size[0] if size else None,
        height_px=size[1] if size else None,
        progress=False,
    )
    wall, cpu = time.perf_counter(), time.process_time()
    summary = generate_dataset(root, config)
    summary["wall_s"] = time.perf_counter() - wall
    summary["cpu_s"] = time.process_time() - cpu
    return summary


def _report(label: str, summary: dict, seconds: float) -> None:
    stages = ", ".join(f"{k} {v:.1f}" for k, v in summary["seconds_by_stage"].items())
    print(
        f"{label}: {summary['wall_s']:.1f} s wall, {summary['cpu_s']:.1f} s CPU per {seconds:g} s clip "
        f"({summary['sample_data']} sample_data, {summary['sample_annotations']} annotations)"
    )
    print(f"  stages (wall s): {stages}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="clip length, seconds")
    parser.add_argument("--small", default="320x180", help="small resolution WxH")
    parser.add_argument("--skip-full", action="store_true", help="only the small resolution")
    args = parser.parse_args()
    small = tuple(int(v) for v in args.small.lower().split("x"))
    with tempfile.TemporaryDirectory(prefix="bench_synth_") as tmp:
        tmp_path = Path(tmp)
        _clip(tmp_path / "warmup", 1.0, (64, 36), seed=0)  # numba cache loading, imports
        result = _clip(tmp_path / "small", args.seconds, small, seed=1)
        _report(f"{small[0]}x{small[1]}", result, args.seconds)
        if not args.skip_full:
            result = _clip(tmp_path / "full", args.seconds, None, seed=1)
            _report("full resolution (rig)", result, args.seconds)


if __name__ == "__main__":
    main()
