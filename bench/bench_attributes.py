"""Attribute computation speed: a 20 s clip with 50 tracked objects.

Builds a constructed clip (ego driving a curve, 50 moving objects, a fifth of whose tracks end
early) and times ``compute_attributes`` at 2 Hz keyframes (41 frames) and at 10 Hz (201 frames). For
reference, the same core columns (ego-frame centre, distance, bearing, speed from the tracker,
future distance/bearing at +1/+2/+3 s) are computed object by object with the nuScenes devkit's
``Box`` (translate / rotate into the ego frame) and dictionary look-ups for the future states, as a
straightforward per-object implementation would; the two results are checked to agree.

    python -m bench.bench_attributes [--objects 50] [--seconds 20] [--repeats 5]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np


def make_clip(n_objects: int, seconds: float, rate_hz: float, seed: int = 0):
    from autolabel.boxes import Boxes3D
    from calib.rotation import rotation_from_yaw
    from calib.se3 import SE3

    rng = np.random.default_rng(seed)
    t = np.arange(0.0, seconds + 1e-9, 1.0 / rate_hz)
    ego_yaw = 0.4 + 0.03 * t  # a gentle left curve
    speed = 8.0
    ego_xy = np.cumsum(
        np.stack([np.cos(ego_yaw), np.sin(ego_yaw)], 1) * speed / rate_hz, axis=0
    ) + [600.0, 1600.0]
    poses = [
        SE3(rotation_from_yaw(y), np.array([x[0], x[1], 0.0]))
        for y, x in zip(ego_yaw, ego_xy, strict=True)
    ]
    # Every object is tracked for the whole clip except a fifth whose tracks end early (their
    # future states near the end are absent).
    start = np.zeros(n_objects)
    end = np.where(np.arange(n_objects) % 5 == 0, rng.uniform(5, seconds, n_objects), seconds)
    origin = ego_xy[0] + rng.uniform(-50, 50, (n_objects, 2))
    vel = rng.normal(0, 3, (n_objects, 2))
    size = rng.uniform([0.5, 0.5, 1.0], [2.5, 6.0, 3.0], (n_objects, 3))
    frames = []
    for ti in t:
        alive = (start <= ti) & (ti <= end)
        xy = origin[alive] + vel[alive] * ti
        frames.append(
            Boxes3D(
                np.concatenate([xy, np.full((alive.sum(), 1), 1.0)], 1),
                size[alive],
                np.arctan2(vel[alive, 1], vel[alive, 0]),
                velocity_mps=vel[alive],
                label=np.zeros(alive.sum(), int),
                track_id=np.flatnonzero(alive),
            )
        )
    return t, poses, frames


def per_object_reference(t, poses, frames, horizons=(1.0, 2.0, 3.0), tol=0.25):
    """Object-by-object with the devkit Box and dict look-ups (the slow, obvious way)."""
    from nuscenes.utils.data_classes import Box
    from pyquaternion import Quaternion

    by_frame_track = {}
    for f, boxes in enumerate(frames):
        for i in range(len(boxes)):
            by_frame_track[(f, int(boxes.track_id[i]))] = boxes.center_m[i]
    rows = {}
    for f, boxes in enumerate(frames):
        pose = poses[f]
        q = Quaternion(matrix=pose.rotation)
        for i in range(len(boxes)):
            box = Box(
                boxes.center_m[i],
                boxes.size_wlh_m[i],
                Quaternion(axis=[0, 0, 1], angle=boxes.yaw_rad[i]),
            )
            box.translate(-pose.translation)
            box.rotate(q.inverse)
            x, y = box.center[0], box.center[1]
            future = []
            for h in horizons:
                k = int(np.argmin(np.abs(t - (t[f] + h))))
                c = by_frame_track.get((k, int(boxes.track_id[i])))
                if abs(t[k] - t[f] - h) > tol or c is None:
                    future.append((math.nan, math.nan))
                    continue
                fb = Box(c, boxes.size_wlh_m[i], Quaternion())
                fb.translate(-poses[k].translation)
                fb.rotate(Quaternion(matrix=poses[k].rotation).inverse)
                future.append(
                    (
                        math.hypot(fb.center[0], fb.center[1]),
                        math.degrees(math.atan2(fb.center[1], fb.center[0])),
                    )
                )
            rows[(f, int(boxes.track_id[i]))] = (
                math.hypot(x, y),
                math.degrees(math.atan2(y, x)),
                float(np.hypot(*boxes.velocity_mps[i])),
                future,
            )
    return rows


def check_agreement(attrs, reference) -> float:
    worst = 0.0
    for r in range(len(attrs)):
        dist, bearing, speed, future = reference[
            (int(attrs.frame_index[r]), int(attrs.track_id[r]))
        ]
        worst = max(worst, abs(dist - attrs.distance_m[r]), abs(speed - attrs.speed_mps[r]))
        worst = max(worst, abs((bearing - attrs.bearing_deg[r] + 180) % 360 - 180))
        for k, (fd, fb) in enumerate(future):
            if math.isnan(fd):
                assert not attrs.future_present[r, k], (r, k)
                continue
            assert attrs.future_present[r, k], (r, k)
            worst = max(worst, abs(fd - attrs.future_distance_m[r, k]))
            worst = max(worst, abs((fb - attrs.future_bearing_deg[r, k] + 180) % 360 - 180))
    return worst


def timed(fn, repeats: int) -> float:
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    from autolabel.attributes import compute_attributes

    for rate in (2.0, 10.0):
        t, poses, frames = make_clip(args.objects, args.seconds, rate)
        attrs = compute_attributes(t, poses, frames)
        ours = timed(lambda t=t, p=poses, f=frames: compute_attributes(t, p, f), args.repeats)
        ref_repeats = max(1, args.repeats // 3)
        reference = per_object_reference(t, poses, frames)
        ref = timed(lambda t=t, p=poses, f=frames: per_object_reference(t, p, f), ref_repeats)
        worst = check_agreement(attrs, reference)
        print(
            f"{rate:g} Hz: {len(t)} frames, {len(attrs)} rows ({args.objects} objects): "
            f"compute_attributes {ours * 1e3:.1f} ms; per-object devkit reference "
            f"{ref * 1e3:.0f} ms; speed-up x{ref / ours:.0f}; max difference {worst:.1e}"
        )


if __name__ == "__main__":
    main()
