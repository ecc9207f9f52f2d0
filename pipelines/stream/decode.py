"""The decode as Spark DataFrames, for the stream's queries: one ``mapInArrow`` pass of
``pipelines.records.decode.decode_batch`` (``decode_union``) and its split into the decoded tables
(``split_union``, the DataFrame twin of ``split_union_arrow``). Only the raw columns the decoder
needs enter ``mapInArrow`` (``INPUT_COLUMNS``: every input column is shipped to the Python
worker, read or not).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipelines.records.decode import (
    INPUT_COLUMNS,
    KIND_GROUP_METADATA,
    KIND_GROUP_RECORD,
    KIND_OFFSET_COMMIT,
    KIND_QUARANTINE,
    KIND_UNSUPPORTED,
    UNION_SCHEMA,
    decode_batches,
)
from schemas.decoded import GROUP_METADATA, GROUP_RECORDS, OFFSET_COMMITS, QUARANTINE, UNSUPPORTED_RECORDS

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class DecodeResult:
    """The five decoded DataFrames plus the union they are projected from."""

    offset_commits: DataFrame
    group_metadata: DataFrame
    unsupported: DataFrame
    quarantine: DataFrame
    union: DataFrame
    group_records: DataFrame

    def tables(self) -> dict[str, DataFrame]:
        """The decoded tables by their ``schemas.decoded`` name."""
        return {
            OFFSET_COMMITS.name: self.offset_commits,
            GROUP_METADATA.name: self.group_metadata,
            UNSUPPORTED_RECORDS.name: self.unsupported,
            QUARANTINE.name: self.quarantine,
            GROUP_RECORDS.name: self.group_records,
        }


def union_spark_schema() -> Any:
    """The Spark schema of the union output of the decode pass."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(UNION_SCHEMA)


def decode_union(raw_df: DataFrame, *, lenient: bool = False) -> DataFrame:
    """raw records (Spark's Kafka source schema) -> the union DataFrame (one mapInArrow pass)."""
    cols = [c for c in INPUT_COLUMNS if c in raw_df.columns]
    for needed in ("key", "value"):
        if needed not in cols:
            raise ValueError(f"raw records need a {needed!r} column; got {raw_df.columns}")

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return decode_batches(batches, lenient=lenient)

    return raw_df.select(*cols).mapInArrow(fn, union_spark_schema())


def split_union(union: DataFrame) -> DecodeResult:
    """Project the union DataFrame into the five decoded tables (``schemas.decoded``)."""
    from pyspark.sql import functions as F

    def project(kind: int, spec: Any, renames: dict[str, str]) -> DataFrame:
        sel = []
        for f in spec.spark_schema().fields:
            src = renames.get(f.name, f.name)
            sel.append(F.col(src).cast(f.dataType).alias(f.name))
        return union.where(F.col("kind") == kind).select(*sel)

    raw_names = {
        "key": "raw_key",
        "value": "raw_value",
        "topic": "raw_topic",
        "partition": "coordinator_partition",
        "offset": "log_offset",
        "timestamp": "log_timestamp",
    }
    return DecodeResult(
        offset_commits=project(KIND_OFFSET_COMMIT, OFFSET_COMMITS, {}),
        group_metadata=project(KIND_GROUP_METADATA, GROUP_METADATA, {}),
        unsupported=project(KIND_UNSUPPORTED, UNSUPPORTED_RECORDS, {**raw_names, "reason": "error_message"}),
        quarantine=project(KIND_QUARANTINE, QUARANTINE, raw_names),
        union=union,
        group_records=project(KIND_GROUP_RECORD, GROUP_RECORDS, raw_names),
    )
