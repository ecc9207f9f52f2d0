"""``conf/cluster.example.yaml`` works as written against a standalone cluster with only its
addresses changed (``paths.root``, ``kafka.bootstrap_servers``), submitted with the README's
command (``--packages``: Spark resolves Delta and its Kafka source from Maven itself): the batch
job reads the live ``__consumer_offsets`` with Spark's Kafka source and writes Delta on Spark."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipelines.runtime import jvm_deps, spark_jars
from tests.cluster.jobs import run, submit_command, tables
from tests.pipelines.standalone import REPO, StandaloneCluster

pytestmark = [pytest.mark.unproven, pytest.mark.cluster, pytest.mark.broker, pytest.mark.slow]

ROOT = "s3a://my-bucket/offsetlake"
BROKERS = "broker-1:9092,broker-2:9092,broker-3:9092"


def test_the_example_overlay_runs_as_written(
    standalone: StandaloneCluster, executor_env: Path, shipped: Path, live_offsets: str, tmp_path: Path
) -> None:
    text = (REPO / "conf" / "cluster.example.yaml").read_text()
    assert text.count(ROOT) == 1 and text.count(BROKERS) == 1
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    shutil.copy(REPO / "conf" / "base.yaml", conf_dir / "base.yaml")
    root = tmp_path / "data"
    (conf_dir / "cluster.yaml").write_text(text.replace(ROOT, str(root)).replace(BROKERS, live_offsets))

    packages = [c for b in (spark_jars.DELTA_BUNDLE, spark_jars.KAFKA_BUNDLE) for c in jvm_deps.coordinates(b)]
    cmd = submit_command(
        standalone.url,
        "pipelines/jobs/batch.py",
        ["--conf", str(conf_dir / "cluster.yaml")],
        executor_python=executor_env,
        shipped=shipped,
        packages=packages,
    )
    run(cmd, tmp_path / "submit.log")
    written = tables(root / "warehouse")
    assert len(written["offset_commits"]) == 3 * 5 * 3 and len(written["group_state"]) == 3
