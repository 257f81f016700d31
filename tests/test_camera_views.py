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


def test_scene_cells_keep_every_return_the_image_holds():
    """The cells a camera can reach hold every return that projects into its image after a move
    shorter than the margin (the exact test of ``build_camera_views``: z > 0 and a pixel in
    [0, W) x [0, H)), on random rigs, points around the camera and moves; and for a level camera
    they leave out most of the returns behind it."""
    from autolabel.camera_views import _SceneCells
    from calib.projection import project_points
    from calib.rotation import rotation_from_quat_wxyz
    from calib.se3 import SE3

    rng = np.random.default_rng(3)
    for trial in range(40):
        width_px, height_px = int(rng.integers(200, 2000)), int(rng.integers(100, 1200))
        fx = rng.uniform(0.3, 2.0) * width_px
        k = np.array([[fx, 0, rng.uniform(0.3, 0.7) * width_px], [0, fx, height_px / 2], [0, 0, 1]])
        quat = rng.normal(size=4)
        rotation = rotation_from_quat_wxyz(quat / np.linalg.norm(quat))
        level = trial % 2 == 1
        if level:  # rows: the camera's right, down and forward axes in the global frame
            yaw = rng.uniform(-np.pi, np.pi)
            rotation = np.array(
                [[np.sin(yaw), -np.cos(yaw), 0], [0, 0, -1], [np.cos(yaw), np.sin(yaw), 0]]
            )
        centre = rng.uniform(-500, 500, 3)  # the camera's, among the returns
        camera_SE3_global = SE3(rotation, -rotation @ centre)
        points = rng.uniform(-80, 80, (20000, 3)) * [1, 1, 0.1] + centre
        if trial % 4 == 0:  # a few returns far away stretch the grid's cells
            points[:5] *= 10
        margin = float(rng.choice([0.0, 0.5, 3.0]))
        direction = rng.normal(size=(len(points), 3))
        moved = points + direction / np.linalg.norm(direction, axis=1, keepdims=True) * (
            margin * rng.uniform(0, 1, (len(points), 1))
        )
        uv, z = project_points(k, camera_SE3_global.transform_points(moved))
        seen = (z > 0) & (uv[:, 0] >= 0) & (uv[:, 0] < width_px)
        seen &= (uv[:, 1] >= 0) & (uv[:, 1] < height_px)
        kept = _SceneCells(points).reachable(k, camera_SE3_global, width_px, height_px, margin)
        assert not (seen & ~kept).any()
        if level:  # a level camera: most returns 20 m behind are cut
            behind = camera_SE3_global.transform_points(points)[:, 2] < -20
            assert kept[behind].mean() < 0.5
