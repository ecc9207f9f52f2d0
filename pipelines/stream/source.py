"""The streaming job's sources: the raw-record stream (landing directory or Kafka) and the packed
landing source, a Python data source that emits the packed replay input straight from files.

Rules:
- Source: the landing directory (Parquet raw-record files; the packed Python reader takes them
  in the order of what they hold — oldest record time, then name — whatever their modification
  times; ``stream.max_files_per_trigger`` / ``max_bytes_per_trigger`` and ``max_records_per_trigger`` cap a micro-batch), or Kafka
  (``format("kafka")`` with the connector, else the jar-free ``offsetlake_kafka`` source).
  Spark's file source is not used for the replay of landing files (refused by
  ``pipelines.stream.settings``: modification-time order, no view of earlier micro-batches); it
  still feeds the quarantine query (``read_raw_stream``), which has no watermark to be late for.
- Each micro-batch of the packed reader is planned first (``pipelines.stream.ledger``, from the
  files taken before and the batch's files): its tasks skip the records the plan refuses or
  finds duplicated and give the log clock's outliers the clock's "now" as event time. The plan
  is made once: ``partitions`` leaves it (pickled, by temp name + rename) in the batch's
  directory of ``planDir`` (the replay checkpoint's ``landing_plans``), where the query's sink
  takes it (``batch_output``). With ``writeDecoded`` each task also writes the decoded tables
  of the records it packs there (``DecodedFiles``: the decode runs once for both), and marks
  its output complete; the sink MERGEs them and removes the directory (``release``).
  ``planDir`` must be visible to the tasks and the driver, as the landing directory is.
- Task code starts with ``pipelines.runtime.worker_gc.freeze_worker_heap`` (a reused worker's
  collection after each task then walks only what the task allocated).
- With ``stream.landing_reader: python`` (default, local landing directories) the tasks of a
  Python data source (``LandingPackedReader``, registered as ``offsetlake_landing_packed``: a
  registered name, checkpoints depend on it) read the files with pyarrow and emit the packs
  (``pipelines.stream.packing.pack_batches``) — the raw records never become JVM rows; its
  offsets count the raw records read, which gives the progress its input count.
- The decoded tables hold what the plan lets through (refused records go to
  ``ingest_quarantine`` only, an identical copy is written once), as the batch job decodes
  ``raw_records``.
- Only complete files are data: hidden/temp files (``.name.tmp``, ``_SUCCESS``) are skipped, so
  writers land a file by temp name + rename.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from pipelines.log_clock import LogClock
from pipelines.records.decode import INPUT_COLUMNS
from pipelines.runtime.worker_gc import freeze_worker_heap
from pipelines.stream.ledger import BatchPlan, plan_batch
from pipelines.stream.packing import bucket_options, buckets_of, pack_batches, packed_source_class
from schemas.raw import RAW_RECORDS

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.config import Config
    from pipelines.stream.settings import StreamSettings

log = logging.getLogger("offsetlake.stream")

LANDING_SOURCE_NAME = "offsetlake_landing_packed"


def read_raw_stream(spark: SparkSession, cfg: Config, settings: StreamSettings) -> DataFrame:
    """The raw-record stream (Spark's Kafka source schema) from the landing directory or Kafka."""
    if settings.source == "kafka":
        # lazy: pipelines.kafka.source loads py4j/pyspark when imported (measured: heavy_probe)
        from pipelines.kafka.source import read_kafka_stream

        return read_kafka_stream(spark, cfg)

    reader = spark.readStream.schema(RAW_RECORDS.spark_schema())
    if settings.max_bytes_per_trigger is not None:
        reader = reader.option("maxBytesPerTrigger", str(settings.max_bytes_per_trigger))
    else:
        reader = reader.option("maxFilesPerTrigger", str(settings.max_files_per_trigger))
    # Hidden temp files (.name.tmp) are ignored by the file source; only complete files count.
    return reader.option("pathGlobFilter", "*.parquet").parquet(settings.landing)


def local_dir(path: str) -> str | None:
    """The local directory behind ``path`` (plain or ``file:`` URI), else None."""
    if path.startswith("file://"):
        path = path[len("file://") :]
    elif path.startswith("file:"):
        path = path[len("file:") :]
    elif "://" in path:
        return None
    return path


def uses_packed_landing(settings: StreamSettings) -> bool:
    """Whether the replay query reads the landing directory with the packed Python source
    (``stream.landing_reader: python`` over a local directory), else Spark's file/Kafka source."""
    return (
        settings.source == "landing"
        and settings.landing_kind == "files"
        and settings.landing_reader == "python"
        and local_dir(settings.landing) is not None
    )


def list_landing(path: str) -> list[tuple[int, str, int]]:
    """Complete raw-record files of the landing directory as (mtime ns, name, bytes), in the
    order Spark's file source takes them (modification time, then name); hidden/temp files
    (``.name.tmp``, ``_SUCCESS``) are not data."""
    out = []
    try:
        entries = list(os.scandir(path))
    except FileNotFoundError:
        return []
    for e in entries:
        if e.name.startswith((".", "_")) or not e.name.endswith(".parquet") or not e.is_file():
            continue
        st = e.stat()
        out.append((st.st_mtime_ns, e.name, st.st_size))
    out.sort()
    return out


def content_facts(path: str) -> tuple[int, int]:
    """What a landing file holds, from its footer: (order key, records). The key is its oldest
    record time (µs; from the Parquet statistics of ``timestamp``, else the column itself): files
    taken in this order feed the watermark in log-time order whatever their modification times
    say. The records count against ``stream.max_records_per_trigger`` and the progress."""
    import pyarrow.parquet as pq

    md = pq.read_metadata(path)
    return _oldest_time(path, md), md.num_rows


def _oldest_time(path: str, md: Any) -> int:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    names = [md.schema.column(i).name for i in range(md.num_columns)]
    if "timestamp" not in names or md.num_rows == 0:
        return -(2**63)
    idx = names.index("timestamp")
    lows: list[int] = []
    for rg in range(md.num_row_groups):
        st = md.row_group(rg).column(idx).statistics
        if st is None or not st.has_min_max or md.row_group(rg).column(idx).physical_type != "INT64":
            lows = []
            break
        lows.append(int(st.min_raw))
    if lows:
        return min(lows)
    col = pq.read_table(path, columns=["timestamp"]).column(0)
    low = pc.min(col.cast("int64") if col.type != "int64" else col).as_py()
    return -(2**63) if low is None else int(low)


class LandingPartition:
    """One task's files (picklable; the Python data source's InputPartition protocol), with what
    the micro-batch's plan (``pipelines.stream.ledger``) says of them: rows not replayed per file
    (refused or duplicated), and the log clock's outliers with the clock's "now"."""

    def __init__(
        self,
        paths: list[str],
        skip: dict[str, list[int]] | None = None,
        outliers: frozenset[tuple[int, int]] = frozenset(),
        clock_ms: int | None = None,
        decoded: str | None = None,
    ) -> None:
        self.paths = paths
        self.skip = skip or {}
        self.outliers = outliers
        self.clock_ms = clock_ms
        self.decoded = decoded  # where the task writes its decoded tables (path prefix), if it does


class LandingPackedReader:
    """``DataSourceStreamReader`` over the landing directory whose rows are the packed replay
    input (``PACK_DDL``): each task reads its files with pyarrow, decodes and packs them
    (``pack_batches``) — the raw records never become JVM rows.

    Order: files are taken by what they hold (``content_facts``: oldest record time, then name),
    not by modification time, so landing files whose mtimes do not follow the log (copied,
    restored, re-captured) do not push the watermark past records still to come.

    Offsets: ``{"files", "records", "key", "name", "seen_ns"}`` — files and raw records consumed
    so far, the (content key, name) of the last file taken, and the newest modification time
    of the files listed then. A file is taken when its (key, name) is above the last one's; a
    file below it that appeared after that listing (mtime > ``seen_ns``) arrived late: it is
    taken with the next batch. Its records that are exact copies of what was taken are
    duplicates (the plan skips them: a file landed again changes nothing); new records older
    than the watermark are dropped by the stateful operator — counted in records and failing
    the run unless ``stream.allow_late_drops`` (``ProgressRecorder``). Offsets of older checkpoints
    (``mtime_ns``/``name``) are read as before. ``records`` gives the progress its raw input count.
    """

    def __init__(self, options: dict[str, str]) -> None:
        options = {k.lower(): v for k, v in options.items()}  # Spark passes option names lowercased
        self.path = options["path"]
        self.max_files = int(options.get("maxfilespertrigger") or 0) or None
        self.max_bytes = int(options.get("maxbytespertrigger") or 0) or None
        self.max_records = int(options.get("maxrecordspertrigger") or 0) or None
        self.tasks = max(1, int(options.get("tasks") or 2))
        self.lenient = options.get("lenient", "false") == "true"
        self.options = options  # the state buckets are read when a task packs (``buckets_of``)
        self.num_partitions = int(options.get("numpartitions") or 50)
        self.clock_outlier_ms = int(options.get("clockoutlierms") or 86_400_000)
        self.plan_dir = options.get("plandir") or None
        self.write_decoded = options.get("writedecoded", "false") == "true" and self.plan_dir is not None
        self._target: tuple[int, int] | None = None  # available-now: (newest content key, newest mtime)
        self._facts: dict[tuple[str, int, int], tuple[int, int]] = {}  # (name, size, mtime) -> content_facts

    # -- listing ---------------------------------------------------------------------------
    def _listing(self) -> list[tuple[int, str, int, int]]:
        """(content key, name, bytes, mtime ns) of the complete files, in content order."""
        out = []
        for mtime, name, size in list_landing(self.path):
            ident = (name, size, mtime)
            facts = self._facts.get(ident)
            if facts is None:
                facts = self._facts[ident] = content_facts(os.path.join(self.path, name))
            out.append((facts[0], name, size, mtime))
        out.sort()
        return out

    @staticmethod
    def _taken(start: dict[str, Any]) -> Callable[[tuple[int, str, int, int]], bool]:
        if "key" not in start:  # a checkpoint of the mtime-ordered reader
            last_m = (int(start.get("mtime_ns", -1)), str(start.get("name", "")))
            return lambda f: (f[3], f[1]) <= last_m
        last = (int(start["key"]), str(start["name"]))
        seen = int(start.get("seen_ns", -1))
        return lambda f: (f[0], f[1]) <= last and f[3] <= seen

    # -- offsets ---------------------------------------------------------------------------
    def initialOffset(self) -> dict[str, Any]:
        return {"files": 0, "records": 0, "key": -(2**63), "name": "", "seen_ns": -1}

    def getDefaultReadLimit(self) -> Any:
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes, ReadMaxFiles

        if self.max_bytes:
            return ReadMaxBytes(self.max_bytes)
        return ReadMaxFiles(self.max_files) if self.max_files else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        files = self._listing()
        self._target = (max(f[0] for f in files), max(f[3] for f in files)) if files else (-(2**63), -1)

    def _after(self, start: dict[str, Any]) -> list[tuple[int, str, int, int]]:
        taken = self._taken(start)
        new = [f for f in self._listing() if not taken(f)]
        if self._target is not None:  # available-now: only what was there when it started
            new = [f for f in new if f[3] <= self._target[1]]
        return new

    def _num_rows(self, f: tuple[int, str, int, int]) -> int:
        """A listed file's record count (read with its order key when it was first listed)."""
        return self._facts[(f[1], f[2], f[3])][1]

    def _within_records(self, new: list[tuple[int, str, int, int]]) -> list[tuple[int, str, int, int]]:
        """The prefix of ``new`` within ``stream.max_records_per_trigger`` (whole files, at least
        one): a stream started on a large backlog takes it in bounded micro-batches."""
        if self.max_records is None:
            return new
        taken: list[tuple[int, str, int, int]] = []
        rows = 0
        for f in new:
            n = self._num_rows(f)
            if taken and rows + n > self.max_records:
                break
            taken.append(f)
            rows += n
        return taken

    def latestOffset(self, start: dict[str, Any], limit: Any) -> dict[str, Any]:
        from pyspark.sql.streaming.datasource import ReadMaxBytes, ReadMaxFiles

        new = self._after(start)
        if "key" in start:
            last = (int(start["key"]), str(start["name"]))
            late = [f for f in new if (f[0], f[1]) <= last]  # arrived after newer data was taken
            new = [f for f in new if (f[0], f[1]) > last]
        else:
            late = []
        if isinstance(limit, ReadMaxFiles):
            new = new[: max(1, limit.max_files)]
        elif isinstance(limit, ReadMaxBytes):
            taken: list[tuple[int, str, int, int]] = []
            size = 0
            for f in new:
                if taken and size + f[2] > limit.max_bytes:
                    break
                taken.append(f)
                size += f[2]
            new = taken
        new = self._within_records(new)
        batch = late + new
        if not batch:
            return dict(start)
        if late:
            log.warning(
                "landing: %d file(s) arrived after newer files were processed: %s",
                len(late),
                ", ".join(f[1] for f in late[:5]),
            )
        rows = sum(self._num_rows(f) for f in batch)
        last_key = (int(start.get("key", -(2**63))), str(start.get("name", ""))) if "key" in start else None
        top = max([(f[0], f[1]) for f in new] + ([last_key] if last_key else []))
        # taken afterwards = (key, name) <= top and mtime <= seen: exactly the files taken before
        # plus this batch (``new`` is a prefix of the pending files in content order; a file
        # left out by the available-now target is newer than every file taken)
        seen = max([int(start.get("seen_ns", -1)), *(f[3] for f in batch)])
        return {
            "files": int(start["files"]) + len(batch),
            "records": int(start["records"]) + rows,
            "key": top[0],
            "name": top[1],
            "seen_ns": seen,
        }

    def batch_files(self, start: dict[str, Any], end: dict[str, Any]) -> tuple[list[str], list[str]]:
        """(files taken before ``start``, files of the micro-batch ``start``..``end``), names in
        content order."""
        before = self._taken(start)
        upto = self._taken(end)
        listing = self._listing()
        return [f[1] for f in listing if before(f)], [f[1] for f in listing if upto(f) and not before(f)]

    def plan(self, start: dict[str, Any], end: dict[str, Any]) -> BatchPlan:
        """The micro-batch's plan (``pipelines.stream.ledger.plan_batch``)."""

        taken, batch = self.batch_files(start, end)
        return plan_batch(
            self.path,
            taken,
            batch,
            num_partitions=self.num_partitions,
            tolerance_ms=self.clock_outlier_ms,
            facts_dir=None if self.plan_dir is None else os.path.join(self.plan_dir, FACTS_DIR),
        )

    def _batch_dir(self, start: dict[str, Any], end: dict[str, Any]) -> str | None:
        """The micro-batch's directory in ``planDir``: its plan, its tasks' decoded tables."""
        return None if self.plan_dir is None else os.path.join(self.plan_dir, batch_key(start, end))

    def batch_output(self, start: dict[str, Any], end: dict[str, Any]) -> tuple[BatchPlan, dict[str, pa.Table]]:
        """What the micro-batch ``start``..``end`` left for the query's sink, once its tasks ran:
        the plan ``partitions`` made (else ``plan``; a micro-batch without files: the empty
        plan) and, with ``writeDecoded``, the decoded tables its tasks wrote (every task's, else
        an error: never a silent loss)."""
        import pickle

        if start == end:
            return BatchPlan(), {}
        where = self._batch_dir(start, end)
        if where is None:
            return self.plan(start, end), {}
        try:
            with open(os.path.join(where, "plan.pickle"), "rb") as fh:
                plan, tasks = pickle.load(fh)
        except FileNotFoundError:
            if self.write_decoded:
                raise RuntimeError(f"landing: micro-batch {end} left no plan in {where}") from None
            return self.plan(start, end), {}
        return plan, (read_decoded(where, tasks) if self.write_decoded else {})

    def release(self, start: dict[str, Any], end: dict[str, Any]) -> None:
        """Remove what the micro-batch left in ``planDir`` (its sink is done with it)."""
        import shutil

        where = self._batch_dir(start, end)
        if where is not None:
            shutil.rmtree(where, ignore_errors=True)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[LandingPartition]:
        before = self._taken(start)
        upto = self._taken(end)
        files = [f for f in self._listing() if upto(f) and not before(f)]
        n = min(self.tasks, len(files))
        if n == 0:
            return []
        plan = self.plan(start, end)
        where = self._batch_dir(start, end)
        if where is not None:
            keep_plan(where, (plan, n))
        outliers = frozenset(plan.outlier_positions())
        if plan.outliers:
            log.warning("landing: %s", LogClock(plan.clock_ms, None, plan.outliers).describe())
        # balance bytes over the tasks (largest first onto the lightest task), keep log order inside
        loads: list[list[Any]] = [[0, i, []] for i in range(n)]  # [bytes, task, file indexes]
        for idx, f in sorted(enumerate(files), key=lambda x: -x[1][2]):
            slot = min(loads, key=lambda s: (s[0], s[1]))
            slot[0] += f[2]
            slot[2].append(idx)
        out = []
        for s in loads:
            paths = [os.path.join(self.path, files[i][1]) for i in sorted(s[2])]
            skip = {p: plan.skip[p] for p in paths if p in plan.skip}
            decoded = os.path.join(str(where), f"task-{s[1]}") if self.write_decoded else None
            out.append(LandingPartition(paths, skip, outliers, plan.clock_ms, decoded))
        return out

    def read(self, partition: LandingPartition) -> Iterator[pa.RecordBatch]:
        import numpy as np
        import pyarrow as pa
        import pyarrow.parquet as pq

        freeze_worker_heap()
        out = DecodedFiles(partition.decoded) if partition.decoded is not None else None

        def raw() -> Iterator[pa.RecordBatch]:  # the task's files, one after the other
            for path in partition.paths:
                pf = pq.ParquetFile(path)
                # ``topic`` only fills the decoded tables' raw_topic
                cols = [c for c in INPUT_COLUMNS if c in pf.schema_arrow.names and (c != "topic" or out is not None)]
                batches = pf.iter_batches(batch_size=100_000, columns=cols)
                skip = partition.skip.get(path)
                if skip:
                    batches = _without_rows(batches, np.asarray(skip, np.int64), pa)
                yield from batches

        yield from pack_batches(
            raw(),
            buckets=buckets_of(self.options),
            lenient=self.lenient,
            outliers=partition.outliers,
            clock_ms=partition.clock_ms,
            decoded=out,
        )
        if out is not None:
            out.close()

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: Spark's checkpoint journals the offsets."""

    def stop(self) -> None:
        """Nothing to release."""


def batch_key(start: dict[str, Any], end: dict[str, Any]) -> str:
    """A micro-batch's directory name in ``planDir``: its offsets, hashed."""
    return hashlib.sha256(json.dumps([start, end], sort_keys=True).encode()).hexdigest()[:32]


def keep_plan(where: str, payload: Any) -> None:
    """A micro-batch's plan for the query's sink (``plan.pickle``), written by temp name + rename."""
    import pickle

    os.makedirs(where, exist_ok=True)
    tmp = os.path.join(where, f".plan.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        pickle.dump(payload, fh, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, os.path.join(where, "plan.pickle"))


class DecodedFiles:
    """One task's decoded tables (``split_union_arrow``), each appended to an Arrow IPC file
    ``<prefix>.<table>.arrow``; ``close`` marks the task's output complete (``<prefix>.done``).
    A task run again (a retry, a re-run micro-batch) first removes what it wrote before."""

    def __init__(self, prefix: str) -> None:
        import glob

        self.prefix = prefix
        self.writers: dict[str, Any] = {}
        for old in glob.glob(glob.escape(prefix) + ".*"):
            os.remove(old)

    def __call__(self, tables: dict[str, pa.Table]) -> None:
        import pyarrow as pa

        for name, rows in tables.items():
            writer = self.writers.get(name)
            if writer is None:
                writer = self.writers[name] = pa.ipc.new_file(f"{self.prefix}.{name}.arrow", rows.schema)
            writer.write_table(rows)

    def close(self) -> None:
        for writer in self.writers.values():
            writer.close()
        with open(f"{self.prefix}.done", "wb"):
            pass


def read_decoded(where: str, tasks: int) -> dict[str, pa.Table]:
    """The decoded tables the ``tasks`` tasks of a micro-batch wrote in ``where``
    (``DecodedFiles``), in task order; a task that did not finish is an error."""
    import glob

    import pyarrow as pa

    parts: dict[str, list[pa.Table]] = {}
    for i in range(tasks):
        prefix = os.path.join(where, f"task-{i}")
        if not os.path.exists(f"{prefix}.done"):
            raise RuntimeError(f"landing: task {i} of the micro-batch in {where} left no complete output")
        for path in sorted(glob.glob(glob.escape(prefix) + ".*.arrow")):
            name = os.path.basename(path)[len(f"task-{i}.") : -len(".arrow")]
            with pa.OSFile(path, "rb") as source:  # read into memory: the files are removed after
                parts.setdefault(name, []).append(pa.ipc.open_file(source).read_all())
    return {name: pa.concat_tables(ts) for name, ts in parts.items()}


def _without_rows(batches: Iterator[pa.RecordBatch], skip: Any, pa: Any) -> Iterator[pa.RecordBatch]:
    """``batches`` of one file without the rows at the (sorted) file-row indexes ``skip``."""
    import numpy as np

    row = 0
    for b in batches:
        n = b.num_rows
        lo, hi = np.searchsorted(skip, [row, row + n])
        if hi > lo:
            keep = np.ones(n, bool)
            keep[skip[lo:hi] - row] = False
            b = b.filter(pa.array(keep))
        row += n
        if b.num_rows:
            yield b


def _landing_source_classes() -> tuple[type, type]:
    """(DataSource, DataSourceStreamReader) classes, built on first use (pyspark imported late)."""
    global _LANDING_CLASSES
    if _LANDING_CLASSES is None:
        from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
        from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

        class _Partition(LandingPartition, InputPartition):
            pass

        # type: ignore: ``read`` takes our LandingPartition (pyspark's stub says any InputPartition)
        class _Reader(LandingPackedReader, DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
            def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[Any]:
                return [
                    _Partition(p.paths, p.skip, p.outliers, p.clock_ms, p.decoded)
                    for p in LandingPackedReader.partitions(self, start, end)
                ]

        _LANDING_CLASSES = (packed_source_class(LANDING_SOURCE_NAME, _Reader), _Reader)
    return _LANDING_CLASSES


_LANDING_CLASSES: tuple[type, type] | None = None


#: The directory of ``planDir`` keeping the taken files' facts (``ledger.file_facts``).
FACTS_DIR = "_facts"


def plan_dir(settings: StreamSettings) -> str | None:
    """Where the landing source leaves each micro-batch's plan for the replay query's sink: a
    directory of its checkpoint (when local; else the sink plans the batch itself)."""
    local = local_dir(settings.replay_checkpoint)
    return None if local is None else os.path.join(os.path.abspath(local), "landing_plans")


def read_packed_landing(spark: SparkSession, settings: StreamSettings, options: dict[str, str]) -> DataFrame:
    """The packed replay input straight from the landing directory (``LandingPackedReader``)
    with the reader's ``options`` (``landing_reader_options``: the job's reader of plans is
    built from the same)."""
    source, _ = _landing_source_classes()
    spark.dataSource.register(source)
    reader = spark.readStream.format(LANDING_SOURCE_NAME).options(**options)
    if settings.max_bytes_per_trigger is not None:
        reader = reader.option("maxBytesPerTrigger", str(settings.max_bytes_per_trigger))
    else:
        reader = reader.option("maxFilesPerTrigger", str(settings.max_files_per_trigger))
    return reader.load()


def landing_options(settings: StreamSettings, path: str) -> dict[str, str]:
    """The packed landing source's options for reading ``path`` (``late_records`` too)."""
    return {
        "path": os.path.abspath(path),
        "numPartitions": str(settings.num_partitions),
        "clockOutlierMs": str(settings.clock_outlier_ms),
        **bucket_options(),
    }


def landing_reader_options(settings: StreamSettings, *, decoded: bool, tasks: int) -> dict[str, str]:
    """The replay query's packed landing source's options: with a plan directory, the sink takes
    each micro-batch's plan from there (planned once) and, with ``decoded``, its decoded tables
    (its tasks write them); a micro-batch's files are spread over at most ``tasks`` tasks (the
    job's task slots)."""
    path = local_dir(settings.landing)
    assert path is not None
    options = landing_options(settings, path)
    options["tasks"] = str(max(1, tasks))
    plans = plan_dir(settings)
    if plans is not None:
        options.update(planDir=plans, writeDecoded=str(decoded).lower())
    if settings.max_records_per_trigger is not None:
        options["maxRecordsPerTrigger"] = str(settings.max_records_per_trigger)
    return options
