"""RLE masks read and written without full-image arrays (``masks.rle_pixels``/``rle_crops``,
``segmentation.rle.encode_masks``), checked against pycocotools' own encoder and decoder."""

from __future__ import annotations

import numpy as np
import pytest
from pycocotools import mask as mask_utils

from autolabel.colour import median_lab_of_pixels, median_lab_under_masks
from autolabel.masks import rle_crops, rle_pixel_values, rle_pixels
from autolabel.segmentation.rle import encode_masks


def _pycocotools_rles(masks: np.ndarray) -> list[dict]:
    encoded = mask_utils.encode(np.asfortranarray(masks.transpose(1, 2, 0).astype(np.uint8)))
    return [{"size": [int(s) for s in r["size"]], "counts": r["counts"].decode()} for r in encoded]


def _mask_zoo(height_px: int, width_px: int, seed: int) -> np.ndarray:
    """Masks that reach every edge case of the run bookkeeping: empty, full, corners, boxes
    touching the top/bottom rows (runs crossing columns), noise, half images."""
    rng = np.random.default_rng(seed)
    out = [np.zeros((height_px, width_px), bool), np.ones((height_px, width_px), bool)]
    corners = np.zeros((height_px, width_px), bool)
    corners[0, 0] = corners[-1, -1] = True
    out.append(corners)
    half = np.zeros((height_px, width_px), bool)
    half[:, width_px // 2 :] = True
    half[0, 0] = True
    out.append(half)
    for _ in range(40):
        v0, v1 = np.sort(rng.integers(0, height_px + 1, 2))
        u0, u1 = np.sort(rng.integers(0, width_px + 1, 2))
        m = np.zeros((height_px, width_px), bool)
        m[v0:v1, u0:u1] = rng.random((v1 - v0, u1 - u0)) < rng.choice([0.5, 0.9, 1.0])
        out.append(m)
    out.append(rng.random((height_px, width_px)) < 0.5)
    return np.ascontiguousarray(np.stack(out))


@pytest.mark.parametrize("size", [(90, 160), (7, 13), (1, 8), (5, 1), (64, 64)])
def test_encode_masks_is_pycocotools_encoding_in_every_layout(size):
    masks = _mask_zoo(*size, seed=sum(size))
    expected = _pycocotools_rles(masks)
    assert encode_masks(masks) == expected  # row-major: the bounded kernel
    assert encode_masks(masks.astype(np.uint8)) == expected
    column_major = np.ascontiguousarray(masks.transpose(0, 2, 1)).transpose(0, 2, 1)
    assert encode_masks(column_major) == expected  # the flat kernel over the whole buffer
    # Given crops (the mask's own pixel bounds, some grown, empty masks an empty crop): only
    # those pixels are read, and the strings are the same.
    rng = np.random.default_rng(1)
    crops = np.zeros((len(masks), 4), np.int64)
    for i, m in enumerate(masks):
        rows, cols = np.nonzero(m)
        if len(rows):
            grow = rng.integers(0, 3, 4) * rng.integers(0, 2)
            crops[i] = (cols.min() - grow[0], rows.min() - grow[1], cols.max() + 1 + grow[2],
                        rows.max() + 1 + grow[3])  # fmt: skip
    assert encode_masks(column_major, crops) == expected
    dirty = masks.transpose(0, 2, 1).copy()  # (N, W, H) storage, not a view of masks
    for i, (u0, v0, u1, v1) in enumerate(crops):
        dirty[i, : max(u0, 0)] = dirty[i, u1:] = True  # set columns outside the crop: not read
        dirty[i, :, : max(v0, 0)] = dirty[i, :, v1:] = True  # nor rows above or below it
    assert encode_masks(dirty.transpose(0, 2, 1), crops) == expected
    assert encode_masks(masks[:, ::-1][:, ::-1]) == expected  # strided rows


@pytest.mark.parametrize("size", [(90, 160), (7, 13), (5, 1)])
def test_rle_pixels_and_crops_are_the_decoded_masks(size):
    height_px, width_px = size
    masks = _mask_zoo(height_px, width_px, seed=7)
    rles = _pycocotools_rles(masks)
    v, u, obj = rle_pixels(rles, height_px, width_px)
    for i, m in enumerate(masks):
        cols, rows = np.nonzero(m.T)  # column-major order, the order of the runs
        assert np.array_equal(u[obj == i], cols) and np.array_equal(v[obj == i], rows)
    assert np.all(np.diff(obj) >= 0)
    bounds, crops = rle_crops(rles, height_px, width_px)
    for m, b, crop in zip(masks, bounds, crops, strict=True):
        if not m.any():
            assert b.tolist() == [0, 0, 0, 0] and crop.shape == (0, 0)
            continue
        rows, cols = np.flatnonzero(m.any(axis=1)), np.flatnonzero(m.any(axis=0))
        assert b.tolist() == [cols[0], rows[0], cols[-1] + 1, rows[-1] + 1]
        assert np.array_equal(crop, m[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1])


def test_rle_pixels_reads_uncompressed_counts_and_refuses_a_foreign_size():
    v, u, obj = rle_pixels([{"size": [2, 2], "counts": [1, 2, 1]}], 2, 2)
    assert (v.tolist(), u.tolist(), obj.tolist()) == ([1, 0], [0, 1], [0, 0])
    with pytest.raises(ValueError, match=r"masks\[0\].*differs from the image"):
        rle_pixels([{"size": [3, 2], "counts": [6]}], 2, 2)


def test_colour_of_pixel_lists_equals_colour_under_dense_masks():
    rng = np.random.default_rng(5)
    image = rng.integers(0, 256, (40, 60, 3), dtype=np.uint8)
    masks = _mask_zoo(40, 60, seed=11)
    dense_lab, dense_px = median_lab_under_masks(image, masks.transpose(1, 2, 0))
    v, u, obj = rle_pixels(_pycocotools_rles(masks), 40, 60)
    lab, px = median_lab_of_pixels(image, v, u, obj, len(masks))
    assert np.array_equal(px, dense_px)
    np.testing.assert_array_equal(lab, dense_lab)  # the same medians, NaN where too few pixels
    # Against numpy's median of the Lab pixels, computed mask by mask.
    from autolabel.colour import lab_from_rgb

    for i in np.flatnonzero(px >= 20):
        expected = np.median(lab_from_rgb(image[masks[i]]), axis=0)
        np.testing.assert_array_equal(lab[i], expected)


@pytest.mark.parametrize("size", [(90, 160), (7, 13), (5, 1)])
def test_mask_boxes_are_the_pixel_bounds_in_either_layout(size):
    from autolabel.masks import mask_boxes_2d

    masks = _mask_zoo(*size, seed=3)
    expected = np.full((len(masks), 4), np.nan)
    for i, m in enumerate(masks):
        rows, cols = np.nonzero(m)
        if len(rows):
            expected[i] = [cols.min(), rows.min(), cols.max() + 1, rows.max() + 1]
    np.testing.assert_array_equal(mask_boxes_2d(masks), expected)
    column_major = np.ascontiguousarray(masks.transpose(0, 2, 1)).transpose(0, 2, 1)
    np.testing.assert_array_equal(mask_boxes_2d(column_major), expected)


@pytest.mark.parametrize("size", [(90, 160), (7, 13), (5, 1)])
def test_rle_pixel_values_are_the_image_under_the_decoded_masks(size):
    height_px, width_px = size
    masks = _mask_zoo(height_px, width_px, seed=3)
    rles = _pycocotools_rles(masks)
    rng = np.random.default_rng(4)
    bgr = rng.integers(0, 256, (height_px, width_px, 3), dtype=np.uint8)
    table = rng.random(256).astype(np.float32)
    # An RGB view of BGR pixels (read from the BGR buffer), and a contiguous image.
    for image in (bgr[:, :, ::-1], np.ascontiguousarray(bgr[:, :, ::-1])):
        values, counts = rle_pixel_values(rles, image, table)
        assert values.dtype == np.float32
        assert counts.tolist() == [int(m.sum()) for m in masks]
        starts = np.concatenate([[0], np.cumsum(counts)])
        for i, m in enumerate(masks):
            # Column-major order: the pixels of the transposed mask, row by row.
            cols, rows = np.nonzero(m.T)
            expected = table[np.ascontiguousarray(bgr[:, :, ::-1])[rows, cols]]
            assert np.array_equal(values[starts[i] : starts[i + 1]], expected)
    with pytest.raises(ValueError, match="differs from the image"):
        rle_pixel_values(rles, bgr[:, :-1], table)
    with pytest.raises(ValueError, match="table"):
        rle_pixel_values(rles, bgr, table[:10])
