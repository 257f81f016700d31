"""``autolabel check-qa``: re-derive every answer of ``qa.jsonl`` from ``attributes.parquet``.

The published STRIDE-QA set had region ids in its text that did not match its boxes and masks.
This checker closes the loop for every record: the ``Region [X]`` ids in the text -> the record's
regions -> their track ids -> the track's attribute row at the keyframe -> the quantity of the
record's question type (the same registered function the generator used, on rows found
independently of the generator) -> the structured answer, the chosen multiple-choice letter and the
question, answer and explanation re-rendered from the template variants the record names. Any
difference is a mismatch. Around that it checks:

- one region id <-> one track id (and class, visible cameras, keyframe boxes and masks) per
  keyframe over all records of a clip; unique record ids; a group shares keyframe and tracks;
- the class of each region equals the attributes' class of its track;
- each keyframe view's mask lies on its box (IoU of the mask's bounding box with the 2D box at
  least ``min_mask_box_iou``, the visibility filter's IoU rule);
- with a rig (``--rig``): each view's box matches the projection of the track's 3D box from the
  attributes into that camera (IoU at least ``min_projection_iou``), which ties a region's boxes and
  masks to its track independently of the segmentation;
- with the run's own grounding (``marks/regions.json`` and ``masks/<frame>.json``, read when the
  clip folder has them): every record's ``Region [X]`` is the region of the same track, class and
  keyframe cameras that the Set-of-Mark images were drawn with, and every view's box and mask are
  the ones the segment stage wrote for that track, camera and frame. Re-deriving answers from the
  records alone cannot see ids shifted consistently through a whole record (STRIDE-QA-Dataset #4);
  the marked images can;
- the conventions of the attributes the answers come from, computed here independently: each
  keyframe row's clock hour is its bearing's (12 ahead, 3 to the right), and a region that a
  ``*_LEFT`` camera shows at the keyframe lies to the left (bearing > 0), one a ``*_RIGHT`` camera
  shows to the right, give or take ``SIDE_MARGIN_DEG`` (a sign error in the bearing puts it on the
  other side).
"""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pycocotools import mask as mask_utils

from autolabel.attributes import ObjectAttributes
from autolabel.classes import DETECTION_CLASSES
from autolabel.qa.candidates import GROUP_SUBJECTS
from autolabel.qa.confidence import (
    HEADING_QUANTITIES,
    MOTION_QUANTITIES,
    ConfidenceModel,
    ViewEvidence,
    answer_margin,
    perturbation_set,
    rounded,
    row_evidence,
)
from autolabel.qa.dynamic import COLOUR_QUANTITIES
from autolabel.qa.generate import QA_FILE, content_of
from autolabel.qa.quantities import ROLES, QuantityInput
from autolabel.qa.records import (
    LETTERS,
    QAContent,
    answer_key,
    correct_letter,
    region_text,
    render_texts,
    structured_answer,
    text_fields,
)
from autolabel.qa.templates import QuestionType, TemplateSet, load_templates, region_ids_in
from autolabel.sensors import CAMERA_CHANNELS, CameraCalibration
from calib.projection import box_iou_2d

ATTRIBUTES_FILE = "attributes.parquet"
#: The clip's camera views with their visibility decision, mask score and LiDAR points.
VISIBILITY_FILE = "visibility.parquet"
_REQUIRED = (
    "id", "group_id", "clip", "keyframe", "cameras", "question", "answer", "answer_values",
    "category", "kind", "type", "template_id", "template_variant", "params", "regions",
)  # fmt: skip
#: Absolute tolerance of stored numbers (they are rounded to 3 decimals).
VALUE_TOLERANCE = 2e-3
#: Written by the marks stage: region id -> track per QA keyframe (``autolabel.stages``).
REGIONS_FILE = "marks/regions.json"
#: Written by the segment stage, one per keyframe: every view's box and mask.
MASKS_DIR = "masks"
#: A region a side camera shows may lie this far (degrees) across the ego's x axis: a long, near
#: object is seen by the front-left camera while its centre is just right of straight ahead.
SIDE_MARGIN_DEG = 30.0
#: Boxes in the masks files and in the records are rounded to 0.01 px.
BOX_TOLERANCE_PX = 0.011


@dataclass(frozen=True)
class ClipGrounding:
    """What the marks and segment stages wrote for one clip, read independently of ``qa.jsonl``.

    Attributes:
        regions: (keyframe, region id) -> (track id, class, cameras showing it at the keyframe),
            from ``marks/regions.json``.
        keyframes: the QA keyframes of ``marks/regions.json``.
        views: (frame index, camera, track id) -> (box_px [u_min, v_min, u_max, v_max], mask RLE
            as canonical JSON), from ``masks/<frame>.json``.
        clip_dir: the clip folder (for messages).
    """

    regions: dict[tuple[int, int], tuple[int, str, tuple[str, ...]]]
    keyframes: frozenset[int]
    views: dict[tuple[int, str, int], tuple[tuple[float, ...], str]]
    clip_dir: Path


def load_clip_grounding(clip_dir: str | Path) -> ClipGrounding | None:
    """The clip's ``marks/regions.json`` and ``masks/*.json``; None when it has no marks file.

    Raises:
        ValueError: a file is not valid JSON or lacks a field (the message names the file).
    """
    clip_dir = Path(clip_dir)
    path = clip_dir / REGIONS_FILE
    if not path.is_file():
        return None
    regions: dict[tuple[int, int], tuple[int, str, tuple[str, ...]]] = {}
    keyframes = set()
    views: dict[tuple[int, str, int], tuple[tuple[float, ...], str]] = {}
    try:
        for kf in json.loads(path.read_text(encoding="utf-8"))["keyframes"]:
            k = int(kf["frame_index"])
            keyframes.add(k)
            for r in kf["regions"]:
                regions[(k, int(r["region_id"]))] = (
                    int(r["track_id"]),
                    str(r["class"]),
                    tuple(sorted(r["cameras_at_keyframe"])),
                )
        for path in sorted((clip_dir / MASKS_DIR).glob("*.json")):
            doc = json.loads(path.read_text(encoding="utf-8"))
            f = int(doc["frame_index"])
            for o in doc["objects"]:
                views[(f, str(o["camera"]), int(o["track_id"]))] = (
                    tuple(float(x) for x in o["box_px"]),
                    json.dumps(o["mask_rle"], sort_keys=True),
                )
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{path}: not a valid {path.parent.name} file ({e!r})") from None
    return ClipGrounding(regions, frozenset(keyframes), views, clip_dir)


