"""The static world of a synthetic log: two crossing roads, sidewalks, buildings, ground texture, map.

Geometry is designed in a *road frame* (u along the main road, the direction the ego drives; v to
its left; origin at the centre of the intersection) and placed in the global frame by a rotation
``theta_rad`` and a translation ``centre_xy``. The global frame puts the map's lower-left corner at
(0, 0), as the nuScenes devkit's ``MapMask`` expects (pixel column = x / resolution, pixel row =
height - y / resolution).

Road layout (right-hand traffic), road frame:

* main road along u: ``main_lanes`` lanes per direction (3.5 m), then a 2.5 m parking lane, then a
  3.5 m sidewalk on each side; traffic in +u uses v < 0, traffic in -u uses v > 0;
* cross road along v: ``cross_lanes`` lanes per direction, then a sidewalk; +v traffic uses u > 0;
* zebra crossings just outside the intersection on all four arms, stop lines before them;
* buildings (boxes) behind the sidewalks, along all four arms.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from autolabel.synth.raycast import GroundTexture

LANE_WIDTH_M = 3.5
PARKING_WIDTH_M = 2.5
SIDEWALK_WIDTH_M = 3.5
#: Crossings span this far from the intersection's edge (from ``CROSSWALK_GAP_M``), metres.
CROSSWALK_WIDTH_M = 3.0
CROSSWALK_GAP_M = 1.0
#: Stop lines lie this far before the intersection's edge, metres.
STOP_LINE_GAP_M = 5.0
#: nuScenes map masks are stored at 0.1 m per pixel.
MAP_RESOLUTION_M = 0.1
TEXTURE_RESOLUTION_M = 0.1
#: Largest side of the ground texture, texels (coarser texels beyond).
MAX_TEXTURE_PX = 4096
#: Buildings start this far behind the sidewalk at most (setback + depth), metres.
_MAX_BUILDING_BACK_M = 24.0

_GRASS_RGB = (92, 108, 70)
_SIDEWALK_RGB = (170, 167, 160)
_ASPHALT_RGB = (74, 76, 80)
_WHITE_RGB = (232, 232, 226)
_YELLOW_RGB = (222, 182, 48)


@dataclass(frozen=True)
class RoadLayout:
    """Where the roads are: enough to plan motion before the world's extent is known.

    Attributes:
        theta_rad: heading of the road frame's u axis in the global frame.
        centre_xy: (2,) global position of the intersection centre, metres.
        main_lanes: lanes per direction on the main road.
        cross_lanes: lanes per direction on the cross road.
    """

    theta_rad: float
    centre_xy: np.ndarray
    main_lanes: int
    cross_lanes: int

    @property
    def main_drive_half_m(self) -> float:
        """Half width of the main road's driving lanes (without parking), metres."""
        return self.main_lanes * LANE_WIDTH_M

    @property
    def main_half_m(self) -> float:
        """Half width of the main road, kerb to centre line, metres."""
        return self.main_drive_half_m + PARKING_WIDTH_M

    @property
    def cross_half_m(self) -> float:
        return self.cross_lanes * LANE_WIDTH_M

    def main_lane_v(self, direction: int, lane: int) -> float:
        """v of the centre of main-road lane ``lane`` (0 next to the centre line) for traffic in
        ``direction`` (+1: +u, -1: -u)."""
        return -direction * (lane + 0.5) * LANE_WIDTH_M

    def cross_lane_u(self, direction: int, lane: int) -> float:
        """u of the centre of a cross-road lane for traffic in ``direction`` (+1: +v, -1: -v)."""
        return direction * (lane + 0.5) * LANE_WIDTH_M

    def parking_v(self, side: int) -> float:
        """v of the centre of the main road's parking lane on ``side`` (+1 left, -1 right)."""
        return side * (self.main_drive_half_m + 0.5 * PARKING_WIDTH_M)

    def main_sidewalk_v(self, side: int) -> float:
        return side * (self.main_half_m + 0.5 * SIDEWALK_WIDTH_M)

    def cross_sidewalk_u(self, side: int) -> float:
        return side * (self.cross_half_m + 0.5 * SIDEWALK_WIDTH_M)

    def main_crosswalk_u(self, side: int) -> float:
        """u of the centre of the zebra crossing over the main road on ``side`` of the junction."""
        return side * (self.cross_half_m + CROSSWALK_GAP_M + 0.5 * CROSSWALK_WIDTH_M)

    def cross_crosswalk_v(self, side: int) -> float:
        return side * (self.main_half_m + CROSSWALK_GAP_M + 0.5 * CROSSWALK_WIDTH_M)

    def main_stop_u(self, direction: int) -> float:
        """u of the stop line for main-road traffic in ``direction``."""
        return -direction * (self.cross_half_m + STOP_LINE_GAP_M)

    def cross_stop_v(self, direction: int) -> float:
        return -direction * (self.main_half_m + STOP_LINE_GAP_M)

    def global_R_road(self) -> np.ndarray:
        """(2, 2) rotation from road-frame to global xy."""
        c, s = np.cos(self.theta_rad), np.sin(self.theta_rad)
        return np.array([[c, -s], [s, c]])

    def to_global_xy(self, uv: np.ndarray) -> np.ndarray:
        """Map (..., 2) road-frame points to global xy, metres."""
        return np.asarray(uv, dtype=np.float64) @ self.global_R_road().T + self.centre_xy

    def to_global_yaw(self, yaw_road_rad: np.ndarray) -> np.ndarray:
        return np.asarray(yaw_road_rad, dtype=np.float64) + self.theta_rad


