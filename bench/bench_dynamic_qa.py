"""Dynamic-object QA on synthetic clips: questions of each new type per clip, the share keyframe
de-duplication removes, and what the new types cost in generation time.

1. ``autolabel synth`` clips (``--scenes`` x ``--seconds`` at ``--width`` x ``--height``) go through
   the whole pipeline (``autolabel run``: LiDAR detector, Pub tracker, LiDAR-seeded masks,
   visibility, Set-of-Mark, QA with colours measured under the masks); its ``qa.jsonl`` gives the
   questions of each new type per clip (the demo's numbers).
2. De-duplication: per clip, the QA keyframes (1 Hz, 2..17 s) and those whose ego pose moved
   enough to be kept; and the questions it removes, from the QA path on the clips' ground-truth
   tracks with projected-box grounding (``autolabel.qa.projected_grounding``) run with and without
   it (the same questions the pipeline would ask, minus detector noise).
3. Generation time of one clip on that ground-truth path, all types vs the types that existed
   before (the peer in the same run), process CPU time.

    python bench/bench_dynamic_qa.py --scenes 3 --seconds 20 --width 320 --height 180
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

# Run as a script from any checkout: import this checkout's packages, not an installed copy.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NEW_CATEGORIES = ("appearance", "action", "counting", "temporal", "caption")
VERSION = "v1.0-mini"
FAST_SEGMENTER = {"working_max_side_px": 48, "boxcut_iterations": 0, "grabcut_iterations": 1}


def _gt_qa_inputs(clip, qa_config):
    """Attributes, projected-box grounding, metadata and measured colours of a clip's
    ground-truth tracks."""
    import cv2

    from autolabel.attributes import compute_attributes
    from autolabel.qa.appearance import measure_region_colours
    from autolabel.qa.grounding import ClipQAMeta
    from autolabel.qa.projected_grounding import regions_from_projection
    from autolabel.qa.sampling import select_keyframes

    times = np.array([f.time_s for f in clip.frames])
    attrs = compute_attributes(
        times, [f.global_SE3_ego for f in clip.frames], [f.ground_truth.boxes for f in clip.frames]
    )
    meta = ClipQAMeta.from_clip(clip)
    cameras = [clip.frames[0].cameras[c].calibration for c in meta.channels]
    windows = select_keyframes(times, qa_config)
    frames = [
        [int(f) for f in list(c) + list(u) if f >= 0]
        for c, u in zip(windows.context, windows.future, strict=True)
    ]
    regions = regions_from_projection(attrs, cameras, windows.keyframe, frames)

    def read(camera: str, frame: int):
        bgr = cv2.imread(str(clip.frames[frame].cameras[camera].path))
        return None if bgr is None else bgr[:, :, ::-1]

    return attrs, regions, meta, measure_region_colours(regions, read)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--width", type=int, default=320)
    parser.add_argument("--height", type=int, default=180)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="keep the dataset and run here")
    args = parser.parse_args()

    from autolabel.demo import small_image_config
    from autolabel.nuscenes_reader import open_dataset, read_clip
    from autolabel.pipeline import run_pipeline
    from autolabel.qa import generate_clip_qa, load_templates
    from autolabel.qa.check import read_qa_jsonl
    from autolabel.qa.sampling import deduplicate_keyframes, select_keyframes
    from autolabel.synth.config import SynthConfig
    from autolabel.synth.generator import generate_dataset

    templates = load_templates()
    new_types = [t for t, qt in templates.types.items() if qt.category in NEW_CATEGORIES]
    old_types = tuple(t for t, qt in templates.types.items() if qt.category not in NEW_CATEGORIES)
    with tempfile.TemporaryDirectory(prefix="bench_dynqa_") as tmp:
        base = args.out or Path(tmp)
        data, run = base / "data", base / "run"
        synth = SynthConfig(
            scenes=args.scenes, seconds=args.seconds, width_px=args.width,
            height_px=args.height, seed=args.seed, progress=False,
        )  # fmt: skip
        generate_dataset(data, synth)
        config = small_image_config(
            args.width, args.height, seed=args.seed, segmenter_options=FAST_SEGMENTER
        )
        t0 = time.perf_counter()
        summary = run_pipeline(data, VERSION, run, None, config, True, False)
        run_s = time.perf_counter() - t0
        done = [c for c in summary.clips if c.status == "done"]
        print(
            f"{len(done)}/{len(summary.clips)} synthetic clips x {args.seconds:g} s at "
            f"{args.width}x{args.height} through the pipeline in {run_s:.0f} s "
            f"(QA stage {np.mean([c.stage_seconds.get('qa', 0.0) for c in done]):.2f} s/clip)"
        )

        # 1. Questions of each new type per clip (the pipeline's qa.jsonl).
        per_clip: dict[str, Counter] = {}
        keyframes: dict[str, int] = {}
        for clip_dir in sorted(p.parent for p in run.glob("*/qa.jsonl")):
            records = read_qa_jsonl(clip_dir / "qa.jsonl")
            per_clip[clip_dir.name] = Counter(r["type"] for r in records)
            keyframes[clip_dir.name] = len({r["keyframe"]["frame_index"] for r in records})
        clips = sorted(per_clip)
        print("\nquestions per clip of each new type (pipeline run):")
        print(f"  {'type':<24}" + "".join(f"{c[-12:]:>13}" for c in clips) + f"{'mean':>8}")
        for t in new_types:
            row = [per_clip[c][t] for c in clips]
            print(f"  {t:<24}" + "".join(f"{v:>13}" for v in row) + f"{np.mean(row):>8.1f}")
        totals = [sum(per_clip[c][t] for t in new_types) for c in clips]
        alls = [sum(per_clip[c].values()) for c in clips]
        print(f"  {'new types, total':<24}" + "".join(f"{v:>13}" for v in totals))
        print(f"  {'all types, total':<24}" + "".join(f"{v:>13}" for v in alls))
        kfs = [keyframes[c] for c in clips]
        print(f"  {'QA keyframes (of 16)':<24}" + "".join(f"{v:>13}" for v in kfs))
        missing = [t for t in new_types if not any(per_clip[c][t] for c in clips)]
        print(f"  new types missing from every clip: {missing or 'none'}")

        # 2. De-duplication: keyframes kept, questions removed (ground-truth QA path).
        nusc = open_dataset(data, VERSION)
        qa_on = dataclasses.replace(config.qa)
        qa_off = dataclasses.replace(config.qa, dedup_keyframes=False)
        print("\nkeyframe de-duplication (moved < 1 m and turned < 10 deg since the last kept):")
        kf_total = kf_kept = q_on = q_off = 0
        timing = None
        for name in clips:
            clip = read_clip(nusc, name, with_ground_truth=True)
            attrs, regions, meta, colours = _gt_qa_inputs(clip, qa_off)
            windows = select_keyframes(meta.frame_time_s, qa_off)
            kept = deduplicate_keyframes(windows, meta.ego_pose, qa_on)
            n_on = len(generate_clip_qa(attrs, regions, meta, qa_on, templates, colours))
            n_off = len(generate_clip_qa(attrs, regions, meta, qa_off, templates, colours))
            kf_total += len(windows.keyframe)
            kf_kept += len(kept.keyframe)
            q_on, q_off = q_on + n_on, q_off + n_off
            print(
                f"  {name}: keyframes {len(kept.keyframe)}/{len(windows.keyframe)} kept; "
                f"questions {n_on} with, {n_off} without ({1 - n_on / max(n_off, 1):.0%} removed)"
            )
            if timing is None:
                timing = (attrs, regions, meta, colours)
        print(
            f"  all clips: {1 - kf_kept / max(kf_total, 1):.0%} of the QA keyframes and "
            f"{1 - q_on / max(q_off, 1):.0%} of the questions removed"
        )

        # 3. Generation cost of the new types (one clip, ground-truth path, no de-duplication).
        attrs, regions, meta, colours = timing
        reps = 3

        def cpu(types: tuple[str, ...]) -> tuple[float, int]:
            cfg = dataclasses.replace(qa_off, types=types)
            generate_clip_qa(attrs, regions, meta, cfg, templates, colours)  # warm caches
            t = time.process_time()
            for _ in range(reps):
                n = len(generate_clip_qa(attrs, regions, meta, cfg, templates, colours))
            return (time.process_time() - t) / reps, n

        all_s, all_n = cpu(())
        old_s, old_n = cpu(old_types)
        print(
            f"\nQA generation of one clip ({meta.clip}, {len(attrs)} attribute rows), CPU time: "
            f"all {len(templates.types)} types {all_s:.2f} s ({all_n} questions); the "
            f"{len(old_types)} earlier types {old_s:.2f} s ({old_n}); ratio {all_s / old_s:.2f}x"
        )
        if args.out:
            (base / "bench_dynamic_qa.json").write_text(
                json.dumps({c: dict(per_clip[c]) for c in clips}, indent=1, sort_keys=True)
            )


if __name__ == "__main__":
    main()
