"""Reference answer files for a benchmark: the oracle (scores 100 %) and floors.

- ``oracle``: the generated answer text of every question (exercises the parser on every template
  phrasing; any score below 100 % is a parser or key bug).
- ``constant``: one answer per question type, the best single answer for it on this benchmark:
  the median of each true number and the most common discrete answer (option "(A)" for multiple
  choice, the first-named region for "which region" questions). An optimistic prior-only floor.
- ``random``: seeded uniform guesses: a random option, yes/no, side, clock hour, region or camera;
  numbers uniform over the benchmark's range of that type (bearings over the full circle).

Answers are written as short sentences with units ("12.50 meters at -24 degrees") and read back
through the same parser as any model's answers.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from autolabel.atomic_io import atomic_write_text, canonical_json
from autolabel.benchmark.answer_parser import CAMERA_PARTS

BASELINES = ("oracle", "constant", "random")
_CAMERA_WORDS = {v: f"{k[0]}{'-' + k[1] if k[1] else ''} camera" for k, v in CAMERA_PARTS.items()}
_OUTCOME_WORDS = {
    "left": "Left.",
    "right": "Right.",
    "front": "In front.",
    "behind": "Behind.",
    "bigger": "Bigger.",
    "smaller": "Smaller.",
}
_BINARY = {
    "side": ("left", "right"),
    "front_behind": ("front", "behind"),
    "size": ("bigger", "smaller"),
    "yes_no": ("yes", "no"),
}


def answer_text(kind: str, values: Mapping[str, Any]) -> str:
    """A short answer sentence stating ``values`` of an answer kind, with units."""
    if kind == "distance":
        return f"{values['distance_m']:.2f} meters."
    if kind == "bearing":
        return f"{values['bearing_deg']:.0f} degrees."
    if kind == "heading":
        return f"{values['heading_deg']:.0f} degrees."
    if kind == "position":
        return f"{values['distance_m']:.2f} meters at {values['bearing_deg']:.0f} degrees."
    if kind == "speed":
        return f"{values['speed_mps']:.1f} m/s."
    if kind == "ego_speed":
        return f"{values['ego_speed_mps']:.1f} m/s."
    if kind == "clock":
        return f"{int(values['clock'])} o'clock."
    if kind == "yes_no":
        return "Yes." if values["yes_no"] == "yes" else "No."
    if kind == "choice":
        return f"({values['choice']})"
    if kind in ("side", "front_behind", "size"):
        return _OUTCOME_WORDS[values["outcome"]]
    if kind == "region":
        return f"Region [{int(values['region_id'])}]."
    if kind == "cameras":
        return " and ".join(f"the {_CAMERA_WORDS[c]}" for c in values["cameras"]).capitalize() + "."
    if kind == "count":
        return f"{int(round(values['count']))}."
    if kind == "label":
        return values["outcome"].replace("_", " ").capitalize() + "."
    if kind == "order":
        return ", then ".join(f"Region [{int(r)}]" for r in values["region_ids"]) + "."
    raise ValueError(f"unknown answer kind {kind!r}")


def oracle_answers(entries: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Question id -> the generated answer text."""
    return {str(e["id"]): str(e["answer"]) for e in entries}


def _type_key(e: Mapping[str, Any]) -> tuple[str, str]:
    return (str(e["type"]), str(e["spec"]["kind"]))


