"""Benchmark metrics (DESIGN.md "Benchmark metrics", STRIDE-QA): tolerances, per-question success,
LSR@t, MLSR, TLC, per-dimension success rates, accuracies and their breakdowns.

Tolerances (STRIDE-QA, seed 003):

- distance: ``|d_pred - d_gt| < 0.25 d_gt``;
- bearing (and any angle: relative heading): ``|wrap(theta_pred - theta_gt)| < 10`` degrees, the
  difference wrapped to (-180, 180];
- localization success (LSR) of a position: distance and bearing both succeed;
- speed (ego and agent): within 20 % of the true speed, or within an absolute floor where the true
  speed is slow (the hybrid tolerance);
- qualitative answers (left/right, clock position, which region, yes/no, cameras) and multiple
  choice: exact.

Two named tolerance profiles (:data:`TOLERANCE_PROFILES`; DESIGN.md "Benchmark metrics"):

- ``published`` (the default): the authors' published scorer (STRIDE-QA-Bench,
  ``config/tolerance.yaml`` + ``utils/metric_utils.py``), edges inclusive:
  ``gt (1 - 0.25) <= d_pred <= gt (1 + 0.25)``, ``|wrap(theta_pred - theta_gt)| <= 10``, speed
  ``gt (1 - 0.2) <= v_pred <= gt (1 + 0.2)``, or ``|v_pred - v_gt| <= 0.2 x 0.5 = 0.1`` m/s where
  the true speed is below 0.5 m/s. The products are computed as that scorer computes them, so an
  answer on an edge scores as it does there. Users compare with numbers from it.
- ``paper``: the paper's text: ``|d_pred - d_gt| < 0.25 d_gt``, ``|wrap| < 10``, speed within
  20 % or within 0.5 m/s where the true speed is below 1.0 m/s.

Over spatiotemporal scene groups g (one target, t = 0, 1, 2, 3 s) with LSR bits s[g, t]:
``LSR@t = mean_g s[g, t]``, ``MLSR = mean_g mean_t s[g, t]``, ``TLC = mean_g all_t s[g, t]``.
Per-dimension success rates ``SR`` of distance, bearing, ego speed and agent speed at each t.
Quantitative spatial questions (SpatialRGPT style) score success within the tolerance of their
quantity; qualitative ones and multiple choice score accuracy. All figures are fractions in [0, 1].

Dynamic-object questions (the ``dynamic`` set: appearance, action, counting, temporal order) score
exact accuracy (a count must be exact), reported per subtask as 4D-Bench does (``by_subtask``,
and ``subtask_overall``, the mean over subtasks). Counts and the other numeric answers (distances,
speeds) are also scored with SPAR's mean relative accuracy (:func:`mean_relative_accuracy`, ``MRA``
per value name).

A question's expected answer is an :class:`~autolabel.benchmark.answer_parser.AnswerSpec` plus the
true values; :func:`answer_spec` derives both from a ``qa.jsonl`` record and its template.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from autolabel.benchmark.answer_parser import ANSWER_KINDS, AnswerSpec, parse_answer


@dataclass(frozen=True)
class Tolerances:
    """One named tolerance profile of the numeric answers.

    Attributes:
        name: ``published`` or ``paper``.
        distance_rel: relative distance tolerance (SpatialRGPT, STRIDE-QA: 0.25).
        angle_deg: angle tolerance, degrees (10 degrees is a 3.5 m lane at 10 m).
        speed_rel: relative speed tolerance.
        speed_slow_mps: true speeds below this use the absolute floor instead.
        speed_abs_mps: the absolute floor, m/s.
        inclusive: edges count as success (``<=``, the published scorer) or not (``<``).
    """

    name: str
    distance_rel: float
    angle_deg: float
    speed_rel: float
    speed_slow_mps: float
    speed_abs_mps: float
    inclusive: bool


#: The authors' published scorer: floor 0.2 x 0.5 m/s below 0.5 m/s, edges inclusive.
PUBLISHED = Tolerances("published", 0.25, 10.0, 0.2, 0.5, 0.5 * 0.2, True)
#: The paper's text: 0.5 m/s below 1.0 m/s, distance and angle edges exclusive.
PAPER = Tolerances("paper", 0.25, 10.0, 0.2, 1.0, 0.5, False)
TOLERANCE_PROFILES: dict[str, Tolerances] = {t.name: t for t in (PUBLISHED, PAPER)}
DEFAULT_PROFILE = "published"

#: The default profile's values (kept as names for the summaries that print them).
DISTANCE_REL_TOL = PUBLISHED.distance_rel
ANGLE_TOL_DEG = PUBLISHED.angle_deg
SPEED_REL_TOL = PUBLISHED.speed_rel
SPEED_ABS_TOL_MPS = PUBLISHED.speed_abs_mps
SPEED_SLOW_MPS = PUBLISHED.speed_slow_mps
#: Spatiotemporal horizons of a scene group, seconds.
HORIZONS_S = (0.0, 1.0, 2.0, 3.0)
#: Benchmark sets.
SETS = ("spatiotemporal", "spatial", "multiple_choice", "dynamic")
#: SPAR / VSI-Bench mean relative accuracy thresholds: 0.50, 0.55, ..., 0.95.
MRA_THRESHOLDS = tuple(round(0.50 + 0.05 * k, 2) for k in range(10))
#: Numeric answers scored with MRA (angles and clock hours are not ratios).
MRA_VALUES = ("count", "distance_m", "speed_mps", "ego_speed_mps")

#: Answer kind of each registered quantity (the question type's ``quantity``).
_QUANTITY_KIND = {
    "pair_distance": "distance",
    "region_distance": "distance",
    "pair_clock": "clock",
    "pair_left_right": "side",
    "ego_side_of_region": "side",
    "pair_front_behind": "front_behind",
    "pair_bigger": "region",
    "pair_taller": "region",
    "pair_wider": "region",
    "pair_longer": "region",
    "pair_closer_to_ego": "region",
    "ego_size_vs_region": "size",
    "region_speed": "speed",
    "future_agent_speed": "speed",
    "ego_speed": "ego_speed",
    "future_ego_speed": "ego_speed",
    "future_position": "position",
    "visible_cameras": "cameras",
    "visible_in_both": "yes_no",
    "motion_state": "label",
    "speed_trend": "label",
    "turn_direction": "label",
    "lane_change": "label",
    "range_trend": "label",
    "region_colour": "label",
    "comes_within": "yes_no",
    "count_visible": "count",
    "count_crossing": "count",
    "first_seen_order": "region",
    "passes_first": "region",
    "appearance_order": "order",
}
#: Words that state each outcome of a ``label`` answer, per quantity (the generated phrasings'
#: and the common synonyms; a prefix such as "accelerat" matches every form).
_LABEL_WORDS: dict[str, dict[str, tuple[str, ...]]] = {
    "motion_state": {
        "moving": ("moving", "in motion", "driving", "walking", "travelling", "traveling"),
        "stopped": ("stopped", "standing still", "stationary", "not moving", "parked", "at rest"),
    },
    "speed_trend": {
        "accelerating": ("accelerat", "speeding up", "speeds up", "faster"),
        "braking": ("brak", "slowing", "slows down", "decelerat", "slower"),
        "steady": (
            "steady",
            "keeping its speed",
            "keeps its speed",
            "constant speed",
            "same speed",
        ),
    },
    "turn_direction": {
        "left": ("left",),
        "right": ("right",),
        "straight": ("straight", "not turning", "no turn"),
    },
    "lane_change": {
        "left": ("left",),
        "right": ("right",),
        "none": (
            "keeps its lane",
            "keeping its lane",
            "stays in its lane",
            "same lane",
            "none",
            "does not change lane",
            "doesn't change lane",
            "no lane change",
            "not changing lane",
        ),
    },
    "range_trend": {
        "approaching": ("approach", "getting closer", "coming closer", "closer", "towards"),
        "receding": ("moving away", "receding", "getting farther", "farther", "further away"),
    },
}


def _label_words(qt: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    name = qt.quantity.name
    keys = qt.quantity.outcome_keys(qt.params, qt.n_regions) or ()
    if name == "region_colour":
        table = {k: (k, "gray") if k == "grey" else (k,) for k in keys}
    else:
        table = _LABEL_WORDS[name]
    return tuple((k, table[k]) for k in keys)


#: Quantities whose answer is a direction: degrees when quantitative, a clock when qualitative.
_ANGLE_QUANTITY = {"region_bearing": "bearing", "region_heading": "heading"}
#: Subject and reference roles of relation answers ("B is left of A"; "the ego is left of A").
_RELATION_PARTIES = {
    "pair_left_right": ("B", "A"),
    "pair_front_behind": ("B", "A"),
    "ego_side_of_region": ("ego", "A"),
    "ego_size_vs_region": ("ego", "A"),
}


# ----------------------------------------------------------------------------- tolerances


def wrap_deg_array(angle_deg: np.ndarray) -> np.ndarray:
    """(N,) angles wrapped to (-180, 180] degrees."""
    a = np.asarray(angle_deg, dtype=np.float64)
    w = np.mod(a + 180.0, 360.0) - 180.0
    return np.where(w == -180.0, 180.0, w)


def tolerances(profile: str | Tolerances = DEFAULT_PROFILE) -> Tolerances:
    """The named tolerance profile (``published`` or ``paper``), or ``profile`` itself."""
    if isinstance(profile, Tolerances):
        return profile
    if profile not in TOLERANCE_PROFILES:
        raise ValueError(
            f"unknown tolerance profile {profile!r} (one of {', '.join(TOLERANCE_PROFILES)})"
        )
    return TOLERANCE_PROFILES[profile]


def _within_relative(pred: np.ndarray, gt: np.ndarray, rel: float, inclusive: bool) -> np.ndarray:
    if inclusive:
        # The published scorer's arithmetic: gt (1 - r) <= pred <= gt (1 + r), products first.
        return (gt * (1.0 - rel) <= pred) & (pred <= gt * (1.0 + rel))
    return np.abs(pred - gt) < rel * gt


def distance_success(
    pred_m: np.ndarray, gt_m: np.ndarray, profile: str | Tolerances = DEFAULT_PROFILE
) -> np.ndarray:
    """(N,) bool: within 25 % of the true distance (edges per ``profile``); False where the
    prediction is missing (NaN)."""
    tol = tolerances(profile)
    pred, gt = np.asarray(pred_m, np.float64), np.asarray(gt_m, np.float64)
    with np.errstate(invalid="ignore"):
        return np.isfinite(pred) & _within_relative(pred, gt, tol.distance_rel, tol.inclusive)


def angle_success(
    pred_deg: np.ndarray, gt_deg: np.ndarray, profile: str | Tolerances = DEFAULT_PROFILE
) -> np.ndarray:
    """(N,) bool: the difference wrapped to [-180, 180) is within 10 degrees (edge per
    ``profile``); False where missing."""
    tol = tolerances(profile)
    pred, gt = np.asarray(pred_deg, np.float64), np.asarray(gt_deg, np.float64)
    with np.errstate(invalid="ignore"):
        # (p - g + 180) mod 360 - 180 in the published scorer's operation order; |.| makes the
        # -180/180 end irrelevant.
        diff = np.abs(np.mod(pred - gt + 180.0, 360.0) - 180.0)
        ok = diff <= tol.angle_deg if tol.inclusive else diff < tol.angle_deg
        return np.isfinite(pred) & ok


def speed_success(
    pred_mps: np.ndarray, gt_mps: np.ndarray, profile: str | Tolerances = DEFAULT_PROFILE
) -> np.ndarray:
    """(N,) bool: within 20 % of the true speed, or within the absolute floor where the true
    speed is slow (``published``: 0.1 m/s below 0.5 m/s; ``paper``: 0.5 m/s below 1.0 m/s)."""
    tol = tolerances(profile)
    pred, gt = np.asarray(pred_mps, np.float64), np.asarray(gt_mps, np.float64)
    with np.errstate(invalid="ignore"):
        slow = gt < tol.speed_slow_mps
        near = np.abs(pred - gt) <= tol.speed_abs_mps
        if tol.inclusive:
            rel_ok = _within_relative(pred, gt, tol.speed_rel, True)
        else:
            rel_ok = np.abs(pred - gt) <= tol.speed_rel * np.abs(gt)
        return np.isfinite(pred) & np.where(slow, near, rel_ok)


#: Numeric answer kinds: (value name, tolerance function) per dimension.
NUMERIC_DIMENSIONS: dict[str, tuple[tuple[str, Any], ...]] = {
    "distance": (("distance_m", distance_success),),
    "bearing": (("bearing_deg", angle_success),),
    "heading": (("heading_deg", angle_success),),
    "position": (("distance_m", distance_success), ("bearing_deg", angle_success)),
    "speed": (("speed_mps", speed_success),),
    "ego_speed": (("ego_speed_mps", speed_success),),
}


def mean_relative_accuracy(
    pred: np.ndarray, gt: np.ndarray, thresholds: Sequence[float] = MRA_THRESHOLDS
) -> np.ndarray:
    """(N,) SPAR's mean relative accuracy of numeric answers (VSI-Bench's definition).

    ``MRA = mean over theta in thresholds of 1[|pred - gt| / |gt| < 1 - theta]``, thresholds 0.50
    to 0.95: an answer within 5 % of the truth scores 1, within 50 % scores 0.1. A true value of 0
    (a count of none) scores 1 for an exact 0 and 0 otherwise; a missing prediction (NaN) 0.
    """
    p = np.asarray(pred, dtype=np.float64)
    g = np.asarray(gt, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(g != 0, np.abs(p - g) / np.abs(g), np.where(p == 0, 0.0, np.inf))
    rel = np.where(np.isfinite(p) & np.isfinite(g), rel, np.inf)
    theta = np.asarray(thresholds, dtype=np.float64)
    return np.mean(rel[:, None] < (1.0 - theta)[None, :], axis=1)


def _exact(kind: str, gt: Any, pred: Any) -> bool:
    if pred is None or gt is None:
        return False
    if kind == "cameras":
        return sorted(pred) == sorted(gt)
    if kind == "order":
        try:
            return [int(x) for x in pred] == [int(x) for x in gt]
        except (TypeError, ValueError):
            return False
    if kind == "count":
        try:
            return int(pred) == int(gt)
        except (TypeError, ValueError):
            return False
    if kind in ("region", "clock"):
        try:
            return int(pred) == int(gt)
        except (TypeError, ValueError):
            return False
    return pred == gt


def success_matrix(
    kinds: Sequence[str],
    truths: Sequence[Mapping[str, Any]],
    preds: Sequence[Mapping[str, Any]],
    profile: str | Tolerances = DEFAULT_PROFILE,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Per-question success and per-value success, vectorized per answer kind.

    Args:
        kinds: (N,) answer kinds (``ANSWER_KINDS``).
        truths: N dicts of true values (``answer_values`` names).
        preds: N dicts of predicted values (what :func:`parse_answer` gives).
        profile: tolerance profile of the numeric values (``published`` or ``paper``).

    Returns:
        (N,) bool success (every value of the question within tolerance), and per value name an
        (N,) bool array (False where the question has no such value).
    """
    n = len(kinds)
    kinds_arr = np.asarray(kinds, dtype=object)
    success = np.zeros(n, dtype=bool)
    per_value: dict[str, np.ndarray] = {}
    for kind in dict.fromkeys(kinds):
        idx = np.flatnonzero(kinds_arr == kind)
        if kind in NUMERIC_DIMENSIONS:
            ok = np.ones(len(idx), dtype=bool)
            for name, fn in NUMERIC_DIMENSIONS[kind]:
                gt = np.array([float(truths[i].get(name, np.nan)) for i in idx])
                pred = np.array([_as_float(preds[i].get(name)) for i in idx])
                value_ok = fn(pred, gt, profile) & np.isfinite(gt)
                per_value.setdefault(name, np.zeros(n, dtype=bool))[idx] = value_ok
                ok &= value_ok
            success[idx] = ok
        elif kind in ANSWER_KINDS:
            (name,) = ANSWER_KINDS[kind]
            ok = np.array([_exact(kind, truths[i].get(name), preds[i].get(name)) for i in idx])
            success[idx] = ok
            per_value.setdefault(name, np.zeros(n, dtype=bool))[idx] = ok
        else:
            raise ValueError(f"unknown answer kind {kind!r}")
    return success, per_value


