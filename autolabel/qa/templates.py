"""Load, validate and render the QA templates (``qa_templates/*.yaml``).

Each category file (``object_centric.yaml``, ...) is a mapping::

    category: object_centric          # one of CATEGORIES
    types:
      obj_distance:                   # the question type id (unique over all files)
        kind: quantitative            # qualitative | quantitative
        subjects: pair_same_camera    # how candidates are formed (autolabel.qa.candidates)
        quantity: pair_distance       # what is asked (autolabel.qa.quantities)
        params: {}                    # the quantity's parameters (margins, bins, ...)
        values:                       # numbers stored in answer_values and usable in the text
          distance_m: {unit: m, decimals: 2}
        questions:                    # several phrasings; a phrasing is a string or a mapping
          - "How far apart are Region [{A}] and Region [{B}]?"
        answers:                      # a list, or a mapping outcome -> list (qualitative)
          - "Region [{A}] and Region [{B}] are {distance_m} meters apart."

``vocabulary.yaml`` holds the shared words (camera names, class nouns, list joining). Files are
read with PyYAML's safe loader and validated on load; every error names the file and the key
(``object_centric.yaml: types.obj_distance.answers[0]: unknown placeholder {C} ...``). The full
format, with every placeholder, is in ``qa_templates/SCHEMA.md``.
"""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from autolabel.classes import DETECTION_CLASSES
from autolabel.qa.candidates import GROUP_SUBJECTS, SUBJECTS, is_variable, subject_region_count
from autolabel.qa.quantities import QUANTITIES, ROLES, Quantity, resolve_params
from autolabel.sensors import CAMERA_CHANNELS

CATEGORIES = (
    "object_centric", "ego_centric", "spatiotemporal", "multiple_choice", "multi_view",
    "appearance", "action", "counting", "temporal", "caption",
)  # fmt: skip
KINDS = ("qualitative", "quantitative")
#: 4D-Bench-style subtasks (per-subtask accuracy); a type's default is its category's.
SUBTASKS = ("spatial", "spatiotemporal", "appearance", "action", "counting", "temporal", "caption")
CATEGORY_SUBTASK = {
    "object_centric": "spatial", "ego_centric": "spatial", "multiple_choice": "spatial",
    "multi_view": "spatial", "spatiotemporal": "spatiotemporal", "appearance": "appearance",
    "action": "action", "counting": "counting", "temporal": "temporal", "caption": "caption",
}  # fmt: skip
#: Units a numeric value may declare; a value name ending in a unit suffix must use that unit.
UNITS = ("m", "deg", "m/s", "m/s2", "m2", "m3", "s", "clock", "ratio", "count")
_SUFFIX_UNITS = (
    ("_mps2", "m/s2"),
    ("_mps", "m/s"),
    ("_m2", "m2"),
    ("_m3", "m3"),
    ("_deg", "deg"),
    ("_s", "s"),
    ("_m", "m"),
)
#: Units whose values are whole numbers (stored as int in answer_values).
INTEGER_UNITS = ("clock", "count")
VOCABULARY_FILE = "vocabulary.yaml"
_TYPE_KEYS = {
    "description", "kind", "subjects", "quantity", "params", "values", "questions", "answers",
    "explanations", "choices", "group", "horizons", "cameras", "outcome_text", "phrases",
    "items", "item_values", "views", "subtask",
}  # fmt: skip
_REGION_RE = re.compile(r"Region \[(\d+)\]")


class TemplateError(ValueError):
    """A template file is malformed; the message names the file and the key."""


@dataclass(frozen=True)
class Phrasing:
    """One wording. ``asks``: the outcome a yes/no question asks about (the answer is ``yes``
    when the outcome equals it); ``when``: ``now`` / ``future`` restricts a spatiotemporal
    phrasing to horizon 0 / > 0."""

    text: str
    asks: str | None = None
    when: str | None = None

    def applies(self, horizon_s: float) -> bool:
        return self.when is None or (self.when == "now") == (horizon_s == 0)


