"""Inputs of QA generation besides the attributes: region grounding per keyframe, clip metadata.

``KeyframeRegions`` is what Set-of-Mark (region ids), segmentation (2D boxes, RLE masks) and the
visibility filter hand to QA generation for one QA keyframe, as parallel arrays:

- one row per region: ``region_id`` (the "Region [X]" number, from 0 per keyframe, stable across
  the keyframe's context window and cameras), ``track_id`` (the tracker's id, the key into the
  attributes) and optionally ``label`` (class index, cross-checked against the attributes);
- one row per view (region x camera x frame of the window): the 2D box ``[u_min, v_min, u_max,
  v_max]`` in pixels, the mask as a COCO RLE dict ``{"size": [h, w], "counts": str}`` and
  ``visible`` (the object passed the visibility filter in that camera and frame; at the keyframe
  this decides which cameras "show" the region).

``ClipQAMeta`` holds what records cite about the clip: its name, every frame's sample token and
time (seconds from the first keyframe) and image path per camera.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from autolabel.sensors import CAMERA_CHANNELS


def _validate_rle(rle: Any, where: str) -> dict[str, Any]:
    if not isinstance(rle, Mapping) or set(rle) != {"size", "counts"}:
        raise ValueError(f"{where}: expected a COCO RLE dict with keys size, counts")
    size = rle["size"]
    if (
        not isinstance(size, (list, tuple))
        or len(size) != 2
        or not all(isinstance(v, (int, np.integer)) and v > 0 for v in size)
    ):
        raise ValueError(f"{where}.size: expected [height, width] positive ints, got {size!r}")
    counts = rle["counts"]
    if isinstance(counts, bytes):
        counts = counts.decode("ascii")
    if not isinstance(counts, str):
        raise ValueError(f"{where}.counts: expected a compressed RLE string")
    return {"size": [int(size[0]), int(size[1])], "counts": counts}


@dataclass
class KeyframeRegions:
    """Region grounding of one QA keyframe (R regions, V views), as parallel arrays.

    Attributes:
        keyframe_index: the keyframe's index into the clip's frames.
        region_id: (R,) int64 Set-of-Mark ids, unique, >= 0.
        track_id: (R,) int64 track ids, unique.
        label: (R,) int16 class indices (``DETECTION_CLASSES``), or None to take the attributes'.
        view_region: (V,) int64 row of the view's region in the arrays above.
        view_camera: (V,) camera channel names.
        view_frame_index: (V,) int64 frame index of the view.
        view_box_px: (V, 4) float64 ``[u_min, v_min, u_max, v_max]`` pixels.
        view_mask_rle: V COCO RLE dicts.
        view_visible: (V,) bool, passed the visibility filter (True when not given).
    """

    keyframe_index: int
    region_id: np.ndarray
    track_id: np.ndarray
    view_region: np.ndarray
    view_camera: np.ndarray
    view_frame_index: np.ndarray
    view_box_px: np.ndarray
    view_mask_rle: Sequence[Mapping[str, Any]]
    view_visible: np.ndarray | None = None
    label: np.ndarray | None = None

    def __post_init__(self) -> None:
        where = f"KeyframeRegions(keyframe {self.keyframe_index})"
        self.keyframe_index = int(self.keyframe_index)
        self.region_id = np.asarray(self.region_id, dtype=np.int64).reshape(-1)
        self.track_id = np.asarray(self.track_id, dtype=np.int64).reshape(-1)
        r = len(self.region_id)
        if len(self.track_id) != r:
            raise ValueError(f"{where}: {r} region ids but {len(self.track_id)} track ids")
        if r and self.region_id.min() < 0:
            raise ValueError(f"{where}.region_id: ids must be >= 0")
        if len(np.unique(self.region_id)) != r:
            raise ValueError(f"{where}.region_id: duplicate region ids")
        if len(np.unique(self.track_id)) != r:
            raise ValueError(f"{where}.track_id: a track has two region ids")
        if self.label is not None:
            self.label = np.asarray(self.label, dtype=np.int16).reshape(-1)
            if len(self.label) != r:
                raise ValueError(f"{where}.label: expected {r} labels, got {len(self.label)}")
        self.view_region = np.asarray(self.view_region, dtype=np.int64).reshape(-1)
        v = len(self.view_region)
        self.view_camera = np.asarray(self.view_camera, dtype=object).reshape(-1)
        self.view_frame_index = np.asarray(self.view_frame_index, dtype=np.int64).reshape(-1)
        self.view_box_px = np.asarray(self.view_box_px, dtype=np.float64).reshape(-1, 4)
        if self.view_visible is None:
            self.view_visible = np.ones(v, dtype=bool)
        self.view_visible = np.asarray(self.view_visible, dtype=bool).reshape(-1)
        for name in ("view_camera", "view_frame_index", "view_box_px", "view_visible"):
            if len(getattr(self, name)) != v:
                raise ValueError(
                    f"{where}.{name}: expected {v} rows, got {len(getattr(self, name))}"
                )
        if len(self.view_mask_rle) != v:
            raise ValueError(
                f"{where}.view_mask_rle: expected {v} masks, got {len(self.view_mask_rle)}"
            )
        if v and (self.view_region.min() < 0 or self.view_region.max() >= r):
            raise ValueError(f"{where}.view_region: rows must index the {r} regions")
        if not np.all(np.isfinite(self.view_box_px)):
            raise ValueError(f"{where}.view_box_px: non-finite box")
        self.view_mask_rle = [
            _validate_rle(m, f"{where}.view_mask_rle[{i}]")
            for i, m in enumerate(self.view_mask_rle)
        ]

    def __len__(self) -> int:
        return len(self.region_id)

    def visible_at_keyframe(self, channels: Sequence[str]) -> np.ndarray:
        """(R, C) bool: region visible in camera ``channels[c]`` at the keyframe."""
        out = np.zeros((len(self), len(channels)), dtype=bool)
        cam_index = {c: i for i, c in enumerate(channels)}
        at_key = (self.view_frame_index == self.keyframe_index) & self.view_visible
        for i in np.flatnonzero(at_key):
            c = cam_index.get(self.view_camera[i])
            if c is not None:
                out[self.view_region[i], c] = True
        return out

    def views_of(
        self, region_row: int, cameras: Sequence[str], frames: Sequence[int]
    ) -> list[dict[str, Any]]:
        """The views of one region in ``cameras`` x ``frames``, ordered by camera then frame."""
        cams = list(cameras)
        frame_set = set(int(f) for f in frames)
        sel = [
            i
            for i in np.flatnonzero(self.view_region == region_row)
            if self.view_camera[i] in cams and int(self.view_frame_index[i]) in frame_set
        ]
        sel.sort(key=lambda i: (cams.index(self.view_camera[i]), int(self.view_frame_index[i])))
        return [
            {
                "camera": str(self.view_camera[i]),
                "frame_index": int(self.view_frame_index[i]),
                "box_px": [round(float(x), 2) for x in self.view_box_px[i]],
                "mask_rle": dict(self.view_mask_rle[i]),
                "visible": bool(self.view_visible[i]),
            }
            for i in sel
        ]


def regions_from_views(
    keyframe: np.ndarray,
    track_id: np.ndarray,
    camera: np.ndarray,
    frame_index: np.ndarray,
    box_px: np.ndarray,
    mask_rle: Sequence[Mapping[str, Any]],
    visible: np.ndarray,
    region_ids: Any,
    label_of_track: Mapping[int, int] | None = None,
) -> list[KeyframeRegions]:
    """Group per-view rows (segmentation and visibility output) into one grounding per keyframe.

    Args:
        keyframe: (V,) the QA keyframe whose window each view belongs to.
        track_id, camera, frame_index: (V,) the object, camera channel and frame of each view.
        box_px: (V, 4) 2D boxes; mask_rle: V COCO RLE dicts; visible: (V,) kept by visibility.
        region_ids: ``autolabel.set_of_mark.RegionIds`` (anything with ``lookup(keyframe,
            track_id)``); views of objects without a region id are dropped.
        label_of_track: optional class index per track id, cross-checked during generation.
    """
    kf = np.asarray(keyframe, dtype=np.int64).reshape(-1)
    tid = np.asarray(track_id, dtype=np.int64).reshape(-1)
    rid = np.asarray(region_ids.lookup(kf, tid), dtype=np.int64)
    box = np.asarray(box_px, dtype=np.float64).reshape(-1, 4)
    cam = np.asarray(camera, dtype=object).reshape(-1)
    frm = np.asarray(frame_index, dtype=np.int64).reshape(-1)
    vis = np.asarray(visible, dtype=bool).reshape(-1)
    if not (len(tid) == len(cam) == len(frm) == len(box) == len(vis) == len(mask_rle) == len(kf)):
        raise ValueError("regions_from_views: inputs differ in length")
    out = []
    for k in np.unique(kf[rid >= 0]):
        sel = np.flatnonzero((kf == k) & (rid >= 0))
        tracks, first, inverse = np.unique(tid[sel], return_index=True, return_inverse=True)
        out.append(
            KeyframeRegions(
                keyframe_index=int(k),
                region_id=rid[sel][first],
                track_id=tracks,
                label=None
                if label_of_track is None
                else np.array([label_of_track[int(t)] for t in tracks]),
                view_region=inverse,
                view_camera=cam[sel],
                view_frame_index=frm[sel],
                view_box_px=box[sel],
                view_mask_rle=[mask_rle[i] for i in sel],
                view_visible=vis[sel],
            )
        )
    return out


@dataclass
class ClipQAMeta:
    """What QA records cite about a clip.

    Attributes:
        clip: clip (scene) name.
        frame_time_s: (F,) seconds of each frame from the clip's first keyframe.
        frame_token: F sample tokens.
        image_paths: camera channel -> F image paths (relative to the dataset root).
        channels: camera order (the rig's); defaults to the nuScenes order of the cameras present.
        ego_pose: (F, 4, 4) ``global_SE3_ego`` of every frame, or None (keyframe de-duplication
            needs it).
    """

    clip: str
    frame_time_s: np.ndarray
    frame_token: Sequence[str]
    image_paths: Mapping[str, Sequence[str]]
    channels: tuple[str, ...] = field(default=())
    ego_pose: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.frame_time_s = np.asarray(self.frame_time_s, dtype=np.float64).reshape(-1)
        f = len(self.frame_time_s)
        if not self.clip:
            raise ValueError("ClipQAMeta.clip: empty clip name")
        if f and np.any(np.diff(self.frame_time_s) <= 0):
            raise ValueError(f"ClipQAMeta({self.clip}).frame_time_s: must increase strictly")
        self.frame_token = tuple(str(t) for t in self.frame_token)
        if len(self.frame_token) != f:
            raise ValueError(
                f"ClipQAMeta({self.clip}).frame_token: expected {f}, got {len(self.frame_token)}"
            )
        paths = {}
        for cam, p in self.image_paths.items():
            if len(p) != f:
                raise ValueError(
                    f"ClipQAMeta({self.clip}).image_paths[{cam}]: expected {f} paths, got {len(p)}"
                )
            paths[str(cam)] = tuple(str(x) for x in p)
        self.image_paths = paths
        if not self.channels:
            known = [c for c in CAMERA_CHANNELS if c in paths]
            self.channels = tuple(known + sorted(c for c in paths if c not in CAMERA_CHANNELS))
        self.channels = tuple(self.channels)
        missing = [c for c in self.channels if c not in paths]
        if missing:
            raise ValueError(f"ClipQAMeta({self.clip}).channels: no image paths for {missing}")
        if self.ego_pose is not None:
            self.ego_pose = np.asarray(self.ego_pose, dtype=np.float64)
            if self.ego_pose.shape != (f, 4, 4) or not np.all(np.isfinite(self.ego_pose)):
                raise ValueError(
                    f"ClipQAMeta({self.clip}).ego_pose: expected finite ({f}, 4, 4) poses, got "
                    f"shape {self.ego_pose.shape}"
                )

    @classmethod
    def from_clip(cls, clip: Any) -> ClipQAMeta:
        """From an ``autolabel.clip.Clip``; image paths relative to ``clip.dataroot`` when set."""
        root = Path(clip.dataroot) if clip.dataroot else None
        channels = [c for c in CAMERA_CHANNELS if all(c in fr.cameras for fr in clip.frames)]

        def rel(p: Path) -> str:
            p = Path(p)
            return str(p.relative_to(root)) if root and p.is_relative_to(root) else str(p)

        return cls(
            clip=clip.name,
            frame_time_s=np.array([fr.time_s for fr in clip.frames]),
            frame_token=[fr.token for fr in clip.frames],
            image_paths={c: [rel(fr.cameras[c].path) for fr in clip.frames] for c in channels},
            channels=tuple(channels),
            ego_pose=np.stack([fr.global_SE3_ego.as_matrix() for fr in clip.frames])
            if clip.frames
            else None,
        )
