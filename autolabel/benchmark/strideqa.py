"""STRIDE-QA-Bench interop: export a run in the official benchmark's format and score answers
exactly as its published scorer does.

The authors' benchmark (``turingmotors/STRIDE-QA-Dataset``, ``benchmarks/STRIDE-QA-Bench``) reads
per-horizon annotation files and a group sheet, runs a VLM over four Set-of-Mark frames per
question, and scores the answers with ``python -m strideqa_bench.benchmark``. This module writes
those files from a QA run and scores prediction files of that format with the same rules (no code
of theirs is used; the rules below are its behaviour, measured against it by
``bench/strideqa_equivalence.py``).

Files under ``BENCH/`` (``autolabel bench export RUN --out BENCH --format strideqa``):

- ``annotation_files/strideqa_bench_t{0,1,2,3}.json``: JSON arrays of question records, one file
  per horizon t (their inference reads ``strideqa_bench*.json`` and takes t from the last
  character of the name). A record: ``question_id`` (``q<n>_g<group>``, n and group zero-padded),
  ``region_id``, ``images`` (four paths relative to BENCH: t = -1.5, -1.0, -0.5, 0 s), ``rle``
  (COCO RLE of the target in each frame, keys ``prev_3, prev_2, prev_1, current``, at the image's
  own resolution), ``question``, ``qa_category`` (a ``TIME_BUCKET`` name of their scorer),
  ``gt_value`` and ``unit`` per quantity (``distance`` m, ``direction`` degrees, ``velocity``
  m/s), ``gt`` (the reference answer), and ours: ``autolabel_id``, ``clip``, ``keyframe``,
  ``camera``.
- ``annotation_files/annotation_sheet.csv``: ``group_id, object_type, relation`` (their relation
  names, :data:`RELATION_OF_SITUATION`).
- ``images/<clip>/<dataset path>``: the camera frames, unmarked (their inference draws the marks
  from the RLE; ``marks.style: strideqa`` draws the same marks in our pipeline).
- ``prompt.yaml``: ``system_prompt`` for their ``--prompt-config``.
- ``baselines/<name>/<name>_t{k}.json``: oracle, constant and random answers in their prediction
  format (the annotation records plus ``pred``, ``model_id`` and ``t``).
- ``autolabel/``: the same questions in autolabel's own format (``answer_key.jsonl`` etc.).
- ``bench.json``: counts, the source run, ``format: strideqa``.

Scoring (:func:`score_strideqa`) follows the published scorer:

- Each quantity of a question is parsed from ``pred`` on its own (:func:`published_distance_m`,
  :func:`published_direction_deg`, :func:`published_speed_mps`) and judged with the ``published``
  tolerances (``scoring.PUBLISHED``).
- LSR rows: per (group, t) the target's distance and direction both succeed.
- ``success_rates``: per metric (``target_distance``, ``target_direction``, ``target_velocity``,
  ``ego_velocity``, ``lsr``) and t, successes over the rows present, and ``avg`` over all t.
- ``temporal_consistency``: per relation and overall, ``TLC@k`` (success at t = 0..k), ``TLC``
  (at every t) and ``MLSR`` (mean over groups of the fraction of t that succeed); a group's t
  without an LSR row counts as a failure.
- The truth comes from the benchmark's annotation files, never from the prediction file; a
  question the predictions do not answer is left out (reported under ``missing``).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from autolabel.atomic_io import atomic_write_bytes, atomic_write_json, atomic_write_text
from autolabel.benchmark.scoring import (
    DEFAULT_PROFILE,
    Tolerances,
    angle_success,
    distance_success,
    speed_success,
    tolerances,
)

ANNOTATION_DIR = "annotation_files"
ANNOTATION_SHEET = "annotation_sheet.csv"
PROMPT_FILE = "prompt.yaml"
NATIVE_DIR = "autolabel"
#: Horizons of the official benchmark, whole seconds.
TIMES = (0, 1, 2, 3)
#: Keys of a record's ``rle``, oldest context frame first (t = -1.5, -1.0, -0.5, 0 s).
RLE_BUCKETS = ("prev_3", "prev_2", "prev_1", "current")
#: Their relation names of our dynamic situations (``export.classify_situations``); the five
#: majors are theirs, ``Other``/``Static`` fall under their minor relations.
RELATION_OF_SITUATION = {
    "oncoming_passing": "Oncoming_Pass",
    "maintaining": "Maintain_State",
    "overtaking": "Overtake",
    "path_divergence": "Path_Divergence_at_Intersection",
    "moving_away": "Other_Pulling_Away_From_Ego",
    "other": "Other",
    "static": "Static",
}
#: Units written per quantity (their scorer reports them, never converts with them).
UNITS = {"distance": "meters", "direction": "degrees", "velocity": "m/s"}
#: Category base names per answer kind (their ``TIME_BUCKET``): ``<base>`` at t = 0,
#: ``<base>_4d_t<k>`` at t = k.
_CATEGORY_BASE = {
    "position": "ego_distance_data",
    "speed": "target_speed_data",
    "ego_speed": "ego_speed_data",
}
#: Every category their scorer knows -> (t, subject).
CATEGORIES: dict[str, tuple[int, str]] = {"target_bearing_angle_data": (0, "target")}
for _base in ("ego_distance_data", "target_speed_data", "ego_speed_data"):
    _subject = "ego" if _base.startswith("ego_speed") else "target"
    CATEGORIES[_base] = (0, _subject)
    for _t in TIMES[1:]:
        CATEGORIES[f"{_base}_4d_t{_t}"] = (_t, _subject)
#: Quantities a record's ``gt_value`` may hold.
QUANTITIES = ("distance", "direction", "velocity")


def qa_category(kind: str, t: int) -> str:
    """Their ``qa_category`` of an answer kind (``position``, ``speed``, ``ego_speed``) at t."""
    base = _CATEGORY_BASE[kind]
    return base if t == 0 else f"{base}_4d_t{t}"


def question_id(n: int, group: int) -> str:
    """``q<n>_g<group>``: their scorer finds the group after ``_g``."""
    return f"q{n:08d}_g{group:05d}"


def group_of(qid: str) -> str:
    """The group id of a question id (``q00000234_g00018`` -> ``g00018``), as their scorer reads
    it: everything after the first ``_g``; an id without one is its own group."""
    return "g" + qid.split("_g")[1] if "_g" in qid else qid


# ----------------------------------------------------------------------------- published parse
# The published scorer's reading of free text (STRIDE-QA-Bench ``utils/parser.py``), reproduced
# rule for rule so that a prediction parses to the same number: unsigned lengths, the first unit
# class (in the order below) with a match wins, not the first number in the text; speeds are
# searched term by term in the order below and need a word boundary before the unit ("5 m/s"
# parses, "5m/s" does not); angles need a degree word or sign.

_NUM = r"(\d+\.?\d*)"
_LENGTH_CLASSES: tuple[tuple[float, tuple[str, ...]], ...] = (
    (0.0254, ("inch", "inches", "in")),
    (0.3048, ("foot", "feet", "ft")),
    (0.01, ("cm", "centimeters", "centimetres")),
    (1.0, ("m", "meter", "meters", "metre", "metres")),
    (1000.0, ("km", "kilometer", "kilometers", "kilometre", "kilometres")),
)
_LENGTH_PATTERNS = tuple(
    (factor, re.compile(_NUM + r"\s*(" + "|".join(map(re.escape, terms)) + r")\b(?!/)", re.I))
    for factor, terms in _LENGTH_CLASSES
)
_SPEED_CLASSES: tuple[tuple[float, tuple[str, ...]], ...] = (
    (
        1.0,
        (
            "m/s",
            "m s-1",
            r"m s\^1",
            "m s\u207b1",
            "mps",
            "meter per second",
            "metre per second",
            "meters per second",
            "metres per second",
        ),
    ),
    (
        1 / 3.6,
        (
            "km/h",
            "km h-1",
            "kmh",
            "kph",
            "kilometer per hour",
            "kilometre per hour",
            "kilometers per hour",
            "kilometres per hour",
        ),
    ),
    (1609.34 / 3600, ("mph", "mile per hour", "miles per hour")),
)
_SPEED_PATTERNS = tuple(
    (factor, re.compile(_NUM + r"\s*\b(" + re.escape(term).replace("\\ ", "\\s+") + r")\b", re.I))
    for factor, terms in _SPEED_CLASSES
    for term in terms
)
_DIRECTION_PATTERN = re.compile(r"([-+]?\d+(?:\.\d+)?)\s*-?\s*((?:°|deg(?:ree)?s?))", re.I)


def published_distance_m(text: str) -> float | None:
    """A length in metres as the published scorer reads it; None where it finds none."""
    for factor, pattern in _LENGTH_PATTERNS:
        m = pattern.search(text)
        if m:
            return float(m.group(1)) * factor
    return None


def published_speed_mps(text: str) -> float | None:
    """A speed in m/s as the published scorer reads it; None where it finds none."""
    for factor, pattern in _SPEED_PATTERNS:
        m = pattern.search(text)
        if m:
            return float(m.group(1)) * factor
    return None


def published_direction_deg(text: str) -> float | None:
    """A signed angle in degrees as the published scorer reads it (outside [-180, 180] wrapped
    to [-180, 180)); None where it finds none."""
    m = _DIRECTION_PATTERN.search(text)
    if not m:
        return None
    angle = float(m.group(1))
    if angle < -180 or angle > 180:
        angle = ((angle + 180) % 360) - 180
    return angle


_PUBLISHED_PARSE = {
    "distance": published_distance_m,
    "direction": published_direction_deg,
    "velocity": published_speed_mps,
}
PARSERS = ("published", "autolabel")


def _autolabel_values(text: str, record: Mapping[str, Any]) -> dict[str, float | None]:
    """Quantity -> value read by autolabel's own parser (``answer_parser.parse_answer``)."""
    from autolabel.benchmark.answer_parser import AnswerSpec, parse_answer

    keys = set(record["gt_value"])
    if keys & {"distance", "direction"}:
        kind, names = "position", {"distance": "distance_m", "direction": "bearing_deg"}
    elif CATEGORIES[record["qa_category"]][1] == "ego":
        kind, names = "ego_speed", {"velocity": "ego_speed_mps"}
    else:
        kind, names = "speed", {"velocity": "speed_mps"}
    spec = AnswerSpec(kind=kind, region_ids=(int(record.get("region_id", 0)),))
    parsed = parse_answer(text, spec)
    return {q: _float_or_none(parsed.get(names[q])) for q in keys if q in names}


