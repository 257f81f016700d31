"""``autolabel eval qa RUN_REFERENCE RUN_CANDIDATE``: how often a detector's QA answers are right.

On a dataset with ground truth, the pipeline runs twice: the reference run with ground-truth replay
detections (``--detector gt``, which replays the annotations exactly) and the candidate run with the detector under test.
Every QA record of the candidate run is then re-answered from the reference run's attributes:

1. Association, per keyframe: candidate tracks to reference tracks by the devkit's class-wise
   centre distance (ground plane, both runs' ego frames are the dataset's): greedy in descending
   candidate score as the devkit's ``accumulate`` does, or Hungarian; a pair counts when its
   distance is within ``match_distance_m`` (2 m, the devkit's tracking threshold).
2. Each candidate question whose regions all have a reference track is re-derived: the same
   registered quantity of its question type on the reference tracks' attribute rows (the same
   phrasing, asked cameras, horizon and options), giving the ground-truth structured answer.
3. The candidate's answer agrees when it matches that answer within the benchmark tolerances
   (:func:`autolabel.benchmark.scoring.values_agree`: distance 25 %, angles 10 degrees, speed 20 % /
   0.5 m/s, discrete answers exactly; a multiple-choice question whose true answer is not among its
   options disagrees).

Per question type it reports: the candidate's questions; ``unmatched`` (a region with no reference
object: a false positive, a wrong class or a box more than 2 m off); ``ambiguous`` (the ground truth
gives no unambiguous answer, e.g. two boxes of nearly equal size: not scored); ``no_reference``
(a visibility question about an object the reference run never showed, or a colour question
about one whose colour it never measured); ``not_scored`` (captions: no answer key); ``agree``;
``agreement``
(agree over the scored questions, unmatched counted as wrong) and ``agreement_matched`` (over the
matched ones only). It also counts the reference run's questions the candidate run missed: those
about an object the candidate did not detect (no associated candidate track at the keyframe).

Precision against yield: every record carries a confidence (``autolabel.qa.confidence``). For
each threshold of ``CURVE_THRESHOLDS`` the candidate's questions at or above it give an
``agreement`` (agree over scored, as above) and a ``yield``: agreeing questions over the questions
the reference run gives that have an answer key (all but captions): the share of the ground
truth's questions the gated candidate answers right. ``curve`` holds both overall, per category and per type, with ``default_threshold``
(``QAConfig.min_confidence``'s default) marked. Thresholds below the gate the candidate run was made
with show that gate's figures (its records hold nothing less confident); run the candidate with
``qa: {min_confidence: 0}`` to see the whole curve. Records without a confidence (older runs)
count as fully confident.

Outputs ``label_quality.json`` (default ``RUN_CANDIDATE/eval/label_quality.json``).
"""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from autolabel.atomic_io import atomic_write_json
from autolabel.attributes import ObjectAttributes
from autolabel.benchmark.scoring import answer_spec, format_fraction, values_agree
from autolabel.classes import DETECTION_CLASSES

LABEL_QUALITY_FILE = "label_quality.json"
#: The Set-of-Mark regions of a clip's QA keyframes, as the pipeline writes them.
REGIONS_FILE = "marks/regions.json"
MATCH_METHODS = ("greedy", "hungarian")
#: Statuses of a candidate question (``not_scored``: captions, which have no answer key).
STATUSES = ("agree", "disagree", "unmatched", "ambiguous", "no_reference", "not_scored")
#: Confidence thresholds of the precision-yield curve.
CURVE_THRESHOLDS = tuple(round(0.05 * k, 2) for k in range(21))


@dataclass(frozen=True)
class LabelQualityConfig:
    """Settings of :func:`evaluate_label_quality`.

    Attributes:
        match_distance_m: a candidate and a reference box are the same object when their centres
            are at most this far apart on the ground plane (the devkit's tracking threshold, 2 m).
        method: ``greedy`` (candidates in descending score take their nearest free reference, as
            the devkit) or ``hungarian`` (minimum total distance).
        class_wise: only boxes of the same detection class match (the devkit's rule).
    """

    match_distance_m: float = 2.0
    method: str = "greedy"
    class_wise: bool = True

    def __post_init__(self) -> None:
        if not np.isfinite(self.match_distance_m) or self.match_distance_m <= 0:
            raise ValueError(f"match_distance_m: must be > 0, got {self.match_distance_m!r}")
        if self.method not in MATCH_METHODS:
            raise ValueError(f"method: must be one of {MATCH_METHODS}, got {self.method!r}")


