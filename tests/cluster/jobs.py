"""What the cluster tests run and compare: ``spark-submit`` of the project's entry scripts (as the
README's "Submit to your own cluster" section writes it), the embedded ``local[*]`` runs, and the
tables of two warehouses read with delta-rs, table for table."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tests.pipelines.standalone import REPO, _tail, clean_env, spark_home

#: what differs between two runs over the same log, left out of the comparison: the run, and the
#: moment a live sample of the cluster was taken (partition_end_offsets.sampled_at: the clock's)
VOLATILE = {"run_id", "sampled_at"}
#: tables about the run, not the log: one row per micro-batch (two sources split the same records
#: into different micro-batches)
RUN_TABLES = {"stream_progress"}


def submit_command(
    master: str,
    script: str,
    args: Sequence[str],
    *,
    executor_python: Path,
    shipped: Path,
    jars: Sequence[Path] = (),
    packages: Sequence[str] = (),
    conf: dict[str, str] | None = None,
) -> list[str]:
    """``spark-submit`` of ``script`` (e.g. ``pipelines/jobs/batch.py``) to ``master``: the project as
    one zip (``--py-files``), the executors' own Python, the JVM bundles as local jars or packages."""
    settings = {
        "spark.pyspark.python": str(executor_python),
        "spark.pyspark.driver.python": sys.executable,
        "spark.executor.cores": "1",
        "spark.executor.memory": "768m",
        "spark.cores.max": "2",
        **(conf or {}),
    }
    cmd = [str(spark_home() / "bin" / "spark-submit"), "--master", master, "--py-files", str(shipped)]
    for key, value in settings.items():
        cmd += ["--conf", f"{key}={value}"]
    if jars:
        cmd += ["--jars", ",".join(str(j) for j in jars)]
    if packages:
        cmd += ["--packages", ",".join(packages)]
    return [*cmd, str(REPO / script), *args]


def run(cmd: Sequence[str], log: Path, *, timeout_s: float = 1200, cwd: Path | None = None) -> float:
    """Run ``cmd`` (output to ``log``); its wall time, or an AssertionError with the log's tail."""
    started = time.monotonic()
    env = clean_env()
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    with log.open("wb") as fh:
        done = subprocess.run(
            cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=cwd or log.parent, timeout=timeout_s
        )
    assert done.returncode == 0, f"{Path(cmd[0]).name} exited {done.returncode}: {_tail(log, 25)}"
    return time.monotonic() - started


def job_args(conf: Path | str, root: Path, *extra: str) -> list[str]:
    return ["--conf", str(conf), "--set", f"paths.root={root}", *extra]


def tables(warehouse: Path) -> dict[str, list[str]]:
    """Every Delta table under ``warehouse``: its rows (volatile columns left out, each row's
    ``repr``: nested values compare too), sorted."""
    from pipelines.tableio import read_arrow_at

    out = {}
    for folder in sorted(p for p in warehouse.iterdir() if (p / "_delta_log").is_dir() and p.name not in RUN_TABLES):
        table = read_arrow_at(str(folder))
        keep = [c for c in table.column_names if c not in VOLATILE]
        rows = table.select(keep).to_pylist()
        out[folder.name] = sorted(repr(sorted(r.items())) for r in rows)
    return out


def assert_same_tables(left: Path, right: Path, *, more_on_the_left: bool = False) -> dict[str, int]:
    """Table for table, the same rows; the row counts. ``more_on_the_left``: ``left`` may hold
    tables ``right`` has not (another job's: ``dq_results``), the others must be equal."""
    a, b = tables(left), tables(right)
    if more_on_the_left:
        a = {n: rows for n, rows in a.items() if n in b}
    assert sorted(a) == sorted(b), f"table sets differ: {sorted(set(a) ^ set(b))}"
    for name in a:
        assert len(a[name]) == len(b[name]), f"{name}: {len(a[name])} rows against {len(b[name])}"
        if a[name] != b[name]:
            theirs = set(b[name])
            raise AssertionError(f"{name} differs, e.g. {[r for r in a[name] if r not in theirs][:3]}")
    return {n: len(r) for n, r in a.items()}
