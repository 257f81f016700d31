"""``marks.style: strideqa`` against STRIDE-QA-Bench's own renderer, on one exported question.

Renders the target's mark on the question's current frame three ways: autolabel's default style,
autolabel's ``strideqa`` style, and their ``strideqa_bench/utils/som.py`` (run in an interpreter
with its dependencies; detectron2 and torch, which it imports but does not use for this, are
replaced by empty stand-ins written to a temporary folder). Writes the three PNGs, a side-by-side
crop, and prints the pixel difference between ours and theirs and the label box positions.

    STRIDEQA_BENCH_ROOT=... STRIDEQA_BENCH_PYTHON=... PYTHONPATH=. \\
    python3 bench/strideqa_marks.py BENCH --question q00000000_g00000 --out /tmp/marks
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np
import pycocotools.mask as mask_util

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autolabel.benchmark.strideqa import ANNOTATION_DIR  # noqa: E402
from autolabel.set_of_mark import MarkStyle, render_marks  # noqa: E402

_STUBS = {
    "torch/__init__.py": "class Tensor: pass\ndef device(name): return name\n",
    "detectron2/__init__.py": "",
    "detectron2/data/__init__.py": (
        "class _Meta: pass\nclass MetadataCatalog:\n"
        "    @staticmethod\n    def get(name): return _Meta()\n"
    ),
    "detectron2/structures.py": "".join(
        f"class {n}: pass\n"
        for n in ("BitMasks", "Boxes", "BoxMode", "Keypoints", "PolygonMasks", "RotatedBoxes")
    ),
    "detectron2/utils/__init__.py": "",
    "detectron2/utils/colormap.py": "def random_color(rgb=False, maximum=255): raise RuntimeError\n",
    "detectron2/utils/file_io.py": "PathManager = None\n",
}
_DRIVER = """
import json, sys
import numpy as np, pycocotools.mask as mask_util
from PIL import Image
from strideqa_bench.utils import som
image, spec, out = sys.argv[1:4]
spec = json.loads(open(spec).read())
img = np.array(Image.open(image).convert("RGB"))
vis = som.Visualizer(img, metadata=som.metadata)
for rid, rle in spec["marks"]:
    m = mask_util.decode(rle).astype(np.uint8)
    demo = vis.draw_binary_mask_with_number(m, text=str(rid), label_mode="1", alpha=0.2,
                                            anno_mode=["Mask", "Mark"])
Image.fromarray(demo.get_image()).save(out)
"""


def official_render(root: Path, python: str, image: Path, marks: list, out: Path) -> np.ndarray:
    """Their renderer's image (BGR)."""
    with tempfile.TemporaryDirectory() as tmp:
        for rel, text in _STUBS.items():
            p = Path(tmp) / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        spec = Path(tmp) / "spec.json"
        spec.write_text(json.dumps({"marks": marks}))
        env = dict(os.environ, PYTHONPATH=f"{root / 'src'}{os.pathsep}{tmp}", MPLBACKEND="Agg")
        subprocess.run(
            [python, "-c", _DRIVER, str(image), str(spec), str(out)], env=env, check=True
        )
    return cv2.imread(str(out), cv2.IMREAD_COLOR)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench", type=Path)
    ap.add_argument("--question", default=None, help="question_id (default: the first)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--root", type=Path, default=os.environ.get("STRIDEQA_BENCH_ROOT"))
    ap.add_argument("--python", default=os.environ.get("STRIDEQA_BENCH_PYTHON", sys.executable))
    args = ap.parse_args()
    recs = json.loads((args.bench / ANNOTATION_DIR / "strideqa_bench_t0.json").read_text())
    rec = next(r for r in recs if args.question in (None, r["question_id"]))
    image_path = args.bench / rec["images"][-1]
    image = cv2.imread(str(image_path), cv2.IMREAD_COLOR)
    rle = rec["rle"]["current"]
    mask = mask_util.decode(rle).astype(bool)
    ids = np.array([rec["region_id"]])
    ours_default = render_marks(image, ids, masks=mask[None], style=MarkStyle())
    ours = render_marks(image, ids, masks=mask[None], style=MarkStyle(style="strideqa"))
    args.out.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(args.out / "autolabel_default.png"), ours_default)
    cv2.imwrite(str(args.out / "autolabel_strideqa.png"), ours)
    v, u = np.nonzero(mask)
    pad = 60
    v0, v1 = max(0, v.min() - pad), min(image.shape[0], v.max() + pad)
    u0, u1 = max(0, u.min() - pad), min(image.shape[1], u.max() + pad)
    tiles = [ours_default, ours]
    if args.root is not None:
        theirs = official_render(
            args.root, args.python, image_path, [[rec["region_id"], rle]], args.out / "official.png"
        )
        diff = np.abs(ours.astype(np.int16) - theirs.astype(np.int16)).max(axis=2)
        changed = (np.abs(image.astype(np.int16) - theirs.astype(np.int16)).max(axis=2) > 0) | (
            np.abs(image.astype(np.int16) - ours.astype(np.int16)).max(axis=2) > 0
        )
        print(f"pixels either renderer changed: {int(changed.sum())}")
        print(f"of those, differing by > 8 levels: {int((diff[changed] > 8).sum())}")
        print(f"mean |ours - theirs| over them: {float(diff[changed].mean()):.2f} levels")
        for name, img in (("ours", ours), ("theirs", theirs)):
            dark = (img.max(axis=2) < 70) & (image.max(axis=2) >= 70)
            ys, xs = np.nonzero(dark[v0:v1, u0:u1])
            if len(ys):
                print(
                    f"{name}: label box ~ u {u0 + xs.min()}..{u0 + xs.max()}, "
                    f"v {v0 + ys.min()}..{v0 + ys.max()}"
                )
        tiles.append(theirs)
    crop = [cv2.copyMakeBorder(t[v0:v1, u0:u1], 4, 4, 4, 4, cv2.BORDER_CONSTANT) for t in tiles]
    cv2.imwrite(str(args.out / "side_by_side.png"), np.hstack(crop))
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
