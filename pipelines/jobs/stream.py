"""The streaming job: lifecycle of the two streaming queries, and its CLI / spark-submit entry.

Run it either way (same code path):
    offsetlake run stream --conf conf/local.yaml [--available-now]
    spark-submit pipelines/jobs/stream.py --conf conf/local.yaml [--available-now]
    python -m pipelines.jobs.stream --conf conf/local.yaml [--available-now]

Rules:
- The ``replay`` query (offset commits, group metadata and unsupported records of a known group
  → packed replay input → the stateful function → the gold tables) also writes the decoded
  tables (offset commits, group metadata, group records, quarantined and unsupported records,
  as the batch's decode writes them) so every analytics view answers on a streaming-only
  warehouse: with the packed landing source or the packed Kafka source (``kafka.engine``
  python, ``pipelines.stream.kafka_packed``), and a local checkpoint, from what its tasks
  decoded anyway (``replay_writes_decoded``: the input is read and decoded once); else a second
  query, ``quarantine``, with its own checkpoint, decodes the source again for them (Spark's
  Kafka connector). Available-now runs the two queries one after the other (two cores are
  better spent on one at a time); continuous mode runs both side by side.
- Continuous by default (``stream.trigger_interval``); ``--available-now`` processes what is
  there and stops (what Airflow schedules). SIGTERM/SIGINT stop the queries cleanly (exit 0);
  bad config exits 2 with one line, before Spark starts; records dropped as late fail the run
  (``DataLossError``) unless ``stream.allow_late_drops``; so does a kept group's state this
  release does not read (a newer release's checkpoint: one line naming it, ``UsageError``).
- One writer per warehouse: the run holds ``pipelines.warehouse.lock`` throughout.
- With ``kafka.bootstrap_servers`` configured, end offsets (lag) are sampled every
  ``pipelines.kafka.end_offsets.STREAM_INTERVAL_S`` while the queries run and once at the end
  (``IntervalSampler``); an unreachable cluster is logged, never fatal.
- The stateful query runs with its own state settings (``state_conf``): one state-store
  partition per core and RocksDB changelog checkpointing, unless ``spark.conf`` sets them.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if __name__ == "__main__" and __package__ in (None, ""):  # spark-submit pipelines/jobs/stream.py
    # the repository root instead of this directory (its modules would shadow top-level names)
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    sys.path.insert(0, os.path.dirname(os.path.dirname(_here)))

from pipelines.batch.file_tasks import task_slots
from pipelines.config import add_conf_arguments, config_from_args
from pipelines.errors import DataLossError, UsageError, kept_state_refusal
from pipelines.kafka.end_offsets import IntervalSampler
from pipelines.runtime.spark_session import build_spark_from_config, session_conf
from pipelines.stream import state as stream_state
from pipelines.stream.decode import decode_union
from pipelines.stream.kafka_packed import KafkaPackedOutput, read_packed_kafka, uses_packed_kafka
from pipelines.stream.packing import packed_replay_input
from pipelines.stream.progress import ProgressRecorder, reconstruct_progress
from pipelines.stream.segment_source import SegmentStreamReader, read_segment_stream, segment_options, uses_segments
from pipelines.stream.settings import REPLAY_QUERY, StreamSettings, settings_from_config
from pipelines.stream.sinks import GoldBatchWriter, QuarantineBatchWriter
from pipelines.stream.source import (
    LandingPackedReader,
    landing_options,
    landing_reader_options,
    local_dir,
    plan_dir,
    read_packed_landing,
    read_raw_stream,
    uses_packed_landing,
)
from pipelines.stream.source_output import NO_OUTPUT, ReaderOutput, SourceOutput
from pipelines.stream.state import check_state_layout, stateful_replay
from pipelines.tableio import TableIO
from pipelines.warehouse.lock import warehouse_lock

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    from pipelines.config import Config

log = logging.getLogger("offsetlake.stream")


class _Stopper:
    """SIGTERM/SIGINT → stop the queries at the next poll, exit 0."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self.signal: int | None = None

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: Any) -> None:
        self.signal = signum
        self.requested.set()


def _trigger(writer: DataStreamWriter, settings: StreamSettings, available_now: bool) -> DataStreamWriter:
    if available_now:
        return writer.trigger(availableNow=True)
    return writer.trigger(processingTime=settings.trigger_interval)


