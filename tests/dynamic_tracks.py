"""Constructed tracks for the dynamic-QA tests: objects following given paths around an ego.

Every path is a function of time giving the object's ground-plane centre in the global frame;
headings follow the direction of travel (a static object keeps ``yaw``). Frames at 2 Hz.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from autolabel.attributes import ObjectAttributes, compute_attributes
from autolabel.boxes import Boxes3D
from autolabel.classes import class_index
from autolabel.qa.quantities import QUANTITIES, QuantityInput, resolve_params

TIME_S = np.arange(0.0, 20.0, 0.5)
SIZES = {"car": (1.9, 4.6, 1.6), "pedestrian": (0.7, 0.7, 1.75), "truck": (2.5, 7.5, 3.0)}

Path = Callable[[np.ndarray], np.ndarray]  # (T,) seconds -> (T, 2) metres


def straight(x0: float, y0: float, vx: float, vy: float = 0.0) -> Path:
    return lambda t: np.stack([x0 + vx * t, y0 + vy * t + 0.0 * t], axis=1)


def braking(x0: float, y0: float, v0: float, decel: float, t_start: float) -> Path:
    """Along +x at ``v0`` until ``t_start``, then slowing at ``decel`` m/s^2 to a stop."""

    def path(t: np.ndarray) -> np.ndarray:
        t_stop = t_start + v0 / decel
        tb = np.clip(t - t_start, 0.0, t_stop - t_start)
        x = x0 + v0 * np.minimum(t, t_start) + v0 * tb - 0.5 * decel * tb**2
        return np.stack([x, np.full_like(t, y0)], axis=1)

    return path


def arc(
    cx: float, cy: float, radius: float, speed: float, phase0: float, left: bool = True
) -> Path:
    """A circle about (cx, cy) at ``speed``: counter-clockwise (a left turn) or clockwise."""
    omega = speed / radius * (1.0 if left else -1.0)
    return lambda t: np.stack(
        [cx + radius * np.cos(phase0 + omega * t), cy + radius * np.sin(phase0 + omega * t)], 1
    )


def lane_change(x0: float, y0: float, speed: float, width: float, t0: float, t1: float) -> Path:
    """Along +x at ``speed``; between t0 and t1 the lateral position moves smoothly (a half cosine)
    by ``width`` (+ = to the left)."""

    def path(t: np.ndarray) -> np.ndarray:
        u = np.clip((t - t0) / (t1 - t0), 0.0, 1.0)
        return np.stack([x0 + speed * t, y0 + width * 0.5 * (1 - np.cos(np.pi * u))], axis=1)

    return path


def scene_attributes(
    objects: list[tuple[str, Path]],
    ego: Path | None = None,
    ego_yaw_rad: float = 0.0,
    alive: list[tuple[float, float]] | None = None,
    time_s: np.ndarray = TIME_S,
) -> ObjectAttributes:
    """Attributes of the objects (track id = position in ``objects``) around an ego following
    ``ego`` (parked at the origin by default) facing ``ego_yaw_rad``.

    ``alive``: per object the (first, last) time it is tracked (all frames by default).
    """
    xy = [path(time_s) for _, path in objects]
    boxes = []
    for f, t in enumerate(time_s):
        keep = [
            i
            for i in range(len(objects))
            if alive is None or alive[i][0] - 1e-9 <= t <= alive[i][1] + 1e-9
        ]
        center, size, yaw, vel, label = [], [], [], [], []
        for i in keep:
            cls = objects[i][0]
            p = xy[i]
            d = p[min(f + 1, len(p) - 1)] - p[max(f - 1, 0)]
            moving = np.hypot(*d) > 1e-6
            yaw.append(np.arctan2(d[1], d[0]) if moving else 0.0)
            wlh = SIZES[cls]
            center.append([p[f, 0], p[f, 1], 0.5 * wlh[2]])
            size.append(wlh)
            vel.append([np.nan, np.nan])  # velocities from the positions
            label.append(class_index(cls))
        boxes.append(
            Boxes3D(
                center_m=np.array(center).reshape(-1, 3),
                size_wlh_m=np.array(size).reshape(-1, 3),
                yaw_rad=np.array(yaw),
                velocity_mps=np.array(vel).reshape(-1, 2),
                label=np.array(label, dtype=np.int16),
                track_id=np.array(keep, dtype=np.int64),
            )
        )
    ego_xy = (ego or straight(0.0, 0.0, 0.0))(time_s)
    c, s = np.cos(ego_yaw_rad), np.sin(ego_yaw_rad)
    poses = np.tile(np.eye(4), (len(time_s), 1, 1))
    poses[:, :2, :2] = [[c, -s], [s, c]]
    poses[:, :2, 3] = ego_xy
    return compute_attributes(time_s, poses, boxes)


def frame_at(t: float) -> int:
    return int(np.argmin(np.abs(TIME_S - t)))


def ask(
    attrs: ObjectAttributes,
    quantity: str,
    t: float,
    tracks: list[list[int]] | list[int],
    params: dict | None = None,
    option: list[int] | None = None,
    colour_lab: np.ndarray | None = None,
):
    """Call a registered quantity on candidates at keyframe time ``t``; ``tracks``: per candidate
    its track ids in role order (or one track id per candidate)."""
    q = QUANTITIES[quantity]
    rows_t = np.array([[x] if np.isscalar(x) else list(x) for x in tracks], dtype=np.int64)
    kf = frame_at(t)
    rows = attrs.row_of(np.full(rows_t.shape, kf), rows_t)
    assert np.all(rows >= 0), "a track has no row at the keyframe"
    return q(
        QuantityInput(
            attrs=attrs,
            rows=rows,
            frame_index=np.full(len(rows), kf),
            horizon_s=np.zeros(len(rows)),
            cameras=np.full((len(rows), 2), -1),
            visible=np.zeros((*rows.shape, 6), bool),
            channels=("CAM_FRONT",) * 6,
            params=resolve_params(q, params, quantity),
            option=None if option is None else np.asarray(option),
            colour_lab=colour_lab,
        )
    )
