"""QA sampling (keyframes, windows, caps, balancing), records, determinism and atomic writes."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from autolabel.config import ConfigError, dataclass_from_mapping
from autolabel.qa import (
    QAConfig,
    generate_clip_qa,
    load_templates,
    select_keyframes,
    write_qa_jsonl,
)
from autolabel.qa.generate import dumps_qa_jsonl
from autolabel.qa.scenes import constant_velocity_scene

TEMPLATES = load_templates()


@pytest.fixture(scope="module")
def scene():
    return constant_velocity_scene(n_objects=30, seed=3)


def test_keyframes_at_1hz_from_2_to_17_s_with_context_and_future():
    t = np.arange(0.0, 20.0, 0.5)  # 40 frames, 0 .. 19.5 s
    w = select_keyframes(t, QAConfig())
    assert np.allclose(t[w.keyframe], np.arange(2.0, 18.0, 1.0))
    assert np.allclose(t[w.context] - t[w.keyframe][:, None], [-1.5, -1.0, -0.5, 0.0])
    fut = np.where(w.future >= 0, t[np.maximum(w.future, 0)] - t[w.keyframe][:, None], np.nan)
    assert np.allclose(fut[0], [0.5, 1.0, 1.5, 2.0, 2.5, 3.0])
    # t = 17 s: t + 3 = 20 s is past the clip's last frame (19.5 s): absent, not invented.
    assert w.future[-1, -1] == -1 and w.future[-1, -2] >= 0


def test_keyframes_tolerate_jitter_and_skip_gaps():
    rng = np.random.default_rng(0)
    t = np.arange(0.0, 20.0, 0.5) + rng.uniform(-0.04, 0.04, 40)
    t[0] = 0.0
    assert len(select_keyframes(t, QAConfig()).keyframe) == 16
    t_gap = np.delete(np.arange(0.0, 20.0, 0.5), 11)  # no frame at 5.5 s
    w = select_keyframes(t_gap, QAConfig())
    # Keyframes 6 and 7 s need 5.5 s as context (t - 0.5 and t - 1.5); both are skipped.
    kept = np.round(t_gap[w.keyframe]).astype(int).tolist()
    assert kept == [2, 3, 4, 5, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]


def test_config_validation_names_the_key():
    with pytest.raises(ConfigError, match="per_keyframe_cap"):
        dataclass_from_mapping(QAConfig, {"per_keyframe_cap": -1}, "qa.yaml")
    with pytest.raises(ConfigError, match="context_offsets_s"):
        dataclass_from_mapping(QAConfig, {"context_offsets_s": [-1.0, -0.5]}, "qa.yaml")
    with pytest.raises(ConfigError, match="grounding_frames"):
        dataclass_from_mapping(QAConfig, {"grounding_frames": "all"}, "qa.yaml")
    with pytest.raises(ValueError, match="unknown question type"):
        s = constant_velocity_scene(n_objects=2, seed=1)
        generate_clip_qa(s.attrs, s.regions, s.meta, QAConfig(types=("obj_colour",)), TEMPLATES)


def test_same_seed_same_bytes_other_seed_other_bytes(scene, tmp_path):
    a = generate_clip_qa(scene.attrs, scene.regions, scene.meta, QAConfig(seed=7), TEMPLATES)
    # Input order of the keyframe groundings does not matter.
    b = generate_clip_qa(
        scene.attrs, list(reversed(scene.regions)), scene.meta, QAConfig(seed=7), TEMPLATES
    )
    c = generate_clip_qa(scene.attrs, scene.regions, scene.meta, QAConfig(seed=8), TEMPLATES)
    assert dumps_qa_jsonl(a) == dumps_qa_jsonl(b)
    assert dumps_qa_jsonl(a) != dumps_qa_jsonl(c)
    p1 = write_qa_jsonl(tmp_path / "1" / "qa.jsonl", a)
    p2 = write_qa_jsonl(tmp_path / "2" / "qa.jsonl", b)
    assert p1.read_bytes() == p2.read_bytes()
    lines = p1.read_text().splitlines()
    assert len(lines) == len(a)
    first = lines[0]
    assert first == json.dumps(json.loads(first), sort_keys=True, separators=(",", ":"))
    assert not list(tmp_path.rglob("*.tmp"))


def test_caps_and_balance(scene):
    # Ungated: a scene caption is as sure as the weakest of all its regions, which in this scene
    # is below the default gate at every keyframe (gating is tested in test_qa_confidence.py).
    cfg = QAConfig(
        per_keyframe_cap=2, per_clip_type_cap=20, per_clip_type_class_cap=6, min_confidence=0.0
    )
    recs = generate_clip_qa(scene.attrs, scene.regions, scene.meta, cfg, TEMPLATES, scene.colours)
    per_type = Counter(r["type"] for r in recs)
    assert max(per_type.values()) <= 20
    # Every type is represented but the order of four first sightings: this scene has no camera
    # showing four objects first seen at least a second apart (tests/test_qa_dynamic.py has).
    assert set(per_type) == set(TEMPLATES.types) - {"tmp_appearance_order"}
    # Types over a set of regions balance their class group or camera instead.
    sets = {t for t, qt in TEMPLATES.types.items() if qt.variable_regions}
    per_type_class = Counter(
        (r["type"], r["regions"][0]["class"])
        for r in recs
        if r["regions"] and r["type"] not in sets
    )
    assert max(per_type_class.values()) <= 6
    assert per_type["ego_speed"] == 16  # one per keyframe: the ego has no class to cap
    per_type_kf = Counter((r["type"], r["keyframe"]["frame_index"]) for r in recs)
    st = {t for t in per_type if t.startswith("st_")}
    assert all(n <= 2 for (t, _), n in per_type_kf.items() if t not in st)
    # Spatiotemporal groups: one region, all four horizons, for each of the three types.
    groups = Counter(r["group_id"] for r in recs if r["type"] in st)
    assert set(groups.values()) == {12}
    # Classes are balanced: the scene has far more cars than anything else, but car questions
    # of a type stop at the class cap while other classes are still asked.
    classes_in_scene = Counter(
        r["regions"][0]["class"] for r in recs if r["type"] == "ego_distance"
    )
    assert len(classes_in_scene) >= 3
    # Yes/no and left/right outcomes are balanced within a type where both exist.
    lr = Counter(r["answer_values"]["outcome"] for r in recs if r["type"] == "obj_left_right")
    assert abs(lr["left"] - lr["right"]) <= max(2, sum(lr.values()) // 3)
    letters = Counter(r["answer_values"]["choice"] for r in recs if r["choices"])
    assert len(letters) == 4  # the right answer is not always in one place


def test_only_visible_regions_and_their_cameras(scene):
    recs = generate_clip_qa(scene.attrs, scene.regions, scene.meta, QAConfig(), TEMPLATES)
    by_kf = {kr.keyframe_index: kr for kr in scene.regions}
    for r in recs:
        kr = by_kf[r["keyframe"]["frame_index"]]
        for reg in r["regions"]:
            row = int(np.flatnonzero(kr.region_id == reg["region_id"])[0])
            assert kr.track_id[row] == reg["track_id"]
            at_key = (
                (kr.view_region == row)
                & (kr.view_frame_index == kr.keyframe_index)
                & kr.view_visible
            )
            assert set(kr.view_camera[at_key]) == set(reg["cameras_visible"])
            assert reg["cameras_visible"]
            if r["category"] != "multi_view":
                assert set(r["cameras"]) & set(reg["cameras_visible"])
        for cam, paths in r["images"].items():
            assert len(paths) == 4 and all(cam in p for p in paths)


def test_grounding_label_disagreement_is_an_error(scene):
    kr = scene.regions[0]
    bad = type(kr)(
        keyframe_index=kr.keyframe_index,
        region_id=kr.region_id,
        track_id=kr.track_id,
        label=(kr.label + 1) % 10,
        view_region=kr.view_region,
        view_camera=kr.view_camera,
        view_frame_index=kr.view_frame_index,
        view_box_px=kr.view_box_px,
        view_mask_rle=kr.view_mask_rle,
        view_visible=kr.view_visible,
    )
    with pytest.raises(ValueError, match="in the grounding but"):
        generate_clip_qa(scene.attrs, [bad], scene.meta, QAConfig(), TEMPLATES)
    with pytest.raises(ValueError, match="duplicate region ids"):
        type(kr)(
            keyframe_index=0,
            region_id=[0, 0],
            track_id=[1, 2],
            view_region=[],
            view_camera=[],
            view_frame_index=[],
            view_box_px=np.zeros((0, 4)),
            view_mask_rle=[],
        )


def test_regions_from_set_of_mark_views_give_the_same_records(scene):
    """Flat per-view rows + Set-of-Mark's RegionIds regroup into the same grounding."""
    from autolabel.qa.grounding import regions_from_views
    from autolabel.set_of_mark import assign_region_ids

    kf, tid, cam, frm, box, rle, vis = [], [], [], [], [], [], []
    for kr in scene.regions:
        kf.append(np.full(len(kr.view_region), kr.keyframe_index))
        tid.append(kr.track_id[kr.view_region])
        cam.append(kr.view_camera)
        frm.append(kr.view_frame_index)
        box.append(kr.view_box_px)
        rle += list(kr.view_mask_rle)
        vis.append(kr.view_visible)
    kf, tid = np.concatenate(kf), np.concatenate(tid)
    at_key = np.concatenate(frm) == kf
    rows = np.flatnonzero(at_key)
    dist = scene.attrs.distance_m[scene.attrs.row_of(kf[rows], tid[rows])]
    ids = assign_region_ids(kf[rows], tid[rows], dist)
    regrouped = regions_from_views(
        kf, tid, np.concatenate(cam), np.concatenate(frm), np.concatenate(box), rle,
        np.concatenate(vis), ids,
    )  # fmt: skip
    a = generate_clip_qa(scene.attrs, scene.regions, scene.meta, QAConfig(), TEMPLATES)
    b = generate_clip_qa(scene.attrs, regrouped, scene.meta, QAConfig(), TEMPLATES)
    assert dumps_qa_jsonl(a) == dumps_qa_jsonl(b)


