"""Trackers behind one interface: ``get_tracker(name, config).track_clip(timestamps_s, detections)``."""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from autolabel.boxes import Boxes3D
from autolabel.config import dataclass_from_mapping
from trackers.pub_tracker import PubTracker, PubTrackerConfig


class Tracker(Protocol):
    def track_clip(self, timestamps_s: np.ndarray, detections: list[Boxes3D]) -> list[Boxes3D]:
        """(F,) keyframe times and F global-frame box sets -> F tracked box sets (track_id >= 0)."""
        ...


#: Tracker name -> (tracker class, its config dataclass).
TRACKERS: dict[str, tuple[type, type]] = {"pub": (PubTracker, PubTrackerConfig)}


def get_tracker(name: str = "pub", config: Any = None, where: str = "tracker_options") -> Tracker:
    """A tracker by name, configured by its config dataclass, a mapping of its fields, or None.

    Raises:
        KeyError: unknown tracker name (the message lists the known ones).
        autolabel.config.ConfigError: an unknown config key or a bad value (named after ``where``).
    """
    if name not in TRACKERS:
        raise KeyError(f"unknown tracker {name!r}; expected one of {sorted(TRACKERS)}")
    tracker_cls, config_cls = TRACKERS[name]
    if config is None:
        config = config_cls()
    elif not isinstance(config, config_cls):
        config = dataclass_from_mapping(config_cls, config, where)
    return tracker_cls(config)


__all__ = ["TRACKERS", "PubTracker", "PubTrackerConfig", "Tracker", "get_tracker"]
