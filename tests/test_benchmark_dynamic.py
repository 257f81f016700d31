"""Scoring of the dynamic-object questions: SPAR's MRA, counts, labels, orders, per-subtask
accuracy (4D-Bench)."""

from __future__ import annotations

import numpy as np
import pytest

from autolabel.benchmark.answer_parser import AnswerSpec, parse_answer
from autolabel.benchmark.scoring import MRA_THRESHOLDS, mean_relative_accuracy, score_entries


def test_mra_thresholds_are_spars():
    assert MRA_THRESHOLDS == (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)


def test_mra_on_hand_made_numbers():
    gt = np.array([10.0, 10.0, 10.0, 10.0, 5.0, 0.0, 0.0, 4.0, 20.0])
    pred = np.array([10.0, 12.0, 15.0, 9.6, 5.5, 0.0, 1.0, np.nan, 10.0])
    # Relative errors 0, 0.2, 0.5, 0.04, 0.1: an answer scores the share of thresholds theta with
    # error < 1 - theta: 0.2 passes theta 0.50 .. 0.75 (6 of 10); 0.5 passes none; 0.04 all; 0.1
    # passes 0.50 .. 0.85 (8). A true 0 needs an exact 0; a missing answer scores 0; 0.5 none.
    expected = [1.0, 0.6, 0.0, 1.0, 0.8, 1.0, 0.0, 0.0, 0.0]
    assert mean_relative_accuracy(pred, gt) == pytest.approx(expected)


@pytest.mark.parametrize(
    "text,count",
    [
        ("There are three cars.", 3),
        ("No pedestrians are visible.", 0),
        ("I count 11 in total.", 11),
        ("Region [3] and 2 others: 3.", 2),
        ("The number of vehicles (cars, trucks and buses) visible is 7.", 7),
        ("", None),
    ],
)
def test_count_answers(text, count):
    got = parse_answer(text, AnswerSpec(kind="count"))
    assert got.get("count") == count


MOVING = AnswerSpec(
    kind="label",
    label_words=(
        ("moving", ("moving", "in motion")),
        ("stopped", ("stopped", "standing still", "not moving")),
    ),
)


@pytest.mark.parametrize(
    "text,label",
    [
        ("Region [2] is moving, at about 4.1 m/s.", "moving"),
        ("It is standing still.", "stopped"),
        ("It is not moving.", "stopped"),
        ("Region [5] isn't stopped, it is in motion.", "moving"),
        ("I cannot tell.", None),
    ],
)
def test_label_answers(text, label):
    assert parse_answer(text, MOVING).get("outcome") == label


def test_order_answers():
    spec = AnswerSpec(kind="order", region_ids=(1, 4, 7))
    got = parse_answer("Region [7], then Region [1], then Region [4] (Region [7] first).", spec)
    assert got == {"region_ids": [7, 1, 4]}


def _entry(i, subtask, kind, truth, spec=None):
    return {
        "id": f"q{i}",
        "group_id": f"q{i}",
        "set": "dynamic",
        "category": subtask,
        "type": f"t_{subtask}",
        "kind": "quantitative" if kind == "count" else "qualitative",
        "subtask": subtask,
        "class": "car",
        "spec": (spec or AnswerSpec(kind=kind)).as_dict(),
        "truth": truth,
    }


def test_per_subtask_accuracy_and_mra():
    entries = [
        _entry(0, "counting", "count", {"count": 4}),
        _entry(1, "counting", "count", {"count": 10}),
        _entry(2, "action", "label", {"outcome": "moving"}, MOVING),
        _entry(3, "action", "label", {"outcome": "stopped"}, MOVING),
        _entry(4, "action", "label", {"outcome": "stopped"}, MOVING),
        _entry(
            5, "temporal", "order", {"region_ids": [2, 0]}, AnswerSpec("order", region_ids=(0, 2))
        ),
    ]
    answers = {
        "q0": "4.",
        "q1": "There are 12 of them.",
        "q2": "It is moving.",
        "q3": "Moving.",
        "q4": "It is stopped.",
        "q5": "Region [2], then Region [0].",
    }
    r = score_entries(entries, answers)
    assert r["dynamic"]["n"] == 6
    assert r["dynamic"]["accuracy"] == pytest.approx(4 / 6)
    assert r["by_subtask"]["counting"] == {"n": 2, "score": 0.5}
    assert r["by_subtask"]["action"]["score"] == pytest.approx(2 / 3)
    assert r["by_subtask"]["temporal"]["score"] == 1.0
    assert r["subtask_overall"] == pytest.approx((0.5 + 2 / 3 + 1.0) / 3)
    # MRA of the counts: 4 exact (1.0); 12 for 10 is 20 % off (0.6).
    assert r["MRA"]["count"] == {"n": 2, "MRA": pytest.approx(0.8)}
