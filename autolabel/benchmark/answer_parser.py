"""Deterministic parser of free-text model answers into structured values.

A model's answer to a benchmark question is free text ("In 1 second they are 23.54 meters at -24
degrees."). :func:`parse_answer` reads the value(s) the question asks for, given an
:class:`AnswerSpec` (what kind of answer is expected, the options of a multiple-choice question,
the regions a comparison is between, ...), and returns them under the same names and units as
``answer_values`` in ``qa.jsonl`` (``distance_m``, ``bearing_deg``, ``speed_mps``, ``clock``,
``yes_no``, ``choice``, ``outcome``, ``region_id``, ``cameras``). A value it cannot find is left
out, so that question is scored as wrong; an empty answer gives nothing.

Rules (all deterministic, no model):

- Numbers are read with their unit. Lengths (m, cm, mm, km, ft, yd, mi, inches) become metres; speeds
  (m/s, km/h, mph, ft/s) become m/s; angles (degrees, deg, the degree sign, radians) become degrees
  wrapped to (-180, 180] (so 336 degrees is -24); times (s, seconds, minutes), clock positions
  ("3 o'clock") and percentages are recognised so that they are never taken for a distance.
  "m/s" is a speed, never metres; "5-10 meters" and "5 to 10 meters" are the midpoint.
- Region ids ("Region [3]", "region 3", "Region #3", "[3]") are masked before numbers are read,
  so "Region [3]" is never 3 metres, 3 o'clock or option C.
- An unsigned angle takes its sign from a side word next to it ("24 degrees to the right" is -24:
  bearings are positive to the left); "minus 24" and Unicode minus signs are negative.
- Where the expected quantity has no unit in the answer, unit-less numbers fill it in order
  ("23.5, -24" for a position).
- Multiple-choice letters: "(B)", "Answer: B", "option B", "B)", "B." or "B" alone, or else the
  one option whose text the answer repeats. An article "A" starting a sentence is not a letter.
- Yes/no: the first yes/no word; if there is none, the answer's own statement of the asked
  relation ("Region [5] is in front of Region [6]" to "Is Region [5] behind Region [6]?").
- Left/right, front/behind, bigger/smaller: the first relation word, inverted when negated
  ("not to the left") or when the sentence's subject is the other party ("Region [6] is to the
  left of Region [5]" answers "where is Region [5] relative to Region [6]" with *right*).
- Which of two regions: the region named first, or the other one when a word such as "smaller",
  "shorter" or "farther" follows it.
- Counts: the first number without a unit, or a number word ("three"), or "no" / "none" (0).
- Labels (an action, a colour, ...): the outcome whose words (``AnswerSpec.label_words``) appear
  first; a negated mention ("not moving") is skipped.
- Orders of regions: the region ids in the order the answer names them (each once).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Answer kinds :func:`parse_answer` understands, and the value names each one produces.
ANSWER_KINDS: dict[str, tuple[str, ...]] = {
    "distance": ("distance_m",),
    "bearing": ("bearing_deg",),
    "heading": ("heading_deg",),
    "position": ("distance_m", "bearing_deg"),
    "speed": ("speed_mps",),
    "ego_speed": ("ego_speed_mps",),
    "clock": ("clock",),
    "yes_no": ("yes_no",),
    "choice": ("choice",),
    "side": ("outcome",),
    "front_behind": ("outcome",),
    "size": ("outcome",),
    "region": ("region_id",),
    "cameras": ("cameras",),
    "count": ("count",),
    "label": ("outcome",),
    "order": ("region_ids",),
}

#: Camera channels in nuScenes order, as (front|back, left|right|None).
CAMERA_PARTS: dict[tuple[str, str | None], str] = {
    ("front", None): "CAM_FRONT",
    ("front", "right"): "CAM_FRONT_RIGHT",
    ("back", "right"): "CAM_BACK_RIGHT",
    ("back", None): "CAM_BACK",
    ("back", "left"): "CAM_BACK_LEFT",
    ("front", "left"): "CAM_FRONT_LEFT",
}


@dataclass(frozen=True)
class AnswerSpec:
    """What a question expects, enough to read a free-text answer to it.

    Attributes:
        kind: one of ``ANSWER_KINDS``.
        letters: option letters of a multiple-choice question, in order ("A".."D").
        choice_texts: the option texts, parallel to ``letters``.
        choice_region_ids: per option, the region ids it names in order (empty when it names none).
        region_ids: the regions the question is about, in role order (A, B, ...).
        subject: whose relation the outcome describes: a region id, or ``"ego"``.
        reference: the other party of a relation (a region id or ``"ego"``), or None.
        asks: for a yes/no question, the outcome (or region id) the question asks about; lets an
            answer that states the relation instead of saying yes or no be read.
        asks_kind: the answer kind of ``asks`` (``side``, ``front_behind``, ``size``, ``region``).
        label_words: for a ``label`` answer, (outcome, words that say it) per outcome.
    """

    kind: str
    letters: tuple[str, ...] = ()
    choice_texts: tuple[str, ...] = ()
    choice_region_ids: tuple[tuple[int, ...], ...] = ()
    region_ids: tuple[int, ...] = ()
    subject: int | str | None = None
    reference: int | str | None = None
    asks: str | int | None = None
    asks_kind: str | None = None
    label_words: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in ANSWER_KINDS:
            raise ValueError(
                f"AnswerSpec.kind: unknown {self.kind!r} (one of {list(ANSWER_KINDS)})"
            )
        if self.kind == "choice" and not self.letters:
            raise ValueError("AnswerSpec.letters: a choice question needs its option letters")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AnswerSpec:
        """From the JSON form written by :meth:`as_dict` (lists become tuples)."""
        return cls(
            kind=data["kind"],
            letters=tuple(data.get("letters", ())),
            choice_texts=tuple(data.get("choice_texts", ())),
            choice_region_ids=tuple(
                tuple(int(x) for x in r) for r in data.get("choice_region_ids", ())
            ),
            region_ids=tuple(int(x) for x in data.get("region_ids", ())),
            subject=data.get("subject"),
            reference=data.get("reference"),
            asks=data.get("asks"),
            asks_kind=data.get("asks_kind"),
            label_words=tuple(
                (str(k), tuple(str(w) for w in words)) for k, words in data.get("label_words", ())
            ),
        )

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        for name in ("letters", "choice_texts", "region_ids"):
            if getattr(self, name):
                out[name] = list(getattr(self, name))
        if self.choice_region_ids:
            out["choice_region_ids"] = [list(r) for r in self.choice_region_ids]
        for name in ("subject", "reference", "asks", "asks_kind"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.label_words:
            out["label_words"] = [[k, list(words)] for k, words in self.label_words]
        return out


@dataclass(frozen=True)
class NumberMention:
    """A number in an answer with its unit, converted to SI-like units.

    Attributes:
        value: metres (length), m/s (speed), degrees (angle, not wrapped), seconds (time),
            hours (clock), percent, or the bare number (``kind`` ``"none"``).
        kind: ``length``, ``speed``, ``angle``, ``time``, ``clock``, ``percent`` or ``none``.
        start, end: character span in the normalised text.
        signed: the number carried an explicit sign.
    """

    value: float
    kind: str
    start: int
    end: int
    signed: bool = False


@dataclass
class _Text:
    """An answer normalised once (same length in every form): ``raw`` keeps the case, ``lower``
    is lower-case, ``masked`` is lower-case with region ids blanked (``raw`` has them blanked
    too), ``regions`` are the (start, end, id) spans of the region ids."""

    raw: str
    lower: str
    masked: str
    regions: list[tuple[int, int, int]] = field(default_factory=list)  # (start, end, region id)


# ---------------------------------------------------------------------------------- lexing

_TRANSLATE = str.maketrans(
    {
        "\u2212": "-",  # minus sign
        "\u2013": "-",  # en dash
        "\u2014": "-",  # em dash
        "\u2010": "-",
        "\u2011": "-",
        "\u2019": "'",
        "\u2018": "'",
        "\u02bc": "'",
        "\u00a0": " ",
        "\u202f": " ",
        "\u2009": " ",
        "\u00ba": "\u00b0",  # masculine ordinal often typed for degrees
        "\u02da": "\u00b0",
    }
)

_REGION_RE = re.compile(
    r"\bregions?\s*(?:\[\s*(\d+)\s*\]|#\s*(\d+)|\(\s*(\d+)\s*\)|(?:id\s*)?(\d+)\b)"
    r"|\[\s*(\d+)\s*\]",
    re.IGNORECASE,
)

_SMALL_NUMBERS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip
_WORD_CLOCK_RE = re.compile(
    r"\b(" + "|".join(_SMALL_NUMBERS) + r")(\s*o'?\s*clock\b)", re.IGNORECASE
)

# Units, tried in this order at the position after a number; the first that matches wins.
# (kind, factor to SI, pattern). Speed before length so that "m/s" is never metres.
_UNITS: tuple[tuple[str, float, str], ...] = (
    ("clock", 1.0, r"o'?\s*clock\b|oclock\b"),
    (
        "speed",
        1.0,
        r"m\s*/\s*s(?:ec(?:ond)?)?\b|mps\b|m\s*s\^?-1\b|(?:meters?|metres?)\s*(?:per|/)\s*s(?:ec(?:ond)?)?\b",
    ),
    (
        "speed",
        1.0 / 3.6,
        r"km\s*/\s*h(?:r|our)?\b|kmh\b|kph\b|kmph\b|(?:kilometers?|kilometres?)\s*(?:per|an|/)\s*hour\b",
    ),
    ("speed", 0.44704, r"mph\b|mi\s*/\s*h\b|miles?\s*(?:per|an|/)\s*hour\b"),
    ("speed", 0.3048, r"ft\s*/\s*s\b|fps\b|(?:feet|foot)\s*(?:per|/)\s*second\b"),
    ("length", 1000.0, r"km\b|kilometers?\b|kilometres?\b|kms\b"),
    ("length", 0.01, r"cm\b|centimeters?\b|centimetres?\b"),
    ("length", 0.001, r"mm\b|millimeters?\b|millimetres?\b"),
    ("length", 0.3048, r"ft\b|feet\b|foot\b"),
    ("length", 0.9144, r"yards?\b|yds?\b"),
    # Inches only spelled out: a bare "in" after a number is usually the preposition ("12 m at
    # 20 degrees, 3 in front").
    ("length", 0.0254, r"inch(?:es)?\b"),
    ("length", 1609.344, r"miles?\b|mi\b"),
    ("length", 1.0, r"m\b|meters?\b|metres?\b|mtrs?\b"),
    ("angle", 1.0, r"\u00b0|degrees?\b|degs?\b"),
    ("angle", 180.0 / math.pi, r"rad(?:ians?|s)?\b"),
    ("time", 1.0, r"s\b|secs?\b|seconds?\b"),
    ("time", 60.0, r"min(?:ute)?s?\b"),
    ("percent", 1.0, r"%|percent\b"),
)
_UNIT_RES = tuple(
    (k, f, re.compile(r"[ \t]*-?[ \t]*(?:" + p + ")", re.IGNORECASE)) for k, f, p in _UNITS
)

_NUMBER_RE = re.compile(
    r"(?<![\w.])(?P<sign>-|\+|minus\s+|negative\s+|plus\s+)?"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?![\d])",
    re.IGNORECASE,
)
_RANGE_JOIN_RE = re.compile(r"\s*(?:-|to)\s*", re.IGNORECASE)
_SIDE_AFTER_RE = re.compile(
    r"[\s,]*(?:(?:to|towards?|on|at)\s+(?:the\s+|its\s+|your\s+)?)?(left|right|counter-?clockwise|anti-?clockwise|clockwise)\b",
    re.IGNORECASE,
)
_SIDE_BEFORE_RE = re.compile(
    r"\b(left|right|counter-?clockwise|anti-?clockwise|clockwise)\s*(?:by\s+|of\s+)?$",
    re.IGNORECASE,
)
_STATIONARY_RE = re.compile(
    r"\b(?:stationary|not\s+moving|stopped|standing\s+still|at\s+rest|parked|motionless|static)\b",
    re.IGNORECASE,
)


def wrap_deg(angle_deg: float) -> float:
    """An angle in degrees wrapped to (-180, 180]; one already in range is returned as is (no
    float noise: 169.278 stays 169.278, not 169.27800000000002)."""
    if -180.0 < angle_deg <= 180.0:
        return angle_deg
    wrapped = math.fmod(angle_deg + 180.0, 360.0)
    if wrapped < 0:
        wrapped += 360.0
    wrapped -= 180.0
    return 180.0 if wrapped == -180.0 else wrapped


def _prepare(text: str) -> _Text:
    norm = text.translate(_TRANSLATE)
    if "clock" in norm.lower():
        norm = _WORD_CLOCK_RE.sub(
            lambda m: f"{_SMALL_NUMBERS[m.group(1).lower()]}{m.group(2)}", norm
        )
    lower = norm.lower()
    if len(lower) != len(norm):
        # A few characters lower-case to two; keep those as they are so positions agree.
        lower = "".join(c.lower() if len(c.lower()) == 1 else c for c in norm)
    spans = [
        (m.start(), m.end(), int(next(g for g in m.groups() if g is not None)))
        for m in _REGION_RE.finditer(lower)
    ]
    if not spans:
        return _Text(norm, lower, lower, [])
    raw_parts, masked_parts, pos = [], [], 0
    for start, end, _ in spans:
        raw_parts += [norm[pos:start], " " * (end - start)]
        masked_parts += [lower[pos:start], " " * (end - start)]
        pos = end
    raw_parts.append(norm[pos:])
    masked_parts.append(lower[pos:])
    return _Text("".join(raw_parts), lower, "".join(masked_parts), spans)


def _number_mentions(t: _Text) -> list[NumberMention]:
    """Every number of the masked text with its unit, ranges folded into their midpoint."""
    s = t.masked
    raw: list[tuple[float, bool, int, int, int]] = []  # value, signed, start, num_end, token_end
    for m in _NUMBER_RE.finditer(s):
        num = float(m.group("num").replace(",", ""))
        sign = (m.group("sign") or "").strip().lower()
        start = m.start()
        # A hyphen right after a digit is a range dash ("5-10"), not a minus sign.
        if sign == "-" and start > 0 and s[start - 1].isdigit():
            sign, start = "", m.start("num")
        negative = sign in ("-", "minus", "negative")
        raw.append((-num if negative else num, bool(sign), start, m.end(), m.end()))
    out: list[NumberMention] = []
    units: list[tuple[str, float, int] | None] = []
    for _, _, _, num_end, _ in raw:
        unit = None
        for kind, factor, unit_re in _UNIT_RES:
            um = unit_re.match(s, num_end)
            if um:
                unit = (kind, factor, um.end())
                break
        units.append(unit)
    i = 0
    while i < len(raw):
        value, signed, start, num_end, _ = raw[i]
        unit = units[i]
        # "5-10 m", "5 to 10 m": a unit-less number joined to the next number that has a unit.
        if unit is None and i + 1 < len(raw) and units[i + 1] is not None:
            between = s[num_end : raw[i + 1][2]]
            if _RANGE_JOIN_RE.fullmatch(between) and not raw[i + 1][1]:
                kind, factor, end = units[i + 1]
                mid = 0.5 * (value + raw[i + 1][0]) * factor
                out.append(NumberMention(mid, kind, start, end, signed))
                i += 2
                continue
        if unit is None:
            out.append(NumberMention(value, "none", start, num_end, signed))
        else:
            kind, factor, end = unit
            out.append(NumberMention(value * factor, kind, start, end, signed))
        i += 1
    return out


def number_mentions(text: str) -> list[NumberMention]:
    """Every number in ``text`` with its unit (region ids excluded), in order of appearance."""
    return _number_mentions(_prepare(text or ""))


def _side_sign(t: _Text, mention: NumberMention) -> int:
    """+1 (left / counter-clockwise), -1 (right / clockwise) or 0 from words next to an angle."""
    after = _SIDE_AFTER_RE.match(t.masked, mention.end)
    word = after.group(1) if after else None
    if word is None:
        before = _SIDE_BEFORE_RE.search(t.masked, max(0, mention.start - 30), mention.start)
        word = before.group(1) if before else None
    if word is None:
        return 0
    word = word.lower().replace("-", "")
    return 1 if word in ("left", "counterclockwise", "anticlockwise") else -1


def _first(mentions: Sequence[NumberMention], kind: str) -> NumberMention | None:
    return next((m for m in mentions if m.kind == kind), None)


def _fill(mentions: Sequence[NumberMention], kinds: Sequence[str]) -> list[NumberMention | None]:
    """Per wanted kind, the first mention of that unit kind; missing ones from unit-less numbers."""
    chosen = [_first(mentions, k) for k in kinds]
    bare = iter(m for m in mentions if m.kind == "none")
    for i, c in enumerate(chosen):
        if c is None:
            chosen[i] = next(bare, None)
    return chosen


def _angle_value(t: _Text, m: NumberMention) -> float:
    value = m.value
    if not m.signed:
        sign = _side_sign(t, m)
        if sign < 0:
            value = -value
    return wrap_deg(value)


# ---------------------------------------------------------------------------------- words

_YES_NO_RE = re.compile(
    r"\b(yes|yeah|yep|correct|true|affirmative|no|nope|not\s+really|incorrect|false)\b",
    re.IGNORECASE,
)
_YES_WORDS = {"yes", "yeah", "yep", "correct", "true", "affirmative"}

# Relation words per answer kind: pattern -> outcome. Longer phrases first.
_RELATIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "side": (
        (r"left", "left"),
        (r"right", "right"),
    ),
    "front_behind": (
        (r"in\s+front", "front"),
        (r"ahead", "front"),
        (r"front", "front"),
        (r"behind", "behind"),
        (r"in\s+the\s+back", "behind"),
        (r"in\s+back", "behind"),
        (r"rear", "behind"),
    ),
    "size": (
        (r"bigger|larger|greater|huger|taller|heavier", "bigger"),
        (r"smaller|tinier|littler|lesser", "smaller"),
    ),
}
_OPPOSITE = {
    "left": "right", "right": "left", "front": "behind", "behind": "front",
    "bigger": "smaller", "smaller": "bigger",
}  # fmt: skip
_RELATION_RES = {
    kind: re.compile(
        "|".join(rf"\b(?P<r{i}>{p})\b" for i, (p, _) in enumerate(pairs)), re.IGNORECASE
    )
    for kind, pairs in _RELATIONS.items()
}
_NEGATION_RE = re.compile(r"(?:\bnot|n't|\bnever|\bneither|\bnor)\b[\w\s']{0,12}$", re.IGNORECASE)
_EGO_RE = re.compile(
    r"\b(?:ego(?:[\s-]+(?:vehicle|car))?|our\s+(?:vehicle|car)|we|us|me|i)\b", re.IGNORECASE
)
# Comparatives that point away from the region named before them ("Region [2] is smaller").
_LESSER_RE = re.compile(
    r"\b(?:smaller|tinier|lesser|less|shorter|lower|narrower|thinner|farther|further|more\s+distant|"
    r"not\s+(?:as|the)\b|behind\s+in\s+size)\b",
    re.IGNORECASE,
)


def _sentence_start(s: str, pos: int) -> int:
    cut = max(
        s.rfind(".", 0, pos), s.rfind(";", 0, pos), s.rfind("!", 0, pos), s.rfind("?", 0, pos)
    )
    # A decimal point is not a sentence end.
    while cut > 0 and cut + 1 < len(s) and s[cut - 1].isdigit() and s[cut + 1].isdigit():
        cut = max(s.rfind(".", 0, cut), s.rfind(";", 0, cut))
    return cut + 1


def _subject_before(t: _Text, pos: int) -> int | str | None:
    """The party named last before ``pos`` in the same sentence: a region id or ``"ego"``."""
    start = _sentence_start(t.masked, pos)
    best: tuple[int, int | str] | None = None
    for rs, _re, rid in t.regions:
        if start <= rs < pos and (best is None or rs > best[0]):
            best = (rs, rid)
    for m in _EGO_RE.finditer(t.masked, start, pos):
        if best is None or m.start() > best[0]:
            best = (m.start(), "ego")
    return None if best is None else best[1]


def _parse_relation(t: _Text, spec: AnswerSpec, kind: str) -> str | None:
    s = t.masked
    for m in _RELATION_RES[kind].finditer(s):
        idx = next(i for i, g in enumerate(m.groups()) if g is not None)
        outcome = _RELATIONS[kind][idx][1]
        if _NEGATION_RE.search(s, max(0, m.start() - 24), m.start()):
            outcome = _OPPOSITE[outcome]
        said_of = _subject_before(t, m.start())
        if (
            said_of is not None
            and spec.reference is not None
            and said_of == _party(spec.reference)
            and said_of != _party(spec.subject)
        ):
            outcome = _OPPOSITE[outcome]
        return outcome
    return None


def _party(x: int | str | None) -> int | str | None:
    if x is None or x == "ego":
        return x
    return int(x)


def _parse_region(t: _Text, spec: AnswerSpec) -> int | None:
    if not t.regions:
        return None
    candidates = set(spec.region_ids)
    named = [(s, e, rid) for s, e, rid in t.regions if not candidates or rid in candidates]
    if not named:
        return t.regions[0][2]
    distinct = list(dict.fromkeys(rid for _, _, rid in named))
    first_start, first_end, first = named[0]
    if len(distinct) == 1:
        # "Region [2] is smaller" names one region but points at the other.
        rest = t.masked[first_end : _sentence_end(t.masked, first_end)]
        if _LESSER_RE.search(rest) and len(candidates) == 2:
            return next(r for r in spec.region_ids if r != first)
        return first
    second_start = next(s for s, _, rid in named if rid != first)
    between = t.masked[first_end:second_start]
    if _LESSER_RE.search(between):
        return next(rid for _, _, rid in named if rid != first)
    return first


def _sentence_end(s: str, pos: int) -> int:
    m = re.compile(r"[.;!?](?!\d)").search(s, pos)
    return m.start() if m else len(s)


def _parse_yes_no(t: _Text, spec: AnswerSpec) -> str | None:
    m = _YES_NO_RE.search(t.masked)
    if m:
        return "yes" if m.group(1).lower() in _YES_WORDS else "no"
    if spec.asks is None or spec.asks_kind is None:
        return None
    # No yes/no word: read the stated relation and compare it with the asked one.
    sub = AnswerSpec(
        kind=spec.asks_kind,
        region_ids=spec.region_ids,
        subject=spec.subject,
        reference=spec.reference,
    )
    got = _parse_kind(t, sub)
    value = got.get(ANSWER_KINDS[spec.asks_kind][0])
    if value is None:
        return None
    asked = int(spec.asks) if spec.asks_kind == "region" else spec.asks
    return "yes" if value == asked else "no"


_LETTER_PATTERNS = (
    # (B) or [B], either case
    re.compile(r"[\(\[]\s*([A-Ha-h])\s*[\)\]]"),
    # Answer: B / the answer is B / option B / choice: b)
    re.compile(
        r"\b(?i:answer|option|choice|letter)\s*(?i:is|would\s+be|:|=|-)?\s*:?\s*"
        r"(?:([A-H])|([a-h])(?=\s*[\).:]|\s*$))(?![\w'])"
    ),
    # B) or B. or B: at the start of the answer or of a line
    re.compile(r"(?:^|\n)\s*([A-H])\s*[\).:\]](?!\w)"),
    # B alone
    re.compile(r"^\s*([A-Ha-h])\s*[.!]?\s*$"),
)
# "A car is nearest": the article, not option A.
_ARTICLE_AFTER_RE = re.compile(r"\s+[a-z]")


def _parse_choice(t: _Text, spec: AnswerSpec) -> str | None:
    letters = [x.upper() for x in spec.letters]
    # Region ids are blanked in the text the patterns see, so "Region [3]" is never a letter.
    text = t.raw
    for n, pattern in enumerate(_LETTER_PATTERNS):
        for m in pattern.finditer(text):
            group = next(i for i in range(1, (m.lastindex or 1) + 1) if m.group(i))
            letter = m.group(group).upper()
            if letter not in letters:
                continue
            if n in (1, 2) and letter == "A" and _ARTICLE_AFTER_RE.match(text, m.end(group)):
                continue
            return letter
    # No letter: the one option whose region ids or text the answer repeats.
    if spec.choice_region_ids and t.regions:
        said = [rid for _, _, rid in t.regions]
        hits = [
            letters[i]
            for i, ids in enumerate(spec.choice_region_ids)
            if ids and (list(ids) == said or (len(ids) == 1 and said and said[0] == ids[0]))
        ]
        if len(hits) == 1:
            return hits[0]
    if spec.choice_texts:
        lower = t.lower
        hits = [letters[i] for i, text in enumerate(spec.choice_texts) if text.lower() in lower]
        if len(hits) == 1:
            return hits[0]
    return None


_CAMERA_RE = re.compile(
    r"(?<![a-z])(?:cam[\s_]*)?(front|back|rear)(?:[\s_-]*(left|right))?(?![a-z])", re.IGNORECASE
)
_ALL_CAMERAS_RE = re.compile(r"\ball\s+(?:six\s+|6\s+|the\s+)?(?:cameras|views|images)\b", re.I)
_IN_FRONT_OF_RE = re.compile(r"\bin\s+front\s+of\b", re.IGNORECASE)


def _parse_cameras(t: _Text) -> list[str] | None:
    if _ALL_CAMERAS_RE.search(t.masked):
        return list(CAMERA_PARTS.values())
    s = _IN_FRONT_OF_RE.sub(lambda m: " " * len(m.group(0)), t.masked)
    found = []
    for m in _CAMERA_RE.finditer(s):
        base = "front" if m.group(1).lower() == "front" else "back"
        side = m.group(2).lower() if m.group(2) else None
        channel = CAMERA_PARTS[(base, side)]
        if channel not in found:
            found.append(channel)
    if not found:
        return None
    order = list(CAMERA_PARTS.values())
    return sorted(found, key=order.index)


_COUNT_WORD_RE = re.compile(
    r"\b(" + "|".join(_SMALL_NUMBERS) + r"|no|none|nothing)\b", re.IGNORECASE
)


def _parse_count(t: _Text) -> int | None:
    bare = next((m for m in _number_mentions(t) if m.kind == "none"), None)
    word = _COUNT_WORD_RE.search(t.masked)
    if bare is not None and (word is None or bare.start < word.start()):
        return int(round(bare.value)) if bare.value >= 0 else None
    if word is not None:
        return _SMALL_NUMBERS.get(word.group(1).lower(), 0)
    return None


def _parse_label(t: _Text, spec: AnswerSpec) -> str | None:
    """The outcome whose words appear first (not negated), longest words first at a position."""
    found: list[tuple[int, int, str]] = []
    for outcome, words in spec.label_words:
        for w in words:
            for m in re.finditer(r"\b" + re.escape(w.lower()), t.masked):
                if not _NEGATION_RE.search(t.masked, max(0, m.start() - 24), m.start()):
                    found.append((m.start(), -len(w), outcome))
    return min(found)[2] if found else None


def _parse_kind(t: _Text, spec: AnswerSpec) -> dict[str, Any]:
    kind = spec.kind
    out: dict[str, Any] = {}
    if kind in ("distance", "position", "bearing", "heading", "speed", "ego_speed", "clock"):
        mentions = _number_mentions(t)
        if kind == "distance":
            (m,) = _fill(mentions, ["length"])
            if m is not None and m.value >= 0:
                out["distance_m"] = m.value
        elif kind == "position":
            d, b = _fill(mentions, ["length", "angle"])
            if d is not None and d.value >= 0:
                out["distance_m"] = d.value
            if b is not None and b is not d:
                out["bearing_deg"] = _angle_value(t, b)
        elif kind in ("bearing", "heading"):
            (m,) = _fill(mentions, ["angle"])
            if m is not None:
                out[ANSWER_KINDS[kind][0]] = _angle_value(t, m)
        elif kind in ("speed", "ego_speed"):
            (m,) = _fill(mentions, ["speed"])
            name = ANSWER_KINDS[kind][0]
            if m is not None and m.value >= 0:
                out[name] = m.value
            elif m is None and _STATIONARY_RE.search(t.masked):
                out[name] = 0.0
        else:  # clock
            m = _first(mentions, "clock")
            if m is not None and float(m.value).is_integer() and 1 <= m.value <= 12:
                out["clock"] = int(m.value)
    elif kind == "yes_no":
        value = _parse_yes_no(t, spec)
        if value is not None:
            out["yes_no"] = value
    elif kind == "choice":
        value = _parse_choice(t, spec)
        if value is not None:
            out["choice"] = value
    elif kind in ("side", "front_behind", "size"):
        value = _parse_relation(t, spec, kind)
        if value is not None:
            out["outcome"] = value
    elif kind == "region":
        value = _parse_region(t, spec)
        if value is not None:
            out["region_id"] = value
    elif kind == "cameras":
        value = _parse_cameras(t)
        if value is not None:
            out["cameras"] = value
    elif kind == "count":
        value = _parse_count(t)
        if value is not None:
            out["count"] = value
    elif kind == "label":
        value = _parse_label(t, spec)
        if value is not None:
            out["outcome"] = value
    elif kind == "order":
        ids = list(dict.fromkeys(rid for _, _, rid in t.regions))
        if ids:
            out["region_ids"] = ids
    return out


def parse_answer(text: str | None, spec: AnswerSpec) -> dict[str, Any]:
    """The structured values a free-text answer gives, under ``answer_values`` names.

    Args:
        text: the model's answer; None or blank gives an empty dict.
        spec: what the question expects.

    Returns:
        name -> value for each value of ``ANSWER_KINDS[spec.kind]`` found: floats in metres, m/s
        and degrees (wrapped to (-180, 180]); ``clock`` an int 1..12; ``yes_no`` ``"yes"``/``"no"``;
        ``choice`` a letter; ``outcome`` a relation key; ``region_id`` an int; ``cameras`` channels
        in nuScenes order. A value that cannot be read is absent.
    """
    if text is None or not str(text).strip():
        return {}
    return _parse_kind(_prepare(str(text)), spec)
