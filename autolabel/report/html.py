"""``autolabel report RUN``: one static HTML page per run, ``RUN/report/index.html``.

What a reviewer sees, top to bottom:

1. the run: clips and their status, detector, tracker, segmenter, QA counts;
2. metrics, each where the run has it: detection (``RUN/eval/det.json``: mAP, NDS, TP errors,
   AP per class, the devkit's plots), tracking (``RUN/eval/track.json``: AMOTA, AMOTP, ...),
   visibility rejections (``<clip>/visibility_summary.json``, by first failing rule), QA counts
   per type and class, label quality (``RUN/eval/label_quality.json``, agreement per question
   type) and benchmark scores (every ``*.scores.json`` under ``RUN/bench*/`` and ``RUN/eval/``:
   LSR@t, MLSR, TLC, accuracies);
3. per clip and QA keyframe: the six-camera Set-of-Mark view (the pipeline's
   ``marks/<kf>_stitched.png``, or rendered here from the camera images and the QA regions), a
   bird's-eye plot of the boxes, tracks and ground truth in the keyframe's ego frame, and that
   keyframe's QA; once per clip, one camera image marked in both mark styles side by side
   (``marks.style``: autolabel's and STRIDE-QA-Bench's).

Plots are PNG files under ``RUN/report/assets/``; other images are linked relatively, so the run
folder can be moved as a whole. The page needs no network and no script; one inline script only
lists images that failed to load (in the page and its title), which the browser test reads.
Ego poses and ground-truth boxes come from the dataset named in the clips' manifests (or
``dataroot``); without it the bird's-eye plots show the boxes only.
"""

from __future__ import annotations

import html
import json
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from autolabel.atomic_io import atomic_write_bytes, atomic_write_text

