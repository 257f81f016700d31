"""Every ``autolabel`` command end to end on the session's tiny synthetic run (``session_data``):
``run`` (``--config``, resume, ``--force``, exit 1 on a failed clip), ``check-qa``, ``release``,
``bench export``, ``bench score``, ``eval qa``, ``report`` and ``demo``. Each asserts what the
command wrote and printed. ``run --ray`` and ``python -m ray_jobs.run_clips`` are in
``test_ray_jobs.py``, on that module's cluster."""

from __future__ import annotations

import hashlib
import html
import json
import re
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pipeline_data import FAST_SEGMENTER, VERSION, fast_config, output_tree
from typer.testing import CliRunner

from autolabel.cli import app
from autolabel.config import PipelineConfig, config_to_dict
from autolabel.pipeline import MANIFEST, SUMMARY

pytestmark = pytest.mark.slow


def invoke(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])


def printed_values(output: str) -> dict[str, str]:
    """``name: value`` lines of a command's output."""
    return dict(re.findall(r"^([\w@.\- ]+): (.+)$", output, flags=re.M))


def clip_tree(run_dir: Path, clip: str) -> dict[str, bytes]:
    return {k: v for k, v in output_tree(run_dir).items() if k.startswith(f"{clip}/")}


def test_run_with_a_config_file_writes_every_clip(synth_run):
    assert synth_run.exit_code == 0, synth_run.output
    assert "clips: 2 (done 2, skipped 0, failed 0)" in synth_run.output
    summary = json.loads((synth_run.run / SUMMARY).read_text())
    assert [(c["clip"], c["status"]) for c in summary["clips"]] == [
        (s, "done") for s in synth_run.scenes
    ]
    # The YAML's settings, not the defaults, are what ran.
    assert config_to_dict(fast_config()) != config_to_dict(PipelineConfig())
    for clip in synth_run.scenes:
        manifest = json.loads((synth_run.run / clip / MANIFEST).read_text())
        assert manifest["config"] == config_to_dict(fast_config())
        assert manifest["config"]["segmenter_options"] == FAST_SEGMENTER
        assert manifest["inputs"]["dataroot"] == str(synth_run.dataroot)
    res = invoke("check-qa", synth_run.run, "--dataroot", synth_run.dataroot)
    assert res.exit_code == 0, res.output
    values = printed_values(res.output)
    assert values["mismatches"] == "0" and int(values["records"]) > 0


