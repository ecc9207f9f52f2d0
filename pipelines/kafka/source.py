"""``format("offsetlake_kafka")``: a Kafka source for Spark written with the Python data source API.

Used when Spark's own Kafka connector (spark-sql-kafka, a jar) is absent. Same output schema as
``format("kafka")`` (``schemas.raw.RAW_RECORDS``), same offset JSON in the checkpoint
(``{"<topic>": {"<partition>": <next offset>}}``), same option names where they exist.

Rules:
- The stream's offsets are the next offset to read per partition; a micro-batch reads
  ``[start, end)`` of every partition that moved. Spark's checkpoint journals them, so a
  restarted query re-reads exactly the uncommitted range: exactly-once with an idempotent sink.
- Planning (``initialOffset``/``latestOffset``) runs on the driver with one metadata client;
  ``read()`` runs on executors, one task per Kafka partition range, each with its own consumer
  (``assign()`` + explicit offset, no group, no commit) and yields Arrow record batches.
- ``read()`` stops at the first offset >= end, or at the log end when the range's tail holds
  transaction markers / compacted records; if nothing arrives for ``readTimeoutMs`` it fails with
  a clear message instead of hanging.
- ``maxOffsetsPerTrigger`` caps a micro-batch (split over partitions by their lag, like Spark's
  Kafka source); ``Trigger.AvailableNow`` stops at the end offsets seen when the query starts.
- A stream given ``endingOffsets`` (JSON) reads no partition past it (clamped to the log end, as
  starting offsets are): with ``Trigger.AvailableNow`` it stops there. Spark's own Kafka source
  refuses the option in a stream; here it bounds a run to a known log prefix (e.g. the end offsets
  a capture reached: tests/broker/test_classic_scenarios.py).
- Secrets never travel in options: only the names of the environment variables that hold them
  (``secretenv.<librdkafka property>``); executors read the environment.

Options: ``kafka.bootstrap.servers`` (required), ``topic``/``subscribe`` (default
``__consumer_offsets``), ``partitions`` ("0,3,5-7"), ``startingOffsets`` (``earliest`` |
``latest`` | offset JSON, -2 = earliest, -1 = latest), ``endingOffsets`` (``latest`` | JSON; a
stream stops there), ``maxOffsetsPerTrigger``, ``maxRecordsPerPartition`` (split big ranges into several
tasks), ``readTimeoutMs`` (default 60000), ``fetchBatch`` (messages per Arrow batch, 10000),
``kafka.<librdkafka property>``, ``secretenv.<librdkafka property>``.
"""

from __future__ import annotations

import bisect
import itertools
import json
import operator
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from pipelines.config import option_value, spark_kafka_options
from pipelines.errors import UsageError
from pipelines.kafka.client import (
    KafkaSettings,
    require_confluent_kafka,
    settings_from_config,
    topic_partitions,
    watermarks,
)
from pipelines.runtime.spark_session import kafka_connector_available
from schemas.raw import RAW_RECORDS

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from pipelines.config import Config

SOURCE_NAME = "offsetlake_kafka"
EARLIEST, LATEST = -2, -1  # Spark's Kafka source sentinels in offset JSON


def raw_schema() -> StructType:
    """The rows a Kafka source yields: ``raw_records``' Spark schema."""

    return RAW_RECORDS.spark_schema()


class KafkaRange(InputPartition):
    """One task: ``[start, end)`` of one Kafka partition."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end


def _parse_partitions(text: str | None) -> list[int] | None:
    if not text:
        return None
    out: set[int] = set()
    for part in str(text).split(","):
        part = part.strip()
        if "-" in part:
            a, b = part.split("-", 1)
            out.update(range(int(a), int(b) + 1))
        elif part:
            out.add(int(part))
    return sorted(out)


def offsets_json(topic: str, offsets: Mapping[int, int]) -> dict[str, dict[str, int]]:
    """Offsets in Spark's Kafka-source JSON shape: ``{topic: {"partition": offset}}``."""
    return {topic: {str(p): int(o) for p, o in sorted(offsets.items())}}


def offsets_from_json(topic: str, data: Mapping[str, Any] | str) -> dict[int, int]:
    """Inverse of ``offsets_json`` (accepts a JSON string too)."""
    obj = json.loads(data) if isinstance(data, str) else data
    inner = obj.get(topic, {}) if isinstance(obj, Mapping) else {}
    return {int(p): int(o) for p, o in inner.items()}


