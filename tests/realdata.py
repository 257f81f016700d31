"""Where the real data of ``../shared/realdata`` is, for every test that reads it.

The data never enters the repository: it sits in ``shared/realdata`` beside the checkout (CI has
it there) or under ``$AUTOLABEL_REALDATA``. Tests that need a data set skip when it is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

NUSCENES_MMDET3D = "nuscenes-mmdet3d-tests"
PANDASET = "pandaset-002"
#: The devkit version name of the PandaSet-002 tables (``v1.0-pandaset``).
PANDASET_VERSION = "v1.0-pandaset"


def realdata_dir(name: str) -> Path | None:
    """The folder of real data set ``name`` (e.g. :data:`PANDASET`), or None when absent."""
    checkout = Path(__file__).resolve().parents[1]
    candidates = [os.environ.get("AUTOLABEL_REALDATA", ""), checkout.parent / "shared" / "realdata"]
    for root in candidates:
        if root and (Path(root) / name).is_dir():
            return Path(root) / name
    return None


def requires_realdata(name: str) -> pytest.MarkDecorator:
    """A skip marker for tests that read real data set ``name``."""
    return pytest.mark.skipif(realdata_dir(name) is None, reason=f"real data {name} not present")
