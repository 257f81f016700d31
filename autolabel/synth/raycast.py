"""Ray casting against a synthetic scene of oriented boxes standing on a ground plane.

A scene at one instant is a ``SceneBoxes`` (plain arrays in the global frame) plus the ground
plane ``z = ground_z``. ``cast_rays`` finds the nearest hit of each ray with an exact slab test in
each box's own frame. The numba kernels of the camera renderer (``render.py``: ``render_kernel``)
and of the LiDAR simulator (``lidar_sim.py``: ``sweep_kernel``) are defined here as well, beside the
slab test they inline, because numba's on-disk cache of a kernel is invalidated only when the
kernel's own file changes.

Conventions shared by every caster here:

* A box whose inside contains the ray origin is invisible to that ray (its faces are back faces
  seen from inside), so sensors mounted inside the ego vehicle's own box still see out.
* The nearest hit wins; on an exact tie the lower box index wins, and any box wins over the ground.
* Hit faces are numbered ``2 k`` for the box's ``+axis_k`` face and ``2 k + 1`` for ``-axis_k``,
  with axes k = 0 (x, length), 1 (y, width), 2 (z, height) of the box frame; ``FACE_GROUND`` for
  the ground plane.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit

#: ``hit`` value of a ray that hits nothing (sky).
HIT_NOTHING = -1
#: ``hit`` value of a ray that hits the ground plane.
HIT_GROUND = -2
#: Face id of a ground hit (box faces are 0..5, see the module docstring).
FACE_GROUND = 6
#: Face id where nothing was hit.
FACE_NONE = -1

#: Material parts of a scene box.
PART_BODY, PART_FACE, PART_PLATE = 0, 1, 2


def _array(value, dtype, shape_tail: tuple[int, ...], n: int | None, name: str) -> np.ndarray:
    out = np.ascontiguousarray(value, dtype=dtype)
    if out.ndim != 1 + len(shape_tail) or out.shape[1:] != shape_tail:
        raise ValueError(f"SceneBoxes.{name}: expected shape (B, *{shape_tail}), got {out.shape}")
    if n is not None and len(out) != n:
        raise ValueError(f"SceneBoxes.{name}: expected {n} rows like center, got {len(out)}")
    return out


@dataclass(frozen=True)
class SceneBoxes:
    """B oriented boxes of a synthetic scene at one instant, in the global frame.

    Attributes:
        center: (B, 3) float64 box centres, metres.
        size_wlh: (B, 3) float64 width (y extent), length (x extent), height (z extent) in the box
            frame, metres, all > 0.
        yaw: (B,) float64 heading of the box's x (length) axis about +z, radians.
        colour: (B, 3) uint8 RGB albedo.
        owner: (B,) int32 index of the annotated object this box belongs to, -1 for scenery.
        part: (B,) int8 material: 0 body (Lambert-shaded, diffuse), 1 face (flat colour, e.g. a
            windscreen or a pedestrian's face), 2 plate (flat colour, retro-reflective to LiDAR).
    """

    center: np.ndarray
    size_wlh: np.ndarray
    yaw: np.ndarray
    colour: np.ndarray
    owner: np.ndarray
    part: np.ndarray

    def __post_init__(self) -> None:
        center = _array(self.center, np.float64, (3,), None, "center")
        n = len(center)
        size = _array(self.size_wlh, np.float64, (3,), n, "size_wlh")
        yaw = _array(self.yaw, np.float64, (), n, "yaw")
        colour = _array(self.colour, np.uint8, (3,), n, "colour")
        owner = _array(self.owner, np.int32, (), n, "owner")
        part = _array(self.part, np.int8, (), n, "part")
        if not (np.isfinite(center).all() and np.isfinite(size).all() and np.isfinite(yaw).all()):
            raise ValueError("SceneBoxes: center, size_wlh and yaw must be finite")
        if n and not (size > 0).all():
            raise ValueError("SceneBoxes.size_wlh: every extent must be > 0 metres")
        if n and ((part < PART_BODY) | (part > PART_PLATE)).any():
            raise ValueError("SceneBoxes.part: values must be 0 (body), 1 (face) or 2 (plate)")
        for name, arr in (
            ("center", center),
            ("size_wlh", size),
            ("yaw", yaw),
            ("colour", colour),
            ("owner", owner),
            ("part", part),
        ):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    def __len__(self) -> int:
        return len(self.center)

    @classmethod
    def empty(cls) -> SceneBoxes:
        return cls(
            np.zeros((0, 3)),
            np.zeros((0, 3)),
            np.zeros(0),
            np.zeros((0, 3), np.uint8),
            np.zeros(0, np.int32),
            np.zeros(0, np.int8),
        )

    @classmethod
    def concatenate(cls, parts: list[SceneBoxes]) -> SceneBoxes:
        """Stack several box sets (indices of later parts shift by the lengths of earlier ones)."""
        if not parts:
            return cls.empty()
        names = ("center", "size_wlh", "yaw", "colour", "owner", "part")
        return cls(*(np.concatenate([getattr(p, name) for p in parts]) for name in names))

    def half_extents_xyz(self) -> np.ndarray:
        """(B, 3) half extents along the box frame's x (length), y (width), z (height), metres."""
        return np.ascontiguousarray(self.size_wlh[:, [1, 0, 2]] * 0.5)

    def corners(self) -> np.ndarray:
        """(B, 8, 3) corners in the global frame, in the nuScenes ``Box.corners()`` order."""
        from autolabel.boxes import CORNER_SIGNS

        local = CORNER_SIGNS[None, :, :] * self.half_extents_xyz()[:, None, :]
        c, s = np.cos(self.yaw)[:, None], np.sin(self.yaw)[:, None]
        x = c * local[..., 0] - s * local[..., 1]
        y = s * local[..., 0] + c * local[..., 1]
        return np.stack([x, y, local[..., 2]], axis=-1) + self.center[:, None, :]


@dataclass(frozen=True)
class GroundTexture:
    """Top-down colour of the ground plane.

    Attributes:
        rgb: (H, W, 3) uint8 texture; row index grows with global +y, column index with +x.
        origin_xy: (2,) global x, y (metres) of the outer corner of texel [0, 0].
        resolution_m: metres per texel (square texels).
        outside_rgb: (3,) uint8 colour of the ground outside the texture.
    """

    rgb: np.ndarray
    origin_xy: np.ndarray
    resolution_m: float
    outside_rgb: np.ndarray = field(default_factory=lambda: np.array([96, 96, 92], np.uint8))

    def __post_init__(self) -> None:
        rgb = np.ascontiguousarray(self.rgb, dtype=np.uint8)
        if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.shape[0] < 1 or rgb.shape[1] < 1:
            raise ValueError(f"GroundTexture.rgb: expected shape (H, W, 3), got {rgb.shape}")
        origin = np.asarray(self.origin_xy, dtype=np.float64)
        if origin.shape != (2,) or not np.isfinite(origin).all():
            raise ValueError(f"GroundTexture.origin_xy: expected 2 finite numbers, got {origin}")
        res = float(self.resolution_m)
        if not (res > 0 and np.isfinite(res)):
            raise ValueError(f"GroundTexture.resolution_m: must be > 0, got {self.resolution_m}")
        outside = np.asarray(self.outside_rgb, dtype=np.uint8)
        if outside.shape != (3,):
            raise ValueError(f"GroundTexture.outside_rgb: expected 3 values, got {outside.shape}")
        object.__setattr__(self, "rgb", rgb)
        object.__setattr__(self, "origin_xy", origin)
        object.__setattr__(self, "resolution_m", res)
        object.__setattr__(self, "outside_rgb", outside)

    @classmethod
    def plain(cls, rgb: tuple[int, int, int] = (96, 96, 92)) -> GroundTexture:
        """A ground of one colour everywhere."""
        colour = np.array(rgb, np.uint8)
        return cls(colour.reshape(1, 1, 3), np.zeros(2), 1.0, colour)


@njit(cache=True, inline="always")
def _slab_entry(ox, oy, oz, dx, dy, dz, hx, hy, hz, t_min):
    """Entry distance and face of a ray into an axis-aligned box centred at the origin.

    The ray is ``o + t d`` in the box frame; ``h`` are half extents. Returns (t, face) with t the
    entry parameter, or (inf, -1) when the ray misses the box or enters it before ``t_min``
    (which also culls rays starting inside the box).
    """
    t_enter = -np.inf
    t_exit = np.inf
    face = -1
    # x slab
    if dx != 0.0:
        inv = 1.0 / dx
        t1 = (-hx - ox) * inv
        t2 = (hx - ox) * inv
        if t1 > t2:
            t1, t2 = t2, t1
        if t1 > t_enter:
            t_enter = t1
            face = 1 if dx > 0.0 else 0
        if t2 < t_exit:
            t_exit = t2
    elif ox < -hx or ox > hx:
        return np.inf, -1
    # y slab
    if dy != 0.0:
        inv = 1.0 / dy
        t1 = (-hy - oy) * inv
        t2 = (hy - oy) * inv
        if t1 > t2:
            t1, t2 = t2, t1
        if t1 > t_enter:
            t_enter = t1
            face = 3 if dy > 0.0 else 2
        if t2 < t_exit:
            t_exit = t2
    elif oy < -hy or oy > hy:
        return np.inf, -1
    # z slab
    if dz != 0.0:
        inv = 1.0 / dz
        t1 = (-hz - oz) * inv
        t2 = (hz - oz) * inv
        if t1 > t2:
            t1, t2 = t2, t1
        if t1 > t_enter:
            t_enter = t1
            face = 5 if dz > 0.0 else 4
        if t2 < t_exit:
            t_exit = t2
    elif oz < -hz or oz > hz:
        return np.inf, -1
    if t_enter > t_exit or t_enter < t_min:
        return np.inf, -1
    return t_enter, face


@njit(cache=True, inline="always")
def _nearest_hit(
    ox, oy, oz, dx, dy, dz, centers, half_xyz, cos_yaw, sin_yaw, radius,
    candidates, n_candidates, max_range_m, ground_z,
):  # fmt: skip
    """Nearest hit (t, hit, face) of the ray ``o + t d`` (unit d) among ``candidates[:n]`` boxes.

    ``candidates`` must list box indices in increasing order (ties go to the lower index).
    """
    best_t = np.inf
    best_hit = HIT_NOTHING
    best_face = FACE_NONE
    if dz < 0.0 and oz > ground_z:
        t_ground = (ground_z - oz) / dz
        if t_ground <= max_range_m:
            best_t = t_ground
            best_hit = HIT_GROUND
            best_face = FACE_GROUND
    for j in range(n_candidates):
        b = candidates[j]
        px = centers[b, 0] - ox
        py = centers[b, 1] - oy
        pz = centers[b, 2] - oz
        # Bounding-sphere rejection: the box lies within ``radius`` of its centre.
        along = px * dx + py * dy + pz * dz
        r = radius[b]
        if along + r < 0.0 or along - r > best_t or along - r > max_range_m:
            continue
        if px * px + py * py + pz * pz - along * along > r * r:
            continue
        c, s = cos_yaw[b], sin_yaw[b]
        # Origin and direction in the box frame (rotate by -yaw about z).
        lox = -(c * px + s * py)
        loy = -(-s * px + c * py)
        ldx = c * dx + s * dy
        ldy = -s * dx + c * dy
        t, face = _slab_entry(
            lox, loy, -pz, ldx, ldy, dz, half_xyz[b, 0], half_xyz[b, 1], half_xyz[b, 2], 0.0
        )
        if t > max_range_m:
            continue
        if t < best_t or (t == best_t and best_hit == HIT_GROUND):
            best_t = t
            best_hit = b
            best_face = face
    return best_t, best_hit, best_face


@njit(cache=True)
def _cast_rays_kernel(
    origins, directions, centers, half_xyz, cos_yaw, sin_yaw, radius, max_range_m, ground_z,
    out_t, out_hit, out_face,
):  # fmt: skip
    """Nearest hit of each ray ``origins[i] + t directions[i]`` (unit directions), t in metres."""
    n_boxes = centers.shape[0]
    all_boxes = np.arange(n_boxes)
    for i in range(origins.shape[0]):
        t, hit, face = _nearest_hit(
            origins[i, 0], origins[i, 1], origins[i, 2],
            directions[i, 0], directions[i, 1], directions[i, 2],
            centers, half_xyz, cos_yaw, sin_yaw, radius, all_boxes, n_boxes, max_range_m, ground_z,
        )  # fmt: skip
        out_t[i] = t
        out_hit[i] = hit
        out_face[i] = face


def box_arrays(boxes: SceneBoxes) -> tuple[np.ndarray, ...]:
    """Kernel inputs: centers (B, 3), half extents xyz (B, 3), cos yaw, sin yaw, radius (B,).

    ``radius`` bounds each box: every point of box b lies within ``radius[b]`` of its centre.
    """
    half = boxes.half_extents_xyz()
    return (
        np.ascontiguousarray(boxes.center),
        half,
        np.cos(boxes.yaw),
        np.sin(boxes.yaw),
        np.sqrt((half**2).sum(axis=1)) * (1.0 + 1e-9) + 1e-9,
    )


def cast_rays_with_faces(
    origins: np.ndarray,
    directions: np.ndarray,
    boxes: SceneBoxes,
    max_range_m: float,
    ground_z: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``cast_rays`` plus the face hit and the unit directions used.

    Returns:
        t_m (R,) float64, hit (R,) int32, face (R,) int8 (0..5 box faces, ``FACE_GROUND``, or
        ``FACE_NONE``), unit_directions (R, 3) float64.
    """
    dirs = np.asarray(directions, dtype=np.float64)
    if dirs.ndim != 2 or dirs.shape[1] != 3:
        raise ValueError(f"cast_rays: directions must be (R, 3), got {dirs.shape}")
    orig = np.asarray(origins, dtype=np.float64)
    if orig.shape == (3,):
        orig = np.broadcast_to(orig, dirs.shape)
    if orig.shape != dirs.shape:
        raise ValueError(
            f"cast_rays: origins must be (3,) or (R, 3) like directions {dirs.shape}, got {orig.shape}"
        )
    norm = np.linalg.norm(dirs, axis=1)
    if not (norm > 0).all() or not np.isfinite(norm).all():
        raise ValueError("cast_rays: every direction must be finite and non-zero")
    if not max_range_m > 0:
        raise ValueError(f"cast_rays: max_range_m must be > 0, got {max_range_m}")
    unit = np.ascontiguousarray(dirs / norm[:, None])
    orig = np.ascontiguousarray(orig)
    n = len(unit)
    t = np.empty(n, np.float64)
    hit = np.empty(n, np.int32)
    face = np.empty(n, np.int8)
    _cast_rays_kernel(
        orig, unit, *box_arrays(boxes), float(max_range_m), float(ground_z), t, hit, face
    )
    return t, hit, face, unit


def cast_rays(
    origins: np.ndarray,
    directions: np.ndarray,
    boxes: SceneBoxes,
    max_range_m: float,
    ground_z: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Nearest hit of each ray with the boxes and the ground plane ``z = ground_z`` (global frame).

    Args:
        origins: (R, 3) or (3,) ray origins, metres, global frame.
        directions: (R, 3) ray directions, any non-zero length (normalised here).
        boxes: the scene's boxes.
        max_range_m: hits farther than this are dropped (reported as no hit).
        ground_z: height of the ground plane, metres; it is seen only from above.

    Returns:
        t_m: (R,) float64 distance along the unit direction to the hit, metres; inf for no hit.
        hit: (R,) int32 box index, ``HIT_GROUND`` (-2) for the ground, ``HIT_NOTHING`` (-1).
    """
    t, hit, _, _ = cast_rays_with_faces(origins, directions, boxes, max_range_m, ground_z)
    return t, hit


@njit(cache=True)
def render_kernel(
    origin, ray_a, ray_b, ray_c, near_m,
    centers, half_xyz, cos_yaw, sin_yaw, rects, colours, shade,
    ground_z, tex, tex_origin, tex_res, outside_rgb, sky_horizon, sky_zenith,
    order, owner, shared_owner, owner_stamp,
    image, box_index, depth, face, unoccluded, owner_unoccluded,
):  # fmt: skip
    """Fill image, box_index, depth (float64 z-buffer) and face; count unoccluded pixels.

    The ray of pixel (u, v) is ``origin + s (ray_a + (u + .5) ray_b + (v + .5) ray_c)`` in the
    global frame, with the direction scaled so that s is the depth along the optical axis.
    Boxes are visited in ``order``, which must group boxes of one owner together (owners >= 0);
    for owners of several boxes (``shared_owner``), ``owner_stamp`` (H, W) int32 filled with -1
    marks the last owner that counted a pixel, so ``owner_unoccluded[o]`` counts the union of
    owner o's boxes. Which box wins a pixel does not depend on the order: the nearest, on a tie
    the lower index.
    """
    height, width = box_index.shape
    ox, oy, oz = origin[0], origin[1], origin[2]
    tex_h, tex_w = tex.shape[0], tex.shape[1]
    above_ground = oz > ground_z
    # Ground and sky.
    for v in range(height):
        vc = v + 0.5
        rx = ray_a[0] + vc * ray_c[0]
        ry = ray_a[1] + vc * ray_c[1]
        rz = ray_a[2] + vc * ray_c[2]
        for u in range(width):
            uc = u + 0.5
            dz = rz + uc * ray_b[2]
            if above_ground and dz < 0.0:
                s = (ground_z - oz) / dz
                if s >= near_m:
                    gx = ox + s * (rx + uc * ray_b[0])
                    gy = oy + s * (ry + uc * ray_b[1])
                    col = np.floor((gx - tex_origin[0]) / tex_res)
                    row = np.floor((gy - tex_origin[1]) / tex_res)
                    if 0 <= row < tex_h and 0 <= col < tex_w:
                        ir, ic = int(row), int(col)
                        for k in range(3):
                            image[v, u, k] = tex[ir, ic, k]
                    else:
                        for k in range(3):
                            image[v, u, k] = outside_rgb[k]
                    depth[v, u] = s
                    box_index[v, u] = HIT_GROUND
                    face[v, u] = FACE_NONE
                    continue
            dx = rx + uc * ray_b[0]
            dy = ry + uc * ray_b[1]
            sin_elev = dz / np.sqrt(dx * dx + dy * dy + dz * dz)
            w = min(1.0, max(0.0, 2.0 * sin_elev))
            for k in range(3):
                image[v, u, k] = np.uint8(sky_horizon[k] * (1.0 - w) + sky_zenith[k] * w + 0.5)
            depth[v, u] = np.inf
            box_index[v, u] = HIT_NOTHING
            face[v, u] = FACE_NONE
    # Boxes, each against the pixels of its screen rectangle, z-buffered.
    for b in order:
        u0, v0, u1, v1 = rects[b, 0], rects[b, 1], rects[b, 2], rects[b, 3]
        if u1 <= u0 or v1 <= v0:
            continue
        c, s_ = cos_yaw[b], sin_yaw[b]
        px, py, pz = ox - centers[b, 0], oy - centers[b, 1], oz - centers[b, 2]
        lox, loy, loz = c * px + s_ * py, -s_ * px + c * py, pz
        la0, la1, la2 = c * ray_a[0] + s_ * ray_a[1], -s_ * ray_a[0] + c * ray_a[1], ray_a[2]
        lb0, lb1, lb2 = c * ray_b[0] + s_ * ray_b[1], -s_ * ray_b[0] + c * ray_b[1], ray_b[2]
        lc0, lc1, lc2 = c * ray_c[0] + s_ * ray_c[1], -s_ * ray_c[0] + c * ray_c[1], ray_c[2]
        hx, hy, hz = half_xyz[b, 0], half_xyz[b, 1], half_xyz[b, 2]
        o = owner[b]
        stamp = shared_owner[b]
        count = 0
        for v in range(v0, v1):
            vc = v + 0.5
            rx = la0 + vc * lc0
            ry = la1 + vc * lc1
            rz = la2 + vc * lc2
            for u in range(u0, u1):
                uc = u + 0.5
                t, f = _slab_entry(
                    lox, loy, loz, rx + uc * lb0, ry + uc * lb1, rz + uc * lb2, hx, hy, hz, near_m
                )
                if t == np.inf:
                    continue
                count += 1
                if stamp and owner_stamp[v, u] != o:
                    owner_stamp[v, u] = o
                    owner_unoccluded[o] += 1
                current = depth[v, u]
                if t < current or (
                    t == current and (box_index[v, u] == HIT_GROUND or b < box_index[v, u])
                ):
                    depth[v, u] = t
                    box_index[v, u] = b
                    face[v, u] = f
        unoccluded[b] = count
        if o >= 0 and not stamp:
            owner_unoccluded[o] = count
    # Colour of the box pixels.
    for v in range(height):
        for u in range(width):
            b = box_index[v, u]
            if b >= 0:
                k_shade = shade[b, face[v, u]]
                for k in range(3):
                    image[v, u, k] = np.uint8(min(255.0, colours[b, k] * k_shade + 0.5))


@njit(cache=True)
def sweep_kernel(
    origin, global_R_lidar, azimuth_rad, elevation_rad,
    centers, half_xyz, cos_yaw, sin_yaw, radius, max_range_m, ground_z,
    out_t, out_hit, out_cos_incidence,
):  # fmt: skip
    """Cast every ray of a sweep (azimuth-major); per azimuth only the boxes near its half-plane.

    The beams of one azimuth lie in the half-plane spanned by the LiDAR's z axis and its
    horizontal heading there; a box whose bounding sphere misses that half-plane cannot be hit by
    any of them, which culls most boxes before the per-ray tests.
    """
    n_boxes = centers.shape[0]
    n_beams = elevation_rad.shape[0]
    ox, oy, oz = origin[0], origin[1], origin[2]
    zx, zy, zz = global_R_lidar[0, 2], global_R_lidar[1, 2], global_R_lidar[2, 2]
    cos_el = np.cos(elevation_rad)
    sin_el = np.sin(elevation_rad)
    candidates = np.empty(n_boxes, np.int64)
    for j in range(azimuth_rad.shape[0]):
        ca, sa = np.cos(azimuth_rad[j]), np.sin(azimuth_rad[j])
        # Heading h = R (ca, sa, 0) and the half-plane's normal n = R (-sa, ca, 0), global frame.
        hx = global_R_lidar[0, 0] * ca + global_R_lidar[0, 1] * sa
        hy = global_R_lidar[1, 0] * ca + global_R_lidar[1, 1] * sa
        hz = global_R_lidar[2, 0] * ca + global_R_lidar[2, 1] * sa
        nx = -global_R_lidar[0, 0] * sa + global_R_lidar[0, 1] * ca
        ny = -global_R_lidar[1, 0] * sa + global_R_lidar[1, 1] * ca
        nz = -global_R_lidar[2, 0] * sa + global_R_lidar[2, 1] * ca
        n_candidates = 0
        for b in range(n_boxes):
            px, py, pz = centers[b, 0] - ox, centers[b, 1] - oy, centers[b, 2] - oz
            r = radius[b]
            if abs(px * nx + py * ny + pz * nz) > r or px * hx + py * hy + pz * hz < -r:
                continue
            candidates[n_candidates] = b
            n_candidates += 1
        for i in range(n_beams):
            dx = cos_el[i] * hx + sin_el[i] * zx
            dy = cos_el[i] * hy + sin_el[i] * zy
            dz = cos_el[i] * hz + sin_el[i] * zz
            t, hit, face = _nearest_hit(
                ox, oy, oz, dx, dy, dz, centers, half_xyz, cos_yaw, sin_yaw, radius,
                candidates, n_candidates, max_range_m, ground_z,
            )  # fmt: skip
            k = j * n_beams + i
            out_t[k] = t
            out_hit[k] = hit
            if hit == HIT_GROUND:
                out_cos_incidence[k] = abs(dz)
            elif hit >= 0:
                # Outward normal of face 2a (+axis a) or 2a + 1 (-axis a), rotated by the yaw.
                axis = face // 2
                sign = 1.0 if face % 2 == 0 else -1.0
                c, s = cos_yaw[hit], sin_yaw[hit]
                if axis == 0:
                    dot = c * dx + s * dy
                elif axis == 1:
                    dot = -s * dx + c * dy
                else:
                    dot = dz
                out_cos_incidence[k] = abs(sign * dot)
            else:
                out_cos_incidence[k] = 0.0
