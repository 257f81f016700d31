"""QA confidence: evidence per subject, answer margins, gated emission and its re-check."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from qa_runs import small_scene

from autolabel.attributes import compute_attributes
from autolabel.boxes import Boxes3D
from autolabel.qa import QAConfig, generate_clip_qa, load_templates
from autolabel.qa.check import check_clip_qa
from autolabel.qa.confidence import (
    ConfidenceModel,
    ViewEvidence,
    answer_margin,
    class_evidence,
    perturbation_set,
    perturbed_attributes,
    row_evidence,
    row_normals,
    score_evidence,
    track_evidence,
    velocity_evidence,
)
from autolabel.qa.quantities import QuantityInput
from calib.se3 import SE3

EXACT = ConfidenceModel(
    position_sigma_m=0.0,
    position_sigma_per_m=0.0,
    height_sigma_m=0.0,
    size_sigma_frac=0.0,
    yaw_sigma_rad=0.0,
    velocity_sigma_mps=0.0,
)


def _boxes(xy, label=0, score=1.0, track=0, velocity=(0.0, 0.0), yaw=0.0) -> Boxes3D:
    xy = np.atleast_2d(np.asarray(xy, dtype=np.float64))
    n = len(xy)
    return Boxes3D(
        center_m=np.c_[xy, np.full(n, 0.8)],
        size_wlh_m=np.tile([1.9, 4.6, 1.6], (n, 1)),
        yaw_rad=np.full(n, yaw),
        velocity_mps=np.tile(np.asarray(velocity, dtype=np.float64), (n, 1)),
        label=np.full(n, label, dtype=np.int16),
        score=np.full(n, score, dtype=np.float32),
        track_id=np.full(n, track, dtype=np.int64),
        frame="global",
    )


def _attrs(frames):
    """Attributes of a clip at 2 Hz whose ego stands at the origin; ``frames``: per frame Boxes3D."""
    t = 0.5 * np.arange(len(frames))
    poses = [SE3.identity()] * len(frames)
    return compute_attributes(t, poses, frames)


def test_zero_error_model_reproduces_every_derived_column():
    scene = small_scene()
    attrs = scene.attrs
    same = perturbed_attributes(attrs, EXACT, row_normals(attrs, 0, "c", 1)[0])
    for name in (
        "distance_m", "bearing_deg", "clock", "is_left", "is_right", "is_front", "is_behind",
        "volume_m3", "volume_ratio_to_ego", "speed_mps", "future_distance_m", "future_bearing_deg",
        "future_clock", "future_speed_mps",
    ):  # fmt: skip
        np.testing.assert_allclose(
            np.asarray(getattr(same, name), dtype=float),
            np.asarray(getattr(attrs, name), dtype=float),
            atol=1e-9,
            err_msg=name,
        )


def test_distance_margin_is_the_chance_the_answer_stays_within_tolerance():
    # One car 2 m ahead; position error 0.5 m per axis, nothing else.
    attrs = _attrs([_boxes([[2.0, 0.0]])] * 4)
    model = dataclasses.replace(EXACT, position_sigma_m=0.5, samples=2000)
    qt = load_templates().types["ego_distance"]
    rows = np.array([[attrs.row_of(np.array([0]), np.array([0]))[0]]])

    def make_input(a):
        return QuantityInput(
            attrs=a,
            rows=rows,
            frame_index=np.array([0]),
            horizon_s=np.zeros(1),
            cameras=np.full((1, 2), -1),
            visible=np.ones((1, 1, 1), bool),
            channels=("CAM_FRONT",),
            params=qt.params,
        )

    base = qt.quantity(make_input(attrs))
    margin = answer_margin(qt, base, make_input, perturbation_set(attrs, model, "c"))
    # Independently: P(|hypot(2 + e1, e2) - 2| < 0.25 * 2) for e ~ N(0, 0.5^2) per axis.
    e = np.random.default_rng(7).normal(0.0, 0.5, (1_000_000, 2))
    expected = np.mean(np.abs(np.hypot(2 + e[:, 0], e[:, 1]) - 2.0) < 0.5)
    assert margin[0] == pytest.approx(expected, abs=0.035)
    # Far from the tolerance's edge (no error at all): always the same answer.
    exact = answer_margin(qt, base, make_input, perturbation_set(attrs, EXACT, "c"))
    assert exact[0] == 1.0


def test_track_score_and_class_evidence():
    model = ConfidenceModel(full_track_frames=4, score_floor=0.2, score_full=0.6)
    frames = []
    # Track 0: 6 frames, present in all, score 0.5, class car then 2 x truck.
    # Track 1: frames 0, 1 and 5 (a gap of 3 frames), score 0.1.
    for f in range(6):
        label = 0 if f < 4 else 1
        b0 = _boxes([[10.0 + f, 0.0]], label=label, score=0.5, track=0)
        parts = [b0]
        if f in (0, 1, 5):
            parts.append(_boxes([[0.0, 10.0]], score=0.1, track=1))
        frames.append(Boxes3D.concatenate(parts))
    attrs = _attrs(frames)
    t0 = attrs.track_id == 0
    # Length 6 >= 4 and no gap: 1; track 1: 3 rows over a span of 6 frames: 3/4 * 3/6.
    np.testing.assert_allclose(track_evidence(attrs, model)[t0], 1.0)
    np.testing.assert_allclose(track_evidence(attrs, model)[~t0], 0.75 * 0.5)
    # Mean score 0.5 -> (0.5 - 0.2) / 0.4; 0.1 -> below the floor.
    np.testing.assert_allclose(score_evidence(attrs, model)[t0], 0.75)
    np.testing.assert_allclose(score_evidence(attrs, model)[~t0], 0.0)
    # 4 of 6 rows with the most frequent class.
    np.testing.assert_allclose(class_evidence(attrs)[t0], 4 / 6)
    np.testing.assert_allclose(class_evidence(attrs)[~t0], 1.0)


def test_velocity_evidence_compares_velocity_with_displacement():
    model = ConfidenceModel(velocity_scale_mps=2.0)
    # Moving 1 m per 0.5 s = 2 m/s along x; one track says 2 m/s, the other 5 m/s.
    frames = [
        Boxes3D.concatenate(
            [
                _boxes([[1.0 * f, 0.0]], track=0, velocity=(2.0, 0.0)),
                _boxes([[1.0 * f, 20.0]], track=1, velocity=(5.0, 0.0)),
            ]
        )
        for f in range(5)
    ]
    attrs = _attrs(frames)
    ev = velocity_evidence(attrs, model)
    np.testing.assert_allclose(ev[attrs.track_id == 0], 1.0, atol=1e-9)
    np.testing.assert_allclose(ev[attrs.track_id == 1], np.exp(-((3.0 / 2.0) ** 2)), atol=1e-9)


def test_view_evidence_takes_the_best_kept_view():
    attrs = _attrs([_boxes([[10.0, 0.0]])] * 2)
    views = ViewEvidence(
        frame_index=np.array([0, 0, 0, 1]),
        track_id=np.array([0, 0, 0, 0]),
        keep=np.array([True, True, False, False]),
        mask_score=np.array([0.4, 0.6, 0.99, 0.99]),
        lidar_points=np.array([8, 8, 8, -1]),
    )
    model = ConfidenceModel(lidar_points_scale=8.0, mask_score_full=0.8)
    ev = row_evidence(attrs, views, model)
    row0 = attrs.row_of(np.array([0]), np.array([0]))[0]
    row1 = attrs.row_of(np.array([1]), np.array([0]))[0]
    assert ev.parts["lidar"][row0] == pytest.approx(1 - np.exp(-1.0))
    assert ev.parts["mask"][row0] == pytest.approx(0.6 / 0.8)  # the rejected view does not count
    # No kept view: no mask evidence; no LiDAR count: not judged on it.
    assert ev.parts["mask"][row1] == 0.0 and ev.parts["lidar"][row1] == 1.0


def test_gated_emission_and_check_qa_re_derive_the_confidence():
    scene = small_scene(seed=3)
    templates = load_templates()
    every = generate_clip_qa(
        scene.attrs, scene.regions, scene.meta, QAConfig(seed=0, min_confidence=0.0), templates
    )
    conf = np.array([r["confidence"] for r in every])
    assert ((conf >= 0) & (conf <= 1)).all() and (conf < 0.9).any() and (conf >= 0.9).any()
    for rec in every:
        parts = [v for reg in rec["regions"] for v in reg["evidence"].values()]
        assert rec["confidence"] == pytest.approx(min([rec["answer_margin"], *parts]), abs=1e-3)
    gated = generate_clip_qa(
        scene.attrs, scene.regions, scene.meta, QAConfig(seed=0, min_confidence=0.9), templates
    )
    assert gated and min(r["confidence"] for r in gated) >= 0.9
    for records in (every, gated):
        assert check_clip_qa(records, scene.attrs, scene.meta.clip, templates) == []
    # A confidence that is not the weakest part, or a changed margin, is a mismatch.
    bad = [dict(r) for r in gated[:3]]
    bad[0]["confidence"] = 0.123
    bad[1]["answer_margin"] = round(bad[1]["answer_margin"] - 0.25, 3)
    fields = {m.field for m in check_clip_qa(bad, scene.attrs, scene.meta.clip, templates)}
    assert {"confidence", "answer_margin"} <= fields


def test_confidence_model_and_threshold_are_validated():
    with pytest.raises(ValueError, match="min_confidence"):
        QAConfig(min_confidence=1.5)
    with pytest.raises(ValueError, match="samples"):
        ConfidenceModel(samples=0)
    with pytest.raises(ValueError, match="confidence: .*score_floor"):
        QAConfig(confidence={"score_floor": 0.9, "score_full": 0.5})
