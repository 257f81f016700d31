"""Camera rendering: extents vs projected boxes, occlusion, depth, ground, consistency with rays."""

import numpy as np
import pytest

from autolabel.sensors import CameraCalibration
from autolabel.synth.raycast import HIT_GROUND, HIT_NOTHING, GroundTexture, SceneBoxes, cast_rays
from autolabel.synth.render import AMBIENT, render_camera
from calib.projection import box_2d_from_corners, box_iou_2d
from calib.rig import camera_rotation
from calib.se3 import SE3

W, H = 160, 90


def camera(cx: float = 80.0, cy: float = 45.0, focal: float = 100.0) -> CameraCalibration:
    k = np.array([[focal, 0.0, cx], [0.0, focal, cy], [0.0, 0.0, 1.0]])
    return CameraCalibration("CAM_TEST", k, SE3.identity(), W, H)


def pose(yaw_deg=0.0, pitch_deg=0.0, xyz=(0.0, 0.0, 1.5)) -> SE3:
    """global_SE3_camera for a camera at xyz looking along global +x turned by yaw, pitched down."""
    return SE3(camera_rotation(yaw_deg, pitch_deg), np.asarray(xyz, dtype=float))


def scene(centers, sizes_wlh, yaws=None, colours=None, parts=None) -> SceneBoxes:
    centers = np.asarray(centers, dtype=float).reshape(-1, 3)
    n = len(centers)
    return SceneBoxes(
        center=centers,
        size_wlh=np.asarray(sizes_wlh, dtype=float).reshape(n, 3),
        yaw=np.zeros(n) if yaws is None else np.asarray(yaws, dtype=float),
        colour=np.full((n, 3), 200, np.uint8) if colours is None else colours,
        owner=np.arange(n, dtype=np.int32),
        part=np.zeros(n, np.int8) if parts is None else np.asarray(parts, np.int8),
    )


PLAIN = GroundTexture.plain((90, 90, 90))


def pixel_extent(mask: np.ndarray) -> np.ndarray:
    """[u_min, v_min, u_max, v_max] of a pixel mask, pixel edges (a pixel u spans [u, u + 1])."""
    vs, us = np.nonzero(mask)
    return np.array([us.min(), vs.min(), us.max() + 1, vs.max() + 1], dtype=float)


def projected_extent(cam: CameraCalibration, global_SE3_camera: SE3, boxes: SceneBoxes):
    corners_camera = global_SE3_camera.inverse().transform_points(boxes.corners())
    return box_2d_from_corners(cam.intrinsic, corners_camera)


def pixel_rays(cam: CameraCalibration, global_SE3_camera: SE3):
    """Origin and (H*W, 3) global directions through the pixel centres, camera z = 1."""
    u, v = np.meshgrid(np.arange(W) + 0.5, np.arange(H) + 0.5)
    uv1 = np.stack([u.ravel(), v.ravel(), np.ones(u.size)], axis=1)
    d_camera = uv1 @ np.linalg.inv(cam.intrinsic).T
    return global_SE3_camera.translation, global_SE3_camera.rotate_vectors(d_camera), d_camera


@pytest.mark.parametrize(
    "center,size,yaw,cam_yaw,pitch",
    [
        ((12.0, 1.0, 1.0), (2.0, 4.5, 2.0), 0.6, 0.0, 0.0),
        ((8.0, -2.5, 0.8), (1.8, 4.0, 1.6), -1.1, -10.0, 5.0),
        ((20.0, 4.0, 3.0), (6.0, 6.0, 6.0), 0.2, 10.0, 2.0),
    ],
)
def test_single_box_matches_projected_corners(center, size, yaw, cam_yaw, pitch):
    cam, g_SE3_c = camera(), pose(cam_yaw, pitch)
    boxes = scene([center], [size], [yaw])
    result = render_camera(cam, g_SE3_c, boxes, PLAIN)
    mask = result.box_index == 0
    assert mask.sum() == result.unoccluded_px[0] == result.visible_px[0] > 100
    rendered = pixel_extent(mask)
    expected = projected_extent(cam, g_SE3_c, boxes)[0]
    assert box_iou_2d(rendered[None], expected[None])[0] >= 0.95
    np.testing.assert_array_less(np.abs(rendered - expected), 1.0 + 1e-9)


