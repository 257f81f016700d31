"""The pipeline on a local Ray cluster: same bytes as the serial run, also when worker and actor
processes are killed in the middle of the job, and after a re-run of a job that lost clips."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from pipeline_data import VERSION, assert_same_outputs, fast_config, output_tree
from typer.testing import CliRunner

from autolabel.config import RayOptions
from autolabel.pipeline import SUMMARY
from autolabel.run_report import format_run_report

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster():
    from ray_jobs.cluster import local_runtime_env

    # address="local": a cluster of its own, even where someone ran `ray start` on this machine.
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env=local_runtime_env(),
    )
    yield ray.cluster_resources()
    ray.shutdown()


@pytest.fixture(scope="module")
def dataset(synth_run):
    """The session's tiny synthetic dataset (``session_data``)."""
    return synth_run.dataroot, synth_run.scenes


@pytest.fixture(scope="module")
def serial(synth_run):
    """The session's serial run of it (``autolabel run`` with ``fast_config``)."""
    assert synth_run.exit_code == 0, synth_run.output
    return synth_run.run


#: Small batches so that a clip's model work spans several actor calls (and actors).
OPTIONS = {
    "detect_actors": 1,
    "segment_actors": 2,
    "detect_num_gpus": 0,
    "segment_num_gpus": 0,
    "detect_batch_frames": 3,
    "segment_batch_images": 6,
}


def _run_ray(dataset, out: Path, **options):
    from ray_jobs.run_clips import run_pipeline_ray

    root, _ = dataset
    return run_pipeline_ray(
        root, VERSION, out, None, fast_config(), RayOptions(**{**OPTIONS, **options}),
        progress=False,
    )  # fmt: skip


def test_actor_gpus_and_counts_follow_the_config_and_the_cluster():
    from ray_jobs.actors import actor_count, actor_gpus

    # Requested values win; by default a GPU backend takes one GPU where the cluster has one.
    assert actor_gpus(0.5, gpu_backend=False, cluster_gpus=0) == 0.5
    assert actor_gpus(None, gpu_backend=True, cluster_gpus=4) == 1.0
    assert actor_gpus(None, gpu_backend=True, cluster_gpus=0) == 0.0
    assert actor_gpus(None, gpu_backend=False, cluster_gpus=4) == 0.0
    # One actor per GPU share, or per CPU for CPU backends.
    assert actor_count(None, 1.0, {"CPU": 16, "GPU": 4}) == 4
    assert actor_count(None, 0.5, {"CPU": 16, "GPU": 4}) == 8
    assert actor_count(None, 0.0, {"CPU": 16, "GPU": 4}) == 16
    assert actor_count(3, 1.0, {"CPU": 16, "GPU": 4}) == 3


def test_frame_batches_cover_every_keyframe_once():
    from ray_jobs.clip_tasks import frame_batches

    assert frame_batches(8, 3) == [(0, 3), (3, 6), (6, 8)]
    assert frame_batches(2, 8) == [(0, 2)]
    assert frame_batches(0, 4) == []


def test_ray_run_writes_the_serial_run_s_bytes(cluster, dataset, serial, tmp_path):
    summary = _run_ray(dataset, tmp_path / "ray")
    assert [c.status for c in summary.clips] == ["done"] * 2, [c.error for c in summary.clips]
    assert summary.executor == "ray"
    assert_same_outputs(serial, tmp_path / "ray")
    # Timings are the work done: every stage has its own seconds, the model parts were done by
    # the actors (their busy seconds are part of the detect / segment stage seconds), and
    # waiting is counted apart.
    assert summary.actors == {"detect": OPTIONS["detect_actors"], "segment": 2}
    for clip in summary.clips:
        assert set(clip.stage_seconds) == set(clip.stage_cpu_seconds) >= {"read", "detect", "qa"}
        for kind in ("detect", "segment"):
            assert 0 < clip.actor_seconds[kind] <= clip.stage_seconds[kind] + 1e-3
        assert clip.wait_seconds >= 0
    shares = summary.actor_busy_share()
    assert set(shares) == {"detect", "segment"} and all(0 < v <= 1 for v in shares.values())
    report = format_run_report(summary)
    assert "clips/min" in report and "model actors busy: detect" in report


def _descends_from_us(pid: int) -> bool:
    """True when ``pid`` is a descendant of this test process (a worker of our own cluster)."""
    me = os.getpid()
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rsplit(")", 1)[1].split()[1])
        if pid == me:
            return True
    return False


