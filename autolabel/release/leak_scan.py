"""Scan a release folder for identifying metadata; the release build fails on any finding.

What counts as a leak:

- ``token``: 32 hex digits in either case (the shape of every nuScenes token), also written as a
  dashed UUID (8-4-4-4-12);
- ``log_name``: a date-time stamp as in log names (``2018-07-24-11-22-45``), with any of ``-``,
  ``_``, ``.``, ``:``, ``T`` or spaces between its parts, or an ISO date-time;
- ``timestamp``: a number that reads as an epoch time in seconds, milliseconds or microseconds
  (2001 - 2096; in text: 10 digits with or without a fraction, 13 or 16 digits), or any number
  >= 1e9 under a key that names a time;
- ``forbidden_key``: a key or column named like a token, timestamp, log, pose, GPS or location
  field (``sample_token``, ``timestamp``, ``log_name``, ``ego_pose``, ``translation``,
  ``latitude`` ...);
- ``known_value``: any of the caller's forbidden strings (the run's clip names, tokens, log names,
  image file names, dataroot), in any letter case;
- ``exif`` / ``image_metadata``: EXIF, XMP or comment segments in a JPEG, text / time / EXIF chunks
  in a PNG;
- ``tar_header``: a tar member with a modification time, owner or group.

Where: JSON (``.json``, ``.jsonl``) is walked key by key (RLE mask ``counts`` strings are
compressed binary, not text, and are skipped); Parquet files by column name, schema metadata, each
string cell (JSON-string cells walked as JSON) and each embedded image; tar members by name,
header and content; images by their segments; any other file as UTF-8 text.
"""

from __future__ import annotations

import io
import json
import re
import struct
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOKEN_RE = re.compile(
    r"(?<![0-9a-fA-F-])(?:[0-9a-fA-F]{32}|[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12})"
    r"(?![0-9a-fA-F])"
)
_SEP = r"[-_.: T/]"
LOG_STAMP_RE = re.compile(
    rf"(?<!\d)(?:\d{{4}}{_SEP}\d{{2}}{_SEP}\d{{2}}{_SEP}+\d{{2}}{_SEP}\d{{2}}(?:{_SEP}\d{{2}})?)(?!\d)"
)
# Not inside a longer alphanumeric run (hex digests), but after "_" as in nuScenes file names:
# epoch microseconds (16 digits), milliseconds (13) and seconds (10, maybe with a fraction).
EPOCH_US_RE = re.compile(
    r"(?<![0-9A-Za-z.])(?:[1-3][0-9]{15}|[1-3][0-9]{12}|(?:9[7-9][0-9]|[1-3][0-9]{2})[0-9]{7}"
    r"(?:\.[0-9]+)?)(?![0-9A-Za-z])"
)
#: Epoch times 2001-01-01 .. 2096 in seconds, milliseconds and microseconds.
_EPOCH_RANGES = ((978_307_200, 4e9), (978_307_200e3, 4e12), (978_307_200e6, 4e15))
FORBIDDEN_KEYS = frozenset(
    {
        "token", "sample_token", "scene_token", "sample_data_token", "instance_token",
        "annotation_token", "ego_pose_token", "calibrated_sensor_token", "log_token",
        "timestamp", "timestamp_us", "timestamp_ns", "utime", "time_us", "date", "date_captured",
        "datetime", "log", "log_name", "logfile", "vehicle", "location", "ego_pose",
        "global_se3_ego", "translation", "rotation", "latitude", "longitude", "lat", "lon", "gps",
        "utm", "dataroot", "filename", "file_name", "scene_name",
    }
)  # fmt: skip
#: JSON keys whose string values are binary payloads (COCO RLE), not text.
_BINARY_KEYS = frozenset({"counts"})
_TIME_KEY_RE = re.compile(r"time|stamp|date", re.IGNORECASE)
_IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png"}
_JSON_SUFFIXES = {".json", ".jsonl"}


@dataclass(frozen=True)
class Leak:
    """One finding: the release-relative file, where in it, the kind of leak, an excerpt."""

    path: str
    where: str
    kind: str
    excerpt: str

    def __str__(self) -> str:
        return f"{self.path} [{self.where}] {self.kind}: {self.excerpt}"