def constant_answers(entries: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Question id -> the best single answer of its question type (median / mode of the truth)."""
    by_type: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for e in entries:
        by_type[_type_key(e)].append(e)
    out: dict[str, str] = {}
    for (_, kind), group in by_type.items():
        truths = [e["truth"] for e in group]
        if kind == "choice":
            constant = {"choice": "A"}
        elif kind in ("region", "order"):
            constant = None  # the regions as each question names them, below
        elif kind in ("cameras",):
            common = Counter(tuple(t["cameras"]) for t in truths).most_common(1)[0][0]
            constant = {"cameras": list(common)}
        elif kind == "count":
            constant = {"count": int(round(float(np.median([t["count"] for t in truths]))))}
        elif kind in ("clock", "yes_no", "side", "front_behind", "size", "label"):
            name = "clock" if kind == "clock" else ("yes_no" if kind == "yes_no" else "outcome")
            # Most common answer; ties go to the smallest value so the choice is deterministic.
            counts = Counter(str(t[name]) for t in truths)
            best = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
            constant = {name: int(best) if kind == "clock" else best}
        else:
            names = list(truths[0])
            constant = {n: float(np.median([float(t[n]) for t in truths])) for n in names}
        for e in group:
            if kind == "region":
                values = {"region_id": e["spec"]["region_ids"][0]}
            elif kind == "order":
                values = {"region_ids": e["spec"]["region_ids"]}
            else:
                values = constant
            out[str(e["id"])] = answer_text(kind, values)
    return out


def random_answers(entries: Sequence[Mapping[str, Any]], seed: int = 0) -> dict[str, str]:
    """Question id -> a seeded uniform guess (see the module docstring)."""
    rng = np.random.default_rng(seed)
    ranges: dict[tuple[str, str], dict[str, tuple[float, float]]] = {}
    for e in entries:
        r = ranges.setdefault(_type_key(e), {})
        for name, value in e["truth"].items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                lo, hi = r.get(name, (float(value), float(value)))
                r[name] = (min(lo, float(value)), max(hi, float(value)))
    out: dict[str, str] = {}
    channels = list(CAMERA_PARTS.values())
    for e in entries:
        kind = e["spec"]["kind"]
        spec = e["spec"]
        if kind == "choice":
            values: dict[str, Any] = {"choice": spec["letters"][rng.integers(len(spec["letters"]))]}
        elif kind in _BINARY:
            name = "yes_no" if kind == "yes_no" else "outcome"
            values = {name: _BINARY[kind][rng.integers(2)]}
        elif kind == "clock":
            values = {"clock": int(rng.integers(1, 13))}
        elif kind == "region":
            ids = spec["region_ids"]
            values = {"region_id": ids[rng.integers(len(ids))]}
        elif kind == "cameras":
            values = {"cameras": [channels[rng.integers(len(channels))]]}
        elif kind == "label":
            labels = [k for k, _ in spec["label_words"]]
            values = {"outcome": labels[rng.integers(len(labels))]}
        elif kind == "order":
            values = {"region_ids": list(rng.permutation(spec["region_ids"]))}
        elif kind == "count":
            lo, hi = ranges[_type_key(e)]["count"]
            values = {"count": int(rng.integers(int(lo), int(hi) + 1))}
        else:
            values = {}
            for name, (lo, hi) in ranges[_type_key(e)].items():
                if name.endswith("_deg"):
                    values[name] = float(rng.uniform(-180.0, 180.0))
                elif name.endswith("_mps"):
                    values[name] = float(rng.uniform(0.0, max(hi, 1.0)))
                else:
                    values[name] = float(rng.uniform(lo, hi))
        out[str(e["id"])] = answer_text(kind, values)
    return out


def baseline_answers(
    name: str, entries: Sequence[Mapping[str, Any]], seed: int = 0
) -> dict[str, str]:
    """Answers of baseline ``name`` (one of ``BASELINES``)."""
    if name == "oracle":
        return oracle_answers(entries)
    if name == "constant":
        return constant_answers(entries)
    if name == "random":
        return random_answers(entries, seed)
    raise ValueError(f"unknown baseline {name!r} (one of {', '.join(BASELINES)})")


def write_answers(path: str | Path, answers: Mapping[str, str], order: Sequence[str]) -> Path:
    """Write ``{"id", "answer"}`` lines in ``order`` (atomically; canonical JSON)."""
    lines = [canonical_json({"id": qid, "answer": answers[qid]}) for qid in order if qid in answers]
    return atomic_write_text(path, "".join(line + "\n" for line in lines))
