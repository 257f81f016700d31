"""``autolabel run``: every stage on every clip, resumable, one bad clip never stops the run.

A clip goes through ``read`` (its records from the dataset, then a check and hash of every sensor
file it uses) and the stages of :mod:`autolabel.stages`. Its folder ``OUT/<clip>/`` receives the
stage outputs and, last, ``manifest.json``: inputs with hashes, config (and its hash), package
versions, seed, per-stage seconds and counts, and every output with its sha256. Only the
``stages.*.seconds`` fields of the manifest differ between two runs of the same inputs and config;
every other byte of the clip folder is identical.

Resuming: a clip whose manifest matches the config and the inputs and whose outputs all still hash
as recorded is skipped (``force`` recomputes it). A clip being recomputed loses its manifest
first, so a run killed half-way through it leaves it incomplete, never stale; when it completes,
files in its folder that it did not write (leftovers of another config, temp files of a killed
write) are removed. All writes are atomic.

Failures: an exception in a stage stops that clip only; the run summary records its stage, the file
concerned (when known) and the message, and the run goes on. ``OUT/run_summary.json`` lists every
clip's status, counts and seconds.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autolabel.atomic_io import atomic_write_json, canonical_json
from autolabel.clip import Clip
from autolabel.config import PipelineConfig, config_to_dict
from autolabel.stages import (  # noqa: F401  (detect_stage, track_stage: part of this API)
    STAGE_NAMES,
    STAGES,
    Models,
    StageContext,
    StageResult,
    detect_stage,
    track_stage,
)

MANIFEST = "manifest.json"
SUMMARY = "run_summary.json"
_VERSIONED_PACKAGES = (
    "autolabel",
    "numpy",
    "nuscenes-devkit",
    "numba",
    "opencv-python-headless",
    "pycocotools",
    "pyarrow",
    "torch",
)
#: Bytes per LiDAR point in a ``.pcd.bin`` file (5 float32: x, y, z, intensity, ring).
LIDAR_POINT_BYTES = 20


class InputFileError(ValueError):
    """A sensor file of a clip is missing or malformed; ``path`` names it."""

    def __init__(self, path: str | Path, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = str(path)


@dataclass
class ClipOutcome:
    """What happened to one clip: ``done``, ``skipped`` (outputs already complete) or ``failed``."""

    clip: str
    status: str
    stage_seconds: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    error: dict[str, str] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "clip": self.clip,
            "status": self.status,
            "stage_seconds": self.stage_seconds,
            "counts": self.counts,
            "error": self.error,
        }


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def clip_input_files(clip: Clip) -> list[Path]:
    """Every sensor file a clip's labels depend on (LiDAR sweeps and camera images)."""
    files: list[Path] = []
    for frame in clip.frames:
        files.append(frame.lidar.path)
        files.extend(s.path for s in frame.sweeps)
        files.extend(img.path for img in frame.cameras.values())
    return sorted(set(files))


def check_input_files(clip: Clip) -> None:
    """Every sensor file exists and is non-empty; every LiDAR file holds whole points.

    Raises:
        InputFileError: naming the first bad file.
    """
    lidar = {f.lidar.path for f in clip.frames} | {s.path for f in clip.frames for s in f.sweeps}
    for path in clip_input_files(clip):
        try:
            size = os.path.getsize(path)
        except OSError:
            raise InputFileError(path, "sensor file is missing") from None
        if size == 0:
            raise InputFileError(path, "sensor file is empty")
        if path in lidar and size % LIDAR_POINT_BYTES:
            raise InputFileError(
                path,
                f"{size} bytes is not a whole number of {LIDAR_POINT_BYTES}-byte LiDAR points "
                "(truncated?)",
            )