def _as_float(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def values_agree(
    kind: str,
    truth: Mapping[str, Any],
    pred: Mapping[str, Any],
    profile: str | Tolerances = DEFAULT_PROFILE,
) -> bool:
    """Whether one structured answer agrees with the truth within the benchmark tolerances."""
    ok, _ = success_matrix([kind], [truth], [pred], profile)
    return bool(ok[0])


# ----------------------------------------------------------------------------- specs


def answer_kind(record: Mapping[str, Any], qt: Any) -> str:
    """The answer kind of a ``qa.jsonl`` record of question type ``qt`` (a ``QuestionType``)."""
    values = record.get("answer_values") or {}
    if record.get("choices"):
        return "choice"
    if "yes_no" in values:
        return "yes_no"
    name = qt.quantity.name
    if name in _ANGLE_QUANTITY:
        return _ANGLE_QUANTITY[name] if record.get("kind") == "quantitative" else "clock"
    if name in _QUANTITY_KIND:
        return _QUANTITY_KIND[name]
    raise ValueError(
        f"question type {qt.id}: no benchmark answer kind for quantity {name!r} "
        f"(add it to autolabel.benchmark.scoring._QUANTITY_KIND)"
    )


def _base_kind(qt: Any) -> str | None:
    name = qt.quantity.name
    if name in _QUANTITY_KIND:
        return _QUANTITY_KIND[name]
    return None


def _role_id(record: Mapping[str, Any], role: str) -> int | str:
    if role == "ego":
        return "ego"
    for reg in record["regions"]:
        if reg["role"] == role:
            return int(reg["region_id"])
    raise ValueError(f"record {record.get('id')}: no region with role {role}")


def answer_spec(record: Mapping[str, Any], qt: Any) -> tuple[AnswerSpec, dict[str, Any]]:
    """What a record's question expects (for the parser) and its true values (for scoring).

    Args:
        record: a ``qa.jsonl`` record.
        qt: its ``QuestionType`` (from ``load_templates``).

    Returns:
        (spec, truth): ``truth`` holds the value names of ``ANSWER_KINDS[spec.kind]``.

    Raises:
        ValueError: the record lacks a value its answer kind needs (names record and value).
    """
    kind = answer_kind(record, qt)
    values = record.get("answer_values") or {}
    region_ids = tuple(int(r["region_id"]) for r in record.get("regions") or ())
    kwargs: dict[str, Any] = {"region_ids": region_ids}
    name = qt.quantity.name
    if name in _RELATION_PARTIES and len(region_ids) >= 1:
        subject, reference = _RELATION_PARTIES[name]
        kwargs["subject"] = _role_id(record, subject)
        kwargs["reference"] = _role_id(record, reference)
    if kind == "choice":
        options = record["choices"]
        kwargs["letters"] = tuple(o["letter"] for o in options)
        kwargs["choice_texts"] = tuple(o.get("text", "") for o in options)
        kwargs["choice_region_ids"] = tuple(
            tuple(o["region_ids"])
            if "region_ids" in o
            else ((o["region_id"],) if "region_id" in o else ())
            for o in options
        )
        truth = {"choice": values.get("choice")}
    elif kind == "label":
        kwargs["label_words"] = _label_words(qt)
        truth = {"outcome": values.get("outcome")}
    elif kind == "yes_no":
        truth = {"yes_no": values.get("yes_no", values.get("outcome"))}
        variant = (record.get("template_variant") or {}).get("question")
        asks = None
        if isinstance(variant, int) and 0 <= variant < len(qt.questions):
            asks = qt.questions[variant].asks
        base = _base_kind(qt)
        if asks is not None and base in ("side", "front_behind", "size", "region"):
            kwargs["asks_kind"] = base
            kwargs["asks"] = _role_id(record, asks) if base == "region" else asks
    else:
        wanted = ANSWER_KINDS[kind]
        source = {"outcome": values.get("outcome"), **values}
        truth = {k: source.get(k) for k in wanted}
    missing = [k for k, v in truth.items() if v is None]
    if missing:
        raise ValueError(
            f"record {record.get('id')} ({record.get('type')}): answer_values has no {missing[0]!r}"
        )
    return AnswerSpec(kind=kind, **kwargs), truth


# ----------------------------------------------------------------------------- scoring


def read_answers(path: str | Path) -> dict[str, str]:
    """Question id -> answer text from a JSONL file (``{"id": ..., "answer": ...}`` a line).

    ``response``, ``prediction``, ``output`` and ``text`` are accepted for ``answer``; a line
    with none of them is an empty answer.

    Raises:
        ValueError: a malformed line, a line without an id, an answer that is not a string, a
            repeated id, or a file that is not UTF-8 (names the file and line).
        FileNotFoundError: no such file.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: answers file not found")
    out: dict[str, str] = {}
    for n, line in _utf8_lines(path):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{n}: not valid JSON: {e}") from None
        if not isinstance(row, dict) or "id" not in row:
            raise ValueError(f"{path}:{n}: expected an object with an 'id'")
        key, text = next(
            (
                (k, row[k])
                for k in ("answer", "response", "prediction", "output", "text")
                if k in row
            ),
            ("answer", None),
        )
        if not isinstance(text, (str, type(None))):
            # str() of an object or a number would be scored as if the model had written it.
            raise ValueError(
                f"{path}:{n}: {key!r} must be the answer text (a string), got "
                f"{type(text).__name__} {json.dumps(text)[:60]}"
            )
        if not isinstance(row["id"], (str, int)) or isinstance(row["id"], bool):
            raise ValueError(f"{path}:{n}: id must be a string, got {row['id']!r}")
        qid = str(row["id"])
        if qid in out:
            raise ValueError(f"{path}:{n}: id {qid!r} answered twice")
        out[qid] = "" if text is None else text
    return out


def _utf8_lines(path: Path):
    """(line number, line) of a text file; a file that is not UTF-8 is named in the error."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise ValueError(
            f"{path}:{line}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); "
            "save it as UTF-8"
        ) from None
    return enumerate(text.splitlines(), 1)


