"""Core geometry: SE3, quaternions, box corners and transforms, projection, bearing, rig loading."""

from __future__ import annotations

import numpy as np
import pytest
from nuscenes.eval.common.utils import quaternion_yaw
from nuscenes.utils.data_classes import Box
from pyquaternion import Quaternion

from autolabel.boxes import Boxes3D
from calib.bearing import bearing_deg, clock_from_bearing
from calib.projection import (
    box_2d_from_corners,
    clip_boxes_2d,
    in_image_fraction,
    project_points,
    volume_in_image_fraction,
)
from calib.rig import load_rig
from calib.rotation import (
    quat_wxyz_from_rotation,
    quat_wxyz_from_yaw,
    rotation_from_quat_wxyz,
    rotation_from_yaw,
    yaw_from_rotation,
)
from calib.se3 import SE3

RNG = np.random.default_rng(11)


def _random_quats(n: int) -> np.ndarray:
    return np.array([Quaternion.random().elements for _ in range(n)])


def _random_se3() -> SE3:
    return SE3.from_quat_wxyz(Quaternion.random().elements, RNG.uniform(-50, 50, 3))


# ---- SE3 ---------------------------------------------------------------------------------------


def test_se3_compose_with_inverse_is_identity():
    for _ in range(20):
        a_SE3_b = _random_se3()
        for ident in (a_SE3_b.compose(a_SE3_b.inverse()), a_SE3_b.inverse().compose(a_SE3_b)):
            np.testing.assert_allclose(ident.as_matrix(), np.eye(4), atol=1e-12)


def test_se3_points_round_trip_and_matrix_agree():
    points_b = RNG.uniform(-100, 100, (50, 3))
    for _ in range(10):
        a_SE3_b, b_SE3_c = _random_se3(), _random_se3()
        points_a = a_SE3_b.transform_points(points_b)
        np.testing.assert_allclose(a_SE3_b.inverse().transform_points(points_a), points_b, atol=1e-10)  # fmt: skip
        homog = np.c_[points_b, np.ones(len(points_b))] @ a_SE3_b.as_matrix().T
        np.testing.assert_allclose(points_a, homog[:, :3], atol=1e-10)
        np.testing.assert_allclose(
            a_SE3_b.compose(b_SE3_c).as_matrix(),
            a_SE3_b.as_matrix() @ b_SE3_c.as_matrix(),
            atol=1e-10,  # fmt: skip
        )
        np.testing.assert_allclose(SE3.from_matrix(a_SE3_b.as_matrix()).as_matrix(), a_SE3_b.as_matrix())  # fmt: skip
        # Vectors rotate without translation.
        v = RNG.normal(size=(5, 3))
        np.testing.assert_allclose(a_SE3_b.rotate_vectors(v), v @ a_SE3_b.rotation.T)


def test_se3_rejects_bad_shapes():
    with pytest.raises(ValueError, match=r"\(3,3\) rotation and \(3,\) translation"):
        SE3(np.eye(3), np.zeros(2))
    with pytest.raises(ValueError, match=r"\(4,4\) matrix"):
        SE3.from_matrix(np.eye(3))


# ---- quaternions --------------------------------------------------------------------------------


def test_quaternion_to_rotation_matches_pyquaternion():
    quats = _random_quats(200)
    rots = rotation_from_quat_wxyz(quats)
    expected = np.array([Quaternion(q).rotation_matrix for q in quats])
    np.testing.assert_allclose(rots, expected, atol=1e-12)
    np.testing.assert_allclose(rotation_from_quat_wxyz(quats[0] * 3.0), expected[0], atol=1e-12)
    with pytest.raises(ValueError, match="zero-length"):
        rotation_from_quat_wxyz(np.zeros(4))


def test_rotation_to_quaternion_round_trip_against_pyquaternion():
    quats = _random_quats(500)
    # Include the branches of Shepperd's method: near-180 degree turns about each axis.
    quats = np.concatenate(
        [quats, [[0.0, 1, 0, 0], [0.0, 0, 1, 0], [0.0, 0, 0, 1], [1.0, 0, 0, 0]]]
    )
    back = quat_wxyz_from_rotation(np.array([Quaternion(q).rotation_matrix for q in quats]))
    sign = np.where(quats[:, :1] < 0, -1.0, 1.0)  # q and -q are one rotation; ours has w >= 0
    np.testing.assert_allclose(back, quats * sign, atol=1e-9)
    assert (back[:, 0] >= 0).all()
    np.testing.assert_allclose(SE3.from_quat_wxyz(quats[7], np.zeros(3)).quat_wxyz, quats[7] * sign[7], atol=1e-9)  # fmt: skip


