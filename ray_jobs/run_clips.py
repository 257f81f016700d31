"""The ``autolabel run`` pipeline over clips on a Ray cluster; entrypoint for ``ray job submit``.

    ray job submit --working-dir . -- python -m ray_jobs.run_clips DATAROOT --version V --out OUT

The driver reads each clip's records from the dataset tables (no sensor file), then chains per
clip: ``prepare`` task -> detector actor batches -> ``after_detect`` task -> segmenter actor
batches -> ``finish`` task. Intermediate results stay in Ray's object store (the driver only sees
each step's small outcome), at most ``max_clips_in_flight`` clips are admitted at once, and a
progress bar per step counts clips through it. ``OUT`` must be reachable by every node (a local
disk for a one-machine cluster, a shared file system otherwise).

Fault tolerance: CPU tasks are retried ``max_retries`` times when their worker dies (never for a
stage's own exception, which is recorded for its clip); actors are restarted ``max_restarts``
times and their unanswered calls re-sent. Every step rewrites the same bytes atomically and the
manifest is written last, so a retried step, or a whole re-run after the job died (complete clips
are skipped), ends in the same outputs as an undisturbed run.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

from autolabel.config import PipelineConfig, RayOptions
from autolabel.pipeline import (
    ClipOutcome,
    RunSummary,
    error_record,
    read_clip_records,
    select_clips,
    write_run_summary,
)
from autolabel.run_folder import run_folder_lock
from autolabel.stage_clock import timed

#: The steps a clip passes through, in order (one progress bar each).
STEPS = ("read", "detect", "track+attributes", "segment", "visibility+marks+qa")


#: The first stage of each driver step (a failure's stage; the first progress bar it skips).
_STAGE_OF_STEP = {"prepare": "read", "after_detect": "detect", "finish": "segment"}


class _Progress:
    """One tqdm bar per step, each counting the clips that finished it."""

    def __init__(self, total: int, enabled: bool) -> None:
        from tqdm import tqdm

        self.bars = {
            step: tqdm(
                total=total, desc=f"{step:>20}", unit="clip", position=i, disable=not enabled
            )
            for i, step in enumerate(STEPS)
        }

    def done(self, *steps: str) -> None:
        for step in steps:
            self.bars[step].update(1)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()


def _remote_tasks(options: RayOptions) -> dict[str, Any]:
    import ray

    from ray_jobs import clip_tasks

    common = {
        "num_cpus": options.task_num_cpus,
        "resources": dict(options.task_resources),
        "max_retries": options.max_retries,
        "retry_exceptions": False,
    }
    return {
        "prepare": ray.remote(clip_tasks.prepare).options(**common),
        "after_detect": ray.remote(clip_tasks.after_detect).options(num_returns=2, **common),
        "finish": ray.remote(clip_tasks.finish).options(**common),
    }


def run_pipeline_ray(
    dataroot: str | Path,
    version: str,
    out_dir: str | Path,
    scenes: list[str] | None = None,
    config: PipelineConfig | None = None,
    options: RayOptions | None = None,
    address: str | None = None,
    force: bool = False,
    progress: bool = True,
) -> RunSummary:
    """Run every stage on every clip (or ``scenes``) on a Ray cluster; write ``run_summary.json``.

    Same outputs as ``autolabel.pipeline.run_pipeline``; see the module docstring.

    Args:
        address: see ``ray_jobs.cluster.connect`` (None: a local cluster, or the job's cluster).
        options: actors, batches, retries (``RayOptions``; defaults when None).

    Raises:
        RunFolderError: ``out_dir`` is not a writable folder, or another run is writing into it.
    """
    start = time.perf_counter()
    config = config or PipelineConfig()
    options = options or RayOptions()
    out_dir = Path(out_dir).resolve()
    with run_folder_lock(out_dir):
        return _run_on_cluster(
            dataroot, version, out_dir, scenes, config, options, address, force, progress, start
        )


def _run_on_cluster(
    dataroot, version, out_dir, scenes, config, options, address, force, progress, start
) -> RunSummary:

    from autolabel.nuscenes_reader import open_dataset
    from ray_jobs.cluster import check_cluster_paths, ray_session

    nusc = open_dataset(dataroot, version)
    names = select_clips(nusc, scenes, dataroot)
    with ray_session(address, options) as resources:
        if options.check_paths:
            check_cluster_paths(Path(dataroot).resolve(), out_dir)
        return _run_clips(nusc, names, out_dir, config, options, resources, force, progress, start)


def _run_clips(nusc, names, out_dir, config, options, resources, force, progress, start):
    import ray

    from ray_jobs.actors import make_actors
    from ray_jobs.clip_tasks import frame_batches

    detectors, segmenters = make_actors(config, options, resources)
    actors_ready = time.perf_counter()
    tasks = _remote_tasks(options)
    in_flight_max = options.max_clips_in_flight or max(2, 2 * int(resources.get("CPU", 1)))
    queue = deque(names)
    outcomes: dict[str, ClipOutcome] = {}
    pending: dict[Any, tuple[str, str, Any]] = {}  # ref -> (clip, step, run ref)
    turn = {"detect": 0, "segment": 0}

    def next_actor(kind: str, actors: list) -> Any:
        turn[kind] += 1
        return actors[turn[kind] % len(actors)]

    bars = _Progress(len(names), progress)

    def finished(outcome: ClipOutcome) -> None:
        outcomes[outcome.clip] = outcome

    def admit() -> None:
        while queue and len(pending) < in_flight_max:
            name = queue.popleft()
            clip, lap, exc = timed(lambda name=name: read_clip_records(nusc, name, config))
            if exc is not None:  # a bad clip is reported, the run goes on
                finished(ClipOutcome(name, "failed", error=error_record("read", exc)))
                bars.done(*STEPS)
                continue
            ref = tasks["prepare"].remote(clip, str(out_dir), config, force, lap, time.time())
            pending[ref] = (name, "prepare", None)

    try:
        admit()
        while pending:
            [ref], _ = ray.wait(list(pending), num_returns=1)
            name, step, run_ref = pending.pop(ref)
            try:
                value = ray.get(ref)
            except ray.exceptions.RayError as exc:
                # A system failure that outlived its retries (a worker or actor died too often):
                # the clip fails, the run goes on; a re-run recomputes it.
                finished(ClipOutcome(name, "failed", error=error_record(_STAGE_OF_STEP[step], exc)))
                bars.done(*STEPS[STEPS.index(_STAGE_OF_STEP[step]) :])
                admit()
                continue
            if step == "prepare":
                bars.done("read")
                if isinstance(value, ClipOutcome):
                    finished(value)
                    bars.done(*STEPS[1:])
                else:
                    batches = frame_batches(len(value.ctx.clip.frames), options.detect_batch_frames)
                    det = [
                        next_actor("detect", detectors).detect.remote(ref, a, b, time.time())
                        for a, b in batches
                    ]
                    run_ref, count_ref = tasks["after_detect"].remote(
                        ref, options.segment_batch_images, time.time(), *det
                    )
                    pending[count_ref] = (name, "after_detect", run_ref)
            elif step == "after_detect":
                n_batches = value
                bars.done("detect", "track+attributes")
                seg = [
                    next_actor("segment", segmenters).segment.remote(run_ref, i, time.time())
                    for i in range(n_batches)
                ]
                pending[tasks["finish"].remote(run_ref, time.time(), *seg)] = (
                    name,
                    "finish",
                    None,
                )
            else:
                finished(value)
                bars.done("segment", "visibility+marks+qa")
            admit()
    finally:
        bars.close()
        for actor in detectors + segmenters:
            ray.kill(actor)
    end = time.perf_counter()
    summary = RunSummary(
        out_dir,
        [outcomes[n] for n in names],
        end - start,
        "ray",
        actors={"detect": len(detectors), "segment": len(segmenters)},
        actor_window_seconds=end - actors_ready,
        startup_seconds=actors_ready - start,
    )
    write_run_summary(summary)
    return summary


def main(argv: list[str] | None = None) -> int:
    """``python -m ray_jobs.run_clips DATAROOT --version V --out OUT ...``; exit 1 on failed clips."""
    from autolabel.config import load_run_config
    from autolabel.run_report import format_run_report
    from ray_jobs.cluster import ClusterError

    parser = argparse.ArgumentParser(description="autolabel pipeline on a Ray cluster")
    parser.add_argument("dataroot")
    parser.add_argument("--version", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--scenes", default="", help="comma-separated scene names (default: all)")
    parser.add_argument("--config", default=None, help="YAML run config (its 'ray' section too)")
    parser.add_argument("--detector", default=None)
    parser.add_argument("--segmenter", default=None)
    parser.add_argument("--address", default=None, help="cluster address (default: the job's)")
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    config, options = load_run_config(args.config, detector=args.detector, segmenter=args.segmenter)
    try:
        summary = run_pipeline_ray(
            args.dataroot,
            args.version,
            args.out,
            [s for s in args.scenes.split(",") if s] or None,
            config,
            options,
            args.address,
            args.force,
            not args.no_progress,
        )
    except ClusterError as exc:  # nothing can run on this cluster: say why, before any clip
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(format_run_report(summary))
    return 1 if summary.failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
