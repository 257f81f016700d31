"""Find the labels of a Set-of-Mark image by what they show, without the layout code that placed
them.

A label is the region's id written in black or white on a patch of the region's colour. OpenCV
draws a glyph the same at any integer origin, and anti-aliasing blends it only with that patch, so
the text ``str(id)`` rendered alone on the region's colour (:func:`label_template`, cropped to the
ink plus a one-pixel margin of the colour) appears pixel for pixel (give or take a rounding level
of the anti-aliasing) wherever the label is drawn.
A wrong number, a wrong colour or a label hidden under another one is not found.
"""

from __future__ import annotations

import cv2
import numpy as np

from autolabel.set_of_mark import (
    MarkStyle,
    region_colours_bgr,
    style_for_image,
    text_colours_bgr,
)

#: Summed |BGR difference| from the background above which a pixel is ink.
INK_THRESHOLD = 60


def label_template(text: str, region_id: int, style: MarkStyle) -> np.ndarray:
    """(h, w, 3) uint8 BGR: ``text`` written as the style writes labels on region
    ``region_id``'s colour (``label_background="region"``), cropped to the ink (a neighbouring
    label may cover the background around it)."""
    background = region_colours_bgr(region_id)
    (tw, th), base = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, style.font_scale, 1)
    pad = 4 * style.font_thickness + 4
    canvas = np.tile(background, (th + base + 2 * pad, tw + 2 * pad, 1)).astype(np.uint8)
    cv2.putText(
        canvas,
        text,
        (pad, pad + th),
        cv2.FONT_HERSHEY_SIMPLEX,
        style.font_scale,
        text_colours_bgr(background).tolist(),
        style.font_thickness,
        cv2.LINE_AA,
    )
    ink = np.abs(canvas.astype(np.int64) - background.astype(np.int64)).sum(-1) > INK_THRESHOLD
    rows, cols = np.flatnonzero(ink.any(1)), np.flatnonzero(ink.any(0))
    return canvas[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]


def find_template(image_bgr: np.ndarray, template: np.ndarray) -> np.ndarray:
    """(K, 2) int (u, v) centres of every place where ``template`` appears exactly."""
    h, w = template.shape[:2]
    if image_bgr.shape[0] < h or image_bgr.shape[1] < w:
        return np.zeros((0, 2), np.int64)
    diff = cv2.matchTemplate(
        image_bgr.astype(np.float32), template.astype(np.float32), cv2.TM_SQDIFF
    )
    # OpenCV's anti-aliasing may round an edge pixel one level apart at another origin: allow a
    # mean squared difference of 1 per pixel (one wrong glyph pixel alone costs over 10,000).
    v, u = np.nonzero(diff <= h * w)
    return np.stack([u + w // 2, v + h // 2], axis=1).astype(np.int64)


def find_label(image_bgr: np.ndarray, region_id: int, style: MarkStyle) -> np.ndarray:
    """(K, 2) centres of every label of region ``region_id`` (its id on its colour), drawn with
    ``style`` as sized for this image's height (``style_for_image``)."""
    style = style_for_image(style, image_bgr.shape[0])
    text = style.label_format.format(id=int(region_id))
    return find_template(image_bgr, label_template(text, region_id, style))
