"""Track rescoring from the returns of refined tracks (``autolabel.refine.classify``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autolabel.boxes import Boxes3D
from autolabel.config import ConfigError, PipelineConfig
from autolabel.refine import RefineConfig
from autolabel.refine.classify import rescore_tracks, shape_evidence
from autolabel.refine.points import PointEvidence
from tests.test_refine import TIMES, merge, track_boxes

N = len(TIMES)
#: Returns of one box (x along its 4.5 m length, y along its 1.9 m width, height), box frame.
X = np.linspace(-2.2, 2.2, 30)
WALL = np.column_stack([X, np.full(30, 0.9), np.full(30, 1.0)])
# An L: the side and the back of a car.
Y = np.linspace(-0.9, 0.9, 10)
OUTLINE = np.concatenate(
    [WALL[::3].copy(), np.column_stack([np.full(10, -2.2), Y, np.full(10, 0.8)])]
)
# A car's back seen from behind: a line across the box.
BACK = np.column_stack([np.full(30, -2.2), np.linspace(-0.9, 0.9, 30), np.full(30, 1.0)])
# A pedestrian's returns lined up over 0.6 m: too short a line to be judged.
SHORT = np.column_stack([np.linspace(-0.3, 0.3, 30), np.zeros(30), np.full(30, 1.2)])
# Outside the 4.5 x 1.9 box (inside the gathering margin): never counted.
OUTSIDE = np.array([[2.5, 0.0, 1.0], [0.0, 1.2, 1.0]])


def _evidence(per_box: list[np.ndarray]) -> PointEvidence:
    """The same returns in every keyframe's boxes (boxes in concatenate order: frame by frame,
    tracks in ``per_box`` order)."""
    local = np.concatenate([np.concatenate(per_box) for _ in range(N)])
    counts = np.tile([len(p) for p in per_box], N)
    box = np.repeat(np.arange(len(counts)), counts)
    return PointEvidence(box, local, counts, np.full(len(counts), 10.0))


def _flatness(points: np.ndarray) -> float:
    lo, hi = np.linalg.eigvalsh(np.cov(points[:, :2].T, bias=True))
    return math.sqrt(max(lo, 0.0) / hi)


def _tracks():
    still = np.zeros(N)
    at = [np.tile([8.0, 4.0 * k], (N, 1)) for k in range(5)]
    moving = np.tile([[6.0, 0.0]], (N, 1))
    return merge(
        track_boxes(0, "car", at[0], still),  # a wall
        track_boxes(1, "car", at[1], still),  # a parked car
        track_boxes(2, "barrier", at[2], still),  # a barrier: a line by nature
        track_boxes(3, "car", at[3], still, velocity=moving),  # a car seen from behind
        track_boxes(4, "pedestrian", at[4], still),  # one return per box
    )


def test_shape_evidence_counts_returns_inside_the_box_and_finds_lines():
    tracks = _tracks()
    per_box = [
        np.concatenate([WALL, OUTSIDE]), OUTLINE, WALL, BACK, SHORT,
    ]  # fmt: skip
    boxes = Boxes3D.concatenate(tracks)
    _, track_of_box = np.unique(boxes.track_id, return_inverse=True)
    shape = shape_evidence(track_of_box, 5, boxes, _evidence(per_box), min_points=20)
    assert shape.returns.tolist() == [30, 20, 30, 30, 30]
    assert shape.flatness[0] == pytest.approx(0.0, abs=1e-6)
    assert shape.flatness[1] == pytest.approx(_flatness(OUTLINE), abs=1e-9)
    assert shape.flatness[3] == pytest.approx(0.0, abs=1e-6)
    assert math.isnan(shape.flatness[4])  # a line of 0.6 m < MIN_LINE_LENGTH_M
    assert shape.speed_mps.tolist() == pytest.approx([0.0, 0.0, 0.0, 6.0, 0.0])


def test_walls_and_unbacked_tracks_rank_below_objects():
    tracks = _tracks()
    per_box = [WALL, OUTLINE, WALL, BACK, WALL[:1]]
    assert _flatness(OUTLINE) > 0.1  # an L is no line
    out = rescore_tracks(tracks, _evidence(per_box), 2.0, 0.1, 0.5, 0.2)
    # By hand: support 1 - exp(-returns / 2) (30 returns a box, the L 20, the last one 1); the wall (static, a line, a car) times 0.2; the
    # barrier's line and the moving car's back are no facades.
    full = 1 - math.exp(-15)
    expected = {0: 0.8 * full * 0.2, 1: 0.8 * (1 - math.exp(-10)), 2: 0.8 * full, 3: 0.8 * full,
                4: 0.8 * (1 - math.exp(-0.5))}  # fmt: skip
    for before, after in zip(tracks, out, strict=True):
        assert after.score.tolist() == pytest.approx(
            [expected[t] for t in after.track_id], rel=1e-6
        )
        for name in ("center_m", "size_wlh_m", "yaw_rad", "label", "track_id"):
            assert np.array_equal(getattr(after, name), getattr(before, name))
    # With a speed gate above its 6 m/s the car's back is taken for a wall too.
    gated = rescore_tracks(tracks, _evidence(per_box), 2.0, 0.1, 7.0, 0.2)
    assert gated[0].score[3] == pytest.approx(0.8 * full * 0.2)
    spared = rescore_tracks(tracks, _evidence(per_box), 2.0, 0.1, 0.5, 1.0)
    assert spared[0].score[0] == pytest.approx(0.8 * full)
    # Without the support term only the wall changes.
    facades = rescore_tracks(tracks, _evidence(per_box), 0.0, 0.1, 0.5, 0.2)
    assert facades[0].score.tolist() == pytest.approx([0.16, 0.8, 0.8, 0.8, 0.8])


def test_tracks_taller_than_any_vehicle_rank_below_objects():
    from autolabel.refine.classify import TOP_QUANTILE

    tracks = _tracks()
    # The parked car's L, stacked up a facade to 4.7 m above the ground.
    tall = OUTLINE.copy()
    tall[:, 2] = np.linspace(0.3, 4.7, len(tall))
    per_box = [WALL, tall, WALL, BACK, SHORT]
    boxes = Boxes3D.concatenate(tracks)
    _, track_of_box = np.unique(boxes.track_id, return_inverse=True)
    shape = shape_evidence(track_of_box, 5, boxes, _evidence(per_box), min_points=20)
    # The lower order statistic of the 20 heights stacked over 20 keyframes.
    stacked = np.sort(np.tile(tall[:, 2], N))
    assert shape.top_m[1] == pytest.approx(stacked[int(TOP_QUANTILE * (len(stacked) - 1))])
    assert shape.top_m[1] >= 4.4 and shape.top_m[3] == pytest.approx(1.0)
    out = rescore_tracks(tracks, _evidence(per_box), 0.0, 0.1, 0.5, 0.2, 20, 4.4, 0.5)
    # The wall's line (x 0.2) and the tall track (x 0.5) drop, whatever their class and motion.
    assert out[0].score.tolist() == pytest.approx([0.16, 0.4, 0.8, 0.8, 0.8])
    off = rescore_tracks(tracks, _evidence(per_box), 0.0, 0.1, 0.5, 0.2)
    assert off[0].score.tolist() == pytest.approx([0.16, 0.8, 0.8, 0.8, 0.8])


def test_two_wheelers_hugged_by_returns_rank_below_objects():
    # Returns just outside the 4.5 x 1.9 boxes, within the 0.3 m gathering margin: a vehicle's
    # side running on past a two-wheeler-sized piece of it.
    side = np.column_stack([np.linspace(-2.0, 2.0, 10), np.full(10, 1.1), np.full(10, 1.0)])
    still = np.zeros(N)
    at = [np.tile([8.0, 4.0 * k], (N, 1)) for k in range(5)]
    tracks = merge(
        track_boxes(0, "motorcycle", at[0], still),  # hugged: 10 around, 20 inside
        track_boxes(1, "motorcycle", at[1], still),  # room around it: 2 around, 20 inside
        track_boxes(2, "car", at[2], still),  # hugged, but a car (parked in a row)
        track_boxes(3, "bicycle", at[3], still),  # nothing inside, 2 around
        track_boxes(4, "bicycle", at[4], still),  # 8 around, 20 inside: at the bound
    )
    per_box = [
        np.concatenate([OUTLINE, side]), np.concatenate([OUTLINE, OUTSIDE]),
        np.concatenate([OUTLINE, side]), OUTSIDE, np.concatenate([OUTLINE, side[:8]]),
    ]  # fmt: skip
    boxes = Boxes3D.concatenate(tracks)
    _, track_of_box = np.unique(boxes.track_id, return_inverse=True)
    shape = shape_evidence(track_of_box, 5, boxes, _evidence(per_box), min_points=20)
    # Per box (the same in every keyframe): returns around / returns inside.
    assert shape.hugging.tolist() == pytest.approx([10 / 20, 2 / 20, 10 / 20, math.inf, 8 / 20])
    # No facade, tower or support terms (factor 1, bounds off): only the hugging test.
    out = rescore_tracks(
        tracks, _evidence(per_box), 0.0, 0.1, 0.5, 1.0, hugging_max_ratio=0.4, hugging_factor=0.2
    )
    assert out[0].score.tolist() == pytest.approx([0.16, 0.8, 0.8, 0.16, 0.8])
    off = rescore_tracks(tracks, _evidence(per_box), 0.0, 0.1, 0.5, 1.0)
    assert off[0].score.tolist() == pytest.approx([0.8] * 5)


def test_rescoring_is_in_the_refine_config_and_validated():
    assert RefineConfig().evidence_score
    for key, value in (
        ("support_returns_scale", -1.0),
        ("facade_score_factor", 1.5),
        ("facade_max_flatness", -0.1),
        ("tower_min_height_m", 0.0),
        ("tower_score_factor", 2.0),
        ("wall_column_m", -1.0),
        ("wall_min_overlap", 1.5),
        ("wall_min_density", -0.5),
        ("wall_score_factor", 2.0),
        ("hugging_max_ratio", -0.1),
        ("hugging_score_factor", 1.5),
        ("hugging_score_factor", math.nan),
    ):
        with pytest.raises(ConfigError, match=f"refine_options.*{key}"):
            PipelineConfig(refine_options={key: value})


def _keyframes_with_a_wall_and_a_car() -> list:
    """Keyframe returns (ego frame = global frame) over flat ground at z = 0: a wall's returns
    on the line y = 0.9 along a 4.5 m box centred at (8, 0), and a car's L (side and back) in a
    box centred at (8, 8); the same in every keyframe."""
    from autolabel.refine.points import keyframe_returns
    from calib.se3 import SE3

    g = np.arange(-20.0, 20.01, 0.5)
    gx, gy = np.meshgrid(g, g)
    ground = np.column_stack([gx.ravel(), gy.ravel(), np.zeros(gx.size)])
    wall = np.concatenate([WALL + [8.0, 0.0, dz] for dz in (-0.4, 0.0, 0.4)])
    car = np.concatenate([OUTLINE + [8.0, 8.0, dz] for dz in (-0.4, 0.0, 0.4)])
    points = np.concatenate([ground, wall, car])
    return [keyframe_returns(points, SE3.identity()) for _ in range(N)]


def test_refine_tracks_rescores_its_refined_tracks_from_the_kept_returns():
    from autolabel.refine import refine_tracks
    from autolabel.refine.points import keyframes_evidence

    still = np.zeros(N)
    tracks = merge(
        track_boxes(0, "car", np.tile([8.0, 0.0], (N, 1)), still),  # a wall
        track_boxes(1, "car", np.tile([8.0, 8.0], (N, 1)), still),  # a parked car
    )
    evidence = keyframes_evidence(_keyframes_with_a_wall_and_a_car(), tracks, 0.3)
    on, _ = refine_tracks(TIMES, tracks, RefineConfig(), evidence)
    off, _ = refine_tracks(TIMES, tracks, RefineConfig(evidence_score=False), evidence)
    # Only the wall's score changes (static, its returns on one line): times the factor.
    for a, b in zip(on, off, strict=True):
        assert a.track_id.tolist() == b.track_id.tolist() == [0, 1]
        assert a.score.tolist() == pytest.approx([b.score[0] * 0.2, b.score[1]], rel=1e-6)
        for name in ("center_m", "size_wlh_m", "yaw_rad", "label"):
            assert np.array_equal(getattr(a, name), getattr(b, name))
    # Evidence that kept no keyframe returns (not gathered from a clip) rescores nothing.
    bare = PointEvidence(evidence.box, evidence.local_xyh_m, evidence.count, evidence.range_m)
    kept, _ = refine_tracks(TIMES, tracks, RefineConfig(), bare)
    assert all(np.array_equal(a.score, b.score) for a, b in zip(kept, off, strict=True))


# The column over a 1.6 m high box: from its top plus TOP_MARGIN_M (1.9 m) to 2 m higher.
COLUMN_M = 2.0
# A wall going on up over the box: the same line as WALL, 1.5 m higher.
WALL_ABOVE = WALL + [0.0, 0.0, 1.5]
# A canopy over a car's roof: over the middle of the box, away from the car's faces.
CANOPY = np.column_stack([np.linspace(-1.0, 1.0, 30), np.linspace(-0.5, 0.5, 30), np.full(30, 2.5)])


def _column_evidence(per_box: list[np.ndarray], above: list[np.ndarray]) -> PointEvidence:
    """As :func:`_evidence`, with ``above`` the returns of each box's column."""
    evidence = _evidence(per_box)
    local = np.concatenate([np.concatenate(above) for _ in range(N)])
    box = np.repeat(np.arange(N * len(above)), np.tile([len(a) for a in above], N))
    evidence.above_box, evidence.above_local_xyh_m, evidence.above_m = box, local, COLUMN_M
    return evidence


