"""nuScenes detection submission files: write a clip's boxes, read any model's file, merge clips.

The format is the one nuscenes-devkit's ``DetectionEval`` reads (and mmdet3d, BEVFusion's own
repository and most nuScenes detectors write)::

    {"meta": {"use_camera": bool, "use_lidar": bool, "use_radar": bool, "use_map": bool,
              "use_external": bool},
     "results": {sample_token: [{"sample_token", "translation" [x, y, z] (global, m),
                                 "size" [w, l, h] (m), "rotation" [w, x, y, z],
                                 "velocity" [vx, vy] (global, m/s), "detection_name",
                                 "detection_score", "attribute_name"}, ...]}}

Every evaluated sample must appear in ``results`` (an empty list when nothing was detected).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from nuscenes.eval.detection.constants import ATTRIBUTE_NAMES

from autolabel.atomic_io import atomic_write_json
from autolabel.boxes import Boxes3D
from autolabel.classes import CLASS_INDEX, DEFAULT_ATTRIBUTE, DETECTION_CLASSES
from calib.rotation import quat_wxyz_from_yaw, rotation_from_quat_wxyz, yaw_from_rotation

#: Above this speed (m/s) a box gets its class's "moving" attribute (mmdet3d's threshold).
MOVING_SPEED_MPS = 0.2
#: The devkit rejects a file with more boxes than this for one sample (detection_cvpr_2019).
MAX_BOXES_PER_SAMPLE = 500
META_KEYS = ("use_camera", "use_lidar", "use_radar", "use_map", "use_external")
#: Decimals kept in the file: 0.1 mm and 1e-6 of a score, far below any metric's resolution.
_DECIMALS = 6

_MOVING_ATTRIBUTE = np.array(
    [DEFAULT_ATTRIBUTE[c][0] if DEFAULT_ATTRIBUTE[c] else "" for c in DETECTION_CLASSES],
    dtype=object,
)
_VALID_ATTRIBUTES = np.array(["", *ATTRIBUTE_NAMES], dtype=object)
_STILL_ATTRIBUTE = np.array(
    [DEFAULT_ATTRIBUTE[c][1] if DEFAULT_ATTRIBUTE[c] else "" for c in DETECTION_CLASSES],
    dtype=object,
)


#: Largest box side accepted from a result file, metres (the longest road vehicles are ~25 m; a
#: larger box is a unit or format error, and would swallow every point and region near it).
MAX_BOX_SIZE_M = 50.0


class SubmissionFormatError(ValueError):
    """A detection submission file is malformed; the message names the file and the entry."""


def submission_meta(
    use_camera: bool = False,
    use_lidar: bool = False,
    use_radar: bool = False,
    use_map: bool = False,
    use_external: bool = False,
) -> dict[str, bool]:
    """The ``meta`` block of a submission: which inputs the detector used."""
    return {
        "use_camera": use_camera,
        "use_lidar": use_lidar,
        "use_radar": use_radar,
        "use_map": use_map,
        "use_external": use_external,
    }


def attribute_names(boxes: Boxes3D, moving_speed_mps: float = MOVING_SPEED_MPS) -> np.ndarray:
    """(N,) nuScenes attribute of each box from its class and speed.

    Moving (speed above ``moving_speed_mps``): ``vehicle.moving``, ``cycle.with_rider``,
    ``pedestrian.moving``; otherwise ``vehicle.parked`` (``vehicle.stopped`` for buses),
    ``cycle.without_rider``, ``pedestrian.standing``. Unknown (NaN) velocity counts as not
    moving. Barriers and traffic cones have no attribute (``''``), as the devkit requires.
    """
    speed_mps = np.hypot(boxes.velocity_mps[:, 0], boxes.velocity_mps[:, 1])
    moving = np.nan_to_num(speed_mps, nan=0.0) > moving_speed_mps
    return np.where(moving, _MOVING_ATTRIBUTE[boxes.label], _STILL_ATTRIBUTE[boxes.label])


def submission_records(sample_token: str, boxes: Boxes3D) -> list[dict[str, Any]]:
    """The submission entries of one sample's global-frame boxes, highest score first.

    At most ``MAX_BOXES_PER_SAMPLE`` boxes are kept (the highest scoring). Unknown (NaN)
    velocities are written as 0 m/s: the format has no "unknown", and JSON no NaN.
    """
    if boxes.frame != "global":
        raise ValueError(
            f"sample {sample_token}: boxes must be in the global frame, not {boxes.frame!r}"
        )
    order = np.argsort(-boxes.score.astype(np.float64), kind="stable")[:MAX_BOXES_PER_SAMPLE]
    kept = boxes[order]
    translation = np.round(kept.center_m, _DECIMALS).tolist()
    size = np.round(kept.size_wlh_m, _DECIMALS).tolist()
    rotation = np.round(quat_wxyz_from_yaw(kept.yaw_rad), _DECIMALS).tolist()
    velocity = np.round(np.nan_to_num(kept.velocity_mps, nan=0.0), _DECIMALS).tolist()
    score = np.round(kept.score.astype(np.float64), _DECIMALS).tolist()
    names = kept.class_name.tolist()
    attributes = attribute_names(kept).tolist()
    return [
        {
            "sample_token": sample_token,
            "translation": t,
            "size": s,
            "rotation": r,
            "velocity": v,
            "detection_name": n,
            "detection_score": float(p),
            "attribute_name": a,
        }
        for t, s, r, v, n, p, a in zip(
            translation, size, rotation, velocity, names, score, attributes, strict=True
        )
    ]


def detection_submission(
    sample_tokens: Sequence[str], boxes_per_sample: Sequence[Boxes3D], meta: Mapping[str, bool]
) -> dict[str, Any]:
    """A submission dict for samples and their global-frame boxes (parallel sequences)."""
    if len(sample_tokens) != len(boxes_per_sample):
        raise ValueError(f"{len(sample_tokens)} sample tokens but {len(boxes_per_sample)} box sets")
    if len(set(sample_tokens)) != len(sample_tokens):
        raise ValueError("duplicate sample tokens in one submission")
    return {
        "meta": {key: bool(meta.get(key, False)) for key in META_KEYS},
        "results": {
            token: submission_records(token, boxes)
            for token, boxes in zip(sample_tokens, boxes_per_sample, strict=True)
        },
    }


def write_detection_submission(
    path: str | Path,
    sample_tokens: Sequence[str],
    boxes_per_sample: Sequence[Boxes3D],
    meta: Mapping[str, bool],
) -> Path:
    """Write a submission JSON atomically (sorted keys: equal input gives equal bytes)."""
    return atomic_write_json(path, detection_submission(sample_tokens, boxes_per_sample, meta))


def _read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise SubmissionFormatError(f"{path}: detection result file not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SubmissionFormatError(f"{path}: not valid JSON: {e}") from None


def _check_submission_shape(path: Path, data: Any) -> dict[str, list]:
    if not isinstance(data, dict):
        raise SubmissionFormatError(
            f"{path}: expected a JSON object with 'meta' and 'results', got {type(data).__name__}"
        )
    if "results" not in data:
        raise SubmissionFormatError(
            f"{path}: no 'results' key (a nuScenes detection submission is "
            "{'meta': {...}, 'results': {sample_token: [box, ...]}})"
        )
    results = data["results"]
    if not isinstance(results, dict):
        raise SubmissionFormatError(
            f"{path}: 'results' must map sample tokens to lists of boxes, got {type(results).__name__}"
        )
    if "meta" in data and not isinstance(data["meta"], dict):
        raise SubmissionFormatError(f"{path}: 'meta' must be an object")
    for token, records in results.items():
        if not isinstance(records, list):
            raise SubmissionFormatError(
                f"{path}: results[{token!r}] must be a list of boxes, got {type(records).__name__}"
            )
    return results


def _diagnose_record(path: Path, token: str, index: int, rec: Any) -> str | None:
    """Why one submission entry is malformed, or None if it is fine."""
    where = f"{path}: results[{token!r}][{index}]"
    if not isinstance(rec, dict):
        return f"{where}: expected an object, got {type(rec).__name__}"
    for key, length in (("translation", 3), ("size", 3), ("rotation", 4)):
        if key not in rec:
            return f"{where}: missing '{key}'"
        value = rec[key]
        if (
            not isinstance(value, list)
            or len(value) != length
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
        ):
            return f"{where}: '{key}' must be a list of {length} numbers, got {value!r}"
        if not all(math.isfinite(v) for v in value):
            return f"{where}: '{key}' must be finite, got {value!r}"
    if any(v < 0 or v > MAX_BOX_SIZE_M for v in rec["size"]):
        return (
            f"{where}: 'size' must be non-negative [w, l, h] in metres, each at most "
            f"{MAX_BOX_SIZE_M:g}, got {rec['size']!r}"
        )
    if not any(rec["rotation"]):
        return f"{where}: 'rotation' is a zero quaternion"
    velocity = rec.get("velocity", [math.nan, math.nan])
    if (
        not isinstance(velocity, list)
        or len(velocity) != 2
        or not all(
            v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in velocity
        )
    ):
        return f"{where}: 'velocity' must be a list of 2 numbers, got {velocity!r}"
    name = rec.get("detection_name")
    if name not in CLASS_INDEX:
        return f"{where}: 'detection_name' {name!r} is not a nuScenes detection class {DETECTION_CLASSES}"
    score = rec.get("detection_score")
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        return f"{where}: 'detection_score' must be a finite number, got {score!r}"
    attribute = rec.get("attribute_name", "")
    if attribute not in ("", *ATTRIBUTE_NAMES):
        return f"{where}: 'attribute_name' {attribute!r} is not a nuScenes attribute"
    if "sample_token" in rec and rec["sample_token"] != token:
        return f"{where}: 'sample_token' {rec['sample_token']!r} differs from its key"
    return None


def _boxes_from_records(path: Path, token: str, records: list) -> Boxes3D:
    if not records:
        return Boxes3D.empty("global")
    try:
        # Fast path: one array per field; a malformed entry is located below only on failure.
        translation = np.array([r["translation"] for r in records], dtype=np.float64)
        size = np.array([r["size"] for r in records], dtype=np.float64)
        rotation = np.array([r["rotation"] for r in records], dtype=np.float64)
        velocity = np.array(
            [r.get("velocity", [np.nan, np.nan]) for r in records], dtype=np.float64
        )
        label = np.array([CLASS_INDEX[r["detection_name"]] for r in records], dtype=np.int16)
        score = np.array([r["detection_score"] for r in records], dtype=np.float64)
        attribute = np.array([r.get("attribute_name", "") for r in records], dtype=object)
        named_token = np.array([r.get("sample_token", token) for r in records], dtype=object)
        ok = (
            translation.shape == (len(records), 3)
            and size.shape == (len(records), 3)
            and rotation.shape == (len(records), 4)
            and velocity.shape == (len(records), 2)
            and np.isfinite(translation).all()
            and np.isfinite(size).all()
            and (size >= 0).all()
            and (size <= MAX_BOX_SIZE_M).all()
            and np.isfinite(rotation).all()
            and (np.abs(rotation).sum(axis=1) > 0).all()
            and np.isfinite(score).all()
            and np.isin(attribute, _VALID_ATTRIBUTES).all()
            and (named_token == token).all()
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        ok = False
    if not ok:
        for i, rec in enumerate(records):
            problem = _diagnose_record(path, token, i, rec)
            if problem:
                raise SubmissionFormatError(problem)
        raise SubmissionFormatError(f"{path}: results[{token!r}]: malformed entries")
    return Boxes3D(
        center_m=translation,
        size_wlh_m=size,
        yaw_rad=yaw_from_rotation(rotation_from_quat_wxyz(rotation)),
        velocity_mps=velocity,
        label=label,
        score=score,
        frame="global",
    )


def load_detection_submission(path: str | Path) -> tuple[dict[str, Boxes3D], dict[str, Any]]:
    """Read a nuScenes detection submission into global-frame boxes per sample token.

    Velocities given as ``null``/NaN or left out are unknown (NaN). Boxes keep their pitch-free
    heading (yaw of the box's x axis).

    Returns:
        (sample token -> ``Boxes3D``, meta dict ({} when the file has none)).

    Raises:
        SubmissionFormatError: the file is missing, not JSON, or an entry is malformed; the message
            names the file, the sample token, the entry index and the field.
    """
    path = Path(path)
    data = _read_json(path)
    results = _check_submission_shape(path, data)
    boxes = {token: _boxes_from_records(path, token, recs) for token, recs in results.items()}
    return boxes, dict(data.get("meta", {}))


def merge_detection_submissions(paths: Iterable[str | Path]) -> dict[str, Any]:
    """One submission from per-clip files (for evaluating a whole run).

    ``meta`` flags are OR-ed (a run that used the camera in any clip used the camera).

    Raises:
        SubmissionFormatError: a file is malformed, or two files hold the same sample token.
    """
    merged: dict[str, list] = {}
    origin: dict[str, Path] = {}
    meta = dict.fromkeys(META_KEYS, False)
    paths = [Path(p) for p in paths]
    if not paths:
        raise SubmissionFormatError("no detection result files to merge")
    for path in paths:
        data = _read_json(path)
        results = _check_submission_shape(path, data)
        for key in META_KEYS:
            meta[key] = meta[key] or bool(data.get("meta", {}).get(key, False))
        for token, records in results.items():
            if token in merged:
                raise SubmissionFormatError(
                    f"{path}: sample {token!r} is also in {origin[token]}; each sample must come "
                    "from one clip"
                )
            merged[token] = records
            origin[token] = path
    return {"meta": meta, "results": merged}
