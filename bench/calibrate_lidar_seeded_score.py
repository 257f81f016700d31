"""Fit and validate the LiDAR-seeded segmenter's score against the true IoU.

The score should mean what SAM2's predicted IoU means: the IoU of the mask with the object's true
visible mask. This script segments constructed scenes with known masks
(``autolabel.segmentation.validation_scenes``), with seed quality ranging from good to useless
(calibration offsets up to 40 % of the box diagonal, up to 40 % outliers, some objects without
seeds), computes the score features of every object, and fits a logistic model of the true IoU
(cross-entropy with the IoU as a soft label, small L2) on the even-numbered scenes. It reports, on
the odd-numbered (held-out) scenes: Pearson and Spearman correlation between score and true IoU,
mean absolute error, and the same with the weights currently in ``lidar_seeded.py``.

    python bench/calibrate_lidar_seeded_score.py [--scenes 48] [--height 450 --width 800]
        [--working-max-side 96 --boxcut-max-side 96]

``--working-max-side`` and ``--boxcut-max-side`` set the segmenter's working grids, e.g. 80 and
64 for the geometric segmenter's image evidence (``GeometricConfig.evidence_*_max_side_px``).

Paste the printed SCORE_WEIGHTS / SCORE_BIAS into ``autolabel/segmentation/lidar_seeded.py``.
Deterministic: the same arguments give the same numbers.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.optimize import minimize
from scipy.stats import pearsonr, spearmanr

from autolabel.segmentation import lidar_seeded
from autolabel.segmentation.lidar_seeded import (
    SCORE_FEATURE_NAMES,
    LidarSeededConfig,
    LidarSeededSegmenter,
)
from autolabel.segmentation.validation_scenes import make_validation_scene, mask_iou


def collect(
    n_scenes: int, height_px: int, width_px: int, config: LidarSeededConfig | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features (M, F), true IoU (M,), scene index (M,) of every object of every scene."""
    segmenter = LidarSeededSegmenter(config)
    features, ious, scene_of = [], [], []
    for scene_index in range(n_scenes):
        # Seed quality varies by scene so both splits see the whole range.
        quality = scene_index % 4
        offset = [(0.0, 0.04), (0.0, 0.15), (0.05, 0.4), (0.0, 0.3)][quality]
        outliers = [(0.0, 0.05), (0.0, 0.2), (0.0, 0.1), (0.1, 0.4)][quality]
        scene = make_validation_scene(
            seed=1000 + scene_index,
            height_px=height_px,
            width_px=width_px,
            n_objects=10,
            seed_offset_fraction=offset,
            seed_outlier_fraction=outliers,
        )
        points_uv = list(scene.points_uv)
        if quality == 3:  # some objects without any LiDAR seeds
            points_uv[0] = np.zeros((0, 2))
        masks, feats = segmenter.segment_with_features(
            scene.image,
            scene.boxes_2d,
            {"points_uv": points_uv, "depth_m": scene.depth_m},
        )
        iou = mask_iou(masks, scene.visible_masks)
        box_ok = (scene.boxes_2d[:, 2] - scene.boxes_2d[:, 0] >= 3) & (
            scene.boxes_2d[:, 3] - scene.boxes_2d[:, 1] >= 3
        )
        features.append(feats[box_ok])
        ious.append(iou[box_ok])
        scene_of.append(np.full(int(box_ok.sum()), scene_index))
    return np.concatenate(features), np.concatenate(ious), np.concatenate(scene_of)


def fit_logistic(
    features: np.ndarray, target: np.ndarray, l2: float = 1e-3
) -> tuple[np.ndarray, float]:
    """Weights and bias minimising soft-label cross-entropy of sigmoid(features @ w + b)."""
    design = np.column_stack([features, np.ones(len(features))])

    def loss_and_grad(params: np.ndarray) -> tuple[float, np.ndarray]:
        logits = design @ params
        prob = 1.0 / (1.0 + np.exp(-logits))
        eps = 1e-9
        loss = -np.mean(target * np.log(prob + eps) + (1 - target) * np.log(1 - prob + eps))
        grad = design.T @ (prob - target) / len(target)
        loss += l2 * np.sum(params[:-1] ** 2)
        grad[:-1] += 2 * l2 * params[:-1]
        return loss, grad

    result = minimize(loss_and_grad, np.zeros(design.shape[1]), jac=True, method="L-BFGS-B")
    return result.x[:-1], float(result.x[-1])


def report(name: str, score: np.ndarray, iou: np.ndarray) -> None:
    print(
        f"{name}: pearson {pearsonr(score, iou)[0]:.3f}  spearman {spearmanr(score, iou)[0]:.3f}  "
        f"MAE {np.mean(np.abs(score - iou)):.3f}  (n={len(iou)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", type=int, default=48)
    parser.add_argument("--height", type=int, default=450)
    parser.add_argument("--width", type=int, default=800)
    parser.add_argument(
        "--working-max-side", type=int, default=LidarSeededConfig.working_max_side_px
    )
    parser.add_argument("--boxcut-max-side", type=int, default=LidarSeededConfig.boxcut_max_side_px)
    args = parser.parse_args()

    config = LidarSeededConfig(
        working_max_side_px=args.working_max_side, boxcut_max_side_px=args.boxcut_max_side
    )
    start = time.perf_counter()
    features, iou, scene_of = collect(args.scenes, args.height, args.width, config)
    print(
        f"segmented {args.scenes} scenes, {len(iou)} objects in {time.perf_counter() - start:.1f} s"
    )
    print(
        f"true IoU: mean {iou.mean():.3f}, median {np.median(iou):.3f}, >0.8: {np.mean(iou > 0.8):.2f}"
    )
    for j, name in enumerate(SCORE_FEATURE_NAMES):
        print(f"  feature {name:>22}: pearson with IoU {pearsonr(features[:, j], iou)[0]:+.3f}")

    train = scene_of % 2 == 0
    weights, bias = fit_logistic(features[train], iou[train])

    def predict(w: np.ndarray, b: float, x: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-(x @ w + b)))

    report("held-out, refitted weights", predict(weights, bias, features[~train]), iou[~train])
    report(
        "held-out, weights in lidar_seeded.py",
        predict(lidar_seeded.SCORE_WEIGHTS, lidar_seeded.SCORE_BIAS, features[~train]),
        iou[~train],
    )
    good = iou[~train] > 0.8
    score = predict(weights, bias, features[~train])
    print(
        f"held-out: mean score where IoU > 0.8: {score[good].mean():.3f}; "
        f"where IoU <= 0.8: {score[~good].mean():.3f}"
    )
    print("SCORE_WEIGHTS = np.array([" + ", ".join(f"{w:.4f}" for w in weights) + "])")
    print(f"SCORE_BIAS = {bias:.4f}")


if __name__ == "__main__":
    main()
