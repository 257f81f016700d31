"""Quantities: what a question type asks about, computed from attribute rows, vectorized.

A quantity is one function from a :class:`QuantityInput` (N candidate questions: the attribute
rows of their regions in role order A, B, C, D at the keyframe, a look-ahead time, asked cameras)
to a :class:`QuantityResult`: per candidate a validity flag (False where the answer would be
ambiguous or unknown), named numeric values (units in the names: ``distance_m``, ``bearing_deg``,
``speed_mps``), list values (``cameras``) and a discrete outcome (``left``, ``A``, a bin key).

Templates (``qa_templates/*.yaml``) name the quantity they ask about; the generator calls it on
all candidates of a clip at once and ``autolabel check-qa`` calls the same function on the rows it
re-derives from the stored region -> track mapping. A new question type is a template, plus one
function here registered with :func:`quantity` when it asks about something new.

Conventions (DESIGN.md): ego frame x forward, y left; bearings in degrees, 0 ahead, positive to the
left, (-180, 180]; clock 12 ahead, 3 right; ground-plane distances; sizes w, l, h in metres.
"""

from __future__ import annotations

import itertools
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from autolabel.attributes import ObjectAttributes, PairRelations, pairwise_relations

#: Role names of the regions of a question, in order (``{A}``, ``{B}``, ... in templates); a
#: question names at most this many regions (types over a variable set of regions, such as a
#: scene description, list up to all 26).
ROLES: tuple[str, ...] = tuple(string.ascii_uppercase)
#: Most regions of a ranked-set question (options are their orders).
MAX_RANKED_SET = 4


@dataclass
class QuantityInput:
    """N candidate questions, as arrays.

    Attributes:
        attrs: the clip's attributes.
        rows: (N, k) attribute rows of the k regions in role order, at the keyframe; -1 pads the
            rows of types over a variable set of regions (``present``).
        frame_index: (N,) keyframe of each candidate (index into the clip's frames).
        horizon_s: (N,) look-ahead in seconds, 0 for the keyframe itself.
        cameras: (N, 2) indices into ``channels`` of the cameras a question names (-1: none).
        visible: (N, k, C) region visible (passed the visibility filter) in camera c at the
            keyframe.
        channels: the C camera channels, in the rig's order.
        params: the template's parameters, defaults filled in.
        cache: results shared between quantities called on the same candidates.
        option: (N,) index into the quantity's option list (``Quantity.options_param``, e.g. a
            class group), -1 where none.
        colour_lab: (N, k, 3) measured L*a*b* colour of each region (NaN: not measured).
    """

    attrs: ObjectAttributes
    rows: np.ndarray
    frame_index: np.ndarray
    horizon_s: np.ndarray
    cameras: np.ndarray
    visible: np.ndarray
    channels: tuple[str, ...]
    params: Mapping[str, Any]
    cache: dict = field(default_factory=dict)
    option: np.ndarray | None = None
    colour_lab: np.ndarray | None = None

    @property
    def n(self) -> int:
        return len(self.rows)

    @property
    def present(self) -> np.ndarray:
        """(N, k) bool: the role holds a region (False in the padding of variable sets)."""
        return self.rows >= 0

    def options(self) -> np.ndarray:
        """(N,) option index of each candidate; raises when the candidates have none."""
        if self.option is None or np.any(np.asarray(self.option) < 0):
            raise ValueError("this quantity needs an option (class group) per candidate")
        return np.asarray(self.option, dtype=np.int64)

    def colours(self) -> np.ndarray:
        """(N, k, 3) measured colours (NaN where not measured or not given)."""
        if self.colour_lab is None:
            return np.full((*self.rows.shape, 3), np.nan)
        return np.asarray(self.colour_lab, dtype=np.float64).reshape(*self.rows.shape, 3)

    def column(self, name: str, role: int = 0) -> np.ndarray:
        """(N,) attribute column ``name`` of the region in ``role`` (0 = A) at the keyframe."""
        return np.asarray(getattr(self.attrs, name))[self.rows[:, role]]