# ------------------------------------------------------------------------------ association


def _greedy_assign(dist: np.ndarray, order: np.ndarray, max_d: float) -> np.ndarray:
    """(N,) reference column of each candidate row, -1 where none (numba kernel below)."""
    return _greedy_kernel(np.ascontiguousarray(dist), np.ascontiguousarray(order), float(max_d))


def _make_greedy_kernel():
    from numba import njit

    @njit(cache=True)
    def kernel(dist, order, max_d):
        n, m = dist.shape
        match = np.full(n, -1, np.int64)
        taken = np.zeros(m, np.bool_)
        for i in order:
            best, best_j = max_d, -1
            for j in range(m):
                if not taken[j] and dist[i, j] <= best:
                    if best_j < 0 or dist[i, j] < best:
                        best, best_j = dist[i, j], j
            if best_j >= 0:
                taken[best_j] = True
                match[i] = best_j
        return match

    return kernel


_greedy_kernel = _make_greedy_kernel()


def associate_frame(
    cand_xy_m: np.ndarray,
    cand_label: np.ndarray,
    cand_score: np.ndarray,
    ref_xy_m: np.ndarray,
    ref_label: np.ndarray,
    config: LabelQualityConfig | None = None,
) -> np.ndarray:
    """Reference index of each candidate box of one frame (-1: no match).

    Args:
        cand_xy_m: (N, 2) candidate centres, ground plane, metres (any frame shared with refs).
        cand_label, cand_score: (N,) class index and score.
        ref_xy_m: (M, 2) reference centres; ref_label: (M,).
        config: threshold, method, class rule.

    Returns:
        (N,) int64 index into the references.
    """
    cfg = config or LabelQualityConfig()
    n, m = len(cand_xy_m), len(ref_xy_m)
    if n == 0 or m == 0:
        return np.full(n, -1, dtype=np.int64)
    dist = np.linalg.norm(cand_xy_m[:, None, :] - ref_xy_m[None, :, :], axis=2)
    if cfg.class_wise:
        dist = np.where(cand_label[:, None] == ref_label[None, :], dist, np.inf)
    if cfg.method == "greedy":
        # Descending score, ties by index: the devkit's order (np.argsort of -score, stable).
        order = np.argsort(-np.asarray(cand_score, dtype=np.float64), kind="stable")
        return _greedy_assign(dist, order.astype(np.int64), cfg.match_distance_m)
    from scipy.optimize import linear_sum_assignment

    big = 1e9
    cost = np.where(dist <= cfg.match_distance_m, dist, big)
    rows, cols = linear_sum_assignment(cost)
    out = np.full(n, -1, dtype=np.int64)
    ok = cost[rows, cols] < big
    out[rows[ok]] = cols[ok]
    return out


def associate_tracks(
    reference: ObjectAttributes,
    candidate: ObjectAttributes,
    frames: Sequence[int],
    config: LabelQualityConfig | None = None,
) -> dict[int, dict[int, int]]:
    """Per frame index, candidate track id -> reference track id (matched pairs only).

    Centres are compared in each frame's ego frame (both runs share the dataset's ego poses).
    """
    cfg = config or LabelQualityConfig()
    out: dict[int, dict[int, int]] = {}
    c_frame, r_frame = np.asarray(candidate.frame_index), np.asarray(reference.frame_index)
    for f in sorted({int(x) for x in frames}):
        ci, ri = np.flatnonzero(c_frame == f), np.flatnonzero(r_frame == f)
        match = associate_frame(
            np.stack([candidate.x_ego_m[ci], candidate.y_ego_m[ci]], axis=1),
            np.asarray(candidate.label)[ci],
            np.asarray(candidate.score)[ci],
            np.stack([reference.x_ego_m[ri], reference.y_ego_m[ri]], axis=1),
            np.asarray(reference.label)[ri],
            cfg,
        )
        ok = match >= 0
        out[f] = dict(
            zip(
                (int(x) for x in candidate.track_id[ci[ok]]),
                (int(x) for x in reference.track_id[ri[match[ok]]]),
                strict=True,
            )
        )
    return out