@dataclass(frozen=True)
class ValueSpec:
    """A value a type stores and may print: numeric (``unit``, ``decimals``, ``wrap``) or a list
    of keys printed through the vocabulary (``vocab``)."""

    name: str
    unit: str | None = None
    decimals: int = 0
    wrap: bool = False
    vocab: str | None = None


@dataclass(frozen=True)
class ChoiceSpec:
    """Multiple-choice options: from a params list (``param``), the regions (``roles``) or their
    orders (``role_orders``); ``count`` options; ``distractors``: ``linear`` / ``circular`` pick
    the options nearest the answer in the list (hard distractors), ``order`` the orders fewest
    swaps away, ``all`` every region."""

    options: str
    count: int
    param: str | None = None
    distractors: str = "linear"


@dataclass(frozen=True)
class QuestionType:
    """One validated question type."""

    id: str
    category: str
    kind: str
    subjects: str
    quantity: Quantity
    params: Mapping[str, Any]
    values: tuple[ValueSpec, ...]
    questions: tuple[Phrasing, ...]
    answers: Mapping[str, tuple[Phrasing, ...]]
    explanations: tuple[Phrasing, ...]
    choices: ChoiceSpec | None
    group: str | None
    horizons: tuple[float, ...]
    cameras: str
    n_regions: int
    source: str
    description: str = ""
    outcome_text: Mapping[str, str] = field(default_factory=dict)
    phrases: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    items: tuple[Phrasing, ...] = ()
    item_values: tuple[ValueSpec, ...] = ()
    views: str = "window"
    subtask: str = "spatial"
    variable_regions: bool = False

    @property
    def yes_no(self) -> bool:
        return any(p.asks is not None for p in self.questions)

    def option_space(self) -> list[tuple[str, str | None]]:
        """(key, text) of every possible option of a multiple-choice type (text None: regions)."""
        assert self.choices is not None
        if self.choices.options == "param":
            return [(o["key"], o["text"]) for o in self.params[self.choices.param]]
        keys = self.quantity.outcome_keys(self.params, self.n_regions) or ()
        return [(k, None) for k in keys]


@dataclass(frozen=True)
class Vocabulary:
    """Shared words: camera names, class nouns, list joining, horizon wording, choice format."""

    cameras: Mapping[str, str]
    classes: Mapping[str, str]
    join_two: str
    join_separator: str
    join_last: str
    horizon_one: str
    horizon_many: str
    choice: str
    choice_separator: str
    order_separator: str

    def camera(self, channel: str) -> str:
        return self.cameras.get(channel, channel)

    def join(self, words: Sequence[str]) -> str:
        words = list(words)
        if len(words) <= 1:
            return "".join(words)
        if len(words) == 2:
            return self.join_two.format(a=words[0], b=words[1])
        return self.join_separator.join(words[:-1]) + self.join_last + words[-1]

    def horizon(self, seconds: float) -> str:
        n = f"{seconds:g}"
        return (self.horizon_one if seconds == 1 else self.horizon_many).format(n=n)

    def class_noun(self, name: str) -> str:
        return self.classes.get(name, name.replace("_", " "))


@dataclass(frozen=True)
class TemplateSet:
    """All question types (in file order) and the vocabulary; ``sha256`` over the files read."""

    types: Mapping[str, QuestionType]
    vocabulary: Vocabulary
    directory: str
    sha256: str

    def __getitem__(self, type_id: str) -> QuestionType:
        try:
            return self.types[type_id]
        except KeyError:
            raise KeyError(f"unknown question type {type_id!r}") from None


def _err(where: str, msg: str) -> TemplateError:
    return TemplateError(f"{where}: {msg}")


def placeholders(text: str, where: str) -> list[str]:
    """Field names of a ``str.format`` template; no format specs or conversions allowed."""
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as e:
        raise _err(where, f"bad placeholder syntax ({e}) in {text!r}") from None
    names = []
    for _, name, spec, conv in parsed:
        if name is None:
            continue
        if spec or conv:
            raise _err(where, f"placeholder {{{name}}} may not have a format spec or conversion")
        if not name.isidentifier():
            raise _err(where, f"bad placeholder {{{name}}}")
        names.append(name)
    return names


