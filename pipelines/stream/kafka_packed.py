"""The packed Kafka source of the streaming job: ``format("offsetlake_kafka")``'s offsets and
reads, with the packed replay input as rows (the Kafka twin of the packed landing source).

Rules:
- Offsets, planning, ``maxOffsetsPerTrigger`` and ``Trigger.AvailableNow`` are the Kafka
  source's (``pipelines.kafka.source.KafkaStreamReader``): the same offset JSON in the
  checkpoint (``{"<topic>": {"<partition>": <next offset>}}``), so a restarted query re-reads
  exactly the uncommitted range, as before.
- Rows are the packed replay input (``PACK_DDL``): each task reads its Kafka ranges, decodes and
  packs them with ``pipelines.stream.packing.pack_batches`` in the same Python process — the
  raw records never become JVM rows, and no second ``mapInArrow`` pass converts them back.
- A micro-batch's ranges go to at most ``tasks`` tasks (default Spark's task slots, one per core, or the
  ``tasks`` option), balanced by offsets; a task reads its ranges one after the other with ONE
  consumer (``read_range(consumer=...)``): one client start per task, not per partition. Each
  task packs what it read into one pack per state bucket: more tasks, more packs for the same
  records (40k records of 20k groups: 0.22 s of packing CPU in 2 tasks, 0.33 s in 4).
- With ``planDir`` + ``writeDecoded`` each task also writes the decoded tables of what it packs
  (``pipelines.stream.source.DecodedFiles``: one decode for both) under the micro-batch's
  directory (named by its end offsets), and ``partitions`` leaves the batch's task count there
  first (``batch.json``, temp name + rename), so the query's sink (``batch_output``) takes every
  task's output or fails — never a silent loss; it counts the records the tasks read (the
  progress's input count: the rows of this source are packs). No second query reads Kafka
  for the decoded tables (``pipelines.jobs.stream.replay_writes_decoded``).
- Positions in Kafka are unique (one record per partition and offset), so there is no plan of
  duplicates or refusals as for landing files; the log clock's outliers are not applied (as
  with the Kafka path before).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pipelines.kafka.source import (
    KafkaRange,
    KafkaStreamReader,
    choose_engine,
    kafka_source_options,
    raw_schema,
    read_range,
    reader_consumer,
    stream_limit_options,
)
from pipelines.records.decode import INPUT_COLUMNS
from pipelines.runtime.worker_gc import freeze_worker_heap
from pipelines.stream.checkpoint import checkpoint_offsets
from pipelines.stream.ledger import BatchPlan
from pipelines.stream.packing import bucket_options, buckets_of, pack_batches, packed_source_class
from pipelines.stream.source import DecodedFiles, local_dir, read_decoded
from pipelines.stream.source_output import Taken

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.config import Config
    from pipelines.stream.settings import StreamSettings

KAFKA_PACKED_SOURCE_NAME = "offsetlake_kafka_packed"  # registered name: checkpoints depend on it
BATCH_FILE = "batch.json"


class KafkaPackedPartition:
    """One task: Kafka ranges read one after the other, and where its decoded tables go."""

    def __init__(self, ranges: list[KafkaRange], prefix: str | None, decoded: bool) -> None:
        self.ranges = ranges
        self.prefix = prefix  # where the task leaves its record count (and decoded tables), if anywhere
        self.decoded = decoded


def batch_dir(plan_dir: str, end: Mapping[str, Any]) -> str:
    """A micro-batch's directory in ``plan_dir``: named by its end offsets (a micro-batch with
    data always ends further than the one before; a re-run batch has the same end)."""
    key = hashlib.sha256(json.dumps(end, sort_keys=True).encode()).hexdigest()[:32]
    return os.path.join(plan_dir, "kafka-" + key)


def split_tasks(ranges: list[KafkaRange], tasks: int) -> list[list[KafkaRange]]:
    """``ranges`` over at most ``tasks`` tasks, largest first onto the lightest task; inside a
    task in (partition, offset) order."""
    n = min(max(1, tasks), len(ranges))
    loads: list[list[Any]] = [[0, i, []] for i in range(n)]
    for rng in sorted(ranges, key=lambda r: (-(r.end - r.start), r.partition, r.start)):
        slot = min(loads, key=lambda s: (s[0], s[1]))
        slot[0] += rng.end - rng.start
        slot[2].append(rng)
    return [sorted(s[2], key=lambda r: (r.partition, r.start)) for s in loads]


class KafkaPackedReader(KafkaStreamReader):
    """``DataSourceStreamReader``: Kafka offsets, packed replay input rows (module rules)."""

    def __init__(self, options: Mapping[str, str], schema: Any) -> None:
        super().__init__(options, schema)
        opts = self.planner.options
        self.tasks = max(1, int(opts.get("tasks") or 4))
        self.plan_dir = opts.get("plandir") or None
        self.write_decoded = opts.get("writedecoded", "false") == "true" and self.plan_dir is not None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[Any]:
        ranges = list(super().partitions(start, end))
        groups = split_tasks(ranges, self.tasks) if ranges else []  # type: ignore[arg-type]
        where = batch_dir(self.plan_dir, end) if self.plan_dir else None
        if where is not None:
            os.makedirs(where, exist_ok=True)
            tmp = os.path.join(where, f".{BATCH_FILE}.{os.getpid()}.tmp")
            with open(tmp, "w") as fh:
                json.dump({"tasks": len(groups)}, fh)
            os.replace(tmp, os.path.join(where, BATCH_FILE))
        cls = _source_classes()[1]
        return [
            cls(g, os.path.join(where, f"task-{i}") if where else None, self.write_decoded)
            for i, g in enumerate(groups)
        ]

    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, KafkaPackedPartition):
            return  # Spark hands one InputPartition(None) when planning found no ranges
        freeze_worker_heap()
        out = DecodedFiles(partition.prefix) if partition.prefix is not None and partition.decoded else None
        cols = [c for c in INPUT_COLUMNS if c != "topic" or out is not None]  # topic: decoded tables only
        counted = [0]
        consumer = reader_consumer(self.planner.settings)
        try:
            yield from pack_batches(
                self._raw(partition, consumer, cols, counted), buckets=buckets_of(self.planner.options), decoded=out
            )
        finally:
            consumer.close()
        if out is not None:
            out.close()
        if partition.prefix is not None:  # read by the sink: the batch's input count (temp name + rename)
            tmp = f"{partition.prefix}.records.{os.getpid()}.tmp"
            with open(tmp, "w") as fh:
                fh.write(str(counted[0]))
            os.replace(tmp, f"{partition.prefix}.records")

    def _raw(self, partition: KafkaPackedPartition, consumer: Any, cols: list[str], counted: list[int]) -> Any:
        """The task's raw batches, its ranges' records joined up to ``fetch_batch`` rows: a
        micro-batch's ranges are small (40k records over 50 partitions: ~800 each, a task's ~13
        ranges), and each batch costs a decode and a decoded-tables write of its own."""
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        pl = self.planner
        schema = to_arrow_schema(pl.schema, timezone="UTC")
        held: list[pa.RecordBatch] = []
        rows = 0
        for rng in partition.ranges:
            for batch in read_range(
                pl.settings,
                schema,
                rng,
                fetch_batch=pl.fetch_batch,
                read_timeout_s=pl.read_timeout_s,
                consumer=consumer,
            ):
                counted[0] += batch.num_rows
                held.append(batch.select(cols))
                rows += batch.num_rows
                if rows >= pl.fetch_batch:
                    yield pa.concat_batches(held)
                    held, rows = [], 0
        if held:
            yield pa.concat_batches(held)


def batch_output(plan_dir: str, end: Mapping[str, Any], decoded: bool) -> tuple[int, dict[str, pa.Table]] | None:
    """(records read, with ``decoded`` the decoded tables) a micro-batch's tasks left in
    ``plan_dir``; None when its ``partitions`` left nothing there (a micro-batch Spark did not
    plan). A task that did not finish is an error."""

    where = batch_dir(plan_dir, end)
    try:
        with open(os.path.join(where, BATCH_FILE)) as fh:
            tasks = int(json.load(fh)["tasks"])
    except FileNotFoundError:
        return None
    tables = read_decoded(where, tasks) if decoded else {}
    records = 0
    for i in range(tasks):
        try:
            with open(os.path.join(where, f"task-{i}.records")) as fh:
                records += int(fh.read())
        except FileNotFoundError:
            raise RuntimeError(f"kafka: task {i} of the micro-batch in {where} left no complete output") from None
    return records, tables


class KafkaPackedOutput:
    """The packed Kafka source's output of a micro-batch for the replay query's sink
    (``source_output.SourceOutput``): the records its tasks read, with ``decoded`` its decoded
    tables, and what removes its directory once they are written, found by the batch's end
    offsets in the checkpoint's offset log (written before the batch runs). A micro-batch
    without data (Spark's no-data batch: the same end as the batch before) has nothing; any
    other batch without its tasks' output is an error."""

    def __init__(self, checkpoint: str, plan_dir: str, decoded: bool) -> None:
        self.checkpoint = checkpoint
        self.plan_dir = plan_dir
        self.decoded = decoded

    def take(self, batch_id: int) -> Taken:
        local = str(local_dir(self.checkpoint))
        cur = checkpoint_offsets(local, batch_id)
        end = cur[1][0] if cur is not None and cur[1] else None
        if not isinstance(end, dict):
            raise RuntimeError(f"kafka: micro-batch {batch_id} has no offsets in {self.checkpoint}")
        found = batch_output(self.plan_dir, end, self.decoded)
        if found is None:
            prev = checkpoint_offsets(local, batch_id - 1) if batch_id > 0 else None
            if prev is not None and prev[1] and prev[1][0] == end:
                return BatchPlan(records=0), {}, lambda: None
            raise RuntimeError(f"kafka: micro-batch {batch_id} left no output in {batch_dir(self.plan_dir, end)}")
        records, tables = found
        where = batch_dir(self.plan_dir, end)
        return BatchPlan(records=records), tables, lambda: shutil.rmtree(where, ignore_errors=True)


def _source_classes() -> tuple[type, type]:
    """(DataSource, InputPartition) classes, built on first use (pyspark imported late)."""
    global _CLASSES
    if _CLASSES is None:
        from pyspark.sql.datasource import InputPartition

        class _Partition(KafkaPackedPartition, InputPartition):
            def __init__(self, ranges: list[KafkaRange], prefix: str | None, decoded: bool) -> None:
                KafkaPackedPartition.__init__(self, ranges, prefix, decoded)
                InputPartition.__init__(self, (prefix, [r.value for r in ranges]))

        def reader(options: dict[str, str]) -> KafkaPackedReader:
            return KafkaPackedReader(options, raw_schema())

        _CLASSES = (packed_source_class(KAFKA_PACKED_SOURCE_NAME, reader), _Partition)
    return _CLASSES


_CLASSES: tuple[type, type] | None = None


def uses_packed_kafka(spark: SparkSession, cfg: Config, settings: StreamSettings) -> bool:
    """Whether the replay query reads Kafka with this source: ``input.source: kafka`` and the
    jar-free engine (``kafka.engine`` python, or auto without the connector jar)."""

    return settings.source == "kafka" and choose_engine(spark, cfg.kafka.engine) == "python"


def read_packed_kafka(
    spark: SparkSession, cfg: Config, settings: StreamSettings, *, plan_dir: str | None, decoded: bool, tasks: int
) -> DataFrame:
    """The packed replay input straight from Kafka (``KafkaPackedReader``); ``decoded``: its
    tasks also write the decoded tables into ``plan_dir`` for the sink; ``tasks``: the tasks a
    micro-batch's ranges go to (Spark's task slots, unless ``input.kafka_options`` names them)."""

    spark.dataSource.register(_source_classes()[0])
    opts = {**kafka_source_options(cfg), **stream_limit_options(cfg), **bucket_options()}
    opts.setdefault("tasks", str(max(1, tasks)))
    if plan_dir is not None:
        opts.update(planDir=plan_dir, writeDecoded=str(decoded).lower())
    return spark.readStream.format(KAFKA_PACKED_SOURCE_NAME).options(**opts).load()
