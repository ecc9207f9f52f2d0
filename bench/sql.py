"""``offsetlake sql`` latency: DuckDB (no JVM) vs Spark, a fresh process per query.

Each query runs as ``offsetlake sql --engine E --format tsv QUERY`` in a new process (what a
user or a script pays: interpreter start, imports, planning, registering what the query reads,
the engine's start, the answer), timed with ``time.perf_counter`` around ``subprocess.run``;
``--repeat`` runs each (engine, query) that many times and reports the median and the fastest.
Both engines must print the same number of rows (a wrong answer is not a fast one).

The warehouse is the quickstart's (``offsetlake quickstart`` builds it under
``offsetlake-data/quickstart/``; ``--build`` runs it first when it is missing).

Usage:
    .venv/bin/python bench/sql.py [--conf offsetlake-data/quickstart/quickstart.yaml]
        [--engines duckdb,spark] [--repeat 3] [--build] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CONF = Path("offsetlake-data/quickstart/quickstart.yaml")
QUERIES = {
    "select_1": "SELECT 1",
    "count_group_state": "SELECT count(*) FROM group_state",
    "rebalances_daily": "SELECT * FROM rebalances_daily",
}


def offsetlake() -> list[str]:
    """The CLI next to this interpreter (the venv's), else ``python -m pipelines.cli``."""
    script = Path(sys.executable).parent / "offsetlake"
    return [str(script)] if script.exists() else [sys.executable, "-m", "pipelines.cli"]


def run_once(conf: Path, engine: str, sql: str) -> tuple[float, int]:
    """Seconds for one fresh ``offsetlake sql`` process, and the rows it printed."""
    env = dict(os.environ)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    cmd = [*offsetlake(), "sql", "--conf", str(conf), "--engine", engine, "--format", "tsv", sql]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return elapsed, len(proc.stdout.splitlines()) - 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conf", type=Path, default=DEFAULT_CONF)
    parser.add_argument("--engines", default="duckdb,spark")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--build", action="store_true", help="run offsetlake quickstart when the conf is missing")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    if not args.conf.exists():
        if not args.build:
            raise SystemExit(f"{args.conf} not found: run `offsetlake quickstart` first (or pass --build)")
        subprocess.run([*offsetlake(), "quickstart"], check=True, stdout=subprocess.DEVNULL)
    engines = args.engines.split(",")
    results: list[dict[str, object]] = []
    for name, sql in QUERIES.items():
        rows_by_engine: dict[str, int] = {}
        for engine in engines:
            times = []
            for _ in range(args.repeat):
                seconds, rows = run_once(args.conf, engine, sql)
                times.append(seconds)
                rows_by_engine[engine] = rows
            results.append(
                {
                    "query": name,
                    "sql": sql,
                    "engine": engine,
                    "rows": rows_by_engine[engine],
                    "median_s": round(statistics.median(times), 2),
                    "min_s": round(min(times), 2),
                    "runs": len(times),
                }
            )
            if not args.json:
                r = results[-1]
                print(
                    f"{name:<20} {engine:<7} median {r['median_s']:>6.2f} s  min {r['min_s']:>6.2f} s  "
                    f"rows {r['rows']}",
                    flush=True,
                )
        if len(set(rows_by_engine.values())) > 1:
            raise SystemExit(f"{name}: engines disagree on the row count: {rows_by_engine}")
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
