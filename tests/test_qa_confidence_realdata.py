"""Gated QA on real data: PandaSet-002 (never tuned on) holds the issue's precision and yield.

The reference is ground-truth replay (exact annotations) with every answerable question
(``min_confidence: 0``); the candidate is the laptop default (LiDAR geometric detector) with the
default gate. Without the gate (before issue 16) 62 % of its answers agreed with ground truth.
With the refine stage, the roof-heading detector, the gate at its default (0.6, chosen with the
confidence model on synthetic validation seeds 11 and 12), the geometric segmenter and no
two-sweep detector velocities, 99.3 % of the emitted answers agree and they cover 77 % of the
ground truth's questions (with the LiDAR-seeded GrabCut segmenter: 98.4 % and 64 %; with it and
the detector's two-sweep velocities: 96.4 % and 47 %). Held: 97 % and 60 % (the issue asks for
95 % and 30 %).
"""

from __future__ import annotations

import dataclasses

import pytest
from realdata import PANDASET, PANDASET_VERSION, realdata_dir, requires_realdata

from autolabel.config import PipelineConfig
from autolabel.evaluation.label_quality import at_threshold, evaluate_label_quality
from autolabel.pipeline import run_pipeline
from autolabel.qa.sampling import DEFAULT_MIN_CONFIDENCE

pytestmark = requires_realdata(PANDASET)


def _run(root, out, detector, min_confidence):
    config = PipelineConfig(detector=detector)
    config.qa = dataclasses.replace(config.qa, min_confidence=min_confidence)
    summary = run_pipeline(root, PANDASET_VERSION, out, config=config, progress=False)
    assert not summary.failed, [c.error for c in summary.failed]
    return out


@pytest.fixture(scope="module")
def pandaset_quality(tmp_path_factory):
    root = realdata_dir(PANDASET)
    tmp = tmp_path_factory.mktemp("pandaset_qa")
    reference = _run(root, tmp / "gt", "gt", 0.0)
    candidate = _run(root, tmp / "lidar", "lidar", DEFAULT_MIN_CONFIDENCE)
    return evaluate_label_quality(reference, candidate, out_path=False)


def test_lidar_qa_at_the_default_gate_agrees_with_ground_truth_on_pandaset(pandaset_quality):
    r = pandaset_quality
    point = at_threshold(r["curve"]["overall"], DEFAULT_MIN_CONFIDENCE)
    assert point["agreement"] >= 0.97, point
    assert point["yield"] >= 0.60, point
    # Every emitted question is at or above the gate, so the curve's point is the whole run.
    assert point["questions"] == r["overall"]["candidate_questions"]
