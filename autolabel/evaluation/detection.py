"""``autolabel eval det``: the official nuScenes detection metrics for a run, on any scene list.

The devkit's ``DetectionEval`` evaluates a named split (predefined, or custom from a
``splits.json`` inside the dataroot). ``SceneDetectionEval`` is the same class with one change: it
is handed the sample tokens of the chosen scenes and loads predictions and ground truth for those
samples with the devkit's own ``load_prediction_of_sample_tokens`` / ``load_gt_of_sample_tokens``,
so nothing is written into the user's dataroot. Filtering (class ranges, boxes without points,
bike racks), matching, AP, TP errors, NDS and the plots are the devkit's, unchanged; plots are
saved as PNG.

Outputs under ``RUN/eval/``: ``det.json`` (the devkit's metrics summary plus the scenes and the
merged submission's meta), ``det_details.json`` (the devkit's metric data), ``det_results.json``
(the merged submission that was scored) and ``det_plots/*.png``.
"""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autolabel.atomic_io import atomic_write_json
from autolabel.evaluation.run_files import clip_label_files

#: Where a clip's detection results live inside a run folder.
CLIP_DETECTION_FILE = Path("labels") / "detection.json"
#: Devkit spelling of the aggregated true-positive errors.
TP_ERROR_NAMES = {
    "trans_err": "mATE",
    "scale_err": "mASE",
    "orient_err": "mAOE",
    "vel_err": "mAVE",
    "attr_err": "mAAE",
}


def clip_detection_files(
    run_dir: str | Path, scenes: Sequence[str] | None = None
) -> dict[str, Path]:
    """Scene name -> ``RUN/<scene>/labels/detection.json``, for ``scenes`` or every clip with one."""
    return clip_label_files(run_dir, CLIP_DETECTION_FILE, scenes)


def _json_ready(value: Any) -> Any:
    """Devkit output as strict JSON: NaN -> null, numpy scalars -> float, keys -> str."""
    if isinstance(value, dict):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _scene_detection_eval_class():
    """``DetectionEval`` on an explicit sample list (built lazily: the devkit import is slow)."""
    import os

    from nuscenes.eval.common.loaders import (
        add_center_dist,
        filter_eval_boxes,
        load_gt_of_sample_tokens,
        load_prediction_of_sample_tokens,
    )
    from nuscenes.eval.detection.data_classes import DetectionBox
    from nuscenes.eval.detection.evaluate import DetectionEval
    from nuscenes.eval.detection.render import (
        class_pr_curve,
        class_tp_curve,
        dist_pr_curve,
        summary_plot,
    )

    class SceneDetectionEval(DetectionEval):
        """The devkit's detection evaluation on the samples of a list of scenes."""

        def __init__(self, nusc, config, result_path, sample_tokens, output_dir, verbose=False):
            # Mirrors DetectionEval.__init__ for a custom split, with the samples given directly.
            self.nusc = nusc
            self.result_path = result_path
            self.eval_set = "scenes"
            self.output_dir = output_dir
            self.verbose = verbose
            self.cfg = config
            self.plot_dir = os.path.join(output_dir, "det_plots")
            os.makedirs(self.plot_dir, exist_ok=True)
            self.pred_boxes, self.meta = load_prediction_of_sample_tokens(
                result_path, config.max_boxes_per_sample, DetectionBox, sample_tokens, verbose
            )
            self.gt_boxes = load_gt_of_sample_tokens(nusc, sample_tokens, DetectionBox, verbose)
            self.pred_boxes = add_center_dist(nusc, self.pred_boxes)
            self.gt_boxes = add_center_dist(nusc, self.gt_boxes)
            # The devkit's filter reads the class field off the first box and fails on an empty
            # set ("Invalid box type: None"); an empty set has nothing to filter and scores AP 0.
            if self.pred_boxes.all:
                self.pred_boxes = filter_eval_boxes(
                    nusc, self.pred_boxes, config.class_range, verbose
                )
            self.gt_boxes = filter_eval_boxes(nusc, self.gt_boxes, config.class_range, verbose)
            self.sample_tokens = self.gt_boxes.sample_tokens

        def render(self, metrics, md_list) -> None:
            """The devkit's plots (summary, per-class PR and TP curves, per-distance PR) as PNG."""

            def savepath(name: str) -> str:
                return os.path.join(self.plot_dir, name + ".png")

            cfg = self.cfg
            summary_plot(
                md_list,
                metrics,
                min_precision=cfg.min_precision,
                min_recall=cfg.min_recall,
                dist_th_tp=cfg.dist_th_tp,
                savepath=savepath("summary"),
            )
            for name in cfg.class_names:
                class_pr_curve(
                    md_list,
                    metrics,
                    name,
                    cfg.min_precision,
                    cfg.min_recall,
                    savepath(name + "_pr"),
                )
                class_tp_curve(
                    md_list, metrics, name, cfg.min_recall, cfg.dist_th_tp, savepath(name + "_tp")
                )
            for dist_th in cfg.dist_ths:
                dist_pr_curve(
                    md_list,
                    metrics,
                    dist_th,
                    cfg.min_precision,
                    cfg.min_recall,
                    savepath(f"dist_pr_{dist_th}"),
                )

    return SceneDetectionEval