def start_replay_query(
    spark: SparkSession,
    cfg: Config,
    io: TableIO,
    settings: StreamSettings,
    *,
    available_now: bool,
    plans: dict[int, Any] | None = None,
    decoded: bool = False,
) -> StreamingQuery:
    """Source → decode → stateful replay → ``foreachBatch`` gold writes (``plans``: batch id →
    the landing source's plan, filled by the sink for the progress; ``decoded``: the decoded
    tables too, from the packed landing source's tasks — see ``replay_writes_decoded``)."""
    check_state_layout(settings.replay_checkpoint)
    # the source, and what it leaves of each micro-batch beside its rows for the sink
    output: SourceOutput = NO_OUTPUT
    if uses_segments(settings):
        packed = read_segment_stream(spark, settings, decoded=decoded)
        segments = segment_options(settings, decoded=decoded)
        output = ReaderOutput(lambda: SegmentStreamReader(segments), settings.replay_checkpoint)
    elif uses_packed_landing(settings):
        landing = landing_reader_options(settings, decoded=decoded, tasks=task_slots(spark))
        packed = read_packed_landing(spark, settings, landing)
        output = ReaderOutput(lambda: LandingPackedReader(landing), settings.replay_checkpoint)
    elif uses_packed_kafka(spark, cfg, settings):
        plans_at = plan_dir(settings)
        assert plans_at is not None  # the packed Kafka source needs a local checkpoint
        packed = read_packed_kafka(spark, cfg, settings, plan_dir=plans_at, decoded=decoded, tasks=task_slots(spark))
        output = KafkaPackedOutput(settings.replay_checkpoint, plans_at, decoded)
    else:
        packed = packed_replay_input(read_raw_stream(spark, cfg, settings), buckets=stream_state.STATE_BUCKETS)
    gold = stateful_replay(packed, settings)
    writer = (
        gold.writeStream.queryName(settings.query_name)
        .outputMode("update")
        .option("checkpointLocation", settings.replay_checkpoint)
        .foreachBatch(GoldBatchWriter(io, settings, output, plans))
    )
    # The query runs on a clone of the session's conf taken at start(): set these for it only.
    user = set(cfg.spark.conf) - {"spark.sql.shuffle.partitions"}
    scoped = {k: v for k, v in state_conf(spark, settings.state_partitions).items() if k not in user}
    with session_conf(spark, scoped):
        return _trigger(writer, settings, available_now).start()


def state_conf(spark: SparkSession, partitions: int | None = None) -> dict[str, str]:
    """Settings of the stateful query (the second one unless ``spark.conf`` sets it):
    - state partitions = ``stream.state_partitions``, default the cores Spark has
      (``defaultParallelism``): one state-store partition per core, each committing once per
      micro-batch (not ``spark.sql.shuffle.partitions``, sized for the batch job's shuffles).
      Spark keeps the number a checkpoint was created with: only a new checkpoint uses it.
    - RocksDB changelog checkpointing: a commit writes the batch's changes instead of uploading a
      snapshot of the store (snapshots are made in the background); either way a restart reads
      the checkpoint (Spark converts between the two formats).
    """
    cores = partitions or max(1, int(spark.sparkContext.defaultParallelism))
    return {
        "spark.sql.shuffle.partitions": str(cores),
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    }


def replay_writes_decoded(settings: StreamSettings, packed_kafka: bool = False) -> bool:
    """Whether the replay query writes the decoded tables itself: its packed source (landing
    files, broker segments, or Kafka with the jar-free engine: ``packed_kafka``) decodes every
    record it takes anyway, so its tasks keep those rows for the sink (files of the batch's plan
    directory) instead of a second query reading and decoding the input again. Else (Spark's
    Kafka connector, a non-local checkpoint) the side query writes them; segments need a local
    checkpoint."""
    return (uses_packed_landing(settings) or uses_segments(settings) or packed_kafka) and plan_dir(settings) is not None


def start_quarantine_query(
    spark: SparkSession, cfg: Config, io: TableIO, settings: StreamSettings, *, available_now: bool
) -> StreamingQuery:
    """Source → decode → the decoded tables (offset commits, group metadata, quarantined and
    unsupported records) → ``foreachBatch`` writes (``QuarantineBatchWriter``)."""

    side = decode_union(read_raw_stream(spark, cfg, settings))
    writer = (
        side.writeStream.queryName(settings.quarantine_query_name)
        .option("checkpointLocation", settings.quarantine_checkpoint)
        .foreachBatch(QuarantineBatchWriter(io, settings))
    )
    return _trigger(writer, settings, available_now).start()


