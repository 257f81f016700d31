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


if __name__ == "__main__":
    app()
