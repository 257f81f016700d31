"""The secret salt of a release's re-keyed ids when the user gives none.

Ids are salted hashes of clip names and record ids; whoever knows the salt can test guesses
(every public scene name) and map ids back. A salt derived from the data (the old default: a
hash of the run's QA bytes) is known to anyone who can re-run the public data, so the default is
a random secret made once per run folder and kept in it (``RUN/.release-salt``, readable by its
owner only), never in the release: releases of one run keep the same ids, and nobody without the
run folder can reverse them. Pass ``--salt`` to choose (and keep) your own.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

#: The run folder's secret salt (hex), created on the first release without ``--salt``.
SALT_FILE = ".release-salt"


def salt_file(run_dir: str | Path) -> Path:
    return Path(run_dir) / SALT_FILE


def run_secret_salt(run_dir: str | Path) -> str:
    """The run folder's secret salt: read from ``RUN/.release-salt``, created (256 random bits,
    mode 0600) when missing.

    Raises:
        ValueError: the salt file exists but holds no salt (naming it).
    """
    path = salt_file(run_dir)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        salt = path.read_text(encoding="ascii", errors="replace").strip()
        if len(salt) < 32:
            raise ValueError(
                f"{path}: the release salt file is empty or too short; delete it to make a new "
                "secret (ids change) or restore it"
            ) from None
        return salt
    salt = secrets.token_hex(32)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(salt + "\n")
    return salt
