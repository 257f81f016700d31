"""Seeded free-text answers to STRIDE-QA-Bench questions, varied the ways model answers vary.

Used by ``bench/strideqa_equivalence.py`` (and the equivalence test) to feed the same predictions
to the published scorer and to ``autolabel bench score``. Each answer states the question's true
values perturbed (inside, on and beyond the tolerance edges), in one of several units (m, ft, cm,
km, inches; m/s, km/h, mph, kph, mps), signs (+, -, Unicode minus, a side word instead of a sign),
clock words instead of degrees, and phrasings (value order, no space before the unit, distractor
numbers such as "Region [3]" or "in 2 seconds", ranges, thousands separators, empty or
number-free answers).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

_LENGTH_UNITS = (  # (metres per unit, spellings)
    (1.0, ("meters", "m", "metres", "meter", "M")),
    (0.3048, ("feet", "ft", "foot")),
    (0.01, ("cm", "centimeters")),
    (1000.0, ("km", "kilometers")),
    (0.0254, ("inches", "in")),
)
_SPEED_UNITS = (  # (m/s per unit, spellings)
    (1.0, ("m/s", "meters per second", "mps", "m s-1", "M/S")),
    (1 / 3.6, ("km/h", "kph", "kmh", "kilometers per hour")),
    (1609.34 / 3600, ("mph", "miles per hour")),
)
_DEG_WORDS = ("degrees", "degree", "deg", "°", " °", "-degree", "Degrees", "degs")
_MINUS = ("-", "\u2212", "minus ")
_FACTORS = (1.0, 1.0, 1.05, 0.9, 1.2, 0.8, 1.25, 0.75, 1.26, 0.74, 1.3, 0.5, 2.0, 1.1)
_ANGLE_OFFSETS = (0.0, 0.0, 3.0, -7.0, 9.5, 10.0, -10.0, 10.5, 15.0, 30.0, 180.0, 360.0)
_SPEED_OFFSETS = (0.0, 0.05, 0.1, 0.11, -0.1, 0.3)


def _fmt(x: float, rng: np.random.Generator) -> str:
    decimals = int(rng.choice([0, 1, 2, 2, 3, 4]))
    s = f"{x:.{decimals}f}"
    if rng.random() < 0.03 and abs(x) >= 1000:
        s = f"{x:,.0f}"  # thousands separator
    return s


def _length_text(d_m: float, rng: np.random.Generator) -> str:
    k = int(rng.choice(len(_LENGTH_UNITS), p=[0.6, 0.15, 0.08, 0.1, 0.07]))
    per, spellings = _LENGTH_UNITS[k]
    unit = str(rng.choice(spellings))
    value = d_m / per
    sep = "" if rng.random() < 0.2 else " "
    if rng.random() < 0.04:
        lo = value * 0.8
        return f"{_fmt(lo, rng)}-{_fmt(value * 1.2, rng)} {unit}"
    return f"{_fmt(value, rng)}{sep}{unit}"


def _signed(x: float, rng: np.random.Generator) -> str:
    if x < 0:
        return str(rng.choice(_MINUS)) + _fmt(-x, rng)
    return ("+" if rng.random() < 0.1 else "") + _fmt(x, rng)


def _angle_text(b_deg: float, rng: np.random.Generator) -> str:
    r = rng.random()
    if r < 0.08:  # clock words instead of degrees (12 ahead, 3 right)
        hour = int(round((-b_deg % 360) / 30.0)) % 12 or 12
        return f"at {hour} o'clock"
    if r < 0.16:  # a side word instead of the sign
        side = "to the left" if b_deg >= 0 else "to the right"
        return f"{_fmt(abs(b_deg), rng)} degrees {side}"
    if r < 0.2:  # 0..360 instead of (-180, 180]
        return f"{_fmt(b_deg % 360, rng)} degrees"
    word = str(rng.choice(_DEG_WORDS))
    return f"{_signed(b_deg, rng)}{'' if word.startswith(('°', '-')) else ' '}{word}".replace(
        "  ", " "
    )


def _speed_text(v_mps: float, rng: np.random.Generator) -> str:
    k = int(rng.choice(len(_SPEED_UNITS), p=[0.6, 0.25, 0.15]))
    per, spellings = _SPEED_UNITS[k]
    unit = str(rng.choice(spellings))
    sep = "" if rng.random() < 0.15 else " "
    return f"{_fmt(v_mps / per, rng)}{sep}{unit}"


_POSITION_PHRASES = (
    "Region [{r}] is {d} away at {b}.",
    "In {t} seconds they are {d} at {b}.",
    "It is {b}, {d} from the ego vehicle.",
    "After {t} s, the distance is about {d}, with the direction of {b}.",
    "{d}, {b}",
    "The object will be around {d} apart, pointing toward {b}.",
    "Region [{r}] will be {d} in front at {b} in {t} seconds.",
    "Distance: {d}; bearing: {b}.",
)
_SPEED_PHRASES = (
    "Region [{r}] is moving at {v}.",
    "Ego speed after {t} seconds is {v}.",
    "{v}",
    "The speed will be about {v} in {t} s.",
    "It travels {v}, roughly {d} ahead.",
    "About {v}.",
)
_NOISE = ("", "I cannot tell.", "Region [2].", "unknown", "It is stationary.", "approximately")


def varied_answer(record: Mapping[str, Any], rng: np.random.Generator) -> str:
    """One varied answer to a STRIDE-QA-Bench question record (uses ``gt_value``)."""
    gt = record["gt_value"]
    r = int(record.get("region_id", 0))
    t = int(rng.integers(1, 4))
    if rng.random() < 0.04:
        return str(rng.choice(_NOISE))
    if "distance" in gt or "direction" in gt:
        d = float(gt.get("distance", 10.0)) * float(rng.choice(_FACTORS))
        b = float(gt.get("direction", 0.0)) + float(rng.choice(_ANGLE_OFFSETS)) * float(
            rng.choice([1, -1])
        )
        b = (b + 180.0) % 360.0 - 180.0
        phrase = str(rng.choice(_POSITION_PHRASES))
        return phrase.format(r=r, t=t, d=_length_text(d, rng), b=_angle_text(b, rng))
    v = float(gt["velocity"])
    v = max(0.0, v * float(rng.choice(_FACTORS)) + float(rng.choice(_SPEED_OFFSETS)))
    phrase = str(rng.choice(_SPEED_PHRASES))
    d = _length_text(float(rng.uniform(2, 60)), rng)
    return phrase.format(r=r, t=t, v=_speed_text(v, rng), d=d)


def varied_predictions(records: Sequence[Mapping[str, Any]], seed: int) -> list[dict[str, Any]]:
    """The records with a varied ``pred`` each (their prediction format), from ``seed``."""
    rng = np.random.default_rng(seed)
    return [{**rec, "pred": varied_answer(rec, rng)} for rec in records]
