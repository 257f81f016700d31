"""Measured appearance of the regions: the median L*a*b* colour under each keyframe mask.

QA generation names a region's colour (``region_colour``, captions) from the view with the most
mask pixels among the cameras its record shows; ``check-qa`` re-measures the same view from the
record's own mask and image when it is given the dataset root. Images are read by a callable, so
the pipeline (which has them in memory or on disk) and the checker share this code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from pycocotools import mask as mask_utils

from autolabel.colour import DEFAULT_MIN_PIXELS, UNIT_RGB, median_lab_of_values
from autolabel.masks import rle_pixel_values
from autolabel.qa.grounding import KeyframeRegions

#: ``read_image(camera channel, frame index) -> (H, W, 3) uint8 RGB`` (None: image unavailable).
ImageReader = Callable[[str, int], "np.ndarray | None"]


@dataclass
class RegionColours:
    """The colour of each region view at its keyframe (V views), as parallel arrays.

    Attributes:
        keyframe: (V,) keyframe frame index.
        track_id: (V,) the region's track.
        camera: (V,) camera channel.
        lab: (V, 3) median L*a*b* colour of the mask's pixels (NaN: fewer than ``min_pixels``).
        pixels: (V,) mask pixels.
    """

    keyframe: np.ndarray
    track_id: np.ndarray
    camera: np.ndarray
    lab: np.ndarray
    pixels: np.ndarray

    def __len__(self) -> int:
        return len(self.keyframe)

    @classmethod
    def empty(cls) -> RegionColours:
        return cls(
            np.zeros(0, np.int64),
            np.zeros(0, np.int64),
            np.zeros(0, object),
            np.zeros((0, 3)),
            np.zeros(0, np.int64),
        )

    @classmethod
    def concatenate(cls, parts: Sequence[RegionColours]) -> RegionColours:
        """The views of ``parts`` one after another (as one ``measure_region_colours`` call over
        their regions in that order would give)."""
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls.empty()
        return cls(
            *(
                np.concatenate([getattr(p, name) for p in parts])
                for name in ("keyframe", "track_id", "camera", "lab", "pixels")
            )
        )

    def table(
        self, keyframe: np.ndarray, track_id: np.ndarray, channels: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray]:
        """(M, C, 3) Lab and (M, C) pixel counts of M (keyframe, track) regions per camera
        (NaN / 0 where not measured)."""
        kf = np.asarray(keyframe, dtype=np.int64)
        tid = np.asarray(track_id, dtype=np.int64)
        lab = np.full((len(kf), len(channels), 3), np.nan)
        px = np.zeros((len(kf), len(channels)), np.int64)
        if len(self) == 0 or len(kf) == 0:
            return lab, px
        # One sorted key per (keyframe, track): keyframes and track ids are non-negative.
        key_m = (kf << 32) | tid
        key_v = (np.asarray(self.keyframe, np.int64) << 32) | np.asarray(self.track_id, np.int64)
        order = np.argsort(key_m, kind="stable")
        pos = np.clip(np.searchsorted(key_m[order], key_v), 0, len(kf) - 1)
        m = order[pos]
        names, inverse = np.unique(np.asarray(self.camera, dtype=str), return_inverse=True)
        cam_of_name = np.array([list(channels).index(n) if n in channels else -1 for n in names])
        c = cam_of_name[inverse] if len(names) else np.zeros(0, np.int64)
        ok = (key_m[m] == key_v) & (c >= 0)
        lab[m[ok], c[ok]] = self.lab[ok]
        px[m[ok], c[ok]] = self.pixels[ok]
        return lab, px


def mask_bounds(rles: Sequence[Mapping]) -> np.ndarray:
    """(N, 4) int64 [u0, v0, u1, v1) pixel bounds of N COCO RLE masks (u1 = u0 for an empty
    one), from their runs (pycocotools ``toBbox``; no mask is decoded)."""
    if not len(rles):
        return np.zeros((0, 4), np.int64)
    coded = [
        {"size": list(r["size"]), "counts": r["counts"].encode("ascii")}
        if isinstance(r["counts"], str)
        else dict(r)
        for r in rles
    ]
    xywh = np.asarray(mask_utils.toBbox(coded), dtype=np.float64).reshape(-1, 4)
    u0, v0 = xywh[:, 0], xywh[:, 1]
    return np.stack([u0, v0, u0 + xywh[:, 2], v0 + xywh[:, 3]], axis=1).astype(np.int64)


@dataclass(frozen=True)
class ImagePatch:
    """The decoded pixels of one (height_px, width_px) image around the masks measured on it:
    ``rgb`` (h, w, 3) uint8 is the image's rows [v0, v0 + h) and columns [u0, u0 + w).

    The marks stage keeps one per keyframe image it decoded, so that ``check-qa`` in the same
    run re-measures colours from those pixels instead of decoding the file again, while it
    holds only the pixels masks can read (not every keyframe image of the clip).
    """

    height_px: int
    width_px: int
    u0: int
    v0: int
    rgb: np.ndarray

    @classmethod
    def around(cls, image_rgb: np.ndarray, rles: Sequence[Mapping]) -> ImagePatch:
        """A copy of the pixels of (H, W, 3) ``image_rgb`` inside the union of the masks'
        bounds (an empty patch when every mask is empty); later changes to the image leave
        the patch as it was."""
        img = np.asarray(image_rgb)
        h, w = img.shape[:2]
        b = mask_bounds(rles)
        b = b[(b[:, 2] > b[:, 0]) & (b[:, 3] > b[:, 1])]
        if not len(b):
            return cls(h, w, 0, 0, np.zeros((0, 0, 3), np.uint8))
        u0, v0 = int(b[:, 0].min()), int(b[:, 1].min())
        u1, v1 = min(w, int(b[:, 2].max())), min(h, int(b[:, 3].max()))
        # Always a copy: a full-width crop would otherwise be a view, holding the whole decoded
        # image until check-qa has run (and changing with it).
        return cls(h, w, u0, v0, img[v0:v1, u0:u1].copy())

    def covers(self, rles: Sequence[Mapping]) -> bool:
        """Whether every pixel of every mask (of this image's size) lies inside the patch."""
        sizes = {tuple(int(x) for x in r["size"]) for r in rles}
        if sizes - {(self.height_px, self.width_px)}:
            return False
        b = mask_bounds(rles)
        b = b[(b[:, 2] > b[:, 0]) & (b[:, 3] > b[:, 1])]
        h, w = self.rgb.shape[:2]
        return bool(
            np.all(
                (b[:, 0] >= self.u0)
                & (b[:, 1] >= self.v0)
                & (b[:, 2] <= self.u0 + w)
                & (b[:, 3] <= self.v0 + h)
            )
        )

    def image(self) -> np.ndarray:
        """(H, W, 3) uint8: the patch at its place, zeros elsewhere (only pixels inside the
        patch are to be read from it; the zeros are pages the system maps lazily)."""
        out = np.zeros((self.height_px, self.width_px, 3), np.uint8)
        h, w = self.rgb.shape[:2]
        out[self.v0 : self.v0 + h, self.u0 : self.u0 + w] = self.rgb
        return out


def decode_masks(rles: Sequence[Mapping]) -> np.ndarray:
    """(H, W, N) uint8 masks of N COCO RLE dicts of one image (one pycocotools call)."""
    coded = [
        {"size": list(r["size"]), "counts": r["counts"].encode("ascii")}
        if isinstance(r["counts"], str)
        else dict(r)
        for r in rles
    ]
    return mask_utils.decode(coded)


def view_colours(
    image_rgb: np.ndarray, rles: Sequence[Mapping], min_pixels: int = DEFAULT_MIN_PIXELS
) -> tuple[np.ndarray, np.ndarray]:
    """(N, 3) median Lab under N RLE masks of one image and (N,) their pixel counts."""
    if not len(rles):
        return np.zeros((0, 3)), np.zeros(0, np.int64)
    img = np.asarray(image_rgb)
    # The masks' pixels straight from their runs: no full-image mask per view.
    sizes = {tuple(int(x) for x in r["size"]) for r in rles}
    if sizes != {img.shape[:2]}:
        raise ValueError(f"image of {img.shape[:2]} pixels but masks of {sorted(sizes)}")
    # Each mask's pixels as float32 sRGB straight from its runs: no pixel lists, no image-sized
    # temporaries (a near car's mask holds ~10^6 pixels).
    unit_rgb, counts = rle_pixel_values(rles, img, UNIT_RGB)
    return median_lab_of_values(unit_rgb, counts, min_pixels), counts


def measure_region_colours(
    regions: Sequence[KeyframeRegions],
    read_image: ImageReader,
    min_pixels: int = DEFAULT_MIN_PIXELS,
) -> RegionColours:
    """The colour of every visible keyframe view of every region.

    Args:
        regions: the grounding of the QA keyframes.
        read_image: the RGB image of a camera at a frame (None where there is none: its views
            stay unmeasured).
        min_pixels: least mask pixels for a colour.
    """
    parts: dict[str, list] = {k: [] for k in ("kf", "tid", "cam", "lab", "px")}
    for kr in regions:
        at_key = np.flatnonzero(
            (kr.view_frame_index == kr.keyframe_index) & np.asarray(kr.view_visible, bool)
        )
        for cam in dict.fromkeys(kr.view_camera[at_key]):
            sel = at_key[kr.view_camera[at_key] == cam]
            image = read_image(str(cam), kr.keyframe_index)
            if image is None:
                continue
            lab, px = view_colours(image, [kr.view_mask_rle[i] for i in sel], min_pixels)
            parts["kf"].append(np.full(len(sel), kr.keyframe_index, np.int64))
            parts["tid"].append(kr.track_id[kr.view_region[sel]])
            parts["cam"].append(np.full(len(sel), cam, dtype=object))
            parts["lab"].append(lab)
            parts["px"].append(px)
    if not parts["kf"]:
        return RegionColours.empty()
    return RegionColours(
        keyframe=np.concatenate(parts["kf"]),
        track_id=np.concatenate(parts["tid"]),
        camera=np.concatenate(parts["cam"]),
        lab=np.concatenate(parts["lab"]),
        pixels=np.concatenate(parts["px"]),
    )


def best_view_colour(lab: np.ndarray, pixels: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """(..., 3) Lab of the allowed camera with the most mask pixels (NaN where none is measured).

    Args:
        lab: (..., C, 3) per-camera colours; pixels: (..., C); allowed: (..., C) bool.
    """
    px = np.where(np.asarray(allowed, bool) & np.all(np.isfinite(lab), axis=-1), pixels, -1)
    best = np.argmax(px, axis=-1)
    out = np.take_along_axis(lab, best[..., None, None], axis=-2)[..., 0, :]
    return np.where((np.max(px, axis=-1) > 0)[..., None], out, np.nan)
