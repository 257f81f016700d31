"""Finding a run's per-clip label files (``RUN/<clip>/labels/*.json``) for evaluation."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def clip_label_files(
    run_dir: str | Path, relative_path: Path, scenes: Sequence[str] | None = None
) -> dict[str, Path]:
    """Scene name -> ``RUN/<scene>/<relative_path>``, for ``scenes`` or every clip that has one.

    Raises:
        FileNotFoundError: the run folder is missing, a requested scene has no such file, or no
            clip has one at all (the message names the paths).
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"{run_dir}: run folder not found")
    if scenes is None:
        found = {
            p.parents[len(relative_path.parts) - 1].name: p
            for p in sorted(run_dir.glob(f"*/{relative_path}"))
        }
        if not found:
            raise FileNotFoundError(f"{run_dir}: no clip has {relative_path}")
        return found
    files = {scene: run_dir / scene / relative_path for scene in scenes}
    missing = [str(path) for path in files.values() if not path.is_file()]
    if missing:
        raise FileNotFoundError(f"{relative_path.name} missing: {', '.join(missing)}")
    return files
