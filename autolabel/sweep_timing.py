"""When a spinning LiDAR's beams cross each direction, read from a dataset's own files.

The rig settings ``GeometricConfig.sweep_period_s`` and ``sweep_seam_deg`` say that the cameras
fire as the beams pass them and where a revolution starts and ends (the seam). nuScenes-format
tables carry neither, but a rig's files often do:

- the period is the time between consecutive sweeps;
- a sweep file whose returns are stored in firing order (their azimuth turns steadily one way
  through the file, as PandaSet's do) starts and ends at the seam;
- each camera's capture time relative to its keyframe's LiDAR timestamp is constant when the
  beams trigger it, and the cameras then fire in the order the beams reach them, once round.

Where they hold, an object's returns (and a box fitted to them) are from the instant the beams
crossed it, not from the sweep's timestamp (:meth:`SweepTiming.hit_offset_s`): the segmenter moves
boxes from there to each camera's time, and a release narrows a plate's time uncertainty
(``GeometricConfig.sweep_from_files``). ``autolabel sweep-timing`` prints them for a clip.

Azimuths are ego-frame, degrees counter-clockwise from the ego's +x (as ``sweep_seam_deg``); a
return's azimuth is its direction from the LiDAR, turned into the ego frame's orientation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autolabel.clip import Clip
from autolabel.nuscenes_reader import DatasetError, load_lidar_points
from calib.bearing import bearing_deg, wrap_deg
from calib.se3 import SE3

#: A file's returns are cut into this many consecutive blocks; the blocks' azimuths must turn one
#: way (half a degree of rotation per block at 720).
ORDER_BLOCKS = 720
#: ... in at least this share of the steps between blocks (lasers of a head sit a few degrees
#: apart in azimuth, and a block may straddle them) ...
MIN_ORDERED_SHARE = 0.9
#: ... and the whole file must turn by a revolution within this many degrees.
TURN_TOLERANCE_DEG = 30.0
#: Returns nearer than this to the LiDAR are left out (the ego's own body, spray).
MIN_RETURN_RANGE_M = 1.0
#: The seam is widened for objects at least this far from the ego origin (nearer ones stand
#: where the ego's body hides them from most cameras).
SEAM_MIN_RANGE_M = 5.0


@dataclass(frozen=True)
class SweepEnds:
    """Where one sweep file's returns start and end, ego-frame azimuths in degrees.

    ``turn_deg`` is the file's rotation from its first block of returns to its last: about -360
    for a LiDAR turning clockwise seen from above, +360 counter-clockwise.
    """

    start_deg: float
    end_deg: float
    turn_deg: float


@dataclass(frozen=True)
class CameraTrigger:
    """When one camera fires relative to its keyframe's LiDAR timestamp.

    Attributes:
        channel: camera channel.
        axis_deg: ego-frame azimuth of the optical axis, degrees.
        offset_ms: median over keyframes of (image time - LiDAR keyframe time), milliseconds.
        spread_ms: largest minus smallest offset over the keyframes (a triggered camera's is a
            fraction of a millisecond).
    """

    channel: str
    axis_deg: float
    offset_ms: float
    spread_ms: float


@dataclass(frozen=True)
class SweepTiming:
    """A clip's LiDAR sweep timing.

    Attributes:
        sweeps: LiDAR files read (keyframes, and with ``read_sweeps`` the sweeps before them).
        ordered: of them, files whose returns are stored in firing order.
        unreadable: files listed but missing or malformed (left out).
        period_s: median time from a keyframe's sweep back to the sweep before it, seconds
            (NaN when the clip lists no sweep between keyframes).
        turn_deg: median rotation through an ordered file (sign: +1 counter-clockwise).
        ends_deg: (2 * ordered,) the ordered files' start and end azimuths.
        lever_arm_m: the LiDAR's horizontal distance from the ego origin (the seam is a beam
            direction from the LiDAR; ``sweep_seam_deg`` is tested on directions from the
            ego origin).
        triggers: the cameras, in the order they fire.
    """

    sweeps: int
    ordered: int
    unreadable: int
    period_s: float
    turn_deg: float
    ends_deg: np.ndarray
    lever_arm_m: float
    triggers: tuple[CameraTrigger, ...]

    @property
    def seam_arc_deg(self) -> tuple[float, float] | None:
        """(from, to): the shortest arc, counter-clockwise, holding every ordered file's start
        and end azimuth (None when no file is ordered)."""
        return covering_arc_deg(self.ends_deg)

    def seam_deg(self, min_range_m: float = SEAM_MIN_RANGE_M) -> tuple[float, float] | None:
        """``sweep_seam_deg`` for this rig: the seam's arc widened on both sides by the most a
        direction from the ego origin differs from the LiDAR's to an object ``min_range_m`` away
        (asin(lever arm / range)); None when no file is ordered."""
        arc = self.seam_arc_deg
        if arc is None:
            return None
        if min_range_m <= self.lever_arm_m:
            raise ValueError(
                f"min_range_m: {min_range_m} m must exceed the LiDAR's lever arm "
                f"{self.lever_arm_m:.2f} m"
            )
        widen = float(np.degrees(np.arcsin(self.lever_arm_m / min_range_m)))
        return (float(wrap_deg(arc[0] - widen)), float(wrap_deg(arc[1] + widen)))

    @property
    def cameras_fire_in_beam_order(self) -> bool:
        """The cameras fire in the order the beams reach their axes, once round, all within one
        period, each at a steady offset (spread under a tenth of the period): their capture
        times follow the sweep. False without an ordered file, a period or two cameras."""
        if not self.ordered or len(self.triggers) < 2 or not self.period_s > 0:
            return False
        offsets = np.array([t.offset_ms for t in self.triggers])
        steady = all(t.spread_ms < 100.0 * self.period_s for t in self.triggers)
        within = offsets[-1] - offsets[0] < 1000.0 * self.period_s
        axes = np.array([t.axis_deg for t in self.triggers])
        # Turn from each camera's axis to the next one's to fire, along the rotation: once round
        # in all when the beams' order is the firing order.
        steps = np.mod(np.sign(self.turn_deg) * np.diff(np.append(axes, axes[0])), 360.0)
        return bool(steady and within and np.isclose(steps.sum(), 360.0))

    def turn_from_seam_deg(self, azimuth_deg: np.ndarray) -> np.ndarray:
        """Degrees the beams turn from the seam (the middle of its arc) to each ego-frame
        azimuth, in [0, 360). Needs an ordered file."""
        lo, hi = self.seam_arc_deg
        middle = lo + np.mod(hi - lo, 360.0) / 2.0
        return np.mod(np.sign(self.turn_deg) * (np.asarray(azimuth_deg) - middle), 360.0)

    @property
    def start_offset_s(self) -> float:
        """Seconds from the keyframe's LiDAR timestamp to the start of its revolution, fitted to
        the cameras: each fires as the beams cross its axis, at this plus its axis's turn from
        the seam over the period. The median over cameras (a camera whose axis sits at the seam,
        as PandaSet-002's CAM_BACK, fires a revolution away from its turn; PandaSet's triggers
        sit up to 25 degrees, 7 ms, off their axes). Needs ``cameras_fire_in_beam_order``."""
        axes = np.array([t.axis_deg for t in self.triggers])
        offsets_s = np.array([t.offset_ms for t in self.triggers]) / 1e3
        return float(np.median(offsets_s - self.turn_from_seam_deg(axes) * self.period_s / 360))

    def hit_offset_s(self, azimuth_deg: np.ndarray) -> np.ndarray:
        """Seconds from the keyframe's LiDAR timestamp to when its beams crossed each ego-frame
        azimuth (its revolution starts at the seam). Needs ``cameras_fire_in_beam_order``."""
        turn = self.turn_from_seam_deg(azimuth_deg)
        return self.start_offset_s + turn * self.period_s / 360.0

    @property
    def release_settings(self) -> tuple[float, tuple[float, float]] | None:
        """(``sweep_period_s``, ``sweep_seam_deg``) where the files and cameras support them
        (the period rounded to the millisecond, the seam widened for ``SEAM_MIN_RANGE_M``)."""
        seam = self.seam_deg()
        if seam is None or not self.cameras_fire_in_beam_order:
            return None
        return round(self.period_s, 3), seam


def covering_arc_deg(angles_deg: np.ndarray) -> tuple[float, float] | None:
    """(from, to): the shortest counter-clockwise arc holding every angle, both in (-180, 180];
    None for no angle. The arc is the circle less its widest gap between neighbouring angles."""
    a = np.sort(np.mod(np.asarray(angles_deg, dtype=np.float64), 360.0))
    if len(a) == 0:
        return None
    gaps = np.diff(np.append(a, a[0] + 360.0))
    widest = int(np.argmax(gaps))
    return (float(wrap_deg(a[(widest + 1) % len(a)])), float(wrap_deg(a[widest])))


def sweep_ends(points_lidar: np.ndarray, ego_SE3_lidar: SE3) -> SweepEnds | None:
    """Where a sweep file's returns start and end, when they are stored in firing order.

    Args:
        points_lidar: (P, >=2) returns in the file's order, x and y in the LiDAR frame (metres).
        ego_SE3_lidar: the LiDAR's pose in the ego frame (only its rotation is used).

    Returns:
        The first and last blocks' azimuths (ego frame, degrees) and the turn between them, or
        None when the returns are not in firing order (too few returns, azimuths that do not
        turn one way through the file, or a turn that is not one revolution).
    """
    xy = np.asarray(points_lidar, dtype=np.float64)[:, :2]
    xy = xy[np.hypot(xy[:, 0], xy[:, 1]) >= MIN_RETURN_RANGE_M]
    if len(xy) < 4 * ORDER_BLOCKS:
        return None
    direction = ego_SE3_lidar.rotation[:2, :2] @ xy.T
    unit = direction / np.hypot(direction[0], direction[1])
    # Circular mean per block: a block's returns come from lasers a few degrees apart.
    edges = np.linspace(0, len(xy), ORDER_BLOCKS + 1).astype(np.int64)
    sums = np.add.reduceat(unit, edges[:-1], axis=1)
    block_deg = bearing_deg(sums.T)
    steps = wrap_deg(np.diff(block_deg))
    turn = float(steps.sum())
    if abs(abs(turn) - 360.0) > TURN_TOLERANCE_DEG:
        return None
    if np.mean(np.sign(steps) == np.sign(turn)) < MIN_ORDERED_SHARE:
        return None
    return SweepEnds(start_deg=float(block_deg[0]), end_deg=float(block_deg[-1]), turn_deg=turn)


def camera_triggers(clip: Clip) -> tuple[CameraTrigger, ...]:
    """Each camera's offset from its keyframe's LiDAR timestamp over the clip, in firing order."""
    offsets: dict[str, list[float]] = {}
    axes: dict[str, float] = {}
    for frame in clip.frames:
        for channel, image in frame.cameras.items():
            offsets.setdefault(channel, []).append(
                (image.timestamp_us - frame.lidar.timestamp_us) / 1e3
            )
            axes.setdefault(channel, image.calibration.axis_bearing_deg)
    triggers = [
        CameraTrigger(
            channel=ch,
            axis_deg=axes[ch],
            offset_ms=float(np.median(o)),
            spread_ms=float(np.max(o) - np.min(o)),
        )
        for ch, o in offsets.items()
    ]
    return tuple(sorted(triggers, key=lambda t: (t.offset_ms, t.channel)))


def measure_sweep_timing(
    clip: Clip, read_sweeps: bool = True, max_files: int | None = None
) -> SweepTiming:
    """The clip's sweep period, seam and camera triggers from its LiDAR files and timestamps.

    Args:
        clip: a clip read with ``max_sweeps`` >= 2 (the period is the step from each keyframe's
            sweep back to the one before it).
        read_sweeps: read the sweeps between keyframes too (else the keyframes' files only;
            their timestamps still give the period).
        max_files: read at most this many files, the earliest first (None: all).

    A missing or malformed file is counted in ``unreadable`` and left out.

    Raises:
        ValueError: the clip has no keyframe.
    """
    if not clip.frames:
        raise ValueError(f"clip {clip.name!r} has no keyframe")
    fallback = clip.frames[0].lidar_calibration.ego_SE3_lidar
    files = {}
    for frame in clip.frames:
        for sweep in (frame.lidar, *frame.sweeps) if read_sweeps else (frame.lidar,):
            files[sweep.timestamp_us, str(sweep.path)] = sweep
    ends, unreadable = [], 0
    for _, sweep in sorted(files.items())[:max_files]:
        pose = sweep.ego_SE3_lidar if sweep.ego_SE3_lidar is not None else fallback
        try:
            found = sweep_ends(load_lidar_points(sweep), pose)
        except (FileNotFoundError, DatasetError):
            unreadable += 1
            continue
        if found is not None:
            ends.append(found)
    steps = [
        (f.lidar.timestamp_us - f.sweeps[0].timestamp_us) / 1e6 for f in clip.frames if f.sweeps
    ]
    return SweepTiming(
        sweeps=min(len(files), len(files) if max_files is None else max_files),
        ordered=len(ends),
        unreadable=unreadable,
        period_s=float(np.median(steps)) if steps else float("nan"),
        turn_deg=float(np.median([e.turn_deg for e in ends])) if ends else float("nan"),
        ends_deg=np.array([a for e in ends for a in (e.start_deg, e.end_deg)]),
        lever_arm_m=float(np.hypot(*fallback.translation[:2])),
        triggers=camera_triggers(clip),
    )


def triggered_sweep_timing(clip: Clip) -> SweepTiming | None:
    """The clip's sweep timing from its keyframe files where its cameras fire in the beams' order
    (:attr:`SweepTiming.cameras_fire_in_beam_order`), else None. Reads one file first and the
    others only when it agrees with the cameras."""
    if not measure_sweep_timing(clip, read_sweeps=False, max_files=1).cameras_fire_in_beam_order:
        return None
    timing = measure_sweep_timing(clip, read_sweeps=False)
    return timing if timing.cameras_fire_in_beam_order else None


def format_sweep_timing(timing: SweepTiming, min_range_m: float = SEAM_MIN_RANGE_M) -> list[str]:
    """Lines describing ``timing``, ending with the release settings they support (or why none)."""
    rotation = "clockwise" if timing.turn_deg < 0 else "counter-clockwise"
    lines = [
        f"sweeps: {timing.sweeps} read, {timing.ordered} with their returns in firing order"
        + (f" (turning {rotation} seen from above)" if timing.ordered else "")
        + (f", {timing.unreadable} missing or malformed" if timing.unreadable else ""),
        f"period: {timing.period_s:.4f} s (median step from a keyframe's sweep to the one before)",
    ]
    arc = timing.seam_arc_deg
    if arc is not None:
        lines.append(
            f"seam: every ordered sweep starts and ends between {arc[0]:.1f} and {arc[1]:.1f} deg "
            "(ego frame, counter-clockwise from +x)"
        )
    lines.append("cameras (image time - LiDAR keyframe time, median; spread over keyframes):")
    lines += [
        f"  {t.channel:<20} axis {t.axis_deg:7.1f} deg  {t.offset_ms:8.2f} ms  spread {t.spread_ms:.2f} ms"
        for t in timing.triggers
    ]
    seam = timing.seam_deg(min_range_m)
    if seam is None:
        lines.append(
            "no sweep file holds its returns in firing order: the seam is unknown; a release "
            "keeps anonymize.geometric.time_sigma_s (leave sweep_period_s at 0)"
        )
    elif not timing.cameras_fire_in_beam_order:
        lines.append(
            "the cameras do not fire steadily in the beams' order within one period; a release "
            "keeps anonymize.geometric.time_sigma_s (leave sweep_period_s at 0)"
        )
    else:
        lo, hi = np.floor(seam[0] * 10) / 10, np.ceil(seam[1] * 10) / 10
        lines += [
            "release settings (a release reads them per clip itself, geometric.sweep_from_files; "
            f"the seam widened for objects from {min_range_m:g} m by the LiDAR's "
            f"{timing.lever_arm_m:.2f} m lever arm):",
            "anonymize:",
            "  geometric:",
            f"    sweep_period_s: {round(timing.period_s, 3):g}",
            f"    sweep_seam_deg: [{lo:.1f}, {hi:.1f}]",
        ]
    return lines
