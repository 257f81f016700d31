"""Colour of an object from the pixels under its mask: median in L*a*b*, nearest colour word."""

from __future__ import annotations

import numpy as np
import pytest

from autolabel.colour import (
    NAMED_COLOURS_RGB,
    grouped_median,
    lab_from_rgb,
    median_lab_under_masks,
    name_colours,
)
from autolabel.sensors import CameraCalibration
from autolabel.synth.catalogue import CLASS_SPECS, build_part_templates
from autolabel.synth.raycast import GroundTexture
from autolabel.synth.render import render_camera
from autolabel.synth.scene_boxes import compose_scene, scenery_boxes
from calib.rig import camera_rotation
from calib.se3 import SE3


def test_lab_of_reference_colours():
    # CIE L*a*b* (D65) of sRGB white, mid grey and pure red, by the standard formulas.
    lab = lab_from_rgb(np.array([[255, 255, 255], [119, 119, 119], [255, 0, 0]]))
    assert lab[0] == pytest.approx([100.0, 0.0, 0.0], abs=0.05)
    assert lab[1, 0] == pytest.approx(50.0, abs=0.3) and lab[1, 1:] == pytest.approx(
        [0, 0], abs=0.05
    )
    assert lab[2] == pytest.approx([53.24, 80.09, 67.20], abs=0.2)


def test_palette_names_itself_and_unknowns():
    names = list(NAMED_COLOURS_RGB)
    lab = lab_from_rgb(np.array([NAMED_COLOURS_RGB[n] for n in names]))
    got, valid = name_colours(lab)
    # Every word names itself except mid grey: under the brightness factors it is also a white
    # surface at 53 % (240 * 0.53 = 128), so it is ambiguous; a darker grey is grey.
    assert [n for n, g in zip(names, got, strict=True) if g != n] == ["grey"]
    assert name_colours(lab_from_rgb(np.array([[80, 80, 80]])))[0][0] == "grey"
    # A shaded red (60 % brightness) is still red; NaN is unknown.
    got, valid = name_colours(lab_from_rgb(np.array([[114, 18, 21]])))
    assert got[0] == "red" and valid[0]
    got, valid = name_colours(np.array([[np.nan, 0.0, 0.0]]))
    assert got[0] == "unknown" and not valid[0]
    # Half way between red and orange is ambiguous.
    mid = 0.5 * (
        lab_from_rgb(np.array(NAMED_COLOURS_RGB["red"]))
        + lab_from_rgb(np.array(NAMED_COLOURS_RGB["orange"]))
    )
    assert name_colours(mid[None])[0][0] == "unknown"


def test_grouped_median_matches_numpy():
    rng = np.random.default_rng(0)
    values = rng.normal(size=(500, 3))
    group = rng.integers(0, 7, 500)
    group[group == 5] = 6  # an empty group
    got = grouped_median(values, group, 8)
    for g in range(8):
        if (group == g).any():
            assert got[g] == pytest.approx(np.median(values[group == g], axis=0))
        else:
            assert np.isnan(got[g]).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sorted_group_median_is_numpys_median_of_the_values_as_float64(dtype):
    from autolabel.colour import sorted_group_median

    rng = np.random.default_rng(2)
    from autolabel.colour import RADIX_MIN_VALUES

    big = RADIX_MIN_VALUES  # groups this large take the radix path (float32)
    counts = np.array([0, 1, 2, 3, 4, 0, 1000, 1001, 57, big, big + 1, 3 * big, 3 * big + 1])
    # Few distinct values (many ties) in some groups, all distinct in others.
    values = np.where(
        rng.random((counts.sum(), 3)) < 0.5,
        rng.integers(-3, 4, (counts.sum(), 3)),
        rng.normal(size=(counts.sum(), 3)) * 100,
    ).astype(dtype)
    got = sorted_group_median(values, counts)
    starts = np.concatenate([[0], np.cumsum(counts)])
    for k, n in enumerate(counts):
        if n == 0:
            assert np.isnan(got[k]).all()
        else:
            part = values[starts[k] : starts[k + 1]].astype(np.float64)
            assert np.array_equal(got[k], np.median(part, axis=0))  # bit for bit


