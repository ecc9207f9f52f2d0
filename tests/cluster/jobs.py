"""What the cluster tests run and compare: ``spark-submit`` of the project's entry scripts (as the
README's "Submit to your own cluster" section writes it), the embedded ``local[*]`` runs, and the
tables of two warehouses read with delta-rs, table for table."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tests.pipelines.standalone import REPO, _tail, clean_env, spark_home

if TYPE_CHECKING:
    import pyarrow as pa

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


def _table_dirs(warehouse: Path) -> dict[str, Path]:
    return {p.name: p for p in sorted(warehouse.iterdir()) if (p / "_delta_log").is_dir() and p.name not in RUN_TABLES}


def _read(folder: Path) -> pa.Table:
    """A table's rows, volatile columns left out, columns in name order."""
    from pipelines.tableio import read_arrow_at

    table = read_arrow_at(str(folder))
    return table.select(sorted(c for c in table.column_names if c not in VOLATILE))


def _row_texts(table: pa.Table) -> Iterator[str]:
    """Each row as the ``repr`` of its sorted items (nested values compare too), a batch at a time."""
    for batch in table.to_batches(max_chunksize=50_000):
        for r in batch.to_pylist():
            yield repr(sorted(r.items()))


def tables(warehouse: Path) -> dict[str, list[str]]:
    """Every Delta table under ``warehouse``: its rows (``_row_texts``), sorted."""
    return {name: sorted(_row_texts(_read(folder))) for name, folder in _table_dirs(warehouse).items()}


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def _same_rows(mine: pa.Table, theirs: pa.Table) -> list[str] | None:
    """None when the two tables hold the same rows, else up to 3 rows of ``mine`` that ``theirs``
    lacks. Tables without nested columns are sorted by every column and compared in Arrow; the
    others as sorted 16-byte row digests (a 10M-row table in ~0.6 GB, not as 10M strings)."""
    import pyarrow as pa

    if mine.num_rows == theirs.num_rows and not any(pa.types.is_nested(f.type) for f in mine.schema):
        order = [(c, "ascending") for c in mine.column_names]
        if mine.schema.equals(theirs.schema) and mine.sort_by(order).equals(theirs.sort_by(order)):
            return None
    left, right = sorted(map(_digest, _row_texts(mine))), sorted(map(_digest, _row_texts(theirs)))
    if left == right:
        return None
    other = set(right)
    return [t for t in _row_texts(mine) if _digest(t) not in other][:3] or ["(rows of the other side only)"]


def assert_same_tables(left: Path, right: Path, *, more_on_the_left: bool = False) -> dict[str, int]:
    """Table for table, the same rows (one table of each side in memory at a time: ``_same_rows``);
    the row counts. ``more_on_the_left``: ``left`` may hold tables ``right`` has not (another
    job's: ``dq_results``), the others must be equal."""
    a, b = _table_dirs(left), _table_dirs(right)
    if more_on_the_left:
        a = {n: d for n, d in a.items() if n in b}
    assert sorted(a) == sorted(b), f"table sets differ: {sorted(set(a) ^ set(b))}"
    counts = {}
    for name in a:
        mine, theirs = _read(a[name]), _read(b[name])
        assert mine.num_rows == theirs.num_rows, f"{name}: {mine.num_rows} rows against {theirs.num_rows}"
        differs = _same_rows(mine, theirs)
        if differs is not None:
            raise AssertionError(f"{name} differs, e.g. {differs}")
        counts[name] = mine.num_rows
    return counts
