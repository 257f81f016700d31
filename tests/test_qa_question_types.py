"""Every QA question type on a constructed scene, against answers computed by hand.

The scene (ego-relative positions at the keyframe t = 2 s; the ego drives along +x at 5 m/s;
ego box 4.084 x 1.730 m centred 1.3 m ahead of its origin, volume 11.036 m3):

    region  class       centre (x, y) m   size w, l, h m     velocity m/s   cameras
    0       car         (10, 0)           1.9, 4.6, 1.6      (0, 2)         FRONT
    1       truck       (10, 8)           2.5, 8.0, 3.2      static         FRONT, FRONT_LEFT
    2       pedestrian  (4, -5)           0.6, 0.6, 1.8      static         FRONT, FRONT_RIGHT
    3       bus         (-20, 0.5)        2.9, 11.0, 3.4     static         BACK
    4       car         (25, -3)          1.9, 4.6, 1.6      static         FRONT

Moving objects face their velocity (region 0 faces +y: its footprint spans x 9.05..10.95,
y -2.3..2.3). Track ids differ from region ids on purpose (objects are created in the order
3, 4, 0, 2, 1, so region r is track ``TRACK_OF[r]``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from pycocotools import mask as mask_utils

from autolabel.attributes import compute_attributes
from autolabel.classes import class_index
from autolabel.qa import ClipQAMeta, KeyframeRegions, QAConfig, generate_clip_qa, load_templates
from autolabel.qa.check import check_clip_qa
from autolabel.qa.scenes import global_boxes_per_frame
from autolabel.sensors import CAMERA_CHANNELS
from calib.se3 import SE3

EGO_SPEED = 5.0
KEYFRAME_T = 2.0
SCENE = {  # region: (class, rel xy at keyframe, wlh, velocity, cameras)
    0: ("car", (10.0, 0.0), (1.9, 4.6, 1.6), (0.0, 2.0), ("CAM_FRONT",)),
    1: ("truck", (10.0, 8.0), (2.5, 8.0, 3.2), (0.0, 0.0), ("CAM_FRONT", "CAM_FRONT_LEFT")),
    2: ("pedestrian", (4.0, -5.0), (0.6, 0.6, 1.8), (0.0, 0.0), ("CAM_FRONT", "CAM_FRONT_RIGHT")),
    3: ("bus", (-20.0, 0.5), (2.9, 11.0, 3.4), (0.0, 0.0), ("CAM_BACK",)),
    4: ("car", (25.0, -3.0), (1.9, 4.6, 1.6), (0.0, 0.0), ("CAM_FRONT",)),
}
CREATION_ORDER = [3, 4, 0, 2, 1]
TRACK_OF = {r: CREATION_ORDER.index(r) for r in SCENE}
IMAGE_H, IMAGE_W = 90, 160


def _scene():
    time_s = np.arange(0.0, 20.0, 0.5)
    ego_at_key = np.array([EGO_SPEED * KEYFRAME_T, 0.0])
    start, vel, labels, sizes = [], [], [], []
    for r in CREATION_ORDER:
        cls, rel, wlh, v, _ = SCENE[r]
        v = np.array(v)
        start.append(np.array(rel) + ego_at_key - v * KEYFRAME_T)
        vel.append(v)
        labels.append(class_index(cls))
        sizes.append(wlh)
    tracks = global_boxes_per_frame(
        time_s, np.array(start), np.array(vel), np.array(labels), np.array(sizes)
    )
    poses = [SE3(np.eye(3), np.array([EGO_SPEED * t, 0.0, 0.0])) for t in time_s]
    attrs = compute_attributes(time_s, poses, tracks)
    key = int(np.flatnonzero(np.isclose(time_s, KEYFRAME_T))[0])
    window = [key + k for k in range(-3, 7)]  # t - 1.5 .. t + 3 s
    v_reg, v_cam, v_frame, v_box, v_rle = [], [], [], [], []
    for row, r in enumerate(sorted(SCENE)):
        for cam in SCENE[r][4]:
            for f in window:
                box = [10.0 + 20 * r, 20.0, 26.0 + 20 * r, 60.0]
                mask = np.zeros((IMAGE_H, IMAGE_W), np.uint8, order="F")
                mask[22:58, int(box[0]) + 1 : int(box[2]) - 1] = 1
                rle = mask_utils.encode(mask)
                v_reg.append(row)
                v_cam.append(cam)
                v_frame.append(f)
                v_box.append(box)
                v_rle.append({"size": [IMAGE_H, IMAGE_W], "counts": rle["counts"].decode()})
    regions = KeyframeRegions(
        keyframe_index=key,
        region_id=np.array(sorted(SCENE)),
        track_id=np.array([TRACK_OF[r] for r in sorted(SCENE)]),
        label=np.array([class_index(SCENE[r][0]) for r in sorted(SCENE)]),
        view_region=np.array(v_reg),
        view_camera=np.array(v_cam, dtype=object),
        view_frame_index=np.array(v_frame),
        view_box_px=np.array(v_box),
        view_mask_rle=v_rle,
    )
    meta = ClipQAMeta(
        clip="scene-hand",
        frame_time_s=time_s,
        frame_token=[f"tok{f}" for f in range(len(time_s))],
        image_paths={c: [f"img/{c}/{f}.jpg" for f in range(len(time_s))] for c in CAMERA_CHANNELS},
    )
    return attrs, [regions], meta


@pytest.fixture(scope="module")
def scene():
    return _scene()


TEMPLATES = load_templates()


def _all_of(scene, type_id: str) -> list[dict]:
    attrs, regions, meta = scene
    cfg = QAConfig(
        min_confidence=0.0,  # the answers themselves; the gate is tested on its own
        keyframe_start_s=KEYFRAME_T,
        keyframe_end_s=KEYFRAME_T,
        per_keyframe_cap=1000,
        per_clip_type_cap=10000,
        per_clip_type_class_cap=10000,
        types=(type_id,),
    )
    records = generate_clip_qa(attrs, regions, meta, cfg, TEMPLATES)
    assert records, f"no {type_id} record"
    # Every generated record must pass the checker, whatever the type.
    assert check_clip_qa(records, attrs, meta.clip, TEMPLATES) == []
    return records


def _by_regions(records: list[dict]) -> dict[tuple[int, ...], list[dict]]:
    out: dict[tuple[int, ...], list[dict]] = {}
    for r in records:
        out.setdefault(tuple(x["region_id"] for x in r["regions"]), []).append(r)
    return out


def _one(records, *regions) -> dict:
    got = _by_regions(records).get(tuple(regions), [])
    assert len(got) == 1, f"expected one record for regions {regions}, got {len(got)}"
    return got[0]


def _number_after(text: str, unit: str) -> float:
    import re

    m = re.search(r"(-?\d+(?:\.\d+)?) " + re.escape(unit), text)
    assert m, f"no number before {unit!r} in {text!r}"
    return float(m.group(1))


# ------------------------------------------------------------------------------ object-centric


def test_obj_distance(scene):
    recs = _all_of(scene, "obj_distance")
    assert len(recs) == 12  # ordered pairs among regions 0, 1, 2, 4 (all in CAM_FRONT)
    r = _one(recs, 0, 2)
    assert r["answer_values"]["distance_m"] == pytest.approx(math.hypot(6, 5), abs=1e-3)
    assert _number_after(r["answer"], "meters") == pytest.approx(7.81)
    assert _one(recs, 0, 1)["answer_values"]["distance_m"] == pytest.approx(8.0, abs=1e-3)
    assert r["cameras"] == ["CAM_FRONT"]
    assert r["category"] == "object_centric" and r["kind"] == "quantitative"


def test_obj_clock(scene):
    recs = _all_of(scene, "obj_clock")
    # B = 1 seen from A = 0: offset (0, 8) -> bearing 90 deg -> 9 o'clock.
    r = _one(recs, 0, 1)
    assert r["answer_values"]["clock"] == 9
    assert r["answer_values"]["bearing_deg"] == pytest.approx(90.0, abs=1e-3)
    assert "9 o'clock" in r["answer"]
    # B = 2 from A = 0: offset (-6, -5) -> bearing -140.19 deg -> 5 o'clock.
    r = _one(recs, 0, 2)
    assert r["answer_values"]["clock"] == 5
    assert r["answer_values"]["bearing_deg"] == pytest.approx(-140.194, abs=1e-3)


def test_obj_left_right(scene):
    recs = _all_of(scene, "obj_left_right")
    by = _by_regions(recs)
    # Truck 1 (y 6.75..9.25) is wholly left of car 0 (y -2.3..2.3); pedestrian 2 wholly right.
    assert by[(0, 1)][0]["answer_values"]["outcome"] == "left"
    assert by[(0, 2)][0]["answer_values"]["outcome"] == "right"
    assert by[(1, 0)][0]["answer_values"]["outcome"] == "right"
    # Car 4 (y -5.3..-0.7 for a car facing +x: w 1.9 -> y -3.95..-2.05) is right of car 0? Its
    # y span -3.95..-2.05 overlaps car 0's -2.3..2.3, so neither: no question.
    assert (0, 4) not in by
    for r in recs:
        v = r["answer_values"]
        if "yes_no" in v:
            asked = "left" if "left of" in r["question"] else "right"
            assert v["yes_no"] == ("yes" if asked == v["outcome"] else "no")
            assert r["answer"].startswith("Yes" if v["yes_no"] == "yes" else "No")
        else:
            assert v["outcome"] in r["answer"]


def test_obj_front_behind(scene):
    recs = _all_of(scene, "obj_front_behind")
    by = _by_regions(recs)
    # Pedestrian 2 (x 3.7..4.3) is behind car 0 (x 9.05..10.95); car 4 (x 22.7..27.3) in front.
    assert by[(0, 2)][0]["answer_values"]["outcome"] == "behind"
    assert by[(0, 4)][0]["answer_values"]["outcome"] == "front"
    assert by[(2, 0)][0]["answer_values"]["outcome"] == "front"
    assert (0, 1) not in by  # the truck's x span 6..14 overlaps car 0's


@pytest.mark.parametrize(
    ("type_id", "values", "a_val", "b_val"),
    [
        ("obj_bigger", ("volume_a_m3", "volume_b_m3"), 1.9 * 4.6 * 1.6, 2.5 * 8.0 * 3.2),
        ("obj_taller", ("height_a_m", "height_b_m"), 1.6, 3.2),
        ("obj_wider", ("width_a_m", "width_b_m"), 1.9, 2.5),
        ("obj_longer", ("length_a_m", "length_b_m"), 4.6, 8.0),
    ],
)
def test_obj_size_comparisons(scene, type_id, values, a_val, b_val):
    recs = _all_of(scene, type_id)
    r = _one(recs, 0, 1)  # car 0 vs truck 1: the truck wins every comparison
    assert r["answer_values"][values[0]] == pytest.approx(a_val, abs=1e-3)
    assert r["answer_values"][values[1]] == pytest.approx(b_val, abs=1e-3)
    assert r["answer_values"]["region_id"] == 1
    if "yes_no" in r["answer_values"]:
        asks_a = r["question"].startswith("Is Region [0]")
        assert r["answer_values"]["yes_no"] == ("no" if asks_a else "yes")
    else:
        assert r["answer"].startswith("Region [1]")
    # Two cars of equal size: no unambiguous answer, no question.
    assert (0, 4) not in _by_regions(recs)


def test_obj_closer_to_ego(scene):
    recs = _all_of(scene, "obj_closer_to_ego")
    r = _one(recs, 0, 1)
    assert r["answer_values"]["region_id"] == 0
    assert r["answer_values"]["distance_a_m"] == pytest.approx(10.0, abs=1e-3)
    assert r["answer_values"]["distance_b_m"] == pytest.approx(math.hypot(10, 8), abs=1e-3)
    assert _one(recs, 1, 2)["answer_values"]["region_id"] == 2


# ------------------------------------------------------------------------------ ego-centric


def test_ego_distance_bearing_clock(scene):
    dist = _by_regions(_all_of(scene, "ego_distance"))
    bear = _by_regions(_all_of(scene, "ego_bearing"))
    clock = _by_regions(_all_of(scene, "ego_clock"))
    expected = {  # region: (distance, bearing deg, clock)
        0: (10.0, 0.0, 12),
        1: (math.hypot(10, 8), math.degrees(math.atan2(8, 10)), 11),
        2: (math.hypot(4, 5), math.degrees(math.atan2(-5, 4)), 2),
        3: (math.hypot(20, 0.5), math.degrees(math.atan2(0.5, -20)), 6),
        4: (math.hypot(25, 3), math.degrees(math.atan2(-3, 25)), 12),
    }
    for r, (d, b, c) in expected.items():
        assert dist[(r,)][0]["answer_values"]["distance_m"] == pytest.approx(d, abs=1e-3)
        assert _number_after(dist[(r,)][0]["answer"], "meters") == pytest.approx(round(d, 2))
        assert bear[(r,)][0]["answer_values"]["bearing_deg"] == pytest.approx(b, abs=1e-3)
        assert f"{round(b):d} degree" in bear[(r,)][0]["answer"]
        assert clock[(r,)][0]["answer_values"]["clock"] == c
        assert f"{c} o'clock" in clock[(r,)][0]["answer"]
    # The bus is seen by the back camera only: its questions are posed over that camera.
    assert dist[(3,)][0]["cameras"] == ["CAM_BACK"]
    assert list(dist[(3,)][0]["images"]) == ["CAM_BACK"]
    assert len(dist[(3,)][0]["images"]["CAM_BACK"]) == 4


def test_ego_side(scene):
    by = _by_regions(_all_of(scene, "ego_side"))
    # Truck 1 is wholly left of the ego box (y 6.75 > 0.865): the ego is to its right.
    assert by[(1,)][0]["answer_values"]["outcome"] == "right"
    assert by[(2,)][0]["answer_values"]["outcome"] == "left"
    assert (0,) not in by  # car 0 straddles the ego's centre line


def test_ego_bigger(scene):
    by = _by_regions(_all_of(scene, "ego_bigger"))
    ego_volume = 4.084 * 1.730 * 1.562
    assert by[(2,)][0]["answer_values"]["outcome"] == "bigger"
    assert by[(1,)][0]["answer_values"]["outcome"] == "smaller"
    ratio = 1.9 * 4.6 * 1.6 / ego_volume  # 1.267 >= 1.2: the car is bigger than the ego
    assert by[(0,)][0]["answer_values"]["volume_ratio_to_ego"] == pytest.approx(ratio, abs=1e-3)
    assert by[(0,)][0]["answer_values"]["outcome"] == "smaller"


def test_ego_region_speed_heading_and_ego_speed(scene):
    speed = _by_regions(_all_of(scene, "ego_region_speed"))
    assert speed[(0,)][0]["answer_values"]["speed_mps"] == pytest.approx(2.0, abs=1e-3)
    assert "2.0 m/s" in speed[(0,)][0]["answer"]
    assert speed[(1,)][0]["answer_values"]["speed_mps"] == pytest.approx(0.0, abs=1e-3)
    heading = _by_regions(_all_of(scene, "ego_region_heading"))
    assert heading[(0,)][0]["answer_values"]["heading_deg"] == pytest.approx(90.0, abs=1e-3)
    assert heading[(1,)][0]["answer_values"]["heading_deg"] == pytest.approx(0.0, abs=1e-3)
    ego = _all_of(scene, "ego_speed")
    assert len(ego) == 1 and ego[0]["regions"] == []
    assert ego[0]["answer_values"]["ego_speed_mps"] == pytest.approx(EGO_SPEED, abs=1e-3)
    assert "5.0 m/s" in ego[0]["answer"]


# ------------------------------------------------------------------------------ spatiotemporal


def test_spatiotemporal_group(scene):
    attrs, regions, meta = scene
    cfg = QAConfig(
        min_confidence=0.0,  # the answers themselves; the gate is tested on its own
        keyframe_start_s=KEYFRAME_T,
        keyframe_end_s=KEYFRAME_T,
        per_keyframe_cap=1000,
        per_clip_type_cap=10000,
        per_clip_type_class_cap=10000,
        types=("st_position", "st_agent_speed", "st_ego_speed"),
    )
    recs = generate_clip_qa(attrs, regions, meta, cfg)
    assert check_clip_qa(recs, attrs, meta.clip) == []
    group = [r for r in recs if r["regions"][0]["region_id"] == 0]
    assert len({r["group_id"] for r in group}) == 1
    assert len(group) == 12  # 3 types x t = 0, 1, 2, 3 s
    # Region 0 at t + h, in the ego frame then: (10 - 5h, 2h).
    for h in (0, 1, 2, 3):
        x, y = 10.0 - EGO_SPEED * h, 2.0 * h
        pos = [r for r in group if r["type"] == "st_position" and r["params"]["horizon_s"] == h]
        assert len(pos) == 1
        v = pos[0]["answer_values"]
        assert v["distance_m"] == pytest.approx(math.hypot(x, y), abs=1e-3)
        assert v["bearing_deg"] == pytest.approx(math.degrees(math.atan2(y, x)), abs=1e-3)
        text = pos[0]["answer"]
        assert f"{round(math.hypot(x, y), 2):.2f} meters" in text
        assert f"{round(math.degrees(math.atan2(y, x)))} degree" in text
        if h:
            assert f"{h} second" in pos[0]["question"]
        for type_id, key, want in (
            ("st_agent_speed", "speed_mps", 2.0),
            ("st_ego_speed", "ego_speed_mps", EGO_SPEED),
        ):
            rec = [r for r in group if r["type"] == type_id and r["params"]["horizon_s"] == h]
            assert rec[0]["answer_values"][key] == pytest.approx(want, abs=1e-3)
    # Grounding: region 0's views in its camera for the 4 context + 6 future frames.
    views = group[0]["regions"][0]["views"]
    assert [v["time_offset_s"] for v in views] == [
        -1.5,
        -1.0,
        -0.5,
        0.0,
        0.5,
        1.0,
        1.5,
        2.0,
        2.5,
        3.0,
    ]


# ------------------------------------------------------------------------------ multiple choice


def test_mc_distance_bin(scene):
    by = _by_regions(_all_of(scene, "mc_distance_bin"))
    # Region 0 at 10.0 m and region 3 at 20.006 m sit on bin edges: ambiguous, not asked.
    assert (0,) not in by and (3,) not in by
    r = by[(1,)][0]
    assert r["answer_values"]["outcome"] == "10_to_20m"
    keys = {o["key"] for o in r["choices"]}
    # Hard distractors: the three bins nearest 10..20 m (ties broken at random).
    assert "10_to_20m" in keys and {"5_to_10m", "20_to_30m"} <= keys and len(keys) == 4
    right = [o for o in r["choices"] if o["letter"] == r["answer_values"]["choice"]][0]
    assert right["key"] == "10_to_20m"
    assert r["explanation"] and "12.8 meters" in r["explanation"]
    assert by[(2,)][0]["answer_values"]["outcome"] == "5_to_10m"


def test_mc_sector(scene):
    by = _by_regions(_all_of(scene, "mc_sector"))
    want = {0: "front", 1: "front_left", 2: "front_right", 3: "back"}
    for r, key in want.items():
        rec = by[(r,)][0]
        assert rec["answer_values"]["outcome"] == key
        keys = [o["key"] for o in rec["choices"]]
        assert key in keys
    # Distractors of "front" are its circular neighbours first.
    assert {"front_left", "front_right"} <= {o["key"] for o in by[(0,)][0]["choices"]}


def test_mc_nearest_leftmost_rightmost(scene):
    for type_id, answer in (("mc_nearest", 2), ("mc_leftmost", 1), ("mc_rightmost", 2)):
        recs = _all_of(scene, type_id)
        hits = [r for r in recs if sorted(x["region_id"] for x in r["regions"]) == [0, 1, 2, 4]]
        assert hits, type_id
        r = hits[0]
        assert r["answer_values"]["region_id"] == answer, type_id
        right = [o for o in r["choices"] if o["letter"] == r["answer_values"]["choice"]][0]
        assert right["region_id"] == answer and right["text"] == f"Region [{answer}]"
        assert f"({r['answer_values']['choice']})" in r["answer"]
        assert r["explanation"]
    nearest = [r for r in _all_of(scene, "mc_nearest")][0]
    assert nearest["answer_values"]["answer_distance_m"] == pytest.approx(
        math.hypot(4, 5), abs=1e-3
    )
    assert nearest["answer_values"]["runner_up_distance_m"] == pytest.approx(10.0, abs=1e-3)


def test_mc_order_left_to_right(scene):
    recs = _all_of(scene, "mc_order_left_to_right")
    orders = {tuple(r["answer_values"]["region_ids"]) for r in recs}
    # Lateral y: truck 1 = 8, car 0 = 0, car 4 = -3, pedestrian 2 = -5 (margin 1.5 m).
    assert orders == {(1, 0, 4), (0, 4, 2)}
    for r in recs:
        right = [o for o in r["choices"] if o["letter"] == r["answer_values"]["choice"]][0]
        assert tuple(right["region_ids"]) == tuple(r["answer_values"]["region_ids"])
        assert len({tuple(o["region_ids"]) for o in r["choices"]}) == 4


# ------------------------------------------------------------------------------ multi-view


def test_mv_which_camera(scene):
    by = _by_regions(_all_of(scene, "mv_which_camera"))
    r = by[(1,)][0]
    assert r["answer_values"]["cameras"] == ["CAM_FRONT", "CAM_FRONT_LEFT"]
    assert r["answer_values"]["outcome"] == "several"
    assert "front camera and front-left camera" in r["answer"]
    assert r["cameras"] == list(CAMERA_CHANNELS)  # all six images are the input
    assert by[(3,)][0]["answer_values"] == {"cameras": ["CAM_BACK"], "outcome": "one"}


def test_mv_same_object_two_cameras(scene):
    recs = [
        r for r in _all_of(scene, "mv_same_object_two_cameras") if r["regions"][0]["region_id"] == 1
    ]
    answers = {tuple(r["params"]["asked_cameras"]): r["answer_values"]["outcome"] for r in recs}
    assert answers == {
        ("CAM_FRONT", "CAM_FRONT_RIGHT"): "no",
        ("CAM_BACK_LEFT", "CAM_FRONT_LEFT"): "no",
        ("CAM_FRONT_LEFT", "CAM_FRONT"): "yes",
    }


def test_mv_cross_camera_distance(scene):
    recs = _all_of(scene, "mv_cross_camera_distance")
    # Only the bus (back camera) shares no camera with the others.
    assert {tuple(x["region_id"] for x in r["regions"]) for r in recs} == {
        (0, 3),
        (1, 3),
        (2, 3),
        (3, 4),
    }
    r = _one(recs, 0, 3)
    assert r["answer_values"]["distance_m"] == pytest.approx(math.hypot(30, 0.5), abs=1e-3)
    assert r["params"]["asked_cameras"] == ["CAM_FRONT", "CAM_BACK"]
    assert "front camera image" in r["question"] and "back camera image" in r["question"]
    assert r["cameras"] == ["CAM_FRONT", "CAM_BACK"]


def test_records_carry_grounding_and_track_mapping(scene):
    recs = _all_of(scene, "ego_distance")
    for r in recs:
        reg = r["regions"][0]
        assert reg["track_id"] == TRACK_OF[reg["region_id"]]
        assert reg["class"] == SCENE[reg["region_id"]][0]
        assert f"Region [{reg['region_id']}]" in r["question"]
        assert all(v["camera"] in r["cameras"] for v in reg["views"])
        assert all(set(v["mask_rle"]) == {"size", "counts"} for v in reg["views"])
        assert [f["time_s"] for f in r["context_frames"]] == [0.5, 1.0, 1.5, 2.0]
        assert r["keyframe"] == {"frame_index": 4, "token": "tok4", "time_s": 2.0}
