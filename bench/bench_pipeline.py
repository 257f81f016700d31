"""Pipeline throughput: clips per minute serial vs Ray on this machine, and seconds per clip per
stage, on synthetic clips with the CPU defaults (LiDAR detector, Pub tracker, LiDAR-seeded
segmenter) and the small-image thresholds of ``autolabel demo``.

    python bench/bench_pipeline.py [--scenes 4 --seconds 8 --width 480 --height 270] [--cpus N]

Both runs recompute every clip (``force``) from the same dataset into separate folders, and the
script checks that they wrote the same bytes. The Ray cluster (local, ``--cpus`` CPUs, default the
machine's) is started before the clock starts; its start-up time is printed apart. On a shared
machine the load average matters: it is printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # this checkout's code, and the test helpers


def _load() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def _per_stage(summary) -> dict[str, float]:
    done = [c for c in summary.clips if c.status == "done"]
    stages = sorted({s for c in done for s in c.stage_seconds}, key=_stage_order)
    return {s: sum(c.stage_seconds.get(s, 0.0) for c in done) / max(1, len(done)) for s in stages}


def _stage_order(stage: str) -> int:
    from autolabel.stages import STAGE_NAMES

    return STAGE_NAMES.index(stage) if stage in STAGE_NAMES else len(STAGE_NAMES)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--width", type=int, default=480)
    parser.add_argument("--height", type=int, default=270)
    parser.add_argument("--cpus", type=int, default=os.cpu_count())
    parser.add_argument("--dataroot", type=Path, default=None, help="reuse a synthetic dataset")
    args = parser.parse_args()

    import ray
    from pipeline_data import assert_same_outputs

    from autolabel.config import RayOptions
    from autolabel.demo import small_image_config
    from autolabel.pipeline import run_pipeline
    from autolabel.synth.config import SynthConfig
    from autolabel.synth.generator import generate_dataset
    from ray_jobs.cluster import connect
    from ray_jobs.run_clips import run_pipeline_ray

    with tempfile.TemporaryDirectory(prefix="bench_pipeline_") as tmp:
        root = args.dataroot or Path(tmp) / "data"
        if args.dataroot is None:
            synth = SynthConfig(
                scenes=args.scenes, seconds=args.seconds, width_px=args.width,
                height_px=args.height, progress=False,
            )  # fmt: skip
            generate_dataset(root, synth)
        config = small_image_config(args.width, args.height)
        version = "v1.0-mini"

        t0 = time.perf_counter()
        serial = run_pipeline(root, version, Path(tmp) / "serial", None, config, True, False)
        serial_s = time.perf_counter() - t0
        load_serial = _load()

        t0 = time.perf_counter()
        connect("local", RayOptions(num_cpus=args.cpus))
        startup_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        parallel = run_pipeline_ray(
            root, version, Path(tmp) / "ray", None, config, RayOptions(), force=True,
            progress=False,
        )  # fmt: skip
        ray_s = time.perf_counter() - t0
        load_ray = _load()
        ray.shutdown()
        assert_same_outputs(Path(tmp) / "serial", Path(tmp) / "ray")

    n = len(serial.clips)
    frames = sum(c.counts.get("read.frames", 0) for c in serial.clips)
    print(
        f"{n} clips x {args.seconds:g} s ({frames} keyframes, {args.width}x{args.height} px, "
        f"6 cameras), {os.cpu_count()} CPUs, Ray with {args.cpus}"
    )
    print(f"serial: {n / serial_s * 60:.2f} clips/min ({serial_s:.1f} s, load avg {load_serial})")
    print(
        f"ray:    {n / ray_s * 60:.2f} clips/min ({ray_s:.1f} s, load avg {load_ray}; cluster "
        f"start-up {startup_s:.1f} s not included)"
    )
    print(f"ray / serial throughput: {serial_s / ray_s:.2f}x; outputs byte-identical: yes")
    serial_stage, ray_stage = _per_stage(serial), _per_stage(parallel)
    print("seconds per clip by stage (serial | ray; ray sums the time of each stage's parts):")
    for stage, seconds in serial_stage.items():
        print(f"  {stage:>10}: {seconds:7.2f} | {ray_stage.get(stage, float('nan')):7.2f}")
    print(f"  {'total':>10}: {sum(serial_stage.values()):7.2f} | {sum(ray_stage.values()):7.2f}")


if __name__ == "__main__":
    main()
