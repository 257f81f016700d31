"""The ``autolabel`` command line: parses arguments, calls a library function, prints."""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(
    no_args_is_help=True, add_completion=False, help="Auto-label nuScenes-format driving logs."
)
eval_app = typer.Typer(
    no_args_is_help=True, help="Score labels with the official nuScenes metrics."
)
app.add_typer(eval_app, name="eval")


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

    try:
        rows = describe_clips(dataroot, version)
    except DatasetError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None
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
    try:
        report = evaluate_tracking(
            run, dataroot, version, scene_list, render_curves=plots, verbose=verbose
        )
    except (FileNotFoundError, ValueError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None
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
    print(f"mismatches: {len(report.mismatches)}")
    if not report.ok:
        raise typer.Exit(1)


if __name__ == "__main__":
    app()