def format_value(spec: ValueSpec, value: float) -> str:
    """A number as printed in QA text: rounded to ``decimals``; no ``-0``; wrapped angles give
    180, never -180."""
    v = round(float(value), spec.decimals) + 0.0
    if spec.wrap and v <= -180.0:
        v += 360.0
    return f"{v:.{spec.decimals}f}"


def render(text: str, fields: Mapping[str, str]) -> str:
    """Fill a validated template's placeholders."""
    return text.format_map(fields)


def region_ids_in(text: str) -> list[int]:
    """The ``Region [X]`` ids a text mentions, in order of appearance."""
    return [int(m) for m in _REGION_RE.findall(text)]


#: libyaml's safe loader when PyYAML was built with it (same documents, about 10x faster).
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read_yaml(path: Path) -> Any:
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=_SAFE_LOADER)
    except yaml.YAMLError as e:
        raise _err(str(path), f"not valid YAML: {e}") from None
    except OSError as e:
        raise _err(str(path), f"cannot read: {e}") from None


def _phrasing(item: Any, where: str) -> Phrasing:
    if isinstance(item, str):
        return Phrasing(item)
    if isinstance(item, Mapping):
        unknown = set(item) - {"text", "asks", "when"}
        if unknown:
            raise _err(f"{where}.{sorted(unknown)[0]}", "unknown key (allowed: text, asks, when)")
        if not isinstance(item.get("text"), str):
            raise _err(f"{where}.text", "expected a string")
        asks, when = item.get("asks"), item.get("when")
        if asks is not None and not isinstance(asks, str):
            raise _err(f"{where}.asks", f"expected an outcome name, got {asks!r}")
        if when is not None and when not in ("now", "future"):
            raise _err(f"{where}.when", f"expected 'now' or 'future', got {when!r}")
        return Phrasing(item["text"], asks, when)
    raise _err(where, f"expected a string or a mapping with text, got {type(item).__name__}")


def _phrasings(items: Any, where: str) -> tuple[Phrasing, ...]:
    if not isinstance(items, list) or not items:
        raise _err(where, "expected a non-empty list of phrasings")
    out = tuple(_phrasing(it, f"{where}[{i}]") for i, it in enumerate(items))
    if len(set(p.text for p in out)) != len(out):
        raise _err(where, "duplicate phrasing")
    return out


def _value_spec(name: str, spec: Any, q: Quantity, where: str, item: bool = False) -> ValueSpec:
    if not isinstance(spec, Mapping):
        raise _err(where, "expected a mapping (unit, decimals[, wrap]) or (vocab)")
    if name in q.lists and not item:
        if set(spec) != {"vocab"} or spec["vocab"] not in ("cameras",):
            raise _err(where, "a list value takes exactly {vocab: cameras}")
        return ValueSpec(name, vocab=spec["vocab"])
    names = q.item_values if item else q.values
    if name not in names:
        provided = ", ".join(names if item else q.values + q.lists) or "none"
        what = "per-region values" if item else "values"
        raise _err(where, f"quantity {q.name} does not give {name!r} (its {what}: {provided})")
    unknown = set(spec) - {"unit", "decimals", "wrap"}
    if unknown:
        raise _err(f"{where}.{sorted(unknown)[0]}", "unknown key (allowed: unit, decimals, wrap)")
    unit = spec.get("unit")
    if unit not in UNITS:
        raise _err(f"{where}.unit", f"expected one of {UNITS}, got {unit!r}")
    for suffix, u in _SUFFIX_UNITS:
        if name.endswith(suffix):
            if unit != u:
                raise _err(f"{where}.unit", f"{name} is in {u} (by its name), not {unit}")
            break
    decimals = spec.get("decimals", 0)
    if not isinstance(decimals, int) or isinstance(decimals, bool) or not 0 <= decimals <= 4:
        raise _err(f"{where}.decimals", f"expected an integer 0..4, got {decimals!r}")
    if unit in INTEGER_UNITS and decimals != 0:
        raise _err(f"{where}.decimals", f"{unit} values are whole numbers (decimals: 0)")
    wrap = spec.get("wrap", False)
    if not isinstance(wrap, bool) or (wrap and unit != "deg"):
        raise _err(f"{where}.wrap", "wrap is true/false and only for deg values")
    return ValueSpec(name, unit, decimals, wrap)