def test_yaw_helpers_against_devkit():
    yaw = RNG.uniform(-np.pi, np.pi, 50)
    quats = quat_wxyz_from_yaw(yaw)
    for q, y in zip(quats, yaw, strict=True):
        np.testing.assert_allclose(Quaternion(q).rotation_matrix, rotation_from_yaw(y), atol=1e-12)
        assert abs(Quaternion(q).yaw_pitch_roll[0] - y) < 1e-9
    # With pitch and roll, our yaw is the heading of the rotated x axis, as the devkit's eval.
    for q in _random_quats(50):
        assert abs(yaw_from_rotation(Quaternion(q).rotation_matrix) - quaternion_yaw(Quaternion(q))) < 1e-9  # fmt: skip


# ---- boxes ---------------------------------------------------------------------------------------


def _random_boxes(n: int, frame: str = "global") -> Boxes3D:
    return Boxes3D(
        center_m=RNG.uniform(-50, 50, (n, 3)),
        size_wlh_m=RNG.uniform(0.3, 10, (n, 3)),
        yaw_rad=RNG.uniform(-np.pi, np.pi, n),
        velocity_mps=RNG.normal(0, 5, (n, 2)),
        label=RNG.integers(0, 10, n),
        frame=frame,
    )


def test_corners_match_devkit_box():
    boxes = _random_boxes(100)
    corners = boxes.corners()
    assert corners.shape == (100, 8, 3)
    for i in range(len(boxes)):
        box = Box(
            boxes.center_m[i],
            boxes.size_wlh_m[i],
            Quaternion(axis=[0, 0, 1], angle=boxes.yaw_rad[i]),  # fmt: skip
        )
        np.testing.assert_allclose(corners[i], box.corners().T, atol=1e-10)


def test_transform_round_trip_and_velocity_rotation():
    boxes = _random_boxes(40)
    global_SE3_ego = SE3(rotation_from_yaw(0.8), np.array([300.0, -20.0, 1.0]))
    in_ego = boxes.transform(global_SE3_ego.inverse(), "ego", from_frame="global")
    back = in_ego.transform(global_SE3_ego, "global", from_frame="ego")
    assert in_ego.frame == "ego" and back.frame == "global"
    np.testing.assert_allclose(back.center_m, boxes.center_m, atol=1e-10)
    np.testing.assert_allclose(np.cos(back.yaw_rad - boxes.yaw_rad), 1.0, atol=1e-12)
    np.testing.assert_allclose(back.velocity_mps, boxes.velocity_mps, atol=1e-10)
    np.testing.assert_allclose(back.corners(), boxes.corners(), atol=1e-9)
    # By hand: ego turned +90 deg; a global velocity along +x is along -y in the ego frame, a box
    # heading along +x in global heads along -y (yaw -90 deg) in the ego frame.
    turned = SE3(rotation_from_yaw(np.pi / 2), np.zeros(3))
    one = Boxes3D([[10.0, 0.0, 0.0]], [[2.0, 4.0, 1.5]], [0.0], velocity_mps=[[3.0, 0.0]])
    ego = one.transform(turned.inverse(), "ego")
    np.testing.assert_allclose(ego.center_m, [[0.0, -10.0, 0.0]], atol=1e-12)
    np.testing.assert_allclose(ego.velocity_mps, [[0.0, -3.0]], atol=1e-12)
    np.testing.assert_allclose(ego.yaw_rad, [-np.pi / 2], atol=1e-12)
    with pytest.raises(ValueError, match="boxes are in frame 'global'"):
        one.transform(turned, "x", from_frame="ego")


# ---- projection ----------------------------------------------------------------------------------

K = np.array([[1000.0, 0.0, 800.0], [0.0, 1000.0, 450.0], [0.0, 0.0, 1.0]])


def test_project_points_by_hand():
    uv, depth = project_points(K, np.array([[1.0, 2.0, 10.0], [0.0, 0.0, -5.0], [-4.0, 0.0, 2.0]]))
    np.testing.assert_allclose(uv[0], [800 + 1000 * 1 / 10, 450 + 1000 * 2 / 10])
    assert np.isnan(uv[1]).all() and depth[1] == -5.0  # behind the camera
    np.testing.assert_allclose(uv[2], [800 - 2000, 450])


