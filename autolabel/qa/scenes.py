"""Constructed traffic scenes for QA tests and benchmarks (no dataset needed).

``constant_velocity_scene`` places tracked boxes moving at constant velocity around an ego moving
straight ahead, at 2 Hz for a 20 s clip, and returns what QA generation takes: attributes, region
grounding (projected boxes, :mod:`autolabel.qa.projected_grounding`), clip metadata (with the
ego poses) and region colours. There are no images: each object gets a body colour from
``SCENE_COLOURS_RGB`` and its keyframe views are given that colour as if measured
(``constructed_colours``), so colour questions and captions can be generated and benchmarked.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autolabel.attributes import ObjectAttributes, compute_attributes
from autolabel.boxes import Boxes3D
from autolabel.classes import DETECTION_CLASSES
from autolabel.colour import NAMED_COLOURS_RGB, lab_from_rgb
from autolabel.qa.appearance import RegionColours
from autolabel.qa.grounding import ClipQAMeta, KeyframeRegions
from autolabel.qa.projected_grounding import regions_from_projection
from autolabel.qa.sampling import QAConfig, select_keyframes
from calib import stable_math
from calib.rig import Rig, load_rig
from calib.se3 import SE3

#: Typical (w, l, h) metres per class.
CLASS_SIZES_WLH_M = {
    "car": (1.9, 4.6, 1.6),
    "truck": (2.5, 7.5, 3.0),
    "bus": (2.9, 11.0, 3.4),
    "trailer": (2.6, 10.0, 3.8),
    "construction_vehicle": (2.8, 6.5, 3.2),
    "pedestrian": (0.7, 0.7, 1.75),
    "motorcycle": (0.8, 2.1, 1.5),
    "bicycle": (0.6, 1.8, 1.3),
    "traffic_cone": (0.4, 0.4, 1.0),
    "barrier": (2.5, 0.5, 1.0),
}


@dataclass
class QAScene:
    """Everything QA generation needs for one constructed clip."""

    attrs: ObjectAttributes
    regions: list[KeyframeRegions]
    meta: ClipQAMeta
    rig: Rig
    colours: RegionColours | None = None


#: Body colours of constructed objects (the palette's words, so their names are known).
SCENE_COLOURS_RGB = np.array(list(NAMED_COLOURS_RGB.values()), dtype=np.float64)


def constructed_colours(
    regions: list[KeyframeRegions], colour_of_track: dict[int, np.ndarray]
) -> RegionColours:
    """Every visible keyframe view measured as its track's colour (RGB 0..255), with the view's
    box area as its pixel count."""
    parts: dict[str, list] = {k: [] for k in ("kf", "tid", "cam", "lab", "px")}
    for kr in regions:
        sel = np.flatnonzero((kr.view_frame_index == kr.keyframe_index) & kr.view_visible)
        tid = kr.track_id[kr.view_region[sel]]
        box = kr.view_box_px[sel]
        parts["kf"].append(np.full(len(sel), kr.keyframe_index, np.int64))
        parts["tid"].append(tid)
        parts["cam"].append(kr.view_camera[sel])
        rgb = np.array([colour_of_track[int(t)] for t in tid]).reshape(-1, 3)
        parts["lab"].append(lab_from_rgb(rgb))
        parts["px"].append(((box[:, 2] - box[:, 0]) * (box[:, 3] - box[:, 1])).astype(np.int64))
    if not parts["kf"]:
        return RegionColours.empty()
    return RegionColours(*(np.concatenate(parts[k]) for k in ("kf", "tid", "cam", "lab", "px")))


def global_boxes_per_frame(
    time_s: np.ndarray,
    start_xy_m: np.ndarray,
    velocity_mps: np.ndarray,
    labels: np.ndarray,
    sizes_wlh_m: np.ndarray,
    first_frame: np.ndarray | None = None,
    last_frame: np.ndarray | None = None,
) -> list[Boxes3D]:
    """Per frame, the global boxes of N objects moving at constant velocity (track id = index).

    Objects exist from ``first_frame`` to ``last_frame`` inclusive (all frames by default); the
    yaw follows the velocity (or 0 for static objects).
    """
    n = len(start_xy_m)
    first = np.zeros(n, int) if first_frame is None else np.asarray(first_frame)
    last = np.full(n, len(time_s) - 1) if last_frame is None else np.asarray(last_frame)
    speed = np.hypot(velocity_mps[:, 0], velocity_mps[:, 1])
    yaw = np.where(speed > 0, stable_math.arctan2(velocity_mps[:, 1], velocity_mps[:, 0]), 0.0)
    out = []
    for f, t in enumerate(time_s):
        alive = (first <= f) & (f <= last)
        xy = start_xy_m + velocity_mps * t
        center = np.concatenate([xy, 0.5 * sizes_wlh_m[:, 2:3]], axis=1)
        out.append(
            Boxes3D(
                center_m=center[alive],
                size_wlh_m=sizes_wlh_m[alive],
                yaw_rad=yaw[alive],
                velocity_mps=velocity_mps[alive],
                label=labels[alive],
                track_id=np.flatnonzero(alive),
            )
        )
    return out


def constant_velocity_scene(
    n_objects: int = 24,
    seed: int = 0,
    clip: str = "scene-qa-0001",
    ego_speed_mps: float = 6.0,
    seconds: float = 20.0,
    image_size: tuple[int, int] = (400, 225),
    config: QAConfig | None = None,
) -> QAScene:
    """A random but reproducible scene: objects in lanes around an ego driving along +x.

    Object classes are drawn with traffic-like frequencies (cars most common); some objects
    enter or leave during the clip, so future states are sometimes absent.
    """
    rng = np.random.default_rng(seed)
    time_s = np.arange(0.0, seconds, 0.5)
    n_frames = len(time_s)
    classes = np.array(DETECTION_CLASSES)
    weights = np.array([CLASS_WEIGHTS.get(c, 0.02) for c in classes])
    label = rng.choice(len(classes), size=n_objects, p=weights / weights.sum())
    sizes = np.array([CLASS_SIZES_WLH_M[classes[k]] for k in label]) * rng.uniform(
        0.9, 1.1, size=(n_objects, 3)
    )
    lane_y = rng.choice([-7.0, -3.5, 3.5, 7.0, 10.5, -10.5], size=n_objects)
    x0 = rng.uniform(-40.0, 120.0, size=n_objects)
    moving = np.isin(classes[label], ("car", "truck", "bus", "motorcycle", "bicycle", "trailer"))
    walking = classes[label] == "pedestrian"
    vx = np.where(moving, rng.uniform(-8.0, 10.0, n_objects), 0.0)
    vy = np.where(walking, rng.uniform(-1.4, 1.4, n_objects), 0.0)
    vx = np.where(walking, rng.uniform(-1.0, 1.0, n_objects), vx)
    first = np.where(rng.random(n_objects) < 0.2, rng.integers(0, n_frames // 2, n_objects), 0)
    last = np.where(
        rng.random(n_objects) < 0.2, rng.integers(n_frames // 2, n_frames, n_objects), n_frames - 1
    )
    tracks = global_boxes_per_frame(
        time_s, np.stack([x0, lane_y], 1), np.stack([vx, vy], 1), label, sizes, first, last
    )
    scene = scene_from_tracks(time_s, tracks, clip, ego_speed_mps, image_size, config)
    # Colours from their own generator, so the scene's geometry does not depend on them.
    colour_rng = np.random.default_rng([seed, 1])
    body = SCENE_COLOURS_RGB[colour_rng.integers(0, len(SCENE_COLOURS_RGB), n_objects)]
    scene.colours = constructed_colours(scene.regions, dict(enumerate(body)))
    return scene


def scene_from_tracks(
    time_s: np.ndarray,
    tracks: list[Boxes3D],
    clip: str = "scene-t-0001",
    ego_speed_mps: float = 6.0,
    image_size: tuple[int, int] = (400, 225),
    config: QAConfig | None = None,
) -> QAScene:
    """A QA scene (attributes, projected-box grounding, metadata) from per-frame global tracks.

    The ego drives along +x at ``ego_speed_mps`` from the origin; the same clip name and times give
    the same image paths and tokens. No colours (see ``constructed_colours``).
    """
    n_frames = len(time_s)
    poses = [SE3(np.eye(3), np.array([ego_speed_mps * t, 0.0, 0.0])) for t in time_s]
    attrs = compute_attributes(time_s, poses, tracks)
    rig = load_rig("nuscenes").scaled(*image_size)
    windows = select_keyframes(time_s, config or QAConfig())
    frames = [
        [int(f) for f in list(ctx) + list(fut) if f >= 0]
        for ctx, fut in zip(windows.context, windows.future, strict=True)
    ]
    regions = regions_from_projection(attrs, rig.cameras, windows.keyframe, frames)
    meta = ClipQAMeta(
        clip=clip,
        frame_time_s=time_s,
        frame_token=[f"{clip}-sample-{f:03d}" for f in range(n_frames)],
        image_paths={
            cam.channel: [
                f"samples/{cam.channel}/{clip}__{cam.channel}__{f:03d}.jpg" for f in range(n_frames)
            ]
            for cam in rig.cameras
        },
        ego_pose=np.stack([p.as_matrix() for p in poses]),
    )
    return QAScene(attrs=attrs, regions=regions, meta=meta, rig=rig)


#: Relative class frequencies of constructed scenes (cars dominate, as on real roads).
CLASS_WEIGHTS = {
    "car": 0.45,
    "truck": 0.08,
    "bus": 0.04,
    "trailer": 0.02,
    "construction_vehicle": 0.02,
    "pedestrian": 0.2,
    "motorcycle": 0.04,
    "bicycle": 0.04,
    "traffic_cone": 0.06,
    "barrier": 0.05,
}
