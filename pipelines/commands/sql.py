"""``offsetlake sql "SELECT ..."``: Spark SQL over the warehouse's tables and analytics views,
answered by DuckDB (no JVM) or Spark.

Rules:
- The language is Spark SQL on every engine. Tables are named after the Delta tables
  (``group_state``, ``offsets_current``, ...), views after ``pipelines.analytics.views``; both
  are read through ``pipelines.tableio`` (the current snapshot). DuckDB gets the statement and
  the views it reads transpiled by ``pipelines.analytics.transpile``.
- ``--engine auto`` (default) picks DuckDB unless: the statement has no faithful DuckDB form
  (e.g. a higher-order function the transpiler does not carry; every analytics view has one) —
  Spark answers, with a one-line note on stderr (also when DuckDB's binder finds no signature
  for a function as called, e.g. Spark's ``length(binary)``); the warehouse is not a local path (a cluster's object store: Spark carries its
  credentials); or the tables it reads (views expanded) hold more than ``--duckdb-max-mb``
  (default 4096) MiB of data files in their current snapshots. ``--verbose`` says on stderr
  which engine answered and why.
- Only the tables and views a statement reads are registered (``SELECT 1`` reads none).
- Query-only, whatever the engine (``transpile.check_query_only``): a statement that writes,
  reads a file by its path or runs code is refused before any engine sees it, and DuckDB reads
  files under the warehouse only (``duck.DuckDBSession``). A statement sqlglot cannot read is
  refused too (it cannot be checked). Spark runs the checked text as it is: its variable
  substitution (``${env:HOME}``, ``${var}``) is off in the sql command's session.
- Errors (exit 2, one line): no warehouse (no Delta table under ``paths.warehouse``), a table
  or view that is unknown or not built yet, a statement that does not parse (sqlglot's or the
  engine's first line), a query the engine rejects.
- Output: ``--format table`` (a rich table, the default on a terminal, 100 rows unless
  ``--limit``), ``tsv`` (the default when stdout is not a terminal), ``csv``, ``json`` (one object
  per line). tsv/csv/json print every row and every cell whole (``--limit`` caps them); nulls are
  empty cells in tsv/csv and ``null`` in json; in tsv a tab, newline or backslash inside a cell is
  written ``\\t``, ``\\n``, ``\\\\``; bytes are hex; timestamps ISO 8601 in UTC.
- No query: a shell when stdin is a terminal (statements end with ``;`` or an empty line,
  ``\\d`` lists tables and views, ``\\d NAME`` its columns, ``\\q`` quits); else the statement is
  read from stdin.
- Spark keeps its SQL warehouse out of the working directory (``pipelines.runtime.spark_session``).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipelines import uri
from pipelines.config import add_conf_arguments, config_from_args
from pipelines.errors import UsageError
from schemas import TABLES

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

    from pipelines.analytics.duck import DuckDBSession
    from pipelines.config import Config
    from pipelines.tableio import TableIO

DEFAULT_DUCKDB_MAX_MB = 4096
TABLE_LIMIT = 100


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "sql",
        help="run SQL over the Delta tables and analytics views (DuckDB, or Spark for big tables)",
        description=(
            "Run a Spark SQL query over the warehouse: every Delta table and analytics view is a table by name.\n"
            "DuckDB answers without a JVM unless the query needs Spark (--engine auto; see the module docs).\n"
            "No query: an interactive shell on a terminal, else the query is read from stdin.\n"
            "examples:\n"
            '  offsetlake sql "SELECT state, count(*) FROM group_state GROUP BY state"\n'
            "  offsetlake sql --format csv \"SELECT * FROM offsets_current WHERE group_id = 'orders'\"\n"
            "  offsetlake sql                      (shell: \\d lists tables, \\q quits)"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("query", nargs="?", help="a Spark SQL statement (none: shell, or read from stdin)")
    add_conf_arguments(p)
    p.add_argument(
        "--engine",
        choices=["auto", "duckdb", "spark"],
        default="auto",
        help="who answers (default: %(default)s = DuckDB unless the query needs Spark)",
    )
    p.add_argument(
        "--format",
        choices=["table", "tsv", "csv", "json"],
        default=None,
        help="output format (default: table on a terminal, else tsv)",
    )
    p.add_argument(
        "--limit",
        type=int,
        default=None,
        help=f"rows to print (default: {TABLE_LIMIT} for table, all otherwise; 0 = all)",
    )
    p.add_argument(
        "--duckdb-max-mb",
        type=int,
        default=DEFAULT_DUCKDB_MAX_MB,
        help="auto: Spark answers when the tables read hold more MiB than this (default: %(default)s)",
    )
    p.add_argument("--verbose", "-v", action="store_true", help="say on stderr which engine answered and why")
    p.set_defaults(func=run)


# ---- the Spark path (also used by the real-broker quickstart and the analytics tests) ----------
def register_views(spark: SparkSession, cfg: Config, only: list[str] | None = None) -> list[str]:
    """Register the Delta tables (all, or those in ``only``) as temp views, then the analytics
    views (all, or those in ``only``: ``views.view_closure``); returns their names."""
    from pipelines.tableio import TableIO

    io = TableIO(cfg, spark)
    names = []
    for name in io.list_tables():
        if name not in TABLES or (only is not None and name not in only):
            continue  # a Delta table not declared in schemas/ (someone else's): skip
        io.read(name).createOrReplaceTempView(name)
        names.append(name)
    wanted = None if only is None else set(only)
    if names or only:  # analytics views (pipelines.analytics.views), empty stand-ins for missing tables
        from pipelines.analytics.views import register_analytics_views

        names += register_analytics_views(spark, io, only=wanted)
    return names


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
            raise UsageError(f"query failed: {_first_line(exc)}") from None
        raise


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _cell(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, (bytes, bytearray)):
        return v.hex() if len(v) <= 32 else v[:32].hex() + "…"
    return str(v)


# ---- one statement, either engine ---------------------------------------------------------------
#: DuckDB's binder naming a function it has no signature for, e.g. Spark's ``length(binary)``
#: (DuckDB: ``length(BLOB)`` does not exist): the statement is valid Spark SQL without a faithful
#: DuckDB form, so ``--engine auto`` lets Spark answer it (module rules)
_NO_SIGNATURE = re.compile(r"No function matches the given name and argument types '[^']*'")


class _NoDuckDBSignature(Exception):
    """DuckDB has no signature for a function as the statement calls it."""


@dataclass
class Plan:
    """How one statement runs: engine, the DuckDB SQL, what to register, why."""

    engine: str
    closure: list[str] | None  # views (dependency order) then tables; None: everything (Spark)
    duck_sql: str | None = None
    reason: str = ""
    note: str | None = None  # a fallback worth a line on stderr even without --verbose


@dataclass
class Session:
    """The engines of one ``offsetlake sql`` process (each started on first use)."""

    cfg: Config
    io: TableIO
    engine: str = "auto"
    max_bytes: int = DEFAULT_DUCKDB_MAX_MB << 20
    verbose: bool = False
    tables: list[str] = field(default_factory=list)
    _duck: DuckDBSession | None = None
    _spark: SparkSession | None = None
    _spark_registered: set[str] = field(default_factory=set)
    _replayed: bool | None = None

    @property
    def replayed_commits(self) -> bool:
        if self._replayed is None:
            self._replayed = self.io.exists("offset_commits_replayed")
        return self._replayed

    @property
    def duck(self) -> DuckDBSession:
        if self._duck is None:
            from pipelines.analytics.duck import DuckDBSession

            self._duck = DuckDBSession(self.io)
        return self._duck

    def plan(self, sql: str) -> Plan:
        """Parse ``sql``, check its names, choose the engine (module rules)."""
        from pipelines.analytics.duck import view_form
        from pipelines.analytics.transpile import (
            NoDuckDBForm,
            NotAQuery,
            SqlSyntaxError,
            check_query_only,
            is_show_tables,
            parse,
            referenced_tables,
            to_duckdb,
        )
        from pipelines.analytics.views import VIEW_NAMES, view_closure

        try:
            tree = parse(sql)
        except SqlSyntaxError as exc:  # never handed to an engine unread: it may not be a query
            raise UsageError(f"query failed: {exc}") from None
        if not is_show_tables(sql):
            try:
                check_query_only(tree)
            except NotAQuery as exc:
                raise UsageError(f"refused: {exc}") from None
        direct = referenced_tables(tree)
        for name in direct:
            if name not in VIEW_NAMES and name not in self.tables:
                raise UsageError(self._unknown(name))
        closure = view_closure(direct, self.cfg, replayed_commits=self.replayed_commits) if direct else []
        if self.engine == "spark":
            return Plan("spark", closure, reason="forced")
        try:
            duck_sql = to_duckdb(tree)
            for v in closure:
                if v in VIEW_NAMES:
                    view_form(v, self.cfg, replayed_commits=self.replayed_commits)
        except NoDuckDBForm as exc:
            if self.engine == "duckdb":
                raise UsageError(f"no DuckDB form: {exc}; use --engine spark (or auto)") from None
            return Plan("spark", closure, reason=str(exc), note=f"Spark answers: {exc}")
        if self.engine == "auto":
            if not uri.is_local(self.io.warehouse):
                return Plan("spark", closure, reason="the warehouse is not a local path")
            size = sum(self.io.size_bytes(t) for t in closure if t in self.tables)
            if size > self.max_bytes:
                mib = f"{size / 2**20:.1f} MiB > --duckdb-max-mb {self.max_bytes >> 20}"
                return Plan("spark", closure, reason=f"the tables read hold {mib}")
        return Plan("duckdb", closure, duck_sql, reason="forced" if self.engine == "duckdb" else "small local tables")

    def _unknown(self, name: str) -> str:
        if name in TABLES:
            return f"table {name} is not built yet in {self.io.warehouse} (tables: {', '.join(self.tables)})"
        return f"unknown table or view {name} (\\d or offsetlake tables lists them)"

    def execute(self, sql: str, limit: int | None = None) -> pa.Table:
        """Run one statement on the planned engine; at most ``limit`` rows when given."""
        plan = self.plan(sql)
        if plan.note:
            print(f"note: {plan.note}", file=sys.stderr)
        if self.verbose:
            print(f"engine: {plan.engine} ({plan.reason})", file=sys.stderr)
        if plan.engine == "duckdb":
            assert plan.duck_sql is not None and plan.closure is not None
            try:
                return self._duckdb(plan, limit)
            except _NoDuckDBSignature as exc:
                if self.engine != "auto":
                    raise UsageError(f"query failed: {exc}; use --engine spark (or auto)") from None
                print(f"note: Spark answers: DuckDB {exc}", file=sys.stderr)
                plan = Plan("spark", plan.closure, reason=f"DuckDB {exc}")
        spark = self._spark_with(plan.closure)
        df = _run_sql(spark, sql)
        return df.limit(limit).toArrow() if limit else df.toArrow()

    def _duckdb(self, plan: Plan, limit: int | None) -> pa.Table:
        import duckdb

        assert plan.duck_sql is not None and plan.closure is not None
        try:  # plan() refused the missing tables the statement names: the others are stand-ins
            self.duck.register(plan.closure)
            return self.duck.query(plan.duck_sql, limit)
        except duckdb.BinderException as exc:  # a Spark function over types DuckDB's has no form for
            line = _first_line(exc)
            m = _NO_SIGNATURE.search(line)
            if m:
                raise _NoDuckDBSignature(m.group(0)) from None
            raise UsageError(f"query failed: {line}") from None
        except duckdb.Error as exc:
            raise UsageError(f"query failed: {_first_line(exc)}") from None

    def _spark_with(self, closure: list[str] | None) -> SparkSession:
        from pipelines.runtime.spark_session import build_spark_from_config

        if self._spark is None:
            self._spark = build_spark_from_config(self.cfg, app_suffix="sql")
            # the statement sqlglot checked is what Spark runs: no ``${env:...}``/``${var}``
            # substitution of the environment or the session's settings into it
            self._spark.conf.set("spark.sql.variable.substitute", "false")
        todo = None if closure is None else [n for n in closure if n not in self._spark_registered]
        if todo is None or todo:
            self._spark_registered |= set(register_views(self._spark, self.cfg, only=todo))
        return self._spark


def open_session(
    cfg: Config, *, engine: str = "auto", max_mb: int = DEFAULT_DUCKDB_MAX_MB, verbose: bool = False
) -> Session:
    """A session over ``cfg``'s warehouse; a warehouse without Delta tables is an error."""
    from pipelines.tableio import TableIO

    io = TableIO(cfg, None, engine="rust")  # metadata and Arrow reads only: no Spark needed
    tables = [t for t in io.list_tables() if t in TABLES]
    if not tables:
        raise UsageError(f"no Delta tables under {cfg.paths.warehouse} (run: offsetlake run batch --conf ...)")
    return Session(cfg, io, engine, max_mb << 20, verbose, tables)


