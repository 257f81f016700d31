"""Floors of the offboard refinement on real data (PandaSet-002, 16 keyframes), scored by the
nuscenes-devkit: the refined tracks against the detector's own boxes and the tracker's tracks.

The floors sit below what the refinement measured (bench/bench_offboard.py), above the previous
chain: a regression of the refinement fails them.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

from autolabel.classes import DETECTION_CLASSES
from autolabel.evaluation.detection import evaluate_detection
from autolabel.nuscenes_reader import open_dataset, read_clip
from autolabel.refine import refine_tracks
from autolabel.refine.points import gather_point_evidence
from autolabel.stages import ego_xy_yaw
from detectors import get_detector
from detectors.detection_results import submission_meta, write_detection_submission
from tests.realdata import PANDASET, PANDASET_VERSION, realdata_dir, requires_realdata
from trackers import get_tracker
from trackers.pub_tracker import REFINE_CLASS_GROUPS

pytestmark = requires_realdata(PANDASET)


@pytest.fixture(scope="module")
def pandaset_chains():
    root = realdata_dir(PANDASET)
    nusc = open_dataset(root, PANDASET_VERSION)
    clip = read_clip(nusc, "pandaset-002", max_sweeps=2)
    times = np.array([f.time_s for f in clip.frames])
    dets = get_detector("lidar", None).detect_frames(clip.frames)
    # As the pipeline tracks for the refine stage (class groups).
    tracks = get_tracker("pub", {"class_groups": REFINE_CLASS_GROUPS}).track_clip(times, dets)
    evidence = gather_point_evidence(clip, tracks)
    refined, summary = refine_tracks(times, tracks, None, evidence, ego_xy_yaw(clip), clip.location)
    return root, nusc, clip, dets, tracks, refined, summary


def test_pandaset_keeps_right_from_its_log_location(pandaset_chains):
    # PandaSet-002 was driven in San Francisco (its log.json): right-hand traffic, found from the
    # location by the default traffic_side "auto".
    clip, summary = pandaset_chains[2], pandaset_chains[6]
    assert clip.location == "san-francisco"
    assert (summary.left_hand_traffic, summary.traffic_side_from_location) == (0, 1)


def _det_metrics(tmp_path, root, nusc, clip, boxes):
    tokens = [f.token for f in clip.frames]
    path = tmp_path / clip.name / "labels/detection.json"
    write_detection_submission(path, tokens, boxes, submission_meta(use_lidar=True))
    with contextlib.redirect_stdout(io.StringIO()):
        return evaluate_detection(tmp_path, root, PANDASET_VERSION, nusc=nusc, render_curves=False)


def test_refined_tracks_beat_the_online_chain_on_pandaset(pandaset_chains, tmp_path):
    root, nusc, clip, dets, tracks, refined, summary = pandaset_chains
    before = _det_metrics(tmp_path / "online", root, nusc, clip, dets)
    after = _det_metrics(tmp_path / "refined", root, nusc, clip, refined)
    car_before, car_after = before["mean_dist_aps"]["car"], after["mean_dist_aps"]["car"]
    aoe_before = before["label_tp_errors"]["car"]["orient_err"]
    aoe_after = after["label_tp_errors"]["car"]["orient_err"]
    # Measured (these two sweeps): car AP 0.45 -> 0.67, car AOE 0.42 -> 0.045 rad (parked cars
    # pointed by the traffic beside them, not by tracks merged with them; cars under trees
    # found by their roof; walls and fences taken for parked cars, their returns on one line,
    # ranked below the cars: 0.59 without).
    assert car_after >= 0.64 and car_after > car_before
    assert aoe_after <= 0.10 and aoe_after < aoe_before
    # Over the 7 classes present: 0.26 (car 0.67, truck 0.07, motorcycle 0.83, pedestrian
    # 0.27; 0.235 with pedestrian 0.07 before a confident false pedestrian, a column of a parked
    # car's returns inside that car's box, went as the car's duplicate). The motorcycle, seen as motorcycle, bicycle, pedestrian or cone from frame to
    # frame, is one track only with the tracker's class groups (bench_offboard's 10 sweeps: its
    # AP 0.03 -> 0.23). A pedestrian tracked as a cone, lost for 2.5 s, then as a pedestrian is
    # one track only with its fragments joined (pedestrian AP 0 -> 0.07).
    present = {DETECTION_CLASSES[c] for f in clip.frames for c in f.ground_truth.boxes.label}
    assert len(present) == 7
    assert np.mean([after["mean_dist_aps"][c] for c in present]) >= 0.25
    assert after["mean_dist_aps"]["pedestrian"] >= 0.2
    # The real motorcycle (4 to 7.6 m/s in town) rides along no vehicle: the riding-along test
    # keeps it.
    assert after["mean_dist_aps"]["motorcycle"] >= 0.8
    # Tracks per ground-truth object: 2.9 before (284 for 99), 1.00 after (1.03 without joining
    # fragments: 3 joined, each a parked car or a pedestrian split where the detector changed
    # its class).
    objects = len({t for f in clip.frames for t in f.ground_truth.boxes.track_id})
    assert summary.tracks_out <= 1.1 * objects < 0.5 * summary.tracks_in
    assert summary.joined >= 2


def test_wall_test_spares_pandaset_cars_under_trees(pandaset_chains):
    from autolabel.boxes import Boxes3D
    from autolabel.classes import CLASS_INDEX
    from autolabel.refine import RefineConfig
    from autolabel.refine.classify import shape_evidence
    from autolabel.refine.points import boxes_evidence

    root, nusc, clip, dets, tracks, refined, summary = pandaset_chains
    cfg = RefineConfig()
    evidence = gather_point_evidence(clip, tracks)
    column = boxes_evidence(evidence, refined, cfg.wall_column_m)
    boxes = Boxes3D.concatenate(refined)
    frame = np.concatenate([np.full(len(b), f) for f, b in enumerate(refined)])
    uniq, track_of_box = np.unique(boxes.track_id, return_inverse=True)
    col = shape_evidence(track_of_box, len(uniq), boxes, column, 20).column
    # Tracks of real cars: most of their boxes within 2 m of a ground-truth car.
    car = CLASS_INDEX["car"]
    near = np.zeros(len(boxes), bool)
    for k in range(len(boxes)):
        gt = clip.frames[frame[k]].ground_truth.boxes
        d = np.linalg.norm(gt.center_m[:, :2] - boxes.center_m[k, :2], axis=1)
        near[k] = np.any(d[gt.label == car] < 2.0)
    real_car = np.bincount(track_of_box, weights=near) > 0.5 * np.bincount(track_of_box)
    with np.errstate(invalid="ignore"):
        wall = (
            (col.returns >= 20)
            & (col.overlap >= cfg.wall_min_overlap)
            & (col.density >= cfg.wall_min_density)
        )
        # Measured: a parked car under a tree's canopy, as dense over its box as in it (1.4),
        # the canopy's returns off its faces (overlap 0.04).
        canopy = real_car & (col.density >= 1.0)
    assert np.any(canopy) and np.all(col.overlap[canopy] < 0.2)
    assert not np.any(wall & real_car)


def test_panel_test_rejects_a_fence_and_no_pandaset_object(pandaset_chains):
    from autolabel.boxes import Boxes3D
    from autolabel.refine import RefineConfig

    root, nusc, clip, dets, tracks, refined, summary = pandaset_chains
    times = np.array([f.time_s for f in clip.frames])
    evidence = gather_point_evidence(clip, tracks)
    without, _ = refine_tracks(
        times, tracks, RefineConfig(panel_min_fill=0.0), evidence, ego_xy_yaw(clip)
    )
    kept = np.unique(Boxes3D.concatenate(refined).track_id)
    gone = [b[~np.isin(b.track_id, kept)] for b in without]
    # Measured: a static "truck" scored 0.97 by the detector, a chain-link fence's top rail over
    # its posts 40 m off (truck AMOTA 0.04 -> 0.23 with 10 sweeps, bench_offboard); and no
    # box of what goes lies within 3 m of a ground-truth object.
    assert sum(len(b) for b in gone) > 0
    for frame, boxes in zip(clip.frames, gone, strict=True):
        gt = frame.ground_truth.boxes.center_m[:, :2]
        for xy in boxes.center_m[:, :2]:
            assert np.min(np.linalg.norm(gt - xy, axis=1)) > 3.0


def _track_metrics(tmp_path, root, clip, boxes):
    from autolabel.evaluation.tracking import evaluate_tracking
    from trackers.tracking_results import write_tracking_submission

    tokens = [f.token for f in clip.frames]
    write_tracking_submission(tmp_path / clip.name / "labels/tracking.json", tokens, boxes)
    with contextlib.redirect_stdout(io.StringIO()):
        return evaluate_tracking(tmp_path, root, PANDASET_VERSION, render_curves=False)["metrics"]


def test_tracks_carried_where_the_lidar_sees_them_raise_pandaset_recall(pandaset_chains, tmp_path):
    from autolabel.refine import RefineConfig

    root, nusc, clip, dets, tracks, refined, summary = pandaset_chains
    times = np.array([f.time_s for f in clip.frames])
    evidence = gather_point_evidence(clip, tracks)
    without, _ = refine_tracks(
        times, tracks, RefineConfig(extend_tracks=False), evidence, ego_xy_yaw(clip)
    )
    on = _track_metrics(tmp_path / "on", root, clip, refined)
    off = _track_metrics(tmp_path / "off", root, clip, without)
    car = _det_metrics(tmp_path / "det", root, nusc, clip, refined)["mean_dist_aps"]["car"]
    # Measured: 143 boxes carried; AMOTA 0.381 -> 0.420, recall 0.41 -> 0.44, car AP
    # 0.649 -> 0.662 (the goals: AMOTA 0.40, car AP 0.65).
    assert summary.boxes_extended > 100
    assert on["amota"] >= 0.40 and on["amota"] > off["amota"]
    assert on["recall"] > off["recall"]
    assert car >= 0.65