@dataclass
class QuantityResult:
    """What a quantity gives for N candidates.

    Attributes:
        valid: (N,) False where no unambiguous answer exists (a tie within the margin, a future
            state the track does not have, an unknown speed).
        values: name -> (N,) float values, SI units named in the key.
        outcome: (N,) str outcome keys (``None`` for purely numeric quantities).
        lists: name -> N tuples of keys (e.g. the camera channels that show a region).
        facets: name -> (N,) str keys of descriptive words (a colour, a position, an action),
            printed through the template's ``phrases``.
        item_values, item_facets: name -> (N, k) per-region values / keys of types over a set of
            regions (a scene description), NaN / "" in the padding.
        balance: (N,) keys the sampler balances when there is no outcome (e.g. count buckets).
    """

    valid: np.ndarray
    values: dict[str, np.ndarray] = field(default_factory=dict)
    outcome: np.ndarray | None = None
    lists: dict[str, list[tuple[str, ...]]] = field(default_factory=dict)
    facets: dict[str, np.ndarray] = field(default_factory=dict)
    item_values: dict[str, np.ndarray] = field(default_factory=dict)
    item_facets: dict[str, np.ndarray] = field(default_factory=dict)
    balance: np.ndarray | None = None


#: What an outcome key means, so records can say it in structured form.
OUTCOME_KINDS = ("label", "role", "order")


@dataclass(frozen=True)
class Quantity:
    """A registered quantity.

    Attributes:
        name: the name templates use.
        fn: the vectorized function.
        values: numeric value names it returns.
        lists: list value names it returns.
        outcomes: its possible outcome keys, given the template's params and the number of regions
            (``None``: no outcome, the answer is the values).
        outcome_kind: ``label`` (a word), ``role`` (a region role, e.g. the nearer of two) or
            ``order`` (roles in an order, ``"B,A,C"``).
        defaults: parameter defaults; a template may override them.
        check_params: raises ``ValueError`` naming the parameter when a value is invalid.
        facets, item_values, item_facets: names of the descriptive keys and per-region values /
            keys it returns (``QuantityResult``).
        facet_keys: every key each facet (and item facet) may take, given the params; templates
            must give words for all of them.
        options_param: the list parameter whose entries are the candidates' options (``option``).
    """

    name: str
    fn: Callable[[QuantityInput], QuantityResult]
    values: tuple[str, ...] = ()
    lists: tuple[str, ...] = ()
    outcomes: Callable[[Mapping[str, Any], int], tuple[str, ...]] | None = None
    outcome_kind: str = "label"
    defaults: Mapping[str, Any] = field(default_factory=dict)
    check_params: Callable[[Mapping[str, Any]], None] | None = None
    facets: tuple[str, ...] = ()
    item_values: tuple[str, ...] = ()
    item_facets: tuple[str, ...] = ()
    facet_keys: Callable[[Mapping[str, Any]], Mapping[str, tuple[str, ...]]] | None = None
    options_param: str | None = None

    def outcome_keys(self, params: Mapping[str, Any], n_regions: int) -> tuple[str, ...] | None:
        return None if self.outcomes is None else tuple(self.outcomes(params, n_regions))

    def __call__(self, q: QuantityInput) -> QuantityResult:
        res = self.fn(q)
        missing = (
            set(self.values) - set(res.values)
            | set(self.lists) - set(res.lists)
            | set(self.facets) - set(res.facets)
            | set(self.item_values) - set(res.item_values)
            | set(self.item_facets) - set(res.item_facets)
        )
        if missing:
            raise RuntimeError(f"quantity {self.name}: did not return {sorted(missing)}")
        return res


QUANTITIES: dict[str, Quantity] = {}


def quantity(
    name: str,
    *,
    values: tuple[str, ...] = (),
    lists: tuple[str, ...] = (),
    outcomes: tuple[str, ...] | Callable[[Mapping[str, Any], int], tuple[str, ...]] | None = None,
    outcome_kind: str = "label",
    defaults: Mapping[str, Any] | None = None,
    check_params: Callable[[Mapping[str, Any]], None] | None = None,
    facets: tuple[str, ...] = (),
    item_values: tuple[str, ...] = (),
    item_facets: tuple[str, ...] = (),
    facet_keys: Callable[[Mapping[str, Any]], Mapping[str, tuple[str, ...]]] | None = None,
    options_param: str | None = None,
) -> Callable[
    [Callable[[QuantityInput], QuantityResult]], Callable[[QuantityInput], QuantityResult]
]:
    """Register a quantity function under ``name`` (decorator)."""
    if outcome_kind not in OUTCOME_KINDS:
        raise ValueError(f"quantity {name}: outcome_kind must be one of {OUTCOME_KINDS}")
    fixed = outcomes

    def outcome_fn(params: Mapping[str, Any], n_regions: int) -> tuple[str, ...]:
        return tuple(fixed)  # type: ignore[arg-type]

    def register(fn: Callable[[QuantityInput], QuantityResult]):
        if name in QUANTITIES:
            raise ValueError(f"quantity {name!r} registered twice")
        QUANTITIES[name] = Quantity(
            name=name,
            fn=fn,
            values=values,
            lists=lists,
            outcomes=None if fixed is None else (fixed if callable(fixed) else outcome_fn),
            outcome_kind=outcome_kind,
            defaults=dict(defaults or {}),
            check_params=check_params,
            facets=facets,
            item_values=item_values,
            item_facets=item_facets,
            facet_keys=facet_keys,
            options_param=options_param,
        )
        return fn

    return register


