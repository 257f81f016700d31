"""Constructed QA runs for benchmark, label-quality and report tests (no dataset needed).

``write_qa_run`` writes what the pipeline leaves per clip (``attributes.parquet``, ``qa.jsonl``,
``manifest.json`` naming the dataroot) from ``autolabel.qa.scenes.constant_velocity_scene``, and
``write_camera_images`` writes plain camera images where the records say they are, so the
benchmark export and the report can render their Set-of-Mark images.
"""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np

from autolabel.boxes import Boxes3D
from autolabel.classes import DETECTION_CLASSES
from autolabel.qa import QAConfig, generate_clip_qa, load_templates, write_qa_jsonl
from autolabel.qa.scenes import (
    CLASS_SIZES_WLH_M,
    QAScene,
    constant_velocity_scene,
    global_boxes_per_frame,
)


def write_camera_images(dataroot: Path, scene: QAScene) -> None:
    """A grey gradient image per camera and frame at the scene's image paths."""
    h, w = scene.rig.cameras[0].height_px, scene.rig.cameras[0].width_px
    base = np.zeros((h, w, 3), np.uint8)
    base[:] = np.linspace(60, 180, w, dtype=np.uint8)[None, :, None]
    for channel, paths in scene.meta.image_paths.items():
        for k, rel in enumerate(paths):
            path = dataroot / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            img = base.copy()
            cv2.putText(
                img, f"{channel} {k}", (5, 20), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (255, 255, 255)
            )
            cv2.imwrite(str(path), img)


def write_qa_run(
    run_dir: Path,
    scene: QAScene,
    dataroot: Path | None = None,
    config: QAConfig | None = None,
) -> list[dict]:
    """Write ``run_dir/<clip>/{attributes.parquet, qa.jsonl, manifest.json}``; return the records."""
    clip_dir = run_dir / scene.meta.clip
    clip_dir.mkdir(parents=True, exist_ok=True)
    records = generate_clip_qa(
        scene.attrs,
        scene.regions,
        scene.meta,
        # Ungated by default: every answerable question (counts too, which the gate holds back).
        config or QAConfig(seed=0, min_confidence=0.0),
        load_templates(),
    )
    scene.attrs.write_parquet(clip_dir / "attributes.parquet")
    write_qa_jsonl(clip_dir / "qa.jsonl", records)
    manifest = {
        "clip": scene.meta.clip,
        "inputs": {"dataroot": str(dataroot) if dataroot else None},
    }
    (clip_dir / "manifest.json").write_text(json.dumps(manifest))
    return records


def small_scene(seed: int = 0, n_objects: int = 10, clip: str = "scene-t-0001") -> QAScene:
    """A short constructed clip (12 s: QA keyframes at 2..9 s)."""
    return constant_velocity_scene(n_objects=n_objects, seed=seed, clip=clip, seconds=12.0)


def lane_tracks(
    n_objects: int = 10, seed: int = 0, seconds: float = 12.0
) -> tuple[np.ndarray, list[Boxes3D], dict[str, np.ndarray]]:
    """Frame times and per-frame global boxes of objects at constant velocity in lanes (as
    ``constant_velocity_scene``), and the parameters that made them (to perturb them)."""
    rng = np.random.default_rng(seed)
    time_s = np.arange(0.0, seconds, 0.5)
    classes = np.array(DETECTION_CLASSES)
    label = rng.choice([0, 0, 0, 1, 3, 5, 5, 6, 7], size=n_objects)
    sizes = np.array([CLASS_SIZES_WLH_M[classes[k]] for k in label]) * rng.uniform(
        0.9, 1.1, size=(n_objects, 3)
    )
    start_xy = np.stack(
        [rng.uniform(-30.0, 60.0, n_objects), rng.choice([-7.0, -3.5, 3.5, 7.0], n_objects)], 1
    )
    velocity = np.stack([rng.uniform(-6.0, 10.0, n_objects), np.zeros(n_objects)], 1)
    params = {"label": label, "sizes": sizes, "start_xy": start_xy, "velocity": velocity}
    tracks = global_boxes_per_frame(time_s, start_xy, velocity, label, sizes)
    return time_s, tracks, params