def _choices(spec: Any, params: Mapping[str, Any], q: Quantity, where: str) -> ChoiceSpec:
    if not isinstance(spec, Mapping):
        raise _err(where, "expected a mapping (options, count, ...)")
    unknown = set(spec) - {"options", "count", "param", "distractors"}
    if unknown:
        raise _err(f"{where}.{sorted(unknown)[0]}", "unknown key")
    options = spec.get("options")
    count = spec.get("count")
    if not isinstance(count, int) or isinstance(count, bool) or count < 2:
        raise _err(f"{where}.count", f"expected an integer >= 2, got {count!r}")
    if options == "param":
        param = spec.get("param")
        if param not in params or not isinstance(params[param], list):
            raise _err(f"{where}.param", f"must name a list parameter of {q.name}, got {param!r}")
        if count > len(params[param]):
            raise _err(f"{where}.count", f"{count} options but {param} has {len(params[param])}")
        distractors = spec.get("distractors", "linear")
        if distractors not in ("linear", "circular"):
            raise _err(f"{where}.distractors", "expected linear or circular")
        return ChoiceSpec("param", count, param, distractors)
    if options == "roles":
        if q.outcome_kind != "role":
            raise _err(f"{where}.options", f"quantity {q.name} does not answer with a region")
        return ChoiceSpec("roles", count, None, "all")
    if options == "role_orders":
        if q.outcome_kind != "order":
            raise _err(f"{where}.options", f"quantity {q.name} does not answer with an order")
        return ChoiceSpec("role_orders", count, None, "order")
    raise _err(f"{where}.options", f"expected param, roles or role_orders, got {options!r}")


def _check_text(p: Phrasing, allowed: set[str], roles: Sequence[str], where: str) -> None:
    names = placeholders(p.text, where)
    for name in names:
        if name not in allowed:
            raise _err(
                where, f"unknown placeholder {{{name}}} (allowed: {', '.join(sorted(allowed))})"
            )
    for role in roles:
        token = "{" + role + "}"
        if p.text.count(token) != p.text.count("Region [" + token + "]"):
            raise _err(where, f"write the region as 'Region [{token}]', as the questions say it")
    if _REGION_RE.search(p.text):
        raise _err(where, "a literal 'Region [n]' in a template; use Region [{A}]")


