"""Hostile, careless or unlucky input (issue 20): every case of ``hostile_corpus`` gives a clear
error naming what is wrong, loses no clip, leaves the other clips byte-identical to a clean run
and writes nothing outside the run folder."""

from __future__ import annotations

import json
import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest
from hostile_corpus import (
    CASES,
    Dataset,
    clean_run,
    concurrent_run_refused,
    make_corpus_dataset,
    run_case,
)
from pipeline_data import VERSION, fast_config

from autolabel.atomic_io import current_umask
from autolabel.config import ConfigError, load_run_config
from autolabel.nuscenes_reader import open_dataset, read_clip
from autolabel.pipeline import run_pipeline
from autolabel.run_folder import RunFolderError
from detectors import DetectorUnavailableError
from detectors.detection_results import submission_meta, write_detection_submission

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    source = tmp_path_factory.mktemp("source")
    scenes = make_corpus_dataset(source)
    ds = Dataset(source, tmp_path_factory.mktemp("corpus") / "data", scenes)
    clean = clean_run(ds, tmp_path_factory.mktemp("clean") / "run")
    return ds, clean


@pytest.mark.parametrize("case", CASES, ids=[c.kind for c in CASES])
def test_hostile_case(corpus, case, tmp_path):
    ds, clean = corpus
    result = run_case(case, ds, clean, tmp_path)
    assert result.clear_error, result.detail
    assert result.lost_clips == []
    assert result.other_clips_identical
    assert result.user_files_kept


def test_a_second_run_into_a_held_folder_is_refused(corpus, tmp_path):
    ds, clean = corpus
    error = concurrent_run_refused(ds, tmp_path / "run")
    assert "another autolabel run is writing into this folder" in error
    assert str(tmp_path / "run") in error
    assert not (tmp_path / "run").exists()  # no clip started; the empty folder is not left


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan"])
def test_non_finite_config_numbers_are_refused_at_load(tmp_path, value):
    """Issue 20.14: ``.inf`` passed validation and broke the run after its first clip."""
    path = tmp_path / "run.yaml"
    path.write_text(f"segment: {{max_distance_m: {value}}}\n")
    with pytest.raises(ConfigError, match=rf"{path}.*segment\.max_distance_m: expected a finite"):
        load_run_config(path)
    path.write_text(f"detector_options: {{max_range_m: {value}}}\n")
    with pytest.raises(ConfigError, match="detector_options.max_range_m: expected a finite"):
        load_run_config(path)


def _results_file(ds: Dataset, path: Path, scene: str, shift_m: float = 0.0) -> Path:
    """A detection result file of one clip: its ground-truth boxes, moved by ``shift_m`` in x."""
    clip = read_clip(open_dataset(ds.root, VERSION), scene, max_sweeps=1)
    boxes = []
    for frame in clip.frames:
        b = frame.ground_truth.boxes
        boxes.append(replace(b, center_m=b.center_m + [shift_m, 0.0, 0.0]))
    return write_detection_submission(
        path, [f.token for f in clip.frames], boxes, submission_meta(use_lidar=True)
    )


def test_a_replaced_result_file_recomputes_the_clips(corpus, tmp_path):
    """Issue 20.9: the result file's content is part of the inputs hash."""
    ds, _ = corpus
    scene = ds.scenes[2]
    results = _results_file(ds, tmp_path / "results.json", scene)
    # refine: none, so that the labels are the result file's boxes as given.
    config = fast_config(detector="results", detector_options={"path": str(results)}, refine="none")
    out = tmp_path / "run"
    first = run_pipeline(ds.root, VERSION, out, [scene], config, progress=False)
    assert [c.status for c in first.clips] == ["done"]
    before = (out / scene / "labels" / "detection.json").read_bytes()
    _results_file(ds, results, scene, shift_m=0.75)  # same path, other boxes
    second = run_pipeline(ds.root, VERSION, out, [scene], config, progress=False)
    assert [c.status for c in second.clips] == ["done"]
    after = json.loads((out / scene / "labels" / "detection.json").read_text())
    assert (out / scene / "labels" / "detection.json").read_bytes() != before
    token = next(iter(after["results"]))
    expected = json.loads(results.read_text())["results"][token][0]["translation"]
    assert after["results"][token][0]["translation"] == pytest.approx(expected)
    third = run_pipeline(ds.root, VERSION, out, [scene], config, progress=False)
    assert [c.status for c in third.clips] == ["skipped"]


@pytest.mark.parametrize(
    ("size", "words"),
    [([float("nan"), 1.0, 1.0], "must be finite"), ([-1.0, 4.0, 1.5], "'size' must be"),
     ([2.0, 1e6, 1.5], "each at most 50")],
)  # fmt: skip
def test_out_of_range_result_boxes_stop_the_run_naming_sample_and_entry(
    corpus, tmp_path, size, words
):
    """Issue 20.15: refused before the first clip, as the CLI's one-line error, not a traceback."""
    ds, _ = corpus
    results = _results_file(ds, tmp_path / "results.json", ds.scenes[0])
    data = json.loads(results.read_text())
    token = next(iter(data["results"]))
    data["results"][token][0]["size"] = size
    results.write_text(json.dumps(data))
    config = fast_config(detector="results", detector_options={"path": str(results)})
    with pytest.raises(DetectorUnavailableError, match=rf"{results}: results\['{token}'\]\[0\]"):
        run_pipeline(ds.root, VERSION, tmp_path / "run", None, config, progress=False)
    with pytest.raises(DetectorUnavailableError, match=words):
        run_pipeline(ds.root, VERSION, tmp_path / "run", None, config, progress=False)


def test_run_files_follow_the_umask(corpus):
    """Issue 20.20: written with the umask's mode (the clean run ran under this process's)."""
    _, clean = corpus
    mask = current_umask()
    modes = {stat.S_IMODE(p.stat().st_mode) for p in clean.rglob("*") if p.is_file()}
    assert modes == {0o666 & ~mask}


def test_an_unusable_out_is_one_line_before_any_clip(corpus, tmp_path):
    """Issue 20.17 through the CLI: exit 2 and one line, not a traceback after every clip."""
    from typer.testing import CliRunner

    from autolabel.cli import app

    ds, _ = corpus
    out = tmp_path / "out"
    out.write_text("a file\n")
    args = ["run", str(ds.root), "--version", VERSION, "--out", str(out), "--no-progress"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert f"{out}: the run folder is a file" in result.output
    assert "Traceback" not in result.output


def test_a_dataset_that_fails_to_open_leaves_no_empty_out_behind(tmp_path):
    out = tmp_path / "new" / "run"
    with pytest.raises(Exception, match="nowhere"):
        run_pipeline(tmp_path / "nowhere", VERSION, out, None, fast_config(), progress=False)
    assert not out.exists()
    kept = tmp_path / "kept"
    kept.mkdir()
    with pytest.raises(Exception, match="nowhere"):
        run_pipeline(tmp_path / "nowhere", VERSION, kept, None, fast_config(), progress=False)
    assert kept.is_dir() and list(kept.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_out_is_refused_before_any_clip(corpus, tmp_path):
    ds, _ = corpus
    out = tmp_path / "ro"
    out.mkdir()
    out.chmod(0o500)
    try:
        with pytest.raises(RunFolderError, match=rf"{out}: the run folder cannot be written"):
            run_pipeline(ds.root, VERSION, out, None, fast_config(), progress=False)
    finally:
        out.chmod(0o700)
    assert list(out.iterdir()) == []