# ------------------------------------------------------------------------------ re-answering


def reference_visibility(
    records: Sequence[Mapping[str, Any]], regions_doc: Mapping[str, Any] | None = None
) -> dict[tuple[int, int], list[str]]:
    """(keyframe, track id) -> cameras that show it at the keyframe in the reference run.

    From ``marks/regions.json`` (every region of every QA keyframe) when given, completed by the
    regions of the run's QA records.
    """
    out: dict[tuple[int, int], list[str]] = {}
    for entry in (regions_doc or {}).get("keyframes", []):
        kf = int(entry["frame_index"])
        for reg in entry.get("regions", []):
            out[(kf, int(reg["track_id"]))] = list(reg.get("cameras_at_keyframe") or [])
    for rec in records:
        kf = int(rec["keyframe"]["frame_index"])
        for reg in rec.get("regions") or ():
            out.setdefault((kf, int(reg["track_id"])), list(reg.get("cameras_visible") or []))
    return out


def _channels(records: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    from autolabel.sensors import CAMERA_CHANNELS

    seen = {c for rec in records for c in rec.get("cameras") or []}
    for rec in records:
        for reg in rec.get("regions") or ():
            seen.update(reg.get("cameras_visible") or [])
    return tuple(c for c in CAMERA_CHANNELS if c in seen) + tuple(
        sorted(seen - set(CAMERA_CHANNELS))
    )


def reanswer_clip(
    candidate_records: Sequence[Mapping[str, Any]],
    reference: ObjectAttributes,
    reference_records: Sequence[Mapping[str, Any]],
    assoc: Mapping[int, Mapping[int, int]],
    templates: Any,
    assoc_any_class: Mapping[int, Mapping[int, int]] | None = None,
    regions_doc: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Per candidate record: its status against the reference and the reference answer.

    Args:
        candidate_records, reference_records: one clip's ``qa.jsonl`` records of both runs.
        reference: the reference run's attributes of the clip.
        assoc: per keyframe, candidate track -> reference track (:func:`associate_tracks`).
        templates: the QA templates.
        assoc_any_class: the same association without the class rule; an unmatched question
            whose regions all match under it is marked ``wrong_class``.
        regions_doc: the reference clip's ``marks/regions.json`` (which cameras show each
            region), for the visibility questions.

    Returns:
        One dict per record, in order: ``id``, ``type``, ``category``, ``kind``, ``status`` (one
        of ``STATUSES``), ``wrong_class`` (unmatched only because of the class) and
        ``reference_values`` (the re-derived ``answer_values``, or None).
    """
    from autolabel.qa.dynamic import COLOUR_QUANTITIES
    from autolabel.qa.generate import content_of
    from autolabel.qa.quantities import QuantityInput
    from autolabel.qa.records import answer_key, correct_letter, structured_answer

    ref_vis = reference_visibility(reference_records, regions_doc)
    channels = _channels([*candidate_records, *reference_records])
    # Measured colours of the reference run's regions (None: not measured, e.g. no images).
    ref_colour = {
        (int(rec["keyframe"]["frame_index"]), int(reg["track_id"])): (
            [np.nan] * 3 if reg["colour_lab"] is None else reg["colour_lab"]
        )
        for rec in reference_records
        for reg in rec.get("regions") or ()
        if "colour_lab" in reg
    }
    results: list[dict[str, Any] | None] = [None] * len(candidate_records)
    batches: dict[str, list[tuple[int, np.ndarray, list[int], bool]]] = defaultdict(list)
    for i, rec in enumerate(candidate_records):
        base = {
            "id": rec["id"],
            "type": rec["type"],
            "category": rec["category"],
            "kind": rec["kind"],
            "confidence": float(rec.get("confidence", 1.0)),
            "reference_values": None,
        }
        kf = int(rec["keyframe"]["frame_index"])
        frame_assoc = assoc.get(kf, {})
        qt_i = templates.types.get(rec["type"])
        if qt_i is not None and qt_i.category == "caption":
            results[i] = {**base, "status": "not_scored"}  # a description, no answer key
            continue
        if qt_i is not None and qt_i.subjects == "class_group_members":
            # A count's truth is the reference run's regions of the group at the keyframe.
            ref_tracks = _reference_group_tracks(qt_i, rec, reference, ref_vis, kf)
        else:
            ref_tracks = [frame_assoc.get(int(reg["track_id"])) for reg in rec.get("regions") or ()]
        if any(t is None for t in ref_tracks):
            any_class = (assoc_any_class or {}).get(kf, {})
            wrong_class = assoc_any_class is not None and all(
                int(reg["track_id"]) in any_class for reg in rec.get("regions") or ()
            )
            results[i] = {**base, "status": "unmatched", "wrong_class": wrong_class}
            continue
        rows = reference.row_of(np.full(len(ref_tracks), kf), np.array(ref_tracks, dtype=np.int64))
        if np.any(rows < 0):
            results[i] = {**base, "status": "unmatched"}
            continue
        vis_known = all((kf, t) in ref_vis for t in ref_tracks)
        if qt_i is not None and qt_i.quantity.name in COLOUR_QUANTITIES:
            vis_known = all((kf, t) in ref_colour for t in ref_tracks)
        batches[rec["type"]].append((i, rows, ref_tracks, vis_known))
        results[i] = base
    for type_id, batch in batches.items():
        qt = templates.types.get(type_id)
        if qt is None:
            raise ValueError(f"unknown question type {type_id!r}")
        needs_visibility = qt.quantity.name in ("visible_cameras", "visible_in_both")
        needs_visibility |= qt.quantity.name in COLOUR_QUANTITIES
        n, k = len(batch), qt.n_regions
        recs = [candidate_records[i] for i, *_ in batch]
        rows = np.full((n, k), -1, dtype=np.int64)  # -1 pads a variable set of regions
        colour_lab = np.full((n, k, 3), np.nan)
        option = np.full(n, -1, dtype=np.int64)
        keys = [g["key"] for g in qt.params.get("groups", ())] if "groups" in qt.params else []
        for j, (rec, (_, r, tracks, _)) in enumerate(zip(recs, batch, strict=True)):
            rows[j, : len(r)] = r
            kf = int(rec["keyframe"]["frame_index"])
            for m, t in enumerate(tracks):
                if (kf, t) in ref_colour:
                    colour_lab[j, m] = ref_colour[(kf, t)]
            if keys:
                option[j] = keys.index((rec.get("params") or {}).get("class_group"))
        frame_index = np.array([r["keyframe"]["frame_index"] for r in recs], dtype=np.int64)
        horizon = np.array([float((r.get("params") or {}).get("horizon_s") or 0.0) for r in recs])
        cams = np.full((n, 2), -1, dtype=np.int64)
        visible = np.zeros((n, k, len(channels)), dtype=bool)
        for j, (rec, (_, _, tracks, _)) in enumerate(zip(recs, batch, strict=True)):
            asked = (rec.get("params") or {}).get("asked_cameras") or []
            if len(asked) == 2:
                cams[j] = [channels.index(a) for a in asked]
            kf = int(rec["keyframe"]["frame_index"])
            for r, t in enumerate(tracks):
                for ch in ref_vis.get((kf, t), []):
                    visible[j, r, channels.index(ch)] = True
        q = QuantityInput(
            attrs=reference,
            rows=rows,
            frame_index=frame_index,
            horizon_s=horizon,
            cameras=cams,
            visible=visible,
            channels=channels,
            params=qt.params,
            option=option,
            colour_lab=colour_lab,
        )
        res = qt.quantity(q)
        for j, (i, _, _, vis_known) in enumerate(batch):
            rec = candidate_records[i]
            out = results[i]
            assert out is not None
            if needs_visibility and not vis_known:
                out["status"] = "no_reference"
                continue
            if not res.valid[j]:
                out["status"] = "ambiguous"
                continue
            present = rows[j][rows[j] >= 0]
            region_ids = [int(reg["region_id"]) for reg in rec["regions"]]
            if len(region_ids) != len(present):  # a count: the reference's own set
                region_ids = [int(t) for t in batch[j][2]]
            option_key = option_text = None
            if keys:
                group = qt.params["groups"][int(option[j])]
                option_key, option_text = str(group["key"]), str(group["text"])
            content = content_of(
                res,
                j,
                region_ids=region_ids,
                classes=[DETECTION_CLASSES[int(reference.label[x])] for x in present],
                horizon_s=float(horizon[j]),
                asked_cameras=tuple((rec.get("params") or {}).get("asked_cameras") or ()),
                option_key=option_key,
                option_text=option_text,
            )
            letter = None
            if qt.choices is not None:
                letter = correct_letter(qt, rec["choices"], content)
                if letter is None:
                    out["status"] = "disagree"  # the true answer is not among the options
                    continue
            q_idx = (rec.get("template_variant") or {}).get("question", 0)
            yes_no = None
            if isinstance(q_idx, int) and 0 <= q_idx < len(qt.questions):
                if qt.questions[q_idx].asks is not None:
                    yes_no = answer_key(qt, qt.questions[q_idx], content.outcome)
            ref_values = structured_answer(qt, content, yes_no, letter)
            out["reference_values"] = ref_values
            spec, truth = answer_spec({**rec, "answer_values": ref_values}, qt)
            _, given = answer_spec(rec, qt)
            out["status"] = "agree" if values_agree(spec.kind, truth, given) else "disagree"
    return [r for r in results if r is not None]


def _reference_group_tracks(
    qt: Any,
    rec: Mapping[str, Any],
    reference: ObjectAttributes,
    ref_vis: Mapping[tuple[int, int], list[str]],
    kf: int,
) -> list[int]:
    """Reference tracks a count question counts: the reference run's regions that some camera
    shows at the keyframe, whose class is in the record's class group (at most ``qt.n_regions``).

    ``marks/regions.json`` also lists regions seen only in other frames of the keyframe's window
    (no camera at the keyframe); the generator never counts those, so neither does the truth.
    """
    key = (rec.get("params") or {}).get("class_group")
    classes = next((g["classes"] for g in qt.params["groups"] if g["key"] == key), ())
    tracks = np.array(sorted(t for (f, t), cams in ref_vis.items() if f == kf and cams), np.int64)
    rows = reference.row_of(np.full(len(tracks), kf), tracks)
    names = np.asarray(DETECTION_CLASSES, dtype=object)[np.asarray(reference.label)[rows]]
    keep = (rows >= 0) & np.isin(names, list(classes))
    return [int(t) for t in tracks[keep]][: qt.n_regions]


def missed_reference_questions(
    reference_records: Sequence[Mapping[str, Any]],
    assoc: Mapping[int, Mapping[int, int]],
) -> list[bool]:
    """Per reference record: True when the candidate has no track for one of its regions."""
    reverse = {f: set(m.values()) for f, m in assoc.items()}
    out = []
    for rec in reference_records:
        kf = int(rec["keyframe"]["frame_index"])
        found = reverse.get(kf, set())
        out.append(any(int(reg["track_id"]) not in found for reg in rec.get("regions") or ()))
    return out


# ------------------------------------------------------------------------------ run level


def _rate(num: int, den: int) -> float | None:
    return num / den if den else None


def _summarize(rows: Sequence[Mapping[str, Any]], missed: Sequence[tuple[str, bool]]) -> dict:
    counts = {s: 0 for s in STATUSES}
    for r in rows:
        counts[r["status"]] += 1
    scored = counts["agree"] + counts["disagree"] + counts["unmatched"]
    matched = counts["agree"] + counts["disagree"]
    n_ref = len(missed)
    n_missed = sum(1 for _, m in missed if m)
    return {
        "candidate_questions": len(rows),
        **counts,
        "unmatched_wrong_class": sum(1 for r in rows if r.get("wrong_class")),
        "agreement": _rate(counts["agree"], scored),
        "agreement_matched": _rate(counts["agree"], matched),
        "reference_questions": n_ref,
        "missed": n_missed,
        "missed_fraction": _rate(n_missed, n_ref),
    }


def precision_yield(
    status: np.ndarray,
    confidence: np.ndarray,
    n_reference: int,
    thresholds: Sequence[float] = CURVE_THRESHOLDS,
) -> dict[str, list]:
    """Agreement and yield of the questions at or above each confidence threshold.

    Args:
        status: (N,) status of each candidate question (``STATUSES``).
        confidence: (N,) its confidence.
        n_reference: the reference run's questions (the yield's denominator).
        thresholds: (T,) confidence thresholds.

    Returns:
        ``thresholds``, ``questions`` (kept), ``scored`` (kept and scored), ``agree``,
        ``agreement`` (agree / scored, None where nothing is scored) and ``yield`` (agree /
        ``n_reference``, None without reference questions), each a list of T.
    """
    status = np.asarray(status, dtype=object)
    conf = np.asarray(confidence, dtype=np.float64)
    t = np.asarray(thresholds, dtype=np.float64)
    kept = conf[None, :] >= t[:, None] - 1e-9  # (T, N)
    agree = (kept & (status == "agree")[None, :]).sum(axis=1)
    scored_mask = np.isin(status, ("agree", "disagree", "unmatched"))
    scored = (kept & scored_mask[None, :]).sum(axis=1)
    return {
        "thresholds": [float(x) for x in t],
        "questions": [int(x) for x in kept.sum(axis=1)],
        "scored": [int(x) for x in scored],
        "agree": [int(x) for x in agree],
        "agreement": [_rate(int(a), int(n)) for a, n in zip(agree, scored, strict=True)],
        "yield": [_rate(int(a), n_reference) for a in agree],
    }


def _curves(rows: Sequence[Mapping[str, Any]], missed: Sequence[tuple[str, str, bool]]) -> dict:
    """``precision_yield`` overall, per category and per type."""

    from autolabel.qa.sampling import DEFAULT_MIN_CONFIDENCE

    thresholds = sorted({*CURVE_THRESHOLDS, DEFAULT_MIN_CONFIDENCE})

    def curve(keep_row, keep_ref) -> dict[str, list]:
        sel = [r for r in rows if keep_row(r)]
        return precision_yield(
            np.array([r["status"] for r in sel], dtype=object),
            np.array([r.get("confidence", 1.0) for r in sel], dtype=np.float64),
            sum(1 for m in missed if keep_ref(m)),
            thresholds,
        )

    categories = sorted({r["category"] for r in rows} | {m[1] for m in missed})
    types = sorted({r["type"] for r in rows} | {m[0] for m in missed})
    return {
        "default_threshold": DEFAULT_MIN_CONFIDENCE,
        "overall": curve(lambda r: True, lambda m: True),
        "by_category": {
            c: curve(lambda r, c=c: r["category"] == c, lambda m, c=c: m[1] == c)
            for c in categories
        },
        "by_type": {
            t: curve(lambda r, t=t: r["type"] == t, lambda m, t=t: m[0] == t) for t in types
        },
    }


def _scorable(templates: Any, type_id: str) -> bool:
    """Whether questions of a type have an answer key (captions do not)."""
    qt = templates.types.get(type_id)
    return qt is None or qt.category != "caption"


def at_threshold(curve: Mapping[str, list], threshold: float) -> dict[str, Any]:
    """The curve's point at ``threshold`` (the nearest threshold at or below it)."""
    t = np.asarray(curve["thresholds"], dtype=np.float64)
    i = int(np.searchsorted(t, threshold + 1e-9) - 1)
    i = min(max(i, 0), len(t) - 1)
    return {k: v[i] for k, v in curve.items()}


