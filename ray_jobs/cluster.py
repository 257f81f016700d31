"""Start a local Ray cluster sized to this machine, or join an existing one; a local cluster the
run started is shut down when the run ends, however it ends.

``ray.init`` of a local cluster starts a GCS server, a raylet and their agents (dashboard agent,
runtime-env agent). A driver that exits normally stops them (``ray.shutdown``), but one ended by
SIGTERM never runs that, and one killed outright (SIGKILL, the OOM killer) leaves the agents
running. ``ray_session`` therefore shuts the cluster down on exit, on SIGINT and on SIGTERM, and
starts a small watchdog process that ends every process of the cluster's session once the
driver is gone.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from autolabel.config import RayOptions

#: The folder holding the ``autolabel``, ``detectors``, ... packages (the repository root).
PROJECT_ROOT = Path(__file__).resolve().parents[1]

#: ``--ray`` given without an address: start a local cluster.
LOCAL = "local"


#: What to do when a cluster refuses or drops the connection (Ray >= 2.60 token authentication).
AUTH_HELP = (
    "if the cluster uses token authentication (Ray >= 2.60 enables it when the head has a "
    "token, ~/.ray/auth_token), set RAY_AUTH_MODE=token here and give the head's token "
    "(`ray get-auth-token` on the head) in ~/.ray/auth_token or RAY_AUTH_TOKEN"
)


class ClusterError(RuntimeError):
    """The run cannot use the Ray cluster: no connection, or a path a node cannot use."""


def local_runtime_env() -> dict[str, Any]:
    """Runtime env of a local cluster's workers: this checkout's packages first on the path, so
    workers import the same code as the driver (not another installed copy)."""
    paths = [str(PROJECT_ROOT)]
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    return {"env_vars": {"PYTHONPATH": os.pathsep.join(paths)}}


def connect(address: str | None = None, options: RayOptions | None = None) -> dict[str, float]:
    """Initialise Ray for a run and return the cluster's resources.

    Args:
        address: None or ``"local"``: start a local cluster with ``options.num_cpus`` /
            ``num_gpus`` (None: the machine's); inside a ``ray job submit`` job (``RAY_ADDRESS``
            set) None joins the job's cluster instead. ``"auto"``: the cluster started on this
            machine with ``ray start``. Otherwise a cluster address (``ray://host:10001``,
            ``host:6379``).
        options: the run's ``RayOptions``.

    An already initialised Ray (a test fixture, a notebook) is used as it is.
    """
    import ray

    opts = options or RayOptions()
    if not ray.is_initialized():
        if address in (None, LOCAL) and not (address is None and os.environ.get("RAY_ADDRESS")):
            ray.init(
                address="local",  # a new cluster, even when another one runs on this machine
                num_cpus=opts.num_cpus if opts.num_cpus is not None else os.cpu_count(),
                num_gpus=opts.num_gpus,
                include_dashboard=False,
                runtime_env=local_runtime_env(),
                log_to_driver=False,
            )
        else:
            try:
                ray.init(address=address, log_to_driver=False)
            except (ConnectionError, ray.exceptions.AuthenticationError) as exc:
                where = address or os.environ.get("RAY_ADDRESS", "")
                raise ClusterError(
                    f"cannot connect to Ray at {where}: {exc}; {AUTH_HELP}"
                ) from None
    return dict(ray.cluster_resources())


#: The watchdog: waits for the driver to end, then ends every process of the Ray session.
_WATCHDOG = r"""
import os, signal, sys, time
driver, session = int(sys.argv[1]), sys.argv[2]
while True:
    try:
        os.kill(driver, 0)
    except ProcessLookupError:
        break
    time.sleep(0.5)
time.sleep(1.0)  # a normal shutdown, under way, stops them itself
for sig in (signal.SIGTERM, signal.SIGKILL):
    found = False
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if session.encode() in cmdline:
            found = True
            try:
                os.kill(int(pid), sig)
            except OSError:
                pass
    if not found:
        break
    time.sleep(2.0)
