"""``autolabel bench export`` and ``bench score`` on a constructed QA run: files, images, oracle
= 100 %, determinism, dynamic situations."""

from __future__ import annotations

import hashlib
import json

import cv2
import numpy as np
import pytest
from qa_runs import small_scene, write_camera_images, write_qa_run

from autolabel.attributes import compute_attributes
from autolabel.benchmark.export import (
    ANSWER_KEY_FILE,
    QUESTIONS_FILE,
    ExportConfig,
    classify_situations,
    export_benchmark,
)
from autolabel.benchmark.scoring import HORIZONS_S, read_jsonl, score_baselines, score_benchmark
from autolabel.boxes import Boxes3D
from autolabel.qa.scenes import global_boxes_per_frame
from calib.se3 import SE3


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench")
    scene = small_scene(seed=3, n_objects=10)
    write_camera_images(root / "data", scene)
    records = write_qa_run(root / "run", scene, root / "data")
    summary = export_benchmark(root / "run", root / "bench")
    return root, records, summary


def _digest(folder):
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.name.endswith(".scores.json")
    }


def test_oracle_scores_100_percent_everywhere(bench):
    root, records, _ = bench
    r = score_benchmark(root / "bench", root / "bench" / "baselines" / "oracle.jsonl")
    st = r["spatiotemporal"]
    assert st["groups"] > 0
    for h in HORIZONS_S:
        assert st[f"LSR@{h:g}s"] == 1.0
    assert st["MLSR"] == 1.0 and st["TLC"] == 1.0
    for dim in ("distance", "bearing", "ego_speed", "agent_speed"):
        assert set(st["SR"][dim].values()) == {1.0}
    assert r["spatial"]["qualitative"]["score"] == 1.0
    assert r["spatial"]["quantitative"]["score"] == 1.0
    assert r["multiple_choice"]["accuracy"] == 1.0
    # Every question type the run generated is in the benchmark, and every one is right.
    # (Captions are not exported: they need caption metrics, not an answer key.)
    assert set(r["by_type"]) == {rec["type"] for rec in records if rec["category"] != "caption"}
    assert {v["score"] for v in r["by_type"].values()} == {1.0}
    assert r["parsed"] == r["questions"] == sum(rec["category"] != "caption" for rec in records)


def test_floors_score_below_the_oracle(bench):
    root, _, _ = bench
    scores = score_baselines(root / "bench")
    assert set(scores) == {"oracle", "constant", "random"}
    for name in ("constant", "random"):
        assert scores[name]["score"] < 0.8
        assert scores[name]["spatiotemporal"]["TLC"] < 1.0
    # Random choice among four options is right about a quarter of the time.
    assert scores["random"]["multiple_choice"]["accuracy"] < 0.6
    assert (root / "bench" / "baselines" / "random.scores.json").is_file()


def test_questions_file_is_what_a_model_sees(bench):
    root, records, summary = bench
    questions = read_jsonl(root / "bench" / QUESTIONS_FILE)
    key = read_jsonl(root / "bench" / ANSWER_KEY_FILE)
    exported = [r for r in records if r["category"] != "caption"]  # captions have no key
    assert [q["id"] for q in questions] == [k["id"] for k in key] == [r["id"] for r in exported]
    assert [q["question"] for q in questions] == [r["question"] for r in exported]
    for q in questions:
        assert not {"answer", "truth", "answer_values", "spec"} & set(q)
        assert q["prompt"]
        for image in q["images"]:
            img = cv2.imread(str(root / "bench" / image))
            assert img is not None and img.shape == (225, 400, 3)
        if q["set"] == "spatiotemporal":
            assert q["image_times_s"] == [-1.5, -1.0, -0.5, 0.0]
            assert len(q["images"]) == 4 and len(q["cameras"]) == 1
            assert "4 images" in q["prompt"]
        else:
            assert len(q["images"]) == len(q["cameras"])
        if q["set"] == "multiple_choice":
            assert [c["letter"] for c in q["choices"]] == ["A", "B", "C", "D"]
    groups = {k["group_id"] for k in key if k["set"] == "spatiotemporal"}
    assert summary["groups"] == len(groups)
    assert sum(summary["by_set"].values()) == len(key)
    assert all(k["situation"] for k in key if k["set"] == "spatiotemporal")


def test_target_marks_show_only_the_target(bench):
    from autolabel.set_of_mark import region_colours_bgr

    root, records, _ = bench
    key = read_jsonl(root / "bench" / ANSWER_KEY_FILE)
    questions = {q["id"]: q for q in read_jsonl(root / "bench" / QUESTIONS_FILE)}
    by_id = {r["id"]: r for r in records}
    entry = next(k for k in key if k["set"] == "spatiotemporal")
    q, rec = questions[entry["id"]], by_id[entry["id"]]
    source = cv2.imread(str(root / "data" / rec["images"][q["cameras"][0]][-1]))
    marked = cv2.imread(str(root / "bench" / q["images"][-1]))
    changed = marked[np.any(marked != source, axis=2)]
    assert len(changed) > 0
    # Of all region colours, only the target's appears among the drawn pixels.
    colours = {tuple(int(c) for c in region_colours_bgr(r)) for r in range(20)}
    drawn = {tuple(int(c) for c in px) for px in changed} & colours
    target = entry["spec"]["region_ids"][0]
    assert drawn == {tuple(int(c) for c in region_colours_bgr(target))}