def resolve_params(q: Quantity, params: Mapping[str, Any] | None, where: str) -> dict[str, Any]:
    """The quantity's defaults overridden by a template's ``params``, type-checked.

    Raises:
        ValueError: ``where.<key>: ...`` for an unknown key or a value of the wrong type.
    """
    out = dict(q.defaults)
    for key, value in (params or {}).items():
        if key not in q.defaults:
            allowed = ", ".join(sorted(q.defaults)) or "none"
            raise ValueError(f"{where}.{key}: unknown parameter of {q.name} (allowed: {allowed})")
        default = q.defaults[key]
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, (int, float)):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if ok and isinstance(default, int) and not isinstance(default, bool):
                ok = isinstance(value, int)
        elif isinstance(default, (list, tuple)):
            ok = isinstance(value, (list, tuple))
        else:
            ok = isinstance(value, type(default))
        if not ok:
            raise ValueError(f"{where}.{key}: expected {type(default).__name__}, got {value!r}")
        out[key] = value
    if q.check_params is not None:
        try:
            q.check_params(out)
        except ValueError as e:
            raise ValueError(f"{where}.{e}") from None
    return out


def _all_valid(q: QuantityInput) -> np.ndarray:
    return np.ones(q.n, dtype=bool)


def _pairs(q: QuantityInput) -> PairRelations:
    """Relations of region B to region A (shared by the pair quantities of one call)."""
    if "pairs" not in q.cache:
        tid = q.attrs.track_id
        q.cache["pairs"] = pairwise_relations(
            q.attrs, q.frame_index, tid[q.rows[:, 0]], tid[q.rows[:, 1]]
        )
    return q.cache["pairs"]


def _at_horizon(q: QuantityInput, now: str, future: str) -> tuple[np.ndarray, np.ndarray]:
    """(N,) attribute ``now`` at horizon 0, else ``future`` at the candidate's horizon; presence.

    Horizons must be 0 or one of the attributes' ``future_horizons_s``.
    """
    row = q.rows[:, 0]
    out = np.asarray(getattr(q.attrs, now), dtype=np.float64)[row].copy()
    present = np.ones(q.n, dtype=bool)
    horizons = np.asarray(q.attrs.future_horizons_s, dtype=np.float64)
    h = np.asarray(q.horizon_s, dtype=np.float64)
    later = h > 0
    if later.any():
        diff = np.abs(h[later][:, None] - horizons[None, :]) if len(horizons) else None
        if diff is None or np.any(diff.min(axis=1) > 1e-6):
            bad = h[later][0] if diff is None else h[later][diff.min(axis=1) > 1e-6][0]
            raise ValueError(
                f"horizon {bad:g} s is not among the attributes' future_horizons_s "
                f"{tuple(float(x) for x in horizons)}"
            )
        k = np.argmin(diff, axis=1)
        fut = np.asarray(getattr(q.attrs, future), dtype=np.float64)
        out[later] = fut[row[later], k]
        present[later] = q.attrs.future_present[row[later], k]
    return out, present & np.isfinite(out)


def _which_larger(a: np.ndarray, b: np.ndarray, min_ratio: float) -> tuple[np.ndarray, np.ndarray]:
    """Outcome ``A`` where a >= min_ratio * b, ``B`` where b >= min_ratio * a; valid elsewhere not."""
    a_wins = a >= min_ratio * b
    b_wins = b >= min_ratio * a
    valid = (a_wins ^ b_wins) & np.isfinite(a) & np.isfinite(b) & (a > 0) & (b > 0)
    return np.where(a_wins, "A", "B").astype(object), valid


def _check_min_ratio(p: Mapping[str, Any]) -> None:
    if not p["min_ratio"] >= 1.0:
        raise ValueError(f"min_ratio: must be >= 1, got {p['min_ratio']!r}")


# --------------------------------------------------------------------------------------------
# Object-centric: two regions A and B at the keyframe.


