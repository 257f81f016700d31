"""Benchmark metrics on hand-made answer keys: tolerances, LSR@t, MLSR, TLC, SR, accuracies."""

from __future__ import annotations

import json

import numpy as np
import pytest

from autolabel.benchmark.scoring import (
    angle_success,
    distance_success,
    read_answers,
    score_entries,
    speed_success,
    values_agree,
)


def test_distance_tolerance_is_25_percent_strict_in_the_paper_profile():
    gt = np.full(5, 10.0)
    pred = np.array([7.6, 12.4, 12.5, 7.5, np.nan])
    assert distance_success(pred, gt, "paper").tolist() == [True, True, False, False, False]


def test_distance_tolerance_is_inclusive_in_the_published_profile():
    # The published scorer: 10 x 0.75 = 7.5 <= pred <= 12.5 = 10 x 1.25, edges in.
    gt = np.full(6, 10.0)
    pred = np.array([7.6, 12.4, 12.5, 7.5, 12.5000001, np.nan])
    assert distance_success(pred, gt).tolist() == [True, True, True, True, False, False]


def test_angle_tolerance_wraps():
    gt = np.array([175.0, -175.0, 0.0, 0.0, 90.0, 0.0])
    pred = np.array([-178.0, 170.0, 9.9, -10.0, np.nan, 10.0001])
    # 175 -> -178 is 7 degrees across the wrap; -175 -> 170 is 15 degrees; 10 is the edge.
    assert angle_success(pred, gt, "paper").tolist() == [True, False, True, False, False, False]
    assert angle_success(pred, gt).tolist() == [True, False, True, True, False, False]


def test_speed_tolerance_is_hybrid_in_the_paper_profile():
    gt = np.array([0.8, 0.8, 0.0, 10.0, 10.0, 1.0, 1.0])
    pred = np.array([1.29, 1.31, 0.5, 12.0, 12.1, 1.2, 0.5])
    # Below 1 m/s: 0.5 m/s absolute; from 1 m/s: 20 % (1.0 -> 0.2 m/s).
    assert speed_success(pred, gt, "paper").tolist() == [
        True,
        False,
        True,
        True,
        False,
        True,
        False,
    ]


def test_speed_tolerance_of_the_published_scorer():
    # Below 0.5 m/s: 0.2 x 0.5 = 0.1 m/s absolute, inclusive; from 0.5 m/s: 0.8 gt .. 1.2 gt.
    gt = np.array([0.0, 0.0, 0.4, 0.4, 0.5, 0.5, 0.8, 10.0, 10.0])
    pred = np.array([0.1, 0.11, 0.3, 0.52, 0.4, 0.39, 1.29, 12.0, 8.0])
    # 0.4 - 0.3 is 0.10000000000000003 in floats: over 0.1, as in the published scorer.
    assert speed_success(pred, gt).tolist() == [
        True, False, False, False, True, False, False, True, True
    ]  # fmt: skip


def test_unknown_tolerance_profile_is_named():
    with pytest.raises(ValueError, match="unknown tolerance profile 'strict'"):
        speed_success(np.ones(1), np.ones(1), "strict")


def _group(gid, sit, cls, positions, answers, ego=None, agent=None):
    """Entries of one scene group: st_position (+ optional speeds) at t = 0..3 and the answers."""
    entries, out = [], {}
    for t, ((d, b), text) in enumerate(zip(positions, answers, strict=True)):
        qid = f"{gid}-p{t}"
        entries.append(
            dict(
                id=qid, group_id=gid, set="spatiotemporal", category="spatiotemporal",
                type="st_position", kind="quantitative", situation=sit, horizon_s=float(t),
                spec={"kind": "position", "region_ids": [0]},
                truth={"distance_m": d, "bearing_deg": b},
                **{"class": cls},
            )
        )  # fmt: skip
        out[qid] = text
    for name, kind, truth_name, values in (
        ("ego", "ego_speed", "ego_speed_mps", ego),
        ("agent", "speed", "speed_mps", agent),
    ):
        for t, (truth, text) in enumerate(values or []):
            qid = f"{gid}-{name}{t}"
            entries.append(
                dict(
                    id=qid, group_id=gid, set="spatiotemporal", category="spatiotemporal",
                    type=f"st_{name}_speed", kind="quantitative", situation=sit,
                    horizon_s=float(t), spec={"kind": kind}, truth={truth_name: truth},
                    **{"class": cls},
                )
            )  # fmt: skip
            out[qid] = text
    return entries, out