def _processes_titled(prefix: str) -> list[int]:
    """PIDs of our Ray worker processes whose title starts with ``prefix`` (Ray titles a worker
    ``ray::<task>`` or ``ray::<Actor>.<method>`` while it runs one)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if title.startswith(prefix) and _descends_from_us(int(entry.name)):
            found.append(int(entry.name))
    return sorted(found)


class Killer(threading.Thread):
    """Kills (SIGKILL) the first process seen running each of ``titles``."""

    def __init__(self, titles: list[str]) -> None:
        super().__init__(daemon=True)
        self.titles, self.killed, self.stop = list(titles), {}, threading.Event()

    def run(self) -> None:
        while self.titles and not self.stop.is_set():
            for title in list(self.titles):
                pids = _processes_titled(title)
                if pids:
                    os.kill(pids[0], signal.SIGKILL)
                    self.killed[title] = pids[0]
                    self.titles.remove(title)
            time.sleep(0.02)


def _run_with_kills(dataset, out: Path, titles: list[str], **options):
    killer = Killer(titles)
    killer.start()
    try:
        summary = _run_ray(dataset, out, **options)
    finally:
        killer.stop.set()
        killer.join()
    return summary, killer.killed


def test_killed_workers_and_actors_are_retried_to_the_same_bytes(
    cluster, dataset, serial, tmp_path
):
    out = tmp_path / "ray"
    titles = ["ray::SegmenterWorker.segment", "ray::after_detect", "ray::finish"]
    summary, killed = _run_with_kills(dataset, out, titles)
    assert sorted(killed) == sorted(titles), f"only killed {killed}"
    assert [c.status for c in summary.clips] == ["done"] * 2, [c.error for c in summary.clips]
    clips = [c["clip"] for c in json.loads((out / SUMMARY).read_text())["clips"]]
    assert clips == dataset[1]  # each clip once
    assert not list(out.rglob("*.tmp"))
    assert_same_outputs(serial, out)


def test_a_rerun_completes_what_a_failed_job_lost(cluster, dataset, serial, tmp_path):
    out = tmp_path / "ray"
    # No retries: killing the segmenter actor loses the clips it was serving.
    first, killed = _run_with_kills(
        dataset, out, ["ray::SegmenterWorker.segment"], max_retries=0, max_restarts=0
    )
    assert killed
    failed = [c.clip for c in first.clips if c.status == "failed"]
    assert failed and all(c.error["message"] for c in first.clips if c.status == "failed")
    second = _run_ray(dataset, out)
    status = {c.clip: c.status for c in second.clips}
    assert all(status[name] == "done" for name in failed)
    assert all(s in ("done", "skipped") for s in status.values())
    assert_same_outputs(serial, out)


def _clip_tree(run_dir: Path, clip: str) -> dict[str, bytes]:
    return {k: v for k, v in output_tree(run_dir).items() if k.startswith(f"{clip}/")}


def test_run_cli_with_ray_writes_the_serial_bytes(cluster, synth_run, tmp_path):
    """``autolabel run --ray`` (the running cluster: Ray is initialised in this process)."""
    from autolabel.cli import app

    clip = synth_run.scenes[1]
    out = tmp_path / "ray"
    args = ["run", str(synth_run.dataroot), "--version", VERSION, "--out", str(out)]
    config = ["--scenes", clip, "--config", str(synth_run.config_file), "--no-progress"]
    res = CliRunner().invoke(app, [*args, *config, "--ray=local"])
    assert res.exit_code == 0, res.output
    assert "(done 1, skipped 0, failed 0)" in res.output and "(ray)" in res.output
    assert _clip_tree(out, clip) == _clip_tree(synth_run.run, clip)


def test_ray_job_entrypoint_writes_the_serial_bytes(cluster, synth_run, tmp_path, capsys):
    """``python -m ray_jobs.run_clips`` (what ``ray job submit`` runs): its ``main``."""
    from ray_jobs.run_clips import main

    clip = synth_run.scenes[0]
    out = tmp_path / "job"
    argv = [str(synth_run.dataroot), "--version", VERSION, "--out", str(out), "--scenes", clip]
    assert main([*argv, "--config", str(synth_run.config_file), "--no-progress"]) == 0
    assert "(done 1, skipped 0, failed 0)" in capsys.readouterr().out
    assert _clip_tree(out, clip) == _clip_tree(synth_run.run, clip)


def test_segmenter_actors_pass_the_run_s_segment_options(monkeypatch):
    """A Ray segmenter actor segments with the run's ``segment`` options (occluder disc, margin)
    and visibility thresholds (which views get no image evidence), as the serial stage does; it
    used to fall back to the defaults."""
    from types import SimpleNamespace

    import ray_jobs.actors as actors
    from autolabel.config import SegmentOptions

    seen = {}

    def fake_segment_images(
        segmenter, clip, views, images, options=None, track_score=None, visibility=None
    ):
        seen["options"], seen["visibility"] = options, visibility
        return []

    monkeypatch.setattr(actors, "segment_images", fake_segment_images)
    options = SegmentOptions(occluder_margin_m=3.5, occluder_radius_deg=0.7)
    config = fast_config(segment=options)
    ctx = SimpleNamespace(config=config, clip=None, results={"image_batches": [[]], "views": None})
    worker = actors.SegmenterWorker(config)
    result = worker.segment(SimpleNamespace(ctx=ctx, ready_at=0.0), 0, 0.0)
    assert isinstance(result, actors.BatchResult) and result.value == []
    assert seen["options"] is options
    assert seen["visibility"] is config.visibility
