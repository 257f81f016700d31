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


if __name__ == "__main__":
    app()
