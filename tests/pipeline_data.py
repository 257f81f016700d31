"""Shared by the pipeline and Ray tests: a tiny synthetic dataset, a fast config, output trees."""

from __future__ import annotations

import json
from pathlib import Path

from autolabel.demo import small_image_config
from autolabel.pipeline import MANIFEST, SUMMARY
from autolabel.synth.config import SynthConfig
from autolabel.synth.generator import generate_dataset

VERSION = "v1.0-mini"
WIDTH_PX, HEIGHT_PX = 320, 180
#: The default (geometric) segmenter refining on a small working crop: the same code path, faster.
FAST_SEGMENTER = {"working_max_side_px": 32}


def make_dataset(root: Path, scenes: int) -> dict:
    """``scenes`` synthetic clips of 4 s (8 keyframes) at 320 x 180, few agents."""
    config = SynthConfig(
        scenes=scenes,
        seconds=4.0,
        seed=3,
        width_px=WIDTH_PX,
        height_px=HEIGHT_PX,
        extra_agents=4,
        progress=False,
    )
    return generate_dataset(root, config)


def fast_config(**fields):
    """The small-image CPU defaults with the fast segmenter settings."""
    return small_image_config(WIDTH_PX, HEIGHT_PX, segmenter_options=FAST_SEGMENTER, **fields)


def output_tree(run_dir: Path) -> dict[str, bytes]:
    """Every file of a run folder by relative path, except ``run_summary.json``; manifests with
    their ``stages.*.seconds`` removed (the only fields that differ between two runs)."""
    out = {}
    for path in sorted(Path(run_dir).rglob("*")):
        rel = path.relative_to(run_dir).as_posix()
        if path.is_dir() or rel == SUMMARY:
            continue
        data = path.read_bytes()
        if path.name == MANIFEST:
            manifest = json.loads(data)
            for stage in manifest["stages"].values():
                stage.pop("seconds")
            data = json.dumps(manifest, sort_keys=True).encode()
        out[rel] = data
    return out


def assert_same_outputs(a: Path, b: Path) -> None:
    tree_a, tree_b = output_tree(a), output_tree(b)
    assert sorted(tree_a) == sorted(tree_b)
    different = [rel for rel in tree_a if tree_a[rel] != tree_b[rel]]
    assert not different, f"files differ between {a} and {b}: {different[:10]}"
