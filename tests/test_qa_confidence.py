"""QA confidence: evidence per subject, answer margins, gated emission and its re-check."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from qa_runs import small_scene

from autolabel.attributes import ObjectAttributes, compute_attributes
from autolabel.boxes import Boxes3D
from autolabel.qa import QAConfig, generate_clip_qa, load_templates
from autolabel.qa.check import check_clip_qa
from autolabel.qa.confidence import (
    ConfidenceModel,
    ViewEvidence,
    answer_margin,
    class_evidence,
    heading_evidence,
    observed_evidence,
    overlap_evidence,
    perturbation_set,
    perturbed_attributes,
    row_evidence,
    row_normals,
    score_evidence,
    size_evidence,
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


def test_size_evidence_counts_only_a_size_larger_than_the_class_allows():
    # nuScenes car mean [w, l, h] = [1.95, 4.61, 1.72] (detectors.class_priors), by hand.
    car, pedestrian = np.array([1.95, 4.61, 1.72]), np.array([0.66, 0.73, 1.76])
    model = ConfidenceModel(size_tolerance=0.1)
    sizes = {
        0: [car, car],  # typical: 1
        1: [car * [0.5, 0.6, 0.9]] * 2,  # smaller everywhere (occluded): 1
        2: [car * [1.0, 1.0, np.exp(0.1)]] * 2,  # 10 % (log) too tall: exp(-0.5)
        # Per box the height excess is 0.3 and 0.1 (log): the track's geometric mean is 0.2,
        # and the width 0.1 too wide: exp(-0.5 * (2^2 + 1^2)).
        3: [car * [np.exp(0.1), 1.0, np.exp(0.3)], car * [np.exp(0.1), 1.0, np.exp(0.1)]],
        4: [pedestrian * [1.0, 1.0, np.exp(0.05)]] * 2,  # half a tolerance: exp(-0.125)
    }
    frames = []
    for f in range(2):
        parts = []
        for t, per_frame in sizes.items():
            label = 5 if t == 4 else 0  # DETECTION_CLASSES: car 0, pedestrian 5
            b = _boxes([[10.0 * (t + 1), 5.0]], label=label, track=t)
            parts.append(dataclasses.replace(b, size_wlh_m=np.atleast_2d(per_frame[f])))
        frames.append(Boxes3D.concatenate(parts))
    attrs = _attrs(frames)
    want = {0: 1.0, 1: 1.0, 2: np.exp(-0.5), 3: np.exp(-2.5), 4: np.exp(-0.125)}
    got = size_evidence(attrs, model)
    for t, value in want.items():
        np.testing.assert_allclose(got[attrs.track_id == t], value, rtol=1e-6)
    assert "size" in row_evidence(attrs, None, model).parts


def test_observed_evidence_halves_every_two_keyframes_of_a_filled_gap(tmp_path):
    """Track 7 is observed at keyframes 0, 1 and 5 and filled in at 2-4 (a gap of 3); track 8 is
    observed at 0 and 2 and filled in at 1 (a gap of 1); track 9 is never refined away."""
    from autolabel.refine.filled_rows import filled_gap

    frames = [
        Boxes3D.concatenate([_boxes([[10.0 + f, 5.0]], track=t) for t in (7, 8, 9)])
        for f in range(6)
    ]
    frames[3] = frames[3][frames[3].track_id != 8]  # track 8 ends at keyframe 2
    frames[4] = frames[4][frames[4].track_id != 8]
    frames[5] = frames[5][frames[5].track_id != 8]
    observed = [
        f[~(((f.track_id == 7) & (i in (2, 3, 4))) | ((f.track_id == 8) & (i == 1)))]
        for i, f in enumerate(frames)
    ]
    attrs = _attrs(frames)
    attrs.filled_gap = filled_gap(attrs, observed)
    want_gap = {7: [0, 0, 3, 3, 3, 0], 8: [0, 1, 0], 9: [0] * 6}
    for t, gaps in want_gap.items():
        assert attrs.filled_gap[attrs.track_id == t].tolist() == gaps
    got = observed_evidence(attrs, ConfidenceModel(fill_gap_half=2.0))
    # 0.5 ** (3 / 2) = 0.35355..., 0.5 ** (1 / 2) = 0.70711...: one missed keyframe passes 0.6.
    np.testing.assert_allclose(got[attrs.track_id == 7], [1, 1, 0.3535534, 0.3535534, 0.3535534, 1])
    np.testing.assert_allclose(got[attrs.track_id == 8], [1, 0.7071068, 1], rtol=1e-6)
    assert "observed" in row_evidence(attrs, None, ConfidenceModel()).parts
    # The column survives the file, and a file written before it existed reads as all observed.
    path = attrs.write_parquet(tmp_path / "attributes.parquet")
    assert ObjectAttributes.read_parquet(path).filled_gap.tolist() == attrs.filled_gap.tolist()
    import pyarrow.parquet as pq

    pq.write_table(pq.read_table(path).drop(["filled_gap"]), tmp_path / "old.parquet")
    assert not ObjectAttributes.read_parquet(tmp_path / "old.parquet").filled_gap.any()
    with pytest.raises(ValueError, match="fill_gap_half"):
        ConfidenceModel(fill_gap_half=0.0)


def test_overlap_evidence_is_the_share_of_the_footprint_inside_other_boxes():
    def box(x, y, length, width, track, yaw=0.0):
        b = _boxes([[x, y]], track=track, yaw=yaw)
        return dataclasses.replace(b, size_wlh_m=np.array([[width, length, 1.5]]))

    frames = [
        # A 4 x 2 m car at x 8..12; a 2 x 1 m box at x 10.5..12.5 (1.5 m x 1 m of it inside the
        # car); a box standing alone; a 2 x 2 m box turned 45 degrees whose corner reaches 0.5 m
        # into the free box's 2 x 2 m square (a triangle of 0.25 m^2).
        [box(10.0, 0.0, 4.0, 2.0, 0), box(11.5, 0.0, 2.0, 1.0, 1), box(30.0, 0.0, 2.0, 2.0, 2),
         box(30.0 + 1.0 + np.sqrt(2.0) - 0.5, 0.0, 2.0, 2.0, 3, yaw=np.pi / 4)],
        # The small box moved away: nothing overlaps.
        [box(10.0, 0.0, 4.0, 2.0, 0), box(20.0, 0.0, 2.0, 1.0, 1), box(30.0, 0.0, 2.0, 2.0, 2),
         box(40.0, 0.0, 2.0, 2.0, 3)],
    ]  # fmt: skip
    attrs = _attrs([Boxes3D.concatenate(f) for f in frames])
    got = overlap_evidence(attrs)
    want = {
        0: 1.0 - (1.5 / 8.0) / 2,
        1: 1.0 - (1.5 / 2.0) / 2,
        2: 1.0 - (0.25 / 4.0) / 2,
        3: 1.0 - (0.25 / 4.0) / 2,
    }
    for t, value in want.items():
        np.testing.assert_allclose(got[attrs.track_id == t], value, rtol=1e-6)


def test_heading_evidence_of_a_still_track_is_capped():
    model = ConfidenceModel(static_speed_mps=0.5, static_heading=0.4)
    # Track 0 parked (0 m/s), track 1 drives at 0.3 m/s then 0.6 m/s, track 2 crawls at
    # 0.3 m/s throughout; all keep their heading.
    frames = [
        Boxes3D.concatenate(
            [
                _boxes([[10.0, 5.0]], track=0),
                _boxes([[20.0 + 0.5 * v * f, 5.0]], track=1, velocity=(v, 0.0)),
                _boxes([[30.0 + 0.15 * f, 5.0]], track=2, velocity=(0.3, 0.0)),
            ]
        )
        for f, v in enumerate([0.3, 0.6, 0.6])
    ]
    attrs = _attrs(frames)
    got = heading_evidence(attrs, model)
    np.testing.assert_allclose(got[attrs.track_id == 0], 0.4)
    np.testing.assert_allclose(got[attrs.track_id == 1], 1.0)
    np.testing.assert_allclose(got[attrs.track_id == 2], 0.4)
    # Without a model only the consistency counts.
    np.testing.assert_allclose(heading_evidence(attrs), 1.0)


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
    with pytest.raises(ValueError, match="static_heading"):
        ConfidenceModel(static_heading=1.5)
    with pytest.raises(ValueError, match="size_tolerance"):
        ConfidenceModel(size_tolerance=0.0)
    with pytest.raises(ValueError, match="confidence: .*score_floor"):
        QAConfig(confidence={"score_floor": 0.9, "score_full": 0.5})