def sample_layout(rng: np.random.Generator, half_extent_m: float) -> RoadLayout:
    """A random layout; the intersection sits at the centre of a square map of ``2 half_extent_m``."""
    return RoadLayout(
        theta_rad=float(rng.uniform(-np.pi, np.pi)),
        centre_xy=np.array([half_extent_m, half_extent_m]),
        main_lanes=2,
        cross_lanes=int(rng.integers(1, 3)),
    )


@dataclass(frozen=True)
class World:
    """The static part of a log's scenes.

    Attributes:
        layout: the roads.
        half_extent_m: the map covers global [0, 2 half_extent_m]^2.
        building_center: (K, 3) global box centres of the buildings, metres.
        building_size_wlh: (K, 3) building sizes (w across, l along their road, h), metres.
        building_yaw: (K,) global yaw of each building's length axis, radians.
        building_colour: (K, 3) uint8 RGB.
        ground: top-down ground texture (lane markings, sidewalks, grass).
        map_mask: (N, N) uint8 drivable-area mask (255 on the road), row 0 at the map's max y.
    """

    layout: RoadLayout
    half_extent_m: float
    building_center: np.ndarray
    building_size_wlh: np.ndarray
    building_yaw: np.ndarray
    building_colour: np.ndarray
    ground: GroundTexture
    map_mask: np.ndarray


def _buildings_along(
    rng: np.random.Generator,
    start_m: float,
    stop_m: float,
    front_m: float,
) -> list[tuple[float, float, float, float, float]]:
    """Buildings in a row along an axis: (along centre, across centre, length, depth, height)."""
    out = []
    pos = start_m + rng.uniform(0.0, 4.0)
    while pos < stop_m:
        if rng.random() < 0.12:  # an empty lot
            pos += rng.uniform(8.0, 20.0)
            continue
        length = rng.uniform(10.0, 30.0)
        depth = rng.uniform(8.0, 18.0)
        height = rng.uniform(6.0, 24.0) if rng.random() < 0.85 else rng.uniform(25.0, 45.0)
        setback = rng.uniform(1.0, _MAX_BUILDING_BACK_M - 18.0)
        out.append((pos + 0.5 * length, front_m + setback + 0.5 * depth, length, depth, height))
        pos += length + rng.uniform(0.5, 6.0)
    return out


