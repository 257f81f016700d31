"""nuScenes detection submission files: written as the devkit reads them, read back with clear errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from nuscenes.eval.common.data_classes import EvalBoxes
from nuscenes.eval.common.loaders import load_prediction
from nuscenes.eval.detection.data_classes import DetectionBox
from pyquaternion import Quaternion

from autolabel.boxes import Boxes3D
from autolabel.classes import class_index
from detectors.detection_results import (
    MAX_BOXES_PER_SAMPLE,
    SubmissionFormatError,
    attribute_names,
    load_detection_submission,
    merge_detection_submissions,
    submission_meta,
    write_detection_submission,
)


def _boxes(n: int = 4, seed: int = 0) -> Boxes3D:
    rng = np.random.default_rng(seed)
    names = ["car", "pedestrian", "barrier", "bicycle", "bus", "traffic_cone"]
    return Boxes3D(
        center_m=rng.uniform(-50, 50, (n, 3)) + [600.0, 1600.0, 0.0],
        size_wlh_m=rng.uniform(0.5, 4.0, (n, 3)),
        yaw_rad=rng.uniform(-np.pi, np.pi, n),
        velocity_mps=rng.normal(0, 3, (n, 2)),
        label=[class_index(names[i % len(names)]) for i in range(n)],
        score=rng.uniform(0, 1, n),
        frame="global",
    )


def test_attributes_follow_speed_and_class():
    boxes = Boxes3D(
        center_m=np.zeros((8, 3)),
        size_wlh_m=np.ones((8, 3)),
        yaw_rad=np.zeros(8),
        velocity_mps=[[1, 0], [0.1, 0], [np.nan, np.nan], [0, 2], [0, 0], [3, 0], [0, 0], [5, 5]],
        label=[
            class_index(n)
            for n in ["car", "car", "car", "bus", "bus", "bicycle", "pedestrian", "barrier"]
        ],
    )
    assert attribute_names(boxes).tolist() == [
        "vehicle.moving",
        "vehicle.parked",
        "vehicle.parked",
        "vehicle.moving",
        "vehicle.stopped",
        "cycle.with_rider",
        "pedestrian.standing",
        "",
    ]


def test_written_file_is_what_the_devkit_loads(tmp_path):
    boxes = _boxes(6)
    empty = Boxes3D.empty("global")
    path = write_detection_submission(
        tmp_path / "det.json", ["tok-a", "tok-b"], [boxes, empty], submission_meta(use_lidar=True)
    )
    loaded, meta = load_prediction(str(path), MAX_BOXES_PER_SAMPLE, DetectionBox)
    assert meta["use_lidar"] is True and meta["use_camera"] is False
    assert set(loaded.sample_tokens) == {"tok-a", "tok-b"}
    assert loaded["tok-b"] == []
    by_score = np.argsort(-boxes.score.astype(np.float64), kind="stable")
    for det_box, i in zip(loaded["tok-a"], by_score, strict=True):
        assert det_box.translation == pytest.approx(boxes.center_m[i], abs=1e-5)
        assert det_box.size == pytest.approx(boxes.size_wlh_m[i], abs=1e-5)
        # Independent check of the quaternion: pyquaternion's yaw about +z.
        expected_q = Quaternion(axis=[0, 0, 1], radians=boxes.yaw_rad[i])
        assert abs(np.dot(det_box.rotation, expected_q.elements)) == pytest.approx(1.0, abs=1e-6)
        assert det_box.velocity == pytest.approx(boxes.velocity_mps[i], abs=1e-5)
        assert det_box.detection_name == boxes.class_name[i]
        assert det_box.detection_score == pytest.approx(float(boxes.score[i]), abs=1e-6)


def test_round_trip_and_byte_identical(tmp_path):
    boxes = _boxes(5, seed=3)
    boxes.velocity_mps[0] = np.nan
    meta = submission_meta(use_lidar=True)
    a = write_detection_submission(tmp_path / "a.json", ["t"], [boxes], meta)
    b = write_detection_submission(tmp_path / "b.json", ["t"], [boxes], meta)
    assert a.read_bytes() == b.read_bytes()
    loaded, _ = load_detection_submission(a)
    back = loaded["t"]
    order = np.argsort(-boxes.score.astype(np.float64), kind="stable")
    np.testing.assert_allclose(back.center_m, boxes.center_m[order], atol=1e-5)
    np.testing.assert_allclose(back.size_wlh_m, boxes.size_wlh_m[order], atol=1e-5)
    np.testing.assert_allclose(np.cos(back.yaw_rad - boxes.yaw_rad[order]), 1.0, atol=1e-9)
    np.testing.assert_array_equal(back.label, boxes.label[order])
    # Unknown velocity is written as 0 m/s (the format has no "unknown").
    np.testing.assert_allclose(back.velocity_mps[order == 0], 0.0)


def test_at_most_500_boxes_per_sample_highest_scores_kept(tmp_path):
    boxes = _boxes(MAX_BOXES_PER_SAMPLE + 20, seed=1)
    path = write_detection_submission(tmp_path / "d.json", ["t"], [boxes], submission_meta())
    records = json.loads(path.read_text())["results"]["t"]
    assert len(records) == MAX_BOXES_PER_SAMPLE
    kept_min = min(r["detection_score"] for r in records)
    dropped = np.sort(boxes.score.astype(np.float64))[:20]
    assert kept_min >= dropped.max() - 1e-6


def test_writer_refuses_non_global_boxes(tmp_path):
    ego = Boxes3D(np.zeros((1, 3)), np.ones((1, 3)), np.zeros(1), frame="ego")
    with pytest.raises(ValueError, match="global"):
        write_detection_submission(tmp_path / "x.json", ["t"], [ego], submission_meta())


def _write(tmp_path, obj, name="bad.json"):
    path = tmp_path / name
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return path


def _record(**over):
    rec = {
        "sample_token": "t",
        "translation": [1.0, 2.0, 0.5],
        "size": [1.9, 4.6, 1.7],
        "rotation": [1.0, 0.0, 0.0, 0.0],
        "velocity": [0.0, 0.0],
        "detection_name": "car",
        "detection_score": 0.5,
        "attribute_name": "vehicle.parked",
    }
    rec.update(over)
    return rec


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "not valid JSON"),
        ([1, 2], "expected a JSON object"),
        ({"meta": {}}, "no 'results' key"),
        ({"results": []}, "'results' must map sample tokens"),
        ({"results": {"t": {}}}, r"results\['t'\] must be a list"),
        (
            {"results": {"t": [_record(translation=[1.0, 2.0])]}},
            r"results\['t'\]\[0\]: 'translation'",
        ),
        ({"results": {"t": [_record(), _record(size=[1, None, 2])]}}, r"\[1\]: 'size'"),
        ({"results": {"t": [_record(size=[1.0, -4.0, 2.0])]}}, "non-negative"),
        ({"results": {"t": [_record(rotation=[0, 0, 0, 0])]}}, "zero quaternion"),
        (
            {"results": {"t": [_record(detection_name="lorry")]}},
            "'lorry' is not a nuScenes detection class",
        ),
        (
            {"results": {"t": [_record(detection_score="high")]}},
            "'detection_score' must be a finite number",
        ),
        (
            {"results": {"t": [_record(attribute_name="vehicle.flying")]}},
            "not a nuScenes attribute",
        ),
        ({"results": {"t": [_record(sample_token="u")]}}, "differs from its key"),
        ({"results": {"t": [_record(velocity=[1.0])]}}, "'velocity' must be a list of 2 numbers"),
        ({"results": {"t": [{"translation": [0, 0, 0]}]}}, "missing 'size'"),
    ],
)
def test_malformed_file_gives_clear_error(tmp_path, content, message):
    path = _write(tmp_path, content)
    with pytest.raises(SubmissionFormatError, match=message) as err:
        load_detection_submission(path)
    assert str(path) in str(err.value)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(SubmissionFormatError, match="not found"):
        load_detection_submission(tmp_path / "nope.json")


def test_null_velocity_is_unknown(tmp_path):
    path = _write(tmp_path, {"meta": {}, "results": {"t": [_record(velocity=[None, None])]}})
    boxes, _ = load_detection_submission(path)
    assert np.isnan(boxes["t"].velocity_mps).all()


def test_merge_ors_meta_and_rejects_duplicate_samples(tmp_path):
    a = write_detection_submission(
        tmp_path / "a.json", ["s1", "s2"], [_boxes(2), _boxes(1)], submission_meta(use_lidar=True)
    )
    b = write_detection_submission(
        tmp_path / "b.json", ["s3"], [_boxes(3)], submission_meta(use_camera=True)
    )
    merged = merge_detection_submissions([a, b])
    assert sorted(merged["results"]) == ["s1", "s2", "s3"]
    assert merged["meta"]["use_lidar"] and merged["meta"]["use_camera"]
    assert len(EvalBoxes.deserialize(merged["results"], DetectionBox).all) == 6
    c = write_detection_submission(tmp_path / "c.json", ["s2"], [_boxes(1)], submission_meta())
    with pytest.raises(SubmissionFormatError, match="'s2' is also in"):
        merge_detection_submissions([a, c])
