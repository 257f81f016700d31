"""The CPU stages of one clip as three Ray task bodies (plain functions; ``run_clips`` wraps them
with ``ray.remote`` and the run's retry settings).

1. :func:`prepare` (``read``): check and hash the clip's sensor files; skip a complete clip.
2. :func:`after_detect`: gather the detector actors' batches and write the detections; ``track``,
   ``attributes``; project the views and split the images into segmenter batches.
3. :func:`finish`: gather the segmenter actors' batches and write the masks; ``visibility``,
   ``marks``, ``qa``; the manifest.

Every step is idempotent (deterministic bytes, atomic writes): a retried task rewrites the same
files, and the manifest, written last, marks the clip complete.
"""

from __future__ import annotations

import time
from pathlib import Path

from autolabel.clip import Clip
from autolabel.config import PipelineConfig
from autolabel.pipeline import ClipOutcome, ClipRun, finish_clip, prepare_clip
from autolabel.stage_clock import Lap
from autolabel.stages import (
    attributes_stage,
    marks_stage,
    prepare_views,
    qa_stage,
    refine_stage,
    track_stage,
    visibility_stage,
    write_detections,
    write_masks,
)
from ray_jobs.actors import BatchFailure, BatchResult, node_id, waited_seconds


def prepare(
    clip: Clip,
    out_dir: str,
    config: PipelineConfig,
    force: bool,
    read_lap: Lap,
    submitted_at: float,
) -> ClipRun | ClipOutcome:
    """The ``read`` stage's checks and hashes; a ``ClipOutcome`` when the clip is done with
    (skipped, or failed on a bad input file), else the ``ClipRun`` for the next steps."""
    waited = waited_seconds(time.time(), submitted_at)
    result = prepare_clip(clip, Path(out_dir), config, force, read_lap)
    result.wait_seconds += waited
    result.nodes["prepare"] = [node_id()]
    if isinstance(result, ClipRun):
        result.ready_at = time.time()
    return result


def frame_batches(n_frames: int, batch_frames: int) -> list[tuple[int, int]]:
    """``[start, stop)`` keyframe ranges of at most ``batch_frames`` each, covering all frames."""
    return [(a, min(a + batch_frames, n_frames)) for a in range(0, n_frames, batch_frames)]


def _gather(run: ClipRun, stage: str, batches: tuple) -> list:
    """The batch values in order, their times added to ``stage`` and to the actors' busy
    seconds; a failure fails the clip."""
    values = []
    for batch in batches:
        if isinstance(batch, BatchFailure):
            if run.error is None:
                run.error = batch.error
            return []
        assert isinstance(batch, BatchResult)
        run.add_lap(stage, batch.lap)
        run.actor_seconds[stage] = run.actor_seconds.get(stage, 0.0) + batch.lap.work_s
        run.wait_seconds += batch.waited_s
        run.nodes.setdefault(stage, [])
        if batch.node_id not in run.nodes[stage]:
            run.nodes[stage].append(batch.node_id)
        values.append(batch.value)
    return values


def _inputs_ready_at(run: ClipRun, batches: tuple) -> float:
    """When the last input of a task became ready: the run handed on, or its last batch."""
    return max([run.ready_at] + [b.ended_at for b in batches if isinstance(b, BatchResult)])


def after_detect(
    run: ClipRun, batch_images: int, submitted_at: float, *detections
) -> tuple[ClipRun, int]:
    """Detections -> track -> attributes -> views; returns the run and its number of segmenter
    batches (0 when the clip failed)."""
    run.wait_seconds += waited_seconds(time.time(), submitted_at, _inputs_ready_at(run, detections))
    run.nodes["after_detect"] = [node_id()]
    values = _gather(run, "detect", detections)
    if run.error is None:
        boxes = [b for value in values for b in value[0]]
        meta = values[0][1] if values else {}
        run.complete(
            "detect", run.execute("detect", lambda: write_detections(run.ctx, boxes, meta))
        )
    run.run_stage("track", track_stage)
    run.run_stage("refine", refine_stage)
    run.run_stage("attributes", attributes_stage)
    views = run.execute("segment", lambda: prepare_views(run.ctx))
    if run.error is not None:
        return run, 0
    images = views.image_rows()
    run.ctx.results["image_batches"] = [
        images[a : a + batch_images] for a in range(0, len(images), batch_images)
    ]
    run.ready_at = time.time()
    return run, len(run.ctx.results["image_batches"])


def finish(run: ClipRun, submitted_at: float, *masks) -> ClipOutcome:
    """Masks -> visibility -> marks -> qa -> manifest; the clip's outcome."""
    run.wait_seconds += waited_seconds(time.time(), submitted_at, _inputs_ready_at(run, masks))
    run.nodes["finish"] = [node_id()]
    values = _gather(run, "segment", masks)
    if run.error is None:
        images = [m for value in values for m in value]
        views = run.ctx.results["views"]
        run.complete("segment", run.execute("segment", lambda: write_masks(run.ctx, views, images)))
    run.run_stage("visibility", visibility_stage)
    run.run_stage("marks", marks_stage)
    run.run_stage("qa", qa_stage)
    return finish_clip(run)
