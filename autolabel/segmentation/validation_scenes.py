"""Constructed 2D street scenes with exact visible masks, to validate and calibrate segmenters.

Each scene is a textured background (sky gradient, noisy road texture, lane marks, clutter) with
objects painted far to near: cars (body plus cabin, dark windows, vertical shading),
pedestrians (torso ellipse plus head), and boxy objects (quadrilaterals). For every object the
scene keeps its exact visible mask, a loose "projected box" around its full silhouette (as the
projection of a 3D box is looser than the silhouette), a depth, and LiDAR-like seed points:
horizontal scan lines across the silhouette, dropped where a nearer object hides them (a few kept
on the occluder, as LiDAR-camera parallax does), with pixel noise and a per-object calibration
offset. ``seed_offset_fraction`` and ``seed_outlier_fraction`` degrade the seeds on purpose so a
segmenter's score can be checked against the true IoU over a range of seed quality.

Everything is drawn with numpy and OpenCV from one ``numpy.random.Generator``: the same seed
gives the same scene.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

__all__ = ["ValidationScene", "make_validation_scene", "mask_iou"]


@dataclass(frozen=True)
class ValidationScene:
    """One constructed image and its N objects.

    Attributes:
        image: (H, W, 3) uint8 RGB.
        boxes_2d: (N, 4) float64 [u_min, v_min, u_max, v_max] loose boxes around each silhouette.
        points_uv: N arrays (K_i, 2) float64 seed pixels (u, v) of each object.
        depth_m: (N,) float64 distance of each object from the camera, metres.
        visible_masks: (N, H, W) bool true visible pixels of each object.
        seed_offset_px: (N,) float64 length of the calibration offset applied to each object's
            seeds, pixels.
    """

    image: np.ndarray
    boxes_2d: np.ndarray
    points_uv: list[np.ndarray]
    depth_m: np.ndarray
    visible_masks: np.ndarray
    seed_offset_px: np.ndarray


def mask_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N,) IoU of paired (N, H, W) bool masks; 0 where both are empty."""
    a = a.reshape(len(a), -1)
    b = b.reshape(len(b), -1)
    inter = np.logical_and(a, b).sum(axis=1)
    union = np.logical_or(a, b).sum(axis=1)
    return np.where(union > 0, inter / np.maximum(union, 1), 0.0)


