"""What one batch run did: the summary object, its stage timer and its printout.

Rules:
- ``BatchSummary.reconciled``: raw = decoded + quarantined + unsupported (the job fails on a
  mismatch); ``read = new + duplicates + refused`` for the ingest.
- ``stages`` holds (stage, seconds) in order and ``paths`` the one path each stage took
  (e.g. ``decode: routed raw_records files -> decoded tables + replay input``): the same on
  every entry point (CLI, spark-submit, Airflow, ``bench/batch.py``).
- Every successful run leaves its summary as JSON in the warehouse
  (``_runs/batch/<UTC time>-<run id>.json``, ``save_run_record``): what ran, how long each
  stage took and which path it took, whichever scheduler started it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pipelines.config import join_path
from pipelines.uri import filesystem as filesystem_of
from pipelines.warehouse.layout import BATCH_RUNS_DIR


@dataclass
class TableLine:
    """One row of the summary's table list."""

    name: str
    rows: int
    version: int | None
    action: str  # written | merged | unchanged


@dataclass
class BatchSummary:
    """What one batch run did (printed at the end, returned to callers and tests)."""

    source: str = ""
    records_read: int = 0
    records_new: int = 0
    refused: int = 0  # input rows refused at ingest (ingest_quarantine): bad or conflicting positions
    refused_reasons: dict[str, int] = field(default_factory=dict)
    raw_total: int = 0
    raw_version: int = 0
    control_records: int = 0  # broker segments' COMMIT/ABORT markers read (raw_transactions, not raw_records)
    transactional_new: int = 0  # rows appended to raw_transactions
    bad_batches: int = 0  # broker segments' unreadable batches (ingest_quarantine, reason bad_batch)
    decoded: int = 0
    offset_commits: int = 0
    group_metadata: int = 0
    group_records: int = 0  # Kafka 4 group records (KIP-848/932/1071): decoded
    quarantined: int = 0
    unsupported: int = 0
    groups: int = 0
    clock_outliers: int = 0  # records ignored by the robust log clock (as_of_ms not set)
    tables: list[TableLine] = field(default_factory=list)
    stages: list[tuple[str, float]] = field(default_factory=list)
    paths: dict[str, str] = field(default_factory=dict)  # stage -> the path it took (see module doc)
    wall_seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)

    @property
    def reconciled(self) -> bool:
        return self.raw_total == self.decoded + self.quarantined + self.unsupported

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "records_read": self.records_read,
            "records_new": self.records_new,
            "refused": self.refused,
            "refused_reasons": dict(self.refused_reasons),
            "duplicates": self.records_read - self.records_new - self.refused,
            "raw_total": self.raw_total,
            "raw_version": self.raw_version,
            "control_records": self.control_records,
            "transactional_new": self.transactional_new,
            "bad_batches": self.bad_batches,
            "decoded": self.decoded,
            "offset_commits": self.offset_commits,
            "group_metadata": self.group_metadata,
            "group_records": self.group_records,
            "quarantined": self.quarantined,
            "unsupported": self.unsupported,
            "groups": self.groups,
            "clock_outliers": self.clock_outliers,
            "tables": {t.name: {"rows": t.rows, "version": t.version, "action": t.action} for t in self.tables},
            "stages": {name: round(sec, 3) for name, sec in self.stages},
            "paths": dict(self.paths),
            "wall_seconds": round(self.wall_seconds, 3),
            "reconciled": self.reconciled,
            "warnings": list(self.warnings),
        }


class Progress:
    """Stage timing: one log line when a stage starts and one with its duration when it ends."""

    def __init__(self, summary: BatchSummary, echo: Callable[[str], None]) -> None:
        self.summary = summary
        self.echo = echo

    def stage(self, name: str) -> Stage:
        return Stage(self, name)


class Stage:
    def __init__(self, progress: Progress, name: str) -> None:
        self.progress = progress
        self.name = name
        self.detail = ""

    def __enter__(self) -> Stage:
        self.start = time.perf_counter()
        self.progress.echo(f"[batch] {self.name} ...")
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        took = time.perf_counter() - self.start
        self.progress.summary.stages.append((self.name, took))
        status = "failed" if exc_type else "done"
        extra = f" — {self.detail}" if self.detail else ""
        self.progress.echo(f"[batch] {self.name} {status} in {took:.1f}s{extra}")


def render_summary(summary: BatchSummary, console: Any = None) -> None:
    """Print the summary with rich (records, reconciliation, tables, stage timings)."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    head = Table(title="offsetlake batch summary", show_header=False, title_justify="left")
    head.add_column("what")
    head.add_column("value", justify="right")
    head.add_row("source", summary.source)
    head.add_row("records read / new", f"{summary.records_read:,} / {summary.records_new:,}")
    dupes = summary.records_read - summary.records_new - summary.refused
    head.add_row(
        "read = new + duplicates + refused",
        f"{summary.records_read:,} = {summary.records_new:,} + {dupes:,} + {summary.refused:,}",
    )
    head.add_row("raw_records", f"{summary.raw_total:,} (v{summary.raw_version})")
    head.add_row(
        "decoded",
        f"{summary.decoded:,} ({summary.offset_commits:,} offset commits, {summary.group_metadata:,} group metadata, "
        f"{summary.group_records:,} Kafka 4 group records)",
    )
    head.add_row("quarantined", f"{summary.quarantined:,}")
    head.add_row("unsupported", f"{summary.unsupported:,}")
    check = "OK" if summary.reconciled else "MISMATCH"
    head.add_row(
        "raw = decoded + quarantined + unsupported",
        f"{summary.raw_total:,} = {summary.decoded:,} + {summary.quarantined:,} + {summary.unsupported:,}  {check}",
    )
    head.add_row("groups", f"{summary.groups:,}")
    head.add_row("wall time", f"{summary.wall_seconds:.1f}s")
    console.print(head)
    tables = Table(title="tables", title_justify="left")
    tables.add_column("table")
    tables.add_column("rows", justify="right")
    tables.add_column("version", justify="right")
    tables.add_column("this run")
    for t in summary.tables:
        tables.add_row(t.name, f"{t.rows:,}", str(t.version), t.action)
    console.print(tables)
    stages = "  ".join(f"{name} {sec:.1f}s" for name, sec in summary.stages)
    console.print(f"stages: {stages}")
    for w in summary.warnings:
        console.print(f"[yellow]warning:[/yellow] {w}")


def save_run_record(warehouse: str, run_id: str, summary: BatchSummary) -> str:
    """Write ``summary`` as ``<warehouse>/_runs/batch/<UTC time>-<run id>.json``; its path."""
    import json
    from datetime import UTC, datetime

    name = datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + f"-{run_id}.json"
    path = join_path(join_path(warehouse, BATCH_RUNS_DIR), name)
    filesystem, inner = filesystem_of(path)
    filesystem.create_dir(inner.rsplit("/", 1)[0], recursive=True)
    with filesystem.open_output_stream(inner) as out:
        out.write(json.dumps(summary.as_dict(), indent=2).encode())
    return path


def run_records(warehouse: str) -> list[dict[str, Any]]:
    """The batch job's run records in this warehouse, oldest first."""
    import json

    from pyarrow import fs

    filesystem, inner = filesystem_of(join_path(warehouse, BATCH_RUNS_DIR))
    infos = filesystem.get_file_info(fs.FileSelector(inner, allow_not_found=True))
    out = []
    for info in sorted(infos, key=lambda i: i.path):
        with filesystem.open_input_stream(info.path) as fh:
            out.append(json.loads(fh.read().decode()))
    return out