def test_nearer_box_hides_farther_one():
    cam, g_SE3_c = camera(), pose()
    boxes = scene([[20.0, 0.0, 1.5], [8.0, 0.8, 1.0]], [[4.0, 3.0, 3.0], [1.5, 1.5, 2.0]])
    result = render_camera(cam, g_SE3_c, boxes, PLAIN)
    alone = render_camera(cam, g_SE3_c, scene([[20.0, 0.0, 1.5]], [[4.0, 3.0, 3.0]]), PLAIN)
    assert result.unoccluded_px[0] == alone.visible_px[0]
    assert 0 < result.visible_px[0] < result.unoccluded_px[0]
    assert result.visible_px[1] == result.unoccluded_px[1]
    assert result.visible_px.sum() == (result.box_index >= 0).sum()
    np.testing.assert_array_equal(
        result.visible_px, [(result.box_index == b).sum() for b in range(2)]
    )
    # The far box's hidden pixels are exactly those where the near box is in front of it.
    hidden = (alone.box_index == 0) & (result.box_index != 0)
    assert (result.box_index[hidden] == 1).all()
    assert (result.depth_m[hidden] < alone.depth_m[hidden]).all()


def test_box_partly_behind_the_camera():
    # A wall beside the camera from 10 m behind it to 10 m ahead: only its front part shows.
    cam, g_SE3_c = camera(), pose(xyz=(0.0, 0.0, 1.5))
    boxes = scene([[0.0, 3.0, 2.0]], [[0.5, 20.0, 4.0]])
    result = render_camera(cam, g_SE3_c, boxes, PLAIN)
    assert result.visible_px[0] > 0
    origin, d_global, _ = pixel_rays(cam, g_SE3_c)
    _, hit = cast_rays(origin, d_global, boxes, 1e4)
    np.testing.assert_array_equal(result.box_index.ravel(), hit)
    extent = projected_extent(cam, g_SE3_c, boxes)[0]
    assert np.isfinite(extent).all() and extent[0] < 0  # reaches past the left image border
    assert pixel_extent(result.box_index == 0)[0] == 0


def test_box_entirely_behind_the_camera_is_not_drawn():
    boxes = scene([[-10.0, 0.0, 1.0]], [[2.0, 2.0, 2.0]])
    result = render_camera(camera(), pose(), boxes, PLAIN)
    assert result.unoccluded_px[0] == 0 and not (result.box_index == 0).any()


def test_depth_of_a_fronto_parallel_face():
    # Box front face at x = 10, camera at x = 0 looking along +x: depth 10 at every face pixel.
    boxes = scene([[12.0, 0.0, 1.5]], [[6.0, 4.0, 3.0]])
    result = render_camera(camera(), pose(), boxes, PLAIN)
    face = result.box_index == 0
    assert face.sum() > 1000
    np.testing.assert_allclose(result.depth_m[face], 10.0, rtol=1e-6)
    assert result.depth_m.dtype == np.float32


