"""Building blocks of the synthetic generator: motion, overlap test, object parts, PNG encoding."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from shapely.geometry import Polygon

from autolabel.boxes import Boxes3D
from autolabel.synth.catalogue import (
    HEAD_HEIGHT_M,
    object_parts,
    sample_size_wlh,
    visibility_token,
)
from autolabel.synth.motion import Mover, PolylinePath, SpeedProfile, straight_points, turn_points
from autolabel.synth.nuscenes_writer import encode_png_gray, make_token
from autolabel.synth.raycast import PART_FACE, PART_PLATE
from autolabel.synth.scenario import footprints_overlap
from autolabel.synth.scene_boxes import count_points_in_boxes


def test_speed_profile_integrates_accelerations_and_stops_exactly():
    # 10 m/s, brake at 2 m/s^2 for 5 s, wait 3 s, accelerate at 1 m/s^2 for 4 s.
    prof = SpeedProfile.from_segments(
        0.0, 20.0, 10.0, [(1.0, 0.0), (5.0, -2.0), (3.0, 0.0), (4.0, 1.0)]
    )
    t = np.array([0.0, 7.0, 8.5, 20.0])
    speed = prof.speed_at(t)
    assert speed[0] == pytest.approx(10.0)
    assert speed[1] == speed[2] == 0.0  # standing still during the wait
    assert speed[3] == pytest.approx(4.0, abs=1e-6)
    # The causal moving average (80 samples of 0.01 s) delays every change by 0.395 s and keeps
    # its area: distance(t) = raw distance(t - 0.395 s) + 10 m/s * 0.395 s, where the raw profile
    # stands at 10 + 25 = 35 m from 6 s to 9 s, then gains 8 m in its ramp and runs at 4 m/s.
    delay = 79 / 2 * 0.01
    assert prof.distance_at(np.array([8.0]))[0] == pytest.approx(35.0 + 10 * delay, abs=1e-6)
    raw_end = 35.0 + 8.0 + 4.0 * (20.0 - delay - 13.0)
    assert prof.distance_at(np.array([20.0]))[0] == pytest.approx(raw_end + 10 * delay, abs=1e-6)
    assert (np.diff(prof.distance_m) >= 0).all()


def test_mover_velocity_is_the_derivative_of_its_position_and_yaw_follows_it():
    pts = np.concatenate(
        [straight_points([-50, -5], [-8, -5], 1.0)[:-1], turn_points([-8, -5], 0.0, [5, -18], -np.pi / 2),
         straight_points([5, -18], [5, -80], 1.0)[1:]]
    )  # fmt: skip
    mover = Mover(PolylinePath.from_points(pts), SpeedProfile.constant(8.0, -1.0, 12.0, 10.0))
    t = np.linspace(0.0, 10.0, 201)
    xy, yaw, vel = mover.states(t)
    numeric = np.gradient(xy, t, axis=0)
    assert np.abs(numeric - vel)[2:-2].max() < 0.35  # polyline corners of the 60-point turn
    heading = np.arctan2(vel[:, 1], vel[:, 0])
    assert np.abs(np.angle(np.exp(1j * (heading - yaw)))).max() < 1e-9
    assert np.linalg.norm(vel, axis=1) == pytest.approx(8.0)


def test_backwards_motion_turns_the_box_round():
    path = PolylinePath.from_points(straight_points([0, 0], [10, 0]))
    grid = -1.0 + 0.01 * np.arange(300)
    dist = 5.0 - 1.0 * (grid + 1.0)
    mover = Mover(path, SpeedProfile(-1.0, np.full(300, -1.0), dist))
    xy, yaw, vel = mover.states(np.array([0.0]))
    assert xy[0] == pytest.approx([4.0, 0.0]) and vel[0] == pytest.approx([-1.0, 0.0])
    assert abs(abs(yaw[0]) - np.pi) < 1e-9


def test_footprint_overlap_agrees_with_shapely():
    rng = np.random.default_rng(0)
    n = 400
    ca, cb = rng.uniform(-3, 3, (n, 2)), rng.uniform(-3, 3, (n, 2))
    ya, yb = rng.uniform(-np.pi, np.pi, n), rng.uniform(-np.pi, np.pi, n)
    ha, hb = rng.uniform(0.2, 2.5, (n, 2)), rng.uniform(0.2, 2.5, (n, 2))
    got = footprints_overlap(ca, ya, ha, cb, yb, hb)

    def poly(c, y, h):
        box = Boxes3D(
            np.array([[c[0], c[1], 0.0]]), np.array([[2 * h[1], 2 * h[0], 1.0]]), np.array([y])
        )
        return Polygon(box.bev_corners()[0])

    want = [poly(ca[i], ya[i], ha[i]).intersects(poly(cb[i], yb[i], hb[i])) for i in range(n)]
    assert got.tolist() == want
    assert 50 < sum(want) < 350


@pytest.mark.parametrize(
    "name", ["car", "bus", "pedestrian", "bicycle", "motorcycle", "traffic_cone", "barrier"]
)
@pytest.mark.parametrize("rider", [False, True])
def test_object_parts_fill_their_box_and_stay_inside(name, rider):
    rng = np.random.default_rng(1)
    size = sample_size_wlh(name, rng, rider)
    parts = object_parts(name, size, np.array([9, 9, 9], np.uint8), rider, rng)
    offset = np.array([p[0] for p in parts])
    sizes = np.array([p[1] for p in parts])
    kinds = [p[2] for p in parts]
    lwh = np.stack([sizes[:, 1], sizes[:, 0], sizes[:, 2]], axis=1)
    lo, hi = offset - lwh / 2, offset + lwh / 2
    half = np.array([size[1], size[0], size[2]]) / 2
    assert (lo >= -half - 1e-9).all() and (hi <= half + 1e-9).all()
    # The parts reach every face of the annotated box, so its silhouette spans the box.
    assert np.allclose(lo.min(0), -half) and np.allclose(hi.max(0), half)
    if name == "pedestrian" or (name in ("bicycle", "motorcycle") and rider):
        face = [i for i, k in enumerate(kinds) if k == PART_FACE]
        assert len(face) == 1 and sizes[face[0], 2] == pytest.approx(HEAD_HEIGHT_M)
        assert hi[face[0], 2] == pytest.approx(half[2])
    else:
        assert PART_FACE not in kinds
    plates = [i for i, k in enumerate(kinds) if k == PART_PLATE]
    if name in ("car", "bus"):
        assert len(plates) == 2
        heights = offset[plates, 2] + half[2]  # above the ground
        assert ((heights > 0.35) & (heights < 0.65)).all()
        assert sorted(np.sign(offset[plates, 0])) == [-1, 1]
    else:
        assert not plates


def test_visibility_bins_follow_nuscenes():
    tokens = visibility_token(np.array([0.0, 0.39, 0.4, 0.59, 0.6, 0.79, 0.8, 1.0]))
    assert tokens.tolist() == ["1", "1", "2", "2", "3", "3", "4", "4"]


@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, np.uint16])
def test_png_encoder_round_trips_through_opencv(dtype):
    rng = np.random.default_rng(2)
    if dtype is np.bool_:
        img = rng.random((37, 53)) < 0.2
    else:
        img = rng.integers(0, np.iinfo(dtype).max, (37, 53), endpoint=True).astype(dtype)
    decoded = cv2.imdecode(np.frombuffer(encode_png_gray(img), np.uint8), cv2.IMREAD_UNCHANGED)
    if dtype is np.bool_:
        assert np.array_equal(decoded > 0, img)
    else:
        assert decoded.dtype == dtype and np.array_equal(decoded, img)


def test_point_counts_match_boxes3d():
    rng = np.random.default_rng(3)
    center = rng.uniform(-5, 5, (6, 3))
    size = rng.uniform(0.5, 4, (6, 3))
    yaw = rng.uniform(-np.pi, np.pi, 6)
    points = rng.uniform(-8, 8, (5000, 3))
    want = Boxes3D(center, size, yaw).points_inside(points).sum(1)
    assert count_points_in_boxes(points, center, size, yaw).tolist() == want.tolist()


def test_tokens_are_stable_hex_and_distinct():
    a, b = make_token("s", "x", 1), make_token("s", "x", 2)
    assert a == make_token("s", "x", 1) and a != b and len(a) == 32
    int(a, 16)