REPORT_DIR = "report"
INDEX = "index.html"
ASSETS = "assets"

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;
background:#f6f7f9;color:#1d232b}
header{background:#1d2b3a;color:#fff;padding:14px 24px}
header h1{margin:0;font-size:20px}
main{padding:8px 24px 40px}
section{background:#fff;border:1px solid #dde2e8;border-radius:6px;margin:16px 0;padding:12px 18px}
h2{font-size:17px;margin:6px 0 10px}
h3{font-size:15px;margin:14px 0 6px}
table{border-collapse:collapse;font-size:13px;margin:6px 0}
th,td{border:1px solid #dde2e8;padding:3px 8px;text-align:right;vertical-align:top}
th{background:#eef1f5}
td.l,th.l{text-align:left}
img{max-width:100%;border:1px solid #ccd3db}
.row{display:flex;flex-wrap:wrap;gap:14px;align-items:flex-start}
.kf{border-top:1px solid #dde2e8;padding-top:8px;margin-top:10px}
.som{flex:3 1 600px}.bev{flex:1 1 320px}
.muted{color:#67707c;font-size:13px}
.err{color:#b00020}
details summary{cursor:pointer;font-size:14px;margin:4px 0}
nav a{margin-right:12px}
"""

# Lists images that fail to load (capture phase sees resource errors) in the page and its title.
_SCRIPT = """
(function(){var n=0;window.addEventListener('error',function(e){var t=e.target;
if(t&&t.tagName){n++;var li=document.createElement('li');li.textContent=(t.src||t.href||t.tagName);
var l=document.getElementById('load-errors');if(l){l.appendChild(li);l.parentNode.hidden=false;}
document.title='['+n+' load errors] '+document.title.replace(/^\\[\\d+ load errors\\] /,'');}},true);})();
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _fmt(x: Any, digits: int = 4) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        if not np.isfinite(x):
            return "-"
        return f"{x:.{digits}f}"
    return str(x)


def _pct(x: Any) -> str:
    return "-" if x is None else f"{100.0 * float(x):.1f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], left: int = 1) -> str:
    head = "".join(
        f"<th class='l'>{_e(h)}</th>" if i < left else f"<th>{_e(h)}</th>"
        for i, h in enumerate(header)
    )
    body = "".join(
        "<tr>"
        + "".join(
            f"<td class='l'>{_e(c)}</td>" if i < left else f"<td>{_e(c)}</td>"
            for i, c in enumerate(r)
        )
        + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


class _Assets:
    """Writes plot PNGs under ``report/assets`` and returns their page-relative paths."""

    def __init__(self, report_dir: Path) -> None:
        self.dir = report_dir / ASSETS

    def add(self, name: str, data: bytes) -> str:
        atomic_write_bytes(self.dir / name, data)
        return f"{ASSETS}/{name}"


def _rel(path: Path, report_dir: Path) -> str:
    import os

    return Path(os.path.relpath(path, report_dir)).as_posix()


# ------------------------------------------------------------------------------ metrics


def _detection_section(run: Path, report_dir: Path, assets: _Assets) -> str:
    from autolabel.report.plots import bar_png

    det = _read_json(run / "eval" / "det.json")
    if not det:
        return "<p class='muted'>No detection evaluation (run <code>autolabel eval det</code>).</p>"
    names = {
        "trans_err": "mATE",
        "scale_err": "mASE",
        "orient_err": "mAOE",
        "vel_err": "mAVE",
        "attr_err": "mAAE",
    }
    rows = [("mAP", _fmt(det.get("mean_ap"))), ("NDS", _fmt(det.get("nd_score")))]
    rows += [(v, _fmt((det.get("tp_errors") or {}).get(k))) for k, v in names.items()]
    out = "<h3>Detection (nuScenes devkit)</h3>" + _table(("metric", "value"), rows)
    aps = det.get("mean_dist_aps") or {}
    if aps:
        per_class = [
            [c, _fmt(ap)]
            + [_fmt((det.get("label_tp_errors") or {}).get(c, {}).get(k)) for k in names]
            for c, ap in aps.items()
        ]
        out += _table(("class", "AP", *[n[1:] for n in names.values()]), per_class)
        src = assets.add(
            "det_ap_per_class.png",
            bar_png(
                list(aps), [np.nan if v is None else v for v in aps.values()], "AP per class", "AP"
            ),
        )
        out += f"<div class='row'><img src='{_e(src)}' alt='AP per class' style='max-width:520px'>"
        plots = sorted((run / "eval" / "det_plots").glob("*.png"))
        summary = [p for p in plots if p.stem == "summary"]
        for p in summary:
            out += f"<img src='{_e(_rel(p, report_dir))}' alt='devkit summary' style='max-height:640px'>"
        out += "</div>"
        others = [p for p in plots if p.stem != "summary"]
        if others:
            imgs = "".join(
                f"<img src='{_e(_rel(p, report_dir))}' alt='{_e(p.stem)}' style='max-width:360px'>"
                for p in others
            )
            out += f"<details><summary>devkit plots ({len(others)})</summary><div class='row'>{imgs}</div></details>"
    return out


def _tracking_section(run: Path, assets: _Assets) -> str:
    from autolabel.report.plots import bar_png

    track = _read_json(run / "eval" / "track.json")
    if not track:
        return (
            "<p class='muted'>No tracking evaluation (run <code>autolabel eval track</code>).</p>"
        )
    metrics = track.get("metrics") or {}
    out = "<h3>Tracking (nuScenes devkit)</h3>" + _table(
        ("metric", "value"), [(k.upper(), _fmt(v)) for k, v in metrics.items()]
    )
    amota = (track.get("label_metrics") or {}).get("amota") or {}
    if amota:
        src = assets.add(
            "track_amota_per_class.png",
            bar_png(
                list(amota),
                [np.nan if v is None else v for v in amota.values()],
                "AMOTA per class",
                "AMOTA",
            ),
        )
        out += f"<img src='{_e(src)}' alt='AMOTA per class' style='max-width:480px'>"
    return out


def _visibility_section(clip_dirs: Sequence[Path], assets: _Assets) -> str:
    from autolabel.report.plots import bar_png

    total: Counter = Counter()
    first: Counter = Counter()
    found = 0
    for d in clip_dirs:
        s = _read_json(d / "visibility_summary.json")
        if not s:
            continue
        found += 1
        for k in ("candidates", "kept", "rejected"):
            total[k] += int(s.get(k, 0))
        first.update({k: int(v) for k, v in (s.get("rejected_by_first_rule") or {}).items()})
    if not found:
        return "<p class='muted'>No visibility summaries in the run.</p>"
    rows = [(k, total[k]) for k in ("candidates", "kept", "rejected")]
    rows += [(f"rejected first by {k}", v) for k, v in first.items()]
    src = assets.add(
        "visibility_rejections.png",
        bar_png(
            list(first), list(first.values()), "Views rejected, by first failing rule", "views"
        ),
    )
    return (
        f"<h3>Visibility filter ({found} clips)</h3><div class='row'>"
        + _table(("views", "count"), rows)
        + f"<img src='{_e(src)}' alt='visibility rejections' style='max-width:480px'></div>"
    )


def _qa_section(records_by_clip: Mapping[str, Sequence[Mapping[str, Any]]], assets: _Assets) -> str:
    from autolabel.report.plots import bar_png

    records = [r for recs in records_by_clip.values() for r in recs]
    if not records:
        return "<p class='muted'>No QA in the run.</p>"
    by_type = Counter(r["type"] for r in records)
    cats = {r["type"]: r["category"] for r in records}
    palette = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown"]
    cat_colour = {c: palette[i % len(palette)] for i, c in enumerate(sorted(set(cats.values())))}
    types = sorted(by_type, key=lambda t: (cats[t], t))
    src = assets.add(
        "qa_per_type.png",
        bar_png(
            types,
            [by_type[t] for t in types],
            "QA pairs per type (colour: category)",
            "QA pairs",
            [cat_colour[cats[t]] for t in types],
        ),
    )
    by_class = Counter((r["regions"][0]["class"] if r.get("regions") else "ego") for r in records)
    by_cat = Counter(r["category"] for r in records)
    return (
        f"<h3>QA ({len(records)} pairs)</h3><div class='row'>"
        + _table(("category", "QA pairs"), sorted(by_cat.items()))
        + _table(("class (region A)", "QA pairs"), by_class.most_common())
        + f"<img src='{_e(src)}' alt='QA per type' style='max-width:720px'></div>"
    )


def _label_quality_section(run: Path, assets: _Assets) -> str:
    from autolabel.report.plots import bar_png

    lq = _read_json(run / "eval" / "label_quality.json")
    if not lq:
        return (
            "<p class='muted'>No label-quality evaluation (run <code>autolabel eval qa "
            "RUN_REFERENCE RUN</code> with a ground-truth replay run as the reference).</p>"
        )
    o = lq["overall"]
    rows = [
        ("reference run", lq.get("reference_run", "")),
        ("candidate questions", o["candidate_questions"]),
        ("agreement (unmatched count as wrong)", _pct(o["agreement"]) + " %"),
        ("agreement of matched questions", _pct(o["agreement_matched"]) + " %"),
        ("unmatched (no ground-truth object)", o["unmatched"]),
        ("... of which only the class differs", o.get("unmatched_wrong_class", "-")),
        ("ambiguous in the ground truth", o["ambiguous"]),
        ("ground-truth questions", o["reference_questions"]),
        ("missed (object not detected)", f"{o['missed']} ({_pct(o['missed_fraction'])} %)"),
    ]
    types = list(lq["by_type"])
    table = _table(
        (
            "type",
            "questions",
            "unmatched",
            "ambiguous",
            "agree",
            "agreement %",
            "matched %",
            "GT questions",
            "missed %",
        ),
        [
            (
                t,
                r["candidate_questions"],
                r["unmatched"],
                r["ambiguous"],
                r["agree"],
                _pct(r["agreement"]),
                _pct(r["agreement_matched"]),
                r["reference_questions"],
                _pct(r["missed_fraction"]),
            )
            for t, r in lq["by_type"].items()
        ],
    )
    src = assets.add(
        "label_quality_per_type.png",
        bar_png(
            types,
            [
                np.nan if lq["by_type"][t]["agreement"] is None else lq["by_type"][t]["agreement"]
                for t in types
            ],
            "Agreement with ground truth per question type",
            "fraction of the detector's answers",
        ),
    )
    curve_html = ""
    curve = lq.get("curve")
    if curve:
        from autolabel.evaluation.label_quality import at_threshold
        from autolabel.report.plots import precision_yield_png

        d = curve["default_threshold"]
        p = at_threshold(curve["overall"], d)
        rows += [
            (f"agreement at min_confidence {d:g}", _pct(p["agreement"]) + " %"),
            (f"yield at min_confidence {d:g}", _pct(p["yield"]) + " %"),
        ]
        curve_src = assets.add(
            "label_quality_precision_yield.png",
            precision_yield_png(curve, "QA agreement against yield"),
        )
        curve_html = (
            "<p>Agreement against yield (agreeing questions over the ground truth's questions) "
            "as the confidence threshold rises; the star is the default "
            "<code>qa.min_confidence</code>.</p>"
            f"<img src='{_e(curve_src)}' alt='agreement against yield' style='max-width:900px'>"
        )
    return (
        "<h3>Label quality (QA against ground-truth replay)</h3><div class='row'>"
        + _table(("", ""), rows)
        + f"<img src='{_e(src)}' alt='label quality per type' style='max-width:720px'></div>"
        + curve_html
        + table
    )


def _benchmark_section(run: Path, assets: _Assets) -> str:
    from autolabel.benchmark.scoring import HORIZONS_S
    from autolabel.report.plots import lines_png

    files = sorted(run.glob("bench*/**/*.scores.json")) + sorted(
        (run / "eval").glob("**/*.scores.json")
    )
    results = [(p, _read_json(p)) for p in files]
    results = [(p, r) for p, r in results if isinstance(r, dict) and "spatiotemporal" in r]
    if not results:
        return (
            "<p class='muted'>No benchmark scores (run <code>autolabel bench export RUN --out "
            "RUN/bench</code> and <code>autolabel bench score</code>).</p>"
        )
    names = [p.name.removesuffix(".scores.json") for p, _ in results]
    rows = []
    series = {}
    for name, (_, r) in zip(names, results, strict=True):
        st = r["spatiotemporal"]
        lsr = [st.get(f"LSR@{h:g}s") for h in HORIZONS_S]
        series[name] = lsr
        rows.append(
            [name, r["questions"], st["groups"]]
            + [_pct(v) for v in lsr]
            + [
                _pct(st["MLSR"]),
                _pct(st["TLC"]),
                _pct(r["spatial"]["qualitative"]["score"]),
                _pct(r["spatial"]["quantitative"]["score"]),
                _pct(r["multiple_choice"]["accuracy"]),
            ]
        )
    header = ["answers", "questions", "groups"] + [f"LSR@{h:g}s %" for h in HORIZONS_S]
    header += ["MLSR %", "TLC %", "spatial qual. %", "spatial quant. %", "MC %"]
    src = assets.add(
        "benchmark_lsr.png", lines_png(list(HORIZONS_S), series, "LSR@t", "t [s]", "LSR")
    )
    return (
        "<h3>Benchmark scores</h3>"
        + _table(header, rows)
        + f"<img src='{_e(src)}' alt='LSR over t' style='max-width:460px'>"
    )


# ------------------------------------------------------------------------------ per clip


def _open_clip(clip_dir: Path, dataroot: str | Path | None, cache: dict) -> Any:
    """The dataset's ``Clip`` (ego poses, ground truth), or None when it cannot be read."""
    from autolabel.benchmark.export import clip_dataroot

    manifest = _read_json(clip_dir / "manifest.json") or {}
    inputs = manifest.get("inputs") or {}
    root = clip_dataroot(clip_dir, dataroot)
    version = inputs.get("version")
    if root is None or not version or not (Path(root) / version).is_dir():
        return None
    from autolabel.nuscenes_reader import open_dataset, read_clip

    try:
        key = (str(root), version)
        if key not in cache:
            cache[key] = open_dataset(root, version)
        return read_clip(cache[key], clip_dir.name)
    except Exception:  # a report never fails for want of the dataset: plots lose trails and GT
        return None


def _bev_for_keyframe(
    attrs: Any, kf: int, region_of_track: Mapping[int, int], clip: Any, title: str
) -> bytes:
    from autolabel.report.plots import bev_png

    rows = np.flatnonzero(np.asarray(attrs.frame_index) == kf)
    tracks = np.asarray(attrs.track_id)[rows]
    boxes = {
        "x_m": np.asarray(attrs.x_ego_m)[rows],
        "y_m": np.asarray(attrs.y_ego_m)[rows],
        "yaw_rad": np.asarray(attrs.yaw_ego_rad)[rows],
        "width_m": np.asarray(attrs.width_m)[rows],
        "length_m": np.asarray(attrs.length_m)[rows],
    }
    highlight = np.array([int(t) in region_of_track for t in tracks], dtype=bool)
    labels = [
        f"R{region_of_track[int(t)]}" if int(t) in region_of_track else f"t{int(t)}" for t in tracks
    ]
    trails: list[np.ndarray] = []
    gt = None
    if clip is not None and kf < len(clip.frames):
        # Track centres over [t - 2 s, t + 3 s], each frame's ego position -> global -> this ego.
        poses = np.stack([f.global_SE3_ego.as_matrix() for f in clip.frames])
        window = np.arange(max(0, kf - 4), min(len(clip.frames), kf + 7))
        sel = np.flatnonzero(np.isin(attrs.frame_index, window) & np.isin(attrs.track_id, tracks))
        f_of = np.asarray(attrs.frame_index)[sel]
        p_ego = np.stack([attrs.x_ego_m[sel], attrs.y_ego_m[sel], attrs.z_ego_m[sel]], 1)
        p_global = np.einsum("nij,nj->ni", poses[f_of, :3, :3], p_ego) + poses[f_of, :3, 3]
        kf_pose = poses[kf]
        p_kf = (p_global - kf_pose[:3, 3]) @ kf_pose[:3, :3]
        tid = np.asarray(attrs.track_id)[sel]
        for t in tracks:
            m = tid == t
            order = np.argsort(f_of[m])
            trails.append(p_kf[m][order][:, :2])
        truth = clip.frames[kf].ground_truth
        if truth is not None and len(truth.boxes):
            b = truth.boxes
            c = (b.center_m - kf_pose[:3, 3]) @ kf_pose[:3, :3]
            ego_yaw = np.arctan2(kf_pose[1, 0], kf_pose[0, 0])
            gt = {
                "x_m": c[:, 0],
                "y_m": c[:, 1],
                "yaw_rad": np.asarray(b.yaw_rad) - ego_yaw,
                "width_m": b.size_wlh_m[:, 0],
                "length_m": b.size_wlh_m[:, 1],
            }
    return bev_png(boxes, labels, highlight, trails, gt, title=title)


def _som_view(
    clip_dir: Path,
    kf: int,
    records: Sequence[Mapping[str, Any]],
    report_dir: Path,
    assets: _Assets,
    root: Path | None,
) -> str | None:
    """Page-relative path of the keyframe's six-camera Set-of-Mark image, or None."""
    stitched = clip_dir / "marks" / f"{kf:03d}_stitched.png"
    if stitched.is_file():
        return _rel(stitched, report_dir)
    if root is None:
        return None
    import cv2

    from autolabel.benchmark.export import _fit_rle, _views_by_frame_camera
    from autolabel.set_of_mark import SIX_CAMERA_LAYOUT, encode_png, render_marks, stitch_six

    views = _views_by_frame_camera(records)
    paths: dict[str, str] = {}
    for rec in records:
        for cam, imgs in (rec.get("images") or {}).items():
            if imgs:
                paths.setdefault(cam, imgs[-1])
    known = {c for row in SIX_CAMERA_LAYOUT for c in row}
    images = {}
    for cam, rel in paths.items():
        if cam not in known:
            continue
        image = cv2.imread(str(root / rel), cv2.IMREAD_COLOR)
        if image is None:
            continue
        marks = sorted(views.get((kf, cam), {}).items())
        if marks:
            h, w = image.shape[:2]
            masks = [_fit_rle(m[1][1], h, w) for m in marks]
            image = render_marks(
                image,
                np.array([m[0] for m in marks]),
                boxes_2d=np.array([m[1][0] for m in marks], dtype=np.float64),
                masks=None if any(x is None for x in masks) else masks,
            )
        images[cam] = image
    if not images:
        return None
    return assets.add(f"{clip_dir.name}_k{kf:03d}_som.png", encode_png(stitch_six(images)))


def _mark_styles_view(
    clip_dir: Path,
    by_kf: Mapping[int, Sequence[Mapping[str, Any]]],
    keyframes: Sequence[int],
    assets: _Assets,
    root: Path | None,
) -> str | None:
    """Page-relative path of one camera image (the keyframe and camera with the most regions)
    marked in each style side by side: autolabel's, then ``strideqa``; or None."""
    if root is None:
        return None
    import cv2

    from autolabel.benchmark.export import _fit_rle, _views_by_frame_camera
    from autolabel.set_of_mark import MarkStyle, encode_png, render_marks

    candidates = []
    for kf in keyframes:
        views_kf = _views_by_frame_camera(by_kf.get(kf, []))
        paths_kf = {
            cam: imgs[-1]
            for rec in by_kf.get(kf, [])
            for cam, imgs in rec["images"].items()
            if imgs
        }
        for (f, cam), v in views_kf.items():
            if f == kf and cam in paths_kf:
                candidates.append((-len(v), kf, cam, views_kf, paths_kf[cam]))
    for _, kf, cam, views, path in sorted(candidates, key=lambda c: c[:3]):
        image = cv2.imread(str(root / path), cv2.IMREAD_COLOR)
        if image is None:
            continue
        marks = sorted(views[(kf, cam)].items())
        h, w = image.shape[:2]
        masks = [_fit_rle(m[1][1], h, w) for m in marks]
        args = dict(
            region_id=np.array([m[0] for m in marks]),
            boxes_2d=np.array([m[1][0] for m in marks], dtype=np.float64),
            masks=None if any(x is None for x in masks) else masks,
        )
        tiles = [
            render_marks(image, style=MarkStyle(), **args),
            render_marks(image, style=MarkStyle(style="strideqa"), **args),
        ]
        gap = np.full((h, 8, 3), 255, np.uint8)
        side = np.hstack([tiles[0], gap, tiles[1]])
        side = cv2.resize(side, (side.shape[1] // 2, h // 2), interpolation=cv2.INTER_AREA)
        return assets.add(f"{clip_dir.name}_k{kf:03d}_{cam}_styles.png", encode_png(side))
    return None


def _clip_section(
    clip_dir: Path,
    records: Sequence[Mapping[str, Any]],
    report_dir: Path,
    assets: _Assets,
    dataroot: str | Path | None,
    cache: dict,
    max_keyframes: int | None,
) -> str:
    from autolabel.attributes import ObjectAttributes
    from autolabel.benchmark.export import clip_dataroot

    name = clip_dir.name
    out = [f"<section id='clip-{_e(name)}'><h2>Clip {_e(name)}</h2>"]
    attrs_path = clip_dir / "attributes.parquet"
    attrs = ObjectAttributes.read_parquet(attrs_path) if attrs_path.is_file() else None
    clip = _open_clip(clip_dir, dataroot, cache)
    if clip is None:
        out.append(
            "<p class='muted'>Dataset not readable here: bird's-eye plots show the run's boxes "
            "only (no tracks, no ground truth).</p>"
        )
    regions_doc = _read_json(clip_dir / "marks" / "regions.json") or {}
    region_of: dict[int, dict[int, int]] = defaultdict(dict)
    for entry in regions_doc.get("keyframes", []):
        for reg in entry.get("regions", []):
            region_of[int(entry["frame_index"])][int(reg["track_id"])] = int(reg["region_id"])
    by_kf: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    for rec in records:
        kf = int(rec["keyframe"]["frame_index"])
        by_kf[kf].append(rec)
        for reg in rec.get("regions") or ():
            region_of[kf].setdefault(int(reg["track_id"]), int(reg["region_id"]))
    keyframes = sorted(
        set(by_kf) | {int(e["frame_index"]) for e in regions_doc.get("keyframes", [])}
    )
    if max_keyframes is not None:
        keyframes = keyframes[:max_keyframes]
    root = clip_dataroot(clip_dir, dataroot)
    styles = _mark_styles_view(clip_dir, by_kf, keyframes, assets, root)
    if styles:
        out.append(
            "<div class='styles'><h3>Mark styles</h3>"
            f"<img src='{_e(styles)}' alt='one camera image in both mark styles'>"
            "<p class='muted'>Left: autolabel's marks (<code>marks.style: autolabel</code>). "
            "Right: STRIDE-QA-Bench's (<code>marks.style: strideqa</code>: green mask and outline, "
            "the bare id in white on black, as their renderer draws them).</p></div>"
        )
    for kf in keyframes:
        recs = by_kf.get(kf, [])
        time_s = recs[0]["keyframe"]["time_s"] if recs else None
        head = f"Keyframe {kf}" + (f" (t = {time_s:g} s)" if time_s is not None else "")
        out.append(
            f"<div class='kf' id='{_e(name)}-k{kf:03d}'><h3>{_e(head)}</h3><div class='row'>"
        )
        som = _som_view(clip_dir, kf, recs, report_dir, assets, root)
        if som:
            out.append(
                f"<div class='som'><img src='{_e(som)}' alt='Set-of-Mark view, keyframe {kf}'></div>"
            )
        else:
            out.append("<div class='som muted'>No Set-of-Mark images for this keyframe.</div>")
        if attrs is not None:
            bev = assets.add(
                f"{name}_k{kf:03d}_bev.png",
                _bev_for_keyframe(attrs, kf, region_of.get(kf, {}), clip, f"{name} keyframe {kf}"),
            )
            out.append(
                f"<div class='bev'><img src='{_e(bev)}' alt='bird&#39;s-eye view, keyframe {kf}'></div>"
            )
        out.append("</div>")
        if recs:
            rows = [(r["type"], r["question"], r["answer"]) for r in recs]
            out.append(
                f"<details><summary>QA of this keyframe ({len(recs)})</summary>"
                + _table(("type", "question", "answer"), rows, left=3)
                + "</details>"
            )
        out.append("</div>")
    out.append("</section>")
    return "".join(out)


# ------------------------------------------------------------------------------ page


def write_report(
    run_dir: str | Path,
    dataroot: str | Path | None = None,
    out_dir: str | Path | None = None,
    max_keyframes_per_clip: int | None = None,
) -> Path:
    """Write ``RUN/report/index.html`` (and its plots) for a run; return the page's path.

    Args:
        run_dir: a run folder (``autolabel run`` output; evaluations under ``RUN/eval``).
        dataroot: the dataset root (default: each clip's manifest's), for ego poses, ground truth
            and camera images.
        out_dir: the report folder (default ``RUN/report``).
        max_keyframes_per_clip: show at most this many QA keyframes per clip (all when None).

    Raises:
        FileNotFoundError: the run folder does not exist or holds no clip.
    """
    from autolabel.qa.check import read_qa_jsonl

    run = Path(run_dir)
    if not run.is_dir():
        raise FileNotFoundError(f"{run}: run folder not found")
    report_dir = Path(out_dir) if out_dir else run / REPORT_DIR
    assets = _Assets(report_dir)
    clip_dirs = sorted(
        d
        for d in run.iterdir()
        if d.is_dir() and ((d / "manifest.json").is_file() or (d / "qa.jsonl").is_file())
    )
    summary = _read_json(run / "run_summary.json") or {}
    if not clip_dirs and not summary:
        raise FileNotFoundError(
            f"{run}: no clip folders (with manifest.json or qa.jsonl) and no run_summary.json"
        )
    records_by_clip = {
        d.name: (read_qa_jsonl(d / "qa.jsonl") if (d / "qa.jsonl").is_file() else [])
        for d in clip_dirs
    }
    manifest = (
        next((m for m in (_read_json(d / "manifest.json") for d in clip_dirs) if m), {}) or {}
    )
    config = manifest.get("config") or {}

    statuses = summary.get("clips") or [{"clip": d.name, "status": "-"} for d in clip_dirs]
    overview = [
        ("run", str(run.resolve())),
        ("clips", len(statuses)),
        ("detector", config.get("detector", "-")),
        ("tracker", config.get("tracker", "-")),
        ("segmenter", config.get("segmenter", "-")),
        ("QA pairs", sum(len(v) for v in records_by_clip.values())),
    ]
    status_rows = [
        (
            c.get("clip"),
            c.get("status"),
            (c.get("error") or {}).get("message", "") if isinstance(c.get("error"), dict) else "",
        )
        for c in statuses
    ]
    nav = "".join(f"<a href='#clip-{_e(d.name)}'>{_e(d.name)}</a>" for d in clip_dirs)
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>autolabel report: {_e(run.name)}</title>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<style>{_CSS}</style><script>{_SCRIPT}</script></head><body>",
        f"<header><h1>autolabel report: {_e(run.name)}</h1></header><main>",
        "<div hidden><p class='err'>Images that failed to load:</p><ul id='load-errors'></ul></div>",
        "<section><h2>Run</h2><div class='row'>",
        _table(("", ""), overview),
        _table(("clip", "status", "error"), status_rows, left=3),
        f"</div><nav>{nav}</nav></section>",
        "<section id='metrics'><h2>Metrics</h2>",
        _detection_section(run, report_dir, assets),
        _tracking_section(run, assets),
        _visibility_section(clip_dirs, assets),
        _qa_section(records_by_clip, assets),
        _label_quality_section(run, assets),
        _benchmark_section(run, assets),
        "</section>",
    ]
    cache: dict = {}
    for d in clip_dirs:
        parts.append(
            _clip_section(
                d,
                records_by_clip[d.name],
                report_dir,
                assets,
                dataroot,
                cache,
                max_keyframes_per_clip,
            )
        )
    parts.append("</main></body></html>\n")
    return atomic_write_text(report_dir / INDEX, "".join(parts))
