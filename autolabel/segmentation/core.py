"""The segmenter interface shared by every backend: inputs, result type, errors.

A segmenter turns one camera image and the projected 2D boxes of the objects seen in it into one
instance mask and one quality score per object, in [0, 1]. SAM2's score is its IoU head's
predicted IoU with the true visible mask; the LiDAR-seeded GrabCut estimates the same from
calibrated mask features; the geometric segmenter's score is the share of the object's own
projected LiDAR returns inside its mask times the unoccluded share of its hull (no colour, so it
means the same on synthetic and real images). Each backend has its own visibility thresholds
(``autolabel.visibility.visibility_defaults``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "SegmentationResult",
    "Segmenter",
    "SegmenterUnavailable",
    "config_from_mapping",
    "validate_segment_inputs",
]


class SegmenterUnavailable(RuntimeError):
    """A backend cannot run here (missing weights or package); the message says what to pass."""


@dataclass(frozen=True)
class SegmentationResult:
    """Masks and quality scores of the N objects of one image.

    Attributes:
        masks: (N, H, W) bool, True on the pixels of each object.
        score: (N,) float32 in [0, 1], the predicted IoU of each mask with the true visible mask.
        image_score: (N,) float32, image evidence that each object is there, measured by backends
            whose score uses no colour (the geometric one, for tracks it does not trust); NaN
            where not measured; None when the backend measures none.
        crops: (N, 4) int64 [u0, v0, u1, v1] pixel crops holding every pixel of each mask, when
            the backend knows them (the geometric one: its hulls' crops), else None; the RLE
            encoder then reads those columns only.
    """

    masks: np.ndarray
    score: np.ndarray
    image_score: np.ndarray | None = None
    crops: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.masks.ndim != 3 or self.masks.dtype != np.bool_:
            raise ValueError(
                f"SegmentationResult.masks: expected (N, H, W) bool, got {self.masks.shape} "
                f"{self.masks.dtype}"
            )
        if self.score.shape != (len(self.masks),) or self.score.dtype != np.float32:
            raise ValueError(
                f"SegmentationResult.score: expected ({len(self.masks)},) float32, got "
                f"{self.score.shape} {self.score.dtype}"
            )
        if self.image_score is not None and self.image_score.shape != self.score.shape:
            raise ValueError(
                f"SegmentationResult.image_score: expected ({len(self.masks)},), got "
                f"{self.image_score.shape}"
            )
        if self.crops is not None and self.crops.shape != (len(self.masks), 4):
            raise ValueError(
                f"SegmentationResult.crops: expected ({len(self.masks)}, 4), got {self.crops.shape}"
            )

    def __len__(self) -> int:
        return len(self.masks)


@runtime_checkable
class Segmenter(Protocol):
    """One segmentation backend, built once and called per image."""

    name: str

    def segment(
        self,
        image: np.ndarray,
        boxes_2d: np.ndarray,
        prompts: dict[str, Any] | None = None,
    ) -> SegmentationResult:
        """Masks of the objects whose projected boxes are given.

        Args:
            image: (H, W, 3) uint8 RGB.
            boxes_2d: (N, 4) [u_min, v_min, u_max, v_max] pixels (u right, v down, origin at the
                top-left corner of the top-left pixel), one per object.
            prompts: optional extra cues. ``"points_uv"``: list of N arrays (K_i, 2), pixel
                coordinates of each object's own LiDAR points projected into this camera.
                ``"depth_m"``: (N,) distance of each object from the camera along the optical
                axis, metres; backends that resolve overlaps give a shared pixel to the nearest.
                ``"geometry"``: the image's ``geometry.ImageGeometry`` (z-buffered hulls, LiDAR
                occlusion, geometric masks); the geometric segmenter needs it, others ignore it.
                ``"track_score"``: (N,) score of each object's track (the geometric segmenter
                measures image evidence for the tracks it does not trust); others ignore it.
                ``"image_evidence_skip"``: (N,) bool, objects to measure no image evidence for
                (the geometric segmenter's; others ignore it).
                ``"refine_skip"``: (N,) bool, objects whose mask the geometric segmenter does not
                refine with the image (views the visibility filter rejects whatever their
                masks); others ignore it.

        Returns:
            SegmentationResult with (N, H, W) masks and (N,) scores.
        """
        ...


def validate_segment_inputs(
    image: np.ndarray, boxes_2d: np.ndarray, prompts: dict[str, Any] | None
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray] | None]:
    """Check a ``segment`` call's arguments; return the image, (N, 4) float64 boxes, seeds.

    The seeds (``prompts["points_uv"]``) come back as a list of N (K_i, 2) float64 arrays, or None
    when not given. Errors name the argument and what is wrong.
    """
    if not isinstance(image, np.ndarray) or image.ndim != 3 or image.shape[2] != 3:
        shape = getattr(image, "shape", None)
        raise ValueError(f"segment: image must be an (H, W, 3) RGB array, got shape {shape}")
    if image.dtype != np.uint8:
        raise ValueError(f"segment: image must be uint8 RGB, got dtype {image.dtype}")
    boxes = np.asarray(boxes_2d, dtype=np.float64)
    if boxes.ndim == 1 and boxes.size == 0:
        boxes = boxes.reshape(0, 4)
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise ValueError(f"segment: boxes_2d must be (N, 4), got shape {boxes.shape}")
    if not np.isfinite(boxes).all():
        raise ValueError("segment: boxes_2d contains NaN or inf")
    if (boxes[:, 2] < boxes[:, 0]).any() or (boxes[:, 3] < boxes[:, 1]).any():
        bad = np.flatnonzero((boxes[:, 2] < boxes[:, 0]) | (boxes[:, 3] < boxes[:, 1]))
        raise ValueError(
            f"segment: boxes_2d rows {bad.tolist()} have u_max < u_min or v_max < v_min"
        )
    prompts = prompts or {}
    unknown = set(prompts) - {
        "points_uv",
        "depth_m",
        "geometry",
        "track_score",
        "image_evidence_skip",
        "refine_skip",
    }
    if unknown:
        raise ValueError(f"segment: unknown prompt keys {sorted(unknown)}")
    seeds = None
    if prompts.get("points_uv") is not None:
        raw = prompts["points_uv"]
        if len(raw) != len(boxes):
            raise ValueError(
                f"segment: prompts['points_uv'] has {len(raw)} entries for {len(boxes)} boxes"
            )
        seeds = []
        for i, points in enumerate(raw):
            points_uv = np.asarray(points, dtype=np.float64)
            if points_uv.size == 0:
                points_uv = points_uv.reshape(0, 2)
            if points_uv.ndim != 2 or points_uv.shape[1] != 2:
                raise ValueError(
                    f"segment: prompts['points_uv'][{i}] must be (K, 2), got {points_uv.shape}"
                )
            seeds.append(points_uv[np.isfinite(points_uv).all(axis=1)])
    return image, boxes, seeds


def config_from_mapping(config_type: type, config: Any, backend: str) -> Any:
    """Build a backend's config dataclass from None, an instance, or a mapping of its fields.

    Unknown keys raise an error naming the key and the backend, so typos in a YAML config fail
    loudly instead of being ignored.
    """
    if config is None:
        return config_type()
    if isinstance(config, config_type):
        return config
    if not hasattr(config, "items"):
        raise TypeError(
            f"segmenter {backend!r}: config must be {config_type.__name__} or a mapping, "
            f"got {type(config).__name__}"
        )
    known = {f.name for f in fields(config_type)}
    for key in config:
        if key not in known:
            raise ValueError(
                f"segmenter {backend!r}: unknown config key {key!r} (known: {sorted(known)})"
            )
    return config_type(**dict(config))
