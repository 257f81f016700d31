"""Keyframe de-duplication by ego pose (SPAR's pose-based subsampling) for QA."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from autolabel.qa import ClipQAMeta, QAConfig, generate_clip_qa, load_templates
from autolabel.qa.projected_grounding import regions_from_projection
from autolabel.qa.sampling import pose_novel_keyframes, select_keyframes
from calib.rig import load_rig
from tests.dynamic_tracks import TIME_S, scene_attributes, straight


def _pose(x: float, yaw_deg: float = 0.0) -> np.ndarray:
    c, s = np.cos(np.radians(yaw_deg)), np.sin(np.radians(yaw_deg))
    m = np.eye(4)
    m[:2, :2] = [[c, -s], [s, c]]
    m[0, 3] = x
    return m


def test_pose_novel_keyframes():
    poses = np.stack(
        [_pose(0.0), _pose(0.0), _pose(0.4), _pose(0.8), _pose(1.2)]  # creeping: 1 m from 0.0
        + [_pose(1.2, 6.0), _pose(1.2, 12.0)]  # turning on the spot: 12 degrees from the last kept
        + [_pose(3.2, 12.0)]  # driving on
    )
    keep = pose_novel_keyframes(poses, 1.0, 10.0)
    assert list(keep) == [True, False, False, False, True, False, True, True]
    assert pose_novel_keyframes(poses, 0.0, 0.0).all()


def _ego_waits(t: np.ndarray) -> np.ndarray:
    """5 m/s, stopped from 3 to 12 s, then 5 m/s again."""
    x = np.where(t < 3, 5 * t, np.where(t <= 12, 15.0, 15.0 + 5 * (t - 12)))
    return np.stack([x, np.zeros_like(t)], axis=1)


@pytest.fixture(scope="module")
def waiting_clip():
    attrs = scene_attributes(
        [("car", lambda t: _ego_waits(t) + [20.0, 0.0]), ("car", straight(30.0, -3.5, 2.0))],
        ego=_ego_waits,
    )
    rig = load_rig("nuscenes").scaled(160, 90)
    windows = select_keyframes(TIME_S, QAConfig())
    frames = [
        [int(f) for f in list(c) + list(u) if f >= 0]
        for c, u in zip(windows.context, windows.future, strict=True)
    ]
    regions = regions_from_projection(attrs, rig.cameras, windows.keyframe, frames)
    poses = np.stack([_pose(x) for x in _ego_waits(TIME_S)[:, 0]])
    paths = {c.channel: [f"{c.channel}/{f}.jpg" for f in range(len(TIME_S))] for c in rig.cameras}
    meta = ClipQAMeta("scene-wait", TIME_S, [f"t{f}" for f in range(len(TIME_S))], paths)
    meta_posed = ClipQAMeta(
        "scene-wait", TIME_S, [f"t{f}" for f in range(len(TIME_S))], paths, ego_pose=poses
    )
    return attrs, regions, meta, meta_posed


def _keyframe_times(records) -> list[float]:
    return sorted({r["keyframe"]["time_s"] for r in records})


def test_waiting_at_a_light_is_asked_once(waiting_clip):
    attrs, regions, meta, meta_posed = waiting_clip
    templates = load_templates()
    cfg = QAConfig(types=("ego_distance",), per_clip_type_cap=100, per_clip_type_class_cap=100)
    on = generate_clip_qa(attrs, regions, meta_posed, cfg, templates)
    # Kept: 2 s, 3 s (moved 5 m), then nothing until the ego drives on at 13 s.
    assert _keyframe_times(on) == [2.0, 3.0, 13.0, 14.0, 15.0, 16.0, 17.0]
    off = generate_clip_qa(
        attrs, regions, meta_posed, dataclasses.replace(cfg, dedup_keyframes=False), templates
    )
    assert _keyframe_times(off) == [float(t) for t in range(2, 18)]
    # Without the poses nothing can be judged, so nothing is skipped.
    assert _keyframe_times(generate_clip_qa(attrs, regions, meta, cfg, templates)) == (
        _keyframe_times(off)
    )


def test_dedup_config_errors_name_the_key():
    with pytest.raises(ValueError, match="dedup_min_translation_m"):
        QAConfig(dedup_min_translation_m=-1.0)
    with pytest.raises(ValueError, match="dedup_keyframes"):
        QAConfig(dedup_keyframes="yes")
