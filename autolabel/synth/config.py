"""Settings of the synthetic drive-log generator (``autolabel synth``), validated on construction."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nuscenes.utils.splits import create_splits_scenes

from autolabel.config import load_dataclass_config

#: Split names the devkit resolves itself (hard-coded nuScenes scene lists); a custom split in
#: ``splits.json`` is only read for names outside this set (nuscenes-devkit 1.2.0
#: ``DetectionEval`` / ``TrackingEval`` route predefined names to ``load_gt`` and its version checks).
DEVKIT_PREDEFINED_SPLITS: frozenset[str] = frozenset(create_splits_scenes())


@dataclass(frozen=True)
class SynthConfig:
    """What ``generate_dataset`` writes. Every field has a default; invalid values raise
    ``ValueError`` naming the field.

    Attributes:
        scenes: number of scenes (clips) to write.
        seed: seed of every random choice; the same config gives byte-identical files.
        seconds: clip length, seconds; keyframes at ``keyframe_hz`` from 0 to below ``seconds``.
        keyframe_hz: keyframe (nuScenes sample) rate, Hz.
        lidar_hz: LiDAR sweep rate, Hz; must be a whole multiple of ``keyframe_hz``. Sweeps between
            keyframes are written to ``sweeps/LIDAR_TOP`` as non-key sample_data.
        lidar_preroll_s: seconds of LiDAR sweeps before the first keyframe (multi-sweep detectors
            read sweeps before a keyframe; real logs have them too).
        camera_sweep_hz: rate of extra (non-key) camera images between keyframes, Hz; 0 = none.
        camera_time_offsets: cameras fire when the spinning LiDAR passes their optical axis (as in
            nuScenes) instead of at the LiDAR timestamp; their ego poses are at their own times.
        lidar_spin_hz: spin rate used to compute those camera offsets, Hz.
        lidar_hit_time: sweep each object at the instant the spinning LiDAR's beams cross its
            centre (its sweep's timestamp plus the clockwise turn from the LiDAR's x axis over
            ``lidar_spin_hz``, the same turn that triggers the cameras), and annotate it there,
            as a real spinning LiDAR's returns and the boxes fitted to them are (PandaSet,
            nuScenes); the ego pose stays the sweep's (a motion-compensated sweep). False
            (default): every object at the sweep's timestamp, as the first synthetic sets were.
        width_px, height_px: camera image size; None keeps the rig's (1600 x 900 for nuScenes).
        rig: rig name or YAML path for ``calib.rig.load_rig``.
        version: nuScenes version folder name, e.g. ``v1.0-mini``.
        scenes_per_log: scenes cut from one log (one world); 0 = 2 when ``scenes >= 4`` else 1.
        val_fraction: share of logs in the validation split (at least one log when there are two or
            more logs; the only log is ``val`` when there is one).
        split_names: (train, val) keys written to ``<version>/splits.json``. They must not be devkit
            predefined names (``train``, ``val``, ``mini_val``, ...): the devkit would ignore the
            file and use the real nuScenes scene lists instead.
        all_classes: put every one of the ten detection classes near the ego route in every scene.
        extra_agents: how many more agents (beyond the per-class minimum) per scene, roughly.
        min_lidar_points: annotations are written only for objects with at least this many points
            of the keyframe's sweep inside their box (the devkit drops boxes with none).
        lidar_range_noise_m: standard deviation of the LiDAR range noise, metres.
        lidar_dropout: probability that a LiDAR return is lost.
        jpeg_quality: quality of the camera JPEGs (OpenCV, 0-100).
        progress: show a tqdm progress bar.
    """

    scenes: int = 2
    seed: int = 0
    seconds: float = 20.0
    keyframe_hz: float = 2.0
    lidar_hz: float = 10.0
    lidar_preroll_s: float = 0.5
    camera_sweep_hz: float = 0.0
    camera_time_offsets: bool = True
    lidar_spin_hz: float = 20.0
    lidar_hit_time: bool = False
    width_px: int | None = None
    height_px: int | None = None
    rig: str = "nuscenes"
    version: str = "v1.0-mini"
    scenes_per_log: int = 0
    val_fraction: float = 0.25
    split_names: tuple[str, str] = ("synth_train", "synth_val")
    all_classes: bool = True
    extra_agents: int = 14
    min_lidar_points: int = 1
    lidar_range_noise_m: float = 0.02
    lidar_dropout: float = 0.02
    jpeg_quality: int = 90
    progress: bool = True

    def __post_init__(self) -> None:
        def fail(key: str, why: str) -> None:
            raise ValueError(f"SynthConfig.{key}: {why} (got {getattr(self, key)!r})")

        if not isinstance(self.scenes, int) or self.scenes < 1:
            fail("scenes", "must be an integer >= 1")
        if not isinstance(self.seed, int) or self.seed < 0:
            fail("seed", "must be an integer >= 0")
        if not self.keyframe_hz > 0:
            fail("keyframe_hz", "must be > 0")
        if not self.seconds * self.keyframe_hz >= 1:
            fail("seconds", f"must hold at least one keyframe at {self.keyframe_hz} Hz")
        if self.seconds > 60:
            fail("seconds", "must be <= 60 (the world is sized for short clips)")
        ratio = self.lidar_hz / self.keyframe_hz
        if not self.lidar_hz > 0 or abs(ratio - round(ratio)) > 1e-9 or round(ratio) < 1:
            fail("lidar_hz", f"must be a positive whole multiple of keyframe_hz={self.keyframe_hz}")
        if not 0 <= self.lidar_preroll_s <= 5:
            fail("lidar_preroll_s", "must be in [0, 5] seconds")
        if self.camera_sweep_hz < 0 or (
            self.camera_sweep_hz and self.camera_sweep_hz <= self.keyframe_hz
        ):
            fail("camera_sweep_hz", "must be 0 (off) or above keyframe_hz")
        if not self.lidar_spin_hz > 0:
            fail("lidar_spin_hz", "must be > 0")
        if (self.width_px is None) != (self.height_px is None):
            fail("width_px", "give width_px and height_px together, or neither")
        for key in ("width_px", "height_px"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, int) or not 8 <= value <= 8192):
                fail(key, "must be an integer in [8, 8192]")
        if not self.version or "/" in self.version or self.version.startswith("."):
            fail("version", "must be a plain folder name such as 'v1.0-mini'")
        if not isinstance(self.scenes_per_log, int) or self.scenes_per_log < 0:
            fail("scenes_per_log", "must be an integer >= 0 (0 = automatic)")
        if not 0 <= self.val_fraction <= 1:
            fail("val_fraction", "must be in [0, 1]")
        if len(self.split_names) != 2 or self.split_names[0] == self.split_names[1]:
            fail("split_names", "must be two different names (train, val)")
        for name in self.split_names:
            if name in DEVKIT_PREDEFINED_SPLITS:
                fail(
                    "split_names",
                    f"{name!r} is a devkit predefined split; the devkit would not read splits.json",
                )
        if not isinstance(self.extra_agents, int) or not 0 <= self.extra_agents <= 200:
            fail("extra_agents", "must be an integer in [0, 200]")
        if not isinstance(self.min_lidar_points, int) or self.min_lidar_points < 1:
            fail("min_lidar_points", "must be an integer >= 1 (the devkit drops empty boxes)")
        if not 0 <= self.lidar_range_noise_m <= 1:
            fail("lidar_range_noise_m", "must be in [0, 1] metres")
        if not 0 <= self.lidar_dropout < 1:
            fail("lidar_dropout", "must be in [0, 1)")
        if not isinstance(self.jpeg_quality, int) or not 1 <= self.jpeg_quality <= 100:
            fail("jpeg_quality", "must be an integer in [1, 100]")

    @property
    def sweeps_per_keyframe(self) -> int:
        """LiDAR sweeps per keyframe interval (the keyframe's own included)."""
        return int(round(self.lidar_hz / self.keyframe_hz))

    @property
    def num_keyframes(self) -> int:
        return int(round(self.seconds * self.keyframe_hz + 1e-9))

    @property
    def logs_scenes(self) -> int:
        """Scenes per log actually used."""
        if self.scenes_per_log:
            return self.scenes_per_log
        return 2 if self.scenes >= 4 else 1


def load_synth_config(path: str | Path | None = None, **overrides: Any) -> SynthConfig:
    """A ``SynthConfig`` from a YAML file of its fields (or the defaults when ``path`` is None),
    with keyword overrides applied (None values are ignored).

    Raises:
        ConfigError: a missing or malformed file, an unknown key, a value of the wrong type or an
            invalid value; the message names the file and the key.
    """
    return load_dataclass_config(SynthConfig, path, **overrides)
