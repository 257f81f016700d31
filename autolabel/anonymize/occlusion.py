"""Regions the camera cannot see: plates and heads behind a nearer vehicle's body.

Queued cars hide each other's plates, yet a patch placed from a 3D box is drawn whatever stands
in front of it, so the bands of the cars ahead stack up as blurred strips over the nearest car.
Two rules, on the boxes of annotated vehicles:

- wholly hidden: a region whose every pixel lies inside the silhouette of a nearer vehicle (its
  box slightly inset, entirely nearer than the region's nearest point) is seen, if at all, through
  two panes of that vehicle's glass, and is not blurred. The body is the lower 90 % of the box:
  with the whole box, a parked sedan's plate seen over a low convertible in front of it
  (PandaSet-002 keyframes 14 and 15, CAM_FRONT) was left out; 0.9 was chosen on all 16
  hand-labelled keyframes (0.95 and 1.0 miss that plate; 0.8 blurs more of every car);
- partly hidden (ray exit): a pixel of a region is left sharp when the ray through it leaves
  another vehicle's *lower* body (bumper to belt line, inset more: a box is squarer than the
  car's hood, mirrors and rounded corners) nearer than the region; the region is blurred where it
  is seen only (``partial_height_fraction`` and ``partial_inset_m`` chosen on keyframes 0 and 10,
  checked on the held-out 4, 7 and 13).

The ego vehicle's own body hides too, where a rig says where it is (``ego_body_m``): a rear
camera sees its own trunk at the bottom of every image, and a plate patch of a car behind the ego
projected over the trunk marks pixels that show the ego, never a plate (on PandaSet-002 the
patches of cars close behind reached down over the trunk of CAM_BACK).

Only boxes known to be solid objects hide anything: those with no extra margin (the dataset's
annotations at their own keyframes). A run's detections and tracks may be false positives (a
hedge labelled truck), and a box filled in along a track may be wrong, so they never hide a plate.
A moving body shrinks by how far it moves in the time the camera may see it before or after the
box (``GeometricConfig.time_sigma_s``).
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
            height (1: the whole box; 0.5: bumper to belt line, nothing seen through glass; 0.9:
            a box reaches above a low car's roof line).
        body_inset_m: the body is the box shrunk by this on every vertical side (mirrors, the
            rounded corners the box encloses).
        depth_margin_m: a body hides a region only if its farthest point is this much nearer
            than the region's nearest point (a pixel: if the ray leaves the body this much
            nearer).
        partial: also leave sharp the pixels of a region behind a nearer lower body (ray exit).
        partial_height_fraction, partial_inset_m: that lower body, as ``body_height_fraction``
            and ``body_inset_m``.
        ego_body_m: a box the ego vehicle's own body fills, in the ego frame: (x_min, x_max,
            y_min, y_max, z_min, z_max), metres. It hides what lies behind it (both rules; it is
            never shrunk, so it must lie inside the real body: a box reaching past the body
            would leave sharp what a camera sees beside it). () (default): unknown, the ego hides
            nothing; nuScenes-format datasets do not describe the ego's body, so it is the rig's
            setting (PandaSet-002's, measured on its images:
            ``tests/data/pandaset_002_anonymization_labels.json``'s ``ego_body_m``).
    """

    enabled: bool = True
    body_height_fraction: float = 0.9
    body_inset_m: float = 0.1
    depth_margin_m: float = 0.2
    partial: bool = True
    partial_height_fraction: float = 0.5
    partial_inset_m: float = 0.25
    ego_body_m: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not 0 < self.body_height_fraction <= 1:
            raise ValueError(
                f"body_height_fraction: must be in (0, 1], got {self.body_height_fraction!r}"
            )
        if not 0 < self.partial_height_fraction <= 1:
            raise ValueError(
                f"partial_height_fraction: must be in (0, 1], got {self.partial_height_fraction!r}"
            )
        for name in ("body_inset_m", "depth_margin_m", "partial_inset_m"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: must be >= 0, got {getattr(self, name)!r}")
        ego = np.asarray(self.ego_body_m, dtype=np.float64)
        if len(ego) and (
            ego.shape != (6,) or not np.isfinite(ego).all() or not (ego[1::2] > ego[::2]).all()
        ):
            raise ValueError(
                "ego_body_m: expected () or (x_min, x_max, y_min, y_max, z_min, z_max) with each "
                f"min < max, got {self.ego_body_m!r}"
            )


def opaque_bodies(
    boxes: Boxes3D,
    is_vehicle: np.ndarray,
    config: OcclusionConfig,
    time_sigma_s: float = 0.0,
    partial: bool = False,
) -> Boxes3D:
    """The lower, inset bodies of the vehicle boxes (same frame).

    A moving box is unsure along its velocity by its speed times ``time_sigma_s`` (the camera may
    see it that much earlier or later than the box shows it): the body shrinks by that on each
    side, along and across its heading, so it hides only what it hides wherever it was.
    """
    bodies = boxes[np.asarray(is_vehicle, dtype=bool)]
    size = bodies.size_wlh_m.copy()
    center = bodies.center_m.copy()
    fraction = config.partial_height_fraction if partial else config.body_height_fraction
    inset = config.partial_inset_m if partial else config.body_inset_m
    height = size[:, 2] * fraction
    center[:, 2] = center[:, 2] - 0.5 * size[:, 2] + 0.5 * height
    v = np.nan_to_num(np.asarray(bodies.velocity_mps, dtype=np.float64))
    c, s = np.cos(bodies.yaw_rad), np.sin(bodies.yaw_rad)
    along = np.abs(c * v[:, 0] + s * v[:, 1]) * time_sigma_s
    across = np.abs(-s * v[:, 0] + c * v[:, 1]) * time_sigma_s
    size[:, 0] = np.maximum(size[:, 0] - 2 * (inset + across), 0.0)
    size[:, 1] = np.maximum(size[:, 1] - 2 * (inset + along), 0.0)
    size[:, 2] = height
    return Boxes3D(
        center_m=center,
        size_wlh_m=size,
        yaw_rad=bodies.yaw_rad,
        label=bodies.label,
        track_id=bodies.track_id,
        frame=bodies.frame,
    )


@dataclass(frozen=True)
class _CameraBoxes:
    """Boxes given by their (B, 8, 3) corners in the camera frame."""

    corner_points: np.ndarray

    def __len__(self) -> int:
        return len(self.corner_points)

    def __getitem__(self, index) -> _CameraBoxes:
        return _CameraBoxes(self.corner_points[index])

    def corners(self) -> np.ndarray:
        return self.corner_points


def ego_body_camera(config: OcclusionConfig, camera: CameraCalibration) -> _CameraBoxes:
    """The ego's body (``config.ego_body_m``) in the camera frame: none when unknown, else one.

    Raises:
        ValueError: the camera's centre lies inside the body (the box is not a lower bound of
            the body the camera is mounted on: every ray would start inside it).
    """
    if not config.ego_body_m:
        return _CameraBoxes(np.zeros((0, 8, 3)))
    x0, x1, y0, y1, z0, z1 = config.ego_body_m
    box = Boxes3D(
        center_m=[[(x0 + x1) / 2, (y0 + y1) / 2, (z0 + z1) / 2]],
        size_wlh_m=[[y1 - y0, x1 - x0, z1 - z0]],
        yaw_rad=[0.0],
        frame="ego",
    )
    centre = camera.ego_SE3_camera.translation
    if x0 < centre[0] < x1 and y0 < centre[1] < y1 and z0 < centre[2] < z1:
        raise ValueError(
            f"ego_body_m: the camera at {np.round(centre, 3).tolist()} (ego frame) lies inside "
            f"the ego body {config.ego_body_m!r}"
        )
    corners = camera.ego_SE3_camera.inverse().transform_points(box.corners()[0])
    return _CameraBoxes(corners[None])


def nearest_body_depth(
    bodies: Boxes3D,
    camera: CameraCalibration,
    camera_SE3_global: SE3,
    camera_bodies: _CameraBoxes | None = None,
) -> np.ndarray:
    """(H, W) float32: per pixel, the smallest far depth (camera z, metres) of the bodies (and
    of ``camera_bodies``, given in the camera frame: the ego's) whose silhouette covers it; +inf
    where none does."""
    depth = np.full((camera.height_px, camera.width_px), np.inf, dtype=np.float32)
    corners = camera_SE3_global.transform_points(bodies.corners().reshape(-1, 3)).reshape(-1, 8, 3)
    if camera_bodies is not None:
        corners = np.concatenate([corners, camera_bodies.corners()])
    if len(corners) == 0:
        return depth
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


def ray_exit_depth(bodies_camera: _CameraBoxes, rays: np.ndarray) -> np.ndarray:
    """(B, P) camera depth (z, metres) at which each ray leaves each body; +inf where it misses
    the body or meets it only behind the camera.

    Args:
        bodies_camera: (B,) boxes by their corners in the camera frame (any orientation: the
            axes are the box's edges).
        rays: (P, 3) ray directions from the camera centre with z = 1 (so the ray parameter is
            the depth).
    """
    n_b = len(bodies_camera)
    if n_b == 0 or len(rays) == 0:
        return np.full((n_b, len(rays)), np.inf)
    corners = bodies_camera.corners()  # (B, 8, 3)
    centre = corners.mean(axis=1)
    # Box axes from its corners (Boxes3D.corners order: see autolabel.boxes); unit vectors and
    # half extents along them.
    axes = np.stack(
        [
            corners[:, 1] - corners[:, 0],
            corners[:, 3] - corners[:, 0],
            corners[:, 4] - corners[:, 0],
        ],
        axis=1,
    )  # (B, 3, 3) rows: edge vectors from corner 0
    half = 0.5 * np.linalg.norm(axes, axis=2)  # (B, 3)
    unit = axes / np.maximum(2 * half[..., None], 1e-12)
    origin = np.einsum("bij,bj->bi", unit, -centre)  # camera centre in box coordinates
    direction = np.einsum("bij,pj->bpi", unit, rays)  # (B, P, 3)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / direction
        t0 = (-half[:, None, :] - origin[:, None, :]) * inv
        t1 = (half[:, None, :] - origin[:, None, :]) * inv
    # A ray parallel to a slab is inside it for every t or for none.
    parallel = direction == 0
    inside_slab = np.abs(origin[:, None, :]) <= half[:, None, :]
    lo = np.where(parallel, np.where(inside_slab, -np.inf, np.inf), np.minimum(t0, t1))
    hi = np.where(parallel, np.where(inside_slab, np.inf, -np.inf), np.maximum(t0, t1))
    t_in = lo.max(axis=2)
    t_out = hi.min(axis=2)
    hit = (t_in <= t_out) & (t_out > 0)
    return np.where(hit, t_out, np.inf)


def hidden_pixels(
    polygons_px: np.ndarray,
    near_depth_m: np.ndarray,
    owner: np.ndarray,
    bodies: Boxes3D,
    body_owner: np.ndarray,
    camera: CameraCalibration,
    camera_SE3_global: SE3,
    margin_m: float,
    pad_px: int = 2,
    camera_bodies: _CameraBoxes | None = None,
) -> tuple[np.ndarray, list]:
    """Which pixels of each region a nearer body hides.

    A pixel of a region is hidden when the ray through its centre leaves some other vehicle's
    body at least ``margin_m`` nearer than the region's nearest point: that body stands wholly
    between the camera and the region along that ray.

    Args:
        polygons_px: (R, V, 2) the regions' convex polygons.
        near_depth_m: (R,) each region's nearest camera depth.
        owner: (R,) the box each region belongs to (its own body never hides it).
        bodies: (B,) opaque bodies, global frame.
        body_owner: (B,) the box each body is.
        camera, camera_SE3_global: the image's camera and pose.
        margin_m: depth margin.
        pad_px: the regions' pixels are tested this far beyond their bounds (blur margins).
        camera_bodies: more opaque bodies, in the camera frame, owned by no box (the ego's).

    Returns:
        (R,) int8 state (0: nothing hidden, 1: partly hidden, 2: wholly hidden) and per region
        None or ``(u0, v0, mask)``, the hidden pixels from (u0, v0) (see
        ``BlurRegions.hidden_px``), for the partly hidden ones.
    """
    from autolabel.anonymize.blur import polygons_mask

    n = len(polygons_px)
    state = np.zeros(n, np.int8)
    hidden: list = [None] * n
    cam_bodies = _to_camera(bodies, camera_SE3_global)
    body_owner = np.asarray(body_owner, dtype=np.int64)
    if camera_bodies is not None and len(camera_bodies):
        cam_bodies = _CameraBoxes(np.concatenate([cam_bodies.corners(), camera_bodies.corners()]))
        body_owner = np.concatenate([body_owner, np.full(len(camera_bodies), -1, np.int64)])
    if n == 0 or len(cam_bodies) == 0:
        return state, hidden
    height, width = camera.height_px, camera.width_px
    corners = cam_bodies.corners()
    near_body = corners[..., 2].min(axis=1)
    uv = box_silhouette_uv(camera.intrinsic, corners, NEAR_PLANE_M)
    finite = np.isfinite(uv).all(axis=2)
    # Silhouette bounds; a body wholly behind the camera has none (lo +inf, hi -inf).
    b_lo = np.where(finite[..., None], uv, np.inf).min(axis=1)
    b_hi = np.where(finite[..., None], uv, -np.inf).max(axis=1)
    k_inv = np.linalg.inv(camera.intrinsic)
    for r in range(n):  # the few dozen regions of one image
        poly = polygons_px[r]
        lo = np.clip(np.floor(poly.min(axis=0)).astype(np.int64) - pad_px, 0, [width, height])
        hi = np.clip(np.ceil(poly.max(axis=0)).astype(np.int64) + pad_px, 0, [width, height])
        if hi[0] <= lo[0] or hi[1] <= lo[1]:
            continue
        cand = np.flatnonzero(
            (body_owner != owner[r])
            & (near_body < near_depth_m[r] - margin_m)
            & (b_hi[:, 0] >= lo[0]) & (b_lo[:, 0] <= hi[0])
            & (b_hi[:, 1] >= lo[1]) & (b_lo[:, 1] <= hi[1])
        )  # fmt: skip
        if len(cand) == 0:
            continue
        inside = polygons_mask(poly[None], hi[1] - lo[1], hi[0] - lo[0], lo, pad_px)
        vv, uu = np.nonzero(inside)
        if len(vv) == 0:
            continue
        pix = np.stack([uu + lo[0] + 0.5, vv + lo[1] + 0.5, np.ones(len(uu))], axis=1)
        rays = pix @ k_inv.T
        rays = rays / rays[:, 2:3]
        exit_m = ray_exit_depth(cam_bodies[cand], rays).min(axis=0)
        gone = exit_m <= near_depth_m[r] - margin_m
        if gone.all():
            state[r] = 2
        elif gone.any():
            state[r] = 1
            mask = np.zeros_like(inside)
            mask[vv[gone], uu[gone]] = True
            hidden[r] = (int(lo[0]), int(lo[1]), mask)
    return state, hidden


def _to_camera(boxes: Boxes3D, camera_SE3_global: SE3) -> _CameraBoxes:
    corners = camera_SE3_global.transform_points(boxes.corners().reshape(-1, 3))
    return _CameraBoxes(corners.reshape(-1, 8, 3))
