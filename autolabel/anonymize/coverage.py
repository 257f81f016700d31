"""How well a blur mask anonymizes and how much of the scene it spares.

- :func:`box_blurred_fraction`: the share of each labelled box (a plate, a face) that is blurred;
  a box counts as covered when that share reaches a threshold (0.9 in the release report);
- :func:`vehicle_sharp_fraction`: the share of each vehicle's projected silhouette (the convex
  hull of its 3D box in the image, the part inside the image) left sharp: what a model trained
  on the release still sees of the cars its questions ask about. With ``visible_only`` the
  silhouette is the part where the car is the nearest box (silhouettes of every box painted far to
  near): a car behind another shows only what the nearer one leaves, and a blurred plate of the
  nearer car does not count against the hidden one.
"""

from __future__ import annotations

import numpy as np

from autolabel.anonymize.blur import polygons_mask
from autolabel.anonymize.geometric import convex_polygons, silhouette_points
from autolabel.boxes import Boxes3D
from autolabel.clip import CameraImage


def box_blurred_fraction(mask: np.ndarray, boxes_px: np.ndarray) -> np.ndarray:
    """(N,) share of each (N, 4) [u0, v0, u1, v1] pixel box (max exclusive) inside ``mask``."""
    b = np.asarray(boxes_px, np.int64).reshape(-1, 4)
    # A summed-area table: each box's blurred count in four lookups.
    sat = np.zeros((mask.shape[0] + 1, mask.shape[1] + 1), np.int64)
    sat[1:, 1:] = np.cumsum(np.cumsum(mask, axis=0), axis=1)
    u0, v0, u1, v1 = (np.clip(b[:, i], 0, mask.shape[1 - i % 2]) for i in range(4))
    inside = sat[v1, u1] - sat[v0, u1] - sat[v1, u0] + sat[v0, u0]
    area = np.maximum((u1 - u0) * (v1 - v0), 1)
    return inside / area


def vehicle_sharp_fraction(
    mask: np.ndarray,
    boxes_global: Boxes3D,
    camera_image: CameraImage,
    classes: tuple[str, ...] = ("car",),
    min_pixels: int = 400,
    visible_only: bool = False,
) -> np.ndarray:
    """(K,) share of each vehicle's in-image silhouette not in ``mask``.

    Args:
        mask: (H, W) bool blurred pixels of the camera image.
        boxes_global: boxes in the global frame at the image's capture time (every class: with
            ``visible_only`` all of them occlude).
        camera_image: the image's calibration and pose.
        classes: detection classes counted.
        min_pixels: silhouettes with fewer pixels inside the image (visible pixels, with
            ``visible_only``) are skipped.
        visible_only: count only the pixels where the vehicle is the nearest box (by the
            distance of the box centre from the camera).
    """
    counted = np.isin(boxes_global.class_name, classes)
    if not counted.any():
        return np.zeros(0)
    sel = boxes_global if visible_only else boxes_global[counted]
    if not visible_only:
        counted = np.ones(len(sel), bool)
    cal = camera_image.calibration
    camera_SE3_global = camera_image.global_SE3_ego.compose(cal.ego_SE3_camera).inverse()
    corners = camera_SE3_global.transform_points(sel.corners().reshape(-1, 3)).reshape(-1, 8, 3)
    polygons, ok = convex_polygons(*silhouette_points(cal.intrinsic, corners))
    height_px, width_px = mask.shape
    owner = None
    if visible_only:
        owner = np.full((height_px, width_px), -1, np.int32)
        depth = np.linalg.norm(corners.mean(axis=1), axis=1)
        for i in np.argsort(-depth):  # far to near: nearer boxes paint over; a few dozen
            if ok[i]:
                owner[polygons_mask(polygons[i][None], height_px, width_px)] = i
    out = []
    for i in np.flatnonzero(ok & counted):  # one silhouette per vehicle in view
        car = owner == i if visible_only else polygons_mask(polygons[i][None], height_px, width_px)
        n = int(car.sum())
        if n >= min_pixels:
            out.append(1.0 - float((car & mask).sum()) / n)
    return np.asarray(out)
