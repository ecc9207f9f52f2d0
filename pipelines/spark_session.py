"""The one SparkSession builder.

Rules:
- local[*] by default (the embedded path), UTC, small shuffle partitions locally, Arrow on,
  RocksDB state store (it must be chosen before a streaming checkpoint is first created).
- ``PYSPARK_PYTHON``/``PYSPARK_DRIVER_PYTHON`` are set to the running interpreter and
  ``SPARK_LOCAL_IP`` to 127.0.0.1 unless the caller already set them.
- A missing Java gives one clear ``JavaNotFoundError`` line, not a Py4J stack trace.
- Spark's own failure logs (a task's trace from the executor, the scheduler's "aborting job",
  a data-source write "is aborting") are switched off: the
  failure reaches the caller as an exception and the CLI prints it as one line. With
  ``--debug`` (``OFFSETLAKE_DEBUG=1``) they stay on.
- The driver JVM logs through ``pipelines/log4j2.properties`` (``-Dlog4j2.configurationFile``
  in ``spark.driver.extraJavaOptions``, before the user's own options): no start-up notices, no
  NativeCodeLoader warning, errors shown. It applies when this process starts the JVM; under
  ``spark-submit`` the submitter's logging stands. The JVM's own "WARNING: Using incubator
  modules" line (Spark's launcher always adds ``--add-modules=jdk.incubator.vector``) is printed
  by Java's module system, not by log4j, and stays.
- On a local master, Spark's Python workers fork from ``pipelines.spark_daemon``
  (``pyspark.worker`` imported once before the fork), and every Python process Spark starts
  runs through ``pipelines.worker_python``'s launcher (the installed pyspark's bytecode instead
  of Spark's zip) when ``PYSPARK_PYTHON`` is this interpreter.
- On a local master, the driver JVM maps Spark's classes from a class-data-sharing archive the
  first run leaves in the user's cache (``pipelines.jvm_archive``): ~1.5 s less per fresh process.
- ``quick_jit`` (the batch job and the quickstart, on a local master): the driver JVM compiles
  with C1 only (``QUICK_JIT``), before the user's own options (a later ``-XX:TieredStopAtLevel``
  of theirs wins). Those jobs' rows never cross the JVM, and C2's compiler threads took a core
  from the Python workers in a fresh process's first seconds. A stream keeps the full JIT.
- The embedded path (a local master) keeps Spark's SQL warehouse out of the working directory:
  ``spark.sql.warehouse.dir`` defaults to ``offsetlake-spark-warehouse-<uid>`` under the system
  temp directory (Spark's own default, ``./spark-warehouse``, littered wherever a command ran);
  a cluster's (spark-submit's) setting, or one in the config, is left alone.
- Delta's Spark classes are used only when their jars are on the classpath (``delta_available``);
  nothing here downloads jars.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pipelines.errors import JavaNotFoundError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
    "spark.sql.streaming.stateStore.providerClass": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "3g",
    "spark.sql.adaptive.enabled": "true",
    "spark.python.worker.reuse": "true",
    # Spark redacts matching option/conf values in plans, the UI and event logs (its default
    # misses JAAS configs and credentials)
    "spark.redaction.regex": "(?i)secret|password|passwd|token|access[.]?key|jaas|credential",
}


#: the driver JVM's log4j2 configuration (shipped in the package): Spark's defaults without the
#: start-up notices and Hadoop's NativeCodeLoader warning (errors still shown)
LOG4J2_CONF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")


def _java_binary() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = os.path.join(java_home, "bin", "java")
        if os.path.exists(candidate):
            return candidate
        on_path = shutil.which("java")
        if on_path is None:
            raise JavaNotFoundError(
                f"JAVA_HOME={java_home} has no bin/java and no 'java' is on PATH: fix or unset JAVA_HOME "
                "(Spark needs Java 17 or newer)"
            )
        # spark-class runs $JAVA_HOME/bin/java first: a stale JAVA_HOME would fail there (rc 1 and
        # its own lines) although a java is on PATH; Spark takes that one once JAVA_HOME is gone
        os.environ.pop("JAVA_HOME", None)
        sys.stderr.write(f"offsetlake: JAVA_HOME={java_home} has no bin/java; using {on_path} from PATH\n")
        return on_path
    return shutil.which("java")


def check_java() -> str:
    """Return the ``java -version`` banner, or raise ``JavaNotFoundError`` with one clear line."""
    java = _java_binary()
    if java is None:
        raise JavaNotFoundError(
            "Java was not found (no JAVA_HOME, no 'java' on PATH): Spark needs Java 17 or newer, "
            "e.g. 'apt-get install openjdk-17-jre-headless'"
        )
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JavaNotFoundError(f"Java at {java} could not be run: {exc}") from exc
    banner = (out.stderr or out.stdout).strip().splitlines()
    return banner[0] if banner else java


def prepare_environment() -> None:
    """Point Spark's Python workers at this interpreter and keep Spark on loopback."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")


def local_sql_warehouse() -> str:
    """Where a local session keeps Spark's SQL warehouse (module rules): never the working directory."""

    return os.path.join(tempfile.gettempdir(), f"offsetlake-spark-warehouse-{os.getuid()}")


#: the driver JVM's JIT for a short job (``quick_jit``): C1 only. Measured on the 10M batch
#: command, alternating with the full JIT (3 pairs): job 9.2-9.8 s against 10.1-10.6 s, the whole
#: process 11.5-12.3 s against 13.2-13.7 s (bench/RESULTS.md)
QUICK_JIT = "-XX:TieredStopAtLevel=1"