def _smooth_noise(rng: np.random.Generator, height: int, width: int, cell_px: int) -> np.ndarray:
    coarse = rng.standard_normal((max(2, height // cell_px + 2), max(2, width // cell_px + 2)))
    return cv2.resize(coarse.astype(np.float32), (width, height), interpolation=cv2.INTER_CUBIC)


def _background(rng: np.random.Generator, height: int, width: int, horizon_v: int) -> np.ndarray:
    image = np.empty((height, width, 3), dtype=np.float32)
    rows = np.arange(height, dtype=np.float32)[:, None]
    sky_top = rng.uniform(90, 140, 3)
    sky_bottom = rng.uniform(170, 230, 3)
    t = np.clip(rows / max(horizon_v, 1), 0, 1)[..., None]
    image[:] = sky_top * (1 - t) + sky_bottom * t
    road = rng.uniform(70, 130) + rng.uniform(-12, 12, 3)
    texture = 14 * _smooth_noise(rng, height, width, 24) + 7 * _smooth_noise(rng, height, width, 5)
    ground = road[None, None, :] + texture[..., None]
    image[horizon_v:] = ground[horizon_v:]
    # Buildings, poles and vegetation along the horizon, so backgrounds are not one colour.
    for _ in range(int(rng.integers(6, 14))):
        w = int(rng.uniform(0.03, 0.15) * width)
        h = int(rng.uniform(0.05, 0.3) * height)
        u0 = int(rng.uniform(-0.05, 1.0) * width)
        colour = rng.uniform(30, 220, 3)
        cv2.rectangle(image, (u0, horizon_v - h), (u0 + w, horizon_v + 2), colour.tolist(), -1)
    # Lane marks converging to the horizon.
    for _ in range(int(rng.integers(1, 4))):
        u_far = rng.uniform(0.3, 0.7) * width
        u_near = rng.uniform(-0.3, 1.3) * width
        thickness = max(1, int(0.006 * width))
        cv2.line(
            image,
            (int(u_far), horizon_v),
            (int(u_near), height),
            (225.0, 225.0, 210.0),
            thickness,
        )
    return image


def _object_shape(
    rng: np.random.Generator, kind: int, u_center: float, v_bottom: float, scale_px: float
) -> tuple[np.ndarray, list[tuple[np.ndarray, float]]]:
    """Polygons of one object: (list of part polygons, list of (window polygon, darkness))."""
    parts: list[np.ndarray] = []
    details: list[tuple[np.ndarray, float]] = []
    if kind == 0:  # car: body and cabin
        width = scale_px
        body_h = width * rng.uniform(0.28, 0.4)
        cabin_h = width * rng.uniform(0.18, 0.28)
        u0, u1 = u_center - width / 2, u_center + width / 2
        body = np.array(
            [[u0, v_bottom], [u1, v_bottom], [u1, v_bottom - body_h], [u0, v_bottom - body_h]]
        )
        c0 = u0 + width * rng.uniform(0.12, 0.25)
        c1 = u1 - width * rng.uniform(0.12, 0.25)
        inset = width * rng.uniform(0.05, 0.12)
        top = v_bottom - body_h - cabin_h
        cabin = np.array(
            [[c0, v_bottom - body_h], [c1, v_bottom - body_h], [c1 - inset, top], [c0 + inset, top]]
        )
        parts += [body, cabin]
        shrink = 0.2 * cabin_h
        window = np.array(
            [
                [c0 + shrink, v_bottom - body_h - shrink * 0.5],
                [c1 - shrink, v_bottom - body_h - shrink * 0.5],
                [c1 - inset - shrink * 0.5, top + shrink],
                [c0 + inset + shrink * 0.5, top + shrink],
            ]
        )
        details.append((window, rng.uniform(0.25, 0.6)))
    elif kind == 1:  # pedestrian: torso ellipse and head
        height = scale_px
        torso = cv2.ellipse2Poly(
            (int(u_center), int(v_bottom - 0.42 * height)),
            (max(1, int(0.14 * height)), max(1, int(0.42 * height))),
            0,
            0,
            360,
            8,
        ).astype(np.float64)
        head = cv2.ellipse2Poly(
            (int(u_center), int(v_bottom - 0.9 * height)),
            (max(1, int(0.08 * height)), max(1, int(0.09 * height))),
            0,
            0,
            360,
            15,
        ).astype(np.float64)
        parts += [torso, head]
    else:  # a box seen at an angle: two visible faces
        width = scale_px
        height = width * rng.uniform(0.5, 1.1)
        skew = width * rng.uniform(-0.25, 0.25)
        quad = np.array(
            [
                [u_center - width / 2, v_bottom],
                [u_center + width / 2, v_bottom - abs(skew) * 0.3],
                [u_center + width / 2 + skew * 0.2, v_bottom - height],
                [u_center - width / 2 + skew * 0.2, v_bottom - height - abs(skew) * 0.3],
            ]
        )
        parts.append(quad)
        split = u_center + rng.uniform(-0.3, 0.3) * width
        face = quad.copy()
        face[[0, 3], 0] = np.maximum(face[[0, 3], 0], split)
        details.append((face, rng.uniform(0.75, 0.9)))
    return parts, details


def _seed_points(
    rng: np.random.Generator,
    full_mask: np.ndarray,
    visible_mask: np.ndarray,
    box: np.ndarray,
) -> np.ndarray:
    """LiDAR-like seeds: points on scan lines across the full silhouette, mostly visible ones."""
    rows = np.flatnonzero(full_mask.any(axis=1))
    if len(rows) == 0:
        return np.zeros((0, 2))
    v_top, v_bottom = rows[0], rows[-1]
    height_px = v_bottom - v_top + 1
    n_lines = int(np.clip(height_px / rng.uniform(4, 14), 1, 32))
    spacing = height_px / n_lines
    lines_v = v_top + spacing * (rng.uniform(0, 1) + np.arange(n_lines))
    step_u = rng.uniform(1.5, 6.0)
    u_grid = np.arange(box[0] + rng.uniform(0, step_u), box[2], step_u)
    uu, vv = np.meshgrid(u_grid, lines_v)
    points = np.column_stack([uu.ravel(), vv.ravel()])
    ui = np.clip(points[:, 0].astype(int), 0, full_mask.shape[1] - 1)
    vi = np.clip(points[:, 1].astype(int), 0, full_mask.shape[0] - 1)
    on_object = full_mask[vi, ui]
    seen = visible_mask[vi, ui]
    # Occluded returns mostly vanish; a few stay, displaced onto the occluder by parallax.
    keep = on_object & (seen | (rng.random(len(points)) < 0.1))
    points = points[keep]
    if len(points) > 400:
        points = points[np.sort(rng.choice(len(points), 400, replace=False))]
    return points


def make_validation_scene(
    seed: int,
    height_px: int = 360,
    width_px: int = 640,
    n_objects: int = 8,
    seed_offset_fraction: float | tuple[float, float] = (0.0, 0.04),
    seed_outlier_fraction: float | tuple[float, float] = (0.0, 0.05),
    low_contrast_probability: float = 0.15,
) -> ValidationScene:
    """A constructed street image with N objects, their true visible masks, boxes and seeds.

    Args:
        seed: seed of the scene's random generator.
        height_px, width_px: image size.
        n_objects: number of objects painted (some may end up fully hidden: visible mask empty).
        seed_offset_fraction: shift of each object's seeds as a fraction of its box diagonal (a
            calibration error), fixed or drawn uniformly from a (low, high) range per object.
        seed_outlier_fraction: fraction of seeds replaced by random points in the box, fixed or
            drawn per object from a (low, high) range.
        low_contrast_probability: chance that an object takes a colour close to the road's.

    Returns:
        ValidationScene.
    """
    rng = np.random.default_rng(seed)

    def draw(value: float | tuple[float, float]) -> float:
        return float(rng.uniform(*value)) if isinstance(value, tuple) else float(value)

    horizon_v = int(height_px * rng.uniform(0.35, 0.5))
    image = _background(rng, height_px, width_px, horizon_v)
    road_colour = image[horizon_v:].reshape(-1, 3).mean(axis=0)

    kinds = rng.integers(0, 3, n_objects)
    v_bottoms = rng.uniform(horizon_v + 0.08 * height_px, height_px * 1.05, n_objects)
    nearness = (v_bottoms - horizon_v) / (height_px - horizon_v)  # 0 at horizon, ~1 at bottom
    depth_m = 4.0 + 60.0 * (1.0 - np.clip(nearness, 0.0, 1.0)) ** 1.5
    u_centers = rng.uniform(0.05, 0.95, n_objects) * width_px
    order_far_to_near = np.argsort(-depth_m, kind="stable")

    label = np.full((height_px, width_px), -1, dtype=np.int32)
    full_masks = np.zeros((n_objects, height_px, width_px), dtype=bool)
    for i in order_far_to_near:
        base = {0: 0.45, 1: 0.35, 2: 0.25}[int(kinds[i])]
        scale_px = base * width_px * (0.15 + 0.85 * nearness[i]) * rng.uniform(0.7, 1.3)
        scale_px = max(scale_px, 6.0)
        parts, details = _object_shape(rng, int(kinds[i]), u_centers[i], v_bottoms[i], scale_px)
        part_mask = np.zeros((height_px, width_px), dtype=np.uint8)
        for polygon in parts:
            cv2.fillPoly(part_mask, [np.round(polygon).astype(np.int32)], 1)
        mask = part_mask.astype(bool)
        if rng.random() < low_contrast_probability:
            colour = road_colour + rng.uniform(-18, 18, 3)
        else:
            colour = rng.uniform(20, 235, 3)
        v_span = np.nonzero(mask.any(axis=1))[0]
        if len(v_span) == 0:
            continue
        shade = np.linspace(1.12, 0.85, v_span[-1] - v_span[0] + 1, dtype=np.float32)
        layer = np.zeros((height_px, width_px, 3), dtype=np.float32)
        layer[v_span[0] : v_span[-1] + 1] = colour[None, None, :] * shade[:, None, None]
        for polygon, darkness in details:
            detail = np.zeros((height_px, width_px), dtype=np.uint8)
            cv2.fillPoly(detail, [np.round(polygon).astype(np.int32)], 1)
            layer[detail.astype(bool)] *= darkness
        image[mask] = layer[mask]
        label[mask] = i
        full_masks[i] = mask

    image += rng.normal(0.0, 4.0, image.shape).astype(np.float32)
    image_u8 = np.clip(image, 0, 255).astype(np.uint8)
    visible = label[None] == np.arange(n_objects)[:, None, None]

    boxes = np.zeros((n_objects, 4))
    points_uv: list[np.ndarray] = []
    offsets = np.zeros(n_objects)
    for i in range(n_objects):
        rows = np.flatnonzero(full_masks[i].any(axis=1))
        cols = np.flatnonzero(full_masks[i].any(axis=0))
        if len(rows) == 0:
            points_uv.append(np.zeros((0, 2)))
            continue
        box = np.array([cols[0], rows[0], cols[-1] + 1, rows[-1] + 1], dtype=np.float64)
        size = np.array([box[2] - box[0], box[3] - box[1]])
        box[:2] -= rng.uniform(0.0, 0.1, 2) * size
        box[2:] += rng.uniform(0.0, 0.1, 2) * size
        box[[0, 2]] = box[[0, 2]].clip(0, width_px)
        box[[1, 3]] = box[[1, 3]].clip(0, height_px)
        boxes[i] = box
        points = _seed_points(rng, full_masks[i], visible[i], box)
        offset_px = draw(seed_offset_fraction) * float(np.hypot(*size))
        angle = rng.uniform(0, 2 * np.pi)
        points = points + offset_px * np.array([np.cos(angle), np.sin(angle)])
        points = points + rng.normal(0.0, 0.7, points.shape)
        n_outliers = int(round(draw(seed_outlier_fraction) * len(points)))
        if n_outliers:
            replace = rng.choice(len(points), n_outliers, replace=False)
            points[replace] = rng.uniform(box[:2], box[2:], (n_outliers, 2))
        offsets[i] = offset_px
        points_uv.append(points)
    return ValidationScene(
        image=image_u8,
        boxes_2d=boxes,
        points_uv=points_uv,
        depth_m=depth_m,
        visible_masks=visible,
        seed_offset_px=offsets,
    )
