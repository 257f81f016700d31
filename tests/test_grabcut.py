"""GrabCut from the brightness-bin colour model (``autolabel.segmentation.grabcut``)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from autolabel.segmentation.grabcut import _initial_models, grab_cut

GC_FG = (cv2.GC_FGD, cv2.GC_PR_FGD)


def _two_colour_image(background, foreground, square=(20, 15, 50, 40), size=(60, 80)):
    """(H, W, 3) uint8 image of one colour with a rectangle [u0, v0, u1, v1) of another."""
    image = np.empty((*size, 3), np.uint8)
    image[:] = background
    u0, v0, u1, v1 = square
    image[v0:v1, u0:u1] = foreground
    return image


def test_model_of_five_flat_colours_is_those_colours_in_opencvs_layout():
    # Each side holds five flat colours, 24 pixels each, brightness (B + G + R) increasing with the
    # colour's index: the five equal-count bins are exactly the five colours, and no Lloyd move
    # changes them. Expected values by hand: weight 1/5, mean the colour, covariance 0 plus
    # OpenCV's 0.01 on the diagonal (a singular one is fixed so).
    background = np.array(
        [[10, 10, 10], [40, 20, 30], [60, 70, 50], [90, 90, 110], [200, 180, 190]]
    )
    foreground = background[::-1] + 3
    image = np.zeros((12, 20, 3), np.uint8)
    label = np.zeros((12, 20), np.uint8)
    label[:, 10:] = cv2.GC_PR_FGD
    # 24 pixels per colour and side: columns 2k, 2k+1 of the left half, 10+2k, 11+2k of the right.
    for k in range(5):
        image[:, 2 * k : 2 * k + 2] = background[k]
        image[:, 10 + 2 * k : 12 + 2 * k] = foreground[k]
    bgd, fgd = _initial_models(image, label)
    for model, colours in ((bgd, background), (fgd, foreground)):
        assert model.shape == (1, 65) and model.dtype == np.float64
        weights, means, covs = (
            model[0, :5],
            model[0, 5:20].reshape(5, 3),
            model[0, 20:].reshape(5, 3, 3),
        )
        order = np.argsort(colours.sum(axis=1), kind="stable")
        np.testing.assert_allclose(weights, 0.2)
        np.testing.assert_allclose(means, colours[order])
        np.testing.assert_allclose(covs, np.broadcast_to(0.01 * np.eye(3), (5, 3, 3)), atol=1e-12)


def test_rect_start_labels_as_opencvs_rect_start():
    # OpenCV itself is the reference: GC_INIT_WITH_RECT with no iteration only sets the labels.
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (30, 40, 3), dtype=np.uint8)
    for rect in ((5, 4, 20, 12), (-3, -2, 15, 10), (30, 20, 25, 25)):
        expected = np.zeros((30, 40), np.uint8)
        cv2.grabCut(
            image, expected, rect, np.zeros((1, 65)), np.zeros((1, 65)), 0, cv2.GC_INIT_WITH_RECT
        )
        label = np.full((30, 40), 7, np.uint8)
        grab_cut(image, label, 0, rect=rect)  # zero iterations: the start only
        np.testing.assert_array_equal(label, expected)


def test_cut_finds_a_flat_square_exactly_and_ignores_opencvs_rng():
    # Textured grey-green background, a flat red square; the probable-foreground box is 6 px
    # larger on every side. The cut must give exactly the square (geometry), whatever the
    # state of OpenCV's global RNG (k-means would draw from it; the bins draw nothing).
    rng = np.random.default_rng(1)
    image = _two_colour_image((100, 120, 90), (40, 50, 210))
    noise = rng.integers(-12, 13, image.shape)
    inside = np.zeros(image.shape[:2], bool)
    inside[15:40, 20:50] = True
    image = np.where(inside[..., None], image, np.clip(image + noise, 0, 255)).astype(np.uint8)
    labels = []
    for seed in (0, 12345):
        cv2.setRNGSeed(seed)
        label = np.full(image.shape[:2], cv2.GC_BGD, np.uint8)
        label[9:46, 14:56] = cv2.GC_PR_FGD
        grab_cut(image, label, 1)
        labels.append(label)
    np.testing.assert_array_equal(labels[0], labels[1])
    np.testing.assert_array_equal(np.isin(labels[0], GC_FG), inside)


def test_colours_of_one_brightness_are_told_apart():
    # Red (B+G+R = 270) and grey-green (270) have the same brightness: the bins alone would put
    # them in the same components. With flat colours the foreground side (box) holds both;
    # the Lloyd moves must give each its own component, so the cut keeps only the red square.
    image = _two_colour_image((90, 100, 80), (30, 30, 210))
    assert int(image[0, 0].astype(int).sum()) == int(image[20, 30].astype(int).sum())
    label = np.full(image.shape[:2], cv2.GC_BGD, np.uint8)
    label[9:46, 14:56] = cv2.GC_PR_FGD
    bgd, fgd = _initial_models(image, label)
    fg_means = fgd[0, 5:20].reshape(5, 3)[fgd[0, :5] > 0]
    # Every foreground component is one of the two colours, not a mix of them.
    assert all(np.allclose(m, (90, 100, 80)) or np.allclose(m, (30, 30, 210)) for m in fg_means)
    grab_cut(image, label, 1)
    inside = np.zeros(image.shape[:2], bool)
    inside[15:40, 20:50] = True
    np.testing.assert_array_equal(np.isin(label, GC_FG), inside)


def test_an_empty_side_is_a_clear_error():
    image = np.full((10, 10, 3), 128, np.uint8)
    with pytest.raises(ValueError, match="background or the foreground empty"):
        grab_cut(image, np.full((10, 10), cv2.GC_PR_FGD, np.uint8), 1)
    with pytest.raises(ValueError, match="background or the foreground empty"):
        grab_cut(image, np.zeros((10, 10), np.uint8), 1)
