"""A hand-built scene whose answers are known without the code under test: four objects at fixed
positions relative to the ego, run through QA generation, ``bench export``, ``bench score`` and
``eval qa``. Expected distances, bearings, clock hours and speeds are computed here from the
positions by DESIGN.md's conventions (bearing positive to the left, 3 o'clock to the right), so a
sign or mirror error anywhere in the chain fails (the oracle tests parse the generated text back,
which agrees with itself whatever the convention)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from qa_runs import write_qa_run

from autolabel.benchmark.baselines import answer_text
from autolabel.benchmark.export import ExportConfig, export_benchmark
from autolabel.benchmark.scoring import score_benchmark
from autolabel.classes import DETECTION_CLASSES
from autolabel.evaluation.label_quality import evaluate_label_quality
from autolabel.qa import QAConfig
from autolabel.qa.scenes import CLASS_SIZES_WLH_M, global_boxes_per_frame, scene_from_tracks

SPEED_MPS = 6.0  # ego and every object drive along +x at this speed: fixed relative positions
TIME_S = np.arange(0.0, 12.0, 0.5)
#: Track id -> (class, position relative to the ego in metres: x forward, y left).
OBJECTS = {
    0: ("car", (12.0, 3.0)),
    1: ("car", (6.0, 8.0)),
    2: ("truck", (8.0, -6.0)),
    3: ("pedestrian", (-15.0, 3.0)),
}
#: By hand: distance sqrt(x^2 + y^2); bearing atan2(y, x) in degrees (to the left positive);
#: clock hour 12 ahead, 3 to the right, each hour 30 degrees.
EXPECTED = {
    0: {"distance_m": 12.369, "bearing_deg": 14.036, "clock": 12},
    1: {"distance_m": 10.0, "bearing_deg": 53.130, "clock": 10},
    2: {"distance_m": 10.0, "bearing_deg": -36.870, "clock": 1},
    3: {"distance_m": 15.297, "bearing_deg": 168.690, "clock": 6},
}
QA_CONFIG = QAConfig(seed=0, per_keyframe_cap=8)


def scene_tracks(offset_xy: dict[int, tuple[float, float]] | None = None):
    labels = np.array([DETECTION_CLASSES.index(c) for c, _ in OBJECTS.values()])
    start = np.array([xy for _, xy in OBJECTS.values()], dtype=float)
    for track, d in (offset_xy or {}).items():
        start[track] += d
    sizes = np.array([CLASS_SIZES_WLH_M[DETECTION_CLASSES[k]] for k in labels])
    velocity = np.tile([SPEED_MPS, 0.0], (len(OBJECTS), 1))
    return global_boxes_per_frame(TIME_S, start, velocity, labels, sizes)


def test_the_hand_values_follow_the_conventions():
    """The table above, re-derived from the positions (guards the table itself)."""
    for track, (_, (x, y)) in OBJECTS.items():
        e = EXPECTED[track]
        assert math.hypot(x, y) == pytest.approx(e["distance_m"], abs=1e-3)
        assert math.degrees(math.atan2(y, x)) == pytest.approx(e["bearing_deg"], abs=1e-3)
        hour = round(-e["bearing_deg"] / 30.0) % 12 or 12
        assert hour == e["clock"]


@pytest.fixture(scope="module")
def hand_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("known")
    scene = scene_from_tracks(TIME_S, scene_tracks(), ego_speed_mps=SPEED_MPS, config=QA_CONFIG)
    records = write_qa_run(root / "run", scene, config=QA_CONFIG)
    export_benchmark(root / "run", root / "bench", None, ExportConfig(images=False))
    key = [json.loads(line) for line in (root / "bench/answer_key.jsonl").read_text().splitlines()]
    return root, records, key


def region_tracks(records) -> dict[tuple[int, int], int]:
    """(keyframe, region id) -> track id, as the records ground them."""
    out = {}
    for rec in records:
        for reg in rec["regions"]:
            out[(rec["keyframe"]["frame_index"], reg["region_id"])] = reg["track_id"]
    return out


def test_generated_answers_equal_the_hand_values(hand_run):
    _, records, _ = hand_run
    checked = {"distance_m": 0, "bearing_deg": 0, "clock": 0, "speed": 0}
    for rec in records:
        if rec["type"] not in ("ego_distance", "ego_bearing", "ego_clock", "st_position"):
            continue
        if len(rec["regions"]) != 1:
            continue
        want = EXPECTED[rec["regions"][0]["track_id"]]
        for name in ("distance_m", "bearing_deg", "clock"):
            if name in rec["answer_values"]:
                assert rec["answer_values"][name] == pytest.approx(want[name], abs=2e-3), rec["id"]
                checked[name] += 1
    for rec in records:
        if rec["type"] in ("st_agent_speed", "ego_region_speed", "st_ego_speed", "ego_speed"):
            for name in ("speed_mps", "ego_speed_mps"):
                if name in rec["answer_values"]:
                    assert rec["answer_values"][name] == pytest.approx(SPEED_MPS, abs=2e-3)
                    checked["speed"] += 1
    assert all(n >= 2 for n in checked.values()), checked


def hand_answers(key, records, flip_bearing: bool = False) -> dict[str, str]:
    """Answers to every numeric question, written from the hand table (never from the key)."""
    tracks = region_tracks(records)
    out = {}
    for e in key:
        kind = e["spec"]["kind"]
        if kind in ("ego_speed", "speed"):
            out[e["id"]] = answer_text(kind, {"ego_speed_mps": SPEED_MPS, "speed_mps": SPEED_MPS})
            continue
        if kind not in ("distance", "bearing", "position", "clock") or e["type"].startswith("mv_"):
            continue
        ids = e["spec"].get("region_ids") or []
        if len(ids) != 1:
            continue
        want = dict(EXPECTED[tracks[(e["keyframe"], ids[0])]])
        if flip_bearing:
            want["bearing_deg"] = -want["bearing_deg"]
            want["clock"] = round(-want["bearing_deg"] / 30.0) % 12 or 12
        out[e["id"]] = answer_text(kind, want)
    return out


def write_answers(path, answers):
    path.write_text("".join(json.dumps({"id": k, "answer": v}) + "\n" for k, v in answers.items()))
    return path


def test_scores_of_hand_answers_and_of_a_flipped_bearing(hand_run):
    root, records, key = hand_run
    right = score_benchmark(
        root / "bench", write_answers(root / "right.jsonl", hand_answers(key, records))
    )
    st = right["spatiotemporal"]
    assert st["groups"] >= 2
    assert st["MLSR"] == 1.0 and st["TLC"] == 1.0
    by_type = right["spatial"]["by_type"]
    for t in ("ego_distance", "ego_bearing", "ego_clock"):
        assert by_type[t]["score"] == 1.0, t
    # Every object is off the x axis by more than 5 degrees: a bearing of the other sign is more
    # than 10 degrees off for each, so no localization succeeds and no bearing is right; the
    # distances stay right.
    flipped = score_benchmark(
        root / "bench",
        write_answers(root / "flipped.jsonl", hand_answers(key, records, flip_bearing=True)),
    )
    st = flipped["spatiotemporal"]
    assert st["MLSR"] == 0.0 and st["TLC"] == 0.0
    assert all(v == 1.0 for v in st["SR"]["distance"].values())
    assert all(v == 0.0 for v in st["SR"]["bearing"].values())
    by_type = flipped["spatial"]["by_type"]
    assert by_type["ego_distance"]["score"] == 1.0
    assert by_type["ego_bearing"]["score"] == 0.0
    # Mirrored, tracks 0 (14 deg) and 3 (169 deg) stay at 12 and 6 o'clock; 1 and 2 change hour.
    tracks = region_tracks(records)
    clock_tracks = [
        tracks[(e["keyframe"], e["spec"]["region_ids"][0])] for e in key if e["type"] == "ego_clock"
    ]
    assert by_type["ego_clock"]["score"] == pytest.approx(np.mean(np.isin(clock_tracks, [0, 3])))


def test_eval_qa_against_a_candidate_with_one_object_moved(hand_run, tmp_path):
    """Track 1 (car at 6, 8) moved to (7.5, 7): 1.8 m, within the 2 m match, bearing 43.03 deg
    (10.1 deg off: a bearing disagrees), distance 10.26 m (2.6 % off: a distance agrees)."""
    root, records, _ = hand_run
    moved = scene_from_tracks(
        TIME_S, scene_tracks({1: (1.5, -1.0)}), ego_speed_mps=SPEED_MPS, config=QA_CONFIG
    )
    write_qa_run(tmp_path / "cand", moved, config=QA_CONFIG)
    result = evaluate_label_quality(root / "run", tmp_path / "cand")
    cand = [
        json.loads(line)
        for line in (tmp_path / "cand/scene-t-0001/qa.jsonl").read_text().splitlines()
    ]
    bearing_tracks = [r["regions"][0]["track_id"] for r in cand if r["type"] == "ego_bearing"]
    n_distance = sum(r["type"] == "ego_distance" for r in cand)
    assert 1 in bearing_tracks and len(set(bearing_tracks)) > 1 and n_distance > 0
    by_type = result["by_type"]
    moved_bearings = bearing_tracks.count(1)
    assert by_type["ego_bearing"]["disagree"] == moved_bearings
    assert by_type["ego_bearing"]["agree"] == len(bearing_tracks) - moved_bearings
    assert by_type["ego_distance"]["agree"] == n_distance
    assert result["overall"]["unmatched"] == 0 and result["overall"]["missed"] == 0