def run(
    spark: SparkSession,
    cfg: Config,
    *,
    available_now: bool,
    poll_seconds: float = 1.0,
    echo: Callable[[str], None] | None = None,
    with_quarantine: bool = True,
    stopper: Any | None = None,
) -> ProgressRecorder:
    """Run the streaming job on ``spark`` until it ends (available-now) or is stopped.

    Available-now runs the replay query, then the quarantine query when there is one (two cores
    are better spent on one at a time); continuous mode runs both side by side.
    """

    # one writer per warehouse: a batch (or a second stream) is refused while this runs
    with warehouse_lock(cfg.paths.warehouse, "offsetlake stream", job="stream") as lock:
        cleaned = lock.cleanup.line()
        if cleaned:
            log.info("%s", cleaned)
        return _run(
            spark,
            cfg,
            available_now=available_now,
            poll_seconds=poll_seconds,
            echo=echo,
            with_quarantine=with_quarantine,
            stopper=stopper,
        )


def _run(
    spark: SparkSession,
    cfg: Config,
    *,
    available_now: bool,
    poll_seconds: float,
    echo: Callable[[str], None] | None,
    with_quarantine: bool,
    stopper: Any | None,
) -> ProgressRecorder:
    settings = settings_from_config(cfg)
    io = TableIO(cfg, spark)
    decoded = ("offset_commits", "group_metadata", "quarantine", "unsupported_records")
    for name in (*settings.tables, *decoded, "stream_progress"):
        io.ensure(name)
    # micro-batches committed just before a kill, whose progress was never polled
    for query, checkpoint in (
        (settings.query_name, settings.replay_checkpoint),
        (settings.quarantine_query_name, settings.quarantine_checkpoint),
    ):
        reconstruct_progress(io, query, checkpoint)
    landing = local_dir(settings.landing) if uses_packed_landing(settings) else None
    plans: dict[int, Any] = {}
    recorder = ProgressRecorder(
        io,
        echo=echo,
        landing=os.path.abspath(landing) if landing is not None else None,
        reader_options=landing_options(settings, landing) if landing is not None else None,
        plans=plans,
    )
    stop = stopper if stopper is not None else _Stopper()
    in_replay = with_quarantine and replay_writes_decoded(settings, uses_packed_kafka(spark, cfg, settings))
    starters: list[tuple[str, Callable[[], StreamingQuery]]] = [
        (
            settings.query_name,
            lambda: start_replay_query(
                spark, cfg, io, settings, available_now=available_now, plans=plans, decoded=in_replay
            ),
        )
    ]
    if with_quarantine and not in_replay:
        starters.append(
            (
                settings.quarantine_query_name,
                lambda: start_quarantine_query(spark, cfg, io, settings, available_now=available_now),
            )
        )
    stages = [[s] for s in starters] if available_now else [starters]
    # end offsets (lag) while the queries run, when a cluster is configured
    sampler = IntervalSampler(cfg, note=lambda msg: log.info("end offsets: %s", msg))
    for stage in stages:
        if stop.requested.is_set():
            break
        queries = [(name, start()) for name, start in stage]
        refuse = None if settings.allow_late_drops else recorder.late_failure
        try:
            _watch(queries, recorder, stop, poll_seconds, refuse, tick=sampler.tick)
        except Exception as exc:
            refused = _kept_state_refused(exc, settings.replay_checkpoint)
            if refused is None:
                raise
            raise refused from exc
    sampler.tick(force=True)  # the offsets the run ended with
    recorder.end_offsets = sampler.details
    return recorder


def _kept_state_refused(exc: BaseException, checkpoint: str) -> UsageError | None:
    """A query failed on a kept group's entry this release does not read (a newer release's
    format, a snapshot that does not read: ``carried.snapshot_of_entry``) → one line naming the
    checkpoint that holds it (exit 2); ``None`` for any other failure."""
    refusal = kept_state_refusal(exc)
    if refusal is None:
        return None
    advice = "run that release, or move" if "newer release" in refusal else "move"
    return UsageError(
        f"stream state: {refusal} (checkpoint {checkpoint}: {advice} it aside to replay the log into a new one)"
    )


