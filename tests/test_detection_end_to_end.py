"""Synthetic clips -> the pipeline's detect stage with every CPU backend -> the devkit's evaluation."""

from __future__ import annotations

import json

import pytest
from nuscenes import NuScenes
from nuscenes.eval.common.config import config_factory
from nuscenes.eval.detection.evaluate import DetectionEval

from autolabel.config import PipelineConfig
from autolabel.evaluation.detection import evaluate_detection
from autolabel.nuscenes_reader import read_clip
from autolabel.pipeline import StageContext, detect_stage, inputs_digest, run_stages
from autolabel.synth.config import SynthConfig
from autolabel.synth.generator import generate_dataset
from detectors.detection_results import merge_detection_submissions


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    root = tmp_path_factory.mktemp("synth")
    summary = generate_dataset(
        root,
        SynthConfig(scenes=2, seconds=4.0, seed=5, width_px=64, height_px=36, progress=False),
    )
    nusc = NuScenes(version=summary["version"], dataroot=str(root), verbose=False)
    clips = [read_clip(nusc, scene) for scene in summary["scenes"]]
    return root, summary, nusc, clips


def _detect(run_dir, clips, detector: str, options: dict) -> None:
    config = PipelineConfig(detector=detector, detector_options=options)
    for clip in clips:
        outcome = run_stages(
            StageContext(clip, config, run_dir / clip.name),
            [("detect", detect_stage)],
            inputs_digest(clip),
        )
        assert outcome.status == "done", outcome.error


def test_every_cpu_backend_through_the_pipeline_and_the_devkit(tmp_path, synthetic):
    root, summary, nusc, clips = synthetic
    version = summary["version"]
    runs = {
        "gt-exact": ("gt", {"noise": None}),
        "gt-noise": ("gt", {"noise": {"seed": 1}}),
        "lidar": ("lidar", {}),
    }
    scores = {}
    for label, (name, options) in runs.items():
        _detect(tmp_path / label, clips, name, options)
        scores[label] = evaluate_detection(
            tmp_path / label, root, version, nusc=nusc, render_curves=False
        )
    # Re-import the lidar run through the result-file backend: identical metrics.
    merged = merge_detection_submissions(
        sorted((tmp_path / "lidar").glob("*/labels/detection.json"))
    )
    merged_path = tmp_path / "lidar_all.json"
    merged_path.write_text(json.dumps(merged))
    _detect(tmp_path / "results", clips, "results", {"path": str(merged_path)})
    scores["results"] = evaluate_detection(
        tmp_path / "results", root, version, nusc=nusc, render_curves=False
    )

    assert scores["gt-exact"]["mean_ap"] >= 0.99
    assert scores["gt-exact"]["nd_score"] >= 0.99
    assert 0.2 < scores["gt-noise"]["mean_ap"] < 0.95
    assert 0.05 < scores["lidar"]["mean_ap"] < scores["gt-exact"]["mean_ap"]
    assert scores["results"]["mean_ap"] == pytest.approx(scores["lidar"]["mean_ap"])
    assert scores["results"]["nd_score"] == pytest.approx(scores["lidar"]["nd_score"])

    # The devkit, unchanged, on the generator's own split file accepts the merged per-clip files.
    val = summary["splits"]["synth_val"] + summary["splits"]["synth_train"]
    assert sorted(val) == sorted(summary["scenes"])
    split = "synth_val"
    for label in ("gt-exact", "lidar"):
        files = sorted((tmp_path / label).glob("*/labels/detection.json"))
        path = tmp_path / f"{label}_merged.json"
        path.write_text(json.dumps(merge_detection_submissions(files)))
        devkit = DetectionEval(
            nusc, config_factory("detection_cvpr_2019"), str(path), split,
            str(tmp_path / f"devkit_{label}"), verbose=False,
        )  # fmt: skip
        metrics, _ = devkit.evaluate()
        ours = evaluate_detection(
            tmp_path / label, root, version, scenes=summary["splits"][split], nusc=nusc,
            out_dir=tmp_path / f"ours_{label}", render_curves=False,
        )  # fmt: skip
        assert ours["mean_ap"] == pytest.approx(metrics.mean_ap)
        assert ours["nd_score"] == pytest.approx(metrics.nd_score)
