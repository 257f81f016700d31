"""The run report: ``write_report(run_dir)`` writes ``RUN/report/index.html`` (``html``) with its
plots (``plots``)."""

from autolabel.report.html import write_report

__all__ = ["write_report"]
