"""nuScenes tracking submission files: write one per clip, read and merge them for the devkit.

Format (https://www.nuscenes.org/tracking, "Results format")::

    {"meta": {"use_camera": bool, "use_lidar": bool, "use_radar": bool, "use_map": bool,
              "use_external": bool},
     "results": {sample_token: [{"sample_token", "translation", "size", "rotation", "velocity",
                                 "tracking_id", "tracking_name", "tracking_score"}, ...]}}

Only the nuScenes tracking classes (``TRACKING_CLASSES``) are written; the other classes stay in the
in-memory tracks for later stages. The format has no "unknown" velocity: a box whose velocity is
unknown (NaN: a track observed once by a detector without velocity) is written with velocity 0;
the tracking metrics do not use velocity.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from autolabel.atomic_io import atomic_write_json
from autolabel.boxes import Boxes3D
from autolabel.classes import DETECTION_CLASSES, TRACKING_CLASSES
from calib.rotation import quat_wxyz_from_yaw

#: ``meta`` of a submission from LiDAR alone (the laptop default).
LIDAR_ONLY_META: dict[str, bool] = {
    "use_camera": False,
    "use_lidar": True,
    "use_radar": False,
    "use_map": False,
    "use_external": False,
}
_META_KEYS = tuple(LIDAR_ONLY_META)
_BOX_KEYS = (
    "sample_token",
    "translation",
    "size",
    "rotation",
    "velocity",
    "tracking_id",
    "tracking_name",
    "tracking_score",
)
_IS_TRACKING_LABEL = np.array([name in TRACKING_CLASSES for name in DETECTION_CLASSES])


def _check_meta(meta: Any, where: str) -> dict[str, bool]:
    if not isinstance(meta, dict) or set(meta) != set(_META_KEYS):
        raise ValueError(f"{where}: 'meta' must have exactly the keys {list(_META_KEYS)}")
    if not all(isinstance(meta[k], bool) for k in _META_KEYS):
        raise ValueError(f"{where}: every 'meta' value must be true or false")
    return dict(meta)


def sample_tracking_results(sample_token: str, tracks: Boxes3D) -> list[dict[str, Any]]:
    """The submission entries of one keyframe: tracked boxes of the tracking classes.

    Args:
        sample_token: the keyframe's nuScenes sample token.
        tracks: tracked boxes of the keyframe, global frame, ``track_id`` >= 0.
    """
    if tracks.frame != "global":
        raise ValueError(f"tracking results must be in the global frame, got {tracks.frame!r}")
    if np.any(tracks.track_id < 0):
        raise ValueError(f"sample {sample_token}: every box must carry a track id >= 0")
    boxes = tracks[_IS_TRACKING_LABEL[tracks.label]]
    velocity = np.nan_to_num(boxes.velocity_mps, nan=0.0)
    rotation = quat_wxyz_from_yaw(boxes.yaw_rad).reshape(-1, 4)
    names = boxes.class_name
    return [
        {
            "sample_token": sample_token,
            "translation": translation,
            "size": size,
            "rotation": quat,
            "velocity": vel,
            "tracking_id": str(track_id),
            "tracking_name": str(name),
            "tracking_score": score,
        }
        for translation, size, quat, vel, track_id, name, score in zip(
            boxes.center_m.tolist(),
            boxes.size_wlh_m.tolist(),
            rotation.tolist(),
            velocity.tolist(),
            boxes.track_id.tolist(),
            names,
            boxes.score.astype(np.float64).tolist(),
            strict=True,
        )
    ]


def tracking_submission(
    sample_tokens: Sequence[str], tracks: Sequence[Boxes3D], meta: dict[str, bool] | None = None
) -> dict[str, Any]:
    """A clip's tracking submission: every keyframe's sample token, with its boxes (maybe none).

    Args:
        sample_tokens: F sample tokens, in keyframe order.
        tracks: F tracked box sets (``PubTracker.track_clip`` output).
        meta: the sensors used; default ``LIDAR_ONLY_META``.
    """
    if len(sample_tokens) != len(tracks):
        raise ValueError(
            f"tracking_submission: {len(sample_tokens)} sample tokens but {len(tracks)} frames"
        )
    if len(set(sample_tokens)) != len(sample_tokens):
        raise ValueError("tracking_submission: sample tokens repeat")
    meta = _check_meta(LIDAR_ONLY_META if meta is None else meta, "tracking_submission")
    results = {
        token: sample_tracking_results(token, boxes)
        for token, boxes in zip(sample_tokens, tracks, strict=True)
    }
    return {"meta": meta, "results": results}


def write_tracking_submission(
    path: str | Path,
    sample_tokens: Sequence[str],
    tracks: Sequence[Boxes3D],
    meta: dict[str, bool] | None = None,
) -> Path:
    """Write a clip's submission atomically (canonical JSON: same tracks, same bytes)."""
    return atomic_write_json(path, tracking_submission(sample_tokens, tracks, meta))


def load_tracking_submission(path: str | Path) -> dict[str, Any]:
    """Read and check a submission file; errors name the file and what is wrong."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: tracking results not found") from None
    except ValueError as e:
        raise ValueError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise ValueError(f"{path}: expected an object with a 'results' mapping")
    _check_meta(data.get("meta"), str(path))
    for token, boxes in data["results"].items():
        if not isinstance(boxes, list):
            raise ValueError(f"{path}: results[{token!r}] must be a list")
        for i, box in enumerate(boxes):
            if not isinstance(box, dict) or set(box) < set(_BOX_KEYS):
                raise ValueError(f"{path}: results[{token!r}][{i}] must have the keys {_BOX_KEYS}")
            if box["sample_token"] != token:
                raise ValueError(
                    f"{path}: results[{token!r}][{i}] has sample_token {box['sample_token']!r}"
                )
            if box["tracking_name"] not in TRACKING_CLASSES:
                raise ValueError(
                    f"{path}: results[{token!r}][{i}]: tracking_name {box['tracking_name']!r} is "
                    f"not one of {TRACKING_CLASSES}"
                )
    return data


def merge_tracking_submissions(paths: Sequence[str | Path]) -> dict[str, Any]:
    """One submission from several clips' files (the devkit evaluates one file).

    Track ids stay as they are: the devkit matches tracks within a scene only.

    Raises:
        ValueError: no files, a sample token in two files, or files with different ``meta``.
    """
    if not paths:
        raise ValueError("merge_tracking_submissions: no tracking files given")
    merged: dict[str, Any] = {"meta": None, "results": {}}
    owner: dict[str, Path] = {}
    for path in map(Path, paths):
        data = load_tracking_submission(path)
        if merged["meta"] is None:
            merged["meta"] = data["meta"]
        elif data["meta"] != merged["meta"]:
            raise ValueError(
                f"{path}: meta {data['meta']} differs from {paths[0]}'s {merged['meta']}"
            )
        for token, boxes in data["results"].items():
            if token in owner:
                raise ValueError(f"{path}: sample {token} is also in {owner[token]}")
            owner[token] = path
            merged["results"][token] = boxes
    return merged