def _rate(mask: np.ndarray) -> float | None:
    return float(np.mean(mask)) if len(mask) else None


def _breakdown(labels: np.ndarray, ok: np.ndarray) -> dict[str, dict[str, Any]]:
    out = {}
    for value in sorted({str(x) for x in labels}):
        sel = labels == value
        out[value] = {"n": int(sel.sum()), "score": _rate(ok[sel])}
    return out


def _group_metrics(lsr: np.ndarray) -> dict[str, Any]:
    """LSR@t, MLSR and TLC of (G, T) success bits."""
    out: dict[str, Any] = {"groups": int(lsr.shape[0])}
    for k, h in enumerate(HORIZONS_S):
        out[f"LSR@{h:g}s"] = _rate(lsr[:, k])
    out["MLSR"] = float(lsr.mean(axis=1).mean()) if len(lsr) else None
    out["TLC"] = _rate(lsr.all(axis=1))
    return out


def score_entries(
    entries: Sequence[Mapping[str, Any]],
    answers: Mapping[str, str],
    profile: str | Tolerances = DEFAULT_PROFILE,
) -> dict[str, Any]:
    """Every benchmark metric of a set of answers.

    Args:
        entries: answer-key entries (``answer_key.jsonl`` lines): ``id``, ``group_id``, ``set``,
            ``category``, ``type``, ``kind``, ``class``, ``situation``, ``horizon_s``, ``spec``
            (``AnswerSpec.as_dict``) and ``truth``.
        answers: question id -> the model's answer text. A question without an answer is left
            out of every metric (a partial answers file scores what it has, as the published
            STRIDE-QA-Bench scorer does) and counted under ``missing``; an empty answer is
            scored (as wrong).
        profile: tolerance profile (``published``, the default, or ``paper``).

    Returns:
        A JSON-ready dict: counts (``questions`` in the key, ``scored``, ``missing`` and the
            first ``missing_ids``), ``spatiotemporal`` (LSR@t, MLSR, TLC, per-dimension SR, by
        situation and class), ``spatial`` (qualitative accuracy, quantitative success, by category,
        type and class), ``multiple_choice`` (accuracy by type and class), and ``by_type``.
    """
    n_key = len(entries)
    missing = [str(e["id"]) for e in entries if str(e["id"]) not in answers]
    entries = [e for e in entries if str(e["id"]) in answers]
    n = len(entries)
    specs = [AnswerSpec.from_dict(e["spec"]) for e in entries]
    texts = [answers[str(e["id"])] for e in entries]
    preds = [parse_answer(t, s) for t, s in zip(texts, specs, strict=True)]
    kinds = [s.kind for s in specs]
    ok, per_value = success_matrix(kinds, [e["truth"] for e in entries], preds, profile)

    def col(name: str, default: Any = "") -> np.ndarray:
        return np.array(
            [("" if e.get(name) is None else e.get(name, default)) for e in entries], dtype=object
        )

    sets, types, cats, qkind = col("set"), col("type"), col("category"), col("kind")
    classes, situations = col("class"), col("situation")
    answered = np.array([bool(t.strip()) for t in texts], dtype=bool)
    parsed = np.array(
        [all(k in p for k in ANSWER_KINDS[kd]) for p, kd in zip(preds, kinds, strict=True)],
        dtype=bool,
    )
    unknown = sorted(set(answers) - {str(e["id"]) for e in entries})
    result: dict[str, Any] = {
        "tolerances": tolerances(profile).name,
        "questions": n_key,
        "scored": n,
        "missing": len(missing),
        "missing_ids": missing[:20],
        "answered": int(answered.sum()),
        "parsed": int(parsed.sum()),
        "unknown_ids": len(unknown),
        "score": _rate(ok),
    }

    # Spatiotemporal scene groups.
    st = np.flatnonzero(sets == "spatiotemporal")
    horizon = np.array([float(e.get("horizon_s") or 0.0) for e in entries])
    st_kind = np.asarray(kinds, dtype=object)
    pos = st[st_kind[st] == "position"]
    groups = sorted({str(entries[i]["group_id"]) for i in pos})
    g_index = {g: k for k, g in enumerate(groups)}
    t_index = {h: k for k, h in enumerate(HORIZONS_S)}
    lsr = np.zeros((len(groups), len(HORIZONS_S)), dtype=bool)
    g_sit = np.empty(len(groups), dtype=object)
    g_cls = np.empty(len(groups), dtype=object)
    for i in pos:
        g = g_index[str(entries[i]["group_id"])]
        t = t_index.get(horizon[i])
        if t is not None:
            lsr[g, t] = ok[i]
        g_sit[g], g_cls[g] = situations[i], classes[i]
    st_out = _group_metrics(lsr)
    sr: dict[str, dict[str, float | None]] = {}
    dims = (
        ("distance", "position", "distance_m"),
        ("bearing", "position", "bearing_deg"),
        ("ego_speed", "ego_speed", None),
        ("agent_speed", "speed", None),
    )
    for dim, kind, value in dims:
        sel_kind = st[st_kind[st] == kind]
        sr[dim] = {}
        for h in HORIZONS_S:
            sel = sel_kind[horizon[sel_kind] == h]
            bits = per_value.get(value, np.zeros(n, dtype=bool))[sel] if value else ok[sel]
            sr[dim][f"{h:g}s"] = _rate(bits)
    st_out["SR"] = sr
    st_out["by_situation"] = {
        s: _group_metrics(lsr[g_sit == s]) for s in sorted({str(x) for x in g_sit})
    }
    st_out["by_class"] = {
        c: _group_metrics(lsr[g_cls == c]) for c in sorted({str(x) for x in g_cls})
    }
    result["spatiotemporal"] = st_out

    # Spatial: qualitative accuracy and quantitative success, by category, type and class.
    sp = sets == "spatial"
    spatial: dict[str, Any] = {}
    for kind in ("qualitative", "quantitative"):
        sel = sp & (qkind == kind)
        spatial[kind] = {"n": int(sel.sum()), "score": _rate(ok[sel])}
    spatial["by_category"] = {
        c: {
            kind: {
                "n": int((sel := sp & (cats == c) & (qkind == kind)).sum()),
                "score": _rate(ok[sel]),
            }
            for kind in ("qualitative", "quantitative")
        }
        for c in sorted({str(x) for x in cats[sp]})
    }
    spatial["by_type"] = _breakdown(types[sp], ok[sp])
    spatial["by_class"] = _breakdown(classes[sp], ok[sp])
    result["spatial"] = spatial

    mc = sets == "multiple_choice"
    result["multiple_choice"] = {
        "n": int(mc.sum()),
        "accuracy": _rate(ok[mc]),
        "by_type": _breakdown(types[mc], ok[mc]),
        "by_class": _breakdown(classes[mc], ok[mc]),
    }
    # Dynamic-object questions and 4D-Bench-style per-subtask accuracy over every set.
    subtasks = col("subtask")
    dyn = sets == "dynamic"
    result["dynamic"] = {
        "n": int(dyn.sum()),
        "accuracy": _rate(ok[dyn]),
        "by_subtask": _breakdown(subtasks[dyn], ok[dyn]),
        "by_type": _breakdown(types[dyn], ok[dyn]),
    }
    has_subtask = subtasks != ""
    result["by_subtask"] = _breakdown(subtasks[has_subtask], ok[has_subtask])
    scores = [v["score"] for v in result["by_subtask"].values() if v["score"] is not None]
    result["subtask_overall"] = float(np.mean(scores)) if scores else None
    # SPAR's mean relative accuracy of every numeric answer, per value name.
    mra: dict[str, dict[str, Any]] = {}
    for name in MRA_VALUES:
        idx = [i for i, e in enumerate(entries) if _is_number(e["truth"].get(name))]
        if not idx:
            continue
        gt = np.array([float(entries[i]["truth"][name]) for i in idx])
        pred = np.array([_as_float(preds[i].get(name)) for i in idx])
        mra[name] = {"n": len(idx), "MRA": float(mean_relative_accuracy(pred, gt).mean())}
    result["MRA"] = mra
    result["by_set"] = _breakdown(sets, ok)
    result["by_category"] = _breakdown(cats, ok)
    result["by_type"] = _breakdown(types, ok)
    return result


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Objects of a JSONL file; errors name the file and line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found")
    rows = []
    for n, line in _utf8_lines(path):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{n}: not valid JSON: {e}") from None
    return rows


