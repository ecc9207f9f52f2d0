"""``conf/cluster.example.yaml`` works as written against a standalone cluster with only its
addresses changed (``paths.root``, ``kafka.bootstrap_servers``), submitted with the README's
command in its ``--jars`` form (the jars ``offsetlake doctor --fetch`` caches with Maven; Spark's
own Ivy resolution of ``--packages`` does not see Maven's settings and, on this project's machines,
fails on two of Delta's transitive artifacts): the batch job reads the live ``__consumer_offsets``
with Spark's Kafka source and writes Delta on Spark."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipelines.runtime import spark_jars
from tests.cluster.jobs import run, submit_command, tables
from tests.pipelines.standalone import REPO, StandaloneCluster

pytestmark = [pytest.mark.cluster, pytest.mark.broker, pytest.mark.slow]

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

    jars = [j for b in (spark_jars.DELTA_BUNDLE, spark_jars.KAFKA_BUNDLE) for j in spark_jars.bundle_jars(b) or []]
    cmd = submit_command(
        standalone.url,
        "pipelines/jobs/batch.py",
        ["--conf", str(conf_dir / "cluster.yaml")],
        executor_python=executor_env,
        shipped=shipped,
        jars=jars,
    )
    run(cmd, tmp_path / "submit.log")
    written = tables(root / "warehouse")
    assert len(written["offset_commits"]) == 3 * 5 * 3 and len(written["group_state"]) == 3
