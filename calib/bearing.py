"""Bearing and clock direction in the ego frame (the binding conventions of DESIGN.md).

Bearing: degrees, 0 straight ahead (+x), positive counter-clockwise (to the left, +y), range
(-180, 180]. Clock: 12 o'clock straight ahead, 3 o'clock to the right, 9 o'clock to the left.
"""

from __future__ import annotations

import numpy as np

from calib import stable_math


def bearing_deg(xy_ego: np.ndarray) -> np.ndarray:
    """Bearing of ego-frame positions (..., 2) or (..., 3), degrees in (-180, 180].

    Bearings within 1e-9 deg of -180 count as +180: a point straight behind the ego, carried
    through a rotated pose, lands a rounding error to either side of the branch cut.
    """
    xy = np.asarray(xy_ego, dtype=np.float64)
    deg = np.degrees(stable_math.arctan2(xy[..., 1], xy[..., 0]))
    return np.where(deg <= -180.0 + 1e-9, 180.0, deg)


def wrap_deg(angle_deg: np.ndarray | float) -> np.ndarray:
    """Angles in degrees wrapped to (-180, 180], as bearings are."""
    w = np.mod(np.asarray(angle_deg, dtype=np.float64) + 180.0, 360.0) - 180.0
    return np.where(w == -180.0, 180.0, w)


def clock_from_bearing(bearing: np.ndarray | float) -> np.ndarray:
    """Clock hour 1..12 of bearings in degrees: each hour spans 30 deg centred on it.

    A positive (leftward) bearing turns the hand counter-clockwise: +90 deg is 9 o'clock and
    -90 deg is 3 o'clock. A bearing on the boundary between two hours goes to the clockwise one
    (45 deg, half past 10, is 11 o'clock; -15 deg is 1 o'clock): each hour covers bearings in
    (centre - 15, centre + 15].
    """
    b = np.asarray(bearing, dtype=np.float64)
    # floor(x + 0.5) rounds every half hour the same way; np.round's half-to-even would put
    # 45 deg at 10 o'clock but 15 deg at 12.
    hour = np.floor(-b / 30.0 + 0.5).astype(np.int64) % 12
    return np.where(hour == 0, 12, hour)