@quantity("pair_distance", values=("distance_m",))
def pair_distance(q: QuantityInput) -> QuantityResult:
    """Ground-plane distance between the box centres of A and B."""
    return QuantityResult(valid=_all_valid(q), values={"distance_m": _pairs(q).distance_m})


@quantity("pair_clock", values=("clock", "bearing_deg"), defaults={"min_distance_m": 1.0})
def pair_clock(q: QuantityInput) -> QuantityResult:
    """Direction of B seen from A, in the ego vehicle's axes (12 o'clock = the ego's forward).

    Invalid where A and B are closer than ``min_distance_m`` (the direction is then noise).
    """
    rel = _pairs(q)
    valid = rel.distance_m >= q.params["min_distance_m"]
    return QuantityResult(
        valid=valid,
        values={"clock": rel.clock.astype(np.float64), "bearing_deg": rel.bearing_deg},
    )


@quantity("pair_left_right", outcomes=("left", "right"))
def pair_left_right(q: QuantityInput) -> QuantityResult:
    """Whether B is left or right of A by MetaVQA's all-vertices rule (V = the ego's heading)."""
    rel = _pairs(q)
    valid = rel.b_is_left_of_a ^ rel.b_is_right_of_a
    return QuantityResult(
        valid=valid, outcome=np.where(rel.b_is_left_of_a, "left", "right").astype(object)
    )


@quantity("pair_front_behind", outcomes=("front", "behind"))
def pair_front_behind(q: QuantityInput) -> QuantityResult:
    """Whether B is in front of or behind A by the all-vertices rule (V = the ego's heading)."""
    rel = _pairs(q)
    valid = rel.b_is_front_of_a ^ rel.b_is_behind_a
    return QuantityResult(
        valid=valid, outcome=np.where(rel.b_is_front_of_a, "front", "behind").astype(object)
    )


def _size_comparison(q: QuantityInput, column: str, a_name: str, b_name: str) -> QuantityResult:
    a, b = q.column(column, 0).astype(np.float64), q.column(column, 1).astype(np.float64)
    outcome, valid = _which_larger(a, b, q.params["min_ratio"])
    return QuantityResult(valid=valid, values={a_name: a, b_name: b}, outcome=outcome)


@quantity(
    "pair_bigger",
    values=("volume_a_m3", "volume_b_m3"),
    outcomes=("A", "B"),
    outcome_kind="role",
    defaults={"min_ratio": 1.2},
    check_params=_check_min_ratio,
)
def pair_bigger(q: QuantityInput) -> QuantityResult:
    """Which of A and B has the larger box volume (by at least ``min_ratio``)."""
    return _size_comparison(q, "volume_m3", "volume_a_m3", "volume_b_m3")


@quantity(
    "pair_taller",
    values=("height_a_m", "height_b_m"),
    outcomes=("A", "B"),
    outcome_kind="role",
    defaults={"min_ratio": 1.1},
    check_params=_check_min_ratio,
)
def pair_taller(q: QuantityInput) -> QuantityResult:
    """Which of A and B has the taller box (h)."""
    return _size_comparison(q, "height_m", "height_a_m", "height_b_m")


@quantity(
    "pair_wider",
    values=("width_a_m", "width_b_m"),
    outcomes=("A", "B"),
    outcome_kind="role",
    defaults={"min_ratio": 1.1},
    check_params=_check_min_ratio,
)
def pair_wider(q: QuantityInput) -> QuantityResult:
    """Which of A and B has the wider box (w)."""
    return _size_comparison(q, "width_m", "width_a_m", "width_b_m")


@quantity(
    "pair_longer",
    values=("length_a_m", "length_b_m"),
    outcomes=("A", "B"),
    outcome_kind="role",
    defaults={"min_ratio": 1.1},
    check_params=_check_min_ratio,
)
def pair_longer(q: QuantityInput) -> QuantityResult:
    """Which of A and B has the longer box (l)."""
    return _size_comparison(q, "length_m", "length_a_m", "length_b_m")


@quantity(
    "pair_closer_to_ego",
    values=("distance_a_m", "distance_b_m"),
    outcomes=("A", "B"),
    outcome_kind="role",
    defaults={"min_difference_m": 1.0, "min_ratio": 1.1},
    check_params=_check_min_ratio,
)
def pair_closer_to_ego(q: QuantityInput) -> QuantityResult:
    """Which of A and B is closer to the ego (ground-plane distance of the box centre).

    Valid where the farther one is at least ``min_difference_m`` and ``min_ratio`` times farther.
    """
    da, db = q.column("distance_m", 0), q.column("distance_m", 1)
    near, far = np.minimum(da, db), np.maximum(da, db)
    valid = (far - near >= q.params["min_difference_m"]) & (far >= q.params["min_ratio"] * near)
    return QuantityResult(
        valid=valid,
        values={"distance_a_m": da, "distance_b_m": db},
        outcome=np.where(da < db, "A", "B").astype(object),
    )


