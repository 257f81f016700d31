"""Pipeline cost and throughput on this machine.

Per-stage CPU seconds and peak memory per clip, this checkout against an earlier commit, measured
in the same run (issue #17's figures): one 20 s synthetic clip at 1600x900 with the LiDAR
detector, and the real PandaSet-002 clip at 1920x1080 (from ``../shared/realdata`` or
``$AUTOLABEL_REALDATA``, when present)::

    python bench/bench_pipeline.py costs --against COMMIT [--repeat 1] [--detector lidar]

Each (commit, clip) runs in a fresh process (so its peak RSS is that clip's), the two commits
alternating (each first in every other repeat); the earlier commit is checked out in a temporary
git worktree. CPU seconds per stage are the process's CPU time inside each stage, measured the
same way for both commits (by wrapping ``ClipRun.execute``, which both have), less numba
compilation (a checkout with numba's on-disk cache compiles nothing, a fresh worktree compiles
everything); both checkouts get Python bytecode first, so no stage counts compiling the modules
it imports, and one unmeasured run of each clip first, so both then load their kernels from
numba's cache: loading is not compiling, so without that run only the checkout that had a cache
paid for loading it in its stages.

Throughput, serial vs Ray, on synthetic clips with the CPU defaults and the small-image
thresholds of ``autolabel demo``::

    python bench/bench_pipeline.py ray [--scenes 4 --seconds 8 --width 480 --height 270] [--cpus N]

Both runs recompute every clip (``force``) from the same dataset into separate folders, and the
script checks that they wrote the same bytes. The Ray cluster (local, ``--cpus`` CPUs, default the
machine's) is started before the clock starts; its start-up time is printed apart. On a shared
machine the load average matters: it is printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The code measured: this checkout, or another one given to the ``_clip`` worker by --code.
CODE = Path(sys.argv[sys.argv.index("--code") + 1]) if "--code" in sys.argv else REPO
sys.path[:0] = [str(CODE), str(REPO / "tests")]  # that checkout's code, and the test helpers
#: ``shared/realdata`` beside the checkout, or where ``AUTOLABEL_REALDATA`` says (as the tests).
PANDASET = (
    Path(os.environ.get("AUTOLABEL_REALDATA") or REPO.parent / "shared" / "realdata")
    / "pandaset-002"
)


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


def _clip_worker(args) -> None:
    """Run one clip with the code of ``--code``; print its per-stage CPU seconds and peak RSS."""
    from numba.core import event

    from autolabel import pipeline
    from autolabel.config import load_pipeline_config

    cpu: dict[str, float] = {}
    compiling = {"depth": 0, "start": 0.0, "cpu": 0.0}

    class CompileCpu(event.Listener):
        """CPU seconds of numba compilation (outermost events), kept out of the stages' figures:
        a checkout without numba's on-disk cache compiles, one with it does not."""

        def on_start(self, ev) -> None:
            if compiling["depth"] == 0:
                compiling["start"] = time.process_time()
            compiling["depth"] += 1

        def on_end(self, ev) -> None:
            compiling["depth"] -= 1
            if compiling["depth"] == 0:
                compiling["cpu"] += time.process_time() - compiling["start"]

    event.register("numba:compile", CompileCpu())
    execute = pipeline.ClipRun.execute

    def timed_execute(self, stage, fn):
        start, compiled = time.process_time(), compiling["cpu"]
        try:
            return execute(self, stage, fn)
        finally:
            spent = time.process_time() - start - (compiling["cpu"] - compiled)
            cpu[stage] = cpu.get(stage, 0.0) + spent

    pipeline.ClipRun.execute = timed_execute
    config = load_pipeline_config(None, detector=args.detector)
    summary = pipeline.run_pipeline(
        args.dataroot, args.version, args.out, [args.scene], config, force=True, progress=False
    )
    (clip,) = summary.clips
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps({"status": clip.status, "error": clip.error, "cpu": cpu, "peak_mib": peak_mib})
    )


