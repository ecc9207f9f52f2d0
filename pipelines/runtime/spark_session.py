"""The one SparkSession builder.

Rules:
- local[*] by default (the embedded path), UTC, small shuffle partitions locally, Arrow on,
  RocksDB state store (it must be chosen before a streaming checkpoint is first created).
- On a local master ``PYSPARK_PYTHON``/``PYSPARK_DRIVER_PYTHON`` are set to the running
  interpreter and ``SPARK_LOCAL_IP`` to 127.0.0.1 unless the caller already set them; on a
  cluster (a ``spark://``/``yarn``/``k8s://`` master, or spark-submit's) they are left to the
  cluster (``spark.pyspark.python``), and so are the launcher, daemon and archive below.
- A missing Java gives one clear ``JavaNotFoundError`` line, not a Py4J stack trace.
- Spark's own failure logs (a task's trace from the executor, the scheduler's "aborting job",
  a data-source write "is aborting", py4j's trace of a failed ``foreachBatch``) are switched
  off: the failure reaches the caller as an exception and the CLI prints it as one line. With
  ``--debug`` (``OFFSETLAKE_DEBUG=1``) they stay on.
- The driver JVM logs through ``pipelines/runtime/log4j2.properties`` (``-Dlog4j2.configurationFile``
  in ``spark.driver.extraJavaOptions``, before the user's own options): no start-up notices, no
  NativeCodeLoader warning, errors shown. It applies when this process starts the JVM; under
  ``spark-submit`` the submitter's logging stands. The JVM's own "WARNING: Using incubator
  modules" line (Spark's launcher always adds ``--add-modules=jdk.incubator.vector``) is printed
  by Java's module system, not by log4j, and stays.
- On a local master, Spark's Python workers fork from ``pipelines.runtime.spark_daemon``
  (``pyspark.worker`` imported once before the fork), and every Python process Spark starts
  runs through ``pipelines.runtime.worker_python``'s launcher (the installed pyspark's bytecode instead
  of Spark's zip) when ``PYSPARK_PYTHON`` is this interpreter.
- On a local master, the driver JVM maps Spark's classes from a class-data-sharing archive the
  first run leaves in the user's cache (``pipelines.runtime.jvm_archive``): ~1.5 s less per fresh process.
- ``quick_jit`` (the batch job and the quickstart, on a local master): the driver JVM compiles
  with C1 only (``QUICK_JIT``), before the user's own options (a later ``-XX:TieredStopAtLevel``
  of theirs wins). Those jobs' rows never cross the JVM, and C2's compiler threads took a core
  from the Python workers in a fresh process's first seconds. A stream keeps the full JIT.
- The embedded path (a local master) keeps Spark's SQL warehouse out of the working directory:
  ``spark.sql.warehouse.dir`` defaults to ``offsetlake-spark-warehouse-<uid>`` under the system
  temp directory (Spark's own default, ``./spark-warehouse``, littered wherever a command ran);
  a cluster's (spark-submit's) setting, or one in the config, is left alone.
- Secret settings never reach a command line: when this process starts the JVM, every setting
  whose key holds a secret (``config_validation.is_secret_key``: ``spark.hadoop.fs.s3a.secret.key``,
  Azure account keys, SAS tokens, ...) goes to spark-submit in a properties file of mode 0600
  (``--properties-file``, with ``--load-spark-defaults`` so ``spark-defaults.conf`` still
  applies), deleted as soon as the JVM has read it; PySpark passes every other setting as
  ``--conf key=value``, which ``ps`` and ``/proc/<pid>/cmdline`` show to every user.
- Delta's Spark classes are used only when their jars are on the classpath (``delta_available``).
  ``build_spark_from_config`` puts them there on the embedded path: ``delta.engine: spark`` and
  ``kafka.engine: jvm`` add their bundles' jars (fetched on demand) to ``spark.jars``
  (``pipelines.runtime.spark_jars``); under ``spark-submit`` the submitter's ``--jars`` or
  ``--packages`` stand.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines.config import option_value
from pipelines.config.validation import is_secret_key
from pipelines.errors import JavaNotFoundError, UsageError
from pipelines.runtime import jvm_deps, spark_jars
from pipelines.runtime.jvm_archive import JvmArchive
from pipelines.runtime.worker_python import same_interpreter, worker_python

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Spark's ``spark.redaction.regex``: matched against each setting's key and value
REDACTION_REGEX = (
    "(?i)secret|password|passwd|token|jaas|credential|access[._-]?key|account[._-]?key|private[._-]?key"
    "|api[._-]?key|[._-]sas[._-]|sig=|connection[._-]?string|authorization|[.]key$"
)

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
    # misses JAAS configs, credentials, Azure account keys and SAS tokens): every key
    # ``config_validation.is_secret_key`` holds a secret, and a SAS token's ``sig=`` in a value
    "spark.redaction.regex": REDACTION_REGEX,
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


def prepare_environment(local: bool = True) -> None:
    """On a local master: point Spark's Python workers at this interpreter and keep Spark on
    loopback. A cluster's executors run their own Python (``spark.pyspark.python``, the
    cluster's ``PYSPARK_PYTHON``, else ``python3``): the driver's interpreter path and a loopback
    driver would be wrong there."""
    if local:
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
    submitted = "spark.master" in os.environ.get("SPARK_SUBMIT_OPTS", "") or os.environ.get("SPARK_ENV_LOADED")
    if master is None and not submitted:
        master = os.environ.get("OFFSETLAKE_SPARK_MASTER", "local[*]")
    local = master is not None and master.startswith("local")
    prepare_environment(local or (master is None and _submitted_master().startswith("local")))
    banner = check_java()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    merged = dict(DEFAULT_CONF)
    if local:
        merged["spark.sql.warehouse.dir"] = local_sql_warehouse()
        merged["spark.python.daemon.module"] = "pipelines.runtime.spark_daemon"
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
    with _secrets_in_a_file(merged) as in_file:
        for key, value in merged.items():
            if key not in in_file:
                builder = builder.config(key, value)
        spark = builder.getOrCreate()
    if archive is not None:
        archive.started(spark)
    _py_files_for_streaming_sources(spark)
    spark.sparkContext.setLogLevel(log_level)
    if not os.environ.get("OFFSETLAKE_DEBUG"):
        quiet_failure_logs(spark)
    return spark


#: where Spark 4.2's Python streaming source runner (on the driver) looks for ``--py-files``:
#: ``PythonStreamingSourceRunner`` sends ``<SparkFiles root>/streaming_job`` as its files
#: directory, while spark-submit puts them in the root
STREAMING_SOURCE_FILES = "streaming_job"


def _py_files_for_streaming_sources(spark: SparkSession) -> None:
    """The project shipped as ``--py-files`` (a cluster whose Python lacks it) linked where the
    driver's Python streaming source runner looks for it (``STREAMING_SOURCE_FILES``): without
    it the stream's sources (``offsetlake_landing``, ``offsetlake_kafka``) fail to unpickle
    (``No module named 'pipelines'``). The executors' tasks find them in the root as always."""
    from pyspark import SparkFiles

    includes = list(getattr(spark.sparkContext, "_python_includes", None) or [])
    if not includes:
        return
    root = Path(SparkFiles.getRootDirectory())
    target = root / STREAMING_SOURCE_FILES
    target.mkdir(exist_ok=True)
    for name in includes:
        if (root / name).exists() and not (target / name).exists():
            (target / name).symlink_to(root / name)


