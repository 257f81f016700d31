"""Tracking submission files: content per the nuScenes format, readable by the devkit, merging."""

from __future__ import annotations

import json

import numpy as np
import pytest
from nuscenes.eval.common.data_classes import EvalBoxes
from nuscenes.eval.tracking.data_classes import TrackingBox
from pyquaternion import Quaternion

from autolabel.boxes import Boxes3D
from autolabel.classes import class_index
from trackers.tracking_results import (
    LIDAR_ONLY_META,
    load_tracking_submission,
    merge_tracking_submissions,
    tracking_submission,
    write_tracking_submission,
)


def _tracks() -> list[Boxes3D]:
    frame0 = Boxes3D(
        center_m=[[10.0, 20.0, 1.0], [3.0, 4.0, 0.5], [7.0, -2.0, 0.9]],
        size_wlh_m=[[1.9, 4.6, 1.7], [0.4, 0.4, 0.9], [0.7, 0.8, 1.8]],
        yaw_rad=[0.3, 0.0, -2.5],
        velocity_mps=[[5.0, 1.0], [0.0, 0.0], [np.nan, np.nan]],
        label=[class_index("car"), class_index("traffic_cone"), class_index("pedestrian")],
        score=[0.9, 0.8, 0.55],
        track_id=[0, 1, 2],
    )
    return [frame0, Boxes3D.empty()]


def test_submission_content_matches_the_format():
    sub = tracking_submission(["s0", "s1"], _tracks())
    assert sub["meta"] == LIDAR_ONLY_META
    assert list(sub["results"]) == ["s0", "s1"] and sub["results"]["s1"] == []
    car, ped = sub["results"]["s0"]  # the traffic cone is not a tracking class
    assert car["tracking_name"] == "car" and ped["tracking_name"] == "pedestrian"
    assert car["tracking_id"] == "0" and ped["tracking_id"] == "2"
    assert car["translation"] == [10.0, 20.0, 1.0] and car["size"] == [1.9, 4.6, 1.7]
    assert car["velocity"] == [5.0, 1.0] and ped["velocity"] == [0.0, 0.0]  # NaN -> 0
    assert car["tracking_score"] == pytest.approx(0.9)
    for box, yaw in ((car, 0.3), (ped, -2.5)):
        expected = Quaternion(axis=[0, 0, 1], radians=yaw)
        np.testing.assert_allclose(box["rotation"], expected.elements, atol=1e-12)
    # The devkit reads it.
    boxes = EvalBoxes.deserialize(sub["results"], TrackingBox)
    assert len(boxes["s0"]) == 2 and boxes["s0"][0].tracking_id == "0"


def test_write_is_deterministic_strict_json(tmp_path):
    a = write_tracking_submission(tmp_path / "a" / "tracking.json", ["s0", "s1"], _tracks())
    b = write_tracking_submission(tmp_path / "b" / "tracking.json", ["s0", "s1"], _tracks())
    assert a.read_bytes() == b.read_bytes()
    json.loads(a.read_text(), parse_constant=lambda c: pytest.fail(f"non-strict JSON {c}"))
    assert load_tracking_submission(a)["results"]["s0"][0]["tracking_id"] == "0"


def test_merge_and_its_errors(tmp_path):
    a = write_tracking_submission(tmp_path / "a.json", ["s0", "s1"], _tracks())
    b = write_tracking_submission(tmp_path / "b.json", ["s2", "s3"], _tracks())
    merged = merge_tracking_submissions([a, b])
    assert sorted(merged["results"]) == ["s0", "s1", "s2", "s3"]
    with pytest.raises(ValueError, match="s0 is also in"):
        merge_tracking_submissions([a, a])
    camera_meta = dict(LIDAR_ONLY_META, use_camera=True)
    c = write_tracking_submission(tmp_path / "c.json", ["s4", "s5"], _tracks(), camera_meta)
    with pytest.raises(ValueError, match="meta"):
        merge_tracking_submissions([a, c])


def test_bad_inputs_name_the_problem(tmp_path):
    with pytest.raises(ValueError, match="2 sample tokens but 1 frames"):
        tracking_submission(["s0", "s1"], _tracks()[:1])
    untracked = _tracks()
    untracked[0].track_id[1] = -1
    with pytest.raises(ValueError, match="track id"):
        tracking_submission(["s0", "s1"], untracked)
    bad = tmp_path / "bad.json"
    sub = tracking_submission(["s0", "s1"], _tracks())
    sub["results"]["s0"][0]["tracking_name"] = "barrier"
    bad.write_text(json.dumps(sub))
    with pytest.raises(ValueError, match=r"bad\.json.*barrier"):
        load_tracking_submission(bad)
    with pytest.raises(FileNotFoundError, match="missing.json"):
        load_tracking_submission(tmp_path / "missing.json")
