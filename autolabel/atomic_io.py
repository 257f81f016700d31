"""Atomic, deterministic file writes: a temp file in the target folder, then ``os.replace``.

A reader never sees a half-written file, and a killed job leaves either the old file or the new.
Files get the permissions the process's umask gives a newly created file (``0666 & ~umask``),
like any other tool's output, not the 0600 of the temp file they are written as.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def current_umask() -> int:
    """The process's umask, read without changing it where Linux shows it (``/proc``); elsewhere
    set and restored at once."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def umask_mode(mode: int = 0o666) -> int:
    """``mode`` as the umask lets a new file (0666) or folder (0777) have it."""
    return mode & ~current_umask()


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically, creating parent folders; the file's mode follows
    the umask."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, umask_mode(0o666))
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def canonical_json(obj: Any, indent: int | None = None) -> str:
    """JSON with sorted keys and no NaN (rejected), so equal data gives equal bytes."""
    return json.dumps(
        obj,
        sort_keys=True,
        indent=indent,
        allow_nan=False,
        separators=None if indent else (",", ":"),
    )


def atomic_write_json(path: str | Path, obj: Any, indent: int | None = None) -> Path:
    """Write ``obj`` as canonical JSON (sorted keys) atomically."""
    return atomic_write_text(path, canonical_json(obj, indent) + "\n")
