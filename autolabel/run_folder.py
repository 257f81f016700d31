"""The run folder ``OUT`` of ``autolabel run``: checked before the first clip, held by one run at a
time, and one sub-folder per clip whose name can never point elsewhere.

A clip's folder is removed of files it did not write when the clip completes, so a folder name
taken from the dataset (the scene name) must be one plain path component inside ``OUT``: a name
like ``..``, ``/abs/dir`` or ``.`` would otherwise make the run write, and clean up, outside its
own folder.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: Held (``flock``) by the run writing into ``OUT``; removed when the run ends.
LOCK_FILE = ".autolabel-run.lock"


class RunFolderError(RuntimeError):
    """``OUT`` cannot be used: not a folder, not writable, or in use by another run."""


class ClipNameError(ValueError):
    """A scene name cannot be a clip folder name (it names a path, not one folder)."""


def clip_folder(out_dir: str | Path, clip_name: str) -> Path:
    """``OUT/<clip_name>``, checked to be a direct sub-folder of ``OUT``.

    Raises:
        ClipNameError: the name is empty, ``.``/``..``, holds a path separator or a NUL, starts
            with ``.`` (hidden, and where temp files live), or ``OUT/<name>`` is a link that
            leads out of ``OUT``.
    """
    name = str(clip_name)
    bad = (
        not name
        or name.startswith(".")
        or "/" in name
        or "\\" in name
        or "\0" in name
        or os.sep in name
        or (os.altsep is not None and os.altsep in name)
    )
    if bad:
        raise ClipNameError(
            f"scene name {name!r} cannot be a clip folder name (it must be one plain folder "
            "name: no '/', '\\', leading '.', or empty name); rename the scene in scene.json"
        )
    out = Path(out_dir)
    folder = out / name
    if folder.is_symlink() or (folder.exists() and folder.resolve().parent != out.resolve()):
        raise ClipNameError(f"{folder}: the clip folder is a link; it must be a folder of {out}")
    return folder


def check_out_dir(out_dir: str | Path) -> Path:
    """Create ``OUT`` if needed and check that this process can write in it.

    Raises:
        RunFolderError: ``OUT`` (or a parent) is a file, or cannot be created or written to.
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise RunFolderError(f"{out}: the run folder is a file, not a folder; choose another --out")
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=out, prefix=".autolabel-write-test.")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise RunFolderError(
            f"{out}: the run folder cannot be written ({e.strerror or e}); fix its permissions "
            "or choose another --out"
        ) from None
    return out


@contextmanager
def run_folder_lock(out_dir: str | Path) -> Iterator[Path]:
    """Hold ``OUT`` for this run: a second run into the same folder fails at once, naming it.

    Two runs writing one folder with different configs would each finish and leave one's manifest
    over the other's labels. The lock is an ``flock`` on ``OUT/.autolabel-run.lock``, released
    when the process exits, however it ends (a killed run leaves no stale lock to clear).
    A folder this call created is removed again if the run leaves nothing in it (a dataset that
    fails to open), so a mistyped dataroot does not leave an empty ``OUT`` behind.

    Raises:
        RunFolderError: another process holds the lock.
    """
    created = not Path(out_dir).exists()
    out = check_out_dir(out_dir)
    path = out / LOCK_FILE
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunFolderError(
                f"{out}: another autolabel run is writing into this folder; wait for it to "
                "finish or choose another --out"
            ) from None
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:  # not a lock file that its last holder removed while we opened it
            break
        os.close(fd)
    try:
        yield out
    finally:
        Path(path).unlink(missing_ok=True)
        os.close(fd)
        if created and not any(out.iterdir()):
            out.rmdir()