def test_column_evidence_tells_a_wall_going_up_from_a_car_and_a_canopy():
    from autolabel.refine.classify import column_evidence

    tracks = _tracks()
    empty = np.zeros((0, 3))
    per_box = [WALL, OUTLINE, WALL, BACK, SHORT]
    above = [WALL_ABOVE, CANOPY, empty, empty, empty]
    boxes = Boxes3D.concatenate(tracks)
    _, track_of_box = np.unique(boxes.track_id, return_inverse=True)
    col = column_evidence(track_of_box, 5, boxes, _column_evidence(per_box, above))
    assert col.returns.tolist() == [30 * N, 30 * N, 0, 0, 0]
    # By hand: returns per metre over the box's 2 m column against those per metre of the
    # box's band from 0.25 m above the ground to 0.3 m over its 1.6 m top (1.65 m).
    assert col.density.tolist() == pytest.approx(
        [(30 / 2.0) / (30 / 1.65), (30 / 2.0) / (20 / 1.65), 0.0, 0.0, 0.0]
    )
    # The wall's returns over the box lie in the cells of those in it; the canopy's in none of
    # the car's (its faces at y 0.9 and x -2.2; the canopy within 1 m of the middle).
    assert col.overlap[0] == pytest.approx(1.0)
    assert col.overlap[1] == pytest.approx(0.0)
    assert np.isnan(col.overlap[2:]).all()
    # Half the wall going on up: the histogram intersection is the share of its cells over
    # which the wall goes on (each cell holds one of the 30 returns: 0.147 m apart, 0.25 m
    # cells, so some hold two; count them by hand).
    half = WALL_ABOVE[WALL_ABOVE[:, 0] > 0]
    col = column_evidence(
        track_of_box, 5, boxes, _column_evidence(per_box, [half, CANOPY, empty, empty, empty])
    )
    cell = np.floor(WALL[:, 0] / 0.25)
    cells, n_in = np.unique(cell, return_counts=True)
    up_cell = np.floor(half[:, 0] / 0.25)
    n_up = np.array([(up_cell == c).sum() for c in cells])
    assert col.overlap[0] == pytest.approx(np.minimum(n_in / 30, n_up / len(half)).sum())


