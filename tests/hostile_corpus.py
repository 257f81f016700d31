"""A corpus of hostile, careless or unlucky input to ``autolabel run``, generated on the fly.

Each case changes one thing of a small synthetic dataset (3 clips at 320 x 180), nearly always in
its first clip, and says what a user must see: which clips fail, with which words, naming which
file; or which error stops the run before anything is written. ``run_case`` runs it into a copy
of a clean run's folder and reports whether the error was the expected one, whether a clip was
lost (neither labelled nor reported), whether the other clips' files are byte-identical to the
clean run's, and whether files outside the clip folders (the user's) were touched.

The dataset is shared by the cases: its tables are copied (a case edits them and ``restore``
puts them back) and its sensor folders are linked, so a case costs a table write and a resumed
run (the untouched clips are skipped after their inputs are hashed).

Used by ``tests/test_hostile_input.py`` and ``bench/bench_hostile.py``.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pipeline_data import HEIGHT_PX, VERSION, WIDTH_PX, fast_config, output_tree

from autolabel.pipeline import run_pipeline
from autolabel.run_folder import run_folder_lock
from autolabel.synth.config import SynthConfig
from autolabel.synth.generator import generate_dataset

SCENES = 3


def make_corpus_dataset(root: Path) -> list[str]:
    """Three synthetic clips of 3 s at 320 x 180; their scene names."""
    config = SynthConfig(
        scenes=SCENES,
        seconds=3.0,
        seed=11,
        width_px=WIDTH_PX,
        height_px=HEIGHT_PX,
        extra_agents=3,
        progress=False,
    )
    return generate_dataset(root, config)["scenes"]


class Dataset:
    """A dataset whose tables a case may edit (``restore`` undoes it); sensor folders linked."""

    def __init__(self, source: Path, root: Path, scenes: list[str]) -> None:
        self.root = root
        self.scenes = scenes
        root.mkdir(parents=True)
        for entry in source.iterdir():
            if entry.name == VERSION:
                shutil.copytree(entry, root / VERSION)
            else:
                os.symlink(entry, root / entry.name)
        self._pristine = {p.name: p.read_bytes() for p in (root / VERSION).glob("*.json")}

    def restore(self) -> None:
        for name, data in self._pristine.items():
            (self.root / VERSION / name).write_bytes(data)
        shutil.rmtree(self.root / "hostile", ignore_errors=True)

    def table_path(self, name: str) -> Path:
        return self.root / VERSION / f"{name}.json"

    def table(self, name: str) -> list[dict]:
        return json.loads(self.table_path(name).read_text())

    def write(self, name: str, records: list[dict]) -> Path:
        path = self.table_path(name)
        path.write_text(json.dumps(records))  # NaN / Infinity written as the devkit reads them
        return path

    def scene(self, index: int) -> dict:
        return self.table("scene")[index]

    def samples(self, index: int) -> list[dict]:
        by_token = {s["token"]: s for s in self.table("sample")}
        out, token = [], self.scene(index)["first_sample_token"]
        while token:
            out.append(by_token[token])
            token = by_token[token]["next"]
        return out

    def sample_data(self, index: int, frame: int, channel: str) -> dict:
        """The keyframe sample_data record of ``channel`` in a clip's ``frame``."""
        sample = self.samples(index)[frame]["token"]
        sensor = {r["token"]: r["channel"] for r in self.table("sensor")}
        channel_of = {
            r["token"]: sensor[r["sensor_token"]] for r in self.table("calibrated_sensor")
        }
        return next(
            r
            for r in self.table("sample_data")
            if r["sample_token"] == sample
            and r["is_key_frame"]
            and channel_of[r["calibrated_sensor_token"]] == channel
        )

    def edit(self, name: str, token: str, change: Callable[[dict], None]) -> Path:
        records = self.table(name)
        change(next(r for r in records if r["token"] == token))
        return self.write(name, records)

    def new_file(self, name: str, data: bytes) -> tuple[Path, str]:
        """A file under ``hostile/`` of the dataroot: its path and its dataroot-relative name."""
        path = self.root / "hostile" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path, f"hostile/{name}"


