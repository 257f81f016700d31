"""Dynamic-object QA end to end: every new type generated on a constructed clip, re-derived by
check-qa (colours re-measured from the images), and the answers that can be known by hand.

The clip: the ego drives along +x at 4 m/s; around it a car changes lanes, one turns left, one
brakes to a stop, a pedestrian crosses ahead, a truck stands where the front and front-left
cameras overlap, four parked cars far ahead are first seen 0, 2, 4 and 6 s into the clip, and a car
comes the other way. Images are painted: every object's mask in its own colour (PNG, lossless).
"""

from __future__ import annotations

import json
import math
from collections import Counter

import cv2
import numpy as np
import pytest

from autolabel.classes import DETECTION_CLASSES
from autolabel.colour import NAMED_COLOURS_RGB, lab_from_rgb
from autolabel.qa import ClipQAMeta, QAConfig, generate_clip_qa, load_templates
from autolabel.qa.appearance import decode_masks, measure_region_colours
from autolabel.qa.check import check_clip_qa
from autolabel.qa.projected_grounding import regions_from_projection
from autolabel.qa.sampling import select_keyframes
from calib.rig import load_rig
from tests.dynamic_tracks import TIME_S, arc, braking, lane_change, scene_attributes, straight

EGO_SPEED = 4.0
OBJECTS = [  # class, path, colour word, tracked from (s)
    ("car", lane_change(-10.0, 3.5, 9.0, -3.5, 7.0, 10.0), "red", 0.0),
    ("car", arc(40.0, 25.0, 15.0, 5.0, -math.pi / 2, left=True), "blue", 0.0),
    ("car", braking(15.0, -3.5, 8.0, 2.0, 4.0), "yellow", 0.0),
    ("pedestrian", straight(45.0, 9.0, 0.0, -1.5), "green", 0.0),
    ("truck", straight(70.0, 22.0, 0.0), "white", 0.0),
    ("car", straight(90.0, -6.0, 0.0), "orange", 0.0),
    ("car", straight(90.0, -16.0, 0.0), "purple", 2.0),
    ("car", straight(90.0, -26.0, 0.0), "black", 4.0),
    ("car", straight(90.0, 7.0, 0.0), "brown", 6.0),
    ("car", straight(90.0, 3.5, -8.0), "beige", 0.0),
]
TRUCK = 4
BACKGROUND_RGB = (90, 90, 90)
NEW_TYPES = {
    "app_colour", "act_moving", "act_speed_change", "act_turn", "act_lane_change",
    "act_approach", "act_comes_within", "cnt_visible", "cnt_crossed", "tmp_first_seen",
    "tmp_passes_first", "tmp_appearance_order", "tmp_appearance_order_3", "cap_object",
    "cap_scene", "cap_keyframe",
}  # fmt: skip
TEMPLATES = load_templates()


def _paint(root, attrs, regions, meta):
    """Each keyframe image: background, then every visible view's mask in its track's colour,
    far to near (nearer objects cover farther ones)."""
    colour = {i: NAMED_COLOURS_RGB[o[2]] for i, o in enumerate(OBJECTS)}
    for kr in regions:
        kf = kr.keyframe_index
        at_key = np.flatnonzero((kr.view_frame_index == kf) & kr.view_visible)
        for cam in meta.channels:
            sel = at_key[kr.view_camera[at_key] == cam]
            h, w = kr.view_mask_rle[sel[0]]["size"] if len(sel) else (90, 160)
            img = np.empty((h, w, 3), np.uint8)
            img[:] = BACKGROUND_RGB
            if len(sel):
                tracks = kr.track_id[kr.view_region[sel]]
                dist = np.asarray(attrs.distance_m)[attrs.row_of(np.full(len(sel), kf), tracks)]
                masks = decode_masks([kr.view_mask_rle[i] for i in sel]).astype(bool)
                for j in np.argsort(-dist):
                    img[masks[:, :, j]] = colour[int(tracks[j])]
            path = root / meta.image_paths[cam][kf]
            path.parent.mkdir(parents=True, exist_ok=True)
            assert cv2.imwrite(str(path), img[:, :, ::-1])


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    root = tmp_path_factory.mktemp("dyn")
    attrs = scene_attributes(
        [(c, p) for c, p, _, _ in OBJECTS],
        ego=straight(0.0, 0.0, EGO_SPEED),
        alive=[(t0, 20.0) for *_, t0 in OBJECTS],
    )
    rig = load_rig("nuscenes").scaled(320, 180)
    windows = select_keyframes(TIME_S, QAConfig())
    frames = [
        [int(f) for f in list(c) + list(u) if f >= 0]
        for c, u in zip(windows.context, windows.future, strict=True)
    ]
    regions = regions_from_projection(attrs, rig.cameras, windows.keyframe, frames)
    n = len(TIME_S)
    poses = np.tile(np.eye(4), (n, 1, 1))
    poses[:, 0, 3] = EGO_SPEED * TIME_S
    meta = ClipQAMeta(
        clip="scene-dyn",
        frame_time_s=TIME_S,
        frame_token=[f"tok{f}" for f in range(n)],
        image_paths={
            c.channel: [f"samples/{c.channel}/{f:03d}.png" for f in range(n)] for c in rig.cameras
        },
        ego_pose=poses,
    )
    _paint(root, attrs, regions, meta)

    def read(camera: str, frame: int):
        bgr = cv2.imread(str(root / meta.image_paths[camera][frame]))
        return None if bgr is None else bgr[:, :, ::-1]

    colours = measure_region_colours(regions, read)
    cfg = QAConfig(
        min_confidence=0.0,  # the answers themselves; the gate is tested on its own
        per_keyframe_cap=3,
        per_clip_type_cap=48,
        per_clip_type_class_cap=16,
    )
    records = generate_clip_qa(attrs, regions, meta, cfg, TEMPLATES, colours)
    return {"root": root, "attrs": attrs, "regions": regions, "meta": meta, "records": records}


