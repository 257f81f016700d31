"""``marks.style: strideqa``: STRIDE-QA-Bench's marks (size, anchor, fill, outline, label)."""

from __future__ import annotations

import numpy as np
import pytest

from autolabel.config import dataclass_from_mapping
from autolabel.set_of_mark import MarkStyle, render_marks
from autolabel.set_of_mark_strideqa import font_size_pt, label_anchor_uv

STQ = MarkStyle(style="strideqa")


def test_font_size_follows_the_image_size():
    assert font_size_pt(1080, 1920) == 16.0  # sqrt(2,073,600) = 1440; 1440 // 90 = 16
    assert font_size_pt(225, 400) == 10.0  # 300 // 90 = 3, clamped to 10
    assert font_size_pt(2160, 3840) == 32.0


def test_label_anchor_is_the_middle_of_the_distance_ridge():
    # A 21 x 41 rectangle: distance 11 on row 10 for columns 10..30 (21 ties), the middle is 20.
    crop = np.ones((21, 41), bool)
    assert label_anchor_uv(crop) == (20, 10)
    # An L: the thick part wins.
    ell = np.zeros((40, 40), bool)
    ell[:, :8] = True
    ell[20:, :] = True
    u, v = label_anchor_uv(ell)
    assert ell[v, u] and v >= 20 and 6 <= u <= 33


def _grey(h=120, w=200):
    return np.full((h, w, 3), 128, np.uint8)


def test_fill_outline_and_label_on_a_rectangle():
    img = _grey()
    mask = np.zeros((120, 200), bool)
    mask[20:101, 30:171] = True  # 81 x 141: anchor (100, 60), label top 6 px above it
    out = render_marks(img, np.array([7]), masks=mask[None], style=STQ)
    # Inside, away from edge and label: 0.8 grey + 0.2 green (BGR), rounded.
    assert out[30, 40].tolist() == [102, 153, 102]
    # Outside, away from the outline: untouched.
    assert out[5, 5].tolist() == [128, 128, 128] and out[115, 195].tolist() == [128, 128, 128]
    # The outline runs through the boundary pixels' centres: green dominates there.
    edge = out[60, 30].astype(int)
    assert edge[1] > 200 and edge[0] < 90 and edge[2] < 90
    # Label: a dark box (0.2 of what is under it) with white text, centred at u = 102, from
    # v = 54 down; nothing of it left of u = 92 or right of u = 112 (one digit at 22 px is narrower).
    box = out[50:80, 85:120].astype(int)
    assert (box.max(axis=2) >= 230).sum() >= 10  # white glyph pixels
    dark = out[:, :, 1] < 60
    vs, us = np.nonzero(dark)
    assert 92 <= us.min() and us.max() <= 112 and 50 <= vs.min() <= 56
    assert out[45, 100].tolist() == [102, 153, 102]  # above the label: fill only


def test_a_mask_with_a_hole_is_filled_without_outline():
    img = _grey()
    mask = np.zeros((120, 200), bool)
    mask[20:101, 30:171] = True
    mask[50:71, 140:161] = False  # a hole away from the label
    out = render_marks(img, np.array([0]), masks=mask[None], style=STQ)
    assert out[60, 30].tolist() == [102, 153, 102]  # boundary pixel: fill, no outline
    assert out[60, 150].tolist() == [128, 128, 128]  # the hole


def test_labels_are_drawn_over_every_mask_and_the_input_is_untouched():
    img = _grey()
    before = img.copy()
    a = np.zeros((120, 200), bool)
    a[10:110, 10:110] = True
    b = np.zeros((120, 200), bool)
    b[40:80, 40:190] = True  # covers a's label area
    out = render_marks(img, np.array([0, 1]), masks=np.stack([a, b]), style=STQ)
    np.testing.assert_array_equal(img, before)
    assert (out.max(axis=2) >= 230).sum() >= 20  # both labels' white text survives
    again = render_marks(img, np.array([0, 1]), masks=np.stack([a, b]), style=STQ)
    np.testing.assert_array_equal(out, again)


def test_style_is_validated_and_read_from_config():
    assert dataclass_from_mapping(MarkStyle, {"style": "strideqa"}, "marks").style == "strideqa"
    with pytest.raises(ValueError, match="style"):
        dataclass_from_mapping(MarkStyle, {"style": "som"}, "marks")
