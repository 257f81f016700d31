"""The ``autolabel`` command line: parses arguments, calls a library function, prints."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer

#: Options whose value is optional: given bare (last, or before another option), they take this.
OPTIONAL_VALUE_OPTIONS = {"--ray": "local"}


def with_optional_values(args: list[str]) -> list[str]:
    """``--ray`` without a value (last, or followed by another option) becomes ``--ray=local``;
    typer's options always take a value, the command line contract has ``[--ray [ADDRESS]]``."""
    out = []
    for i, arg in enumerate(args):
        following = args[i + 1] if i + 1 < len(args) else None
        if arg in OPTIONAL_VALUE_OPTIONS and (following is None or following.startswith("-")):
            out.append(f"{arg}={OPTIONAL_VALUE_OPTIONS[arg]}")
        else:
            out.append(arg)
    return out


class _Typer(typer.Typer):
    def __call__(self, *args, **kwargs):
        sys.argv[1:] = with_optional_values(sys.argv[1:])
        return super().__call__(*args, **kwargs)


app = _Typer(
    no_args_is_help=True, add_completion=False, help="Auto-label nuScenes-format driving logs."
)
eval_app = typer.Typer(
    no_args_is_help=True, help="Score labels with the official nuScenes metrics."
)
app.add_typer(eval_app, name="eval")


@contextmanager
def exit_on(*errors: type[BaseException]) -> Iterator[None]:
    """Turn the user-facing ``errors`` (bad paths, malformed input) into one line and exit 1."""
    try:
        yield
    except errors as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None


bench_app = typer.Typer(
    no_args_is_help=True, help="Export a QA run as a benchmark and score model answers."
)
app.add_typer(bench_app, name="bench")


@app.command()
def version() -> None:
    """Print the package version."""
    from autolabel import __version__

    print(__version__)


@app.command()
def clips(
    dataroot: str = typer.Argument(..., help="dataset root (holds the table folder)"),
    version: str = typer.Option(
        ..., help="table folder: v1.0-mini, v1.0-trainval, annotation (T4)"
    ),
) -> None:
    """List the clips (scenes) of a nuScenes-format dataset, one per line."""
    from autolabel.nuscenes_reader import DatasetError, describe_clips

    with exit_on(DatasetError):
        rows = describe_clips(dataroot, version)
    for r in rows:
        print(
            f"{r['name']}\tkeyframes={r['keyframes']}\tduration_s={r['duration_s']}"
            f"\tlidar={r['lidar']}\tcameras={','.join(r['cameras'])}\tannotations={r['annotations']}"
        )


@app.command()
def synth(
    out: Path = typer.Argument(..., help="Dataroot to create (nuScenes layout)."),
    scenes: int | None = typer.Option(None, help="Number of scenes (clips) [2]."),
    seconds: float | None = typer.Option(None, help="Clip length, seconds [20]."),
    seed: int | None = typer.Option(None, help="Seed of every random choice [0]."),
    width: int | None = typer.Option(None, help="Camera image width [the rig's]."),
    height: int | None = typer.Option(None, help="Camera image height [the rig's]."),
    rig: str | None = typer.Option(None, help="Sensor rig name or YAML path [nuscenes]."),
    version: str | None = typer.Option(None, help="nuScenes version folder [v1.0-mini]."),
    lidar_hz: float | None = typer.Option(None, help="LiDAR sweep rate, Hz [10]."),
    config: Path | None = typer.Option(None, help="YAML of SynthConfig fields (options win)."),
    force: bool = typer.Option(False, help="Replace an existing dataset in OUT."),
) -> None:
    """Write synthetic drive logs as a nuScenes-format dataset (tables, images, sweeps, maps)."""
    from autolabel.synth.config import load_synth_config
    from autolabel.synth.generator import generate_dataset

    try:
        synth_config = load_synth_config(
            config, scenes=scenes, seconds=seconds, seed=seed, width_px=width, height_px=height,
            rig=rig, version=version, lidar_hz=lidar_hz,
        )  # fmt: skip
        summary = generate_dataset(out, synth_config, overwrite=force)
    except (ValueError, FileExistsError, FileNotFoundError) as e:
        raise typer.BadParameter(str(e)) from None
    for key in ("dataroot", "version", "logs", "samples", "sample_data", "sample_annotations"):
        print(f"{key}: {summary[key]}")
    for split, names in summary["splits"].items():
        print(f"split {split}: {len(names)} scenes")