def test_median_under_masks_ignores_a_minority_of_background():
    img = np.zeros((40, 60, 3), np.uint8)
    img[:] = (90, 90, 90)
    img[5:25, 5:30] = NAMED_COLOURS_RGB["blue"]
    img[10:30, 35:55] = NAMED_COLOURS_RGB["yellow"]
    masks = np.zeros((40, 60, 3), np.uint8)
    masks[3:27, 3:32, 0] = 1  # the blue patch and a border of background (34 % of it)
    masks[10:30, 35:55, 1] = 1
    masks[0:2, 0:5, 2] = 1  # 10 pixels: too few
    lab, px = median_lab_under_masks(img, masks, min_pixels=20)
    assert list(px) == [24 * 29, 400, 10]
    names, _ = name_colours(lab)
    assert list(names) == ["blue", "yellow", "unknown"]
    assert lab[0] == pytest.approx(lab_from_rgb(np.array(NAMED_COLOURS_RGB["blue"])), abs=0.01)


def test_colours_of_rendered_synthetic_objects():
    """The synthetic renderer shades each body face by 0.45..1 and adds windscreens and plates;
    the median under each object's pixels still names its body colour."""
    cam = CameraCalibration(
        "CAM_TEST", np.array([[200.0, 0, 160], [0, 200, 90], [0, 0, 1]]), SE3.identity(), 320, 180
    )
    pose = SE3(camera_rotation(0.0, 0.0), np.array([0.0, 0.0, 1.5]))
    objects = [  # class, body colour (a palette entry of the class), expected word
        ("car", CLASS_SPECS["car"].palette[3], "red"),
        ("car", CLASS_SPECS["car"].palette[4], "blue"),
        ("bus", CLASS_SPECS["bus"].palette[0], "yellow"),
        ("car", CLASS_SPECS["car"].palette[7], "green"),
        ("construction_vehicle", CLASS_SPECS["construction_vehicle"].palette[1], "orange"),
    ]
    names = [o[0] for o in objects]
    sizes = np.array([CLASS_SPECS[n].mean_wlh_m for n in names])
    colours = np.array([o[1] for o in objects], np.uint8)
    parts = build_part_templates(
        names, sizes, colours, np.zeros(len(names), bool), np.random.default_rng(0)
    )
    centers = np.array(
        [[15, -6, 0.87], [15, 0, 0.87], [40, -12, 1.74], [30, -1, 0.87], [25, 7, 1.6]]
    )
    empty = scenery_boxes(
        np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0), np.zeros((0, 3), np.uint8)
    )
    boxes = compose_scene(parts, centers, np.array([0.3, 0.0, 0.0, 2.0, 1.2]), empty)
    result = render_camera(cam, pose, boxes, GroundTexture.plain((90, 90, 90)))
    owner = np.where(result.box_index >= 0, boxes.owner[np.maximum(result.box_index, 0)], -1)
    masks = np.stack([owner == i for i in range(len(objects))], axis=-1)
    lab, px = median_lab_under_masks(result.image, masks)
    assert (px > 50).all()
    got, valid = name_colours(lab)
    assert list(got) == [o[2] for o in objects] and valid.all()


def test_pixels_at_is_numpy_indexing_on_any_layout():
    from autolabel.colour import _pixels_at

    rng = np.random.default_rng(3)
    bgr = rng.integers(0, 256, (30, 40, 3), dtype=np.uint8)
    v, u = rng.integers(0, 30, 500).astype(np.int32), rng.integers(0, 40, 500).astype(np.int32)
    # Contiguous, an RGB view of BGR pixels (the marks stage's), and a strided crop.
    for image in (bgr, bgr[:, :, ::-1], bgr[::2, 5:, :]):
        vv, uu = v % image.shape[0], u % image.shape[1]
        got = _pixels_at(image, vv, uu)
        assert got.shape == (500, 3) and np.array_equal(got, image[vv, uu])
    with pytest.raises(IndexError, match="outside"):
        _pixels_at(bgr, np.array([30]), np.array([0]))
    with pytest.raises(IndexError, match="outside"):
        _pixels_at(bgr, np.array([0]), np.array([-1]))
    assert _pixels_at(bgr, np.zeros(0, int), np.zeros(0, int)).shape == (0, 3)


