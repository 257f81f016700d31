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
from autolabel.image_files import image_file_problem
from autolabel.run_folder import ClipNameError, clip_folder, run_folder_lock
from autolabel.stage_clock import Lap, timed
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
    #: CPU seconds of this process per stage (all its threads).
    stage_cpu_seconds: dict[str, float] = field(default_factory=dict)
    #: Seconds of numba compilation per stage (start-up: not in ``stage_seconds``).
    stage_compile_seconds: dict[str, float] = field(default_factory=dict)
    #: Seconds the model actors worked for this clip, per kind (``detect``, ``segment``; Ray).
    actor_seconds: dict[str, float] = field(default_factory=dict)
    #: Seconds the clip was in flight without a stage working on it: queueing, object
    #: transfers, worker start-up (Ray; 0 in a local run).
    wait_seconds: float = 0.0
    #: The Ray node ids each step ran on (Ray).
    nodes: dict[str, list[str]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "clip": self.clip,
            "status": self.status,
            "stage_seconds": self.stage_seconds,
            "stage_cpu_seconds": self.stage_cpu_seconds,
            "stage_compile_seconds": self.stage_compile_seconds,
            "actor_seconds": self.actor_seconds,
            "wait_seconds": round(self.wait_seconds, 4),
            "nodes": self.nodes,
            "counts": self.counts,
            "error": self.error,
        }

    @property
    def work_seconds(self) -> float:
        """Seconds the stages worked on this clip (tasks and actors; compilation excluded)."""
        return sum(self.stage_seconds.values())


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
    """Every LiDAR file exists, is non-empty and holds whole points; every camera image that is
    there has its format's signature and end marker (``image_files``): a truncated or foreign
    file would decode to wrong pixels without a word. A missing or empty image is not an error
    here: it loses its own views only (the segment stage gives them empty masks and the
    visibility summary names the image).

    Raises:
        InputFileError: naming the first bad file.
    """
    lidar = {f.lidar.path for f in clip.frames} | {s.path for f in clip.frames for s in f.sweeps}
    for path in sorted(lidar):
        try:
            size = os.path.getsize(path)
        except OSError:
            raise InputFileError(path, "sensor file is missing") from None
        if size == 0:
            raise InputFileError(path, "sensor file is empty")
        if size % LIDAR_POINT_BYTES:
            raise InputFileError(
                path,
                f"{size} bytes is not a whole number of {LIDAR_POINT_BYTES}-byte LiDAR points "
                "(truncated?)",
            )
    images = {img.path for f in clip.frames for img in f.cameras.values()}
    for path in sorted(images):
        if os.path.isfile(path) and os.path.getsize(path) > 0:
            problem = image_file_problem(path)
            if problem:
                raise InputFileError(path, problem)


def inputs_digest(clip: Clip) -> dict[str, Any]:
    """sha256 over the clip's sensor files (relative paths and contents; a missing camera image
    hashes as 'missing'), their count, and each file's sha256 by its path relative to the
    dataroot; the dataroot is stored absolute (a later ``autolabel release`` from another folder
    must find the same files, and checks them)."""
    h = hashlib.sha256()
    files = clip_input_files(clip)
    root = Path(clip.dataroot).resolve() if clip.dataroot else None
    per_file = {}
    for path in files:
        p = Path(path).resolve() if root else Path(path)
        rel = p.relative_to(root) if root and p.is_relative_to(root) else Path(path)
        digest = file_sha256(path) if Path(path).is_file() else "missing"
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


#: Backend options whose value names a file the outputs depend on (a result file, weights).
_FILE_OPTION_SUFFIXES = ("path", "file", "checkpoint", "weights", "config_file")
_OPTION_FILE_HASHES: dict[tuple[str, int, int], str] = {}