def _question_type(type_id: str, raw: Any, category: str, path: Path) -> QuestionType:
    where = f"{path.name}: types.{type_id}"
    if not isinstance(raw, Mapping):
        raise _err(where, "expected a mapping")
    unknown = set(raw) - _TYPE_KEYS
    if unknown:
        raise _err(
            f"{where}.{sorted(unknown)[0]}",
            f"unknown key (allowed: {', '.join(sorted(_TYPE_KEYS))})",
        )
    for key in ("kind", "subjects", "quantity", "questions", "answers"):
        if key not in raw:
            raise _err(f"{where}.{key}", "required key missing")
    kind = raw["kind"]
    if kind not in KINDS:
        raise _err(f"{where}.kind", f"expected one of {KINDS}, got {kind!r}")
    subjects = raw["subjects"]
    if subjects not in SUBJECTS:
        raise _err(f"{where}.subjects", f"expected one of {sorted(SUBJECTS)}, got {subjects!r}")
    qname = raw["quantity"]
    if qname not in QUANTITIES:
        raise _err(
            f"{where}.quantity",
            f"unknown quantity {qname!r} (known: {', '.join(sorted(QUANTITIES))})",
        )
    q = QUANTITIES[qname]
    if raw.get("params") is not None and not isinstance(raw.get("params"), Mapping):
        raise _err(f"{where}.params", "expected a mapping")
    try:
        params = resolve_params(q, raw.get("params"), f"{where}.params")
    except ValueError as e:
        raise TemplateError(str(e)) from None
    try:
        n_regions = subject_region_count(subjects, params)
    except ValueError as e:
        raise _err(f"{where}.subjects", str(e)) from None
    if n_regions > len(ROLES):
        raise _err(f"{where}.subjects", f"at most {len(ROLES)} regions")

    horizons: tuple[float, ...] = (0.0,)
    if subjects == "region_horizon":
        hz = raw.get("horizons")
        if (
            not isinstance(hz, list)
            or not hz
            or not all(
                isinstance(h, (int, float)) and not isinstance(h, bool) and 0 <= h <= 10 for h in hz
            )
        ):
            raise _err(f"{where}.horizons", "expected a non-empty list of seconds in [0, 10]")
        horizons = tuple(float(h) for h in hz)
        if len(set(horizons)) != len(horizons):
            raise _err(f"{where}.horizons", "duplicate horizon")
    elif "horizons" in raw:
        raise _err(f"{where}.horizons", "only for subjects: region_horizon")
    group = raw.get("group")
    if group is not None and (not isinstance(group, str) or subjects != "region_horizon"):
        raise _err(f"{where}.group", "a group name (string), only for subjects: region_horizon")
    cameras = raw.get("cameras", "candidate")
    if cameras not in ("candidate", "all", "visible"):
        raise _err(f"{where}.cameras", f"expected candidate, all or visible, got {cameras!r}")
    if cameras == "visible" and subjects not in ("region", "region_horizon"):
        raise _err(f"{where}.cameras", "visible is for questions about one region")
    views = raw.get("views", "window")
    if views not in ("window", "keyframe"):
        raise _err(f"{where}.views", f"expected window or keyframe, got {views!r}")
    subtask = raw.get("subtask", CATEGORY_SUBTASK[category])
    if subtask not in SUBTASKS:
        raise _err(f"{where}.subtask", f"expected one of {SUBTASKS}, got {subtask!r}")
    variable = is_variable(subjects)
    if subjects in GROUP_SUBJECTS and q.options_param != "groups":
        raise _err(f"{where}.subjects", f"quantity {qname} does not count class groups")
    if q.options_param is not None and subjects not in GROUP_SUBJECTS:
        raise _err(f"{where}.subjects", f"quantity {qname} needs class_group subjects")
    if (q.item_values or q.item_facets) and not variable:
        raise _err(f"{where}.subjects", f"quantity {qname} describes a set of regions")

    raw_values = raw.get("values", {}) or {}
    if not isinstance(raw_values, Mapping):
        raise _err(f"{where}.values", "expected a mapping name -> spec")
    values = tuple(
        _value_spec(name, spec, q, f"{where}.values.{name}") for name, spec in raw_values.items()
    )
    raw_item_values = raw.get("item_values", {}) or {}
    if not isinstance(raw_item_values, Mapping):
        raise _err(f"{where}.item_values", "expected a mapping name -> spec")
    item_values = tuple(
        _value_spec(name, spec, q, f"{where}.item_values.{name}", item=True)
        for name, spec in raw_item_values.items()
    )
    phrases = _phrase_tables(raw.get("phrases"), q, params, f"{where}.phrases")
    choices = None
    if "choices" in raw:
        choices = _choices(raw["choices"], params, q, f"{where}.choices")
        if q.outcomes is None:
            raise _err(f"{where}.choices", f"quantity {qname} has no discrete answer to choose")

    outcome_keys = q.outcome_keys(params, n_regions)
    outcome_text = raw.get("outcome_text", {}) or {}
    if outcome_text:
        if (
            not isinstance(outcome_text, Mapping)
            or outcome_keys is None
            or set(outcome_text) != set(outcome_keys)
            or not all(isinstance(v, str) and v for v in outcome_text.values())
        ):
            raise _err(
                f"{where}.outcome_text",
                f"expected a mapping of every outcome {outcome_keys} to its words",
            )

    roles = () if variable else ROLES[:n_regions]
    base = set(roles) | {f"class_{r}" for r in roles} | {v.name for v in values}
    if subjects in ("pair_cross_camera", "region_camera_pair"):
        base |= {"camera_a", "camera_b"}
    if subjects == "camera_regions":
        base |= {"camera_a"}
    if subjects in GROUP_SUBJECTS:
        base |= {"group"}
    if subjects == "region_horizon":
        base |= {"t", "horizon"}
    a_extra = {"outcome"} if outcome_text else set()
    a_extra |= set(q.facets) | ({"items"} if variable else set())
    q_allowed = base | ({"choices"} if choices else set())
    a_allowed = base | a_extra | ({"choice", "choice_text"} if choices else set())

    questions = _phrasings(raw["questions"], f"{where}.questions")
    for i, p in enumerate(questions):
        w = f"{where}.questions[{i}]"
        _check_text(p, q_allowed, roles, w)
        if choices and "{choices}" not in p.text:
            raise _err(w, "a multiple-choice question must show {choices}")
        if p.asks is not None:
            if choices or outcome_keys is None or p.asks not in outcome_keys:
                raise _err(
                    f"{w}.asks", f"expected one of the outcomes {outcome_keys}, got {p.asks!r}"
                )
        if p.when is not None and subjects != "region_horizon":
            raise _err(f"{w}.when", "only for subjects: region_horizon")

    raw_answers = raw["answers"]
    answers: dict[str, tuple[Phrasing, ...]] = {}
    if choices or outcome_keys is None:
        if not isinstance(raw_answers, list):
            raise _err(f"{where}.answers", "expected a list of phrasings")
        answers[""] = _phrasings(raw_answers, f"{where}.answers")
    else:
        if not isinstance(raw_answers, Mapping):
            raise _err(
                f"{where}.answers",
                f"expected a mapping outcome -> phrasings ({', '.join(outcome_keys)})",
            )
        for key in raw_answers:
            if isinstance(key, bool):
                raise _err(
                    f"{where}.answers.{key}",
                    'YAML reads yes/no/true/false as booleans; quote the key ("yes":)',
                )
        needed: set[str] = set()
        if any(p.asks is None for p in questions):
            needed |= set(outcome_keys)
        if any(p.asks is not None for p in questions):
            needed |= {"yes", "no"}
        for key in sorted(needed - set(raw_answers)):
            raise _err(f"{where}.answers.{key}", "required answer phrasings missing")
        for key in sorted(set(raw_answers) - needed):
            raise _err(
                f"{where}.answers.{key}",
                f"no question leads to this answer (expected: {', '.join(sorted(needed))})",
            )
        for key, items in raw_answers.items():
            answers[key] = _phrasings(items, f"{where}.answers.{key}")
    for key, items in answers.items():
        for i, p in enumerate(items):
            w = f"{where}.answers" + (f".{key}" if key else "") + f"[{i}]"
            _check_text(p, a_allowed, roles, w)
            if p.asks is not None:
                raise _err(f"{w}.asks", "asks belongs on questions")
            if p.when is not None and subjects != "region_horizon":
                raise _err(f"{w}.when", "only for subjects: region_horizon")
    items: tuple[Phrasing, ...] = ()
    if q.item_facets or q.item_values:
        if "items" not in raw:
            raise _err(f"{where}.items", "required: how each region of the set is described")
        items = _phrasings(raw["items"], f"{where}.items")
        item_allowed = {"region", "class"} | set(q.item_facets) | {v.name for v in item_values}
        for i, p in enumerate(items):
            w = f"{where}.items[{i}]"
            _check_text(p, item_allowed, (), w)
            if p.text.count("{region}") != 1 or "Region [{region}]" not in p.text:
                raise _err(w, "name the region once, as 'Region [{region}]'")
            if p.asks is not None or p.when is not None:
                raise _err(w, "items take no asks / when")
    elif "items" in raw:
        raise _err(f"{where}.items", f"quantity {qname} does not describe a set of regions")
    explanations: tuple[Phrasing, ...] = ()
    if "explanations" in raw:
        explanations = _phrasings(raw["explanations"], f"{where}.explanations")
        for i, p in enumerate(explanations):
            _check_text(p, a_allowed, roles, f"{where}.explanations[{i}]")
    elif choices:
        raise _err(f"{where}.explanations", "multiple-choice types need explanation phrasings")

    if subjects == "region_horizon":
        for h in horizons:
            label = "now" if h == 0 else "future"
            if not any(p.applies(h) for p in questions):
                raise _err(f"{where}.questions", f"no phrasing for {label} (horizon {h:g} s)")
            for key, items in answers.items():
                if not any(p.applies(h) for p in items):
                    raise _err(
                        f"{where}.answers" + (f".{key}" if key else ""), f"no phrasing for {label}"
                    )
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise _err(f"{where}.description", "expected a string")
    return QuestionType(
        id=type_id,
        category=category,
        kind=kind,
        subjects=subjects,
        quantity=q,
        params=params,
        values=values,
        questions=questions,
        answers=answers,
        explanations=explanations,
        choices=choices,
        group=group,
        horizons=horizons,
        cameras=cameras,
        n_regions=n_regions,
        source=path.name,
        description=description,
        outcome_text=dict(outcome_text),
        phrases=phrases,
        items=items,
        item_values=item_values,
        views=views,
        subtask=subtask,
        variable_regions=variable,
    )