def test_every_new_type_is_generated_and_rederived(clip):
    types = Counter(r["type"] for r in clip["records"])
    assert NEW_TYPES <= set(types), NEW_TYPES - set(types)
    mismatches = check_clip_qa(
        clip["records"], clip["attrs"], "scene-dyn", TEMPLATES, images_root=clip["root"]
    )
    assert mismatches == []


def _track_of(rec, role=0):
    return rec["regions"][role]["track_id"]


def _unoccluded(clip, rec, role=0) -> bool:
    """Most pixels of the region's largest keyframe mask show its own colour (no nearer object
    covers it), so the measured colour must be its own."""
    reg = rec["regions"][role]
    kf = rec["keyframe"]["frame_index"]
    views = [v for v in reg["views"] if v["frame_index"] == kf and v["visible"]]
    best = max(views, key=lambda v: decode_masks([v["mask_rle"]]).sum())
    img = cv2.imread(str(clip["root"] / rec["images"][best["camera"]][-1]))[:, :, ::-1]
    mask = decode_masks([best["mask_rle"]])[:, :, 0].astype(bool)
    own = np.all(img[mask] == NAMED_COLOURS_RGB[OBJECTS[reg["track_id"]][2]], axis=1)
    return own.mean() > 0.6


def test_answers_known_by_hand(clip):
    recs = clip["records"]
    checked = Counter()
    for r in recs:
        t = r["keyframe"]["time_s"]
        v = r["answer_values"]
        if r["type"] == "app_colour" and _unoccluded(clip, r):
            assert v["outcome"] == OBJECTS[_track_of(r)][2]
            checked["colour"] += 1
        if r["type"] == "act_moving" and _track_of(r) == 2:
            assert v["outcome"] == ("stopped" if t >= 8.0 else "moving")
            checked["braking car"] += 1
        if r["type"] == "act_moving" and _track_of(r) == TRUCK:
            assert v["outcome"] == "stopped"
            checked["truck"] += 1
        if r["type"] == "tmp_first_seen":
            first = [OBJECTS[_track_of(r, k)][3] for k in (0, 1)]
            assert v["region_id"] == r["regions"][int(np.argmin(first))]["region_id"]
            checked["first seen"] += 1
        if r["type"].startswith("tmp_appearance_order"):
            seen = {x["region_id"]: OBJECTS[x["track_id"]][3] for x in r["regions"]}
            assert v["region_ids"] == sorted(seen, key=seen.get)
            checked["order"] += 1
        if r["type"] == "cap_object" and _unoccluded(clip, r):
            assert v["colour"] == OBJECTS[_track_of(r)][2]
            checked["caption colour"] += 1
    # Every branch checks records (none may silently check nothing).
    branches = ("colour", "braking car", "truck", "first seen", "order", "caption colour")
    assert all(checked[b] >= 1 for b in branches), checked