# --------------------------------------------------------------------------------------------
# Ego-centric: one region and the ego vehicle at the keyframe.


@quantity("region_distance", values=("distance_m",))
def region_distance(q: QuantityInput) -> QuantityResult:
    """Ground-plane distance from the ego origin to the region's box centre."""
    return QuantityResult(valid=_all_valid(q), values={"distance_m": q.column("distance_m")})


@quantity("region_bearing", values=("bearing_deg", "clock"))
def region_bearing(q: QuantityInput) -> QuantityResult:
    """Bearing of the region from the ego (degrees, + left) and its clock position."""
    return QuantityResult(
        valid=_all_valid(q),
        values={
            "bearing_deg": q.column("bearing_deg"),
            "clock": q.column("clock").astype(np.float64),
        },
    )


@quantity("ego_side_of_region", outcomes=("left", "right"))
def ego_side_of_region(q: QuantityInput) -> QuantityResult:
    """Whether the ego is left or right of the region (all-vertices rule against the ego box).

    The rule is symmetric: the ego is left of the region exactly when the region is right of the
    ego (``is_right``); invalid where neither holds.
    """
    region_right, region_left = q.column("is_right"), q.column("is_left")
    return QuantityResult(
        valid=region_right ^ region_left,
        outcome=np.where(region_right, "left", "right").astype(object),
    )


@quantity(
    "ego_size_vs_region",
    values=("volume_ratio_to_ego", "volume_m3"),
    outcomes=("bigger", "smaller"),
    defaults={"min_ratio": 1.2},
    check_params=_check_min_ratio,
)
def ego_size_vs_region(q: QuantityInput) -> QuantityResult:
    """Whether the ego vehicle is bigger or smaller (box volume) than the region.

    ``volume_ratio_to_ego`` is region volume / ego volume; valid where either is at least
    ``min_ratio`` times the other.
    """
    ratio = q.column("volume_ratio_to_ego").astype(np.float64)
    r = q.params["min_ratio"]
    ego_bigger = ratio <= 1.0 / r
    valid = (ego_bigger | (ratio >= r)) & np.isfinite(ratio)
    return QuantityResult(
        valid=valid,
        values={"volume_ratio_to_ego": ratio, "volume_m3": q.column("volume_m3")},
        outcome=np.where(ego_bigger, "bigger", "smaller").astype(object),
    )


@quantity("region_speed", values=("speed_mps",))
def region_speed(q: QuantityInput) -> QuantityResult:
    """The region's speed over ground at the keyframe; invalid where unknown."""
    speed = q.column("speed_mps").astype(np.float64)
    return QuantityResult(valid=np.isfinite(speed), values={"speed_mps": speed})


@quantity("region_heading", values=("heading_deg", "clock"))
def region_heading(q: QuantityInput) -> QuantityResult:
    """The region's box heading relative to the ego's heading (degrees, + left) and as a clock."""
    from calib.bearing import clock_from_bearing

    heading = q.column("relative_heading_deg").astype(np.float64)
    return QuantityResult(
        valid=np.isfinite(heading),
        values={"heading_deg": heading, "clock": clock_from_bearing(heading).astype(np.float64)},
    )


def _frame_rows(q: QuantityInput) -> np.ndarray:
    """(N,) one attribute row in each candidate's keyframe (-1 where the frame has none)."""
    fi = np.asarray(q.attrs.frame_index, dtype=np.int64)
    pos = np.searchsorted(fi, q.frame_index)
    pos_c = np.minimum(pos, max(len(fi) - 1, 0))
    ok = (pos < len(fi)) & (fi[pos_c] == q.frame_index) if len(fi) else np.zeros(q.n, bool)
    return np.where(ok, pos_c, -1)


@quantity("ego_speed", values=("ego_speed_mps",))
def ego_speed(q: QuantityInput) -> QuantityResult:
    """The ego vehicle's speed at the keyframe (no region needed)."""
    rows = _frame_rows(q)
    speed = np.where(
        rows >= 0, np.asarray(q.attrs.ego_speed_mps, dtype=np.float64)[np.maximum(rows, 0)], np.nan
    )
    return QuantityResult(valid=np.isfinite(speed), values={"ego_speed_mps": speed})


