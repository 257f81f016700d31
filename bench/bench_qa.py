"""Benchmark QA generation: QA pairs per second and per clip, type and class distribution.

Builds constructed 20 s clips (``autolabel.qa.scenes``: tracked objects at constant velocity, the
nuScenes rig, projected-box grounding), then times ``generate_clip_qa`` (excluding the scene
construction) and, as a peer figure measured in the same run, ``check_clip_qa`` on the same records.
Prints wall-clock and process-CPU rates (the CPU figure is the one to compare on a shared machine).
Writes ``qa_distribution.png`` (questions per type, coloured by category; questions per class) and
``qa_bench.json`` to ``--out``.

    python bench/bench_qa.py --clips 8 --objects 30 --out bench_out/qa
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

# Run as a script from any checkout: import this checkout's packages, not an installed copy.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autolabel.atomic_io import atomic_write_bytes, atomic_write_json
from autolabel.qa import QAConfig, generate_clip_qa, load_templates
from autolabel.qa.check import check_clip_qa
from autolabel.qa.generate import dumps_qa_jsonl
from autolabel.qa.scenes import constant_velocity_scene


def plot_distribution(per_type: Counter, per_class: Counter, category_of: dict, path: Path) -> None:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cats = sorted(set(category_of.values()), key=list(category_of.values()).index)
    colours = dict(zip(cats, plt.get_cmap("tab10").colors, strict=False))
    types = list(category_of)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(15, 6), gridspec_kw={"width_ratios": [3, 1]})
    ax1.bar(
        range(len(types)),
        [per_type[t] for t in types],
        color=[colours[category_of[t]] for t in types],
    )
    ax1.set_xticks(range(len(types)), types, rotation=75, ha="right", fontsize=8)
    ax1.set_ylabel("QA pairs")
    ax1.set_title("QA pairs per question type")
    from matplotlib.patches import Patch

    ax1.set_ylim(0, 1.2 * max(per_type.values()))
    ax1.legend(
        handles=[Patch(color=colours[c], label=c) for c in cats],
        fontsize=8,
        ncol=len(cats),
        loc="upper center",
    )
    classes = [c for c, _ in per_class.most_common()]
    ax2.barh(classes[::-1], [per_class[c] for c in classes[::-1]], color="tab:gray")
    ax2.set_title("QA pairs per class (region A)")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clips", type=int, default=8)
    ap.add_argument("--objects", type=int, default=30, help="tracked objects per clip")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("bench_out/qa"))
    args = ap.parse_args()

    templates = load_templates()
    config = QAConfig(seed=args.seed)
    scenes = [
        constant_velocity_scene(
            n_objects=args.objects, seed=args.seed + i, clip=f"scene-bench-{i:03d}"
        )
        for i in range(args.clips)
    ]
    # Warm-up (imports, numpy dispatch) on a small clip, not timed.
    generate_clip_qa(scenes[0].attrs, scenes[0].regions[:2], scenes[0].meta, config, templates)

    gen_s, gen_cpu_s, check_s, n_qa, n_regions, n_bytes = [], [], [], [], [], 0
    per_type: Counter = Counter()
    per_class: Counter = Counter()
    region_classes: Counter = Counter()
    mismatches = 0
    for s in scenes:
        t0, c0 = time.perf_counter(), time.process_time()
        records = generate_clip_qa(s.attrs, s.regions, s.meta, config, templates)
        gen_s.append(time.perf_counter() - t0)
        gen_cpu_s.append(time.process_time() - c0)
        n_bytes += len(dumps_qa_jsonl(records).encode())
        t0 = time.perf_counter()
        mismatches += len(check_clip_qa(records, s.attrs, s.meta.clip, templates))
        check_s.append(time.perf_counter() - t0)
        n_qa.append(len(records))
        n_regions.append(sum(len(kr) for kr in s.regions))
        for kr in s.regions:
            rows = s.attrs.row_of(np.full(len(kr), kr.keyframe_index), kr.track_id)
            region_classes.update(s.attrs.class_name[rows].tolist())
        per_type.update(r["type"] for r in records)
        per_class.update(r["regions"][0]["class"] if r["regions"] else "ego" for r in records)

    total_qa = sum(n_qa)
    gen_rate = total_qa / sum(gen_s)
    check_rate = total_qa / sum(check_s)
    category_of = {t: qt.category for t, qt in templates.types.items()}
    top_type_share = max(per_type.values()) / total_qa
    top_class, top_class_n = per_class.most_common(1)[0]
    result = {
        "clips": args.clips,
        "objects_per_clip": args.objects,
        "regions_per_clip_mean": float(np.mean(n_regions)),
        "qa_pairs": total_qa,
        "qa_per_clip_mean": float(np.mean(n_qa)),
        "generate_qa_per_s": gen_rate,
        "generate_s_per_clip_mean": float(np.mean(gen_s)),
        "generate_qa_per_cpu_s": total_qa / sum(gen_cpu_s),
        "check_qa_per_s": check_rate,
        "check_mismatches": mismatches,
        "jsonl_mb_per_clip": n_bytes / args.clips / 1e6,
        "max_type_share": top_type_share,
        "top_class": top_class,
        "top_class_share": top_class_n / total_qa,
        "top_class_share_of_regions": region_classes[top_class] / sum(region_classes.values()),
        "per_type": dict(per_type),
        "per_class": dict(per_class),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(args.out / "qa_bench.json", result, indent=1)
    plot_distribution(per_type, per_class, category_of, args.out / "qa_distribution.png")

    print(
        f"clips: {args.clips} ({args.objects} objects, {np.mean(n_regions):.0f} regions per clip over its keyframes)"
    )
    print(f"qa_pairs: {total_qa}")
    print(f"qa_per_clip: {np.mean(n_qa):.1f}")
    print(f"generate_qa_per_s: {gen_rate:.0f}  ({np.mean(gen_s) * 1000:.0f} ms per clip, wall)")
    print(
        f"generate_qa_per_cpu_s: {total_qa / sum(gen_cpu_s):.0f}  (process CPU time; the wall figure includes waiting for a shared CPU)"
    )
    print(f"check_qa_per_s: {check_rate:.0f}  (generate / check = {gen_rate / check_rate:.2f})")
    print(f"check_mismatches: {mismatches}")
    print(f"jsonl_mb_per_clip: {n_bytes / args.clips / 1e6:.2f}")
    print(
        f"max_type_share: {top_type_share:.3f} (uniform over {len(per_type)} types: {1 / len(per_type):.3f})"
    )
    region_share = region_classes[top_class] / sum(region_classes.values())
    print(
        f"top_class: {top_class} {top_class_n / total_qa:.3f} of QA pairs ({region_share:.3f} of regions)"
    )
    print(f"plot: {args.out / 'qa_distribution.png'}")


if __name__ == "__main__":
    main()
