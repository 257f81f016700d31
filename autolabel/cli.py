"""The ``autolabel`` command line: parses arguments, calls a library function, prints."""

from __future__ import annotations

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


if __name__ == "__main__":
    app()
