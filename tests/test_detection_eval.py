"""``autolabel eval det``: the devkit's detection metrics on an arbitrary scene list."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest
from nuscenes import NuScenes
from nuscenes.eval.common.config import config_factory
from nuscenes.eval.detection.evaluate import DetectionEval
from nuscenes_fixture import Layout, write_dataset
from typer.testing import CliRunner

from autolabel.cli import app
from autolabel.evaluation.detection import evaluate_detection, format_detection_metrics
from autolabel.nuscenes_reader import read_clip
from detectors.detection_results import merge_detection_submissions, write_detection_submission
from detectors.gt_replay import GtNoiseConfig, GtReplayConfig, GtReplayDetector


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("nusc")
    written = write_dataset(root, Layout(n_scenes=3, n_keyframes=4, points_per_sweep=50))
    nusc = NuScenes(version=written.layout.version, dataroot=str(root), verbose=False)
    return written, nusc


def _run(tmp_path, written, nusc, config: GtReplayConfig):
    run = tmp_path / "run"
    detector = GtReplayDetector(config)
    for scene in written.scene_names:
        clip = read_clip(nusc, scene, max_sweeps=1)
        boxes = detector.detect_clip(clip)
        write_detection_submission(
            run / scene / "labels" / "detection.json",
            [f.token for f in clip.frames],
            boxes,
            detector.meta,
        )
    return run


def test_exact_ground_truth_scores_ap_one_on_every_annotated_class(tmp_path, dataset):
    written, nusc = dataset
    run = _run(tmp_path, written, nusc, GtReplayConfig(noise=None))
    summary = evaluate_detection(run, written.root, written.layout.version, nusc=nusc)
    aps = summary["mean_dist_aps"]
    for name in ("car", "pedestrian", "barrier"):
        assert aps[name] == pytest.approx(1.0)
    # Classes without ground truth score AP 0 in the devkit, so mAP is the mean over all ten.
    assert summary["mean_ap"] == pytest.approx(np.mean(list(aps.values())))
    for name in ("car", "pedestrian", "barrier"):
        assert summary["label_tp_errors"][name]["trans_err"] == pytest.approx(0.0, abs=1e-6)
        assert summary["label_tp_errors"][name]["scale_err"] == pytest.approx(0.0, abs=1e-6)
    # The devkit counts a class without true positives as error 1 in the means.
    assert summary["tp_errors"]["trans_err"] == pytest.approx(7 / 10)
    assert summary["scenes"] == sorted(written.scene_names)
    assert summary["num_samples"] == 3 * 4
    out = run / "eval"
    assert json.loads((out / "det.json").read_text())["mean_ap"] == summary["mean_ap"]
    assert (out / "det_details.json").is_file()
    for plot in ("summary.png", "car_pr.png", "car_tp.png", "dist_pr_2.0.png"):
        assert (out / "det_plots" / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # The PR curves are drawn where the APs put them: at precision 1 across the recall axis for
    # the car (AP 1), on the recall axis for the bus (no ground truth). The last curve drawn is
    # matplotlib's fourth colour (C3 = #d62728).
    def curve_row(name: str) -> tuple[float, int]:
        image = cv2.imread(str(out / "det_plots" / name))[:, :, ::-1].astype(int)
        red = (np.abs(image - [214, 39, 40]).sum(-1) <= 40).sum(axis=1)
        return int(np.argmax(red)) / image.shape[0], int(red.max())

    (car_v, car_px), (bus_v, bus_px) = curve_row("car_pr.png"), curve_row("bus_pr.png")
    assert car_v < 0.2 and bus_v > 0.8 and min(car_px, bus_px) > 300


def test_scene_subset_matches_the_devkit_on_a_custom_split(tmp_path, dataset):
    written, nusc = dataset
    noise = GtNoiseConfig(seed=3, false_positives_per_frame=2.0, miss_prob=0.2)
    run = _run(tmp_path, written, nusc, GtReplayConfig(noise=noise))
    chosen = written.scene_names[:2]
    summary = evaluate_detection(
        run, written.root, written.layout.version, scenes=chosen, nusc=nusc, render_curves=False
    )
    # Reference: the devkit itself, reading a splits.json, on the whole run's merged file.
    merged = merge_detection_submissions(sorted(run.glob("*/labels/detection.json")))
    result_path = tmp_path / "all.json"
    result_path.write_text(json.dumps(merged))
    splits = written.root / written.layout.version / "splits.json"
    splits.write_text(json.dumps({"picked": chosen}))
    try:
        reference = DetectionEval(
            nusc,
            config_factory("detection_cvpr_2019"),
            str(result_path),
            "picked",
            str(tmp_path / "ref"),
            verbose=False,
        )
        metrics, _ = reference.evaluate()
    finally:
        splits.unlink()
    assert summary["num_samples"] == 2 * 4
    assert summary["mean_ap"] == pytest.approx(metrics.mean_ap)
    assert summary["nd_score"] == pytest.approx(metrics.nd_score)
    for key, value in metrics.tp_errors.items():
        assert summary["tp_errors"][key] == pytest.approx(value, nan_ok=True)
    for name, ap in metrics.mean_dist_aps.items():
        assert summary["mean_dist_aps"][name] == pytest.approx(ap)
    assert 0.0 < summary["mean_ap"] < 0.3


def test_output_is_byte_identical_across_runs(tmp_path, dataset):
    written, nusc = dataset
    run = _run(tmp_path, written, nusc, GtReplayConfig(noise="default"))
    args = (run, written.root, written.layout.version)
    evaluate_detection(*args, out_dir=tmp_path / "a", nusc=nusc, render_curves=False)
    evaluate_detection(*args, out_dir=tmp_path / "b", nusc=nusc, render_curves=False)
    for name in ("det.json", "det_details.json", "det_results.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_missing_results_and_unknown_scenes_are_clear_errors(tmp_path, dataset):
    written, nusc = dataset
    run = _run(tmp_path, written, nusc, GtReplayConfig(noise=None))
    version = written.layout.version
    with pytest.raises(FileNotFoundError, match="scene-9999"):
        evaluate_detection(run, written.root, version, scenes=["scene-9999"], nusc=nusc)
    (run / "scene-9999" / "labels").mkdir(parents=True)
    (run / "scene-9999" / "labels" / "detection.json").write_text('{"meta": {}, "results": {}}')
    with pytest.raises(ValueError, match="no scene"):
        evaluate_detection(run, written.root, version, scenes=["scene-9999"], nusc=nusc)
    scene = written.scene_names[0]
    path = run / scene / "labels" / "detection.json"
    data = json.loads(path.read_text())
    data["results"].pop(next(iter(data["results"])))
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="have no results"):
        evaluate_detection(run, written.root, version, scenes=[scene], nusc=nusc)


def test_cli_prints_devkit_metric_names(tmp_path, dataset):
    written, nusc = dataset
    run = _run(tmp_path, written, nusc, GtReplayConfig(noise=None))
    scenes = ",".join(written.scene_names[:2])
    result = CliRunner().invoke(
        app,
        ["eval", "det", str(run), "--dataroot", str(written.root), "--version",
         written.layout.version, "--scenes", scenes, "--no-plots"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    for name in ("mAP", "mATE", "mASE", "mAOE", "mAVE", "mAAE", "NDS"):
        assert any(line.startswith(f"{name}: ") for line in lines), name
    assert any(line.startswith("car ") and "1.0000" in line for line in lines)
    summary = json.loads((run / "eval" / "det.json").read_text())
    assert format_detection_metrics(summary)[0] == f"mAP: {summary['mean_ap']:.4f}"