@contextlib.contextmanager
def _secrets_in_a_file(conf: Mapping[str, str]) -> Iterator[set[str]]:
    """The secret settings of ``conf`` in a 0600 properties file spark-submit reads, when this
    process is about to start the JVM (module rules); yields the keys it holds."""
    from pyspark import SparkContext

    # spark-submit keeps ``spark.*`` keys only, from a properties file as from ``--conf``
    secrets = {k: v for k, v in conf.items() if k.startswith("spark.") and is_secret_key(k)}
    if not secrets or SparkContext._active_spark_context is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        yield set()
        return
    fd, path = tempfile.mkstemp(prefix="offsetlake-spark-", suffix=".properties")  # mode 0600
    before = os.environ.get("PYSPARK_SUBMIT_ARGS")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write("".join(f"{_escape(k, key=True)}={_escape(v)}\n" for k, v in secrets.items()))
        args = f"--properties-file {shlex.quote(path)} --load-spark-defaults"
        os.environ["PYSPARK_SUBMIT_ARGS"] = f"{args} {before or 'pyspark-shell'}"
        yield set(secrets)
    finally:
        if before is None:
            os.environ.pop("PYSPARK_SUBMIT_ARGS", None)
        else:
            os.environ["PYSPARK_SUBMIT_ARGS"] = before
        with contextlib.suppress(OSError):
            os.unlink(path)