@dataclass
class Expect:
    """What a case must produce.

    Attributes:
        failed: clip name -> words its error message must hold (every other clip is done or
            skipped).
        file: the file the first failed clip's error must name ("" when none).
        run_error: words of an error that must stop the run before any clip (then ``failed`` is
            empty and nothing may be written).
        keep: paths outside the clip folders that must be left as they were.
        out: the run folder to use instead of the copy of the clean run.
    """

    failed: dict[str, str] = field(default_factory=dict)
    file: str = ""
    run_error: str = ""
    keep: list[Path] = field(default_factory=list)
    out: Path | None = None


@dataclass
class Case:
    kind: str
    item: int
    make: Callable[[Dataset, Path], Expect]


@dataclass
class CaseResult:
    kind: str
    item: int
    clear_error: bool
    lost_clips: list[str]
    other_clips_identical: bool
    user_files_kept: bool
    detail: str = ""


def _rename_scene(new_name: str, keep: Callable[[Path], list[Path]]):
    def make(ds: Dataset, out: Path) -> Expect:
        ds.edit("scene", ds.scene(0)["token"], lambda r: r.update(name=new_name))
        return Expect(failed={new_name: "cannot be a clip folder name"}, keep=keep(out))

    return make


def _user_file(path: Path) -> list[Path]:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("the user's file\n")
    return [path]


def _camera_file(data: Callable[[bytes], bytes], name: str, words: str):
    def make(ds: Dataset, out: Path) -> Expect:
        sd = ds.sample_data(0, 1, "CAM_FRONT")
        original = (ds.root / sd["filename"]).read_bytes()
        path, rel = ds.new_file(name, data(original))
        ds.edit("sample_data", sd["token"], lambda r: r.update(filename=rel))
        return Expect(failed={ds.scenes[0]: words}, file=str(path))

    return make


def _filename(target: Callable[[Dataset, Path], str]):
    def make(ds: Dataset, out: Path) -> Expect:
        sd = ds.sample_data(0, 1, "CAM_FRONT")
        name = target(ds, out)
        path = ds.edit("sample_data", sd["token"], lambda r: r.update(filename=name))
        return Expect(failed={ds.scenes[0]: "not a path inside the dataroot"}, file=str(path))

    return make


def _outside_jpeg(ds: Dataset, absolute: bool) -> str:
    """A valid JPEG beside the dataroot (a copy of a real image of another clip)."""
    source = ds.root / ds.sample_data(1, 1, "CAM_FRONT")["filename"]
    outside = ds.root.parent / "outside.jpg"
    outside.write_bytes(source.read_bytes())
    return str(outside) if absolute else "../outside.jpg"


def _record_change(table: str, pick: Callable[[Dataset], dict], change, words: str):
    def make(ds: Dataset, out: Path) -> Expect:
        path = ds.edit(table, pick(ds)["token"], change)
        return Expect(failed={ds.scenes[0]: words}, file=str(path))

    return make


def _zero_intrinsic(ds: Dataset, out: Path) -> Expect:
    token = ds.sample_data(0, 0, "CAM_FRONT")["calibrated_sensor_token"]
    path = ds.edit("calibrated_sensor", token, lambda r: r.update(camera_intrinsic=[[0.0] * 3] * 3))
    return Expect(failed={ds.scenes[0]: "camera_intrinsic"}, file=str(path))


def _duplicate_sample_data_token(ds: Dataset, out: Path) -> Expect:
    """A second record with the token of a clip-0 image, pointing at a clip-1 image."""
    records = ds.table("sample_data")
    mine = ds.sample_data(0, 1, "CAM_FRONT")
    theirs = ds.sample_data(1, 1, "CAM_FRONT")
    records.append({**mine, "filename": theirs["filename"]})
    path = ds.write("sample_data", records)
    return Expect(failed={ds.scenes[0]: "share the token"}, file=str(path))