def test_depth_matches_ray_distance_everywhere():
    rng = np.random.default_rng(3)
    n = 15
    centers = np.column_stack(
        [rng.uniform(4, 40, n), rng.uniform(-12, 12, n), rng.uniform(0.5, 4, n)]
    )
    boxes = scene(centers, rng.uniform(0.5, 8, (n, 3)), rng.uniform(-3, 3, n))
    cam, g_SE3_c = camera(), pose(5.0, 4.0)
    result = render_camera(cam, g_SE3_c, boxes, PLAIN)
    origin, d_global, d_camera = pixel_rays(cam, g_SE3_c)
    t, hit = cast_rays(origin, d_global, boxes, 1e6)
    np.testing.assert_array_equal(result.box_index.ravel(), hit)
    assert len(np.unique(hit)) > 6
    depth_expected = t / np.linalg.norm(d_camera, axis=1)  # distance / |K^-1 [u, v, 1]|
    finite = np.isfinite(depth_expected)
    np.testing.assert_array_equal(np.isinf(result.depth_m.ravel()), ~finite)
    np.testing.assert_allclose(result.depth_m.ravel()[finite], depth_expected[finite], rtol=1e-5)
    # Each box's unoccluded count is what it covers when alone (ground sunk out of reach).
    for b in range(n):
        _, hit_alone = cast_rays(origin, d_global, boxes_subset(boxes, b), 1e6, ground_z=-1e9)
        assert result.unoccluded_px[b] == (hit_alone == 0).sum()


def boxes_subset(boxes: SceneBoxes, b: int) -> SceneBoxes:
    return SceneBoxes(
        boxes.center[b : b + 1],
        boxes.size_wlh[b : b + 1],
        boxes.yaw[b : b + 1],
        boxes.colour[b : b + 1],
        boxes.owner[b : b + 1],
        boxes.part[b : b + 1],
    )


def test_owner_counts_are_unions_of_their_boxes():
    # Object 1 is boxes 0 and 3 (overlapping on screen), object 0 is box 2, box 1 is scenery that
    # hides part of both objects.
    centers = [[12.0, 0.5, 1.0], [8.0, -0.5, 1.0], [15.0, -3.0, 1.0], [12.5, 1.5, 2.2]]
    sizes = [[2.0, 4.0, 2.0], [1.0, 1.0, 2.0], [2.0, 4.0, 2.0], [1.0, 1.0, 1.0]]
    base = scene(centers, sizes, [0.3, 0.0, -0.4, 0.8])
    boxes = SceneBoxes(
        base.center, base.size_wlh, base.yaw, base.colour, np.array([1, -1, 0, 1]), base.part
    )
    cam, g_SE3_c = camera(), pose()
    result = render_camera(cam, g_SE3_c, boxes, PLAIN)
    origin, d_global, _ = pixel_rays(cam, g_SE3_c)
    assert len(result.owner_unoccluded_px) == 2
    for owner, members in ((0, [2]), (1, [0, 3])):
        alone = SceneBoxes.concatenate([boxes_subset(boxes, b) for b in members])
        _, hit = cast_rays(origin, d_global, alone, 1e6, ground_z=-1e9)
        assert result.owner_unoccluded_px[owner] == (hit >= 0).sum()
        assert result.owner_visible_px[owner] == result.visible_px[members].sum()
    union = result.owner_unoccluded_px[1]
    assert max(result.unoccluded_px[[0, 3]]) < union < result.unoccluded_px[[0, 3]].sum()
    assert (result.owner_visible_px < result.owner_unoccluded_px).all()


def test_tie_goes_to_the_lower_index_whatever_the_owners():
    base = scene([[10.0, 0.0, 1.0], [10.0, 0.0, 1.0]], [[2, 2, 2], [2, 2, 2]])
    boxes = SceneBoxes(
        base.center, base.size_wlh, base.yaw, base.colour, np.array([1, 0]), base.part
    )
    result = render_camera(camera(), pose(), boxes, PLAIN)
    assert result.visible_px[0] > 0 and result.visible_px[1] == 0
    np.testing.assert_array_equal(result.owner_unoccluded_px, result.unoccluded_px[::-1])