def inputs_digest(clip: Clip) -> dict[str, Any]:
    """sha256 over the clip's sensor files (relative paths and contents), their count, and each
    file's sha256 by its path relative to the dataroot; the dataroot is stored absolute (a later
    ``autolabel release`` from another folder must find the same files, and checks them)."""
    h = hashlib.sha256()
    files = clip_input_files(clip)
    root = Path(clip.dataroot).resolve() if clip.dataroot else None
    per_file = {}
    for path in files:
        p = Path(path).resolve() if root else Path(path)
        rel = p.relative_to(root) if root and p.is_relative_to(root) else Path(path)
        digest = file_sha256(path)
        h.update(str(rel).encode())
        h.update(digest.encode())
        per_file[rel.as_posix()] = digest
    return {
        "dataroot": str(root) if root else str(clip.dataroot),
        "version": clip.version,
        "scene_token": clip.token,
        "files": len(files),
        "sha256": h.hexdigest(),
        "file_sha256": per_file,
    }


def package_versions() -> dict[str, str]:
    out = {}
    for name in _VERSIONED_PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def config_hash(config: PipelineConfig) -> str:
    return hashlib.sha256(canonical_json(config_to_dict(config)).encode()).hexdigest()


def outputs_complete(clip_dir: Path, config: PipelineConfig, inputs: dict[str, Any]) -> bool:
    """True when the clip's manifest matches this config and inputs and every output is intact."""
    manifest_path = clip_dir / MANIFEST
    if not manifest_path.is_file():
        return False
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError):
        return False
    if manifest.get("config_sha256") != config_hash(config) or manifest.get("inputs") != inputs:
        return False
    outputs = manifest.get("outputs", {})
    return bool(outputs) and all(
        (clip_dir / rel).is_file() and file_sha256(clip_dir / rel) == digest
        for rel, digest in outputs.items()
    )


def failing_file(exc: BaseException) -> str:
    """The file an exception is about: ``OSError.filename``, a ``path`` attribute, or an
    existing path that starts its message (``"<path>: what is wrong"``, the project's style)."""
    for attr in ("filename", "path"):
        value = getattr(exc, attr, None)
        if value:
            return str(value)
    head = str(exc).split(": ", 1)[0].strip("'\"")
    if head and ("/" in head or os.sep in head) and Path(head).exists():
        return head
    return ""


def error_record(stage: str, exc: BaseException) -> dict[str, str]:
    """The run summary's record of a failure: stage, file, message and a short traceback."""
    return {
        "stage": stage,
        "file": failing_file(exc),
        "message": f"{type(exc).__name__}: {exc}",
        "traceback": "".join(traceback.format_exception(exc, limit=-4)),
    }


@dataclass
class ClipRun:
    """One clip's run in progress: its context, the stages done and the files written.

    It travels between processes in a Ray job (``StageContext.models`` pickles without models).

    Attributes:
        ctx: the stage context (clip, config, folder, results so far).
        inputs: the inputs digest (``inputs_digest``).
        seconds: seconds spent per stage so far (a stage may run in several parts).
        stages: finished stages: name -> {"seconds", "counts"}.
        outputs: written files relative to the clip folder -> sha256.
        error: the failure record once a stage failed (later stages are not run).
    """

    ctx: StageContext
    inputs: dict[str, Any]
    seconds: dict[str, float] = field(default_factory=dict)
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    error: dict[str, str] | None = None

    @property
    def name(self) -> str:
        return self.ctx.clip.name

    def execute(self, stage: str, fn: Callable[[], Any]) -> Any:
        """Run ``fn()`` as (a part of) ``stage``; its seconds count toward the stage. An
        exception is recorded as the clip's failure (None is returned); nothing runs after one."""
        if self.error is not None:
            return None
        start = time.perf_counter()
        try:
            return fn()
        except Exception as exc:  # one bad clip must not kill the run: record and move on
            self.error = error_record(stage, exc)
            return None
        finally:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - start

    def complete(self, stage: str, result: StageResult | None) -> None:
        """Record a finished stage: its counts, seconds, and the hashes of the files it wrote."""
        if self.error is not None or result is None:
            return
        counts, written = result
        self.stages[stage] = {
            "seconds": round(self.seconds.get(stage, 0.0), 4),
            "counts": {k: int(v) for k, v in counts.items()},
        }
        for rel in written:
            self.outputs[rel] = file_sha256(self.ctx.clip_dir / rel)

    def run_stage(self, stage: str, fn: Callable[[StageContext], StageResult]) -> None:
        self.complete(stage, self.execute(stage, lambda: fn(self.ctx)))