def _float_or_none(x: Any) -> float | None:
    try:
        return None if x is None else float(x)
    except (TypeError, ValueError):
        return None


# ----------------------------------------------------------------------------- reading files


def _json_array_items(path: Path) -> list[tuple[int, Any]]:
    """(line, item) of each element of the JSON array in ``path``.

    Raises:
        ValueError: not JSON, or not an array (names the file and line).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text ({e})") from None
    decoder = json.JSONDecoder()
    ws = re.compile(r"\s*")

    def line_at(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    pos = ws.match(text, 0).end()
    if pos >= len(text) or text[pos] != "[":
        raise ValueError(
            f"{path}:{line_at(pos)}: expected a JSON array of records (the STRIDE-QA-Bench "
            'format: [{"question_id": ..., "pred": ...}, ...])'
        )
    items: list[tuple[int, Any]] = []
    pos = ws.match(text, pos + 1).end()
    if pos < len(text) and text[pos] == "]":
        pos += 1
    else:
        while True:
            try:
                obj, end = decoder.raw_decode(text, pos)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{e.lineno}: not valid JSON: {e.msg}") from None
            items.append((line_at(pos), obj))
            pos = ws.match(text, end).end()
            if pos < len(text) and text[pos] == ",":
                pos = ws.match(text, pos + 1).end()
                continue
            if pos < len(text) and text[pos] == "]":
                pos += 1
                break
            raise ValueError(f"{path}:{line_at(pos)}: expected ',' or ']' in the JSON array")
    if ws.match(text, pos).end() != len(text):
        raise ValueError(f"{path}:{line_at(pos)}: text after the JSON array")
    return items


@dataclass(frozen=True)
class Prediction:
    """One answer of a prediction file: where it was read, and its text."""

    question_id: str
    pred: str
    path: str
    line: int


def prediction_files(path: str | Path) -> list[Path]:
    """The prediction files at ``path``: the file itself, or a folder's ``*_t*.json`` (sorted,
    as the published scorer globs them).

    Raises:
        FileNotFoundError: nothing at ``path``, or a folder without ``*_t*.json``.
    """
    p = Path(path)
    if p.is_dir():
        files = sorted(p.glob("*_t*.json"))
        if not files:
            raise FileNotFoundError(f"{p}: no *_t*.json prediction files in this folder")
        return files
    if not p.is_file():
        raise FileNotFoundError(f"{p}: predictions not found")
    return [p]


def is_strideqa_input(bench_dir: str | Path, answers_path: str | Path) -> bool:
    """Whether ``answers_path`` holds STRIDE-QA-Bench predictions (a folder, or a file that
    starts with a JSON array) rather than autolabel's JSONL answers.

    Raises:
        ValueError: STRIDE-QA-Bench predictions for a benchmark without its annotation files.
    """
    p = Path(answers_path)
    if p.is_dir():
        found = True
    elif p.is_file():
        with open(p, "rb") as f:
            head = f.read(4096).lstrip()
        found = head.startswith(b"[")
    else:
        return False
    if found and not (Path(bench_dir) / ANNOTATION_DIR).is_dir():
        raise ValueError(
            f"{p}: STRIDE-QA-Bench predictions, but {bench_dir} has no {ANNOTATION_DIR}/ "
            "(export it with --format strideqa)"
        )
    return found


def read_predictions(path: str | Path) -> list[Prediction]:
    """Every answer of a STRIDE-QA-Bench prediction file or folder, in reading order.

    A record needs ``question_id`` (a string) and ``pred`` (a string); other fields (their
    inference copies the whole question record) are ignored.

    Raises:
        FileNotFoundError: see :func:`prediction_files`.
        ValueError: not a JSON array, a record that is not an object, a missing or non-string
            ``question_id`` or ``pred``, or a question answered twice (names file and line).
    """
    out: list[Prediction] = []
    seen: dict[str, str] = {}
    for file in prediction_files(path):
        for line, rec in _json_array_items(file):
            where = f"{file}:{line}"
            if not isinstance(rec, Mapping):
                raise ValueError(f"{where}: expected a JSON object, got {type(rec).__name__}")
            qid = rec.get("question_id")
            if qid is None:
                raise ValueError(f"{where}: record has no 'question_id'")
            if not isinstance(qid, str):
                raise ValueError(
                    f"{where}: question_id must be a string, got {type(qid).__name__} {qid!r}"
                )
            if "pred" not in rec:
                raise ValueError(f"{where}: record {qid!r} has no 'pred'")
            if not isinstance(rec["pred"], str):
                raise ValueError(
                    f"{where}: 'pred' of {qid!r} is a {type(rec['pred']).__name__}, not a string"
                )
            if qid in seen:
                raise ValueError(f"{where}: question {qid!r} answered twice (first at {seen[qid]})")
            seen[qid] = where
            out.append(Prediction(qid, rec["pred"], str(file), line))
    return out


def read_annotations(bench_dir: str | Path) -> tuple[dict[str, dict[str, Any]], dict[str, dict]]:
    """The benchmark's question records by ``question_id``, and the group sheet by group id.

    Raises:
        FileNotFoundError: no ``annotation_files/strideqa_bench*.json``.
        ValueError: a malformed record (names the file and line).
    """
    folder = Path(bench_dir) / ANNOTATION_DIR
    files = sorted(folder.glob("strideqa_bench*.json"))
    if not files:
        raise FileNotFoundError(
            f"{folder}: no strideqa_bench*.json (export with --format strideqa)"
        )
    records: dict[str, dict[str, Any]] = {}
    for file in files:
        for line, rec in _json_array_items(file):
            where = f"{file}:{line}"
            if not isinstance(rec, Mapping) or not isinstance(rec.get("question_id"), str):
                raise ValueError(f"{where}: expected a record with a string question_id")
            qid = rec["question_id"]
            if rec.get("qa_category") not in CATEGORIES:
                raise ValueError(f"{where}: {qid}: unknown qa_category {rec.get('qa_category')!r}")
            gt = rec.get("gt_value")
            if not isinstance(gt, Mapping) or not gt or set(gt) - set(QUANTITIES):
                raise ValueError(
                    f"{where}: {qid}: gt_value must map some of {QUANTITIES} to numbers"
                )
            for q, v in gt.items():
                if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                    raise ValueError(f"{where}: {qid}: gt_value[{q!r}] is not a finite number")
            if qid in records:
                raise ValueError(f"{where}: question {qid!r} appears twice in the benchmark")
            records[qid] = dict(rec)
    sheet: dict[str, dict] = {}
    sheet_path = folder / ANNOTATION_SHEET
    if sheet_path.is_file():
        with open(sheet_path, encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f)
            missing = {"group_id", "object_type", "relation"} - set(reader.fieldnames or ())
            if missing:
                raise ValueError(f"{sheet_path}:1: no column {sorted(missing)[0]!r}")
            for row in reader:
                sheet[row["group_id"]] = {
                    "object_type": row["object_type"] or None,
                    "relation": row["relation"] or None,
                }
    return records, sheet


# ----------------------------------------------------------------------------- scoring


def _success(quantity: str, pred: np.ndarray, gt: np.ndarray, tol: Tolerances) -> np.ndarray:
    fn = {"distance": distance_success, "direction": angle_success, "velocity": speed_success}
    return fn[quantity](pred, gt, tol)


def _round_half_up(value: float, ndigits: int = 1) -> float:
    # The published report's rounding of percentages (``math.floor(v * 10 + 0.5) / 10``).
    mult = 10**ndigits
    return math.floor(value * mult + 0.5) / mult


def report_percent(fraction: float | None) -> str:
    """A fraction as the published ``metrics_report.md`` prints it: percent, one decimal,
    rounded half up."""
    return "-" if fraction is None else f"{_round_half_up(fraction * 100, 1)}"


def strideqa_rows(
    records: Mapping[str, Mapping[str, Any]],
    sheet: Mapping[str, Mapping[str, Any]],
    predictions: Sequence[Prediction],
    profile: str | Tolerances = DEFAULT_PROFILE,
    parser: str = "published",
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per-quantity result rows and LSR rows of the predictions (the published scorer's raw
    evaluation, in its order).

    Returns:
        (rows, lsr_rows): a row has ``question_id``, ``group_id``, ``relation``, ``object_type``,
        ``qa_category``, ``time``, ``ego_or_target``, ``qa_type``, ``gt_value``, ``pred_value``
        (None where nothing parsed) and ``success``; an LSR row the same for one (group, t,
        subject), ``qa_type: lsr``, ``success`` = distance and direction both succeed.

    Raises:
        ValueError: a prediction names a question the benchmark does not have (file and line),
            or ``parser`` is unknown.
    """
    if parser not in PARSERS:
        raise ValueError(f"unknown parser {parser!r} (one of {', '.join(PARSERS)})")
    tol = tolerances(profile)
    rows: list[dict[str, Any]] = []
    for p in predictions:
        rec = records.get(p.question_id)
        if rec is None:
            raise ValueError(
                f"{p.path}:{p.line}: question {p.question_id!r} is not in the benchmark"
            )
        t, subject = CATEGORIES[rec["qa_category"]]
        gid = group_of(p.question_id)
        info = sheet.get(gid, {})
        values = (
            {q: _PUBLISHED_PARSE[q](p.pred) for q in rec["gt_value"]}
            if parser == "published"
            else _autolabel_values(p.pred, rec)
        )
        for q, gt in rec["gt_value"].items():
            rows.append(
                {
                    "question_id": p.question_id,
                    "group_id": gid,
                    "object_type": info.get("object_type"),
                    "relation": info.get("relation"),
                    "qa_category": rec["qa_category"],
                    "time": t,
                    "ego_or_target": subject,
                    "qa_type": q,
                    "gt_value": float(gt),
                    "pred_value": values.get(q),
                }
            )
    # Judge every quantity at once.
    by_q: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        by_q[r["qa_type"]].append(i)
    for q, idx in by_q.items():
        gt = np.array([rows[i]["gt_value"] for i in idx], dtype=np.float64)
        pred = np.array(
            [np.nan if rows[i]["pred_value"] is None else rows[i]["pred_value"] for i in idx],
            dtype=np.float64,
        )
        ok = _success(q, pred, gt, tol)
        for i, s in zip(idx, ok.tolist(), strict=True):
            rows[i]["success"] = bool(s)
    # LSR: per (group, t, subject), the last distance and direction row of each (their pairing).
    pairs: dict[tuple[str, int, str], dict[str, dict[str, Any]]] = {}
    for r in rows:
        key = (r["group_id"], r["time"], r["ego_or_target"])
        slot = pairs.setdefault(key, {})
        if r["qa_type"] in ("distance", "direction"):
            slot[r["qa_type"]] = r
    lsr_rows = []
    for (gid, t, subject), slot in pairs.items():
        if not slot:
            continue
        first = slot.get("distance") or slot["direction"]
        ok = all(slot.get(q, {}).get("success", False) for q in ("distance", "direction"))
        lsr_rows.append(
            {
                "question_id": first["question_id"],
                "group_id": gid,
                "object_type": first["object_type"],
                "relation": first["relation"],
                "qa_category": first["qa_category"],
                "time": t,
                "ego_or_target": subject,
                "qa_type": "lsr",
                "success": bool(ok),
            }
        )
    return rows, lsr_rows


