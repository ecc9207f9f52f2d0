"""The streaming job's source over a broker log dir: ``__consumer_offsets-N/`` segment files read
as a log tail, transactions replayed as Kafka does, the packed replay input out.

Rules:
- Input: a landing holding ``__consumer_offsets-N`` partition directories of segment files
  (copied off a broker, or a broker's own log dir read in place). Each micro-batch reads, per
  partition, the batches after the partition's position up to a time cut over every partition
  (``pipelines.inputs.segment_log``: the tail, the cut, re-read safety after a rewrite), at most
  ``stream.max_bytes_per_trigger`` bytes (default ``DEFAULT_BYTES_PER_TRIGGER``).
- Offsets: ``{"parts": {partition: [next offset, segment base, byte]}, "records": n}``; ``records``
  counts the records the batch headers announce (the progress's input count).
- Tasks: each takes whole partitions (a marker meets every record of its partition in the same
  task) and does what the batch job does with segments (``pipelines.inputs.segment_input``): data
  records decoded (``pipelines.records.decode``), the transactional ones carrying their
  producer id, COMMIT/ABORT markers handed to the groups they close
  (``pipelines.records.transactions``), packed per state bucket (``replay_input.pack_buckets``). It
  writes the decoded tables (``offset_commits`` with ``producer_id``/``txn_outcome``/
  ``txn_marker_offset``, ``raw_transactions``, and the rest) like the landing source
  (``DecodedFiles``), its unreadable batches (``ingest_quarantine``, reason ``bad_batch``, file
  and byte position) and its counts.
- The driver settles each micro-batch's transactions before the tasks run
  (``pipelines.stream.segment_txn``: the groups earlier micro-batches left pending, the fates,
  the ``offset_commits`` rows of earlier micro-batches a marker now closed) and leaves the plan
  for the sink in the batch's directory (``plan.pickle``), as the landing source does.
- Counts per micro-batch: records = data records + control records + unreadable batches (a
  bad batch's records cannot be counted: it is one); replayed = the data records.
- Event time: the records' own timestamps (the broker's clock); no log-clock outliers are judged.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pipelines.inputs.segment_log import START, ByteRange, Pos, advance, cut, partition_files, pending, ranges_between
from pipelines.runtime.worker_gc import freeze_worker_heap
from pipelines.stream.ledger import BatchPlan
from pipelines.stream.packing import bucket_options, buckets_of, packed_source_class
from pipelines.stream.segment_task import COUNTS, SegmentPartition, read_partitions
from pipelines.stream.segment_txn import OpenTransactions, StateFiles, scan, settle
from pipelines.stream.source import batch_key, keep_plan, local_dir, plan_dir, read_decoded
from pipelines.uri import table_from_ipc, table_to_ipc

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.stream.settings import StreamSettings

log = logging.getLogger("offsetlake.stream")

SEGMENT_SOURCE_NAME = "offsetlake_segments"
DEFAULT_BYTES_PER_TRIGGER = 128 * 1024 * 1024


def _positions(offset: dict[str, Any]) -> dict[int, Pos]:
    return {int(p): (int(v[0]), int(v[1]), int(v[2])) for p, v in (offset.get("parts") or {}).items()}


class SegmentStreamReader:
    """``DataSourceStreamReader`` over a broker log dir (module rules)."""

    def __init__(self, options: dict[str, str]) -> None:
        options = {k.lower(): v for k, v in options.items()}
        self.path = options["path"]
        self.topic = options.get("topic") or "__consumer_offsets"
        self.max_bytes = int(options.get("maxbytespertrigger") or 0) or DEFAULT_BYTES_PER_TRIGGER
        self.tasks = max(1, int(options.get("tasks") or 2))
        self.lenient = options.get("lenient", "false") == "true"
        self.options = options  # the state buckets are read when a task packs (``buckets_of``)
        self.plan_dir = options.get("plandir") or None
        self.state_dir = options.get("statedir") or None
        self.write_decoded = options.get("writedecoded", "false") == "true" and self.plan_dir is not None
        self._target: dict[int, Pos] | None = None
        self._final = False  # available-now: the log dir is read as it is now, tails included

    # -- offsets ---------------------------------------------------------------------------
    def initialOffset(self) -> dict[str, Any]:
        return {"parts": {}, "records": 0}

    def getDefaultReadLimit(self) -> Any:
        from pyspark.sql.streaming.datasource import ReadMaxBytes

        return ReadMaxBytes(self.max_bytes)

    def _pending(self, start: dict[str, Any]) -> tuple[dict[int, Any], dict[int, Any]]:
        files = partition_files(self.path, self.topic)
        pos = _positions(start)
        final = self._target is not None or self._final
        pend = {p: pending(fs, pos.get(p, START), final=final) for p, fs in files.items()}
        if self._target is not None:  # available-now: only what was there when it started
            pend = {p: _upto(spans, self._target.get(p)) for p, spans in pend.items()}
        return files, pend

    def prepareForTriggerAvailableNow(self) -> None:
        self._final = True
        _files, pend = self._pending(self.initialOffset())
        self._target = {p: advance(spans, sum(len(s) for s in spans), START)[0] for p, spans in pend.items()}

    def latestOffset(self, start: dict[str, Any], limit: Any) -> dict[str, Any]:
        from pyspark.sql.streaming.datasource import ReadMaxBytes

        _files, pend = self._pending(start)
        budget = limit.max_bytes if isinstance(limit, ReadMaxBytes) else 2**62
        take = cut(pend, budget)
        if not any(take.values()):
            return dict(start)
        pos = _positions(start)
        records = int(start.get("records") or 0)
        for p, n in take.items():
            if n:
                pos[p], k = advance(pend[p], n, pos.get(p, START))
                records += k
        return {"parts": {str(p): list(v) for p, v in sorted(pos.items())}, "records": records}

    # -- planning --------------------------------------------------------------------------
    def _ranges(self, start: dict[str, Any], end: dict[str, Any]) -> dict[int, list[ByteRange]]:
        files = partition_files(self.path, self.topic)
        a, b = _positions(start), _positions(end)
        final = self._target is not None or self._final
        out = {
            p: ranges_between(files.get(p, []), a.get(p, START), b[p], final=final)
            for p in b
            if b[p] != a.get(p, START)
        }
        return {p: r for p, r in out.items() if r}

    def _settle(self, start: dict[str, Any], end: dict[str, Any], ranges: dict[int, list[ByteRange]]) -> Any:
        """The micro-batch's transactions (``segment_txn.settle``), the state at its end saved."""

        files = StateFiles(self.state_dir) if self.state_dir else None
        before = files.load(start) if files is not None and start.get("parts") else None
        if before is None:
            before = OpenTransactions()
            if start.get("parts"):  # not kept: rebuilt from the log up to the start
                before = self._settle(self.initialOffset(), start, self._ranges(self.initialOffset(), start)).open
        txn, commits = scan([r for rs in ranges.values() for r in rs])
        settled = settle(before, txn, commits)
        if files is not None:
            files.save(end, settled.open)
        return settled

    def batch_dir(self, start: dict[str, Any], end: dict[str, Any]) -> str | None:
        return None if self.plan_dir is None else os.path.join(self.plan_dir, batch_key(start, end))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[SegmentPartition]:
        ranges = self._ranges(start, end)
        if not ranges:
            return []
        settled = self._settle(start, end, ranges)
        n = min(self.tasks, len(ranges))
        loads: list[list[Any]] = [[0, i, {}] for i in range(n)]  # [bytes, task, ranges by partition]
        for p, rs in sorted(ranges.items(), key=lambda kv: -sum(r.end - r.start for r in kv[1])):
            slot = min(loads, key=lambda s: (s[0], s[1]))
            slot[0] += sum(r.end - r.start for r in rs)
            slot[2][p] = rs
        where = self.batch_dir(start, end)
        if where is not None:  # the sink's part (``batch_output``): the tasks, the closed commits
            keep_plan(where, (n, None if settled.closed is None else table_to_ipc(settled.closed)))
        fates = None if settled.fates is None else table_to_ipc(settled.fates)
        out = []
        for _b, i, mine in loads:
            prior = {k: v for k, v in settled.prior.items() if k[0] in mine}
            decoded = os.path.join(str(where), f"task-{i}") if self.write_decoded else None
            out.append(SegmentPartition(mine, fates, prior, decoded))
        return out

    # -- the tasks -------------------------------------------------------------------------
    def read(self, partition: SegmentPartition) -> Iterator[pa.RecordBatch]:
        freeze_worker_heap()
        return read_partitions(partition, buckets=buckets_of(self.options), lenient=self.lenient)

    # -- the sink's side -------------------------------------------------------------------
    def batch_output(self, start: dict[str, Any], end: dict[str, Any]) -> tuple[BatchPlan, dict[str, pa.Table]]:
        """The plan (counts, the bad batches as refused rows) and the decoded tables the
        micro-batch's tasks wrote, plus the ``offset_commits`` rows its markers closed."""
        import pickle

        import pyarrow as pa

        where = self.batch_dir(start, end)
        if start == end or where is None:
            return BatchPlan(), {}
        try:
            with open(os.path.join(where, "plan.pickle"), "rb") as fh:
                tasks, closed = pickle.load(fh)
        except FileNotFoundError:
            raise RuntimeError(f"segments: micro-batch {end} left no plan in {where}") from None
        decoded = read_decoded(where, tasks)
        counts = decoded.pop(COUNTS, None)
        bad = decoded.pop("ingest_quarantine", None)
        if closed is not None:
            rows = table_from_ipc(closed)
            have = decoded.get("offset_commits")
            decoded["offset_commits"] = (
                rows if have is None else pa.concat_tables([have, rows.select(have.column_names)])
            )
        data = controls = 0
        if counts is not None:
            data, controls = (int(sum(counts.column(c).to_pylist())) for c in ("data", "controls"))
        refused = [] if bad is None else bad.to_pylist()
        plan = BatchPlan(records=data + controls + len(refused), refused=refused, controls=controls)
        return plan, decoded

    def release(self, start: dict[str, Any], end: dict[str, Any]) -> None:
        import shutil

        where = self.batch_dir(start, end)
        if where is not None:
            shutil.rmtree(where, ignore_errors=True)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: Spark's checkpoint journals the offsets."""

    def stop(self) -> None:
        """Nothing to release."""