def _watch(
    queries: list[tuple[str, StreamingQuery]],
    recorder: ProgressRecorder,
    stop: Any,
    poll_seconds: float,
    refuse: Callable[[], str | None] | None = None,
    tick: Callable[[], None] | None = None,
) -> None:
    """Poll progress until every query ended or a stop is requested; re-raise a query failure;
    ``tick`` runs at each poll (the end-offsets sampler).

    A signal sent to the whole process group also reaches Spark's JVM, which then shuts down on
    its own: Py4J errors after a stop request are an orderly exit, not a failure.
    """
    try:
        while True:
            active = [(n, q) for n, q in queries if q.isActive]
            for n, q in queries:
                recorder.poll(q, n)
            if refuse is not None and (reason := refuse()):
                raise DataLossError(reason)
            if not active:
                break
            if tick is not None:
                tick()
            if stop.requested.is_set():
                log.info("stop requested (signal %s): stopping the queries", getattr(stop, "signal", None))
                for _n, q in active:
                    q.stop()
                break
            # pyspark's stub says int; it takes float seconds (converted to ms)
            active[0][1].awaitTermination(poll_seconds)  # type: ignore[arg-type]
        for n, q in queries:
            recorder.poll(q, n)
            if refuse is not None and (reason := refuse()):
                raise DataLossError(reason)
            exc = q.exception()
            if exc is not None and not stop.requested.is_set():
                raise RuntimeError(f"streaming query {n} failed: {exc}") from None
    except Exception as exc:
        if not stop.requested.is_set() or isinstance(exc, (RuntimeError, UsageError)):
            raise
        log.warning("Spark went away while stopping (%s); exiting", type(exc).__name__)
    finally:
        for _n, q in queries:
            try:
                if q.isActive:
                    q.stop()
            except Exception:
                if not stop.requested.is_set():
                    raise


def run_job(conf: Config, available_now: bool = False) -> int:
    """Run the streaming job with ``conf`` (builds Spark); ``offsetlake run stream`` and ``main``."""

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log.setLevel(logging.INFO)
    settings = settings_from_config(conf)  # validate before starting Spark
    # pandas' FutureWarning from inside pyspark's applyInPandasWithState serializer, once per
    # group and batch in the Python workers (they inherit this environment): noise, not ours.
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")

    stopper = _Stopper()
    stopper.install()
    # the lock first: a refused stream starts no JVM (``run`` takes it again, re-entrantly)
    with warehouse_lock(conf.paths.warehouse, "offsetlake stream", job="stream"):
        spark = build_spark_from_config(conf, app_suffix="stream")
        started = time.time()
        recorder = run(spark, conf, available_now=available_now, stopper=stopper)
    batches = [r for r in recorder.rows if r["query_name"] == REPLAY_QUERY]
    total = sum(r["input_rows"] or 0 for r in batches)
    counted = recorder.counted
    positions = ""
    if counted:
        # records read = replayed + identical duplicates + refused (ingest_quarantine) + control records
        records, replayed, dups, refused, outliers, controls = (sum(c[i] for c in counted) for i in range(1, 7))
        what = "broker segments" if uses_segments(settings) else "source"
        positions = (
            f" ({records} records of the {what} = {replayed} replayed + {dups} duplicates + "
            f"{refused} refused into ingest_quarantine"
            + (f" + {controls} control records" if controls else "")
            + f"; {outliers} ignored by the log clock)"
        )
    log.info(
        "stream finished: %d micro-batches, %d input rows%s, %.1fs%s",
        len(batches),
        total,
        positions,
        time.time() - started,
        " (stopped by signal)" if stopper.requested.is_set() else "",
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``spark-submit pipelines/jobs/stream.py``: parse ``--conf``/``--set``/
    ``--available-now`` and run the streaming job."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="stream", description="offsetlake streaming replay: raw records → decode → per-group state → Delta tables."
    )
    add_conf_arguments(parser)
    parser.add_argument(
        "--available-now", action="store_true", help="process everything available, then stop (trigger availableNow)"
    )
    args = parser.parse_args(argv)
    try:
        cfg = config_from_args(args)
        return run_job(cfg, available_now=args.available_now)
    except UsageError as exc:
        print(f"stream: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