def test_run_resumes_and_force_recomputes_the_same_bytes(synth_run, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(synth_run.run, out)
    clip = synth_run.scenes[0]
    before = clip_tree(out, clip)
    mtimes = {p: p.stat().st_mtime_ns for p in (out / clip).rglob("*") if p.is_file()}
    args = ("run", synth_run.dataroot, "--version", VERSION, "--out", out, "--scenes", clip)
    config = ("--config", synth_run.config_file, "--no-progress")
    again = invoke(*args, *config)
    assert again.exit_code == 0 and "(done 0, skipped 1, failed 0)" in again.output
    assert all(p.stat().st_mtime_ns == t for p, t in mtimes.items())
    forced = invoke(*args, *config, "--force")
    assert forced.exit_code == 0 and "(done 1, skipped 0, failed 0)" in forced.output
    assert any(p.stat().st_mtime_ns != t for p, t in mtimes.items())
    assert clip_tree(out, clip) == before


def test_run_exits_1_on_a_failed_clip_and_names_the_file(synth_run, tmp_path):
    root = tmp_path / "data"
    shutil.copytree(synth_run.dataroot, root)
    clip = synth_run.scenes[0]
    # Truncate one LiDAR keyframe of the first clip.
    tables = root / VERSION
    scene = next(s for s in json.loads((tables / "scene.json").read_text()) if s["name"] == clip)
    sample_data = json.loads((tables / "sample_data.json").read_text())
    lidar = next(
        sd
        for sd in sample_data
        if sd["sample_token"] == scene["first_sample_token"]
        and sd["filename"].startswith("samples/LIDAR_TOP")
    )
    path = root / lidar["filename"]
    path.write_bytes(path.read_bytes()[:-7])
    out = tmp_path / "run"
    res = invoke(
        "run", root, "--version", VERSION, "--out", out, "--scenes", clip,
        "--config", synth_run.config_file, "--no-progress",
    )  # fmt: skip
    assert res.exit_code == 1, res.output
    assert f"FAILED {clip}: stage read [{path}]" in res.output
    recorded = json.loads((out / SUMMARY).read_text())["clips"]
    assert recorded[0]["status"] == "failed" and recorded[0]["error"]["file"] == str(path)
    assert not (out / clip / MANIFEST).exists()
    missing = invoke("run", root, "--version", VERSION, "--out", out, "--scenes", "no-such-clip")
    assert missing.exit_code == 2


def test_release_cli(synth_run, tmp_path):
    rel = tmp_path / "rel"
    # A salt of its own: without one the release keeps a random secret in RUN/.release-salt, and
    # the session's run must stay as it was built.
    res = invoke("release", synth_run.run, "--out", rel, "--no-learned-faces", "--salt", "cli")
    assert res.exit_code == 0, res.output
    splits = dict(re.findall(r"^split (\w+): (\d+) records", res.output, flags=re.M))
    assert splits and sum(map(int, splits.values())) > 0
    for split, n in splits.items():
        shards = sorted((rel / "data").glob(f"{split}-*.parquet"))
        assert sum(pq.read_metadata(s).num_rows for s in shards) == int(n)
    # Every file is listed in the checksums with its SHA-256.
    listed = {}
    for line in (rel / "checksums.sha256").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        listed[name.lstrip("*")] = digest
    files = {p.relative_to(rel).as_posix() for p in rel.rglob("*") if p.is_file()}
    assert set(listed) == files - {"checksums.sha256"}
    for name, digest in listed.items():
        assert hashlib.sha256((rel / name).read_bytes()).hexdigest() == digest
    # The questions are the run's: the release anonymizes images and ids, not the QA text.
    run_questions = {
        json.loads(line)["question"]
        for clip in synth_run.scenes
        for line in (synth_run.run / clip / "qa.jsonl").read_text().splitlines()
    }
    table = pq.read_table(sorted((rel / "data").glob("*.parquet"))[0], columns=["question"])
    questions = table.column("question").to_pylist()
    assert questions and set(questions) <= run_questions
    assert (rel / "README.md").read_text().startswith("---")


def test_bench_export_and_score_cli(synth_run, tmp_path):
    bench = tmp_path / "bench"
    res = invoke("bench", "export", synth_run.run, "--out", bench)
    assert res.exit_code == 0, res.output
    n = int(printed_values(res.output)["questions"])
    questions = [json.loads(x) for x in (bench / "questions.jsonl").read_text().splitlines()]
    key = [json.loads(x) for x in (bench / "answer_key.jsonl").read_text().splitlines()]
    assert len(questions) == len(key) == n > 0
    assert [q["id"] for q in questions] == [k["id"] for k in key]
    for q in questions:
        assert all((bench / image).is_file() for image in q["images"]), q["id"]
    oracle = invoke("bench", "score", bench, bench / "baselines/oracle.jsonl")
    assert oracle.exit_code == 0, oracle.output
    scores = json.loads((bench / "baselines/oracle.scores.json").read_text())
    assert scores["questions"] == n and scores["answered"] == n
    assert printed_values(oracle.output)["questions"] == str(n)
    # Answers that state nothing score nothing; unknown ids are counted, not fatal.
    blank = tmp_path / "blank.jsonl"
    lines = [{"id": q["id"], "answer": "I cannot tell."} for q in questions]
    lines.append({"id": "not-a-question", "answer": "1 meter."})
    blank.write_text("".join(json.dumps(x) + "\n" for x in lines))
    res = invoke("bench", "score", bench, blank, "--out", tmp_path / "blank.json")
    assert res.exit_code == 0, res.output
    result = json.loads((tmp_path / "blank.json").read_text())
    assert result["unknown_ids"] == 1 and result["score"] == 0.0
    assert invoke("bench", "score", bench, tmp_path / "missing.jsonl").exit_code == 1


def test_eval_qa_cli_a_run_against_itself(synth_run, tmp_path):
    candidate = tmp_path / "cand"
    shutil.copytree(synth_run.run, candidate)
    res = invoke("eval", "qa", synth_run.run, candidate)
    assert res.exit_code == 0, res.output
    written = candidate / "eval/label_quality.json"
    assert f"written: {written}" in res.output
    overall = json.loads(written.read_text())["overall"]
    assert overall["candidate_questions"] == overall["reference_questions"] > 0
    assert overall["agreement"] == 1.0 and overall["missed"] == 0 and overall["unmatched"] == 0


def test_report_cli(synth_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(synth_run.run, run)
    res = invoke("report", run, "--max-keyframes", "2")
    assert res.exit_code == 0, res.output
    page = run / "report/index.html"
    assert f"written: {page}" in res.output
    text = page.read_text()
    sources = re.findall(r"<img[^>]+src=[\"']([^\"']+)[\"']", text)
    assert sources and all((page.parent / s).resolve().is_file() for s in sources)
    for clip in synth_run.scenes:
        assert clip in text
        assert any(f"{clip}/marks/" in s and s.endswith("_stitched.png") for s in sources), clip
    first = json.loads((run / synth_run.scenes[0] / "qa.jsonl").read_text().splitlines()[0])
    assert html.escape(first["question"]) in text


def test_demo_cli(tmp_path):
    out = tmp_path / "demo"
    res = invoke(
        "demo", "--out", out, "--scenes", "1", "--seconds", "4", "--width", "320",
        "--height", "180", "--no-progress", "--no-label-quality",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    values = printed_values(res.output)
    det = json.loads((out / "run/eval/det.json").read_text())
    assert float(values["mAP"]) == pytest.approx(det["mean_ap"], abs=1e-4)
    assert "AMOTA" in values and (out / "run/eval/track.json").is_file()
    assert (out / "run/report/index.html").is_file()
    assert values["report"] == str(out / "run/report/index.html")
    assert list((out / "run/bench").glob("**/*.scores.json"))
    assert "release" in values and (Path(values["release"].split(" (")[0]) / "README.md").is_file()