def test_lsr_mlsr_tlc_on_hand_made_groups():
    # Group 1: right at every t.  Group 2: right at t = 0, 1 only (bearing off at 2, distance at 3).
    # Group 3: right at t = 0 only; its answer at t = 2 is missing.
    e1, a1 = _group(
        "g1", "overtaking", "car", [(10, 0), (12, 20), (14, 40), (16, 60)],
        ["10 m at 0 deg", "12 m at 20 deg", "14 m at 40 deg", "16 m at 60 deg"],
        ego=[(10.0, "10 m/s"), (10.0, "11 m/s"), (10.0, "13 m/s"), (0.2, "0.6 m/s")],
        agent=[(0.0, "stationary"), (0.0, "0.4 m/s"), (5.0, "6.1 m/s"), (5.0, "")],
    )  # fmt: skip
    e2, a2 = _group(
        "g2", "overtaking", "truck", [(20, -30), (20, -30), (20, -30), (20, -30)],
        ["20 m at -30 deg", "24.9 m at -39.9 deg", "20 m at -41 deg", "25 m at -30 deg"],
    )  # fmt: skip
    e3, a3 = _group(
        "g3", "oncoming_passing", "car", [(5, 170), (5, -175), (5, 90), (5, 90)],
        ["5 m at 178 degrees", "5 m at 170 degrees", "", "5 m at 70 degrees"],
    )  # fmt: skip
    entries = e1 + e2 + e3
    answers = {**a1, **a2, **a3}
    r = score_entries(entries, answers, "paper")
    st = r["spatiotemporal"]
    # LSR bits: g1 [1,1,1,1], g2 [1,1,0,0], g3 [1,0,0,0]  (g3 at t=1: -175 vs 170 is 15 deg).
    assert st["groups"] == 3
    assert st["LSR@0s"] == pytest.approx(1.0)
    assert st["LSR@1s"] == pytest.approx(2 / 3)
    assert st["LSR@2s"] == pytest.approx(1 / 3)
    assert st["LSR@3s"] == pytest.approx(1 / 3)
    assert st["MLSR"] == pytest.approx((4 / 4 + 2 / 4 + 1 / 4) / 3)
    assert st["TLC"] == pytest.approx(1 / 3)
    # Per-dimension: distance fails only g2 at 3 s (25 m vs 20 m is exactly 25 %: strict).
    assert st["SR"]["distance"] == pytest.approx({"0s": 1, "1s": 1, "2s": 2 / 3, "3s": 2 / 3})
    assert st["SR"]["bearing"] == pytest.approx({"0s": 1, "1s": 2 / 3, "2s": 1 / 3, "3s": 2 / 3})
    # Ego speed: 10 m/s at 20 % (11 ok, 13 not), 0.2 m/s with 0.5 m/s absolute (0.6 ok).
    assert st["SR"]["ego_speed"] == pytest.approx({"0s": 1, "1s": 1, "2s": 0, "3s": 1})
    # Agent: stationary = 0 m/s (ok), 0.4 (ok), 6.1 vs 5 (22 %, no), empty (no).
    assert st["SR"]["agent_speed"] == pytest.approx({"0s": 1, "1s": 1, "2s": 0, "3s": 0})
    assert st["by_situation"]["overtaking"]["groups"] == 2
    assert st["by_situation"]["overtaking"]["TLC"] == pytest.approx(0.5)
    assert st["by_situation"]["oncoming_passing"]["MLSR"] == pytest.approx(0.25)
    assert st["by_class"]["truck"]["LSR@1s"] == pytest.approx(1.0)
    assert r["questions"] == len(entries)
    assert r["answered"] == len(entries) - 2  # two empty answers
    assert r["parsed"] == len(entries) - 2