@eval_app.command("det")
def eval_det(
    run: str = typer.Argument(..., help="Run folder with <clip>/labels/detection.json per clip."),
    dataroot: str = typer.Option(..., help="nuScenes-format dataroot with the ground truth."),
    version: str = typer.Option(..., help="Dataset version, e.g. v1.0-mini."),
    scenes: str = typer.Option(None, help="Comma-separated scene names (default: every clip)."),
    out: str = typer.Option(None, help="Output folder (default RUN/eval)."),
    plots: bool = typer.Option(True, help="Write the devkit's plots as PNG."),
) -> None:
    """nuScenes detection metrics (mAP, NDS, mATE, ...); writes RUN/eval/det.json and plots."""
    from autolabel.evaluation.detection import evaluate_detection, format_detection_metrics

    scene_list = [s for s in scenes.split(",") if s] if scenes else None
    summary = evaluate_detection(
        run, dataroot, version, scene_list, out_dir=out, render_curves=plots
    )
    print("\n".join(format_detection_metrics(summary)))


@eval_app.command("track")
def eval_track(
    run: Path = typer.Argument(..., help="Run folder with <clip>/labels/tracking.json per clip."),
    dataroot: Path = typer.Option(..., "--dataroot", help="nuScenes-format dataset root."),
    version: str = typer.Option(..., "--version", help="Dataset version, e.g. v1.0-mini."),
    scenes: str = typer.Option("", "--scenes", help="Comma-separated scene names (default: all)."),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="Render the devkit's plots."),
    verbose: bool = typer.Option(False, "--verbose", help="Show the devkit's progress output."),
) -> None:
    """Score tracks with nuScenes AMOTA, AMOTP, ...; writes RUN/eval/track.json and RUN/eval/track/."""
    from autolabel.evaluation.tracking import evaluate_tracking, format_tracking_metrics

    scene_list = [s for s in scenes.split(",") if s] or None
    with exit_on(FileNotFoundError, ValueError):
        report = evaluate_tracking(
            run, dataroot, version, scene_list, render_curves=plots, verbose=verbose
        )
    for line in format_tracking_metrics(report["metrics"]):
        print(line)


@app.command("check-qa")
def check_qa(
    run: str = typer.Argument(..., help="Run folder with <clip>/qa.jsonl and attributes.parquet."),
    templates: str = typer.Option(None, help="Template folder (default: the packaged templates)."),
    rig: str = typer.Option(
        None, help="Rig name or YAML; also check every box against the projected 3D box."
    ),
    limit: int = typer.Option(50, help="Print at most this many mismatches."),
    dataroot: str = typer.Option(
        None, help="Dataset root of the records' images; re-measure colours under the masks."
    ),
) -> None:
    """Re-derive every QA answer from the attributes; exit 1 on any mismatch."""
    from autolabel.qa.check import check_qa_run
    from autolabel.qa.templates import load_templates

    cameras = None
    if rig:
        from calib.rig import load_rig

        cameras = load_rig(rig).cameras
    try:
        report = check_qa_run(run, load_templates(templates), cameras, images_root=dataroot)
    except (FileNotFoundError, ValueError) as e:
        print(f"check-qa: {e}")
        raise typer.Exit(2) from None
    for mismatch in report.mismatches[:limit]:
        print(mismatch)
    if len(report.mismatches) > limit:
        print(f"... and {len(report.mismatches) - limit} more")
    print(f"clips: {len(report.records)}")
    print(f"records: {sum(report.records.values())}")
    print(f"clips checked against their marks and masks: {len(report.grounded)}")
    print(f"mismatches: {len(report.mismatches)}")
    if not report.ok:
        raise typer.Exit(1)


@eval_app.command("qa")
def eval_qa(
    reference: Path = typer.Argument(..., help="Reference run (ground-truth replay detections)."),
    candidate: Path = typer.Argument(..., help="Candidate run (the detector under test)."),
    out: Path = typer.Option(None, help="Output JSON (default CANDIDATE/eval/label_quality.json)."),
    match_distance_m: float = typer.Option(2.0, help="Centre distance for a match, metres."),
    method: str = typer.Option("greedy", help="Association: greedy (devkit) or hungarian."),
) -> None:
    """Label quality: agreement of the candidate's QA answers with the reference's, per type."""
    from rich.console import Console

    from autolabel.evaluation.label_quality import (
        LabelQualityConfig,
        evaluate_label_quality,
        format_label_quality,
        format_precision_yield,
        label_quality_table,
        write_precision_yield_plot,
    )

    with exit_on(FileNotFoundError, ValueError):
        config = LabelQualityConfig(match_distance_m=match_distance_m, method=method)
        result = evaluate_label_quality(reference, candidate, out, config)
    print("\n".join(format_label_quality(result)))
    print("\n".join(format_precision_yield(result)))
    Console(width=160).print(label_quality_table(result))
    plot = write_precision_yield_plot(result)
    print(f"written: {result['output']}, {plot}")


