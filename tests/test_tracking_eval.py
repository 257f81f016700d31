"""``autolabel eval track``: the devkit's TrackingEval on a chosen scene list, via an overlay root."""

from __future__ import annotations

import json
import re
import zlib
from pathlib import Path

import pytest
from nuscenes.eval.tracking.utils import category_to_tracking_name
from nuscenes_tables import GtObject, GtScene, write_minimal_nuscenes
from typer.testing import CliRunner

from autolabel.atomic_io import atomic_write_json
from autolabel.cli import app
from autolabel.evaluation.tracking import evaluate_tracking
from trackers.tracking_results import LIDAR_ONLY_META

VERSION = "v1.0-test-eval"


def _scene(name: str) -> GtScene:
    return GtScene(
        name,
        10,
        [
            GtObject("vehicle.car", (5.0, -6.0), (6.0, 0.0)),
            GtObject("vehicle.car", (5.0, 6.0), (6.0, 0.0)),
            GtObject("human.pedestrian.adult", (10.0, 12.0), (0.0, -1.2), (0.6, 0.7, 1.8)),
            # Seen in keyframes 0-3 and 7-9 only (the devkit interpolates the gap in the truth).
            GtObject(
                "vehicle.truck", (-20.0, 0.0), (3.0, 0.0), (2.5, 8.0, 3.0), (0, 1, 2, 3, 7, 8, 9)
            ),
        ],
    )


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("nuscenes")
    truth = write_minimal_nuscenes(root, VERSION, [_scene("scene-0001"), _scene("scene-0002")])
    return root, truth


def _write_run(run, truth, swap_scene: str | None = None, swap_from_frame: int = 5):
    """Tracks = the ground truth, except in ``swap_scene``: the two cars swap track ids from
    ``swap_from_frame`` on, and the pedestrian is missed in keyframes 4-5 and comes back under a
    new id (a fragmentation and a switch that the devkit's track interpolation cannot bridge)."""
    for scene, data in truth.items():
        instances = sorted({b[0] for frame in data["boxes"] for b in frame})
        cars = [
            i
            for i in instances
            if any(b[0] == i and b[1] == "vehicle.car" for f in data["boxes"] for b in f)
        ]
        results = {}
        for f, (token, boxes) in enumerate(zip(data["sample_tokens"], data["boxes"], strict=True)):
            entries = []
            for instance, category, translation, size, rotation in boxes:
                track = instance
                if scene == swap_scene and f >= swap_from_frame and instance in cars:
                    track = cars[1 - cars.index(instance)]
                if scene == swap_scene and category.startswith("human"):
                    if f in (4, 5):
                        continue
                    track = instance + ("-late" if f > 5 else "")
                entries.append(
                    {
                        "sample_token": token,
                        "translation": translation,
                        "size": size,
                        "rotation": rotation,
                        "velocity": [0.0, 0.0],
                        "tracking_id": track,
                        "tracking_name": category_to_tracking_name(category),
                        "tracking_score": 0.9,
                    }
                )
            results[token] = entries
        atomic_write_json(
            run / scene / "labels" / "tracking.json", {"meta": LIDAR_ONLY_META, "results": results}
        )


def pdf_text(path: Path) -> str:
    """The text matplotlib wrote into a PDF: the strings of its ``TJ`` operators, one a line
    (its page streams are zlib-compressed; no PDF library is needed for that)."""
    data = path.read_bytes()
    streams = re.findall(rb"stream\r?\n(.*?)\r?\nendstream", data, re.S)
    lines = []
    for stream in streams:
        try:
            content = zlib.decompress(stream)
        except zlib.error:  # a font or image stream
            continue
        for array in re.findall(rb"\[(.*?)\] TJ", content, re.S):
            lines.append(b"".join(re.findall(rb"\((.*?)\)", array)).decode("latin-1"))
    return "\n".join(lines)


