"""Writing a nuScenes v1.0 dataset: deterministic tokens, the 13 tables, sensor files, map masks.

Tokens are 32 hex digits of a SHA-1 over a dataset salt and the record's identity (no uuid, no
clock), so the same generation gives the same tokens. Tables are written last, atomically, as
JSON lists in insertion order.
"""

from __future__ import annotations

import hashlib
import json
import struct
import zlib
from pathlib import Path

import cv2
import numpy as np

from autolabel.atomic_io import atomic_write_bytes
from autolabel.synth.catalogue import NUSCENES_ATTRIBUTES, NUSCENES_CATEGORIES, NUSCENES_VISIBILITY

#: The tables of a nuScenes v1.0 release, in the devkit's load order.
TABLE_NAMES: tuple[str, ...] = (
    "category",
    "attribute",
    "visibility",
    "instance",
    "sensor",
    "calibrated_sensor",
    "ego_pose",
    "log",
    "scene",
    "sample",
    "sample_data",
    "sample_annotation",
    "map",
)


def make_token(salt: str, *identity: object) -> str:
    """A 32-hex-digit token from a salt and a record's identity (stable across runs)."""
    key = "/".join([salt, *(str(part) for part in identity)])
    return hashlib.sha1(key.encode("utf-8")).hexdigest()[:32]


def _floats(values: np.ndarray, digits: int = 6) -> list[float]:
    """JSON-ready rounded floats (negative zero folded to zero)."""
    return [float(v) + 0.0 for v in np.round(np.asarray(values, dtype=np.float64), digits)]


class NuScenesTables:
    """Collects table records; ``write`` stores them under ``dataroot/version``.

    The static tables (category, attribute, visibility) are filled on construction with the
    nuScenes v1.0 vocabularies; their tokens are derived from the names (visibility tokens are
    '1'..'4' as in nuScenes).
    """

    def __init__(self, salt: str) -> None:
        self.salt = salt
        self.tables: dict[str, list[dict]] = {name: [] for name in TABLE_NAMES}
        for name, description in NUSCENES_CATEGORIES:
            self.tables["category"].append(
                {"token": self.category_token(name), "name": name, "description": description}
            )
        for name, description in NUSCENES_ATTRIBUTES:
            self.tables["attribute"].append(
                {"token": self.attribute_token(name), "name": name, "description": description}
            )
        for token, level, description in NUSCENES_VISIBILITY:
            self.tables["visibility"].append(
                {"token": token, "level": level, "description": description}
            )

    def token(self, *identity: object) -> str:
        return make_token(self.salt, *identity)

    def category_token(self, name: str) -> str:
        return make_token("nuscenes-category", name)

    def attribute_token(self, name: str) -> str:
        return make_token("nuscenes-attribute", name)

    def add(self, table: str, record: dict) -> None:
        self.tables[table].append(record)

    def ego_pose(self, token: str, timestamp_us: int, translation, rotation_wxyz) -> None:
        self.add(
            "ego_pose",
            {
                "token": token,
                "timestamp": int(timestamp_us),
                "translation": _floats(translation),
                "rotation": _floats(rotation_wxyz, 9),
            },
        )

    def calibrated_sensor(
        self, token: str, sensor_token: str, translation, rotation_wxyz, intrinsic
    ) -> None:
        self.add(
            "calibrated_sensor",
            {
                "token": token,
                "sensor_token": sensor_token,
                "translation": _floats(translation),
                "rotation": _floats(rotation_wxyz, 9),
                "camera_intrinsic": [] if intrinsic is None else [_floats(r) for r in intrinsic],
            },
        )

    def write(self, table_root: Path) -> None:
        """Write every table to ``table_root/<name>.json`` atomically."""
        for name in TABLE_NAMES:
            text = json.dumps(self.tables[name], indent=0, sort_keys=True, allow_nan=False)
            atomic_write_bytes(table_root / f"{name}.json", (text + "\n").encode("utf-8"))


def encode_jpeg(rgb: np.ndarray, quality: int) -> bytes:
    """JPEG bytes of an (H, W, 3) uint8 RGB image (OpenCV, baseline)."""
    bgr = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2BGR)
    ok, buf = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    if not ok:
        raise RuntimeError("OpenCV could not encode a JPEG")
    return buf.tobytes()


def _png_chunk(tag: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(tag + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", crc)


def encode_png_gray(image: np.ndarray) -> bytes:
    """Lossless PNG bytes of an (H, W) single-channel image: bool (1-bit), uint8 or uint16.

    A minimal encoder (no row filters, zlib level 1): label buffers and
    masks are mostly runs of one value, which this compresses well and several times faster than
    libpng's adaptive filtering. Any PNG reader decodes it (OpenCV reads 1-bit images as 0 / 255,
    Pillow as mode "1"; the devkit's MapMask reads the 8-bit map masks).
    """
    img = np.asarray(image)
    if img.ndim != 2 or img.dtype not in (np.bool_, np.uint8, np.uint16):
        raise ValueError(f"encode_png_gray: need (H, W) bool, uint8 or uint16, got {img.dtype} {img.shape}")  # fmt: skip
    height, width = img.shape
    if img.dtype == np.bool_:
        depth, packed = 1, np.packbits(img, axis=1)
    else:
        depth = 8 * img.dtype.itemsize
        packed = img.astype(img.dtype.newbyteorder(">"), copy=False).view(np.uint8)
        packed = packed.reshape(height, -1)
    rows = np.zeros((height, packed.shape[1] + 1), np.uint8)  # filter byte 0 (none) per row
    rows[:, 1:] = packed
    packer = zlib.compressobj(1)
    idat = packer.compress(rows.tobytes()) + packer.flush()
    header = struct.pack(">IIBBBBB", width, height, depth, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", idat)
        + _png_chunk(b"IEND", b"")
    )


def write_pcd_bin(path: Path, points: np.ndarray) -> None:
    """A nuScenes ``.pcd.bin``: (P, 5) float32 x, y, z, intensity, ring, row-major."""
    pts = np.ascontiguousarray(points, dtype=np.float32)
    if pts.ndim != 2 or pts.shape[1] != 5:
        raise ValueError(f"{path}: LiDAR points must be (P, 5), got {pts.shape}")
    atomic_write_bytes(path, pts.tobytes())
