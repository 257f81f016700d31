"""STRIDE-QA-Bench interop: the published parser's readings, the export's files, metrics on
hand-made predictions, bad prediction files, and (with ``STRIDEQA_BENCH_ROOT``) equality with the
published scorer itself."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import re
import sys
from pathlib import Path

import pycocotools.mask as mask_util
import pytest
from PIL import Image
from qa_runs import small_scene, write_camera_images, write_qa_run
from typer.testing import CliRunner

from autolabel.benchmark.strideqa import (
    ANNOTATION_DIR,
    CATEGORIES,
    RLE_BUCKETS,
    export_strideqa,
    headline,
    published_direction_deg,
    published_distance_m,
    published_speed_mps,
    read_predictions,
    report_percent,
    score_strideqa,
)

REPO = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- the parser


@pytest.mark.parametrize(
    ("text", "metres"),
    [
        ("Region [0] is 20.12 meters away.", 20.12),
        ("It is 20m ahead.", 20.0),
        ("about 65 ft", 65 * 0.3048),
        ("150 cm", 1.5),
        ("2 km", 2000.0),
        # The first unit class in the order inch, foot, cm, m, km wins, not the first number:
        ("2 km and then 5 m", 5.0),
        ("20 m at 30 degrees, 12 in front", 12 * 0.0254),
        # "m/s" is never metres; signs are not read; a thousands separator splits the number.
        ("moving at 1.5m/s", None),
        ("-5 meters", 5.0),
        ("1,200 m", 200.0),
        ("no number here", None),
    ],
)
def test_published_distance_reading(text, metres):
    got = published_distance_m(text)
    assert got == (None if metres is None else pytest.approx(metres, rel=1e-12))


@pytest.mark.parametrize(
    ("text", "mps"),
    [
        ("Ego speed after 2 seconds is 11.77 m/s.", 11.77),
        ("36 km/h", 10.0),
        ("10 mph", 10 * 1609.34 / 3600),
        ("12 meters per second", 12.0),
        ("7 kph", 7 / 3.6),
        # No word boundary before the unit, no reading.
        ("5m/s", None),
        ("30km/h", None),
        ("It is stationary.", None),
    ],
)
def test_published_speed_reading(text, mps):
    got = published_speed_mps(text)
    assert got == (None if mps is None else pytest.approx(mps, rel=1e-12))


@pytest.mark.parametrize(
    ("text", "deg"),
    [
        ("In 1 second they are 23.54 meters at -24 degrees.", -24.0),
        ("at a 79-degree angle", 79.0),
        ("bearing 12.5°", 12.5),
        ("+8 deg", 8.0),
        ("270 degrees", -90.0),
        ("-190 degrees", 170.0),
        ("180 degrees", 180.0),
        # A Unicode minus is not a sign there; clock words are not degrees.
        ("\u221224 degrees", 24.0),
        ("at 2 o'clock", None),
    ],
)
def test_published_direction_reading(text, deg):
    got = published_direction_deg(text)
    assert got == (None if deg is None else pytest.approx(deg, abs=1e-12))


# ----------------------------------------------------------------------------- hand-made bench


def _record(qid, category, gt_value, region_id=0):
    return {
        "question_id": qid,
        "qa_category": category,
        "gt_value": gt_value,
        "region_id": region_id,
    }


def _write_bench(folder: Path, records, sheet):
    ann = folder / ANNOTATION_DIR
    ann.mkdir(parents=True)
    by_t: dict[int, list] = {}
    for r in records:
        by_t.setdefault(CATEGORIES[r["qa_category"]][0], []).append(r)
    for t, recs in by_t.items():
        (ann / f"strideqa_bench_t{t}.json").write_text(json.dumps(recs, indent=1))
    with open(ann / "annotation_sheet.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["group_id", "object_type", "relation"])
        w.writerows(sheet)


def _pos(t):
    return "ego_distance_data" if t == 0 else f"ego_distance_data_4d_t{t}"


@pytest.fixture
def hand_bench(tmp_path):
    # Group 0 (Overtake): 10 m at 0 deg at every t. Group 1 (Oncoming_Pass): 20 m at -30 deg.
    records = []
    for g, (d, b) in enumerate([(10.0, 0.0), (20.0, -30.0)]):
        for t in range(4):
            records.append(
                _record(f"q{g * 10 + t:08d}_g{g:05d}", _pos(t), {"distance": d, "direction": b})
            )
        records.append(_record(f"q{g * 10 + 5:08d}_g{g:05d}", "ego_speed_data", {"velocity": 0.4}))
    _write_bench(tmp_path / "bench", records, [["g00000", "car", "Overtake"],
                                               ["g00001", "truck", "Oncoming_Pass"]])  # fmt: skip
    return tmp_path / "bench"


def _write_preds(path: Path, preds: dict[str, str]):
    path.write_text(json.dumps([{"question_id": q, "pred": p} for q, p in preds.items()], indent=2))
    return path


def test_metrics_on_hand_made_predictions(hand_bench, tmp_path):
    preds = {
        # Group 0: right at t = 0, 1, 3; at t = 2 the distance is 12.6 > 12.5 (edge 12.5 is in).
        "q00000000_g00000": "10 m at 0 degrees",
        "q00000001_g00000": "12.5 m at 10 degrees",
        "q00000002_g00000": "12.6 m at 0 degrees",
        "q00000003_g00000": "7.5 m at -10 degrees",
        # Ego speed 0.4 m/s: the 0.1 m/s floor; 0.5 is in (|0.5 - 0.4| = 0.09999999999999998).
        "q00000005_g00000": "0.5 m/s",
        # Group 1: right at t = 0 only; t = 3 not answered (missing, a failure in TLC and MLSR).
        "q00000010_g00001": "20 m at -30 degrees",
        "q00000011_g00001": "20 m at 30 degrees",
        "q00000012_g00001": "20 meters",
        "q00000015_g00001": "0.55 m/s",
    }
    r = score_strideqa(hand_bench, _write_preds(tmp_path / "p_t0.json", preds))
    h = headline(r)
    # LSR rows: g0 [1, 1, 0, 1], g1 [1, 0, 0, -]; LSR@t over the rows present at t.
    assert h["LSR@0"] == 1.0 and h["LSR@1"] == 0.5 and h["LSR@2"] == 0.0 and h["LSR@3"] == 1.0
    # MLSR over groups of the fraction of t right (a missing t is wrong): (3/4 + 1/4) / 2.
    assert h["MLSR"] == pytest.approx(0.5)
    assert h["TLC"] == 0.0
    tc = {row["relation"]: row for row in r["temporal_consistency"]}
    assert tc["Overtake"]["TLC@1"] == 1.0 and tc["Overtake"]["TLC@2"] == 0.0
    assert tc["Oncoming_Pass"]["MLSR"] == pytest.approx(0.25)
    ego = {e["time"]: e["success_rate"] for e in r["success_rates"]["ego_velocity"]}
    assert ego[0] == 0.5
    direction = r["success_rates"]["target_direction"]
    assert [e["sample_size"] for e in direction] == [2, 2, 2, 1, 7]
    assert r["missing"] == 1 and r["missing_ids"] == ["q00000013_g00001"]
    assert r["unparsed"] == 1  # "20 meters" has no direction
    assert report_percent(1 / 3) == "33.3" and report_percent(0.0625) == "6.3"


def test_paper_tolerances_and_parser_are_named_options(hand_bench, tmp_path):
    preds = {"q00000001_g00000": "12.5 m at 10 degrees", "q00000005_g00000": "0.8 m/s"}
    path = _write_preds(tmp_path / "p_t1.json", preds)
    published = score_strideqa(hand_bench, path, tmp_path / "a.json")
    paper = score_strideqa(hand_bench, path, tmp_path / "b.json", "paper", "autolabel")
    assert headline(published)["LSR@1"] == 1.0
    assert headline(paper)["LSR@1"] == 0.0  # 25 % and 10 degrees are edges the paper excludes
    # 0.8 for 0.4 m/s: out under the 0.1 m/s floor, in under the paper's 0.5 m/s.
    assert published["success_rates"]["ego_velocity"][0]["success_rate"] == 0.0
    assert paper["success_rates"]["ego_velocity"][0]["success_rate"] == 1.0


def test_bad_prediction_files_name_file_and_line(hand_bench, tmp_path):
    bad = tmp_path / "bad_t0.json"
    bad.write_text('[\n {"question_id": "q00000000_g00000", "pred": "1 m"},\n {"pred": "2 m"}\n]')
    with pytest.raises(ValueError, match=r"bad_t0.json:3: record has no 'question_id'"):
        read_predictions(bad)
    bad.write_text('[\n {"question_id": "q00000000_g00000", "pred": 12.5}\n]')
    with pytest.raises(ValueError, match=r"bad_t0.json:2: 'pred' of 'q00000000_g00000' is a float"):
        read_predictions(bad)
    bad.write_text(
        '[{"question_id": "q00000000_g00000", "pred": "1 m"},\n'
        ' {"question_id": "q00000000_g00000", "pred": "2 m"}]'
    )
    with pytest.raises(
        ValueError, match=r"bad_t0.json:2: question 'q00000000_g00000' answered twice"
    ):
        read_predictions(bad)
    bad.write_text('{"question_id": "q00000000_g00000", "pred": "1 m"}\n')
    with pytest.raises(ValueError, match=r"bad_t0.json:1: expected a JSON array"):
        read_predictions(bad)
    bad.write_text('[\n {"question_id": "q00000000_g00000", "pred": "1 m"},\n {"question_id": ]')
    with pytest.raises(ValueError, match=r"bad_t0.json:3: not valid JSON"):
        read_predictions(bad)
    bad.write_text('[\n {"question_id": "q00000099_g00000", "pred": "1 m"}\n]')
    with pytest.raises(ValueError, match=r"bad_t0.json:2: question 'q00000099_g00000' is not in"):
        score_strideqa(hand_bench, bad)
    with pytest.raises(FileNotFoundError, match="no \\*_t\\*.json"):
        read_predictions(tmp_path / "bench")


# ----------------------------------------------------------------------------- the export


@pytest.fixture(scope="module")
def stq(tmp_path_factory):
    root = tmp_path_factory.mktemp("stq")
    scene = small_scene(seed=3, n_objects=10)
    write_camera_images(root / "data", scene)
    write_qa_run(root / "run", scene, root / "data")
    summary = export_strideqa(root / "run", root / "bench")
    return root, summary


def test_export_writes_the_files_their_benchmark_reads(stq):
    root, summary = stq
    bench = root / "bench"
    assert summary["groups"] >= 3 and summary["questions"] == 12 * summary["groups"]
    files = sorted(p.name for p in (bench / ANNOTATION_DIR).iterdir())
    assert files == ["annotation_sheet.csv"] + [f"strideqa_bench_t{t}.json" for t in range(4)]
    with open(bench / ANNOTATION_DIR / "annotation_sheet.csv") as f:
        sheet = {row["group_id"]: row for row in csv.DictReader(f)}
    assert len(sheet) == summary["groups"]
    for t in range(4):
        recs = json.loads((bench / ANNOTATION_DIR / f"strideqa_bench_t{t}.json").read_text())
        for rec in recs:
            assert re.fullmatch(r"q\d{8}_g\d{5}", rec["question_id"])
            assert "g" + rec["question_id"].split("_g")[1] in sheet
            assert CATEGORIES[rec["qa_category"]][0] == t
            assert set(rec["unit"]) == set(rec["gt_value"])
            assert len(rec["images"]) == 4 and set(rec["rle"]) == set(RLE_BUCKETS)
            for img, bucket in zip(rec["images"], RLE_BUCKETS, strict=True):
                w, h = Image.open(bench / img).size
                mask = mask_util.decode(rec["rle"][bucket])
                assert mask.shape == (h, w) and mask.any()
    # Oracle predictions are the reference answers: 100 % by both parsers.
    for parser in ("published", "autolabel"):
        r = score_strideqa(bench, bench / "baselines" / "oracle", root / f"o-{parser}.json",
                           parser=parser)  # fmt: skip
        assert all(v == 1.0 for v in headline(r).values()), parser
        assert r["missing"] == 0
    const = score_strideqa(bench, bench / "baselines" / "constant", root / "c.json")
    assert headline(const)["MLSR"] < 1.0


def test_export_is_deterministic(stq, tmp_path):
    root, _ = stq
    export_strideqa(root / "run", tmp_path / "again")
    for p in sorted((root / "bench").rglob("*")):
        if p.is_file() and "scores" not in p.name:
            assert (
                tmp_path / "again" / p.relative_to(root / "bench")
            ).read_bytes() == p.read_bytes()


def test_cli_scores_strideqa_predictions(stq):
    from autolabel.cli import app

    root, _ = stq
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "score",
            str(root / "bench"),
            str(root / "bench/baselines/oracle"),
            "--out",
            str(root / "cli.json"),
        ],  # fmt: skip
    )
    assert result.exit_code == 0, result.output
    assert "MLSR: 1.0000 (100.0 %)" in result.output
    bad = root / "bad_t0.json"
    bad.write_text('[{"question_id": 3, "pred": "x"}]')
    result = CliRunner().invoke(app, ["bench", "score", str(root / "bench"), str(bad)])
    assert result.exit_code == 1
    assert "bad_t0.json:1: question_id must be a string" in result.output


# ----------------------------------------------------------------------------- the official scorer


def _equivalence_module():
    spec = importlib.util.spec_from_file_location(
        "strideqa_equivalence", REPO / "bench" / "strideqa_equivalence.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(
    not os.environ.get("STRIDEQA_BENCH_ROOT"),
    reason="STRIDEQA_BENCH_ROOT does not name a STRIDE-QA-Bench checkout",
)
def test_published_scorer_gives_the_same_success_and_metrics(stq, tmp_path):
    root, _ = stq
    bench = root / "bench"
    eq = _equivalence_module()
    from bench.strideqa_answers import varied_predictions

    official_root = Path(os.environ["STRIDEQA_BENCH_ROOT"])
    python = os.environ.get("STRIDEQA_BENCH_PYTHON", sys.executable)
    sets = [bench / "baselines" / n for n in ("oracle", "constant", "random")]
    for seed in range(2):
        folder = tmp_path / f"varied-{seed}"
        folder.mkdir()
        for t in range(4):
            recs = json.loads((bench / ANNOTATION_DIR / f"strideqa_bench_t{t}.json").read_text())
            preds = varied_predictions(recs, seed * 10 + t)
            if seed == 1:  # a partial file: every third answer left out
                preds = preds[::3]
            (folder / f"varied_t{t}.json").write_text(json.dumps(preds))
        sets.append(folder)
    for k, folder in enumerate(sets):
        official = eq.run_official(
            official_root, python, bench, folder, tmp_path / f"off-{k}", plots=False
        )
        ours = score_strideqa(bench, folder, tmp_path / f"ours-{k}.json")
        cmp = eq.compare(official, ours)
        assert cmp["agree"] == cmp["rows"], (folder, cmp["disagree_examples"])
        for name, m in cmp["metrics"].items():
            assert m["printed_equal"] and m["equal_8dp"], (folder, name, m)