class ReleaseLeakError(RuntimeError):
    """A release contains identifying metadata; ``leaks`` lists every finding."""

    def __init__(self, leaks: list[Leak]) -> None:
        self.leaks = leaks
        shown = "\n".join(str(x) for x in leaks[:20])
        more = f"\n... and {len(leaks) - 20} more" if len(leaks) > 20 else ""
        super().__init__(f"release leak scan found {len(leaks)} leak(s):\n{shown}{more}")


class _Scanner:
    def __init__(self, forbidden_values: Iterable[str]) -> None:
        values = sorted({v for v in forbidden_values if v and len(v) >= 4}, key=len, reverse=True)
        self._known = (
            re.compile("|".join(re.escape(v) for v in values), re.IGNORECASE) if values else None
        )
        self.leaks: list[Leak] = []

    def _add(self, path: str, where: str, kind: str, excerpt: str) -> None:
        self.leaks.append(Leak(path, where, kind, excerpt[:120]))

    def text(self, path: str, where: str, text: str) -> None:
        for kind, regex in (("token", TOKEN_RE), ("log_name", LOG_STAMP_RE)):
            for m in regex.finditer(text):
                self._add(path, where, kind, m.group(0))
        for m in EPOCH_US_RE.finditer(text):
            self._add(path, where, "timestamp", m.group(0))
        if self._known is not None:
            for m in self._known.finditer(text):
                self._add(path, where, "known_value", m.group(0))

    def key(self, path: str, where: str, key: str) -> None:
        if key.lower() in FORBIDDEN_KEYS:
            self._add(path, where, "forbidden_key", key)
        else:
            self.text(path, f"{where} (key)", key)

    def value(self, path: str, where: str, value: Any, key: str = "") -> None:
        """Walk a JSON-like value."""
        if isinstance(value, dict):
            for k, v in value.items():
                self.key(path, where, str(k))
                if str(k) in _BINARY_KEYS:
                    continue
                self.value(path, f"{where}.{k}", v, str(k))
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                self.value(path, f"{where}[{i}]", v, key)
        elif isinstance(value, str):
            if value[:1] in ("{", "["):
                self.json_text(path, where, value)  # a JSON document held in a string
            else:
                self.text(path, where, value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            if abs(value) >= 1e15 and float(value).is_integer():
                self._add(path, where, "timestamp", repr(value))
            elif any(lo <= abs(value) < hi for lo, hi in _EPOCH_RANGES):
                self._add(path, where, "timestamp", repr(value))
            elif key and _TIME_KEY_RE.search(key) and abs(value) >= 1e9:
                self._add(path, where, "timestamp", f"{key}={value!r}")

    def json_text(self, path: str, where: str, text: str) -> None:
        try:
            self.value(path, where, json.loads(text))
        except ValueError:
            self.text(path, where, text)

    def image(self, path: str, where: str, data: bytes) -> None:
        for kind, what in image_metadata_segments(data):
            self._add(path, where, kind, what)

    def tar(self, path: str, data: bytes) -> None:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for member in tar.getmembers():
                name = member.name
                self.text(path, f"member {name}", name)
                if member.mtime or member.uname or member.gname or member.uid or member.gid:
                    self._add(
                        path,
                        f"member {name}",
                        "tar_header",
                        f"mtime={member.mtime} uid={member.uid} gid={member.gid} "
                        f"uname={member.uname!r} gname={member.gname!r}",
                    )
                if member.isfile():
                    content = tar.extractfile(member).read()
                    self.payload(path, f"member {name}", Path(name).suffix.lower(), content)

    def payload(self, path: str, where: str, suffix: str, data: bytes) -> None:
        if suffix in _IMAGE_SUFFIXES:
            self.image(path, where, data)
        elif suffix in _JSON_SUFFIXES:
            text = data.decode("utf-8", errors="replace")
            if suffix == ".jsonl":
                for i, line in enumerate(text.splitlines()):
                    if line.strip():
                        self.json_text(path, f"{where} line {i + 1}", line)
            else:
                self.json_text(path, where, text)
        elif suffix == ".parquet":
            self.parquet(path, data)
        elif suffix == ".tar":
            self.tar(path, data)
        else:
            self.text(path, where, data.decode("utf-8", errors="replace"))

    def parquet(self, path: str, data: bytes) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pq.read_table(io.BytesIO(data))
        for k, v in (table.schema.metadata or {}).items():
            self.text(path, "schema metadata", k.decode("utf-8", "replace"))
            self.json_text(path, "schema metadata", v.decode("utf-8", "replace"))
        for name in table.column_names:
            self.key(path, f"column {name}", name)
            col = table.column(name)
            self._arrow_values(path, f"column {name}", col.type, col.to_pylist(), name, pa)

    def _arrow_values(self, path, where, typ, values, name, pa) -> None:
        if pa.types.is_struct(typ):
            for field in typ:
                self.key(path, f"{where}.{field.name}", field.name)
                sub = [None if v is None else v.get(field.name) for v in values]
                self._arrow_values(path, f"{where}.{field.name}", field.type, sub, field.name, pa)
        elif pa.types.is_list(typ) or pa.types.is_large_list(typ):
            flat = [x for v in values if v is not None for x in v]
            self._arrow_values(path, where, typ.value_type, flat, name, pa)
        elif pa.types.is_binary(typ) or pa.types.is_large_binary(typ):
            for i, v in enumerate(values):
                if v is not None and is_image_bytes(v):
                    self.image(path, f"{where} row {i}", v)
        elif pa.types.is_string(typ) or pa.types.is_large_string(typ):
            for i, v in enumerate(values):
                if v is None:
                    continue
                if v[:1] in ("{", "["):
                    self.json_text(path, f"{where} row {i}", v)
                else:
                    self.text(path, f"{where} row {i}", v)
        elif pa.types.is_integer(typ) or pa.types.is_floating(typ):
            for i, v in enumerate(values):
                if v is not None:
                    self.value(path, f"{where} row {i}", v, name)


def is_image_bytes(data: bytes) -> bool:
    return data[:3] == b"\xff\xd8\xff" or data[:8] == b"\x89PNG\r\n\x1a\n"


def image_metadata_segments(data: bytes) -> list[tuple[str, str]]:
    """Metadata a JPEG or PNG carries beyond pixels: [(kind, description)], empty when clean.

    JPEG: APP1 (EXIF, XMP), APP2 - APP15 (other than ICC profiles), COM comments; the JFIF APP0
    header is allowed. PNG: tEXt, zTXt, iTXt, eXIf and tIME chunks.
    """
    found: list[tuple[str, str]] = []
    if data[:2] == b"\xff\xd8":
        i = 2
        while i + 4 <= len(data):
            if data[i] != 0xFF:
                break
            marker = data[i + 1]
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                i += 2
                continue
            if marker in (0xDA, 0xD9):  # start of scan: no metadata after it
                break
            (length,) = struct.unpack(">H", data[i + 2 : i + 4])
            payload = data[i + 4 : i + 2 + length]
            if marker == 0xE1:
                kind = "exif" if payload.startswith(b"Exif") else "image_metadata"
                found.append((kind, f"JPEG APP1 {payload[:20]!r}"))
            elif marker == 0xFE:
                found.append(("image_metadata", f"JPEG comment {payload[:40]!r}"))
            elif 0xE2 <= marker <= 0xEF and not payload.startswith(b"ICC_PROFILE"):
                found.append(("image_metadata", f"JPEG APP{marker - 0xE0} {payload[:20]!r}"))
            i += 2 + length
    elif data[:8] == b"\x89PNG\r\n\x1a\n":
        i = 8
        while i + 8 <= len(data):
            length, ctype = struct.unpack(">I4s", data[i : i + 8])
            if ctype in (b"tEXt", b"zTXt", b"iTXt", b"tIME"):
                found.append(
                    (
                        "image_metadata",
                        f"PNG {ctype.decode()} {data[i + 8 : i + 8 + min(length, 40)]!r}",
                    )
                )
            elif ctype == b"eXIf":
                found.append(("exif", "PNG eXIf chunk"))
            i += 12 + length
    return found


def scan_release(release_dir: str | Path, forbidden_values: Iterable[str] = ()) -> list[Leak]:
    """Every leak in every file under ``release_dir`` (see the module docstring).

    Args:
        release_dir: the release folder.
        forbidden_values: strings that must appear nowhere (clip names, tokens, log names, ...).
    """
    root = Path(release_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such release folder")
    scanner = _Scanner(forbidden_values)
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        scanner.text(rel, "file name", rel)
        scanner.payload(rel, "content", path.suffix.lower(), path.read_bytes())
    return scanner.leaks
