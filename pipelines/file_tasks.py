"""Spark jobs whose tasks read files themselves: spreading file lists, reading Parquet in batches.

Rules:
- Used where a table's snapshot (or a landing directory) IS a list of Parquet files: the driver
  lists the files, Spark spreads them over tasks (``spread``), and each task reads its files with
  pyarrow (``parquet_batches``) — no row is converted from the JVM. Where the file list is not
  the data (deletion vectors, object-store listings, other formats), callers use Spark's readers.
- Paths may be local paths or URIs that pyarrow's filesystems understand.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

BATCH_ROWS = 65_536


def spread(spark: SparkSession, rows: Sequence[Any], ddl: str) -> DataFrame:
    """``rows`` (one per file) as a DataFrame over up to twice the session's parallelism."""
    n = max(1, min(len(rows), spark.sparkContext.defaultParallelism * 2))
    return spark.createDataFrame(list(rows), ddl).repartition(n)


def parquet_batches(
    path: str, columns: Sequence[str] | None = None, batch_size: int = BATCH_ROWS
) -> Iterator[pa.RecordBatch]:
    """The batches of one Parquet file (only ``columns`` that exist, when given), in file order."""
    import pyarrow.parquet as pq

    from pipelines.delta_rs_sink import _filesystem

    filesystem, inner = _filesystem(path)
    with filesystem.open_input_file(inner) as fh:
        pf = pq.ParquetFile(fh)
        cols = None if columns is None else [c for c in columns if c in pf.schema_arrow.names]
        yield from pf.iter_batches(batch_size=batch_size, columns=cols)
