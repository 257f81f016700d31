"""Instance masks in the two forms the pipeline passes around: (H, W) bool arrays and COCO RLE.

RLE dicts are ``{"size": [H, W], "counts": str | bytes | list[int]}`` (compressed or not), decoded
with pycocotools, or read straight into pixel lists and crops (:func:`rle_pixels`,
:func:`rle_crops`): a mask covers a small part of its image, and work on full-image arrays per
mask was most of the cost of marks and colour measurement.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numba
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
    n = len(masks)
    boxes = np.full((n, 4), np.nan)
    # Scan each mask along its memory order (decoded RLE masks are column-major per mask).
    transposed = masks.ndim == 3 and masks.strides[1] < masks.strides[2]
    for i, m in enumerate(masks.transpose(0, 2, 1) if transposed else masks):
        u8 = m.view(np.uint8)
        words = row_words(u8)
        u0, v0, u1, v1 = mask_bounds_kernel(u8, words, 8 if words.dtype == np.uint64 else 1)
        if u1 > u0:
            boxes[i] = (v0, u0, v1, u1) if transposed else (u0, v0, u1, v1)
    return boxes


def row_words(mask: np.ndarray) -> np.ndarray:
    """(H, W / 8) uint64 view of a row-major (H, W) uint8 mask when its rows allow (W divisible
    by 8, contiguous rows), else the mask itself: bounds are found 8 pixels at a time."""
    height_px, width_px = mask.shape
    if width_px % 8 == 0 and mask.strides[1] == 1 and mask.strides[0] == width_px:
        return mask.reshape(-1).view(np.uint64).reshape(height_px, width_px // 8)
    return mask


@numba.njit(cache=True)
def mask_bounds_kernel(mask: np.ndarray, words: np.ndarray, step: int) -> tuple[int, int, int, int]:
    """[u0, u1) x [v0, v1) bounds of the nonzero pixels of (H, W) ``mask`` (all 0 if none);
    ``words`` is the mask's rows in words of ``step`` pixels."""
    height_px, width_px = mask.shape
    v0, v1, u0, u1 = -1, -1, width_px, -1
    for v in range(height_px):
        first, last = -1, -1
        for q in range(words.shape[1]):
            if words[v, q] != 0:
                if first < 0:
                    first = q
                last = q
        if first < 0:
            continue
        if v0 < 0:
            v0 = v
        v1 = v
        for u in range(first * step, min(first * step + step, width_px)):
            if mask[v, u] != 0:
                u0 = min(u0, u)
                break
        for u in range(min(last * step + step, width_px) - 1, last * step - 1, -1):
            if mask[v, u] != 0:
                u1 = max(u1, u)
                break
    if v0 < 0:
        return 0, 0, 0, 0
    return u0, v0, u1 + 1, v1 + 1


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


@numba.njit(cache=True)
def _counts_from_string(buf: np.ndarray, start: int, end: int) -> np.ndarray:
    """Run lengths of one compressed COCO RLE string (pycocotools' ``rleFrString``)."""
    cnts = np.empty(end - start, np.int64)
    m = 0
    p = start
    while p < end:
        x = 0
        k = 0
        more = True
        while more:
            c = np.int64(buf[p]) - 48
            x |= (c & 0x1F) << (5 * k)
            more = (c & 0x20) != 0
            p += 1
            k += 1
            if not more and (c & 0x10) != 0:
                x |= np.int64(-1) << (5 * k)
        if m > 2:
            x += cnts[m - 2]
        cnts[m] = x
        m += 1
    return cnts[:m]