def _spatial(qid, category, kind, answer_kind, truth, cls="car", set_name="spatial", **spec):
    return dict(
        id=qid, group_id=qid, set=set_name, category=category, type=f"{category}_{answer_kind}",
        kind=kind, situation=None, horizon_s=None, spec={"kind": answer_kind, **spec},
        truth=truth, **{"class": cls},
    )  # fmt: skip


def test_spatial_and_multiple_choice_accuracy_by_category_and_class():
    entries = [
        _spatial("q1", "object_centric", "quantitative", "distance", {"distance_m": 10.0}),
        _spatial("q2", "object_centric", "quantitative", "distance", {"distance_m": 10.0}, "truck"),
        _spatial("q3", "object_centric", "qualitative", "clock", {"clock": 3}),
        _spatial("q4", "ego_centric", "qualitative", "side", {"outcome": "left"}, region_ids=[1], subject="ego", reference=1),
        _spatial("q5", "ego_centric", "quantitative", "bearing", {"bearing_deg": -170.0}),
        _spatial("q6", "multiple_choice", "qualitative", "choice", {"choice": "B"}, set_name="multiple_choice", letters=list("ABCD")),
        _spatial("q7", "multiple_choice", "qualitative", "choice", {"choice": "D"}, set_name="multiple_choice", letters=list("ABCD")),
    ]  # fmt: skip
    answers = {
        "q1": "Region [3] is 11 meters from Region [4].",
        "q2": "30 feet",  # 9.14 m: within 25 % of 10 m
        "q3": "Region [3] is at 2 o'clock.",  # not 3 o'clock
        "q4": "The ego vehicle is on the left of Region [1].",
        "q5": "It is at 185 degrees.",  # = -175, 5 degrees off
        "q6": "Answer: B",
        "q7": "(C)",
        "unknown": "1 m",
    }
    r = score_entries(entries, answers)
    sp = r["spatial"]
    assert sp["quantitative"] == {"n": 3, "score": pytest.approx(1.0)}
    assert sp["qualitative"] == {"n": 2, "score": pytest.approx(0.5)}
    assert sp["by_category"]["object_centric"]["qualitative"]["score"] == 0.0
    assert sp["by_category"]["ego_centric"]["qualitative"]["score"] == 1.0
    assert sp["by_class"]["truck"] == {"n": 1, "score": 1.0}
    assert r["multiple_choice"]["accuracy"] == pytest.approx(0.5)
    assert r["unknown_ids"] == 1
    assert r["spatiotemporal"]["groups"] == 0
    assert r["spatiotemporal"]["MLSR"] is None
    assert r["score"] == pytest.approx(5 / 7)


def test_an_empty_answer_never_scores():
    entries = [
        _spatial("s", "ego_centric", "quantitative", "speed", {"speed_mps": 0.0}),
        _spatial("y", "ego_centric", "qualitative", "yes_no", {"yes_no": "no"}),
    ]
    r = score_entries(entries, {"s": "", "y": "   "})
    assert r["score"] == 0.0
    assert r["answered"] == 0


def test_values_agree_uses_the_same_tolerances():
    assert values_agree(
        "position", {"distance_m": 10, "bearing_deg": 179}, {"distance_m": 12, "bearing_deg": -179}
    )
    assert not values_agree(
        "position", {"distance_m": 10, "bearing_deg": 0}, {"distance_m": 13, "bearing_deg": 0}
    )
    assert values_agree(
        "cameras", {"cameras": ["CAM_FRONT", "CAM_BACK"]}, {"cameras": ["CAM_BACK", "CAM_FRONT"]}
    )
    assert not values_agree("region", {"region_id": 3}, {})


