"""What synthetic objects look like: nuScenes categories, sizes, colours and box parts per class.

Every object is drawn as a few boxes ("parts") that stay inside its annotated box, so the rendered
silhouette spans the annotated box: a vehicle's body with thin licence plates set into its front
and rear faces (at about 0.5 m height); a pedestrian's legs, torso and head (the top 0.25 m, a
*face* part); a cycle's frame plus, when ridden, the rider's torso and head; cones with a white
band; barriers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autolabel.classes import DETECTION_CLASSES
from autolabel.synth.raycast import PART_BODY, PART_FACE, PART_PLATE

#: Height of the head (face part) of pedestrians and riders, metres.
HEAD_HEIGHT_M = 0.25
#: Thickness, width and height of a licence plate, metres.
PLATE_THICKNESS_M = 0.02
PLATE_WIDTH_M = 0.52
PLATE_HEIGHT_M = 0.12


@dataclass(frozen=True)
class ClassSpec:
    """A detection class as the generator draws it.

    Attributes:
        name: detection class.
        category: nuScenes category of its objects.
        mean_wlh_m: mean (w, l, h) as in nuScenes annotations, metres.
        palette: RGB body colours to choose from.
    """

    name: str
    category: str
    mean_wlh_m: tuple[float, float, float]
    palette: tuple[tuple[int, int, int], ...]


_CAR_COLOURS = (
    (235, 235, 232), (30, 30, 34), (160, 164, 170), (170, 30, 34), (36, 70, 150),
    (96, 100, 108), (200, 190, 160), (40, 110, 70),
)  # fmt: skip

CLASS_SPECS: dict[str, ClassSpec] = {
    s.name: s
    for s in (
        ClassSpec("car", "vehicle.car", (1.95, 4.62, 1.73), _CAR_COLOURS),
        ClassSpec(
            "truck", "vehicle.truck", (2.51, 6.93, 2.84),
            ((230, 230, 226), (180, 40, 36), (40, 80, 160), (90, 96, 104)),
        ),
        ClassSpec(
            "bus", "vehicle.bus.rigid", (2.94, 10.5, 3.47),
            ((230, 190, 40), (226, 226, 222), (180, 36, 40), (40, 120, 180)),
        ),
        ClassSpec("trailer", "vehicle.trailer", (2.90, 12.29, 3.87), ((210, 210, 205), (120, 124, 130))),
        ClassSpec(
            "construction_vehicle", "vehicle.construction", (2.73, 6.37, 3.19),
            ((240, 180, 20), (235, 120, 20)),
        ),
        ClassSpec(
            "pedestrian", "human.pedestrian.adult", (0.67, 0.73, 1.77),
            ((40, 50, 90), (120, 30, 30), (60, 60, 60), (200, 200, 190), (30, 90, 60)),
        ),
        ClassSpec(
            "motorcycle", "vehicle.motorcycle", (0.77, 2.11, 1.47),
            ((20, 20, 24), (180, 30, 30), (200, 200, 200), (30, 60, 140)),
        ),
        ClassSpec(
            "bicycle", "vehicle.bicycle", (0.60, 1.70, 1.28),
            ((30, 30, 30), (40, 90, 170), (190, 40, 40), (220, 220, 220)),
        ),
        ClassSpec("traffic_cone", "movable_object.trafficcone", (0.41, 0.41, 1.07), ((245, 110, 20),)),
        ClassSpec("barrier", "movable_object.barrier", (2.49, 0.48, 0.98), ((200, 40, 36), (230, 230, 226))),
    )
}  # fmt: skip

#: nuScenes v1.0 categories (all 23), in the dataset's order, with their descriptions.
NUSCENES_CATEGORIES: tuple[tuple[str, str], ...] = (
    ("human.pedestrian.adult", "Adult subcategory."),
    ("human.pedestrian.child", "Child subcategory."),
    ("human.pedestrian.wheelchair", "Wheelchairs."),
    ("human.pedestrian.stroller", "Strollers."),
    ("human.pedestrian.personal_mobility", "A small electric or self-propelled vehicle."),
    ("human.pedestrian.police_officer", "Police officer."),
    ("human.pedestrian.construction_worker", "Construction worker."),
    ("animal", "All animals."),
    ("vehicle.car", "Vehicle designed primarily for personal use."),
    ("vehicle.motorcycle", "Gasoline or electric powered 2-wheeled vehicle."),
    ("vehicle.bicycle", "Human or electric powered 2-wheeled vehicle."),
    ("vehicle.bus.bendy", "Bendy bus subcategory."),
    ("vehicle.bus.rigid", "Rigid bus subcategory."),
    ("vehicle.truck", "Vehicles primarily designed to haul cargo."),
    ("vehicle.construction", "Vehicles primarily designed for construction."),
    ("vehicle.emergency.ambulance", "All types of ambulances."),
    ("vehicle.emergency.police", "All types of police vehicles."),
    ("vehicle.trailer", "Any vehicle trailer."),
    ("movable_object.barrier", "Temporary road barrier placed to redirect traffic."),
    ("movable_object.trafficcone", "All types of traffic cones."),
    ("movable_object.pushable_pullable", "Objects that a pedestrian may push or pull."),
    ("movable_object.debris", "Movable object that is left on the driveable surface."),
    ("static_object.bicycle_rack", "Area or device intended to park or secure bicycles."),
)

#: nuScenes v1.0 attributes with their descriptions.
NUSCENES_ATTRIBUTES: tuple[tuple[str, str], ...] = (
    ("vehicle.moving", "Vehicle is moving."),
    ("vehicle.stopped", "Vehicle, with a driver/rider in/on it, is currently stationary."),
    ("vehicle.parked", "Vehicle is stationary (usually for longer duration) with no immediate intent to move."),
    ("cycle.with_rider", "There is a rider on the bicycle or motorcycle."),
    ("cycle.without_rider", "There is NO rider on the bicycle or motorcycle."),
    ("pedestrian.sitting_lying_down", "The human is sitting or lying down."),
    ("pedestrian.standing", "The human is standing."),
    ("pedestrian.moving", "The human is moving."),
)  # fmt: skip

#: nuScenes visibility levels: token, level, description; bins of the visible pixel fraction.
NUSCENES_VISIBILITY: tuple[tuple[str, str, str], ...] = (
    ("1", "v0-40", "visibility of whole object is between 0 and 40%"),
    ("2", "v40-60", "visibility of whole object is between 40 and 60%"),
    ("3", "v60-80", "visibility of whole object is between 60 and 80%"),
    ("4", "v80-100", "visibility of whole object is between 80 and 100%"),
)


def visibility_token(fraction: np.ndarray) -> np.ndarray:
    """(N,) nuScenes visibility tokens '1'..'4' of visible-pixel fractions in [0, 1]."""
    f = np.asarray(fraction, dtype=np.float64)
    level = 1 + (f >= 0.4).astype(int) + (f >= 0.6) + (f >= 0.8)
    return np.array([str(v) for v in range(5)], dtype=object)[level]


def sample_size_wlh(class_name: str, rng: np.random.Generator, has_rider: bool) -> np.ndarray:
    """(3,) a plausible (w, l, h) for an object of the class, metres (about +-6 % around the mean;
    cycles are taller with a rider)."""
    wlh = np.array(CLASS_SPECS[class_name].mean_wlh_m)
    if class_name == "bicycle":
        wlh[2] = 1.72 if has_rider else 1.05
    elif class_name == "motorcycle":
        wlh[2] = 1.62 if has_rider else 1.20
    scale = np.clip(1.0 + 0.06 * rng.standard_normal(3), 0.88, 1.12)
    return wlh * scale


def sample_colour(class_name: str, rng: np.random.Generator) -> np.ndarray:
    """(3,) uint8 body colour: a class palette entry, varied a little per object."""
    palette = CLASS_SPECS[class_name].palette
    base = np.array(palette[int(rng.integers(0, len(palette)))], dtype=np.float64)
    return np.clip(base * rng.uniform(0.85, 1.1) + rng.normal(0, 6, 3), 0, 255).astype(np.uint8)


_SKIN = np.array(
    [[236, 188, 150], [210, 160, 120], [170, 120, 80], [120, 80, 56]], dtype=np.float64
)


@dataclass
class PartTemplates:
    """Parts of all objects of a scene in their objects' frames (struct of arrays over parts).

    Attributes:
        owner: (Q,) int32 object index of each part.
        offset: (Q, 3) part centre relative to the object's box centre, object frame (x forward
            along the length, y left, z up), metres.
        size_wlh: (Q, 3) part sizes, metres.
        part: (Q,) int8 ``PART_BODY`` / ``PART_FACE`` / ``PART_PLATE``.
        colour: (Q, 3) uint8.
    """

    owner: np.ndarray
    offset: np.ndarray
    size_wlh: np.ndarray
    part: np.ndarray
    colour: np.ndarray


def object_parts(
    class_name: str,
    size_wlh: np.ndarray,
    colour: np.ndarray,
    has_rider: bool,
    rng: np.random.Generator,
) -> list[tuple[tuple[float, float, float], tuple[float, float, float], int, np.ndarray]]:
    """Parts of one object: (offset xyz, size wlh, part kind, colour) in its box frame."""
    w, length, h = (float(v) for v in size_wlh)
    bottom = -0.5 * h
    parts = []
    if class_name in ("car", "truck", "bus", "trailer", "construction_vehicle"):
        t = PLATE_THICKNESS_M
        parts.append(((0.0, 0.0, 0.0), (w, length - 2 * t, h), PART_BODY, colour))
        plate_w = min(PLATE_WIDTH_M, 0.8 * w)
        plate_z = bottom + rng.uniform(0.4, 0.6)
        plate_rgb = np.array((242, 242, 236) if rng.random() < 0.8 else (240, 204, 48), np.uint8)
        for sign in (1.0, -1.0):
            parts.append(
                ((sign * (0.5 * length - 0.5 * t), 0.0, plate_z), (plate_w, t, PLATE_HEIGHT_M), PART_PLATE, plate_rgb)
            )  # fmt: skip
    elif class_name == "pedestrian":
        legs = 0.46 * h
        torso = h - legs - HEAD_HEIGHT_M
        trousers = np.array(_CAR_COLOURS[int(rng.integers(0, len(_CAR_COLOURS)))], np.uint8) // 2
        skin = np.clip(_SKIN[int(rng.integers(0, len(_SKIN)))] + rng.normal(0, 6, 3), 0, 255)
        parts.append(((0.0, 0.0, bottom + 0.5 * legs), (w, length, legs), PART_BODY, trousers))
        parts.append(
            ((0.0, 0.0, bottom + legs + 0.5 * torso), (w, length, torso), PART_BODY, colour)
        )
        parts.append(
            ((0.0, 0.0, 0.5 * h - 0.5 * HEAD_HEIGHT_M), (w, length, HEAD_HEIGHT_M), PART_FACE, skin.astype(np.uint8))
        )  # fmt: skip
    elif class_name in ("bicycle", "motorcycle"):
        frame_h = min(h, 1.0 if class_name == "bicycle" else 1.1) if has_rider else h
        parts.append(((0.0, 0.0, bottom + 0.5 * frame_h), (w, length, frame_h), PART_BODY, colour))
        if has_rider:
            seat = frame_h - 0.3
            torso = h - seat - HEAD_HEIGHT_M
            rider_l = min(0.5, 0.4 * length)
            rider_rgb = np.array(_CAR_COLOURS[int(rng.integers(0, len(_CAR_COLOURS)))], np.uint8)
            skin = np.clip(_SKIN[int(rng.integers(0, len(_SKIN)))] + rng.normal(0, 6, 3), 0, 255)
            x = -0.1 * length
            parts.append(
                ((x, 0.0, bottom + seat + 0.5 * torso), (w, rider_l, torso), PART_BODY, rider_rgb)
            )
            parts.append(
                ((x, 0.0, 0.5 * h - 0.5 * HEAD_HEIGHT_M), (w, rider_l, HEAD_HEIGHT_M), PART_FACE, skin.astype(np.uint8))
            )  # fmt: skip
    elif class_name == "traffic_cone":
        band = 0.15 * h
        white = np.array((240, 240, 236), np.uint8)
        low = 0.55 * h
        parts.append(((0.0, 0.0, bottom + 0.5 * low), (w, length, low), PART_BODY, colour))
        parts.append(((0.0, 0.0, bottom + low + 0.5 * band), (w, length, band), PART_BODY, white))
        top = h - low - band
        parts.append(((0.0, 0.0, 0.5 * h - 0.5 * top), (w, length, top), PART_BODY, colour))
    else:  # barrier
        parts.append(((0.0, 0.0, 0.0), (w, length, h), PART_BODY, colour))
    return parts


def build_part_templates(
    class_names: list[str],
    sizes_wlh: np.ndarray,
    colours: np.ndarray,
    has_rider: np.ndarray,
    rng: np.random.Generator,
) -> PartTemplates:
    """Parts of all objects of a scene (object index = position in ``class_names``)."""
    owner, offset, size, kind, colour = [], [], [], [], []
    for i, name in enumerate(class_names):
        for off, sz, part, rgb in object_parts(
            name, sizes_wlh[i], colours[i], bool(has_rider[i]), rng
        ):
            owner.append(i)
            offset.append(off)
            size.append(sz)
            kind.append(part)
            colour.append(np.asarray(rgb, np.uint8))
    return PartTemplates(
        owner=np.asarray(owner, np.int32),
        offset=np.asarray(offset, np.float64).reshape(-1, 3),
        size_wlh=np.asarray(size, np.float64).reshape(-1, 3),
        part=np.asarray(kind, np.int8),
        colour=np.asarray(colour, np.uint8).reshape(-1, 3),
    )


assert set(CLASS_SPECS) == set(DETECTION_CLASSES), "every detection class needs a ClassSpec"
