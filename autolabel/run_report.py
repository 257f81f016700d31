"""The end-of-run report: a table per stage and where the outputs are."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autolabel.pipeline import SUMMARY, ClipOutcome, RunSummary
from autolabel.stages import STAGE_NAMES

COLUMNS = (
    "clips", "frames", "images", "objects", "kept", "rejected", "qa", "seconds", "cpu", "compile"
)  # fmt: skip
#: Which count of each stage fills which column (``<stage>.<count>`` in ``ClipOutcome.counts``).
STAGE_COLUMNS: dict[str, dict[str, str]] = {
    "read": {"frames": "frames", "images": "images"},
    "detect": {"frames": "frames", "objects": "boxes"},
    "track": {"objects": "tracks"},
    "refine": {"objects": "tracks_out", "kept": "tracks_out", "rejected": "tracks_rejected"},
    "attributes": {"objects": "rows", "kept": "tracks", "rejected": "tracks_rejected"},
    "segment": {"images": "images", "objects": "masks"},
    "visibility": {"objects": "candidates", "kept": "kept", "rejected": "rejected"},
    "marks": {"frames": "keyframes", "images": "images", "objects": "regions"},
    "qa": {"frames": "keyframes", "qa": "records"},
}
COLUMN_NOTES = (
    "objects: detect boxes, track tracks, refine tracks kept, attributes rows (kept/rejected: "
    "tracks), segment masks, visibility candidate views, marks regions; frames of marks and qa: "
    "QA keyframes; seconds: the stage's own work (wall, in tasks and actors), cpu: its CPU "
    "seconds, compile: numba compilation on first use in a process (start-up, not in seconds)"
)


def stage_table(clips: Sequence[ClipOutcome]) -> list[dict[str, Any]]:
    """One row per stage: clips that finished it, summed counts and seconds over those clips."""
    rows = []
    for stage in STAGE_NAMES:
        ran = [c for c in clips if stage in c.stage_seconds]
        done = [c for c in ran if any(k.startswith(f"{stage}.") for k in c.counts)]
        row: dict[str, Any] = {"stage": stage, "clips": len(done)}
        for column, key in STAGE_COLUMNS.get(stage, {}).items():
            row[column] = sum(c.counts.get(f"{stage}.{key}", 0) for c in done)
        row["seconds"] = round(sum(c.stage_seconds.get(stage, 0.0) for c in ran), 2)
        row["cpu"] = round(sum(c.stage_cpu_seconds.get(stage, 0.0) for c in ran), 2)
        row["compile"] = round(sum(c.stage_compile_seconds.get(stage, 0.0) for c in ran), 2)
        rows.append(row)
    return rows


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    header = ["stage", *COLUMNS]
    cells = [header] + [[str(r.get(h, "")) if h in r else "-" for h in header] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_run_report(summary: RunSummary) -> str:
    """The table per stage, the clips' statuses, every failure and where the outputs are."""
    clips = summary.clips
    status = {s: sum(c.status == s for c in clips) for s in ("done", "skipped", "failed")}
    lines = [
        format_table(stage_table(clips)),
        f"({COLUMN_NOTES})",
        "",
        f"clips: {len(clips)} (done {status['done']}, skipped {status['skipped']}, "
        f"failed {status['failed']}) in {summary.seconds:.1f} s ({summary.executor}), "
        f"{summary.clips_per_minute:.2f} clips/min; start-up {summary.startup_seconds:.1f} s "
        "(models loaded before the first clip)",
    ]
    if summary.executor == "ray":
        waited = sum(c.wait_seconds for c in clips)
        busy = ", ".join(
            f"{kind} {share:.0%} of {summary.actors[kind]} actor(s)"
            for kind, share in summary.actor_busy_share().items()
        )
        lines += [
            f"waiting: {waited:.1f} s summed over steps (queueing, transfers, worker start-up; "
            "not in the stage seconds)",
            f"model actors busy: {busy}",
        ]
    for c in summary.failed:
        err = c.error or {}
        where = f" [{err['file']}]" if err.get("file") else ""
        lines.append(f"FAILED {c.clip}: stage {err.get('stage')}{where}: {err.get('message')}")
    lines += [
        f"outputs: {summary.out_dir}/<clip>/ (labels/, attributes.parquet, masks/, "
        "visibility.parquet, marks/, qa.jsonl, manifest.json)",
        f"run summary: {summary.out_dir / SUMMARY}",
    ]
    return "\n".join(lines)
