"""Masks and visibility on a real drive: PandaSet-002 with exact ground-truth replay.

Usage::

    PYTHONPATH=$PWD python3 bench/bench_visibility_real.py [--dataroot DIR (default
        $AUTOLABEL_REALDATA/pandaset-002 or ../shared/realdata/pandaset-002)] [--keyframes 0,8]
        [--segmenter NAME] [--run BEFORE_RUN_DIR] [--synth-runs BEFORE_DIR AFTER_DIR]

Runs the segment and visibility stages on the clip (``detector: gt``, ``detector_options:
{noise: null}``) and prints, against a reference computed from the annotations alone (no masks,
no image, shapely polygons of the projected boxes):

- ``clear_kept``: share of *clearly visible* views kept. Clearly visible: >= 50 % of the projected
  box inside the image, >= 20 LiDAR returns in the box (the annotation's own count), < 30 % of the
  box's hull covered by the hulls of nearer annotated boxes (box-centre depth).
- ``hidden_kept``: share of *hidden* views kept (>= 80 % of the hull covered).
- ``near_cars_kept``: share of cars within 15 m of the ego (box centre, ego xy) with >= 50 % of
  their projected box inside an image that are kept (so marked) in that image; with ``--run`` the
  run's ``marks/regions.json`` also says which were marked at its QA keyframes.
- ``median_own_return_recall``: median share of a kept object's own projected LiDAR returns
  inside its mask.
- ``cpu_s``: segment + visibility CPU seconds for the clip (process time; 1920x1080 images).

``--run DIR`` scores an existing run folder (``visibility.parquet`` and ``attributes.parquet``,
e.g. one made before a change) against the same reference. ``--synth-runs A B`` prints the kept
views of two synthetic demo runs (before, after) from their ``visibility_summary.json`` files.

Timings on a shared machine are pessimistic; compare ratios taken in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import shapely

ROOT = Path(__file__).resolve().parents[1]
#: ``shared/realdata`` beside the checkout, or where ``AUTOLABEL_REALDATA`` says (as the tests).
DEFAULT_DATAROOT = (
    Path(os.environ.get("AUTOLABEL_REALDATA") or ROOT.parent / "shared" / "realdata")
    / "pandaset-002"
)
VERSION = "v1.0-pandaset"

CLEAR_MIN_IN_IMAGE = 0.5
CLEAR_MIN_POINTS = 20
CLEAR_MAX_COVERED = 0.3
HIDDEN_MIN_COVERED = 0.8
NEAR_CAR_M = 15.0


def load_clip(dataroot: Path, segmenter: str | None = None):
    """The PandaSet clip with ground truth, and the run config of an exact GT replay with
    ``segmenter`` (None: the pipeline's default, so the figures are the default chain's)."""
    from nuscenes.nuscenes import NuScenes

    from autolabel.config import PipelineConfig
    from autolabel.pipeline import read_clip_records

    chosen = {} if segmenter is None else {"segmenter": segmenter}
    config = PipelineConfig(detector="gt", detector_options={"noise": None}, **chosen)
    nusc = NuScenes(VERSION, str(dataroot), verbose=False)
    return read_clip_records(nusc, nusc.scene[0]["name"], config), config


def reference_views(clip, frames: list[int] | None = None) -> pd.DataFrame:
    """One row per (keyframe, camera, annotation) whose projected hull touches the image.

    Columns: frame_index, camera, annotation (row in the keyframe's ground truth), center_x/y
    (global, metres, to match label tracks), class_name, distance_m (ego xy), lidar_points (the
    annotation's count), in_image_fraction, covered_share (hull share covered by nearer annotated
    boxes' hulls, shapely), depth_m.
    """
    from autolabel.classes import DETECTION_CLASSES
    from calib.projection import box_silhouette_uv

    rows = []
    for f in frames if frames is not None else range(len(clip.frames)):
        frame = clip.frames[f]
        gt = frame.ground_truth
        boxes = gt.boxes
        corners = boxes.corners()
        ego = frame.global_SE3_ego.inverse().transform_points(boxes.center_m)
        distance = np.hypot(ego[:, 0], ego[:, 1])
        for channel, image in frame.cameras.items():
            cal = image.calibration
            cam = image.global_SE3_camera.inverse()
            corners_cam = cam.transform_points(corners.reshape(-1, 3)).reshape(-1, 8, 3)
            depth = cam.transform_points(boxes.center_m)[:, 2]
            uv = box_silhouette_uv(cal.intrinsic, corners_cam)
            frame_poly = shapely.box(0, 0, cal.width_px, cal.height_px)
            hulls, fractions = [], []
            for points in uv:
                points = points[np.isfinite(points).all(axis=1)]
                if len(points) < 3:
                    hulls.append(None)
                    fractions.append(0.0)
                    continue
                hull = shapely.MultiPoint(points).convex_hull
                u0, v0 = points.min(axis=0)
                u1, v1 = points.max(axis=0)
                box = shapely.box(u0, v0, u1, v1)
                fractions.append(box.intersection(frame_poly).area / max(box.area, 1e-9))
                hulls.append(hull.intersection(frame_poly))
            for i, hull in enumerate(hulls):
                if hull is None or hull.area <= 0 or depth[i] <= 0:
                    continue
                nearer = [
                    hulls[j]
                    for j in np.flatnonzero(depth < depth[i])
                    if hulls[j] is not None and hulls[j].intersects(hull)
                ]
                covered = (
                    shapely.union_all(nearer).intersection(hull).area / hull.area if nearer else 0.0
                )
                rows.append(
                    {
                        "frame_index": f,
                        "camera": channel,
                        "annotation": i,
                        "center_x": boxes.center_m[i, 0],
                        "center_y": boxes.center_m[i, 1],
                        "class_name": DETECTION_CLASSES[int(boxes.label[i])],
                        "distance_m": float(distance[i]),
                        "lidar_points": int(gt.num_lidar_pts[i]),
                        "in_image_fraction": float(fractions[i]),
                        "covered_share": float(covered),
                        "depth_m": float(depth[i]),
                    }
                )
    ref = pd.DataFrame(rows)
    ref["clear"] = (
        (ref.in_image_fraction >= CLEAR_MIN_IN_IMAGE)
        & (ref.lidar_points >= CLEAR_MIN_POINTS)
        & (ref.covered_share < CLEAR_MAX_COVERED)
    )
    ref["hidden"] = ref.covered_share >= HIDDEN_MIN_COVERED
    ref["near_car"] = (
        (ref.class_name == "car")
        & (ref.distance_m <= NEAR_CAR_M)
        & (ref.in_image_fraction >= CLEAR_MIN_IN_IMAGE)
    )
    return ref


def track_centers_from_boxes(label_tracks) -> pd.DataFrame:
    """(frame_index, track_id, center_x, center_y) of each label track box."""
    parts = [
        pd.DataFrame(
            {
                "frame_index": f,
                "track_id": boxes.track_id,
                "center_x": boxes.center_m[:, 0],
                "center_y": boxes.center_m[:, 1],
            }
        )
        for f, boxes in enumerate(label_tracks)
    ]
    return pd.concat(parts, ignore_index=True)


def track_centers_from_run(clip, clip_dir: Path) -> pd.DataFrame:
    """The same from a run's ``attributes.parquet`` (ego-frame centres moved to the global frame;
    every labelled class, unlike the tracking file's seven)."""
    attrs = pd.read_parquet(clip_dir / "attributes.parquet")
    parts = []
    for f, group in attrs.groupby("frame_index"):
        ego = group[["x_ego_m", "y_ego_m", "z_ego_m"]].to_numpy()
        world = clip.frames[int(f)].global_SE3_ego.transform_points(ego)
        parts.append(
            pd.DataFrame(
                {
                    "frame_index": int(f),
                    "track_id": group.track_id.to_numpy(),
                    "center_x": world[:, 0],
                    "center_y": world[:, 1],
                }
            )
        )
    return pd.concat(parts, ignore_index=True)


def join_reference(
    ref: pd.DataFrame, visibility: pd.DataFrame, centers: pd.DataFrame
) -> pd.DataFrame:
    """The reference with each view's ``keep`` (False where the run has no such view) and, where
    present, ``own_return_recall``; tracks are matched to annotations by box centre (< 5 cm)."""
    ref = ref.copy()
    ref["track_id"] = -1
    for f, group in ref.groupby("frame_index"):
        tracks = centers[centers.frame_index == f]
        if tracks.empty:
            continue
        d = np.hypot(
            group.center_x.to_numpy()[:, None] - tracks.center_x.to_numpy()[None],
            group.center_y.to_numpy()[:, None] - tracks.center_y.to_numpy()[None],
        )
        best = d.argmin(axis=1)
        matched = d[np.arange(len(group)), best] < 0.05
        ref.loc[group.index[matched], "track_id"] = tracks.track_id.to_numpy()[best[matched]]
    columns = ["frame_index", "camera", "track_id", "keep"]
    if "own_return_recall" in visibility:
        columns.append("own_return_recall")
    out = ref.merge(visibility[columns], on=["frame_index", "camera", "track_id"], how="left")
    out["keep"] = out["keep"].fillna(False).astype(bool)
    return out


def figures(joined: pd.DataFrame, visibility: pd.DataFrame) -> dict:
    """The issue's figures from a joined reference (see the module docstring)."""
    clear, hidden, near = joined[joined.clear], joined[joined.hidden], joined[joined.near_car]
    kept = visibility[visibility.keep]
    recall = kept.own_return_recall.dropna() if "own_return_recall" in kept else pd.Series([])
    return {
        "views": int(len(visibility)),
        "kept": int(visibility.keep.sum()),
        "clear_views": int(len(clear)),
        "clear_kept": round(float(clear.keep.mean()), 4) if len(clear) else float("nan"),
        "hidden_views": int(len(hidden)),
        "hidden_kept": round(float(hidden.keep.mean()), 4) if len(hidden) else float("nan"),
        "near_car_views": int(len(near)),
        "near_cars_kept": round(float(near.keep.mean()), 4) if len(near) else float("nan"),
        "median_own_return_recall": (
            round(float(recall.median()), 4) if len(recall) else float("nan")
        ),
    }


def run_segment_visibility(clip, config, frames: list[int] | None = None, out_dir: Path = None):
    """Detect/track/attributes untimed, then prepare + segment + visibility timed (CPU s).

    Returns (ctx results, visibility DataFrame, CPU seconds). ``frames`` keeps only those
    keyframes' views (the cheap path of the tests): the other keyframes' labels are left out of
    the camera views."""
    import tempfile

    import pyarrow.parquet as pq

    from autolabel import stages

    out_dir = Path(out_dir or tempfile.mkdtemp(prefix="bench_visibility_real_"))
    ctx = stages.StageContext(clip, config, out_dir / clip.name)
    names = [name for name, _ in stages.STAGES]
    for _, stage in stages.STAGES[: names.index("attributes") + 1]:  # detect .. attributes
        stage(ctx)
    labels = ctx.results["label_tracks"]
    if frames is not None:
        ctx.results["label_tracks"] = [
            boxes if f in set(frames) else boxes[np.zeros(0, np.int64)]
            for f, boxes in enumerate(labels)
        ]
    start = time.process_time()
    stages.segment_stage(ctx)
    stages.visibility_stage(ctx)
    cpu_s = time.process_time() - start
    ctx.results["label_tracks"] = labels
    table = pq.read_table(ctx.clip_dir / stages.VISIBILITY_FILE).to_pandas()
    return ctx.results, table, cpu_s


def synth_kept(run_dir: Path) -> int:
    """Kept views summed over a run's clips (``*/visibility_summary.json``)."""
    return sum(
        json.loads(p.read_text())["kept"]
        for p in sorted(Path(run_dir).glob("*/visibility_summary.json"))
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataroot", type=Path, default=DEFAULT_DATAROOT)
    parser.add_argument("--keyframes", default="", help="comma-separated keyframes (default: all)")
    parser.add_argument("--segmenter", default=None, help="default: the pipeline's")
    parser.add_argument("--run", type=Path, help="score this run folder instead of running")
    parser.add_argument("--out", type=Path, help="folder for the stage outputs")
    parser.add_argument("--synth-runs", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args(argv)
    if args.synth_runs:
        before, after = (synth_kept(d) for d in args.synth_runs)
        print(json.dumps({"synthetic_kept_before": before, "synthetic_kept_after": after}))
        return 0
    if not args.dataroot.is_dir():
        print(f"no data at {args.dataroot}", file=sys.stderr)
        return 2
    clip, config = load_clip(args.dataroot, args.segmenter)
    frames = [int(x) for x in args.keyframes.split(",")] if args.keyframes else None
    ref = reference_views(clip, frames)
    if args.run:
        clip_dir = args.run / clip.name
        visibility = pd.read_parquet(clip_dir / "visibility.parquet")
        if frames is not None:
            visibility = visibility[visibility.frame_index.isin(frames)]
        centers = track_centers_from_run(clip, clip_dir)
        out = figures(join_reference(ref, visibility, centers), visibility)
        regions = clip_dir / "marks" / "regions.json"
        if regions.is_file():
            out.update(_marked_near_cars(ref, centers, json.loads(regions.read_text())))
    else:
        results, visibility, cpu_s = run_segment_visibility(clip, config, frames, args.out)
        centers = track_centers_from_boxes(results["label_tracks"])
        out = figures(join_reference(ref, visibility, centers), visibility)
        width, height = (int(v) for v in results["views"].image_size_px[0])
        out.update({"cpu_s": round(cpu_s, 1), "image_px": f"{width}x{height}"})
    out["segmenter"] = "(run folder)" if args.run else config.segmenter
    print(json.dumps(out, indent=1))
    return 0


def _marked_near_cars(ref: pd.DataFrame, centers: pd.DataFrame, regions: dict) -> dict:
    """Near cars at the run's QA keyframes that carry a mark in that camera."""
    marked = {
        (k["frame_index"], r["track_id"], camera)
        for k in regions["keyframes"]
        for r in k["regions"]
        for camera in r["cameras_at_keyframe"]
    }
    frames = {k["frame_index"] for k in regions["keyframes"]}
    near = ref[ref.near_car & ref.frame_index.isin(frames)]
    joined = join_reference(
        near, pd.DataFrame(columns=["frame_index", "camera", "track_id", "keep"]), centers
    )
    hits = [(int(r.frame_index), int(r.track_id), r.camera) in marked for r in joined.itertuples()]
    return {
        "near_car_views_at_qa_keyframes": len(hits),
        "near_cars_marked_at_qa_keyframes": round(float(np.mean(hits)), 4)
        if hits
        else float("nan"),
    }


if __name__ == "__main__":
    raise SystemExit(main())
