"""check-qa re-derives every answer and catches planted mismatches (e.g. swapped region ids)."""

from __future__ import annotations

import copy

import pytest
from typer.testing import CliRunner

from autolabel.cli import app
from autolabel.qa import QAConfig, generate_clip_qa, load_templates, write_qa_jsonl
from autolabel.qa.check import check_clip_qa, check_qa_run, read_qa_jsonl
from autolabel.qa.scenes import constant_velocity_scene

TEMPLATES = load_templates()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("run")
    scenes = {}
    for seed, clip in ((1, "scene-a"), (2, "scene-b")):
        s = constant_velocity_scene(n_objects=20, seed=seed, clip=clip)
        recs = generate_clip_qa(s.attrs, s.regions, s.meta, QAConfig(seed=seed), TEMPLATES)
        s.attrs.write_parquet(root / clip / "attributes.parquet")
        write_qa_jsonl(root / clip / "qa.jsonl", recs)
        scenes[clip] = s
    return root, scenes


def _records(run, clip="scene-a"):
    return read_qa_jsonl(run[0] / clip / "qa.jsonl")


def _check(run, records, clip="scene-a", with_rig=False):
    s = run[1][clip]
    cams = s.rig.cameras if with_rig else None
    return check_clip_qa(records, s.attrs, clip, TEMPLATES, cams)


def _first(records, pred):
    return next(i for i, r in enumerate(records) if pred(r))


def test_clean_run_passes(run):
    report = check_qa_run(run[0], TEMPLATES)
    assert report.ok and set(report.records) == {"scene-a", "scene-b"}
    assert all(n > 100 for n in report.records.values())
    # The boxes are the tracks' projected 3D boxes: the projection check passes too.
    assert _check(run, _records(run), with_rig=True) == []


def test_cli_clean_exit_zero(run):
    res = CliRunner().invoke(app, ["check-qa", str(run[0])])
    assert res.exit_code == 0, res.output
    assert "mismatches: 0" in res.output


def _swap_text_ids(text: str, a: int, b: int) -> str:
    return (
        text.replace(f"Region [{a}]", "\0")
        .replace(f"Region [{b}]", f"Region [{a}]")
        .replace("\0", f"Region [{b}]")
    )


def test_swapped_region_ids_in_text_are_caught(run):
    recs = _records(run)
    i = _first(recs, lambda r: r["type"] == "obj_distance")
    a, b = (x["region_id"] for x in recs[i]["regions"])
    recs[i]["question"] = _swap_text_ids(recs[i]["question"], a, b)
    mism = _check(run, recs)
    assert [m.field for m in mism] == ["question"]
    assert mism[0].record_id == recs[i]["id"]


def test_swapped_region_entries_are_caught(run):
    """Region ids stay in the text, but regions A and B trade track ids (the STRIDE-QA defect)."""
    recs = _records(run)
    i = _first(
        recs,
        lambda r: r["type"] == "obj_closer_to_ego",
    )
    ra, rb = recs[i]["regions"]
    ra["track_id"], rb["track_id"] = rb["track_id"], ra["track_id"]
    mism = _check(run, recs)
    fields = {m.field for m in mism if m.record_id == recs[i]["id"]}
    assert "answer_values.region_id" in fields or "answer_values.distance_a_m" in fields
    assert any("region_id -> track_id" in m.message for m in mism)


def test_swapped_boxes_and_masks_are_caught(run):
    recs = _records(run)
    i = _first(
        recs,
        lambda r: r["type"] == "obj_distance" and all(reg["views"] for reg in r["regions"]),
    )
    ra, rb = recs[i]["regions"]
    ra["views"], rb["views"] = rb["views"], ra["views"]
    mism = _check(run, recs, with_rig=True)
    assert any("projected 3D box" in m.message for m in mism)
    assert all(m.record_id == recs[i]["id"] for m in mism)


