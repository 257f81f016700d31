"""QA sampling as STRIDE-QA: keyframes, their context and future frames, balanced selection.

Keyframes: one per second from 2 s to 17 s of a clip (STRIDE-QA samples QA keyframes at 1 Hz in
that span, so each has a window [t - 2 s, t + 3 s] inside the 20 s clip). Context frames: t - 1.5,
t - 1.0, t - 0.5, t (the four 2 Hz frames STRIDE-QA's models see). Future frames: t + 0.5 ...
t + 3 s. Each is the clip frame nearest the target time, within a tolerance.

Selection: per keyframe and question type at most ``per_keyframe_cap`` questions; per clip at
most ``per_clip_type_cap`` per type and ``per_clip_type_class_cap`` per (type, class). A
spatiotemporal group counts as one question per horizon for each of its types (at least one group
per keyframe). Among the valid candidates a keyframe offers, the
next pick is from the class with the fewest picks of this type so far, then the outcome (left /
right, yes / no, ...) with the fewest, so that no class and no answer dominates. Every random choice
comes from a generator seeded by (seed, clip, keyframe, type): the same inputs, config and seed give
the same records, byte for byte, whatever order clips are processed in.
"""

from __future__ import annotations

import zlib
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from autolabel.qa.confidence import ConfidenceModel
from calib import stable_math

#: ``QAConfig.min_confidence`` by default: chosen on synthetic validation seeds (never on the
#: real clips that are the test); see ``bench/bench_label_quality.py``.
DEFAULT_MIN_CONFIDENCE = 0.6


