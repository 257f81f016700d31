"""Equivalence of ``autolabel bench score`` with the published STRIDE-QA-Bench scorer.

Runs the authors' scorer (``python -m strideqa_bench.benchmark`` from a checkout of
``turingmotors/STRIDE-QA-Dataset/benchmarks/STRIDE-QA-Bench``, in an interpreter that has its
dependencies) and :func:`autolabel.benchmark.strideqa.score_strideqa` on the same predictions of a
``--format strideqa`` benchmark: the oracle, constant and random baselines, and seeded varied
answer sets (``bench/strideqa_answers.py``). Compares per-question success (every quantity row
and every LSR row), LSR@0..3, MLSR and TLC (full precision and the report's printed digits), and
lists where the ``paper`` variant (autolabel's parser, the paper's tolerances) differs and why.

    STRIDEQA_BENCH_ROOT=/path/to/STRIDE-QA-Bench STRIDEQA_BENCH_PYTHON=/path/to/venv/bin/python \\
    PYTHONPATH=. python3 bench/strideqa_equivalence.py BENCH --out /tmp/eq --answers 1200

Writes ``OUT/equivalence.md`` (the table) and ``OUT/equivalence.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autolabel.benchmark.strideqa import (  # noqa: E402
    ANNOTATION_DIR,
    TIMES,
    headline,
    read_annotations,
    report_percent,
    score_strideqa,
)
from bench.strideqa_answers import varied_predictions  # noqa: E402

# Their command line with the two plotting calls turned off (the scoring path is untouched).
_NO_PLOTS = (
    "import strideqa_bench.benchmark as b\n"
    "b.create_prediction_distribution_plots = lambda *a, **k: None\n"
    "b.create_lsr_analysis_plots = lambda *a, **k: None\n"
    "b.main(b.parse_args())\n"
)


def run_official(
    root: Path, python: str, bench: Path, pred_dir: Path, out_dir: Path, plots: bool = True
) -> dict[str, Any]:
    """Run the published scorer (``python -m strideqa_bench.benchmark``; ``plots=False`` skips
    its plots, which take most of its time); its raw rows and headline metrics."""
    out_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(root / "src"), MPLBACKEND="Agg")
    cmd = [
        python,
        *(["-m", "strideqa_bench.benchmark"] if plots else ["-c", _NO_PLOTS]),
        "--input-dir",
        str(pred_dir),
        "--output-dir",
        str(out_dir),
        "--annotation-dir",
        str(bench / ANNOTATION_DIR),
        "--config-path",
        str(root / "config" / "tolerance.yaml"),
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=root)
    if done.returncode != 0:
        raise RuntimeError(f"official scorer failed on {pred_dir}:\n{done.stderr[-3000:]}")
    raw = json.loads((out_dir / "raw_evaluation.json").read_text())
    report = json.loads((out_dir / "metrics_report.json").read_text())
    lsr = {e["time"]: e["success_rate"] for e in report.get("lsr", [])}
    overall = next(r for r in report["temporal_consistency"] if r["relation"] == "Overall")
    metrics = {f"LSR@{t}": lsr.get(t) for t in TIMES}
    metrics["MLSR"], metrics["TLC"] = overall["MLSR"], overall["TLC"]
    return {"raw": raw, "metrics": metrics, "report": report}


def _row_key(r: dict[str, Any]) -> tuple:
    if r["qa_type"] == "lsr":
        return (r["question_id"].split("_g")[1], r["time"], "lsr")
    return (r["question_id"], r["qa_type"])


def compare(official: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    """Per-row agreement and metric equality of one answer set."""
    theirs = {_row_key(r): bool(r["success"]) for r in official["raw"]}
    mine = {_row_key(r): bool(r["success"]) for r in ours["rows"]}
    keys = set(theirs) | set(mine)
    agree = sum(theirs.get(k) == mine.get(k) for k in keys)
    q_keys = [k for k in keys if k[-1] != "lsr"]
    ours_m = headline(ours)
    metrics = {}
    for name, theirs_v in official["metrics"].items():
        mine_v = ours_m[name]
        metrics[name] = {
            "official": theirs_v,
            "autolabel": mine_v,
            "printed_equal": report_percent(theirs_v) == report_percent(mine_v),
            "equal_8dp": theirs_v is not None
            and mine_v is not None
            and round(theirs_v, 8) == round(mine_v, 8),
        }
    return {
        "rows": len(keys),
        "question_rows": len(q_keys),
        "agree": agree,
        "disagree_examples": [
            str(k) for k in sorted(keys, key=str) if theirs.get(k) != mine.get(k)
        ][:10],
        "metrics": metrics,
    }


def _write_predictions(folder: Path, preds_by_t: dict[int, list[dict]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for t, preds in preds_by_t.items():
        (folder / f"varied_t{t}.json").write_text(json.dumps(preds, ensure_ascii=False))


def variant_differences(
    bench: Path, pred_dir: Path, records: dict[str, Any], ours: dict[str, Any]
) -> dict[str, Any]:
    """Where the paper variant (autolabel parser + paper tolerances) differs from the default."""
    paper = score_strideqa(bench, pred_dir, pred_dir / "paper.scores.json", "paper", "autolabel")
    parse_only = score_strideqa(
        bench, pred_dir, pred_dir / "parse.scores.json", "published", "autolabel"
    )
    preds = {}
    for f in sorted(pred_dir.glob("*_t*.json")):
        for rec in json.loads(f.read_text()):
            preds[rec["question_id"]] = rec["pred"]
    base = {(r["question_id"], r["qa_type"]): r for r in ours["rows"] if r["qa_type"] != "lsr"}
    reasons: Counter = Counter()
    examples: dict[str, list[str]] = {}
    n_paper = n_parse = 0
    for name, result in (("parser", parse_only), ("paper", paper)):
        for r in result["rows"]:
            if r["qa_type"] == "lsr":
                continue
            b = base[(r["question_id"], r["qa_type"])]
            if b["success"] == r["success"]:
                continue
            if name == "paper":
                n_paper += 1
                continue
            n_parse += 1
            gt = records[r["question_id"]]["gt_value"][r["qa_type"]]
            why = _reason(preds[r["question_id"]], r["qa_type"], b["pred_value"], r["pred_value"])
            reasons[why] += 1
            ex = examples.setdefault(why, [])
            if len(ex) < 3:
                ex.append(
                    f"{preds[r['question_id']]!r} ({r['qa_type']}, gt {gt}): published "
                    f"{b['pred_value']} -> {b['success']}, autolabel {r['pred_value']} -> "
                    f"{r['success']}"
                )
    return {
        "parser_differences": n_parse,
        "paper_differences": n_paper,
        "reasons": dict(reasons.most_common()),
        "examples": examples,
        "paper_metrics": headline(paper),
    }


def _reason(text: str, qa_type: str, published: Any, autolabel: Any) -> str:
    low = text.lower()
    if qa_type == "direction":
        if "o'clock" in low:
            return "clock words: autolabel reads the hour as a bearing, published reads none"
        if "left" in low or "right" in low:
            return "side word: autolabel signs the angle (right = negative), published does not"
        if "\u2212" in text or "minus" in low:
            return "Unicode minus / 'minus': autolabel keeps the sign, published drops it"
    if qa_type == "velocity" and published is None:
        return "no space before the speed unit ('5m/s'): published reads none"
    if qa_type == "distance":
        if re.search(r"\d\s*in\b", text):
            return (
                "bare 'in' after a number: published reads inches, autolabel does not (it is "
                "usually the preposition, '3 in front')"
            )
        if any(c + "-" in text for c in "0123456789") and published is not None:
            return "range '5-10 m': autolabel takes the midpoint, published the upper end"
        if "," in text:
            return "thousands separator: published reads the digits after the comma"
        if published is not None and autolabel is not None and published != autolabel:
            return "several lengths: published takes the first unit class (inch, ft, cm, m, km)"
    if published is None and autolabel is not None:
        return "autolabel reads a value the published parser misses"
    if autolabel is None and published is not None:
        return "published reads a value autolabel rejects"
    return "other"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench", type=Path, help="a --format strideqa benchmark folder")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--answers", type=int, default=1200, help="at least this many varied answers")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--root", type=Path, default=os.environ.get("STRIDEQA_BENCH_ROOT"))
    ap.add_argument("--python", default=os.environ.get("STRIDEQA_BENCH_PYTHON", sys.executable))
    ap.add_argument("--no-plots", action="store_true", help="skip the official scorer's plots")
    args = ap.parse_args()
    if args.root is None:
        ap.error("--root or STRIDEQA_BENCH_ROOT must name the STRIDE-QA-Bench checkout")
    records, _ = read_annotations(args.bench)
    by_t: dict[int, list[dict]] = {}
    for f in sorted((args.bench / ANNOTATION_DIR).glob("strideqa_bench_t*.json")):
        by_t[int(f.stem[-1])] = json.loads(f.read_text())
    sets: list[tuple[str, Path]] = [
        (name, args.bench / "baselines" / name) for name in ("oracle", "constant", "random")
    ]
    n_sets = -(-args.answers // max(1, len(records)))
    for k in range(n_sets):
        folder = args.out / "answers" / f"varied-{k}"
        seed = args.seed * 1000 + k
        _write_predictions(
            folder, {t: varied_predictions(recs, seed * 10 + t) for t, recs in by_t.items()}
        )
        sets.append((f"varied-{k}", folder))
    # A partial answer file: a seeded quarter of the questions left out (both score what is there).
    folder = args.out / "answers" / "partial"
    rng = np.random.default_rng(args.seed + 7)
    _write_predictions(
        folder,
        {
            t: [p for p in varied_predictions(recs, 999 + t) if rng.random() >= 0.25]
            for t, recs in by_t.items()
        },
    )
    sets.append(("partial", folder))
    table, results = [], {}
    variant_total: Counter = Counter()
    variant_examples: dict[str, list[str]] = {}
    for name, folder in sets:
        official = run_official(
            args.root,
            args.python,
            args.bench,
            folder,
            args.out / "official" / name,
            plots=not args.no_plots,
        )
        ours = score_strideqa(args.bench, folder, args.out / "autolabel" / f"{name}.json")
        cmp = compare(official, ours)
        results[name] = cmp
        if name.startswith("varied"):
            v = variant_differences(args.bench, folder, records, ours)
            cmp["variant"] = v
            variant_total.update(v["reasons"])
            for why, ex in v["examples"].items():
                variant_examples.setdefault(why, []).extend(
                    ex[: 3 - len(variant_examples.get(why, []))]
                )
        table.append((name, cmp))
    lines = [
        "| answers | rows (quantity + LSR) | agree | scorer | "
        + " | ".join(f"LSR@{t}" for t in TIMES)
        + " | MLSR | TLC |",
        "|---|---|---|---|" + "---|" * (len(TIMES) + 2),
    ]
    for name, cmp in table:
        for who in ("official", "autolabel"):
            vals = " | ".join(report_percent(cmp["metrics"][m][who]) for m in cmp["metrics"])
            lines.append(
                f"| {name if who == 'official' else ''} | "
                f"{cmp['rows'] if who == 'official' else ''} | "
                f"{cmp['agree'] if who == 'official' else ''} | {who} | {vals} |"
            )
    n_q = sum(c["question_rows"] for n, c in table if n.startswith("varied"))
    all_equal = all(
        c["agree"] == c["rows"]
        and all(m["printed_equal"] and m["equal_8dp"] for m in c["metrics"].values())
        for _, c in table
    )
    lines += [
        "",
        f"varied answers: {sum(1 for n, _ in table if n.startswith('varied')) * len(records)} "
        f"({n_q} quantity rows); every row and metric equal: {all_equal}",
        "",
        "Paper variant (autolabel parser; paper tolerances) vs the default, varied sets:",
        "",
        "| reason (autolabel parser vs published parser) | rows |",
        "|---|---|",
    ]
    lines += [f"| {why} | {n} |" for why, n in variant_total.most_common()]
    summary = {
        "all_equal": all_equal,
        "sets": results,
        "variant_reasons": dict(variant_total),
        "variant_examples": variant_examples,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "equivalence.json").write_text(json.dumps(summary, indent=1, default=str))
    (args.out / "equivalence.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    for why, ex in variant_examples.items():
        print(f"\n{why}:")
        for e in ex:
            print(f"  {e}")


if __name__ == "__main__":
    main()
