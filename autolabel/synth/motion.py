"""Smooth motion along paths: polylines parametrised by arc length and speed profiles over time.

A mover's state at time t is ``path.at(profile.distance_at(t))``; its velocity is the profile's
speed along the path's tangent, so positions, headings and velocities agree with each other (the
devkit's finite-difference velocities of the annotations match the true ones on straight paths).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Time step of the speed-profile integration, seconds.
PROFILE_DT_S = 0.01


@dataclass(frozen=True)
class PolylinePath:
    """A planar path sampled densely; positions and headings interpolate linearly in arc length.

    Attributes:
        xy: (M, 2) vertices, metres (any frame).
        s_m: (M,) cumulative arc length at the vertices, from 0.
        heading_rad: (M,) unwrapped tangent heading at the vertices.
    """

    xy: np.ndarray
    s_m: np.ndarray
    heading_rad: np.ndarray

    @classmethod
    def from_points(cls, points: np.ndarray) -> PolylinePath:
        """From (M, 2) vertices (M >= 2, consecutive duplicates removed)."""
        pts = np.asarray(points, dtype=np.float64)
        step = np.linalg.norm(np.diff(pts, axis=0), axis=1)
        keep = np.concatenate([[True], step > 1e-9])
        pts = pts[keep]
        if len(pts) < 2:
            raise ValueError("a path needs two distinct points")
        seg = np.diff(pts, axis=0)
        seg_heading = np.unwrap(np.arctan2(seg[:, 1], seg[:, 0]))
        # Vertex heading: mean of the adjacent segments (ends take their segment's).
        heading = np.concatenate(
            [seg_heading[:1], 0.5 * (seg_heading[:-1] + seg_heading[1:]), seg_heading[-1:]]
        )
        s = np.concatenate([[0.0], np.cumsum(np.linalg.norm(seg, axis=1))])
        return cls(pts, s, heading)

    @property
    def length_m(self) -> float:
        return float(self.s_m[-1])

    def at(self, s_m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions (N, 2) and headings (N,) at arc lengths ``s_m`` (N,); beyond the ends the path
        continues straight along its end tangents."""
        s = np.asarray(s_m, dtype=np.float64)
        x = np.interp(s, self.s_m, self.xy[:, 0])
        y = np.interp(s, self.s_m, self.xy[:, 1])
        heading = np.interp(s, self.s_m, self.heading_rad)
        for end, mask in ((0, s < 0.0), (-1, s > self.s_m[-1])):
            if mask.any():
                over = s[mask] - self.s_m[end]
                h = self.heading_rad[end]
                x[mask] = self.xy[end, 0] + over * np.cos(h)
                y[mask] = self.xy[end, 1] + over * np.sin(h)
        return np.stack([x, y], axis=-1), heading

    def transformed(self, rotation_2x2: np.ndarray, offset_xy: np.ndarray) -> PolylinePath:
        """The same path in another frame: ``xy' = R xy + offset`` (lengths unchanged)."""
        rot = np.asarray(rotation_2x2, dtype=np.float64)
        angle = float(np.arctan2(rot[1, 0], rot[0, 0]))
        return PolylinePath(self.xy @ rot.T + offset_xy, self.s_m, self.heading_rad + angle)


def straight_points(p0: np.ndarray, p1: np.ndarray, spacing_m: float = 1.0) -> np.ndarray:
    """(M, 2) points from p0 to p1 inclusive, at most ``spacing_m`` apart."""
    p0, p1 = np.asarray(p0, dtype=np.float64), np.asarray(p1, dtype=np.float64)
    n = max(2, int(np.ceil(np.linalg.norm(p1 - p0) / spacing_m)) + 1)
    t = np.linspace(0.0, 1.0, n)[:, None]
    return p0 + t * (p1 - p0)


def turn_points(
    entry: np.ndarray, entry_heading: float, exit_: np.ndarray, exit_heading: float, n: int = 60
) -> np.ndarray:
    """(n, 2) points of a cubic Bezier from ``entry`` to ``exit_`` leaving and arriving along the
    given headings (a smooth turn through a junction)."""
    p0, p3 = np.asarray(entry, dtype=np.float64), np.asarray(exit_, dtype=np.float64)
    reach = 0.55 * np.linalg.norm(p3 - p0)
    p1 = p0 + reach * np.array([np.cos(entry_heading), np.sin(entry_heading)])
    p2 = p3 - reach * np.array([np.cos(exit_heading), np.sin(exit_heading)])
    t = np.linspace(0.0, 1.0, n)[:, None]
    return (1 - t) ** 3 * p0 + 3 * (1 - t) ** 2 * t * p1 + 3 * (1 - t) * t**2 * p2 + t**3 * p3


