"""A spinning LiDAR's sweep of a synthetic scene, by ray casting, with range noise and dropout.

One ray per beam elevation and azimuth step over a full turn, all fired at one instant from the
LiDAR's pose (no motion within the sweep). Returns within range become points in the LiDAR frame
with a nuScenes-like intensity in 0..255 from the material hit (ground dark, bodies medium, plates
retro-reflective and bright) and the incidence angle.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import lru_cache

import numpy as np

from autolabel.sensors import LidarCalibration
from autolabel.synth.raycast import (
    HIT_NOTHING,
    PART_BODY,
    PART_FACE,
    PART_PLATE,
    SceneBoxes,
    box_arrays,
    sweep_kernel,
)
from calib.se3 import SE3


@dataclass(frozen=True)
class LidarNoise:
    """Measurement imperfections of the simulated LiDAR.

    Attributes:
        range_sigma_m: standard deviation of the Gaussian noise added to each range, metres.
        dropout_prob: probability that a return is lost, in [0, 1).
        intensity_sigma_frac: relative standard deviation of the intensity noise.
    """

    range_sigma_m: float = 0.02
    dropout_prob: float = 0.05
    intensity_sigma_frac: float = 0.1

    def __post_init__(self) -> None:
        for f in fields(self):
            value = float(getattr(self, f.name))
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"LidarNoise.{f.name}: must be a finite number >= 0, got {value}")
        if self.dropout_prob >= 1:
            raise ValueError(f"LidarNoise.dropout_prob: must be < 1, got {self.dropout_prob}")


@dataclass(frozen=True)
class LidarReflectance:
    """Intensity (0..255) of each material at normal incidence, and its angle dependence.

    Diffuse materials (ground, body, face) fall off as ``floor + (1 - floor) cos(incidence)``;
    retro-reflective plates send light back along the ray, so they lose only ``plate_falloff``
    of their intensity from normal to grazing incidence.
    """

    ground: float = 12.0
    body: float = 40.0
    face: float = 25.0
    plate: float = 230.0
    diffuse_floor: float = 0.2
    plate_falloff: float = 0.15

    def __post_init__(self) -> None:
        for f in fields(self):
            value = float(getattr(self, f.name))
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"LidarReflectance.{f.name}: must be >= 0, got {value}")
        for name in ("diffuse_floor", "plate_falloff"):
            if getattr(self, name) > 1:
                raise ValueError(f"LidarReflectance.{name}: must be <= 1")


def beam_directions_lidar(lidar: LidarCalibration) -> tuple[np.ndarray, np.ndarray]:
    """Unit ray directions of one sweep in the LiDAR frame, azimuth-major firing order.

    Azimuths run from 0 (the LiDAR's +x) counter-clockwise in steps of ``azimuth_step_deg``,
    as many as fit below 360 degrees; at each azimuth every beam fires.

    Returns:
        directions (A * E, 3) float64 and ring (A * E,) int64 index of the beam (into
        ``lidar.beam_elevation_deg``); read-only (cached per beam layout).
    """
    directions, ring, _ = _validated_layout(lidar)
    return directions, ring


def _validated_layout(lidar: LidarCalibration) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    step = float(lidar.azimuth_step_deg)
    if not (0 < step <= 360):
        raise ValueError(f"{lidar.channel}: azimuth_step_deg must be in (0, 360], got {step}")
    elevation_deg = np.asarray(lidar.beam_elevation_deg, dtype=np.float64)
    if elevation_deg.ndim != 1 or len(elevation_deg) == 0:
        raise ValueError(f"{lidar.channel}: beam_elevation_deg must be a non-empty (E,) array")
    if not (np.abs(elevation_deg) <= 90).all():
        raise ValueError(f"{lidar.channel}: beam_elevation_deg must lie in [-90, 90]")
    if not lidar.max_range_m > 0:
        raise ValueError(f"{lidar.channel}: max_range_m must be > 0, got {lidar.max_range_m}")
    return _beam_layout(tuple(elevation_deg.tolist()), step)


@lru_cache(maxsize=8)
def _beam_layout(elevation_deg: tuple[float, ...], step_deg: float):
    """(directions (A*E, 3), ring (A*E,), azimuth_rad (A,)), read-only."""
    n_azimuth = int(np.ceil(360.0 / step_deg - 1e-9))
    azimuth = np.radians(np.arange(n_azimuth) * step_deg)
    elevation = np.radians(np.asarray(elevation_deg))
    az, el = np.meshgrid(azimuth, elevation, indexing="ij")
    directions = np.stack(
        [np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)], axis=-1
    ).reshape(-1, 3)
    ring = np.ascontiguousarray(np.broadcast_to(np.arange(len(elevation)), az.shape).reshape(-1))
    for arr in (directions, ring, azimuth):
        arr.setflags(write=False)
    return directions, ring, azimuth


def _intensity(
    hit: np.ndarray,
    cos_incidence: np.ndarray,
    boxes: SceneBoxes,
    reflectance: LidarReflectance,
) -> np.ndarray:
    """(R,) noise-free intensity of each return (hit >= 0 or ground) from material and angle."""
    part = np.full(len(hit), -1, np.int8)
    on_box = hit >= 0
    part[on_box] = boxes.part[hit[on_box]]
    base = np.select(
        [part == PART_BODY, part == PART_FACE, part == PART_PLATE],
        [reflectance.body, reflectance.face, reflectance.plate],
        default=reflectance.ground,
    )
    floor = reflectance.diffuse_floor
    diffuse = floor + (1.0 - floor) * cos_incidence
    retro = 1.0 - reflectance.plate_falloff * (1.0 - cos_incidence)
    return base * np.where(part == PART_PLATE, retro, diffuse)


def simulate_sweep(
    lidar: LidarCalibration,
    global_SE3_lidar: SE3,
    boxes: SceneBoxes,
    rng: np.random.Generator,
    noise: LidarNoise = LidarNoise(),
    reflectance: LidarReflectance = LidarReflectance(),
    ground_z: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """One LiDAR sweep of the scene (boxes on the ground plane ``z = ground_z``).

    Args:
        lidar: beam elevations, azimuth step and maximum range.
        global_SE3_lidar: LiDAR pose in the global frame.
        boxes: the scene's boxes in the global frame.
        rng: source of the noise; the same generator state gives the same sweep.
        noise: range noise, dropout and intensity noise.
        reflectance: intensity of each material.

    Returns:
        points_lidar: (P, 5) float32 [x, y, z, intensity, ring] in the LiDAR frame (metres,
            0..255, beam index), in firing order (azimuth-major).
        box_index: (P,) int32 scene box hit by each point, -2 for the ground.
    """
    directions_lidar, ring, azimuth_rad = _validated_layout(lidar)
    n_rays = len(directions_lidar)
    range_m = np.empty(n_rays, np.float64)
    hit = np.empty(n_rays, np.int32)
    cos_incidence = np.empty(n_rays, np.float64)
    sweep_kernel(
        np.ascontiguousarray(global_SE3_lidar.translation),
        np.ascontiguousarray(global_SE3_lidar.rotation),
        azimuth_rad,
        np.radians(np.asarray(lidar.beam_elevation_deg, dtype=np.float64)),
        *box_arrays(boxes),
        float(lidar.max_range_m),
        float(ground_z),
        range_m,
        hit,
        cos_incidence,
    )
    # Draw every random number for every ray, hit or not, so the stream does not depend on the
    # scene beyond its ray count.
    keep_draw = rng.random(n_rays)
    range_noise = rng.standard_normal(n_rays)
    intensity_noise = rng.standard_normal(n_rays)
    keep = (hit != HIT_NOTHING) & (keep_draw >= noise.dropout_prob)
    hit = hit[keep]
    intensity = _intensity(hit, cos_incidence[keep], boxes, reflectance)
    intensity = intensity * (1.0 + noise.intensity_sigma_frac * intensity_noise[keep])
    intensity = np.clip(np.rint(intensity), 0, 255)
    noisy_range_m = np.maximum(range_m[keep] + noise.range_sigma_m * range_noise[keep], 0.0)
    points = np.empty((len(hit), 5), np.float32)
    points[:, :3] = directions_lidar[keep] * noisy_range_m[:, None]
    points[:, 3] = intensity
    points[:, 4] = ring[keep]
    return points, hit.astype(np.int32)
