"""Settings of the offboard track refinement (``refine_options`` of a run config)."""

from __future__ import annotations

from dataclasses import dataclass

# Which kerb the traffic keeps to: "auto" (from the log's location, autolabel.refine.traffic_side),
# "right" (most of the world, Boston, San Francisco), "left" (Singapore, UK, Japan), "none" (every
# flow sample counts as it points: one-way streets).
TRAFFIC_SIDES = ("auto", "right", "left", "none")


#: The range each numeric setting is validated against (``RefineConfig.__post_init__``).
_COUNTS = ("min_observations", "endpoint_observations", "extend_min_returns")
_POSITIVE = (
    "score_length_scale", "duplicate_distance_m", "position_sigma_m", "velocity_sigma_mps",
    "accel_psd", "static_max_displacement_m", "clutter_min_floor_m", "canopy_min_gap_m",
    "canopy_min_body_m", "join_gate_m", "tower_min_height_m",
)  # fmt: skip
_NON_NEGATIVE = (
    "static_max_speed_mps", "heading_from_motion_mps", "join_gate_rate_mps",
    "flow_lane_half_width_m", "flow_clearance_m", "support_returns_scale", "wall_column_m",
    "wall_min_density", "extend_moving_s", "extend_clear_m", "hugging_max_ratio",
    "riding_reach_m", "riding_max_dv_mps", "riding_min_speed_mps", "end_on_min_width_m",
    "end_on_min_speed_mps",
)  # fmt: skip
_UNIT = (
    "min_track_score", "tower_score_factor", "wall_min_overlap", "wall_score_factor",
    "panel_min_fill", "facade_score_factor", "facade_max_flatness", "size_quantile",
    "hugging_score_factor",
)  # fmt: skip
_UNIT_ABOVE_0 = (
    "duplicate_min_shared", "cabin_max_roof_span", "extend_score_factor", "riding_min_shared",
)  # fmt: skip


