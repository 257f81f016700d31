"""Set-of-Mark rendering speed on 1600 x 900 images with 15 regions each.

Prints images/s for box marks (the MetaVQA scheme, regions = filled boxes), for mask + contour
marks from (H, W) masks and from COCO RLE (as the segmentation stage stores them), and keyframes/s
for a whole six-camera keyframe (six renders, the stitched view, PNG encoding of all seven).

    python -m bench.bench_set_of_mark [--images 12] [--regions 15] [--threads 1]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np


def make_images(n: int, regions: int, seed: int = 0):
    import cv2

    rng = np.random.default_rng(seed)
    height, width = 900, 1600
    out = []
    for _ in range(n):
        small = rng.integers(0, 256, (height // 20, width // 20, 3), dtype=np.uint8)
        image = cv2.resize(small, (width, height), interpolation=cv2.INTER_CUBIC)
        masks = np.zeros((regions, height, width), np.uint8)
        centres = rng.uniform([60, 60], [width - 60, height - 60], (regions, 2)).astype(int)
        axes = rng.uniform([15, 20], [140, 120], (regions, 2)).astype(int)
        for k in range(regions):
            cv2.ellipse(masks[k], tuple(int(c) for c in centres[k]), tuple(int(a) for a in axes[k]), 0, 0, 360, 1, -1)  # fmt: skip
        boxes = np.concatenate([centres - axes, centres + axes + 1], axis=1).astype(float)
        out.append((image, boxes, masks.astype(bool)))
    return out


def rate(fn, items, repeats: int = 2) -> float:
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        for item in items:
            fn(item)
        best = min(best, time.perf_counter() - t0)
    return len(items) / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=12)
    parser.add_argument("--regions", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1, help="OpenCV threads")
    args = parser.parse_args()

    import cv2
    from pycocotools import mask as mask_utils

    from autolabel.set_of_mark import (
        SIX_CAMERA_LAYOUT,
        MarkStyle,
        encode_png,
        render_marks,
        stitch_six,
    )

    cv2.setNumThreads(args.threads)
    items = make_images(args.images, args.regions)
    ids = np.arange(args.regions)
    with_rle = [
        (img, b, mask_utils.encode(np.asfortranarray(m.transpose(1, 2, 0).astype(np.uint8))))
        for img, b, m in items
    ]
    box_style = MarkStyle()
    mask_style = MarkStyle(draw_box=False, draw_mask=True, draw_contour=True)

    box_rate = rate(lambda it: render_marks(it[0], ids, boxes_2d=it[1], style=box_style), items)
    mask_rate = rate(lambda it: render_marks(it[0], ids, masks=it[2], style=mask_style), items)
    rle_rate = rate(
        lambda it: render_marks(it[0], ids, masks=list(it[2]), style=mask_style), with_rle
    )
    channels = [c for row in SIX_CAMERA_LAYOUT for c in row]

    def keyframe(start: int) -> None:
        marked = {
            c: render_marks(
                items[(start + j) % len(items)][0],
                ids,
                boxes_2d=items[(start + j) % len(items)][1],
                style=box_style,
            )  # fmt: skip
            for j, c in enumerate(channels)
        }
        pngs = [encode_png(im) for im in marked.values()]
        pngs.append(encode_png(stitch_six(marked)))

    kf_rate = rate(keyframe, list(range(max(1, args.images // 6))), repeats=1)
    print(f"1600x900, {args.regions} regions, {args.threads} OpenCV thread(s):")
    print(f"  box marks:                 {box_rate:6.1f} images/s")
    print(f"  mask + contour (arrays):   {mask_rate:6.1f} images/s")
    print(f"  mask + contour (COCO RLE): {rle_rate:6.1f} images/s")
    print(f"  six-camera keyframe, box marks + stitch + 7 PNG encodes: {kf_rate:5.2f} keyframes/s")


if __name__ == "__main__":
    main()
