"""The batch job: ingest → decode → replay → Delta tables, with progress and a final summary.

Run it any way, the same code path (the summary's ``paths`` say which path each stage took):
    offsetlake run batch --conf conf/local.yaml
    spark-submit pipelines/jobs/batch.py --conf conf/local.yaml
    the Airflow DAG ``offsetlake_batch`` (one task runs all three stages) and ``bench/batch.py``

Rules:
- One path per stage: ingest (``pipelines.batch.ingest``), decode (``pipelines.batch.decode``:
  one routed pass writes the decoded tables and the replay input; when the run does both stages
  and the ingest copies landing files, that pass copies them too: ``_DecodeInIngest``), replay
  (``pipelines.batch.replay``: tasks replay the replay input's buckets and write the gold
  tables). Every table write goes through ``pipelines.tableio`` (its engine decides how files
  land: delta-rs embedded, or Spark's Delta on a cluster).
- Tables at one raw_records version. Every derived table is written with the marker (app id,
  raw_records version); the gold app id also carries a fingerprint of the replay settings. Both
  app ids also carry ``raw_transactions``' version when it has rows (broker segments: a later
  segment may bring only a COMMIT/ABORT marker, which changes what the decoded and gold tables say
  about a transaction but not raw_records' version). A rerun over the same input therefore finds
  every table already at its marker and changes nothing (not even the table versions); a retried
  crash finishes only what is missing.
- Incremental where the warehouse allows it (``pipelines.batch.carried``): the decode reads only
  the raw records added since the decoded tables' version and appends; the replay continues the
  groups the last run kept, replays only those with new records or a due timer and MERGEs what
  changed. The tables equal one run over the whole log; anything it cannot continue (settings
  changed, raw_records rewritten, transactions, records inside a replayed range, tables written by
  another job, kept groups that do not read) runs over the whole log, and the stage line says why;
  groups a newer release kept are refused (exit 2). ``--full`` forces a whole run. A
  whole run MERGEs the current-state tables (group_state, offsets_current: only changed rows
  rewritten, rows absent from the rebuild deleted) and replaces every other table in one commit
  of files written by the executors.
- The summary asserts ``raw = decoded + quarantined + unsupported`` (a mismatch fails the job)
  and reports ``read = new + duplicates + refused`` for the ingest (refused rows: bad or
  conflicting positions, in ``ingest_quarantine``).
- One writer per warehouse: the run holds ``pipelines.warehouse.lock`` throughout.
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
from typing import TYPE_CHECKING, Any

if __name__ == "__main__" and __package__ in (None, ""):  # spark-submit pipelines/jobs/batch.py
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from pipelines import uri
from pipelines.batch.summary import BatchSummary, Progress, TableLine, render_summary, save_run_record
from pipelines.config import add_conf_arguments, config_from_args
from pipelines.errors import UsageError, kept_state_refusal
from schemas.gold import GOLD_TABLES

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pipelines.batch.ingest import LandingAppend
    from pipelines.config import Config
    from pipelines.tableio import TableIO, WriteResult

log = logging.getLogger("offsetlake.batch")

DECODE_APP_ID = "offsetlake-batch-decode"
GOLD_APP_PREFIX = "offsetlake-batch-gold"
DECODED_TABLES = ("offset_commits", "group_metadata", "group_records", "unsupported_records", "quarantine")
# Current-state tables: one row per group / group-partition, MERGEd (collected on the driver on
# the rust engine: small by construction). Every other table is replaced by executors' files.
CURRENT_STATE_TABLES = ("group_state", "offsets_current")
#: Ingest's refused input rows (bad or conflicting positions); listed in the summary when present.
INGEST_QUARANTINE = "ingest_quarantine"
#: broker segments' transactional records and markers (``schemas.raw.RAW_TRANSACTIONS``)
RAW_TRANSACTIONS = "raw_transactions"
# Stages, in order. ``--stage`` runs one (``offsetlake run batch --stage replay``); skipped stages
# read what an earlier run committed (every stage is idempotent on the raw_records version).
STAGES = ("ingest", "decode", "replay")
#: the one path of the decode and replay stages, as the run record names it
DECODE_PATH = "routed raw_records files -> decoded tables + replay input"
REPLAY_PATH = "replay input bucket files -> gold tables"


def gold_table_names() -> tuple[str, ...]:
    """The gold tables the batch job builds (``schemas.gold.GOLD_TABLES``)."""
    return tuple(t.name for t in GOLD_TABLES)


def replay_fingerprint(cfg: Config) -> str:
    """Short hash of the settings the gold tables depend on (part of the gold app id)."""
    replay = {k: v for k, v in cfg.to_dict()["replay"].items() if k != "now"}  # "now" is the views', not gold's
    # the as-of view's rule (2: due is not dead, coordinator_core.loader.group_fold, the view as of T) and the evidence
    # horizon (log_clock.evidence_horizon) are part of what the gold tables say
    horizon = {"as_of_view": 2, "evidence_delay_ms": cfg.stream.watermark_delay_ms}
    payload = {"replay": replay, "num_partitions": cfg.offsets_topic.num_partitions, **horizon}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


def txn_tag(io: TableIO) -> str:
    """The app ids' suffix naming ``raw_transactions``' version ("" when it has no rows)."""
    if not io.exists(RAW_TRANSACTIONS) or not io.count(RAW_TRANSACTIONS):
        return ""
    return f"-txn{io.version(RAW_TRANSACTIONS)}"


def _all_applied(io: TableIO, names: Sequence[str], app_id: str, version: int) -> bool:
    return all(io.applied(name, app_id, version) for name in names)


def run_batch(
    cfg: Config,
    spark: SparkSession,
    *,
    io: TableIO | None = None,
    echo: Callable[[str], None] | None = None,
    stages: Sequence[str] = STAGES,
    full: bool = False,
) -> BatchSummary:
    """Run ingest → decode → replay → gold writes once (or only ``stages``); returns the summary.
    Incremental where the warehouse allows it (``pipelines.batch.carried``); ``full``: never.

    Holds the warehouse's writer lock throughout (``pipelines.warehouse.lock``): a second batch,
    a batch during a stream or two replays are refused before anything is read.
    """
    # lazy: the CLI's command discovery imports this module (hoisted: 214 -> 426 ms)
    from pipelines.warehouse.lock import warehouse_lock

    say = echo or (lambda msg: log.info(msg))
    with warehouse_lock(cfg.paths.warehouse, "offsetlake batch (" + "+".join(stages) + ")", job="batch") as lock:
        cleaned = lock.cleanup.line()
        if cleaned:
            say(f"[batch] {cleaned}")
        if lock.took_over is not None:
            say(f"[batch] took over the warehouse lock of {lock.took_over.describe()} (no longer running)")
        summary = _run_batch(cfg, spark, io=io, say=say, stages=stages, full=full)
        say("[batch] paths: " + "; ".join(f"{k}: {v}" for k, v in summary.paths.items()))
        save_run_record(cfg.paths.warehouse, lock.run_id, summary)
        return summary


def _run_batch(
    cfg: Config,
    spark: SparkSession,
    *,
    io: TableIO | None,
    say: Callable[[str], None],
    stages: Sequence[str],
    full: bool = False,
) -> BatchSummary:
    # lazy: the CLI's command discovery imports this module (hoisted: 214 -> 426 ms)
    from pipelines.tableio import TableIO

    started = time.perf_counter()
    summary = BatchSummary()
    progress = Progress(summary, say)
    io = io or TableIO(cfg, spark)
    say(f"[batch] delta engine: {io.engine}; warehouse: {cfg.paths.warehouse}")
    # when both run, the decode's pass also copies the ingest's landing files: they are read once
    joint = _DecodeInIngest(io, full) if "ingest" in stages and "decode" in stages else None
    with progress.stage("ingest") as st:
        st.detail = _ingest(cfg, spark, io, summary, joint) if "ingest" in stages else _raw_only(io, summary)
    with progress.stage("decode") as st:
        st.detail, decoded_changed = (
            _decode(io, summary, joint, full) if "decode" in stages else ("not this stage", False)
        )
        summary.offset_commits = io.count("offset_commits")
        summary.group_metadata = io.count("group_metadata")
        summary.group_records = io.count("group_records")
        summary.decoded = summary.offset_commits + summary.group_metadata + summary.group_records
        summary.quarantined = io.count("quarantine")
        summary.unsupported = io.count("unsupported_records")
    gold_written: dict[str, str] = {}
    with progress.stage("replay") as st:
        st.detail = _replay(cfg, io, summary, gold_written, full) if "replay" in stages else "not this stage"
    if "replay" in stages and cfg.kafka.bootstrap_servers:
        # lag needs the consumed topics' log ends: sampled now, against the offsets just written
        # lazy: the CLI's command discovery imports this module (hoisted: 214 -> 426 ms)
        from pipelines.kafka.end_offsets import scheduled_sample

        with progress.stage("end_offsets") as st:
            st.detail = scheduled_sample(cfg, lambda msg: say(f"[batch] end offsets: {msg}")) or ""
            summary.paths["end_offsets"] = st.detail
    with progress.stage("summary"):
        _table_lines(io, summary, gold_written, decoded_changed)
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


def _raw_only(io: TableIO, summary: BatchSummary) -> str:
    summary.raw_total = io.count("raw_records")
    summary.raw_version = io.data_version("raw_records") or 0
    return f"not this stage; raw_records {summary.raw_total} rows (v{summary.raw_version})"


class _DecodeInIngest:
    """The decode's pass, run by the ingest when it copies landing files into raw_records
    (``ingest.LandingAppend``): one pass reads each landing file once, copies it, checks it and
    decodes it with raw_records' own files. The decode stage then finds its tables at the new
    raw_records version. A refused check commits nothing: the ingest takes its exact path and
    the decode stage its own pass."""

    def __init__(self, io: TableIO, full: bool = False) -> None:
        self.io = io
        self.full = full
        self.results: dict[str, WriteResult] | None = None
        self.note = ""

    def write(self, landing: LandingAppend) -> None:
        self.results, self.note = _decode_pass(
            self.io,
            landing.table_version + 1,
            landing.table_rows + landing.rows,
            landing.table_version,
            landing,
            full=self.full,
        )


def _decode_pass(
    io: TableIO, version: int, rows: int, before: int, landing: LandingAppend | None = None, *, full: bool = False
) -> tuple[dict[str, WriteResult], str]:
    """The decode's routed pass into a fresh replay input for raw_records ``version`` (``rows``
    rows; with ``landing``, the ingest's files join it): only the raw records added since the
    decoded tables' version when the warehouse allows it (``pipelines.batch.carried``), else all
    of them. On failure the replay inputs but raw version ``before``'s are dropped; on success
    all but the new one and those it continues. Returns (results, which pass and why)."""
    # lazy: the CLI's command discovery imports this module (hoisted: 214 -> 426 ms)
    from pipelines.batch import carried, replay
    from pipelines.batch.decode import write_decoded_from_raw_table

    app_id = DECODE_APP_ID + txn_tag(io)
    base = "--full" if full else carried.decode_base(io, version, before, app_id, DECODED_TABLES)
    if isinstance(base, str):
        note = f"whole log ({base})"
        spool = replay.new_replay_input(io, version, rows=rows)
        only, expected = None, rows
    else:
        note = f"records new since raw_records v{base.raw_version}"
        spool = replay.new_replay_input(io, version, base=(base.raw_version, base.manifest))
        only, expected = base.new_files, rows - base.decoded_rows
    try:
        results = write_decoded_from_raw_table(
            io, app_id=app_id, version=version, expected_rows=expected, spool=spool, landing=landing, only_files=only
        )
    except BaseException:
        held = io.data_version("raw_records", before)  # maintenance since passed over
        replay.drop_replay_inputs(io, keep=replay.current_replay_input(io, before if held is None else held))
        raise
    replay.drop_replay_inputs(io, keep=spool[1])  # older versions' replay inputs
    return results, note


def _ingest(cfg: Config, spark: SparkSession, io: TableIO, summary: BatchSummary, joint: _DecodeInIngest | None) -> str:
    """Landing files -> raw_records (``pipelines.batch.ingest``); a local Parquet landing's
    files through the decode's pass when ``joint`` is given."""
    # lazy: the CLI's command discovery imports this module (hoisted: 214 -> 426 ms)
    from pipelines.batch import ingest as ingest_mod

    res = ingest_mod.ingest(spark, cfg, io, routed_write=joint.write if joint is not None else None)
    joined = joint is not None and joint.results is not None
    summary.paths["ingest"] = f"{res.source} -> raw_records" + (" (copied by the decode's pass)" if joined else "")
    summary.source = res.source
    summary.records_read = res.records_read
    summary.records_new = res.records_new
    summary.refused = res.quarantined
    summary.refused_reasons = dict(res.quarantine_reasons)
    summary.raw_total = res.raw_total
    summary.raw_version = res.raw_version
    summary.control_records = res.control_records
    summary.transactional_new = res.transactional_new
    summary.bad_batches = res.bad_batches
    if res.bad_batches:
        summary.warnings.append(
            f"{res.bad_batches} unreadable broker segment batches quarantined, "
            f"{res.bad_batch_offsets} offsets (ingest_quarantine: bad_batch)"
        )
    if res.quarantined:
        summary.warnings.append(
            f"{res.quarantined} input records refused at ingest (ingest_quarantine: "
            + ", ".join(f"{k} {v}" for k, v in res.quarantine_reasons)
            + ")"
        )
    return (
        f"{res.records_read} read, {res.records_new} new, {res.duplicates} duplicates, "
        f"{res.quarantined} refused, raw_records {res.raw_total} rows (v{res.raw_version})"
    )


