"""Start a local Ray cluster sized to this machine, or join an existing one."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from autolabel.config import RayOptions

#: The folder holding the ``autolabel``, ``detectors``, ... packages (the repository root).
PROJECT_ROOT = Path(__file__).resolve().parents[1]

#: ``--ray`` given without an address: start a local cluster.
LOCAL = "local"


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
                num_cpus=opts.num_cpus if opts.num_cpus is not None else os.cpu_count(),
                num_gpus=opts.num_gpus,
                include_dashboard=False,
                runtime_env=local_runtime_env(),
                log_to_driver=False,
            )
        else:
            ray.init(address=address, log_to_driver=False)
    return dict(ray.cluster_resources())