# --------------------------------------------------------------------------------------------
# Ego-centric spatiotemporal: one region at t = 0, 1, 2, 3 s (never extrapolated past the track).


@quantity("future_position", values=("distance_m", "bearing_deg"))
def future_position(q: QuantityInput) -> QuantityResult:
    """Distance and bearing of the region from the ego at t + horizon, in the ego frame then."""
    dist, present_d = _at_horizon(q, "distance_m", "future_distance_m")
    bearing, present_b = _at_horizon(q, "bearing_deg", "future_bearing_deg")
    return QuantityResult(
        valid=present_d & present_b, values={"distance_m": dist, "bearing_deg": bearing}
    )


@quantity("future_agent_speed", values=("speed_mps",))
def future_agent_speed(q: QuantityInput) -> QuantityResult:
    """The region's speed at t + horizon."""
    speed, present = _at_horizon(q, "speed_mps", "future_speed_mps")
    return QuantityResult(valid=present, values={"speed_mps": speed})


@quantity("future_ego_speed", values=("ego_speed_mps",))
def future_ego_speed(q: QuantityInput) -> QuantityResult:
    """The ego vehicle's speed at t + horizon (where the region's track reaches that time)."""
    speed, present = _at_horizon(q, "ego_speed_mps", "future_ego_speed_mps")
    return QuantityResult(valid=present, values={"ego_speed_mps": speed})


# --------------------------------------------------------------------------------------------
# Multiple choice (MetaVQA): discrete answers with hard distractors.


def _bins_outcomes(p: Mapping[str, Any], n_regions: int) -> tuple[str, ...]:
    return tuple(b["key"] for b in p["bins"])


def _check_bins(p: Mapping[str, Any]) -> None:
    bins = p["bins"]
    if len(bins) < 2:
        raise ValueError("bins: need at least two bins")
    prev = 0.0
    for i, b in enumerate(bins):
        if not isinstance(b, Mapping) or not {"key", "text"} <= set(b):
            raise ValueError(f"bins[{i}]: expected a mapping with key, text (and max_m)")
        unknown = set(b) - {"key", "text", "max_m"}
        if unknown:
            raise ValueError(f"bins[{i}].{sorted(unknown)[0]}: unknown key")
        last = i == len(bins) - 1
        if last and "max_m" in b:
            raise ValueError(f"bins[{i}].max_m: the last bin is open-ended and has no max_m")
        if not last:
            m = b.get("max_m")
            if not isinstance(m, (int, float)) or isinstance(m, bool) or m <= prev:
                raise ValueError(f"bins[{i}].max_m: must be a number above {prev}, got {m!r}")
            prev = float(m)
    keys = [b["key"] for b in bins]
    if len(set(keys)) != len(keys):
        raise ValueError("bins: duplicate keys")


@quantity(
    "distance_bin",
    values=("distance_m",),
    outcomes=_bins_outcomes,
    defaults={"bins": [], "edge_margin_m": 1.0, "edge_margin_ratio": 0.05},
    check_params=_check_bins,
)
def distance_bin(q: QuantityInput) -> QuantityResult:
    """The distance bin of the region; invalid within the margin of a bin edge (ambiguous)."""
    edges = np.array([b["max_m"] for b in q.params["bins"][:-1]], dtype=np.float64)
    keys = np.array([b["key"] for b in q.params["bins"]], dtype=object)
    d = q.column("distance_m").astype(np.float64)
    idx = np.searchsorted(edges, d, side="right")
    gap = np.min(np.abs(d[:, None] - edges[None, :]), axis=1)
    margin = np.maximum(q.params["edge_margin_m"], q.params["edge_margin_ratio"] * d)
    return QuantityResult(
        valid=(gap >= margin) & np.isfinite(d), values={"distance_m": d}, outcome=keys[idx]
    )


def _sector_outcomes(p: Mapping[str, Any], n_regions: int) -> tuple[str, ...]:
    return tuple(s["key"] for s in p["sectors"])