@dataclass
class QAConfig:
    """Settings of QA generation (validated; errors name the key).

    Attributes:
        seed: seed of every random choice (phrasing, sampling, distractors, option order).
        keyframe_start_s, keyframe_end_s, keyframe_step_s: QA keyframe times, seconds from the
            clip's first frame (inclusive range).
        context_offsets_s: context frames relative to the keyframe (the last must be 0).
        future_offsets_s: future frames relative to the keyframe (grounding of future states).
        frame_tolerance_s: a target time takes the nearest frame within this many seconds.
        per_keyframe_cap: questions per type per keyframe (a spatiotemporal group counts one per
            horizon; at least one group per keyframe).
        per_clip_type_cap: questions per type per clip.
        per_clip_type_class_cap: questions per (type, class of region A) per clip (questions
            about the ego alone have no class and no class cap).
        types: question type ids to generate; empty means all loaded templates.
        grounding_frames: ``context`` or ``context+future``: the frames whose boxes and masks a
            record carries for each region.
        dedup_keyframes: skip QA keyframes whose ego pose moved less than
            ``dedup_min_translation_m`` and turned less than ``dedup_min_rotation_deg`` from the
            last kept one (SPAR's pose-based subsampling), so a car waiting at a light does not
            repeat the same questions every second. Needs the ego poses (``ClipQAMeta.ego_pose``);
            without them nothing is skipped. Labels (boxes, tracks, attributes) are never
            de-duplicated: this setting is QA's only.
        dedup_min_translation_m, dedup_min_rotation_deg: the thresholds, metres and degrees.
        min_confidence: only questions whose confidence (``autolabel.qa.confidence``: the
            weakest of its subjects' evidence and its answer's margin) is at least this are
            emitted; 0 emits every answerable question (each still carries its confidence).
        confidence: how evidence becomes confidence (``ConfidenceModel``).
    """

    seed: int = 0
    keyframe_start_s: float = 2.0
    keyframe_end_s: float = 17.0
    keyframe_step_s: float = 1.0
    context_offsets_s: tuple[float, ...] = (-1.5, -1.0, -0.5, 0.0)
    future_offsets_s: tuple[float, ...] = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0)
    frame_tolerance_s: float = 0.1
    per_keyframe_cap: int = 2
    per_clip_type_cap: int = 24
    per_clip_type_class_cap: int = 8
    types: tuple[str, ...] = field(default_factory=tuple)
    grounding_frames: str = "context+future"
    dedup_keyframes: bool = True
    dedup_min_translation_m: float = 1.0
    dedup_min_rotation_deg: float = 10.0
    min_confidence: float = DEFAULT_MIN_CONFIDENCE
    confidence: ConfidenceModel = field(default_factory=ConfidenceModel)

    def __post_init__(self) -> None:
        m = self.min_confidence
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not 0.0 <= m <= 1.0:
            raise ValueError(f"min_confidence: must be a number in [0, 1], got {m!r}")
        self.min_confidence = float(m)
        if isinstance(self.confidence, dict):
            try:
                self.confidence = ConfidenceModel(**self.confidence)
            except (TypeError, ValueError) as e:
                raise ValueError(f"confidence: {e}") from None
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ValueError(f"seed: must be an integer >= 0, got {self.seed!r}")
        if not self.keyframe_step_s > 0:
            raise ValueError(f"keyframe_step_s: must be > 0, got {self.keyframe_step_s!r}")
        if not self.keyframe_end_s >= self.keyframe_start_s:
            raise ValueError("keyframe_end_s: must be >= keyframe_start_s")
        self.context_offsets_s = tuple(float(x) for x in self.context_offsets_s)
        self.future_offsets_s = tuple(float(x) for x in self.future_offsets_s)
        ctx = self.context_offsets_s
        if not ctx or ctx[-1] != 0.0 or any(b <= a for a, b in zip(ctx, ctx[1:], strict=False)):
            raise ValueError(
                f"context_offsets_s: must increase strictly and end at 0, got {self.context_offsets_s!r}"
            )
        fut = self.future_offsets_s
        if any(x <= 0 for x in fut) or any(b <= a for a, b in zip(fut, fut[1:], strict=False)):
            raise ValueError(
                f"future_offsets_s: must be positive and increasing, got {self.future_offsets_s!r}"
            )
        if not 0 <= self.frame_tolerance_s < 0.5:
            raise ValueError(
                f"frame_tolerance_s: must be in [0, 0.5), got {self.frame_tolerance_s!r}"
            )
        for name in ("per_keyframe_cap", "per_clip_type_cap", "per_clip_type_class_cap"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{name}: must be an integer >= 0, got {v!r}")
        self.types = tuple(self.types)
        if not isinstance(self.dedup_keyframes, bool):
            raise ValueError(
                f"dedup_keyframes: must be true or false, got {self.dedup_keyframes!r}"
            )
        for name in ("dedup_min_translation_m", "dedup_min_rotation_deg"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
                raise ValueError(f"{name}: must be a number >= 0, got {v!r}")
        if self.grounding_frames not in ("context", "context+future"):
            raise ValueError(
                f"grounding_frames: must be 'context' or 'context+future', got {self.grounding_frames!r}"
            )


@dataclass(frozen=True)
class KeyframeWindows:
    """The QA keyframes of a clip and their frames (indices into the clip's frames).

    Attributes:
        keyframe: (K,) frame index of each QA keyframe.
        context: (K, P) frame indices at the context offsets (all present).
        future: (K, Q) frame indices at the future offsets, -1 where the clip has no such frame.
    """

    keyframe: np.ndarray
    context: np.ndarray
    future: np.ndarray


def _nearest_frames(frame_time_s: np.ndarray, target_s: np.ndarray, tol_s: float) -> np.ndarray:
    """Index of the frame nearest each target time, -1 where none is within ``tol_s``."""
    t = np.asarray(frame_time_s, dtype=np.float64)
    if len(t) == 0:
        return np.full(np.shape(target_s), -1, dtype=np.int64)
    right = np.clip(np.searchsorted(t, target_s), 0, len(t) - 1)
    left = np.clip(right - 1, 0, None)
    nearest = np.where(np.abs(t[left] - target_s) <= np.abs(t[right] - target_s), left, right)
    return np.where(np.abs(t[nearest] - target_s) <= tol_s + 1e-9, nearest, -1)


def select_keyframes(frame_time_s: np.ndarray, config: QAConfig) -> KeyframeWindows:
    """QA keyframes at ``keyframe_step_s`` from start to end, each with its full context window.

    A keyframe time whose keyframe or any context frame has no clip frame within
    ``frame_tolerance_s`` is skipped; missing future frames are kept as -1.
    """
    n_steps = int(
        np.floor((config.keyframe_end_s - config.keyframe_start_s) / config.keyframe_step_s + 1e-9)
    )
    targets = config.keyframe_start_s + config.keyframe_step_s * np.arange(n_steps + 1)
    ctx_t = targets[:, None] + np.asarray(config.context_offsets_s)[None, :]
    fut_t = targets[:, None] + np.asarray(config.future_offsets_s).reshape(1, -1)
    ctx = _nearest_frames(frame_time_s, ctx_t, config.frame_tolerance_s)
    fut = _nearest_frames(frame_time_s, fut_t, config.frame_tolerance_s).reshape(len(targets), -1)
    keep = np.all(ctx >= 0, axis=1)
    if len(ctx):
        # Two keyframe times on one frame (a sparse clip) would duplicate QA; keep the first.
        _, first = np.unique(ctx[:, -1], return_index=True)
        once = np.zeros(len(ctx), bool)
        once[first] = True
        keep &= once | (ctx[:, -1] < 0)
    return KeyframeWindows(
        keyframe=ctx[keep, -1].astype(np.int64),
        context=ctx[keep].astype(np.int64),
        future=fut[keep].astype(np.int64),
    )


def pose_novel_keyframes(
    global_SE3_ego: np.ndarray, min_translation_m: float, min_rotation_deg: float
) -> np.ndarray:
    """(K,) bool: keep each of K poses that moved at least ``min_translation_m`` or turned at
    least ``min_rotation_deg`` from the last kept one (the first is always kept).

    SPAR's pose-based frame subsampling (seed 001, 7.3): translation distance between the
    translations, rotation angle ``arccos((trace(R_i^T R_j) - 1) / 2)``; a pose is redundant when
    both are below their thresholds. The scan is sequential (each decision depends on the last kept
    pose) over the K <= 16 QA keyframes of a clip.

    Args:
        global_SE3_ego: (K, 4, 4) ego poses of the keyframes, in time order.
    """
    poses = np.asarray(global_SE3_ego, dtype=np.float64)
    if poses.ndim != 3 or poses.shape[1:] != (4, 4):
        raise ValueError(f"global_SE3_ego: expected (K, 4, 4), got {poses.shape}")
    keep = np.zeros(len(poses), dtype=bool)
    last = None
    for i, pose in enumerate(poses):
        if last is not None:
            moved = float(np.linalg.norm(pose[:3, 3] - last[:3, 3]))
            cos = (np.trace(last[:3, :3].T @ pose[:3, :3]) - 1.0) / 2.0
            turned = float(np.degrees(stable_math.arccos(np.clip(cos, -1.0, 1.0))))
            if moved < min_translation_m and turned < min_rotation_deg:
                continue
        keep[i] = True
        last = pose
    return keep


def deduplicate_keyframes(
    windows: KeyframeWindows, global_SE3_ego: np.ndarray | None, config: QAConfig
) -> KeyframeWindows:
    """The keyframes :func:`pose_novel_keyframes` keeps (all when de-duplication is off or the
    clip's ego poses are unknown).

    Args:
        windows: the clip's QA keyframes (:func:`select_keyframes`).
        global_SE3_ego: (F, 4, 4) ego pose of every clip frame, or None.
    """
    if not config.dedup_keyframes or global_SE3_ego is None or len(windows.keyframe) == 0:
        return windows
    poses = np.asarray(global_SE3_ego, dtype=np.float64)[windows.keyframe]
    keep = pose_novel_keyframes(
        poses, config.dedup_min_translation_m, config.dedup_min_rotation_deg
    )
    return KeyframeWindows(windows.keyframe[keep], windows.context[keep], windows.future[keep])


def stable_seed(*parts: int | str) -> list[int]:
    """Seed words for ``np.random.default_rng`` from ints and strings (CRC32, not ``hash()``)."""
    out = []
    for p in parts:
        out.append(zlib.crc32(p.encode("utf-8")) if isinstance(p, str) else int(p) & 0xFFFFFFFF)
    return out


@dataclass
class BalanceState:
    """Running counts of one clip, for the caps and the class / outcome balancing."""

    per_type: Counter = field(default_factory=Counter)
    per_type_class: Counter = field(default_factory=Counter)
    per_type_outcome: Counter = field(default_factory=Counter)


def pick_balanced(
    type_id: str,
    classes: np.ndarray,
    outcomes: np.ndarray,
    config: QAConfig,
    state: BalanceState,
    rng: np.random.Generator,
    weight: int = 1,
    class_cap: bool = True,
) -> list[int]:
    """Indices of the candidates to keep, in pick order, updating ``state``.

    Args:
        type_id: the question type (or group) the caps count.
        classes: (n,) class name of each valid candidate (of its region A; ``ego`` for none).
        outcomes: (n,) outcome key of each candidate (``""`` when the type has none).
        weight: records one pick makes per type (a spatiotemporal group asks each of its types
            at every horizon); the caps count records, and a keyframe gets at least one pick.
        class_cap: apply ``per_clip_type_class_cap`` (not for questions about the ego alone).
    """
    n = len(classes)
    if n == 0:
        return []
    order = rng.permutation(n)
    cls = np.asarray(classes, dtype=object)[order]
    out = np.asarray(outcomes, dtype=object)[order]
    alive = np.ones(n, dtype=bool)
    picked: list[int] = []
    per_keyframe = max(1, config.per_keyframe_cap // weight) if config.per_keyframe_cap else 0
    while (
        len(picked) < per_keyframe and state.per_type[type_id] + weight <= config.per_clip_type_cap
    ):
        open_cls = [
            c
            for c in dict.fromkeys(cls[alive])
            if not class_cap
            or state.per_type_class[(type_id, c)] + weight <= config.per_clip_type_class_cap
        ]
        if not open_cls:
            break
        c = min(open_cls, key=lambda k: state.per_type_class[(type_id, k)])  # first of the least
        in_c = alive & (cls == c)
        o = min(dict.fromkeys(out[in_c]), key=lambda k: state.per_type_outcome[(type_id, k)])
        i = int(np.flatnonzero(in_c & (out == o))[0])
        alive[i] = False
        picked.append(int(order[i]))
        state.per_type[type_id] += weight
        state.per_type_class[(type_id, c)] += weight
        state.per_type_outcome[(type_id, o)] += weight
    return picked
