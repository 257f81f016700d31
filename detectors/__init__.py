"""Detector backends behind one interface; pick one by name with ``get_detector``.

| name        | module            | needs                                                        |
|-------------|-------------------|--------------------------------------------------------------|
| ``lidar``   | lidar_geometric   | nothing (CPU default, no weights)                            |
| ``gt``      | gt_replay         | the dataset's annotations                                    |
| ``results`` | result_file       | a nuScenes detection submission JSON (``path``)              |
| ``bevfusion``| bevfusion        | mmdet3d + an mmdetection3d checkout, config and checkpoint   |

Backends are imported only when asked for, so the OpenMMLab stack is never imported by the others.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from typing import Any

from autolabel.config import ConfigError, dataclass_from_mapping
from detectors.base import Detector, DetectorUnavailableError

#: name -> (module, detector class, config dataclass)
_BACKENDS: dict[str, tuple[str, str, str]] = {
    "lidar": ("detectors.lidar_geometric", "LidarGeometricDetector", "LidarGeometricConfig"),
    "gt": ("detectors.gt_replay", "GtReplayDetector", "GtReplayConfig"),
    "results": ("detectors.result_file", "ResultFileDetector", "ResultFileConfig"),
    "bevfusion": ("detectors.bevfusion", "BevfusionDetector", "BevfusionConfig"),
}
DETECTOR_NAMES: tuple[str, ...] = tuple(_BACKENDS)


def detector_config_class(name: str) -> type:
    """The options dataclass of backend ``name``."""
    module, _, config_cls = _backend(name)
    return getattr(importlib.import_module(module), config_cls)


def _backend(name: str) -> tuple[str, str, str]:
    try:
        return _BACKENDS[name]
    except KeyError:
        raise ValueError(
            f"unknown detector {name!r}; choose one of: {', '.join(DETECTOR_NAMES)}"
        ) from None


def get_detector(name: str, config: Mapping[str, Any] | Any | None = None) -> Detector:
    """Build backend ``name`` from its options.

    Args:
        name: one of ``DETECTOR_NAMES``.
        config: the backend's options dataclass, or a mapping of its fields (e.g. the run config's
            ``detector_options``; unknown keys and wrong types raise ``ConfigError`` naming the
            key), or None for the defaults.

    Raises:
        ValueError: unknown name (the message lists the names).
        ConfigError: bad options.
        DetectorUnavailableError: the backend cannot run here (says what to install or pass).
    """
    module_name, detector_cls, config_cls_name = _backend(name)
    module = importlib.import_module(module_name)
    config_cls = getattr(module, config_cls_name)
    if config is None:
        options = config_cls()
    elif dataclasses.is_dataclass(config) and not isinstance(config, type):
        options = config
    elif isinstance(config, Mapping):
        options = dataclass_from_mapping(config_cls, config, where=f"detector_options ({name})")
    else:
        raise ConfigError(
            f"detector_options ({name}): expected a mapping or {config_cls_name}, got "
            f"{type(config).__name__}"
        )
    return getattr(module, detector_cls)(options)


__all__ = [
    "DETECTOR_NAMES",
    "Detector",
    "DetectorUnavailableError",
    "detector_config_class",
    "get_detector",
]
