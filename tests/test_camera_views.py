"""Which LiDAR returns lie in which box: the grid join against the dense (N, P) test."""

from __future__ import annotations

import numpy as np

from autolabel.boxes import Boxes3D
from autolabel.camera_views import object_points_global


def test_object_points_global_matches_the_dense_inside_test():
    rng = np.random.default_rng(4)
    n = 40
    # Boxes around the origin and far from it (negative cells, large global coordinates), from
    # pedestrians to buses, overlapping each other.
    near = rng.uniform([-30, -30, -1], [30, 30, 1], (n, 3))
    centre = np.concatenate([near[: n // 2], near[n // 2 :] + [5e4, -3e4, 0]])
    size = rng.uniform([0.5, 0.5, 1.0], [3.0, 14.0, 4.0], (n, 3))
    boxes = Boxes3D(center_m=centre, size_wlh_m=size, yaw_rad=rng.uniform(-np.pi, np.pi, n))
    spread = rng.uniform([-40, -40, -3], [40, 40, 3], (40000, 3))
    scatter = np.concatenate([spread[:20000], spread[20000:] + [5e4, -3e4, 0]])
    # Returns exactly on a box's faces (boundaries count as inside) and at its centre.
    c, s = np.cos(boxes.yaw_rad), np.sin(boxes.yaw_rad)
    on_face = centre + np.column_stack([-s * 0.5 * size[:, 0], c * 0.5 * size[:, 0], np.zeros(n)])
    points = np.concatenate([scatter, on_face, centre])
    owner, point = object_points_global(points, boxes)
    expected_owner, expected_point = np.nonzero(boxes.points_inside(points))
    assert len(expected_owner) > 500 and len(np.unique(expected_point)) < len(expected_point)
    np.testing.assert_array_equal(owner, expected_owner)
    np.testing.assert_array_equal(point, expected_point)
    empty = object_points_global(np.zeros((0, 3)), boxes)
    assert len(empty[0]) == len(empty[1]) == 0
    # The boxes near the origin alone span a grid small enough for the dense-grid kernel (both
    # together, 5e4 m apart, take the sort-merge join above).
    near_boxes = boxes[np.arange(n // 2)]
    owner, point = object_points_global(points, near_boxes)
    expected_owner, expected_point = np.nonzero(near_boxes.points_inside(points))
    assert len(expected_owner) > 250
    np.testing.assert_array_equal(owner, expected_owner)
    np.testing.assert_array_equal(point, expected_point)