def run_stages(
    ctx: StageContext, stages: list[tuple[str, Callable[[StageContext], StageResult]]], inputs
) -> ClipOutcome:
    """Run ``stages`` in order on one clip and write its manifest; a failure stops this clip only."""
    run = ClipRun(ctx, inputs)
    for name, stage in stages:
        run.run_stage(name, stage)
    return finish_clip(run)


def read_clip_records(nusc, scene_name: str, config: PipelineConfig) -> Clip:
    """A clip's records from a loaded dataset (no sensor file is opened)."""
    from autolabel.nuscenes_reader import read_clip

    return read_clip(
        nusc,
        scene_name,
        max_sweeps=config.read.max_sweeps,
        camera_channels=config.read.cameras or None,
        with_ground_truth=config.detector == "gt",
    )


def prepare_clip(
    clip: Clip,
    out_dir: Path,
    config: PipelineConfig,
    force: bool,
    read_seconds: float = 0.0,
    models: Models | None = None,
) -> ClipRun | ClipOutcome:
    """The rest of the ``read`` stage: check and hash the clip's sensor files; then either the
    ``skipped`` outcome (outputs complete) or a ``ClipRun`` ready for the stages (its folder's
    manifest removed first, so that an interrupted run leaves it incomplete)."""
    clip_dir = Path(out_dir) / clip.name
    run = ClipRun(StageContext(clip, config, clip_dir, models=models), inputs={})
    run.seconds["read"] = read_seconds
    inputs = run.execute("read", lambda: (check_input_files(clip), inputs_digest(clip))[1])
    if run.error is not None:
        return finish_clip(run)
    run.inputs = inputs
    if not force and outputs_complete(clip_dir, config, inputs):
        return ClipOutcome(clip.name, "skipped")
    run.execute("read", lambda: (clip_dir / MANIFEST).unlink(missing_ok=True))
    if run.error is not None:
        return finish_clip(run)
    images = sum(len(f.cameras) for f in clip.frames)
    sweeps = sum(1 + len(f.sweeps) for f in clip.frames)
    run.complete("read", ({"frames": len(clip.frames), "images": images, "sweeps": sweeps}, []))
    return run


def _remove_stale_files(clip_dir: Path, keep: set[str]) -> None:
    """Remove files of the clip folder that this run did not write, then empty folders."""
    for path in sorted(clip_dir.rglob("*"), reverse=True):
        rel = path.relative_to(clip_dir).as_posix()
        if path.is_dir():
            if not any(path.iterdir()):
                path.rmdir()
        elif rel not in keep:
            path.unlink(missing_ok=True)


def finish_clip(run: ClipRun) -> ClipOutcome:
    """Write the manifest of a clip whose stages all ran; the outcome either way."""
    outcome = ClipOutcome(
        run.name,
        "failed" if run.error else "done",
        stage_seconds={k: round(v, 4) for k, v in run.seconds.items()},
        counts={
            f"{stage}.{k}": v for stage, rec in run.stages.items() for k, v in rec["counts"].items()
        },
        error=run.error,
    )
    if run.error is not None:
        return outcome
    config = run.ctx.config
    manifest = {
        "clip": run.name,
        "config": config_to_dict(config),
        "config_sha256": config_hash(config),
        "seed": config.seed,
        "inputs": run.inputs,
        "versions": package_versions(),
        "stages": run.stages,
        "outputs": dict(sorted(run.outputs.items())),
    }
    _remove_stale_files(run.ctx.clip_dir, set(run.outputs))
    atomic_write_json(run.ctx.clip_dir / MANIFEST, manifest, indent=1)
    return outcome