def option_files_digest(config: PipelineConfig) -> dict[str, Any]:
    """sha256 of every existing file a backend option names (``detector_options.path`` of the
    ``results`` detector, checkpoints), so that replacing one recomputes the clips; ``{}`` when
    no option names a file. Hashes are cached per (file, size, mtime) within the process."""
    files = {}
    for section in ("detector_options", "tracker_options", "segmenter_options"):
        for key, value in sorted(getattr(config, section).items()):
            if not (isinstance(value, str) and key.lower().endswith(_FILE_OPTION_SUFFIXES)):
                continue
            path = Path(value)
            if not path.is_file():
                continue
            st = path.stat()
            cache_key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
            if cache_key not in _OPTION_FILE_HASHES:
                _OPTION_FILE_HASHES[cache_key] = file_sha256(path)
            files[f"{section}.{key}"] = _OPTION_FILE_HASHES[cache_key]
    return {"option_files": files} if files else {}


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
        seconds: seconds each stage worked so far (a stage may run in several parts, in
            several processes), numba compilation excluded.
        cpu_seconds, compile_seconds: CPU seconds and numba compilation seconds per stage.
        actor_seconds: seconds the model actors worked for this clip, per kind (Ray).
        wait_seconds: seconds its Ray steps waited to start once their inputs were ready
            (queueing, transfers, worker start-up), summed over steps.
        ready_at: wall-clock time (``time.time()``) the last step handing it on finished (Ray).
        nodes: the Ray node ids each step ran on (``prepare``, ``detect``, ...).
        stages: finished stages: name -> {"seconds", "counts"}.
        outputs: written files relative to the clip folder -> sha256.
        error: the failure record once a stage failed (later stages are not run).
    """

    ctx: StageContext
    inputs: dict[str, Any]
    seconds: dict[str, float] = field(default_factory=dict)
    cpu_seconds: dict[str, float] = field(default_factory=dict)
    compile_seconds: dict[str, float] = field(default_factory=dict)
    actor_seconds: dict[str, float] = field(default_factory=dict)
    wait_seconds: float = 0.0
    ready_at: float = 0.0
    nodes: dict[str, list[str]] = field(default_factory=dict)
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
        result, lap, exc = timed(fn)
        self.add_lap(stage, lap)
        if exc is not None:  # one bad clip must not kill the run: record and move on
            self.error = error_record(stage, exc)
        return result

    def add_lap(self, stage: str, lap: Lap) -> None:
        """Count a timed part of ``stage`` (run here, or in an actor) toward its seconds."""
        for total, value in (
            (self.seconds, lap.work_s),
            (self.cpu_seconds, lap.cpu_s),
            (self.compile_seconds, lap.compile_s),
        ):
            total[stage] = total.get(stage, 0.0) + value

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
    read_lap: Lap | None = None,
    models: Models | None = None,
) -> ClipRun | ClipOutcome:
    """The rest of the ``read`` stage: check and hash the clip's sensor files; then either the
    ``skipped`` outcome (outputs complete) or a ``ClipRun`` ready for the stages (its folder's
    manifest removed first, so that an interrupted run leaves it incomplete)."""
    try:
        clip_dir = clip_folder(out_dir, clip.name)
    except ClipNameError as exc:  # nothing may be written (or removed) for this clip
        return ClipOutcome(clip.name, "failed", error=error_record("read", exc))
    run = ClipRun(StageContext(clip, config, clip_dir, models=models), inputs={})
    run.add_lap("read", read_lap or Lap())
    inputs = run.execute(
        "read",
        lambda: (
            check_input_files(clip),
            {**inputs_digest(clip), **option_files_digest(config)},
        )[1],
    )
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


def _rounded(seconds: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 4) for k, v in seconds.items()}


def finish_clip(run: ClipRun) -> ClipOutcome:
    """Write the manifest of a clip whose stages all ran; the outcome either way."""
    outcome = ClipOutcome(
        run.name,
        "failed" if run.error else "done",
        stage_seconds=_rounded(run.seconds),
        stage_cpu_seconds=_rounded(run.cpu_seconds),
        stage_compile_seconds=_rounded(run.compile_seconds),
        actor_seconds=_rounded(run.actor_seconds),
        wait_seconds=run.wait_seconds,
        nodes=run.nodes,
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
    clip, lap, exc = timed(lambda: read_clip_records(nusc, scene_name, config))
    if exc is not None:  # a bad clip is reported, the run goes on
        return ClipOutcome(scene_name, "failed", error=error_record("read", exc))
    run = prepare_clip(clip, out_dir, config, force, lap, models)
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
    #: Model actors per kind (``detect``, ``segment``) of a Ray run.
    actors: dict[str, int] = field(default_factory=dict)
    #: Seconds from the actors' start (models loaded) to the end of the run (Ray).
    actor_window_seconds: float = 0.0
    #: Seconds before the first clip: cluster connection, actor start-up and model loading.
    startup_seconds: float = 0.0

    @property
    def failed(self) -> list[ClipOutcome]:
        return [c for c in self.clips if c.status == "failed"]

    @property
    def clips_per_minute(self) -> float:
        """Clips done (not skipped, not failed) per minute of the whole run."""
        done = sum(c.status == "done" for c in self.clips)
        return 60.0 * done / self.seconds if self.seconds > 0 else 0.0

    def actor_busy_share(self) -> dict[str, float]:
        """Per kind of model actor, the share of its actors' time spent working on clips."""
        shares = {}
        for kind, n in self.actors.items():
            busy = sum(c.actor_seconds.get(kind, 0.0) for c in self.clips)
            available = n * self.actor_window_seconds
            shares[kind] = busy / available if available > 0 else 0.0
        return shares

    def as_dict(self) -> dict[str, Any]:
        return {
            "out_dir": str(self.out_dir),
            "executor": self.executor,
            "seconds": round(self.seconds, 3),
            "startup_seconds": round(self.startup_seconds, 3),
            "clips_per_minute": round(self.clips_per_minute, 3),
            "actors": self.actors,
            "actor_busy_share": {k: round(v, 4) for k, v in self.actor_busy_share().items()},
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

    names = list(dict.fromkeys(list_clips(nusc)))  # a duplicated name fails once, in read_clip
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

    Raises:
        RunFolderError: ``out_dir`` is not a writable folder, or another run is writing into it
            (checked before anything else).
    """
    from autolabel.nuscenes_reader import open_dataset

    start = time.perf_counter()
    config = config or PipelineConfig()
    out_dir = Path(out_dir).resolve()
    with run_folder_lock(out_dir):
        nusc = open_dataset(dataroot, version)
        names = select_clips(nusc, scenes, dataroot)
        models = load_models(config)
        startup = time.perf_counter() - start
        return _run_clips_locally(
            nusc, names, out_dir, config, force, models, progress, start, startup
        )


def _run_clips_locally(
    nusc, names, out_dir, config, force, models, progress, start, startup
) -> RunSummary:
    from tqdm import tqdm

    outcomes = []
    with tqdm(names, desc="clips", unit="clip", disable=not progress) as bar:
        for name in bar:

            def show(stage: str, name: str = name) -> None:
                bar.set_postfix_str(f"{name}: {stage}")

            outcomes.append(run_clip(nusc, name, out_dir, config, force, models, show))
    summary = RunSummary(
        out_dir, outcomes, time.perf_counter() - start, "local", startup_seconds=startup
    )
    write_run_summary(summary)
    return summary
