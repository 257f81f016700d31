"""Checks of camera image files before any is decoded: the right format, and complete.

OpenCV decodes a truncated JPEG without an error (libjpeg only prints "Premature end of JPEG
file" and fills the rest grey), so a cut-off image would silently change masks, visibility and
QA. A JPEG ends with the end-of-image marker ``FF D9``, a PNG with its ``IEND`` chunk; a file
without its end is refused before the clip is labelled.
"""

from __future__ import annotations

import os
from pathlib import Path

JPEG_START = b"\xff\xd8\xff"
JPEG_END = b"\xff\xd9"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_END = b"IEND\xaeB`\x82"
#: Bytes read from the end of a file to find its end marker (some encoders pad after it).
_TAIL_BYTES = 4096

_FORMAT_OF_SUFFIX = {".jpg": "JPEG", ".jpeg": "JPEG", ".png": "PNG"}


def image_file_problem(path: str | Path) -> str | None:
    """What is wrong with an image file, or None when it looks whole.

    Files named ``.jpg``/``.jpeg``/``.png`` must start with that format's signature and hold its
    end marker (trailing zero padding after it is allowed); other names are left to the decoder.
    """
    path = Path(path)
    expected = _FORMAT_OF_SUFFIX.get(path.suffix.lower())
    if expected is None:
        return None
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        f.seek(max(0, size - _TAIL_BYTES))
        tail = f.read().rstrip(b"\x00")
    if expected == "JPEG":
        if not head.startswith(JPEG_START):
            return f"not a JPEG image (the file starts with {head[:8].hex(' ')}, not ff d8 ff)"
        if not tail.endswith(JPEG_END):
            return f"truncated JPEG: {size} bytes and no end-of-image marker (ff d9) at the end"
    else:
        if head != PNG_SIGNATURE:
            return f"not a PNG image (the file starts with {head.hex(' ')})"
        if not tail.endswith(PNG_END):
            return f"truncated PNG: {size} bytes and no IEND chunk at the end"
    return None