def test_box_2d_of_a_box_in_front_by_hand():
    # A 2 m cube centred 10 m ahead: its near face (z = 9) spans +-1 m -> +-1000/9 px.
    cube = Boxes3D([[0.0, 0.0, 10.0]], [[2.0, 2.0, 2.0]], [0.0], frame="camera")
    box = box_2d_from_corners(K, cube.corners())[0]
    np.testing.assert_allclose(box, [800 - 1000 / 9, 450 - 1000 / 9, 800 + 1000 / 9, 450 + 1000 / 9])  # fmt: skip


def test_box_crossing_the_near_plane_gives_a_finite_clipped_box():
    # z from -1 to 3 (h along the camera z here), x and y within +-1: cut at z = 0.1 the section
    # is the 2x2 square, which projects to +-1000/0.1 px around the principal point.
    box = Boxes3D([[0.0, 0.0, 1.0]], [[2.0, 2.0, 4.0]], [0.0], frame="camera")
    unclipped = box_2d_from_corners(K, box.corners(), near_m=0.1)[0]
    np.testing.assert_allclose(unclipped, [800 - 1e4, 450 - 1e4, 800 + 1e4, 450 + 1e4], rtol=1e-9)
    clipped = clip_boxes_2d(unclipped[None], 1600, 900)[0]
    np.testing.assert_allclose(clipped, [0, 0, 1600, 900])
    behind = Boxes3D([[0.0, 0.0, -5.0]], [[2.0, 2.0, 2.0]], [0.0], frame="camera")
    assert np.isnan(box_2d_from_corners(K, behind.corners())).all()


def test_in_image_fraction_by_hand():
    boxes = np.array(
        [
            [-100.0, 0.0, 100.0, 100.0],  # half of it left of the image
            [10.0, 10.0, 50.0, 50.0],  # inside
            [1700.0, 0.0, 1800.0, 10.0],  # right of the image
            [1500.0, 800.0, 1700.0, 1000.0],  # a quarter inside (bottom-right corner)
            [np.nan] * 4,
        ]
    )
    np.testing.assert_allclose(in_image_fraction(boxes, 1600, 900), [0.5, 1.0, 0.0, 0.25, 0.0])
    clipped = clip_boxes_2d(boxes, 1600, 900)
    np.testing.assert_allclose(clipped[0], [0, 0, 100, 100])
    assert np.isnan(clipped[2]).all()


def test_volume_in_image_fraction_by_hand():
    # f = 400 px on a 1600 x 900 image: the view's side planes are |x| = 2 z and |y| = 1.125 z.
    K = np.array([[400.0, 0.0, 800.0], [0.0, 400.0, 450.0], [0.0, 0.0, 1.0]])
    boxes = Boxes3D(
        [
            [0.0, 0.0, 0.0],  # 1 x 1 x 8 m along the optical axis, centred on the camera
            [20.0, 0.0, 10.0],  # centred on the image's right side plane x = 2 z
            [0.0, 0.0, 10.0],  # well inside
            [0.0, 0.0, -10.0],  # behind the camera
        ],
        [[1.0, 1.0, 8.0], [2.0, 2.0, 2.0], [2.0, 2.0, 2.0], [2.0, 2.0, 2.0]],  # w, l, h (h along z)
        [0.0, 0.0, 0.0, 0.0],
        frame="camera",
    )
    corners = boxes.corners()
    np.testing.assert_allclose(corners[0, :, 2].min(), -4.0, atol=1e-12)  # length along z
    # Box 0: its front half (z > 0, cell centres at z >= 0.5 where |x|, |y| <= 0.4375 < 1.125 z)
    # is in view, its back half behind the camera: 0.5. Box 1: a plane through the centre splits
    # the cells in two by point symmetry (none lies on it): 0.5.
    frac = volume_in_image_fraction(K, corners, 1600, 900)
    np.testing.assert_allclose(frac, [0.5, 0.5, 1.0, 0.0])
    # Box 0's 2D box is cut by the near plane z = 0.1 where its 1 m square section spans
    # 800 +- 400 * 0.5 / 0.1 = 800 +- 2000 px and 450 +- 2000 px: 1600 * 900 / 4000**2 inside.
    box_2d = box_2d_from_corners(K, corners)
    np.testing.assert_allclose(box_2d[0], [-1200, -1550, 2800, 2450], atol=1e-6)
    np.testing.assert_allclose(in_image_fraction(box_2d[:1], 1600, 900), [0.09])
    assert len(volume_in_image_fraction(K, np.zeros((0, 8, 3)), 1600, 900)) == 0


