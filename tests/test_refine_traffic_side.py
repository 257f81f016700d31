"""Which side of the road a log's traffic keeps to, from its location (``traffic_side: auto``)."""

from __future__ import annotations

import numpy as np
import pytest

from autolabel.refine import RefineConfig, refine_tracks
from autolabel.refine.traffic_side import resolved_traffic_side, side_of_location
from calib.rotation import wrap_angle
from tests.test_refine import TIMES, boxes_of, merge, track_boxes


@pytest.mark.parametrize(
    "location, side",
    [
        # nuScenes v1.0's four locations (log.json), PandaSet's and nuPlan's spelling.
        ("singapore-onenorth", "left"),
        ("singapore-hollandvillage", "left"),
        ("singapore-queenstown", "left"),
        ("boston-seaport", "right"),
        ("san-francisco", "right"),
        ("Las Vegas", "right"),
        ("us-nv-las-vegas-strip", "right"),
        ("sg-one-north", "left"),  # nuPlan's
        ("sg-queenstown", None),  # a bare country code is not taken for a place
        ("London_Heathrow", "left"),
        ("francisco", None),  # a word of a place is not the place
        ("synth-crossroads-17-0", None),
        ("", None),
        ("boston-singapore-transfer", None),  # names both sides
    ],
)
def test_side_of_location(location, side):
    assert side_of_location(location) == side


def test_auto_falls_back_to_right_and_says_so():
    assert resolved_traffic_side("auto", "singapore-onenorth") == ("left", True)
    assert resolved_traffic_side("auto", "test") == ("right", False)
    # A set side wins over the location.
    assert resolved_traffic_side("right", "singapore-onenorth") == ("right", False)
    assert resolved_traffic_side("none", "boston-seaport") == ("none", False)


def test_singapore_log_turns_the_other_kerb():
    # The ego drives +x along y = 0 at 6 m/s; two cars parked 9 m to its left (y = +9) and 3 m to
    # its right (y = -3), both boxed heading +x. In Boston (keep right) the left one is across
    # the centre line and faces the oncoming traffic (pi), the right one the ego's way (0). In
    # Singapore (keep left) the ego drives on the left: the right one is across (pi).
    n = len(TIMES)
    left_car = track_boxes(0, "car", np.tile([30.0, 9.0], (n, 1)), np.zeros(n))
    right_car = track_boxes(1, "car", np.tile([30.0, -3.0], (n, 1)), np.zeros(n))
    ego = np.column_stack([6.0 * TIMES, np.zeros(n), np.zeros(n)])
    facing = {}
    for location in ("boston-seaport", "singapore-onenorth"):
        refined, summary = refine_tracks(
            TIMES, merge(left_car, right_car), RefineConfig(), None, ego, location
        )
        facing[location] = [
            np.cos(wrap_angle(boxes_of(refined, i)[1].yaw_rad)).round() for i in (0, 1)
        ]
        assert summary.traffic_side_from_location == 1
        assert summary.left_hand_traffic == int(location.startswith("singapore"))
    assert np.all(facing["boston-seaport"][0] == -1) and np.all(facing["boston-seaport"][1] == 1)
    assert np.all(facing["singapore-onenorth"][0] == 1)
    assert np.all(facing["singapore-onenorth"][1] == -1)


def test_auto_is_a_valid_setting_and_the_default():
    assert RefineConfig().traffic_side == "auto"
    with pytest.raises(ValueError, match="traffic_side"):
        RefineConfig(traffic_side="Singapore")
