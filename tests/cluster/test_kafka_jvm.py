"""Spark's own Kafka source (``kafka.engine: jvm``, the spark-sql-kafka jars fetched by the
project and put in ``spark.jars`` by the config alone) on a live ``__consumer_offsets`` of a real
Kafka broker on 127.0.0.1: the streaming job's tables equal the jar-free source's
(``kafka.engine: python``), and the decoded and current-state tables equal the batch job's.

The broker is the cluster tests' own (``live_offsets``: its cleaner and offset expiry off): the
log every run reads is the same log, so the engines are compared on the same records.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.cluster.jobs import assert_same_tables, job_args, run, tables

pytestmark = [pytest.mark.cluster, pytest.mark.broker, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CONF = "conf/local.yaml"
#: decoded and current-state tables: the same whichever wing wrote them
SHARED_WITH_BATCH = ("offset_commits", "group_metadata", "group_state", "offsets_current")


def _settings(bootstrap: str, engine: str) -> list[str]:
    return [
        "--set",
        "input.source=kafka",
        "--set",
        f"kafka.bootstrap_servers={bootstrap}",
        "--set",
        f"kafka.engine={engine}",
    ]


def test_sparks_kafka_source_reads_the_live_log_as_the_jar_free_source(live_offsets: str, tmp_path: Path) -> None:
    stream = str(REPO / "pipelines/jobs/stream.py")
    roots = {}
    for engine in ("jvm", "python"):
        root = tmp_path / engine
        log = tmp_path / f"stream-{engine}.log"
        run([sys.executable, stream, *job_args(CONF, root, *_settings(live_offsets, engine), "--available-now")], log)
        roots[engine] = root / "warehouse"
    counts = assert_same_tables(roots["jvm"], roots["python"])
    assert counts["offset_commits"] == 3 * 5 * 3 and counts["group_state"] == 3

    batch = tmp_path / "batch"
    run(
        [
            sys.executable,
            str(REPO / "pipelines/jobs/batch.py"),
            *job_args(CONF, batch, *_settings(live_offsets, "jvm")),
        ],
        tmp_path / "batch.log",
    )
    streamed, batched = tables(roots["jvm"]), tables(batch / "warehouse")
    for name in SHARED_WITH_BATCH:
        assert streamed[name] == batched[name], f"{name}: the stream's rows differ from the batch job's"
