"""``gt`` backend: the dataset's own annotations, replayed exactly unless noise is asked for.

By default (``noise=None``) the boxes are the annotations themselves (score 1), which the devkit
scores at mAP 1.0: an upper bound for the later stages and the reference of ``eval qa``. With
``noise: default`` (the preset, ``GtNoiseConfig()``) or a mapping of ``GtNoiseConfig`` fields the
boxes carry errors of the size a good LiDAR detector makes, so tracking, attributes and QA can be
studied under realistic detector error:

- position: Gaussian, growing with range from the ego; height: Gaussian;
- size: log-normal (relative); yaw: Gaussian plus occasional 180-degree flips;
- velocity: Gaussian;
- missed detections: a base rate plus a rate that rises as the box holds fewer LiDAR points;
- false positives: a Poisson number per frame, uniform over a disk around the ego, classes drawn by
  nuScenes frequency, sizes around the class's typical size;
- scores: Beta-distributed, high for true positives and low for false positives.

Random draws are seeded per keyframe from ``seed`` and the sample token, so the output does not
depend on which frames are processed together or in what order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from autolabel.boxes import Boxes3D
from autolabel.clip import Frame
from calib import stable_math
from calib.rotation import wrap_angle
from detectors.base import Detector, DetectorUnavailableError
from detectors.class_priors import CLASS_FREQUENCY, TYPICAL_SIZE_WLH_M
from detectors.detection_results import submission_meta


@dataclass
class GtNoiseConfig:
    """Detector-error model for ground-truth replay.

    The defaults give errors of the order of a good LiDAR detector on nuScenes (CenterPoint reports
    mAP 0.56-0.58, NDS 0.65, mATE 0.29, mASE 0.25); on the 10 synthetic benchmark clips they score
    mAP 0.52, NDS 0.61, mATE 0.28, mASE 0.23, mAOE 0.27, mAVE 0.30 (bench/bench_detection.py).

    Attributes:
        seed: seed of every draw (combined with each keyframe's sample token).
        position_sigma_m: std of the horizontal centre error at the ego, per axis, metres.
        position_sigma_per_m: extra std per metre of range from the ego, metres per metre.
        height_sigma_m: std of the vertical centre error, metres.
        size_sigma_frac: std of the log of each size factor (0.12 ~ 12 % size error).
        yaw_sigma_rad: std of the heading error, radians.
        yaw_flip_prob: probability that the heading is reported backwards (pi off).
        velocity_sigma_mps: std of the velocity error per axis, m/s.
        miss_prob: probability of missing a box however many points it holds.
        miss_points_scale: the extra miss probability is ``exp(-num_lidar_pts / scale)``: a box with
            ``scale`` points is missed about 37 % of the time on top of ``miss_prob``; 0 disables.
        false_positives_per_frame: mean of the Poisson number of false positives per keyframe.
        false_positive_range_m: false positives lie within this distance of the ego.
        tp_score_beta: (a, b) of the Beta distribution of true-positive scores.
        fp_score_beta: (a, b) of the Beta distribution of false-positive scores.
    """

    seed: int = 0
    position_sigma_m: float = 0.15
    position_sigma_per_m: float = 0.004
    height_sigma_m: float = 0.10
    size_sigma_frac: float = 0.12
    yaw_sigma_rad: float = 0.15
    yaw_flip_prob: float = 0.07
    velocity_sigma_mps: float = 0.24
    miss_prob: float = 0.15
    miss_points_scale: float = 15.0
    false_positives_per_frame: float = 15.0
    false_positive_range_m: float = 50.0
    tp_score_beta: tuple[float, float] = (2.5, 1.5)
    fp_score_beta: tuple[float, float] = (1.5, 4.0)

    def __post_init__(self) -> None:
        nonneg = (
            "position_sigma_m",
            "position_sigma_per_m",
            "height_sigma_m",
            "size_sigma_frac",
            "yaw_sigma_rad",
            "velocity_sigma_mps",
            "false_positives_per_frame",
        )
        for key in nonneg:
            if getattr(self, key) < 0:
                raise ValueError(f"{key}: must be >= 0, got {getattr(self, key)}")
        for key in ("yaw_flip_prob", "miss_prob"):
            if not 0.0 <= getattr(self, key) <= 1.0:
                raise ValueError(f"{key}: must be in [0, 1], got {getattr(self, key)}")
        if self.miss_points_scale < 0:
            raise ValueError(f"miss_points_scale: must be >= 0, got {self.miss_points_scale}")
        if self.false_positive_range_m <= 0:
            raise ValueError("false_positive_range_m: must be > 0")
        for key in ("tp_score_beta", "fp_score_beta"):
            ab = tuple(getattr(self, key))
            if len(ab) != 2 or min(ab) <= 0:
                raise ValueError(f"{key}: must be two positive numbers (a, b), got {ab}")
            setattr(self, key, ab)
        if self.seed < 0:
            raise ValueError("seed: must be >= 0")


#: Named error models for ``noise: <name>`` (each call builds a fresh config).
NOISE_PRESETS = {"default": GtNoiseConfig}


@dataclass
class GtReplayConfig:
    """Options of the ``gt`` backend.

    Attributes:
        noise: the error model: ``None`` (the default) replays the annotations exactly (score 1);
            a preset name of ``NOISE_PRESETS`` (``default``: a good LiDAR detector's errors) or a
            ``GtNoiseConfig`` (a mapping of its fields in YAML) degrades them.
        min_lidar_points: annotations with fewer LiDAR points are never replayed (the devkit drops
            ground truth without points, so replaying them would only add false positives).
    """

    noise: GtNoiseConfig | str | None = None
    min_lidar_points: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.noise, str):
            if self.noise not in NOISE_PRESETS:
                raise ValueError(
                    f"noise: unknown preset {self.noise!r} (presets: "
                    f"{', '.join(sorted(NOISE_PRESETS))}; or a mapping of GtNoiseConfig fields, "
                    "or null for exact replay)"
                )
            self.noise = NOISE_PRESETS[self.noise]()
        if self.min_lidar_points < 0:
            raise ValueError("min_lidar_points: must be >= 0")


def frame_rng(seed: int, sample_token: str) -> np.random.Generator:
    """A generator seeded by ``seed`` and a sample token (stable across runs and platforms)."""
    digest = hashlib.sha256(sample_token.encode("utf-8")).digest()
    return np.random.default_rng([seed, int.from_bytes(digest[:8], "little")])


def noisy_boxes(
    gt_boxes: Boxes3D,
    num_lidar_pts: np.ndarray,
    ego_xy_m: np.ndarray,
    noise: GtNoiseConfig,
    rng: np.random.Generator,
) -> Boxes3D:
    """Degrade one keyframe's ground truth with the error model.

    Args:
        gt_boxes: (N) annotated boxes, global frame.
        num_lidar_pts: (N,) LiDAR points inside each box (negative: unknown, never missed for it).
        ego_xy_m: (2,) ego position in the global frame, metres.
        noise: the error model.
        rng: the keyframe's generator (see ``frame_rng``).

    Returns:
        Detected true positives (perturbed) followed by false positives, global frame.
    """
    n = len(gt_boxes)
    # Draw everything up front, in a fixed order, so each draw's stream does not depend on others.
    u_miss = rng.random(n)
    pos_noise = rng.standard_normal((n, 3))
    size_noise = rng.standard_normal((n, 3))
    yaw_noise = rng.standard_normal(n)
    u_flip = rng.random(n)
    vel_noise = rng.standard_normal((n, 2))
    tp_score = rng.beta(*noise.tp_score_beta, size=n)
    n_fp = int(rng.poisson(noise.false_positives_per_frame))
    fp_radius = noise.false_positive_range_m * np.sqrt(rng.random(n_fp))
    fp_angle = rng.uniform(-np.pi, np.pi, n_fp)
    fp_label = rng.choice(len(CLASS_FREQUENCY), size=n_fp, p=CLASS_FREQUENCY)
    fp_size_noise = rng.standard_normal((n_fp, 3))
    fp_yaw = rng.uniform(-np.pi, np.pi, n_fp)
    fp_vel_noise = rng.standard_normal((n_fp, 2))
    fp_score = rng.beta(*noise.fp_score_beta, size=n_fp)

    pts = np.asarray(num_lidar_pts, dtype=np.float64)
    if noise.miss_points_scale > 0:
        low_points_miss = np.where(
            pts >= 0, stable_math.exp(-np.maximum(pts, 0) / noise.miss_points_scale), 0
        )
    else:
        low_points_miss = np.zeros(n)
    p_miss = noise.miss_prob + (1.0 - noise.miss_prob) * low_points_miss
    kept = u_miss >= p_miss

    range_m = np.hypot(*(gt_boxes.center_m[:, :2] - ego_xy_m).T)
    sigma_xy = noise.position_sigma_m + noise.position_sigma_per_m * range_m
    center = gt_boxes.center_m + pos_noise * np.stack(
        [sigma_xy, sigma_xy, np.full(n, noise.height_sigma_m)], axis=1
    )
    size = gt_boxes.size_wlh_m * stable_math.exp(noise.size_sigma_frac * size_noise)
    yaw = (
        gt_boxes.yaw_rad + noise.yaw_sigma_rad * yaw_noise + np.pi * (u_flip < noise.yaw_flip_prob)
    )
    velocity = gt_boxes.velocity_mps + noise.velocity_sigma_mps * vel_noise
    detected = Boxes3D(
        center_m=center,
        size_wlh_m=size,
        yaw_rad=wrap_angle(yaw),
        velocity_mps=velocity,
        label=gt_boxes.label,
        score=tp_score,
        frame="global",
    )[kept]

    ground_z = np.median(gt_boxes.center_m[:, 2] - gt_boxes.size_wlh_m[:, 2] / 2) if n else 0.0
    fp_size = TYPICAL_SIZE_WLH_M[fp_label] * stable_math.exp(
        noise.size_sigma_frac * 2 * fp_size_noise
    )
    fp_center = np.stack(
        [
            ego_xy_m[0] + fp_radius * np.cos(fp_angle),
            ego_xy_m[1] + fp_radius * np.sin(fp_angle),
            ground_z + fp_size[:, 2] / 2,
        ],
        axis=1,
    )
    false_positives = Boxes3D(
        center_m=fp_center.reshape(-1, 3),
        size_wlh_m=fp_size,
        yaw_rad=fp_yaw,
        velocity_mps=noise.velocity_sigma_mps * fp_vel_noise,
        label=fp_label,
        score=fp_score,
        frame="global",
    )
    return Boxes3D.concatenate([detected, false_positives])


class GtReplayDetector(Detector):
    """Boxes from ``frame.ground_truth``, exact or through ``GtNoiseConfig``'s error model."""

    name = "gt"
    #: The noise model's size errors are log-normal around the annotated size.
    size_quantile = 0.5
    meta = submission_meta(use_external=True)

    def __init__(self, config: GtReplayConfig | GtNoiseConfig | None = None) -> None:
        if isinstance(config, GtNoiseConfig):
            config = GtReplayConfig(noise=config)
        self.config = config or GtReplayConfig()

    def detect_frames(self, frames: Sequence[Frame]) -> list[Boxes3D]:
        out = []
        for frame in frames:
            gt = frame.ground_truth
            if gt is None:
                raise DetectorUnavailableError(
                    f"detector 'gt' needs annotations, but sample {frame.token} has none "
                    "(a test split, or a dataset without sample_annotation)"
                )
            keep = gt.num_lidar_pts >= self.config.min_lidar_points
            boxes = gt.boxes[keep]
            replay = Boxes3D(
                center_m=boxes.center_m,
                size_wlh_m=boxes.size_wlh_m,
                yaw_rad=boxes.yaw_rad,
                velocity_mps=boxes.velocity_mps,
                label=boxes.label,
                score=np.ones(len(boxes)),
                frame=boxes.frame,
            )
            if replay.frame != "global":
                raise ValueError(f"sample {frame.token}: ground truth must be in the global frame")
            noise = self.config.noise
            if noise is not None:
                replay = noisy_boxes(
                    replay,
                    gt.num_lidar_pts[keep],
                    frame.global_SE3_ego.translation[:2],
                    noise,
                    frame_rng(noise.seed, frame.token),
                )
            out.append(replay)
        return out