@dataclass(frozen=True)
class SpeedProfile:
    """Distance travelled along a path over time, on a fine grid.

    Attributes:
        t0_s: time of the first grid sample, seconds (clip time).
        speed_mps: (K,) rate of change of ``distance_m`` at ``t0_s + k PROFILE_DT_S``, m/s;
            negative while moving backwards along the path.
        distance_m: (K,) position along the path (distance travelled plus the start offset).
    """

    t0_s: float
    speed_mps: np.ndarray
    distance_m: np.ndarray

    @classmethod
    def constant(cls, speed_mps: float, t0_s: float, t1_s: float, start_m: float = 0.0):
        n = int(np.ceil((t1_s - t0_s) / PROFILE_DT_S)) + 1
        speed = np.full(n, float(speed_mps))
        return cls(float(t0_s), speed, start_m + speed * PROFILE_DT_S * np.arange(n))

    @classmethod
    def from_segments(
        cls,
        t0_s: float,
        t1_s: float,
        speed0_mps: float,
        segments: list[tuple[float, float]],
        smooth_s: float = 0.8,
    ) -> SpeedProfile:
        """Integrate piecewise-constant accelerations, smoothed against jerk.

        Args:
            t0_s, t1_s: time span of the grid (clip time), seconds.
            speed0_mps: speed at ``t0_s``.
            segments: (duration_s, acceleration_mps2) in order from ``t0_s``; after the last one
                the acceleration is 0.
            smooth_s: width of the moving average applied to the acceleration (keeps the speed
                change of every segment, spreads it over this much more time).
        """
        n = int(np.ceil((t1_s - t0_s) / PROFILE_DT_S)) + 1
        accel = np.zeros(n)
        k = 0
        for duration, a in segments:
            steps = int(round(duration / PROFILE_DT_S))
            accel[k : k + steps] = a
            k += steps
            if k >= n:
                break
        width = max(1, int(round(smooth_s / PROFILE_DT_S)))
        accel = np.convolve(accel, np.ones(width) / width, mode="full")[:n]
        speed = speed0_mps + np.concatenate([[0.0], np.cumsum(accel[:-1]) * PROFILE_DT_S])
        speed = np.where(speed < 1e-6, 0.0, speed)
        step = 0.5 * (speed[1:] + speed[:-1]) * PROFILE_DT_S
        distance = np.concatenate([[0.0], np.cumsum(step)])
        return cls(float(t0_s), speed, distance)

    def shifted(self, offset_m: float) -> SpeedProfile:
        return SpeedProfile(self.t0_s, self.speed_mps, self.distance_m + offset_m)

    def _grid(self) -> np.ndarray:
        return self.t0_s + PROFILE_DT_S * np.arange(len(self.speed_mps))

    def distance_at(self, t_s: np.ndarray) -> np.ndarray:
        """(N,) distance at clip times ``t_s``; outside the grid at the end speeds."""
        t = np.asarray(t_s, dtype=np.float64)
        grid = self._grid()
        d = np.interp(t, grid, self.distance_m)
        before, after = t < grid[0], t > grid[-1]
        d = np.where(before, self.distance_m[0] + (t - grid[0]) * self.speed_mps[0], d)
        return np.where(after, self.distance_m[-1] + (t - grid[-1]) * self.speed_mps[-1], d)

    def speed_at(self, t_s: np.ndarray) -> np.ndarray:
        t = np.asarray(t_s, dtype=np.float64)
        grid = self._grid()
        return np.interp(t, grid, self.speed_mps, left=self.speed_mps[0], right=self.speed_mps[-1])

    def time_reaching(self, distance_m: float) -> float:
        """First grid time at which the distance reaches ``distance_m`` (inf if never)."""
        idx = int(np.searchsorted(self.distance_m, distance_m))
        if idx >= len(self.distance_m):
            return float("inf")
        return float(self.t0_s + idx * PROFILE_DT_S)


@dataclass(frozen=True)
class Mover:
    """Something that moves along a path (or stands still on it), in the global frame.

    Attributes:
        path: global-frame path of the box centre.
        profile: distance along ``path`` over time.
        reverse_heading: the box's x axis points against the direction of travel.
    """

    path: PolylinePath
    profile: SpeedProfile
    reverse_heading: bool = False

    def states(self, t_s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Centre xy (N, 2), yaw (N,) and velocity (N, 2) at clip times ``t_s`` (N,).

        The box faces its direction of travel: along the path, or against it while the profile
        runs backwards (``reverse_heading`` flips both).
        """
        s = self.profile.distance_at(t_s)
        xy, heading = self.path.at(s)
        speed = self.profile.speed_at(t_s)
        vel = speed[:, None] * np.stack([np.cos(heading), np.sin(heading)], axis=-1)
        yaw = heading + np.where(speed < 0, np.pi, 0.0) + (np.pi if self.reverse_heading else 0.0)
        return xy, np.mod(yaw + np.pi, 2 * np.pi) - np.pi, vel

    @classmethod
    def parked(cls, xy: np.ndarray, yaw_rad: float) -> Mover:
        """A still object at ``xy`` heading ``yaw_rad``."""
        xy = np.asarray(xy, dtype=np.float64)
        direction = np.array([np.cos(yaw_rad), np.sin(yaw_rad)])
        path = PolylinePath.from_points(np.stack([xy, xy + direction]))
        return cls(path, SpeedProfile(-1e6, np.zeros(1), np.zeros(1)))
