"""Track-level evidence from the accumulated LiDAR returns: clutter rejection and the extent of
each track's returns in its own frame.

Per track (its returns from every keyframe, stacked): how many returns a box holds (median over
keyframes), how high they reach above the ground, and how much of them lie on the box's outline
(a vehicle's returns sit on its surfaces; vegetation fills its volume). Clutter: a static track
whose returns fill the volume (vegetation), or that is taller and longer than any vehicle its
class allows (a facade, a hedge row).

After the refinement (:func:`rescore_tracks`, the last step of
:func:`autolabel.refine.refine_tracks`), per refined track (one size and pose per track):
how many returns its boxes hold and whether its returns lie on a line in bird's-eye view (a
wall); its score is scaled down where the LiDAR does not back it, so AP and AMOTA, which rank
by score, rank such tracks below the objects.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autolabel.boxes import Boxes3D
from autolabel.classes import CLASS_INDEX
from autolabel.refine.points import PointEvidence
from autolabel.refine.track_table import TrackTable

#: Height bins of a track's return profile, metres above ground.
PROFILE_BIN_M = 0.25
#: The roof is where the profile falls below this share of its densest bin.
ROOF_DROP_SHARE = 0.25
#: Returns spread along less than this (metres) have no shape to judge: a pedestrian, a pole, a
#: cone stand on a few square decimetres, and a bunch of their returns may happen to line up.
MIN_LINE_LENGTH_M = 1.5
#: A track's top: this quantile of its stacked returns' heights (a few stray returns of a sign
#: or a branch over a vehicle do not set it).
TOP_QUANTILE = 0.98


@dataclass
class TrackEvidence:
    """Per track: ``returns`` (median returns per observed box), ``height_m`` (median over
    boxes of the highest return above ground), ``surface_share`` (share of all its returns within
    ``surface_m`` of the box outline), ``roof_m`` (height above ground where the track's stacked
    return profile thins out, see :func:`roof_heights`), ``floor_m`` (its lowest return above
    ground, NaN without returns), ``body_length_m`` (the 5-95 % spread along its boxes' length
    of its returns below the roof), ``panel_fill`` (see :func:`panel_fill`)."""

    returns: np.ndarray
    height_m: np.ndarray
    surface_share: np.ndarray
    roof_m: np.ndarray
    floor_m: np.ndarray
    body_length_m: np.ndarray
    panel_fill: np.ndarray


def roof_heights(track: np.ndarray, height_m: np.ndarray, n_tracks: int) -> np.ndarray:
    """(T,) per track, the roof of its returns stacked over the clip: the lower edge of the first
    ``PROFILE_BIN_M`` height bin above the densest one that holds less than ``ROOF_DROP_SHARE``
    of the densest bin's returns (NaN without returns).

    A car's body and roof give a dense profile up to the roof; what hangs above it in the same
    box (a tree's canopy, a sign, a neighbour seen through) is sparse. The highest return of a
    box, which a single branch sets, cannot tell a car under a tree from a truck; the roof can.
    ``track``: (P,) track of each return; ``height_m``: (P,) its height above ground.
    """
    out = np.full(n_tracks, np.nan)
    if len(track) == 0:
        return out
    b = np.clip((height_m / PROFILE_BIN_M).astype(np.int64), 0, None)
    n_bins = int(b.max()) + 2
    hist = np.bincount(track * n_bins + b, minlength=n_tracks * n_bins).reshape(n_tracks, n_bins)
    peak = hist.argmax(axis=1)
    bins = np.arange(n_bins)
    thin = (hist < ROOF_DROP_SHARE * hist.max(axis=1, keepdims=True)) & (bins > peak[:, None])
    # The last bin is always empty, so every track with returns has a thin bin above its peak.
    first_thin = np.where(thin, bins, n_bins).min(axis=1)
    has = hist.sum(axis=1) > 0
    out[has] = first_thin[has] * PROFILE_BIN_M
    return out


def track_evidence(
    table: TrackTable, evidence: PointEvidence, evidence_row: np.ndarray, surface_m: float = 0.25
) -> TrackEvidence:
    """Evidence of every track of ``table``; ``evidence_row``: (K,) index of each table row's box
    in ``evidence`` (-1 where the row is not observed)."""
    from autolabel.refine.tracks import group_quantile

    n_tracks = table.n_tracks
    obs = evidence_row >= 0
    t_of_row = table.track_of_row
    count = np.where(obs, evidence.count[np.maximum(evidence_row, 0)], 0)
    returns = group_quantile(t_of_row[obs], count[obs], n_tracks, 0.5)
    # Per return: its table row (its track) and its distance inside the box outline.
    row_of_box = np.full(len(evidence.count), -1, np.int64)
    row_of_box[evidence_row[obs]] = np.flatnonzero(obs)
    ret_row = row_of_box[evidence.box]
    valid = ret_row >= 0
    ret_row = ret_row[valid]
    local = evidence.local_xyh_m[valid]
    half_l = table.boxes.size_wlh_m[ret_row, 1] / 2
    half_w = table.boxes.size_wlh_m[ret_row, 0] / 2
    inside = np.minimum(half_l - np.abs(local[:, 0]), half_w - np.abs(local[:, 1]))
    on_surface = inside < surface_m
    ret_track = t_of_row[ret_row]
    n_ret = np.bincount(ret_track, minlength=n_tracks)
    surface = np.bincount(ret_track, weights=on_surface, minlength=n_tracks) / np.maximum(n_ret, 1)
    surface = np.where(n_ret > 0, surface, np.nan)
    box_top = np.full(len(table.observed), np.nan)
    if len(ret_row):
        top = np.full(len(table.observed), -np.inf)
        np.maximum.at(top, ret_row, local[:, 2])
        box_top = np.where(np.isfinite(top), top, np.nan)
    has_top = np.isfinite(box_top)
    height = group_quantile(t_of_row[has_top], box_top[has_top], n_tracks, 0.5)
    roof = roof_heights(ret_track, local[:, 2], n_tracks)
    floor = np.full(n_tracks, np.inf)
    np.minimum.at(floor, ret_track, local[:, 2])
    floor = np.where(np.isfinite(floor), floor, np.nan)
    body = local[:, 2] < roof[ret_track]
    lo = group_quantile(ret_track[body], local[body, 0], n_tracks, 0.05)
    hi = group_quantile(ret_track[body], local[body, 0], n_tracks, 0.95)
    top = group_quantile(ret_track, local[:, 2], n_tracks, TOP_QUANTILE)
    fill = panel_fill(ret_track, local[:, 2], top)
    return TrackEvidence(returns, height, surface, roof, floor, hi - lo, fill)


def panel_fill(track: np.ndarray, height_m: np.ndarray, top_m: np.ndarray) -> np.ndarray:
    """(T,) per track, the share of its ``PROFILE_BIN_M`` height bins from ``GROUND_CLEARANCE_M``
    (above the ground) up to its ``top_m`` (T,) that hold at least ``ROOF_DROP_SHARE`` of its
    densest bin's returns; NaN where ``top_m`` is NaN. ``track``: (P,) track of each return,
    ``height_m``: (P,) its height above the ground, metres.

    A vehicle's side is a panel: every height up to its roof returns about as much as the
    others. A chain-link fence is seen as its top rail (a few dense bins) over thin posts, the
    mesh between them letting the beams through: from above a fence and a truck's side are both
    a line, their height profiles tell them apart."""
    from autolabel.refine.points import GROUND_CLEARANCE_M

    n_tracks = len(top_m)
    out = np.full(n_tracks, np.nan)
    known = np.isfinite(top_m)
    if not np.any(known):
        return out
    n_bins = np.zeros(n_tracks, np.int64)
    n_bins[known] = np.maximum(
        np.ceil((top_m[known] - GROUND_CLEARANCE_M) / PROFILE_BIN_M).astype(np.int64), 1
    )
    b = np.floor((height_m - GROUND_CLEARANCE_M) / PROFILE_BIN_M).astype(np.int64)
    use = (b >= 0) & (b < n_bins[track])
    width = int(n_bins.max())
    hist = np.bincount(track[use] * width + b[use], minlength=n_tracks * width)
    hist = hist.reshape(n_tracks, width)
    dense = hist >= ROOF_DROP_SHARE * hist.max(axis=1, keepdims=True)
    dense &= np.arange(width)[None, :] < n_bins[:, None]
    out[known] = dense[known].sum(axis=1) / n_bins[known]
    return out


def open_panels(
    features: TrackEvidence,
    label: np.ndarray,
    static: np.ndarray,
    min_fill: float,
    min_returns: float,
) -> np.ndarray:
    """(T,) bool: static truck, bus or trailer tracks whose ``panel_fill`` is below
    ``min_fill``: no side panel, a fence's rail over its posts (0: none). Needs ``min_returns``
    per box: a far truck's few returns leave height bins empty by chance."""
    big = np.isin(label, [CLASS_INDEX[c] for c in ("truck", "bus", "trailer")])
    with np.errstate(invalid="ignore"):
        judged = features.returns >= min_returns
        return static & big & judged & (features.panel_fill < min_fill)


def clutter_tracks(
    features: TrackEvidence,
    static: np.ndarray,
    max_surface_share: float,
    min_height_m: float,
    min_returns: float,
    min_floor_m: float = np.inf,
) -> np.ndarray:
    """(T,) bool: static tracks taller than ``min_height_m`` whose returns fill their volume
    (share on the outline below ``max_surface_share``: trees, hedges, facades seen through), or
    with fewer than ``min_returns`` returns per box (nothing solid there); and any track whose
    returns all lie higher than ``min_floor_m`` above the ground (a canopy or an upper facade:
    no road user is seen only above that height)."""
    with np.errstate(invalid="ignore"):
        volumetric = (features.surface_share < max_surface_share) & (
            features.height_m > min_height_m
        )
        empty = ~(features.returns >= min_returns)
        floating = features.floor_m > min_floor_m
    return (static & (volumetric | empty)) | floating


def relabel_low_vehicles(
    features: TrackEvidence,
    label: np.ndarray,
    max_car_height_m: float,
    min_returns: float,
    min_canopy_gap_m: float = np.inf,
    min_body_length_m: float = 0.0,
) -> np.ndarray:
    """(T,) track classes with large-vehicle tracks (truck, bus, trailer, construction vehicle)
    turned into cars where, over the whole track, their returns never reach above
    ``max_car_height_m`` (a size-only classifier calls a car whose cluster merged with its
    neighbour a truck, but the roof line seen over many keyframes tells them apart), or where
    their stacked profile's roof stays below that height while their boxes' highest returns lie
    at least ``min_canopy_gap_m`` above the roof and the returns below the roof span at least
    ``min_body_length_m`` along the boxes (a car under a tree: sparse canopy above a car's long,
    dense body; a truck's returns go on up to its roof, a tree's trunk and bushes are short).
    Needs ``min_returns`` per box."""
    big = np.isin(
        label, [CLASS_INDEX[c] for c in ("truck", "bus", "trailer", "construction_vehicle")]
    )
    with np.errstate(invalid="ignore"):
        under_canopy = (
            (features.roof_m <= max_car_height_m)
            & (features.height_m >= features.roof_m + min_canopy_gap_m)
            & (features.body_length_m >= min_body_length_m)
        )
        low = (features.height_m < max_car_height_m) | under_canopy
        low &= features.returns >= min_returns
    return np.where(big & low, CLASS_INDEX["car"], label)


def cabin_side(
    table: TrackTable,
    evidence: PointEvidence,
    evidence_row: np.ndarray,
    track_center_xy: np.ndarray,
    track_yaw: np.ndarray,
    roof_fraction: float,
    min_offset_m: float,
    max_roof_span: float = 1.0,
) -> np.ndarray:
    """(T,) per track, where its roof sits along the heading ``track_yaw`` from the middle of its
    accumulated returns: -1 behind (a car's cabin sits behind its middle, the bonnet is longer
    than the boot), +1 ahead, 0 undecided (fewer than 10 roof returns, within ``min_offset_m``,
    or a roof spanning more than ``max_roof_span`` of the returns' length: no cabin shape). Returns of every keyframe are stacked in the track's frame
    (``track_center_xy`` (T, 2), ``track_yaw`` (T,)); the roof is what reaches above
    ``roof_fraction`` of the track's highest returns."""
    n_tracks = table.n_tracks
    out = np.zeros(n_tracks, np.int64)
    obs = evidence_row >= 0
    row_of_box = np.full(len(evidence.count), -1, np.int64)
    row_of_box[evidence_row[obs]] = np.flatnonzero(obs)
    ret_row = row_of_box[evidence.box]
    valid = ret_row >= 0
    ret_row, local = ret_row[valid], evidence.local_xyh_m[valid]
    if len(ret_row) == 0:
        return out
    boxes = table.boxes
    c, s = np.cos(boxes.yaw_rad[ret_row]), np.sin(boxes.yaw_rad[ret_row])
    gx = boxes.center_m[ret_row, 0] + c * local[:, 0] - s * local[:, 1]
    gy = boxes.center_m[ret_row, 1] + s * local[:, 0] + c * local[:, 1]
    track = table.track_of_row[ret_row]
    tc, ts = np.cos(track_yaw[track]), np.sin(track_yaw[track])
    along = tc * (gx - track_center_xy[track, 0]) + ts * (gy - track_center_xy[track, 1])
    height = local[:, 2]
    top = np.full(n_tracks, -np.inf)
    np.maximum.at(top, track, height)
    lo = np.full(n_tracks, np.inf)
    hi = np.full(n_tracks, -np.inf)
    np.minimum.at(lo, track, along)
    np.maximum.at(hi, track, along)
    middle = 0.5 * (lo + hi)
    roof = height >= roof_fraction * top[track]
    n_roof = np.bincount(track[roof], minlength=n_tracks)
    roof_along = np.bincount(track[roof], weights=along[roof], minlength=n_tracks) / np.maximum(
        n_roof, 1
    )
    offset = roof_along - middle
    roof_lo = np.full(n_tracks, np.inf)
    roof_hi = np.full(n_tracks, -np.inf)
    np.minimum.at(roof_lo, track[roof], along[roof])
    np.maximum.at(roof_hi, track[roof], along[roof])
    with np.errstate(invalid="ignore", divide="ignore"):
        span = (roof_hi - roof_lo) / (hi - lo)
    decided = (n_roof >= 10) & (np.abs(offset) >= min_offset_m) & (span <= max_roof_span)
    out[decided] = np.sign(offset[decided]).astype(np.int64)
    return out


@dataclass
class ShapeEvidence:
    """Per refined track, from its returns stacked in its boxes' frames (one box per keyframe):
    ``returns`` (median over its boxes of the returns inside the box), ``flatness`` (the
    square root of the ratio of the smaller to the larger eigenvalue of the covariance of its
    stacked returns' bird's-eye positions inside the box: ~0 for a line of returns, as a wall
    seen from the road; NaN with fewer than ``min_points`` returns or where the returns spread
    less than a line of ``MIN_LINE_LENGTH_M`` along their main axis), ``speed_mps`` (median speed
    of its boxes), ``top_m`` (the ``TOP_QUANTILE`` quantile of its stacked returns' heights
    above the ground, metres; NaN with fewer than ``min_points`` returns), ``column`` (what
    stands over its boxes, :class:`ColumnEvidence`; None where the evidence has no column),
    ``hugging`` (the returns in the evidence's margin around its boxes' footprints, all boxes
    together, over those inside them; NaN without returns inside; None where not computed)."""

    returns: np.ndarray
    flatness: np.ndarray
    speed_mps: np.ndarray
    top_m: np.ndarray
    column: ColumnEvidence | None = None
    hugging: np.ndarray | None = None


@dataclass
class ColumnEvidence:
    """Per refined track, what stands in the column over its boxes (from the top of the box,
    plus ``TOP_MARGIN_M``, up to ``PointEvidence.above_m`` higher), stacked over its boxes in
    their frames: ``returns`` (how many, all boxes together), ``density`` (returns per metre of
    height in the column over those per metre in the boxes, between ``GROUND_CLEARANCE_M`` and
    the top plus ``TOP_MARGIN_M``; 0 without returns in the boxes), ``overlap`` (histogram
    intersection, in [0, 1], of the bird's-eye positions of the column's returns and of the
    boxes' returns on a grid of ``COLUMN_CELL_M`` cells; NaN without returns in either).

    A wall or a building's corner goes on up: its returns over the box lie where its returns in
    the box lie (overlap near 1) and as densely. Over a car there is open sky, or a canopy spread
    over its roof where the car's returns lie on its faces (overlap small)."""

    returns: np.ndarray
    density: np.ndarray
    overlap: np.ndarray


#: Bird's-eye cell of the column test, metres (a few LiDAR returns wide on a wall at 10-40 m).
COLUMN_CELL_M = 0.25


def column_evidence(
    track_of_box: np.ndarray, n_tracks: int, boxes: Boxes3D, evidence: PointEvidence
) -> ColumnEvidence:
    """:class:`ColumnEvidence` of refined tracks from ``evidence`` gathered with a column
    (``above_m`` > 0); returns outside the boxes' footprints (the gathering margin) are left
    out."""
    from autolabel.refine.points import GROUND_CLEARANCE_M, TOP_MARGIN_M

    size = boxes.size_wlh_m
    parts = []
    for box, local in (
        (evidence.box, evidence.local_xyh_m),
        (evidence.above_box, evidence.above_local_xyh_m),
    ):
        inside = (np.abs(local[:, 0]) <= size[box, 1] / 2) & (
            np.abs(local[:, 1]) <= size[box, 0] / 2
        )
        parts.append((track_of_box[box[inside]], local[inside]))
    (t_in, l_in), (t_up, l_up) = parts
    n_in = np.bincount(t_in, minlength=n_tracks).astype(np.float64)
    n_up = np.bincount(t_up, minlength=n_tracks).astype(np.float64)
    # Refined tracks have one size: the height of their boxes' returns' band.
    height = np.zeros(n_tracks)
    height[track_of_box] = size[:, 2] + TOP_MARGIN_M - GROUND_CLEARANCE_M
    with np.errstate(invalid="ignore", divide="ignore"):
        density = np.where(
            n_in > 0, (n_up / evidence.above_m) / (n_in / np.maximum(height, 1e-6)), 0.0
        )

    def cells(track, local):
        ij = np.floor(local[:, :2] / COLUMN_CELL_M).astype(np.int64) + (1 << 20)
        keys, counts = np.unique((track << 42) | (ij[:, 0] << 21) | ij[:, 1], return_counts=True)
        return keys, counts

    k_in, c_in = cells(t_in, l_in)
    k_up, c_up = cells(t_up, l_up)
    _, i_in, i_up = np.intersect1d(k_in, k_up, assume_unique=True, return_indices=True)
    t_common = k_in[i_in] >> 42
    share = np.minimum(c_in[i_in] / n_in[t_common], c_up[i_up] / n_up[t_common])
    overlap = np.bincount(t_common, weights=share, minlength=n_tracks)
    overlap = np.where((n_in > 0) & (n_up > 0), overlap, np.nan)
    return ColumnEvidence(n_up, density, overlap)


def shape_evidence(
    track_of_box: np.ndarray, n_tracks: int, boxes: Boxes3D, evidence: PointEvidence,
    min_points: int,
) -> ShapeEvidence:  # fmt: skip
    """:class:`ShapeEvidence` of refined tracks. ``track_of_box``: (N,) track (0..T-1) of each
    of the N ``boxes``; ``evidence``: their returns (any margin: only those inside a box
    count)."""
    from autolabel.refine.tracks import group_quantile

    size = boxes.size_wlh_m
    x, y = evidence.local_xyh_m[:, 0], evidence.local_xyh_m[:, 1]
    inside = (np.abs(x) <= size[evidence.box, 1] / 2) & (np.abs(y) <= size[evidence.box, 0] / 2)
    count = np.bincount(evidence.box[inside], minlength=len(track_of_box))
    returns = group_quantile(track_of_box, count, n_tracks, 0.5)
    speed = np.hypot(boxes.velocity_mps[:, 0], boxes.velocity_mps[:, 1])
    speed = group_quantile(track_of_box, np.nan_to_num(speed), n_tracks, 0.5)

    # Bird's-eye covariance of the returns inside the boxes, per track (closed-form eigenvalues
    # of the 2x2 matrix).
    t = track_of_box[evidence.box[inside]]
    xi, yi = x[inside], y[inside]
    n_in = np.bincount(t, minlength=n_tracks).astype(np.float64)
    n = np.maximum(n_in, 1)
    mx = np.bincount(t, xi, n_tracks) / n
    my = np.bincount(t, yi, n_tracks) / n
    cxx = np.bincount(t, xi * xi, n_tracks) / n - mx**2
    cyy = np.bincount(t, yi * yi, n_tracks) / n - my**2
    cxy = np.bincount(t, xi * yi, n_tracks) / n - mx * my
    mean = 0.5 * (cxx + cyy)
    radius = np.sqrt(np.maximum(0.25 * (cxx - cyy) ** 2 + cxy**2, 0.0))
    lo, hi = np.maximum(mean - radius, 0.0), mean + radius
    with np.errstate(invalid="ignore", divide="ignore"):
        flatness = np.sqrt(lo / hi)
    # A uniform spread over a length L has variance L^2 / 12.
    long = hi >= MIN_LINE_LENGTH_M**2 / 12
    flatness = np.where((n_in >= min_points) & long, flatness, np.nan)
    top = group_quantile(t, evidence.local_xyh_m[inside, 2], n_tracks, TOP_QUANTILE)
    top = np.where(n_in >= min_points, top, np.nan)
    column = None
    if evidence.above_box is not None and evidence.above_m > 0:
        column = column_evidence(track_of_box, n_tracks, boxes, evidence)
    # The evidence holds the returns of each footprint grown by its margin: those not inside
    # lie in the band around the box.
    around = np.bincount(track_of_box[evidence.box[~inside]], minlength=n_tracks)
    with np.errstate(invalid="ignore", divide="ignore"):
        hugging = np.where(n_in > 0, around / n_in, np.where(around > 0, np.inf, np.nan))
    return ShapeEvidence(returns, flatness, speed, top, column, hugging)


#: Classes whose returns may lie on one line, so no facade test: a barrier by nature; a truck, a
#: bus or a trailer seen from its side (a flat panel as long and as high as a house front; by
#: shape the two are one).
LINE_CLASSES = [CLASS_INDEX[c] for c in ("barrier", "truck", "bus", "trailer")]
#: Classes of narrow road users that ride with room around them (the hugging test).
NARROW_CLASSES = [CLASS_INDEX[c] for c in ("bicycle", "motorcycle")]


def evidence_factor(
    shape: ShapeEvidence,
    label: np.ndarray,
    returns_scale: float,
    facade_max_flatness: float,
    facade_max_speed_mps: float,
    facade_factor: float,
    tower_min_m: float = np.inf,
    tower_factor: float = 1.0,
    wall_min_overlap: float = np.inf,
    wall_min_density: float = 0.0,
    wall_factor: float = 1.0,
    wall_min_returns: float = 0.0,
    hugging_max_ratio: float = np.inf,
    hugging_factor: float = 1.0,
) -> np.ndarray:
    """(T,) factor in [0, 1] on each refined track's score from its returns:
    ``1 - exp(-returns / returns_scale)`` (a track whose boxes hold almost no returns is backed
    by nothing the LiDAR saw; 1 with ``returns_scale`` 0), times ``facade_factor`` for a facade: a track (of ``label`` (T,)
    not in ``LINE_CLASSES``) slower than ``facade_max_speed_mps`` whose returns lie on a line
    (flatness at most ``facade_max_flatness``): a wall, a fence, a building front. A vehicle
    seen only from its back gives a line too, but those that are seen so long are followed on
    the road, moving. Times ``tower_factor`` for a track whose returns reach ``tower_min_m``
    above the ground (its ``top_m``): taller than any road vehicle, a building, whatever its
    class, shape or motion (a track gliding along a row of facades moves). Times ``wall_factor``
    for a track whose returns go on up over its boxes (:class:`ColumnEvidence`: at least
    ``wall_min_returns`` returns in the column, lying where the boxes' returns lie, overlap at
    least ``wall_min_overlap``, density at least ``wall_min_density`` of the boxes'): a wall
    or a building's corner, whatever its class or motion; a vehicle's body ends at its box's top
    (nothing over it, or a canopy elsewhere than its faces). Times ``hugging_factor`` for a
    two-wheeler (``NARROW_CLASSES``) whose boxes are hugged by returns: more than
    ``hugging_max_ratio`` times as many in the band around its footprints (the evidence's
    margin) as inside them (:attr:`ShapeEvidence.hugging`). A bicycle or a motorcycle is a narrow
    object with room around it (it needs it to ride, a rider to get on); returns pressed
    against its box from outside mean the box is a two-wheeler-sized piece cut from something
    larger (a vehicle's side or end, a hedge, a barrier)."""
    support = np.ones(len(shape.returns))
    if returns_scale > 0:
        support = 1.0 - np.exp(-np.nan_to_num(shape.returns) / returns_scale)
    with np.errstate(invalid="ignore"):
        facade = (
            (shape.flatness <= facade_max_flatness)
            & (shape.speed_mps < facade_max_speed_mps)
            & ~np.isin(label, LINE_CLASSES)
        )
        tower = shape.top_m >= tower_min_m
        wall = np.zeros(len(label), bool)
        if shape.column is not None:
            col = shape.column
            wall = (
                (col.returns >= wall_min_returns)
                & (col.overlap >= wall_min_overlap)
                & (col.density >= wall_min_density)
            )
        hugged = np.zeros(len(label), bool)
        if shape.hugging is not None:
            hugged = np.isin(label, NARROW_CLASSES) & (shape.hugging > hugging_max_ratio)
    factor = np.where(facade, facade_factor, 1.0) * np.where(tower, tower_factor, 1.0)
    factor = factor * np.where(hugged, hugging_factor, 1.0)
    return support * factor * np.where(wall, wall_factor, 1.0)


def rescore_tracks(
    tracks: list[Boxes3D],
    evidence: PointEvidence,
    returns_scale: float,
    facade_max_flatness: float,
    facade_max_speed_mps: float,
    facade_factor: float,
    min_points: int = 20,
    tower_min_m: float = np.inf,
    tower_factor: float = 1.0,
    wall_min_overlap: float = np.inf,
    wall_min_density: float = 0.0,
    wall_factor: float = 1.0,
    hugging_max_ratio: float = np.inf,
    hugging_factor: float = 1.0,
) -> list[Boxes3D]:
    """Refined ``tracks`` (one box per track and keyframe, one class per track) with every box's
    score times its track's :func:`evidence_factor`; ``evidence``: the returns of
    ``Boxes3D.concatenate(tracks)`` (with the column over them for the wall test). Boxes are
    otherwise unchanged."""
    boxes = Boxes3D.concatenate(list(tracks))
    if len(boxes) == 0:
        return list(tracks)
    uniq, track_of_box = np.unique(boxes.track_id, return_inverse=True)
    shape = shape_evidence(track_of_box, len(uniq), boxes, evidence, min_points)
    label = np.zeros(len(uniq), np.int64)
    label[track_of_box] = boxes.label
    factor = evidence_factor(
        shape,
        label,
        returns_scale,
        facade_max_flatness,
        facade_max_speed_mps,
        facade_factor,
        tower_min_m,
        tower_factor,
        wall_min_overlap,
        wall_min_density,
        wall_factor,
        min_points,
        hugging_max_ratio,
        hugging_factor,
    )
    out, start = [], 0
    for b in tracks:  # the clip's keyframes, not its objects
        n = len(b)
        rescored = b[np.arange(n)]
        rescored.score = (b.score * factor[track_of_box[start : start + n]]).astype(np.float32)
        out.append(rescored)
        start += n
    return out
