"""Anonymization figures beside the previous approach, throughput, and release build time.

    python bench/bench_release.py [--pandaset DIR] [--baseline-rev 929fd3c] [--out /tmp/bench_rel]
                                  [--width 800 --height 450] [--seconds 6] [--no-build]

Each anonymizer (this checkout, and the previous approach: ``--baseline-rev`` of this repository,
unpacked with ``git archive`` under ``--out``) runs in its own process on the same images and
writes its blur masks; the figures are computed here from the masks:

- synthetic (a generated 2-scene dataset, boxes from the dataset's annotations plus a run's
  tracks and detections, ``tests/release_run.py``; no learned faces): recall of the generator's
  face and plate pixels, blurred share of the image, seconds per image;
- PandaSet-002 (exact annotations, the release's default anonymizer with CenterFace, and the
  rig's settings from the labels file where the version has them: the ego body,
  ``occlusion.ego_body_m``, and the LiDAR's sweep, ``geometric.sweep_period_s`` and
  ``sweep_seam_deg``, for versions that do not read the sweep from the clip's own files,
  ``geometric.sweep_from_files``), on the hand-labelled keyframes of ``tests/data/pandaset_002_anonymization_labels.json``: plate, face
  and head recall (a labelled box is covered when >= 90 % of it is blurred), blurred share, the
  median and 10th percentile over (car, image) of the share of each car's projected silhouette
  left sharp, seconds per image; for all labelled keyframes, and apart for those the margins
  were tuned on and those held out;
- ``side_by_side.png`` under ``--out``: one PandaSet image, source | this checkout | previous.

Then (unless ``--no-build``) CenterFace's throughput and the release build time per 1,000 QA
records on the synthetic run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
LABELS = ROOT / "tests" / "data" / "pandaset_002_anonymization_labels.json"


def _masks_main(spec_path: str, save: str) -> None:
    """Child process: anonymize the images a spec names with the ``autolabel`` on sys.path, and
    save their masks (packed bits) and the seconds taken. Uses only APIs both versions have."""
    import cv2

    import autolabel.anonymize as anonymize
    from autolabel.anonymize import AnonymizeConfig, anonymize_image
    from autolabel.nuscenes_reader import list_clips, open_dataset, read_clip
    from autolabel.release.writer import anonymization_boxes

    def clip_anchors(clip, boxes, margins, cfg):
        """Per keyframe index the plate anchors (None before this version had them)."""
        if hasattr(anonymize, "clip_plate_anchors"):  # anchors lent along tracks
            got = anonymize.clip_plate_anchors(
                clip.frames, boxes, margins, cfg.geometric, cfg.lidar_plates
            )
            return lambda f: got.anchors[f]
        if hasattr(anonymize, "keyframe_plate_anchors"):
            return lambda f: anonymize.keyframe_plate_anchors(
                clip.frames[f], boxes[f], cfg.geometric, cfg.lidar_plates
            )
        return lambda f: None

    def clip_config(clip, cfg):
        """The clip's own sweep timing where the release reads it (geometric.sweep_from_files)."""
        try:
            from autolabel.anonymize.geometric import clip_geometric_config
        except ImportError:  # versions before it
            return cfg
        import dataclasses

        return dataclasses.replace(cfg, geometric=clip_geometric_config(clip, cfg.geometric))

    spec = json.loads(Path(spec_path).read_text())
    cfg = AnonymizeConfig(learned_faces=spec["learned_faces"])
    rig = spec.get("rig") or {}
    occlusion = getattr(cfg, "occlusion", None)
    if rig.get("ego_body_m") and hasattr(occlusion, "ego_body_m"):  # the rig's, where known
        import dataclasses

        ego = dataclasses.replace(occlusion, ego_body_m=tuple(rig["ego_body_m"]))
        cfg = dataclasses.replace(cfg, occlusion=ego)
    if (
        rig.get("sweep_seam_deg")
        and hasattr(cfg.geometric, "sweep_seam_deg")
        and not hasattr(cfg.geometric, "sweep_from_files")
    ):
        import dataclasses

        sweep = dataclasses.replace(
            cfg.geometric,
            sweep_period_s=rig["sweep_period_s"],
            sweep_seam_deg=tuple(rig["sweep_seam_deg"]),
        )
        cfg = dataclasses.replace(cfg, geometric=sweep)
    detector = None
    if cfg.learned_faces:
        from autolabel.anonymize.learned_faces import CenterFaceDetector

        detector = CenterFaceDetector(cfg.learned)
    nusc = open_dataset(spec["dataroot"], spec["version"])
    out, seconds = {}, 0.0
    for name in list_clips(nusc):
        clip = read_clip(nusc, name, max_sweeps=2)
        clip_cfg = clip_config(clip, cfg)
        run_dir = Path(spec["run"]) / name if spec["run"] else Path("/nonexistent")
        boxes, margins, _ = anonymization_boxes(clip, run_dir, clip_cfg)
        frames = spec["keyframes"] or range(len(clip.frames))
        t0 = time.perf_counter()
        anchors_of = clip_anchors(clip, boxes, margins, clip_cfg)
        seconds += time.perf_counter() - t0
        for f in frames:
            frame = clip.frames[f]
            t0 = time.perf_counter()
            anchors = anchors_of(f)
            seconds += time.perf_counter() - t0
            for channel, cam in sorted(frame.cameras.items()):
                image = cv2.imread(str(cam.path))
                t0 = time.perf_counter()
                extra = () if anchors is None else (anchors,)
                anon = anonymize_image(
                    image, cam, boxes[f], frame.timestamp_us, clip_cfg, detector, margins[f], *extra
                )
                seconds += time.perf_counter() - t0
                out[f"{name}|{f}|{channel}"] = np.packbits(anon.mask)
                if spec.get("keep_image") == [f, channel]:
                    cv2.imwrite(str(Path(save).with_suffix(".png")), anon.image_bgr)
    np.savez_compressed(save, seconds=seconds, **out)


