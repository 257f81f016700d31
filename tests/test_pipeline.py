"""``autolabel run`` end to end on tiny synthetic clips: outputs, manifest, resume, determinism,
bad clips reported while the others complete."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import cv2
import numpy as np
import pyarrow.parquet as pq
import pytest
from nuscenes.nuscenes import NuScenes
from pipeline_data import (
    HEIGHT_PX,
    VERSION,
    WIDTH_PX,
    assert_same_outputs,
    fast_config,
    make_dataset,
    output_tree,
)
from pycocotools import mask as mask_utils

from autolabel.config import ConfigError, config_to_dict, load_run_config
from autolabel.nuscenes_reader import DatasetError, open_dataset, read_clip
from autolabel.pipeline import MANIFEST, SUMMARY, inputs_digest, outputs_complete, run_pipeline
from autolabel.qa.check import check_qa_run
from autolabel.sensors import CAMERA_CHANNELS
from autolabel.stages import STAGE_NAMES

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    summary = make_dataset(root, scenes=4)
    return root, summary["scenes"]


@pytest.fixture(scope="module")
def first_run(dataset, tmp_path_factory):
    """The first two clips, run once; tests copy it before changing anything."""
    root, scenes = dataset
    out = tmp_path_factory.mktemp("run")
    summary = run_pipeline(root, VERSION, out, scenes[:2], fast_config(), progress=False)
    return out, summary


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _scene_input_files(nusc: NuScenes, scene_name: str, max_sweeps: int) -> set[str]:
    """Keyframe LiDAR files with up to ``max_sweeps - 1`` earlier sweeps, and camera images."""
    scene = next(s for s in nusc.scene if s["name"] == scene_name)
    files, token = set(), scene["first_sample_token"]
    while token:
        sample = nusc.get("sample", token)
        for channel, sd_token in sample["data"].items():
            sd = nusc.get("sample_data", sd_token)
            files.add(sd["filename"])
            if channel == "LIDAR_TOP":
                for _ in range(max_sweeps - 1):
                    if not sd["prev"]:
                        break
                    sd = nusc.get("sample_data", sd["prev"])
                    files.add(sd["filename"])
        token = sample["next"]
    return files


def test_every_output_and_the_manifest(dataset, first_run):
    root, scenes = dataset
    out, summary = first_run
    assert [c.status for c in summary.clips] == ["done", "done"], [c.error for c in summary.clips]
    nusc = NuScenes(VERSION, str(root), verbose=False)
    config = fast_config()
    run_summary = json.loads((out / SUMMARY).read_text())
    assert [c["clip"] for c in run_summary["clips"]] == scenes[:2]
    qa_records = 0
    for name in scenes[:2]:
        clip_dir = out / name
        manifest = json.loads((clip_dir / MANIFEST).read_text())
        # Inputs: every sensor file the devkit lists for the scene.
        expected = _scene_input_files(nusc, name, config.read.max_sweeps)
        assert manifest["inputs"]["files"] == len(expected)
        assert manifest["inputs"]["dataroot"] == str(Path(root).resolve())
        assert len(manifest["inputs"]["file_sha256"]) == len(expected)
        assert manifest["config"] == config_to_dict(config)
        assert manifest["seed"] == config.seed
        assert manifest["versions"]["numpy"] == np.__version__
        assert set(manifest["stages"]) == set(STAGE_NAMES)
        # Outputs: exactly the files of the folder, each with its hash.
        on_disk = {
            p.relative_to(clip_dir).as_posix() for p in clip_dir.rglob("*") if p.is_file()
        } - {MANIFEST}
        assert set(manifest["outputs"]) == on_disk
        for rel, digest in manifest["outputs"].items():
            assert _sha256(clip_dir / rel) == digest

        # Detections and tracks: one entry per keyframe, counts as the manifest says.
        samples = [
            s["token"] for s in nusc.sample if s["scene_token"] == manifest["inputs"]["scene_token"]
        ]
        # The detector's own boxes are kept beside the refined ones (``refine: track``).
        online = json.loads((clip_dir / "labels/detection_online.json").read_text())
        assert sorted(online["results"]) == sorted(samples)
        n_boxes = sum(len(v) for v in online["results"].values())
        assert manifest["stages"]["detect"]["counts"]["boxes"] == n_boxes
        detection = json.loads((clip_dir / "labels/detection.json").read_text())
        assert sorted(detection["results"]) == sorted(samples)
        n_refined = sum(len(v) for v in detection["results"].values())
        assert manifest["stages"]["refine"]["counts"]["boxes_out"] == n_refined
        tracking = json.loads((clip_dir / "labels/tracking.json").read_text())
        assert sorted(tracking["results"]) == sorted(samples)
        refined_ids = {b["tracking_id"] for v in tracking["results"].values() for b in v}
        assert len(refined_ids) <= manifest["stages"]["refine"]["counts"]["tracks_out"]

        # Masks: one file per keyframe; RLEs decode to the image size.
        views = []
        for f in range(len(samples)):
            doc = json.loads((clip_dir / f"masks/{f:03d}.json").read_text())
            assert doc["frame_index"] == f
            views += doc["objects"]
        assert views
        rles = [
            {"size": v["mask_rle"]["size"], "counts": v["mask_rle"]["counts"].encode()}
            for v in views
        ]
        assert mask_utils.decode(rles).shape == (HEIGHT_PX, WIDTH_PX, len(views))
        boxes = np.array([v["box_px"] for v in views])
        assert np.all(boxes[:, [0, 1]] >= 0)
        assert np.all(boxes[:, 2] <= WIDTH_PX) and np.all(boxes[:, 3] <= HEIGHT_PX)
        assert manifest["stages"]["segment"]["counts"]["masks"] == len(views)

        # Visibility: one decision per view, the first failing rule named for each rejection.
        table = pq.read_table(clip_dir / "visibility.parquet").to_pandas()
        assert len(table) == len(views)
        kept = int(table["keep"].sum())
        assert manifest["stages"]["visibility"]["counts"]["kept"] == kept
        assert (table["rejected_by"] == "").sum() == kept
        assert set(table.loc[~table["keep"], "rejected_by"]) <= {
            "IN_IMAGE", "LIDAR_POINTS", "MASK_SCORE", "BOX_IOU", "COVERAGE", "TRACK_SCORE",
            "IMAGE_EVIDENCE", "VISIBLE_PIXELS", "HULL_OCCLUDED", "LIDAR_OCCLUDED",
        }  # fmt: skip
        vis_summary = json.loads((clip_dir / "visibility_summary.json").read_text())
        assert vis_summary["kept"] == kept and vis_summary["candidates"] == len(views)

        # Marks: six cameras and the stitched view per QA keyframe; ids 0..R-1.
        regions = json.loads((clip_dir / "marks/regions.json").read_text())["keyframes"]
        assert regions
        region_track = {}
        for kf in regions:
            ids = [r["region_id"] for r in kf["regions"]]
            assert ids == list(range(len(ids)))
            for channel in CAMERA_CHANNELS:
                assert (clip_dir / f"marks/{kf['frame_index']:03d}_{channel}.png").is_file()
            stitched = clip_dir / f"marks/{kf['frame_index']:03d}_stitched.png"
            assert cv2.imread(str(stitched)).shape == (2 * HEIGHT_PX, 3 * WIDTH_PX, 3)
            region_track.update(
                {(kf["frame_index"], r["region_id"]): r["track_id"] for r in kf["regions"]}
            )

        # QA: grounded in the marks' region ids.
        records = [json.loads(line) for line in (clip_dir / "qa.jsonl").read_text().splitlines()]
        assert records and manifest["stages"]["qa"]["counts"]["records"] == len(records)
        for rec in records:
            for reg in rec["regions"]:
                key = (rec["keyframe"]["frame_index"], reg["region_id"])
                assert region_track[key] == reg["track_id"]
        qa_records += len(records)
    report = check_qa_run(out)
    assert report.ok and sum(report.records.values()) == qa_records


def test_rerun_skips_complete_clips_and_redoes_broken_ones(dataset, first_run, tmp_path):
    root, scenes = dataset
    out = tmp_path / "run"
    shutil.copytree(first_run[0], out)
    before = output_tree(out)
    mtimes = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}

    again = run_pipeline(root, VERSION, out, scenes[:2], fast_config(), progress=False)
    assert [c.status for c in again.clips] == ["skipped", "skipped"]
    assert all(p.stat().st_mtime_ns == t for p, t in mtimes.items() if p.name != SUMMARY)

    # A changed config is not "complete"; neither is a clip whose output was altered, nor one
    # whose manifest is gone (a run killed in the middle of it), which also has a stray temp file.
    clip_a, clip_b = out / scenes[0], out / scenes[1]
    inputs = inputs_digest(read_clip(open_dataset(root, VERSION), scenes[0]))
    assert outputs_complete(clip_a, fast_config(), inputs)
    assert not outputs_complete(clip_a, fast_config(seed=1), inputs)
    (clip_a / "masks/003.json").write_text("{}")
    (clip_b / MANIFEST).unlink()
    (clip_b / "masks/.000.json.x1y2.tmp").write_text("partial")
    redone = run_pipeline(root, VERSION, out, scenes[:2], fast_config(), progress=False)
    assert [c.status for c in redone.clips] == ["done", "done"]
    assert output_tree(out) == before

    # --force recomputes a complete clip: same bytes.
    forced = run_pipeline(root, VERSION, out, scenes[:1], fast_config(), force=True, progress=False)
    assert [c.status for c in forced.clips] == ["done"]
    assert output_tree(out) == before


def test_same_inputs_and_config_give_the_same_bytes(dataset, first_run, tmp_path):
    root, scenes = dataset
    run_pipeline(root, VERSION, tmp_path / "second", scenes[:2], fast_config(), progress=False)
    assert_same_outputs(first_run[0], tmp_path / "second")


def test_bad_clips_are_reported_and_the_others_complete(dataset, tmp_path):
    source, scenes = dataset
    root = tmp_path / "data"
    shutil.copytree(source, root)
    nusc = NuScenes(VERSION, str(root), verbose=False)

    def sample_data(scene: str, frame: int, channel: str) -> dict:
        token = next(s for s in nusc.scene if s["name"] == scene)["first_sample_token"]
        for _ in range(frame):
            token = nusc.get("sample", token)["next"]
        return nusc.get("sample_data", nusc.get("sample", token)["data"][channel])

    # Clip 0: a truncated point cloud.
    lidar = root / sample_data(scenes[0], 2, "LIDAR_TOP")["filename"]
    data = lidar.read_bytes()
    lidar.write_bytes(data[: len(data) - 7])
    # Clip 1: a missing camera image loses that image's views only.
    image = root / sample_data(scenes[1], 1, "CAM_FRONT")["filename"]
    image.unlink()
    # Clip 3: a broken record of a JSON table (an ego pose without its rotation).
    pose_token = sample_data(scenes[3], 0, "CAM_BACK")["ego_pose_token"]
    table_path = root / VERSION / "ego_pose.json"
    table = json.loads(table_path.read_text())
    next(r for r in table if r["token"] == pose_token).pop("rotation")
    table_path.write_text(json.dumps(table))

    out = tmp_path / "run"
    summary = run_pipeline(root, VERSION, out, None, fast_config(), progress=False)
    status = {c.clip: c for c in summary.clips}
    assert status[scenes[2]].status == "done"
    assert (out / scenes[2] / MANIFEST).is_file()
    assert status[scenes[1]].status == "done"
    summary_1 = json.loads((out / scenes[1] / "visibility_summary.json").read_text())
    assert [(u["frame_index"], u["camera"]) for u in summary_1["unreadable_images"]] == [
        (1, "CAM_FRONT")
    ]
    assert str(image) in summary_1["unreadable_images"][0]["error"]
    lost = pq.read_table(out / scenes[1] / "visibility.parquet").to_pandas()
    lost = lost[~lost.image_readable]
    assert len(lost) and set(lost.camera) == {"CAM_FRONT"} and set(lost.frame_index) == {1}
    assert (lost.rejected_by == "IMAGE").all()
    expected = {
        scenes[0]: (str(lidar), "not a whole number"),
        scenes[3]: (str(table_path), "rotation"),
    }
    recorded = {c["clip"]: c for c in json.loads((out / SUMMARY).read_text())["clips"]}
    for name, (file, words) in expected.items():
        assert status[name].status == "failed"
        error = recorded[name]["error"]
        assert error["stage"] == "read"
        assert error["file"] == file
        assert words in error["message"]
        assert not (out / name / MANIFEST).exists()

    # A table that is not JSON at all breaks every clip: the run stops and names the file.
    (root / VERSION / "sample_annotation.json").write_text("[{")
    with pytest.raises(DatasetError, match="sample_annotation.json"):
        run_pipeline(root, VERSION, tmp_path / "run2", None, fast_config(), progress=False)


def test_config_errors_name_the_key(tmp_path):
    path = tmp_path / "run.yaml"
    cases = {
        "visibility: {min_box_iou: 2}": "visibility",
        "segment: {min_box_px: -1}": "segment",
        "detector_options: {num_sweeps: 0}": "detector_options",
        "segmenter: nope": "segmenter",
        "segmenter_options: {not_a_key: 1}": "not_a_key",
        "qa: {seed: 3}": "qa.seed",
        "ray: {segment_batch_images: 0}": "segment_batch_images",
        "marks_stitched_width_px: 2": "marks_stitched_width_px",
        "cv_threads: -1": "cv_threads",
    }
    for text, key in cases.items():
        path.write_text(text)
        with pytest.raises(ConfigError, match=key) as info:
            load_run_config(path)
        assert str(path) in str(info.value)
    path.write_text("segmenter: lidar\nray: {detect_actors: 2}\nmarks: {font_scale: 0.5}\n")
    config, ray = load_run_config(path, detector="gt")
    assert (config.detector, config.marks.font_scale, ray.detect_actors) == ("gt", 0.5, 2)


def test_bare_ray_option_means_a_local_cluster():
    from autolabel.cli import with_optional_values

    assert with_optional_values(["run", "D", "--ray"]) == ["run", "D", "--ray=local"]
    assert with_optional_values(["run", "D", "--ray", "--force"]) == [
        "run", "D", "--ray=local", "--force"
    ]  # fmt: skip
    assert with_optional_values(["run", "D", "--ray", "auto"]) == ["run", "D", "--ray", "auto"]


def test_stage_clock_counts_numba_compilation_apart_from_work():
    """A kernel's first call compiles (start-up, not work); its second call compiles nothing."""
    import numba

    from autolabel.stage_clock import timed

    @numba.njit
    def triple(x):
        return 3 * x

    value, first, error = timed(lambda: triple(2))
    assert (value, error) == (6, None)
    assert first.compile_s > 0
    value, second, _ = timed(lambda: triple(5))
    assert value == 15 and second.compile_s == 0.0

    def broken():
        raise ValueError("bad clip")

    value, lap, error = timed(broken)
    assert value is None and isinstance(error, ValueError) and lap.compile_s == 0.0
