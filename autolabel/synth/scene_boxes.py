"""The scene at one instant as boxes for the ray caster, and per-object pixel statistics of a render.

``compose_scene`` places every object's parts (``catalogue.PartTemplates``) at the object's pose and
appends the static scenery (buildings), so box ``b`` of the result belongs to object
``owner[b]`` (-1 for scenery). ``object_pixels`` turns a ``RenderResult`` into per-object counts
(visible pixels, pixels the object would cover alone in the scene), the instance-id buffer and the
face / plate masks written to the ground-truth side files.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from autolabel.synth.catalogue import PartTemplates
from autolabel.synth.raycast import PART_FACE, PART_PLATE, SceneBoxes
from autolabel.synth.render import RenderResult


def scenery_boxes(
    center: np.ndarray, size_wlh: np.ndarray, yaw: np.ndarray, colour: np.ndarray
) -> SceneBoxes:
    """Static boxes (buildings) with owner -1."""
    n = len(center)
    return SceneBoxes(center, size_wlh, yaw, colour, np.full(n, -1, np.int32), np.zeros(n, np.int8))


def compose_scene(
    parts: PartTemplates, center: np.ndarray, yaw: np.ndarray, scenery: SceneBoxes
) -> SceneBoxes:
    """Boxes of all object parts at the objects' poses, then the scenery.

    Args:
        parts: the objects' parts in their own frames.
        center: (A, 3) object box centres, global frame, metres.
        yaw: (A,) object headings, radians.
        scenery: static boxes appended after the parts.

    Returns:
        SceneBoxes with the Q parts first (in ``parts`` order), then the scenery.
    """
    owner = parts.owner
    c, s = np.cos(yaw)[owner], np.sin(yaw)[owner]
    off = parts.offset
    part_center = np.asarray(center, dtype=np.float64)[owner] + np.stack(
        [c * off[:, 0] - s * off[:, 1], s * off[:, 0] + c * off[:, 1], off[:, 2]], axis=1
    )
    return SceneBoxes(
        np.concatenate([part_center, scenery.center]),
        np.concatenate([parts.size_wlh, scenery.size_wlh]),
        np.concatenate([np.asarray(yaw, dtype=np.float64)[owner], scenery.yaw]),
        np.concatenate([parts.colour, scenery.colour]),
        np.concatenate([owner, scenery.owner]),
        np.concatenate([parts.part, scenery.part]),
    )


@njit(cache=True)
def _pixel_pass_kernel(
    box_index, box_owner, box_part, part_face, part_plate, id_of_owner, ids, face, plate, stats
):
    """One pass over the image: id buffer, face / plate masks, and per-owner statistics
    ``stats[o] = [visible, face, plate, u_min, v_min, u_max, v_max]``.

    The part codes come as arguments, not globals, so a cached compile never holds stale ones."""
    height, width = box_index.shape
    for v in range(height):
        for u in range(width):
            b = box_index[v, u]
            if b < 0:
                continue
            o = box_owner[b]
            if o < 0:
                continue
            ids[v, u] = id_of_owner[o]
            st = stats[o]
            st[0] += 1
            p = box_part[b]
            if p == part_face:
                face[v, u] = 255
                st[1] += 1
            elif p == part_plate:
                plate[v, u] = 255
                st[2] += 1
            if u < st[3]:
                st[3] = u
            if v < st[4]:
                st[4] = v
            if u > st[5]:
                st[5] = u
            if v > st[6]:
                st[6] = v


@dataclass
class ObjectPixels:
    """Per-object pixel facts of one camera image (A objects of the scene).

    Attributes:
        visible_px: (A,) pixels where the object is the surface seen.
        unoccluded_px: (A,) pixels the object would cover alone in the scene (no other boxes, no
            ground): the union of its parts' silhouettes (the renderer's per-owner count).
        face_px, plate_px: (A,) visible face / plate pixels.
        bbox_px: (A, 4) [u_min, v_min, u_max, v_max] of the visible pixels, max exclusive
            (pixel edges, as ``calib.projection``); -1 where nothing is visible.
        object_ids: (K,) object indices listed in the side file (unoccluded_px > 0), in order;
            id buffer value k + 1 is object ``object_ids[k]``.
        ids: (H, W) uint16 id buffer (0 = no listed object).
        face_mask, plate_mask: (H, W) uint8, 255 on visible face / plate pixels.
    """

    visible_px: np.ndarray
    unoccluded_px: np.ndarray
    face_px: np.ndarray
    plate_px: np.ndarray
    bbox_px: np.ndarray
    object_ids: np.ndarray
    ids: np.ndarray
    face_mask: np.ndarray
    plate_mask: np.ndarray


def object_pixels(render: RenderResult, boxes: SceneBoxes, num_objects: int) -> ObjectPixels:
    """Per-object statistics, id buffer and part masks of a rendered image (see ``ObjectPixels``).

    Args:
        render: the image rendered from ``boxes`` (its per-owner counts are used).
        boxes: the scene's boxes; ``owner`` indexes the objects.
        num_objects: A, the number of objects of the scene.
    """
    owner = boxes.owner
    unoccluded = np.zeros(num_objects, np.int64)
    counted = render.owner_unoccluded_px[:num_objects]
    unoccluded[: len(counted)] = counted
    object_ids = np.flatnonzero(unoccluded > 0)
    id_of_owner = np.zeros(max(num_objects, 1), np.uint16)
    id_of_owner[object_ids] = np.arange(1, len(object_ids) + 1, dtype=np.uint16)
    h, w = render.box_index.shape
    ids = np.zeros((h, w), np.uint16)
    face = np.zeros((h, w), np.uint8)
    plate = np.zeros((h, w), np.uint8)
    stats = np.zeros((max(num_objects, 1), 7), np.int64)
    stats[:, 3:5] = np.iinfo(np.int64).max
    stats[:, 5:7] = -1
    _pixel_pass_kernel(
        render.box_index, owner, boxes.part, PART_FACE, PART_PLATE, id_of_owner, ids, face, plate,
        stats,
    )  # fmt: skip
    stats = stats[:num_objects]
    visible = stats[:, 0]
    bbox = np.where(
        visible[:, None] > 0,
        np.stack([stats[:, 3], stats[:, 4], stats[:, 5] + 1, stats[:, 6] + 1], axis=1),
        -1,
    )
    if (visible > unoccluded).any():
        raise RuntimeError("renderer reported fewer unoccluded than visible pixels for an object")
    return ObjectPixels(
        visible_px=visible,
        unoccluded_px=unoccluded,
        face_px=stats[:, 1],
        plate_px=stats[:, 2],
        bbox_px=bbox,
        object_ids=object_ids,
        ids=ids,
        face_mask=face,
        plate_mask=plate,
    )


@njit(cache=True)
def _count_points_kernel(points, centers, half_lwh, cos_yaw, sin_yaw, out):
    n_boxes = centers.shape[0]
    radius_sq = np.empty(n_boxes)
    for b in range(n_boxes):
        radius_sq[b] = half_lwh[b, 0] ** 2 + half_lwh[b, 1] ** 2
    for p in range(points.shape[0]):
        for b in range(n_boxes):
            dx = points[p, 0] - centers[b, 0]
            dy = points[p, 1] - centers[b, 1]
            if dx * dx + dy * dy > radius_sq[b]:
                continue
            dz = points[p, 2] - centers[b, 2]
            local_x = cos_yaw[b] * dx + sin_yaw[b] * dy
            local_y = -sin_yaw[b] * dx + cos_yaw[b] * dy
            if (
                abs(local_x) <= half_lwh[b, 0]
                and abs(local_y) <= half_lwh[b, 1]
                and abs(dz) <= half_lwh[b, 2]
            ):
                out[b] += 1


def count_points_in_boxes(
    points: np.ndarray, center: np.ndarray, size_wlh: np.ndarray, yaw: np.ndarray
) -> np.ndarray:
    """(N,) number of the (P, 3) points inside each of N boxes (same frame; boundary inclusive,
    as ``Boxes3D.points_inside`` and the devkit's ``points_in_box``)."""
    out = np.zeros(len(center), np.int64)
    if len(center) and len(points):
        size = np.asarray(size_wlh, dtype=np.float64)
        _count_points_kernel(
            np.ascontiguousarray(points[:, :3], dtype=np.float64),
            np.ascontiguousarray(center, dtype=np.float64),
            np.ascontiguousarray(0.5 * size[:, [1, 0, 2]]),
            np.cos(yaw),
            np.sin(yaw),
            out,
        )
    return out