@dataclass(frozen=True)
class RefineConfig:
    """Options of :func:`autolabel.refine.refine_tracks` (metres, seconds, m/s).

    Attributes:
        min_observations: tracks with fewer detected boxes are false positives and removed.
        min_track_score: tracks whose refined score (below) is lower are removed.
        score_length_scale: a track's score is the mean score of its boxes times
            ``1 - exp(-observations / score_length_scale)``: one glimpse is weak evidence, an
            object seen all along is strong.
        duplicate_distance_m, duplicate_min_shared: a track whose boxes lie, in at least this
            share of its keyframes, within this distance of a heavier track's is the same object
            under a runner-up class: its boxes vote for the class of the heavier one, then it goes.
        duplicate_inside: ... and so is a track (not a cone or a barrier) whose boxes' centres
            lie inside the heavier track's boxes (footprint, no smaller than its own) that often,
            whatever the distance of the centres.
        drop_riding_along, riding_reach_m, riding_max_dv_mps, riding_min_shared: a refined
            bicycle or motorcycle track whose centre lies, in at least ``riding_min_shared`` of
            its keyframes, on a refined vehicle's footprint lengthened by ``riding_reach_m`` at
            both ends (across: within its half width), moving with it (velocities within
            ``riding_max_dv_mps``), is a piece of that vehicle the detector cut off, and goes
            (``autolabel.refine.duplicates.riding_along``): riders keep a following distance,
            and filtering between lanes puts them beside a vehicle, not on its axis. Set on
            synthetic seed 5.
        riding_min_speed_mps: only vehicles moving at least this fast carry riders (0: parked
            ones too). A motorcycle parked in line behind a parked car, closer than
            ``riding_reach_m`` to it, goes at 0; at 1 m/s the parked cars' pieces stay as well:
            AMOTA on synthetic seeds 5 and 13 (tuned on) 0.537 -> 0.526 and 0.590 -> 0.579.
        position_sigma_m: standard deviation of a detected centre (the smoother's measurement
            noise).
        velocity_sigma_mps: standard deviation of a detector velocity where it gives one.
        accel_psd: the smoother's white-acceleration spectral density, m^2/s^3 (larger follows
            manoeuvres more closely and smooths less).
        static_max_displacement_m: a track whose start and end (each the median, per
            coordinate, of ``endpoint_observations`` detected centres: one stray box the
            tracker gave a still track does not move it) lie closer than this ...
        static_max_speed_mps: ... and whose net travel over its duration is slower than this is
            static: one pose for the whole track, velocity zero.
        heading_from_motion_mps: where a moving track is at least this fast its heading is its
            direction of travel; slower, the detector's heading turned (by pi where needed) to
            agree with the nearest direction of travel.
        static_heading_from_flow, flow_distance_m: point a static track's heading (its axis is
            known from its boxes, not its front) the way the traffic nearest to it goes: moving
            tracks and the ego's own path, weighted by a Gaussian of ``flow_distance_m`` of their distance.
        traffic_side, flow_lane_half_width_m: the kerb traffic keeps to ("auto", "right", "left"
            or "none"). "auto" takes the side of the place the log's location names, and
            "right" where it names none (``autolabel.refine.traffic_side``). With "right", a
            flow sample counts turned by pi for a static object more than
            ``flow_lane_half_width_m`` to its left: that object is across the centre line and
            faces the oncoming traffic (parked cars face the traffic of their own side), so the
            ego's path points the far kerb's cars as well as the near one's. "left" mirrors this
            (Singapore, UK); "none" takes every sample as it points (a one-way street).
        flow_clearance_m: flow samples closer than this to a static object's footprint (its
            size grown by this much on every side) are left out: a moving track that ends on or
            grazes a parked car is that car's own mis-associated boxes, not the lane beside it
            (the nearest real lane's centre lies >= 2.5 m from a parked car's).
        static_heading_from_cabin, cabin_min_offset_m: a static car whose roof returns, stacked
            over the track, sit more than this ahead of the middle of its returns is turned round:
            a car's cabin sits behind its middle (bonnet longer than boot). Decides before the
            traffic flow where the returns allow (needs ``use_points``).
        cabin_max_roof_span: ... only where the roof returns span at most this share of the
            length of the track's returns (a roof over nearly the whole length, as a van's or
            a merged cluster's, has no cabin to place).
        join_fragments, join_gate_m, join_gate_rate_mps: join tracks that are fragments of one
            object (``autolabel.refine.joining``): no keyframe in common, classes of one group,
            and each one's observations within ``join_gate_m + join_gate_rate_mps * seconds
            extrapolated`` of the other's trajectory; fragments seen fewer than
            ``min_observations`` times join nothing.
        pose_from_own_class: a joined track's size and static centre come from its boxes of
            its voted class where it has some (of all its boxes otherwise).
        size_quantile: each size dimension of a track is this quantile of its boxes' (the
            detector sees only the near faces, so most views are too small).
        use_points: accumulate each track's LiDAR returns over the clip for its size, static
            pose and the point evidence of the track classifier.
        reject_clutter: remove tracks the point evidence marks as clutter
            (``autolabel.refine.classify.clutter_tracks``): static tracks higher than
            ``clutter_min_height_m`` whose returns lie on their outline less than
            ``clutter_max_surface_share`` of the time (vegetation fills its volume), or with
            fewer than ``clutter_min_returns`` returns per box; and any track whose returns all
            lie higher than ``clutter_min_floor_m`` above the ground (canopies, upper facades).
        car_max_height_m, relabel_min_returns: a truck, bus, trailer or construction-vehicle
            track whose returns (at least ``relabel_min_returns`` per box) stay below this
            height over the whole track is a car.
        canopy_min_gap_m: ... and so is one whose stacked return profile thins out below that
            height (its roof, ``autolabel.refine.classify.roof_heights``) while its boxes'
            highest returns (median) lie at least this much higher (a car under a tree's
            canopy), where the returns below its roof span at least ``canopy_min_body_m`` along
            its boxes (a car's body; a trunk or a bush is shorter); it takes a car's typical
            size against its boxes' faces towards the ego.
        panel_min_fill: ... and so is a static truck, bus or trailer track (at least
            ``relabel_min_returns`` returns per box) whose stacked height profile is no side
            panel: fewer than this share of its height bins up to its top hold a quarter of its
            densest bin's returns (``autolabel.refine.classify.panel_fill``): a chain-link
            fence's top rail over its posts, a line from above like a truck's side (0: no such
            test). Set on PandaSet-002 (0.4-0.6 alike).
        evidence_score: after the refinement, every track's score is multiplied by a factor
            from the returns inside its refined boxes (``autolabel.refine.classify
            .rescore_tracks``; needs ``use_points``), so tracks the LiDAR does not back rank
            below those it does (AP and AMOTA are score-ranked):
        support_returns_scale: ... ``1 - exp(-returns / support_returns_scale)`` with
            ``returns`` the median over its boxes of the returns inside each (0: no such
            factor) ...
        facade_max_flatness, facade_score_factor: ... times ``facade_score_factor`` where the
            track is slower than ``static_max_speed_mps`` and its stacked returns lie on a line
            in bird's-eye view (square root of the covariance's eigenvalue ratio at most
            ``facade_max_flatness``): a wall, a fence, a building front (not for barriers,
            trucks, buses and trailers, whose returns may lie on a line) ...
        tower_min_height_m, tower_score_factor: ... and times ``tower_score_factor`` where its
            stacked returns (their 98th height percentile) reach ``tower_min_height_m`` above
            the ground: taller than road vehicles (4 to 4.3 m at most), a building front of
            any class (the ``lidar`` detector cuts returns at 4.5 m, so its boxes end there);
        wall_column_m, wall_min_overlap, wall_min_density, wall_score_factor: ... and times
            ``wall_score_factor`` where the returns go on up over the track's boxes: in the
            ``wall_column_m`` high column over them, at least 20 returns whose bird's-eye
            positions overlap those of the returns in its boxes by at least
            ``wall_min_overlap`` (histogram intersection) and at least ``wall_min_density``
            times as dense per metre of height (``autolabel.refine.classify.ColumnEvidence``):
            a wall or a building's corner, of any class, static or not (a track the ego's motion
            slides along a wall moves); a vehicle's body ends at its top, and a canopy over a
            car spreads over its roof, not on its faces (0 ``wall_column_m``: no such test).
        hugging_max_ratio, hugging_score_factor: ... and times ``hugging_score_factor`` where a
            bicycle or motorcycle track's boxes are hugged by returns: over the track, more than
            ``hugging_max_ratio`` times as many returns in the gathering margin around its
            refined boxes' footprints (0.3 m) as inside them. A two-wheeler is narrow and rides
            or stands with room around it; returns pressed against its box from outside mean a
            two-wheeler-sized piece of something larger, a vehicle's side or end above all.
            Most two-wheelers have a ratio below 0.1, most fragments of vehicles the detector
            called motorcycles (synthetic seeds 5 and 13) 0.4 and more, but so do a few real
            ones whose box is smaller than their returns (the README demo's motorcycle at
            6.6 m/s: 1.84, a parked bicycle 0.58). Off by default (``hugging_score_factor``
            1): with 0.2 synthetic AMOTA rises (seeds 5 and 13, tuned on: 0.537 -> 0.558 and
            0.590 -> 0.592; held-out seeds 1 and 9: 0.613 -> 0.636 and 0.643 -> 0.651) and
            PandaSet-002's motorcycle AP 0.841 -> 0.878, but the README demo's QA agreement
            falls from 99.83 to 99.74 % (yield 60.07 -> 59.81 %); with a ratio of 2 the demo
            holds but the synthetic seeds lose (0.537 -> 0.531, 0.590 -> 0.589).
        extend_tracks, extend_min_returns, extend_clear_m, extend_score_factor,
            extend_moving_s: carry each track outwards from its span, keyframe by keyframe, to
            the keyframes where its box still holds at least ``extend_min_returns`` returns of
            the keyframe sweep and no other track's box centre lies within ``extend_clear_m``,
            at its score times ``extend_score_factor`` (``autolabel.refine.extension``; needs
            ``use_points``): a parked car the detector lost as the ego drove away is still seen
            by the LiDAR. A static track keeps its pose; a moving one goes on at its end
            velocity for at most ``extend_moving_s`` seconds (0: only static tracks).
        end_on_min_width_m, end_on_min_speed_mps: a bicycle or motorcycle track moving at
            least ``end_on_min_speed_mps`` (median) whose returns, in a box widened across its
            travel, spread at least ``end_on_min_width_m`` across it in one surface is a car
            seen from behind or ahead (``autolabel.refine.end_faces``; needs ``use_points``):
            it takes a car's footprint, grown away from the ego (0 width: no such test). A
            two-wheeler's returns spread under 1 m; on synthetic seed 29 (tuned on) the cars'
            spread 1.4-2.0 m.
    """

    min_observations: int = 3
    min_track_score: float = 0.0
    score_length_scale: float = 3.0
    duplicate_distance_m: float = 1.0
    duplicate_min_shared: float = 0.5
    duplicate_inside: bool = True
    drop_riding_along: bool = True
    riding_reach_m: float = 1.5
    riding_max_dv_mps: float = 2.0
    riding_min_shared: float = 0.3
    riding_min_speed_mps: float = 0.0
    position_sigma_m: float = 0.4
    velocity_sigma_mps: float = 1.0
    accel_psd: float = 2.0
    static_max_speed_mps: float = 0.5
    static_max_displacement_m: float = 2.0
    endpoint_observations: int = 3
    heading_from_motion_mps: float = 1.5
    size_quantile: float = 0.75
    join_fragments: bool = True
    pose_from_own_class: bool = True
    join_gate_m: float = 1.5
    join_gate_rate_mps: float = 0.5
    static_heading_from_flow: bool = True
    static_heading_from_cabin: bool = True
    cabin_min_offset_m: float = 0.2
    cabin_max_roof_span: float = 0.85
    flow_distance_m: float = 4.0
    traffic_side: str = "auto"
    flow_lane_half_width_m: float = 2.0
    flow_clearance_m: float = 1.0
    use_points: bool = True
    reject_clutter: bool = True
    clutter_max_surface_share: float = 0.12
    clutter_min_height_m: float = 3.0
    clutter_min_returns: float = 0.0
    clutter_min_floor_m: float = 4.4
    car_max_height_m: float = 2.1
    relabel_min_returns: float = 30.0
    panel_min_fill: float = 0.5
    canopy_min_gap_m: float = 1.0
    canopy_min_body_m: float = 2.5
    # Track rescoring from the refined tracks' returns (autolabel.refine.classify); hand-set on
    # PandaSet-002 and synthetic seed 5.
    evidence_score: bool = True
    support_returns_scale: float = 0.0
    facade_max_flatness: float = 0.1
    facade_score_factor: float = 0.2
    tower_min_height_m: float = 4.4
    tower_score_factor: float = 0.2
    wall_column_m: float = 2.0
    wall_min_overlap: float = 0.6
    wall_min_density: float = 0.25
    wall_score_factor: float = 0.2
    hugging_max_ratio: float = 0.4
    # Off by default (1): see the docstring.
    hugging_score_factor: float = 1.0
    extend_tracks: bool = True
    extend_min_returns: int = 3
    extend_clear_m: float = 2.0
    extend_score_factor: float = 0.5
    extend_moving_s: float = 1.0
    end_on_min_width_m: float = 1.3
    end_on_min_speed_mps: float = 3.0

    def __post_init__(self) -> None:
        for key in _COUNTS:
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{key}: expected an integer >= 1, got {value!r}")
        for keys, ok, bounds in (
            (_POSITIVE, lambda v: v > 0, "> 0"),
            (_NON_NEGATIVE, lambda v: v >= 0, ">= 0"),
            (_UNIT, lambda v: 0 <= v <= 1, "in [0, 1]"),
            (_UNIT_ABOVE_0, lambda v: 0 < v <= 1, "in (0, 1]"),
        ):
            for key in keys:
                # Written so that NaN fails every test.
                if not ok(getattr(self, key)):
                    raise ValueError(f"{key}: must be {bounds}, got {getattr(self, key)!r}")
        if self.traffic_side not in TRAFFIC_SIDES:
            raise ValueError(
                f"traffic_side: expected one of {', '.join(TRAFFIC_SIDES)}, got {self.traffic_side!r}"
            )
