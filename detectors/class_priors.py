"""What detectors assume about each nuScenes detection class: typical size and how common it is.

Sizes are the nuScenes training-set means that mmdet3d uses as anchor sizes (rounded to cm);
bus and construction vehicle from the nuScenes class statistics. ``DETECTION_CLASSES`` order.
"""

from __future__ import annotations

import numpy as np

from autolabel.classes import DETECTION_CLASSES

_TYPICAL_WLH_M = {
    "car": (1.95, 4.61, 1.72),
    "truck": (2.46, 6.74, 2.73),
    "bus": (2.94, 10.96, 3.47),
    "trailer": (2.87, 12.01, 3.82),
    "construction_vehicle": (2.82, 6.38, 3.19),
    "pedestrian": (0.66, 0.73, 1.76),
    "motorcycle": (0.77, 2.11, 1.47),
    "bicycle": (0.60, 1.68, 1.27),
    "traffic_cone": (0.40, 0.40, 1.06),
    # A barrier's long side is its width: nuScenes heads barriers across the barrier.
    "barrier": (2.49, 0.49, 0.98),
}
#: (10, 3) typical box size [w, l, h] in metres per class.
TYPICAL_SIZE_WLH_M = np.array([_TYPICAL_WLH_M[c] for c in DETECTION_CLASSES], dtype=np.float64)

_FREQUENCY = {
    "car": 0.43,
    "truck": 0.08,
    "bus": 0.015,
    "trailer": 0.02,
    "construction_vehicle": 0.015,
    "pedestrian": 0.19,
    "motorcycle": 0.01,
    "bicycle": 0.01,
    "traffic_cone": 0.08,
    "barrier": 0.13,
}
#: (10,) share of each class among nuScenes annotations (sums to 1).
CLASS_FREQUENCY = np.array([_FREQUENCY[c] for c in DETECTION_CLASSES], dtype=np.float64)
CLASS_FREQUENCY /= CLASS_FREQUENCY.sum()
