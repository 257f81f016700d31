"""Two-wheeler tracks on a car's back or front: cars seen end-on, boxed behind the face."""

from __future__ import annotations

import numpy as np
import pytest

from autolabel.boxes import Boxes3D
from autolabel.classes import class_index
from autolabel.refine import RefineConfig, refine_tracks
from autolabel.refine.end_faces import across_spread, covered_rows
from autolabel.refine.points import KeyframeReturns, keyframes_evidence
from calib.se3 import SE3
from detectors.class_priors import TYPICAL_SIZE_WLH_M
from detectors.lidar_geometric import GroundModel

TIMES = np.arange(0.0, 8.0, 0.5)
FLAT = GroundModel(np.zeros(3), np.zeros((1, 1)), np.array([-500.0, -500.0]), 1000.0)
SPEED = 8.0
#: The back face of the object ahead at time t lies at x = FACE_X0 + SPEED * t.
FACE_X0 = 15.0
MOTO_WLH = (0.77, 2.11, 1.47)


def test_across_spread_by_hand():
    # Box 0: eleven returns at y = -1.0 .. 1.0 every 0.2 m: nearest-rank 5 % and 95 % are the
    # first and last (indices floor(0.5) = 0 and ceil(9.5) = 10): spread 2.0, widest gap 0.2.
    # Box 1: y = -0.3, -0.2, 0.9, 1.0, 1.1: indices floor(0.2) = 0 and ceil(3.8) = 4: spread
    # 1.4, widest gap 0.9 - (-0.2) = 1.1. Box 2: no returns.
    y0 = np.linspace(-1.0, 1.0, 11)
    y1 = np.array([1.1, -0.3, 0.9, -0.2, 1.0])  # unsorted on purpose
    box = np.concatenate([np.zeros(11, np.int64), np.ones(5, np.int64)])
    count, spread, gap = across_spread(box, np.concatenate([y0, y1]), 3)
    assert count.tolist() == [11, 5, 0]
    assert spread[:2] == pytest.approx([2.0, 1.4])
    assert np.isnan(spread[2])
    assert gap[:2] == pytest.approx([0.2, 1.1])


def _face(x: float, y_from: float, y_to: float) -> np.ndarray:
    """Returns on a vertical face across x = ``x`` from ``y_from`` to ``y_to``, 0.4-1.4 m high,
    every 0.1 m across and 0.25 m up."""
    y = np.arange(y_from, y_to + 1e-9, 0.1)
    z = np.arange(0.4, 1.41, 0.25)
    yy, zz = np.meshgrid(y, z)
    return np.column_stack([np.full(yy.size, x), yy.ravel(), zz.ravel()])


def _keyframes(half_width_m: float, extra=None) -> list[KeyframeReturns]:
    """The ego stands at the global origin (ego frame = global frame) over flat ground; per
    keyframe, the back face of an object driving +x (``half_width_m`` either side of y = 0) and
    optionally ``extra(t)``'s returns."""
    out = []
    for t in TIMES:
        pts = _face(FACE_X0 + SPEED * t, -half_width_m, half_width_m)
        if extra is not None:
            pts = np.concatenate([pts, extra(t)])
        out.append(KeyframeReturns(pts, pts[:, 2].copy(), FLAT, SE3.identity()))
    return out


def _two_wheeler_on_face(tid: int = 0) -> list[Boxes3D]:
    """The detector's box on the face: a motorcycle lying along it (length across the travel),
    its near side on the face, so its centre is half its width behind it."""
    return [
        Boxes3D(
            center_m=[[FACE_X0 + SPEED * t + MOTO_WLH[0] / 2, 0.0, MOTO_WLH[2] / 2]],
            size_wlh_m=[MOTO_WLH],
            yaw_rad=[np.pi / 2],
            velocity_mps=[[SPEED, 0.0]],
            label=[class_index("motorcycle")],
            score=[0.6],
            track_id=[tid],
        )
        for t in TIMES
    ]


def _refine(tracks, keyframes, **options):
    evidence = keyframes_evidence(keyframes, tracks, 0.3)
    ego = np.zeros((len(TIMES), 3))
    cfg = RefineConfig(extend_tracks=False, **options)
    return refine_tracks(TIMES, tracks, cfg, evidence, ego)[0]


def test_a_motorcycle_box_on_a_cars_back_becomes_a_car_boxed_behind_the_face():
    # A car 1.9 m wide drives away from the ego at 8 m/s; the detector boxes its back as a
    # motorcycle. The refinement turns the box along the travel (+x); the returns then spread
    # 1.9 m across it in one surface (gaps of 0.1 m): a car. Its box takes a car's footprint,
    # grown away from the ego (+x) from the motorcycle box's near end: the centre moves by half
    # the difference of the lengths, (4.61 - 2.11) / 2 = 1.25 m.
    refined = _refine(_two_wheeler_on_face(), _keyframes(0.95))
    boxes = Boxes3D.concatenate(refined)
    assert len(boxes) == len(TIMES)
    assert set(boxes.label.tolist()) == {class_index("car")}
    car_wl = TYPICAL_SIZE_WLH_M[class_index("car"), :2]
    assert boxes.size_wlh_m[:, :2] == pytest.approx(np.tile(car_wl, (len(TIMES), 1)))
    assert boxes.yaw_rad == pytest.approx(0.0, abs=1e-6)
    moto_x = FACE_X0 + SPEED * TIMES + MOTO_WLH[0] / 2
    expected_x = moto_x + (car_wl[1] - MOTO_WLH[1]) / 2
    assert boxes.center_m[:, 0] == pytest.approx(expected_x, abs=1e-3)
    assert boxes.center_m[:, 1] == pytest.approx(0.0, abs=1e-3)


