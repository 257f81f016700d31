"""Masks and visibility on a real drive (PandaSet-002, exact ground-truth replay), as floors.

The figures are ``bench/bench_visibility_real.py``'s, on two keyframes so the test stays cheap
(one segment + visibility pass, cached for the module); the reference (clearly visible / hidden
views) comes from the annotations alone, with shapely polygons. The floors are the issue's
targets (clearly visible views: 0.91 here and on the whole clip, against the target 0.85; the
rest are views the LiDAR shows hidden by things nobody annotated - a building, a fence, a car the
annotation left out - and far cars under 500 visible pixels; hidden views, near cars, returns in
masks), so a later change cannot quietly undo them.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.realdata import PANDASET, realdata_dir, requires_realdata

pytestmark = requires_realdata(PANDASET)

#: Keyframes of the test: the start, and the middle whose stitched marks the issue looked at.
KEYFRAMES = [0, 8]


@pytest.fixture(scope="module")
def real_run():
    from bench import bench_visibility_real as bench

    clip, config = bench.load_clip(realdata_dir(PANDASET))  # the default segmenter
    assert config.segmenter == "geometric"
    results, visibility, _ = bench.run_segment_visibility(clip, config, KEYFRAMES)
    ref = bench.reference_views(clip, KEYFRAMES)
    joined = bench.join_reference(
        ref, visibility, bench.track_centers_from_boxes(results["label_tracks"])
    )
    return clip, results, visibility, joined, bench.figures(joined, visibility)


def test_clearly_visible_views_are_kept_and_hidden_ones_are_not(real_run):
    *_, joined, fig = real_run
    assert fig["clear_views"] >= 20 and fig["hidden_views"] >= 20, fig  # figures mean something
    assert fig["clear_kept"] >= 0.85, fig
    assert fig["hidden_kept"] <= 0.05, fig


def test_near_cars_are_kept_and_masks_hold_their_returns(real_run):
    *_, fig = real_run
    assert fig["near_car_views"] >= 5, fig
    assert fig["near_cars_kept"] == 1.0, fig
    assert fig["median_own_return_recall"] >= 0.9, fig


def test_visibility_columns_say_what_each_view_rests_on(real_run):
    _, results, visibility, *_ = real_run
    # The geometric score is own-return recall x unoccluded hull share (1 without returns).
    recall = visibility.own_return_recall.fillna(1.0).to_numpy()
    assert (visibility.mask_score.to_numpy() <= recall + 1e-6).all()
    no_returns = visibility.own_returns == 0
    assert (visibility.evidence[no_returns] == "geometry").all()
    assert (visibility.evidence[~no_returns] == "lidar+geometry").all()
    assert visibility.own_return_recall[no_returns].isna().all()
    # A view rejected only by the LiDAR-depth rule has a nearer return on most of its hull.
    lidar_only = visibility.rejected_by == "LIDAR_OCCLUDED"
    assert (visibility.lidar_occluded_share[lidar_only] > 0.5).all()
    shares = visibility[["hull_occluded_share", "lidar_occluded_share"]].to_numpy()
    assert np.nanmin(shares) >= 0 and np.nanmax(shares) <= 1


def test_a_car_beside_the_ego_counts_by_its_volume_in_view(real_run):
    """At keyframe 0 a parked car 3.8 m beside the ego (annotation 27) fills the right of
    CAM_FRONT_RIGHT, but its near end, 2.5 m from the camera, stretches its projected box to
    thousands of pixels outside the image: the 2D share alone drops it."""
    from calib.projection import project_points

    clip, _, visibility, joined, _ = real_run
    view = joined[(joined.frame_index == 0) & (joined.camera == "CAM_FRONT_RIGHT")]
    view = view[view.annotation == 27].iloc[0]
    assert view.class_name == "car" and view.distance_m < 4.0 and view.covered_share == 0.0
    assert view.in_image_fraction < 0.1  # the annotation's own 2D box, by shapely
    # Its volume share, on a 24^3 lattice (not the pipeline's 8^3) of the annotated box.
    frame = clip.frames[0]
    image = frame.cameras["CAM_FRONT_RIGHT"]
    corners = frame.ground_truth.boxes.corners()[27]
    t = (np.arange(24) + 0.5) / 24
    a, b, c = np.meshgrid(t, t, t, indexing="ij")
    points = (
        corners[0]
        + a.reshape(-1, 1) * (corners[1] - corners[0])
        + b.reshape(-1, 1) * (corners[3] - corners[0])
        + c.reshape(-1, 1) * (corners[4] - corners[0])
    )
    cal = image.calibration
    uv, z = project_points(
        cal.intrinsic, image.global_SE3_camera.inverse().transform_points(points)
    )
    inside = (z > 0.1) & (uv[:, 0] >= 0) & (uv[:, 0] <= cal.width_px)
    inside &= (uv[:, 1] >= 0) & (uv[:, 1] <= cal.height_px)
    assert inside.mean() >= 0.65
    row = visibility[
        (visibility.frame_index == 0)
        & (visibility.camera == "CAM_FRONT_RIGHT")
        & (visibility.track_id == view.track_id)
    ].iloc[0]
    assert abs(row.volume_in_image - inside.mean()) < 0.05
    assert row.keep, row
