"""Anonymization throughput (geometric, learned) and release build time per 1,000 QA records.

    python bench/bench_release.py [--width 800 --height 450] [--seconds 6] [--out /tmp/bench_rel]

Generates a synthetic dataset (2 scenes), a run from its annotations (tests/release_run.py),
then measures on every keyframe camera image:
- geometric: boxes -> plate-band and head regions -> blur (images/s);
- learned: CenterFace on the image (images/s), and its ratio to the geometric path;
- recall of the union on the generator's face and plate pixels, and the fraction blurred,
  for the box sources the release uses (annotations + run tracks + detections);
and builds the release twice (with and without CenterFace), printing seconds per 1,000 records.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import cv2

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # this checkout, and the test run builder

from release_run import build_run  # noqa: E402

from autolabel.anonymize import AnonymizeConfig, anonymize_image  # noqa: E402
from autolabel.anonymize.blur import blur_regions  # noqa: E402
from autolabel.anonymize.geometric import plate_and_head_regions  # noqa: E402
from autolabel.nuscenes_reader import list_clips, open_dataset, read_clip  # noqa: E402
from autolabel.release import ReleaseConfig, build_release  # noqa: E402
from autolabel.release.writer import anonymization_boxes  # noqa: E402
from autolabel.synth.ground_truth_files import load_image_ground_truth  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--width", type=int, default=800)
    ap.add_argument("--height", type=int, default=450)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--out", default="/tmp/bench_release")
    args = ap.parse_args()
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
    nusc = open_dataset(dataroot, "v1.0-mini")
    cfg = AnonymizeConfig(learned_faces=False)
    items = []
    for name in list_clips(nusc):
        clip = read_clip(nusc, name, max_sweeps=1)
        boxes, margins, _ = anonymization_boxes(clip, run / name, cfg)
        for f, frame in enumerate(clip.frames):
            for channel, cam in frame.cameras.items():
                items.append((cv2.imread(str(cam.path)), cam, boxes[f], margins[f], frame, channel))
    t0 = time.perf_counter()
    for img, cam, b, m, frame, _ in items:
        dt = (cam.timestamp_us - frame.timestamp_us) * 1e-6
        regions = plate_and_head_regions(
            b, cam.calibration, cam.global_SE3_ego, dt, cfg.geometric, m
        )
        blur_regions(img, regions, cfg.blur)
    geo_s = time.perf_counter() - t0
    print(f"images: {len(items)} ({args.width}x{args.height})")
    print(f"geometric anonymization: {len(items) / geo_s:.1f} images/s")
    from autolabel.anonymize.learned_faces import CenterFaceDetector

    detector = CenterFaceDetector()
    sample = items[: min(len(items), 24)]
    t0 = time.perf_counter()
    for img, *_ in sample:
        detector.regions(img)
    learned_rate = len(sample) / (time.perf_counter() - t0)
    print(f"learned faces (CenterFace, 1 thread): {learned_rate:.2f} images/s")
    print(f"ratio geometric / learned: {len(items) / geo_s / learned_rate:.1f}x")
    face = plate = fh = ph = blurred = px = 0
    for img, cam, b, m, frame, channel in items:
        anon = anonymize_image(img, cam, b, frame.timestamp_us, cfg, None, m)
        gt = load_image_ground_truth(dataroot, channel, cam.token)
        face += gt.face_mask.sum()
        plate += gt.plate_mask.sum()
        fh += (gt.face_mask & anon.mask).sum()
        ph += (gt.plate_mask & anon.mask).sum()
        blurred += anon.mask.sum()
        px += anon.mask.size
    print(f"recall faces: {fh / max(face, 1):.4f} ({face} px), plates: {ph / max(plate, 1):.4f} "
          f"({plate} px); blurred area: {blurred / px:.4f}")  # fmt: skip
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