def score_benchmark(
    bench_dir: str | Path,
    answers_path: str | Path,
    out_path: str | Path | None = None,
    profile: str | Tolerances = DEFAULT_PROFILE,
) -> dict[str, Any]:
    """Score an answers file against ``BENCH/answer_key.jsonl``; write the metrics as JSON.

    Args:
        bench_dir: a folder written by ``autolabel bench export``.
        answers_path: JSONL of ``{"id", "answer"}``.
        out_path: where to write the metrics (default: ``<answers>.scores.json`` beside it).
        profile: tolerance profile (``published`` or ``paper``).
    """
    from autolabel.atomic_io import atomic_write_json
    from autolabel.benchmark.export import ANSWER_KEY_FILE

    entries = read_jsonl(Path(bench_dir) / ANSWER_KEY_FILE)
    answers = read_answers(answers_path)
    known = {str(e["id"]) for e in entries}
    unknown = sorted(set(answers) - known)
    if answers and len(unknown) == len(answers):
        raise ValueError(
            f"{answers_path}: none of its {len(answers)} ids is a question of {bench_dir} "
            f"(first: {unknown[0]!r}); answers for another benchmark or export?"
        )
    result = score_entries(entries, answers, profile)
    result["answers_file"] = str(answers_path)
    out = (
        Path(out_path)
        if out_path
        else Path(answers_path).with_name(Path(answers_path).stem + ".scores.json")
    )
    atomic_write_json(out, result, indent=1)
    result["scores_file"] = str(out)
    return result