def _measure(code: Path, dataroot: Path, version: str, scene: str, detector: str, out: Path):
    cmd = [sys.executable, __file__, "_clip", "--code", str(code), "--dataroot", str(dataroot)]
    cmd += ["--version", version, "--scene", scene, "--detector", detector, "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(code)}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        raise RuntimeError(f"{code} on {scene}: rc {done.returncode}\n{done.stderr[-3000:]}")
    result = json.loads(lines[-1])
    if result["status"] != "done":
        raise RuntimeError(f"{code} on {scene}: {result['error']}")
    return result


def costs(args) -> None:
    """Per-stage CPU seconds and peak memory per clip, this checkout vs ``--against``."""
    from autolabel.synth.config import SynthConfig
    from autolabel.synth.generator import generate_dataset

    with tempfile.TemporaryDirectory(prefix="bench_costs_") as tmp:
        tmp = Path(tmp)
        earlier = tmp / "earlier"
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", str(earlier), args.against],
            check=True, capture_output=True,
        )  # fmt: skip
        try:
            synth = tmp / "synth"
            generate_dataset(synth, SynthConfig(scenes=1, seconds=20.0, seed=11, progress=False))
            clips = [("synthetic 20 s, 1600x900", synth, "v1.0-mini", "synth-0000")]
            if PANDASET.is_dir():
                clips.append(
                    ("PandaSet-002 8 s, 1920x1080", PANDASET, "v1.0-pandaset", "pandaset-002")
                )
            codes = {"this": REPO, args.against: earlier}
            for code in codes.values():
                _compile_bytecode(code)
            for title, root, version, scene in clips:
                runs: dict[str, list[dict]] = {name: [] for name in codes}
                for code in codes.values():  # numba's cache written, not measured
                    _measure(code, root, version, scene, args.detector, tmp / "warm-up")
                for rep in range(args.repeat):
                    # Each checkout goes first in every other repeat: the first run of a pair
                    # reads the clip from a colder page cache.
                    order = list(codes.items())[:: 1 if rep % 2 == 0 else -1]
                    for name, code in order:
                        out = tmp / f"out-{len(runs[name])}-{name.replace('/', '_')}"
                        runs[name].append(_measure(code, root, version, scene, args.detector, out))
                _print_costs(title, args.detector, runs, args.against)
        finally:
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "remove", "--force", str(earlier)],
                check=False, capture_output=True,
            )  # fmt: skip


def _compile_bytecode(code: Path) -> None:
    """Bytecode for a checkout's packages, as an install writes it: the stages import modules
    lazily, so without it a stage's CPU counts compiling their source (0.4 s for marks + qa; the
    checkout with the older ``__pycache__`` looked faster), not its work."""
    packages = [str(code / p) for p in ("autolabel", "detectors", "trackers", "calib")]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *packages], check=True)


def _print_costs(title: str, detector: str, runs: dict[str, list[dict]], against: str) -> None:
    import numpy as np

    def per_stage(results: list[dict]) -> dict[str, float]:
        stages = {s for r in results for s in r["cpu"]}
        return {s: float(np.median([r["cpu"].get(s, 0.0) for r in results])) for s in stages}

    this, before = per_stage(runs["this"]), per_stage(runs[against])
    order = [
        s for s in (*_stage_names(), *sorted(set(this) | set(before))) if s in this or s in before
    ]
    order = list(dict.fromkeys(order))
    print(
        f"\n{title}, --detector {detector}: CPU seconds per clip (median of {len(runs['this'])}), load {_load()}"
    )
    print(f"  {'stage':>12} {against[:12]:>12} {'this':>8} {'ratio':>7}")
    for stage in order:
        a, b = before.get(stage, 0.0), this.get(stage, 0.0)
        print(f"  {stage:>12} {a:12.2f} {b:8.2f} {a / b if b > 0 else float('nan'):6.2f}x")
    for name, values in (("visibility+marks+qa", ("visibility", "marks", "qa")), ("all", order)):
        a, b = sum(before.get(s, 0) for s in values), sum(this.get(s, 0) for s in values)
        print(f"  {name:>12} {a:12.2f} {b:8.2f} {a / b if b > 0 else float('nan'):6.2f}x")
    peaks = {k: max(r["peak_mib"] for r in v) for k, v in runs.items()}
    print(
        f"  peak memory per clip: {against} {peaks[against]:.0f} MiB, this {peaks['this']:.0f} MiB"
    )


def _stage_names() -> tuple[str, ...]:
    from autolabel.stages import STAGE_NAMES

    return ("read", *STAGE_NAMES)


def throughput(args) -> None:
    """Clips per minute serial vs Ray, seconds per clip per stage."""
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    ray_mode = sub.add_parser("ray", help="serial vs Ray throughput on synthetic clips")
    ray_mode.add_argument("--scenes", type=int, default=4)
    ray_mode.add_argument("--seconds", type=float, default=8.0)
    ray_mode.add_argument("--width", type=int, default=480)
    ray_mode.add_argument("--height", type=int, default=270)
    ray_mode.add_argument("--cpus", type=int, default=os.cpu_count())
    ray_mode.add_argument("--dataroot", type=Path, default=None, help="reuse a synthetic dataset")
    cost_mode = sub.add_parser("costs", help="per-stage CPU and memory vs an earlier commit")
    cost_mode.add_argument("--against", required=True, help="earlier commit (any git revision)")
    cost_mode.add_argument("--repeat", type=int, default=1)
    cost_mode.add_argument("--detector", default="lidar")
    worker = sub.add_parser("_clip")  # one clip in this process (used by ``costs``)
    for name in ("--code", "--dataroot", "--version", "--scene", "--detector", "--out"):
        worker.add_argument(name, required=True)
    args = parser.parse_args()
    {"ray": throughput, "costs": costs, "_clip": _clip_worker}[args.mode](args)


if __name__ == "__main__":
    main()
