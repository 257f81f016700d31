"""Tracking benchmark: ours against CenterPoint's PubTracker on the same detections, per set.

    # CenterPoint's tracker, from a snapshot kept OUTSIDE this project (never copied in):
    git -C CENTERPOINT_CHECKOUT archive HEAD tools/nusc_tracking | tar -x -C /tmp/centerpoint
    python bench/bench_tracking.py --peer /tmp/centerpoint/tools/nusc_tracking   # 10 synthetic clips
    python bench/bench_tracking.py --peer DIR --dataroot D --version V [--scenes a,b]  # e.g. PandaSet
    python bench/bench_tracking.py --out DIR ...          # keep runs, metrics and plots in DIR

For each detector setting (``gt`` with its default noise, ``lidar``; ``--settings`` adds the
noise-free ``gt``) every clip is detected once; the same detections are tracked by our Pub tracker
(default config, each box's detection score as its tracking score; max_age=3; and with track
scores, ``track_score_length`` 3) and, with ``--peer``, by CenterPoint's ``PubTracker``
(``tools/nusc_tracking/pub_tracker.py``, imported from the given folder) with max_age 3 and 40.
Each run is written as ``RUN/<clip>/labels/tracking.json`` and scored with the devkit
(``autolabel.evaluation.tracking``).

The peer gets what its own ``pub_test.py`` feeds it: per keyframe the submission dicts, sorted by
descending score as CenterPoint's detector emits them, with the time since the previous keyframe;
a detection without velocity (NaN, the ``lidar`` backend where it cannot tell) is given velocity 0,
since the peer has no fallback. It keeps only the boxes it marks active, as ``pub_test.py`` does.

Speed, per setting on the same detections (best of ``--repeat``): ours per clip from ``Boxes3D``
(warm, and the first call of the process, which includes loading the cached numba kernels), against
the peer's ``step_centertrack`` loop plus the active filter, from dicts built beforehand (its input
as loaded from a results JSON). The machine may be shared: compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib.util
import io
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autolabel.boxes import Boxes3D  # noqa: E402
from autolabel.classes import DETECTION_CLASSES, TRACKING_CLASSES  # noqa: E402
from trackers.pub_tracker import PubTracker, PubTrackerConfig  # noqa: E402
from trackers.tracking_results import write_tracking_submission  # noqa: E402

SETTINGS = (
    ("gt (noise-free)", "gt", {"noise": None}),
    ("gt + default noise", "gt", {"noise": "default"}),
    ("lidar", "lidar", {}),
)
DEFAULT_SETTINGS = "gt + default noise,lidar"


def load_peer(folder: Path):
    """CenterPoint's ``PubTracker`` class, imported from ``folder/pub_tracker.py`` by path."""
    folder = folder.resolve()
    if not (folder / "pub_tracker.py").is_file():
        raise SystemExit(
            f"--peer {folder}: no pub_tracker.py there (CenterPoint's tools/nusc_tracking)"
        )
    sys.path.insert(0, str(folder))  # pub_tracker imports its sibling track_utils
    spec = importlib.util.spec_from_file_location(
        "centerpoint_pub_tracker", folder / "pub_tracker.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.PubTracker


def peer_inputs(dets: list[Boxes3D]) -> list[list[dict]]:
    """Per keyframe, the detections as submission dicts (descending score), carrying their row."""
    frames = []
    for boxes in dets:
        order = np.argsort(-boxes.score, kind="stable")
        velocity = np.nan_to_num(boxes.velocity_mps, nan=0.0)
        frames.append(
            [
                {
                    "row": int(i),
                    "translation": boxes.center_m[i].tolist(),
                    "size": boxes.size_wlh_m[i].tolist(),
                    "rotation": [1.0, 0.0, 0.0, 0.0],
                    "velocity": velocity[i].tolist(),
                    "detection_name": DETECTION_CLASSES[int(boxes.label[i])],
                    "detection_score": float(boxes.score[i]),
                }
                for i in order
            ]
        )
    return frames


def run_peer(peer_cls, max_age: int, times: np.ndarray, frames: list[list[dict]]) -> list[list]:
    """The peer over one clip, as its ``pub_test.py`` loop: per keyframe [(row, tracking_id)]."""
    with contextlib.redirect_stdout(io.StringIO()):  # it prints its settings
        tracker = peer_cls(max_age=max_age, hungarian=False)
    out = []
    last = times[0]
    for t, preds in zip(times, frames, strict=True):
        outputs = tracker.step_centertrack(preds, t - last)
        last = t
        out.append([(item["row"], item["tracking_id"]) for item in outputs if item["active"]])
    return out


def peer_tracks(dets: list[Boxes3D], rows_ids: list[list]) -> list[Boxes3D]:
    """The peer's output as our tracked boxes (same detections, its track ids)."""
    tracked = []
    for boxes, pairs in zip(dets, rows_ids, strict=True):
        rows = np.array([r for r, _ in pairs], dtype=np.int64)
        sub = boxes[rows]
        sub.track_id = np.array([tid for _, tid in pairs], dtype=np.int64)
        tracked.append(sub)
    return tracked


def tracking_class_tracks(tracks: list[Boxes3D]) -> int:
    """Number of tracks of the tracking benchmark's classes (the others are not submitted)."""
    ids = [t.track_id[np.isin(t.class_name, TRACKING_CLASSES)] for t in tracks]
    return len(np.unique(np.concatenate(ids))) if ids else 0


def generate_dataset(out_dir: Path, clips: int, seed: int) -> tuple[Path, str]:
    """Synthetic nuScenes-format clips (``autolabel.synth``); returns (dataroot, version).

    Camera images are kept small: tracking uses LiDAR and annotations only.
    """
    from autolabel.synth.config import SynthConfig
    from autolabel.synth.generator import generate_dataset as synth_generate

    config = SynthConfig(scenes=clips, seed=seed, width_px=160, height_px=90, progress=False)
    summary = synth_generate(out_dir, config)
    return Path(summary["dataroot"]), summary["version"]


def best_seconds(fn, repeat: int) -> float:
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


_COLD_START = """
import sys, time
t0 = time.perf_counter()
import numpy as np
{imports}
rng = np.random.default_rng(0)
times = np.arange(40) * 0.5
xy = rng.uniform(-50, 50, (40, 60, 2))
{run}
print(time.perf_counter() - t0)
"""
_OURS_IMPORTS = "from autolabel.boxes import Boxes3D\nfrom trackers.pub_tracker import PubTracker"
_OURS_RUN = """dets = [Boxes3D(center_m=np.column_stack([p, np.zeros(60)]), size_wlh_m=np.ones((60, 3)),
    yaw_rad=np.zeros(60), velocity_mps=np.zeros((60, 2)), label=np.zeros(60, dtype=np.int64),
    score=rng.random(60), frame="global") for p in xy]
PubTracker().track_clip(times, dets)"""
_PEER_IMPORTS = "sys.path.insert(0, {folder!r})\nfrom pub_tracker import PubTracker"
_PEER_RUN = """frames = [[{"translation": [x, y, 0.0], "velocity": [0.0, 0.0], "detection_name": "car",
    "detection_score": s} for (x, y), s in zip(p, rng.random(60))] for p in xy]
tracker = PubTracker(max_age=40)
for f, t in zip(frames, np.diff(times, prepend=0.0)):
    [o for o in tracker.step_centertrack(f, t) if o["active"]]"""


def cold_start_line(peer: Path | None) -> str:
    """Seconds from a fresh interpreter to one 40-keyframe clip of 60 boxes tracked, ours and the
    peer's: imports included (ours imports nuscenes-devkit through ``autolabel.classes``, which
    the pipeline's reader has imported before the track stage), numba's start-up and the cached
    kernels' loading (which the ``lidar`` detector's kernels pay first in the pipeline)."""
    import subprocess

    def run(code: str) -> float:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
        )
        return float(out.stdout.strip().splitlines()[-1])

    ours = run(_COLD_START.format(imports=_OURS_IMPORTS, run=_OURS_RUN))
    line = f"cold start (fresh process, import + one 40-keyframe clip): ours {ours:.2f} s"
    if peer is not None:
        imports = _PEER_IMPORTS.format(folder=str(peer.resolve()))
        theirs = run(_COLD_START.format(imports=imports, run=_PEER_RUN))
        line += f", CenterPoint {theirs:.2f} s"
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataroot", type=Path)
    parser.add_argument("--version", default=None)
    parser.add_argument("--scenes", default="", help="comma-separated scene names (default: all)")
    parser.add_argument("--clips", type=int, default=10, help="clips to generate (no --dataroot)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the generated clips")
    parser.add_argument("--out", type=Path, help="keep runs here (default: a temp dir)")
    parser.add_argument("--repeat", type=int, default=5, help="timing repetitions (best of)")
    parser.add_argument(
        "--settings",
        default=DEFAULT_SETTINGS,
        help="comma-separated settings (labels or detector names)",
    )
    parser.add_argument("--peer", type=Path, help="CenterPoint's tools/nusc_tracking folder")
    args = parser.parse_args()

    from autolabel.evaluation.tracking import evaluate_tracking
    from autolabel.nuscenes_reader import list_clips, open_dataset, read_clip
    from detectors import get_detector

    peer_cls = load_peer(args.peer) if args.peer else None
    with tempfile.TemporaryDirectory(prefix="bench_tracking_") as tmp:
        work = args.out or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        if args.dataroot is None:
            t0 = time.perf_counter()
            dataroot, version = generate_dataset(work / "data", args.clips, args.seed)
            print(
                f"generated {args.clips} clips (seed {args.seed}) in {time.perf_counter() - t0:.1f} s"
            )
        else:
            if not args.version:
                parser.error("--version is required with --dataroot")
            dataroot, version = args.dataroot, args.version
        nusc = open_dataset(dataroot, version)
        names = [s for s in args.scenes.split(",") if s] or list_clips(nusc)
        clips = [read_clip(nusc, name) for name in names]
        frames = sum(len(c.frames) for c in clips)
        print(f"validation set: {len(clips)} clips, {frames} keyframes ({dataroot}, {version})")

        ours = PubTrackerConfig()
        trackers = [
            (f"ours (max_age={ours.max_age})", "ours", ours),
            ("ours (max_age=3)", "ours", PubTrackerConfig(max_age=3)),
            ("ours, track scores (length 3)", "ours", PubTrackerConfig(track_score_length=3)),
        ]
        if peer_cls is not None:
            trackers += [
                ("CenterPoint (max_age=3)", "peer", 3),
                ("CenterPoint (max_age=40)", "peer", 40),
            ]
        wanted = {s.strip() for s in args.settings.split(",") if s.strip()}
        timing_inputs: dict[str, list] = {}
        print("\n## Tracking quality (nuscenes-devkit TrackingEval, tracking_nips_2019)")
        print(
            f"{'detections':<20}{'tracker':<26}{'AMOTA':>7}{'AMOTP':>7}{'RECALL':>7}{'MOTA':>7}"
            f"{'IDS':>5}{'FRAG':>5}{'tracks':>7}"
        )
        for s, (label, detector_name, options) in enumerate(SETTINGS):
            if wanted and detector_name not in wanted and label not in wanted:
                continue
            detector = get_detector(detector_name, options)
            per_clip = []
            for clip in clips:
                times = np.array([f.time_s for f in clip.frames])
                tokens = [f.token for f in clip.frames]
                per_clip.append((clip.name, times, tokens, detector.detect_clip(clip)))
            timing_inputs[label] = per_clip
            for c, (tracker_label, kind, config) in enumerate(trackers):
                run_dir = work / f"run_{s}_{c}"
                n_tracks = 0
                for name, times, tokens, dets in per_clip:
                    if kind == "ours":
                        tracks = PubTracker(config).track_clip(times, dets)
                    else:
                        tracks = peer_tracks(
                            dets, run_peer(peer_cls, config, times, peer_inputs(dets))
                        )
                    n_tracks += tracking_class_tracks(tracks)
                    write_tracking_submission(
                        run_dir / name / "labels" / "tracking.json", tokens, tracks, detector.meta
                    )
                report = evaluate_tracking(run_dir, dataroot, version, names, render_curves=False)
                m = report["metrics"]
                print(
                    f"{label:<20}{tracker_label:<26}{m['amota']:>7.3f}{m['amotp']:>7.3f}"
                    f"{m['recall']:>7.3f}{m['mota']:>7.3f}{m['ids']:>5.0f}{m['frag']:>5.0f}"
                    f"{n_tracks:>7}"
                )

        print(f"\n## Tracker speed (same detections, same run; best of {args.repeat})")
        header = f"{'detections':<20}{'boxes/frame':>12}{'ours 1st call':>14}{'ours ms':>9}"
        if peer_cls is not None:
            header += f"{'peer(3) ms':>11}{'peer(40) ms':>12}{'peer40/ours':>12}"
        print(header + "   (ms per clip)")
        first_call = True
        for label, per_clip in timing_inputs.items():
            boxes = sum(len(d) for _, _, _, ds in per_clip for d in ds)
            n_frames = sum(len(ds) for _, _, _, ds in per_clip)
            tracker = PubTracker(ours)
            t0 = time.perf_counter()
            tracker.track_clip(per_clip[0][1], per_clip[0][3])
            cold_ms = (time.perf_counter() - t0) * 1e3
            cold = f"{cold_ms:>13.1f}" + ("*" if first_call else " ")
            first_call = False

            def ours_all(tracker=tracker, per_clip=per_clip):
                for _, times, _, dets in per_clip:
                    tracker.track_clip(times, dets)

            ours_ms = best_seconds(ours_all, args.repeat) * 1e3 / len(per_clip)
            line = f"{label:<20}{boxes / n_frames:>12.1f}{cold}{ours_ms:>9.2f}"
            if peer_cls is not None:
                inputs = [(times, peer_inputs(dets)) for _, times, _, dets in per_clip]
                peer_ms = {}
                for age in (3, 40):
                    copies = [
                        [(t, copy.deepcopy(f)) for t, f in inputs] for _ in range(args.repeat)
                    ]

                    def peer_all(age=age, copies=copies):
                        for times, frames_dicts in copies.pop():
                            run_peer(peer_cls, age, times, frames_dicts)

                    peer_ms[age] = best_seconds(peer_all, args.repeat) * 1e3 / len(per_clip)
                line += f"{peer_ms[3]:>11.2f}{peer_ms[40]:>12.2f}{peer_ms[40] / ours_ms:>11.1f}x"
            print(line)
        print(
            "* first track_clip of the process: loads the cached numba kernels (once per process)"
        )
        print(cold_start_line(args.peer))


if __name__ == "__main__":
    main()