def test_lane_change_known_by_hand(clip):
    """Car 0 moves one lane (3.5 m) to the right between 7 and 10 s. A keyframe t's window is
    [t - 1.5, t + 3] s: it holds the whole change for 7 <= t <= 8.5 (right, -3.5 m) and none of
    it for t <= 4 or t >= 11.5 (no lane change, no shift)."""
    cfg = QAConfig(
        min_confidence=0.0,  # the answers themselves; the gate is tested on its own
        per_keyframe_cap=10, per_clip_type_cap=1000, per_clip_type_class_cap=100,
        types=("act_lane_change",),
    )  # fmt: skip
    recs = generate_clip_qa(clip["attrs"], clip["regions"], clip["meta"], cfg, TEMPLATES)
    checked = Counter()
    for r in recs:
        if _track_of(r) != 0:
            continue
        t, v = r["keyframe"]["time_s"], r["answer_values"]
        if 7.0 <= t <= 8.5:
            assert v["outcome"] == "right" and v["lateral_shift_m"] == pytest.approx(-3.5)
            checked["right"] += 1
        elif t <= 4.0 or t >= 11.5:
            assert v["outcome"] == "none" and v["lateral_shift_m"] == pytest.approx(0.0, abs=0.05)
            checked["none"] += 1
    assert checked["right"] >= 1 and checked["none"] >= 2, checked


def test_two_camera_object_counted_once(clip):
    # The truck stands where the front and front-left cameras overlap (early in the clip).
    cfg = QAConfig(
        min_confidence=0.0,  # the answers themselves; the gate is tested on its own
        per_keyframe_cap=10, per_clip_type_cap=1000, per_clip_type_class_cap=100,
        types=("cnt_visible",),
    )  # fmt: skip
    recs = generate_clip_qa(clip["attrs"], clip["regions"], clip["meta"], cfg, TEMPLATES)
    assert check_clip_qa(recs, clip["attrs"], "scene-dyn", TEMPLATES) == []
    both = [
        r
        for r in recs
        if r["params"]["class_group"] == "vehicles"
        and any(x["track_id"] == TRUCK and len(x["cameras_visible"]) == 2 for x in r["regions"])
    ]
    assert both, "no vehicle count at a keyframe where two cameras show the truck"
    for r in both:
        kf = r["keyframe"]["frame_index"]
        kr = next(k for k in clip["regions"] if k.keyframe_index == kf)
        at_key = (kr.view_frame_index == kf) & kr.view_visible
        tracks = kr.track_id[kr.view_region[at_key]]
        labels = np.asarray(DETECTION_CLASSES)[
            np.asarray(clip["attrs"].label)[clip["attrs"].row_of(np.full(len(tracks), kf), tracks)]
        ]
        vehicle = np.isin(labels, ["car", "truck", "bus", "trailer", "construction_vehicle"])
        views, objects = int(vehicle.sum()), len(np.unique(tracks[vehicle]))
        assert views == objects + 1  # the truck's two views
        assert r["answer_values"]["count"] == objects
        assert [x["track_id"] for x in r["regions"]].count(TRUCK) == 1


def _tampered(clip, type_id, edit):
    recs = json.loads(json.dumps(clip["records"]))
    target = next(r for r in recs if r["type"] == type_id and edit(r) is not False)
    return check_clip_qa(
        recs, clip["attrs"], "scene-dyn", TEMPLATES, images_root=clip["root"]
    ), target


def test_check_catches_a_wrong_count(clip):
    def more(r):
        r["answer_values"]["count"] += 1

    mm, rec = _tampered(clip, "cnt_visible", more)
    assert any(m.record_id == rec["id"] and m.field == "answer_values.count" for m in mm)


def test_check_catches_an_uncounted_object(clip):
    def drop(r):
        if len(r["regions"]) < 2:
            return False
        r["regions"].pop()
        r["answer_values"]["count"] -= 1
        r["answer"] = r["answer"].replace(
            str(r["answer_values"]["count"] + 1), str(r["answer_values"]["count"])
        )

    mm, rec = _tampered(clip, "cnt_visible", drop)
    assert any(m.record_id == rec["id"] and "not listed" in m.message for m in mm)


def test_check_remeasures_colours(clip):
    def recolour(r):
        other = "purple" if r["answer_values"]["outcome"] != "purple" else "yellow"
        lab = lab_from_rgb(np.array(NAMED_COLOURS_RGB[other], dtype=float))
        r["regions"][0]["colour_lab"] = [round(float(x), 2) for x in lab]

    mm, rec = _tampered(clip, "app_colour", recolour)
    fields = {m.field for m in mm if m.record_id == rec["id"]}
    assert "regions[0].colour_lab" in fields  # the image disagrees
    assert "answer_values.outcome" in fields  # and the stored word is not the new colour's


