"""Release rows from QA records: identifiers re-keyed with a salted hash, identifying fields dropped.

What a ``qa.jsonl`` record carries that must not leave: sample tokens (``keyframe.token``,
``context_frames[*].token``), image paths (nuScenes file names hold the log name and the capture
timestamp), clip (scene) names, track ids. What stays: the text, the structured answer, region
ids, boxes and masks in image pixels, classes, cameras, and times *relative* to the keyframe and
the clip start. Clip and record ids become ``<kind>-<16 letters>`` (salted SHA-256): stable within
a release and not reversible without the salt. They are spelled in the letters a-p, not hex
digits, so that no id can read as something the leak scanner rejects: with hex, about one id in
6,000 is 16 decimal digits starting 1-3, the shape of an epoch-microsecond timestamp, and a
release of a few thousand QA failed its own scan.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from autolabel.atomic_io import canonical_json

#: Length of the hash part of re-keyed ids (64 bits: collisions are negligible per release).
REKEY_LETTERS = 16
#: Hex digit -> letter (a-p): the same 4 bits per character, never a digit.
_HEX_TO_LETTERS = str.maketrans("0123456789abcdef", "abcdefghijklmnop")


def rekey(salt: str, kind: str, *parts: object) -> str:
    """``<kind>-<16 letters a-p>``: SHA-256 of the salt, the kind and the parts (order matters)."""
    h = hashlib.sha256()
    for p in (salt, kind, *parts):
        h.update(str(p).encode("utf-8"))
        h.update(b"\x1f")  # unit separator: ("ab", "c") and ("a", "bc") differ
    return f"{kind}-{h.hexdigest()[:REKEY_LETTERS].translate(_HEX_TO_LETTERS)}"


def image_key(clip: str, keyframe: int, camera: str, frame_index: int) -> tuple[str, int, str, int]:
    """The identity of one released image: a camera image marked for one keyframe's regions."""
    return (clip, int(keyframe), camera, int(frame_index))


def record_image_keys(record: Mapping[str, Any], frames: str) -> list[tuple[str, int, str, int]]:
    """The images a record shows, camera by camera, each camera's frames in time order.

    Args:
        record: a QA record (``qa_templates/SCHEMA.md``).
        frames: ``context`` (the record's context frames, as ``images`` lists them) or
            ``keyframe`` (the keyframe's image of each camera only).
    """
    kf = int(record["keyframe"]["frame_index"])
    clip = record["clip"]
    context = [int(f["frame_index"]) for f in record["context_frames"]]
    keys = []
    for cam in record["cameras"]:
        paths = record["images"].get(cam, [])
        if len(paths) != len(context):
            raise ValueError(
                f"record {record['id']}: camera {cam} has {len(paths)} image paths for "
                f"{len(context)} context frames"
            )
        chosen = context if frames == "context" else [kf]
        keys.extend(image_key(clip, kf, cam, f) for f in chosen)
    return keys


def _clean_regions(
    regions: Sequence[Mapping[str, Any]], frame_time: Mapping[int, float]
) -> list[dict[str, Any]]:
    out = []
    for r in regions:
        views = [
            {
                "camera": v["camera"],
                "time_offset_s": v["time_offset_s"],
                "box_px": v["box_px"],
                "mask_rle": v["mask_rle"],
                "visible": v["visible"],
            }
            for v in r.get("views", [])
        ]
        out.append(
            {
                "role": r["role"],
                "region_id": r["region_id"],
                "class": r["class"],
                "cameras_visible": list(r.get("cameras_visible", [])),
                "views": views,
            }
        )
    return out


def release_row(
    record: Mapping[str, Any],
    salt: str,
    image_ids: Sequence[str],
    image_cameras: Sequence[str],
    image_offsets_s: Sequence[float],
) -> dict[str, Any]:
    """The release fields of one QA record (images are attached by the writer).

    Structured fields whose shape varies by question type (``answer_values``, ``choices``,
    ``regions``, ``params``) are canonical JSON strings, so every row has one schema.
    """
    clip = record["clip"]
    frame_time = {int(f["frame_index"]): float(f["time_s"]) for f in record["context_frames"]}
    params = {k: v for k, v in record.get("params", {}).items()}
    return {
        "id": rekey(salt, "qa", clip, record["id"]),
        "group_id": rekey(salt, "group", clip, record["group_id"]),
        "clip_id": rekey(salt, "clip", clip),
        "keyframe_time_s": float(record["keyframe"]["time_s"]),
        "context_offsets_s": [
            round(float(f["time_s"]) - float(record["keyframe"]["time_s"]), 3)
            for f in record["context_frames"]
        ],
        "category": record["category"],
        "kind": record["kind"],
        "type": record["type"],
        "template_id": record["template_id"],
        "question": record["question"],
        "answer": record["answer"],
        "explanation": record.get("explanation"),
        "cameras": list(record["cameras"]),
        "image_ids": list(image_ids),
        "image_cameras": list(image_cameras),
        "image_time_offsets_s": [float(x) for x in image_offsets_s],
        "answer_values": canonical_json(record.get("answer_values", {})),
        "choices": None if record.get("choices") is None else canonical_json(record["choices"]),
        "regions": canonical_json(_clean_regions(record.get("regions", []), frame_time)),
        "params": canonical_json(params),
        "confidence": float(record.get("confidence", 1.0)),
    }


def parse_json_field(row: Mapping[str, Any], key: str) -> Any:
    """A JSON-string field of a release row, parsed (None stays None)."""
    value = row.get(key)
    return None if value is None else json.loads(value)