def _phrase_tables(
    raw: Any, q: Quantity, params: Mapping[str, Any], where: str
) -> dict[str, dict[str, str]]:
    """``phrases``: facet -> key -> words, for every facet and key the quantity can give."""
    facets = tuple(dict.fromkeys(q.facets + q.item_facets))
    if not facets:
        if raw is not None:
            raise _err(where, f"quantity {q.name} gives no descriptive facets")
        return {}
    if not isinstance(raw, Mapping):
        raise _err(where, f"required: words for the facets {list(facets)}")
    keys = dict(q.facet_keys(params)) if q.facet_keys else {}
    out: dict[str, dict[str, str]] = {}
    for facet in facets:
        table = raw.get(facet)
        if not isinstance(table, Mapping):
            raise _err(f"{where}.{facet}", "expected a mapping key -> words")
        need = set(keys.get(facet, ()))
        missing = sorted(need - set(table))
        if missing:
            raise _err(f"{where}.{facet}.{missing[0]}", "words missing")
        extra = sorted(set(table) - need)
        if extra:
            raise _err(f"{where}.{facet}.{extra[0]}", f"not a key of {facet}")
        for key, words in table.items():
            if not isinstance(words, str):
                raise _err(f"{where}.{facet}.{key}", "expected a string")
            placeholders(words, f"{where}.{facet}.{key}")
            if "{" in words:
                raise _err(f"{where}.{facet}.{key}", "facet words take no placeholders")
        out[facet] = {str(k): v for k, v in table.items()}
    extra = sorted(set(raw) - set(facets))
    if extra:
        raise _err(f"{where}.{extra[0]}", f"quantity {q.name} has no facet {extra[0]}")
    return out


