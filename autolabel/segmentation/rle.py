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

import numba
import numpy as np
from pycocotools import mask as mask_utils

from autolabel.atomic_io import atomic_write_text
from autolabel.masks import mask_bounds_kernel, row_words

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


def encode_masks(masks: np.ndarray, crops: np.ndarray | None = None) -> list[dict[str, Any]]:
    """COCO RLE of each mask.

    Args:
        masks: (N, H, W) bool (or 0/1 integers).
        crops: (N, 4) [u0, v0, u1, v1] pixel crops known to hold every set pixel of each mask
            (``SegmentationResult.crops``), or None. With column-major masks only the crops'
            columns are read (the rest of a lazily zeroed full-image mask is never touched).

    Returns:
        N dicts ``{"size": [H, W], "counts": str}``.
    """
    masks = np.asarray(masks)
    if masks.ndim != 3:
        raise ValueError(f"encode_masks: expected (N, H, W) masks, got shape {masks.shape}")
    if len(masks) == 0:
        return []
    _, height_px, width_px = masks.shape
    if masks.dtype == np.bool_ and masks[0].T.flags.c_contiguous:
        # Column-major per mask (the geometric segmenter, ``masks_to_array``): the runs are those
        # of the flat buffer, found between its first and last set pixel only (pycocotools scans
        # every pixel of every full-image mask, which cost more than the rest of the encoding).
        out = []
        if crops is not None:
            # Only the crops' pixels are read, column by column: above and below them every
            # column is 0 (a crop is some 100 to 300 rows of a 900-row column).
            boxes = np.asarray(crops, np.int64).reshape(len(masks), 4)
            boxes = boxes.clip(0, [width_px, height_px, width_px, height_px])
            for m, (u0, v0, u1, v1) in zip(
                masks.view(np.uint8).transpose(0, 2, 1), boxes, strict=True
            ):
                text = _rle_string_columns(m, u0, v0, max(u1, u0), max(v1, v0))
                out.append(
                    {"size": [int(height_px), int(width_px)], "counts": text.tobytes().decode()}
                )
            return out
        # (W, H) contiguous views, no copy.
        for m in masks.view(np.uint8).transpose(0, 2, 1):
            flat = m.reshape(-1)
            words = flat.view(np.uint64) if flat.size % 8 == 0 else flat
            step = 8 if words.dtype == np.uint64 else 1
            text = _rle_string_flat(flat, words, step, 0, flat.size)
            out.append({"size": [int(height_px), int(width_px)], "counts": text.tobytes().decode()})
        return out
    # Row-major masks: runs are found inside each mask's bounds only (a column-major copy of
    # every full-image mask, which pycocotools needs, cost more than the segmenters' rest).
    u8 = masks.view(np.uint8) if masks.dtype == np.bool_ else (masks != 0).view(np.uint8)
    out = []
    for m in u8:  # one kernel call per mask; each is a sub-array view, no copy
        words = row_words(m)
        text = _rle_string(m, words, 8 if words.dtype == np.uint64 else 1)
        out.append({"size": [int(height_px), int(width_px)], "counts": text.tobytes().decode()})
    return out


@numba.njit(cache=True)
def _rle_string(mask: np.ndarray, words: np.ndarray, step: int) -> np.ndarray:
    """pycocotools' compressed RLE string (``rleEncode`` then ``rleToString``) of an (H, W)
    0/1 uint8 mask, as ASCII bytes; runs are column-major, only the mask's bounds are read."""
    u0, v0, u1, v1 = mask_bounds_kernel(mask, words, step)
    return _rle_string_columns(mask.T, u0, v0, u1, v1)


@numba.njit(cache=True)
def _rle_string_columns(mask_t: np.ndarray, u0: int, v0: int, u1: int, v1: int) -> np.ndarray:
    """pycocotools' compressed RLE string of a mask given as its (W, H) 0/1 uint8 transpose
    (column-major pixels), all 0 outside columns [u0, u1) x rows [v0, v1), only which are read
    (``_rle_string``'s runs, from the transpose)."""
    width_px, height_px = mask_t.shape
    end = height_px * width_px
    counts = np.empty((u1 - u0) * (v1 - v0) + (u1 - u0) + 2, np.int64)
    k, p, start = 0, 0, 0
    for u in range(u0, u1):
        base = u * height_px
        column = mask_t[u]
        for v in range(v0, v1):
            if column[v] != p:
                counts[k] = base + v - start
                k += 1
                start = base + v
                p = 1 - p
        # Below the crop (or, past the last row, the top of the next column) pixels are 0,
        # unless the next column's first pixel is read by the loop itself.
        nxt = base + v1
        if p == 1 and nxt < end and not (v1 == height_px and v0 == 0 and u + 1 < u1):
            counts[k] = nxt - start
            k += 1
            start = nxt
            p = 0
    counts[k] = end - start
    k += 1
    return _counts_text(counts[:k])


@numba.njit(cache=True)
def _rle_string_flat(
    flat: np.ndarray, words: np.ndarray, step: int, lo: int, hi: int
) -> np.ndarray:
    """pycocotools' compressed RLE string of a mask given as its flat column-major 0/1 uint8
    pixels, all 0 outside ``flat[lo:hi]`` (only that part is read); ``words`` is ``flat`` in
    words of ``step`` pixels (to skip 0 words fast)."""
    end = flat.size
    first = hi
    i = lo
    while i < hi:
        if i % step == 0 and i + step <= hi and words[i // step] == 0:
            i += step
            continue
        if flat[i] != 0:
            first = i
            break
        i += 1
    if first == hi:
        counts = np.empty(1, np.int64)
        counts[0] = end
        return _counts_text(counts)
    last = first
    i = hi - 1
    while i > first:
        if (i + 1) % step == 0 and i + 1 - step >= first and words[(i + 1) // step - 1] == 0:
            i -= step
            continue
        if flat[i] != 0:
            last = i
            break
        i -= 1
    counts = np.empty(last - first + 3, np.int64)
    counts[0] = first
    k, p, start = 1, 1, first
    # A word of ``step`` equal pixels (all 0, or all 1: 0x01 in every byte) holds no change.
    same = np.zeros(2, words.dtype)
    same[1] = ~same[0] // 255  # 0x0101010101010101 for uint64 words, 1 for uint8 pixels
    i = first + 1
    while i <= last:
        if i % step == 0 and i + step <= last + 1 and words[i // step] == same[p]:
            i += step
            continue
        if flat[i] != p:
            counts[k] = i - start
            k += 1
            start = i
            p = 1 - p
        i += 1
    counts[k] = last + 1 - start
    k += 1
    if last + 1 < end:
        counts[k] = end - last - 1
        k += 1
    return _counts_text(counts[:k])


@numba.njit(cache=True)
def _counts_text(counts: np.ndarray) -> np.ndarray:
    """pycocotools' ``rleToString`` of run counts (zeros first), as ASCII bytes."""
    k = len(counts)
    text = np.empty(7 * k, np.uint8)
    n = 0
    for i in range(k):
        x = counts[i]
        if i > 2:
            x -= counts[i - 2]
        more = True
        while more:
            c = x & 0x1F
            x >>= 5
            more = (x != -1) if (c & 0x10) != 0 else (x != 0)
            if more:
                c |= 0x20
            text[n] = c + 48
            n += 1
    return text[:n]


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
