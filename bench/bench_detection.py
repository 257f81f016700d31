"""Detection benchmark on a synthetic validation set: accuracy (devkit metrics) and speed per backend.

Generates ``--scenes`` synthetic clips (small images: detection only reads the LiDAR), runs every
CPU backend on every keyframe, writes per-clip nuScenes detection files, scores them with the
devkit (``autolabel eval det``'s library function) and prints mAP, NDS, the TP errors, per-class
AP and frames/s. Backends:

- ``gt (exact)``: ground-truth replay without noise (the metric's ceiling; must reach mAP >= 0.99);
- ``gt (noise)``: ground-truth replay with the default ``GtNoiseConfig``;
- ``lidar``: the geometric LiDAR detector, single sweep (the default);
- ``lidar x3``: the same on three aggregated sweeps;
- ``results``: re-import of the ``lidar`` run's files (speed of the result-file backend; its
  metrics equal ``lidar``'s).

Run:  python bench/bench_detection.py [--scenes 10] [--seconds 20] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nuscenes import NuScenes  # noqa: E402

from autolabel.evaluation.detection import evaluate_detection  # noqa: E402
from autolabel.nuscenes_reader import read_clip  # noqa: E402
from autolabel.synth.config import SynthConfig  # noqa: E402
from autolabel.synth.generator import generate_dataset  # noqa: E402
from detectors import get_detector  # noqa: E402
from detectors.detection_results import write_detection_submission  # noqa: E402

TP_NAMES = {"trans_err": "mATE", "scale_err": "mASE", "orient_err": "mAOE", "vel_err": "mAVE", "attr_err": "mAAE"}  # fmt: skip


def run_backend(name, options, clips, run_dir: Path) -> tuple[float, int]:
    """Detect every clip; write ``run_dir/<clip>/labels/detection.json``; (seconds, frames)."""
    detector = get_detector(name, options)
    seconds, frames = 0.0, 0
    for clip in clips:
        start = time.perf_counter()
        boxes = detector.detect_clip(clip)
        seconds += time.perf_counter() - start
        frames += len(clip.frames)
        write_detection_submission(
            run_dir / clip.name / "labels" / "detection.json",
            [f.token for f in clip.frames],
            boxes,
            detector.meta,
        )
    return seconds, frames


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument(
        "--seed", type=int, default=1, help="1: not the clips the defaults were tuned on"
    )
    parser.add_argument("--out", type=Path, default=None, help="keep the dataset and runs here")
    parser.add_argument(
        "--reuse", action="store_true", help="reuse the dataset already generated in OUT/data"
    )
    args = parser.parse_args()

    tmp = None
    if args.out is None:
        tmp = tempfile.TemporaryDirectory(prefix="bench_detection_")
        out = Path(tmp.name)
    else:
        out = args.out
    dataroot = out / "data"
    start = time.perf_counter()
    if args.reuse:
        version = "v1.0-mini"
        names = sorted(
            s["name"] for s in json.loads((dataroot / version / "scene.json").read_text())
        )
        synth = {"version": version, "scenes": names}
        print(f"reusing {len(names)} clips in {dataroot}")
    else:
        synth = generate_dataset(
            dataroot,
            SynthConfig(
                scenes=args.scenes,
                seconds=args.seconds,
                seed=args.seed,
                width_px=160,
                height_px=90,
                progress=False,
            ),
            overwrite=True,
        )
        print(f"generated {len(synth['scenes'])} clips, {synth['samples']} keyframes, "
              f"{synth['sample_annotations']} annotations in {time.perf_counter() - start:.0f} s")  # fmt: skip
    nusc = NuScenes(version=synth["version"], dataroot=str(dataroot), verbose=False)
    clips = [read_clip(nusc, scene, max_sweeps=10) for scene in synth["scenes"]]
    points = sum(os.path.getsize(f.lidar.path) // 20 for clip in clips for f in clip.frames) / sum(
        len(c.frames) for c in clips
    )
    print(f"mean LiDAR points per keyframe: {points:.0f}")

    backends = [
        ("gt (exact)", "gt", {"noise": None}),
        ("gt (noise)", "gt", {"noise": "default"}),
        ("lidar", "lidar", {}),
        ("lidar x3", "lidar", {"num_sweeps": 3}),
        ("results", "results", None),  # options filled in from the lidar run
    ]
    # Warm the numba kernels so the timing is of the detector, not of its compilation.
    get_detector("lidar").detect_frames(clips[0].frames[:1])

    rows = {}
    for label, name, options in backends:
        run_dir = out / "runs" / label.replace(" ", "_").replace("(", "").replace(")", "")
        if name == "results":
            merged = {"meta": {}, "results": {}}
            lidar_dir = out / "runs" / "lidar"
            for path in sorted(lidar_dir.glob("*/labels/detection.json")):
                part = json.loads(path.read_text())
                merged["meta"] = part["meta"]
                merged["results"].update(part["results"])
            all_file = out / "runs" / "lidar_all.json"
            all_file.write_text(json.dumps(merged))
            options = {"path": str(all_file)}
        seconds, frames = run_backend(name, options, clips, run_dir)
        summary = evaluate_detection(
            run_dir, dataroot, synth["version"], nusc=nusc, render_curves=False
        )
        rows[label] = (summary, frames / seconds)

    names = list(rows)
    print()
    print(f"{'metric':<22}" + "".join(f"{n:>13}" for n in names))
    print(f"{'mAP':<22}" + "".join(f"{rows[n][0]['mean_ap']:>13.4f}" for n in names))
    print(f"{'NDS':<22}" + "".join(f"{rows[n][0]['nd_score']:>13.4f}" for n in names))
    for key, pretty in TP_NAMES.items():
        print(f"{pretty:<22}" + "".join(f"{rows[n][0]['tp_errors'][key]:>13.4f}" for n in names))
    for cls in rows[names[0]][0]["mean_dist_aps"]:
        print(
            f"{'AP ' + cls:<22}"
            + "".join(f"{rows[n][0]['mean_dist_aps'][cls]:>13.4f}" for n in names)
        )
    print(f"{'frames/s':<22}" + "".join(f"{rows[n][1]:>13.1f}" for n in names))
    print(f"(ratio frames/s lidar x3 / lidar: {rows['lidar x3'][1] / rows['lidar'][1]:.2f})")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