def _decode(io: TableIO, summary: BatchSummary, joint: _DecodeInIngest | None, full: bool = False) -> tuple[str, bool]:
    """raw_records -> the decoded tables and the replay input, one routed pass (the ingest's
    when ``joint`` ran it). Returns (detail, whether a decoded table changed)."""
    # lazy: the CLI's command discovery imports this module (hoisted: 214 -> 426 ms)
    from pipelines.batch import replay

    raw_version = summary.raw_version
    summary.paths["decode"] = DECODE_PATH
    app_id = DECODE_APP_ID + txn_tag(io)
    if _all_applied(io, DECODED_TABLES, app_id, raw_version) and replay.current_replay_input(io, raw_version):
        if joint is not None and joint.results is not None:
            changed = any(not wr.skipped for wr in joint.results.values())
            counts = ", ".join(f"{n} {io.count(n)}" for n in DECODED_TABLES)
            return f"in the ingest's pass, {joint.note}: {counts}", changed
        return f"up to date with raw_records v{raw_version}", False
    results, note = _decode_pass(io, raw_version, summary.raw_total, raw_version, full=full)
    changed = any(not wr.skipped for wr in results.values())
    return f"{note}: " + ", ".join(f"{name} {io.count(name)}" for name in DECODED_TABLES), changed