def test_wrong_numbers_and_words_are_caught(run):
    recs = _records(run)
    i = _first(recs, lambda r: r["type"] == "ego_distance")
    d = recs[i]["answer_values"]["distance_m"]
    recs[i]["answer"] = recs[i]["answer"].replace(f"{d:.2f}", f"{d + 1:.2f}")
    j = _first(recs, lambda r: r["type"] == "ego_bearing")
    recs[j]["answer_values"]["bearing_deg"] += 5.0
    k = _first(recs, lambda r: r["type"] == "obj_left_right" and "yes_no" not in r["answer_values"])
    flip = {"left": "right", "right": "left"}[recs[k]["answer_values"]["outcome"]]
    recs[k]["answer_values"]["outcome"] = flip
    m = _first(recs, lambda r: r["choices"] is not None)
    wrong = next(
        o["letter"] for o in recs[m]["choices"] if o["letter"] != recs[m]["answer_values"]["choice"]
    )
    recs[m]["answer_values"]["choice"] = wrong
    n = _first(recs, lambda r: r["type"] == "st_position" and r["params"]["horizon_s"] == 2)
    recs[n]["params"]["horizon_s"] = 3
    got = {(mm.record_id, mm.field) for mm in _check(run, recs)}
    assert (recs[i]["id"], "answer") in got
    assert (recs[j]["id"], "answer_values.bearing_deg") in got
    assert (recs[k]["id"], "answer_values.outcome") in got
    assert (recs[m]["id"], "answer_values.choice") in got
    assert (recs[n]["id"], "answer_values.distance_m") in got or (recs[n]["id"], "question") in got


def test_wrong_class_and_unknown_region_are_caught(run):
    recs = _records(run)
    i = _first(recs, lambda r: r["type"] == "ego_distance")
    cls = recs[i]["regions"][0]["class"]
    recs[i]["regions"][0]["class"] = "bus" if cls != "bus" else "car"
    j = _first(recs, lambda r: r["type"] == "ego_clock")
    rid = recs[j]["regions"][0]["region_id"]
    recs[j]["answer"] = recs[j]["answer"].replace(f"Region [{rid}]", "Region [99]")
    mism = _check(run, recs)
    assert any(m.field == "regions[0].class" and m.record_id == recs[i]["id"] for m in mism)
    assert any("Region [99]" in m.message and m.record_id == recs[j]["id"] for m in mism)


def test_cli_fails_on_planted_mismatch(run, tmp_path):
    planted = tmp_path / "run"
    for clip in ("scene-a", "scene-b"):
        (planted / clip).mkdir(parents=True)
        for name in ("attributes.parquet", "qa.jsonl"):
            (planted / clip / name).write_bytes((run[0] / clip / name).read_bytes())
    recs = read_qa_jsonl(planted / "scene-b" / "qa.jsonl")
    i = _first(recs, lambda r: len(r["regions"]) == 2 and r["type"] == "obj_distance")
    a, b = (x["region_id"] for x in recs[i]["regions"])
    bad = copy.deepcopy(recs)
    bad[i]["regions"][0]["region_id"], bad[i]["regions"][1]["region_id"] = b, a
    write_qa_jsonl(planted / "scene-b" / "qa.jsonl", bad)
    res = CliRunner().invoke(app, ["check-qa", str(planted)])
    assert res.exit_code == 1, res.output
    assert bad[i]["id"] in res.output
    assert "mismatches: 0" not in res.output


def test_malformed_file_is_reported_with_its_name(run, tmp_path):
    d = tmp_path / "r" / "scene-x"
    d.mkdir(parents=True)
    (d / "attributes.parquet").write_bytes((run[0] / "scene-a" / "attributes.parquet").read_bytes())
    (d / "qa.jsonl").write_text('{"id": 1}\nnot json\n')
    report = check_qa_run(tmp_path / "r", TEMPLATES)
    assert not report.ok
    assert "qa.jsonl:2" in report.mismatches[0].message
    res = CliRunner().invoke(app, ["check-qa", str(tmp_path / "empty")])
    assert res.exit_code == 2