def test_radix_median_of_two_halves_in_different_bins():
    from autolabel.colour import RADIX_MIN_VALUES, sorted_group_median

    big = RADIX_MIN_VALUES
    # Even counts whose two middle values lie in different histogram bins (the upper one is
    # its bin's first value), or in the same bin; negative values and ties.
    groups = [
        np.r_[np.full(big, -5.0), np.full(big, 7.0)],  # (-5 + 7) / 2
        np.r_[np.full(big, 3.0), np.full(big, np.nextafter(np.float32(3), 4))],
        np.r_[np.full(big, -0.5), np.full(big + 1, -0.25)],  # odd: -0.25
        np.full(2 * big, 7.0),  # even, both middle values the same key
        # 40000 values one ulp apart (one upper-bits bin), shuffled.
        np.random.default_rng(5).permutation(
            np.float32(3.0) + np.arange(40000) * np.spacing(np.float32(3.0))
        ),
    ]
    values = np.concatenate(groups).astype(np.float32)[:, None]
    got = sorted_group_median(values, np.array([len(g) for g in groups]))
    expected = [np.median(g.astype(np.float32).astype(np.float64)) for g in groups]
    assert got[:, 0].tolist() == expected
    assert got[0, 0] == 1.0 and got[2, 0] == -0.25


def test_image_patch_holds_the_pixels_of_its_masks():
    from pycocotools import mask as mask_utils

    from autolabel.qa.appearance import ImagePatch, mask_bounds

    h, w = 40, 60
    rng = np.random.default_rng(5)
    img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    masks = np.zeros((h, w, 3), np.uint8)
    masks[5:9, 10:20, 0] = 1  # rows 5..8, columns 10..19
    masks[30:32, 40:41, 1] = 1  # rows 30..31, column 40
    # the third mask is empty
    rles = [
        {"size": [h, w], "counts": r["counts"].decode("ascii")}
        for r in mask_utils.encode(np.asfortranarray(masks))
    ]
    np.testing.assert_array_equal(
        mask_bounds(rles), [[10, 5, 20, 9], [40, 30, 41, 32], [0, 0, 0, 0]]
    )
    p = ImagePatch.around(img, rles)
    assert (p.u0, p.v0, p.rgb.shape) == (10, 5, (32 - 5, 41 - 10, 3))
    full = p.image()
    np.testing.assert_array_equal(full[5:32, 10:41], img[5:32, 10:41])
    assert not full[:5].any() and not full[:, :10].any() and not full[32:].any()
    assert p.covers(rles) and p.covers(rles[1:2])
    outside = np.zeros((h, w, 1), np.uint8)
    outside[4, 12, 0] = 1  # one row above the patch
    rle_out = mask_utils.encode(np.asfortranarray(outside))[0]
    assert not p.covers([{"size": [h, w], "counts": rle_out["counts"].decode("ascii")}])
    assert not p.covers([{"size": [h + 1, w], "counts": rles[0]["counts"]}])
    # A copy, also of a full-width crop (which slicing alone would leave a view of the image).
    wide = np.zeros((h, w, 1), np.uint8)
    wide[10:12, :, 0] = 1
    rle_wide = mask_utils.encode(np.asfortranarray(wide))[0]
    q = ImagePatch.around(img, [{"size": [h, w], "counts": rle_wide["counts"].decode("ascii")}])
    kept = q.rgb.copy()
    img[:] = 0
    np.testing.assert_array_equal(q.rgb, kept)
    assert kept.any()