def run_clip(
    nusc,
    scene_name: str,
    out_dir: Path,
    config: PipelineConfig,
    force: bool = False,
    models: Models | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> ClipOutcome:
    """Every stage on one clip of a loaded dataset; never raises for a bad clip, records it.

    ``on_stage(name)`` is called as each stage starts (progress display).
    """
    if on_stage:
        on_stage("read")
    start = time.perf_counter()
    try:
        clip = read_clip_records(nusc, scene_name, config)
    except Exception as exc:  # a bad clip is reported, the run goes on
        return ClipOutcome(scene_name, "failed", error=error_record("read", exc))
    run = prepare_clip(clip, out_dir, config, force, time.perf_counter() - start, models)
    if isinstance(run, ClipOutcome):
        return run
    for name, stage in STAGES:
        if on_stage and run.error is None:
            on_stage(name)
        run.run_stage(name, stage)
    return finish_clip(run)


def load_models(config: PipelineConfig, models: Models | None = None) -> Models:
    """Build the detector and the segmenter now, so that a backend that cannot run here (no
    weights, no GPU, a missing package) stops the run before the first clip, not in every clip.

    Raises:
        detectors.DetectorUnavailableError, autolabel.segmentation.SegmenterUnavailable.
    """
    models = models or Models(config)
    models.detector()
    models.segmenter()
    return models


@dataclass
class RunSummary:
    """Outcome of a run: one ``ClipOutcome`` per clip and where the outputs are."""

    out_dir: Path
    clips: list[ClipOutcome]
    seconds: float = 0.0
    executor: str = "local"

    @property
    def failed(self) -> list[ClipOutcome]:
        return [c for c in self.clips if c.status == "failed"]

    def as_dict(self) -> dict[str, Any]:
        return {
            "out_dir": str(self.out_dir),
            "executor": self.executor,
            "seconds": round(self.seconds, 3),
            "stages": list(STAGE_NAMES),
            "clips": [c.as_dict() for c in self.clips],
        }


def write_run_summary(summary: RunSummary) -> Path:
    return atomic_write_json(Path(summary.out_dir) / SUMMARY, summary.as_dict(), indent=1)


def select_clips(nusc, scenes: list[str] | None, dataroot: str | Path = "") -> list[str]:
    """Scene names to run, in the dataset's order; all when ``scenes`` is empty.

    Raises:
        KeyError: a requested scene is not in the dataset.
    """
    from autolabel.nuscenes_reader import list_clips

    names = list_clips(nusc)
    if scenes:
        missing = sorted(set(scenes) - set(names))
        if missing:
            raise KeyError(f"scenes not in {dataroot}: {missing}")
        names = [n for n in names if n in set(scenes)]
    return names


def run_pipeline(
    dataroot: str | Path,
    version: str,
    out_dir: str | Path,
    scenes: list[str] | None = None,
    config: PipelineConfig | None = None,
    force: bool = False,
    progress: bool = True,
) -> RunSummary:
    """Run every stage on every clip (or ``scenes``) of a dataset, one clip after another, in this
    process; write ``run_summary.json``. Clips whose outputs are complete for this config and
    inputs are skipped unless ``force``.
    """
    from tqdm import tqdm

    from autolabel.nuscenes_reader import open_dataset

    start = time.perf_counter()
    config = config or PipelineConfig()
    out_dir = Path(out_dir).resolve()
    nusc = open_dataset(dataroot, version)
    names = select_clips(nusc, scenes, dataroot)
    models = load_models(config)
    outcomes = []
    with tqdm(names, desc="clips", unit="clip", disable=not progress) as bar:
        for name in bar:

            def show(stage: str, name: str = name) -> None:
                bar.set_postfix_str(f"{name}: {stage}")

            outcomes.append(run_clip(nusc, name, out_dir, config, force, models, show))
    summary = RunSummary(out_dir, outcomes, time.perf_counter() - start, "local")
    write_run_summary(summary)
    return summary
