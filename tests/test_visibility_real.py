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