def test_walls_going_up_over_their_boxes_rank_below_objects_whatever_their_class():
    still = np.zeros(N)
    at = [np.tile([8.0, 4.0 * k], (N, 1)) for k in range(3)]
    tracks = merge(
        track_boxes(0, "trailer", at[0], still),  # a wall called trailer: no facade test
        track_boxes(1, "car", at[1], still),  # a parked car under a canopy
        track_boxes(2, "car", at[2], still),  # a parked car in the open
    )
    evidence = _column_evidence([WALL, OUTLINE, OUTLINE], [WALL_ABOVE, CANOPY, np.zeros((0, 3))])
    args = (0.0, 0.1, 0.5, 0.2, 20, np.inf, 1.0)
    out = rescore_tracks(tracks, evidence, *args, 0.6, 0.25, 0.3)
    assert out[0].score.tolist() == pytest.approx([0.8 * 0.3, 0.8, 0.8])
    # The wall test asks for the density: half as dense as the box's returns is not enough
    # where 0.9 is asked (the wall's column is 0.825 as dense).
    sparse = rescore_tracks(tracks, evidence, *args, 0.6, 0.9, 0.3)
    assert sparse[0].score.tolist() == pytest.approx([0.8, 0.8, 0.8])
    # Without a column in the evidence, no wall test.
    off = rescore_tracks(tracks, _evidence([WALL, OUTLINE, OUTLINE]), *args, 0.6, 0.25, 0.3)
    assert off[0].score.tolist() == pytest.approx([0.8, 0.8, 0.8])


