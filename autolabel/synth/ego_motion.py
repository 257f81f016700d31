"""The ego vehicle's drive through the junction: stops, waits and accelerations, varied by seed.

The ego drives straight along the main road in +u (road frame). Scenarios:

* ``stop_and_go``: cruise, brake to a stop before the stop line, wait, accelerate away;
* ``start_from_stop``: wait at the stop line, then accelerate through the junction;
* ``slow_through``: slow down for the junction (no stop), then speed up again;
* ``approach_and_stop``: cruise, then brake to a stop at the line and stay there;
* ``cruise``: pass the junction at a near-constant speed (green light).

The ego pose (nuScenes ``ego_pose``) is the rear-axle centre on the ground; the ego's box centre is
``EGO_CENTRE_AHEAD_M`` ahead of it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from autolabel.synth.motion import Mover, PolylinePath, SpeedProfile, straight_points
from autolabel.synth.world import RoadLayout

#: The nuScenes car (Renault Zoe): width, length, height, metres.
EGO_SIZE_WLH_M = np.array([1.73, 4.08, 1.56])
#: Box centre ahead of the rear axle (the ego pose origin), metres.
EGO_CENTRE_AHEAD_M = 1.34
#: Front bumper ahead of the rear axle, metres.
EGO_FRONT_AHEAD_M = EGO_CENTRE_AHEAD_M + 0.5 * EGO_SIZE_WLH_M[1]
#: Where the ego's front stops before the stop line, metres.
STOP_MARGIN_M = 1.2
#: The road-frame u where the ego's lane path starts (its arc length is ``u - PATH_START_U``).
PATH_START_U = -600.0

SCENARIOS = ("stop_and_go", "start_from_stop", "slow_through", "approach_and_stop", "cruise")
_SCENARIO_WEIGHTS = np.array([0.35, 0.2, 0.15, 0.1, 0.2])


@dataclass(frozen=True)
class EgoPlan:
    """The ego's motion in the road frame (``mover``) and in the global frame (``global_mover``).

    Attributes:
        scenario: one of ``SCENARIOS``.
        lane: main-road lane index (0 next to the centre line) the ego drives in.
        mover: rear-axle motion along the lane, road frame.
        global_mover: the same in the global frame.
        stop_window_s: (start, end) clip times of the stop, or None when the ego never stops.
    """

    scenario: str
    lane: int
    mover: Mover
    global_mover: Mover
    stop_window_s: tuple[float, float] | None

    def with_layout(self, layout: RoadLayout) -> EgoPlan:
        """The same drive placed in the global frame by ``layout`` (same road-frame geometry)."""
        path = self.mover.path.transformed(layout.global_R_road(), layout.centre_xy)
        return replace(self, global_mover=Mover(path, self.mover.profile))

    def road_u(self, t_s: np.ndarray) -> np.ndarray:
        """Road-frame u of the rear axle at clip times ``t_s``."""
        return self.mover.profile.distance_at(t_s) + PATH_START_U

    def poses(self, t_s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Global rear-axle xy (N, 2), yaw (N,) and velocity (N, 2) at clip times ``t_s``."""
        return self.global_mover.states(np.asarray(t_s, dtype=np.float64))

    def box_states(self, t_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Global centre xy (N, 2) and yaw (N,) of the ego's box."""
        xy, yaw, _ = self.poses(t_s)
        ahead = EGO_CENTRE_AHEAD_M * np.stack([np.cos(yaw), np.sin(yaw)], axis=-1)
        return xy + ahead, yaw


def _stopped_window(profile: SpeedProfile) -> tuple[float, float] | None:
    still = profile.speed_mps <= 1e-6
    if not still.any():
        return None
    idx = np.flatnonzero(still)
    grid = profile.t0_s + 0.01 * np.arange(len(profile.speed_mps))
    return float(grid[idx[0]]), float(grid[idx[-1]])


def plan_ego(
    layout: RoadLayout,
    rng: np.random.Generator,
    t_start_s: float,
    t_end_s: float,
    stop_back_m: float = 0.0,
    scenario: str | None = None,
) -> EgoPlan:
    """Sample the ego's drive for clip times [t_start_s, t_end_s].

    Args:
        layout: the roads (the ego drives in +u on the main road).
        rng: source of the scenario and its parameters.
        t_start_s, t_end_s: clip time span to cover (the first LiDAR sweep to the last sample).
        stop_back_m: extra distance to stop before the stop line (a lead vehicle waits there).
        scenario: force a scenario (one of ``SCENARIOS``); None samples one.
    """
    if scenario is None:
        scenario = str(rng.choice(SCENARIOS, p=_SCENARIO_WEIGHTS))
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown ego scenario {scenario!r}; expected one of {SCENARIOS}")
    lane = int(rng.integers(0, layout.main_lanes))
    stop_front_u = layout.main_stop_u(+1) - STOP_MARGIN_M - stop_back_m
    stop_u = stop_front_u - EGO_FRONT_AHEAD_M
    t1 = t_end_s + 4.0
    pre = t_start_s
    if scenario == "stop_and_go":
        v0, cruise = rng.uniform(7.0, 11.0), rng.uniform(0.5, 3.5)
        brake, wait = rng.uniform(1.8, 3.0), rng.uniform(2.0, 6.0)
        accel, v1 = rng.uniform(1.2, 2.2), rng.uniform(7.0, 11.0)
        segs = [(cruise, 0.0), (v0 / brake, -brake), (wait, 0.0), (v1 / accel, accel)]
        profile = SpeedProfile.from_segments(pre, t1, v0, segs)
        anchor_t = pre + cruise + v0 / brake + 0.5 * wait
        anchor_u = stop_u
    elif scenario == "start_from_stop":
        wait, accel, v1 = rng.uniform(0.5, 4.0), rng.uniform(1.2, 2.4), rng.uniform(7.0, 11.0)
        segs = [(wait - pre, 0.0), (v1 / accel, accel)]
        profile = SpeedProfile.from_segments(pre, t1, 0.0, segs)
        anchor_t, anchor_u = pre, stop_u
    elif scenario == "slow_through":
        v0, cruise = rng.uniform(8.0, 11.0), rng.uniform(0.5, 4.0)
        vmin, brake, hold = rng.uniform(2.0, 4.5), rng.uniform(1.0, 2.0), rng.uniform(0.5, 2.0)
        accel, v1 = rng.uniform(1.2, 2.2), rng.uniform(8.0, 11.0)
        segs = [(cruise, 0.0), ((v0 - vmin) / brake, -brake), (hold, 0.0)]
        segs.append(((v1 - vmin) / accel, accel))
        profile = SpeedProfile.from_segments(pre, t1, v0, segs)
        anchor_t = pre + cruise + (v0 - vmin) / brake
        anchor_u = stop_u + 2.0
    elif scenario == "approach_and_stop":
        duration = t_end_s - pre
        v0, brake = rng.uniform(6.0, 10.0), rng.uniform(1.5, 2.5)
        cruise = max(0.3, rng.uniform(0.2, 0.6) * duration - v0 / brake)
        segs = [(cruise, 0.0), (v0 / brake, -brake)]
        profile = SpeedProfile.from_segments(pre, t1, v0, segs)
        anchor_t, anchor_u = pre + cruise + v0 / brake + 1.0, stop_u
    else:  # cruise
        v0 = rng.uniform(6.0, 10.0)
        dv = rng.uniform(-1.5, 1.5)
        segs = [(rng.uniform(1.0, 5.0), 0.0), (2.0, dv / 2.0), (rng.uniform(1.0, 5.0), 0.0)]
        profile = SpeedProfile.from_segments(pre, t1, v0, segs)
        anchor_t = 0.5 * (pre + t_end_s)
        anchor_u = stop_u + rng.uniform(-20.0, 8.0)
    # Place the profile so that the rear axle is at ``anchor_u`` at ``anchor_t``.
    offset = (anchor_u - PATH_START_U) - float(profile.distance_at(np.array([anchor_t]))[0])
    profile = profile.shifted(offset)
    v_lane = layout.main_lane_v(+1, lane)
    pts = straight_points([PATH_START_U, v_lane], [-PATH_START_U, v_lane], spacing_m=50.0)
    path = PolylinePath.from_points(pts)
    mover = Mover(path, profile)
    global_mover = Mover(path.transformed(layout.global_R_road(), layout.centre_xy), profile)
    return EgoPlan(scenario, lane, mover, global_mover, _stopped_window(profile))