def score_baselines(bench_dir: str | Path) -> dict[str, dict[str, Any]]:
    """Score every ``BENCH/baselines/<name>.jsonl``; write ``<name>.scores.json`` beside each."""
    from autolabel.benchmark.baselines import BASELINES

    out = {}
    for name in BASELINES:
        path = Path(bench_dir) / "baselines" / f"{name}.jsonl"
        if path.is_file():
            out[name] = score_benchmark(bench_dir, path)
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100.0 * x:.1f}"


def format_fraction(x: float | None) -> str:
    """A metric for ``name: value`` lines: 4 decimals, ``-`` where undefined."""
    return "-" if x is None else f"{x:.4f}"


def format_scores(result: Mapping[str, Any]) -> list[str]:
    """Headline metrics as ``name: value`` lines (fractions, 4 decimals; ``-`` where undefined)."""

    f = format_fraction

    st = result["spatiotemporal"]
    lines = [
        f"tolerances: {result.get('tolerances', DEFAULT_PROFILE)}",
        f"questions: {result['questions']}",
        f"missing: {result.get('missing', 0)}",
        f"answered: {result['answered']}",
        f"parsed: {result['parsed']}",
        *(
            [f"warning: {result['unknown_ids']} answer ids are not questions (ignored)"]
            if result.get("unknown_ids")
            else []
        ),
        f"groups: {st['groups']}",
    ]
    lines += [f"LSR@{h:g}s: {f(st[f'LSR@{h:g}s'])}" for h in HORIZONS_S]
    lines += [f"MLSR: {f(st['MLSR'])}", f"TLC: {f(st['TLC'])}"]
    for dim, by_t in st["SR"].items():
        lines += [f"SR_{dim}@{t}: {f(v)}" for t, v in by_t.items()]
    sp = result["spatial"]
    lines += [
        f"spatial_qualitative_accuracy: {f(sp['qualitative']['score'])}",
        f"spatial_quantitative_success: {f(sp['quantitative']['score'])}",
        f"multiple_choice_accuracy: {f(result['multiple_choice']['accuracy'])}",
    ]
    if "dynamic" in result:
        lines.append(f"dynamic_accuracy: {f(result['dynamic']['accuracy'])}")
        lines += [
            f"subtask_{name}: {f(row['score'])}" for name, row in result["by_subtask"].items()
        ]
        lines.append(f"subtask_overall: {f(result['subtask_overall'])}")
        lines += [f"MRA_{name}: {f(row['MRA'])}" for name, row in result["MRA"].items()]
    return lines


def breakdown_table(result: Mapping[str, Any], title: str = "by question type") -> Any:
    """A ``rich`` table of the per-type scores (percent)."""
    from rich.table import Table

    table = Table(title=title)
    for name in ("type", "n", "score %"):
        table.add_column(name, justify="left" if name == "type" else "right")
    for t, row in result["by_type"].items():
        table.add_row(t, str(row["n"]), _pct(row["score"]))
    return table


def iter_entries_by_set(entries: Iterable[Mapping[str, Any]], name: str) -> list[Mapping[str, Any]]:
    """The entries of one benchmark set."""
    if name not in SETS:
        raise ValueError(f"unknown benchmark set {name!r} (one of {SETS})")
    return [e for e in entries if e.get("set") == name]
