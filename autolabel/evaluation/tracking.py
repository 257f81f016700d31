"""``autolabel eval track``: the official nuScenes tracking metrics for a run, on any scene list.

The devkit's ``TrackingEval`` evaluates a split: a predefined one, or a custom one that it reads from
``<dataroot>/<version>/splits.json``. To evaluate an arbitrary list of scenes without writing into the
user's dataset, the evaluation runs on an *overlay* dataroot in a temporary folder: symbolic links to
every entry of the real dataroot and of its ``<version>/`` table folder, plus our own ``splits.json``
naming one custom split. The devkit then runs unchanged (same loaders, filters, interpolation and
metrics) on exactly those scenes.

The devkit's tracking metrics run on motmetrics 1.4.0 and pandas; with pandas 3 and numpy 1.26 the
devkit's own tracking tests and these metrics work as shipped (``tests/test_tracking_eval.py``
checks AMOTA = 1 for perfect tracks and an exact identity-switch count).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autolabel.atomic_io import atomic_write_json

#: The custom split name written into the overlay's ``splits.json``.
EVAL_SPLIT = "autolabel_eval"
#: Where a clip's tracking results live inside a run folder.
CLIP_TRACKING_FILE = Path("labels") / "tracking.json"
#: Aggregated metrics in the devkit's order (``nuscenes.eval.tracking.constants.TRACKING_METRICS``).
TRACKING_METRIC_ORDER = (
    "amota",
    "amotp",
    "recall",
    "motar",
    "gt",
    "mota",
    "motp",
    "mt",
    "ml",
    "faf",
    "tp",
    "fp",
    "fn",
    "ids",
    "frag",
    "tid",
    "lgd",
)


def clip_tracking_files(
    run_dir: str | Path, scenes: Sequence[str] | None = None
) -> dict[str, Path]:
    """Scene name -> ``RUN/<scene>/labels/tracking.json``, for ``scenes`` or every clip that has one.

    Raises:
        FileNotFoundError: a requested scene has no tracking file, or the run has none at all.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"{run_dir}: run folder not found")
    if scenes is None:
        found = {p.parent.parent.name: p for p in sorted(run_dir.glob(f"*/{CLIP_TRACKING_FILE}"))}
        if not found:
            raise FileNotFoundError(f"{run_dir}: no clip has {CLIP_TRACKING_FILE}")
        return found
    files = {scene: run_dir / scene / CLIP_TRACKING_FILE for scene in scenes}
    missing = [str(path) for path in files.values() if not path.is_file()]
    if missing:
        raise FileNotFoundError(f"tracking results missing: {', '.join(missing)}")
    return files


def _read_table(table_dir: Path, name: str) -> list[dict[str, Any]]:
    path = table_dir / f"{name}.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: nuScenes table not found") from None
    except ValueError as e:
        raise ValueError(f"{path}: not valid JSON: {e}") from None


def scene_sample_tokens(dataroot: str | Path, version: str) -> dict[str, list[str]]:
    """Scene name -> its sample tokens, read from the ``scene`` and ``sample`` tables."""
    table_dir = Path(dataroot) / version
    scenes = _read_table(table_dir, "scene")
    samples = _read_table(table_dir, "sample")
    by_scene: dict[str, list[str]] = {}
    name_of = {s["token"]: s["name"] for s in scenes}
    for name in name_of.values():
        by_scene[name] = []
    for sample in samples:
        by_scene[name_of[sample["scene_token"]]].append(sample["token"])
    return by_scene


def make_overlay_dataroot(
    dataroot: str | Path, version: str, scenes: Sequence[str], overlay_root: str | Path
) -> Path:
    """A dataroot under ``overlay_root`` that links to ``dataroot`` and defines split ``EVAL_SPLIT``.

    Nothing is written into ``dataroot``; an existing ``splits.json`` there is shadowed (its custom
    splits are kept, ``EVAL_SPLIT`` is replaced).
    """
    dataroot = Path(dataroot).resolve()
    table_dir = dataroot / version
    if not table_dir.is_dir():
        raise FileNotFoundError(f"{table_dir}: nuScenes version folder not found")
    overlay = Path(overlay_root)
    overlay_tables = overlay / version
    overlay_tables.mkdir(parents=True)
    for entry in dataroot.iterdir():
        if entry.name != version:
            os.symlink(entry, overlay / entry.name)
    splits: dict[str, list[str]] = {}
    for entry in table_dir.iterdir():
        if entry.name == "splits.json":
            splits = json.loads(entry.read_text())
        else:
            os.symlink(entry, overlay_tables / entry.name)
    splits[EVAL_SPLIT] = list(scenes)
    (overlay_tables / "splits.json").write_text(json.dumps(splits))
    return overlay


