"""One tiny synthetic dataset and one ``autolabel run`` of it per test session.

The CLI, check-qa, Set-of-Mark and Ray tests all read the same run (two 4 s clips at 320 x 180,
the fast segmenter settings of ``pipeline_data``), made once by ``autolabel run --config`` through
the command line itself. Under pytest-xdist every worker is its own process: the first to ask
builds the folder under a file lock in the directory the workers share, the others wait and reuse
it. Tests must copy a folder before changing anything in it.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml
from filelock import FileLock
from pipeline_data import VERSION, fast_config, make_dataset

from autolabel.config import config_to_dict

SCENES = 2


def shared_dir(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """``build(path)`` once per session for all xdist workers; the built folder's path."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the folder the workers' own temp folders share
    target = base / name
    done = base / f"{name}.done"
    with FileLock(str(base / f"{name}.lock")):
        if not done.exists():
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            build(target)
            done.touch()
    return target


@dataclass(frozen=True)
class SessionRun:
    """The session's run: ``dataroot`` (with ``scenes``), ``run`` folder, the config YAML it was
    given, and what ``autolabel run`` printed and returned."""

    dataroot: Path
    scenes: list[str]
    run: Path
    config_file: Path
    output: str
    exit_code: int


def build_dataset(path: Path) -> None:
    summary = make_dataset(path / "data", scenes=SCENES)
    (path / "scenes.json").write_text(json.dumps(summary["scenes"]))


def build_run(dataroot: Path) -> Callable[[Path], None]:
    def build(path: Path) -> None:
        from typer.testing import CliRunner

        from autolabel.cli import app

        config_file = path / "run.yaml"
        config_file.write_text(yaml.safe_dump(config_to_dict(fast_config())))
        args = ["run", str(dataroot), "--version", VERSION, "--out", str(path / "run")]
        result = CliRunner().invoke(app, [*args, "--config", str(config_file), "--no-progress"])
        (path / "output.json").write_text(
            json.dumps({"output": result.output, "exit_code": result.exit_code})
        )

    return build


def session_run(tmp_path_factory) -> SessionRun:
    data = shared_dir(tmp_path_factory, "session-data", build_dataset)
    dataroot = data / "data"
    path = shared_dir(tmp_path_factory, "session-run", build_run(dataroot))
    printed = json.loads((path / "output.json").read_text())
    return SessionRun(
        dataroot=dataroot,
        scenes=json.loads((data / "scenes.json").read_text()),
        run=path / "run",
        config_file=path / "run.yaml",
        output=printed["output"],
        exit_code=printed["exit_code"],
    )