def _replay(cfg: Config, io: TableIO, summary: BatchSummary, gold_written: dict[str, str], full: bool = False) -> str:
    """The replay input -> the gold tables (only the groups that changed, from the groups the last
    run kept, when the warehouse allows it: ``pipelines.batch.carried``), and the log's shape ->
    ``log_partitions``."""
    # lazy: the CLI's command discovery imports this module (hoisted: 214 -> 426 ms)
    from pipelines.batch import carried, replay

    # lazy: the CLI's command discovery imports this module (hoisted: 214 -> 426 ms)
    from pipelines.inputs.log_shape import STATS_KIND, combine, compaction_note, log_partitions, rows_to_table

    raw_version = summary.raw_version
    tag = txn_tag(io)
    gold_app = f"{GOLD_APP_PREFIX}-{replay_fingerprint(cfg)}{tag}"
    summary.paths["replay"] = REPLAY_PATH
    tables = gold_table_names()
    if _all_applied(io, tables, gold_app, raw_version) or carried.up_to_date(io, raw_version, gold_app, tables):
        return f"up to date with raw_records v{raw_version}"
    manifest = replay.current_replay_input(io, raw_version)
    if manifest is None or not _all_applied(io, DECODED_TABLES, DECODE_APP_ID + tag, raw_version):
        # gold is marked with the raw_records version: never build it from stale decoded tables
        raise UsageError(f"the decoded tables are not at raw_records v{raw_version}: run the decode stage first")
    # what the capture says about itself, from the decode pass that read every raw record
    stats = combine(replay.read_manifest(manifest, STATS_KIND))
    log_now = None if cfg.replay.as_of_ms is not None else _log_clock(cfg, io, stats, summary)
    as_of_ms = cfg.replay.as_of_ms if cfg.replay.as_of_ms is not None else log_now
    # one row per __consumer_offsets partition: a small current-state table, MERGEd from Arrow on
    # the driver (no Spark write job), rows gone from the log deleted. Before the gold tables,
    # which are this stage's "up to date" test: a run killed between the two redoes both (this
    # MERGE then changes nothing), never only the gold tables (bench/crash_matrix.py --clean)
    shape = log_partitions(  # read only for a gappy log
        lambda: io.read("raw_records"),
        stats,
        lambda: io.read("ingest_quarantine") if io.exists("ingest_quarantine") else None,
    )
    wr = io.merge("log_partitions", rows_to_table("log_partitions", shape), delete_missing=True)
    gold_written["log_partitions"] = "unchanged" if wr.skipped else "merged"
    note = compaction_note(io, shape)
    if note:
        summary.warnings.append(note)
    settings, delay = cfg.replay.settings(), cfg.stream.watermark_delay_ms
    entries = replay.read_manifest(manifest)
    as_of, log_end = replay.present(entries, settings, as_of_ms, log_now, delay)
    options = replay.replay_options(settings, tables, cfg.offsets_topic.num_partitions, delay, log_end, entries)
    pinned = cfg.replay.as_of_ms is not None or log_now is not None
    base = "--full" if full else carried.replay_base(io, manifest, gold_app, tables, log_clock_pinned=pinned)
    if not isinstance(base, str):
        try:
            written = carried.replay_incremental(
                io, manifest, base, app_id=gold_app, version=raw_version, tables=tables, options=options
            )
        except Exception as exc:  # only a kept group's refusal is handled: the rest re-raises
            base = _unread_kept_groups(exc, base.state_dir)
        else:
            gold_written.update(written)
            return f"groups changed since raw_records v{base.done['raw_version']}, as_of_ms={as_of}"
    state_dir = carried.new_state_dir(io, raw_version)
    gold_written.update(
        replay.write_gold(
            io,
            manifest,
            app_id=gold_app,
            version=raw_version,
            tables=tables,
            current_state=CURRENT_STATE_TABLES,
            settings=settings,
            as_of_ms=as_of,
            log_end_ms=log_end,
            num_partitions=cfg.offsets_topic.num_partitions,
            evidence_delay_ms=delay,
            state_dir=state_dir,
        )
    )
    carried.mark_done(
        io,
        state_dir,
        carried.done_record(io, raw_version, gold_app, replay.input_info(manifest)["buckets"], options, tables, pinned),
    )
    return f"whole log ({base}), {len(tables)} gold tables, as_of_ms={as_of}"


