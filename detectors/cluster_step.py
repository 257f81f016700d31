"""Where a bird's-eye cluster holds a vehicle and something tall beside it: a step in its profile.

A car parked at the kerb often touches a sidewalk tree (its crown overhanging the car's side, its
trunk a few decimetres from the doors), a pole or a hedge, and the grid joins them into one
cluster that no class explains well (a 3 m tall, 3.5 m wide "construction vehicle"). Across the
car the profile of highest returns (height above the ground per slice) stays at roof height
(1-2 m) over the car's width, then steps up to the tree's 2.5-3.5 m: no valley between them. A
vehicle's own profile across its width has no such step: a truck's cab, a bus's or van's roof,
a pickup's bed and cab each span its full width, so across the vehicle every slice reaches the
same top. So a cluster is cut where its profile, read from one side, stays at car height (under
3 returns above ``low_max_m`` per slice) across at least ``min_low_m`` and then, within
``rise_m``, holds returns at ``tall_m`` or higher. The low side must be at least as long along
the cut as across it (it is a car's side, not its end: a flatbed truck's bed in front of its cab
is longer than wide and is never cut off), and the tall returns must lie beside it along at most
``max_cover`` of its length (a cab covers a short bed's whole width; a tree or pole beside a car
covers part of its length). The profile's axes are those of the rectangle of the cluster's low
part, not of the merged cluster, whose L-shape leans towards the tree.
"""

from __future__ import annotations

import math

import numba
import numpy as np

#: Returns that make a slice reach a height: a stray return (a branch tip, a mirror) does not.
_FEW = 3
#: Largest share of the low side's returns that may lie above car height (strays): a sparse far
#: truck has fewer than 3 returns per slice, but 31 % of them above car height (the README
#: demo's construction vehicle at 30 m); PandaSet-002's far cars cut from trees, up to 16 %.
_STRAY_SHARE = 0.2


@numba.njit(cache=True)
def _step_cuts(
    xy,
    height,
    starts,
    counts,
    angles,
    bin_m,
    low_max_m,
    tall_m,
    min_low_m,
    rise_bins,
    min_points,
    min_share,
    max_cover,
):  # pragma: no cover - numba
    """Per cluster (points xy[s:s+m], sorted by cluster): the step cut keeping most points low.

    Returns (C, 4): axis angle (rad), cut coordinate along it (m), side of the low part (+1: below
    the cut, -1: above it; 0: no cut), returns on the low side.
    """
    n_clusters = len(starts)
    out = np.zeros((n_clusters, 4))
    for c in range(n_clusters):
        s, m = starts[c], counts[c]
        min_low = max(min_points, min_share * m)
        for a in range(2):
            angle = angles[c] + a * 0.5 * math.pi
            ca, sa = math.cos(angle), math.sin(angle)
            lo, hi = 1e18, -1e18
            for p in range(s, s + m):
                u = xy[p, 0] * ca + xy[p, 1] * sa
                lo, hi = min(lo, u), max(hi, u)
            n_bins = int((hi - lo) / bin_m) + 1
            cnt = np.zeros(n_bins, dtype=np.int64)
            over = np.zeros(n_bins, dtype=np.int64)
            tall = np.zeros(n_bins, dtype=np.int64)
            for p in range(s, s + m):
                b = int((xy[p, 0] * ca + xy[p, 1] * sa - lo) / bin_m)
                cnt[b] += 1
                if height[p] > low_max_m:
                    over[b] += 1
                if height[p] >= tall_m:
                    tall[b] += 1
            for direction in (1, -1):
                # The low run from this end: slices with (almost) no return above car height.
                k, below = 0, 0
                while k < n_bins:
                    b = k if direction == 1 else n_bins - 1 - k
                    if over[b] >= _FEW:
                        break
                    below += cnt[b]
                    k += 1
                if k >= n_bins or below < min_low or m - below < min_points:
                    continue
                n_tall = 0
                for j in range(k, min(n_bins, k + rise_bins)):
                    n_tall += tall[j if direction == 1 else n_bins - 1 - j]
                if n_tall < _FEW or below <= out[c, 3]:
                    continue
                cut = lo + k * bin_m if direction == 1 else lo + (n_bins - k) * bin_m
                # The low side spans min_low_m across the cut (u), at least as much along it
                # (v), and the tall returns of the step cover only part of it along the cut.
                vmin, vmax, umin, umax = 1e18, -1e18, 1e18, -1e18
                tmin, tmax = 1e18, -1e18
                strays = 0
                for p in range(s, s + m):
                    u = xy[p, 0] * ca + xy[p, 1] * sa
                    v = -xy[p, 0] * sa + xy[p, 1] * ca
                    beyond = (u - cut) * direction
                    if beyond < 0:
                        vmin, vmax = min(vmin, v), max(vmax, v)
                        umin, umax = min(umin, u), max(umax, u)
                        if height[p] > low_max_m:
                            strays += 1
                    elif beyond < rise_bins * bin_m and height[p] >= tall_m:
                        tmin, tmax = min(tmin, v), max(tmax, v)
                if umax - umin < min_low_m or vmax - vmin < umax - umin:
                    continue
                if strays > _STRAY_SHARE * below:
                    continue
                # Beside the low side (not beyond its corner) and along part of it.
                cover = min(vmax, tmax) - max(vmin, tmin)
                if cover <= 0.0 or cover > max_cover * (vmax - vmin):
                    continue
                out[c, 0] = angle
                out[c, 1] = cut
                out[c, 2] = direction
                out[c, 3] = below
    return out