def test_keyframes_evidence_keeps_the_column_apart_and_the_box_returns_unchanged():
    from autolabel.refine.points import TOP_MARGIN_M, keyframe_returns, keyframes_evidence
    from calib.se3 import SE3

    g = np.arange(-20.0, 20.01, 0.5)
    gx, gy = np.meshgrid(g, g)
    ground = np.column_stack([gx.ravel(), gy.ravel(), np.zeros(gx.size)])
    # A wall from 0.6 m to 5.4 m on the line y = 0.9 of a box centred at (8, 0).
    wall = np.concatenate([WALL + [8.0, 0.0, dz] for dz in np.arange(-0.4, 4.41, 0.4)])
    keyframes = [keyframe_returns(np.concatenate([ground, wall]), SE3.identity())]
    tracks = [track_boxes(0, "car", np.tile([8.0, 0.0], (N, 1)), np.zeros(N))[0]]
    plain = keyframes_evidence(keyframes, tracks, 0.3)
    column = keyframes_evidence(keyframes, tracks, 0.3, COLUMN_M)
    for name in ("box", "local_xyh_m", "count", "range_m"):
        assert np.array_equal(getattr(plain, name), getattr(column, name))
    assert len(plain.above_box) == 0
    # The box is 1.6 m high on the ground: heights 0.6 to 1.8 m in it, 2.2 to 3.8 m in the
    # column up to 1.6 + TOP_MARGIN_M + 2 m.
    top = 1.6 + TOP_MARGIN_M
    assert sorted(set(np.round(plain.local_xyh_m[:, 2], 6))) == pytest.approx([0.6, 1.0, 1.4, 1.8])
    heights = sorted(set(np.round(column.above_local_xyh_m[:, 2], 6)))
    assert heights == pytest.approx([2.2, 2.6, 3.0, 3.4, 3.8])
    assert all(top < h <= top + COLUMN_M for h in heights)
    assert column.above_m == COLUMN_M and len(column.above_box) == 5 * 30


