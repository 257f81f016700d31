"""QA generation for one clip: attributes x region grounding x templates -> QA records.

Flow: :func:`select_keyframes` picks the QA keyframes (1 Hz, 2..17 s) and their context / future
frames; the regions of those keyframes are gathered into one table (region -> track -> attribute
row); for every question type the candidates of the whole clip are enumerated and its quantity is
computed on all of them at once (numpy); then per keyframe the valid candidates are sampled under
the caps with class and outcome balancing, phrased from the templates and turned into records
(see :mod:`autolabel.qa.records` for the schema). Same inputs, config and seed -> same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from autolabel.atomic_io import atomic_write_text, canonical_json
from autolabel.attributes import ObjectAttributes
from autolabel.classes import DETECTION_CLASSES
from autolabel.qa.appearance import RegionColours, best_view_colour
from autolabel.qa.candidates import GROUP_SUBJECTS, Candidates, ClipRegions, enumerate_candidates
from autolabel.qa.confidence import (
    HEADING_QUANTITIES,
    MOTION_QUANTITIES,
    ViewEvidence,
    answer_margin,
    perturbation_set,
    rounded,
    row_evidence,
)
from autolabel.qa.dynamic import COLOUR_QUANTITIES
from autolabel.qa.grounding import ClipQAMeta, KeyframeRegions
from autolabel.qa.quantities import ROLES, QuantityInput, QuantityResult
from autolabel.qa.records import (
    QAContent,
    answer_key,
    applicable,
    correct_letter,
    make_options,
    render_texts,
    structured_answer,
    text_fields,
)
from autolabel.qa.sampling import (
    BalanceState,
    KeyframeWindows,
    QAConfig,
    deduplicate_keyframes,
    pick_balanced,
    select_keyframes,
    stable_seed,
)
from autolabel.qa.templates import QuestionType, TemplateSet, load_templates

QA_FILE = "qa.jsonl"


def clip_regions(
    attrs: ObjectAttributes,
    regions: Sequence[KeyframeRegions],
    keyframes: np.ndarray,
    channels: tuple[str, ...],
    clip: str = "",
) -> tuple[ClipRegions, dict[int, KeyframeRegions]]:
    """The regions of the QA keyframes as one table, each mapped to its track's attribute row.

    Regions of other frames are ignored; regions that no camera shows at the keyframe (failed
    visibility) are dropped.

    Raises:
        ValueError: two groundings for one keyframe, a region whose track has no attributes at
            the keyframe, or a grounding label that disagrees with the attributes.
    """
    by_frame: dict[int, KeyframeRegions] = {}
    for kr in regions:
        if kr.keyframe_index in by_frame:
            raise ValueError(f"{clip}: two region groundings for keyframe {kr.keyframe_index}")
        by_frame[kr.keyframe_index] = kr
    kf_used = [int(k) for k in keyframes if int(k) in by_frame]
    parts: dict[str, list[np.ndarray]] = {
        k: [] for k in ("pos", "row", "rid", "tid", "arow", "vis")
    }
    offsets = [0]
    for pos, kf in enumerate(kf_used):
        kr = by_frame[kf]
        arow = attrs.row_of(np.full(len(kr), kf), kr.track_id)
        missing = np.flatnonzero(arow < 0)
        if len(missing):
            i = missing[0]
            raise ValueError(
                f"{clip}: keyframe {kf}: Region [{kr.region_id[i]}] is track {kr.track_id[i]}, "
                "which has no attributes in that frame"
            )
        if kr.label is not None:
            bad = np.flatnonzero(np.asarray(attrs.label)[arow] != kr.label)
            if len(bad):
                i = bad[0]
                raise ValueError(
                    f"{clip}: keyframe {kf}: Region [{kr.region_id[i]}] (track {kr.track_id[i]}) "
                    f"is labelled {DETECTION_CLASSES[kr.label[i]]} in the grounding but "
                    f"{DETECTION_CLASSES[attrs.label[arow[i]]]} in the attributes"
                )
        vis = kr.visible_at_keyframe(channels)
        keep = vis.any(axis=1)
        # Region order within a keyframe: by region id, so records do not depend on input order.
        rows = np.flatnonzero(keep)
        rows = rows[np.argsort(kr.region_id[rows], kind="stable")]
        parts["pos"].append(np.full(len(rows), pos))
        parts["row"].append(rows)
        parts["rid"].append(kr.region_id[rows])
        parts["tid"].append(kr.track_id[rows])
        parts["arow"].append(arow[rows])
        parts["vis"].append(vis[rows])
        offsets.append(offsets[-1] + len(rows))

    def cat(name: str, shape_tail: tuple[int, ...] = (), dtype: Any = np.int64) -> np.ndarray:
        return np.concatenate(parts[name]) if parts[name] else np.zeros((0, *shape_tail), dtype)

    arow_all = cat("arow")
    labels = np.asarray(DETECTION_CLASSES, dtype=object)[np.asarray(attrs.label)[arow_all]]
    table = ClipRegions(
        keyframe_pos=cat("pos"),
        keyframes=np.asarray(kf_used, dtype=np.int64),
        offsets=np.asarray(offsets, dtype=np.int64),
        row_in_keyframe=cat("row"),
        region_id=cat("rid"),
        track_id=cat("tid"),
        attr_row=arow_all,
        label=labels,
        visible=cat("vis", (len(channels),), bool),
        channels=channels,
        attrs=attrs,
    )
    return table, by_frame


def quantity_input(
    attrs: ObjectAttributes,
    table: ClipRegions,
    cands: Candidates,
    params: Any,
    cache: dict | None = None,
    colour_lab: np.ndarray | None = None,
) -> QuantityInput:
    """The quantity input of candidates over a region table (-1 region rows stay -1)."""
    present = cands.regions >= 0
    g = np.maximum(cands.regions, 0)
    if cands.regions.size:
        rows = np.where(present, table.attr_row[g], -1)
        visible = table.visible[g] & present[..., None]
    else:
        rows = cands.regions.copy()
        visible = np.zeros((*cands.regions.shape, len(table.channels)), bool)
    return QuantityInput(
        attrs=attrs,
        rows=rows,
        frame_index=table.keyframes[cands.keyframe_pos] if len(cands) else np.zeros(0, np.int64),
        horizon_s=cands.horizon_s,
        cameras=cands.cameras,
        visible=visible,
        channels=table.channels,
        params=params,
        cache={} if cache is None else cache,
        option=cands.option,
        colour_lab=colour_lab,
    )


def record_cameras(qt: QuestionType, table: ClipRegions, cands: Candidates) -> np.ndarray:
    """(N, C) bool: the cameras each candidate's record is posed over (``cameras`` of the type:
    ``all``, the region's ``visible`` cameras, or the candidate's own)."""
    n, c = len(cands), len(table.channels)
    if qt.cameras == "all":
        return np.ones((n, c), bool)
    if qt.cameras == "visible" and cands.regions.shape[1]:
        return table.visible[np.maximum(cands.regions[:, 0], 0)]
    out = np.zeros((n, c), bool)
    for j in range(cands.cameras.shape[1]):
        ok = cands.cameras[:, j] >= 0
        out[np.flatnonzero(ok), cands.cameras[ok, j]] = True
    return out


def _frame_ref(meta: ClipQAMeta, f: int) -> dict[str, Any]:
    return {
        "frame_index": int(f),
        "token": meta.frame_token[f],
        "time_s": round(float(meta.frame_time_s[f]), 3),
    }


class _ClipGenerator:
    """The state of one clip's generation (kept in one place so helpers stay small)."""

    def __init__(
        self,
        attrs: ObjectAttributes,
        regions: Sequence[KeyframeRegions],
        meta: ClipQAMeta,
        config: QAConfig,
        templates: TemplateSet,
        colours: RegionColours | None = None,
        views: ViewEvidence | None = None,
    ) -> None:
        self.attrs, self.meta, self.config, self.templates = attrs, meta, config, templates
        self.evidence = row_evidence(attrs, views, config.confidence)
        self._perturbed: list[ObjectAttributes] | None = None
        # Per type: (N,) confidence, (N,) answer margin (NaN: not needed), (N, k) region parts.
        self.confidence: dict[str, tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]] = {}
        self._stored: dict[str, tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]] = {}
        self.windows: KeyframeWindows = deduplicate_keyframes(
            select_keyframes(meta.frame_time_s, config), meta.ego_pose, config
        )
        self.table, self.grounding = clip_regions(
            attrs, regions, self.windows.keyframe, meta.channels, meta.clip
        )
        # Per region and camera: the measured colour at the keyframe and its mask's pixels.
        self.colour_lab, self.colour_px = (colours or RegionColours.empty()).table(
            self.table.keyframes[self.table.keyframe_pos], self.table.track_id, meta.channels
        )
        self._colours: dict[str, np.ndarray] = {}
        if config.types:
            unknown = [t for t in config.types if t not in templates.types]
            if unknown:
                raise ValueError(f"QAConfig.types: unknown question type {unknown[0]!r}")
            self.types = [templates.types[t] for t in templates.types if t in config.types]
        else:
            self.types = list(templates.types.values())
        horizons = set(float(h) for h in attrs.future_horizons_s) | {0.0}
        for qt in self.types:
            missing = [h for h in qt.horizons if h not in horizons]
            if missing:
                raise ValueError(
                    f"{qt.source}: types.{qt.id}.horizons: {missing[0]:g} s is not among the "
                    f"attributes' future horizons {sorted(horizons)}"
                )
        self.state = BalanceState()
        self._views: dict[tuple[int, int], dict[str, list[tuple[int, dict[str, Any]]]]] = {}
        self.window_of = {int(k): i for i, k in enumerate(self.windows.keyframe)}

    def _candidates(self) -> dict[str, tuple[Candidates, QuantityResult]]:
        """Candidates and quantity results of every type over the whole clip."""
        out: dict[str, tuple[Candidates, QuantityResult]] = {}
        shared: dict[Any, tuple[Candidates, dict]] = {}
        for qt in self.types:
            key = (qt.subjects, qt.horizons, canonical_json(_enum_params(qt)))
            if key not in shared:
                rng = np.random.default_rng(
                    stable_seed(self.config.seed, self.meta.clip, "candidates", key[0], key[2])
                )
                cands = enumerate_candidates(qt.subjects, self.table, qt.params, qt.horizons, rng)
                shared[key] = (cands, {})
            cands, cache = shared[key]
            lab = None
            if qt.quantity.name in COLOUR_QUANTITIES:
                lab = self._candidate_colours(qt, cands)
                self._colours[qt.id] = lab
            q = quantity_input(self.attrs, self.table, cands, qt.params, cache, lab)
            res = qt.quantity(q)
            out[qt.id] = (cands, res)
            self.confidence[qt.id] = self._confidence(qt, cands, res, lab)
            # Rounded as records store them, once per type (not once per record and region).
            conf, margin, parts = self.confidence[qt.id]
            self._stored[qt.id] = (
                rounded(conf),
                rounded(margin),
                {k: rounded(p) for k, p in parts.items()},
            )
        return out

    def perturbed(self) -> list[ObjectAttributes]:
        """The clip's perturbed attributes (built once, on first use)."""
        if self._perturbed is None:
            self._perturbed = perturbation_set(self.attrs, self.config.confidence, self.meta.clip)
        return self._perturbed

    def _confidence(
        self, qt: QuestionType, cands: Candidates, res: QuantityResult, lab: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """Confidence of every candidate of a type: the weakest of its regions' evidence and,
        for the valid candidates whose evidence reaches ``min_confidence``, its answer margin."""
        present = cands.regions >= 0
        rows = np.where(present, self.table.attr_row[np.maximum(cands.regions, 0)], -1)
        name = qt.quantity.name
        subject, parts = self.evidence.of(
            rows, name in MOTION_QUANTITIES, name in HEADING_QUANTITIES
        )
        conf = subject.min(axis=1) if rows.shape[1] else np.ones(len(cands))
        margin = np.full(len(cands), np.nan)
        need = np.flatnonzero(res.valid & (conf >= self.config.min_confidence))
        if len(need):
            sub = cands.subset(need)
            sub_lab = None if lab is None else lab[need]

            def make_input(attrs: ObjectAttributes) -> QuantityInput:
                return quantity_input(attrs, self.table, sub, qt.params, {}, sub_lab)

            base = qt.quantity(make_input(self.attrs))
            margin[need] = answer_margin(
                qt, base, make_input, self.perturbed(), self.config.confidence
            )
            conf = conf.copy()
            conf[need] = np.minimum(conf[need], margin[need])
        return conf, margin, parts

    def _candidate_colours(self, qt: QuestionType, cands: Candidates) -> np.ndarray:
        """(N, k, 3) colour of each candidate's regions: the view with the most mask pixels
        among the cameras its record shows (NaN where unmeasured)."""
        allowed = record_cameras(qt, self.table, cands)[:, None, :]  # (N, 1, C)
        g = np.maximum(cands.regions, 0)
        lab = best_view_colour(self.colour_lab[g], self.colour_px[g], allowed)
        return np.where((cands.regions >= 0)[..., None], lab, np.nan)

    def run(self) -> list[dict[str, Any]]:
        if len(self.table) == 0:
            return []
        computed = self._candidates()
        # A unit is sampled together: one type, or the types of a group (one region, all horizons).
        units: dict[str, list[QuestionType]] = {}
        for qt in self.types:
            units.setdefault(qt.group or qt.id, []).append(qt)
        records: list[dict[str, Any]] = []
        for kpos, kf in enumerate(self.table.keyframes):
            seq = [0]
            for name, qts in units.items():
                rng = np.random.default_rng(
                    stable_seed(self.config.seed, self.meta.clip, int(kf), name)
                )
                if qts[0].group is None:
                    records += self._single(qts[0], computed[qts[0].id], kpos, rng, seq)
                else:
                    records += self._group(name, qts, computed, kpos, rng, seq)
        return records

    def _classes(self, qt: QuestionType, cands: Candidates, idx: np.ndarray) -> np.ndarray:
        """What the sampler balances as the class: region A's class, a class group, a camera."""
        if qt.subjects in GROUP_SUBJECTS:
            keys = np.array([g["key"] for g in qt.params["groups"]], dtype=object)
            return keys[cands.option[idx]]
        if qt.subjects == "camera_regions":
            return np.asarray(self.table.channels, dtype=object)[cands.cameras[idx, 0]]
        if qt.subjects == "keyframe_regions":
            return np.full(len(idx), "scene", dtype=object)
        if cands.regions.shape[1] == 0:
            return np.full(len(idx), "ego", dtype=object)
        return self.table.label[cands.regions[idx, 0]]

    def _single(self, qt, computed, kpos, rng, seq) -> list[dict[str, Any]]:
        cands, res = computed
        confident = self.confidence[qt.id][0] >= self.config.min_confidence
        idx = np.flatnonzero((cands.keyframe_pos == kpos) & res.valid & confident)
        if res.outcome is not None:
            outcomes = res.outcome[idx]
        elif res.balance is not None:
            outcomes = res.balance[idx]
        else:
            outcomes = np.full(len(idx), "", dtype=object)
        picked = pick_balanced(
            qt.id,
            self._classes(qt, cands, idx),
            outcomes,
            self.config,
            self.state,
            rng,
            # Questions about the ego alone or the whole scene have no class to cap.
            class_cap=qt.subjects not in ("ego", "keyframe_regions"),
        )
        return [self._record(qt, cands, res, int(idx[p]), rng, seq, None) for p in picked]

    def _group(self, name, qts, computed, kpos, rng, seq) -> list[dict[str, Any]]:
        cands, _ = computed[qts[0].id]
        n_h = len(qts[0].horizons)
        ok = np.ones(len(cands) // max(n_h, 1), dtype=bool)
        for qt in qts:
            ok &= computed[qt.id][1].valid.reshape(-1, n_h).all(axis=1)
            confident = self.confidence[qt.id][0] >= self.config.min_confidence
            ok &= confident.reshape(-1, n_h).all(axis=1)
        region_rows = cands.regions[::n_h, 0] if n_h else np.zeros(0, np.int64)
        idx = np.flatnonzero(ok & (self.table.keyframe_pos[region_rows] == kpos))
        classes = self.table.label[region_rows[idx]]
        picked = pick_balanced(
            name, classes, np.full(len(idx), "", dtype=object), self.config, self.state, rng, n_h
        )
        out = []
        for p in picked:
            m = int(idx[p])
            rid = int(self.table.region_id[region_rows[m]])
            group_id = f"{self.meta.clip}-k{int(self.table.keyframes[kpos]):03d}-{name}-r{rid}"
            for qt in qts:
                c2, res = computed[qt.id]
                for h in range(n_h):
                    out.append(self._record(qt, c2, res, m * n_h + h, rng, seq, group_id))
        return out

    def _region_views(self, kf: int, row: int) -> dict[str, list[tuple[int, dict[str, Any]]]]:
        """camera -> [(frame, view record)] of one region, by frame; built once per region.

        Records of the same region share these view objects (they are only serialized).
        """
        key = (kf, row)
        if key not in self._views:
            kr = self.grounding[kf]
            t0 = float(self.meta.frame_time_s[kf])
            frames = np.unique(kr.view_frame_index[kr.view_region == row])
            cams = list(dict.fromkeys(kr.view_camera[kr.view_region == row]))
            by_cam: dict[str, list[tuple[int, dict[str, Any]]]] = {}
            for v in kr.views_of(row, cams, frames):
                v["time_offset_s"] = round(float(self.meta.frame_time_s[v["frame_index"]]) - t0, 3)
                by_cam.setdefault(v["camera"], []).append((v["frame_index"], v))
            self._views[key] = by_cam
        return self._views[key]

    def _content(
        self, qt: QuestionType, cands: Candidates, res: QuantityResult, i: int
    ) -> QAContent:
        g = cands.regions[i]
        g = g[g >= 0]
        asked = ()
        if qt.subjects in ("pair_cross_camera", "region_camera_pair"):
            asked = tuple(self.table.channels[c] for c in cands.cameras[i])
        if qt.subjects == "camera_regions":
            asked = (self.table.channels[cands.cameras[i, 0]],)
        option_key = option_text = None
        if qt.subjects in GROUP_SUBJECTS:
            group = qt.params["groups"][int(cands.option[i])]
            option_key, option_text = str(group["key"]), str(group["text"])
        return content_of(
            res,
            i,
            region_ids=[int(x) for x in self.table.region_id[g]],
            classes=[str(x) for x in self.table.label[g]],
            horizon_s=float(cands.horizon_s[i]),
            asked_cameras=asked,
            option_key=option_key,
            option_text=option_text,
        )

    def _record(self, qt, cands, res, i, rng, seq, group_id) -> dict[str, Any]:
        vocab = self.templates.vocabulary
        c = self._content(qt, cands, res, i)
        q_idx = int(rng.choice(applicable(qt.questions, c.horizon_s)))
        options = letter = None
        if qt.choices is not None:
            options = make_options(qt, c, vocab, rng)
            letter = correct_letter(qt, options, c)
        key = answer_key(qt, qt.questions[q_idx], c.outcome)
        a_idx = int(rng.choice(applicable(qt.answers[key], c.horizon_s)))
        e_idx = (
            int(rng.choice(applicable(qt.explanations, c.horizon_s))) if qt.explanations else None
        )
        i_idx = int(rng.integers(len(qt.items))) if qt.items else None
        fields = text_fields(qt, c, vocab, options, letter, i_idx)
        question, answer, explanation = render_texts(qt, fields, q_idx, key, a_idx, e_idx)
        yes_no = key if qt.questions[q_idx].asks is not None else None

        kpos = int(cands.keyframe_pos[i])
        kf = int(self.table.keyframes[kpos])
        w = self.window_of[kf]
        context = [int(f) for f in self.windows.context[w]]
        future = [int(f) for f in self.windows.future[w] if f >= 0]
        shown = record_cameras(qt, self.table, cands.subset(slice(i, i + 1)))[0]
        cameras = [ch for ch, s in zip(self.table.channels, shown, strict=True) if s]
        if qt.cameras == "candidate":  # the order the question names them in
            cameras = list(
                dict.fromkeys(self.table.channels[x] for x in cands.cameras[i] if x >= 0)
            )
        if qt.views == "keyframe":
            frames = [kf]
        else:
            frames = context + (future if self.config.grounding_frames == "context+future" else [])
        frame_set = set(frames)
        colours = self._colours.get(qt.id)
        conf, margin, parts = self._stored[qt.id]
        regions = []
        for j, (role, g) in enumerate(zip(ROLES, cands.regions[i], strict=False)):
            if g < 0:
                continue
            by_cam = self._region_views(kf, int(self.table.row_in_keyframe[g]))
            views = [v for cam in cameras for f, v in by_cam.get(cam, ()) if f in frame_set]
            entry = {
                "role": role,
                "region_id": int(self.table.region_id[g]),
                "track_id": int(self.table.track_id[g]),
                "class": str(self.table.label[g]),
                "cameras_visible": [
                    ch
                    for ch, v in zip(self.table.channels, self.table.visible[g], strict=True)
                    if v
                ],
                "views": views,
            }
            if colours is not None:
                entry["colour_lab"] = stored_lab(colours[i, j])
            entry["evidence"] = {name: float(p[i, j]) for name, p in parts.items()}
            regions.append(entry)
        rec_id = f"{self.meta.clip}-k{kf:03d}-{seq[0]:04d}"
        seq[0] += 1
        params: dict[str, Any] = {}
        if qt.subjects == "region_horizon":
            params["horizon_s"] = c.horizon_s
        if c.asked_cameras:
            params["asked_cameras"] = list(c.asked_cameras)
        if c.option_key is not None:
            params["class_group"] = c.option_key
        variant = {"question": q_idx, "answer": a_idx, "explanation": e_idx}
        if i_idx is not None:
            variant["item"] = i_idx
        return {
            "id": rec_id,
            "group_id": group_id or rec_id,
            "clip": self.meta.clip,
            "keyframe": _frame_ref(self.meta, kf),
            "context_frames": [_frame_ref(self.meta, f) for f in context],
            "future_frames": [_frame_ref(self.meta, f) for f in future],
            "cameras": cameras,
            "images": {cam: [self.meta.image_paths[cam][f] for f in context] for cam in cameras},
            "question": question,
            "answer": answer,
            "explanation": explanation,
            "answer_values": structured_answer(qt, c, yes_no, letter),
            "choices": options,
            "category": qt.category,
            "kind": qt.kind,
            "type": qt.id,
            "template_id": qt.id,
            "template_variant": variant,
            "params": params,
            "regions": regions,
            "confidence": float(conf[i]),
            "answer_margin": float(margin[i]),
        }


def stored_lab(lab: np.ndarray) -> list[float] | None:
    """A measured colour as records store it: [L, a, b] rounded to 0.01, or None."""
    lab = np.asarray(lab, dtype=np.float64)
    if not np.all(np.isfinite(lab)):
        return None
    return [round(float(x), 2) + 0.0 for x in lab]


def content_of(res: QuantityResult, i: int, **kwargs: Any) -> QAContent:
    """The :class:`QAContent` of candidate ``i`` of a quantity result (regions and other fields
    of the candidate in ``kwargs``)."""
    items = []
    if res.item_facets or res.item_values:
        ids, classes = kwargs["region_ids"], kwargs["classes"]
        for j, (rid, cls) in enumerate(zip(ids, classes, strict=True)):
            item: dict[str, Any] = {"region_id": int(rid), "class": cls}
            item.update({k: str(v[i, j]) for k, v in res.item_facets.items()})
            item.update({k: float(v[i, j]) for k, v in res.item_values.items()})
            items.append(item)
    return QAContent(
        values={k: float(v[i]) for k, v in res.values.items()},
        lists={k: tuple(v[i]) for k, v in res.lists.items()},
        outcome=None if res.outcome is None else str(res.outcome[i]),
        facets={k: str(v[i]) for k, v in res.facets.items()},
        items=items,
        **kwargs,
    )


def _enum_params(qt: QuestionType) -> dict[str, Any]:
    """The params that shape a type's candidates (ranked sets, class groups)."""
    if qt.subjects in GROUP_SUBJECTS:
        return {"groups": qt.params["groups"]}
    if qt.subjects != "ranked_set":
        return {}
    keys = ("rank_by", "size", "margin_m", "margin_s", "chain", "across_cameras")
    return {k: qt.params[k] for k in keys if k in qt.params}


def generate_clip_qa(
    attrs: ObjectAttributes,
    regions: Sequence[KeyframeRegions],
    meta: ClipQAMeta,
    config: QAConfig | None = None,
    templates: TemplateSet | None = None,
    colours: RegionColours | None = None,
    views: ViewEvidence | None = None,
) -> list[dict[str, Any]]:
    """QA records of one clip (schema: :mod:`autolabel.qa.records`).

    Args:
        attrs: the clip's attributes (``autolabel.attributes.compute_attributes``).
        regions: the Set-of-Mark grounding of its keyframes (others than the QA keyframes are
            ignored).
        meta: clip name, frame tokens and times, image paths.
        config: sampling settings and seed (defaults when None).
        templates: question types and vocabulary (the packaged templates when None).
        colours: measured colours of the keyframe views
            (:func:`autolabel.qa.appearance.measure_region_colours`); without them no colour is
            named (colour questions are not asked, captions leave the colour out).
        views: what the camera views say about each object (mask scores, LiDAR points), the
            image part of each question's confidence; without them confidence rests on the
            attributes and the answer's margin alone.
    """
    return _ClipGenerator(
        attrs, regions, meta, config or QAConfig(), templates or load_templates(), colours, views
    ).run()


def dumps_qa_jsonl(records: Sequence[dict[str, Any]]) -> str:
    """Canonical JSON lines (sorted keys, no NaN)."""
    return "".join(canonical_json(r) + "\n" for r in records)


def write_qa_jsonl(path: str | Path, records: Sequence[dict[str, Any]]) -> Path:
    """Write records to ``path`` atomically, one canonical JSON object per line."""
    return atomic_write_text(path, dumps_qa_jsonl(records))
