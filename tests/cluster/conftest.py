"""Fixtures of the ``cluster`` tests: one Spark standalone cluster on 127.0.0.1 for the session
(master + 2 workers × 1 core), the executors' Python without offsetlake, the project shipped as a
zip, the JVM bundles (fetched by the project), and one small generated log.

Outside CI a missing Java or Maven is one skip line; with ``CI=true`` the tests fail instead.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pipelines.standalone import StandaloneCluster, executor_python, project_zip, skip_or_fail

#: the generated log every cluster test reads (~50k records: small, every record kind)
LOG_ARGS = ("--groups", "12", "--hours", "1", "--seed", "34", "--rows-per-file", "8000")


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
