"""QA records: the text and structured answer of one question, shared by generator and checker.

One record per line of ``<clip>/qa.jsonl``, canonical JSON (sorted keys, no NaN). Fields:

- ``id``: ``<clip>-k<keyframe frame index, 3 digits>-<sequence in keyframe, 4 digits>``.
- ``group_id``: records asked together; spatiotemporal types share
  ``<clip>-k<kf>-<group>-r<region id>`` (a STRIDE-QA benchmark scene group: one region, t = 0..3 s);
  every other record is a group of one (``group_id == id``).
- ``clip``; ``keyframe``: ``{frame_index, token, time_s}``; ``context_frames`` and
  ``future_frames``: lists of ``{frame_index, token, time_s}`` (t - 1.5 .. t at 2 Hz; t + 0.5 ..
  t + 3 s where the clip has them).
- ``cameras``: the camera channels the question is posed over; ``images``: channel -> image paths
  of the context frames, in time order (the last is the keyframe's).
- ``question``, ``answer``: text; regions appear as ``Region [X]``; numbers are rounded as the
  template says (degrees and rounded numbers only here).
- ``answer_values``: the structured answer. Numbers under names with units (``distance_m``,
  ``bearing_deg``, ``speed_mps``, ``ego_speed_mps``, ``heading_deg``, ``volume_m3``, ``clock`` an
  int 1..12, ...) at full precision rounded to 3 decimals; ``cameras``: channels; ``outcome``: the
  discrete answer (``left``, ``front``, ``bigger``, a bin or sector key, ``one``/``several``);
  ``region_id`` / ``region_ids``: the region answer (the nearer one; an order, left to right);
  ``yes_no`` for yes/no questions; ``choice``: the correct letter of a multiple-choice question.
- ``choices``: multiple choice only (else null): ``[{letter, text, key | region_id | region_ids}]``;
  ``explanation``: why the answer is right (multiple choice), else null.
- ``category`` (object_centric, ego_centric, spatiotemporal, multiple_choice, multi_view),
  ``kind`` (qualitative, quantitative), ``type`` and ``template_id`` (the question type);
  ``template_variant``: ``{question, answer, explanation}`` indices of the phrasings used.
- ``params``: inputs of the question that are not regions: ``horizon_s`` (spatiotemporal),
  ``asked_cameras`` (channels named in the text) and ``class_group`` (a count's class group).
- ``regions``: in role order (A, B, ...): ``{role, region_id, track_id, class, cameras_visible
  (channels that show it at the keyframe), views: [{camera, frame_index, time_offset_s, box_px
  [u_min, v_min, u_max, v_max], mask_rle {size [h, w], counts}, visible}]}`` for the record's
  cameras and its context (and future) frames (the keyframe only for ``views: keyframe`` types);
  ``colour_lab`` ([L, a, b] measured under the mask, or null) where the answer names a colour.
  Types over a set of regions (a count, a scene description) list every region of the set.
- ``confidence`` in [0, 1]: the weakest of ``answer_margin`` (the answer's margin to its nearest
  decision boundary) and every region's ``evidence`` parts (track, score, lidar, mask, class,
  velocity); see :mod:`autolabel.qa.confidence`.
- Descriptive answers also store their facet keys (``colour``, ``position``, ``action``) and, for
  a set of regions, ``items``: per region ``{region_id, <facet>: key, <value>: number}``.

``autolabel check-qa`` re-derives ``answer_values``, ``question``, ``answer`` and ``explanation``
from ``attributes.parquet`` through region -> track and fails on any disagreement.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from autolabel.qa.quantities import ROLES
from autolabel.qa.templates import (
    INTEGER_UNITS,
    Phrasing,
    QuestionType,
    Vocabulary,
    format_value,
    render,
)

LETTERS = "ABCDEFGH"
#: Decimals of the numbers stored in ``answer_values`` (mm, millidegrees, mm/s).
VALUE_DECIMALS = 3


def region_text(region_id: int) -> str:
    """How a region is written in QA text (DESIGN.md)."""
    return f"Region [{int(region_id)}]"


@dataclass
class QAContent:
    """What one QA says, before it is phrased.

    Attributes:
        region_ids, classes: of the regions in role order.
        values: every numeric value of the quantity (name -> float).
        lists: every list value of the quantity (name -> tuple of keys).
        outcome: the discrete answer key, or None.
        horizon_s: look-ahead, seconds.
        asked_cameras: channels the text names (``camera_a``, ``camera_b``), may be empty.
        facets: descriptive keys (facet name -> key, e.g. ``colour: red``), printed through the
            template's ``phrases``.
        items: per region of a set (a scene description), in region order: ``{region_id,
            class, <item facet>: key, <item value>: float}``.
        option_key, option_text: the candidate's option (a class group's key and words).
    """

    region_ids: list[int]
    classes: list[str]
    values: dict[str, float]
    lists: dict[str, tuple[str, ...]]
    outcome: str | None
    horizon_s: float = 0.0
    asked_cameras: tuple[str, ...] = ()
    facets: dict[str, str] = field(default_factory=dict)
    items: list[dict[str, Any]] = field(default_factory=list)
    option_key: str | None = None
    option_text: str | None = None


def answer_key(qt: QuestionType, question: Phrasing, outcome: str | None) -> str:
    """Which answer phrasings apply: ``""`` (one list), ``yes``/``no`` or the outcome."""
    if qt.choices is not None or "" in qt.answers:
        return ""
    if question.asks is not None:
        return "yes" if outcome == question.asks else "no"
    return str(outcome)


def applicable(phrasings: Sequence[Phrasing], horizon_s: float) -> list[int]:
    """Indices of the phrasings usable at this horizon."""
    return [i for i, p in enumerate(phrasings) if p.applies(horizon_s)]


def _order_ids(order_key: str, region_ids: Sequence[int]) -> list[int]:
    return [int(region_ids[ROLES.index(r)]) for r in order_key.split(",")]


def _kendall(a: Sequence[str], b: Sequence[str]) -> int:
    pos = {x: i for i, x in enumerate(b)}
    seq = [pos[x] for x in a]
    return sum(1 for i, j in itertools.combinations(range(len(seq)), 2) if seq[i] > seq[j])


def make_options(
    qt: QuestionType, c: QAContent, vocab: Vocabulary, rng: np.random.Generator
) -> list[dict[str, Any]]:
    """Multiple-choice options with hard distractors, in random order, lettered A, B, ...

    ``param`` options: the answer and the ``count - 1`` options nearest to it in the list
    (circularly for sectors), ties broken at random. ``roles``: every region. ``role_orders``:
    the answer and the orders fewest swaps (Kendall distance) from it.
    """
    spec = qt.choices
    assert spec is not None and c.outcome is not None
    if spec.options == "param":
        space = qt.option_space()
        keys = [k for k, _ in space]
        t = keys.index(c.outcome)
        n = len(keys)
        idx = np.arange(n)
        dist = np.abs(idx - t)
        if spec.distractors == "circular":
            dist = np.minimum(dist, n - dist)
        tie = rng.random(n)
        others = [i for i in np.lexsort((tie, dist)) if i != t][: spec.count - 1]
        chosen = [t, *others]
        opts = [{"key": keys[i], "text": space[i][1]} for i in chosen]
    elif spec.options == "roles":
        roles = ROLES[: len(c.region_ids)]
        opts = [
            {"region_id": int(c.region_ids[i]), "text": region_text(c.region_ids[i])}
            for i in range(len(roles))
        ][: spec.count]
        truth = c.region_ids[ROLES.index(c.outcome)]
        if all(o["region_id"] != truth for o in opts):
            opts[-1] = {"region_id": int(truth), "text": region_text(truth)}
    else:  # role_orders
        truth = c.outcome.split(",")
        perms = [list(p) for p in itertools.permutations(truth)]
        dist = np.array([_kendall(p, truth) for p in perms])
        tie = rng.random(len(perms))
        order = [i for i in np.lexsort((tie, dist)) if dist[i] > 0][: spec.count - 1]
        chosen = [truth] + [perms[i] for i in order]
        opts = []
        for p in chosen:
            ids = _order_ids(",".join(p), c.region_ids)
            opts.append(
                {
                    "region_ids": ids,
                    "text": vocab.order_separator.join(region_text(i) for i in ids),
                }
            )
    perm = rng.permutation(len(opts))
    return [{"letter": LETTERS[k], **opts[i]} for k, i in enumerate(perm)]


def correct_letter(
    qt: QuestionType, options: Sequence[Mapping[str, Any]], c: QAContent
) -> str | None:
    """The letter of the option that matches the (re-derived) answer, None if no option does."""
    if c.outcome is None:
        return None
    kind = qt.choices.options if qt.choices else None
    for o in options:
        if kind == "param" and o.get("key") == c.outcome:
            return o["letter"]
        if kind == "roles" and o.get("region_id") == c.region_ids[ROLES.index(c.outcome)]:
            return o["letter"]
        if kind == "role_orders" and o.get("region_ids") == _order_ids(c.outcome, c.region_ids):
            return o["letter"]
    return None


def text_fields(
    qt: QuestionType,
    c: QAContent,
    vocab: Vocabulary,
    options: Sequence[Mapping[str, Any]] | None = None,
    letter: str | None = None,
    item_idx: int | None = None,
) -> dict[str, str]:
    """Every placeholder value of a type's phrasings, as text (``item_idx``: the phrasing of
    the per-region items of a set, which the ``{items}`` placeholder joins)."""
    fields: dict[str, str] = {}
    for role, rid, cls in zip(ROLES, c.region_ids, c.classes, strict=False):
        fields[role] = str(int(rid))
        fields[f"class_{role}"] = vocab.class_noun(cls)
    for spec in qt.values:
        if spec.vocab is not None:
            fields[spec.name] = vocab.join([vocab.camera(k) for k in c.lists[spec.name]])
        else:
            fields[spec.name] = format_value(spec, c.values[spec.name])
    if qt.outcome_text and c.outcome is not None:
        fields["outcome"] = qt.outcome_text[c.outcome]
    if c.asked_cameras:
        fields["camera_a"] = vocab.camera(c.asked_cameras[0])
        fields["camera_b"] = vocab.camera(c.asked_cameras[-1])
    if qt.subjects == "region_horizon":
        fields["t"] = f"{c.horizon_s:g}"
        fields["horizon"] = vocab.horizon(c.horizon_s)
    for name, key in c.facets.items():
        fields[name] = qt.phrases[name][key]
    if c.option_text is not None:
        fields["group"] = c.option_text
    if qt.items:
        fields["items"] = " ".join(
            render(qt.items[item_idx or 0].text, item_fields(qt, item, vocab)) for item in c.items
        )
    if options is not None:
        fields["choices"] = vocab.choice_separator.join(
            vocab.choice.format(letter=o["letter"], text=o["text"]) for o in options
        )
        chosen = [o for o in options if o["letter"] == letter]
        fields["choice"] = letter or ""
        fields["choice_text"] = chosen[0]["text"] if chosen else ""
    return fields


def item_fields(qt: QuestionType, item: Mapping[str, Any], vocab: Vocabulary) -> dict[str, str]:
    """Placeholder values of one region's item phrasing."""
    fields = {"region": str(int(item["region_id"])), "class": vocab.class_noun(item["class"])}
    for spec in qt.item_values:
        fields[spec.name] = format_value(spec, item[spec.name])
    for name, words in qt.phrases.items():
        if name in item:
            fields[name] = words[item[name]]
    return fields


