"""The fast PNG encoder (autolabel/png.py): standard files that decode to the exact pixels."""

from __future__ import annotations

import io
import struct
import zlib

import cv2
import numpy as np
import pytest
from PIL import Image

from autolabel.png import encode_png_bgr, encode_png_rgb, filtered_rows_up
from autolabel.set_of_mark import encode_png


def _chunks(png: bytes) -> list[tuple[bytes, bytes]]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    out, pos = [], 8
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, data = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", png[pos + 8 + length : pos + 12 + length])
        assert crc == zlib.crc32(kind + data), kind
        out.append((kind, data))
        pos += 12 + length
    return out


def test_up_filter_by_hand():
    # Rows [10, 20, 30 | 250, 0, 5] over [5, 30, 30 | 255, 1, 0]: the second row minus the first,
    # byte by byte mod 256 (5 - 10 = 251, 30 - 20 = 10, 0, 255 - 250 = 5, 1 - 0 = 1, 0 - 5 = 251).
    rgb = np.array([[[10, 20, 30], [250, 0, 5]], [[5, 30, 30], [255, 1, 0]]], np.uint8)
    rows = filtered_rows_up(rgb)
    assert rows.tolist() == [[2, 10, 20, 30, 250, 0, 5], [2, 251, 10, 0, 5, 1, 251]]


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (9, 1), (37, 53), (90, 160)])
def test_decodes_to_the_same_pixels(shape):
    rng = np.random.default_rng(sum(shape))
    bgr = rng.integers(0, 256, (*shape, 3), dtype=np.uint8)
    # Smooth regions too (the filter's residuals are then mostly zero), as in camera images.
    bgr[: shape[0] // 2] = np.linspace(0, 255, shape[1], dtype=np.uint8)[None, :, None]
    png = encode_png_bgr(bgr)
    assert np.array_equal(cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_UNCHANGED), bgr)
    with Image.open(io.BytesIO(png)) as im:
        assert im.mode == "RGB" and im.size == (shape[1], shape[0])
        assert np.array_equal(np.asarray(im), bgr[:, :, ::-1])
    kinds = [k for k, _ in _chunks(png)]
    assert kinds == [b"IHDR", b"IDAT", b"IEND"]
    ihdr = dict(_chunks(png))[b"IHDR"]
    assert struct.unpack(">IIBBBBB", ihdr) == (shape[1], shape[0], 8, 2, 0, 0, 0)
    # The deflate stream is plain zlib: the filtered scanlines come back from the stdlib.
    raw = zlib.decompress(dict(_chunks(png))[b"IDAT"])
    assert raw == filtered_rows_up(bgr[:, :, ::-1]).tobytes()
    assert encode_png_rgb(np.ascontiguousarray(bgr[:, :, ::-1])) == png
    assert encode_png(bgr) == png


def test_same_pixels_same_bytes_and_non_contiguous_input():
    rng = np.random.default_rng(0)
    big = rng.integers(0, 256, (40, 60, 3), dtype=np.uint8)
    view = big[::2, 5:50]  # strided: encoded as its pixels
    assert encode_png_bgr(view) == encode_png_bgr(view.copy())
    decoded = cv2.imdecode(np.frombuffer(encode_png_bgr(view), np.uint8), cv2.IMREAD_COLOR)
    assert np.array_equal(decoded, view)


def test_other_images_keep_opencv_and_bad_input_is_named():
    grey = np.arange(12, dtype=np.uint8).reshape(3, 4)
    assert np.array_equal(
        cv2.imdecode(np.frombuffer(encode_png(grey), np.uint8), cv2.IMREAD_UNCHANGED), grey
    )
    with pytest.raises(ValueError, match="encode_png_rgb"):
        encode_png_rgb(np.zeros((0, 4, 3), np.uint8))
    with pytest.raises(ValueError, match="encode_png_bgr"):
        encode_png_bgr(np.zeros((4, 4, 3), np.uint16))


def test_reused_scanline_buffer_across_sizes():
    # Encodes share one scanline buffer: a small image after a big one, and the big one again,
    # must each decode to their own pixels and give the same bytes as before.
    rng = np.random.default_rng(7)
    big = rng.integers(0, 256, (70, 90, 3), dtype=np.uint8)
    small = rng.integers(0, 256, (5, 8, 3), dtype=np.uint8)
    first = encode_png_rgb(big)
    for img, png in ((small, encode_png_rgb(small)), (big, encode_png_rgb(big))):
        decoded = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR_RGB)
        assert np.array_equal(decoded, img)
    assert encode_png_rgb(big) == first
    out = np.zeros((5, 8 * 3 + 1), np.uint8)
    assert filtered_rows_up(small, out) is out
    assert np.array_equal(out, filtered_rows_up(small))
    with pytest.raises(ValueError, match="out must be"):
        filtered_rows_up(small, np.zeros((5, 8 * 3), np.uint8))
