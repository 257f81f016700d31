"""Conversation exports for VLM fine-tuning: LLaVA-style and Qwen2.5-VL-style JSON.

Both put one ``<image>`` placeholder per image, in the order of the record's image list, before
the question; each placeholder's line names the camera and the frame's time relative to the
keyframe, so a multi-frame, multi-camera prompt says which image is which.

- ``llava``: LLaVA's instruction-tuning format, ``[{"id", "image": [paths], "conversations":
  [{"from": "human", "value": "<image>...question"}, {"from": "gpt", "value": answer}]}]``
  (one path is written as a list too; LLaVA-NeXT and most trainers accept lists).
- ``qwen2_5_vl``: the ``messages`` / ``images`` layout that LLaMA-Factory and ms-swift read for
  Qwen2.5-VL, ``[{"id", "messages": [{"role": "user", "content": "<image>...question"},
  {"role": "assistant", "content": answer}], "images": [paths]}]``.

Paths are relative to the release folder. :func:`validate_conversations` checks the rule that
trainers enforce: the number of ``<image>`` placeholders equals the number of images.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

IMAGE_TOKEN = "<image>"
FORMATS = ("llava", "qwen2_5_vl")
_CAMERA_NAMES = {
    "CAM_FRONT": "front camera",
    "CAM_FRONT_LEFT": "front-left camera",
    "CAM_FRONT_RIGHT": "front-right camera",
    "CAM_BACK": "back camera",
    "CAM_BACK_LEFT": "back-left camera",
    "CAM_BACK_RIGHT": "back-right camera",
}


def prompt_text(row: Mapping[str, Any]) -> str:
    """The user turn: one line per image with its placeholder, then the question."""
    lines = []
    for cam, dt in zip(row["image_cameras"], row["image_time_offsets_s"], strict=True):
        when = "now" if abs(dt) < 1e-6 else f"{dt:+.1f} s"
        lines.append(f"{IMAGE_TOKEN} {_CAMERA_NAMES.get(cam, cam)}, {when}")
    lines.append(row["question"])
    return "\n".join(lines)


def answer_text(row: Mapping[str, Any]) -> str:
    """The assistant turn: the answer, and the explanation where the record has one."""
    if row.get("explanation"):
        return f"{row['answer']} {row['explanation']}"
    return row["answer"]


def conversation(row: Mapping[str, Any], image_paths: Sequence[str], fmt: str) -> dict[str, Any]:
    """One training example of a release row in format ``fmt``."""
    if len(image_paths) != len(row["image_cameras"]):
        raise ValueError(
            f"row {row['id']}: {len(image_paths)} image paths for {len(row['image_cameras'])} images"
        )
    prompt, reply = prompt_text(row), answer_text(row)
    if fmt == "llava":
        return {
            "id": row["id"],
            "image": list(image_paths),
            "conversations": [
                {"from": "human", "value": prompt},
                {"from": "gpt", "value": reply},
            ],
        }
    if fmt == "qwen2_5_vl":
        return {
            "id": row["id"],
            "messages": [
                {"role": "user", "content": prompt},
                {"role": "assistant", "content": reply},
            ],
            "images": list(image_paths),
        }
    raise ValueError(f"conversation format: unknown {fmt!r}; choose one of {FORMATS}")


def validate_conversations(path: str | Path, fmt: str, root: str | Path | None = None) -> int:
    """Check an export: roles alternate user/assistant, ``<image>`` count equals image count,
    every image file exists under ``root`` (the release folder; the file's folder's parent when
    None). Returns the number of examples.

    Raises:
        ValueError: naming the file, the example and what is wrong.
    """
    path = Path(path)
    base = Path(root) if root is not None else path.parent.parent
    examples = json.loads(path.read_text())
    if not isinstance(examples, list):
        raise ValueError(f"{path}: expected a JSON list of examples")
    for i, ex in enumerate(examples):
        where = f"{path}: example {i} ({ex.get('id', '?')})"
        if fmt == "llava":
            images, turns = ex.get("image"), ex.get("conversations")
            roles = [t.get("from") for t in turns or []]
            texts = [t.get("value", "") for t in turns or []]
            want = ["human", "gpt"]
        elif fmt == "qwen2_5_vl":
            images, turns = ex.get("images"), ex.get("messages")
            roles = [t.get("role") for t in turns or []]
            texts = [t.get("content", "") for t in turns or []]
            want = ["user", "assistant"]
        else:
            raise ValueError(f"conversation format: unknown {fmt!r}; choose one of {FORMATS}")
        if not isinstance(images, list) or not images:
            raise ValueError(f"{where}: no image list")
        if not roles or len(roles) % 2 or any(r != want[j % 2] for j, r in enumerate(roles)):
            raise ValueError(f"{where}: turns must alternate {want}, got {roles}")
        placeholders = sum(t.count(IMAGE_TOKEN) for t in texts)
        if placeholders != len(images):
            raise ValueError(
                f"{where}: {placeholders} {IMAGE_TOKEN} placeholders, {len(images)} images"
            )
        if any(t.count(IMAGE_TOKEN) for t in texts[1::2]):
            raise ValueError(f"{where}: an assistant turn holds {IMAGE_TOKEN}")
        missing = [p for p in images if not (base / p).is_file()]
        if missing:
            raise ValueError(f"{where}: missing image file {missing[0]}")
    return len(examples)