def _unread_kept_groups(exc: Exception, state_dir: str) -> str:
    """The incremental replay failed on the groups the last run kept (nothing is written before
    every bucket replayed: ``carried.replay_incremental``). Kept groups that do not read are
    derived data: the replay runs over the whole log instead, and says why. Groups a newer release
    kept are refused in one line (exit 2) naming their directory: replaying over them with older
    rules would throw that release's state away unasked. Any other failure re-raises."""
    refusal = kept_state_refusal(exc)
    if refusal is None:
        raise exc
    if "newer release" in refusal:
        raise UsageError(
            f"kept replay state: {refusal} ({state_dir}: run that release, or run with --full to replay the "
            "whole log into new state)"
        ) from exc
    return f"the kept groups do not read: {refusal}"


def _log_clock(cfg: Config, io: TableIO, stats: Any, summary: BatchSummary) -> int | None:
    """ "Now" = the robust log clock: one absurd timestamp must not expire everything. ``None``
    (the replay's default: the newest record) unless some records are ahead of the clock. The
    per-partition figures prove most logs clean; otherwise one Spark pass finds the outliers."""
    # lazy: the CLI's command discovery imports this module (hoisted: 214 -> 426 ms)
    from pipelines.log_clock import clock_from_stats, log_clock

    tolerance = cfg.replay.clock_outlier_ms
    clock = clock_from_stats(stats, tolerance) or log_clock(io.read("raw_records"), tolerance)
    if not clock.outliers:
        return None
    summary.clock_outliers = len(clock.outliers)
    summary.warnings.append(clock.describe())
    log.warning("replay: %s", clock.describe())
    return clock.now_ms


