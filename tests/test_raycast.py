"""Ray casting against boxes and the ground, checked against hand-computed hits."""

import numpy as np
import pytest

from autolabel.boxes import Boxes3D
from autolabel.synth.raycast import (
    HIT_GROUND,
    HIT_NOTHING,
    GroundTexture,
    SceneBoxes,
    cast_rays,
    cast_rays_with_faces,
)


def scene(centers, sizes_wlh, yaws=None) -> SceneBoxes:
    centers = np.asarray(centers, dtype=float).reshape(-1, 3)
    n = len(centers)
    return SceneBoxes(
        center=centers,
        size_wlh=np.asarray(sizes_wlh, dtype=float).reshape(n, 3),
        yaw=np.zeros(n) if yaws is None else np.asarray(yaws, dtype=float),
        colour=np.full((n, 3), 128, np.uint8),
        owner=np.arange(n, dtype=np.int32),
        part=np.zeros(n, np.int8),
    )


def test_unit_box_straight_ahead():
    boxes = scene([[5.0, 0.0, 0.5]], [[1.0, 1.0, 1.0]])
    t, hit, face, _ = cast_rays_with_faces(
        np.array([0.0, 0.0, 0.5]), np.array([[1.0, 0.0, 0.0]]), boxes, 100.0
    )
    assert hit[0] == 0
    assert t[0] == pytest.approx(4.5)
    assert face[0] == 1  # the box's -x face


def test_direction_length_does_not_change_distance():
    boxes = scene([[5.0, 0.0, 0.5]], [[1.0, 1.0, 1.0]])
    t, hit = cast_rays(np.array([0.0, 0.0, 0.5]), np.array([[7.0, 0.0, 0.0]]), boxes, 100.0)
    assert hit[0] == 0 and t[0] == pytest.approx(4.5)


def test_ray_through_rotated_box():
    # Box 4 m long (x), 2 m wide (y), yawed 45 deg, centred 10 m ahead. In the box frame the ray
    # runs through the centre along (cos -45, sin -45) and leaves the |y| <= 1 slab first, at
    # sqrt(2) from the centre (|x| = 1 < 2 there), so it enters at 10 - sqrt(2).
    boxes = scene([[10.0, 0.0, 1.0]], [[2.0, 4.0, 2.0]], [np.pi / 4])
    t, hit, face, _ = cast_rays_with_faces(
        np.array([0.0, 0.0, 1.0]), np.array([[1.0, 0.0, 0.0]]), boxes, 100.0
    )
    assert hit[0] == 0
    assert t[0] == pytest.approx(10.0 - np.sqrt(2.0))
    assert face[0] == 2  # +y face of the box (its normal points to global (-0.71, 0.71))


@pytest.mark.parametrize("elevation_deg", [-2.0, -10.0, -45.0, -89.0])
def test_ground_distance_is_height_over_sine(elevation_deg):
    h = 1.84
    e = np.radians(elevation_deg)
    az = np.radians(30.0)
    d = np.array([[np.cos(e) * np.cos(az), np.cos(e) * np.sin(az), np.sin(e)]])
    t, hit = cast_rays(np.array([3.0, -2.0, h]), d, SceneBoxes.empty(), 1000.0)
    assert hit[0] == HIT_GROUND
    assert t[0] == pytest.approx(h / np.sin(-e), rel=1e-12)


def test_ground_z_and_max_range():
    d = np.array([[np.cos(0.1), 0.0, -np.sin(0.1)]])
    t, hit = cast_rays(np.array([0.0, 0.0, 2.0]), d, SceneBoxes.empty(), 100.0, ground_z=0.5)
    assert hit[0] == HIT_GROUND and t[0] == pytest.approx(1.5 / np.sin(0.1))
    t, hit = cast_rays(np.array([0.0, 0.0, 2.0]), d, SceneBoxes.empty(), 10.0)
    assert hit[0] == HIT_NOTHING and np.isinf(t[0])


def test_nearer_box_wins_whatever_the_order():
    near_first = scene([[5.0, 0.0, 1.0], [9.0, 0.0, 1.0]], [[1, 1, 2], [1, 1, 2]])
    far_first = scene([[9.0, 0.0, 1.0], [5.0, 0.0, 1.0]], [[1, 1, 2], [1, 1, 2]])
    o, d = np.array([0.0, 0.0, 1.0]), np.array([[1.0, 0.0, 0.0]])
    t1, h1 = cast_rays(o, d, near_first, 100.0)
    t2, h2 = cast_rays(o, d, far_first, 100.0)
    assert (h1[0], h2[0]) == (0, 1)
    assert t1[0] == t2[0] == pytest.approx(4.5)


def test_exact_tie_goes_to_lower_index_and_box_beats_ground():
    same = scene([[5.0, 0.0, 1.0], [5.0, 0.0, 1.0]], [[1, 1, 2], [1, 1, 2]])
    _, hit = cast_rays(np.array([0.0, 0.0, 1.0]), np.array([[1.0, 0.0, 0.0]]), same, 100.0)
    assert hit[0] == 0
    # A ray grazing down onto the bottom edge of a box standing on the ground: box wins the tie.
    box = scene([[5.5, 0.0, 0.5]], [[1.0, 1.0, 1.0]])
    _, hit = cast_rays(np.array([0.0, 0.0, 5.0]), np.array([[5.0, 0.0, -5.0]]), box, 100.0)
    assert hit[0] == 0