# ---- output --------------------------------------------------------------------------------------
def print_table(table: pa.Table, console: Any = None, *, limit: int | None = TABLE_LIMIT) -> int:
    """A rich table of ``table`` (``limit`` rows; one more row means "more not shown")."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    rows = table.to_pylist()
    more = bool(limit) and len(rows) > (limit or 0)
    rows = rows[:limit] if limit else rows
    out = Table(show_lines=False)
    for col in table.column_names:
        out.add_column(col)
    for r in rows:
        out.add_row(*[_cell(_text(v)) if v is not None else "null" for v in r.values()])
    console.print(out)
    console.print(f"{len(rows)} row(s){' (more not shown: --limit)' if more else ''}")
    return len(rows)


def _text(v: Any) -> Any:
    """A value as text for a cell: timestamps ISO 8601, nested values as JSON."""
    import datetime as dt
    import json

    if isinstance(v, dt.datetime):
        return v.isoformat(sep=" ")
    if isinstance(v, (list, dict)):
        return json.dumps(_json_value(v), separators=(",", ":"))
    return v


def _json_value(v: Any) -> Any:
    import datetime as dt
    import decimal

    if isinstance(v, (dt.datetime, dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    if isinstance(v, dict):
        return {k: _json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    return v


def _plain(v: Any, tsv: bool) -> str:
    if v is None:
        return ""
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    s = str(_text(v))
    if tsv:
        s = s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return s


def write_rows(table: pa.Table, fmt: str, out: Any = None) -> None:
    """Print ``table`` as tsv, csv or json lines (every row, every cell whole)."""
    import json

    out = out or sys.stdout
    if fmt == "json":
        for r in table.to_pylist():
            out.write(json.dumps({k: _json_value(v) for k, v in r.items()}) + "\n")
        return
    if fmt == "csv":
        import csv

        w = csv.writer(out, lineterminator="\n")
        w.writerow(table.column_names)
        for r in table.to_pylist():
            w.writerow([_plain(v, False) for v in r.values()])
        return
    out.write("\t".join(table.column_names) + "\n")
    for r in table.to_pylist():
        out.write("\t".join(_plain(v, True) for v in r.values()) + "\n")


def answer(session: Session, sql: str, fmt: str, limit: int | None, console: Any = None) -> None:
    """Run ``sql`` and print it in ``fmt``."""
    if fmt == "table":
        cap = TABLE_LIMIT if limit is None else limit
        print_table(session.execute(sql, cap + 1 if cap else None), console, limit=cap)
    else:
        write_rows(session.execute(sql, limit or None), fmt)


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    session = open_session(cfg, engine=args.engine, max_mb=args.duckdb_max_mb, verbose=args.verbose)
    fmt = args.format or ("table" if sys.stdout.isatty() else "tsv")
    if args.query is not None:
        answer(session, args.query, fmt, args.limit)
        return 0
    if sys.stdin.isatty():
        return shell(session, args.format or "table", args.limit)
    sql = sys.stdin.read().strip().rstrip(";")
    if not sql:
        raise UsageError("no query: give one as an argument, on stdin, or run on a terminal for a shell")
    answer(session, sql, fmt, args.limit)
    return 0


# ---- the shell ------------------------------------------------------------------------------------
def shell(session: Session, fmt: str, limit: int | None) -> int:
    """Read statements from the terminal until ``\\q`` or end of input (module rules)."""
    import contextlib

    with contextlib.suppress(ImportError):  # platforms without readline keep plain input()
        import readline  # noqa: F401  (line editing and history for input())
    print(
        "offsetlake sql: Spark SQL over the warehouse; end statements with ';' or an empty line, "
        "\\d lists tables and views, \\q quits",
        file=sys.stderr,
    )
    buf: list[str] = []
    while True:
        try:
            line = input("offsetlake> " if not buf else "        ...> ")
        except EOFError:
            print(file=sys.stderr)
            return 0
        except KeyboardInterrupt:
            print(file=sys.stderr)
            buf = []
            continue
        text = line.strip()
        if not buf and text in ("\\q", "quit", "exit"):
            return 0
        if not buf and text.startswith("\\d"):
            _describe(session, text[2:].strip(), fmt, limit)
            continue
        if text:
            buf.append(line)
        if buf and (not text or text.endswith(";")):
            sql, buf = "\n".join(buf).strip().rstrip(";"), []
            try:
                answer(session, sql, fmt, limit)
            except UsageError as exc:
                print(f"error: {exc}", file=sys.stderr)


def _describe(session: Session, name: str, fmt: str, limit: int | None) -> None:
    """``\\d``: the tables and views; ``\\d NAME``: its columns (from a zero-row query)."""
    if not name:
        from pipelines.analytics.views import VIEW_NAMES

        print("tables: " + ", ".join(session.tables))
        print("views:  " + ", ".join(VIEW_NAMES))
        return
    try:
        schema = session.execute(f"SELECT * FROM {name} LIMIT 0").schema
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return
    for f in schema:
        print(f"{f.name}\t{f.type}")