def evaluate_detection(
    run_dir: str | Path,
    dataroot: str | Path,
    version: str,
    scenes: Sequence[str] | None = None,
    out_dir: str | Path | None = None,
    config_name: str = "detection_cvpr_2019",
    render_curves: bool = True,
    nusc: Any = None,
) -> dict[str, Any]:
    """Score a run's per-clip detection files with nuscenes-devkit on the samples of ``scenes``.

    Args:
        run_dir: the run folder; clip ``<scene>`` has ``<scene>/labels/detection.json``.
        dataroot, version: the nuScenes-format dataset with the ground truth.
        scenes: scene names to evaluate (default: every clip in the run that has results).
        out_dir: where to write (default ``run_dir/eval``).
        config_name: the devkit's detection config (``detection_cvpr_2019``).
        render_curves: write the devkit's plots as PNG under ``out_dir/det_plots``.
        nusc: an already loaded ``NuScenes`` for ``dataroot``/``version`` (saves loading it again).

    Returns:
        The devkit's metrics summary (``mean_ap``, ``nd_score``, ``tp_errors``, ``mean_dist_aps``,
        ``label_tp_errors``, ...) plus ``scenes``, ``num_samples`` and ``meta``; written to
        ``det.json``. NaN (e.g. a traffic cone's orientation error) is written as null.

    Raises:
        FileNotFoundError: the run or a scene's results are missing.
        ValueError: an unknown scene, or a sample of the scenes without results.
    """
    from nuscenes import NuScenes
    from nuscenes.eval.common.config import config_factory
    from nuscenes.eval.common.loaders import get_samples_of_scenes

    from detectors.detection_results import merge_detection_submissions

    run_dir = Path(run_dir)
    out_dir = Path(out_dir) if out_dir is not None else run_dir / "eval"
    files = clip_detection_files(run_dir, scenes)
    scene_names = sorted(files)
    if nusc is None:
        nusc = NuScenes(version=version, dataroot=str(dataroot), verbose=False)
    known = {s["name"] for s in nusc.scene}
    unknown = [s for s in scene_names if s not in known]
    if unknown:
        raise ValueError(f"{dataroot} ({version}) has no scene(s) {unknown}")
    sample_tokens = get_samples_of_scenes(scene_names, nusc)

    merged = merge_detection_submissions(files[s] for s in scene_names)
    missing = [t for t in sample_tokens if t not in merged["results"]]
    if missing:
        raise ValueError(
            f"{len(missing)} sample(s) of scenes {scene_names} have no results in {run_dir} "
            f"(first: {missing[0]}); every keyframe needs an entry, even an empty list"
        )
    merged["results"] = {t: merged["results"][t] for t in sample_tokens}
    result_path = atomic_write_json(out_dir / "det_results.json", merged)

    cfg = config_factory(config_name)
    # The devkit's loaders draw a tqdm bar even when not verbose; keep the terminal clean.
    with contextlib.redirect_stderr(io.StringIO()):
        evaluator = _scene_detection_eval_class()(
            nusc, cfg, str(result_path), sample_tokens, str(out_dir), verbose=False
        )
    metrics, metric_data = evaluator.evaluate()
    if render_curves:
        evaluator.render(metrics, metric_data)
    summary = metrics.serialize()
    summary.pop("eval_time", None)  # wall time: would make equal runs differ
    summary["meta"] = merged["meta"]
    summary["scenes"] = scene_names
    summary["num_samples"] = len(sample_tokens)
    summary["version"] = version
    summary = _json_ready(summary)
    atomic_write_json(out_dir / "det.json", summary, indent=2)
    atomic_write_json(out_dir / "det_details.json", _json_ready(metric_data.serialize()))
    return summary


def format_detection_metrics(summary: dict[str, Any]) -> list[str]:
    """``name: value`` lines (devkit spelling) and a per-class table of AP and TP errors."""

    def fmt(value: Any) -> str:
        return "nan" if value is None else f"{value:.4f}"

    lines = [f"mAP: {fmt(summary['mean_ap'])}"]
    lines += [f"{TP_ERROR_NAMES[k]}: {fmt(summary['tp_errors'][k])}" for k in TP_ERROR_NAMES]
    lines.append(f"NDS: {fmt(summary['nd_score'])}")
    lines.append("")
    header = f"{'class':<22}{'AP':>8}" + "".join(f"{n[1:]:>8}" for n in TP_ERROR_NAMES.values())
    lines.append(header)
    for name, ap in summary["mean_dist_aps"].items():
        errors = summary["label_tp_errors"][name]
        row = f"{name:<22}{fmt(ap):>8}" + "".join(f"{fmt(errors[k]):>8}" for k in TP_ERROR_NAMES)
        lines.append(row)
    return lines