def clock_hours_of(bearing_deg: np.ndarray) -> np.ndarray:
    """Clock direction of bearings as a continuous hour in [0, 12) (0 is 12 o'clock): DESIGN.md,
    12 straight ahead, 3 o'clock to the right (bearing -90), 9 to the left (+90)."""
    return np.mod(-np.asarray(bearing_deg, dtype=np.float64) / 30.0, 12.0)


@dataclass(frozen=True)
class Mismatch:
    """One disagreement between a record and what the attributes say."""

    clip: str
    record_id: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.clip} {self.record_id} {self.field}: {self.message}"


@dataclass
class CheckReport:
    """Result of checking a run: records checked per clip and every mismatch."""

    records: dict[str, int] = field(default_factory=dict)
    mismatches: list[Mismatch] = field(default_factory=list)
    #: Clips checked against their own ``marks/regions.json`` and ``masks/`` too.
    grounded: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches and bool(self.records)


def read_qa_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Records of a ``qa.jsonl``; a malformed line raises ``ValueError`` naming file and line."""
    path = Path(path)
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: not valid JSON: {e}") from None
            if not isinstance(rec, dict):
                raise ValueError(f"{path}:{n}: expected a JSON object")
            out.append(rec)
    return out


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        try:
            return abs(float(a) - float(b)) <= VALUE_TOLERANCE
        except (TypeError, ValueError):
            return False
    return a == b


class _ClipChecker:
    def __init__(
        self,
        records: Sequence[Mapping[str, Any]],
        attrs: ObjectAttributes,
        templates: TemplateSet,
        clip: str,
        cameras: Sequence[CameraCalibration] | None,
        min_mask_box_iou: float,
        min_projection_iou: float,
        images_root: str | Path | None = None,
        views: ViewEvidence | None = None,
        confidence: ConfidenceModel | None = None,
        grounding: ClipGrounding | None = None,
        image_patches: Mapping[Path, Any] | None = None,
    ) -> None:
        self.records, self.attrs, self.templates, self.clip = records, attrs, templates, clip
        self.image_patches = image_patches or {}
        self.model = confidence or ConfidenceModel()
        self.evidence = row_evidence(attrs, views, self.model)
        self._perturbed: list[ObjectAttributes] | None = None
        self.grounding = grounding
        self.images_root = None if images_root is None else Path(images_root)
        self.cameras = {c.channel: c for c in cameras} if cameras else None
        self.min_mask_box_iou, self.min_projection_iou = min_mask_box_iou, min_projection_iou
        self.out: list[Mismatch] = []
        self._pending: list[tuple] = []
        self._mask_boxes: dict[tuple, np.ndarray] = {}
        self._rle_texts: dict[int, tuple[Any, str]] = {}
        # View dicts that passed every per-view check, by (id, keyframe or track): the records
        # of a keyframe share their view dicts when generated in this process (each held, so
        # its id stays its own), and a check of the same object gives the same answer.
        self._passed_views: dict[tuple[str, int, Any], Any] = {}
        self.channels = self._channel_order()

    def bad(self, rec: Mapping[str, Any] | None, field_: str, message: str) -> None:
        rid = str(rec.get("id", "?")) if isinstance(rec, Mapping) else "-"
        self.out.append(Mismatch(self.clip, rid, field_, message))

    def _channel_order(self) -> tuple[str, ...]:
        for rec in self.records:
            qt = self.templates.types.get(rec.get("type"))
            if qt is not None and qt.cameras == "all" and isinstance(rec.get("cameras"), list):
                return tuple(rec["cameras"])
        seen = {c for rec in self.records for c in rec.get("cameras", []) if isinstance(c, str)}
        return tuple(CAMERA_CHANNELS) + tuple(sorted(seen - set(CAMERA_CHANNELS)))

    # ---------------------------------------------------------------- structure and grounding
    def _structure(self, rec: Mapping[str, Any]) -> tuple[QuestionType, np.ndarray] | None:
        missing = [k for k in _REQUIRED if k not in rec]
        if missing:
            self.bad(rec, missing[0], "required field missing")
            return None
        qt = self.templates.types.get(rec["type"])
        if qt is None:
            self.bad(rec, "type", f"unknown question type {rec['type']!r}")
            return None
        for key, want in (("template_id", qt.id), ("category", qt.category), ("kind", qt.kind)):
            if rec[key] != want:
                self.bad(rec, key, f"expected {want!r} for type {qt.id}, got {rec[key]!r}")
        if rec.get("clip") != self.clip:
            self.bad(rec, "clip", f"record of clip {rec.get('clip')!r} in {self.clip}'s file")
        regions = rec["regions"]
        if qt.variable_regions:
            if not isinstance(regions, list) or len(regions) > qt.n_regions:
                self.bad(rec, "regions", f"type {qt.id} lists at most {qt.n_regions} regions")
                return None
        elif not isinstance(regions, list) or len(regions) != qt.n_regions:
            self.bad(rec, "regions", f"type {qt.id} asks about {qt.n_regions} regions")
            return None
        if qt.subjects in GROUP_SUBJECTS:
            keys = [g["key"] for g in qt.params["groups"]]
            got = (rec.get("params") or {}).get("class_group")
            if got not in keys:
                self.bad(rec, "params.class_group", f"expected one of {keys}, got {got!r}")
                return None
        kf = rec["keyframe"].get("frame_index") if isinstance(rec["keyframe"], Mapping) else None
        if not isinstance(kf, int):
            self.bad(rec, "keyframe.frame_index", "missing or not an integer")
            return None
        rows = np.full(len(regions), -1, dtype=np.int64)
        ids = []
        for i, reg in enumerate(regions):
            where = f"regions[{i}]"
            if not isinstance(reg, Mapping) or not {
                "role",
                "region_id",
                "track_id",
                "class",
            } <= set(reg):
                self.bad(rec, where, "needs role, region_id, track_id, class")
                return None
            if reg["role"] != ROLES[i]:
                self.bad(rec, f"{where}.role", f"expected {ROLES[i]}, got {reg['role']!r}")
            row = self._row(kf, reg["track_id"])
            if row < 0:
                self.bad(
                    rec,
                    f"{where}.track_id",
                    f"Region [{reg['region_id']}] -> track {reg['track_id']} has no attributes "
                    f"at keyframe {kf}",
                )
                return None
            cls = DETECTION_CLASSES[int(self.attrs.label[row])]
            if reg["class"] != cls:
                self.bad(
                    rec,
                    f"{where}.class",
                    f"Region [{reg['region_id']}] is a {reg['class']} in the record but track "
                    f"{reg['track_id']} is a {cls} in the attributes",
                )
            rows[i] = row
            ids.append(reg["region_id"])
        if len(set(ids)) != len(ids):
            self.bad(rec, "regions", f"a region appears twice: {ids}")
        texts = [rec.get("question") or "", rec.get("answer") or "", rec.get("explanation") or ""]
        for name, text in zip(("question", "answer", "explanation"), texts, strict=True):
            stray = [x for x in region_ids_in(text) if x not in ids]
            if stray:
                self.bad(
                    rec,
                    name,
                    f"names Region [{stray[0]}], which is not among the record's regions {ids}",
                )
        return qt, rows

    def _views(self, rec: Mapping[str, Any], rows: np.ndarray) -> None:
        kf = rec["keyframe"]["frame_index"]
        for i, reg in enumerate(rec["regions"]):
            views = [v for v in reg.get("views", []) if isinstance(v, Mapping)]
            for j, v in enumerate(views):
                key = ("views", id(v), kf)
                if self.cameras is None and self._passed_views.get(key) is v:
                    continue
                where = f"regions[{i}].views[{j}]"
                found = len(self.out)
                try:
                    box = np.asarray(v["box_px"], dtype=np.float64).reshape(1, 4)
                    mask_box = self._mask_box(dict(v["mask_rle"]))
                except (KeyError, TypeError, ValueError, AttributeError) as e:
                    self.bad(rec, where, f"malformed view ({e})")
                    continue
                if v.get("frame_index") == kf and v.get("visible", True):
                    iou = float(box_iou_2d(box, mask_box)[0])
                    if iou < self.min_mask_box_iou:
                        self.bad(
                            rec,
                            where,
                            f"Region [{reg['region_id']}] {v.get('camera')}: mask and box "
                            f"disagree (IoU {iou:.2f} < {self.min_mask_box_iou})",
                        )
                if self.cameras is not None:
                    self._pending.append((rec, reg, v, box[0], where))
                elif len(self.out) == found:
                    self._passed_views[key] = v

    def _mask_box(self, rle: dict) -> np.ndarray:
        """(1, 4) [u0, v0, u1, v1] bounding box of a COCO RLE (raises on a malformed one). The
        records of a keyframe repeat the same views: each mask is measured once."""
        counts, size = rle["counts"], rle["size"]
        key = None
        if isinstance(counts, str) and isinstance(size, list) and all(type(x) is int for x in size):
            key = (counts, *size)
            if key in self._mask_boxes:
                return self._mask_boxes[key].copy()
        mask_box = mask_utils.toBbox({"size": size, "counts": counts.encode("ascii")}).reshape(1, 4)
        mask_box[:, 2:] += mask_box[:, :2]
        if key is not None:
            self._mask_boxes[key] = mask_box.copy()
        return mask_box

    def _rle_text(self, rle: Any) -> str:
        """``json.dumps(rle, sort_keys=True)``, once per object: the records of a keyframe share
        their view dicts when generated in this process (the object is held, so its id stays
        its own while cached)."""
        hit = self._rle_texts.get(id(rle))
        if hit is None or hit[0] is not rle:
            hit = (rle, json.dumps(rle, sort_keys=True))
            self._rle_texts[id(rle)] = hit
        return hit[1]

    def _projections(self) -> None:
        """Every pending view's box against its track's projected 3D box, per camera at once."""
        from autolabel.qa.projected_grounding import projected_boxes

        by_cam: dict[str, list[tuple]] = defaultdict(list)
        for item in self._pending:
            rec, reg, v, box, where = item
            if v.get("camera") not in self.cameras:
                self.bad(rec, where, f"camera {v.get('camera')!r} is not in the rig")
                continue
            by_cam[v["camera"]].append(item)
        for channel, items in by_cam.items():
            frames = np.array([int(it[2]["frame_index"]) for it in items])
            tracks = np.array([int(it[1]["track_id"]) for it in items])
            rows = self.attrs.row_of(frames, tracks)
            projected, _ = projected_boxes(self.attrs, np.maximum(rows, 0), self.cameras[channel])
            iou = box_iou_2d(projected, np.stack([it[3] for it in items]))
            for (rec, reg, v, _, where), row, value in zip(items, rows, iou, strict=True):
                if row < 0:
                    self.bad(
                        rec,
                        where,
                        f"track {reg['track_id']} has no attributes in frame {v['frame_index']}",
                    )
                elif value < self.min_projection_iou:
                    self.bad(
                        rec,
                        where,
                        f"Region [{reg['region_id']}] {channel} frame {v['frame_index']}: box is "
                        f"not track {reg['track_id']}'s projected 3D box (IoU {value:.2f})",
                    )

    def _cross_record(self) -> None:
        """Per keyframe, every record must agree on each region's track, class, visible cameras
        and boxes / masks; the value most records give is taken as right, the others flagged."""
        seen: dict[tuple, dict[Any, list[Mapping[str, Any]]]] = defaultdict(
            lambda: defaultdict(list)
        )
        ids: set[Any] = set()
        groups: dict[Any, tuple[Any, Any]] = {}
        for rec in self.records:
            rid = rec.get("id")
            if rid in ids:
                self.bad(rec, "id", "duplicate record id")
            ids.add(rid)
            try:
                kf = rec["keyframe"]["frame_index"]
                regs = rec["regions"]
                tracks = tuple(int(r["track_id"]) for r in regs)
            except (KeyError, TypeError, ValueError):
                continue
            gid = rec.get("group_id")
            if gid != rid and groups.setdefault(gid, (kf, tracks)) != (kf, tracks):
                self.bad(rec, "group_id", f"group {gid} mixes keyframes or regions")
            for reg in regs:
                r_id, t_id = reg.get("region_id"), reg.get("track_id")
                items = [
                    (("region_id -> track_id", kf, r_id), t_id),
                    (("track_id -> region_id", kf, t_id), r_id),
                    (("class", kf, r_id), reg.get("class")),
                    (("cameras_visible", kf, r_id), tuple(reg.get("cameras_visible", []))),
                ]
                for v in reg.get("views", []):
                    if isinstance(v, Mapping):
                        items.append(
                            (
                                ("box and mask", kf, r_id, v.get("camera"), v.get("frame_index")),
                                (
                                    tuple(v.get("box_px", ())),
                                    self._rle_text(v.get("mask_rle")),
                                ),
                            )
                        )
                for key, val in items:
                    seen[key][val].append(rec)
        for key, by_value in seen.items():
            if len(by_value) < 2:
                continue
            ranked = sorted(
                by_value.items(), key=lambda kv: -len(kv[1])
            )  # stable: first seen wins ties
            majority, supporters = ranked[0]
            for val, recs in ranked[1:]:
                if key[0] == "box and mask":
                    what = f"box and mask of {key[2]} ({key[3]}, frame {key[4]}) differ from"
                else:
                    what = f"{key[0]} of {key[2]} is {val!r} here but {majority!r} in"
                for rec in recs:
                    self.bad(
                        rec,
                        "regions",
                        f"keyframe {key[1]}: {what} {len(supporters)} other record(s), "
                        f"e.g. {supporters[0].get('id')}",
                    )

    def _completeness(self) -> None:
        """Records over a set of regions (a count of visible objects, a camera's description)
        must list every region of their keyframe that belongs to the set, as far as the clip's
        records show the keyframe's regions; and only those."""
        known: dict[int, dict[int, tuple[str, tuple[str, ...], str]]] = defaultdict(dict)
        for rec in self.records:
            try:
                kf = int(rec["keyframe"]["frame_index"])
                for reg in rec["regions"]:
                    known[kf].setdefault(
                        int(reg["region_id"]),
                        (reg.get("class"), tuple(reg.get("cameras_visible", [])), rec.get("id")),
                    )
            except (KeyError, TypeError, ValueError):
                continue
        for rec in self.records:
            qt = self.templates.types.get(rec.get("type")) if isinstance(rec, Mapping) else None
            if qt is None or qt.subjects not in (
                "class_group_members",
                "camera_regions",
                "keyframe_regions",
            ):
                continue
            try:
                kf = int(rec["keyframe"]["frame_index"])
                listed = {int(reg["region_id"]) for reg in rec["regions"]}
                params = rec.get("params") or {}
                if qt.subjects == "camera_regions":
                    camera = params["asked_cameras"][0]
                    belongs = {r for r, (_, cams, _) in known[kf].items() if camera in cams}
                    what = f"shown by {camera}"
                elif qt.subjects == "keyframe_regions":
                    belongs = set(known[kf])
                    what = "a region of the keyframe"
                else:
                    group = [g for g in qt.params["groups"] if g["key"] == params["class_group"]]
                    classes = set(group[0]["classes"])
                    # A count is of the objects the cameras show at the keyframe.
                    belongs = {
                        r for r, (cls, cams, _) in known[kf].items() if cls in classes and cams
                    }
                    what = f"of the group {params['class_group']}"
            except (KeyError, TypeError, ValueError, IndexError):
                continue
            for r in sorted(belongs - listed):
                self.bad(
                    rec,
                    "regions",
                    f"keyframe {kf}: Region [{r}] is {what} (record {known[kf][r][2]}) but not "
                    "listed",
                )
            for r in sorted(listed - belongs):
                self.bad(rec, "regions", f"keyframe {kf}: Region [{r}] is listed but not {what}")

    def _measured_colours(self) -> None:
        """With the images: re-measure the colour of every region a colour answer names, from the
        record's own keyframe masks (the view with the most mask pixels), against the stored one."""
        from autolabel.qa.appearance import best_view_colour, view_colours

        wanted: dict[tuple[str, int], list[tuple]] = defaultdict(list)
        for rec in self.records:
            qt = self.templates.types.get(rec.get("type")) if isinstance(rec, Mapping) else None
            if qt is None or qt.quantity.name not in COLOUR_QUANTITIES:
                continue
            try:
                kf = int(rec["keyframe"]["frame_index"])
                cams = list(rec["cameras"])
                for j, reg in enumerate(rec["regions"]):
                    for v in reg.get("views", []):
                        if (
                            v.get("frame_index") == kf
                            and v.get("visible", True)
                            and v["camera"] in cams
                        ):
                            path = rec["images"][v["camera"]][-1]
                            wanted[(path, kf)].append((rec, j, v["camera"], v["mask_rle"]))
            except (KeyError, TypeError, ValueError, IndexError):
                continue
        measured: dict[tuple[str, int], dict[str, tuple[np.ndarray, int]]] = defaultdict(dict)
        by_id: dict[str, Mapping[str, Any]] = {}
        for (path, _), items in wanted.items():
            # Records of a keyframe name the same regions: each distinct mask measured once
            # (each mask's colour is its own pixels' median, whatever else is measured with it).
            unique: dict[Any, int] = {}
            slot = [unique.setdefault(_rle_key(it[3]), len(unique)) for it in items]
            rles = [None] * len(unique)
            for it, k in zip(items, slot, strict=True):
                rles[k] = it[3]
            image = self._image(path, rles)
            if image is None:
                for rec, j, _, _ in items:
                    self.bad(
                        rec, f"regions[{j}].colour_lab", f"image {path} not found under the root"
                    )
                continue
            lab, px = view_colours(image, rles)
            for (rec, j, cam, _), k in zip(items, slot, strict=True):
                measured[(str(rec["id"]), j)][cam] = (lab[k], int(px[k]))
                by_id.setdefault(str(rec["id"]), rec)
        for (rid, j), by_cam in measured.items():
            rec = by_id[rid]
            cams = list(by_cam)
            lab = best_view_colour(
                np.stack([by_cam[c][0] for c in cams]),
                np.array([by_cam[c][1] for c in cams]),
                np.ones(len(cams), bool),
            )
            stored = rec["regions"][j].get("colour_lab")
            got = None if not np.all(np.isfinite(lab)) else [round(float(x), 2) for x in lab]
            if (stored is None) != (got is None) or (
                got is not None and np.max(np.abs(np.subtract(stored, got))) > 0.02
            ):
                self.bad(
                    rec,
                    f"regions[{j}].colour_lab",
                    f"record says {stored!r}, the image under its mask gives {got!r}",
                )

    def _image(self, path: str, rles: Sequence[Any]) -> np.ndarray | None:
        """The RGB image at ``path`` under the root: the decoded pixels the run kept
        (``image_patches``) when they hold every pixel of ``rles``, else read from the file."""
        full = self.images_root / path
        patch = self.image_patches.get(full)
        try:
            kept = patch is not None and patch.covers(rles)
        except (KeyError, TypeError, ValueError):  # a malformed mask: measured as from the file
            kept = False
        return patch.image() if kept else _read_rgb(full)

    def _grounded(self, rec: Mapping[str, Any]) -> None:
        """The record's regions and views against the marks and masks files of the run."""
        g = self.grounding
        kf = rec["keyframe"]["frame_index"]
        marks = f"{g.clip_dir.name}/{REGIONS_FILE}"
        if kf not in g.keyframes:
            self.bad(rec, "keyframe", f"keyframe {kf} has no entry in {marks}")
            return
        for i, reg in enumerate(rec["regions"]):
            where = f"regions[{i}]"
            rid, tid = reg["region_id"], reg["track_id"]
            try:
                marked = g.regions.get((int(kf), int(rid)))
            except (TypeError, ValueError):
                marked = None
            if marked is None:
                self.bad(rec, where, f"Region [{rid}] is not a region of keyframe {kf} in {marks}")
                continue
            m_track, m_class, m_cams = marked
            if m_track != tid:
                self.bad(
                    rec,
                    f"{where}.track_id",
                    f"Region [{rid}] at keyframe {kf} is track {m_track} in {marks} (the marked "
                    f"images) but track {tid} in the record",
                )
                continue
            if m_class != reg.get("class"):
                self.bad(
                    rec, f"{where}.class", f"Region [{rid}] is a {m_class} in {marks}, not a "
                    f"{reg.get('class')}"
                )  # fmt: skip
            cams = reg.get("cameras_visible")
            if isinstance(cams, list) and tuple(sorted(cams)) != m_cams:
                self.bad(
                    rec,
                    f"{where}.cameras_visible",
                    f"Region [{rid}] is shown by {list(m_cams)} at keyframe {kf} in {marks}, "
                    f"the record says {cams}",
                )
            for j, v in enumerate(reg.get("views", [])):
                if not isinstance(v, Mapping):
                    continue
                passed = ("grounded", id(v), tid)
                if self._passed_views.get(passed) is v:
                    continue
                key = (v.get("frame_index"), v.get("camera"), tid)
                written = g.views.get(key)
                masks = f"{g.clip_dir.name}/{MASKS_DIR}/{v.get('frame_index')!s:0>3}.json"
                if written is None:
                    self.bad(
                        rec,
                        f"{where}.views[{j}]",
                        f"{masks} has no view of track {tid} in {v.get('camera')}",
                    )
                    continue
                box, rle = written
                same_box = _same_box(box, v.get("box_px"))
                if not same_box or rle != self._rle_text(v.get("mask_rle")):
                    self.bad(
                        rec,
                        f"{where}.views[{j}]",
                        f"Region [{rid}] {v.get('camera')}: box or mask is not track {tid}'s in "
                        f"{masks}",
                    )
                else:
                    self._passed_views[passed] = v

    def _conventions(self, checked: list[tuple[Mapping[str, Any], np.ndarray]]) -> None:
        """Clock and bearing of every keyframe row the records use, against DESIGN.md's
        conventions and the side of the cameras that show the region."""
        if not checked:
            return
        rows = np.concatenate([r for _, r in checked])
        owner = np.concatenate([np.full(len(r), i) for i, (_, r) in enumerate(checked)])
        region = np.concatenate([np.arange(len(r)) for _, r in checked])
        bearing = np.asarray(self.attrs.bearing_deg, dtype=np.float64)[rows]
        clock = np.asarray(self.attrs.clock, dtype=np.int64)[rows]
        hours = clock_hours_of(bearing)
        off = np.abs(np.mod(np.mod(clock, 12) - hours + 6.0, 12.0) - 6.0)
        for k in np.flatnonzero(off > 0.5 + 1e-6):
            rec = checked[owner[k]][0]
            self.bad(
                rec,
                f"regions[{region[k]}]",
                f"track {rec['regions'][region[k]]['track_id']}: clock {clock[k]} in the attributes "
                f"but bearing {bearing[k]:.1f} deg is {hours[k] or 12:.1f} o'clock",
            )
        for k in range(len(rows)):
            rec = checked[owner[k]][0]
            reg = rec["regions"][region[k]]
            for cam in reg.get("cameras_visible", []) or []:
                side = 1.0 if "LEFT" in str(cam) else -1.0 if "RIGHT" in str(cam) else 0.0
                if side == 0.0:
                    continue
                across = -side * bearing[k]  # > 0: on the other side of the ego's x axis
                if across > SIDE_MARGIN_DEG and abs(bearing[k]) < 180.0 - SIDE_MARGIN_DEG:
                    self.bad(
                        rec,
                        f"regions[{region[k]}]",
                        f"Region [{reg['region_id']}] is shown by {cam} at the keyframe but its "
                        f"bearing is {bearing[k]:.1f} deg (positive is to the left)",
                    )

    # ---------------------------------------------------------------- answers
    def _answers(self, qt: QuestionType, batch: list[tuple[Mapping[str, Any], np.ndarray]]) -> None:
        n = len(batch)
        k = qt.n_regions
        rows = np.full((n, k), -1, dtype=np.int64)
        for i, (_, r) in enumerate(batch):
            rows[i, : len(r)] = r
        frame_index = np.array([b[0]["keyframe"]["frame_index"] for b in batch], dtype=np.int64)
        horizon = np.zeros(n)
        cams = np.full((n, 2), -1, dtype=np.int64)
        visible = np.zeros((n, k, len(self.channels)), dtype=bool)
        usable = np.ones(n, dtype=bool)
        option = np.full(n, -1, dtype=np.int64)
        group_keys = (
            [g["key"] for g in qt.params["groups"]] if qt.subjects in GROUP_SUBJECTS else []
        )
        colour_lab = None
        if qt.quantity.name in COLOUR_QUANTITIES:
            colour_lab = np.full((n, k, 3), np.nan)
        for i, (rec, _) in enumerate(batch):
            params = rec.get("params") or {}
            if group_keys:
                option[i] = group_keys.index(params["class_group"])
            if colour_lab is not None:
                for j, reg in enumerate(rec["regions"]):
                    lab = reg.get("colour_lab", "missing")
                    if lab == "missing":
                        self.bad(rec, f"regions[{j}].colour_lab", "missing (the answer names it)")
                        usable[i] = False
                    elif lab is not None:
                        try:
                            colour_lab[i, j] = np.asarray(lab, dtype=np.float64).reshape(3)
                        except (TypeError, ValueError):
                            self.bad(rec, f"regions[{j}].colour_lab", f"not [L, a, b]: {lab!r}")
                            usable[i] = False
            if qt.subjects == "camera_regions":
                asked = params.get("asked_cameras")
                if not isinstance(asked, list) or len(asked) != 1 or asked[0] not in self.channels:
                    self.bad(
                        rec, "params.asked_cameras", f"expected one known camera, got {asked!r}"
                    )
                    usable[i] = False
                    continue
                cams[i, 0] = self.channels.index(asked[0])
            if qt.subjects == "region_horizon":
                h = params.get("horizon_s")
                if not isinstance(h, (int, float)) or float(h) not in qt.horizons:
                    self.bad(rec, "params.horizon_s", f"expected one of {qt.horizons}, got {h!r}")
                    usable[i] = False
                    continue
                horizon[i] = float(h)
            asked = params.get("asked_cameras")
            if qt.subjects in ("pair_cross_camera", "region_camera_pair"):
                if (
                    not isinstance(asked, list)
                    or len(asked) != 2
                    or any(a not in self.channels for a in asked)
                ):
                    self.bad(
                        rec, "params.asked_cameras", f"expected two known cameras, got {asked!r}"
                    )
                    usable[i] = False
                    continue
                cams[i] = [self.channels.index(a) for a in asked]
            for j, reg in enumerate(rec["regions"]):
                for ch in reg.get("cameras_visible", []):
                    if ch in self.channels:
                        visible[i, j, self.channels.index(ch)] = True
        q = QuantityInput(
            attrs=self.attrs,
            rows=rows,
            frame_index=frame_index,
            horizon_s=horizon,
            cameras=cams,
            visible=visible,
            channels=self.channels,
            params=qt.params,
            option=option,
            colour_lab=colour_lab,
        )
        try:
            res = qt.quantity(q)
        except ValueError as e:
            for rec, _ in batch:
                self.bad(rec, "type", f"cannot re-derive {qt.id}: {e}")
            return
        self._confidence(qt, batch, q, res, usable)
        vocab = self.templates.vocabulary
        for i, (rec, r) in enumerate(batch):
            if not usable[i]:
                continue
            if not res.valid[i]:
                self.bad(
                    rec,
                    "answer_values",
                    f"the attributes give no unambiguous {qt.id} answer for regions "
                    f"{[reg['region_id'] for reg in rec['regions']]}",
                )
                continue
            option_key = option_text = None
            if group_keys:
                group = qt.params["groups"][int(option[i])]
                option_key, option_text = str(group["key"]), str(group["text"])
            content = content_of(
                res,
                i,
                region_ids=[int(reg["region_id"]) for reg in rec["regions"]],
                classes=[DETECTION_CLASSES[int(self.attrs.label[x])] for x in r],
                horizon_s=float(horizon[i]),
                asked_cameras=tuple((rec.get("params") or {}).get("asked_cameras") or ()),
                option_key=option_key,
                option_text=option_text,
            )
            self._compare(qt, rec, content, vocab)

    def _confidence(self, qt: QuestionType, batch, q: QuantityInput, res, usable) -> None:
        """Re-derive each record's region evidence (the parts the attributes and, when given, the
        views can tell), its answer margin and the confidence, the minimum of all of them."""
        if self._perturbed is None:
            self._perturbed = perturbation_set(self.attrs, self.model, self.clip)
        margin = answer_margin(
            qt,
            res,
            lambda attrs: dataclasses.replace(q, attrs=attrs, cache={}),
            self._perturbed,
            self.model,
        )
        name = qt.quantity.name
        _, parts = self.evidence.of(q.rows, name in MOTION_QUANTITIES, name in HEADING_QUANTITIES)
        # Rounded as records store them, once per batch (not once per record and region).
        margin = rounded(margin)
        parts = {k: rounded(p) for k, p in parts.items()}
        for i, (rec, _) in enumerate(batch):
            if not usable[i]:
                continue
            stored = rec.get("confidence")
            if not isinstance(stored, (int, float)) or not 0.0 <= stored <= 1.0:
                self.bad(rec, "confidence", f"expected a number in [0, 1], got {stored!r}")
                continue
            lowest = float(margin[i])
            if not _close(rec.get("answer_margin"), lowest):
                self.bad(rec, "answer_margin", f"{rec.get('answer_margin')!r} != {lowest}")
            for j, reg in enumerate(rec["regions"]):
                evidence = reg.get("evidence")
                if not isinstance(evidence, Mapping):
                    self.bad(rec, f"regions[{j}].evidence", "missing")
                    continue
                for name, value in evidence.items():
                    if name in parts:
                        want = float(parts[name][i, j])
                        if not _close(value, want):
                            self.bad(rec, f"regions[{j}].evidence.{name}", f"{value!r} != {want}")
                    if isinstance(value, (int, float)):
                        lowest = min(lowest, float(value))
            if not _close(stored, lowest):
                self.bad(rec, "confidence", f"{stored!r} is not the weakest part {lowest}")

    def _choices(self, qt: QuestionType, rec: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
        options = rec.get("choices")
        if not isinstance(options, list) or len(options) != qt.choices.count:
            self.bad(rec, "choices", f"expected {qt.choices.count} options")
            return None
        letters = [o.get("letter") for o in options if isinstance(o, Mapping)]
        if letters != list(LETTERS[: len(options)]):
            self.bad(rec, "choices", f"letters must be {list(LETTERS[: len(options)])}")
            return None
        ids = [int(reg["region_id"]) for reg in rec["regions"]]
        seen = set()
        for o in options:
            if qt.choices.options == "param":
                space = dict(qt.option_space())
                ok = o.get("key") in space and o.get("text") == space[o.get("key")]
                ident = o.get("key")
            elif qt.choices.options == "roles":
                ok = o.get("region_id") in ids and o.get("text") == region_text(o.get("region_id"))
                ident = o.get("region_id")
            else:
                rids = o.get("region_ids")
                ok = isinstance(rids, list) and sorted(rids) == sorted(ids)
                ok = ok and o.get("text") == self.templates.vocabulary.order_separator.join(
                    region_text(x) for x in rids
                )
                ident = tuple(rids) if isinstance(rids, list) else None
            if not ok:
                self.bad(
                    rec, "choices", f"option {o.get('letter')} is not a valid option of {qt.id}"
                )
                return None
            if ident in seen:
                self.bad(rec, "choices", f"option {o.get('letter')} repeats another option")
                return None
            seen.add(ident)
        return options

    def _compare(self, qt: QuestionType, rec: Mapping[str, Any], c: QAContent, vocab) -> None:
        variant = rec.get("template_variant") or {}
        q_idx, a_idx, e_idx = (
            variant.get("question"),
            variant.get("answer"),
            variant.get("explanation"),
        )
        if not isinstance(q_idx, int) or not 0 <= q_idx < len(qt.questions):
            self.bad(rec, "template_variant.question", f"no question phrasing {q_idx!r}")
            return
        question = qt.questions[q_idx]
        if not question.applies(c.horizon_s):
            self.bad(rec, "template_variant.question", "phrasing not for this horizon")
        options = letter = None
        if qt.choices is not None:
            options = self._choices(qt, rec)
            if options is None:
                return
            letter = correct_letter(qt, options, c)
            if letter is None:
                self.bad(
                    rec,
                    "choices",
                    f"no option matches the answer the attributes give ({c.outcome})",
                )
                return
        key = answer_key(qt, question, c.outcome)
        answers = qt.answers.get(key, ())
        if not isinstance(a_idx, int) or not 0 <= a_idx < len(answers):
            self.bad(rec, "template_variant.answer", f"no {key or 'answer'} phrasing {a_idx!r}")
            return
        if not answers[a_idx].applies(c.horizon_s):
            self.bad(rec, "template_variant.answer", "phrasing not for this horizon")
        if qt.explanations:
            if not isinstance(e_idx, int) or not 0 <= e_idx < len(qt.explanations):
                self.bad(rec, "template_variant.explanation", f"no explanation phrasing {e_idx!r}")
                return
        else:
            e_idx = None
        i_idx = variant.get("item")
        if qt.items:
            if not isinstance(i_idx, int) or not 0 <= i_idx < len(qt.items):
                self.bad(rec, "template_variant.item", f"no item phrasing {i_idx!r}")
                return
        elif i_idx is not None:
            self.bad(rec, "template_variant.item", "this type has no item phrasings")
        yes_no = key if question.asks is not None else None
        expected = structured_answer(qt, c, yes_no, letter)
        stored = rec.get("answer_values")
        if not isinstance(stored, Mapping):
            self.bad(rec, "answer_values", "expected an object")
            return
        for name in sorted(set(expected) | set(stored)):
            if name not in stored:
                self.bad(
                    rec, f"answer_values.{name}", f"missing (attributes give {expected[name]!r})"
                )
            elif name not in expected:
                self.bad(rec, f"answer_values.{name}", "not a value of this question type")
            elif not _close(stored[name], expected[name]):
                self.bad(
                    rec,
                    f"answer_values.{name}",
                    f"record says {stored[name]!r}, attributes give {expected[name]!r}",
                )
        fields = text_fields(qt, c, vocab, options, letter, i_idx if qt.items else None)
        texts = render_texts(qt, fields, q_idx, key, a_idx, e_idx)
        for name, want in zip(("question", "answer", "explanation"), texts, strict=True):
            got = rec.get(name)
            if got != want:
                self.bad(rec, name, f"expected {want!r}, got {got!r}")

    def _lookup_rows(self) -> None:
        """Attribute row of every (keyframe, track) the records name, in one vectorized lookup."""
        keys = []
        for rec in self.records:
            try:
                kf = int(rec["keyframe"]["frame_index"])
                keys += [(kf, int(reg["track_id"])) for reg in rec["regions"]]
            except (KeyError, TypeError, ValueError):
                continue
        keys = sorted(set(keys))
        arr = np.array(keys, dtype=np.int64).reshape(-1, 2)
        rows = self.attrs.row_of(arr[:, 0], arr[:, 1]) if len(arr) else np.zeros(0, np.int64)
        self._rows = {k: int(r) for k, r in zip(keys, rows, strict=True)}

    def _row(self, kf: Any, track_id: Any) -> int:
        try:
            return self._rows.get((int(kf), int(track_id)), -1)
        except (TypeError, ValueError):
            return -1

    def run(self) -> list[Mismatch]:
        self._lookup_rows()
        batches: dict[str, list[tuple[Mapping[str, Any], np.ndarray]]] = defaultdict(list)
        checked: list[tuple[Mapping[str, Any], np.ndarray]] = []
        for rec in self.records:
            if not isinstance(rec, Mapping):
                self.bad(None, "record", "not a JSON object")
                continue
            got = self._structure(rec)
            if got is None:
                continue
            qt, rows = got
            self._views(rec, rows)
            if self.grounding is not None:
                self._grounded(rec)
            checked.append((rec, rows))
            batches[qt.id].append((rec, rows))
        if self.cameras is not None:
            self._projections()
        self._conventions(checked)
        self._cross_record()
        self._completeness()
        if self.images_root is not None:
            self._measured_colours()
        for type_id, batch in batches.items():
            self._answers(self.templates.types[type_id], batch)
        return self.out


def _same_box(written: Sequence[float], recorded: Any) -> bool:
    """Whether a record's box is the masks file's, coordinate by coordinate within
    ``BOX_TOLERANCE_PX`` (plain floats: one call per view of every record)."""
    try:
        pairs = list(zip(written, recorded, strict=True))
        return all(abs(float(a) - float(b)) <= BOX_TOLERANCE_PX for a, b in pairs)
    except (TypeError, ValueError):
        return False


def _rle_key(rle: Any) -> Any:
    """A key equal for equal compressed RLE dicts (size, counts string); any other mask is its
    own key (measured as given)."""
    try:
        if isinstance(rle["counts"], str):
            return (tuple(int(x) for x in rle["size"]), rle["counts"])
    except (KeyError, TypeError, ValueError):
        pass
    return ("object", id(rle))


def _read_rgb(path: Path) -> np.ndarray | None:
    """An image file as (H, W, 3) uint8 RGB (a view of OpenCV's BGR pixels), None when it
    cannot be read."""
    import cv2

    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    return None if bgr is None else bgr[:, :, ::-1]


def check_clip_qa(
    records: Sequence[Mapping[str, Any]],
    attrs: ObjectAttributes,
    clip: str,
    templates: TemplateSet | None = None,
    cameras: Sequence[CameraCalibration] | None = None,
    min_mask_box_iou: float = 0.3,
    min_projection_iou: float = 0.5,
    images_root: str | Path | None = None,
    views: ViewEvidence | None = None,
    confidence: ConfidenceModel | None = None,
    grounding: ClipGrounding | None = None,
    image_patches: Mapping[Path, Any] | None = None,
) -> list[Mismatch]:
    """Every mismatch between one clip's QA records and its attributes (empty when consistent).

    Args:
        records: the clip's ``qa.jsonl`` records.
        attrs: the clip's attributes.
        clip: the clip name (records must carry it).
        templates: the templates the records were generated with (the packaged ones when None).
        cameras: the rig's cameras, to check boxes against the projected 3D boxes (skipped when
            None).
        min_mask_box_iou: least IoU of a keyframe view's mask bounding box with its 2D box.
        min_projection_iou: least IoU of a view's box with the track's projected box.
        images_root: the dataset root the records' image paths are relative to; with it, every
            measured colour an answer names is re-measured from the image under the record's
            mask (without it the colour word is re-derived from the stored L*a*b* colour).
        views: the clip's camera views (``visibility.parquet``): with them the LiDAR and mask
            parts of each region's evidence are re-derived too (without, they are taken as stored
            and only their place in the confidence is checked).
        confidence: the confidence model the records were made with (the default when None).
        grounding: the run's marks and masks of the clip (:func:`load_clip_grounding`); with
            it every region and view must be the one the marked images and masks files show.
        image_patches: decoded pixels of images under ``images_root``, by absolute path
            (``autolabel.qa.appearance.ImagePatch``, kept by the run's marks stage): a colour is
            re-measured from them when they hold every pixel of the masks measured, else from
            the image file.
    """
    return _ClipChecker(
        records,
        attrs,
        templates or load_templates(),
        clip,
        cameras,
        min_mask_box_iou,
        min_projection_iou,
        images_root,
        views,
        confidence,
        grounding,
        image_patches,
    ).run()


def _manifest_confidence_model(path: Path) -> ConfidenceModel | None:
    """The ``qa.confidence`` model a run's manifest records (None: no manifest or none named)."""
    if not path.is_file():
        return None
    from autolabel.config import dataclass_from_mapping

    manifest = json.loads(path.read_text())
    model = ((manifest.get("config") or {}).get("qa") or {}).get("confidence")
    if not isinstance(model, Mapping):
        return None
    return dataclass_from_mapping(ConfidenceModel, model, where=f"{path}: config.qa.confidence")


def check_qa_run(
    run_dir: str | Path,
    templates: TemplateSet | None = None,
    cameras: Sequence[CameraCalibration] | None = None,
    images_root: str | Path | None = None,
) -> CheckReport:
    """Check every ``RUN/<clip>/qa.jsonl`` against ``RUN/<clip>/attributes.parquet``
    (``images_root``: re-measure colours from the images, see :func:`check_clip_qa`), each
    record's confidence against ``visibility.parquet`` where the clip has one, with the confidence
    model of the clip's ``manifest.json`` (the default where it names none), and, where the clip
    has them, its regions against ``marks/regions.json`` and ``masks/``.

    Raises:
        FileNotFoundError: ``run_dir`` has no clip with a ``qa.jsonl``.
    """
    run_dir = Path(run_dir)
    files = sorted(run_dir.glob(f"*/{QA_FILE}"))
    if not files:
        raise FileNotFoundError(f"{run_dir}: no <clip>/{QA_FILE} found")
    templates = templates or load_templates()
    report = CheckReport()
    for qa_path in files:
        clip = qa_path.parent.name
        attrs_path = qa_path.parent / ATTRIBUTES_FILE
        views_path = qa_path.parent / VISIBILITY_FILE
        try:
            records = read_qa_jsonl(qa_path)
            attrs = ObjectAttributes.read_parquet(attrs_path)
            views = ViewEvidence.read_parquet(views_path) if views_path.is_file() else None
            model = _manifest_confidence_model(qa_path.parent / "manifest.json")
            grounding = load_clip_grounding(qa_path.parent)
        except (OSError, ValueError, KeyError) as e:
            report.records[clip] = 0
            report.mismatches.append(Mismatch(clip, "-", "file", str(e)))
            continue
        report.records[clip] = len(records)
        if grounding is not None:
            report.grounded.append(clip)
        report.mismatches += check_clip_qa(
            records,
            attrs,
            clip,
            templates,
            cameras,
            images_root=images_root,
            views=views,
            confidence=model,
            grounding=grounding,
        )
    return report
