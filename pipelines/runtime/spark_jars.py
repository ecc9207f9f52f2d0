"""Which JVM bundles a config needs in Spark, and how they reach it (local jars or ``--packages``).

Rules:
- ``delta.engine: spark`` needs the ``delta-spark`` bundle, ``kafka.engine: jvm`` the
  ``spark-sql-kafka`` bundle (``needed``); the coordinates live in the bundles' poms only
  (``jvm_deps``).
- Spark gets only the jars it does not ship itself (``missing_from_spark``): a bundle's runtime
  closure repeats Hadoop's client, Scala's library, slf4j, lz4, snappy, parquet, jackson, ...;
  a jar whose artifact name is already in ``$SPARK_HOME/jars`` is left out (Spark's own copy
  wins, as it would under ``--packages`` on a cluster that ships them).
- The embedded path (this process starts the JVM): the jars are fetched on demand (one line on
  stderr when Maven runs) and handed to Spark as ``spark.jars`` (local files: Spark's file server
  ships them to a cluster's executors too). Under ``spark-submit`` the JVM is already running:
  the submitter's ``--jars``/``--packages`` stand (``submit_args`` prints them).
- A config that already names the bundle's artifact in ``spark.jars`` or ``spark.jars.packages``
  is left alone (a cluster that resolves from Maven keeps ``--packages``).
- ``delta.engine: spark`` also sets Delta's session extension and catalog unless the config
  sets them.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipelines.runtime import jvm_deps

DELTA_BUNDLE = "delta-spark"
KAFKA_BUNDLE = "spark-sql-kafka"
DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
_VERSIONED = re.compile(r"^(?P<artifact>.+?)-\d[^-]*(?:-[^-]*)*\.jar$")


def needed(cfg: Any) -> list[str]:
    """The bundles the config's engines need in Spark (module rules)."""
    out = []
    if cfg.delta.engine == "spark":
        out.append(DELTA_BUNDLE)
    if cfg.kafka.engine == "jvm":
        out.append(KAFKA_BUNDLE)
    return out


def artifact_name(jar: str | Path) -> str:
    """``hadoop-client-api-3.5.0.jar`` → ``hadoop-client-api``."""
    name = Path(jar).name
    m = _VERSIONED.match(name)
    return m.group("artifact") if m else name.removesuffix(".jar")


def spark_jars_dir() -> Path:
    """``$SPARK_HOME/jars`` of the installed pyspark."""
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home()) / "jars"


def missing_from_spark(jars: list[Path], spark_jars: Path | None = None) -> list[Path]:
    """The jars whose artifact Spark does not ship (module rules)."""
    folder = spark_jars if spark_jars is not None else spark_jars_dir()
    shipped = {artifact_name(p) for p in folder.glob("*.jar")}
    return [j for j in jars if artifact_name(j) not in shipped]


def bundle_jars(bundle: str, *, fetch: bool = True) -> list[Path] | None:
    """The bundle's jars Spark lacks; fetched with Maven first when ``fetch`` (one line on stderr).

    Raises:
        jvm_deps.JvmDepsUnavailable: not cached and Maven cannot fetch it (one line why).
    """
    have = jvm_deps.jars(bundle)
    if have is None:
        if not fetch:
            return None
        print(f"offsetlake: fetching the {bundle} jars with mvn (once, into {jvm_deps.cache_root()})", file=sys.stderr)
        have = jvm_deps.fetch(bundle)
    return missing_from_spark(have)


def _artifact(coordinate: str) -> str:
    return coordinate.split(":")[1]


def _already_named(bundle: str, conf: Mapping[str, Any]) -> bool:
    text = f"{conf.get('spark.jars', '')},{conf.get('spark.jars.packages', '')}"
    return all(_artifact(c) in text for c in jvm_deps.coordinates(bundle))


def session_conf(cfg: Any, conf: Mapping[str, Any], *, starts_jvm: bool) -> dict[str, str]:
    """Settings to add to ``conf`` for the config's engines (module rules); ``starts_jvm``: this
    process launches the driver JVM (not under ``spark-submit``)."""
    add: dict[str, str] = {}
    bundles = needed(cfg)
    if DELTA_BUNDLE in bundles:
        add.update({k: v for k, v in DELTA_CONF.items() if k not in conf})
    if not starts_jvm:
        return add
    jars = [str(j) for b in bundles if not _already_named(b, conf) for j in bundle_jars(b) or []]
    if jars:
        add["spark.jars"] = ",".join(p for p in (str(conf.get("spark.jars") or ""), *jars) if p)
    return add


def submit_args(bundles: list[str], *, packages: bool = False) -> list[str]:
    """``spark-submit`` arguments that put the bundles on the driver's and executors' classpath:
    ``--jars <local jars>`` (fetched first) or ``--packages <coordinates>``."""
    if not bundles:
        return []
    if packages:
        return ["--packages", ",".join(c for b in bundles for c in jvm_deps.coordinates(b))]
    return ["--jars", ",".join(str(j) for b in bundles for j in bundle_jars(b) or [])]


def starts_jvm() -> bool:
    """True when this process will launch the driver JVM itself (not under ``spark-submit``)."""
    from pyspark import SparkContext

    return SparkContext._active_spark_context is None and not os.environ.get("PYSPARK_GATEWAY_PORT")