def _fetch_below_end(msgs: list[Any], rng: KafkaRange, nxt: int, eof_code: int) -> tuple[list[Any], int]:
    """The records of one fetch below ``rng.end``, and the next offset to read after it.

    Fields are read with the C methods mapped over the fetch (``map(Message.error, msgs)``): no
    Python frame per message for the checks. One consumer reads one partition, whose records
    arrive in offset order, so the last record's offset decides whether the fetch crossed the end.
    A partition-EOF event carries the log end offset: at or past ``rng.end`` the range is done
    even when its tail holds no records (transaction markers, compacted records).
    """
    cls = type(msgs[0])
    parts = list(map(cls.partition, msgs))
    if parts.count(rng.partition) != len(parts):
        # a consumer reused for another range (``read_range(consumer=...)``): nothing of an
        # earlier assignment may pass (librdkafka drops outdated fetches; this makes it certain)
        msgs = [m for m, p in zip(msgs, parts, strict=True) if p == rng.partition]
        if not msgs:
            return msgs, nxt
    errors = list(map(cls.error, msgs))
    # (``errors.count(None)`` would compare a KafkaError with None, which raises)
    if any(map(operator.is_not, errors, itertools.repeat(None))):
        data = []
        for m, err in zip(msgs, errors, strict=True):
            if err is None:
                data.append(m)
            elif err.code() == eof_code:
                nxt = max(nxt, m.offset())
            elif err.fatal():
                raise RuntimeError(f"{rng.topic}-{rng.partition}: {err.str()}")
            # any other error is transient: librdkafka retries it
        msgs = data
    if msgs:
        last = msgs[-1].offset()
        if last >= rng.end:  # records beyond the range: drop them, the range is done
            msgs = msgs[: bisect.bisect_left(list(map(cls.offset, msgs)), rng.end)]
        nxt = max(nxt, min(last + 1, rng.end))
    return msgs, nxt