def _check_sectors(p: Mapping[str, Any]) -> None:
    sectors = p["sectors"]
    if len(sectors) < 3:
        raise ValueError("sectors: need at least three sectors")
    width = 360.0 / len(sectors)
    for i, s in enumerate(sectors):
        if not isinstance(s, Mapping) or set(s) != {"key", "text", "center_deg"}:
            raise ValueError(f"sectors[{i}]: expected a mapping with key, text, center_deg")
        expected = ((i * width + 180.0) % 360.0) - 180.0
        if abs(((s["center_deg"] - expected + 180.0) % 360.0) - 180.0) > 1e-6:
            raise ValueError(
                f"sectors[{i}].center_deg: sectors must go counter-clockwise from 0 deg in steps "
                f"of {width:g} deg; expected {expected:g}"
            )
    keys = [s["key"] for s in sectors]
    if len(set(keys)) != len(keys):
        raise ValueError("sectors: duplicate keys")


@quantity(
    "direction_sector",
    values=("bearing_deg",),
    outcomes=_sector_outcomes,
    defaults={"sectors": [], "edge_margin_deg": 5.0},
    check_params=_check_sectors,
)
def direction_sector(q: QuantityInput) -> QuantityResult:
    """The bearing sector of the region (equal sectors, the first centred straight ahead)."""
    sectors = q.params["sectors"]
    width = 360.0 / len(sectors)
    b = q.column("bearing_deg").astype(np.float64)
    pos = np.mod(b + width / 2.0, 360.0)  # 0 at the first sector's right edge
    idx = np.floor(pos / width).astype(np.int64) % len(sectors)
    into = pos - idx * width
    edge_gap = np.minimum(into, width - into)
    keys = np.array([s["key"] for s in sectors], dtype=object)
    return QuantityResult(
        valid=(edge_gap >= q.params["edge_margin_deg"]) & np.isfinite(b),
        values={"bearing_deg": b},
        outcome=keys[idx],
    )


#: Ranking keys of the ranked-set questions: the extreme region has the smallest key.
RANK_KEYS: dict[str, Callable[[ObjectAttributes, np.ndarray], np.ndarray]] = {
    "nearest": lambda attrs, rows: np.asarray(attrs.distance_m, dtype=np.float64)[rows],
    "leftmost": lambda attrs, rows: -np.asarray(attrs.y_ego_m, dtype=np.float64)[rows],
    "rightmost": lambda attrs, rows: np.asarray(attrs.y_ego_m, dtype=np.float64)[rows],
}


def _role_outcomes(p: Mapping[str, Any], n_regions: int) -> tuple[str, ...]:
    return ROLES[:n_regions]


def _check_ranked(p: Mapping[str, Any]) -> None:
    if p["rank_by"] not in RANK_KEYS:
        raise ValueError(f"rank_by: must be one of {sorted(RANK_KEYS)}, got {p['rank_by']!r}")
    if not 2 <= p["size"] <= MAX_RANKED_SET:
        raise ValueError(f"size: must be 2..{MAX_RANKED_SET}, got {p['size']!r}")
    if not p["margin_m"] >= 0:
        raise ValueError(f"margin_m: must be >= 0, got {p['margin_m']!r}")


def _extreme_of_set(q: QuantityInput, answer: str, runner_up: str, sign: float) -> QuantityResult:
    key = RANK_KEYS[q.params["rank_by"]](q.attrs, q.rows)  # (N, k)
    order = np.argsort(key, axis=1, kind="stable")
    first, second = order[:, 0], order[:, 1]
    n = np.arange(q.n)
    gap = key[n, second] - key[n, first]
    return QuantityResult(
        valid=(gap >= q.params["margin_m"]) & np.all(np.isfinite(key), axis=1),
        values={answer: sign * key[n, first], runner_up: sign * key[n, second]},
        outcome=np.array(ROLES, dtype=object)[first],
    )


_RANKED_DEFAULTS = {"rank_by": "nearest", "size": 4, "margin_m": 1.0}


@quantity(
    "nearest_of_set",
    values=("answer_distance_m", "runner_up_distance_m"),
    outcomes=_role_outcomes,
    outcome_kind="role",
    defaults=_RANKED_DEFAULTS,
    check_params=_check_ranked,
)
def nearest_of_set(q: QuantityInput) -> QuantityResult:
    """The region nearest to the ego among k; valid when the runner-up is ``margin_m`` farther."""
    if q.params["rank_by"] != "nearest":
        raise ValueError("nearest_of_set: rank_by must be 'nearest'")
    return _extreme_of_set(q, "answer_distance_m", "runner_up_distance_m", 1.0)


