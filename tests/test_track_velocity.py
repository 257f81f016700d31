"""Track velocities: least-squares slopes over a window that never leaves the observed span."""

from __future__ import annotations

import numpy as np
import pytest

from trackers.velocity import track_velocities_mps


def _polyfit_reference(tid, t, xy, half_window):
    """Per observation, np.polyfit slope over the window of its track (independent reference)."""
    out = np.full((len(tid), 2), np.nan)
    for track in np.unique(tid):
        idx = np.flatnonzero(tid == track)
        idx = idx[np.argsort(t[idx])]
        for k, i in enumerate(idx):
            window = idx[max(0, k - half_window) : k + half_window + 1]
            if len(window) > 1:
                out[i, 0] = np.polyfit(t[window], xy[window, 0], 1)[0]
                out[i, 1] = np.polyfit(t[window], xy[window, 1], 1)[0]
    return out


@pytest.mark.parametrize("half_window", [1, 2, 3])
def test_matches_polyfit_on_shuffled_tracks_with_gaps(half_window):
    rng = np.random.default_rng(half_window)
    tid, t, xy = [], [], []
    for track in range(12):
        frames = np.sort(rng.choice(40, size=rng.integers(1, 15), replace=False))
        times = frames * 0.5
        tid.append(np.full(len(frames), track * 7))
        t.append(times)
        # Curved, noisy, in global coordinates far from the origin.
        xy.append(
            np.stack([1200 + 3 * times + 0.2 * times**2, -800 + np.sin(times)], axis=1)
            + rng.normal(0, 0.1, (len(frames), 2))
        )
    tid, t, xy = map(np.concatenate, (tid, t, xy))
    perm = rng.permutation(len(tid))
    tid, t, xy = tid[perm], t[perm], xy[perm]
    got = track_velocities_mps(tid, t, xy, half_window)
    np.testing.assert_allclose(got, _polyfit_reference(tid, t, xy, half_window), atol=1e-6)


def test_constant_velocity_is_exact_at_ends_and_across_gaps():
    t = np.array([0.0, 0.5, 1.0, 2.5, 3.0])  # frames 2..4 missed
    xy = np.stack([5.0 + 3.0 * t, 7.0 - 2.0 * t], axis=1)
    np.testing.assert_allclose(
        track_velocities_mps(np.zeros(5), t, xy), np.tile([3.0, -2.0], (5, 1))
    )


def test_parabola_central_difference_and_one_sided_ends():
    # x = t^2: with half_window 1 an interior sample gets (x[k+1] - x[k-1]) / (2 dt) = 2 t exactly,
    # the ends get the one-sided difference (no extrapolation beyond the span).
    t = np.arange(5) * 0.5
    xy = np.stack([t**2, np.zeros(5)], axis=1)
    v = track_velocities_mps(np.zeros(5), t, xy, half_window=1)[:, 0]
    np.testing.assert_allclose(v[1:-1], 2 * t[1:-1])
    np.testing.assert_allclose(v[[0, -1]], [(0.25 - 0) / 0.5, (4 - 2.25) / 0.5])


@pytest.mark.parametrize(("still_m", "expected"), [(0.1, 0.2), (0.3, 0.0)])
def test_still_displacement_zeroes_slow_windows(still_m, expected):
    # A track creeping at 0.2 m/s: x = 0, 0.1, ..., 0.4 m at t = 0, 0.5, ..., 2 s. With
    # half_window 2, the first observation's window is t = 0 ... 1 s: slope 0.2 m/s, fitted
    # displacement 0.2 * 1 = 0.2 m; the middle one's is t = 0 ... 2 s: 0.2 * 2 = 0.4 m.
    # Below ``still_m`` the observation is at rest.
    t = np.arange(5) * 0.5
    xy = np.stack([0.2 * t, np.zeros(5)], axis=1)
    velocity = track_velocities_mps(np.zeros(5, int), t, xy, 2, np.full(5, still_m))
    np.testing.assert_allclose(velocity[0], [expected, 0.0], atol=1e-12)
    np.testing.assert_allclose(velocity[2], [0.2, 0.0], atol=1e-12)
    # The middle window's 0.4 m is at rest only below 0.4 m.
    velocity = track_velocities_mps(np.zeros(5, int), t, xy, 2, np.full(5, 0.45))
    np.testing.assert_allclose(velocity[2], [0.0, 0.0], atol=1e-12)


def test_single_observation_has_no_velocity_and_empty_input():
    v = track_velocities_mps(np.array([1, 2, 2]), np.array([0.0, 0.0, 0.5]), np.zeros((3, 2)))
    assert np.isnan(v[0]).all() and np.array_equal(v[1:], np.zeros((2, 2)))
    assert track_velocities_mps(np.zeros(0), np.zeros(0), np.zeros((0, 2))).shape == (0, 2)


def test_bad_inputs():
    with pytest.raises(ValueError, match="same time"):
        track_velocities_mps(np.zeros(2), np.zeros(2), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="center_xy_m"):
        track_velocities_mps(np.zeros(2), np.zeros(2), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="half_window"):
        track_velocities_mps(np.zeros(2), np.arange(2.0), np.zeros((2, 2)), half_window=0)