def test_perfect_tracks_score_amota_one_on_the_chosen_scene(dataset, tmp_path):
    root, truth = dataset
    run = tmp_path / "run"
    _write_run(run, truth, swap_scene="scene-0002")
    report = evaluate_tracking(run, root, VERSION, scenes=["scene-0001"], render_curves=True)
    m = report["metrics"]
    assert m["amota"] == pytest.approx(1.0)
    assert m["amotp"] == pytest.approx(0.0, abs=1e-9)
    assert m["recall"] == pytest.approx(1.0)
    assert m["ids"] == 0 and m["frag"] == 0 and m["fp"] == 0 and m["fn"] == 0
    # Ground-truth boxes: 2 cars x 10, pedestrian x 10, truck x 10 (3 of them interpolated by
    # the devkit); "gt" is averaged over the 3 classes present.
    assert report["label_metrics"]["gt"]["car"] == 20
    assert report["label_metrics"]["gt"]["truck"] == 10
    assert m["gt"] == pytest.approx(40 / 3)
    assert report["label_metrics"]["amota"]["bus"] is None  # no bus in the truth
    assert report["scenes"] == ["scene-0001"]
    saved = json.loads((run / "eval" / "track.json").read_text())
    assert saved["metrics"] == m
    assert (run / "eval" / "track" / "metrics_summary.json").is_file()
    # The devkit's summary plot: a panel per metric against recall, each with a legend naming
    # the classes the truth has (and no other).
    lines = pdf_text(run / "eval" / "track" / "plots" / "summary.pdf").splitlines()
    assert {"MOTA", "MOTAR", "MOTP", "IDS", "FRAG"} <= set(lines), lines[:40]
    legends = "".join(line for line in lines if line.isalpha() and line[0].isupper())
    assert legends.count("Car") == legends.count("Pedestrian") == legends.count("Truck") >= 5
    assert "Bus" not in legends
    # Nothing was written into the dataset.
    assert not (root / VERSION / "splits.json").exists()


def test_identity_switches_are_counted(dataset, tmp_path):
    root, truth = dataset
    run = tmp_path / "run"
    _write_run(run, truth, swap_scene="scene-0002")
    report = evaluate_tracking(run, root, VERSION, render_curves=False)
    # Both cars switch once (they are 12 m apart, beyond the 2 m match distance); the pedestrian
    # is lost for 2 keyframes (2 misses, 1 fragmentation) and switches id once.
    assert report["label_metrics"]["ids"]["car"] == 2
    assert report["label_metrics"]["ids"]["pedestrian"] == 1
    assert report["label_metrics"]["frag"]["pedestrian"] == 1
    assert report["label_metrics"]["fn"]["pedestrian"] == 2
    assert report["label_metrics"]["frag"]["car"] == 0
    assert report["metrics"]["ids"] == 3
    assert report["metrics"]["amota"] < 1.0
    assert report["scenes"] == ["scene-0001", "scene-0002"]


def test_cli_prints_devkit_names(dataset, tmp_path):
    root, truth = dataset
    run = tmp_path / "run"
    _write_run(run, truth)
    args = ["eval", "track", str(run), "--dataroot", str(root), "--version", VERSION]
    result = CliRunner().invoke(app, [*args, "--scenes", "scene-0002", "--no-plots"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "AMOTA: 1.000" in lines and "IDS: 0" in lines and "AMOTP: 0.000" in lines
    missing = CliRunner().invoke(app, [*args, "--scenes", "scene-0003"])
    assert missing.exit_code == 1 and "scene-0003" in missing.output


def test_missing_samples_are_reported(dataset, tmp_path):
    root, truth = dataset
    run = tmp_path / "run"
    _write_run(run, truth)
    path = run / "scene-0001" / "labels" / "tracking.json"
    data = json.loads(path.read_text())
    data["results"].pop(truth["scene-0001"]["sample_tokens"][3])
    path.write_text(json.dumps(data))
    with pytest.raises(
        ValueError, match=r"scene-0001.*1 of scene scene-0001's samples are missing"
    ):
        evaluate_tracking(run, root, VERSION, scenes=["scene-0001"], render_curves=False)
