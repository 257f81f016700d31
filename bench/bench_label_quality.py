"""Label quality of the QA made with each CPU detector, on a synthetic validation set.

Generates ``--scenes`` synthetic clips (``autolabel synth``, a seed other than the tests'), runs
the whole pipeline (``autolabel.pipeline.run_pipeline``: detect, track, attributes, segment,
visibility, marks, QA) three times:

- ``gt (exact)``: ground-truth replay without noise, the reference;
- ``gt (noise)``: ground-truth replay with the default ``GtNoiseConfig`` (a good detector's errors);
- ``lidar``: the geometric LiDAR detector (the laptop default);

and prints, for each candidate, the devkit's mAP / NDS / AMOTA for context and the label quality
of its QA against the reference (``autolabel eval qa``'s library function): the fraction of its
answers that agree with the ground truth within the benchmark tolerances, per question type, and
the ground-truth questions it missed. Also checks that the reference against itself scores 100 %.

    python bench/bench_label_quality.py --scenes 3 --seconds 20 --out /tmp/lq_bench
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autolabel.config import PipelineConfig  # noqa: E402
from autolabel.evaluation.detection import evaluate_detection  # noqa: E402
from autolabel.evaluation.label_quality import evaluate_label_quality  # noqa: E402
from autolabel.evaluation.tracking import evaluate_tracking  # noqa: E402
from autolabel.pipeline import run_pipeline  # noqa: E402
from autolabel.synth.config import SynthConfig  # noqa: E402
from autolabel.synth.generator import generate_dataset  # noqa: E402

RUNS = {
    "gt (exact)": ("gt", {}),
    "gt (noise)": ("gt", {"noise": "default"}),
    "lidar": ("lidar", {}),
}


def pct(x) -> str:
    return "    -" if x is None else f"{100 * x:5.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenes", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--width", type=int, default=480)
    ap.add_argument("--height", type=int, default=270)
    ap.add_argument("--seed", type=int, default=2024, help="synthetic data seed (held out)")
    ap.add_argument("--out", type=Path, default=Path("bench_out/label_quality"))
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
    runs = {}
    for label, (detector, options) in RUNS.items():
        out = args.out / label.replace(" ", "_").replace("(", "").replace(")", "")
        t0 = time.perf_counter()
        summary = run_pipeline(
            data,
            "v1.0-mini",
            out,
            config=PipelineConfig(detector=detector, detector_options=options),
            progress=False,
        )
        failed = [c.clip for c in summary.clips if c.status == "failed"]
        if failed:
            raise SystemExit(f"{label}: clips failed: {failed} (see {out}/run_summary.json)")
        det = evaluate_detection(out, data, "v1.0-mini", render_curves=False)
        track = evaluate_tracking(out, data, "v1.0-mini", render_curves=False)
        runs[label] = (out, det, track)
        print(
            f"{label}: pipeline {time.perf_counter() - t0:.0f} s; mAP {det['mean_ap']:.3f} "
            f"NDS {det['nd_score']:.3f} AMOTA {track['metrics']['amota'] or 0:.3f}"
        )

    reference = runs["gt (exact)"][0]
    self_check = evaluate_label_quality(reference, reference, out_path=False)
    assert self_check["overall"]["agreement"] == 1.0, self_check["overall"]
    print(
        f"reference vs itself: agreement {self_check['overall']['agreement']:.3f}, missed {self_check['overall']['missed']}"
    )

    results = {}
    for label in ("gt (noise)", "lidar"):
        t0 = time.perf_counter()
        results[label] = evaluate_label_quality(reference, runs[label][0])
        print(f"eval qa {label}: {time.perf_counter() - t0:.1f} s")

    labels = list(results)
    types = sorted({t for r in results.values() for t in r["by_type"]})
    head = f"{'question type':<28}" + "".join(f" | {lab:^36}" for lab in labels)
    sub = f"{'':<28}" + "".join(" |    n  agree% match%  unm.  miss%" for _ in labels)
    print()
    print(head)
    print(sub)
    for t in [*types, "ALL"]:
        row = f"{t:<28}"
        for lab in labels:
            r = results[lab]["overall"] if t == "ALL" else results[lab]["by_type"].get(t)
            if r is None:
                row += " |" + " " * 36
                continue
            row += (
                f" | {r['candidate_questions']:4d}  {pct(r['agreement'])}  {pct(r['agreement_matched'])}"
                f"  {r['unmatched']:4d}  {pct(r['missed_fraction'])}"
            )
        print(row)
    for lab in labels:
        o = results[lab]["overall"]
        print(
            f"{lab}: {o['candidate_questions']} QA, agreement {pct(o['agreement'])} %, of matched "
            f"{pct(o['agreement_matched'])} %, unmatched {o['unmatched']} (class only: "
            f"{o['unmatched_wrong_class']}), ambiguous {o['ambiguous']}, missed {o['missed']} of "
            f"{o['reference_questions']} ({pct(o['missed_fraction'])} %)"
        )
    (args.out / "label_quality_bench.json").write_text(
        json.dumps(
            {k: {"overall": v["overall"], "by_type": v["by_type"]} for k, v in results.items()},
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