@quantity(
    "leftmost_of_set",
    values=("answer_lateral_m", "runner_up_lateral_m"),
    outcomes=_role_outcomes,
    outcome_kind="role",
    defaults={**_RANKED_DEFAULTS, "rank_by": "leftmost"},
    check_params=_check_ranked,
)
def leftmost_of_set(q: QuantityInput) -> QuantityResult:
    """The region furthest to the ego's left (largest ego-frame y) among k.

    ``*_lateral_m`` are ego-frame y offsets (positive to the left).
    """
    if q.params["rank_by"] != "leftmost":
        raise ValueError("leftmost_of_set: rank_by must be 'leftmost'")
    return _extreme_of_set(q, "answer_lateral_m", "runner_up_lateral_m", -1.0)


@quantity(
    "rightmost_of_set",
    values=("answer_lateral_m", "runner_up_lateral_m"),
    outcomes=_role_outcomes,
    outcome_kind="role",
    defaults={**_RANKED_DEFAULTS, "rank_by": "rightmost"},
    check_params=_check_ranked,
)
def rightmost_of_set(q: QuantityInput) -> QuantityResult:
    """The region furthest to the ego's right (smallest ego-frame y) among k."""
    if q.params["rank_by"] != "rightmost":
        raise ValueError("rightmost_of_set: rank_by must be 'rightmost'")
    return _extreme_of_set(q, "answer_lateral_m", "runner_up_lateral_m", 1.0)


def role_orders(n_regions: int) -> tuple[str, ...]:
    """Every order of the first ``n_regions`` roles, as ``"A,B,C"`` keys, in lexicographic order."""
    return tuple(",".join(p) for p in itertools.permutations(ROLES[:n_regions]))


@quantity(
    "left_to_right_order",
    values=("lateral_a_m", "lateral_b_m", "lateral_c_m"),
    outcomes=lambda p, n: role_orders(n),
    outcome_kind="order",
    defaults={"rank_by": "leftmost", "size": 3, "margin_m": 1.5, "chain": True},
    check_params=_check_ranked,
)
def left_to_right_order(q: QuantityInput) -> QuantityResult:
    """The order of three regions from the ego's left to its right (ego-frame y, descending).

    Valid where neighbours in that order are at least ``margin_m`` apart laterally.
    """
    if q.rows.shape[1] != 3:
        raise ValueError("left_to_right_order: needs exactly three regions")
    y = np.asarray(q.attrs.y_ego_m, dtype=np.float64)[q.rows]  # (N, 3)
    order = np.argsort(-y, axis=1, kind="stable")
    ys = np.take_along_axis(y, order, axis=1)
    valid = np.all(ys[:, :-1] - ys[:, 1:] >= q.params["margin_m"], axis=1)
    roles = np.array(ROLES, dtype=object)[order]
    outcome = np.array([",".join(r) for r in roles], dtype=object)
    return QuantityResult(
        valid=valid & np.all(np.isfinite(y), axis=1),
        values={"lateral_a_m": y[:, 0], "lateral_b_m": y[:, 1], "lateral_c_m": y[:, 2]},
        outcome=outcome,
    )


# --------------------------------------------------------------------------------------------
# Multi-view: which of the six cameras show a region at the keyframe.


def _camera_lists(q: QuantityInput, role: int = 0) -> list[tuple[str, ...]]:
    ch = np.array(q.channels, dtype=object)
    return [tuple(ch[v]) for v in q.visible[:, role, :]]


@quantity("visible_cameras", lists=("cameras",), outcomes=("one", "several"))
def visible_cameras(q: QuantityInput) -> QuantityResult:
    """The cameras in which the region passed the visibility filter at the keyframe."""
    count = q.visible[:, 0, :].sum(axis=1)
    return QuantityResult(
        valid=count >= 1,
        outcome=np.where(count > 1, "several", "one").astype(object),
        lists={"cameras": _camera_lists(q)},
    )


@quantity("visible_in_both", lists=("cameras",), outcomes=("yes", "no"))
def visible_in_both(q: QuantityInput) -> QuantityResult:
    """Whether the region is visible in both asked cameras (``cameras`` of the candidate)."""
    cam = q.cameras
    if np.any(cam < 0):
        raise ValueError("visible_in_both: every candidate needs two asked cameras")
    n = np.arange(q.n)
    in_a, in_b = q.visible[n, 0, cam[:, 0]], q.visible[n, 0, cam[:, 1]]
    return QuantityResult(
        valid=in_a | in_b,
        outcome=np.where(in_a & in_b, "yes", "no").astype(object),
        lists={"cameras": _camera_lists(q)},
    )


# Question types about motion, counts, order of events and appearance register here.
from autolabel.qa import dynamic as _dynamic  # noqa: E402, F401
