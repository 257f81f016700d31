"""Regions the camera cannot see: a plate or head wholly behind a nearer vehicle's body.

Queued cars hide each other's plates, yet a patch placed from a 3D box is drawn whatever stands
in front of it, so the bands of the cars ahead stack up as blurred strips over the nearest car.
A region whose every pixel lies inside the silhouette of a nearer vehicle (its box slightly
inset, entirely nearer than the region's nearest point) is seen, if at all, through two panes of
that vehicle's glass, and is not blurred (on PandaSet-002's five hand-labelled keyframes, all of
them looked at to choose the body's height, every readable plate stays covered with the whole box
as the body).

Only boxes known to be solid objects hide anything: those with no extra margin (the dataset's
annotations at their own keyframes). A run's detections and tracks may be false positives (a
hedge labelled truck), and a box filled in along a track may be wrong, so they never hide a plate.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from autolabel.boxes import Boxes3D
from autolabel.sensors import CameraCalibration
from calib.projection import NEAR_PLANE_M, box_silhouette_uv
from calib.se3 import SE3

#: Sub-pixel bits for OpenCV's polygon fill (coordinates scaled by 2**4).
_SHIFT = 4


@dataclass(frozen=True)
class OcclusionConfig:
    """Which nearer bodies hide a region.

    Attributes:
        enabled: leave out regions hidden behind nearer vehicle bodies.
        body_height_fraction: the body is the lower part of a vehicle's box, this share of its
            height (1: the whole box; 0.5: bumper to belt line, nothing seen through glass).
        body_inset_m: the body is the box shrunk by this on every vertical side (mirrors, the
            rounded corners the box encloses).
        depth_margin_m: a body hides a region only if its farthest point is this much nearer
            than the region's nearest point.
    """

    enabled: bool = True
    body_height_fraction: float = 1.0
    body_inset_m: float = 0.1
    depth_margin_m: float = 0.2

    def __post_init__(self) -> None:
        if not 0 < self.body_height_fraction <= 1:
            raise ValueError(
                f"body_height_fraction: must be in (0, 1], got {self.body_height_fraction!r}"
            )
        for name in ("body_inset_m", "depth_margin_m"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: must be >= 0, got {getattr(self, name)!r}")


def opaque_bodies(
    boxes: Boxes3D, is_vehicle: np.ndarray, config: OcclusionConfig, time_sigma_s: float = 0.0
) -> Boxes3D:
    """The lower, inset bodies of the vehicle boxes (same frame).

    A moving box is unsure along its velocity by its speed times ``time_sigma_s`` (the camera may
    see it that much earlier or later than the box shows it): the body shrinks by that on each
    side, along and across its heading, so it hides only what it hides wherever it was.
    """
    bodies = boxes[np.asarray(is_vehicle, dtype=bool)]
    size = bodies.size_wlh_m.copy()
    center = bodies.center_m.copy()
    height = size[:, 2] * config.body_height_fraction
    center[:, 2] = center[:, 2] - 0.5 * size[:, 2] + 0.5 * height
    v = np.nan_to_num(np.asarray(bodies.velocity_mps, dtype=np.float64))
    c, s = np.cos(bodies.yaw_rad), np.sin(bodies.yaw_rad)
    along = np.abs(c * v[:, 0] + s * v[:, 1]) * time_sigma_s
    across = np.abs(-s * v[:, 0] + c * v[:, 1]) * time_sigma_s
    size[:, 0] = np.maximum(size[:, 0] - 2 * (config.body_inset_m + across), 0.0)
    size[:, 1] = np.maximum(size[:, 1] - 2 * (config.body_inset_m + along), 0.0)
    size[:, 2] = height
    return Boxes3D(
        center_m=center,
        size_wlh_m=size,
        yaw_rad=bodies.yaw_rad,
        label=bodies.label,
        track_id=bodies.track_id,
        frame=bodies.frame,
    )


def nearest_body_depth(
    bodies: Boxes3D, camera: CameraCalibration, camera_SE3_global: SE3
) -> np.ndarray:
    """(H, W) float32: per pixel, the smallest far depth (camera z, metres) of the bodies whose
    silhouette covers it; +inf where none does."""
    depth = np.full((camera.height_px, camera.width_px), np.inf, dtype=np.float32)
    if len(bodies) == 0:
        return depth
    corners = camera_SE3_global.transform_points(bodies.corners().reshape(-1, 3)).reshape(-1, 8, 3)
    far = corners[..., 2].max(axis=1)
    uv = box_silhouette_uv(camera.intrinsic, corners, NEAR_PLANE_M)
    # Farthest first: a nearer body's fill overwrites it, leaving the minimum.
    for i in np.argsort(-far, kind="stable"):
        pts = uv[i][np.isfinite(uv[i]).all(axis=1)]
        if len(pts) < 3:
            continue
        pts = np.clip(pts, -1.0e5, 1.0e5)
        hull = cv2.convexHull(np.round(pts * (1 << _SHIFT)).astype(np.int32))
        cv2.fillConvexPoly(depth, hull, float(far[i]), lineType=cv2.LINE_8, shift=_SHIFT)
    return depth


def hidden_regions(
    polygons_px: np.ndarray, near_depth_m: np.ndarray, body_depth: np.ndarray, margin_m: float
) -> np.ndarray:
    """(R,) bool: each polygon's pixels inside the image are all covered by a body whose far
    depth is at least ``margin_m`` nearer than the region's ``near_depth_m``; a region without a
    pixel inside the image is not called hidden (nothing to decide)."""
    height, width = body_depth.shape
    hidden = np.zeros(len(polygons_px), dtype=bool)
    for r, poly in enumerate(polygons_px):  # the few dozen regions of one image
        lo = np.clip(np.floor(poly.min(axis=0)).astype(np.int64), 0, [width, height])
        hi = np.clip(np.ceil(poly.max(axis=0)).astype(np.int64) + 1, 0, [width, height])
        if hi[0] <= lo[0] or hi[1] <= lo[1]:
            continue
        mask = np.zeros((hi[1] - lo[1], hi[0] - lo[0]), dtype=np.uint8)
        local = np.round((poly - lo) * (1 << _SHIFT)).astype(np.int32)
        cv2.fillConvexPoly(mask, local, 1, lineType=cv2.LINE_8, shift=_SHIFT)
        inside = mask.astype(bool)
        if not inside.any():
            continue
        crop = body_depth[lo[1] : hi[1], lo[0] : hi[0]]
        hidden[r] = bool(np.all(crop[inside] <= near_depth_m[r] - margin_m))
    return hidden