def read_range(
    settings: KafkaSettings,
    arrow_schema: pa.Schema,
    rng: KafkaRange,
    *,
    fetch_batch: int = 10_000,
    read_timeout_s: float = 60.0,
    consumer: Any = None,
) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the records in ``[rng.start, rng.end)`` of one partition.

    ``consumer``: a consumer (``reader_consumer``) to reuse, assigned to this range only and left
    open (a task reading several ranges starts one client, not one per range); else one is made
    and closed here."""
    import pyarrow as pa

    # lazy: pipelines.kafka.batch_builder loads numpy/pyarrow when imported (measured: heavy_probe)
    from pipelines.kafka.batch_builder import MessageBatchBuilder

    if rng.end <= rng.start:
        return
    ck = require_confluent_kafka()
    eof_code = ck.KafkaError._PARTITION_EOF
    own = consumer is None
    if consumer is None:
        consumer = reader_consumer(settings)
    try:
        consumer.assign([ck.TopicPartition(rng.topic, rng.partition, rng.start)])
        builder = MessageBatchBuilder(rng.topic)
        last = time.monotonic()
        nxt = rng.start  # the next offset to read: the range is done once it reaches rng.end
        while nxt < rng.end:
            # ask for no more than the range still holds: consume() returns as soon as it has them
            msgs = consumer.consume(num_messages=max(1, min(fetch_batch, rng.end - nxt)), timeout=0.5)
            if msgs:
                last = time.monotonic()
                msgs, nxt = _fetch_below_end(msgs, rng, nxt, eof_code)
                builder.extend(msgs)  # one mapped C method per field over the fetch
            if len(builder) >= fetch_batch or (nxt >= rng.end and len(builder)):
                batch = builder.to_batch()
                builder.clear()
                yield pa.RecordBatch.from_arrays(batch.columns, schema=arrow_schema)
            elif nxt < rng.end and time.monotonic() - last > read_timeout_s:
                raise RuntimeError(
                    f"{SOURCE_NAME}: no data from {settings.bootstrap_servers} for {read_timeout_s:g}s "
                    f"reading {rng.topic}-{rng.partition} [{rng.start}, {rng.end})"
                )
    finally:
        if own:
            consumer.close()


#: the broker's longest wait for data in a reader's fetch (``fetch.wait.max.ms``). A task reads its
#: ranges one after the other with one consumer, and each assign() of the next range waits for the
#: fetch still outstanding at the end of the previous one: measured on a Kafka 4.4 broker on
#: loopback, 100 ms cost ~100 ms per range (a micro-batch of 50 partitions over 4 tasks on 2 cores:
#: ~2.5 s), 10 ms costs ~15 ms. Inside a range the data is there and a fetch returns at once.
READER_FETCH_WAIT_MS = 10


def reader_consumer(settings: KafkaSettings) -> Any:
    """A consumer for ``read_range``: assign() only, no group, no commit."""
    return require_confluent_kafka().Consumer(settings.consumer_conf(**{"fetch.wait.max.ms": READER_FETCH_WAIT_MS}))


#: how long the driver waits for the cluster's metadata (``connectTimeoutMs``; the JVM source's
#: partition listing too)
CONNECT_TIMEOUT_S = 15.0


class _Planner:
    """Shared driver-side logic of the batch and stream readers (metadata client, ranges)."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = {str(k).lower(): str(v) for k, v in options.items()}
        self.settings = KafkaSettings.from_options(options)
        self.schema = schema
        self.wanted = _parse_partitions(self.options.get("partitions"))
        self.timeout_s = float(self.options.get("connecttimeoutms", CONNECT_TIMEOUT_S * 1000)) / 1000.0
        self.read_timeout_s = float(self.options.get("readtimeoutms", "60000")) / 1000.0
        self.fetch_batch = int(self.options.get("fetchbatch", "10000"))
        self.max_per_task = int(self.options.get("maxrecordsperpartition", "0") or 0)
        self._client: Any = None

    # the driver's client is not shipped to executors
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None
        return state

    def client(self) -> Any:
        if self._client is None:
            ck = require_confluent_kafka()
            self._client = ck.Consumer(self.settings.consumer_conf())
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def marks(self) -> dict[int, tuple[int, int]]:
        client = self.client()
        parts = topic_partitions(client, self.settings, self.timeout_s, self.wanted)
        return watermarks(client, self.settings.topic, parts, self.timeout_s)

    def resolve(self, spec: str, marks: Mapping[int, tuple[int, int]], default: int) -> dict[int, int]:
        """``earliest``/``latest``/JSON -> concrete next offsets for every partition in ``marks``."""
        s = spec.strip()
        if s.lower() == "earliest":
            return {p: lo for p, (lo, _) in marks.items()}
        if s.lower() == "latest":
            return {p: hi for p, (_, hi) in marks.items()}
        try:
            given = offsets_from_json(self.settings.topic, s)
        except (ValueError, AttributeError, TypeError):
            raise UsageError(f"{SOURCE_NAME}: bad offsets {spec!r}: earliest, latest or offset JSON") from None
        out: dict[int, int] = {}
        for p, (lo, hi) in marks.items():
            o = given.get(p, default)
            # explicit offsets are clamped to what the log holds (below: deleted; above: not yet)
            out[p] = lo if o == EARLIEST else hi if o == LATEST else min(max(o, lo), hi)
        return out

    def ranges(self, start: Mapping[int, int], end: Mapping[int, int]) -> list[KafkaRange]:
        out: list[KafkaRange] = []
        topic = self.settings.topic
        for p in sorted(end):
            s, e = start.get(p, 0), end[p]
            if e <= s:
                continue
            step = self.max_per_task if self.max_per_task > 0 else e - s
            for a in range(s, e, step):
                out.append(KafkaRange(topic, p, a, min(e, a + step)))
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from pyspark.sql.pandas.types import to_arrow_schema

        if not isinstance(partition, KafkaRange):
            # Spark hands one ``InputPartition(None)`` to read when planning found no ranges
            return

        arrow_schema = to_arrow_schema(self.schema, timezone="UTC")
        yield from read_range(
            self.settings, arrow_schema, partition, fetch_batch=self.fetch_batch, read_timeout_s=self.read_timeout_s
        )