def _same_clip(reference_dir: Path, candidate_dir: Path) -> None:
    """Both runs read the same scene (their manifests' scene tokens agree), where they say."""
    tokens = []
    for d in (reference_dir, candidate_dir):
        try:
            manifest = json.loads((d / "manifest.json").read_text())
        except (OSError, ValueError):
            return
        tokens.append((manifest.get("inputs") or {}).get("scene_token"))
    if tokens[0] and tokens[1] and tokens[0] != tokens[1]:
        raise ValueError(
            f"{candidate_dir} and {reference_dir} are runs of different scenes "
            f"(scene tokens {tokens[1]} and {tokens[0]})"
        )


def evaluate_label_quality(
    reference_run: str | Path,
    candidate_run: str | Path,
    out_path: str | Path | None = None,
    config: LabelQualityConfig | None = None,
    templates: Any = None,
) -> dict[str, Any]:
    """Label quality of a candidate run's QA against a reference (ground-truth replay) run.

    Args:
        reference_run, candidate_run: run folders with ``<clip>/qa.jsonl`` and
            ``<clip>/attributes.parquet`` for the same clips of the same dataset.
        out_path: where to write the JSON (default ``<candidate_run>/eval/label_quality.json``);
            nothing is written when ``out_path`` is ``False``.
        config: association settings.
        templates: the QA templates (the packaged ones when None).

    Returns:
        ``overall``, ``by_category``, ``by_type`` (see the module docstring), ``clips``,
        ``clips_missing_in_reference``, ``config``.

    Raises:
        FileNotFoundError: a run without QA, or a clip without attributes.
        ValueError: no clip in common.
    """
    from autolabel.benchmark.export import run_clips, validate_records
    from autolabel.config import config_to_dict
    from autolabel.qa.check import ATTRIBUTES_FILE, read_qa_jsonl
    from autolabel.qa.generate import QA_FILE
    from autolabel.qa.templates import load_templates

    cfg = config or LabelQualityConfig()
    templates = templates or load_templates()
    ref_clips = {p.name: p for p in run_clips(reference_run)}
    cand_clips = {p.name: p for p in run_clips(candidate_run)}
    common = sorted(set(ref_clips) & set(cand_clips))
    if not common:
        raise ValueError(
            f"{candidate_run} and {reference_run} have no clip in common "
            f"(candidate: {sorted(cand_clips)[:5]}, reference: {sorted(ref_clips)[:5]})"
        )
    rows: list[dict[str, Any]] = []
    missed: list[tuple[str, str, bool]] = []  # (type, category, missed)
    per_clip = {}
    for clip in common:
        _same_clip(ref_clips[clip], cand_clips[clip])
        ref_records = read_qa_jsonl(ref_clips[clip] / QA_FILE)
        cand_records = read_qa_jsonl(cand_clips[clip] / QA_FILE)
        validate_records(ref_records, ref_clips[clip] / QA_FILE)
        validate_records(cand_records, cand_clips[clip] / QA_FILE)
        ref_attrs = ObjectAttributes.read_parquet(ref_clips[clip] / ATTRIBUTES_FILE)
        cand_attrs = ObjectAttributes.read_parquet(cand_clips[clip] / ATTRIBUTES_FILE)
        frames = {int(r["keyframe"]["frame_index"]) for r in [*ref_records, *cand_records]}
        assoc = associate_tracks(ref_attrs, cand_attrs, sorted(frames), cfg)
        assoc_any = (
            associate_tracks(
                ref_attrs, cand_attrs, sorted(frames), dataclasses.replace(cfg, class_wise=False)
            )
            if cfg.class_wise
            else None
        )
        regions_path = ref_clips[clip] / REGIONS_FILE
        regions_doc = json.loads(regions_path.read_text()) if regions_path.is_file() else None
        clip_rows = reanswer_clip(
            cand_records, ref_attrs, ref_records, assoc, templates, assoc_any, regions_doc
        )
        clip_missed = missed_reference_questions(ref_records, assoc)
        rows += clip_rows
        missed += [
            (r["type"], r["category"], m) for r, m in zip(ref_records, clip_missed, strict=True)
        ]
        per_clip[clip] = _summarize(
            clip_rows, [(r["type"], m) for r, m in zip(ref_records, clip_missed, strict=True)]
        )

    by_type: dict[str, Any] = {}
    for t in sorted({r["type"] for r in rows} | {m[0] for m in missed}):
        by_type[t] = _summarize(
            [r for r in rows if r["type"] == t], [(m[0], m[2]) for m in missed if m[0] == t]
        )
    by_category: dict[str, Any] = {}
    for c in sorted({r["category"] for r in rows} | {m[1] for m in missed}):
        by_category[c] = _summarize(
            [r for r in rows if r["category"] == c], [(m[0], m[2]) for m in missed if m[1] == c]
        )
    result = {
        "reference_run": str(reference_run),
        "candidate_run": str(candidate_run),
        "config": config_to_dict(cfg),
        "clips": common,
        "clips_missing_in_reference": sorted(set(cand_clips) - set(ref_clips)),
        "clips_missing_in_candidate": sorted(set(ref_clips) - set(cand_clips)),
        "overall": _summarize(rows, [(m[0], m[2]) for m in missed]),
        "by_category": by_category,
        "by_type": by_type,
        "by_clip": per_clip,
        # Captions have no answer key: no candidate answer can agree with them.
        "curve": _curves(rows, [m for m in missed if _scorable(templates, m[0])]),
    }
    if out_path is not False:
        path = Path(out_path) if out_path else Path(candidate_run) / "eval" / LABEL_QUALITY_FILE
        atomic_write_json(path, result, indent=1)
        result["output"] = str(path)
    return result