def _table_lines(io: TableIO, summary: BatchSummary, gold_written: dict[str, str], decoded_changed: bool) -> None:
    for name in (
        "raw_records",
        INGEST_QUARANTINE,
        RAW_TRANSACTIONS,
        *DECODED_TABLES,
        *gold_table_names(),
        "log_partitions",
    ):
        if not io.exists(name):
            continue
        action = gold_written.get(name)
        if action is None:
            action = (
                "written"
                if (name in DECODED_TABLES and decoded_changed)
                or (name == "raw_records" and summary.records_new)
                or (name == INGEST_QUARANTINE and (summary.refused or summary.bad_batches))
                or (name == RAW_TRANSACTIONS and summary.transactional_new)
                else "unchanged"
            )
        summary.tables.append(TableLine(name, io.count(name), io.version(name), action))
    if io.exists("group_state"):
        summary.groups = io.count("group_state")


def add_batch_arguments(parser: Any) -> None:
    """The job's options, shared by ``spark-submit pipelines/jobs/batch.py`` and ``offsetlake run batch``."""

    add_conf_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON instead of tables")
    parser.add_argument(
        "--stage",
        choices=[*STAGES, "all"],
        default="all",
        help="run one stage only; the others read what an earlier run committed (default: all)",
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="decode and replay the whole log, even when the warehouse could continue its last run",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point for ``spark-submit pipelines/jobs/batch.py --conf ...`` and ``offsetlake run batch``."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="batch.py", description="offsetlake batch job: ingest, decode, replay into Delta tables."
    )
    add_batch_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run_from_args(args)
    except UsageError as exc:
        print(f"batch: error: {exc}", file=sys.stderr)
        return 2


