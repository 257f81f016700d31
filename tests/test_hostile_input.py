"""Hostile, careless or unlucky input (issue 20): every case of ``hostile_corpus`` gives a clear
error naming what is wrong, loses no clip, leaves the other clips byte-identical to a clean run
and writes nothing outside the run folder."""

from __future__ import annotations

import pytest
from hostile_corpus import (
    CASES,
    Dataset,
    clean_run,
    concurrent_run_refused,
    make_corpus_dataset,
    run_case,
)

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
    assert not any(p.is_dir() for p in (tmp_path / "run").iterdir())  # no clip started
