"""Fixtures of the ``cluster`` tests: one Spark standalone cluster on 127.0.0.1 for the session
(master + 2 workers × 1 core), the executors' Python without offsetlake, the project shipped as a
zip, the JVM bundles (fetched by the project), and one small generated log.

Outside CI a missing Java or Maven is one skip line; in CI (``tests.ci.in_ci``) the tests fail instead.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pipelines.standalone import StandaloneCluster, executor_python, project_zip, skip_or_fail

#: the generated log every cluster test reads (~40k records in several files: small, every record kind)
LOG_ARGS = ("--groups", "6", "--hours", "0.5", "--seed", "34", "--rows-per-file", "8000")


@pytest.fixture(scope="session")
def jvm_bundles() -> dict[str, list[Path]]:
    """The two Spark bundles' jars (only those Spark lacks), fetched by the project."""
    from pipelines.runtime import jvm_deps, spark_jars

    if shutil.which("java") is None:
        skip_or_fail("no java on PATH: the cluster tests need Java 17")
    try:
        return {b: spark_jars.bundle_jars(b) or [] for b in (spark_jars.DELTA_BUNDLE, spark_jars.KAFKA_BUNDLE)}
    except jvm_deps.JvmDepsUnavailable as exc:
        skip_or_fail(str(exc))


@pytest.fixture(scope="session")
def executor_env() -> Path:
    return executor_python()


@pytest.fixture(scope="session")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return project_zip(tmp_path_factory.mktemp("ship") / "offsetlake.zip")


@pytest.fixture(scope="session")
def standalone(tmp_path_factory: pytest.TempPathFactory, jvm_bundles: object) -> Iterator[StandaloneCluster]:
    cluster = StandaloneCluster(tmp_path_factory.mktemp("standalone"), workers=2, cores=1, memory="1200m")
    try:
        cluster.start()
    except RuntimeError as exc:
        pytest.fail(f"the standalone cluster did not start: {exc}")
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def small_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated landing (raw-record Parquet files)."""
    out = tmp_path_factory.mktemp("log") / "landing"
    subprocess.run(
        [sys.executable, "-m", "pipelines", "generate", *LOG_ARGS, "--out", str(out), "--quiet"],
        check=True,
        timeout=600,
    )
    return out


@pytest.fixture(scope="session")
def tiny_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A smaller generated landing for the Delta-on-Spark runs (each Spark Delta commit is a job)."""
    out = tmp_path_factory.mktemp("tiny") / "landing"
    args = ("--groups", "3", "--hours", "0.25", "--seed", "35", "--rows-per-file", "1500")
    subprocess.run(
        [sys.executable, "-m", "pipelines", "generate", *args, "--out", str(out), "--quiet"], check=True, timeout=600
    )
    return out


@pytest.fixture(scope="session")
def live_offsets(tmp_path_factory: pytest.TempPathFactory, jvm_bundles: object) -> Iterator[str]:
    """A Kafka 3.9 broker whose ``__consumer_offsets`` (Kafka's default 50 partitions) holds a few
    groups' joins and commits; its cleaner and offset expiry are off, so the log stays as written."""
    from pipelines.kafka.local_broker import BrokerFailed, LocalBroker
    from pipelines.runtime import jvm_deps

    try:
        jvm_deps.fetch("kafka-3.9")
    except jvm_deps.JvmDepsUnavailable as exc:
        skip_or_fail(str(exc))
    broker = LocalBroker(
        "kafka-3.9",
        tmp_path_factory.mktemp("kafka"),
        {
            "log.cleaner.enable": "false",
            "offsets.retention.minutes": "10080",
            "log.roll.ms": "3600000",
            "offsets.topic.num.partitions": "50",
        },
        start_timeout_s=240,
    )
    try:
        broker.start()
    except BrokerFailed as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        _group_activity(broker.bootstrap)
        yield broker.bootstrap
    finally:
        broker.stop()


def _group_activity(bootstrap: str) -> None:
    """Three groups join (subscribe, get an assignment), commit five times each, and leave."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic("orders", 3, 1)]).values():
        fut.result(timeout=60)
    for g in range(3):
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"app-{g}",
                "enable.auto.commit": False,
                "session.timeout.ms": 6000,
            }
        )
        try:
            consumer.subscribe(["orders"])
            for _ in range(120):
                consumer.poll(0.5)
                if consumer.assignment():
                    break
            assert consumer.assignment(), f"app-{g} got no assignment"
            for step in range(1, 6):
                offsets = [TopicPartition("orders", p, step * 10 + p + g) for p in range(3)]
                consumer.commit(offsets=offsets, asynchronous=False)
        finally:
            consumer.close()