@bench_app.command("export")
def bench_export(
    run: Path = typer.Argument(..., help="Run folder with <clip>/qa.jsonl."),
    out: Path = typer.Option(..., "--out", help="Benchmark folder to write."),
    dataroot: Path = typer.Option(None, help="Dataset root (default: the clips' manifests')."),
    images: bool = typer.Option(True, help="Render the Set-of-Mark images (autolabel format)."),
    dynamic_only: bool = typer.Option(False, help="Drop scene groups where nothing moves."),
    seed: int = typer.Option(0, help="Seed of the random baseline."),
    format: str = typer.Option(
        "autolabel", "--format", help="autolabel, or strideqa (the STRIDE-QA-Bench files)."
    ),
) -> None:
    """Write the questions (feed them to a VLM), the answer key, images and baselines."""
    from autolabel.benchmark.export import ExportConfig, export_benchmark
    from autolabel.benchmark.strideqa import StrideqaExportConfig, export_strideqa

    if format not in ("autolabel", "strideqa"):
        typer.echo(f"error: --format must be autolabel or strideqa, got {format!r}", err=True)
        raise typer.Exit(2)
    with exit_on(FileNotFoundError, ValueError):
        if format == "strideqa":
            summary = export_strideqa(
                run, out, dataroot, StrideqaExportConfig(dynamic_only=dynamic_only, seed=seed)
            )
        else:
            config = ExportConfig(images=images, dynamic_only=dynamic_only, seed=seed)
            summary = export_benchmark(run, out, dataroot, config)
    print(f"questions: {summary['questions']}")
    if format == "strideqa":
        for name, n in summary["by_category"].items():
            print(f"{name}: {n}")
        print(f"groups: {summary['groups']}")
        for name, n in summary["groups_by_relation"].items():
            print(f"relation {name}: {n}")
        for name, n in summary["dropped"].items():
            print(f"dropped {name}: {n}")
    else:
        for name, n in summary["by_set"].items():
            print(f"{name}: {n}")
        print(f"groups: {summary['groups']}")
        for name, n in summary["groups_by_situation"].items():
            print(f"situation {name}: {n}")
    print(f"written: {out}")


@bench_app.command("score")
def bench_score(
    bench: Path = typer.Argument(..., help="Benchmark folder (autolabel bench export)."),
    answers: Path = typer.Argument(
        ...,
        help='JSONL of {"id", "answer"} per question, or STRIDE-QA-Bench predictions (a JSON '
        "array of records with question_id and pred, or a folder of *_t*.json).",
    ),
    out: Path = typer.Option(None, help="Metrics JSON (default ANSWERS.scores.json)."),
    tolerances: str = typer.Option(
        "published", help="published (the authors' scorer, default) or paper."
    ),
    parser: str = typer.Option(
        "published",
        help="STRIDE-QA-Bench predictions only: published (its parser, default) or autolabel.",
    ),
) -> None:
    """LSR@t, MLSR, TLC, per-dimension SR, accuracies; prints them and writes JSON."""
    from rich.console import Console

    from autolabel.benchmark.scoring import (
        breakdown_table,
        format_scores,
        score_benchmark,
    )
    from autolabel.benchmark.scoring import (
        tolerances as tolerance_profile,
    )
    from autolabel.benchmark.strideqa import format_strideqa, is_strideqa_input, score_strideqa

    with exit_on(FileNotFoundError, ValueError):
        tolerance_profile(tolerances)
        if is_strideqa_input(bench, answers):
            result = score_strideqa(bench, answers, out, tolerances, parser)
            print("\n".join(format_strideqa(result)))
            print(f"written: {result['scores_file']}")
            return
        result = score_benchmark(bench, answers, out, tolerances)
    print("\n".join(format_scores(result)))
    Console(width=120).print(breakdown_table(result))
    print(f"written: {result['scores_file']}")


