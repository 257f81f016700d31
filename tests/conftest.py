import os

import pytest

# Numba's parallel layer and BLAS threads fight over the two cores of CI; keep runs predictable.
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def synth_run(tmp_path_factory):
    """The session's tiny synthetic dataset and its ``autolabel run`` (``session_data``)."""
    from session_data import session_run

    return session_run(tmp_path_factory)
