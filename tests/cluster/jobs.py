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


def _row_texts(folder: Path) -> Iterator[str]:
    """A table's rows, each as the ``repr`` of its sorted items (volatile columns left out;
    nested values compare too), read a batch at a time."""
    from pipelines.tableio import read_arrow_at

    table = read_arrow_at(str(folder))
    keep = [c for c in table.column_names if c not in VOLATILE]
    for batch in table.select(keep).to_batches(max_chunksize=50_000):
        for r in batch.to_pylist():
            yield repr(sorted(r.items()))


def tables(warehouse: Path) -> dict[str, list[str]]:
    """Every Delta table under ``warehouse``: its rows (``_row_texts``), sorted."""
    return {name: sorted(_row_texts(folder)) for name, folder in _table_dirs(warehouse).items()}


def _digests(folder: Path) -> list[bytes]:
    """A table's rows as 16-byte digests of their texts, sorted: a 10M-row table compares in
    ~0.6 GB, not as 10M strings."""
    return sorted(hashlib.blake2b(t.encode(), digest_size=16).digest() for t in _row_texts(folder))


def _sorted_flat(folder: Path) -> pa.Table | None:
    """A table without nested columns, sorted by all its columns (volatile ones left out): two
    such tables compare in Arrow; None for a table with nested columns."""
    import pyarrow as pa

    from pipelines.tableio import read_arrow_at

    table = read_arrow_at(str(folder))
    table = table.select(sorted(c for c in table.column_names if c not in VOLATILE))
    if any(pa.types.is_nested(f.type) for f in table.schema):
        return None
    return table.sort_by([(c, "ascending") for c in table.column_names]).combine_chunks()


def assert_same_tables(left: Path, right: Path, *, more_on_the_left: bool = False) -> dict[str, int]:
    """Table for table, the same rows (one table of each side in memory at a time, as row
    digests); the row counts. ``more_on_the_left``: ``left`` may hold tables ``right`` has not
    (another job's: ``dq_results``), the others must be equal."""
    a, b = _table_dirs(left), _table_dirs(right)
    if more_on_the_left:
        a = {n: d for n, d in a.items() if n in b}
    assert sorted(a) == sorted(b), f"table sets differ: {sorted(set(a) ^ set(b))}"
    counts = {}
    for name in a:
        flat = _sorted_flat(a[name]), _sorted_flat(b[name])
        if flat[0] is not None and flat[1] is not None and flat[0].equals(flat[1]):
            counts[name] = flat[0].num_rows
            continue
        mine, theirs = _digests(a[name]), _digests(b[name])
        assert len(mine) == len(theirs), f"{name}: {len(mine)} rows against {len(theirs)}"
        if mine != theirs:
            other = set(theirs)
            examples = [
                t for t in _row_texts(a[name]) if hashlib.blake2b(t.encode(), digest_size=16).digest() not in other
            ]
            raise AssertionError(f"{name} differs, e.g. {examples[:3]}")
        counts[name] = len(mine)
    return counts
