"""check-qa re-derives every answer and catches planted mismatches (e.g. swapped region ids)."""

from __future__ import annotations

import copy
import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from autolabel.cli import app
from autolabel.qa import QAConfig, generate_clip_qa, load_templates, write_qa_jsonl
from autolabel.qa.check import check_clip_qa, check_qa_run, clock_hours_of, read_qa_jsonl
from autolabel.qa.scenes import constant_velocity_scene
from calib.bearing import clock_from_bearing

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


# ------------------------------------------------ the conventions of the attributes themselves


def _regenerated(scene, attrs):
    """Records generated from ``attrs`` (as a run whose attributes stage had that defect)."""
    return generate_clip_qa(attrs, scene.regions, scene.meta, QAConfig(seed=1), TEMPLATES)


def test_bearing_of_the_wrong_sign_is_caught_though_records_agree_with_it(run):
    """Records re-derived from attributes whose bearing has the wrong sign agree with them; the
    cameras that show each region (left cameras see positive bearings) do not."""
    s = run[1]["scene-a"]
    bearing = -np.asarray(s.attrs.bearing_deg)
    flipped = dataclasses.replace(
        s.attrs, bearing_deg=bearing, clock=clock_from_bearing(bearing).astype(np.int8)
    )
    mism = check_clip_qa(_regenerated(s, flipped), flipped, "scene-a", TEMPLATES)
    side = [m for m in mism if "positive is to the left" in m.message]
    assert side and len(side) == len(mism)
    assert any("_LEFT" in m.message for m in side) and any("_RIGHT" in m.message for m in side)


def test_mirrored_clock_is_caught_though_records_agree_with_it(run):
    s = run[1]["scene-a"]
    clock = np.asarray(s.attrs.clock)
    mirrored = dataclasses.replace(
        s.attrs, clock=np.where(clock == 12, 12, 12 - clock).astype(np.int8)
    )
    mism = check_clip_qa(_regenerated(s, mirrored), mirrored, "scene-a", TEMPLATES)
    assert mism and all("o'clock" in m.message for m in mism)


def test_clock_hours_follow_design_md():
    # 12 ahead, 3 o'clock to the right (bearing -90), 9 to the left, 6 behind.
    np.testing.assert_allclose(clock_hours_of(np.array([0.0, -90.0, 90.0, 180.0])), [0, 3, 9, 6])


# ------------------------------------------------ the run's own marks and masks (a pipeline run)


def test_a_pipeline_run_is_checked_against_its_marks_and_masks(synth_run):
    report = check_qa_run(synth_run.run, TEMPLATES)
    assert report.ok, report.mismatches[:3]
    assert report.grounded == sorted(synth_run.scenes)
    res = CliRunner().invoke(app, ["check-qa", str(synth_run.run)])
    assert res.exit_code == 0 and "checked against their marks and masks: 2" in res.output


def _copied_run(synth_run, tmp_path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(synth_run.run, out)
    return out


def test_region_ids_one_off_from_the_marked_images_are_caught(synth_run, tmp_path):
    """The STRIDE-QA-Dataset #4 defect: records consistent in themselves (text, regions, answers),
    but the Set-of-Mark images number the objects differently (here: every id of a keyframe
    shifted by one, as ``marks/regions.json`` records what the images show)."""
    run_dir = _copied_run(synth_run, tmp_path)
    clip = synth_run.scenes[0]
    path = run_dir / clip / "marks/regions.json"
    doc = json.loads(path.read_text())
    shifted = set()
    for kf in doc["keyframes"]:
        n = len(kf["regions"])
        if n >= 2:
            for r in kf["regions"]:
                r["region_id"] = (r["region_id"] + 1) % n
            shifted.add(kf["frame_index"])
    assert shifted
    path.write_text(json.dumps(doc))
    report = check_qa_run(run_dir, TEMPLATES)
    flagged = {m.record_id for m in report.mismatches if "marks/regions.json" in m.message}
    records = read_qa_jsonl(run_dir / clip / "qa.jsonl")
    expected = {
        r["id"] for r in records if r["keyframe"]["frame_index"] in shifted and r["regions"]
    }
    assert expected and flagged == expected
    assert all(m.clip == clip for m in report.mismatches)
    res = CliRunner().invoke(app, ["check-qa", str(run_dir)])
    assert res.exit_code == 1 and "the marked images" in res.output


def test_views_that_are_not_the_segment_output_are_caught(synth_run, tmp_path):
    run_dir = _copied_run(synth_run, tmp_path)
    clip = synth_run.scenes[0]
    records = read_qa_jsonl(run_dir / clip / "qa.jsonl")
    view = next(v for r in records for reg in r["regions"] for v in reg["views"] if v["visible"])
    path = run_dir / clip / f"masks/{view['frame_index']:03d}.json"
    doc = json.loads(path.read_text())
    obj = next(
        o for o in doc["objects"] if o["camera"] == view["camera"] and o["box_px"] == view["box_px"]
    )
    obj["box_px"] = [x + 3.0 for x in obj["box_px"]]
    path.write_text(json.dumps(doc))
    mism = check_qa_run(run_dir, TEMPLATES).mismatches
    assert mism and all("box or mask is not track" in m.message for m in mism)
    assert all(f"masks/{view['frame_index']:03d}.json" in m.message for m in mism)
