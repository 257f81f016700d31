"""Benchmark scoring speed: answers parsed and scored per second.

Builds constructed 20 s clips (``autolabel.qa.scenes``), generates their QA, exports the answer
key (no images), then times ``score_entries`` (parse every answer + every metric) on three answer
sets: the oracle (the generated answer texts), the random baseline, and "chatty" answers (each
oracle answer wrapped in the kind of preamble and trailer a chat model adds). As a peer figure
measured in the same run, a naive scorer that takes the first number of each answer (no units,
no region masking, no letters) over the same answers: the ratio is the price of the robust parser.

    python bench/bench_scoring.py --clips 6 --objects 30
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autolabel.benchmark.baselines import oracle_answers, random_answers  # noqa: E402
from autolabel.benchmark.export import ANSWER_KEY_FILE, ExportConfig, export_benchmark  # noqa: E402
from autolabel.benchmark.scoring import read_jsonl, score_entries  # noqa: E402
from autolabel.qa import QAConfig, generate_clip_qa, load_templates, write_qa_jsonl  # noqa: E402
from autolabel.qa.scenes import constant_velocity_scene  # noqa: E402

_FIRST_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def naive_score(entries, answers) -> int:
    """First number of the answer against the first true number; letters and words verbatim."""
    right = 0
    for e in entries:
        text = answers.get(e["id"], "")
        truth = next(iter(e["truth"].values()))
        if isinstance(truth, (int, float)):
            m = _FIRST_NUMBER.search(text)
            right += bool(m) and abs(float(m.group()) - truth) < 0.25 * abs(truth) + 1e-9
        else:
            right += str(truth).lower() in text.lower()
    return right


def timed(fn, *args):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, time.perf_counter() - t0, time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clips", type=int, default=6)
    ap.add_argument("--objects", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=3, help="timed passes per answer set (best kept)")
    args = ap.parse_args()

    templates = load_templates()
    with tempfile.TemporaryDirectory(prefix="bench_scoring_") as tmp:
        run = Path(tmp) / "run"
        for i in range(args.clips):
            scene = constant_velocity_scene(
                n_objects=args.objects, seed=100 + i, clip=f"scene-b-{i:03d}"
            )
            records = generate_clip_qa(
                scene.attrs, scene.regions, scene.meta, QAConfig(seed=i), templates
            )
            scene.attrs.write_parquet(run / scene.meta.clip / "attributes.parquet")
            write_qa_jsonl(run / scene.meta.clip / "qa.jsonl", records)
        export_benchmark(run, Path(tmp) / "bench", config=ExportConfig(images=False))
        entries = read_jsonl(Path(tmp) / "bench" / ANSWER_KEY_FILE)

    oracle = oracle_answers(entries)
    sets = {
        "oracle": oracle,
        "random": random_answers(entries, seed=0),
        "chatty": {
            k: f"Sure! Looking at the marked images carefully, {v} I hope this helps; let me know "
            "if you need anything else."
            for k, v in oracle.items()
        },
    }
    n = len(entries)
    print(f"questions: {n} ({args.clips} clips x {args.objects} objects)")
    score_entries(entries[:50], oracle)  # warm-up (imports, regex compilation), not timed
    for name, answers in sets.items():
        best = None
        for _ in range(args.repeat):
            result, wall, cpu = timed(score_entries, entries, answers)
            if best is None or wall < best[1]:
                best = (result, wall, cpu)
        result, wall, cpu = best
        _, naive_wall, _ = timed(naive_score, entries, answers)
        print(
            f"{name}: {n / wall:,.0f} answers/s wall, {n / cpu:,.0f} answers/s CPU; "
            f"score {result['score']:.4f}; naive first-number scorer {n / naive_wall:,.0f} answers/s "
            f"(robust / naive time = {wall / naive_wall:.1f}x)"
        )


if __name__ == "__main__":
    main()