@app.command("report")
def report(
    run: Path = typer.Argument(..., help="Run folder."),
    dataroot: Path = typer.Option(None, help="Dataset root (default: the clips' manifests')."),
    max_keyframes: int = typer.Option(None, help="At most this many QA keyframes per clip."),
) -> None:
    """Write RUN/report/index.html: metrics, Set-of-Mark views, bird's-eye plots, QA."""
    from autolabel.report import write_report

    with exit_on(FileNotFoundError, ValueError):
        path = write_report(run, dataroot, max_keyframes_per_clip=max_keyframes)
    print(f"written: {path}")


@app.command()
def run(
    dataroot: Path = typer.Argument(..., help="nuScenes-format dataset root."),
    version: str = typer.Option(..., "--version", help="Table folder, e.g. v1.0-mini."),
    out: Path = typer.Option(..., "--out", help="Run folder (one subfolder per clip)."),
    scenes: str = typer.Option("", help="Comma-separated scene names (default: all)."),
    detector: str = typer.Option(None, help="Detector backend (lidar, gt, results, bevfusion)."),
    tracker: str = typer.Option(None, help="Tracker (pub)."),
    segmenter: str = typer.Option(None, help="Segmenter backend (geometric, lidar, sam2)."),
    config: Path = typer.Option(None, help="YAML run config (PipelineConfig fields, 'ray')."),
    ray: str = typer.Option(
        None,
        "--ray",
        help="Run on Ray: a bare --ray (last, or before another option) starts a local cluster "
        "sized to the machine; --ray ADDRESS joins one ('auto': the one `ray start` runs here).",
    ),
    force: bool = typer.Option(False, help="Recompute clips whose outputs are complete."),
    progress: bool = typer.Option(True, help="Show progress bars."),
) -> None:
    """Run every stage on every clip; exit 1 when a clip failed (the others still complete)."""
    from autolabel.config import ConfigError, load_run_config
    from autolabel.run_report import format_run_report

    try:
        run_config, ray_options = load_run_config(
            config, detector=detector, tracker=tracker, segmenter=segmenter
        )
    except ConfigError as e:
        raise typer.BadParameter(str(e)) from None
    from autolabel.nuscenes_reader import DatasetError
    from autolabel.run_folder import RunFolderError
    from autolabel.segmentation import SegmenterUnavailable
    from detectors import DetectorUnavailableError
    from ray_jobs.cluster import ClusterError

    scene_list = [s for s in scenes.split(",") if s] or None
    try:
        if ray:
            from ray_jobs.run_clips import run_pipeline_ray

            summary = run_pipeline_ray(
                dataroot, version, out, scene_list, run_config, ray_options, ray, force, progress
            )
        else:
            from autolabel.pipeline import run_pipeline

            summary = run_pipeline(dataroot, version, out, scene_list, run_config, force, progress)
    except (
        DatasetError,
        KeyError,
        DetectorUnavailableError,
        SegmenterUnavailable,
        RunFolderError,
        ClusterError,
    ) as e:
        # Nothing can run: the dataset, the scene list, a backend, OUT or the cluster is unusable.
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    print(format_run_report(summary))
    if summary.failed:
        raise typer.Exit(1)


@app.command()
def demo(
    out: Path = typer.Option(Path("demo_out"), help="Folder for the dataset and the run."),
    scenes: int = typer.Option(2, help="Synthetic clips."),
    seconds: float = typer.Option(20.0, help="Clip length, seconds."),
    width: int = typer.Option(480, help="Camera image width, pixels."),
    height: int = typer.Option(270, help="Camera image height, pixels."),
    seed: int = typer.Option(0, help="Seed of the synthetic world and of the run."),
    ray: str = typer.Option(None, "--ray", help="Run on Ray (as `run --ray`)."),
    progress: bool = typer.Option(True, help="Show progress bars."),
    label_quality: bool = typer.Option(True, help="Also run ground-truth replay and score the QA."),
) -> None:
    """Synthetic clips -> every stage (CPU defaults) -> detection, tracking and label-quality
    metrics, the benchmark export and the HTML report."""
    from autolabel.demo import DemoConfig, run_demo
    from autolabel.run_report import format_run_report

    result = run_demo(
        out,
        DemoConfig(
            scenes=scenes,
            seconds=seconds,
            width_px=width,
            height_px=height,
            seed=seed,
            label_quality=label_quality,
        ),  # fmt: skip
        ray_address=ray,
        use_ray=bool(ray),
        progress=progress,
    )
    print(format_run_report(result["summary"]))
    print("\ndetection (nuScenes metrics, synthetic ground truth):")
    print("\n".join(result["detection"]))
    print("\ntracking:")
    print("\n".join(result["tracking"]))
    if result["label_quality"]:
        print("\nlabel quality (QA against ground-truth replay):")
        print("\n".join(result["label_quality"]))
    if result["benchmark"]:
        print("\nbenchmark baselines:")
        print("\n".join(result["benchmark"]))
    if result["report"]:
        print(f"\nreport: {result['report']}")
    print(f"\ndataset: {result['dataroot']}\nrun: {result['run']}")
    if result.get("release"):
        rel = result["release"]
        splits = ", ".join(f"{s} {n}" for s, n in rel["splits"].items())
        print(f"release: {rel['out_dir']} ({splits} records)")
    if result["summary"].failed:
        raise typer.Exit(1)