def test_export_is_deterministic(bench, tmp_path):
    root, _, _ = bench
    export_benchmark(root / "run", tmp_path / "again")
    assert _digest(tmp_path / "again") == _digest(root / "bench")


def test_export_without_images_needs_no_dataset(bench, tmp_path):
    root, _, _ = bench
    summary = export_benchmark(root / "run", tmp_path / "plain", config=ExportConfig(images=False))
    assert not summary["images"]
    q = read_jsonl(tmp_path / "plain" / QUESTIONS_FILE)[0]
    assert all(p.startswith("samples/") for p in q["images"])
    assert not (tmp_path / "plain" / "images").exists()


def test_missing_dataset_is_a_clear_error(bench, tmp_path):
    root, _, _ = bench
    with pytest.raises(FileNotFoundError, match="camera image not found"):
        export_benchmark(root / "run", tmp_path / "x", dataroot=tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="no <clip>/qa.jsonl"):
        export_benchmark(tmp_path, tmp_path / "y")


def _situation_attrs(ego_speed_mps: float):
    """Attributes of hand-made agents around an ego driving along +x (12 frames at 2 Hz)."""
    time_s = np.arange(0.0, 6.0, 0.5)
    # Track ids: 0 oncoming, 1 slow car ahead (overtaken), 2 fast car ahead (moving away),
    # 3 same speed ahead (maintaining), 4 slower car behind (other), 5 parked car ahead.
    start = np.array([[60, 3.5], [8, -3.5], [10, -3.5], [15, 3.5], [-10, -3.5], [25, 7.0]], float)
    speed = np.array([-8.0, 2.0, 12.0, ego_speed_mps, 2.0, 0.0])
    velocity = np.stack([speed, np.zeros(6)], 1)
    velocity[5] = 0.0
    labels = np.zeros(6, dtype=np.int16)
    sizes = np.tile([1.9, 4.6, 1.6], (6, 1))
    tracks = global_boxes_per_frame(time_s, start, velocity, labels, sizes)
    # Track 6: a car that turns left through 90 degrees between t = 2 s and t = 5 s.
    yaw = np.clip((time_s - 2.0) / 3.0, 0.0, 1.0) * np.pi / 2
    turning = []
    for f, t in enumerate(time_s):
        b = Boxes3D(
            center_m=np.array([[20.0 + ego_speed_mps * t, -3.5 + 3.0 * yaw[f], 0.8]]),
            size_wlh_m=np.array([[1.9, 4.6, 1.6]]),
            yaw_rad=np.array([yaw[f]]),
            velocity_mps=np.full((1, 2), np.nan),
            label=np.zeros(1, dtype=np.int16),
            track_id=np.array([6]),
        )
        turning.append(Boxes3D.concatenate([tracks[f], b]))
    poses = [SE3(np.eye(3), np.array([ego_speed_mps * t, 0.0, 0.0])) for t in time_s]
    return compute_attributes(time_s, poses, turning)


def test_dynamic_situations_of_hand_made_agents():
    attrs = _situation_attrs(6.0)
    kf = np.full(7, 4)  # t = 2 s, future to 5 s
    got = classify_situations(attrs, kf, np.arange(7))
    assert got.tolist() == [
        "oncoming_passing",
        "overtaking",
        "moving_away",
        "maintaining",
        "other",
        "overtaking",  # the ego passes a parked car ahead of it
        "path_divergence",
    ]
    still = _situation_attrs(0.0)
    # With the ego stopped, the parked car is static; a moving car is not.
    got = classify_situations(still, np.array([4, 4]), np.array([5, 0]))
    assert got.tolist() == ["static", "oncoming_passing"]
    with pytest.raises(ValueError, match="no state 3 s later"):
        classify_situations(attrs, np.array([8]), np.array([0]))


def test_malformed_records_name_file_line_and_field(bench, tmp_path):
    import shutil

    root, _, _ = bench
    shutil.copytree(root / "run", tmp_path / "run")
    qa = tmp_path / "run" / "scene-t-0001" / "qa.jsonl"
    lines = qa.read_text().splitlines()
    bad = json.loads(lines[2])
    del bad["answer_values"]
    lines[2] = json.dumps(bad)
    qa.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"qa.jsonl:3 \(record .*\): field 'answer_values'"):
        export_benchmark(tmp_path / "run", tmp_path / "bench", config=ExportConfig(images=False))