def test_a_car_coming_towards_the_ego_grows_away_from_it_too():
    # The same car ahead of the ego, but driving towards it (-x): the box still grows away from
    # the ego, now against the heading (+x), by the same 1.25 m.
    tracks = _two_wheeler_on_face()
    for b in tracks:
        b.velocity_mps = np.array([[-SPEED, 0.0]])
    # Positions as before but in reverse time order: the object approaches.
    tracks = tracks[::-1]
    keyframes = _keyframes(0.95)[::-1]
    refined = _refine(tracks, keyframes)
    boxes = Boxes3D.concatenate(refined)
    assert set(boxes.label.tolist()) == {class_index("car")}
    assert np.cos(boxes.yaw_rad) == pytest.approx(-1.0, abs=1e-6)
    moto_x = (FACE_X0 + SPEED * TIMES + MOTO_WLH[0] / 2)[::-1]
    car_l = TYPICAL_SIZE_WLH_M[class_index("car"), 1]
    assert boxes.center_m[:, 0] == pytest.approx(moto_x + (car_l - MOTO_WLH[1]) / 2, abs=1e-3)


def test_a_real_motorcycle_stays_a_motorcycle():
    # A motorcycle's back: 0.7 m across. Its returns spread 0.7 m, under 1.3 m.
    refined = _refine(_two_wheeler_on_face(), _keyframes(0.35))
    boxes = Boxes3D.concatenate(refined)
    assert set(boxes.label.tolist()) == {class_index("motorcycle")}
    assert boxes.size_wlh_m[0, :2] == pytest.approx(MOTO_WLH[:2])


def test_a_motorcycle_beside_a_cars_side_stays_a_motorcycle():
    # A motorcycle's back (0.7 m) with the side of a car in the next lane 0.5 m from it (y from
    # 0.85 to 1.25, inside the 2.6 m widened box): the returns spread 1.6 m across but with a
    # 0.5 m gap: two objects, not one surface.
    def side(t):
        x = FACE_X0 + SPEED * t
        return np.concatenate([_face(x + dx, 0.85, 1.25) for dx in (0.0, 0.5, 1.0)])

    refined = _refine(_two_wheeler_on_face(), _keyframes(0.35, extra=side))
    assert set(Boxes3D.concatenate(refined).label.tolist()) == {class_index("motorcycle")}


def test_the_rule_is_off_at_width_zero_and_for_slow_tracks():
    refined = _refine(_two_wheeler_on_face(), _keyframes(0.95), end_on_min_width_m=0.0)
    assert set(Boxes3D.concatenate(refined).label.tolist()) == {class_index("motorcycle")}
    refined = _refine(_two_wheeler_on_face(), _keyframes(0.95), end_on_min_speed_mps=9.0)
    assert set(Boxes3D.concatenate(refined).label.tolist()) == {class_index("motorcycle")}


def test_an_end_on_track_on_a_car_tracked_as_a_car_goes():
    # The car was also tracked as a car (track 1, centred 2.3 m behind its back): the end-on
    # track's car boxes duplicate it and go, leaving one car.
    car = [
        Boxes3D(
            center_m=[[FACE_X0 + SPEED * t + 2.3, 0.0, 0.8]],
            size_wlh_m=[[1.9, 4.6, 1.6]],
            yaw_rad=[0.0],
            velocity_mps=[[SPEED, 0.0]],
            label=[class_index("car")],
            score=[0.3],
            track_id=[1],
        )
        for t in TIMES
    ]
    tracks = [Boxes3D.concatenate([a, b]) for a, b in zip(_two_wheeler_on_face(), car, strict=True)]
    boxes = Boxes3D.concatenate(_refine(tracks, _keyframes(0.95)))
    assert sorted(set(boxes.track_id.tolist())) == [1]


def test_covered_rows_by_hand():
    # Keyframe 0: judged box at (0, 0) (4 x 2 m, heading +x); host at (1.5, 0.5) (1 x 1 m):
    # the host's centre lies inside the judged footprint. Keyframe 1: host at (3.5, 0): outside
    # the judged box (half length 2), and the judged centre is 3.5 m from the small host's
    # centre, outside it. Keyframe 2: host at (0.2, 0.0), 45 degrees, 1 x 1 m: each centre in
    # the other. A judged box in keyframe 3 with no host.
    boxes = Boxes3D(
        center_m=[[0, 0, 0], [1.5, 0.5, 0], [0, 0, 0], [3.5, 0, 0], [0, 0, 0], [0.2, 0, 0],
                  [0, 0, 0]],
        size_wlh_m=[[2, 4, 1], [1, 1, 1]] * 3 + [[2, 4, 1]],
        yaw_rad=[0, 0, 0, 0, 0, np.pi / 4, 0],
        velocity_mps=np.zeros((7, 2)),
        label=[0] * 7,
        score=[1.0] * 7,
        track_id=[0, 1, 0, 1, 0, 1, 0],
    )  # fmt: skip
    frame_of = np.array([0, 0, 1, 1, 2, 2, 3])
    judged = boxes.track_id == 0
    got = covered_rows(boxes, frame_of, judged, ~judged)
    assert got.tolist() == [True, False, False, False, True, False, False]
