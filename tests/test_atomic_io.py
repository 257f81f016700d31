"""Atomic writes follow the umask like any other tool (issue 20.20), not mkstemp's 0600."""

from __future__ import annotations

import os
import stat

import pytest

from autolabel.atomic_io import atomic_write_bytes, atomic_write_json, current_umask


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o077, 0o002])
def test_written_files_follow_the_umask(tmp_path, mask):
    old = os.umask(mask)
    try:
        assert current_umask() == mask
        a = atomic_write_bytes(tmp_path / "sub" / "a.bin", b"x")
        b = atomic_write_json(tmp_path / "b.json", {"k": 1})
        atomic_write_bytes(a, b"replaced")  # replacing a file gives the new one the same mode
    finally:
        os.umask(old)
    for path in (a, b):
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask
    assert a.read_bytes() == b"replaced"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a.bin", "b.json", "sub"]
