"""Spark jobs whose tasks read files themselves: spreading file lists, reading Parquet in batches.

Rules:
- Used where a table's snapshot (or a landing directory) IS a list of Parquet files: the driver
  lists the files, spreads them over Spark tasks (``spread``: ``pipelines.tableio.task_rows``),
  and each task reads its files with pyarrow (``parquet_batches``) — no row is converted from the
  JVM. Where the file list is not
  the data (deletion vectors, object-store listings, other formats), callers use Spark's readers.
- Paths may be local paths or URIs that pyarrow's filesystems understand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pipelines.uri import filesystem as _filesystem

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

    from pipelines.tableio.task_rows import TaskRows

BATCH_ROWS = 65_536


#: tasks per task slot (core): one. Each task pays fixed costs (its output files per table, the
#: replay input's bucket files, Python task set-up) and the files are already packed heaviest
#: first, so more tasks cost more than they balance. Measured at 10M records on 2 cores,
#: alternating runs: the job took 11.0-11.3 s with 2 tasks per stage, 11.6-12.0 s with 4 and
#: 11.9-12.6 s with 8; 16 (four per unit of the default parallelism, before) 13.7-14.2 s
TASKS_PER_SLOT = 1


def _weight(row: Any, path_at: int) -> int:
    """A row's share of the work: its local file's size (1 for a URI or a missing file)."""
    import os

    path = row[path_at]
    if isinstance(path, str) and "://" not in path:
        try:
            return max(1, os.path.getsize(path))
        except OSError:
            pass
    return 1


def _simple_struct(ddl: str) -> StructType | None:
    """``"name type, ..."`` of atomic types as a ``StructType`` without the JVM (Spark parses a
    DDL string with a py4j call: ~0.2 s when it is the process's first); ``None`` for anything
    else (Spark's parser decides)."""
    from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

    atomic = {"string": StringType, "int": IntegerType, "bigint": LongType, "binary": BinaryType}
    fields = []
    for part in ddl.split(","):
        words = part.split()
        if len(words) != 2 or words[1].lower() not in atomic or not words[0].isidentifier():
            return None
        fields.append(StructField(words[0], atomic[words[1].lower()](), True))
    return StructType(fields)


def task_slots(spark: SparkSession) -> int:
    """How many tasks Spark runs at once (``slots_for`` this session's master; ``local[*]`` runs
    as many as the driver JVM's available processors, which honour a container's CPU quota)."""
    sc = spark.sparkContext
    return slots_for(sc.master or "", int(sc.defaultParallelism), lambda: _jvm_cores(spark))


def _jvm_cores(spark: SparkSession) -> int:
    import os

    try:
        return int(spark.sparkContext._jvm.java.lang.Runtime.getRuntime().availableProcessors())  # type: ignore[union-attr]
    except Exception:  # no JVM gateway here: the cores this process may use
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def slots_for(master: str, default_parallelism: int, cores: Callable[[], int]) -> int:
    """Task slots of a master: N of ``local[N]`` / ``local[N,retries]``, ``cores()`` for
    ``local[*]``, 1 for ``local``, else the default parallelism (a cluster's executor cores
    unless ``spark.default.parallelism`` says otherwise)."""
    import re

    m = re.fullmatch(r"local\[(\d+|\*)(?:,\s*\d+)?\]", master.strip())
    if m is None:
        return 1 if master.strip() == "local" else max(1, default_parallelism)
    return max(1, cores() if m.group(1) == "*" else int(m.group(1)))


def spread(spark: SparkSession, rows: Sequence[Any], ddl: str, *, weights: Sequence[int] | None = None) -> TaskRows:
    """``rows`` (one per file, with a ``path`` column) spread over tasks (``TaskRows``: run in
    them by Spark's RDD API, or as a DataFrame).

    One task per row up to ``TASKS_PER_SLOT`` tasks per task slot (``task_slots``); beyond that
    rows are packed into that many tasks, heaviest first into the lightest task (by ``weights``,
    default the local file's size). Tasks are numbered heaviest first, so Spark starts the long
    ones first.
    """
    from pyspark.sql.types import StructType, _parse_datatype_string

    from pipelines.tableio.task_rows import TaskRows

    schema = _simple_struct(ddl) or _parse_datatype_string(ddl)
    assert isinstance(schema, StructType), ddl
    path_at = schema.names.index("path") if "path" in schema.names else 0
    n = max(1, min(len(rows), task_slots(spark) * TASKS_PER_SLOT))
    bins: list[list[Any]] = [[] for _ in range(n)]
    load = [0] * n
    ws = list(weights) if weights is not None else [_weight(r, path_at) for r in rows]
    for w, row in sorted(zip(ws, (tuple(r) for r in rows), strict=True), key=lambda x: -x[0]):
        j = min(range(n), key=load.__getitem__)
        bins[j].append(row)
        load[j] += w
    bins = [b for _, b in sorted(zip(load, bins, strict=True), key=lambda x: -x[0]) if b] or [[]]
    return TaskRows(spark, schema, bins)


def parquet_batches(
    path: str, columns: Sequence[str] | None = None, batch_size: int = BATCH_ROWS
) -> Iterator[pa.RecordBatch]:
    """The batches of one Parquet file (only ``columns`` that exist, when given), in file order."""
    import pyarrow.parquet as pq

    filesystem, inner = _filesystem(path)
    with filesystem.open_input_file(inner) as fh:
        pf = pq.ParquetFile(fh)
        cols = None if columns is None else [c for c in columns if c in pf.schema_arrow.names]
        yield from pf.iter_batches(batch_size=batch_size, columns=cols)
