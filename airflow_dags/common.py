"""Shared wiring for the offsetlake DAGs: read ``conf/``, build SparkSubmitOperator tasks.

Rules (no business logic in DAGs: ARCHITECTURE.md, "The layers"):
- The DAGs only schedule the project's spark-submit entry scripts (``pipelines/jobs/*.py``:
  batch, stream, dq, maintenance): the same code ``offsetlake run`` runs;
  every parameter comes from the config file named by ``$OFFSETLAKE_CONF`` (default
  ``conf/local.yaml``; a relative name is found as the CLI finds ``--conf``: in the working
  directory, else in the repository), loaded with ``pipelines.config`` (loading only).
- The jobs get ``--conf <that same file>`` (or ``airflow.conf_path`` when the overlay sets it;
  relative to the repository root) and ``--set paths.root=<absolute root>``: the Airflow
  worker's working directory must not decide where the tables are.
- Spark connection: ``airflow.spark_conn_id`` (default ``spark_default``); ``spark-submit`` is
  the one installed next to the interpreter running Airflow (the same environment), else the
  one on ``PATH``. ``PYSPARK_PYTHON`` is that interpreter, so on one machine the driver and
  executors import the same ``pipelines`` package; a cluster's executors get their own Python
  from the config's ``spark.conf`` (``spark.pyspark.python``) and the project from
  ``airflow.py_files`` (``--py-files``).
- The config's ``spark.conf`` is given to spark-submit (``--conf``: executor memory and Python
  must be known at submit), secrets left out (the job applies them itself). The engines' JVM
  bundles (``delta.engine: spark``, ``kafka.engine: jvm``) go as ``--jars`` when the project's
  cache holds them, else as ``--packages`` (``pipelines.runtime.spark_jars``); nothing is
  fetched while a DAG file is parsed.
- Retries come from ``airflow.retries`` (jobs are idempotent: a retried stage skips what was
  already committed), except data quality: a failed check is deterministic, so ``dq`` never
  retries and its failure fails the run. ``airflow.sla_minutes`` (Airflow 3 removed task SLAs)
  becomes each task's ``execution_timeout`` and the DAG's ``dagrun_timeout``: a hung job fails
  instead of blocking the next runs (``max_active_runs=1``). Airflow 3's ``DeadlineAlert`` is
  not used: in 3.3.2 a DAG with a deadline makes ``dag.test()`` crash when the run finishes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
CONF_ENV_VAR = "OFFSETLAKE_CONF"
DEFAULT_CONF = "conf/local.yaml"


@dataclass(frozen=True)
class DagSettings:
    """Everything the DAG files need, read from the config at parse time."""

    conf: Any  # pipelines.config.Config
    conf_file: str  # the file the DAGs were configured from
    job_conf: str  # absolute path passed to the jobs as --conf
    data_root: str  # absolute paths.root passed to the jobs
    spark_conn_id: str
    spark_binary: str
    python: str
    retries: int
    sla: timedelta
    batch_schedule: str
    stream_every: timedelta


@contextlib.contextmanager
def _cwd(path: Path) -> Iterator[None]:
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def _abs(path: str) -> str:
    p = Path(path)
    return str(p if p.is_absolute() else (REPO_ROOT / p).resolve())


def spark_submit_binary() -> str:
    """``spark-submit`` of this environment (next to ``sys.executable``), else from ``PATH``."""
    local = Path(sys.executable).parent / "spark-submit"
    if local.exists():
        return str(local)
    return shutil.which("spark-submit") or "spark-submit"


def load_settings() -> DagSettings:
    """Load ``$OFFSETLAKE_CONF`` (relative to the repo root) and the job config it points at."""
    from pipelines.config import find_conf_file, load_config

    # as the CLI finds --conf: relative to the working directory, else to the repository
    conf_file = str(find_conf_file(os.environ.get(CONF_ENV_VAR) or DEFAULT_CONF))
    with _cwd(REPO_ROOT):  # relative paths.* resolve against the repo, not the worker's CWD
        conf = load_config(conf_file)
        # the jobs run with the overlay the DAGs were configured from, unless it names another
        job_conf = _abs(conf.airflow.conf_path) if conf.airflow.conf_path else conf_file
        data_root = load_config(job_conf).paths.root if job_conf != conf_file else conf.paths.root
    a = conf.airflow
    return DagSettings(
        conf=conf,
        conf_file=conf_file,
        job_conf=job_conf,
        data_root=str(data_root),
        spark_conn_id=a.spark_conn_id,
        spark_binary=spark_submit_binary(),
        python=sys.executable,
        retries=a.retries,
        sla=timedelta(minutes=a.sla_minutes),
        batch_schedule=a.batch_schedule,
        stream_every=timedelta(minutes=a.stream_schedule_minutes),
    )


def default_args(settings: DagSettings) -> dict[str, Any]:
    return {
        "owner": "offsetlake",
        "retries": settings.retries,
        "retry_delay": timedelta(minutes=2),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(minutes=20),
        "execution_timeout": settings.sla,
        "depends_on_past": False,
    }


def job_args(settings: DagSettings, *extra: str) -> list[str]:
    """``--conf <job conf> --set paths.root=<abs root> <extra>`` for a job script."""
    return ["--conf", settings.job_conf, "--set", f"paths.root={settings.data_root}", *extra]


def spark_job(settings: DagSettings, task_id: str, script: str, args: Sequence[str] = (), **overrides: Any) -> Any:
    """A SparkSubmitOperator running the entry script ``script`` (relative to the repository,
    e.g. ``pipelines/jobs/batch.py``) with the job args."""
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    return SparkSubmitOperator(
        task_id=task_id,
        application=str(REPO_ROOT / script),
        application_args=job_args(settings, *args),
        conn_id=settings.spark_conn_id,
        spark_binary=settings.spark_binary,
        name=f"offsetlake-{task_id}",
        **submit_options(settings.conf),
        env_vars={
            "PYSPARK_PYTHON": settings.python,
            "PYSPARK_DRIVER_PYTHON": settings.python,
            "OFFSETLAKE_CONF": settings.job_conf,
        },
        verbose=False,
        **overrides,
    )


def submit_options(conf: Any) -> dict[str, Any]:
    """SparkSubmitOperator's ``conf``, ``py_files``, ``jars`` / ``packages`` from the config
    (module rules)."""
    from pipelines.config import Secret
    from pipelines.runtime import jvm_deps, spark_jars

    out: dict[str, Any] = {}
    plain = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in conf.spark.conf.items()}
    plain = {k: v for k, v in plain.items() if not isinstance(conf.spark.conf[k], Secret)}
    if plain:
        out["conf"] = plain
    if conf.airflow.py_files:
        out["py_files"] = _abs(conf.airflow.py_files)
    jars, packages = [], []
    for bundle in spark_jars.needed(conf):
        cached = jvm_deps.jars(bundle)
        if cached is not None:
            jars += [str(j) for j in spark_jars.missing_from_spark(cached)]
        else:
            packages += jvm_deps.coordinates(bundle)
    if jars:
        out["jars"] = ",".join(jars)
    if packages:
        out["packages"] = ",".join(packages)
    return out