"""


def _session_name() -> str:
    import ray

    node = getattr(ray._private.worker, "_global_node", None)  # noqa: SLF001 - no public API
    session_dir = node.get_session_dir_path() if node is not None else ""
    return Path(session_dir).name if session_dir else ""


def _terminate(signum, frame) -> None:
    raise SystemExit(128 + signum)


@contextmanager
def ray_session(
    address: str | None = None, options: RayOptions | None = None
) -> Iterator[dict[str, float]]:
    """``connect`` for the length of a run: yields the cluster's resources. A local cluster that
    this call starts is shut down on leaving, on SIGINT (KeyboardInterrupt) and on SIGTERM (turned
    into ``SystemExit`` while the run lasts), and by a watchdog process if the driver is killed.
    A cluster that was joined, or a Ray already initialised by the caller, is left running."""
    import ray

    started = not ray.is_initialized()
    resources = connect(address, options)
    started = started and ray.is_initialized() and _is_local_head(address)
    if not started:
        yield resources
        return
    watchdog = None
    session = _session_name()
    if session and Path("/proc").is_dir():
        watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(os.getpid()), session],
            start_new_session=True,  # a Ctrl-C to the terminal's group must not end it first
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    previous = None
    try:
        previous = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread: SIGTERM keeps its handler
        previous = None
    try:
        yield resources
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        ray.shutdown()
        if watchdog is not None:
            watchdog.kill()
            watchdog.wait()


def _is_local_head(address: str | None) -> bool:
    return address in (None, LOCAL) and not (address is None and os.environ.get("RAY_ADDRESS"))


class ClusterPathError(ClusterError):
    """A node of the cluster cannot read the dataroot or write ``OUT`` where the driver does."""


def _path_problems(dataroot: str, out_dir: str, probe_name: str, token: str) -> list[str]:
    """What this node cannot do with the run's folders (runs on each node)."""
    problems = []
    if not Path(dataroot).is_dir():
        problems.append(f"dataroot {dataroot}: not a readable folder on this node")
    probe = Path(out_dir) / probe_name
    try:
        seen = probe.read_text()
    except OSError:
        seen = None
    if seen != token:
        problems.append(
            f"OUT {out_dir}: not the folder the driver writes (its probe file is not visible "
            "here); OUT must be on storage every node shares"
        )
    else:
        try:
            with tempfile.NamedTemporaryFile(dir=out_dir, prefix=".autolabel-write-probe-"):
                pass
        except OSError as exc:
            problems.append(f"OUT {out_dir}: not writable on this node ({exc.strerror})")
    return problems


def check_cluster_paths(dataroot: str | Path, out_dir: str | Path) -> int:
    """Check on every alive node of the connected cluster that ``dataroot`` is readable and that
    ``out_dir`` is the same writable folder the driver sees; the number of nodes checked.

    The driver writes a probe file with a random token into ``out_dir``; a task pinned to each
    node reads it back and writes a file of its own beside it.

    Raises:
        ClusterPathError: naming each path, node address and node id that failed.
    """
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(16)
    probe_name = f".autolabel-path-probe-{token[:8]}"
    probe = out_dir / probe_name
    probe.write_text(token)
    try:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        check = ray.remote(_path_problems)
        refs = [
            check.options(
                num_cpus=0,
                max_retries=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
            ).remote(str(dataroot), str(out_dir), probe_name, token)
            for n in nodes
        ]
        found = [
            f"node {n['NodeManagerAddress']} ({n['NodeID'][:12]}): {problem}"
            for n, problems in zip(nodes, ray.get(refs), strict=True)
            for problem in problems
        ]
    finally:
        probe.unlink(missing_ok=True)
    if found:
        raise ClusterPathError("the cluster cannot run this job:\n  " + "\n  ".join(found))
    return len(nodes)
