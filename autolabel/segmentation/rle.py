"""Instance masks as COCO run-length encoding (pycocotools), JSON-safe and deterministic.

An encoded mask is ``{"size": [H, W], "counts": str}``: pycocotools' compressed RLE with the
counts decoded from bytes to an ASCII string, exactly the form COCO result files use, so
``pycocotools.mask.decode`` reads it after ``counts.encode()``. Encoding is a pure function of the
mask, so the same masks give byte-identical JSON.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
from pycocotools import mask as mask_utils

from autolabel.atomic_io import atomic_write_text

__all__ = [
    "decode_mask",
    "decode_masks",
    "encode_mask",
    "encode_masks",
    "rle_area_px",
    "rle_box_2d",
    "dumps_masks_json",
    "write_masks_json",
]


def encode_masks(masks: np.ndarray) -> list[dict[str, Any]]:
    """COCO RLE of each mask.

    Args:
        masks: (N, H, W) bool (or 0/1 integers).

    Returns:
        N dicts ``{"size": [H, W], "counts": str}``.
    """
    masks = np.asarray(masks)
    if masks.ndim != 3:
        raise ValueError(f"encode_masks: expected (N, H, W) masks, got shape {masks.shape}")
    if len(masks) == 0:
        return []
    # pycocotools wants column-major (H, W, N) uint8; masks stored column-major per mask (as the
    # geometric segmenter and ``masks_to_array`` give them) pass without a copy.
    hwn = masks.transpose(1, 2, 0)
    hwn = hwn.view(np.uint8) if hwn.dtype == np.bool_ else hwn.astype(np.uint8, copy=False)
    fortran = np.asfortranarray(hwn)
    encoded = mask_utils.encode(fortran)
    return [
        {"size": [int(s) for s in r["size"]], "counts": r["counts"].decode("ascii")}
        for r in encoded
    ]


def encode_mask(mask: np.ndarray) -> dict[str, Any]:
    """COCO RLE of one (H, W) mask as ``{"size": [H, W], "counts": str}``."""
    mask = np.asarray(mask)
    if mask.ndim != 2:
        raise ValueError(f"encode_mask: expected an (H, W) mask, got shape {mask.shape}")
    return encode_masks(mask[None])[0]


def _to_pycocotools(rles: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for i, rle in enumerate(rles):
        try:
            size, counts = rle["size"], rle["counts"]
        except (KeyError, TypeError) as error:
            raise ValueError(f"RLE {i}: expected a dict with 'size' and 'counts'") from error
        if len(size) != 2:
            raise ValueError(f"RLE {i}: 'size' must be [H, W], got {size}")
        if isinstance(counts, str):
            counts = counts.encode("ascii")
        elif isinstance(counts, list):
            # Uncompressed COCO RLE (list of run lengths); pycocotools compresses it first.
            counts = mask_utils.frPyObjects({"size": list(size), "counts": counts}, *size)["counts"]
        out.append({"size": [int(size[0]), int(size[1])], "counts": counts})
    return out


def decode_masks(
    rles: list[dict[str, Any]], height_px: int | None = None, width_px: int | None = None
) -> np.ndarray:
    """Masks from COCO RLE dicts (compressed str/bytes counts or uncompressed lists).

    Args:
        rles: N RLE dicts of one image size.
        height_px, width_px: image size, needed only when ``rles`` is empty.

    Returns:
        (N, H, W) bool.
    """
    if len(rles) == 0:
        if height_px is None or width_px is None:
            raise ValueError("decode_masks: no RLEs given; pass height_px and width_px")
        return np.zeros((0, height_px, width_px), dtype=bool)
    coco = _to_pycocotools(rles)
    sizes = {tuple(r["size"]) for r in coco}
    if len(sizes) != 1:
        raise ValueError(f"decode_masks: RLEs of different sizes {sorted(sizes)}")
    decoded = mask_utils.decode(coco)  # (H, W, N) uint8
    return np.ascontiguousarray(decoded.transpose(2, 0, 1)).astype(bool)


def decode_mask(rle: dict[str, Any]) -> np.ndarray:
    """(H, W) bool mask from one COCO RLE dict."""
    return decode_masks([rle])[0]


def rle_area_px(rles: list[dict[str, Any]]) -> np.ndarray:
    """(N,) int64 pixel count of each mask, computed on the RLE without decoding."""
    if len(rles) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.asarray(mask_utils.area(_to_pycocotools(rles)), dtype=np.int64)


def rle_box_2d(rles: list[dict[str, Any]]) -> np.ndarray:
    """(N, 4) float64 [u_min, v_min, u_max, v_max] pixel bounds of each mask (zeros if empty).

    The bounds enclose whole pixels: a mask of the single pixel (u=3, v=5) gives [3, 5, 4, 6],
    the same convention as projected boxes.
    """
    if len(rles) == 0:
        return np.zeros((0, 4), dtype=np.float64)
    xywh = np.asarray(mask_utils.toBbox(_to_pycocotools(rles)), dtype=np.float64).reshape(-1, 4)
    return np.column_stack(
        [xywh[:, 0], xywh[:, 1], xywh[:, 0] + xywh[:, 2], xywh[:, 1] + xywh[:, 3]]
    )


def dumps_masks_json(records: Any) -> str:
    """Deterministic JSON text of records holding RLE dicts (sorted keys, fixed separators)."""
    return json.dumps(records, sort_keys=True, separators=(",", ":"), allow_nan=False)


def write_masks_json(path: str | os.PathLike, records: Any) -> Path:
    """Write records (e.g. per-object dicts with an ``"rle"`` field) as JSON, atomically.

    The text is ``dumps_masks_json(records)`` plus a newline.
    """
    return atomic_write_text(path, dumps_masks_json(records) + "\n")