def test_read_answers_errors_name_the_file_and_line(tmp_path):
    path = tmp_path / "answers.jsonl"
    path.write_text(
        json.dumps({"id": "a", "answer": "1"})
        + "\n"
        + json.dumps({"id": "a", "response": "2"})
        + "\n"
    )
    with pytest.raises(ValueError, match=r"answers.jsonl:2: id 'a' answered twice"):
        read_answers(path)
    path.write_text('{"id": "a", "answer": "1"}\n{not json\n')
    with pytest.raises(ValueError, match=r"answers.jsonl:2: not valid JSON"):
        read_answers(path)
    path.write_text('{"id": "a", "prediction": "1 m"}\n\n{"id": "b"}\n')
    assert read_answers(path) == {"a": "1 m", "b": ""}
    with pytest.raises(FileNotFoundError, match="missing.jsonl"):
        read_answers(tmp_path / "missing.jsonl")


def test_hostile_answer_files_are_refused_naming_file_and_line(tmp_path):
    """Issue 20.19: objects are not answers, foreign ids are not silence, bytes name the file."""
    path = tmp_path / "answers.jsonl"
    for answer, kind in (({"distance": 3}, "dict"), (["3 m"], "list"), (True, "bool")):
        path.write_text(
            json.dumps({"id": "a", "answer": "1 m"})
            + "\n"
            + json.dumps({"id": "b", "answer": answer})
            + "\n"
        )
        with pytest.raises(
            ValueError,
            match=rf"answers.jsonl:2: 'answer' must be the answer text \(a string\), got {kind}",
        ):
            read_answers(path)
    path.write_bytes(b'{"id": "a", "answer": "1 m"}\n{"id": "b", "answer": "caf\xe9"}\n')
    with pytest.raises(ValueError, match=rf"{path}:2: not UTF-8 text \(byte 0xe9"):
        read_answers(path)


def test_answers_for_another_benchmark_are_refused(tmp_path):
    from autolabel.benchmark.scoring import score_benchmark

    bench = tmp_path / "bench"
    bench.mkdir()
    key = {"id": "q1", "kind": "single", "answer": "3 m", "question_type": "distance"}
    (bench / "answer_key.jsonl").write_text(json.dumps(key) + "\n")
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps({"id": "other-7", "answer": "3 m"}) + "\n")
    with pytest.raises(ValueError, match=rf"{answers}: none of its 1 ids is a question of {bench}"):
        score_benchmark(bench, answers)
    (bench / "answer_key.jsonl").write_bytes(b'{"id": "q\xff"}\n')
    with pytest.raises(ValueError, match=r"answer_key.jsonl:1: not UTF-8"):
        score_benchmark(bench, answers)


def test_a_partial_answers_file_scores_what_it_has(tmp_path):
    entries, answers = _group(
        "g1", "overtaking", "car", [(10, 0), (12, 20), (14, 40), (16, 60)],
        ["10 m at 0 deg", "12 m at 20 deg", "30 m at 40 deg", "16 m at 60 deg"],
    )  # fmt: skip
    del answers["g1-p3"]
    r = score_entries(entries, answers)
    assert r["questions"] == 4 and r["scored"] == 3
    assert r["missing"] == 1 and r["missing_ids"] == ["g1-p3"]
    st = r["spatiotemporal"]
    assert st["LSR@0s"] == 1.0 and st["LSR@2s"] == 0.0
    assert st["MLSR"] == pytest.approx(0.5)  # 2 of 4 horizons right; the unanswered one is wrong


def test_read_answers_rejects_non_string_answers(tmp_path):
    path = tmp_path / "answers.jsonl"
    path.write_text('{"id": "a", "answer": "1 m"}\n{"id": "b", "answer": 12.5}\n')
    with pytest.raises(
        ValueError,
        match=r"answers.jsonl:2: 'answer' must be the answer text \(a string\), got float",
    ):
        read_answers(path)
    path.write_text('{"answer": "1 m"}\n')
    with pytest.raises(ValueError, match=r"answers.jsonl:1: expected an object with an 'id'"):
        read_answers(path)