@numba.njit(cache=True)
def _pixels_of_strings(
    buf: np.ndarray, offsets: np.ndarray, height_px: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows, columns and owner of every pixel of N compressed RLE strings (``buf[offsets[i]:
    offsets[i + 1]]``), mask by mask, each in column-major order (the order of its runs)."""
    n = len(offsets) - 1
    total = 0
    for i in range(n):
        cnts = _counts_from_string(buf, offsets[i], offsets[i + 1])
        for r in range(1, len(cnts), 2):
            total += cnts[r]
    v = np.empty(total, np.int32)
    u = np.empty(total, np.int32)
    obj = np.empty(total, np.int64)
    q = 0
    for i in range(n):
        cnts = _counts_from_string(buf, offsets[i], offsets[i + 1])
        pos = 0
        for r in range(len(cnts)):
            if r % 2 == 1:
                for j in range(pos, pos + cnts[r]):
                    v[q] = j % height_px
                    u[q] = j // height_px
                    obj[q] = i
                    q += 1
            pos += cnts[r]
    return v, u, obj


def _rle_strings(
    rles: Sequence[dict], height_px: int, width_px: int, where: str
) -> tuple[np.ndarray, np.ndarray]:
    """N RLE masks' compressed strings, checked, as one uint8 buffer and (N + 1,) offsets."""
    strings = []
    for i, rle in enumerate(rles):
        counts = _rle_for_pycocotools(rle, f"{where}[{i}]", height_px, width_px)["counts"]
        strings.append(counts if isinstance(counts, bytes) else bytes(counts))
    offsets = np.zeros(len(strings) + 1, np.int64)
    offsets[1:] = np.cumsum([len(s) for s in strings])
    buf = np.frombuffer(b"".join(strings), np.uint8) if strings else np.zeros(0, np.uint8)
    return buf, offsets


def rle_pixels(
    rles: Sequence[dict], height_px: int, width_px: int, where: str = "masks"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pixel of N RLE masks of one (H, W) image, without decoding them to images.

    Returns:
        (P,) int32 rows v, (P,) int32 columns u and (P,) int64 mask index, grouped by mask (in
        mask order), each mask's pixels in column-major order (the RLE's order).
    """
    buf, offsets = _rle_strings(rles, height_px, width_px, where)
    v, u, obj = _pixels_of_strings(buf, offsets, int(height_px))
    if len(u) and u.max() >= width_px:
        raise ValueError(f"{where}: RLE runs beyond the image ({height_px}, {width_px})")
    return v, u, obj


@numba.njit(cache=True)
def _values_of_strings(
    buf: np.ndarray,
    offsets: np.ndarray,
    image: np.ndarray,
    reverse: bool,
    table: np.ndarray,
    counts: np.ndarray,
) -> np.ndarray:
    """``table[image[v, u, c]]`` for every pixel of N compressed RLE strings, mask by mask, each
    in column-major order (``_pixels_of_strings``' order); channels reversed when ``reverse``.
    ``counts`` receives each mask's pixel count."""
    n = len(offsets) - 1
    height_px, channels = image.shape[0], image.shape[2]
    total = 0
    for i in range(n):
        cnts = _counts_from_string(buf, offsets[i], offsets[i + 1])
        for r in range(1, len(cnts), 2):
            total += cnts[r]
    out = np.empty((total, channels), table.dtype)
    q = 0
    for i in range(n):
        cnts = _counts_from_string(buf, offsets[i], offsets[i + 1])
        pos = 0
        start = q
        for r in range(len(cnts)):
            if r % 2 == 1:
                for j in range(pos, pos + cnts[r]):
                    v, u = j % height_px, j // height_px
                    for c in range(channels):
                        src = channels - 1 - c if reverse else c
                        out[q, c] = table[image[v, u, src]]
                    q += 1
            pos += cnts[r]
        counts[i] = q - start
    return out


def rle_pixel_values(
    rles: Sequence[dict], image: np.ndarray, table: np.ndarray, where: str = "masks"
) -> tuple[np.ndarray, np.ndarray]:
    """The pixels of an (H, W, C) uint8 image under N RLE masks, each value mapped through a
    (256,) ``table``, in one pass: no pixel lists, no intermediate arrays (the colour of a near
    car's mask reads ~10^6 pixels, and each full-size temporary cost as much as the gather).

    Returns:
        (P, C) values of ``table``'s dtype, grouped by mask (in mask order), each mask's pixels
        in column-major order (as :func:`rle_pixels`), and (N,) int64 pixel counts per mask.
    """
    img = np.asarray(image)
    if img.ndim != 3 or img.dtype != np.uint8:
        raise ValueError(f"{where}: expected an (H, W, C) uint8 image, got {img.shape} {img.dtype}")
    lut = np.asarray(table)
    if lut.shape != (256,):
        raise ValueError(f"{where}: expected a (256,) table, got {lut.shape}")
    height_px, width_px = img.shape[:2]
    buf, offsets = _rle_strings(rles, height_px, width_px, where)
    if len(rles) and _crop_bounds_of_strings(buf, offsets, int(height_px))[:, 2].max() > width_px:
        raise ValueError(f"{where}: RLE runs beyond the image ({height_px}, {width_px})")
    # An RGB view of OpenCV's BGR pixels is read from its contiguous BGR buffer.
    swapped = img[:, :, ::-1]
    reverse = bool(swapped.flags.c_contiguous and not img.flags.c_contiguous)
    src = swapped if reverse else np.ascontiguousarray(img)
    counts = np.zeros(len(rles), np.int64)
    values = _values_of_strings(buf, offsets, src, reverse, lut, counts)
    return values, counts


@numba.njit(cache=True)
def _crop_bounds_of_strings(buf: np.ndarray, offsets: np.ndarray, height_px: int) -> np.ndarray:
    """(N, 4) [u0, v0, u1, v1) bounds of N compressed RLE strings, from their runs alone (a run
    that crosses a column boundary touches the last row of one column and the first of the
    next)."""
    n = len(offsets) - 1
    bounds = np.zeros((n, 4), np.int64)
    for i in range(n):
        cnts = _counts_from_string(buf, offsets[i], offsets[i + 1])
        u0, v0, u1, v1 = np.int64(-1), height_px, np.int64(-1), np.int64(-1)
        pos = 0
        for r in range(len(cnts)):
            if r % 2 == 1 and cnts[r] > 0:
                first, last = pos, pos + cnts[r] - 1
                if u0 < 0:
                    u0 = first // height_px
                u1 = last // height_px
                if first // height_px != last // height_px:
                    v0, v1 = 0, height_px - 1
                else:
                    v0 = min(v0, first % height_px)
                    v1 = max(v1, last % height_px)
            pos += cnts[r]
        if u0 >= 0:
            bounds[i, 0], bounds[i, 1], bounds[i, 2], bounds[i, 3] = u0, v0, u1 + 1, v1 + 1
    return bounds


@numba.njit(cache=True)
def _fill_crops_of_strings(
    buf: np.ndarray,
    offsets: np.ndarray,
    height_px: int,
    bounds: np.ndarray,
    crop_offsets: np.ndarray,
    flat: np.ndarray,
) -> None:
    """Set the pixels of each RLE string in its row-major crop ``flat[crop_offsets[i]:]``."""
    for i in range(len(offsets) - 1):
        cnts = _counts_from_string(buf, offsets[i], offsets[i + 1])
        u0, v0, width = bounds[i, 0], bounds[i, 1], bounds[i, 2] - bounds[i, 0]
        base = crop_offsets[i]
        pos = 0
        for r in range(len(cnts)):
            if r % 2 == 1:
                for j in range(pos, pos + cnts[r]):
                    flat[base + (j % height_px - v0) * width + (j // height_px - u0)] = True
            pos += cnts[r]


def rle_crops(
    rles: Sequence[dict], height_px: int, width_px: int, where: str = "masks"
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Tight crops of N RLE masks of one (H, W) image.

    Returns:
        (N, 4) int64 [u0, v0, u1, v1] pixel bounds of each mask (u1, v1 exclusive; all 0 for an
        empty mask) and N (v1 - v0, u1 - u0) bool crops, ``mask[v0:v1, u0:u1]``.
    """
    buf, offsets = _rle_strings(rles, height_px, width_px, where)
    n = len(rles)
    bounds = _crop_bounds_of_strings(buf, offsets, int(height_px))
    if n and bounds[:, 2].max() > width_px:
        raise ValueError(f"{where}: RLE runs beyond the image ({height_px}, {width_px})")
    # All crops in one flat buffer, filled straight from the runs, then cut into views.
    heights, widths = bounds[:, 3] - bounds[:, 1], bounds[:, 2] - bounds[:, 0]
    crop_offsets = np.zeros(n + 1, np.int64)
    crop_offsets[1:] = np.cumsum(heights * widths)
    flat = np.zeros(crop_offsets[-1], bool)
    _fill_crops_of_strings(buf, offsets, int(height_px), bounds, crop_offsets, flat)
    crops = [
        flat[crop_offsets[i] : crop_offsets[i + 1]].reshape(heights[i], widths[i]) for i in range(n)
    ]
    return bounds, crops