def load_template_file(path: str | Path) -> list[QuestionType]:
    """The question types of one category file, validated."""
    path = Path(path)
    data = _read_yaml(path)
    if not isinstance(data, Mapping):
        raise _err(str(path), "expected a mapping with keys category, types")
    unknown = set(data) - {"category", "types", "description"}
    if unknown:
        raise _err(
            f"{path}: {sorted(unknown)[0]}", "unknown key (allowed: category, types, description)"
        )
    category = data.get("category")
    if category not in CATEGORIES:
        raise _err(f"{path}: category", f"expected one of {CATEGORIES}, got {category!r}")
    types = data.get("types")
    if not isinstance(types, Mapping) or not types:
        raise _err(f"{path}: types", "expected a non-empty mapping type id -> type")
    out = []
    for type_id, raw in types.items():
        if not isinstance(type_id, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", type_id):
            raise _err(f"{path}: types.{type_id}", "type ids are lower_snake_case")
        out.append(_question_type(type_id, raw, category, path))
    return out


def _str_map(data: Mapping, key: str, required: Sequence[str], where: str) -> dict[str, str]:
    m = data.get(key)
    if not isinstance(m, Mapping):
        raise _err(f"{where}: {key}", "expected a mapping")
    for k in required:
        if k not in m:
            raise _err(f"{where}: {key}.{k}", "missing")
    for k, v in m.items():
        if not isinstance(v, str) or not v:
            raise _err(f"{where}: {key}.{k}", f"expected a non-empty string, got {v!r}")
    return {str(k): v for k, v in m.items()}


def load_vocabulary(path: str | Path) -> Vocabulary:
    """The shared words file, validated (every nuScenes camera and class must be named)."""
    path = Path(path)
    data = _read_yaml(path)
    if not isinstance(data, Mapping):
        raise _err(str(path), "expected a mapping")
    allowed = {"cameras", "classes", "join", "horizon", "choices"}
    unknown = set(data) - allowed
    if unknown:
        raise _err(
            f"{path}: {sorted(unknown)[0]}", f"unknown key (allowed: {', '.join(sorted(allowed))})"
        )
    cams = _str_map(data, "cameras", CAMERA_CHANNELS, str(path))
    classes = _str_map(data, "classes", DETECTION_CLASSES, str(path))
    join = _str_map(data, "join", ("two", "separator", "last"), str(path))
    horizon = _str_map(data, "horizon", ("one", "many"), str(path))
    choices = _str_map(data, "choices", ("format", "separator", "order_separator"), str(path))
    for key, text, names in (
        ("join.two", join["two"], {"a", "b"}),
        ("horizon.one", horizon["one"], {"n"}),
        ("horizon.many", horizon["many"], {"n"}),
        ("choices.format", choices["format"], {"letter", "text"}),
    ):
        got = set(placeholders(text, f"{path}: {key}"))
        if got != names:
            raise _err(
                f"{path}: {key}", f"expected placeholders {sorted(names)}, got {sorted(got)}"
            )
    return Vocabulary(
        cameras=cams,
        classes=classes,
        join_two=join["two"],
        join_separator=join["separator"],
        join_last=join["last"],
        horizon_one=horizon["one"],
        horizon_many=horizon["many"],
        choice=choices["format"],
        choice_separator=choices["separator"],
        order_separator=choices["order_separator"],
    )


def load_templates(directory: str | Path | None = None) -> TemplateSet:
    """Every category file and the vocabulary of ``directory`` (the packaged templates by default).

    Raises:
        TemplateError: naming the file and key of the first problem found.
    """
    if directory is None:
        from qa_templates import TEMPLATE_DIR

        directory = TEMPLATE_DIR
    directory = Path(directory)
    if not directory.is_dir():
        raise TemplateError(f"{directory}: template folder not found")
    vocab_path = directory / VOCABULARY_FILE
    if not vocab_path.is_file():
        raise TemplateError(f"{vocab_path}: vocabulary file missing")
    vocabulary = load_vocabulary(vocab_path)
    files = sorted(p for p in directory.glob("*.yaml") if p.name != VOCABULARY_FILE)
    if not files:
        raise TemplateError(f"{directory}: no template files (*.yaml)")
    digest = hashlib.sha256()
    types: dict[str, QuestionType] = {}
    groups: dict[str, QuestionType] = {}
    for path in [vocab_path, *files]:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    loaded = [(path, load_template_file(path)) for path in files]
    # Category order (object-centric first), then file name: generation and reports follow it.
    loaded.sort(key=lambda pl: (CATEGORIES.index(pl[1][0].category), pl[0].name))
    for path, file_types in loaded:
        for qt in file_types:
            if qt.id in types:
                raise _err(
                    f"{path.name}: types.{qt.id}",
                    f"duplicate type id (also in {types[qt.id].source})",
                )
            if qt.group is not None:
                first = groups.setdefault(qt.group, qt)
                if first.horizons != qt.horizons:
                    raise _err(
                        f"{path.name}: types.{qt.id}.horizons",
                        f"group {qt.group} needs the same horizons as {first.id}",
                    )
            types[qt.id] = qt
    return TemplateSet(
        types=types, vocabulary=vocabulary, directory=str(directory), sha256=digest.hexdigest()
    )


@dataclass
class RenderedQA:
    """The text of one QA and the variants it used."""

    question: str
    answer: str
    explanation: str | None
    variant: dict[str, int] = field(default_factory=dict)