def test_refine_tracks_rescores_walls_going_up_from_the_kept_returns():
    from autolabel.refine import refine_tracks
    from autolabel.refine.points import keyframe_returns, keyframes_evidence
    from calib.se3 import SE3

    g = np.arange(-20.0, 20.01, 0.5)
    gx, gy = np.meshgrid(g, g)
    ground = np.column_stack([gx.ravel(), gy.ravel(), np.zeros(gx.size)])
    # A building's wall from 0.6 m to 5.4 m along a box at (8, 0) (called a truck: a truck's
    # side is a line too, so the facade test spares it), and a car's L at (8, 8).
    wall = np.concatenate([WALL + [8.0, 0.0, dz] for dz in np.arange(-0.4, 4.41, 0.4)])
    car = np.concatenate([OUTLINE + [8.0, 8.0, dz] for dz in (-0.4, 0.0, 0.4)])
    keyframes = [
        keyframe_returns(np.concatenate([ground, wall, car]), SE3.identity()) for _ in range(N)
    ]
    still = np.zeros(N)
    tracks = merge(
        track_boxes(0, "truck", np.tile([8.0, 0.0], (N, 1)), still),
        track_boxes(1, "car", np.tile([8.0, 8.0], (N, 1)), still),
    )
    evidence = keyframes_evidence(keyframes, tracks, 0.3)
    on, _ = refine_tracks(TIMES, tracks, RefineConfig(), evidence)
    off, _ = refine_tracks(TIMES, tracks, RefineConfig(wall_column_m=0.0), evidence)
    for a, b in zip(on, off, strict=True):
        assert a.track_id.tolist() == b.track_id.tolist() == [0, 1]
        assert a.score.tolist() == pytest.approx([b.score[0] * 0.2, b.score[1]], rel=1e-6)
