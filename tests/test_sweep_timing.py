"""The LiDAR sweep's period, seam and camera triggers, read from a dataset's own files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from realdata import PANDASET, PANDASET_VERSION, realdata_dir, requires_realdata

from autolabel.anonymize.geometric import GeometricConfig, clip_geometric_config
from autolabel.sweep_timing import (
    CameraTrigger,
    SweepTiming,
    covering_arc_deg,
    format_sweep_timing,
    sweep_ends,
    triggered_sweep_timing,
)
from calib.bearing import wrap_deg
from calib.rotation import rotation_from_yaw
from calib.se3 import SE3

# A LiDAR turned -90 degrees about z on the ego (as PandaSet's): its +x looks to the ego's right.
EGO_SE3_LIDAR = SE3(rotation_from_yaw(np.radians(-90.0)), np.array([0.8, 0.0, 2.0]))


def _sweep(start_lidar_deg: float, turn_deg: float, n: int = 72_000) -> np.ndarray:
    """(n, 5) returns 10 m away whose azimuth (LiDAR frame) turns steadily from the start."""
    az = np.radians(start_lidar_deg + turn_deg * np.arange(n) / n)
    pts = np.zeros((n, 5), np.float32)
    pts[:, 0], pts[:, 1] = 10 * np.cos(az), 10 * np.sin(az)
    return pts


def test_a_clockwise_sweep_starts_and_ends_where_its_first_and_last_returns_are():
    # Clockwise from LiDAR -90 deg, which is the ego's -180 deg (behind), over 359 deg: the last
    # returns are at ego -180 - 359 = -539 = 181 deg. Each end is a block of 1/720 of the returns
    # (0.5 deg of turn): its mean lies a quarter degree into the sweep.
    ends = sweep_ends(_sweep(-90.0, -359.0), EGO_SE3_LIDAR)
    assert ends is not None
    assert wrap_deg(ends.start_deg - 180.0) == pytest.approx(-0.25, abs=0.01)
    assert wrap_deg(ends.end_deg - 181.0) == pytest.approx(0.25, abs=0.01)
    assert ends.turn_deg == pytest.approx(-358.5, abs=0.01)
    # Counter-clockwise: the turn's sign says so.
    ccw = sweep_ends(_sweep(0.0, 359.0), EGO_SE3_LIDAR)
    assert ccw is not None and ccw.turn_deg == pytest.approx(358.5, abs=0.01)
    assert wrap_deg(ccw.start_deg - -90.0) == pytest.approx(0.25, abs=0.01)


def test_returns_not_in_firing_order_give_no_seam():
    pts = _sweep(-90.0, -359.0)
    shuffled = pts[np.random.default_rng(0).permutation(len(pts))]
    assert sweep_ends(shuffled, EGO_SE3_LIDAR) is None
    # Sorted by laser, each laser's ring a turn: the file turns 4 times, not once.
    assert (
        sweep_ends(np.concatenate([pts[::4], pts[1::4], pts[2::4], pts[3::4]]), EGO_SE3_LIDAR)
        is None
    )
    # Half a revolution, too few returns, returns inside 1 m only.
    assert sweep_ends(_sweep(0.0, -180.0), EGO_SE3_LIDAR) is None
    assert sweep_ends(_sweep(0.0, -359.0, n=1000), EGO_SE3_LIDAR) is None
    near = _sweep(0.0, -359.0)
    near[:, :2] /= 20.0
    assert sweep_ends(near, EGO_SE3_LIDAR) is None


def test_covering_arc_is_the_circle_less_its_widest_gap():
    assert covering_arc_deg(np.array([10.0, 20.0, 15.0])) == (10.0, 20.0)
    # Across +-180: from 178 counter-clockwise to -179 (= 181).
    assert covering_arc_deg(np.array([179.0, -179.0, 178.0])) == (178.0, -179.0)
    assert covering_arc_deg(np.array([])) is None


def _timing(triggers, turn_deg=-358.0, period_s=0.1) -> SweepTiming:
    return SweepTiming(
        sweeps=2,
        ordered=2,
        unreadable=0,
        period_s=period_s,
        turn_deg=turn_deg,
        ends_deg=np.array([-179.9, -176.8, -179.5, -176.9]),
        lever_arm_m=0.8,
        triggers=tuple(CameraTrigger(ch, ax, off, 0.1) for ch, ax, off in triggers),
    )


# PandaSet's six cameras' axes, in the order they fire: clockwise from behind.
CLOCKWISE = [("B", -178.0, -100.0), ("BL", 92.0, -81.0), ("FL", 58.0, -61.0),
             ("F", 0.0, -50.0), ("FR", -58.0, -39.0), ("BR", -89.0, -19.0)]  # fmt: skip


def test_seam_setting_widens_the_arc_by_the_lever_arm():
    timing = _timing(CLOCKWISE)
    assert timing.seam_arc_deg == pytest.approx((-179.9, -176.8), abs=1e-9)
    # asin(0.8 / 5) = 9.207 deg on each side: 180.1 - 9.207 = 170.893, -176.8 + 9.207 = -167.593.
    lo, hi = timing.seam_deg(5.0)
    assert lo == pytest.approx(170.893, abs=1e-3) and hi == pytest.approx(-167.593, abs=1e-3)
    with pytest.raises(ValueError, match="min_range_m"):
        timing.seam_deg(0.5)
    lines = format_sweep_timing(timing)
    assert lines[-2:] == ["    sweep_period_s: 0.1", "    sweep_seam_deg: [170.8, -167.5]"]


def test_cameras_must_fire_in_the_beams_order_once_round():
    assert _timing(CLOCKWISE).cameras_fire_in_beam_order
    # The same firing order with the LiDAR turning counter-clockwise: twice round, not once.
    assert not _timing(CLOCKWISE, turn_deg=358.0).cameras_fire_in_beam_order
    swapped = [CLOCKWISE[0], CLOCKWISE[2], CLOCKWISE[1], *CLOCKWISE[3:]]
    assert not _timing(swapped).cameras_fire_in_beam_order
    # At 20 Hz the six cameras' 81 ms span more than one revolution; without a period, nothing.
    assert not _timing(CLOCKWISE, period_s=0.05).cameras_fire_in_beam_order
    assert _timing(CLOCKWISE, period_s=float("nan")).release_settings is None
    settings = _timing(CLOCKWISE).release_settings
    assert settings[0] == 0.1 and settings[1] == pytest.approx((170.893, -167.593), abs=1e-3)
    unsteady = _timing(CLOCKWISE)
    unsteady = SweepTiming(
        **{**unsteady.__dict__, "triggers": (CameraTrigger("B", -178.0, -100.0, 12.0),)
           + unsteady.triggers[1:]}
    )  # fmt: skip
    assert not unsteady.cameras_fire_in_beam_order
    assert "a release keeps anonymize.geometric.time_sigma_s" in format_sweep_timing(unsteady)[-1]


def test_synthetic_cameras_do_not_follow_the_order_of_the_generators_files(synth_run):
    """The generator fires its cameras clockwise but writes each sweep's rays counter-clockwise
    (all at one instant): no release setting may be read off its files."""
    from autolabel.nuscenes_reader import read_clip
    from autolabel.sweep_timing import measure_sweep_timing

    clip = read_clip(synth_run.dataroot, synth_run.scenes[0], "v1.0-mini", with_ground_truth=False)
    timing = measure_sweep_timing(clip)
    assert timing.ordered == timing.sweeps and timing.turn_deg > 0
    assert not timing.cameras_fire_in_beam_order
    # So a release keeps the default geometric settings on synthetic clips.
    assert triggered_sweep_timing(clip) is None
    assert clip_geometric_config(clip, GeometricConfig()) == GeometricConfig()


@requires_realdata(PANDASET)
def test_pandaset_sweeps_start_and_end_behind_the_car_where_cam_back_fires_first():
    """Issue 21: PandaSet-002's returns are stored in firing order; every sweep starts and ends
    at CAM_BACK's axis (-178 deg), the camera that fires first, so the seam the release's rig
    setting assumes is where the files put it."""
    from autolabel.nuscenes_reader import list_clips, open_dataset, read_clip
    from autolabel.sweep_timing import measure_sweep_timing

    nusc = open_dataset(realdata_dir(PANDASET), PANDASET_VERSION)
    clip = read_clip(nusc, list_clips(nusc)[0], with_ground_truth=False)
    timing = measure_sweep_timing(clip)
    # 16 keyframes and the 56 sweeps before them (frames 56-58 and 71 are missing), 10 Hz.
    assert timing.sweeps == timing.ordered == 72
    assert timing.period_s == pytest.approx(0.1, abs=1e-3)
    assert timing.turn_deg < 0  # clockwise seen from above
    lo, hi = timing.seam_arc_deg
    assert -180.5 < lo < hi < -176.0
    assert [t.channel for t in timing.triggers] == [
        "CAM_BACK", "CAM_BACK_LEFT", "CAM_FRONT_LEFT", "CAM_FRONT", "CAM_FRONT_RIGHT",
        "CAM_BACK_RIGHT",
    ]  # fmt: skip
    assert timing.cameras_fire_in_beam_order
    # The rig setting the anonymization labels hold (set earlier from the trigger times alone)
    # contains the measured seam widened for objects 5 m away.
    labels = json.loads(
        (Path(__file__).parent / "data" / "pandaset_002_anonymization_labels.json").read_text()
    )
    set_lo, set_hi = labels["sweep_seam_deg"]
    seam_lo, seam_hi = timing.seam_deg(5.0)
    width = np.mod(set_hi - set_lo, 360.0)
    assert np.mod(seam_lo - set_lo, 360.0) <= width and np.mod(seam_hi - set_lo, 360.0) <= width
    # A release reads the same from the 16 keyframe files alone (and the step back to the sweep
    # before each); a period set in the config wins, and sweep_from_files off keeps the default.
    keyframes_only = read_clip(nusc, list_clips(nusc)[0], max_sweeps=2, with_ground_truth=False)
    measured = triggered_sweep_timing(keyframes_only)
    assert measured.sweeps == measured.ordered == 16
    config = clip_geometric_config(keyframes_only, GeometricConfig())
    assert config.sweep_period_s == 0.1
    assert config.sweep_seam_deg == pytest.approx(timing.seam_deg(5.0), abs=0.5)
    fixed = GeometricConfig(sweep_period_s=0.05, sweep_seam_deg=(0.0, 10.0))
    assert clip_geometric_config(keyframes_only, fixed) is fixed
    off = GeometricConfig(sweep_from_files=False)
    assert clip_geometric_config(keyframes_only, off) is off


def test_cli_names_the_missing_table_folder(tmp_path):
    from typer.testing import CliRunner

    from autolabel.cli import app

    result = CliRunner().invoke(app, ["sweep-timing", str(tmp_path), "--version", "v9"])
    assert result.exit_code == 1
    assert "v9" in result.output and "does not exist" in result.output


@requires_realdata(PANDASET)
def test_cli_prints_pandaset_release_settings():
    from typer.testing import CliRunner

    from autolabel.cli import app

    args = ["sweep-timing", str(realdata_dir(PANDASET)), "--version", PANDASET_VERSION]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-3:] == [
        "  geometric:",
        "    sweep_period_s: 0.1",
        "    sweep_seam_deg: [170.8, -167.5]",
    ]


def test_hit_offset_follows_the_turn_from_the_seam():
    # Seam arc (-179.9, -176.8): its middle -178.35; clockwise, so the beams reach azimuth 0
    # after 181.65 deg and -90 after 271.65 deg, 0.1 s a turn.
    timing = _timing(CLOCKWISE)
    np.testing.assert_allclose(timing.turn_from_seam_deg(np.array([0.0, -90.0])), [181.65, 271.65])
    # Each camera's offset less its axis's turn x 0.1 s / 360 deg: B -199.90 (axis -178 is 359.65
    # deg past the seam's middle), BL -105.90, FL -95.35, F -100.46, FR -105.57, BR -94.18 ms;
    # median (-105.57 - 100.46) / 2 = -103.01 ms.
    start = timing.start_offset_s
    assert start == pytest.approx(-0.1030139, abs=1e-6)
    assert timing.hit_offset_s(np.array([0.0]))[0] == pytest.approx(start + 0.0504583, abs=1e-6)


def test_camera_views_move_boxes_from_where_the_beams_saw_them(synth_run):
    """With a sweep timing, a box moves to each camera's time from its hit time: a timing whose
    every azimuth is hit at CAM_FRONT's offset leaves CAM_FRONT's views where they would be
    without motion compensation, and moves the other cameras' by the rest."""
    from dataclasses import replace

    from autolabel.camera_views import build_camera_views
    from autolabel.config import SegmentOptions
    from autolabel.nuscenes_reader import read_clip

    clip = read_clip(synth_run.dataroot, synth_run.scenes[0], "v1.0-mini")
    tracks = [f.ground_truth.boxes for f in clip.frames]
    offset_ms = (
        clip.frames[0].cameras["CAM_FRONT"].timestamp_us - clip.frames[0].timestamp_us
    ) / 1e3
    # A zero period: every azimuth is hit at the (only) trigger offset.
    flat = replace(
        _timing([("CAM_FRONT", 0.0, offset_ms)], period_s=0.0),
        triggers=(CameraTrigger("CAM_FRONT", 0.0, offset_ms, 0.0),),
    )
    moved = build_camera_views(clip, tracks, SegmentOptions(), flat)
    still = build_camera_views(clip, tracks, SegmentOptions(motion_compensate=False))
    plain = build_camera_views(clip, tracks, SegmentOptions())
    front = moved.channels.index("CAM_FRONT")
    in_front = moved.camera == front
    assert in_front.sum() > 10
    np.testing.assert_allclose(moved.box_px[in_front], still.box_px[still.camera == front])
    # CAM_FRONT's moving boxes were moved without the timing (its offset is not 0).
    moving = np.abs(plain.box_px[plain.camera == front] - still.box_px[still.camera == front])
    assert moving.max() > 1.0