def test_ground_pixel_on_the_optical_axis_of_a_pitched_camera():
    # Principal point at a pixel centre, so that pixel's ray is the optical axis, pitched 10 deg
    # down from 1.5 m: it meets the ground at distance h / sin(pitch), x = h / tan(pitch).
    cam = camera(cx=80.5, cy=45.5)
    pitch = np.radians(10.0)
    h = 1.5
    g_SE3_c = pose(0.0, 10.0, (0.0, 0.0, h))
    # A 1 m checkerboard so the expected colour is read off geometry.
    rows, cols = np.meshgrid(np.arange(40), np.arange(40), indexing="ij")
    tex = np.where(((rows + cols) % 2 == 0)[..., None], [250, 10, 10], [10, 10, 250])
    origin_xy = np.array([-20.0, -20.0])
    ground = GroundTexture(tex.astype(np.uint8), origin_xy, 1.0)
    result = render_camera(cam, g_SE3_c, SceneBoxes.empty(), ground)
    assert result.box_index[45, 80] == HIT_GROUND
    assert result.depth_m[45, 80] == pytest.approx(h / np.sin(pitch), rel=1e-6)
    x_hit = h / np.tan(pitch)
    col, row = int(np.floor(x_hit - origin_xy[0])), int(np.floor(0.0 - origin_xy[1]))
    np.testing.assert_array_equal(result.image[45, 80], tex[row, col])
    # The horizon of a pitched camera is above the centre; rows above it are sky.
    assert result.box_index[0, 80] == HIT_NOTHING and np.isinf(result.depth_m[0, 80])


def test_outside_the_texture_is_the_plain_colour():
    ground = GroundTexture(
        np.full((4, 4, 3), 255, np.uint8), np.array([100.0, 100.0]), 1.0, np.array([1, 2, 3])
    )
    result = render_camera(camera(), pose(0.0, 20.0), SceneBoxes.empty(), ground)
    assert (result.image[result.box_index == HIT_GROUND] == [1, 2, 3]).all()


def test_shading_of_bodies_and_flat_plates():
    # A body straight ahead at eye height shows only its -x face, which points away from the sun
    # (the sun is toward +x): ambient light only. A plate above it keeps its flat colour.
    colours = np.array([[200, 100, 50], [30, 180, 90]], np.uint8)
    boxes = scene(
        [[10.0, 0.0, 1.5], [10.0, 0.0, 4.0]], [[2, 2, 2], [2, 2, 1]], colours=colours, parts=[0, 2]
    )
    result = render_camera(camera(), pose(), boxes, PLAIN)
    body = result.image[result.box_index == 0]
    plate = result.image[result.box_index == 1]
    assert len(body) > 100 and len(plate) > 100
    np.testing.assert_array_equal(
        body, np.floor(colours[0] * AMBIENT + 0.5)[None].repeat(len(body), 0)
    )
    np.testing.assert_array_equal(plate, colours[1][None].repeat(len(plate), 0))


def test_rendering_is_deterministic():
    boxes = scene([[12.0, 1.0, 1.0], [9.0, -1.0, 1.0]], [[2, 4, 2], [1, 1, 2]], [0.4, 1.0])
    a = render_camera(camera(), pose(), boxes, PLAIN)
    b = render_camera(camera(), pose(), boxes, PLAIN)
    assert a.image.tobytes() == b.image.tobytes()
    assert a.depth_m.tobytes() == b.depth_m.tobytes()
    assert a.box_index.tobytes() == b.box_index.tobytes()


def test_bad_intrinsics_are_refused():
    cam = camera()
    k = cam.intrinsic.copy()
    k[2, 2] = 2.0
    bad = CameraCalibration("CAM_BAD", k, SE3.identity(), W, H)
    with pytest.raises(ValueError, match="CAM_BAD"):
        render_camera(bad, pose(), SceneBoxes.empty(), PLAIN)


def test_scenery_only_scene_has_no_owner_counts():
    base = scene([[10.0, 0.0, 1.0]], [[2, 2, 2]])
    boxes = SceneBoxes(base.center, base.size_wlh, base.yaw, base.colour, [-1], base.part)
    result = render_camera(camera(), pose(), boxes, PLAIN)
    assert result.visible_px[0] > 0
    assert len(result.owner_unoccluded_px) == 0 and len(result.owner_visible_px) == 0
    empty = render_camera(camera(), pose(), SceneBoxes.empty(), PLAIN)
    assert len(empty.unoccluded_px) == 0 and len(empty.owner_unoccluded_px) == 0
