"""Model actors: each loads its model once and serves many clips' batches.

``make_actors`` wraps the plain classes below with ``ray.remote`` and the run's resources:
``num_gpus`` per actor (BEVFusion and SAM2 take a GPU each; the CPU backends 0), ``num_cpus=0``
(an actor holds no CPU slot, so it never starves the CPU tasks that feed it) and
``max_restarts`` / ``max_task_retries``: when an actor's process dies, Ray starts a new one
(which loads the model again) and re-sends the calls it had not answered.

A batch call never raises for a bad clip: it returns a ``BatchFailure`` with the error record, and
the clip's next task records it as the clip's failure.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from autolabel.config import PipelineConfig, RayOptions
from autolabel.pipeline import ClipRun, error_record
from autolabel.stage_clock import Lap, timed
from autolabel.stages import Models, run_detector, segment_images

#: Detector and segmenter backends that run on a GPU when the cluster has one.
GPU_DETECTORS = frozenset({"bevfusion"})
GPU_SEGMENTERS = frozenset({"sam2"})


@dataclass
class BatchFailure:
    """A batch call's failure: the stage and the error record (``pipeline.error_record``)."""

    stage: str
    error: dict[str, str]


@dataclass
class BatchResult:
    """A batch call's output, how long the model part took (``stage_clock.Lap``), how long the
    call waited for the actor once its input was ready, and when it ended (``time.time()``)."""

    value: Any
    lap: Lap
    waited_s: float
    ended_at: float
    node_id: str


def node_id() -> str:
    """The Ray node id of this process."""
    import ray

    return ray.get_runtime_context().get_node_id()


def waited_seconds(started_at: float, submitted_at: float, *ready_at: float) -> float:
    """Seconds a step waited to start after it was submitted and its inputs were ready."""
    return max(0.0, started_at - max((submitted_at, *ready_at)))


class DetectorWorker:
    """Holds one detector model; detects keyframes ``[start, stop)`` of a clip per call."""

    def __init__(self, config: PipelineConfig) -> None:
        self.models = Models(config)
        self.models.detector()  # load once, at start, not inside the first clip's timing

    def pid(self) -> int:
        return os.getpid()

    def detect(
        self, run: ClipRun, start: int, stop: int, submitted_at: float
    ) -> BatchResult | BatchFailure:
        """Global-frame boxes of keyframes ``start..stop-1`` and the detector's submission meta."""
        waited = waited_seconds(time.time(), submitted_at, run.ready_at)
        detector = self.models.detector()
        boxes, lap, exc = timed(lambda: run_detector(detector, run.ctx.clip.frames[start:stop]))
        if exc is not None:  # recorded for the clip; the actor keeps serving others
            return BatchFailure("detect", error_record("detect", exc))
        return BatchResult((boxes, dict(detector.meta)), lap, waited, time.time(), node_id())


class SegmenterWorker:
    """Holds one segmentation model; segments one batch of a clip's camera images per call."""

    def __init__(self, config: PipelineConfig) -> None:
        self.models = Models(config)
        self.models.segmenter()

    def pid(self) -> int:
        return os.getpid()

    def segment(self, run: ClipRun, batch: int, submitted_at: float) -> BatchResult | BatchFailure:
        """Masks of the images of batch ``batch`` (``run.ctx.results["image_batches"]``)."""
        waited = waited_seconds(time.time(), submitted_at, run.ready_at)
        images = run.ctx.results["image_batches"][batch]
        masks, lap, exc = timed(
            lambda: segment_images(
                self.models.segmenter(),
                run.ctx.clip,
                run.ctx.results["views"],
                images,
                run.ctx.config.segment,
                track_score=run.ctx.results.get("view_track_score"),
                visibility=run.ctx.config.visibility,
            )
        )
        if exc is not None:  # recorded for the clip; the actor keeps serving others
            return BatchFailure("segment", error_record("segment", exc))
        return BatchResult(masks, lap, waited, time.time(), node_id())


def actor_gpus(requested: float | None, gpu_backend: bool, cluster_gpus: float) -> float:
    """GPUs per actor: as requested, else 1 for a GPU backend on a cluster with GPUs, else 0."""
    if requested is not None:
        return float(requested)
    return 1.0 if gpu_backend and cluster_gpus >= 1 else 0.0


def actor_count(requested: int | None, gpus_each: float, resources: dict[str, float]) -> int:
    """Actors of one kind: as requested, else one per GPU share, else one per CPU."""
    if requested is not None:
        return requested
    if gpus_each > 0:
        return max(1, int(resources.get("GPU", 0) // gpus_each))
    return max(1, int(resources.get("CPU", 1)))


def make_actors(
    config: PipelineConfig, options: RayOptions, resources: dict[str, float]
) -> tuple[list[Any], list[Any]]:
    """Start the detector and segmenter actors of a run and wait until each has loaded its model:
    (detector actors, segmenter actors).

    Raises:
        RuntimeError: an actor could not start (e.g. a backend without its weights); the message
            carries the backend's own explanation.
    """
    import ray

    gpus = resources.get("GPU", 0.0)
    det_gpus = actor_gpus(options.detect_num_gpus, config.detector in GPU_DETECTORS, gpus)
    seg_gpus = actor_gpus(options.segment_num_gpus, config.segmenter in GPU_SEGMENTERS, gpus)
    common = {
        "num_cpus": 0,
        "resources": dict(options.actor_resources),
        "max_restarts": options.max_restarts,
        "max_task_retries": options.max_retries,
    }
    detector_cls = ray.remote(DetectorWorker).options(num_gpus=det_gpus, **common)
    segmenter_cls = ray.remote(SegmenterWorker).options(num_gpus=seg_gpus, **common)
    detectors = [
        detector_cls.remote(config)
        for _ in range(actor_count(options.detect_actors, det_gpus, resources))
    ]
    segmenters = [
        segmenter_cls.remote(config)
        for _ in range(actor_count(options.segment_actors, seg_gpus, resources))
    ]
    try:
        ray.get([actor.pid.remote() for actor in detectors + segmenters])
    except ray.exceptions.RayActorError as exc:
        for actor in detectors + segmenters:
            ray.kill(actor)
        raise RuntimeError(f"a model actor could not start: {exc}") from None
    return detectors, segmenters
