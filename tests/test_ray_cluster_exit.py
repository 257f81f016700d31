"""Issue 20.21: a local Ray cluster started by ``autolabel run --ray`` ends with the run, also
when the driver gets SIGTERM or SIGKILL (no GCS, raylet or agent process of its session stays)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pipeline_data import VERSION, make_dataset

pytest.importorskip("ray")
pytestmark = pytest.mark.slow


def _session_processes() -> dict[int, str]:
    """pid -> command line of every process of a Ray session on this machine."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"session_" in cmdline and b"ray" in cmdline:
            found[int(pid)] = cmdline.replace(b"\0", b" ").decode(errors="replace")
    return found


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    make_dataset(root, scenes=2)
    return root


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_the_local_cluster_ends_with_its_driver(dataset, tmp_path, sig):
    before = set(_session_processes())
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    driver = subprocess.Popen(
        [sys.executable, "-m", "autolabel.cli", "run", str(dataset), "--version", VERSION,
         "--out", str(tmp_path / "run"), "--ray", "--no-progress"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    ours: set[int] = set()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and len(ours) < 3 and driver.poll() is None:
        time.sleep(0.5)
        ours = set(_session_processes()) - before
    assert driver.poll() is None and len(ours) >= 3, "the local cluster did not start in time"
    time.sleep(2.0)
    ours = set(_session_processes()) - before
    driver.send_signal(sig)
    driver.wait(timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and ours & set(_session_processes()):
        time.sleep(0.5)
    left = {pid: cmd for pid, cmd in _session_processes().items() if pid in ours}
    assert not left, left