def _buildings(
    layout: RoadLayout, rng: np.random.Generator, reach_m: float
) -> tuple[np.ndarray, ...]:
    rows = []  # (u, v, yaw_road, length, depth, height)
    main_front = layout.main_half_m + SIDEWALK_WIDTH_M
    cross_front = layout.cross_half_m + SIDEWALK_WIDTH_M
    for side_v in (1, -1):
        for side_u in (1, -1):
            # Along the main road: the corner lots too.
            for along, across, length, depth, height in _buildings_along(
                rng, cross_front + 1.0, reach_m, main_front
            ):
                rows.append((side_u * along, side_v * across, 0.0, length, depth, height))
            # Along the cross road, behind the main road's building rows.
            for along, across, length, depth, height in _buildings_along(
                rng, main_front + _MAX_BUILDING_BACK_M + 1.0, reach_m, cross_front
            ):
                rows.append((side_u * across, side_v * along, np.pi / 2, length, depth, height))
    arr = np.array(rows, dtype=np.float64).reshape(-1, 6)
    centre_xy = layout.to_global_xy(arr[:, :2])
    center = np.concatenate([centre_xy, 0.5 * arr[:, 5:6]], axis=1)
    size_wlh = arr[:, [4, 3, 5]]
    yaw = layout.to_global_yaw(arr[:, 2])
    base = np.array(
        [[178, 160, 140], [150, 96, 80], [196, 190, 178], [120, 124, 130], [210, 200, 170]],
        dtype=np.float64,
    )
    pick = base[rng.integers(0, len(base), len(arr))]
    colour = np.clip(pick * rng.uniform(0.8, 1.1, (len(arr), 1)), 0, 255).astype(np.uint8)
    return center, size_wlh, yaw, colour


class _Canvas:
    """Draws road-frame rectangles onto a global, row-up-with-y raster."""

    SHIFT = 4

    def __init__(self, layout: RoadLayout, size_px: int, resolution_m: float) -> None:
        self.layout = layout
        self.size_px = size_px
        self.resolution_m = resolution_m

    def polygons(self, rects_uv: list[tuple[float, float, float, float]]) -> list[np.ndarray]:
        """Pixel polygons (fixed point, ``SHIFT`` bits) of road-frame rectangles (u0, u1, v0, v1)."""
        if not rects_uv:
            return []
        r = np.asarray(rects_uv, dtype=np.float64)
        corners = np.stack(
            [r[:, [0, 2]], r[:, [1, 2]], r[:, [1, 3]], r[:, [0, 3]]], axis=1
        )  # (R, 4, 2)
        xy = self.layout.to_global_xy(corners) / self.resolution_m
        fixed = np.round(xy * (1 << self.SHIFT)).astype(np.int32)
        return list(fixed)

    def fill(self, img: np.ndarray, rects_uv, colour) -> None:
        # One call per rectangle: fillPoly with several polygons fills their overlaps even-odd.
        for poly in self.polygons(rects_uv):
            cv2.fillConvexPoly(img, poly, colour, lineType=cv2.LINE_8, shift=self.SHIFT)


def _dashes(start: float, stop: float, dash: float, gap: float) -> list[tuple[float, float]]:
    edges = np.arange(start, stop, dash + gap)
    return [(a, min(a + dash, stop)) for a in edges]


def _markings(layout: RoadLayout, reach: float) -> tuple[list, list]:
    """White and yellow road-frame rectangles (u0, u1, v0, v1) of the lane markings."""
    white, yellow = [], []
    ch, mh, mdh = layout.cross_half_m, layout.main_half_m, layout.main_drive_half_m
    line = 0.15
    for sign in (1, -1):
        # Main road, outside the junction and its crossings.
        u_in = ch + CROSSWALK_GAP_M + CROSSWALK_WIDTH_M + 0.5
        lo, hi = (u_in, reach) if sign > 0 else (-reach, -u_in)
        for off in (0.12, -0.12):
            yellow.append((lo, hi, off - 0.5 * line, off + 0.5 * line))
        for k in range(1, layout.main_lanes):
            for a, b in _dashes(lo, hi, 3.0, 6.0):
                for side in (1, -1):
                    v = side * k * LANE_WIDTH_M
                    white.append((a, b, v - 0.5 * line, v + 0.5 * line))
        for side in (1, -1):  # edge of the driving lanes, next to the parking lane
            v = side * mdh
            white.append((lo, hi, v - 0.5 * line, v + 0.5 * line))
        # Cross road.
        v_in = mh + CROSSWALK_GAP_M + CROSSWALK_WIDTH_M + 0.5
        lo, hi = (v_in, reach) if sign > 0 else (-reach, -v_in)
        for off in (0.12, -0.12):
            yellow.append((off - 0.5 * line, off + 0.5 * line, lo, hi))
        for k in range(1, layout.cross_lanes):
            for a, b in _dashes(lo, hi, 3.0, 6.0):
                for side in (1, -1):
                    u = side * k * LANE_WIDTH_M
                    white.append((u - 0.5 * line, u + 0.5 * line, a, b))
    # Stop lines (0.4 m), across the lanes of the approaching direction.
    for d in (1, -1):
        u = layout.main_stop_u(d)
        white.append((u - 0.2, u + 0.2, *sorted((0.0, -d * mdh))))
        v = layout.cross_stop_v(d)
        white.append((*sorted((0.0, d * ch)), v - 0.2, v + 0.2))
    # Zebra crossings: 0.5 m stripes every metre, along the direction of travel.
    for side in (1, -1):
        u0 = side * (ch + CROSSWALK_GAP_M)
        u1 = side * (ch + CROSSWALK_GAP_M + CROSSWALK_WIDTH_M)
        for v in np.arange(-mh + 0.25, mh - 0.5, 1.0):
            white.append((min(u0, u1), max(u0, u1), v, v + 0.5))
        v0 = side * (mh + CROSSWALK_GAP_M)
        v1 = side * (mh + CROSSWALK_GAP_M + CROSSWALK_WIDTH_M)
        for u in np.arange(-ch + 0.25, ch - 0.5, 1.0):
            white.append((u, u + 0.5, min(v0, v1), max(v0, v1)))
    return white, yellow