def _duplicate_scene_name(ds: Dataset, out: Path) -> Expect:
    ds.edit("scene", ds.scene(1)["token"], lambda r: r.update(name=ds.scenes[0]))
    return Expect(failed={ds.scenes[0]: "scenes are named"}, file=str(ds.table_path("scene")))


def _pose_value(key: str, index: int, value: float):
    def change(record: dict) -> None:
        record[key][index] = value

    return _record_change(
        "ego_pose",
        lambda ds: {"token": ds.sample_data(0, 2, "CAM_BACK")["ego_pose_token"]},
        change,
        "all finite",
    )


def _out_is_file(ds: Dataset, out: Path) -> Expect:
    shutil.rmtree(out)
    out.write_text("not a folder\n")
    return Expect(run_error="is a file, not a folder", keep=[out])


def _out_parent_is_file(ds: Dataset, out: Path) -> Expect:
    blocker = out.parent / "blocker"
    blocker.write_text("a file where a folder should be\n")
    return Expect(run_error="cannot be written", keep=[blocker], out=blocker / "run")


def _absolute_scene_name(ds: Dataset, out: Path) -> Expect:
    target = out.parent / "abs_dir"
    return _rename_scene(str(target), lambda o: _user_file(target / "mine.txt"))(ds, out)


CASES: list[Case] = [
    Case("scene name '../victim'", 1, _rename_scene("../victim", lambda out: _user_file(out.parent / "victim" / "mine.txt"))),  # noqa: E501
    Case("scene name: an absolute folder", 1, _absolute_scene_name),
    Case("scene name '.'", 1, _rename_scene(".", lambda out: _user_file(out / "notes.txt"))),
    Case("scene name '..'", 1, _rename_scene("..", lambda out: _user_file(out.parent / "mine.txt"))),  # noqa: E501
    Case("sample_data filename '../../etc/passwd'", 3, _filename(lambda ds, out: "../../etc/passwd")),  # noqa: E501
    Case("sample_data filename: a JPEG beside the dataroot", 3, _filename(lambda ds, out: _outside_jpeg(ds, False))),  # noqa: E501
    Case("sample_data filename: an absolute path", 3, _filename(lambda ds, out: _outside_jpeg(ds, True))),  # noqa: E501
    Case("truncated JPEG", 6, _camera_file(lambda b: b[: len(b) // 2], "cut.jpg", "truncated JPEG")),  # noqa: E501
    Case("random bytes named .jpg", 18, _camera_file(lambda b: os.urandom(len(b)), "noise.jpg", "not a JPEG")),  # noqa: E501
    Case("all-zero camera_intrinsic", 7, _zero_intrinsic),
    Case("duplicated sample_data token", 8, _duplicate_sample_data_token),
    Case("duplicated scene name", 8, _duplicate_scene_name),
    Case("sample without 'next'", 16, _record_change("sample", lambda ds: ds.samples(0)[2], lambda r: r.pop("next"), "'next'")),  # noqa: E501
    Case("sample without 'timestamp'", 16, _record_change("sample", lambda ds: ds.samples(0)[1], lambda r: r.pop("timestamp"), "'timestamp'")),  # noqa: E501
    Case("sample_data without 'ego_pose_token'", 16, _record_change("sample_data", lambda ds: ds.sample_data(0, 1, "CAM_FRONT"), lambda r: r.pop("ego_pose_token"), "'ego_pose_token'")),  # noqa: E501
    Case("NaN in an ego pose", 16, _pose_value("translation", 0, float("nan"))),
    Case("inf in an ego pose", 16, _pose_value("rotation", 1, float("inf"))),
    Case("OUT is a file", 17, _out_is_file),
    Case("OUT's parent is a file", 17, _out_parent_is_file),
]  # fmt: skip


def clean_run(ds: Dataset, out: Path) -> Path:
    """The reference run of the unchanged dataset."""
    summary = run_pipeline(ds.root, VERSION, out, None, fast_config(), progress=False)
    assert [c.status for c in summary.clips] == ["done"] * SCENES, summary.as_dict()
    return out


def _snapshot(paths: list[Path]) -> dict[Path, bytes | None]:
    return {p: p.read_bytes() if p.is_file() else None for p in paths}


def run_case(case: Case, ds: Dataset, clean: Path, work: Path) -> CaseResult:
    """Apply ``case`` to the dataset, run into a copy of the clean run, compare, restore."""
    out = work / "run"
    shutil.copytree(clean, out)
    clean_tree = output_tree(clean)
    try:
        expect = case.make(ds, out)
        names = list(dict.fromkeys(s["name"] for s in ds.table("scene")))
        kept = _snapshot(expect.keep)
        outside_before = _files_outside(work, out)
        error, outcomes = "", {}
        try:
            target = expect.out or out
            summary = run_pipeline(ds.root, VERSION, target, None, fast_config(), progress=False)
            outcomes = {c.clip: c for c in summary.clips}
        except Exception as e:  # a run-level refusal is what some cases expect
            error = f"{type(e).__name__}: {e}"
    finally:
        ds.restore()
    if expect.run_error:
        clear = expect.run_error in error and not outcomes
        lost: list[str] = []
        identical = True
        detail = error
    else:
        clear, detail = _clear_clip_errors(expect, outcomes, error)
        lost = [n for n in names if n not in outcomes]  # neither labelled nor reported
        identical = _other_clips_identical(clean_tree, out, set(expect.failed))
    user_kept = _snapshot(expect.keep) == kept and _files_outside(work, out) == outside_before
    return CaseResult(case.kind, case.item, clear, lost, identical, user_kept, detail)


def _clear_clip_errors(expect: Expect, outcomes: dict, error: str) -> tuple[bool, str]:
    if error:
        return False, f"the run stopped: {error}"
    for clip, outcome in outcomes.items():
        should_fail = clip in expect.failed
        if should_fail != (outcome.status == "failed"):
            return False, f"{clip}: {outcome.status} {outcome.error}"
    for clip, words in expect.failed.items():
        outcome = outcomes.get(clip)
        if outcome is None or outcome.error is None:
            return False, f"{clip}: no failure recorded"
        message = outcome.error["message"]
        if words not in message:
            return False, f"{clip}: {message!r} lacks {words!r}"
        if expect.file and outcome.error["file"] != expect.file:
            return False, f"{clip}: names file {outcome.error['file']!r}, not {expect.file!r}"
        detail = message
    return True, detail


def _other_clips_identical(clean_tree: dict[str, bytes], out: Path, excluded: set[str]) -> bool:
    tree = output_tree(out)

    def others(t: dict[str, bytes]) -> dict[str, bytes]:
        return {
            rel: data
            for rel, data in t.items()
            if "/" in rel and rel.split("/", 1)[0] not in excluded  # clip folders' files
        }

    return others(tree) == others(clean_tree)


def _files_outside(work: Path, out: Path) -> set[str]:
    """Files of the work folder outside the run folder (the user's, and the dataset's)."""
    return {
        p.relative_to(work).as_posix()
        for p in work.rglob("*")
        if p.is_file() and out not in p.parents and p != out
    }


def concurrent_run_refused(ds: Dataset, out: Path) -> str:
    """The error of a run into a folder another run holds (empty when it was not refused)."""
    with run_folder_lock(out):
        try:
            run_pipeline(ds.root, VERSION, out, None, fast_config(), progress=False)
        except Exception as e:
            return f"{type(e).__name__}: {e}"
    return ""
