"""The nuScenes detection classes and what the rest of the toolkit needs to know about them."""

from __future__ import annotations

from nuscenes.eval.common.config import config_factory
from nuscenes.eval.detection.constants import DETECTION_NAMES
from nuscenes.eval.detection.utils import category_to_detection_name

#: Detection class names; a box's ``label`` is an index into this tuple.
DETECTION_CLASSES: tuple[str, ...] = tuple(DETECTION_NAMES)
#: The subset the nuScenes tracking benchmark scores; other classes are kept as static objects.
# nuscenes-devkit 1.2 keeps the tracking names in the benchmark config, not in a constant.
TRACKING_CLASSES: tuple[str, ...] = tuple(config_factory("tracking_nips_2019").tracking_names)
CLASS_INDEX: dict[str, int] = {name: i for i, name in enumerate(DETECTION_CLASSES)}

VEHICLE_CLASSES = ("car", "truck", "bus", "trailer", "construction_vehicle")
CYCLE_CLASSES = ("motorcycle", "bicycle")

#: The nuScenes attribute of each class when it is moving / not moving (None: no attribute).
DEFAULT_ATTRIBUTE: dict[str, tuple[str, str] | None] = {
    "car": ("vehicle.moving", "vehicle.parked"),
    "truck": ("vehicle.moving", "vehicle.parked"),
    "bus": ("vehicle.moving", "vehicle.stopped"),
    "trailer": ("vehicle.moving", "vehicle.parked"),
    "construction_vehicle": ("vehicle.moving", "vehicle.parked"),
    "pedestrian": ("pedestrian.moving", "pedestrian.standing"),
    "motorcycle": ("cycle.with_rider", "cycle.without_rider"),
    "bicycle": ("cycle.with_rider", "cycle.without_rider"),
    "traffic_cone": None,
    "barrier": None,
}


def class_index(name: str) -> int:
    """Index of a detection class name; raises ``KeyError`` naming the valid classes."""
    try:
        return CLASS_INDEX[name]
    except KeyError:
        raise KeyError(
            f"unknown detection class {name!r}; expected one of {DETECTION_CLASSES}"
        ) from None


def detection_class_of_category(category_name: str) -> str | None:
    """The detection class of a nuScenes category (``vehicle.car`` -> ``car``), None if unmapped."""
    return category_to_detection_name(category_name)
