"""``autolabel run``: every stage on every clip, resumable, one bad clip never stops the run.

Per clip, under ``OUT/<clip name>/``:
- ``labels/detection.json``, ``labels/tracking.json``: nuScenes submission files (devkit-ready);
- ``manifest.json``: inputs with hashes, config, package versions, seed, per-stage seconds and
  counts, outputs with hashes. Only its ``stages.*.seconds`` fields differ between two runs.
Run level: ``OUT/run_summary.json`` with every clip's status and, for failures, stage, file and
message.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autolabel.atomic_io import atomic_write_json, canonical_json
from autolabel.clip import Clip
from autolabel.config import PipelineConfig, config_to_dict

MANIFEST = "manifest.json"
SUMMARY = "run_summary.json"
_VERSIONED_PACKAGES = (
    "autolabel",
    "numpy",
    "nuscenes-devkit",
    "numba",
    "opencv-python-headless",
    "pycocotools",
)


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


@dataclass
class StageContext:
    """What a stage sees: the clip, the run config, its output folder, and earlier stages' results."""

    clip: Clip
    config: PipelineConfig
    clip_dir: Path
    results: dict[str, Any] = field(default_factory=dict)


#: A stage reads the context, may add results for later stages, writes its files (atomically) and
#: returns (counts, written files relative to the clip folder).
Stage = Callable[[StageContext], tuple[dict[str, int], list[str]]]


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


def inputs_digest(clip: Clip) -> dict[str, Any]:
    """sha256 over the clip's sensor files (relative paths and contents), and their count."""
    h = hashlib.sha256()
    files = clip_input_files(clip)
    root = Path(clip.dataroot) if clip.dataroot else None
    for path in files:
        rel = path.relative_to(root) if root and path.is_relative_to(root) else path
        h.update(str(rel).encode())
        h.update(file_sha256(path).encode())
    return {
        "dataroot": str(clip.dataroot),
        "version": clip.version,
        "scene_token": clip.token,
        "files": len(files),
        "sha256": h.hexdigest(),
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
    import json

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
    """The file an exception is about, when it says (OSError.filename or a ``path`` attribute)."""
    for attr in ("filename", "path"):
        value = getattr(exc, attr, None)
        if value:
            return str(value)
    return ""


def run_stages(
    ctx: StageContext, stages: list[tuple[str, Stage]], inputs: dict[str, Any]
) -> ClipOutcome:
    """Run ``stages`` in order on one clip and write its manifest; a failure stops this clip only."""
    outcome = ClipOutcome(ctx.clip.name, "done")
    outputs: dict[str, str] = {}
    stage_records: dict[str, Any] = {}
    for name, stage in stages:
        start = time.perf_counter()
        try:
            counts, written = stage(ctx)
        except Exception as exc:  # one bad clip must not kill the run: record and move on
            outcome.status = "failed"
            outcome.error = {
                "stage": name,
                "file": failing_file(exc),
                "message": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(limit=4),
            }
            return outcome
        seconds = time.perf_counter() - start
        outcome.stage_seconds[name] = round(seconds, 4)
        outcome.counts.update({f"{name}.{k}": int(v) for k, v in counts.items()})
        stage_records[name] = {
            "seconds": round(seconds, 4),
            "counts": {k: int(v) for k, v in counts.items()},
        }
        for rel in written:
            outputs[rel] = file_sha256(ctx.clip_dir / rel)
    manifest = {
        "clip": ctx.clip.name,
        "config": config_to_dict(ctx.config),
        "config_sha256": config_hash(ctx.config),
        "seed": ctx.config.seed,
        "inputs": inputs,
        "versions": package_versions(),
        "stages": stage_records,
        "outputs": dict(sorted(outputs.items())),
    }
    atomic_write_json(ctx.clip_dir / MANIFEST, manifest, indent=1)
    return outcome