def _upto(spans: list[Any], target: Pos | None) -> list[Any]:
    """``spans`` cut at the position ``target`` (available-now)."""
    import dataclasses

    if target is None:
        return []
    out = []
    for s in spans:
        if s.base > target[1]:
            break
        if s.base == target[1]:
            keep = s.end <= target[2]
            s = dataclasses.replace(
                s, **{f: getattr(s, f)[keep] for f in ("start", "end", "last", "max_ts", "count", "attrs")}
            )
        if len(s):
            out.append(s)
    return out


def _segment_source_classes() -> tuple[type, type]:
    """(DataSource, DataSourceStreamReader) classes, built on first use (pyspark imported late)."""
    global _CLASSES
    if _CLASSES is None:
        from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
        from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

        class _Partition(SegmentPartition, InputPartition):
            pass

        class _Reader(SegmentStreamReader, DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
            def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[Any]:
                return [
                    _Partition(p.ranges, p.fates, p.prior, p.decoded)
                    for p in SegmentStreamReader.partitions(self, start, end)
                ]

        _CLASSES = (packed_source_class(SEGMENT_SOURCE_NAME, _Reader), _Reader)
    return _CLASSES


_CLASSES: tuple[type, type] | None = None


def uses_segments(settings: StreamSettings) -> bool:
    """Whether the replay query reads broker log segments (``landing_kind`` "segments")."""
    return settings.source == "landing" and settings.landing_kind == "segments"


def segment_options(settings: StreamSettings, *, decoded: bool) -> dict[str, str]:
    """The segment source's options: its plans and open transactions live in the replay
    checkpoint (local: ``settings`` refuses segments otherwise)."""

    checkpoint = os.path.abspath(str(local_dir(settings.replay_checkpoint)))
    options = {
        "path": os.path.abspath(str(local_dir(settings.landing))),
        "planDir": str(plan_dir(settings)),
        "stateDir": os.path.join(checkpoint, "segment_txn"),
        "writeDecoded": str(decoded).lower(),
        "topic": settings.topic,
        **bucket_options(),
    }
    if settings.max_bytes_per_trigger is not None:
        options["maxBytesPerTrigger"] = str(settings.max_bytes_per_trigger)
    return options


def read_segment_stream(spark: SparkSession, settings: StreamSettings, *, decoded: bool) -> DataFrame:
    """The packed replay input from the landing's broker log segments (``SegmentStreamReader``)."""
    source, _ = _segment_source_classes()
    spark.dataSource.register(source)
    return spark.readStream.format(SEGMENT_SOURCE_NAME).options(**segment_options(settings, decoded=decoded)).load()