def _escape(text: str, *, key: bool = False) -> str:
    """``text`` for a Java properties file (``java.util.Properties.load``)."""
    out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    if key:
        for ch in "=: #!":
            out = out.replace(ch, "\\" + ch)
    elif out.startswith((" ", "\f")):
        out = "\\" + out
    return out


def _submitted_master() -> str:
    """The master spark-submit was given ("" when this process is not under spark-submit)."""
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        return ""
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()
    return SparkConf().get("spark.master", "") or ""


def _use_worker_launcher() -> None:
    """Spark's Python processes start through ``pipelines.runtime.worker_python``'s launcher when
    ``PYSPARK_PYTHON`` names this interpreter (set by ``prepare_environment`` or the caller)."""
    from pyspark.find_spark_home import _find_spark_home

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
    # a task cancelled mid-fetch when its stage failed ("Error occurred while fetching local
    # blocks, null"); a real fetch failure fails the task with it (retried, or re-raised)
    "org.apache.spark.storage.ShuffleBlockFetcherIterator",
)


#: py4j's ERROR (with the trace) when a Python function the JVM calls raised (a ``foreachBatch``
#: writer, or a task's failure while it collects the micro-batch): the JVM gets the same trace and
#: fails the query with it, which the driver re-raises.
PROXY_FAILURE = "There was an exception while executing the Python Proxy"


def _not_a_proxy_failure(record: Any) -> bool:
    return not str(record.msg).startswith(PROXY_FAILURE)


def quiet_failure_logs(spark: SparkSession) -> None:
    """Switch off ``FAILURE_LOGGERS`` (log4j2) for this JVM, and py4j's ``PROXY_FAILURE`` log."""
    import logging

    py4j = logging.getLogger("py4j.clientserver")
    if _not_a_proxy_failure not in py4j.filters:
        py4j.addFilter(_not_a_proxy_failure)
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
    return _class_loads(spark, "io.delta.tables.DeltaTable")


def kafka_connector_available(spark: SparkSession) -> bool:
    """True when Spark's Kafka source (spark-sql-kafka) is on the classpath."""
    return _class_loads(spark, "org.apache.spark.sql.kafka010.KafkaSourceProvider")


def _class_loads(spark: SparkSession, name: str) -> bool:
    """True when the driver's context class loader finds ``name``: jars given as ``spark.jars``
    (``--jars``) live in that loader, not in the one ``Class.forName`` asks from py4j."""
    try:
        jvm = spark.sparkContext._jvm
        jvm.java.lang.Thread.currentThread().getContextClassLoader().loadClass(name)  # type: ignore[union-attr]
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

    extra.update({k: option_value(v) for k, v in cfg.spark.conf.items()})  # secrets revealed: never log
    extra.update(_engine_jars(cfg, extra))
    name = cfg.spark.app_name + (f"-{app_suffix}" if app_suffix else "")
    return build_spark(name, master=cfg.spark.master, conf=extra, log_level=cfg.spark.log_level, quick_jit=quick_jit)


def _engine_jars(cfg: Any, conf: Mapping[str, Any]) -> dict[str, str]:
    """The config's engines' jars and Delta's session settings (module rules); a bundle Maven
    cannot fetch is one line (exit 2), as a missing Java is."""

    try:
        return spark_jars.session_conf(cfg, conf, starts_jvm=spark_jars.starts_jvm())
    except jvm_deps.JvmDepsUnavailable as exc:
        raise UsageError(
            f"{exc} (delta.engine: spark / kafka.engine: jvm need them; or give spark.jars.packages, "
            "or use the rust / python engines)"
        ) from exc


@contextlib.contextmanager
def session_conf(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """``settings`` set on the session for the block, then as they were (unset where they were unset)."""
    before: dict[str, str | None] = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)
