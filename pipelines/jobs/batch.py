"""The batch job: ingest → decode → replay → Delta tables, with progress and a final summary.

Run it either way (same code path):
    offsetlake run batch --conf conf/local.yaml
    spark-submit pipelines/jobs/batch.py --conf conf/local.yaml

Rules:
- ``main`` only wires I/O; the transformations are ``DataFrame -> DataFrame`` functions in
  ``pipelines.ingest``, ``pipelines.decode`` and ``pipelines.replay_job``; all table writes go
  through ``pipelines.tableio``.
- Batch = full rebuild from ``raw_records`` at one Delta version. Every derived table is written
  with the marker (app id, raw_records version); the gold app id also carries a fingerprint of the
  replay settings. A rerun over the same input therefore finds every table already at its marker
  and changes nothing (not even the table versions); a retried crash finishes only what is
  missing. Current-state tables (group_state, offsets_current) are MERGEd (only changed rows are
  rewritten; rows absent from the rebuild are deleted); every other table is replaced in one
  commit of files written by the executors.
- The summary asserts ``raw = decoded + quarantined + unsupported`` (a mismatch fails the job)
  and reports ``read = new + duplicates + refused`` for the ingest (refused rows: bad or
  conflicting positions, in ``ingest_quarantine``).
- One writer per warehouse: the run holds ``pipelines.warehouse_lock`` throughout.
- "Now" for expiry: ``replay.as_of_ms``, else the robust log clock (``pipelines.log_clock``): a
  record far ahead of its partition's later records does not move it; the summary lists them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if __name__ == "__main__" and __package__ in (None, ""):  # spark-submit pipelines/jobs/batch.py
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.config import Config
    from pipelines.tableio import TableIO, WriteResult

log = logging.getLogger("offsetlake.batch")

DECODE_APP_ID = "offsetlake-batch-decode"
GOLD_APP_PREFIX = "offsetlake-batch-gold"
DECODED_TABLES = ("offset_commits", "group_metadata", "unsupported_records", "quarantine")
# Current-state tables: one row per group / group-partition, MERGEd (collected on the driver on
# the rust engine: small by construction). Every other table is replaced by executors' files.
CURRENT_STATE_TABLES = ("group_state", "offsets_current")
#: Ingest's refused input rows (bad or conflicting positions); listed in the summary when present.
INGEST_QUARANTINE = "ingest_quarantine"
# Stages, in order. ``--stage`` runs one (Airflow runs each as its own task); skipped stages
# read what an earlier run committed (every stage is idempotent on the raw_records version).
STAGES = ("ingest", "decode", "replay")


def gold_table_names() -> tuple[str, ...]:
    """The gold tables the batch job builds (``schemas.gold.GOLD_TABLES``)."""
    try:
        from schemas.gold import GOLD_TABLES
    except ImportError:
        return ()
    return tuple(t.name for t in GOLD_TABLES)


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
    decoded: int = 0
    offset_commits: int = 0
    group_metadata: int = 0
    quarantined: int = 0
    unsupported: int = 0
    groups: int = 0
    clock_outliers: int = 0  # records ignored by the robust log clock (as_of_ms not set)
    tables: list[TableLine] = field(default_factory=list)
    stages: list[tuple[str, float]] = field(default_factory=list)
    wall_seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)

    @property
    def reconciled(self) -> bool:
        return self.raw_total == self.decoded + self.quarantined + self.unsupported

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source, "records_read": self.records_read, "records_new": self.records_new,
            "refused": self.refused, "refused_reasons": dict(self.refused_reasons),
            "duplicates": self.records_read - self.records_new - self.refused,
            "raw_total": self.raw_total, "raw_version": self.raw_version, "decoded": self.decoded,
            "offset_commits": self.offset_commits, "group_metadata": self.group_metadata,
            "quarantined": self.quarantined, "unsupported": self.unsupported, "groups": self.groups,
            "clock_outliers": self.clock_outliers,
            "tables": {t.name: {"rows": t.rows, "version": t.version, "action": t.action} for t in self.tables},
            "stages": {name: round(sec, 3) for name, sec in self.stages},
            "wall_seconds": round(self.wall_seconds, 3), "reconciled": self.reconciled,
            "warnings": list(self.warnings),
        }


class _Progress:
    """Stage timing: one log line when a stage starts and one with its duration when it ends."""

    def __init__(self, summary: BatchSummary, echo: Callable[[str], None]) -> None:
        self.summary = summary
        self.echo = echo

    def stage(self, name: str) -> _Stage:
        return _Stage(self, name)


class _Stage:
    def __init__(self, progress: _Progress, name: str) -> None:
        self.progress = progress
        self.name = name
        self.detail = ""

    def __enter__(self) -> _Stage:
        self.start = time.perf_counter()
        self.progress.echo(f"[batch] {self.name} ...")
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        took = time.perf_counter() - self.start
        self.progress.summary.stages.append((self.name, took))
        status = "failed" if exc_type else "done"
        extra = f" — {self.detail}" if self.detail else ""
        self.progress.echo(f"[batch] {self.name} {status} in {took:.1f}s{extra}")


def replay_fingerprint(cfg: Config) -> str:
    """Short hash of the settings the gold tables depend on (part of the gold app id)."""
    payload = {
        "replay": cfg.to_dict()["replay"],
        "num_partitions": cfg.offsets_topic.num_partitions,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


def _all_applied(io: TableIO, names: Sequence[str], app_id: str, version: int) -> bool:
    return all(io.applied(name, app_id, version) for name in names)


def _write_table(io: TableIO, name: str, df: DataFrame, app_id: str, version: int) -> WriteResult:
    from schemas import get as get_spec

    if name in CURRENT_STATE_TABLES:
        return io.merge(name, df, get_spec(name).primary_key, delete_missing=True, txn_app_id=app_id,
                        txn_version=version)
    return io.overwrite(name, df, txn_app_id=app_id, txn_version=version)


def run_batch(
    cfg: Config,
    spark: SparkSession,
    *,
    io: TableIO | None = None,
    echo: Callable[[str], None] | None = None,
    stages: Sequence[str] = STAGES,
) -> BatchSummary:
    """Run ingest → decode → replay → gold writes once (or only ``stages``); returns the summary.

    Holds the warehouse's writer lock throughout (``pipelines.warehouse_lock``): a second batch,
    a batch during a stream or two replays are refused before anything is read.
    """
    from pipelines.warehouse_lock import warehouse_lock

    say = echo or (lambda msg: log.info(msg))
    with warehouse_lock(cfg.paths.warehouse, "offsetlake batch (" + "+".join(stages) + ")") as lock:
        cleaned = lock.cleanup.line()
        if cleaned:
            say(f"[batch] {cleaned}")
        if lock.took_over is not None:
            say(f"[batch] took over the warehouse lock of {lock.took_over.describe()} (no longer running)")
        return _run_batch(cfg, spark, io=io, say=say, stages=stages)


def _run_batch(
    cfg: Config,
    spark: SparkSession,
    *,
    io: TableIO | None,
    say: Callable[[str], None],
    stages: Sequence[str],
) -> BatchSummary:
    from pipelines import ingest as ingest_mod
    from pipelines.tableio import TableIO

    started = time.perf_counter()
    summary = BatchSummary()
    progress = _Progress(summary, say)
    io = io or TableIO(cfg, spark)
    say(f"[batch] delta engine: {io.engine}; warehouse: {cfg.paths.warehouse}")

    # 1. ingest ------------------------------------------------------------------------------
    with progress.stage("ingest") as st:
        if "ingest" not in stages:
            summary.raw_total = io.count("raw_records")
            summary.raw_version = io.version("raw_records") or 0
            st.detail = f"not this stage; raw_records {summary.raw_total} rows (v{summary.raw_version})"
        else:
            res = ingest_mod.ingest(spark, cfg, io)
            summary.source = res.source
            summary.records_read = res.records_read
            summary.records_new = res.records_new
            summary.refused = res.quarantined
            summary.refused_reasons = dict(res.quarantine_reasons)
            summary.raw_total = res.raw_total
            summary.raw_version = res.raw_version
            st.detail = (f"{res.records_read} read, {res.records_new} new, {res.duplicates} duplicates, "
                         f"{res.quarantined} refused, raw_records {res.raw_total} rows (v{res.raw_version})")
            if res.quarantined:
                summary.warnings.append(
                    f"{res.quarantined} input records refused at ingest (ingest_quarantine: "
                    + ", ".join(f"{k} {v}" for k, v in res.quarantine_reasons) + ")")
    raw_version = summary.raw_version
    decoded_changed = False
    gold_app = f"{GOLD_APP_PREFIX}-{replay_fingerprint(cfg)}"
    spool: tuple[dict[str, Any], str] | None = None  # the replay input, written by the decode pass

    # 2. decode (full rebuild of the decoded tables at this raw_records version) ---------------
    with progress.stage("decode") as st:
        if "decode" not in stages:
            st.detail = "not this stage"
        elif _all_applied(io, DECODED_TABLES, DECODE_APP_ID, raw_version):
            st.detail = f"up to date with raw_records v{raw_version}"
        elif io.engine == "rust":
            # one pass: executors decode and write the four tables; the commit checks the counts.
            # When the replay follows, the same pass spools the replay input, cut into buckets
            from pipelines.batch_replay import spool_options
            from pipelines.decode_tables import write_decoded_from_raw_table

            if "replay" in stages and not _all_applied(io, gold_table_names(), gold_app, raw_version):
                spool = spool_options(io)
            try:
                results = write_decoded_from_raw_table(
                    io, app_id=DECODE_APP_ID, version=raw_version, expected_rows=summary.raw_total, spool=spool
                )
            except BaseException:
                if spool is not None:  # nothing was committed: the spool's files are no one's
                    from pipelines.batch_replay import SPOOL

                    io.drop_staged(SPOOL)
                raise
            decoded_changed = any(not wr.skipped for wr in results.values())
            st.detail = ", ".join(f"{name} {io.count(name)}" for name in DECODED_TABLES)
        else:
            from pipelines.decode import decode_raw, kind_counts, reconcile_counts

            result = decode_raw(io.read("raw_records"), persist=True)
            try:
                counts = kind_counts(result.union)
                rec = reconcile_counts(summary.raw_total, counts)
                if not rec.ok:
                    raise RuntimeError(rec.message())
                for name, df in result.tables().items():
                    wr = _write_table(io, name, df, DECODE_APP_ID, raw_version)
                    decoded_changed = decoded_changed or not wr.skipped
            finally:
                result.union.unpersist()
            st.detail = ", ".join(f"{k} {v}" for k, v in counts.items())
        summary.offset_commits = io.count("offset_commits")
        summary.group_metadata = io.count("group_metadata")
        summary.decoded = summary.offset_commits + summary.group_metadata
        summary.quarantined = io.count("quarantine")
        summary.unsupported = io.count("unsupported_records")

    # 3. replay → gold -----------------------------------------------------------------------
    gold_written: dict[str, str] = {}
    with progress.stage("replay") as st:
        try:
            from pipelines.replay_job import replay_to_gold
        except ImportError as exc:  # the replay module is built in parallel (issue 5)
            summary.warnings.append(f"gold tables not built: pipelines.replay_job unavailable ({exc})")
            st.detail = "skipped (pipelines.replay_job not available)"
        else:
            if "replay" not in stages:
                st.detail = "not this stage"
            elif _all_applied(io, gold_table_names(), gold_app, raw_version):
                st.detail = f"up to date with raw_records v{raw_version}"
            elif not _all_applied(io, DECODED_TABLES, DECODE_APP_ID, raw_version):
                # gold is marked with the raw_records version: never build it from stale decoded tables
                from pipelines.errors import UsageError

                raise UsageError(
                    f"the decoded tables are not at raw_records v{raw_version}: run the decode stage first"
                )
            else:
                as_of: list[int | None] = []
                n_gold = len(gold_table_names())
                direct = None
                as_of_ms = cfg.replay.as_of_ms
                # what the capture says about itself, in one aggregate: its clock, its compaction
                from pipelines.log_shape import (
                    compaction_note,
                    log_partitions,
                    partition_stats,
                    rows_to_table,
                )

                raw = io.read("raw_records")
                from pipelines.batch_replay import read_spool_manifest
                from pipelines.log_shape import STATS_KIND, combine

                # from the decode pass that read every raw record (with the spool), else one aggregate
                beside = read_spool_manifest(spool[1], STATS_KIND) if spool else None
                stats = combine(beside) if beside else partition_stats(raw)
                if as_of_ms is None:
                    # "now" = the robust log clock: one absurd timestamp must not expire everything
                    from pipelines.log_clock import clock_from_stats, log_clock

                    clock = clock_from_stats(stats, cfg.replay.clock_outlier_ms) or log_clock(
                        raw, cfg.replay.clock_outlier_ms)
                    if clock.outliers:
                        as_of_ms = clock.now_ms
                        summary.clock_outliers = len(clock.outliers)
                        summary.warnings.append(clock.describe())
                        log.warning("replay: %s", clock.describe())
                if io.engine == "rust":  # tasks read the decoded files and write the gold files
                    from pipelines.batch_replay import write_gold_from_files

                    direct = write_gold_from_files(
                        io, app_id=gold_app, version=raw_version, tables=gold_table_names(),
                        current_state=CURRENT_STATE_TABLES, retention_ms=cfg.replay.retention_ms,
                        rules=cfg.replay.rules, coordinator=cfg.replay.coordinator, as_of_ms=as_of_ms,
                        cleanup_interval_ms=cfg.replay.cleanup_interval_ms,
                        num_partitions=cfg.offsets_topic.num_partitions, on_as_of=as_of.append,
                        spool_manifest=spool[1] if spool else None,
                    )
                if direct is not None:
                    gold_written.update(direct)
                else:
                    gold = replay_to_gold(
                        io.read("offset_commits"),
                        io.read("group_metadata"),
                        retention_ms=cfg.replay.retention_ms,
                        rules=cfg.replay.rules,
                        coordinator=cfg.replay.coordinator,
                        cleanup_interval_ms=cfg.replay.cleanup_interval_ms,
                        as_of_ms=as_of_ms,
                        unsupported_df=io.read("unsupported_records"),
                        tables=gold_table_names(),
                        num_partitions=cfg.offsets_topic.num_partitions,
                        on_as_of=as_of.append,
                    )
                    union = gold.pop("_union", None)
                    try:
                        for name, df in gold.items():
                            wr = _write_table(io, name, df, gold_app, raw_version)
                            gold_written[name] = (
                                "unchanged" if wr.skipped else ("merged" if wr.operation == "merge" else "written")
                            )
                    finally:
                        if union is not None:
                            union.unpersist()
                st.detail = f"{n_gold} gold tables, as_of_ms={as_of[0] if as_of else None}"
                # one row per __consumer_offsets partition: a small current-state table, MERGEd from
                # Arrow on the driver (no Spark write job), rows gone from the log deleted
                shape = log_partitions(raw, stats)
                wr = io.merge("log_partitions", rows_to_table("log_partitions", shape), delete_missing=True)
                gold_written["log_partitions"] = "unchanged" if wr.skipped else "merged"
                note = compaction_note(io, shape)
                if note:
                    summary.warnings.append(note)

    # 4. summary -----------------------------------------------------------------------------
    with progress.stage("summary"):
        for name in ("raw_records", INGEST_QUARANTINE, *DECODED_TABLES, *gold_table_names(), "log_partitions"):
            if not io.exists(name):
                continue
            action = gold_written.get(name)
            if action is None:
                action = "written" if (name in DECODED_TABLES and decoded_changed) or (
                    name == "raw_records" and summary.records_new) or (
                    name == INGEST_QUARANTINE and summary.refused) else "unchanged"
            summary.tables.append(TableLine(name, io.count(name), io.version(name), action))
        if io.exists("group_state"):
            summary.groups = io.count("group_state")
    summary.wall_seconds = time.perf_counter() - started
    if summary.raw_total and summary.quarantined / summary.raw_total > cfg.dq.quarantine_max_fraction:
        summary.warnings.append(
            f"quarantine holds {summary.quarantined / summary.raw_total:.2%} of raw records "
            f"(dq.quarantine_max_fraction {cfg.dq.quarantine_max_fraction:.2%})"
        )
    if "decode" in stages and not summary.reconciled:
        raise RuntimeError(
            f"count mismatch: raw {summary.raw_total} != decoded {summary.decoded} + quarantined "
            f"{summary.quarantined} + unsupported {summary.unsupported}"
        )
    return summary


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
    head.add_row("read = new + duplicates + refused",
                 f"{summary.records_read:,} = {summary.records_new:,} + {dupes:,} + {summary.refused:,}")
    head.add_row("raw_records", f"{summary.raw_total:,} (v{summary.raw_version})")
    head.add_row("decoded", f"{summary.decoded:,} ({summary.offset_commits:,} offset commits, "
                 f"{summary.group_metadata:,} group metadata)")
    head.add_row("quarantined", f"{summary.quarantined:,}")
    head.add_row("unsupported", f"{summary.unsupported:,}")
    check = "OK" if summary.reconciled else "MISMATCH"
    head.add_row("raw = decoded + quarantined + unsupported",
                 f"{summary.raw_total:,} = {summary.decoded:,} + {summary.quarantined:,} + {summary.unsupported:,}  {check}")
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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point for ``spark-submit pipelines/jobs/batch.py --conf ...`` and ``offsetlake run batch``."""
    import argparse

    from pipelines.config import add_conf_arguments
    from pipelines.errors import UsageError

    parser = argparse.ArgumentParser(
        prog="batch.py", description="offsetlake batch job: ingest, decode, replay into Delta tables."
    )
    add_conf_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON instead of tables")
    parser.add_argument("--stage", choices=[*STAGES, "all"], default="all",
                        help="run one stage only (Airflow runs each as its own task); default: all")
    args = parser.parse_args(argv)
    try:
        return run_from_args(args)
    except UsageError as exc:
        print(f"batch: error: {exc}", file=sys.stderr)
        return 2


def run_from_args(args: Any) -> int:
    """Shared by ``main`` and ``offsetlake run batch``: load config, build Spark, run, print."""
    from rich.console import Console

    from pipelines.config import config_from_args
    from pipelines.spark_session import build_spark_from_config
    from pipelines.warehouse_lock import warehouse_lock

    cfg = config_from_args(args)
    err = Console(stderr=True)
    err.print(f"[batch] config: {' + '.join(cfg.sources)}")
    stage = getattr(args, "stage", "all")
    stages = STAGES if stage in (None, "all") else (stage,)
    # the lock first: a refused run starts no JVM (run_batch takes it again, re-entrantly)
    with warehouse_lock(cfg.paths.warehouse, "offsetlake batch (" + "+".join(stages) + ")"):
        spark = build_spark_from_config(cfg, app_suffix="batch")
        summary = run_batch(cfg, spark, echo=lambda m: err.print(m, highlight=False), stages=stages)
    if getattr(args, "json", False):
        print(json.dumps(summary.as_dict(), indent=2))
    else:
        render_summary(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
