"""Set-of-Mark: region ids, palette read-back, label placement, rendering, stitching, files."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from autolabel.masks import box_masks, mask_boxes_2d
from autolabel.set_of_mark import (
    SIX_CAMERA_LAYOUT,
    MarkStyle,
    assign_region_ids,
    layout_labels,
    region_colours_bgr,
    region_id_from_colour,
    render_marks,
    stitch_six,
    stitched_tile_size_px,
    text_colours_bgr,
    write_marked_images,
)
from tests.mark_reading import find_label, find_template, label_template
from tests.realdata import NUSCENES_MMDET3D, realdata_dir, requires_realdata

W, H = 480, 320


def ellipse_mask(cu, cv, au, av):
    m = np.zeros((H, W), np.uint8)
    cv2.ellipse(m, (cu, cv), (au, av), 0, 0, 360, 1, -1)
    return m.astype(bool)


def contrast_ratio(lum_a, lum_b):
    hi, lo = max(lum_a, lum_b), min(lum_a, lum_b)
    return (hi + 0.05) / (lo + 0.05)


def luminance(bgr):
    """WCAG relative luminance, computed here independently of the module."""
    out = []
    for c in (bgr[2], bgr[1], bgr[0]):
        c = c / 255.0
        out.append(c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4)
    return 0.2126 * out[0] + 0.7152 * out[1] + 0.0722 * out[2]


class TestPalette:
    def test_pure_unique_and_readable_back(self):
        ids = np.arange(1000)
        colours = region_colours_bgr(ids)
        assert len({tuple(c) for c in colours}) == 1000
        np.testing.assert_array_equal(region_colours_bgr(ids), colours)
        np.testing.assert_array_equal(region_colours_bgr(7), colours[7])
        np.testing.assert_array_equal(region_id_from_colour(colours[:200], ids[:200]), ids[:200])

    def test_first_ids_are_far_apart(self):
        c = region_colours_bgr(np.arange(20)).astype(float)
        d = np.sqrt(((c[:, None] - c[None]) ** 2).sum(-1))
        assert d[~np.eye(20, dtype=bool)].min() > 40.0

    def test_text_colour_has_the_better_contrast(self):
        for bg in region_colours_bgr(np.arange(100)):
            ink = text_colours_bgr(bg)
            other = 255 - ink
            lum_bg = luminance(bg)
            assert contrast_ratio(lum_bg, luminance(ink)) >= contrast_ratio(
                lum_bg, luminance(other)
            )
            assert contrast_ratio(lum_bg, luminance(ink)) >= 3.0  # WCAG large-text minimum


class TestRegionIds:
    def test_order_by_distance_then_track_and_stable_across_frames_and_cameras(self):
        # Keyframe 0 rows from three frames x cameras; keyframe 1 separately.
        kf = [0, 0, 0, 0, 0, 0, 0, 1, 1]
        track = [30, 10, 20, 10, 30, 40, 50, 10, 20]
        dist = [5.0, 12.0, 12.0, 3.0, 7.0, 2.0, 8.0, 9.0, 4.0]
        at_kf = [True, True, True, False, False, False, True, True, True]
        r = assign_region_ids(kf, track, dist, at_kf)
        # Keyframe 0, seen at the keyframe: 30 (5 m), 50 (8 m), then 10 and 20 tied at 12 m, by
        # track id (10's nearer context row does not count). Seen only in context frames: 40.
        expect0 = {30: 0, 50: 1, 10: 2, 20: 3, 40: 4}
        for t, rid in expect0.items():
            assert r.lookup(0, t) == rid, t
        assert r.lookup(1, 20) == 0 and r.lookup(1, 10) == 1
        assert r.lookup(1, 30) == -1 and r.lookup(2, 10) == -1
        # Every row of one object carries the object's id.
        np.testing.assert_array_equal(r.row_region_id, [0, 2, 3, 2, 0, 4, 1, 1, 0])

    def test_ids_are_contiguous_per_keyframe_and_order_independent(self):
        rng = np.random.default_rng(3)
        kf = rng.integers(0, 4, 200)
        track = rng.integers(0, 30, 200)
        dist = rng.uniform(1, 60, 200)
        a = assign_region_ids(kf, track, dist)
        for k in np.unique(kf):
            ids = np.sort(a.region_id[a.keyframe == k])
            np.testing.assert_array_equal(ids, np.arange(len(ids)))
        perm = rng.permutation(200)
        b = assign_region_ids(kf[perm], track[perm], dist[perm])
        np.testing.assert_array_equal(b.row_region_id, a.row_region_id[perm])


def five_objects():
    masks = np.stack(
        [
            ellipse_mask(70, 80, 50, 40),
            ellipse_mask(220, 90, 60, 50),
            ellipse_mask(380, 100, 70, 60),
            ellipse_mask(120, 240, 80, 45),
            ellipse_mask(330, 250, 90, 40),
        ]
    )
    track_id = np.array([501, 17, 230, 9, 64])
    distance = np.array([25.0, 8.0, 40.0, 15.0, 8.0])
    return masks, track_id, distance


class TestReadBack:
    def test_label_colour_names_the_object_of_the_record(self):
        """Exact label colours found in the image lie on the object the record gives that id."""
        masks, track_id, distance = five_objects()
        record = assign_region_ids(np.zeros(5), track_id, distance)
        region = record.lookup(0, track_id)
        np.testing.assert_array_equal(np.sort(region), np.arange(5))
        image = np.full((H, W, 3), 90, np.uint8)
        style = MarkStyle(draw_box=False, draw_mask=True, mask_alpha=0.5)
        out = render_marks(image, region, masks=masks, style=style)
        for k in range(5):
            hits = np.all(out == region_colours_bgr(k), axis=-1)
            assert hits.sum() > 100, k  # the label background
            v, u = np.argwhere(hits).mean(axis=0).round().astype(int)
            owner = np.flatnonzero(masks[:, v, u])
            assert len(owner) == 1, k
            assert track_id[owner[0]] == record.track_id[record.region_id == k][0]

    def test_colour_at_the_label_position_reads_back_the_region_id(self):
        masks, track_id, distance = five_objects()
        record = assign_region_ids(np.zeros(5), track_id, distance)
        region = record.lookup(0, track_id)
        rng = np.random.default_rng(0)
        image = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)  # busy background
        boxes = np.array(
            [
                [20, 40, 120, 120],
                [160, 40, 280, 140],
                [310, 40, 450, 160],
                [40, 195, 200, 285],
                [240, 210, 420, 290],
            ],
            dtype=float,
        )
        for style in (MarkStyle(), MarkStyle(draw_contour=True, label_background="black")):
            out = render_marks(image, region, boxes_2d=boxes, masks=masks, style=style)
            layout = layout_labels(region, masks, (W, H), style)
            for i in range(5):
                u0, v0, u1, v1 = layout.rect[i]
                if style.label_background == "region":
                    corner = out[v0 + 1, u0 + 1]
                    assert region_id_from_colour(corner, np.arange(5)) == region[i]
                    np.testing.assert_array_equal(corner, region_colours_bgr(region[i]))
                else:
                    np.testing.assert_array_equal(out[v0 + 1, u0 + 1], [0, 0, 0])
                # The label sits on the object's own mask (the most interior point).
                assert masks[i][layout.anchor_uv[i, 1], layout.anchor_uv[i, 0]]
        # Box marks: the top edge of object i's box is drawn in its region colour.
        out = render_marks(image, region, boxes_2d=boxes, style=MarkStyle())
        for i in range(5):
            u0, v0, u1, _ = boxes[i].astype(int)
            np.testing.assert_array_equal(
                out[v0, (u0 + u1) // 2 - 30], region_colours_bgr(region[i])
            )


class TestLabelPlacement:
    def test_rectangle_label_at_centre(self):
        mask = box_masks(np.array([[100.0, 60.0, 300.0, 200.0]]), H, W)
        layout = layout_labels(np.array([0]), mask, (W, H))
        np.testing.assert_allclose(layout.anchor_uv[0], [200, 130], atol=1)
        assert not layout.outside[0]

    def test_l_shape_label_in_the_thick_part(self):
        mask = np.zeros((1, H, W), bool)
        mask[0, 50:250, 50:250] = True  # 200 x 200 block
        mask[0, 230:250, 250:450] = True  # thin 20 px arm to the right
        u, v = layout_labels(np.array([0]), mask, (W, H)).anchor_uv[0]
        assert 140 <= u <= 160 and 140 <= v <= 160

    def test_smaller_mask_excluded_from_the_larger(self):
        # Set-of-Mark allocation: the big mask's label avoids the small mask lying on its centre.
        big = np.zeros((H, W), bool)
        big[20:300, 40:440] = True
        small = np.zeros((H, W), bool)
        small[110:210, 190:290] = True
        layout = layout_labels(np.array([0, 1]), np.stack([big, small]), (W, H))
        ub, vb = layout.anchor_uv[0]
        us, vs = layout.anchor_uv[1]
        assert not small[vb, ub]
        np.testing.assert_allclose([us, vs], [240, 160], atol=1)

    def test_small_box_label_goes_outside(self):
        mask = box_masks(np.array([[200.0, 150.0, 230.0, 180.0]]), H, W)  # 900 px < 1600
        layout = layout_labels(np.array([3]), mask, (W, H))
        assert layout.outside[0]
        u0, v0, u1, v1 = layout.rect[0]
        assert v1 < 150  # entirely above the box
        # Near the top edge there is no room above: the label goes below.
        top = box_masks(np.array([[200.0, 2.0, 230.0, 32.0]]), H, W)
        u0, v0, u1, v1 = layout_labels(np.array([3]), top, (W, H)).rect[0]
        assert v0 > 32

    def test_label_that_would_hide_a_small_object_goes_outside(self):
        # A traffic cone's 30 x 60 px box (1,800 px) passes MetaVQA's 1,600 px, but a label would
        # cover most of it.
        mask = box_masks(np.array([[200.0, 150.0, 230.0, 210.0]]), H, W)
        layout = layout_labels(np.array([1]), mask, (W, H))
        assert layout.outside[0] and layout.rect[0, 3] < 150
        inside = layout_labels(np.array([1]), mask, (W, H), MarkStyle(max_label_fraction=1.0))
        assert not inside.outside[0]
        np.testing.assert_allclose(inside.anchor_uv[0], [215, 180], atol=1)

    def test_labels_stay_inside_the_image(self):
        mask = box_masks(np.array([[0.0, 0.0, 60.0, 40.0], [430.0, 300.0, 480.0, 320.0]]), H, W)
        rect = layout_labels(np.array([10, 11]), mask, (W, H)).rect
        assert (rect[:, [0, 1]] >= 0).all() and (rect[:, 2] < W).all() and (rect[:, 3] < H).all()


class TestRendering:
    def test_input_untouched_and_deterministic(self):
        masks, track_id, distance = five_objects()
        image = np.full((H, W, 3), 30, np.uint8)
        before = image.copy()
        a = render_marks(image, np.arange(5), masks=masks, style=MarkStyle(draw_mask=True))
        b = render_marks(image, np.arange(5), masks=masks, style=MarkStyle(draw_mask=True))
        np.testing.assert_array_equal(image, before)
        np.testing.assert_array_equal(a, b)
        assert not np.array_equal(a, image)

    def test_rle_masks_render_like_arrays(self):
        from pycocotools import mask as mask_utils

        masks, _, _ = five_objects()
        rles = mask_utils.encode(np.asfortranarray(masks.transpose(1, 2, 0).astype(np.uint8)))
        image = np.zeros((H, W, 3), np.uint8)
        style = MarkStyle(draw_contour=True)
        np.testing.assert_array_equal(
            render_marks(image, np.arange(5), masks=list(rles), style=style),
            render_marks(image, np.arange(5), masks=masks, style=style),
        )

    @pytest.mark.parametrize(
        "style",
        [
            MarkStyle(),
            MarkStyle(draw_mask=True, draw_contour=True, label_background="black"),
            MarkStyle(style="strideqa"),
        ],
    )
    def test_rgb_image_gives_the_bgr_marks_channel_swapped(self, style):
        # The reference is the BGR rendering, swapped here; a mark colour drawn unswapped
        # (region colours differ per channel) makes the two differ.
        masks, _, _ = five_objects()
        rng = np.random.default_rng(3)
        bgr = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
        boxes = mask_boxes_2d(masks)
        want = render_marks(bgr, np.arange(5), boxes_2d=boxes, masks=masks, style=style)
        got = render_marks(
            np.ascontiguousarray(bgr[:, :, ::-1]),
            np.arange(5),
            boxes_2d=boxes,
            masks=masks,
            style=style,
            channel_order="rgb",
        )
        np.testing.assert_array_equal(got, want[:, :, ::-1])
        with pytest.raises(ValueError, match="channel_order"):
            render_marks(bgr, np.arange(5), boxes_2d=boxes, style=style, channel_order="RGB")

    def test_style_errors_name_the_key(self):
        with pytest.raises(ValueError, match="label_background"):
            MarkStyle(label_background="white")
        with pytest.raises(ValueError, match="at least one mark"):
            MarkStyle(draw_box=False)
        with pytest.raises(ValueError, match="label_format"):
            MarkStyle(label_format="Region")


class TestStitchAndWrite:
    def six_images(self, h=90, w=160):
        colours = {}
        images = {}
        for k, ch in enumerate([c for row in SIX_CAMERA_LAYOUT for c in row]):
            colours[ch] = region_colours_bgr(k)
            images[ch] = np.tile(colours[ch], (h, w, 1))
        return images, colours

    def test_layout_is_front_row_on_top(self):
        images, colours = self.six_images()
        images["CAM_BACK"] = cv2.resize(images["CAM_BACK"], (320, 180))  # resized to the tile
        canvas = stitch_six(images)
        assert canvas.shape == (180, 480, 3)
        expected = {
            (0, 0): "CAM_FRONT_LEFT",
            (0, 1): "CAM_FRONT",
            (0, 2): "CAM_FRONT_RIGHT",
            (1, 0): "CAM_BACK_LEFT",
            (1, 1): "CAM_BACK",
            (1, 2): "CAM_BACK_RIGHT",
        }
        for (r, c), ch in expected.items():
            np.testing.assert_array_equal(canvas[r * 90 + 45, c * 160 + 80], colours[ch])

    def test_missing_channel_is_black_and_unknown_is_an_error(self):
        images, _ = self.six_images()
        del images["CAM_BACK_RIGHT"]
        canvas = stitch_six(images)
        assert not canvas[90:, 320:].any()
        with pytest.raises(ValueError, match="CAM_TOP"):
            stitch_six({"CAM_TOP": np.zeros((4, 4, 3), np.uint8)})

    def test_files_are_atomic_and_byte_identical(self, tmp_path):
        images, _ = self.six_images()
        a = write_marked_images(tmp_path / "a", "kf0004", images)
        b = write_marked_images(tmp_path / "b", "kf0004", images)
        assert [p.name for p in a][-1] == "kf0004_stitched.png" and len(a) == 7
        assert [p.name for p in a][0] == "kf0004_CAM_FRONT_LEFT.png"
        for pa, pb in zip(a, b, strict=True):
            assert pa.read_bytes() == pb.read_bytes()
        np.testing.assert_array_equal(cv2.imread(str(a[1])), images["CAM_FRONT"])
        assert not list((tmp_path / "a").glob(".*"))

    def test_rgb_images_write_the_same_files_as_bgr(self, tmp_path):
        rng = np.random.default_rng(1)
        bgr = {
            ch: rng.integers(0, 256, (90, 160, 3), dtype=np.uint8)
            for row in SIX_CAMERA_LAYOUT
            for ch in row
        }
        rgb = {ch: np.ascontiguousarray(im[:, :, ::-1]) for ch, im in bgr.items()}
        a = write_marked_images(tmp_path / "a", "kf", bgr, stitched_max_width_px=400)
        b = write_marked_images(
            tmp_path / "b", "kf", rgb, stitched_max_width_px=400, channel_order="rgb"
        )
        for pa, pb in zip(a, b, strict=True):
            assert pa.read_bytes() == pb.read_bytes()
        # The file holds the pixels: OpenCV reads back BGR.
        np.testing.assert_array_equal(cv2.imread(str(b[0])), bgr["CAM_FRONT_LEFT"])

    def test_stitched_view_is_shrunk_to_its_width_and_cameras_are_not(self, tmp_path):
        assert stitched_tile_size_px((1600, 900), 2400) == (800, 450)
        assert stitched_tile_size_px((1920, 1080), 2400) == (800, 450)
        assert stitched_tile_size_px((160, 90), 2400) is None  # 480 px wide already fits
        assert stitched_tile_size_px((1600, 900), None) is None
        rng = np.random.default_rng(0)
        images = {
            ch: rng.integers(0, 256, (90, 160, 3), dtype=np.uint8)
            for row in SIX_CAMERA_LAYOUT
            for ch in row
        }
        paths = write_marked_images(tmp_path, "kf", images, stitched_max_width_px=240)
        stitched = cv2.imread(str(paths[-1]))
        assert stitched.shape == (2 * 45, 3 * 80, 3)
        # Each tile is its camera shrunk by pixel-area averaging: 2x2 means, rounded.
        back = images["CAM_BACK"].astype(np.float64)
        means = (back[0::2, 0::2] + back[1::2, 0::2] + back[0::2, 1::2] + back[1::2, 1::2]) / 4
        tile = stitched[45:, 80:160].astype(np.float64)
        assert np.abs(tile - means).max() <= 0.5 + 1e-9
        np.testing.assert_array_equal(cv2.imread(str(paths[1])), images["CAM_FRONT"])


REALDATA = realdata_dir(NUSCENES_MMDET3D)


@requires_realdata(NUSCENES_MMDET3D)
def test_box_marks_on_the_real_cam_back_left_image():
    """The one real image with its official 2D boxes (no masks there): box marks whose label
    colours read back to the region ids the record gives, nearest object first."""
    coco = json.loads((REALDATA / "nus_infos_mono3d.coco.json").read_text())
    (jpeg,) = (REALDATA / "samples" / "CAM_BACK_LEFT").glob("*.jpg")
    image_rec = next(im for im in coco["images"] if im["file_name"].endswith(jpeg.name))
    anns = [a for a in coco["annotations"] if a["image_id"] == image_rec["id"]]
    boxes = np.array(
        [
            [a["bbox"][0], a["bbox"][1], a["bbox"][0] + a["bbox"][2], a["bbox"][1] + a["bbox"][3]]
            for a in anns
        ]
    )
    depth = np.array([a["center2d"][2] for a in anns])
    record = assign_region_ids(np.zeros(len(anns)), [a["id"] for a in anns], depth)
    region = record.row_region_id
    assert region[np.argmin(depth)] == 0
    image = cv2.imread(str(jpeg))
    style = MarkStyle(label_height_fraction=0.0)  # MetaVQA's fixed label size
    out = render_marks(image, region, boxes_2d=boxes, style=style)
    layout = layout_labels(region, box_masks(boxes, *image.shape[:2]), (1600, 900), style)
    for i in range(len(anns)):
        u0, v0, _, _ = layout.rect[i]
        assert region_id_from_colour(out[v0 + 1, u0 + 1], region) == region[i]
    # The three traffic cones (about 30 x 60 px) carry their label above the box, not on it.
    cones = np.array([a["category_name"] == "traffic_cone" for a in anns])
    assert cones.sum() == 3
    assert layout.outside[cones].all() and not layout.outside[~cones].any()
    assert (layout.rect[cones, 3] < boxes[cones, 1]).all()


class TestDrawnLabel:
    """The number written on each label is the region's id, on the region's own object."""

    def scene(self):
        masks, _, _ = five_objects()
        small = box_masks(np.array([[440.0, 240.0, 470.0, 270.0]]), H, W)  # 900 px: label outside
        masks = np.concatenate([masks, small])
        region = np.array([3, 0, 12, 7, 25, 4])  # one- and two-digit labels
        return masks, region

    def test_each_label_reads_back_its_id_over_its_object(self):
        masks, region = self.scene()
        rng = np.random.default_rng(1)
        image = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
        boxes = mask_boxes_2d(masks)
        for style in (MarkStyle(), MarkStyle(font_scale=0.4, font_thickness=1)):
            out = render_marks(image, region, boxes_2d=boxes, masks=masks, style=style)
            for i, rid in enumerate(region):
                found = find_label(out, rid, style)
                assert len(found) == 1, (rid, found)
                cu, cv = found[0]
                if i < 5:
                    assert masks[i][cv, cu], rid  # on the object's own pixels
                else:
                    u0, v0, u1, _ = boxes[i]
                    assert cv < v0 and u0 <= cu <= u1  # above its small box
                # No other number on this colour around it: the label says this id only.
                near = out[max(0, cv - 40) : cv + 40, max(0, cu - 60) : cu + 60]
                others = [c for c in range(40) if str(c) not in str(rid)]
                assert not any(
                    len(find_template(near, label_template(str(c), rid, style))) for c in others
                )

    def test_every_number_has_its_own_template(self):
        style = MarkStyle(font_scale=0.3, font_thickness=1)
        templates = [label_template(str(c), 5, style) for c in range(40)]
        for a in range(40):
            for b in range(40):
                if a != b and str(a) not in str(b):
                    assert not len(find_template(templates[b], templates[a])), (a, b)


def test_pipeline_marks_carry_the_ids_of_regions_json_over_their_objects(synth_run):
    """Each region's label in the run's Set-of-Mark images says the id ``marks/regions.json`` gives
    the object, on or next to the object's box in ``masks/``, in every camera showing it. Where
    two labels collide on a crowded small image the later one may cover a pixel of the earlier
    (a layout limit, counted): at least 90 % must read back whole."""
    read, expected = 0, 0
    for clip in synth_run.scenes:
        clip_dir = synth_run.run / clip
        style = MarkStyle(**json.loads((clip_dir / "manifest.json").read_text())["config"]["marks"])
        for kf in json.loads((clip_dir / "marks/regions.json").read_text())["keyframes"]:
            k = kf["frame_index"]
            masks = json.loads((clip_dir / f"masks/{k:03d}.json").read_text())["objects"]
            box_of = {(o["camera"], o["track_id"]): o["box_px"] for o in masks}
            for reg in kf["regions"]:
                for camera in reg["cameras_at_keyframe"]:
                    image = cv2.imread(str(clip_dir / f"marks/{k:03d}_{camera}.png"))
                    u0, v0, u1, v1 = box_of[(camera, reg["track_id"])]
                    found = find_label(image, reg["region_id"], style)
                    expected += 1
                    assert len(found) <= 1, (clip, k, camera, reg, found)
                    if not len(found):
                        continue
                    cu, cv = found[0]
                    # On the box, or just above or below it (a small box's label goes outside).
                    reach = 4 * style.font_thickness + 12 * style.font_scale * 4
                    assert u0 - reach <= cu <= u1 + reach, (clip, k, camera, reg)
                    assert v0 - reach <= cv <= v1 + reach, (clip, k, camera, reg)
                    read += 1
    assert read >= 5 and read >= 0.9 * expected, (read, expected)


def test_label_size_follows_the_image_height():
    from autolabel.set_of_mark import _FONT, style_for_image

    style = MarkStyle()
    for height in (1080, 900):
        sized = style_for_image(style, height)
        digit_px = cv2.getTextSize("0", _FONT, sized.font_scale, sized.font_thickness)[0][1]
        assert digit_px >= 0.04 * height - 1, (height, digit_px)
        assert sized.line_thickness_px > style.line_thickness_px
    assert style_for_image(style, 270) == style  # small images keep the fixed sizes
    assert style_for_image(MarkStyle(label_height_fraction=0.0), 1080) == MarkStyle(
        label_height_fraction=0.0
    )
    # The label drawn on a 1920 x 1080 image is as tall as the layout says, about 4 % of it.
    image = np.zeros((1080, 1920, 3), np.uint8)
    boxes = np.array([[400.0, 300.0, 1000.0, 800.0]])
    out = render_marks(image, [0], boxes_2d=boxes, style=style)
    rect = layout_labels([0], box_masks(boxes, 1080, 1920), (1920, 1080), style).rect[0]
    assert rect[3] - rect[1] >= 0.05 * 1080
    assert (out[rect[1] + 1, rect[0] + 1] == region_colours_bgr(np.array([0]))[0]).all()