def build_spark(
    app_name: str = "offsetlake",
    master: str | None = None,
    conf: Mapping[str, Any] | None = None,
    *,
    log_level: str = "WARN",
    quick_jit: bool = False,
) -> SparkSession:
    """Create (or reuse) the SparkSession with the project's defaults.

    Args:
        app_name: Spark application name.
        master: Spark master URL; ``None`` keeps an existing master (spark-submit) or uses
            ``local[*]``.
        conf: extra Spark settings, applied over ``DEFAULT_CONF``.
        log_level: Spark's log level for the session.
        quick_jit: a short job on a local master: the driver JVM compiles with C1 only
            (module rules).
    """
    prepare_environment()
    banner = check_java()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    elif "spark.master" not in os.environ.get("SPARK_SUBMIT_OPTS", "") and not os.environ.get("SPARK_ENV_LOADED"):
        master = os.environ.get("OFFSETLAKE_SPARK_MASTER", "local[*]")
        builder = builder.master(master)
    local = master is not None and master.startswith("local")
    merged = dict(DEFAULT_CONF)
    if local:
        merged["spark.sql.warehouse.dir"] = local_sql_warehouse()
        merged["spark.python.daemon.module"] = "pipelines.spark_daemon"
        _use_worker_launcher()
    merged.update({k: str(v) for k, v in (conf or {}).items()})
    archive = _jvm_archive(banner, merged) if local else None
    # our log4j2 configuration first: a user's extraJavaOptions still apply (and may override it)
    merged["spark.driver.extraJavaOptions"] = " ".join(
        o
        for o in (
            f"-Dlog4j2.configurationFile={LOG4J2_CONF}",
            *(archive.options if archive else []),
            QUICK_JIT if quick_jit and local else None,
            merged.get("spark.driver.extraJavaOptions"),
        )
        if o
    )
    for key, value in merged.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if archive is not None:
        archive.started(spark)
    spark.sparkContext.setLogLevel(log_level)
    if not os.environ.get("OFFSETLAKE_DEBUG"):
        quiet_failure_logs(spark)
    return spark


def _use_worker_launcher() -> None:
    """Spark's Python processes start through ``pipelines.worker_python``'s launcher when
    ``PYSPARK_PYTHON`` names this interpreter (set by ``prepare_environment`` or the caller)."""
    from pyspark.find_spark_home import _find_spark_home

    from pipelines.worker_python import same_interpreter, worker_python

    python = same_interpreter(os.environ.get("PYSPARK_PYTHON") or sys.executable)
    if python is None:
        return
    launcher = worker_python(_find_spark_home(), python)
    if launcher is not None:
        os.environ["PYSPARK_PYTHON"] = launcher


def _jvm_archive(banner: str, conf: Mapping[str, str]) -> Any:
    """The class-data-sharing options when this process is about to start the JVM (module rules)."""
    from pyspark import SparkContext
    from pyspark.find_spark_home import _find_spark_home

    from pipelines.jvm_archive import JvmArchive

    java = _java_binary()
    if java is None or SparkContext._active_spark_context is not None:
        return None
    return JvmArchive(java, banner, _find_spark_home(), conf)


#: Loggers whose ERROR lines repeat a failure the driver re-raises (or a refusal it handles).
FAILURE_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.scheduler.DAGScheduler",
    "org.apache.spark.sql.execution.datasources.v2",
    "org.apache.spark.sql.execution.datasources.FileFormatWriter",
    "org.apache.spark.sql.execution.streaming",
    "org.apache.spark.api.python",
    "org.apache.spark.util.Utils",
)


def quiet_failure_logs(spark: SparkSession) -> None:
    """Switch off ``FAILURE_LOGGERS`` (log4j2) for this JVM."""
    try:
        jvm = spark.sparkContext._jvm
        level = jvm.org.apache.logging.log4j.Level.OFF  # type: ignore[union-attr]
        configurator = jvm.org.apache.logging.log4j.core.config.Configurator  # type: ignore[union-attr]
        for name in FAILURE_LOGGERS:
            configurator.setLevel(name, level)
    except Exception:  # a JVM without log4j2 core: keep Spark's defaults
        return


def delta_available(spark: SparkSession) -> bool:
    """True when Delta Lake's Spark classes are on the classpath (the cluster path)."""
    try:
        jvm = spark.sparkContext._jvm
        jvm.java.lang.Class.forName("io.delta.tables.DeltaTable")  # type: ignore[union-attr]
        return True
    except Exception:
        return False


def kafka_connector_available(spark: SparkSession) -> bool:
    """True when Spark's Kafka source (spark-sql-kafka) is on the classpath."""
    try:
        jvm = spark.sparkContext._jvm
        jvm.java.lang.Class.forName(  # type: ignore[union-attr]
            "org.apache.spark.sql.kafka010.KafkaSourceProvider"
        )
        return True
    except Exception:
        return False


def build_spark_from_config(cfg: Any, *, app_suffix: str | None = None, quick_jit: bool = False) -> SparkSession:
    """The SparkSession for a loaded ``pipelines.config.Config`` (``spark.*`` + ``stream.state_store``).

    ``spark.master: null`` keeps spark-submit's master or uses ``local[*]``; ``quick_jit``: see
    ``build_spark``.
    """
    extra: dict[str, Any] = {}
    if cfg.stream.state_store == "hdfs":
        extra["spark.sql.streaming.stateStore.providerClass"] = (
            "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
        )
    from pipelines.config import option_value

    extra.update({k: option_value(v) for k, v in cfg.spark.conf.items()})  # secrets revealed: never log
    name = cfg.spark.app_name + (f"-{app_suffix}" if app_suffix else "")
    return build_spark(name, master=cfg.spark.master, conf=extra, log_level=cfg.spark.log_level, quick_jit=quick_jit)
