"""Speed of the synthetic camera renderer and LiDAR simulator on a representative street scene.

Prints images/s at the rig's camera size (1600x900 for nuScenes) over the six cameras, LiDAR
sweeps/s (32 beams x 0.33 deg) and their ratio to plain ``cast_rays`` on the same rays, and the speed-up of the numba renderer over a vectorized numpy
implementation of the same algorithm (same screen rectangles, slab test, z-buffer, shading),
measured in the same run on the same scene; it also checks that both give the same pixels.

    python bench/bench_render.py [--repeats N] [--numpy-repeats N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from autolabel.synth.lidar_sim import beam_directions_lidar, simulate_sweep
from autolabel.synth.raycast import HIT_GROUND, HIT_NOTHING, GroundTexture, SceneBoxes, cast_rays
from autolabel.synth.render import (
    SKY_HORIZON_RGB,
    SKY_ZENITH_RGB,
    face_shading,
    render_camera,
    screen_rectangles,
)
from calib.projection import NEAR_PLANE_M
from calib.rig import load_rig
from calib.se3 import SE3


def street_scene(seed: int = 0) -> tuple[SceneBoxes, GroundTexture]:
    """20 buildings (scenery) along a 200 m street, 10 vehicles of 3 boxes (body, windscreen,
    plate), 10 pedestrians: 60 boxes, 20 annotated objects."""
    rng = np.random.default_rng(seed)
    centers, sizes, yaws, parts, owners = [], [], [], [], []

    def add(center, size_wlh, yaw, part=0, owner=-1):
        centers.append(center)
        sizes.append(size_wlh)
        yaws.append(yaw)
        parts.append(part)
        owners.append(owner)

    for side in (-1.0, 1.0):
        for x in np.linspace(-80.0, 80.0, 10):
            w, length, h = rng.uniform(10, 18), rng.uniform(12, 16), rng.uniform(8, 30)
            add([x, side * (12.0 + w / 2), h / 2], [w, length, h], rng.uniform(-0.05, 0.05))
    for obj in range(10):
        x, y, yaw = rng.uniform(-60, 60), rng.uniform(-11, 11), rng.uniform(-np.pi, np.pi)
        x = x if abs(x) > 4 or abs(y) > 3 else x + 8
        add([x, y, 1.3], [2.0, 4.6, 1.6], yaw, 0, obj)  # body
        c, s = np.cos(yaw), np.sin(yaw)
        add([x + 1.0 * c, y + 1.0 * s, 1.85], [1.6, 0.9, 0.5], yaw, 1, obj)  # windscreen
        add([x + 2.31 * c, y + 2.31 * s, 0.5], [0.5, 0.02, 0.12], yaw, 2, obj)  # plate
    for obj in range(10, 20):
        add([rng.uniform(-40, 40), rng.uniform(-11, 11), 0.88], [0.6, 0.5, 1.75], 0.0, 0, obj)
    n = len(centers)
    boxes = SceneBoxes(
        np.array(centers),
        np.array(sizes),
        np.array(yaws),
        rng.integers(30, 230, (n, 3)).astype(np.uint8),
        np.array(owners, np.int32),
        np.array(parts, np.int8),
    )
    texture = rng.integers(60, 140, (1000, 1000, 3)).astype(np.uint8)
    return boxes, GroundTexture(texture, np.array([-100.0, -100.0]), 0.2)


def render_camera_numpy(camera, global_SE3_camera: SE3, boxes: SceneBoxes, ground: GroundTexture):
    """The same render as ``render_camera``, vectorized with numpy (no numba): the reference."""
    w, h = camera.width_px, camera.height_px
    k_inv = np.linalg.inv(camera.intrinsic)
    u, v = np.meshgrid(np.arange(w) + 0.5, np.arange(h) + 0.5)
    # einsum rather than matmul: no multi-threaded BLAS, so CPU time compares like with like.
    d_camera = np.einsum("hwj,ij->hwi", np.stack([u, v, np.ones_like(u)], axis=-1), k_inv)
    d = np.einsum("hwj,ij->hwi", d_camera, global_SE3_camera.rotation)  # (H, W, 3), camera z = 1
    o = global_SE3_camera.translation
    depth = np.full((h, w), np.inf)
    index = np.full((h, w), HIT_NOTHING, np.int32)
    face = np.full((h, w), -1, np.int8)
    with np.errstate(divide="ignore", invalid="ignore"):
        s_ground = -o[2] / d[..., 2]
    is_ground = (d[..., 2] < 0) & (o[2] > 0) & (s_ground >= NEAR_PLANE_M)
    depth[is_ground] = s_ground[is_ground]
    index[is_ground] = HIT_GROUND
    gx = o[0] + s_ground[is_ground] * d[..., 0][is_ground]
    gy = o[1] + s_ground[is_ground] * d[..., 1][is_ground]
    col = np.floor((gx - ground.origin_xy[0]) / ground.resolution_m)
    row = np.floor((gy - ground.origin_xy[1]) / ground.resolution_m)
    inside = (row >= 0) & (row < ground.rgb.shape[0]) & (col >= 0) & (col < ground.rgb.shape[1])
    ground_rgb = np.broadcast_to(ground.outside_rgb, (len(gx), 3)).copy()
    ground_rgb[inside] = ground.rgb[row[inside].astype(int), col[inside].astype(int)]
    image = np.empty((h, w, 3), np.uint8)
    sin_elev = d[..., 2] / np.linalg.norm(d, axis=-1)
    blend = np.clip(2.0 * sin_elev, 0.0, 1.0)[..., None]
    image[:] = np.floor(SKY_HORIZON_RGB * (1 - blend) + SKY_ZENITH_RGB * blend + 0.5)
    image[is_ground] = ground_rgb
    rects = screen_rectangles(camera, global_SE3_camera.inverse(), boxes)
    half = boxes.half_extents_xyz()
    for b in range(len(boxes)):
        u0, v0, u1, v1 = rects[b]
        if u1 <= u0 or v1 <= v0:
            continue
        c, s = np.cos(boxes.yaw[b]), np.sin(boxes.yaw[b])
        to_box = np.array([[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]])
        lo = to_box @ (o - boxes.center[b])
        ld = np.einsum("hwj,ij->hwi", d[v0:v1, u0:u1], to_box)
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = 1.0 / ld
            t1 = (-half[b] - lo) * inv
            t2 = (half[b] - lo) * inv
        t_lo = np.where(
            ld == 0, np.where(np.abs(lo) <= half[b], -np.inf, np.inf), np.minimum(t1, t2)
        )
        t_hi = np.where(
            ld == 0, np.where(np.abs(lo) <= half[b], np.inf, -np.inf), np.maximum(t1, t2)
        )
        axis = np.argmax(t_lo, axis=-1)
        t_enter = np.take_along_axis(t_lo, axis[..., None], -1)[..., 0]
        t_exit = t_hi.min(axis=-1)
        hit = (t_enter <= t_exit) & (t_enter >= NEAR_PLANE_M)
        sub_depth, sub_index = depth[v0:v1, u0:u1], index[v0:v1, u0:u1]
        tie_ground = (t_enter == sub_depth) & (sub_index == HIT_GROUND)
        nearer = hit & ((t_enter < sub_depth) | tie_ground)
        sub_depth[nearer] = t_enter[nearer]
        sub_index[nearer] = b
        positive = np.take_along_axis(ld, axis[..., None], -1)[..., 0] > 0
        face[v0:v1, u0:u1][nearer] = (2 * axis + positive)[nearer]
    on_box = index >= 0
    shade = face_shading(boxes)[index[on_box], face[on_box]]
    image[on_box] = np.minimum(255.0, boxes.colour[index[on_box]] * shade[:, None] + 0.5).astype(
        np.uint8
    )
    return image, index, depth.astype(np.float32)


def per_call_seconds(fn, repeats: int) -> tuple[float, float]:
    """(wall, CPU) seconds per call of ``fn()``; CPU time is robust on a shared machine."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - wall) / repeats, (time.process_time() - cpu) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="renders of each of the 6 cameras")
    parser.add_argument("--numpy-repeats", type=int, default=1)
    parser.add_argument("--sweeps", type=int, default=20)
    args = parser.parse_args()
    rig = load_rig("nuscenes")
    boxes, ground = street_scene()
    global_SE3_ego = SE3(np.eye(3), np.array([0.0, -2.0, 0.0]))
    views = [(cam, global_SE3_ego.compose(cam.ego_SE3_camera)) for cam in rig.cameras]
    cam0 = rig.cameras[0]
    print(
        f"scene: {len(boxes)} boxes (20 buildings), {cam0.width_px}x{cam0.height_px} images, "
        f"{len(views)} cameras; times per image, wall / CPU (one thread)"
    )
    for cam, pose in views:  # JIT warm-up (and compile-cache load)
        render_camera(cam, pose, boxes, ground)

    def render_all(renderer):
        return lambda: [renderer(cam, pose, boxes, ground) for cam, pose in views]

    numba_wall, numba_cpu = per_call_seconds(render_all(render_camera), args.repeats)
    numpy_wall, numpy_cpu = per_call_seconds(render_all(render_camera_numpy), args.numpy_repeats)
    n = len(views)
    print(
        f"numba render: {numba_wall / n * 1e3:.1f} / {numba_cpu / n * 1e3:.1f} ms, "
        f"{n / numba_cpu:.1f} images/s (CPU)"
    )
    print(
        f"numpy render: {numpy_wall / n * 1e3:.1f} / {numpy_cpu / n * 1e3:.1f} ms, "
        f"{n / numpy_cpu:.2f} images/s (CPU)"
    )
    print(f"speed-up numba / numpy (CPU time): {numpy_cpu / numba_cpu:.1f}x")

    # Same algorithm in a different arithmetic order: expect equal pixels but for float noise.
    same_index, same_colour, depth_rel, on_boxes = [], [], [], []
    for cam, pose in views:
        fast = render_camera(cam, pose, boxes, ground)
        image, index, depth = render_camera_numpy(cam, pose, boxes, ground)
        same_index.append((fast.box_index == index).mean())
        same_colour.append((fast.image == image).all(axis=-1).mean())
        both = np.isfinite(depth) & (fast.box_index == index)
        depth_rel.append(np.max(np.abs(fast.depth_m[both] / depth[both] - 1.0)))
        on_boxes.append((fast.box_index >= 0).mean())
    print(
        f"numba vs numpy: same box_index on {min(same_index):.6f}, same colour on "
        f"{min(same_colour):.6f} of pixels (worst camera); max relative depth difference "
        f"{max(depth_rel):.1e}; pixels on boxes {np.mean(on_boxes):.2f} (mean over cameras)"
    )

    lidar = rig.lidar
    global_SE3_lidar = global_SE3_ego.compose(lidar.ego_SE3_lidar)
    rng = np.random.default_rng(0)
    points, _ = simulate_sweep(lidar, global_SE3_lidar, boxes, rng)
    sweep_wall, sweep_cpu = per_call_seconds(
        lambda: simulate_sweep(lidar, global_SE3_lidar, boxes, rng), args.sweeps
    )
    # Reference: the same rays through the general caster (every box tested against every ray).
    directions_global = global_SE3_lidar.rotate_vectors(beam_directions_lidar(lidar)[0])
    cast_wall, cast_cpu = per_call_seconds(
        lambda: cast_rays(
            global_SE3_lidar.translation, directions_global, boxes, lidar.max_range_m
        ),
        args.sweeps,
    )
    n_beams = len(lidar.beam_elevation_deg)
    print(
        f"lidar sweep ({n_beams} beams x {lidar.azimuth_step_deg} deg, {len(points)} points): "
        f"{sweep_wall * 1e3:.1f} / {sweep_cpu * 1e3:.1f} ms, {1.0 / sweep_cpu:.1f} sweeps/s (CPU)"
    )
    print(
        f"cast_rays on the same rays (no per-azimuth culling, no noise): {cast_wall * 1e3:.1f} / "
        f"{cast_cpu * 1e3:.1f} ms; ratio {cast_cpu / sweep_cpu:.1f}x (CPU)"
    )


if __name__ == "__main__":
    main()
