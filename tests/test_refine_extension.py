"""Static tracks carried to the keyframes where their box still holds the LiDAR's returns."""

from __future__ import annotations

import numpy as np
import pytest

from autolabel.boxes import Boxes3D
from autolabel.classes import class_index
from autolabel.refine import RefineConfig, refine_tracks
from autolabel.refine.extension import extension_frames
from autolabel.refine.points import KeyframeReturns, keyframes_evidence
from calib.se3 import SE3
from detectors.lidar_geometric import GroundModel

TIMES = np.arange(0.0, 10.0, 0.5)
FLAT = GroundModel(np.zeros(3), np.zeros((1, 1)), np.array([-500.0, -500.0]), 1000.0)
CAR_XY = np.array([10.0, 4.0])


def test_extension_runs_outwards_from_the_span_and_stops_at_the_first_refusal():
    # Track 0 spans 3..4 of 8 keyframes; refused at 0 and 6: extended to 1, 2 and 5.
    # Track 1 spans 0..1, accepted everywhere after: extended to 2..7.
    # Track 2 spans 4..7, refused at 3: nothing.
    ok = np.array(
        [
            [0, 1, 1, 0, 0, 1, 0, 1],
            [0, 0, 1, 1, 1, 1, 1, 1],
            [1, 1, 1, 0, 0, 0, 0, 0],
        ],
        bool,
    )
    got = extension_frames(ok, np.array([3, 0, 4]), np.array([4, 1, 7]))
    assert [list(np.flatnonzero(r)) for r in got] == [[1, 2, 5], [2, 3, 4, 5, 6, 7], []]