def format_label_quality(result: Mapping[str, Any]) -> list[str]:
    """``name: value`` lines of the overall figures, then one line per question type."""

    f = format_fraction

    o = result["overall"]
    curve = result.get("curve")
    lines = [
        f"clips: {len(result['clips'])}",
        f"candidate_questions: {o['candidate_questions']}",
        f"agreement: {f(o['agreement'])}",
        f"agreement_matched: {f(o['agreement_matched'])}",
        f"unmatched: {o['unmatched']}",
        f"unmatched_wrong_class: {o['unmatched_wrong_class']}",
        f"ambiguous: {o['ambiguous']}",
        f"reference_questions: {o['reference_questions']}",
        f"missed: {o['missed']}",
        f"missed_fraction: {f(o['missed_fraction'])}",
    ]
    if curve:
        d = curve["default_threshold"]
        p = at_threshold(curve["overall"], d)
        lines += [
            f"default_min_confidence: {d:g}",
            f"agreement_at_default: {f(p['agreement'])}",
            f"yield_at_default: {f(p['yield'])}",
            f"questions_at_default: {p['questions']}",
        ]
    return lines


def write_precision_yield_plot(result: Mapping[str, Any], path: str | Path | None = None) -> Path:
    """The precision-yield plot as PNG beside the JSON (``<output stem>_precision_yield.png``)."""
    from autolabel.atomic_io import atomic_write_bytes
    from autolabel.report.plots import precision_yield_png

    if path is None:
        out = Path(result.get("output") or Path(result["candidate_run"]) / "eval" / "x.json")
        path = out.with_name(out.stem + "_precision_yield.png")
    return atomic_write_bytes(
        path, precision_yield_png(result["curve"], "QA agreement against yield")
    )