def test_no_regions_no_questions(scene):
    assert generate_clip_qa(scene.attrs, [], scene.meta, QAConfig(), TEMPLATES) == []


def test_clip_meta_from_clip_has_relative_paths(tmp_path):
    from autolabel.clip import CameraImage, Clip, Frame, LidarSweep
    from autolabel.qa import ClipQAMeta
    from calib.rig import load_rig
    from calib.se3 import SE3

    rig = load_rig("nuscenes")
    frames = []
    for i in range(3):
        pose = SE3(np.eye(3), np.array([float(i), 0.0, 0.0]))
        cams = {
            c.channel: CameraImage(
                tmp_path / "samples" / c.channel / f"{i}.jpg", c, pose, i * 500_000
            )
            for c in rig.cameras
        }
        lidar = LidarSweep(tmp_path / "samples" / "LIDAR_TOP" / f"{i}.bin", pose, i * 500_000)
        frames.append(Frame(f"tok{i}", i, i * 500_000, i * 0.5, pose, lidar, rig.lidar, cams))
    clip = Clip("scene-x", "st", "log", frames, dataroot=tmp_path)
    meta = ClipQAMeta.from_clip(clip)
    assert meta.channels == tuple(c.channel for c in rig.cameras)
    assert meta.image_paths["CAM_BACK"][2] == "samples/CAM_BACK/2.jpg"
    assert meta.frame_token == ("tok0", "tok1", "tok2")
    assert np.allclose(meta.frame_time_s, [0.0, 0.5, 1.0])


def test_same_bytes_across_processes(scene):
    """No dependence on Python's per-process string hashing (seeds come from CRC32)."""
    import hashlib
    import os
    import subprocess
    import sys

    code = (
        "import hashlib, sys\n"
        "from autolabel.qa import QAConfig, generate_clip_qa\n"
        "from autolabel.qa.generate import dumps_qa_jsonl\n"
        "from autolabel.qa.scenes import constant_velocity_scene\n"
        "s = constant_velocity_scene(n_objects=30, seed=3)\n"
        "recs = generate_clip_qa(s.attrs, s.regions, s.meta, QAConfig(seed=7))\n"
        "sys.stdout.write(hashlib.sha256(dumps_qa_jsonl(recs).encode()).hexdigest())\n"
    )
    here = dumps_qa_jsonl(
        generate_clip_qa(scene.attrs, scene.regions, scene.meta, QAConfig(seed=7), TEMPLATES)
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONHASHSEED="12345", PYTHONPATH=root)
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == hashlib.sha256(here.encode()).hexdigest()
