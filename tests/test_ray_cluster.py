"""The Ray job on a cluster of several nodes: Ray's own ``cluster_utils.Cluster`` starts one raylet
per node on this machine (a head that offers only a ``model_node`` resource, two CPU nodes), so
model actors and CPU tasks must cross nodes, objects travel between object stores, and a node can
be removed while the job runs."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from pipeline_data import VERSION, assert_same_outputs, fast_config, make_dataset

from autolabel.config import RayOptions
from autolabel.pipeline import run_pipeline

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow

#: Model actors only where the ``model_node`` resource is (the head); CPU tasks on the CPU nodes.
OPTIONS = RayOptions(
    detect_actors=1,
    segment_actors=1,
    detect_num_gpus=0,
    segment_num_gpus=0,
    detect_batch_frames=4,
    segment_batch_images=12,
    actor_resources={"model_node": 1},
)


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    from ray_jobs.cluster import local_runtime_env

    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 0, "resources": {"model_node": 2}, "include_dashboard": False},
    )
    workers = [cluster.add_node(num_cpus=1) for _ in range(2)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, runtime_env=local_runtime_env(), log_to_driver=False)
    yield cluster, workers
    ray.shutdown()
    cluster.shutdown()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    return root, make_dataset(root, scenes=3)["scenes"]


@pytest.fixture(scope="module")
def serial(dataset, tmp_path_factory):
    root, _ = dataset
    out = tmp_path_factory.mktemp("serial")
    summary = run_pipeline(root, VERSION, out, None, fast_config(), progress=False)
    assert all(c.status == "done" for c in summary.clips), [c.error for c in summary.clips]
    return out


def _run(dataset, out: Path, options: RayOptions = OPTIONS):
    from ray_jobs.run_clips import run_pipeline_ray

    root, _ = dataset
    return run_pipeline_ray(root, VERSION, out, None, fast_config(), options, progress=False)


def test_actors_and_tasks_run_on_different_nodes_with_the_serial_bytes(
    cluster, dataset, serial, tmp_path
):
    head, workers = cluster
    cpu_nodes = {w.node_id for w in workers}
    summary = _run(dataset, tmp_path / "ray")
    assert [c.status for c in summary.clips] == ["done"] * 3, [c.error for c in summary.clips]
    for clip in summary.clips:
        assert clip.nodes["detect"] == [head.head_node.node_id]
        assert clip.nodes["segment"] == [head.head_node.node_id]
        for step in ("prepare", "after_detect", "finish"):
            assert set(clip.nodes[step]) <= cpu_nodes, (step, clip.nodes)
    assert_same_outputs(serial, tmp_path / "ray")


def test_a_node_removed_mid_job_loses_no_clip(cluster, dataset, serial, tmp_path):
    """One CPU node dies while clips are in flight: its tasks are retried on the other node and
    its lost objects rebuilt (Ray lineage), or a re-submission finishes exactly the lost clips."""
    head, workers = cluster
    out = tmp_path / "ray"
    result = {}
    job = threading.Thread(target=lambda: result.setdefault("summary", _run(dataset, out)))
    job.start()
    deadline = time.monotonic() + 300
    while not list(out.glob("*/labels/detection.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    victim = workers.pop()
    head.remove_node(victim, allow_graceful=False)
    job.join(timeout=600)
    assert not job.is_alive()
    first = result["summary"]
    lost = [c.clip for c in first.clips if c.status == "failed"]
    print(f"node removed; clips lost by the first submission: {lost}")
    if lost:  # retries exhausted: a re-submission recomputes exactly those
        second = _run(dataset, out)
        status = {c.clip: c.status for c in second.clips}
        assert sorted(n for n, s in status.items() if s == "done") == sorted(lost)
    assert_same_outputs(serial, out)
    workers.append(head.add_node(num_cpus=1))  # later tests keep two CPU nodes
    head.wait_for_nodes()


def test_a_path_a_node_cannot_see_is_named_with_the_node(cluster, dataset, tmp_path):
    from ray_jobs.cluster import ClusterPathError, _path_problems, check_cluster_paths

    root, _ = dataset
    alive = [n for n in ray.nodes() if n["Alive"]]
    assert check_cluster_paths(root, tmp_path / "out") == len(alive) == 3
    assert not list((tmp_path / "out").iterdir())  # the probe files are gone
    # A dataroot that exists on no node (on a real cluster: on the driver's disk only).
    missing = tmp_path / "node-local-data"
    with pytest.raises(ClusterPathError) as err:
        check_cluster_paths(missing, tmp_path / "out")
    lines = str(err.value).splitlines()[1:]
    assert sorted(line.split("(")[1][:12] for line in lines) == sorted(
        n["NodeID"][:12] for n in alive
    )
    assert all(f"dataroot {missing}: not a readable folder" in line for line in lines)
    # OUT that is another folder on the node than on the driver: the driver's token is not seen.
    (tmp_path / "out" / "probe").write_text("the node's own folder")
    problems = _path_problems(str(root), str(tmp_path / "out"), "probe", "driver-token")
    assert problems == [
        f"OUT {tmp_path / 'out'}: not the folder the driver writes (its probe file is not "
        "visible here); OUT must be on storage every node shares"
    ]