@contextlib.contextmanager
def _silenced():
    with open(os.devnull, "w") as sink:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            yield


def _finite_or_none(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite_or_none(v) for v in value]
    return value


def evaluate_tracking(
    run_dir: str | Path,
    dataroot: str | Path,
    version: str,
    scenes: Sequence[str] | None = None,
    out_dir: str | Path | None = None,
    render_curves: bool = True,
    verbose: bool = False,
) -> dict[str, Any]:
    """Score a run's tracks with the devkit's ``TrackingEval`` (config ``tracking_nips_2019``).

    Args:
        run_dir: run folder holding ``<scene>/labels/tracking.json`` per clip.
        dataroot, version: the nuScenes-format dataset with ground truth.
        scenes: scene names to evaluate; default every clip of the run.
        out_dir: where the devkit writes ``metrics_summary.json``, ``metrics_details.json`` and
            ``plots/``; default ``RUN/eval/track``. The result is also written to ``RUN/eval/track.json``.
        render_curves: whether the devkit renders its plots.
        verbose: let the devkit print its progress and tables.

    Returns:
        ``{"metrics": {name: value}, "label_metrics": {name: {class: value}}, "scenes", ...}`` with
        the devkit's lowercase metric names; NaN (no ground truth for a class) as None.
    """
    from nuscenes.eval.common.config import config_factory
    from nuscenes.eval.tracking.evaluate import TrackingEval

    from trackers.tracking_results import merge_tracking_submissions

    run_dir = Path(run_dir)
    files = clip_tracking_files(run_dir, scenes)
    scene_names = sorted(files)
    samples_of = scene_sample_tokens(dataroot, version)
    unknown = [s for s in scene_names if s not in samples_of]
    if unknown:
        raise ValueError(f"{Path(dataroot) / version}: no scene named {', '.join(unknown)}")
    submission = merge_tracking_submissions([files[s] for s in scene_names])
    for scene in scene_names:
        missing = [t for t in samples_of[scene] if t not in submission["results"]]
        if missing:
            raise ValueError(
                f"{files[scene]}: {len(missing)} of scene {scene}'s samples are missing "
                f"(e.g. {missing[0]}); the devkit needs every sample, empty lists allowed"
            )
    wanted = {t for s in scene_names for t in samples_of[s]}
    submission["results"] = {t: b for t, b in submission["results"].items() if t in wanted}
    if not any(submission["results"].values()):
        raise ValueError(f"{run_dir}: the tracking results hold no box of a tracking class")

    out_dir = Path(out_dir) if out_dir is not None else run_dir / "eval" / "track"
    out_dir.mkdir(parents=True, exist_ok=True)
    result_path = atomic_write_json(out_dir / "tracking_submission.json", submission)
    config = config_factory("tracking_nips_2019")
    # The devkit prints progress bars even when not verbose; keep our output to the metrics.
    quiet = contextlib.nullcontext() if verbose else _silenced()
    with tempfile.TemporaryDirectory(prefix="autolabel_track_eval_") as tmp, quiet:
        overlay = make_overlay_dataroot(dataroot, version, scene_names, Path(tmp) / "dataroot")
        evaluator = TrackingEval(
            config=config,
            result_path=str(result_path),
            eval_set=EVAL_SPLIT,
            output_dir=str(out_dir),
            nusc_version=version,
            nusc_dataroot=str(overlay),
            verbose=verbose,
        )
        summary = evaluator.main(render_curves=render_curves)

    report = _finite_or_none(
        {
            "metrics": {name: summary[name] for name in TRACKING_METRIC_ORDER},
            "label_metrics": summary["label_metrics"],
            "eval_time_s": summary["eval_time"],
            "config": "tracking_nips_2019",
            "dataroot": str(Path(dataroot).resolve()),
            "version": version,
            "scenes": scene_names,
            "details_dir": str(out_dir),
        }
    )
    atomic_write_json(run_dir / "eval" / "track.json", report, indent=1)
    return report


def format_tracking_metrics(metrics: dict[str, Any]) -> list[str]:
    """``NAME: value`` lines, names as the devkit prints them (``AMOTA``, ``IDS``, ...)."""
    from nuscenes.eval.tracking.utils import metric_name_to_print_format

    lines = []
    for name in TRACKING_METRIC_ORDER:
        value = metrics[name]
        text = "nan" if value is None else metric_name_to_print_format(name) % value
        lines.append(f"{name.upper()}: {text}")
    return lines