def test_check_catches_a_wrong_action(clip):
    def flip(r):
        if r["answer_values"]["outcome"] != "stopped":
            return False
        r["answer_values"]["outcome"] = "moving"

    mm, rec = _tampered(clip, "act_moving", flip)
    assert any(m.record_id == rec["id"] and m.field == "answer_values.outcome" for m in mm)


def test_scene_captions_list_every_region_of_their_camera_or_keyframe(clip):
    for r in (r for r in clip["records"] if r["type"] == "cap_scene"):
        cam = r["params"]["asked_cameras"][0]
        kf = r["keyframe"]["frame_index"]
        kr = next(k for k in clip["regions"] if k.keyframe_index == kf)
        at_key = (kr.view_frame_index == kf) & kr.view_visible & (kr.view_camera == cam)
        expected = sorted(kr.region_id[np.unique(kr.view_region[at_key])])
        assert [x["region_id"] for x in r["regions"]] == expected
        assert [x["region_id"] for x in r["answer_values"]["items"]] == expected
        for x in r["regions"]:
            assert f"Region [{x['region_id']}]" in r["answer"]
    for r in (r for r in clip["records"] if r["type"] == "cap_keyframe"):
        kf = r["keyframe"]["frame_index"]
        kr = next(k for k in clip["regions"] if k.keyframe_index == kf)
        at_key = (kr.view_frame_index == kf) & kr.view_visible
        expected = sorted(kr.region_id[np.unique(kr.view_region[at_key])])
        assert [x["region_id"] for x in r["regions"]] == expected
        assert r["cameras"] == list(clip["meta"].channels)


def _keyframe_patches(clip, edit=None, shrink=0):
    """``ImagePatch`` of every keyframe image around its visible keyframe masks, by absolute
    path (as the marks stage keeps them); ``edit(rgb)`` changes the kept pixels, ``shrink``
    cuts that many columns off the patch's right side."""
    from autolabel.qa.appearance import ImagePatch

    patches = {}
    for kr in clip["regions"]:
        kf = kr.keyframe_index
        at_key = np.flatnonzero((kr.view_frame_index == kf) & kr.view_visible)
        for cam in dict.fromkeys(kr.view_camera[at_key]):
            path = clip["root"] / clip["meta"].image_paths[cam][kf]
            rgb = cv2.imread(str(path))[:, :, ::-1]
            rles = [kr.view_mask_rle[i] for i in at_key[kr.view_camera[at_key] == cam]]
            p = ImagePatch.around(rgb, rles)
            kept = edit(p.rgb.copy()) if edit else p.rgb
            patches[path] = ImagePatch(
                p.height_px, p.width_px, p.u0, p.v0, kept[:, : kept.shape[1] - shrink]
            )
    return patches


def _file_reads(monkeypatch):
    import autolabel.qa.check as check

    reads = []
    original = check._read_rgb
    monkeypatch.setattr(check, "_read_rgb", lambda path: reads.append(path) or original(path))
    return reads


def test_kept_pixels_rederive_the_colours_without_reading_a_file(clip, monkeypatch):
    reads = _file_reads(monkeypatch)
    patches = _keyframe_patches(clip)
    mismatches = check_clip_qa(
        clip["records"], clip["attrs"], "scene-dyn", TEMPLATES, images_root=clip["root"],
        image_patches=patches,
    )  # fmt: skip
    assert mismatches == [] and reads == []


def test_kept_pixels_are_what_is_measured(clip, monkeypatch):
    # Every kept pixel inverted: each colour a record names must now disagree with them.
    reads = _file_reads(monkeypatch)
    patches = _keyframe_patches(clip, edit=lambda rgb: 255 - rgb)
    mismatches = check_clip_qa(
        clip["records"], clip["attrs"], "scene-dyn", TEMPLATES, images_root=clip["root"],
        image_patches=patches,
    )  # fmt: skip
    coloured = {
        r["id"]
        for r in clip["records"]
        if any(reg.get("colour_lab") is not None for reg in r["regions"])
    }
    flagged = {m.record_id for m in mismatches if m.field.endswith("colour_lab")}
    assert coloured and flagged == coloured and reads == []


def test_a_patch_short_of_a_mask_is_read_from_the_file(clip, monkeypatch):
    # The patches lack their last column and hold wrong pixels: no mask fits in them, so every
    # image is read from its file, and the colours check out.
    reads = _file_reads(monkeypatch)
    patches = _keyframe_patches(clip, edit=lambda rgb: 255 - rgb, shrink=1)
    mismatches = check_clip_qa(
        clip["records"], clip["attrs"], "scene-dyn", TEMPLATES, images_root=clip["root"],
        image_patches=patches,
    )  # fmt: skip
    assert mismatches == [] and len(reads) > 0
