"""Ground-truth replay: exact without noise; the noise model's statistics match its parameters."""

from __future__ import annotations

import numpy as np
import pytest

from autolabel.boxes import Boxes3D
from autolabel.clip import Frame, GroundTruth, LidarSweep
from autolabel.sensors import LidarCalibration
from calib.se3 import SE3
from detectors import get_detector
from detectors.gt_replay import GtNoiseConfig, GtReplayConfig, GtReplayDetector, noisy_boxes


def _frame(token: str, n: int = 50, seed: int = 0, num_pts: np.ndarray | None = None) -> Frame:
    rng = np.random.default_rng(seed)
    ego = SE3(np.eye(3), np.array([100.0, 200.0, 0.0]))
    boxes = Boxes3D(
        center_m=np.column_stack([rng.uniform(60, 140, n), rng.uniform(160, 240, n), np.ones(n)]),
        size_wlh_m=rng.uniform(0.5, 3.0, (n, 3)),
        yaw_rad=rng.uniform(-np.pi, np.pi, n),
        velocity_mps=rng.normal(0, 2, (n, 2)),
        label=rng.integers(0, 10, n),
        score=np.ones(n),
        track_id=np.arange(n),
        frame="global",
    )
    gt = GroundTruth(
        boxes=boxes,
        annotation_token=np.array([f"a{i}" for i in range(n)], dtype=object),
        num_lidar_pts=rng.integers(0, 200, n) if num_pts is None else num_pts,
        visibility_level=np.full(n, 4),
        attribute=np.array([""] * n, dtype=object),
    )
    sweep = LidarSweep(path="/nonexistent.bin", global_SE3_ego=ego, timestamp_us=0)
    calib = LidarCalibration("LIDAR_TOP", SE3.identity(), np.zeros(32))
    return Frame(token, 0, 0, 0.0, ego, sweep, calib, {}, ground_truth=gt)


def test_without_noise_replays_annotations_with_points():
    frame = _frame("s0")
    det = get_detector("gt", {"noise": None})
    (boxes,) = det.detect_frames([frame])
    keep = frame.ground_truth.num_lidar_pts >= 1
    gt = frame.ground_truth.boxes[keep]
    np.testing.assert_array_equal(boxes.center_m, gt.center_m)
    np.testing.assert_array_equal(boxes.size_wlh_m, gt.size_wlh_m)
    np.testing.assert_array_equal(boxes.yaw_rad, gt.yaw_rad)
    np.testing.assert_array_equal(boxes.velocity_mps, gt.velocity_mps)
    np.testing.assert_array_equal(boxes.label, gt.label)
    assert (boxes.score == 1).all() and (boxes.track_id == -1).all()
    assert boxes.frame == "global"


def test_default_replays_exactly_and_noise_is_an_explicit_preset():
    frame = _frame("s0")
    (exact,) = get_detector("gt", {"noise": None}).detect_frames([frame])
    for default in (get_detector("gt"), get_detector("gt", {}), GtReplayDetector()):
        (boxes,) = default.detect_frames([frame])
        np.testing.assert_array_equal(boxes.center_m, exact.center_m)
        assert (boxes.score == 1).all()
    (preset,) = get_detector("gt", {"noise": "default"}).detect_frames([frame])
    (explicit,) = GtReplayDetector(GtNoiseConfig()).detect_frames([frame])
    np.testing.assert_array_equal(preset.center_m, explicit.center_m)
    assert len(preset) != len(exact) or not np.array_equal(preset.center_m, exact.center_m)
    from autolabel.config import ConfigError

    with pytest.raises(ConfigError, match="noise: unknown preset 'loud'"):
        get_detector("gt", {"noise": "loud"})


def test_min_lidar_points_option():
    frame = _frame("s0", n=5, num_pts=np.array([0, 1, 2, 3, 10]))
    (boxes,) = get_detector("gt", {"noise": None, "min_lidar_points": 3}).detect_frames([frame])
    assert len(boxes) == 2  # the boxes with 3 and 10 points


def test_noise_is_deterministic_per_token_and_independent_of_batching():
    frames = [_frame(f"s{i}", seed=i) for i in range(3)]
    det = GtReplayDetector(GtNoiseConfig(seed=7))
    together = det.detect_frames(frames)
    alone = [det.detect_frames([f])[0] for f in reversed(frames)][::-1]
    assert all(a == b for a, b in zip(together, alone, strict=True))
    other_seed = GtReplayDetector(GtNoiseConfig(seed=8)).detect_frames(frames)
    assert not all(a == b for a, b in zip(together, other_seed, strict=True))


