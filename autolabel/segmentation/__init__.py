"""Instance segmentation of projected objects: one interface, backends chosen by name.

``get_segmenter(name, config)`` builds a backend once; ``segmenter.segment(image, boxes_2d,
prompts)`` returns a ``SegmentationResult`` with (N, H, W) bool masks and (N,) float32 scores that
predict each mask's IoU with the object's true visible mask. Backends:

* ``"geometric"`` (the default, no weights): presence from geometry (projected 3D
  box hull, box z-buffer, LiDAR depth), the image only to trim the boundary; score = share of the
  object's own projected returns inside the mask x unoccluded share of its hull. For tracks it
  does not trust (``prompts["track_score"]`` below ``image_evidence_below``) it also measures
  image evidence (``SegmentationResult.image_score``), ``geometric.py``.
* ``"lidar"`` (no weights): GrabCut seeded
  by the object's projected LiDAR points, with a score calibrated on synthetic renders,
  ``lidar_seeded.py``.
* ``"sam2"``: SAM2's image predictor prompted with the projected boxes, ``sam2_backend.py``;
  needs a checkpoint path and its config name, otherwise ``SegmenterUnavailable``.

Masks are stored as COCO RLE with ``rle.py``. Backends import lazily, so importing this package
does not import torch or sam2.
"""

from __future__ import annotations

from typing import Any

from autolabel.segmentation.core import (
    SegmentationResult,
    Segmenter,
    SegmenterUnavailable,
    config_from_mapping,
)

__all__ = [
    "DEFAULT_SEGMENTER",
    "SEGMENTER_NAMES",
    "SegmentationResult",
    "Segmenter",
    "SegmenterUnavailable",
    "get_segmenter",
]

#: Backend names accepted by ``get_segmenter`` (and ``autolabel run --segmenter``).
SEGMENTER_NAMES = ("geometric", "lidar", "sam2")
DEFAULT_SEGMENTER = "geometric"


def get_segmenter(name: str = DEFAULT_SEGMENTER, config: Any = None) -> Segmenter:
    """Build the segmentation backend called ``name``.

    Args:
        name: one of ``SEGMENTER_NAMES``.
        config: the backend's config dataclass (``GeometricConfig``, ``LidarSeededConfig``,
            ``Sam2Config``), a mapping
            of its fields (e.g. from a YAML config file), or None for the defaults.

    Returns:
        A ``Segmenter``.

    Raises:
        ValueError: unknown name or config key.
        SegmenterUnavailable: the backend cannot run here (e.g. SAM2 without a checkpoint); the
            message says what to pass.
    """
    if name == "geometric":
        from autolabel.segmentation.geometric import GeometricConfig, GeometricSegmenter

        return GeometricSegmenter(config_from_mapping(GeometricConfig, config, name))
    if name == "lidar":
        from autolabel.segmentation.lidar_seeded import LidarSeededConfig, LidarSeededSegmenter

        return LidarSeededSegmenter(config_from_mapping(LidarSeededConfig, config, name))
    if name == "sam2":
        from autolabel.segmentation.sam2_backend import Sam2Config, Sam2Segmenter

        return Sam2Segmenter(config_from_mapping(Sam2Config, config, name))
    raise ValueError(f"unknown segmenter {name!r}; choose one of {', '.join(SEGMENTER_NAMES)}")