@app.command()
def release(
    run: Path = typer.Argument(
        ..., help="Run folder with <clip>/qa.jsonl, labels/, manifest.json."
    ),
    out: Path = typer.Option(..., "--out", help="Release folder to write."),
    dataroot: str = typer.Option(None, help="Dataset root (default: each clip's manifest)."),
    version: str = typer.Option(None, help="Dataset version (default: each clip's manifest)."),
    salt: str = typer.Option(
        None, help="Secret salt of the re-keyed ids (default: a random secret kept in RUN)."
    ),
    frames: str = typer.Option(None, help="Images per camera: context (default) or keyframe."),
    image_format: str = typer.Option(None, help="jpg (default) or png."),
    webdataset: bool = typer.Option(False, help="Also write WebDataset tar shards."),
    learned_faces: bool = typer.Option(
        None, "--learned-faces/--no-learned-faces", help="Blur CenterFace faces (default: on)."
    ),
    config: Path = typer.Option(None, help="YAML with ReleaseConfig fields (options override)."),
    force: bool = typer.Option(False, help="Replace an existing release folder."),
) -> None:
    """Anonymized training release: Parquet, conversations, dataset card, statistics."""
    import dataclasses

    from autolabel.config import ConfigError
    from autolabel.release import ReleaseLeakError, build_release
    from autolabel.release.writer import load_release_config

    try:
        cfg = load_release_config(config)
        cfg = dataclasses.replace(
            cfg,
            dataroot=dataroot or cfg.dataroot,
            version=version or cfg.version,
            salt=salt or cfg.salt,
            frames=frames or cfg.frames,
            image_format=image_format or cfg.image_format,
            webdataset=webdataset or cfg.webdataset,
            anonymize=dataclasses.replace(
                cfg.anonymize,
                learned_faces=cfg.anonymize.learned_faces
                if learned_faces is None
                else learned_faces,
            ),
            overwrite=force,
        )
        summary = build_release(run, out, cfg)
    except (ConfigError, FileNotFoundError, FileExistsError, ValueError, ReleaseLeakError) as e:
        typer.echo(f"release: {e}", err=True)
        raise typer.Exit(1) from None
    for key in ("out_dir", "images", "blurred_area_fraction", "seconds"):
        print(f"{key}: {summary[key]}")
    if cfg.salt is None:
        from autolabel.release.salt import salt_file

        print(
            f"salt: a random secret, kept in {salt_file(run)} (keep it private; pass --salt to choose your own)"
        )
    for split, n in summary["splits"].items():
        print(f"split {split}: {n} records, {summary['clips'][split]} clips")


@app.command("sweep-timing")
def sweep_timing(
    dataroot: str = typer.Argument(..., help="dataset root (holds the table folder)"),
    version: str = typer.Option(..., help="table folder, e.g. v1.0-trainval"),
    scene: str = typer.Option(None, help="clip to read (default: the first)"),
    min_range_m: float = typer.Option(
        5.0, help="nearest object the seam's widening for the LiDAR's lever arm covers, metres"
    ),
) -> None:
    """Measure the LiDAR sweep's period, seam and camera triggers from a dataset's own files, and
    print the release's sweep settings (anonymize.geometric) when the rig supports them."""
    from autolabel.nuscenes_reader import DatasetError, list_clips, open_dataset, read_clip
    from autolabel.sweep_timing import format_sweep_timing, measure_sweep_timing

    with exit_on(DatasetError, FileNotFoundError, KeyError, ValueError):
        nusc = open_dataset(dataroot, version)
        clip = read_clip(nusc, scene or list_clips(nusc)[0], with_ground_truth=False)
        timing = measure_sweep_timing(clip)
        print("\n".join(format_sweep_timing(timing, min_range_m)))


if __name__ == "__main__":
    app()
