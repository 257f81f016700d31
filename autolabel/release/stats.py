"""Release statistics: counts per split, category, question type and class; distance and speed
histograms of the answers; anonymization figures; and plots of them (PNG, no metadata chunks).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from autolabel.atomic_io import atomic_write_bytes

#: Histogram bin edges (metres, m/s).
DISTANCE_EDGES_M = (0, 5, 10, 15, 20, 30, 40, 50, 60, 80, 100, 150)
SPEED_EDGES_MPS = (0, 0.5, 1, 2, 4, 6, 8, 10, 12, 15, 20, 30)


def _answer_numbers(values: Mapping[str, Any], predicate) -> list[float]:
    return [
        float(v)
        for k, v in values.items()
        if predicate(k) and isinstance(v, (int, float)) and not isinstance(v, bool)
    ]


def _histogram(values: Sequence[float], edges: Sequence[float]) -> dict[str, Any]:
    v = np.asarray(values, dtype=np.float64)
    counts, _ = np.histogram(np.clip(v, edges[0], edges[-1]), bins=np.asarray(edges, np.float64))
    return {"edges": [float(e) for e in edges], "counts": counts.astype(int).tolist()}


def _sorted_counts(counter: Counter) -> dict[str, int]:
    return {k: int(counter[k]) for k in sorted(counter)}


def release_statistics(
    rows_by_split: Mapping[str, Sequence[Mapping[str, Any]]], anonymization: Mapping[str, Any]
) -> dict[str, Any]:
    """Counts and histograms of the release rows (``records.release_row`` plus ``split``).

    Distances are every answer value named ``distance*_m``; speeds every ``*speed_mps``
    (agent and ego speeds are kept apart).
    """
    out: dict[str, Any] = {"splits": {}, "anonymization": dict(anonymization)}
    total = Counter()
    for split in sorted(rows_by_split):
        rows = rows_by_split[split]
        category, qtype, cls, cameras = Counter(), Counter(), Counter(), Counter()
        distance, agent_speed, ego_speed = [], [], []
        images = 0
        for r in rows:
            category[r["category"]] += 1
            qtype[r["type"]] += 1
            images += len(r["image_ids"])
            for cam in r["cameras"]:
                cameras[cam] += 1
            for region in json.loads(r["regions"]):
                cls[region["class"]] += 1
            values = json.loads(r["answer_values"])
            distance += _answer_numbers(
                values, lambda k: k.startswith("distance") and k.endswith("_m")
            )
            agent_speed += _answer_numbers(
                values, lambda k: k.endswith("speed_mps") and not k.startswith("ego")
            )
            ego_speed += _answer_numbers(values, lambda k: k.startswith("ego_speed"))
        clips = len({r["clip_id"] for r in rows})
        out["splits"][split] = {
            "records": len(rows),
            "clips": clips,
            "images": images,
            "categories": _sorted_counts(category),
            "types": _sorted_counts(qtype),
            "region_classes": _sorted_counts(cls),
            "cameras": _sorted_counts(cameras),
            "distance_m": _histogram(distance, DISTANCE_EDGES_M),
            "agent_speed_mps": _histogram(agent_speed, SPEED_EDGES_MPS),
            "ego_speed_mps": _histogram(ego_speed, SPEED_EDGES_MPS),
        }
        total["records"] += len(rows)
        total["clips"] += clips
        total["images"] += images
    out["total"] = dict(total)
    return out


def _save(fig, path: Path) -> Path:
    import io

    buf = io.BytesIO()
    # No "Software" text chunk: the leak scanner rejects PNG text, and bytes must not vary.
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    return atomic_write_bytes(path, buf.getvalue())


def write_plots(stats: Mapping[str, Any], out_dir: str | Path) -> list[Path]:
    """Bar charts (categories, types, classes) and histograms (distance, speeds) per split."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    splits = sorted(stats["splits"])
    paths = []
    for key, title in (
        ("categories", "QA records per category"),
        ("types", "QA records per question type"),
        ("region_classes", "Regions per class"),
    ):
        names = sorted({n for s in splits for n in stats["splits"][s][key]})
        fig, ax = plt.subplots(figsize=(max(6.0, 0.35 * len(names) + 2), 4.0))
        x = np.arange(len(names))
        width = 0.8 / max(len(splits), 1)
        for i, s in enumerate(splits):
            counts = [stats["splits"][s][key].get(n, 0) for n in names]
            ax.bar(x + i * width, counts, width, label=s)
        ax.set_xticks(x + 0.4 - width / 2, names, rotation=60, ha="right", fontsize=7)
        ax.set_title(title)
        ax.legend()
        fig.tight_layout()
        paths.append(_save(fig, out / f"{key}.png"))
        plt.close(fig)
    for key, title, unit in (
        ("distance_m", "Distances in answers", "m"),
        ("agent_speed_mps", "Agent speeds in answers", "m/s"),
        ("ego_speed_mps", "Ego speeds in answers", "m/s"),
    ):
        fig, ax = plt.subplots(figsize=(6.0, 3.5))
        for s in splits:
            h = stats["splits"][s][key]
            edges = np.asarray(h["edges"])
            ax.stairs(h["counts"], np.arange(len(edges)), label=s)
            ax.set_xticks(np.arange(len(edges)), [f"{e:g}" for e in edges], fontsize=7)
        ax.set_xlabel(unit)
        ax.set_title(title)
        ax.legend()
        fig.tight_layout()
        paths.append(_save(fig, out / f"{key}.png"))
        plt.close(fig)
    return paths
