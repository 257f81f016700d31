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
def synth(
    out: Path = typer.Argument(..., help="Dataroot to create (nuScenes layout)."),
    scenes: int = typer.Option(2, help="Number of scenes (clips)."),
    seconds: float = typer.Option(20.0, help="Clip length, seconds (keyframes at 2 Hz)."),
    seed: int = typer.Option(0, help="Seed of every random choice."),
    width: int | None = typer.Option(None, help="Camera image width (default: the rig's)."),
    height: int | None = typer.Option(None, help="Camera image height (default: the rig's)."),
    rig: str = typer.Option("nuscenes", help="Sensor rig name or YAML path."),
    version: str = typer.Option("v1.0-mini", help="nuScenes version folder to write."),
    force: bool = typer.Option(False, help="Replace an existing dataset in OUT."),
) -> None:
    """Write synthetic drive logs as a nuScenes-format dataset (tables, images, sweeps, maps)."""
    from autolabel.synth.config import SynthConfig
    from autolabel.synth.generator import generate_dataset

    try:
        config = SynthConfig(
            scenes=scenes, seed=seed, seconds=seconds, width_px=width, height_px=height,
            rig=rig, version=version,
        )  # fmt: skip
        summary = generate_dataset(out, config, overwrite=force)
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
) -> None:
    """Re-derive every QA answer from the attributes; exit 1 on any mismatch."""
    from autolabel.qa.check import check_qa_run
    from autolabel.qa.templates import load_templates

    cameras = None
    if rig:
        from calib.rig import load_rig

        cameras = load_rig(rig).cameras
    try:
        report = check_qa_run(run, load_templates(templates), cameras)
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