def test_noise_statistics_match_the_parameters():
    n = 20000
    rng = np.random.default_rng(0)
    ego_xy = np.array([0.0, 0.0])
    gt = Boxes3D(
        center_m=np.column_stack([np.full(n, 10.0), np.zeros(n), np.ones(n)]),
        size_wlh_m=np.full((n, 3), 2.0),
        yaw_rad=np.zeros(n),
        velocity_mps=np.zeros((n, 2)),
        label=np.zeros(n, dtype=int),
        frame="global",
    )
    cfg = GtNoiseConfig(
        position_sigma_m=0.2,
        position_sigma_per_m=0.01,
        height_sigma_m=0.1,
        size_sigma_frac=0.05,
        yaw_sigma_rad=0.1,
        yaw_flip_prob=0.0,
        velocity_sigma_mps=0.5,
        miss_prob=0.1,
        miss_points_scale=0.0,
        false_positives_per_frame=0.0,
        tp_score_beta=(4.0, 1.5),
    )
    out = noisy_boxes(gt, np.full(n, 100), ego_xy, cfg, rng)
    # Missed share ~ miss_prob (binomial: std 0.002).
    assert len(out) / n == pytest.approx(0.9, abs=0.01)
    err = out.center_m - gt.center_m[0]
    # Range 10 m: sigma_xy = 0.2 + 0.01 * 10 = 0.3.
    assert err[:, 0].std() == pytest.approx(0.3, rel=0.03)
    assert err[:, 1].std() == pytest.approx(0.3, rel=0.03)
    assert err[:, 2].std() == pytest.approx(0.1, rel=0.03)
    assert np.log(out.size_wlh_m / 2.0).std() == pytest.approx(0.05, rel=0.03)
    assert out.yaw_rad.std() == pytest.approx(0.1, rel=0.03)
    assert out.velocity_mps.std() == pytest.approx(0.5, rel=0.03)
    # Beta(4, 1.5) mean = 4 / 5.5.
    assert out.score.mean() == pytest.approx(4 / 5.5, abs=0.01)


def test_low_point_boxes_are_missed_more_and_false_positives_appear():
    n = 20000
    gt = Boxes3D(np.zeros((n, 3)), np.ones((n, 3)), np.zeros(n), frame="global")
    cfg = GtNoiseConfig(miss_prob=0.0, miss_points_scale=4.0, false_positives_per_frame=0.0)
    out = noisy_boxes(gt, np.full(n, 4), np.zeros(2), cfg, np.random.default_rng(1))
    assert 1 - len(out) / n == pytest.approx(np.exp(-1.0), abs=0.01)

    cfg = GtNoiseConfig(
        false_positives_per_frame=5.0,
        false_positive_range_m=30.0,
        miss_prob=0.0,
        fp_score_beta=(1.5, 6.0),
    )
    counts, scores, ranges = [], [], []
    for i in range(400):
        fp = noisy_boxes(
            Boxes3D.empty("global"),
            np.zeros(0),
            np.array([5.0, -3.0]),
            cfg,
            np.random.default_rng(i),
        )
        counts.append(len(fp))
        scores.extend(fp.score.tolist())
        ranges.extend(np.hypot(fp.center_m[:, 0] - 5.0, fp.center_m[:, 1] + 3.0).tolist())
    assert np.mean(counts) == pytest.approx(5.0, abs=0.3)
    assert np.mean(scores) == pytest.approx(1.5 / 7.5, abs=0.02)
    assert max(ranges) <= 30.0
    # Uniform over the disk: the median radius is R / sqrt(2).
    assert np.median(ranges) == pytest.approx(30.0 / np.sqrt(2), rel=0.05)


def test_bad_noise_options_name_the_key():
    with pytest.raises(ValueError, match="miss_prob"):
        GtNoiseConfig(miss_prob=1.5)
    from autolabel.config import ConfigError

    with pytest.raises(ConfigError, match="noise.yaw_sigma_rad"):
        get_detector("gt", {"noise": {"yaw_sigma_rad": "big"}})
    with pytest.raises(ConfigError, match="unknown key 'nois'"):
        get_detector("gt", {"nois": None})


def test_frame_without_annotations_is_a_clear_error():
    frame = _frame("s0")
    frame.ground_truth = None
    with pytest.raises(RuntimeError, match="needs annotations"):
        GtReplayDetector(GtReplayConfig()).detect_frames([frame])