# ---- bearing and clock ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("xy", "bearing", "clock"),
    [
        ((10.0, 0.0), 0.0, 12),  # ahead
        ((0.0, 5.0), 90.0, 9),  # left (+y)
        ((0.0, -5.0), -90.0, 3),  # right (-y)
        ((-7.0, 0.0), 180.0, 6),  # behind: +180, never -180
        ((-7.0, -0.0), 180.0, 6),  # behind with a negative zero y
        ((3.0, 3.0), 45.0, 11),  # front-left, exactly half past 10: the clockwise hour
        ((3.0, -3.0), -45.0, 2),  # front-right, half past 1 -> 2
        ((-3.0, 3.0), 135.0, 8),  # back-left, half past 7 -> 8
    ],
)
def test_bearing_and_clock_named_cases(xy, bearing, clock):
    b = bearing_deg(np.array(xy))
    assert b == pytest.approx(bearing)
    assert clock_from_bearing(b) == clock


def test_clock_boundaries_by_hand():
    # 11 o'clock covers bearings (15, 45], 10 o'clock (45, 75], 12 o'clock (-15, 15].
    bearings = np.array([44.9, 45.0, 45.1, 15.0, 15.1, 75.0, 75.1, -15.0, -14.9, 179.9, -179.9])
    np.testing.assert_array_equal(
        clock_from_bearing(bearings), [11, 11, 10, 12, 11, 10, 9, 1, 12, 6, 6]
    )
    all_b = bearing_deg(np.stack([np.cos(t := np.linspace(-np.pi, np.pi, 721)), np.sin(t)], 1))
    assert all_b.min() > -180.0 and all_b.max() == 180.0
    assert set(clock_from_bearing(all_b)) == set(range(1, 13))


# ---- rigs ----------------------------------------------------------------------------------------


def test_rig_loads_nuscenes():
    rig = load_rig("nuscenes")
    assert rig.camera_channels == (
        "CAM_FRONT", "CAM_FRONT_RIGHT", "CAM_BACK_RIGHT", "CAM_BACK", "CAM_BACK_LEFT", "CAM_FRONT_LEFT"
    )  # fmt: skip
    front = rig.camera("CAM_FRONT")
    assert (front.width_px, front.height_px) == (1600, 900)
    # The front camera looks along ego +x.
    np.testing.assert_allclose(front.ego_SE3_camera.rotate_vectors(np.array([0, 0, 1.0])), [1, 0, 0], atol=1e-12)  # fmt: skip
    small = rig.scaled(400, 225)
    np.testing.assert_allclose(small.camera("CAM_FRONT").intrinsic[:2], front.intrinsic[:2] / 4)
    with pytest.raises(KeyError, match="CAM_TOP"):
        rig.camera("CAM_TOP")


_RIG = """
name: t
cameras:
  - {channel: CAM_FRONT, width_px: 64, height_px: 48, translation_m: [1, 0, 1.5], yaw_deg: 0, hfov_deg: 90}
lidar: {translation_m: [0, 0, 1.8], beams: 4, elevation_range_deg: [-10, 10]}
"""


@pytest.mark.parametrize(
    ("remove", "message"),
    [
        ("translation_m: [1, 0, 1.5], ", "camera CAM_FRONT: missing key 'translation_m'"),
        ("width_px: 64, ", "camera CAM_FRONT: missing key 'width_px'"),
        ("beams: 4, ", "lidar: missing key 'beams'"),
        (", hfov_deg: 90", "give either 'focal_px' or 'hfov_deg'"),
    ],
)
def test_rig_errors_name_the_missing_key(tmp_path, remove, message):
    path = tmp_path / "rig.yaml"
    path.write_text(_RIG)
    assert load_rig(path).camera("CAM_FRONT").intrinsic[0, 0] == pytest.approx(32.0)  # 64/2/tan(45)
    assert remove in _RIG
    path.write_text(_RIG.replace(remove, ""))
    with pytest.raises(ValueError, match=f"{path}.*{message}"):
        load_rig(path)


def test_rig_missing_sections_and_unknown_name(tmp_path):
    path = tmp_path / "rig.yaml"
    path.write_text("name: x\nlidar: {}\n")
    with pytest.raises(ValueError, match=f"{path}: missing key 'cameras'"):
        load_rig(path)
    with pytest.raises(FileNotFoundError, match=r"rig 'nope' not found.*nuscenes"):
        load_rig("nope")
