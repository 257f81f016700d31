"""``autolabel demo``: synthetic clips -> the whole pipeline -> detection and tracking metrics.

CPU defaults throughout (LiDAR geometric detector, Pub tracker, LiDAR-seeded segmenter), small
images so that it finishes in a few minutes on two cores. Layout of ``OUT``:

- ``OUT/data``: the synthetic nuScenes-format dataset (regenerated only when its config changes);
- ``OUT/run``: the run (``OUT/run/<clip>/...``, ``run_summary.json``, ``eval/det.json``,
  ``eval/track.json``).

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
            have = json.loads(written.read_text())
        except ValueError:
            have = None
        if have is not None and {k: v for k, v in have.items() if k != "progress"} == {
            k: v for k, v in wanted.items() if k != "progress"
        }:
            return
    generate_dataset(dataroot, synth, overwrite=True)


def run_demo(
    out_dir: str | Path,
    demo: DemoConfig | None = None,
    ray_address: str | None = None,
    use_ray: bool = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Synthesize, run every stage, score detection and tracking; return what to print.

    Returns:
        ``summary`` (the ``RunSummary``), ``detection`` and ``tracking`` metric lines, ``dataroot``
        and ``run`` folders.
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
    return {
        "summary": summary,
        "detection": detection,
        "tracking": tracking,
        "dataroot": dataroot,
        "run": run_dir,
    }