def step_cuts(
    xy_m: np.ndarray,
    height_m: np.ndarray,
    starts: np.ndarray,
    angles_rad: np.ndarray,
    bin_m: float,
    low_max_m: float,
    tall_m: float,
    min_low_m: float,
    rise_m: float,
    min_points: int,
    min_share: float = 0.0,
    max_cover: float = 1.0,
) -> np.ndarray:
    """(C, 4) where to cut each cluster into a low part and a tall part: axis angle (rad), cut
    coordinate along that axis (m), side of the low part (+1: coordinates below the cut, -1:
    above; 0: no cut) and the number of returns on the low side.

    The profile is read in ``bin_m`` slices along each of the two axes of the cluster's
    rectangle (e1 at ``angles_rad``, and e2). From either end, the low run is the slices (empty
    ones included) holding fewer than 3 returns above ``low_max_m``, up to the first that holds
    more, with at most 20 % of its returns above it; the slices within ``rise_m`` after it must
    hold 3 or more returns at ``tall_m`` or higher. The low side (returns before the cut) must
    hold ``min_points`` returns and ``min_share`` of the cluster's, span at least ``min_low_m``
    across the cut and at least as much along it, and the step's tall returns must overlap its
    span along the cut, by at most ``max_cover`` of it. The cut is at the end of the low run; of
    all such cuts, the one with the most returns on its low side.

    Args:
        xy_m: (P, 2) points sorted by cluster, ego frame, metres; height_m: (P,) above the ground.
        starts: (C,) first row of each cluster; angles_rad: (C,) angle of each rectangle's e1.
    """
    counts = np.diff(np.append(starts, len(xy_m))).astype(np.int64)
    return _step_cuts(
        np.ascontiguousarray(xy_m, dtype=np.float64),
        np.ascontiguousarray(height_m, dtype=np.float64),
        np.asarray(starts, dtype=np.int64),
        counts,
        np.ascontiguousarray(angles_rad, dtype=np.float64),
        float(bin_m),
        float(low_max_m),
        float(tall_m),
        float(min_low_m),
        max(1, int(math.ceil(rise_m / bin_m - 1e-9))),
        int(min_points),
        float(min_share),
        float(max_cover),
    )
