"""spark-submit'd by ``test_standalone_jobs``: each task reports which Python ran it, where
``pipelines`` was imported from, and which executor it was, as one JSON line on stdout."""

from __future__ import annotations

import json
import sys


def _where(_rows: object) -> object:
    import os

    import pipelines

    yield (sys.executable, pipelines.__file__, os.environ.get("SPARK_EXECUTOR_ID", os.getcwd()))


def main() -> None:
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    seen = spark.sparkContext.parallelize(range(8), 8).mapPartitions(_where).distinct().collect()
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1  # less the driver
    print(json.dumps({"tasks": sorted(seen), "executors": executors}))
    spark.stop()


if __name__ == "__main__":
    main()
