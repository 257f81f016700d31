"""Hostile-input corpus (issue 20): every kind of bad input tried on a small synthetic dataset,
with what the user got.

    python bench/bench_hostile.py [--keep DIR]

The dataset cases of ``tests/hostile_corpus.py`` (scene names that are paths, sensor paths
outside the dataroot, truncated or garbage images, zero intrinsics, duplicated tokens and scene
names, missing keys, non-finite poses, an unusable OUT) each run into a copy of a clean run; the
other kinds (a concurrent run, non-finite config numbers, out-of-range result boxes, an info
pickle that would build an object array, hostile answer files, leaks the release scan must find)
call the library directly. Prints one line per kind and the totals: kinds tried, clear errors,
clips lost (neither labelled nor reported), other clips byte-identical to the clean run, user
files kept. Exit status 1 when any kind is not handled.
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # this checkout's code, and the test helpers


def _expect_error(fn: Callable[[], object], *words: str) -> tuple[bool, str]:
    try:
        fn()
    except Exception as e:  # the kind passes when the error says what is wrong
        message = f"{type(e).__name__}: {e}"
        return all(w in message for w in words), message.splitlines()[0][:150]
    return False, "no error"


def _direct_kinds(ds, work: Path) -> list[tuple[str, Callable[[], tuple[bool, str]]]]:
    from hostile_corpus import concurrent_run_refused
    from pipeline_data import VERSION, fast_config

    from autolabel.benchmark.scoring import read_answers
    from autolabel.config import load_run_config
    from autolabel.mmdet3d_info import load_info_pickle
    from autolabel.nuscenes_reader import open_dataset, read_clip
    from autolabel.pipeline import run_pipeline
    from autolabel.release import scan_release
    from detectors.detection_results import submission_meta, write_detection_submission

    def concurrent() -> tuple[bool, str]:
        error = concurrent_run_refused(ds, work / "held")
        return "another autolabel run" in error, error[:150]

    def config(value: str) -> Callable[[], tuple[bool, str]]:
        def kind() -> tuple[bool, str]:
            path = work / "run.yaml"
            path.write_text(f"segment: {{max_distance_m: {value}}}\n")
            return _expect_error(lambda: load_run_config(path), str(path), "finite")

        return kind

    def results(size: list[float]) -> Callable[[], tuple[bool, str]]:
        def kind() -> tuple[bool, str]:
            clip = read_clip(open_dataset(ds.root, VERSION), ds.scenes[0], max_sweeps=1)
            path = work / "results.json"
            write_detection_submission(
                path,
                [f.token for f in clip.frames],
                [f.ground_truth.boxes for f in clip.frames],
                submission_meta(use_lidar=True),
            )
            data = json.loads(path.read_text())
            token = next(iter(data["results"]))
            data["results"][token][0]["size"] = size
            path.write_text(json.dumps(data))
            cfg = fast_config(detector="results", detector_options={"path": str(path)})
            return _expect_error(
                lambda: run_pipeline(ds.root, VERSION, work / "r", None, cfg, progress=False),
                str(path),
                token,
            )

        return kind

    def object_pickle() -> tuple[bool, str]:
        import numpy as np

        raw = pickle.dumps({"data_list": [np.zeros(2)]}, protocol=2)
        raw = raw.replace(b"X\x02\x00\x00\x00f8", b"X\x02\x00\x00\x00O8")
        raw = raw.replace(b"X\x10\x00\x00\x00" + b"\x00" * 16, b"X\x10\x00\x00\x00" + b"A" * 16)
        path = work / "evil.pkl"
        path.write_bytes(raw)
        code = (
            "import sys; from autolabel.mmdet3d_info import load_info_pickle as f; f(sys.argv[1])"
        )
        done = subprocess.run(
            [sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120
        )
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        return done.returncode == 1 and "refusing dtype 'O8'" in last, last[:150]

    def answers(content: bytes, *words: str) -> Callable[[], tuple[bool, str]]:
        def kind() -> tuple[bool, str]:
            path = work / "answers.jsonl"
            path.write_bytes(content)
            return _expect_error(lambda: read_answers(path), str(path), *words)

        return kind

    def leak(text: str, kind_name: str) -> Callable[[], tuple[bool, str]]:
        def kind() -> tuple[bool, str]:
            rel = work / "release"
            (rel / "conversations").mkdir(parents=True, exist_ok=True)
            (rel / "conversations" / "x.json").write_text(json.dumps([{"value": text}]))
            found = [x.kind for x in scan_release(rel)]
            return kind_name in found, f"found {found}"

        return kind

    del load_info_pickle  # only imported to fail early if the module is broken
    return [
        ("a second run into a held OUT", concurrent),
        ("config max_distance_m: .inf", config(".inf")),
        ("config max_distance_m: .nan", config(".nan")),
        ("result box with a NaN size", results([math.nan, 1.0, 1.0])),
        ("result box with a negative size", results([-1.0, 4.0, 1.5])),
        ("result box 1e6 m long", results([2.0, 1e6, 1.5])),
        ("info pickle: object array from raw bytes", object_pickle),
        ("answers: a dict as an answer", answers(b'{"id": "a", "answer": {"d": 3}}\n', "dict")),
        ("answers: not UTF-8", answers(b'{"id": "a", "answer": "caf\xe9"}\n', "UTF-8")),
        ("leak: upper-case token", leak("ABCDEF0123456789ABCDEF0123456789", "token")),
        ("leak: dashed token", leak("01234567-89ab-cdef-0123-456789abcdef", "token")),
        ("leak: epoch seconds", leak("at 1532402927.612", "timestamp")),
        ("leak: log stamp with spaces", leak("log 2018 07 24 11 22 45", "log_name")),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, default=None, help="work here and keep the files")
    args = parser.parse_args()

    from hostile_corpus import CASES, Dataset, clean_run, make_corpus_dataset, run_case

    with tempfile.TemporaryDirectory(prefix="bench_hostile_") as tmp:
        base = args.keep or Path(tmp)
        source = base / "source"
        scenes = make_corpus_dataset(source)
        ds = Dataset(source, base / "corpus" / "data", scenes)
        clean = clean_run(ds, base / "clean" / "run")
        rows, lost, identical, kept = [], 0, 0, 0
        for i, case in enumerate(CASES):
            r = run_case(case, ds, clean, base / f"case{i:02d}")
            rows.append((case.item, case.kind, r.clear_error, r.detail))
            lost += len(r.lost_clips)
            identical += r.other_clips_identical
            kept += r.user_files_kept
        direct = _direct_kinds(ds, base / "direct")
        for kind, check in direct:
            (base / "direct").mkdir(parents=True, exist_ok=True)
            ok, detail = check()
            rows.append((0, kind, ok, detail))
        for item, kind, ok, detail in rows:
            tag = f"#{item}" if item else "  "
            print(f"{'ok ' if ok else 'BAD'} {tag:>4} {kind}: {detail.splitlines()[0][:140]}")
        clear = sum(ok for _, _, ok, _ in rows)
        print()
        print(f"kinds of bad input tried: {len(rows)}")
        print(f"clear errors: {clear} of {len(rows)}")
        print(f"clips lost: {lost}")
        all_identical = "all" if identical == len(CASES) else f"{identical} of {len(CASES)} runs"
        print(f"other clips byte-identical: {all_identical} ({len(CASES)} runs)")
        print(f"user files outside the clip folders kept: {kept} of {len(CASES)} runs")
        return 0 if clear == len(rows) and lost == 0 and identical == kept == len(CASES) else 1


if __name__ == "__main__":
    raise SystemExit(main())