def _masks(code: Path, spec: dict, save: Path) -> tuple[dict, float]:
    """Masks by (clip, keyframe, channel) from ``code``'s anonymizer, run in a child process."""
    save.parent.mkdir(parents=True, exist_ok=True)
    spec_path = save.with_suffix(".json")
    spec_path.write_text(json.dumps(spec))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--masks", str(spec_path), str(save)]
    env = {**os.environ, "PYTHONPATH": str(code)}
    subprocess.run(cmd, check=True, env=env, cwd=code)
    data = np.load(save)
    shapes = spec["shape"]
    masks = {}
    for key in data.files:
        if key == "seconds":
            continue
        name, f, channel = key.split("|")
        bits = np.unpackbits(data[key])[: shapes[0] * shapes[1]]
        masks[name, int(f), channel] = bits.reshape(shapes).astype(bool)
    return masks, float(data["seconds"])


def _baseline_tree(rev: str, out: Path) -> Path:
    """This repository at ``rev``, unpacked under ``out`` (once)."""
    tree = out / f"baseline-{rev}"
    if not (tree / "autolabel").is_dir():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def _synthetic_figures(dataroot: Path, masks: dict, seconds: float) -> str:
    from autolabel.nuscenes_reader import open_dataset, read_clip
    from autolabel.synth.ground_truth_files import load_image_ground_truth

    nusc = open_dataset(dataroot, "v1.0-mini")
    face = plate = fh = ph = blurred = px = 0
    clips = {}
    for (name, f, channel), mask in masks.items():
        if name not in clips:
            clips[name] = read_clip(nusc, name, max_sweeps=1)
        cam = clips[name].frames[f].cameras[channel]
        gt = load_image_ground_truth(dataroot, channel, cam.token)
        face += gt.face_mask.sum()
        plate += gt.plate_mask.sum()
        fh += (gt.face_mask & mask).sum()
        ph += (gt.plate_mask & mask).sum()
        blurred += mask.sum()
        px += mask.size
    return (
        f"face recall {fh / max(face, 1):.4f} ({face} px), plate recall {ph / max(plate, 1):.4f} "
        f"({plate} px), blurred {100 * blurred / px:.2f} %, {seconds / len(masks):.3f} s/image"
    )


