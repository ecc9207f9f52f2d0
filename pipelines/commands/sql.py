"""``offsetlake sql "SELECT ..."``: Spark SQL over the warehouse's Delta tables.

Rules:
- Every Delta table under ``paths.warehouse`` is registered as a temporary view named after the
  table (``group_state``, ``offsets_current``, ...), read through ``pipelines.tableio`` so both
  Delta engines give the current snapshot.
- Output: a table (default), ``--format csv`` or ``--format json`` (one object per line);
  ``--limit`` caps the rows shown (the query itself is not changed).
- A bad query is a ``UsageError`` carrying Spark's first message line (exit code 2).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from pipelines.errors import UsageError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pipelines.config import Config


def register(subparsers: Any) -> None:
    from pipelines.config import add_conf_arguments

    p = subparsers.add_parser(
        "sql",
        help="run Spark SQL over the Delta tables (each registered as a view by name)",
        description=(
            "Run a Spark SQL query over the warehouse: every Delta table is a view named after the table.\n"
            "examples:\n"
            "  offsetlake sql \"SELECT state, count(*) FROM group_state GROUP BY state\"\n"
            "  offsetlake sql --format csv \"SELECT * FROM offsets_current WHERE group_id = 'orders'\""
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("query", help="a Spark SQL statement")
    add_conf_arguments(p)
    p.add_argument("--limit", type=int, default=100, help="rows to show (default: %(default)s; 0 = all)")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table", help="output format")
    p.set_defaults(func=run)


def register_views(spark: SparkSession, cfg: Config) -> list[str]:
    """Register every Delta table in the warehouse as a temp view; returns their names."""
    from pipelines.tableio import TableIO
    from schemas import TABLES

    io = TableIO(cfg, spark)
    names = []
    for name in io.list_tables():
        if name not in TABLES:
            continue  # a Delta table not declared in schemas/ (someone else's): skip
        io.read(name).createOrReplaceTempView(name)
        names.append(name)
    if names:  # analytics views (pipelines.analytics.views), empty stand-ins for missing tables
        from pipelines.analytics.views import register_analytics_views

        names += register_analytics_views(spark, io)
    return names


def _cell(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, (bytes, bytearray)):
        return v.hex() if len(v) <= 32 else v[:32].hex() + "…"
    return str(v)


def _quiet_query_errors() -> None:
    """PySpark logs every failed query's full Java stack at ERROR; the CLI prints one line."""
    import logging

    try:
        from pyspark.logger import PySparkLogger

        PySparkLogger.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    except ImportError:  # pragma: no cover - older PySpark
        pass


def _run_sql(spark: SparkSession, sql: str) -> Any:
    _quiet_query_errors()
    try:
        return spark.sql(sql)
    except Exception as exc:  # AnalysisException / ParseException: one clear line
        name = type(exc).__name__
        if "Exception" in name and ("Analysis" in name or "Parse" in name):
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else name
            raise UsageError(f"query failed: {first}") from None
        raise


def show_query(spark: SparkSession, sql: str, console: Any = None, *, limit: int = 100) -> int:
    """Run ``sql`` and print the result as a rich table; returns the number of rows shown."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    df = _run_sql(spark, sql)
    rows = df.limit(limit + 1).collect() if limit else df.collect()
    more = bool(limit) and len(rows) > limit
    rows = rows[:limit] if limit else rows
    table = Table(show_lines=False)
    for col in df.columns:
        table.add_column(col)
    for r in rows:
        table.add_row(*[_cell(v) for v in r])
    console.print(table)
    console.print(f"{len(rows)} row(s){' (more not shown: --limit)' if more else ''}")
    return len(rows)


def run(args: argparse.Namespace) -> int:
    from pipelines.config import config_from_args
    from pipelines.spark_session import build_spark_from_config

    cfg = config_from_args(args)
    spark = build_spark_from_config(cfg, app_suffix="sql")
    names = register_views(spark, cfg)
    if not names:
        print(f"note: no Delta tables under {cfg.paths.warehouse} (run: offsetlake run batch)", file=sys.stderr)
    if args.format == "table":
        show_query(spark, args.query, limit=args.limit)
        return 0
    df = _run_sql(spark, args.query)
    rows = df.limit(args.limit).collect() if args.limit else df.collect()
    if args.format == "json":
        for r in rows:
            print(json.dumps({k: _cell(v) if isinstance(v, (bytes, bytearray)) else v for k, v in r.asDict(recursive=True).items()}, default=str))
    else:
        import csv

        w = csv.writer(sys.stdout)
        w.writerow(df.columns)
        for r in rows:
            w.writerow(["" if v is None else _cell(v) for v in r])
    return 0
