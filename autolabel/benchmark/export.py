"""``autolabel bench export RUN --out BENCH``: a QA run as a benchmark any VLM can be fed.

Three sets, from every ``RUN/<clip>/qa.jsonl``:

- ``spatiotemporal``: STRIDE-QA scene groups. One target region of one keyframe; four context
  images (t = -1.5, -1.0, -0.5, 0 s) of the camera that shows it, with only the target's
  Set-of-Mark mark (its mask, box and id); questions on its distance and bearing, its speed and
  the ego's speed at t = 0, 1, 2, 3 s. Only groups with a position question at every t are kept.
  Each group carries a dynamic situation (:func:`classify_situations`).
- ``spatial``: object-centric, ego-centric and multi-view questions (qualitative and
  quantitative) on the keyframe image(s) of the question's camera(s), every region of that
  keyframe marked.
- ``multiple_choice``: the multiple-choice questions on the same images.
- ``dynamic``: appearance, action, counting and temporal-order questions (4D-Bench subtasks; a
  count over all six cameras shows all six keyframe images). Captions are not exported (they need
  caption metrics, not an answer key).

Files under ``BENCH/``:

- ``questions.jsonl``: one line per question, what a model sees: ``id``, ``group_id``, ``set``,
  ``images`` (paths relative to BENCH, in time order), ``image_times_s``, ``cameras``, ``prompt``
  (the set's instruction prompt, ``autolabel/benchmark/prompts.yaml``), ``question``,
  ``choices``.
- ``answer_key.jsonl``: the truth for scoring: ``id``, ``set``, ``category``, ``type``, ``kind``,
  ``class``, ``situation``, ``horizon_s``, ``clip``, ``keyframe``, ``spec`` (what the answer must
  state, for the parser), ``truth`` (the true values), ``answer`` (the generated text) and
  ``confidence`` (the record's, ``autolabel.qa.confidence``; 1 for records made before it).
- ``images/<clip>/...png``: the marked images.
- ``baselines/{oracle,constant,random}.jsonl``: reference answer files (``baselines.py``).
- ``bench.json``: counts per set, type, class and situation; the source run; the tolerances.

Keyframe images are the pipeline's own Set-of-Mark images (``<clip>/marks/<kf>_<CAMERA>.png``)
where the run has them; the rest (the target-only context frames, runs without marks) are
rendered from the dataset's camera images (the clip's ``manifest.json`` names the dataroot, or
pass ``dataroot``) with :func:`autolabel.set_of_mark.render_marks`. With
``images=False`` nothing is rendered and ``images`` lists the dataset-relative source paths.
Same run and config give the same bytes.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from autolabel.atomic_io import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    canonical_json,
)
from autolabel.benchmark.baselines import BASELINES, baseline_answers, write_answers
from autolabel.benchmark.scoring import (
    ANGLE_TOL_DEG,
    DEFAULT_PROFILE,
    DISTANCE_REL_TOL,
    HORIZONS_S,
    SPEED_ABS_TOL_MPS,
    SPEED_REL_TOL,
    SPEED_SLOW_MPS,
    answer_spec,
)

QUESTIONS_FILE = "questions.jsonl"
ANSWER_KEY_FILE = "answer_key.jsonl"
BENCH_FILE = "bench.json"
PROMPTS_FILE = Path(__file__).with_name("prompts.yaml")
#: Dynamic situations of a scene group (STRIDE-QA appendix), plus ``static``.
SITUATIONS = (
    "oncoming_passing",
    "maintaining",
    "overtaking",
    "path_divergence",
    "moving_away",
    "other",
    "static",
)
_SPATIAL_CATEGORIES = ("object_centric", "ego_centric", "multi_view")
_DYNAMIC_CATEGORIES = ("appearance", "action", "counting", "temporal")
_CONTEXT_OFFSETS_S = (-1.5, -1.0, -0.5, 0.0)


@dataclass(frozen=True)
class SituationConfig:
    """Thresholds of :func:`classify_situations`.

    Attributes:
        moving_mps: an agent (or the ego) moves above this speed.
        opposite_deg: relative heading beyond which the target drives the other way.
        same_deg: relative heading below which both drive the same way.
        turn_deg: change of relative heading over the 3 s that makes the paths diverge.
        gap_change_m, gap_change_frac: a gap changes when it moves by more than the larger of the
            two (metres; fraction of the gap at t = 0).
        bearing_change_deg: the bearing stays when it moves by at most this.
    """

    moving_mps: float = 1.0
    opposite_deg: float = 135.0
    same_deg: float = 45.0
    turn_deg: float = 30.0
    gap_change_m: float = 2.0
    gap_change_frac: float = 0.2
    bearing_change_deg: float = 15.0


@dataclass(frozen=True)
class ExportConfig:
    """Settings of :func:`export_benchmark`.

    Attributes:
        images: render the Set-of-Mark images (needs the dataset's camera images).
        dynamic_only: drop scene groups where neither the target nor the ego moves (STRIDE-QA
            keeps only groups with dynamic interaction).
        seed: seed of the random baseline.
        situation: thresholds of the dynamic-situation classifier.
    """

    images: bool = True
    dynamic_only: bool = False
    seed: int = 0
    situation: SituationConfig = field(default_factory=SituationConfig)


def load_prompts(path: str | Path = PROMPTS_FILE) -> dict[str, str]:
    """The instruction prompt of each set."""
    import yaml

    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    missing = [s for s in ("spatiotemporal", "spatial", "multiple_choice") if s not in (data or {})]
    if missing:
        raise ValueError(f"{path}: no prompt for set {missing[0]!r}")
    return {k: str(v) for k, v in data.items()}


def _wrap(a: np.ndarray) -> np.ndarray:
    w = np.mod(a + 180.0, 360.0) - 180.0
    return np.where(w == -180.0, 180.0, w)


def classify_situations(
    attrs: Any,
    keyframe_index: np.ndarray,
    track_id: np.ndarray,
    config: SituationConfig | None = None,
) -> np.ndarray:
    """The dynamic situation of each scene group (target track at a keyframe, over the next 3 s).

    Rules, first that applies (STRIDE-QA's six situations, plus ``static``):

    - ``static``: neither the target nor the ego moves at t = 0;
    - ``oncoming_passing``: the target drives the other way (relative heading beyond
      ``opposite_deg``) and moves;
    - ``overtaking``: same direction, and the target's side of the ego along x (ahead / behind)
      changes between t = 0 and t = 3 s (one passes the other);
    - ``path_divergence``: the relative heading changes by more than ``turn_deg`` (one turns);
    - ``moving_away``: same direction, the target ahead, and the gap grows;
    - ``maintaining``: same direction, gap and bearing about constant;
    - ``other``: anything else (STRIDE-QA's minor relations).

    Args:
        attrs: the clip's ``ObjectAttributes``.
        keyframe_index: (G,) keyframe frame index of each group.
        track_id: (G,) the target's track id.
        config: thresholds.

    Returns:
        (G,) object array of situation names.

    Raises:
        ValueError: a target has no attributes at its keyframe or no state 3 s later.
    """
    cfg = config or SituationConfig()
    kf = np.asarray(keyframe_index, dtype=np.int64)
    tid = np.asarray(track_id, dtype=np.int64)
    rows = attrs.row_of(kf, tid)
    if np.any(rows < 0):
        i = int(np.flatnonzero(rows < 0)[0])
        raise ValueError(f"track {tid[i]} has no attributes at keyframe {kf[i]}")
    horizons = list(attrs.future_horizons_s)
    if 3.0 not in horizons:
        raise ValueError(f"the attributes have no 3 s future state (horizons {horizons})")
    k3 = horizons.index(3.0)
    f3 = attrs.future_frame_index[rows, k3]
    rows3 = attrs.row_of(np.maximum(f3, 0), tid)
    absent = (f3 < 0) | (rows3 < 0)
    if np.any(absent):
        i = int(np.flatnonzero(absent)[0])
        raise ValueError(f"track {tid[i]} at keyframe {kf[i]} has no state 3 s later")
    speed0 = attrs.speed_mps[rows]
    ego0 = attrs.ego_speed_mps[rows]
    rel0 = attrs.relative_heading_deg[rows]
    rel3 = attrs.relative_heading_deg[rows3]
    d0, b0 = attrs.distance_m[rows], attrs.bearing_deg[rows]
    d3, b3 = attrs.future_distance_m[rows, k3], attrs.future_bearing_deg[rows, k3]
    x0 = d0 * np.cos(np.radians(b0))
    x3 = d3 * np.cos(np.radians(b3))
    moving = np.nan_to_num(speed0) > cfg.moving_mps
    ego_moving = np.nan_to_num(ego0) > cfg.moving_mps
    opposite = np.abs(rel0) > cfg.opposite_deg
    same = np.abs(rel0) < cfg.same_deg
    turned = np.abs(_wrap(rel3 - rel0)) > cfg.turn_deg
    gap_tol = np.maximum(cfg.gap_change_m, cfg.gap_change_frac * d0)
    conditions = [
        ~moving & ~ego_moving,
        opposite & moving,
        same & (np.sign(x0) != np.sign(x3)),
        turned,
        same & (x0 > 0) & (d3 - d0 > gap_tol),
        same & (np.abs(d3 - d0) <= gap_tol) & (np.abs(_wrap(b3 - b0)) <= cfg.bearing_change_deg),
    ]
    names = [
        "static",
        "oncoming_passing",
        "overtaking",
        "path_divergence",
        "moving_away",
        "maintaining",
    ]
    return np.select(conditions, np.array(names, dtype=object), default="other").astype(object)


# ------------------------------------------------------------------------------ reading a run


def run_clips(run_dir: str | Path) -> list[Path]:
    """Clip folders of a run that have a ``qa.jsonl``, sorted by name.

    Raises:
        FileNotFoundError: the run folder is missing or no clip has QA.
    """
    from autolabel.qa.generate import QA_FILE

    run = Path(run_dir)
    if not run.is_dir():
        raise FileNotFoundError(f"{run}: run folder not found")
    clips = sorted(p.parent for p in run.glob(f"*/{QA_FILE}"))
    if not clips:
        raise FileNotFoundError(f"{run}: no <clip>/{QA_FILE} found")
    return clips


_RECORD_FIELDS = {
    "id": str,
    "group_id": str,
    "category": str,
    "type": str,
    "kind": str,
    "question": str,
    "answer": str,
    "answer_values": dict,
    "keyframe": dict,
    "context_frames": list,
    "cameras": list,
    "images": dict,
    "regions": list,
}


def validate_records(records: Sequence[Any], path: str | Path) -> None:
    """Check the fields this module reads from ``qa.jsonl`` records.

    Raises:
        ValueError: naming the file, the line, the record id and the field that is missing or of
            the wrong type.
    """
    for n, rec in enumerate(records, 1):
        where = f"{path}:{n}"
        if not isinstance(rec, Mapping):
            raise ValueError(f"{where}: expected a JSON object")
        rid = rec.get("id", "?")
        for name, kind in _RECORD_FIELDS.items():
            if not isinstance(rec.get(name), kind):
                raise ValueError(
                    f"{where} (record {rid}): field {name!r} missing or not a {kind.__name__}"
                )
        if not isinstance(rec["keyframe"].get("frame_index"), int):
            raise ValueError(f"{where} (record {rid}): keyframe.frame_index missing")
        for i, reg in enumerate(rec["regions"]):
            if not isinstance(reg, Mapping) or not {"region_id", "track_id", "class"} <= set(reg):
                raise ValueError(
                    f"{where} (record {rid}): regions[{i}] needs region_id, track_id, class"
                )
        for cam in rec["cameras"]:
            if cam not in rec["images"]:
                raise ValueError(f"{where} (record {rid}): no images for camera {cam!r}")


def clip_dataroot(clip_dir: Path, dataroot: str | Path | None = None) -> Path | None:
    """The dataset root a clip was read from: ``dataroot`` if given, else its manifest's."""
    if dataroot is not None:
        return Path(dataroot)
    manifest = clip_dir / "manifest.json"
    if manifest.is_file():
        try:
            root = json.loads(manifest.read_text()).get("inputs", {}).get("dataroot")
        except ValueError:
            raise ValueError(f"{manifest}: not valid JSON") from None
        if root:
            return Path(root)
    return None


# ------------------------------------------------------------------------------ images


class _MarkRenderer:
    """Renders and writes the marked images of one clip, each file once."""

    def __init__(self, out_dir: Path, clip: str, dataroot: Path | None, enabled: bool) -> None:
        self.out_dir, self.clip, self.dataroot, self.enabled = out_dir, clip, dataroot, enabled
        self.written: dict[str, str] = {}

    def source(self, rel_path: str) -> Path:
        if self.dataroot is None:
            raise FileNotFoundError(
                f"{self.clip}: no dataroot to read {rel_path} from (the clip's manifest.json names "
                "none; pass --dataroot, or export with --no-images)"
            )
        path = self.dataroot / rel_path
        if not path.is_file():
            raise FileNotFoundError(f"{path}: camera image not found (clip {self.clip})")
        return path

    def render(
        self,
        name: str,
        rel_path: str,
        marks: Sequence[tuple[int, Any, Any]],
        marked: Path | None = None,
    ) -> str:
        """Write ``images/<clip>/<name>.png``: the image with marks (region id, box, RLE mask),
        or a copy of ``marked`` (the pipeline's own Set-of-Mark image) when that file exists."""
        if not self.enabled:
            return rel_path
        out_rel = f"images/{self.clip}/{name}.png"
        if out_rel in self.written:
            return out_rel
        if marked is not None and marked.is_file():
            atomic_write_bytes(self.out_dir / out_rel, marked.read_bytes())
            self.written[out_rel] = str(marked)
            return out_rel
        import cv2

        from autolabel.set_of_mark import encode_png, render_marks

        path = self.source(rel_path)
        image = cv2.imread(str(path), cv2.IMREAD_COLOR)
        if image is None:
            raise ValueError(f"{path}: not a readable image (clip {self.clip})")
        marks = sorted(marks, key=lambda m: m[0])
        if marks:
            h, w = image.shape[:2]
            masks = [_fit_rle(m[2], h, w) for m in marks]
            image = render_marks(
                image,
                np.array([m[0] for m in marks]),
                boxes_2d=np.array([m[1] for m in marks], dtype=np.float64),
                masks=None if any(x is None for x in masks) else masks,
            )
        atomic_write_bytes(self.out_dir / out_rel, encode_png(image))
        self.written[out_rel] = rel_path
        return out_rel


def _fit_rle(rle: Any, height_px: int, width_px: int) -> Any:
    """The RLE when it matches the image size, else None (the box is drawn instead)."""
    if not isinstance(rle, Mapping) or "size" not in rle:
        return None
    size = [int(x) for x in rle["size"]]
    return dict(rle) if size == [height_px, width_px] else None


def _views_by_frame_camera(records: Sequence[Mapping[str, Any]]) -> dict[tuple, dict[int, tuple]]:
    """(frame index, camera) -> region id -> (box, mask) over every record of a clip."""
    out: dict[tuple, dict[int, tuple]] = defaultdict(dict)
    for rec in records:
        for reg in rec.get("regions") or ():
            rid = int(reg["region_id"])
            for v in reg.get("views") or ():
                if v.get("visible", True) and v.get("box_px") is not None:
                    out[(int(v["frame_index"]), v["camera"])].setdefault(
                        rid, (v["box_px"], v.get("mask_rle"))
                    )
    return out


# ------------------------------------------------------------------------------ export


def _class_of(rec: Mapping[str, Any]) -> str:
    regions = rec.get("regions") or []
    return str(regions[0]["class"]) if regions else "ego"


def _set_of(rec: Mapping[str, Any]) -> str | None:
    if rec["category"] == "spatiotemporal":
        return "spatiotemporal"
    if rec.get("choices"):
        return "multiple_choice"
    if rec["category"] in _SPATIAL_CATEGORIES:
        return "spatial"
    if rec["category"] in _DYNAMIC_CATEGORIES:
        return "dynamic"
    return None


def _complete_groups(records: Sequence[Mapping[str, Any]]) -> tuple[list[str], int]:
    """Spatiotemporal group ids with a position question at every horizon; and the rest's count."""
    horizons: dict[str, set[float]] = defaultdict(set)
    for rec in records:
        if rec["category"] == "spatiotemporal" and rec["type"] == "st_position":
            horizons[rec["group_id"]].add(float((rec.get("params") or {}).get("horizon_s", -1)))
    all_groups = {rec["group_id"] for rec in records if rec["category"] == "spatiotemporal"}
    complete = sorted(g for g, hs in horizons.items() if set(HORIZONS_S) <= hs)
    return complete, len(all_groups) - len(complete)


def export_benchmark(
    run_dir: str | Path,
    out_dir: str | Path,
    dataroot: str | Path | None = None,
    config: ExportConfig | None = None,
    templates: Any = None,
) -> dict[str, Any]:
    """Write a benchmark folder from a QA run (see the module docstring).

    Args:
        run_dir: run folder with ``<clip>/qa.jsonl`` and ``<clip>/attributes.parquet``.
        out_dir: the benchmark folder to write.
        dataroot: the dataset root with the camera images (default: each clip's manifest's).
        config: export settings.
        templates: the QA templates the run used (the packaged ones when None).

    Returns:
        The ``bench.json`` summary.

    Raises:
        FileNotFoundError: no QA in the run, a missing attributes file or camera image.
        ValueError: a malformed record (names the file and the record).
    """
    from autolabel.attributes import ObjectAttributes
    from autolabel.qa.check import ATTRIBUTES_FILE, read_qa_jsonl
    from autolabel.qa.generate import QA_FILE
    from autolabel.qa.templates import load_templates

    cfg = config or ExportConfig()
    templates = templates or load_templates()
    out = Path(out_dir)
    prompts = load_prompts()
    questions: list[dict[str, Any]] = []
    key: list[dict[str, Any]] = []
    dropped = Counter()
    clips = run_clips(run_dir)
    for clip_dir in clips:
        qa_path = clip_dir / QA_FILE
        records = read_qa_jsonl(qa_path)
        validate_records(records, qa_path)
        clip = clip_dir.name
        renderer = _MarkRenderer(out, clip, clip_dataroot(clip_dir, dataroot), cfg.images)
        views = _views_by_frame_camera(records)

        complete, n_incomplete = _complete_groups(records)
        dropped["incomplete_groups"] += n_incomplete
        situation_of: dict[str, str] = {}
        if complete:
            attrs = ObjectAttributes.read_parquet(clip_dir / ATTRIBUTES_FILE)
            first = {}
            for rec in records:
                if rec["group_id"] in complete and rec["group_id"] not in first:
                    first[rec["group_id"]] = rec
            kf = np.array([first[g]["keyframe"]["frame_index"] for g in complete])
            tid = np.array([first[g]["regions"][0]["track_id"] for g in complete])
            try:
                sits = classify_situations(attrs, kf, tid, cfg.situation)
            except ValueError as e:
                raise ValueError(f"{clip_dir / ATTRIBUTES_FILE}: {e}") from None
            situation_of = dict(zip(complete, (str(s) for s in sits), strict=True))
            if cfg.dynamic_only:
                static = {g for g, s in situation_of.items() if s == "static"}
                dropped["static_groups"] += len(static)
                situation_of = {g: s for g, s in situation_of.items() if g not in static}

        for rec in records:
            set_name = _set_of(rec)
            if set_name is None:
                dropped["other_category"] += 1
                continue
            if set_name == "spatiotemporal" and rec["group_id"] not in situation_of:
                continue
            qt = templates.types.get(rec["type"])
            if qt is None:
                raise ValueError(
                    f"{qa_path}: record {rec.get('id')}: unknown question type {rec['type']!r}"
                )
            try:
                spec, truth = answer_spec(rec, qt)
            except (KeyError, ValueError) as e:
                raise ValueError(f"{qa_path}: {e}") from None
            kf = int(rec["keyframe"]["frame_index"])
            cameras = list(rec.get("cameras") or [])
            if set_name == "spatiotemporal":
                cam = cameras[0]
                target = rec["regions"][0]
                rid = int(target["region_id"])
                target_views = {
                    int(v["frame_index"]): (v["box_px"], v.get("mask_rle"))
                    for v in target.get("views") or ()
                    if v["camera"] == cam and v.get("visible", True)
                }
                frames = [int(f["frame_index"]) for f in rec["context_frames"]]
                images = [
                    renderer.render(
                        f"k{kf:03d}_r{rid}_{cam}_f{f:03d}",
                        path,
                        [(rid, *target_views[f])] if f in target_views else [],
                    )
                    for f, path in zip(frames, rec["images"][cam], strict=True)
                ]
                times = [
                    round(float(f["time_s"]) - float(rec["keyframe"]["time_s"]), 3)
                    for f in rec["context_frames"]
                ]
            else:
                images = []
                for cam in cameras:
                    marks = [(r, *bm) for r, bm in sorted(views.get((kf, cam), {}).items())]
                    images.append(
                        renderer.render(
                            f"k{kf:03d}_{cam}",
                            rec["images"][cam][-1],
                            marks,
                            clip_dir / "marks" / f"{kf:03d}_{cam}.png",
                        )
                    )
                times = [0.0] * len(images)
            questions.append(
                {
                    "id": rec["id"],
                    "group_id": rec["group_id"],
                    "set": set_name,
                    "images": images,
                    "image_times_s": times,
                    "cameras": cameras,
                    "prompt": prompts[set_name],
                    "question": rec["question"],
                    "choices": [{"letter": o["letter"], "text": o["text"]} for o in rec["choices"]]
                    if rec.get("choices")
                    else None,
                }
            )
            key.append(
                {
                    "id": rec["id"],
                    "group_id": rec["group_id"],
                    "set": set_name,
                    "category": rec["category"],
                    "type": rec["type"],
                    "kind": rec["kind"],
                    "subtask": qt.subtask,
                    "class": _class_of(rec),
                    "situation": situation_of.get(rec["group_id"]),
                    "horizon_s": (rec.get("params") or {}).get("horizon_s"),
                    "clip": clip,
                    "keyframe": kf,
                    "spec": spec.as_dict(),
                    "truth": truth,
                    "answer": rec["answer"],
                    "confidence": rec.get("confidence", 1.0),
                }
            )
    if not key:
        raise ValueError(f"{run_dir}: no question could be exported")

    def jsonl(rows: Sequence[Mapping[str, Any]]) -> str:
        return "".join(canonical_json(r) + "\n" for r in rows)

    atomic_write_text(out / QUESTIONS_FILE, jsonl(questions))
    atomic_write_text(out / ANSWER_KEY_FILE, jsonl(key))
    order = [str(e["id"]) for e in key]
    for name in BASELINES:
        write_answers(
            out / "baselines" / f"{name}.jsonl", baseline_answers(name, key, cfg.seed), order
        )

    groups = {e["group_id"]: e for e in key if e["set"] == "spatiotemporal"}
    summary = {
        "source_run": str(Path(run_dir)),
        "clips": [c.name for c in clips],
        "questions": len(key),
        "images": cfg.images,
        "by_set": dict(sorted(Counter(e["set"] for e in key).items())),
        "by_type": dict(sorted(Counter(e["type"] for e in key).items())),
        "by_class": dict(sorted(Counter(e["class"] for e in key).items())),
        "groups": len(groups),
        "groups_by_situation": dict(
            sorted(Counter(e["situation"] for e in groups.values()).items())
        ),
        "groups_by_class": dict(sorted(Counter(e["class"] for e in groups.values()).items())),
        "dropped": dict(sorted(dropped.items())),
        "tolerances": {
            "profile": DEFAULT_PROFILE,
            "distance_rel": DISTANCE_REL_TOL,
            "angle_deg": ANGLE_TOL_DEG,
            "speed_rel": SPEED_REL_TOL,
            "speed_abs_mps": SPEED_ABS_TOL_MPS,
            "speed_abs_below_mps": SPEED_SLOW_MPS,
        },
        "context_offsets_s": list(_CONTEXT_OFFSETS_S),
        "horizons_s": list(HORIZONS_S),
        "files": {
            "questions": QUESTIONS_FILE,
            "answer_key": ANSWER_KEY_FILE,
            "baselines": [f"baselines/{n}.jsonl" for n in BASELINES],
        },
    }
    atomic_write_json(out / BENCH_FILE, summary, indent=1)
    return summary
