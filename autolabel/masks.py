"""Instance masks in the two forms the pipeline passes around: (H, W) bool arrays and COCO RLE.

RLE dicts are ``{"size": [H, W], "counts": str | bytes | list[int]}`` (compressed or not), decoded
with pycocotools.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from pycocotools import mask as mask_utils

#: A mask as accepted by :func:`masks_to_array`.
MaskLike = Any  # np.ndarray (H, W) bool | dict RLE | None


def _rle_for_pycocotools(rle: dict, where: str, height_px: int, width_px: int) -> dict:
    try:
        size, counts = rle["size"], rle["counts"]
    except (KeyError, TypeError):
        raise ValueError(f"{where}: expected an RLE dict with 'size' and 'counts'") from None
    if len(size) != 2 or (int(size[0]), int(size[1])) != (height_px, width_px):
        raise ValueError(
            f"{where}: RLE size {list(size)} differs from the image ({height_px}, {width_px})"
        )
    if isinstance(counts, list):
        return mask_utils.frPyObjects(
            {"size": [height_px, width_px], "counts": counts}, height_px, width_px
        )
    if isinstance(counts, str):
        counts = counts.encode("ascii")
    return {"size": [height_px, width_px], "counts": counts}


def masks_to_array(
    masks: np.ndarray | Sequence[MaskLike], height_px: int, width_px: int, where: str = "masks"
) -> np.ndarray:
    """(N, H, W) bool masks from an (N, H, W) array or a sequence of (H, W) arrays / RLE dicts / None.

    ``None`` stands for an object without a mask (all False). Errors name the offending entry.
    """
    if isinstance(masks, np.ndarray):
        if masks.ndim != 3 or masks.shape[1:] != (height_px, width_px):
            raise ValueError(
                f"{where}: expected (N, {height_px}, {width_px}) masks, got {masks.shape}"
            )
        return masks.astype(bool, copy=False)
    rle_rows, rles = [], []
    for i, m in enumerate(masks):
        if isinstance(m, dict):
            rle_rows.append(i)
            rles.append(_rle_for_pycocotools(m, f"{where}[{i}]", height_px, width_px))
    # One pycocotools call for all RLEs: (H, W, K) uint8 0/1, column-major.
    decoded = mask_utils.decode(rles) if rles else None
    if rles and len(rles) == len(masks):
        return np.moveaxis(decoded, 2, 0).view(bool)  # a view: 0/1 bytes are valid bools
    out = np.zeros((len(masks), height_px, width_px), dtype=bool)
    for j, i in enumerate(rle_rows):
        out[i] = decoded[:, :, j]
    for i, m in enumerate(masks):
        if m is None or isinstance(m, dict):
            continue
        arr = np.asarray(m)
        if arr.shape != (height_px, width_px):
            raise ValueError(
                f"{where}[{i}]: mask shape {arr.shape} differs from ({height_px}, {width_px})"
            )
        out[i] = arr
    return out


def mask_boxes_2d(masks: np.ndarray) -> np.ndarray:
    """(N, 4) tight boxes [u_min, v_min, u_max, v_max] of (N, H, W) masks, pixel-edge coordinates.

    A pixel (row v, column u) covers [u, u + 1] x [v, v + 1], the convention of
    ``calib.projection``; empty masks give NaN rows.
    """
    masks = np.asarray(masks, dtype=bool)
    rows_any = masks.any(axis=2)  # (N, H)
    cols_any = masks.any(axis=1)  # (N, W)
    nonempty = rows_any.any(axis=1)
    h, w = masks.shape[1], masks.shape[2]
    v_min = np.argmax(rows_any, axis=1)
    v_max = h - np.argmax(rows_any[:, ::-1], axis=1)
    u_min = np.argmax(cols_any, axis=1)
    u_max = w - np.argmax(cols_any[:, ::-1], axis=1)
    boxes = np.stack([u_min, v_min, u_max, v_max], axis=1).astype(np.float64)
    boxes[~nonempty] = np.nan
    return boxes


def box_masks(boxes_2d: np.ndarray, height_px: int, width_px: int) -> np.ndarray:
    """(N, H, W) bool: the pixels whose centres lie inside each [u_min, v_min, u_max, v_max] box.

    NaN boxes give empty masks. Used where only boxes exist (box-style marks, box z-buffering).
    """
    b = np.asarray(boxes_2d, dtype=np.float64).reshape(-1, 4)
    valid = np.all(np.isfinite(b), axis=1)
    b = np.where(valid[:, None], b, 0.0)
    centres_u = np.arange(width_px) + 0.5
    centres_v = np.arange(height_px) + 0.5
    cols = (centres_u[None, :] >= b[:, 0:1]) & (centres_u[None, :] <= b[:, 2:3]) & valid[:, None]
    rows = (centres_v[None, :] >= b[:, 1:2]) & (centres_v[None, :] <= b[:, 3:4]) & valid[:, None]
    return rows[:, :, None] & cols[:, None, :]