def render_texts(
    qt: QuestionType,
    fields: Mapping[str, str],
    q_idx: int,
    a_key: str,
    a_idx: int,
    e_idx: int | None,
) -> tuple[str, str, str | None]:
    """(question, answer, explanation) from the chosen phrasings."""
    question = render(qt.questions[q_idx].text, fields)
    answer = render(qt.answers[a_key][a_idx].text, fields)
    explanation = None if e_idx is None else render(qt.explanations[e_idx].text, fields)
    return question, answer, explanation


def structured_answer(
    qt: QuestionType,
    c: QAContent,
    yes_no: str | None = None,
    choice: str | None = None,
) -> dict[str, Any]:
    """``answer_values`` of a record (see the module docstring)."""
    out: dict[str, Any] = {}
    for spec in qt.values:
        if spec.vocab is not None:
            out[spec.name] = list(c.lists[spec.name])
        elif spec.unit in INTEGER_UNITS:
            out[spec.name] = int(round(c.values[spec.name]))
        else:
            out[spec.name] = round(float(c.values[spec.name]), VALUE_DECIMALS) + 0.0
    if c.outcome is not None:
        kind = qt.quantity.outcome_kind
        if kind == "role":
            out["region_id"] = int(c.region_ids[ROLES.index(c.outcome)])
        elif kind == "order":
            out["region_ids"] = _order_ids(c.outcome, c.region_ids)
        else:
            out["outcome"] = c.outcome
    for name, key in c.facets.items():
        out[name] = key
    if qt.items:
        facet_names = [n for n in qt.quantity.item_facets]
        out["items"] = [
            {
                "region_id": int(item["region_id"]),
                **{n: item[n] for n in facet_names},
                **{
                    spec.name: round(float(item[spec.name]), VALUE_DECIMALS) + 0.0
                    for spec in qt.item_values
                },
            }
            for item in c.items
        ]
    if yes_no is not None:
        out["yes_no"] = yes_no
    if choice is not None:
        out["choice"] = choice
    return out