def success_rates(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per metric (``<subject>_<quantity>``, or ``lsr``) and t: ``success_rate``, ``sample_size``;
    then ``avg`` over all t (successes over rows, as the published scorer pools them)."""
    stats: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for r in rows:
        name = "lsr" if r["qa_type"] == "lsr" else f"{r['ego_or_target']}_{r['qa_type']}"
        cell = stats[name][r["time"]]
        cell[0] += 1
        cell[1] += bool(r["success"])
    out: dict[str, list[dict[str, Any]]] = {}
    for name in sorted(stats):
        entries = []
        n_all = ok_all = 0
        for t in sorted(stats[name]):
            n, ok = stats[name][t]
            entries.append({"time": t, "success_rate": ok / n, "sample_size": n})
            n_all, ok_all = n_all + n, ok_all + ok
        entries.append({"time": "avg", "success_rate": ok_all / n_all, "sample_size": n_all})
        out[name] = entries
    return out


def temporal_consistency(lsr_rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """TLC@k, TLC and MLSR, overall and per relation (the published scorer's definitions).

    Groups are the (group, relation) pairs with an LSR row; a group without a relation is left
    out (as there). The times are those any LSR row has; a group's missing t is a failure.
    ``TLC@k`` = success at t = 0 and every t in 1..k; ``TLC`` = success at every t in 0..3;
    ``MLSR`` = the mean over groups of the fraction of times that succeed. Each list item:
    ``relation`` (``Overall`` first, then by TLC, highest first), the metrics as fractions.
    """
    keys = sorted({(r["group_id"], r["relation"]) for r in lsr_rows if r["relation"] is not None})
    times = sorted({int(r["time"]) for r in lsr_rows if r["relation"] is not None})
    if not keys:
        return []
    g_index = {k: i for i, k in enumerate(keys)}
    t_index = {t: j for j, t in enumerate(times)}
    bits = np.zeros((len(keys), len(times)), dtype=bool)
    seen = np.zeros_like(bits)
    for r in lsr_rows:
        if r["relation"] is None:
            continue
        i, j = g_index[(r["group_id"], r["relation"])], t_index[int(r["time"])]
        if not seen[i, j]:  # the first row of a cell counts (their pivot's aggfunc "first")
            bits[i, j], seen[i, j] = bool(r["success"]), True
    relations = np.array([k[1] for k in keys], dtype=object)

    def cols(ts: Sequence[int]) -> np.ndarray | None:
        return None if any(t not in t_index for t in ts) else bits[:, [t_index[t] for t in ts]]

    per_group: dict[str, np.ndarray] = {}
    for k in TIMES[1:]:
        c = cols(range(k + 1))
        if c is not None:
            per_group[f"TLC@{k}"] = c.all(axis=1)
    c = cols(TIMES)
    if c is not None:
        per_group["TLC"] = c.all(axis=1)
    per_group["MLSR"] = bits.mean(axis=1)

    def summary(name: str, sel: np.ndarray) -> dict[str, Any]:
        return {"relation": name, **{m: float(v[sel].mean()) for m, v in per_group.items()}}

    overall = summary("Overall", np.ones(len(keys), bool))
    by_rel = [summary(str(rel), relations == rel) for rel in sorted(set(relations))]
    by_rel.sort(key=lambda d: -d.get("TLC", 0.0))
    return [overall, *by_rel]


def score_strideqa(
    bench_dir: str | Path,
    predictions_path: str | Path,
    out_path: str | Path | None = None,
    profile: str | Tolerances = DEFAULT_PROFILE,
    parser: str = "published",
) -> dict[str, Any]:
    """Score STRIDE-QA-Bench predictions against an exported benchmark; write the metrics.

    Args:
        bench_dir: a folder written by ``autolabel bench export --format strideqa`` (or any
            folder with ``annotation_files/strideqa_bench*.json``).
        predictions_path: a prediction file (a JSON array of records with ``question_id`` and
            ``pred``) or a folder of ``*_t*.json`` files (their inference output).
        out_path: where to write the metrics JSON (default: ``<predictions>.scores.json`` beside
            the file, or ``scores.json`` inside the folder).
        profile: tolerance profile (``published``, the default, or ``paper``).
        parser: ``published`` (their reading of the text, the default) or ``autolabel``.

    Returns:
        ``questions`` (in the benchmark), ``scored``, ``missing`` (+ the first ``missing_ids``),
        ``unparsed`` (quantities nothing was read for), ``success_rates``,
        ``temporal_consistency``, ``rows`` (per-quantity and LSR rows: ``question_id``,
        ``qa_type``, ``time``, ``pred_value``, ``success``) and ``scores_file``.
    """
    records, sheet = read_annotations(bench_dir)
    predictions = read_predictions(predictions_path)
    rows, lsr_rows = strideqa_rows(records, sheet, predictions, profile, parser)
    answered = {p.question_id for p in predictions}
    missing = [q for q in records if q not in answered]
    result: dict[str, Any] = {
        "format": "strideqa",
        "tolerances": tolerances(profile).name,
        "parser": parser,
        "predictions": str(predictions_path),
        "questions": len(records),
        "scored": len(predictions),
        "missing": len(missing),
        "missing_ids": missing[:20],
        "unparsed": sum(r["pred_value"] is None for r in rows),
        "success_rates": success_rates([*rows, *lsr_rows]),
        "temporal_consistency": temporal_consistency(lsr_rows),
        "rows": [
            {k: r.get(k) for k in ("question_id", "qa_type", "time", "pred_value", "success")}
            for r in [*rows, *lsr_rows]
        ],
    }
    src = Path(predictions_path)
    out = (
        Path(out_path)
        if out_path
        else (src / "scores.json" if src.is_dir() else src.with_name(src.stem + ".scores.json"))
    )
    atomic_write_json(out, result, indent=1)
    result["scores_file"] = str(out)
    return result


def headline(result: Mapping[str, Any]) -> dict[str, float | None]:
    """LSR@0..3, MLSR and TLC (fractions) of a :func:`score_strideqa` result."""
    lsr = {e["time"]: e["success_rate"] for e in result["success_rates"].get("lsr", [])}
    overall = next((r for r in result["temporal_consistency"] if r["relation"] == "Overall"), {})
    out: dict[str, float | None] = {f"LSR@{t}": lsr.get(t) for t in TIMES}
    out["MLSR"] = overall.get("MLSR")
    out["TLC"] = overall.get("TLC")
    return out


def format_strideqa(result: Mapping[str, Any]) -> list[str]:
    """``name: fraction (percent as the published report prints it)`` lines."""
    lines = [
        f"format: strideqa (tolerances {result['tolerances']}, parser {result['parser']})",
        f"questions: {result['questions']}",
        f"scored: {result['scored']}",
        f"missing: {result['missing']}",
        f"unparsed: {result['unparsed']}",
    ]
    for name, value in headline(result).items():
        shown = "-" if value is None else f"{value:.4f}"
        lines.append(f"{name}: {shown} ({report_percent(value)} %)")
    for metric, entries in result["success_rates"].items():
        if metric == "lsr":
            continue
        for e in entries:
            lines.append(
                f"{metric}@{e['time']}: {e['success_rate']:.4f} "
                f"({report_percent(e['success_rate'])} %, n={e['sample_size']})"
            )
    return lines


# ----------------------------------------------------------------------------- export


@dataclass(frozen=True)
class StrideqaExportConfig:
    """Settings of :func:`export_strideqa`.

    Attributes:
        dynamic_only: drop scene groups where nothing moves (STRIDE-QA keeps only dynamic ones).
        seed: seed of the random baseline.
    """

    dynamic_only: bool = False
    seed: int = 0


def _rle_of_view(view: Mapping[str, Any] | None, height_px: int, width_px: int) -> dict | None:
    """The target's COCO RLE in one frame (counts as text): its mask where the view has one at
    the image's size, else its filled 2D box; None without a view."""
    import pycocotools.mask as mask_util

    if view is None:
        return None
    rle = view.get("mask_rle")
    if isinstance(rle, Mapping) and [int(x) for x in rle.get("size", ())] == [height_px, width_px]:
        counts = rle["counts"]
        return {"size": [height_px, width_px], "counts": counts}
    box = view.get("box_px")
    if box is None:
        return None
    u0, v0 = max(0.0, float(box[0])), max(0.0, float(box[1]))
    u1, v1 = min(float(width_px), float(box[2])), min(float(height_px), float(box[3]))
    if u1 <= u0 or v1 <= v0:
        return None
    enc = mask_util.frPyObjects(np.array([[u0, v0, u1 - u0, v1 - v0]]), height_px, width_px)[0]
    return {"size": [height_px, width_px], "counts": enc["counts"].decode("ascii")}


def _image_size(path: Path) -> tuple[int, int]:
    from PIL import Image

    try:
        with Image.open(path) as im:
            width, height = im.size
    except OSError as e:
        raise ValueError(f"{path}: not a readable image ({e})") from None
    return height, width


def _gt_value(kind: str, truth: Mapping[str, Any]) -> dict[str, float]:
    if kind == "position":
        return {"distance": float(truth["distance_m"]), "direction": float(truth["bearing_deg"])}
    if kind == "speed":
        return {"velocity": float(truth["speed_mps"])}
    return {"velocity": float(truth["ego_speed_mps"])}


def _sheet_csv(rows: Sequence[Sequence[Any]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["group_id", "object_type", "relation", "situation", "clip", "keyframe"])
    writer.writerows(rows)
    return buf.getvalue()


def export_strideqa(
    run_dir: str | Path,
    out_dir: str | Path,
    dataroot: str | Path | None = None,
    config: StrideqaExportConfig | None = None,
    templates: Any = None,
) -> dict[str, Any]:
    """Write a STRIDE-QA-Bench benchmark folder from a QA run (see the module docstring).

    The spatiotemporal scene groups of the run (``export.export_benchmark``'s, complete at every
    t) become their questions; a group whose target has neither a mask nor a box in one of its
    four context frames is dropped (their inference draws a mark in every frame), counted under
    ``dropped``; a frame whose view the visibility filter rejected still gives its mask (counted
    as ``context_marks_from_views_not_passing_visibility``).

    Args:
        run_dir: run folder with ``<clip>/qa.jsonl`` and ``<clip>/attributes.parquet``.
        out_dir: the benchmark folder to write.
        dataroot: the dataset root with the camera images (default: each clip's manifest's).
        config: export settings.
        templates: the QA templates the run used (the packaged ones when None).

    Returns:
        The ``bench.json`` summary.

    Raises:
        FileNotFoundError: no QA in the run, no dataroot, a missing camera image.
        ValueError: a malformed record, or no group could be exported.
    """
    from autolabel.benchmark.baselines import BASELINES, baseline_answers
    from autolabel.benchmark.export import (
        ANSWER_KEY_FILE,
        ExportConfig,
        clip_dataroot,
        export_benchmark,
        load_prompts,
    )
    from autolabel.benchmark.scoring import read_jsonl
    from autolabel.qa.check import read_qa_jsonl
    from autolabel.qa.generate import QA_FILE

    cfg = config or StrideqaExportConfig()
    out = Path(out_dir)
    native_cfg = ExportConfig(images=False, dynamic_only=cfg.dynamic_only, seed=cfg.seed)
    native = export_benchmark(run_dir, out / NATIVE_DIR, dataroot, native_cfg, templates)
    key = [
        e for e in read_jsonl(out / NATIVE_DIR / ANSWER_KEY_FILE) if e["set"] == "spatiotemporal"
    ]
    if not key:
        raise ValueError(f"{run_dir}: no spatiotemporal scene group to export")
    by_clip: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in key:
        by_clip[e["clip"]].append(e)

    records_by_t: dict[int, list[dict[str, Any]]] = {t: [] for t in TIMES}
    sheet_rows: list[list[Any]] = []
    dropped: Counter = Counter()
    copied: set[str] = set()
    baseline_source: list[tuple[int, dict[str, Any], dict[str, Any]]] = []  # (t, record, entry)
    n_question = n_group = 0
    run = Path(run_dir)
    for clip in sorted(by_clip):
        clip_dir = run / clip
        root = clip_dataroot(clip_dir, dataroot)
        if root is None:
            raise FileNotFoundError(
                f"{clip_dir}: no dataroot to copy the camera images from (the clip's "
                "manifest.json names none; pass --dataroot)"
            )
        qa = {r["id"]: r for r in read_qa_jsonl(clip_dir / QA_FILE)}
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for e in by_clip[clip]:
            groups[e["group_id"]].append(e)
        for gid in groups:  # answer-key order: deterministic
            first = qa[groups[gid][0]["id"]]
            cam = first["cameras"][0]
            target = first["regions"][0]
            # A frame's view the visibility filter rejected still has the target's mask or box:
            # their inference marks the target in all four frames, so it is used (counted).
            views: dict[int, Mapping[str, Any]] = {}
            for v in target.get("views") or ():
                f = int(v["frame_index"])
                if v["camera"] == cam and (f not in views or v.get("visible", True)):
                    views[f] = v
            frames = [int(f["frame_index"]) for f in first["context_frames"]]
            sources = list(first["images"][cam])
            if len(frames) != len(RLE_BUCKETS) or len(sources) != len(RLE_BUCKETS):
                dropped["groups_without_four_context_frames"] += 1
                continue
            rles, images = {}, []
            for bucket, f, rel in zip(RLE_BUCKETS, frames, sources, strict=True):
                src = root / rel
                if not src.is_file():
                    raise FileNotFoundError(f"{src}: camera image not found (clip {clip})")
                h, w = _image_size(src)
                rles[bucket] = _rle_of_view(views.get(f), h, w)
                images.append(f"images/{clip}/{rel}")
            if any(r is None for r in rles.values()):
                dropped["groups_without_target_in_a_context_frame"] += 1
                continue
            dropped["context_marks_from_views_not_passing_visibility"] += sum(
                not views[f].get("visible", True) for f in frames
            )
            for rel, img in zip(sources, images, strict=True):
                if img not in copied:
                    atomic_write_bytes(out / img, (root / rel).read_bytes())
                    copied.add(img)
            g = n_group
            n_group += 1
            situation = groups[gid][0]["situation"]
            sheet_rows.append(
                [
                    f"g{g:05d}",
                    groups[gid][0]["class"],
                    RELATION_OF_SITUATION.get(situation, "Other"),
                    situation,
                    clip,
                    groups[gid][0]["keyframe"],
                ]
            )
            for e in groups[gid]:
                t = int(round(float(e["horizon_s"])))
                kind = e["spec"]["kind"]
                if t not in TIMES or kind not in _CATEGORY_BASE:
                    dropped["questions_of_other_kinds"] += 1
                    continue
                rec = qa[e["id"]]
                record = {
                    "question_id": question_id(n_question, g),
                    "region_id": int(target["region_id"]),
                    "images": images,
                    "rle": rles,
                    "question": rec["question"],
                    "qa_category": qa_category(kind, t),
                    "gt_value": _gt_value(kind, e["truth"]),
                    "unit": {q: UNITS[q] for q in _gt_value(kind, e["truth"])},
                    "gt": rec["answer"],
                    "autolabel_id": e["id"],
                    "clip": clip,
                    "keyframe": int(e["keyframe"]),
                    "camera": cam,
                }
                n_question += 1
                records_by_t[t].append(record)
                baseline_source.append((t, record, e))
    if not n_question:
        raise ValueError(f"{run_dir}: no scene group could be exported ({dict(dropped)})")

    for t in TIMES:
        atomic_write_text(
            out / ANNOTATION_DIR / f"strideqa_bench_t{t}.json",
            json.dumps(records_by_t[t], indent=1, ensure_ascii=False, sort_keys=True) + "\n",
        )
    atomic_write_text(out / ANNOTATION_DIR / ANNOTATION_SHEET, _sheet_csv(sheet_rows))
    import yaml

    atomic_write_text(
        out / PROMPT_FILE,
        yaml.safe_dump({"system_prompt": load_prompts()["spatiotemporal"] + "\n"}, sort_keys=True),
    )
    entries = [e for _, _, e in baseline_source]
    for name in BASELINES:
        answers = baseline_answers(name, entries, cfg.seed)
        for t in TIMES:
            preds = [
                {**rec, "pred": answers[e["id"]], "model_id": f"autolabel-{name}", "t": t}
                for t_rec, rec, e in baseline_source
                if t_rec == t
            ]
            atomic_write_text(
                out / "baselines" / name / f"{name}_t{t}.json",
                json.dumps(preds, indent=1, ensure_ascii=False, sort_keys=True) + "\n",
            )
    summary = {
        "format": "strideqa",
        "source_run": str(run),
        "clips": sorted(by_clip),
        "questions": n_question,
        "groups": n_group,
        "by_category": dict(
            sorted(Counter(r["qa_category"] for rs in records_by_t.values() for r in rs).items())
        ),
        "groups_by_relation": dict(sorted(Counter(r[2] for r in sheet_rows).items())),
        "images": len(copied),
        "dropped": dict(sorted((k, v) for k, v in dropped.items() if v)),
        "native": {"questions": native["questions"], "folder": NATIVE_DIR},
        "files": {
            "annotations": [f"{ANNOTATION_DIR}/strideqa_bench_t{t}.json" for t in TIMES],
            "sheet": f"{ANNOTATION_DIR}/{ANNOTATION_SHEET}",
            "prompt": PROMPT_FILE,
            "baselines": [f"baselines/{n}" for n in BASELINES],
        },
    }
    atomic_write_json(out / "bench.json", summary, indent=1)
    return summary
