"""Candidate questions: which regions (and times, cameras) a question type may ask about.

A template's ``subjects`` names one enumerator here. Enumerators work on all regions of a clip's
QA keyframes at once (:class:`ClipRegions`), with numpy per keyframe (and per camera for ranked
sets); none loops over objects in Python.

- ``ego``: no region, one candidate per keyframe (asked over the front camera).
- ``region``: every region, over the first camera that shows it.
- ``region_horizon``: every region at every horizon of the template (0 = the keyframe).
- ``pair_same_camera``: ordered pairs (A, B) shown together by at least one camera.
- ``pair_cross_camera``: unordered pairs that no camera shows together (a multi-view question).
- ``region_camera_pair``: a region and two neighbouring cameras, at least one showing it.
- ``ranked_set``: ``size`` regions in one camera, the hardest set for each possible answer: the
  answer (smallest rank key) and the next regions by rank key at least ``margin_m`` (or
  ``margin_s``) beyond it (``chain``: each at least that beyond the previous). Role order is
  shuffled. With ``across_cameras`` the regions come from every camera (the question shows all).
- ``class_group``: one candidate per keyframe and class group (``params["groups"]``), no region
  (the option is the group: counts over the clip's tracks).
- ``class_group_members``: one candidate per keyframe and class group; its regions are every
  region of the group's classes at the keyframe, in any camera (a count of visible objects: an
  object two cameras show is one region, so it counts once).
- ``camera_regions``: one candidate per keyframe and camera; its regions are every region that
  camera shows, by region id (a description of the marked image).
- ``keyframe_regions``: one candidate per keyframe; its regions are all its regions, by region id
  (a description of the whole marked scene around the ego).

The last three ask about a variable number of regions (at most ``len(ROLES)``; a keyframe with more
gives no candidate): their regions are padded with -1.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from autolabel.qa.quantities import RANK_KEYS, ROLES

#: ``SUBJECTS`` count of a variable set of regions (up to ``len(ROLES)``, padded with -1).
VARIABLE = -1


@dataclass
class ClipRegions:
    """Every region of a clip's QA keyframes, concatenated (M rows, keyframe-major).

    Attributes:
        keyframe_pos: (M,) position of the region's keyframe in ``keyframes``.
        keyframes: (K,) keyframe frame indices.
        offsets: (K + 1,) rows of keyframe k are ``offsets[k]:offsets[k + 1]``.
        row_in_keyframe: (M,) row in that keyframe's ``KeyframeRegions``.
        region_id, track_id: (M,) int64.
        attr_row: (M,) row of the region's track at the keyframe in the attributes.
        label: (M,) class names.
        visible: (M, C) visible in camera c at the keyframe.
        channels: the C camera channels.
        attrs: the clip's attributes (``ObjectAttributes``).
    """

    keyframe_pos: np.ndarray
    keyframes: np.ndarray
    offsets: np.ndarray
    row_in_keyframe: np.ndarray
    region_id: np.ndarray
    track_id: np.ndarray
    attr_row: np.ndarray
    label: np.ndarray
    visible: np.ndarray
    channels: tuple[str, ...]
    attrs: Any

    def __len__(self) -> int:
        return len(self.region_id)

    @property
    def primary_camera(self) -> np.ndarray:
        """(M,) the first camera (rig order) showing each region."""
        return np.argmax(self.visible, axis=1)


@dataclass
class Candidates:
    """N candidate questions.

    Attributes:
        keyframe_pos: (N,) keyframe position.
        regions: (N, k) rows of ``ClipRegions`` in role order.
        horizon_s: (N,) look-ahead, seconds.
        cameras: (N, 2) camera indices the question is posed over / names (-1: none).
        option: (N,) index into the subjects' option list (a class group), -1 where none.
    """

    keyframe_pos: np.ndarray
    regions: np.ndarray
    horizon_s: np.ndarray
    cameras: np.ndarray
    option: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.option is None:
            self.option = np.full(len(self.keyframe_pos), -1, dtype=np.int64)

    def subset(self, idx: np.ndarray | slice) -> Candidates:
        """The candidates at ``idx``."""
        return Candidates(
            self.keyframe_pos[idx],
            self.regions[idx],
            self.horizon_s[idx],
            self.cameras[idx],
            self.option[idx],
        )

    def __len__(self) -> int:
        return len(self.keyframe_pos)


def _make(kpos, regions, horizon=None, cameras=None, option=None, *, k: int) -> Candidates:
    kpos = np.asarray(kpos, dtype=np.int64).reshape(-1)
    n = len(kpos)
    regions = np.asarray(regions, dtype=np.int64).reshape(n, k)
    horizon = np.zeros(n) if horizon is None else np.asarray(horizon, dtype=np.float64)
    cams = np.full((n, 2), -1, dtype=np.int64)
    if cameras is not None:
        cams[:] = np.asarray(cameras, dtype=np.int64).reshape(n, 2)
    opt = np.full(n, -1, np.int64) if option is None else np.asarray(option, np.int64).reshape(n)
    return Candidates(kpos, regions, horizon, cams, opt)


def _front_camera(channels: tuple[str, ...]) -> int:
    return channels.index("CAM_FRONT") if "CAM_FRONT" in channels else 0


def _ego(cr: ClipRegions, params: Mapping[str, Any], horizons, rng) -> Candidates:
    kpos = np.flatnonzero(np.diff(cr.offsets) > 0)
    cams = np.stack([np.full(len(kpos), _front_camera(cr.channels)), np.full(len(kpos), -1)], 1)
    return _make(kpos, np.zeros((len(kpos), 0)), cameras=cams, k=0)


def _region(cr: ClipRegions, params, horizons, rng) -> Candidates:
    m = np.arange(len(cr))
    cams = np.stack([cr.primary_camera, np.full(len(cr), -1)], 1)
    return _make(cr.keyframe_pos, m[:, None], cameras=cams, k=1)


def _region_horizon(cr: ClipRegions, params, horizons, rng) -> Candidates:
    """Region-major: the candidates of region m are rows m*H .. m*H + H - 1."""
    h = np.asarray(horizons, dtype=np.float64)
    m = np.repeat(np.arange(len(cr)), len(h))
    cams = np.stack([cr.primary_camera[m], np.full(len(m), -1)], 1)
    return _make(cr.keyframe_pos[m], m[:, None], np.tile(h, len(cr)), cams, k=1)


def _pairs(cr: ClipRegions, same_camera: bool) -> Candidates:
    out_k, out_r, out_c = [], [], []
    primary = cr.primary_camera
    for k in range(len(cr.offsets) - 1):
        lo, hi = cr.offsets[k], cr.offsets[k + 1]
        if hi - lo < 2:
            continue
        i, j = np.meshgrid(np.arange(lo, hi), np.arange(lo, hi), indexing="ij")
        i, j = i.ravel(), j.ravel()
        keep = i != j if same_camera else i < j
        i, j = i[keep], j[keep]
        common = cr.visible[i] & cr.visible[j]
        shared = common.any(axis=1)
        if same_camera:
            sel = shared
            cams = np.stack([np.argmax(common[sel], axis=1), np.full(sel.sum(), -1)], 1)
        else:
            sel = ~shared & cr.visible[i].any(axis=1) & cr.visible[j].any(axis=1)
            cams = np.stack([primary[i[sel]], primary[j[sel]]], 1)
        out_k.append(np.full(sel.sum(), k))
        out_r.append(np.stack([i[sel], j[sel]], 1))
        out_c.append(cams)
    if not out_k:
        return _make(np.zeros(0), np.zeros((0, 2)), k=2)
    return _make(np.concatenate(out_k), np.concatenate(out_r), cameras=np.concatenate(out_c), k=2)


def _pair_same_camera(cr: ClipRegions, params, horizons, rng) -> Candidates:
    return _pairs(cr, same_camera=True)


def _pair_cross_camera(cr: ClipRegions, params, horizons, rng) -> Candidates:
    return _pairs(cr, same_camera=False)


def _region_camera_pair(cr: ClipRegions, params, horizons, rng) -> Candidates:
    c = len(cr.channels)
    if c < 2:
        return _make(np.zeros(0), np.zeros((0, 1)), k=1)
    m, cam = np.meshgrid(np.arange(len(cr)), np.arange(c), indexing="ij")
    m, cam = m.ravel(), cam.ravel()
    nxt = (cam + 1) % c  # the rig's cameras are listed around the car, so neighbours overlap
    keep = cr.visible[m, cam] | cr.visible[m, nxt]
    m, cam, nxt = m[keep], cam[keep], nxt[keep]
    return _make(cr.keyframe_pos[m], m[:, None], cameras=np.stack([cam, nxt], 1), k=1)


def _ranked_set(cr: ClipRegions, params, horizons, rng) -> Candidates:
    size = int(params["size"])
    margin = float(params["margin_m"] if "margin_m" in params else params["margin_s"])
    chain = bool(params.get("chain", False))
    key_all = RANK_KEYS[params["rank_by"]]
    across = bool(params.get("across_cameras", False))
    # One pseudo camera holding every region (shown on the front camera) when across cameras.
    visible = cr.visible.any(axis=1, keepdims=True) if across else cr.visible
    out_k, out_r, out_c = [], [], []
    for k in range(len(cr.offsets) - 1):
        lo, hi = cr.offsets[k], cr.offsets[k + 1]
        if hi - lo < size:
            continue
        rows = np.arange(lo, hi)
        for c in range(visible.shape[1]):
            members = rows[visible[lo:hi, c]]
            if len(members) < size:
                continue
            keys = key_all(cr.attrs, cr.attr_row[members])
            order = np.argsort(keys, kind="stable")
            ks, mem = keys[order], members[order]
            pos = [np.arange(len(mem))]
            nxt = np.searchsorted(ks, ks + margin, side="left")
            pos.append(nxt)
            for _ in range(size - 2):
                prev = pos[-1]
                pos.append(
                    np.searchsorted(ks, ks[np.minimum(prev, len(ks) - 1)] + margin, side="left")
                    if chain
                    else prev + 1
                )
            pos = np.stack(pos, 1)
            ok = np.all(pos < len(mem), axis=1)
            if not ok.any():
                continue
            out_r.append(mem[pos[ok]])
            out_k.append(np.full(ok.sum(), k))
            cam = _front_camera(cr.channels) if across else c
            out_c.append(np.stack([np.full(ok.sum(), cam), np.full(ok.sum(), -1)], 1))
    if not out_k:
        return _make(np.zeros(0), np.zeros((0, size)), k=size)
    regions = np.concatenate(out_r)
    kpos = np.concatenate(out_k)
    cams = np.concatenate(out_c)
    # The same set seen by two cameras is one candidate (the first camera's).
    _, first = np.unique(np.sort(regions, axis=1), axis=0, return_index=True)
    first = np.sort(first)
    regions, kpos, cams = regions[first], kpos[first], cams[first]
    return _make(kpos, rng.permuted(regions, axis=1), cameras=cams, k=size)


def _padded(members: list[np.ndarray], k: int) -> np.ndarray:
    out = np.full((len(members), k), -1, dtype=np.int64)
    for i, m in enumerate(members):
        out[i, : len(m)] = m
    return out


def _group_classes(params: Mapping[str, Any]) -> list[np.ndarray]:
    return [np.asarray(g["classes"], dtype=object) for g in params["groups"]]


def _class_group(cr: ClipRegions, params, horizons, rng) -> Candidates:
    """Every keyframe x class group; no region."""
    n_groups = len(params["groups"])
    kpos = np.repeat(np.flatnonzero(np.diff(cr.offsets) > 0), n_groups)
    option = np.tile(np.arange(n_groups), len(kpos) // max(n_groups, 1))
    cams = np.stack([np.full(len(kpos), _front_camera(cr.channels)), np.full(len(kpos), -1)], 1)
    return _make(kpos, np.zeros((len(kpos), 0)), cameras=cams, option=option, k=0)


def _class_group_members(cr: ClipRegions, params, horizons, rng) -> Candidates:
    """Every keyframe x class group; regions: the keyframe's regions of the group's classes."""
    groups = _group_classes(params)
    kpos, option, members = [], [], []
    for k in range(len(cr.offsets) - 1):
        lo, hi = cr.offsets[k], cr.offsets[k + 1]
        if hi == lo:
            continue
        rows = np.arange(lo, hi)
        for g, classes in enumerate(groups):
            m = rows[np.isin(cr.label[rows], classes)]
            if len(m) <= len(ROLES):
                kpos.append(k)
                option.append(g)
                members.append(m)
    cams = np.stack([np.full(len(kpos), _front_camera(cr.channels)), np.full(len(kpos), -1)], 1)
    return _make(kpos, _padded(members, len(ROLES)), cameras=cams, option=option, k=len(ROLES))


def _camera_regions(cr: ClipRegions, params, horizons, rng) -> Candidates:
    """Every keyframe x camera with a region; regions: those the camera shows, by region id."""
    kpos, cams, members = [], [], []
    for k in range(len(cr.offsets) - 1):
        lo, hi = cr.offsets[k], cr.offsets[k + 1]
        rows = np.arange(lo, hi)
        for c in range(len(cr.channels)):
            m = rows[cr.visible[lo:hi, c]]
            if 0 < len(m) <= len(ROLES):
                kpos.append(k)
                cams.append(c)
                members.append(m)  # rows of a keyframe are in region-id order
    cam = np.stack([np.asarray(cams, np.int64), np.full(len(cams), -1)], 1) if cams else None
    return _make(kpos, _padded(members, len(ROLES)), cameras=cam, k=len(ROLES))


def _keyframe_regions(cr: ClipRegions, params, horizons, rng) -> Candidates:
    """Every keyframe with 1..len(ROLES) regions; regions: all of them, by region id."""
    counts = np.diff(cr.offsets)
    kpos = np.flatnonzero((counts > 0) & (counts <= len(ROLES)))
    members = [np.arange(cr.offsets[k], cr.offsets[k + 1]) for k in kpos]
    cams = np.stack([np.full(len(kpos), _front_camera(cr.channels)), np.full(len(kpos), -1)], 1)
    return _make(kpos, _padded(members, len(ROLES)), cameras=cams, k=len(ROLES))


Enumerator = Callable[
    [ClipRegions, Mapping[str, Any], tuple[float, ...], np.random.Generator], Candidates
]

#: subjects name -> (number of regions, None when ``params["size"]`` says, or ``VARIABLE``;
#: enumerator)
SUBJECTS: dict[str, tuple[int | None, Enumerator]] = {
    "ego": (0, _ego),
    "region": (1, _region),
    "region_horizon": (1, _region_horizon),
    "pair_same_camera": (2, _pair_same_camera),
    "pair_cross_camera": (2, _pair_cross_camera),
    "region_camera_pair": (1, _region_camera_pair),
    "ranked_set": (None, _ranked_set),
    "class_group": (0, _class_group),
    "class_group_members": (VARIABLE, _class_group_members),
    "camera_regions": (VARIABLE, _camera_regions),
    "keyframe_regions": (VARIABLE, _keyframe_regions),
}
#: Subjects whose candidates carry an option from ``params["groups"]``.
GROUP_SUBJECTS = ("class_group", "class_group_members")


def is_variable(subjects: str) -> bool:
    """Whether questions of these subjects name a variable number of regions."""
    return SUBJECTS[subjects][0] == VARIABLE


def subject_region_count(subjects: str, params: Mapping[str, Any]) -> int:
    """How many regions a question of these subjects names."""
    n, _ = SUBJECTS[subjects]
    if n is None:
        if (
            "size" not in params
            or "rank_by" not in params
            or not ({"margin_m", "margin_s"} & set(params))
        ):
            raise ValueError(
                f"subjects {subjects}: the quantity needs size, rank_by and margin_m (or "
                "margin_s) parameters"
            )
        return int(params["size"])
    if n == VARIABLE:
        return len(ROLES)
    if subjects in GROUP_SUBJECTS and not isinstance(params.get("groups"), (list, tuple)):
        raise ValueError(f"subjects {subjects}: the quantity needs a groups parameter")
    return n


def enumerate_candidates(
    subjects: str,
    regions: ClipRegions,
    params: Mapping[str, Any],
    horizons: tuple[float, ...],
    rng: np.random.Generator,
) -> Candidates:
    """The candidates of ``subjects`` over all keyframes of a clip."""
    return SUBJECTS[subjects][1](regions, params, horizons, rng)