def format_precision_yield(result: Mapping[str, Any], every: int = 2) -> list[str]:
    """The precision-yield curve as text: per threshold (every ``every``-th, and the default),
    overall and per category: ``agreement % / yield %``; the default's row marked ``*``."""
    curve = result.get("curve")
    if not curve:
        return []

    def pct(x: float | None) -> str:
        return "    -" if x is None else f"{100 * x:5.1f}"

    d = curve["default_threshold"]
    groups = {"all": curve["overall"], **curve["by_category"]}
    head = f"{'min conf.':>9}" + "".join(f" | {g[:22]:^22}" for g in groups)
    sub = f"{'':>9}" + "".join(" |  n    agree%  yield% " for _ in groups)
    lines = ["agreement and yield over confidence thresholds (* default)", head, sub]
    for i, t in enumerate(curve["overall"]["thresholds"]):
        is_default = abs(t - d) < 1e-9
        if i % every and not is_default:
            continue
        row = f"{t:>8.2f}{'*' if is_default else ' '}"
        for c in groups.values():
            row += f" | {c['questions'][i]:4d}  {pct(c['agreement'][i])}  {pct(c['yield'][i])} "
        lines.append(row)
    return lines


def label_quality_table(result: Mapping[str, Any]) -> Any:
    """A ``rich`` table: per question type, counts and agreement (percent)."""
    from rich.table import Table

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}"

    table = Table(title="label quality by question type")
    cols = (
        "type",
        "questions",
        "unmatched",
        "ambiguous",
        "agree",
        "agreement %",
        "matched %",
        "ref. questions",
        "missed %",
    )
    curve = result.get("curve")
    if curve:
        cols += (f"agree % at {curve['default_threshold']:g}", "yield %")
    for c in cols:
        table.add_column(c, justify="left" if c == "type" else "right")
    for t, r in result["by_type"].items():
        extra = ()
        if curve and t in curve["by_type"]:
            p = at_threshold(curve["by_type"][t], curve["default_threshold"])
            extra = (pct(p["agreement"]), pct(p["yield"]))
        table.add_row(
            t,
            str(r["candidate_questions"]),
            str(r["unmatched"]),
            str(r["ambiguous"]),
            str(r["agree"]),
            pct(r["agreement"]),
            pct(r["agreement_matched"]),
            str(r["reference_questions"]),
            pct(r["missed_fraction"]),
            *extra,
        )
    return table