def run_from_args(args: Any) -> int:
    """Shared by ``main`` and ``offsetlake run batch``: load config, build Spark, run, print."""
    from rich.console import Console

    # lazy: the CLI's command discovery imports this module (hoisted: 214 -> 426 ms)
    from pipelines.runtime.spark_session import build_spark_from_config
    from pipelines.warehouse.lock import warehouse_lock

    cfg = config_from_args(args)
    err = Console(stderr=True)
    stage = getattr(args, "stage", "all")
    stages = STAGES if stage in (None, "all") else (stage,)
    # what is known without Spark is refused before a JVM starts or a lock file is left behind
    if "ingest" in stages:
        # lazy: the CLI's command discovery imports this module (hoisted: 214 -> 426 ms)
        from pipelines.batch.ingest_sources import check_input

        check_input(cfg)
    else:
        # lazy: the CLI's command discovery imports this module (hoisted: 214 -> 426 ms)
        from pipelines.tableio import TableIO
        from pipelines.warehouse.lock import WarehouseKeptError, warehouse_job

        kept = warehouse_job(uri.local_path(cfg.paths.warehouse)) if uri.is_local(cfg.paths.warehouse) else None
        if kept == "stream":  # its ingest would be refused too: say so, not "run the ingest stage"
            raise WarehouseKeptError(
                f"warehouse {cfg.paths.warehouse} is written by the stream job, which keeps its tables "
                "up to date itself; a batch stage needs a warehouse of its own (set paths.warehouse "
                "and run offsetlake run batch there)"
            )
        if not TableIO(cfg, None, engine="rust").exists("raw_records"):
            raise UsageError(
                f"no raw_records table under {cfg.paths.warehouse}: run the ingest stage first "
                "(offsetlake run batch --stage ingest)"
            )
    err.print(f"[batch] config: {' + '.join(cfg.sources)}")
    # the lock first: a refused run starts no JVM (run_batch takes it again, re-entrantly)
    with warehouse_lock(cfg.paths.warehouse, "offsetlake batch (" + "+".join(stages) + ")", job="batch"):
        spark = build_spark_from_config(cfg, app_suffix="batch", quick_jit=True)
        summary = run_batch(
            cfg,
            spark,
            echo=lambda m: err.print(m, highlight=False),
            stages=stages,
            full=bool(getattr(args, "full", False)),
        )
    if getattr(args, "json", False):
        print(json.dumps(summary.as_dict(), indent=2))
    else:
        render_summary(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