class KafkaBatchReader(DataSourceReader):
    """``spark.read.format("offsetlake_kafka")``: ``startingOffsets`` .. ``endingOffsets``."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.planner = _Planner(options, schema)

    def partitions(self) -> Sequence[InputPartition]:
        pl = self.planner
        try:
            marks = pl.marks()
            start = pl.resolve(pl.options.get("startingoffsets", "earliest"), marks, EARLIEST)
            end = pl.resolve(pl.options.get("endingoffsets", "latest"), marks, LATEST)
        finally:
            pl.close()
        return pl.ranges(start, end)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from self.planner.read(partition)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The streaming reader: per-partition next offsets as the stream's offsets."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.planner = _Planner(options, schema)
        mopt = self.planner.options.get("maxoffsetspertrigger")
        self.max_offsets = int(mopt) if mopt else None
        self._target: dict[int, int] | None = None

    def initialOffset(self) -> dict[str, Any]:
        pl = self.planner
        marks = pl.marks()
        start = pl.resolve(pl.options.get("startingoffsets", "earliest"), marks, EARLIEST)
        return offsets_json(pl.settings.topic, start)

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_offsets) if self.max_offsets else ReadAllAvailable()

    def _highs(self) -> dict[int, int]:
        """How far every partition may be read now: its log end, or ``endingOffsets`` below it."""
        pl = self.planner
        return pl.resolve(pl.options.get("endingoffsets", "latest"), pl.marks(), LATEST)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._highs()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        pl = self.planner
        topic = pl.settings.topic
        begin = offsets_from_json(topic, start)
        highs = dict(self._target) if self._target is not None else self._highs()
        # a partition added since the last batch starts at 0 (the consumer resets to its log start)
        end = {p: max(hi, begin.get(p, 0)) for p, hi in highs.items()}
        for p, o in begin.items():  # never move a partition backwards or forget one
            end[p] = max(end.get(p, o), o)
        if isinstance(limit, ReadMaxRows):
            end = _rate_limit(begin, end, limit.max_rows)
        return offsets_json(topic, end)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        try:
            highs = {p: hi for p, (_, hi) in self.planner.marks().items()}
        except UsageError:
            return None
        return offsets_json(self.planner.settings.topic, highs)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        topic = self.planner.settings.topic
        return self.planner.ranges(offsets_from_json(topic, start), offsets_from_json(topic, end))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from self.planner.read(partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: Spark's checkpoint holds the offsets; nothing is committed to Kafka."""

    def stop(self) -> None:
        self.planner.close()


def _rate_limit(begin: Mapping[int, int], end: Mapping[int, int], max_rows: int) -> dict[int, int]:
    """Cap the batch at ``max_rows`` offsets, split over partitions in proportion to their lag."""
    lag = {p: max(0, end[p] - begin.get(p, end[p])) for p in end}
    total = sum(lag.values())
    if total <= max_rows:
        return dict(end)
    out = {}
    given = 0
    for p in sorted(end):
        share = lag[p] * max_rows // total
        out[p] = begin.get(p, end[p]) + share
        given += share
    # hand out the rounding remainder, one offset per partition with room left
    for p in sorted(end, key=lambda q: -lag[q]):
        if given >= max_rows:
            break
        if out[p] < end[p]:
            out[p] += 1
            given += 1
    return out


class KafkaOffsetsSource(DataSource):
    """Kafka through confluent-kafka, registered as ``format("offsetlake_kafka")``."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return raw_schema()

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(self.options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(self.options, schema)


# ---------------------------------------------------------------------------------------------
# wiring for the jobs
# ---------------------------------------------------------------------------------------------
def register_kafka_source(spark: SparkSession) -> None:
    """Register ``format("offsetlake_kafka")`` with this session (idempotent)."""
    spark.dataSource.register(KafkaOffsetsSource)


def choose_engine(spark: SparkSession, engine: str) -> str:
    """``jvm`` or ``python`` for ``kafka.engine`` auto | jvm | python.

    Raises:
        UsageError: ``jvm`` was asked for but the spark-sql-kafka jar is not on the classpath.
    """

    if engine == "python":
        return "python"
    has_jvm = kafka_connector_available(spark)
    if engine == "jvm" and not has_jvm:
        raise UsageError(
            "kafka.engine: jvm needs Spark's Kafka connector (spark-sql-kafka-0-10 jar) on the "
            "classpath; use kafka.engine: python (confluent-kafka) or auto"
        )
    return "jvm" if has_jvm else "python"


#: Spark's Kafka source finds offsets with Kafka's Admin client by default; against a real broker
#: (Kafka 3.9, tests/cluster/test_kafka_jvm.py) that read 0 records of ``__consumer_offsets`` with no
#: error, where the consumer-based offset fetching reads them all: it is used unless the config's
#: ``spark.conf`` chooses
OFFSET_FETCHING = "spark.sql.streaming.kafka.useDeprecatedOffsetFetching"


def _consumer_offset_fetching(spark: SparkSession, cfg: Config) -> None:
    if OFFSET_FETCHING not in cfg.spark.conf:
        spark.conf.set(OFFSET_FETCHING, "true")


def _assign_every_partition(opts: dict[str, str], cfg: Config, bootstrap_servers: str | None) -> None:
    """``assign`` the topic's partitions (the configured ones, else every one the cluster lists),
    never ``subscribe``: with ``subscribe`` the consumer-based offset fetching joins a consumer
    group of its own (``spark-kafka-source-<uuid>-driver-0``) on the cluster it reads, so reading
    ``__consumer_offsets`` would write a new group into it (seen on Kafka 3.9,
    tests/cluster/test_kafka_jvm.py). Assigned partitions join no group."""
    parts = cfg.kafka.partitions
    if not parts:
        ck = require_confluent_kafka()
        settings = settings_from_config(cfg, bootstrap_servers=bootstrap_servers)
        client = ck.Consumer(settings.consumer_conf())
        try:
            parts = topic_partitions(client, settings, CONNECT_TIMEOUT_S)
        finally:
            client.close()
    opts.pop("subscribe", None)
    opts["assign"] = json.dumps({cfg.kafka.topic: sorted(parts)})


def _jvm_options(cfg: Config, bootstrap_servers: str | None) -> dict[str, str]:
    """``format("kafka")`` options: the config module's mapping (holds secrets: never log it)."""

    opts = spark_kafka_options(cfg)
    if bootstrap_servers:
        opts["kafka.bootstrap.servers"] = bootstrap_servers
    return opts


