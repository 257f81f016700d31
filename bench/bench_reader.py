"""Reader speed: ``read_clip`` and ``aggregate_sweeps`` against the devkit doing the same work.

Writes a hand-made nuScenes-format dataset (tests/nuscenes_fixture.py) of one 20 s clip
(40 keyframes, 9 sweeps between keyframes, ~60 objects), then times:

- read_clip (poses, calibrations, sweeps, ground truth with velocities) vs the devkit building
  the same ground truth per object (``get_box`` + ``box_velocity`` for every annotation);
- aggregate_sweeps(frame, 10) vs ``LidarPointCloud.from_file_multisweep(..., nsweeps=10)``.

Run: python bench/bench_reader.py [--points 30000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # this checkout's code, and the test fixture

from nuscenes.utils.data_classes import LidarPointCloud  # noqa: E402
from nuscenes_fixture import Layout, write_dataset  # noqa: E402

from autolabel.nuscenes_reader import aggregate_sweeps, open_dataset, read_clip  # noqa: E402


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, default=30000, help="points per LiDAR sweep")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        layout = Layout(
            n_scenes=1,
            n_keyframes=40,
            sweeps_between=9,
            sweeps_before_first=9,
            points_per_sweep=args.points,
            extra_cars=56,
        )
        written = write_dataset(Path(tmp), layout)
        nusc = open_dataset(written.root, layout.version)
        name = written.scene_names[0]
        clip = read_clip(nusc, name)
        n_boxes = sum(len(f.ground_truth.boxes) for f in clip.frames)

        def devkit_ground_truth():
            for frame in clip.frames:
                for token in nusc.get("sample", frame.token)["anns"]:
                    nusc.get_box(token)
                    nusc.box_velocity(token)

        t_ours = best_of(lambda: read_clip(nusc, name), args.repeat)
        t_dev = best_of(devkit_ground_truth, args.repeat)
        print(f"read_clip: {len(clip.frames)} keyframes, {n_boxes} boxes: {t_ours * 1e3:.1f} ms")
        print(f"devkit get_box + box_velocity per annotation: {t_dev * 1e3:.1f} ms")
        print(f"ratio read_clip / devkit ground truth only: {t_ours / t_dev:.2f}")

        frame = clip.frames[20]
        sample = nusc.get("sample", frame.token)
        t_agg = best_of(lambda: aggregate_sweeps(frame, 10), args.repeat)
        t_ref = best_of(
            lambda: LidarPointCloud.from_file_multisweep(
                nusc, sample, "LIDAR_TOP", "LIDAR_TOP", 10
            ),
            args.repeat,
        )
        n_points = len(aggregate_sweeps(frame, 10)[0])
        print(f"aggregate_sweeps(10 sweeps, {n_points} points): {t_agg * 1e3:.1f} ms")
        print(
            f"devkit from_file_multisweep: {t_ref * 1e3:.1f} ms; ratio ours/devkit {t_agg / t_ref:.2f}"
        )


if __name__ == "__main__":
    main()
