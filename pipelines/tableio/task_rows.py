"""Rows the driver hands to Spark tasks, each task's rows chosen by the driver
(``pipelines.batch.file_tasks.spread``: file paths, replay buckets).

Rules:
- Task ``i`` holds ``bins[i]``; Spark starts tasks in their order (``spread`` puts the heaviest
  first).
- Two ways to run them, the same rows either way:
  - ``run(fn)``: Spark's RDD API. Each task hands its rows to ``fn`` as one Arrow batch (none
    when it has no rows) and the driver collects what ``fn`` yields. There is no SQL plan, so the
    driver JVM does no Catalyst analysis, code generation or Arrow exchange. A process's first
    job took 1.9-2.0 s as ``mapInArrow`` over ``frame()`` (1.7-1.9 s of the driver JVM's CPU,
    whole-stage codegen off) and 0.9-1.0 s as an RDD job (0.45-0.5 s): ``bench/first_job.py``.
    The rust engine's routed writes and the incremental replay run this way.
  - ``frame()``: the same rows as a DataFrame, for what needs one (Spark's Delta writers on a
    cluster: ``pipelines.tableio.routed``). Its rows are made by SQL expressions in the tasks
    from a JSON literal: no Python evaluator runs before the caller's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

T = TypeVar("T")


@dataclass(frozen=True)
class TaskRows:
    """``bins[i]``: task ``i``'s rows (tuples in ``schema``'s column order)."""

    spark: SparkSession
    schema: StructType
    bins: Sequence[Sequence[tuple[Any, ...]]]

    def run(self, fn: Callable[[Iterator[pa.RecordBatch]], Iterator[T]]) -> list[T]:
        """``fn`` over each task's rows (one Arrow batch, or none when it has no rows), in Spark
        tasks; what every call yielded, in task order."""
        from pyspark.sql.pandas.types import to_arrow_schema

        names = list(self.schema.names)
        arrow = to_arrow_schema(self.schema)

        def task(rows_of_task: Iterable[list[tuple[Any, ...]]]) -> Iterator[T]:
            import pyarrow as pa

            for rows in rows_of_task:  # one element: this task's rows
                batch = pa.RecordBatch.from_pylist([dict(zip(names, r, strict=True)) for r in rows], schema=arrow)
                yield from fn(iter([batch] if rows else []))

        bins = [list(b) for b in self.bins]
        sc = self.spark.sparkContext
        return sc.parallelize(bins, len(bins)).mapPartitions(task).collect()

    def frame(self) -> DataFrame:
        """The rows as a DataFrame whose partition ``i`` holds ``bins[i]``."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import ArrayType

        names = self.schema.names
        payload = [json.dumps([dict(zip(names, r, strict=True)) for r in b]) for b in self.bins]
        pick = F.element_at(F.array(*[F.lit(p) for p in payload]), (F.col("id") + 1).cast("int"))
        return (
            self.spark.range(0, len(self.bins), 1, len(self.bins))
            .select(F.explode(F.from_json(pick, ArrayType(self.schema))).alias("r"))
            .select(*[F.col(f"r.{name}").alias(name) for name in names])
        )