def kafka_source_options(cfg: Config, *, bootstrap_servers: str | None = None) -> dict[str, str]:
    """Options for ``format("offsetlake_kafka")`` from the config (secrets as env-var names)."""
    settings = settings_from_config(cfg, bootstrap_servers=bootstrap_servers)
    opts = settings.to_options()
    opts["startingOffsets"] = cfg.kafka.starting_offsets
    if cfg.kafka.partitions:
        opts["partitions"] = ",".join(str(p) for p in cfg.kafka.partitions)

    opts.update({k: option_value(v) for k, v in cfg.input.kafka_options.items()})
    return opts


def stream_limit_options(cfg: Config) -> dict[str, str]:
    """``maxOffsetsPerTrigger`` from ``stream.max_records_per_trigger`` unless ``input.kafka_options``
    sets it: a stream started on a large backlog reads it in bounded micro-batches (ARCHITECTURE.md,
    *One path per stage*: stream)."""
    cap = cfg.stream.max_records_per_trigger
    if cap is None or any(k.lower() == "maxoffsetspertrigger" for k in cfg.input.kafka_options):
        return {}
    return {"maxOffsetsPerTrigger": str(cap)}


def read_kafka_stream(spark: SparkSession, cfg: Config, *, bootstrap_servers: str | None = None) -> DataFrame:
    """A streaming DataFrame of raw records from the configured cluster.

    ``format("kafka")`` when ``kafka.engine`` is jvm, or auto and the connector jar is on the
    classpath; otherwise ``format("offsetlake_kafka")`` (this module). Both give the raw-record
    schema.
    """
    if choose_engine(spark, cfg.kafka.engine) == "jvm":
        _consumer_offset_fetching(spark, cfg)
        opts = _jvm_options(cfg, bootstrap_servers)
        _assign_every_partition(opts, cfg, bootstrap_servers)
        return spark.readStream.format("kafka").options(**opts, **stream_limit_options(cfg)).load()
    register_kafka_source(spark)
    return (
        spark.readStream.format(SOURCE_NAME)
        .options(**kafka_source_options(cfg, bootstrap_servers=bootstrap_servers), **stream_limit_options(cfg))
        .load()
    )


def read_kafka_batch(spark: SparkSession, cfg: Config, *, bootstrap_servers: str | None = None) -> DataFrame:
    """A batch DataFrame of the whole topic (earliest .. latest), engine chosen as for streams."""
    if choose_engine(spark, cfg.kafka.engine) == "jvm":
        _consumer_offset_fetching(spark, cfg)
        opts = _jvm_options(cfg, bootstrap_servers)
        opts["startingOffsets"] = "earliest"
        opts["endingOffsets"] = "latest"
        _assign_every_partition(opts, cfg, bootstrap_servers)
        return spark.read.format("kafka").options(**opts).load()
    register_kafka_source(spark)
    opts = kafka_source_options(cfg, bootstrap_servers=bootstrap_servers)
    opts["startingOffsets"] = "earliest"
    return spark.read.format(SOURCE_NAME).options(**opts).load()