def test_miss_and_upward_ray():
    boxes = scene([[5.0, 0.0, 1.0]], [[1, 1, 2]])
    o = np.array([0.0, 0.0, 1.0])
    d = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0], [-1.0, 0.0, 0.0]])
    t, hit = cast_rays(o, d, boxes, 100.0)
    assert (hit == HIT_NOTHING).all() and np.isinf(t).all()
    assert hit.dtype == np.int32 and t.dtype == np.float64


def test_box_around_the_origin_is_invisible_from_inside():
    boxes = scene([[0.0, 0.0, 1.0], [6.0, 0.0, 1.0]], [[2, 4, 2], [1, 1, 2]])
    t, hit = cast_rays(np.array([0.0, 0.0, 1.0]), np.array([[1.0, 0.0, 0.0]]), boxes, 100.0)
    assert hit[0] == 1 and t[0] == pytest.approx(5.5)


def test_random_rays_hit_surfaces_checked_with_points_inside():
    """Independent check: just before the hit no box contains the ray; just after, the hit box does."""
    rng = np.random.default_rng(7)
    n = 12
    centers = np.column_stack(
        [rng.uniform(-20, 20, n), rng.uniform(-20, 20, n), rng.uniform(0.5, 3, n)]
    )
    sizes = rng.uniform(0.5, 6.0, (n, 3))
    yaws = rng.uniform(-np.pi, np.pi, n)
    boxes = scene(centers, sizes, yaws)
    reference = Boxes3D(centers, sizes, yaws)
    origins = np.column_stack(
        [rng.uniform(-25, 25, 400), rng.uniform(-25, 25, 400), rng.uniform(0.2, 6, 400)]
    )
    origins = origins[~reference.points_inside(origins).any(axis=0)]
    # Half the rays aim near a box centre, half go anywhere.
    targets = centers[rng.integers(0, n, len(origins))] + rng.normal(0, 1.5, (len(origins), 3))
    dirs = np.where(
        np.arange(len(origins))[:, None] % 2 == 0, targets - origins, rng.normal(size=origins.shape)
    )
    t, hit, _, unit = cast_rays_with_faces(origins, dirs, boxes, 200.0)
    assert (hit >= 0).sum() > 100 and (hit == HIT_GROUND).sum() > 50
    eps = 1e-6
    on_box = hit >= 0
    before = origins[on_box] + (t[on_box] - eps)[:, None] * unit[on_box]
    after = origins[on_box] + (t[on_box] + eps)[:, None] * unit[on_box]
    assert not reference.points_inside(before).any()
    inside_after = reference.points_inside(after)
    assert inside_after[hit[on_box], np.arange(on_box.sum())].all()
    ground_pts = origins[hit == HIT_GROUND] + t[hit == HIT_GROUND, None] * unit[hit == HIT_GROUND]
    assert np.abs(ground_pts[:, 2]).max() < 1e-9
    # No box crosses the segment in front of any hit (sampled every 2 cm), nor misses' rays.
    steps = np.arange(0.01, 1.0, 0.002)
    reach = np.where(np.isfinite(t), t, 200.0)
    samples = origins[:, None, :] + (reach[:, None] * steps[None, :])[..., None] * unit[:, None, :]
    assert not reference.points_inside(samples.reshape(-1, 3)).any()


def test_bad_inputs_name_the_field():
    with pytest.raises(ValueError, match="size_wlh"):
        scene([[0, 0, 0]], [[1, 0, 1]])
    with pytest.raises(ValueError, match="colour"):
        SceneBoxes(
            np.zeros((2, 3)),
            np.ones((2, 3)),
            np.zeros(2),
            np.zeros((3, 3)),
            np.zeros(2),
            np.zeros(2),
        )
    with pytest.raises(ValueError, match="part"):
        SceneBoxes(np.zeros((1, 3)), np.ones((1, 3)), np.zeros(1), np.zeros((1, 3)), [0], [5])
    with pytest.raises(ValueError, match="resolution_m"):
        GroundTexture(np.zeros((2, 2, 3)), np.zeros(2), 0.0)
    with pytest.raises(ValueError, match="directions"):
        cast_rays(np.zeros(3), np.zeros((4, 2)), SceneBoxes.empty(), 10.0)
    with pytest.raises(ValueError, match="non-zero"):
        cast_rays(np.zeros(3), np.zeros((1, 3)), SceneBoxes.empty(), 10.0)


def test_concatenate_and_corners():
    a = scene([[1.0, 2.0, 0.5]], [[1.0, 2.0, 1.0]], [0.3])
    b = scene([[4.0, -2.0, 1.0]], [[2.0, 4.0, 2.0]], [-1.0])
    both = SceneBoxes.concatenate([a, b])
    assert len(both) == 2
    ref = Boxes3D(both.center, both.size_wlh, both.yaw)
    np.testing.assert_allclose(both.corners(), ref.corners())