def _car_points(n: int, xy=CAR_XY) -> np.ndarray:
    """``n`` returns inside a car's box at ``xy`` (4.5 x 1.9 m footprint, 0.5-1.4 m high)."""
    k = np.arange(n)
    return np.column_stack(
        [xy[0] - 2.0 + 4.0 * (k % 4) / 3, xy[1] - 0.8 + 1.6 * (k // 4 % 3) / 2,
         0.5 + 0.9 * k / max(n - 1, 1)]
    )  # fmt: skip


def _keyframes(returns_per_frame: list[int], other=None) -> list[KeyframeReturns]:
    """Keyframes with the ego at the global origin (ego frame = global frame), flat ground;
    ``other``: (xy, frames) of a second car with 12 returns at those keyframes."""
    out = []
    for f, n in enumerate(returns_per_frame):
        pts = _car_points(n)
        if other is not None and f in other[1]:
            pts = np.concatenate([pts, _car_points(12, other[0])])
        out.append(KeyframeReturns(pts, pts[:, 2].copy(), FLAT, SE3.identity()))
    return out


def _car_track(frames, tid: int, xy_at) -> list[Boxes3D]:
    """One car box of track ``tid`` (heading +x, no detector velocity) at each keyframe of
    ``frames``, centred at ``xy_at(time_s)``; no box elsewhere."""
    out = []
    for f in range(len(TIMES)):
        if f not in frames:
            out.append(Boxes3D.empty())
            continue
        x, y = xy_at(TIMES[f])
        out.append(
            Boxes3D(
                center_m=[[x, y, 0.8]],
                size_wlh_m=[[1.9, 4.5, 1.6]],
                yaw_rad=[0.0],
                velocity_mps=np.full((1, 2), np.nan),
                label=[class_index("car")],
                score=[0.8],
                track_id=[tid],
            )
        )
    return out


def _parked_car(frames, tid=0, xy=CAR_XY) -> list[Boxes3D]:
    return _car_track(frames, tid, lambda t: xy)


def _refine(tracks, returns_per_frame, other=None, **options):
    keyframes = _keyframes(returns_per_frame, other)
    evidence = keyframes_evidence(keyframes, tracks, 0.3)
    cfg = RefineConfig(evidence_score=False, **options)
    return refine_tracks(TIMES, tracks, cfg, evidence)


def test_a_parked_car_is_carried_where_its_box_holds_enough_returns():
    # Detected at keyframes 5..9; its box holds 12 returns at 3..12, 2 (under the 3 needed) at
    # 0..1 and 13.., none at 2: extended to 3, 4 and 10, 11, 12, at half its score.
    n = len(TIMES)
    returns = [2, 2, 0] + [12] * 10 + [2] * (n - 13)
    refined, summary = _refine(_parked_car(range(5, 10)), returns)
    frames = [f for f, b in enumerate(refined) if len(b)]
    assert frames == [3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
    assert summary.boxes_extended == 5
    boxes = Boxes3D.concatenate(refined)
    assert np.allclose(boxes.center_m[:, :2], CAR_XY)
    assert np.all(boxes.velocity_mps == 0)
    observed = boxes.score[2:7]
    assert np.all(boxes.score[[0, 1, 7, 8, 9]] == pytest.approx(0.5 * observed[0]))
    off, off_summary = _refine(_parked_car(range(5, 10)), returns, extend_tracks=False)
    assert [f for f, b in enumerate(off) if len(b)] == list(range(5, 10))
    assert off_summary.boxes_extended == 0


def test_extension_stops_where_another_tracks_box_stands():
    # Track 1, a car parked 5 m ahead of the first (too far to be a fragment of it, and none of
    # its returns in the first car's grown box), is seen at keyframes 11..13: with a 6 m
    # clearance the first car is carried to 10 only; with 3 m to 12, as without track 1.
    n = len(TIMES)
    returns = [2, 2, 0] + [12] * 10 + [2] * (n - 13)
    ahead = CAR_XY + [5.0, 0.0]
    for clear, last in ((6.0, 10), (3.0, 12)):
        other = _parked_car(range(11, 14), tid=1, xy=ahead)
        pairs = zip(_parked_car(range(5, 10)), other, strict=True)
        tracks = [Boxes3D.concatenate([a, b]) for a, b in pairs]
        refined, _ = _refine(tracks, returns, (ahead, range(11, 14)), extend_clear_m=clear)
        assert [f for f, b in enumerate(refined) if np.any(b.track_id == 1)] == [11, 12, 13]
        frames = [f for f, b in enumerate(refined) if np.any(b.track_id == 0)]
        assert frames == list(range(3, last + 1))


def _moving_car(frames) -> list[Boxes3D]:
    """A car driving at 4 m/s along +x (x = 4 t, y = 4), detected at ``frames``."""
    return _car_track(frames, 0, lambda t: (4.0 * t, 4.0))


def _moving_keyframes() -> list[KeyframeReturns]:
    """12 returns in the moving car's box at every keyframe, where it is at that time."""
    out = []
    for t in TIMES:
        pts = _car_points(12, np.array([4.0 * t, 4.0]))
        out.append(KeyframeReturns(pts, pts[:, 2].copy(), FLAT, SE3.identity()))
    return out


def test_a_moving_track_is_carried_at_its_velocity_for_at_most_extend_moving_s():
    # Detected at keyframes 5..9 (every 0.5 s), its returns on its path at every keyframe: with
    # 1 s it is carried to 3, 4 and 10, 11, at x = 4 t (constant velocity, 4 m/s); with 0 s
    # (only static tracks) it stays on its span.
    tracks = _moving_car(range(5, 10))
    evidence = keyframes_evidence(_moving_keyframes(), tracks, 0.3)
    for reach, frames in ((1.0, list(range(3, 12))), (0.0, list(range(5, 10)))):
        cfg = RefineConfig(evidence_score=False, extend_moving_s=reach)
        refined, summary = refine_tracks(TIMES, tracks, cfg, evidence)
        got = [f for f, b in enumerate(refined) if len(b)]
        assert got == frames
        boxes = Boxes3D.concatenate(refined)
        assert boxes.center_m[:, 0] == pytest.approx(4.0 * TIMES[frames], abs=1e-3)
        assert summary.boxes_extended == len(frames) - 5


def test_a_moving_track_stops_where_its_path_holds_no_returns():
    # The same car, whose returns end at keyframe 10 (it turned off the straight path): carried
    # to 10 only, not along the straight line beyond.
    tracks = _moving_car(range(5, 10))
    keyframes = _moving_keyframes()
    for f in range(11, len(TIMES)):
        keyframes[f] = KeyframeReturns(np.zeros((0, 3)), np.zeros(0), FLAT, SE3.identity())
    evidence = keyframes_evidence(keyframes, tracks, 0.3)
    cfg = RefineConfig(evidence_score=False, extend_moving_s=2.0)
    refined, _ = refine_tracks(TIMES, tracks, cfg, evidence)
    assert [f for f, b in enumerate(refined) if len(b)][-1] == 10


def test_extension_settings_are_validated():
    with pytest.raises(ValueError, match="extend_min_returns"):
        RefineConfig(extend_min_returns=0)
    with pytest.raises(ValueError, match="extend_clear_m"):
        RefineConfig(extend_clear_m=-1.0)
    with pytest.raises(ValueError, match="extend_score_factor"):
        RefineConfig(extend_score_factor=1.5)
    with pytest.raises(ValueError, match="extend_moving_s"):
        RefineConfig(extend_moving_s=-0.5)