def _pandaset_figures(clip, masks: dict, seconds: float, labels: dict, keyframes) -> str:
    from autolabel.release.anonymization_check import figures_from_masks

    sel = {(f, ch): m for (_, f, ch), m in masks.items() if f in keyframes}
    fig = figures_from_masks(clip, sel, labels, seconds * len(sel) / len(masks))
    return (
        f"plates {fig.plate_recall:.3f} of {fig.plates}, faces {fig.face_recall:.3f} of "
        f"{fig.faces}, heads {fig.head_recall:.3f} of {fig.heads}; blurred "
        f"{100 * fig.blurred_fraction:.2f} %; car sharp median {fig.car_sharp_median:.3f} "
        f"(p10 {fig.car_sharp_p10:.3f}, {fig.cars} car-images), visible part {fig.visible_sharp_median:.3f} "
        f"(p10 {fig.visible_sharp_p10:.3f}, {fig.visible_cars}); {fig.seconds_per_image:.2f} "
        f"s/image; missed {fig.missed}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--width", type=int, default=800)
    ap.add_argument("--height", type=int, default=450)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--out", default="/tmp/bench_release")
    ap.add_argument("--pandaset", default=str(ROOT.parent / "shared/realdata/pandaset-002"))
    ap.add_argument("--baseline-rev", default="929fd3c")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--masks", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.masks:
        _masks_main(*args.masks)
        return
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    import cv2
    from release_run import build_run

    from autolabel.nuscenes_reader import list_clips, open_dataset, read_clip
    from autolabel.release.anonymization_check import load_labels
    from autolabel.synth.config import SynthConfig
    from autolabel.synth.generator import generate_dataset

    root = Path(args.out)
    dataroot = root / "data"
    if not (dataroot / "v1.0-mini").is_dir():
        generate_dataset(
            dataroot,
            SynthConfig(scenes=2, seed=5, seconds=args.seconds, width_px=args.width,
                        height_px=args.height),
            overwrite=True,
        )  # fmt: skip
    run = build_run(dataroot, root / "run")
    approaches = {
        "this checkout": ROOT,
        f"previous ({args.baseline_rev})": _baseline_tree(args.baseline_rev, root),
    }
    synth_spec = {
        "dataroot": str(dataroot), "version": "v1.0-mini", "run": str(run), "keyframes": None,
        "learned_faces": False, "shape": [args.height, args.width],
    }  # fmt: skip
    print(f"synthetic: 2 scenes, every keyframe camera image ({args.width}x{args.height}), "
          "boxes from annotations + run tracks + detections, no learned faces")  # fmt: skip
    for label, code in approaches.items():
        masks, s = _masks(code, synth_spec, root / "masks" / f"synth-{code.name}.npz")
        print(f"  {label:28s} {_synthetic_figures(dataroot, masks, s)}")

    pandaset = Path(args.pandaset)
    if (pandaset / "v1.0-pandaset").is_dir():
        labels = load_labels(LABELS)
        nusc = open_dataset(pandaset, "v1.0-pandaset")
        clip = read_clip(nusc, list_clips(nusc)[0], max_sweeps=1)
        tuned = labels.get("tuned_on_keyframes", [])
        held = [k for k in labels["checked_keyframes"] if k not in tuned]
        spec = {
            "dataroot": str(pandaset), "version": "v1.0-pandaset", "run": None,
            "keyframes": labels["checked_keyframes"], "learned_faces": True,
            "rig": {k: labels.get(k) for k in ("ego_body_m", "sweep_period_s", "sweep_seam_deg")},
            "shape": [1080, 1920], "keep_image": [held[0] if held else 0, "CAM_FRONT"],
        }  # fmt: skip
        print(f"PandaSet-002: keyframes {labels['checked_keyframes']} x 6 cameras, exact "
              "annotations, default anonymizer (CenterFace on) with the rig's settings where "
              f"the version has them: ego body {labels.get('ego_body_m')}, sweep "
              f"{labels.get('sweep_period_s')} s, seam {labels.get('sweep_seam_deg')} deg "
              "(where the version does not read them from the clip's files)")  # fmt: skip
        shown = []
        for label, code in approaches.items():
            save = root / "masks" / f"pandaset-{code.name}.npz"
            masks, s = _masks(code, spec, save)
            shown.append(cv2.imread(str(save.with_suffix(".png"))))
            for part, frames in (("all", labels["checked_keyframes"]), ("tuned on", tuned),
                                 ("held out", held)):  # fmt: skip
                if frames:
                    text = _pandaset_figures(clip, masks, s, labels, frames)
                    print(f"  {label:28s} {part} {frames}: {text}")
        source = cv2.imread(str(clip.frames[spec["keep_image"][0]].cameras["CAM_FRONT"].path))
        side = np.concatenate([source, *shown], axis=1)
        side = cv2.resize(side, None, fx=0.5, fy=0.5, interpolation=cv2.INTER_AREA)
        cv2.imwrite(str(root / "side_by_side.png"), side)
        print(f"  {root / 'side_by_side.png'}: keyframe {spec['keep_image'][0]} CAM_FRONT, "
              f"source | {' | '.join(approaches)}")  # fmt: skip
    else:
        print(f"PandaSet-002 not found at {pandaset}: skipped")
    if args.no_build:
        return
    _throughput_and_build(dataroot, run, root)


def _throughput_and_build(dataroot: Path, run: Path, root: Path) -> None:
    import cv2

    from autolabel.anonymize import AnonymizeConfig
    from autolabel.anonymize.learned_faces import CenterFaceDetector
    from autolabel.nuscenes_reader import list_clips, open_dataset, read_clip
    from autolabel.release import ReleaseConfig, build_release

    nusc = open_dataset(dataroot, "v1.0-mini")
    clip = read_clip(nusc, list_clips(nusc)[0], max_sweeps=1)
    images = [cv2.imread(str(c.path)) for f in clip.frames[:4] for c in f.cameras.values()]
    detector = CenterFaceDetector()
    t0 = time.perf_counter()
    for img in images:
        detector.regions(img)
    print(f"learned faces (CenterFace, 1 thread): {len(images) / (time.perf_counter() - t0):.2f}"
          " images/s")  # fmt: skip
    records = sum(len((run / n / "qa.jsonl").read_text().splitlines()) for n in list_clips(nusc))
    for learned in (False, True):
        t0 = time.perf_counter()
        build_release(
            run,
            root / "rel",
            ReleaseConfig(overwrite=True, anonymize=AnonymizeConfig(learned_faces=learned)),
        )
        s = time.perf_counter() - t0
        print(f"release build (learned_faces={learned}): {s:.1f} s for {records} records, "
              f"{1000 * s / records:.1f} s per 1,000 QA")  # fmt: skip


if __name__ == "__main__":
    main()
