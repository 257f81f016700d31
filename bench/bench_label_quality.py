"""Label quality of the QA made with each CPU detector: agreement against yield over confidence.

Generates ``--scenes`` synthetic clips (``autolabel synth``, a seed other than the tests' and the
validation seeds the default ``qa.min_confidence`` was chosen on), runs the whole pipeline
(``autolabel.pipeline.run_pipeline``) per detector and, on PandaSet-002 (real, never tuned on;
``../shared/realdata/pandaset-002``, skipped when absent), the same with ground truth and lidar:

- ``gt (exact)``: ground-truth replay (the default: exact annotations), ungated
  (``qa.min_confidence: 0``): the reference; its questions are the yield's denominator;
- ``gt (noise)``: ground-truth replay with ``noise: default`` (a good detector's errors);
- ``lidar``: the geometric LiDAR detector (the laptop default).

Each candidate runs twice: ungated (every answerable question with its confidence: the whole
curve of agreement and yield over thresholds, ``autolabel eval qa``'s library function) and with
the default gate (the figures a user gets: agreement and yield at ``min_confidence``). Also checks
that the reference against itself scores 100 %.

    python bench/bench_label_quality.py --scenes 3 --seconds 20 --out /tmp/lq_bench
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from realdata import PANDASET, PANDASET_VERSION, realdata_dir  # noqa: E402

from autolabel.config import PipelineConfig  # noqa: E402
from autolabel.demo import small_image_config  # noqa: E402
from autolabel.evaluation.label_quality import (  # noqa: E402
    at_threshold,
    evaluate_label_quality,
    format_precision_yield,
)
from autolabel.pipeline import run_pipeline  # noqa: E402
from autolabel.qa.sampling import DEFAULT_MIN_CONFIDENCE  # noqa: E402
from autolabel.synth.config import SynthConfig  # noqa: E402
from autolabel.synth.generator import generate_dataset  # noqa: E402

CANDIDATES = {"gt (noise)": ("gt", {"noise": "default"}), "lidar": ("lidar", {})}


def pct(x) -> str:
    return "    -" if x is None else f"{100 * x:5.1f}"


def _run(data: Path, version: str, out: Path, detector: str, options: dict, gate: float, small):
    if small:
        config = small_image_config(*small, detector=detector, detector_options=options)
    else:
        config = PipelineConfig(detector=detector, detector_options=options)
    config.qa = dataclasses.replace(config.qa, min_confidence=gate)
    t0 = time.perf_counter()
    summary = run_pipeline(data, version, out, config=config, progress=False)
    failed = [c.clip for c in summary.clips if c.status == "failed"]
    if failed:
        raise SystemExit(f"{out}: clips failed: {failed} (see {out}/run_summary.json)")
    return time.perf_counter() - t0


def bench_dataset(name: str, data: Path, version: str, out: Path, small) -> dict:
    reference = out / "gt_exact"
    seconds = _run(data, version, reference, "gt", {}, 0.0, small)
    print(f"[{name}] gt (exact), ungated: pipeline {seconds:.0f} s")
    self_check = evaluate_label_quality(reference, reference, out_path=False)
    assert self_check["overall"]["agreement"] == 1.0, self_check["overall"]
    print(
        f"[{name}] reference vs itself: agreement 1.000, missed {self_check['overall']['missed']}"
    )
    results = {}
    for label, (detector, options) in CANDIDATES.items():
        if name == "pandaset-002" and detector == "gt" and options:
            continue  # the figures: gt + noise on synthetic, lidar on both
        tag = label.replace(" ", "_").replace("(", "").replace(")", "")
        row = {}
        for gate in (0.0, DEFAULT_MIN_CONFIDENCE):
            run = out / f"{tag}_gate{gate:g}"
            seconds = _run(data, version, run, detector, options, gate, small)
            r = evaluate_label_quality(reference, run, out_path=False)
            p = at_threshold(r["curve"]["overall"], gate)
            print(
                f"[{name}] {label}, min_confidence {gate:g}: pipeline {seconds:.0f} s; "
                f"{p['questions']} QA, agreement {pct(p['agreement'])} %, "
                f"yield {pct(p['yield'])} % of {r['overall']['reference_questions']}"
            )
            row[gate] = r
        print(f"\n[{name}] {label}: ungated run filtered by confidence")
        print("\n".join(format_precision_yield(row[0.0], every=2)))
        print()
        results[label] = {
            str(g): {"overall": v["overall"], "curve": v["curve"]} for g, v in row.items()
        }
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenes", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--width", type=int, default=480)
    ap.add_argument("--height", type=int, default=270)
    ap.add_argument("--seed", type=int, default=2024, help="synthetic data seed (held out)")
    ap.add_argument("--out", type=Path, default=Path("bench_out/label_quality"))
    ap.add_argument("--no-pandaset", action="store_true", help="skip PandaSet-002")
    args = ap.parse_args()

    data = args.out / "data"
    if not (data / "v1.0-mini").is_dir():
        t0 = time.perf_counter()
        generate_dataset(
            data,
            SynthConfig(
                scenes=args.scenes, seconds=args.seconds, seed=args.seed,
                width_px=args.width, height_px=args.height, progress=False,
            ),
            overwrite=True,
        )  # fmt: skip
        print(
            f"synth: {args.scenes} clips of {args.seconds:g} s in {time.perf_counter() - t0:.0f} s"
        )
    out = {
        "synthetic": bench_dataset(
            "synthetic", data, "v1.0-mini", args.out / "synthetic", (args.width, args.height)
        )
    }
    pandaset = realdata_dir(PANDASET)
    if pandaset is not None and not args.no_pandaset:
        out["pandaset-002"] = bench_dataset(
            "pandaset-002", pandaset, PANDASET_VERSION, args.out / "pandaset", None
        )
    (args.out / "label_quality_bench.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