def build_world(layout: RoadLayout, half_extent_m: float, rng: np.random.Generator) -> World:
    """Buildings, ground texture and drivable-area map of a square map of side ``2 half_extent_m``.

    Args:
        layout: the roads; its ``centre_xy`` should be (half_extent_m, half_extent_m).
        half_extent_m: half the map's side, metres.
        rng: source of the buildings' sizes and colours.
    """
    reach = half_extent_m * 1.5  # beyond the map's corners whatever the rotation
    center, size_wlh, yaw, colour = _buildings(layout, rng, min(reach, half_extent_m + 40.0))
    # Texels of 0.1 m, coarser for worlds of long clips so the texture stays below ~50 MB.
    texel_m = max(TEXTURE_RESOLUTION_M, 2 * half_extent_m / MAX_TEXTURE_PX)
    size_px = int(np.ceil(2 * half_extent_m / texel_m))
    canvas = _Canvas(layout, size_px, texel_m)
    ch, mh = layout.cross_half_m, layout.main_half_m
    sw = SIDEWALK_WIDTH_M
    sidewalks = [
        (-reach, reach, mh, mh + sw),
        (-reach, reach, -mh - sw, -mh),
        (ch, ch + sw, -reach, reach),
        (-ch - sw, -ch, -reach, reach),
    ]
    roads = [(-reach, reach, -mh, mh), (-ch, ch, -reach, reach)]
    rgb = np.empty((size_px, size_px, 3), np.uint8)
    rgb[:] = _GRASS_RGB
    canvas.fill(rgb, sidewalks, _SIDEWALK_RGB)
    canvas.fill(rgb, roads, _ASPHALT_RGB)
    white, yellow = _markings(layout, reach)
    canvas.fill(rgb, white, _WHITE_RGB)
    canvas.fill(rgb, yellow, _YELLOW_RGB)
    # Fine grain so that the ground reads as a surface (a tiled pattern, cheap and deterministic).
    tile = rng.integers(-7, 8, (256, 256, 1), dtype=np.int16)
    reps = (size_px + 255) // 256
    grain = np.tile(tile, (reps, reps, 1))[:size_px, :size_px]
    rgb = np.clip(rgb.astype(np.int16) + grain, 0, 255).astype(np.uint8)
    map_px = int(np.ceil(2 * half_extent_m / MAP_RESOLUTION_M))
    road = np.zeros((map_px, map_px), np.uint8)
    _Canvas(layout, map_px, MAP_RESOLUTION_M).fill(road, roads, 255)
    map_mask = np.ascontiguousarray(road[::-1])  # row 0 at max y, as MapMask reads it
    ground = GroundTexture(rgb, np.zeros(2), texel_m, np.array(_GRASS_RGB, np.uint8))
    return World(layout, float(half_extent_m), center, size_wlh, yaw, colour, ground, map_mask)
