"""Shared fixtures. Spark tests are marked ``spark`` and share ONE session-scoped SparkSession."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VECTORS = REPO / "docs" / "spec" / "vectors"

# py4j logs at INFO from ``__del__`` during interpreter shutdown, after pytest closed the streams
# (Airflow's logging setup raises the level): keep it quiet so the run ends without a traceback.
logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def vectors_dir() -> Path:
    if not VECTORS.is_dir():
        pytest.fail(f"spec vectors not found at {VECTORS}")
    return VECTORS


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pipelines.runtime.spark_session import build_spark

    session = build_spark(
        "offsetlake-tests",
        master="local[2]",
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.driver.memory": "2g",
            "spark.sql.streaming.minBatchesToRetain": "10",
        },
        log_level="ERROR",
    )
    yield session
    session.stop()
