"""The detector interface: every backend that runs on CPU honours the same contract."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from detection_scenes import box_set, make_frame

from autolabel.boxes import Boxes3D
from autolabel.classes import DETECTION_CLASSES
from autolabel.clip import Clip
from autolabel.config import ConfigError
from calib.rotation import rotation_from_yaw
from calib.se3 import SE3
from detectors import DETECTOR_NAMES, Detector, DetectorUnavailableError, get_detector
from detectors.detection_results import (
    MAX_BOXES_PER_SAMPLE,
    load_detection_submission,
    write_detection_submission,
)

ROWS = [
    ("car", 12.0, 4.0, 0.3, 1.9, 4.5, 1.6),
    ("pedestrian", 8.0, -4.0, 0.0, 0.6, 0.7, 1.75),
    ("barrier", 6.0, 10.0, 0.0, 2.5, 0.5, 1.0),
]


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Clip:
    tmp = tmp_path_factory.mktemp("clip")
    frames = []
    for i in range(3):
        pose = SE3(rotation_from_yaw(0.2 * i), np.array([100.0 + 3 * i, 50.0, 0.3]))
        frame = make_frame(tmp, box_set(ROWS), token=f"sample-{i}", global_SE3_ego=pose)
        frame.index = i
        frame.time_s = 0.5 * i
        frames.append(frame)
    return Clip(name="scene-test", token="scene-token", log_name="log", frames=frames)


def _results_file(tmp_path, clip: Clip):
    boxes = [f.ground_truth.boxes for f in clip.frames]
    meta = {"use_lidar": True}
    return write_detection_submission(
        tmp_path / "sub.json", [f.token for f in clip.frames], boxes, meta
    )


def _cpu_detectors(tmp_path, clip):
    return {
        "lidar": get_detector("lidar"),
        "gt": get_detector("gt", None),
        "gt-noise": get_detector("gt", {"noise": "default"}),
        "results": get_detector("results", {"path": str(_results_file(tmp_path, clip))}),
    }


def test_every_cpu_backend_honours_the_contract(tmp_path, clip):
    detectors = _cpu_detectors(tmp_path, clip)
    assert {d.name for d in detectors.values()} == set(DETECTOR_NAMES) - {"bevfusion"}
    for label, detector in detectors.items():
        assert isinstance(detector, Detector)
        per_frame = detector.detect_clip(clip)
        assert len(per_frame) == len(clip.frames), label
        for boxes in per_frame:
            assert isinstance(boxes, Boxes3D) and boxes.frame == "global", label
            assert ((boxes.label >= 0) & (boxes.label < len(DETECTION_CLASSES))).all()
            assert np.isfinite(boxes.center_m).all() and (boxes.size_wlh_m > 0).all()
            assert ((boxes.score >= 0) & (boxes.score <= 1)).all(), label
            assert (boxes.track_id == -1).all()
            assert len(boxes) <= MAX_BOXES_PER_SAMPLE
        # Same input, same output.
        again = detector.detect_clip(clip)
        assert all(a == b for a, b in zip(per_frame, again, strict=True)), label
        # Batching does not change the result.
        single = [detector.detect_frames([f])[0] for f in clip.frames]
        assert all(a == b for a, b in zip(per_frame, single, strict=True)), label
        # The submission round-trips through the file format.
        path = write_detection_submission(
            tmp_path / f"{label}.json", [f.token for f in clip.frames], per_frame, detector.meta
        )
        loaded, _ = load_detection_submission(path)
        assert [len(loaded[f.token]) for f in clip.frames] == [len(b) for b in per_frame]


def test_backends_find_the_objects_in_the_global_frame(tmp_path, clip):
    detectors = _cpu_detectors(tmp_path, clip)
    for label in ("lidar", "gt", "results"):
        for frame, boxes in zip(clip.frames, detectors[label].detect_clip(clip), strict=True):
            truth = frame.ground_truth.boxes
            d = np.linalg.norm(truth.center_m[:, None, :2] - boxes.center_m[None, :, :2], axis=2)
            near = d < 1.0
            assert d.min(axis=1).max() < 0.35, label
            # The best-scoring box at each object has its class (lidar may add a runner-up).
            best = np.argmax(np.where(near, boxes.score[None, :], -1.0), axis=1)
            np.testing.assert_array_equal(boxes.label[best], truth.label, err_msg=label)


def test_results_backend_missing_sample(tmp_path, clip):
    path = _results_file(tmp_path, clip)
    extra = make_frame(tmp_path, box_set(ROWS), token="not-in-file")
    with pytest.raises(KeyError, match="no results for sample 'not-in-file'"):
        get_detector("results", {"path": str(path)}).detect_frames([extra])
    (boxes,) = get_detector(
        "results", {"path": str(path), "missing_sample": "empty"}
    ).detect_frames([extra])
    assert len(boxes) == 0


def test_results_backend_needs_a_path_and_a_valid_file(tmp_path):
    with pytest.raises(DetectorUnavailableError, match="path"):
        get_detector("results")
    bad = tmp_path / "bad.json"
    bad.write_text('{"results": {"t": [{"translation": [0, 0]}]}}')
    with pytest.raises(ValueError, match="bad.json.*'translation'"):
        get_detector("results", {"path": str(bad)})


def test_unknown_name_lists_the_backends():
    with pytest.raises(ValueError) as err:
        get_detector("pointpillars")
    for name in DETECTOR_NAMES:
        assert name in str(err.value)


def test_bad_options_name_the_key():
    with pytest.raises(ConfigError, match=r"detector_options \(lidar\).*num_sweeps"):
        get_detector("lidar", {"num_sweeps": 0})
    with pytest.raises(ConfigError, match="unknown key 'sweeps'"):
        get_detector("lidar", {"sweeps": 3})


def test_bevfusion_without_its_inputs_says_what_to_install_and_pass(tmp_path):
    with pytest.raises(DetectorUnavailableError, match="mmdet3d_root.*config.*checkpoint"):
        get_detector("bevfusion")
    with pytest.raises(DetectorUnavailableError, match="not an mmdetection3d checkout"):
        get_detector("bevfusion", {"mmdet3d_root": str(tmp_path), "config": "x.py"})
    fake_root = tmp_path / "mmdetection3d"
    (fake_root / "projects" / "BEVFusion").mkdir(parents=True)
    cfg = fake_root / "bevfusion.py"
    cfg.write_text("model = dict()\n")
    with pytest.raises(DetectorUnavailableError, match="checkpoint"):
        get_detector("bevfusion", {"mmdet3d_root": str(fake_root), "config": str(cfg)})
    if importlib.util.find_spec("mmdet3d") is None:
        with pytest.raises(DetectorUnavailableError, match=r"pip install -e '.\[bevfusion\]'"):
            get_detector(
                "bevfusion",
                {"mmdet3d_root": str(fake_root), "config": str(cfg), "allow_random_weights": True},
            )
