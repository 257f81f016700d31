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
