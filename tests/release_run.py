"""Small run folders for release tests: a synthetic dataset, labelled with its own annotations.

Builds, per clip, what ``autolabel run`` writes and a release reads (``labels/detection.json``,
``labels/tracking.json``, ``attributes.parquet``, ``qa.jsonl``, ``manifest.json`` naming the
dataroot), from the real stages: ground-truth boxes as tracks, ``compute_attributes``, projected
grounding, ``generate_clip_qa``. No segmentation or marks: the release draws its own.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from autolabel.atomic_io import atomic_write_json
from autolabel.attributes import compute_attributes
from autolabel.nuscenes_reader import list_clips, open_dataset, read_clip
from autolabel.pipeline import inputs_digest
from autolabel.qa import ClipQAMeta, QAConfig, generate_clip_qa, write_qa_jsonl
from autolabel.qa.projected_grounding import regions_from_projection
from autolabel.qa.sampling import select_keyframes
from detectors.detection_results import submission_meta, write_detection_submission
from trackers.tracking_results import write_tracking_submission


def make_synth_dataset(root: Path, scenes: int = 2, seconds: float = 6.0, seed: int = 3) -> Path:
    """A small synthetic nuScenes dataset (320 x 180 images) at ``root``."""
    from autolabel.synth.config import SynthConfig
    from autolabel.synth.generator import generate_dataset

    config = SynthConfig(scenes=scenes, seed=seed, seconds=seconds, width_px=320, height_px=180)
    generate_dataset(root, config, overwrite=True)
    return root


def build_run(dataroot: Path, run_dir: Path, version: str = "v1.0-mini", seed: int = 0) -> Path:
    """A run folder for every clip of the dataset; QA keyframes from 2 s on at 1 Hz."""
    nusc = open_dataset(dataroot, version)
    qa_config = QAConfig(seed=seed)
    for name in list_clips(nusc):
        clip = read_clip(nusc, name)
        clip_dir = Path(run_dir) / name
        tokens = [f.token for f in clip.frames]
        tracks = [f.ground_truth.boxes for f in clip.frames]
        times = np.array([f.time_s for f in clip.frames])
        write_detection_submission(
            clip_dir / "labels" / "detection.json", tokens, tracks, submission_meta(use_lidar=True)
        )
        write_tracking_submission(clip_dir / "labels" / "tracking.json", tokens, tracks)
        attrs = compute_attributes(times, [f.global_SE3_ego for f in clip.frames], tracks)
        attrs.write_parquet(clip_dir / "attributes.parquet")
        windows = select_keyframes(times, qa_config)
        frames = [
            [int(f) for f in list(ctx) + list(fut) if f >= 0]
            for ctx, fut in zip(windows.context, windows.future, strict=True)
        ]
        cameras = [clip.frames[0].cameras[c].calibration for c in clip.frames[0].cameras]
        regions = regions_from_projection(attrs, cameras, windows.keyframe, frames)
        records = generate_clip_qa(attrs, regions, ClipQAMeta.from_clip(clip), qa_config)
        write_qa_jsonl(clip_dir / "qa.jsonl", records)
        atomic_write_json(
            clip_dir / "manifest.json",
            {
                "clip": name,
                "inputs": inputs_digest(clip),
                "seed": seed,
            },
            indent=1,
        )
    return Path(run_dir)
