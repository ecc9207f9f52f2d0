"""The engines' JVM bundles reach Spark as only the jars it lacks, from the config alone; and
``offsetlake doctor`` reports what this machine can run (exit 0)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.config import config_from_dict
from pipelines.runtime import jvm_deps, spark_jars


def test_a_jars_artifact_name_drops_only_its_version() -> None:
    names = {
        "hadoop-client-api-3.5.0.jar": "hadoop-client-api",
        "spark-sql-kafka-0-10_2.13-4.2.0.jar": "spark-sql-kafka",
        "zstd-jni-1.5.7-7.jar": "zstd-jni",
        "jackson-datatype-jdk8-2.13.5.jar": "jackson-datatype-jdk8",
        "commons-pool2-2.13.1.jar": "commons-pool2",
        "delta-spark_2.13-4.4.0.jar": "delta-spark_2.13",
    }
    assert {k: spark_jars.artifact_name(k) for k in names} == names


def test_spark_gets_only_the_jars_it_does_not_ship(tmp_path: Path) -> None:
    shipped = tmp_path / "jars"
    shipped.mkdir()
    for name in ("hadoop-client-api-3.5.0.jar", "scala-library-2.13.18.jar", "lz4-java-1.11.0.jar"):
        (shipped / name).touch()
    bundle = [Path(n) for n in ("hadoop-client-api-3.5.0.jar", "scala-library-2.13.15.jar", "lz4-java-1.10.1.jar")]
    bundle += [Path("kafka-clients-3.9.2.jar"), Path("spark-sql-kafka-0-10_2.13-4.2.0.jar")]
    assert [p.name for p in spark_jars.missing_from_spark(bundle, shipped)] == [
        "kafka-clients-3.9.2.jar",
        "spark-sql-kafka-0-10_2.13-4.2.0.jar",
    ]


def test_the_config_alone_puts_the_engines_jars_in_spark_jars() -> None:
    if jvm_deps.jars(spark_jars.DELTA_BUNDLE) is None or jvm_deps.jars(spark_jars.KAFKA_BUNDLE) is None:
        pytest.skip("the delta-spark / spark-sql-kafka bundles are not cached here (offsetlake doctor --fetch)")
    cfg = config_from_dict({"delta": {"engine": "spark"}, "kafka": {"engine": "jvm"}})
    added = spark_jars.session_conf(cfg, {}, starts_jvm=True)
    jars = [Path(p).name for p in added["spark.jars"].split(",")]
    assert any(j.startswith("delta-spark_2.13-4.4") for j in jars)
    assert any(j.startswith("spark-sql-kafka-0-10_2.13-4.2.0") for j in jars)
    assert not any(j.startswith(("hadoop-client", "scala-library", "slf4j-api")) for j in jars)
    assert added["spark.sql.extensions"] == spark_jars.DELTA_CONF["spark.sql.extensions"]
    # under spark-submit the submitter's --jars/--packages stand; a config naming them is left alone
    assert "spark.jars" not in spark_jars.session_conf(cfg, {}, starts_jvm=False)
    packages = {
        "spark.jars.packages": ",".join(jvm_deps.coordinates("delta-spark") + jvm_deps.coordinates("spark-sql-kafka"))
    }
    assert "spark.jars" not in spark_jars.session_conf(cfg, packages, starts_jvm=True)
    assert spark_jars.session_conf(config_from_dict({}), {}, starts_jvm=True) == {}


def test_doctor_says_what_runs_here_and_exits_0() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pipelines", "doctor"], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for what in ("java", "mvn", "pyspark", "jars delta-spark", "jars spark-sql-kafka"):
        assert any(line[4:].startswith(what) for line in lines), what
    for engine in ("delta.engine: rust", "delta.engine: spark", "kafka.engine: jvm"):
        assert any(line.startswith(engine) and ("available" in line) for line in lines), engine
