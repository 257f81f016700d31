"""The agents of a scene and their trajectories, in STRIDE-QA-like traffic situations.

Situations (``Agent.situation``):

* ``following``: a vehicle ahead in the ego's lane, braking and starting with it (it may turn off
  at the junction: ``diverging``);
* ``overtaking``: a faster vehicle in the neighbouring lane starting behind the ego;
* ``moving_away``: vehicles ahead pulling away; pedestrians walking away on the sidewalk;
* ``oncoming``: traffic in the opposite lanes, some turning left at the junction (``diverging``);
* ``crossing``: traffic on the cross road through the junction; pedestrians on zebra crossings;
* ``parked``: vehicles in the parking lanes, bicycles on the sidewalk, a bus at a stop;
* ``construction``: a work zone in a parking lane: a construction vehicle, cones, barriers, a worker;
* ``sidewalk``: pedestrians walking towards the ego or standing.

Every candidate is checked against the ego and all accepted agents over the whole clip (oriented
footprints with a margin, every 0.1 s); one that would overlap is redrawn, so no two objects ever
intersect. Trajectories come from ``motion`` (smooth paths, jerk-limited speed profiles, yaw along
the path).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from autolabel.classes import class_index
from autolabel.synth.catalogue import (
    CLASS_SPECS,
    PartTemplates,
    build_part_templates,
    sample_colour,
    sample_size_wlh,
)
from autolabel.synth.ego_motion import (
    EGO_CENTRE_AHEAD_M,
    EGO_SIZE_WLH_M,
    PATH_START_U,
    EgoPlan,
    plan_ego,
)
from autolabel.synth.motion import (
    Mover,
    PolylinePath,
    SpeedProfile,
    straight_points,
    turn_points,
)
from autolabel.synth.world import (
    CROSSWALK_GAP_M,
    CROSSWALK_WIDTH_M,
    SIDEWALK_WIDTH_M,
    RoadLayout,
)

#: Gap kept between any two footprints, metres (each footprint grows by half of it).
CLEARANCE_M = 0.3
#: Time step of the overlap check, seconds.
CHECK_STEP_S = 0.1
_TRIES = 25
#: Turns start and end this far outside the junction (beyond the zebra crossings), metres.
_TURN_SETBACK_M = CROSSWALK_GAP_M + CROSSWALK_WIDTH_M


@dataclass
class Agent:
    """One annotated object of a scene.

    Attributes:
        class_name: detection class.
        category: nuScenes category name.
        size_wlh: (3,) metres.
        mover: global-frame motion of the box centre.
        situation: see the module docstring.
        has_rider: a ridden cycle (attribute ``cycle.with_rider``).
        parked: still for the whole scene with no intent to move (``vehicle.parked``).
        colour: (3,) uint8 body colour.
    """

    class_name: str
    category: str
    size_wlh: np.ndarray
    mover: Mover
    situation: str
    has_rider: bool = False
    parked: bool = False
    colour: np.ndarray = field(default_factory=lambda: np.zeros(3, np.uint8))


@dataclass
class SceneAgents:
    """All agents of a scene as parallel arrays (object index = row), plus their parts."""

    class_index: np.ndarray  # (A,) int16 into DETECTION_CLASSES
    category: np.ndarray  # (A,) object, nuScenes category names
    size_wlh: np.ndarray  # (A, 3)
    situation: np.ndarray  # (A,) object
    has_rider: np.ndarray  # (A,) bool
    parked: np.ndarray  # (A,) bool
    movers: list[Mover]
    parts: PartTemplates

    def __len__(self) -> int:
        return len(self.class_index)

    def states(self, t_s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Box centres (A, T, 3), yaws (A, T) and velocities (A, T, 2) at clip times (T,), global."""
        t = np.asarray(t_s, dtype=np.float64)
        n, m = len(self), len(t)
        center = np.zeros((n, m, 3))
        yaw = np.zeros((n, m))
        vel = np.zeros((n, m, 2))
        # One call per agent over all times of the scene (not per frame).
        for i, mover in enumerate(self.movers):
            center[i, :, :2], yaw[i], vel[i] = mover.states(t)
        center[:, :, 2] = 0.5 * self.size_wlh[:, None, 2]
        return center, yaw, vel

    def states_each(self, t_s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Box centres (A, 3), yaws (A,) and velocities (A, 2), agent a at its own clip time
        ``t_s[a]`` (A,), global."""
        t = np.asarray(t_s, dtype=np.float64)
        if t.shape != (len(self),):
            raise ValueError(f"states_each: expected ({len(self)},) times, got {t.shape}")
        center = np.zeros((len(self), 3))
        yaw = np.zeros(len(self))
        vel = np.zeros((len(self), 2))
        for i, mover in enumerate(self.movers):
            xy, y, v = mover.states(t[i : i + 1])
            center[i, :2], yaw[i], vel[i] = xy[0], y[0], v[0]
        center[:, 2] = 0.5 * self.size_wlh[:, 2]
        return center, yaw, vel


def footprints_overlap(
    center_a: np.ndarray,
    yaw_a: np.ndarray,
    half_a: np.ndarray,
    center_b: np.ndarray,
    yaw_b: np.ndarray,
    half_b: np.ndarray,
) -> np.ndarray:
    """Whether oriented rectangles intersect (separating-axis test), broadcast over leading axes.

    Args:
        center_*: (..., 2) centres; yaw_*: (...) headings of the length axis; half_*: (..., 2)
            half (length, width).

    Returns:
        (...) bool.
    """

    def axes(yaw: np.ndarray) -> np.ndarray:  # (..., 2 axes, 2)
        c, s = np.cos(yaw), np.sin(yaw)
        return np.stack([np.stack([c, s], -1), np.stack([-s, c], -1)], -2)

    axes_a, axes_b = axes(np.asarray(yaw_a)), axes(np.asarray(yaw_b))
    d = np.asarray(center_b) - np.asarray(center_a)

    def radius(axes_x: np.ndarray, half_x: np.ndarray, n: np.ndarray) -> np.ndarray:
        return half_x[..., 0] * np.abs((axes_x[..., 0, :] * n).sum(-1)) + half_x[..., 1] * np.abs(
            (axes_x[..., 1, :] * n).sum(-1)
        )

    separated = np.zeros(np.broadcast(np.asarray(yaw_a), np.asarray(yaw_b)).shape, bool)
    for axes_n in (axes_a, axes_b):
        for k in range(2):
            n = axes_n[..., k, :]
            reach = radius(axes_a, half_a, n) + radius(axes_b, half_b, n)
            separated |= np.abs((d * n).sum(-1)) > reach
    return ~separated


class _Placer:
    """Accepts candidate agents that never come closer than the clearance to anything accepted."""

    def __init__(self, ego: EgoPlan, t_check: np.ndarray) -> None:
        self.t = t_check
        xy, yaw = ego.box_states(t_check)
        self.centers = [xy]
        self.yaws = [yaw]
        self.halves = [0.5 * EGO_SIZE_WLH_M[[1, 0]] + 0.5 * CLEARANCE_M]
        self.agents: list[Agent] = []

    def try_add(self, agent: Agent | None) -> bool:
        if agent is None:
            return False
        xy, yaw, _ = agent.mover.states(self.t)
        half = 0.5 * agent.size_wlh[[1, 0]] + 0.5 * CLEARANCE_M
        centers = np.stack(self.centers)  # (K, T, 2)
        yaws = np.stack(self.yaws)
        halves = np.stack(self.halves)[:, None, :]
        hit = footprints_overlap(centers, yaws, halves, xy[None], yaw[None], half[None, None])
        if hit.any():
            return False
        self.centers.append(xy)
        self.yaws.append(yaw)
        self.halves.append(half)
        self.agents.append(agent)
        return True

    def count(self, class_name: str) -> int:
        return sum(a.class_name == class_name for a in self.agents)


class _Builder:
    """Draws candidate agents of each situation in the road frame and returns them global."""

    def __init__(
        self,
        layout: RoadLayout,
        ego: EgoPlan,
        rng: np.random.Generator,
        t0_s: float,
        t1_s: float,
    ) -> None:
        self.layout = layout
        self.ego = ego
        self.rng = rng
        self.t0, self.t1 = t0_s, t1_s
        self.tmid = 0.5 * (t0_s + t1_s)
        ego_u = ego.road_u(np.array([t0_s, self.tmid, t1_s]))
        self.ego_u0, self.ego_umid, self.ego_u1 = (float(u) for u in ego_u)
        self.grid_t1 = t1_s + 2.0

    # -- helpers -------------------------------------------------------------------------
    def _agent(
        self,
        class_name: str,
        path_road: PolylinePath,
        profile: SpeedProfile,
        situation: str,
        *,
        has_rider: bool = False,
        parked: bool = False,
        size: np.ndarray | None = None,
        category: str | None = None,
        reverse: bool = False,
    ) -> Agent:
        rng = self.rng
        size = sample_size_wlh(class_name, rng, has_rider) if size is None else size
        path = path_road.transformed(self.layout.global_R_road(), self.layout.centre_xy)
        return Agent(
            class_name=class_name,
            category=category or CLASS_SPECS[class_name].category,
            size_wlh=size,
            mover=Mover(path, profile, reverse),
            situation=situation,
            has_rider=has_rider,
            parked=parked,
            colour=sample_colour(class_name, rng),
        )

    def _constant(self, speed: float, s_at_t: float, t_ref: float) -> SpeedProfile:
        prof = SpeedProfile.constant(speed, self.t0 - 1.0, self.grid_t1)
        return prof.shifted(s_at_t - float(prof.distance_at(np.array([t_ref]))[0]))

    def _still(self, xy_road: np.ndarray, yaw_road: float) -> tuple[PolylinePath, SpeedProfile]:
        mover = Mover.parked(xy_road, yaw_road)
        return mover.path, mover.profile

    def _main_path(self, direction: int, v: float) -> PolylinePath:
        """Straight along the main road in ``direction``; arc length = direction * u - PATH_START_U."""
        start = np.array([direction * PATH_START_U, v])
        end = np.array([-direction * PATH_START_U, v])
        return PolylinePath.from_points(straight_points(start, end, 50.0))

    def _cross_path(self, direction: int, u: float) -> PolylinePath:
        start = np.array([u, direction * PATH_START_U])
        end = np.array([u, -direction * PATH_START_U])
        return PolylinePath.from_points(straight_points(start, end, 50.0))

    def _turn_main_to_cross(
        self, direction: int, lane: int, to_dir: int, to_lane: int
    ) -> PolylinePath:
        lay = self.layout
        v_in = lay.main_lane_v(direction, lane)
        u_out = lay.cross_lane_u(to_dir, to_lane)
        # From the stop line's crossing to past the far crossing: a turn of 6-15 m radius.
        entry = np.array([-direction * (lay.cross_half_m + _TURN_SETBACK_M), v_in])
        exit_ = np.array([u_out, to_dir * (lay.main_half_m + _TURN_SETBACK_M)])
        h_in = 0.0 if direction > 0 else np.pi
        h_out = to_dir * np.pi / 2
        pts = np.concatenate(
            [
                straight_points([direction * PATH_START_U, v_in], entry, 50.0)[:-1],
                turn_points(entry, h_in, exit_, h_out),
                straight_points(exit_, [u_out, to_dir * -PATH_START_U], 50.0)[1:],
            ]
        )
        return PolylinePath.from_points(pts)

    def _turn_cross_to_main(
        self, direction: int, lane: int, to_dir: int, to_lane: int
    ) -> PolylinePath:
        lay = self.layout
        u_in = lay.cross_lane_u(direction, lane)
        v_out = lay.main_lane_v(to_dir, to_lane)
        entry = np.array([u_in, -direction * (lay.main_half_m + _TURN_SETBACK_M)])
        exit_ = np.array([to_dir * (lay.cross_half_m + _TURN_SETBACK_M), v_out])
        h_in = direction * np.pi / 2
        h_out = 0.0 if to_dir > 0 else np.pi
        pts = np.concatenate(
            [
                straight_points([u_in, direction * PATH_START_U], entry, 50.0)[:-1],
                turn_points(entry, h_in, exit_, h_out),
                straight_points(exit_, [to_dir * -PATH_START_U, v_out], 50.0)[1:],
            ]
        )
        return PolylinePath.from_points(pts)

    def _parking_u_ok(self, u: float, length: float) -> bool:
        """The parking lanes end before the crossings."""
        limit = self.layout.cross_half_m + CROSSWALK_GAP_M + CROSSWALK_WIDTH_M + 1.5
        return abs(u) - 0.5 * length > limit

    def _near_route_u(self, spread: float = 25.0) -> float:
        lo = min(self.ego_u0, self.ego_u1) - 10.0
        hi = max(self.ego_u0, self.ego_u1) + 25.0
        return float(np.clip(self.ego_umid + self.rng.uniform(-spread, spread), lo, hi))

    # -- situations -------------------------------------------------------------------------
    def lead(self, class_name: str, gap_m: float, delay_s: float, turn: str | None) -> Agent:
        """The vehicle ahead in the ego's lane; its profile is the ego's, ``delay_s`` earlier."""
        ego, lay = self.ego, self.layout
        size = sample_size_wlh(class_name, self.rng, False)
        ahead = EGO_CENTRE_AHEAD_M + 0.5 * EGO_SIZE_WLH_M[1] + gap_m + 0.5 * size[1]
        grid = np.arange(self.t0 - 1.0, self.grid_t1, 0.01)
        base = ego.mover.profile
        profile = SpeedProfile(
            float(grid[0]), base.speed_at(grid + delay_s), base.distance_at(grid + delay_s) + ahead
        )
        if turn == "right":
            path = self._turn_main_to_cross(+1, ego.lane, -1, lay.cross_lanes - 1)
        elif turn == "left":
            path = self._turn_main_to_cross(+1, ego.lane, +1, 0)
        else:
            path = self._main_path(+1, lay.main_lane_v(+1, ego.lane))
        situation = "diverging" if turn else "following"
        return self._agent(class_name, path, profile, situation, size=size)

    def adjacent(self, class_name: str, overtaking: bool) -> Agent:
        lay, rng = self.layout, self.rng
        lane = lay.main_lanes - 1 - self.ego.lane if lay.main_lanes > 1 else self.ego.lane
        path = self._main_path(+1, lay.main_lane_v(+1, lane))
        ego_s0 = self.ego_u0 - PATH_START_U + EGO_CENTRE_AHEAD_M
        if overtaking:
            speed = rng.uniform(9.0, 14.0)
            s0 = ego_s0 - rng.uniform(8.0, 30.0)
            situation = "overtaking"
        else:
            speed = rng.uniform(8.0, 13.0)
            s0 = ego_s0 + rng.uniform(6.0, 30.0)
            situation = "moving_away"
        has_rider = class_name in ("motorcycle", "bicycle")
        return self._agent(
            class_name, path, self._constant(speed, s0, self.t0), situation, has_rider=has_rider
        )

    def oncoming(self, class_name: str, turn_left: bool = False) -> Agent:
        lay, rng = self.layout, self.rng
        lane = int(rng.integers(0, lay.main_lanes))
        speed = rng.uniform(6.0, 12.0) if class_name != "bicycle" else rng.uniform(3.5, 6.0)
        if turn_left:
            path = self._turn_main_to_cross(-1, 0, -1, 0)
            situation = "diverging"
            # Through the junction around a random time of the clip.
            t_junction = rng.uniform(self.t0, self.t1)
            s_junction = -PATH_START_U - lay.cross_half_m
            profile = self._constant(speed, s_junction, t_junction)
        else:
            path = self._main_path(-1, lay.main_lane_v(-1, lane))
            situation = "oncoming"
            # Meets the ego somewhere during the clip.
            t_meet = rng.uniform(self.t0 + 0.2 * (self.t1 - self.t0), self.t1)
            u_meet = float(self.ego.road_u(np.array([t_meet]))[0]) + EGO_CENTRE_AHEAD_M
            profile = self._constant(speed, -u_meet - PATH_START_U, t_meet)
        has_rider = class_name in ("motorcycle", "bicycle")
        return self._agent(class_name, path, profile, situation, has_rider=has_rider)

    def crossing_vehicle(self, class_name: str) -> Agent:
        lay, rng = self.layout, self.rng
        direction = int(rng.choice([-1, 1]))
        lane = int(rng.integers(0, lay.cross_lanes))
        if class_name == "bicycle":
            speed = rng.uniform(3.5, 6.0)
        else:
            speed = rng.uniform(6.0, 11.0)
        t_junction = rng.uniform(self.t0 - 2.0, self.t1 + 1.0)
        turn = rng.random()
        if turn < 0.25:  # right turn onto the main road, leaving ahead of the ego or towards it
            to_dir = 1 if direction > 0 else -1
            path = self._turn_cross_to_main(direction, lane, to_dir, lay.main_lanes - 1)
            situation = "diverging"
        else:
            path = self._cross_path(direction, lay.cross_lane_u(direction, lane))
            situation = "crossing"
        s_junction = -PATH_START_U - lay.main_drive_half_m
        has_rider = class_name in ("motorcycle", "bicycle")
        return self._agent(
            class_name,
            path,
            self._constant(speed, s_junction, t_junction),
            situation,
            has_rider=has_rider,
        )

    def crossing_pedestrian(self) -> Agent:
        lay, rng = self.layout, self.rng
        speed = rng.uniform(1.0, 1.7)
        t_mid = rng.uniform(self.t0, self.t1)
        offset = rng.uniform(-0.9, 0.9)
        if rng.random() < 0.7:  # over the main road
            side = int(rng.choice([-1, 1]))
            u = lay.main_crosswalk_u(side) + offset
            direction = int(rng.choice([-1, 1]))
            path = self._cross_path(direction, u)
            s_mid = -PATH_START_U
            span = lay.main_half_m + 0.5 * SIDEWALK_WIDTH_M
        else:  # over the cross road
            side = int(rng.choice([-1, 1]))
            v = lay.cross_crosswalk_v(side) + offset
            direction = int(rng.choice([-1, 1]))
            path = self._main_path(direction, v)
            s_mid = -PATH_START_U
            span = lay.cross_half_m + 0.5 * SIDEWALK_WIDTH_M
        profile = self._constant(speed, s_mid, t_mid)
        # Walk from kerb to kerb only: stand on the sidewalk before and after.
        grid = np.arange(self.t0 - 1.0, self.grid_t1, 0.01)
        d = np.clip(profile.distance_at(grid), s_mid - span, s_mid + span)
        moving = np.abs(np.diff(d, prepend=d[0])) > 0
        prof = SpeedProfile(float(grid[0]), np.where(moving, speed, 0.0), d)
        return self._agent("pedestrian", path, prof, "crossing")

    def sidewalk_pedestrian(self, standing: bool = False) -> Agent:
        lay, rng = self.layout, self.rng
        side = int(rng.choice([-1, 1]))
        v = lay.main_sidewalk_v(side) + rng.uniform(-1.1, 1.1)
        u = self._near_route_u(30.0)
        if standing:
            path, prof = self._still(np.array([u, v]), rng.uniform(-np.pi, np.pi))
            return self._agent("pedestrian", path, prof, "sidewalk")
        direction = int(rng.choice([-1, 1]))
        path = self._main_path(direction, v)
        speed = rng.uniform(0.9, 1.6)
        situation = "moving_away" if direction > 0 else "sidewalk"
        return self._agent(
            "pedestrian",
            path,
            self._constant(speed, direction * u - PATH_START_U, self.tmid),
            situation,
        )

    def parked(
        self, class_name: str, side: int | None = None, stopped_bus: bool = False
    ) -> Agent | None:
        lay, rng = self.layout, self.rng
        side = int(rng.choice([-1, 1])) if side is None else side
        size = sample_size_wlh(class_name, rng, False)
        u = self._near_route_u(35.0)
        if not self._parking_u_ok(u, size[1]):
            return None
        yaw = 0.0 if side < 0 else np.pi  # facing the traffic direction of that side
        turn = 0.0
        if class_name in ("motorcycle", "bicycle"):  # parked at an angle against the kerb
            turn = side * rng.uniform(0.3, 0.7)
        yaw += turn
        # Inner edge just off the driving lane; wide vehicles reach onto the kerb.
        reach_v = 0.5 * size[1] * abs(np.sin(turn)) + 0.5 * size[0] * abs(np.cos(turn))
        v = side * (lay.main_drive_half_m + rng.uniform(0.1, 0.35) + reach_v)
        path, prof = self._still(np.array([u, v]), yaw)
        situation = "parked"
        return self._agent(class_name, path, prof, situation, parked=not stopped_bus, size=size)

    def parked_bicycle_on_sidewalk(self) -> Agent:
        lay, rng = self.layout, self.rng
        side = int(rng.choice([-1, 1]))
        v = side * (lay.main_half_m + SIDEWALK_WIDTH_M - 0.5)
        u = self._near_route_u(30.0)
        yaw = side * np.pi / 2 + rng.uniform(-0.2, 0.2)
        path, prof = self._still(np.array([u, v]), yaw)
        return self._agent("bicycle", path, prof, "parked", parked=True)

    def cyclist(self) -> Agent:
        """A ridden bicycle along the parking lane (with or against the ego's direction)."""
        lay, rng = self.layout, self.rng
        direction = int(rng.choice([-1, 1]))
        v = lay.parking_v(-direction) + rng.uniform(-0.4, 0.4)
        path = self._main_path(direction, v)
        speed = rng.uniform(3.5, 6.5)
        u = self._near_route_u(25.0)
        situation = "moving_away" if direction > 0 else "oncoming"
        prof = self._constant(speed, direction * u - PATH_START_U, self.tmid)
        return self._agent("bicycle", path, prof, situation, has_rider=True)

    def construction_zone(self, side: int) -> list[Agent]:
        """A work zone in the parking lane: cones along the lane edge, barriers at both ends,
        a construction vehicle and a worker inside."""
        lay, rng = self.layout, self.rng
        length = rng.uniform(12.0, 18.0)
        u_c = self._near_route_u(20.0)
        if not self._parking_u_ok(u_c, length + 2.0):
            # Move the zone out of the junction, onto the ego's side of it.
            limit = lay.cross_half_m + CROSSWALK_GAP_M + CROSSWALK_WIDTH_M + 2.5 + 0.5 * length
            u_c = -limit - rng.uniform(0.0, 10.0)
        agents = []
        v_p = lay.parking_v(side)
        mdh = lay.main_drive_half_m
        yaw = 0.0 if side < 0 else np.pi
        veh = sample_size_wlh("construction_vehicle", rng, False)
        path, prof = self._still(np.array([u_c, side * (mdh + 0.95 + 0.5 * veh[0])]), yaw)
        agents.append(
            self._agent("construction_vehicle", path, prof, "construction", parked=True, size=veh)
        )
        # Cones on the lane edge, barriers across the parking lane at both ends.
        v_cone = side * (mdh + 0.3)
        for u in np.arange(u_c - 0.5 * length, u_c + 0.5 * length + 0.01, rng.uniform(2.5, 3.5)):
            path, prof = self._still(np.array([u, v_cone]), rng.uniform(-0.15, 0.15))
            agents.append(self._agent("traffic_cone", path, prof, "construction"))
        n_barriers = int(rng.integers(1, 3))
        for k in range(n_barriers):
            u = u_c + (-1 if k == 0 else 1) * (0.5 * length + 1.2)
            path, prof = self._still(np.array([u, v_p + side * 0.2]), 0.0)
            agents.append(self._agent("barrier", path, prof, "construction"))
        # A worker pacing between the vehicle and one end of the zone.
        end = int(rng.choice([-1, 1]))
        lo = u_c + end * (0.5 * veh[1] + 0.9)
        hi = u_c + end * (0.5 * length - 0.6)
        grid = np.arange(self.t0 - 1.0, self.grid_t1, 0.01)
        phase = rng.uniform(0, 2 * np.pi)
        u_w = 0.5 * (lo + hi) + 0.5 * (hi - lo) * np.sin(phase + 0.25 * (grid - self.t0))
        path = self._main_path(+1, v_p)
        d = u_w - PATH_START_U
        speed = np.gradient(d, 0.01)  # signed: the worker turns round at each end
        agents.append(
            self._agent(
                "pedestrian", path, SpeedProfile(float(grid[0]), speed, d), "construction",
                category="human.pedestrian.construction_worker",
            )
        )  # fmt: skip
        return agents


def _pick(rng: np.random.Generator, options: list[str], weights: list[float]) -> str:
    w = np.asarray(weights, dtype=np.float64)
    return options[int(rng.choice(len(options), p=w / w.sum()))]


@dataclass(frozen=True)
class LeadChoice:
    """The vehicle ahead of the ego in its lane (decided before the ego's stop position)."""

    class_name: str
    gap_m: float
    delay_s: float
    turn: str | None


def sample_ego(
    layout: RoadLayout, rng: np.random.Generator, t0_s: float, t1_s: float
) -> tuple[EgoPlan, LeadChoice | None]:
    """The ego's drive (road frame; its global placement follows ``layout``) and its lead vehicle.

    Args:
        layout: the roads of the scene's log.
        rng: source of every choice.
        t0_s, t1_s: clip time span (first LiDAR sweep, last sample), seconds.
    """
    lead = None
    stop_back = 0.0
    if rng.random() < 0.65:
        name = _pick(rng, ["car", "truck", "bus"], [0.7, 0.15, 0.15])
        gap, delay = float(rng.uniform(2.5, 6.0)), float(rng.uniform(0.3, 1.2))
        stop_back = gap + CLASS_SPECS[name].mean_wlh_m[1] * 1.1
        lead = LeadChoice(name, gap, delay, None)
    ego = plan_ego(layout, rng, t0_s, t1_s, stop_back_m=stop_back)
    if lead is not None:
        turn = None
        if ego.lane == layout.main_lanes - 1 and rng.random() < 0.35:
            turn = "right"
        elif ego.lane == 0 and rng.random() < 0.25:
            turn = "left"
        lead = LeadChoice(lead.class_name, lead.gap_m, lead.delay_s, turn)
    return ego, lead


def sample_agents(
    layout: RoadLayout,
    ego: EgoPlan,
    lead: LeadChoice | None,
    rng: np.random.Generator,
    t0_s: float,
    t1_s: float,
    all_classes: bool = True,
    extra_agents: int = 14,
) -> SceneAgents:
    """The agents of one scene around the ego's drive (global frame per ``layout``).

    Args:
        layout: the roads (final placement).
        ego: the ego's drive, placed by the same layout.
        lead: the vehicle ahead of the ego, if any.
        rng: source of every choice.
        t0_s, t1_s: clip time span (first LiDAR sweep, last sample), seconds.
        all_classes: place at least one object of every detection class near the ego's route.
        extra_agents: additional agents in randomly drawn situations (best effort: a candidate that
            cannot be placed without overlap after a number of tries is dropped).
    """
    b = _Builder(layout, ego, rng, t0_s, t1_s)
    placer = _Placer(ego, np.arange(t0_s, t1_s + 1e-6, CHECK_STEP_S))

    def place(make, tries: int = _TRIES) -> bool:
        for _ in range(tries):
            if placer.try_add(make()):
                return True
        return False

    if lead is not None:
        placer.try_add(b.lead(lead.class_name, lead.gap_m, lead.delay_s, lead.turn))
    if all_classes:
        zone_side = -1 if rng.random() < 0.6 else 1
        for attempt in range(2 * _TRIES):
            zone = b.construction_zone(zone_side if attempt < _TRIES else -zone_side)
            saved = len(placer.agents)
            ok = all(placer.try_add(a) for a in zone[:-1])
            if ok:
                placer.try_add(zone[-1])  # the worker is optional
                break
            # Roll back a partly placed zone.
            for store in (placer.agents, placer.centers, placer.yaws, placer.halves):
                del store[saved + (0 if store is placer.agents else 1) :]
        place(lambda: b.parked("trailer"))
        if not placer.count("car"):
            place(lambda: b.parked("car"))
        place(lambda: b.oncoming("car"))
        if rng.random() < 0.5:
            place(lambda: b.oncoming("truck")) or place(lambda: b.parked("truck"))
        else:
            place(lambda: b.parked("truck")) or place(lambda: b.oncoming("truck"))
        if not placer.count("bus"):
            kind = rng.random()
            if kind < 0.4:
                place(lambda: b.oncoming("bus")) or place(lambda: b.parked("bus", stopped_bus=True))
            elif kind < 0.7:
                place(lambda: b.parked("bus", side=1, stopped_bus=True)) or place(
                    lambda: b.oncoming("bus")
                )
            else:
                place(lambda: b.crossing_vehicle("bus")) or place(lambda: b.oncoming("bus"))
        moto = rng.random()
        if moto < 0.4:
            place(lambda: b.adjacent("motorcycle", overtaking=True)) or place(
                lambda: b.oncoming("motorcycle")
            )
        elif moto < 0.75:
            place(lambda: b.oncoming("motorcycle")) or place(lambda: b.parked("motorcycle"))
        else:
            place(lambda: b.parked("motorcycle")) or place(lambda: b.oncoming("motorcycle"))
        # Small objects hide easily behind others: keep a still one near the route as well.
        if not any(a.class_name == "motorcycle" and a.parked for a in placer.agents):
            place(lambda: b.parked("motorcycle"))
        place(lambda: b.cyclist()) or place(lambda: b.crossing_vehicle("bicycle"))
        place(lambda: b.parked_bicycle_on_sidewalk())
        place(lambda: b.sidewalk_pedestrian())
        place(lambda: b.sidewalk_pedestrian())
        place(lambda: b.sidewalk_pedestrian(standing=True))
        place(lambda: b.crossing_pedestrian())
    extra_makers = [
        (lambda: b.oncoming(_pick(rng, ["car", "truck", "bus", "motorcycle"], [0.7, 0.12, 0.08, 0.1])), 3.0),
        (lambda: b.oncoming("car", turn_left=True), 1.0),
        (lambda: b.adjacent(_pick(rng, ["car", "truck", "motorcycle"], [0.75, 0.15, 0.1]), overtaking=True), 1.5),
        (lambda: b.adjacent(_pick(rng, ["car", "truck", "bus"], [0.8, 0.12, 0.08]), overtaking=False), 1.5),
        (lambda: b.crossing_vehicle(_pick(rng, ["car", "truck", "bus", "motorcycle", "bicycle"], [0.65, 0.1, 0.08, 0.07, 0.1])), 3.0),
        (lambda: b.crossing_pedestrian(), 2.0),
        (lambda: b.sidewalk_pedestrian(standing=rng.random() < 0.25), 3.0),
        (lambda: b.parked(_pick(rng, ["car", "truck", "trailer", "motorcycle"], [0.75, 0.1, 0.05, 0.1])), 3.0),
        (lambda: b.cyclist(), 0.8),
        (lambda: b.parked_bicycle_on_sidewalk(), 0.5),
    ]  # fmt: skip
    weights = np.array([w for _, w in extra_makers])
    for _ in range(extra_agents):
        make = extra_makers[int(rng.choice(len(extra_makers), p=weights / weights.sum()))][0]
        place(make, tries=6)
    return _scene_agents(placer.agents, rng)


def _scene_agents(agents: list[Agent], rng: np.random.Generator) -> SceneAgents:
    names = [a.class_name for a in agents]
    sizes = np.array([a.size_wlh for a in agents], dtype=np.float64).reshape(-1, 3)
    colours = np.array([a.colour for a in agents], dtype=np.uint8).reshape(-1, 3)
    rider = np.array([a.has_rider for a in agents], dtype=bool)
    return SceneAgents(
        class_index=np.array([class_index(n) for n in names], dtype=np.int16),
        category=np.array([a.category for a in agents], dtype=object),
        size_wlh=sizes,
        situation=np.array([a.situation for a in agents], dtype=object),
        has_rider=rider,
        parked=np.array([a.parked for a in agents], dtype=bool),
        movers=[a.mover for a in agents],
        parts=build_part_templates(names, sizes, colours, rider, rng),
    )
