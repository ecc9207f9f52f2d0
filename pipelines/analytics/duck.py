"""DuckDB over the warehouse's Delta tables: ``offsetlake sql`` without a JVM.

Rules:
- Tables are located through ``pipelines.tableio``: DuckDB's own Parquet reader scans the
  current snapshot's files (``TableIO.snapshot_files``: only the columns and row groups a query
  needs); when the file list is not the snapshot (deletion vectors, partition columns) the
  snapshot is read as Arrow (``TableIO.read_arrow``). Nothing here imports ``deltalake``.
- Only what a statement reads is registered, once per session: the tables and analytics views it
  names and, for a view, what the view reads (``views.view_closure``). ``SELECT 1`` registers
  nothing.
- A view's DuckDB form is its one Spark SQL definition (``views.view_sql``) transpiled by
  ``pipelines.analytics.transpile``; a view without a faithful form raises ``NoDuckDBForm`` and
  Spark answers it. A view with a Python step (``views.PYTHON_VIEWS``: ``offsets_at_risk``) runs
  the same pieces: its SQL transpiled, its Python function on the driver (``offsets_due_arrow``).
- A declared table the warehouse does not hold yet is, when a VIEW reads it, an empty table with
  its declared schema (the Spark path's rule, ``views.register_analytics_views``).
- Locked down at connect: DuckDB reads and writes files under the warehouse and its spill
  directory only (``allowed_directories``, ``enable_external_access = false``), and its
  configuration is locked (``lock_configuration``): no statement reads ``/etc/...``, installs an
  extension or attaches a database, whatever ``offsetlake sql``'s own check let through.
- Session time zone UTC (as Spark's ``spark.sql.session.timeZone``); DuckDB's spill directory is
  under the system temp directory, never the working directory.
"""

from __future__ import annotations

import os
import tempfile
from typing import TYPE_CHECKING, Any

from pipelines import uri
from pipelines.analytics.at_risk import AT_RISK_JOIN_SQL, AT_RISK_SCHEMA, DUE_COLUMNS, at_risk_sql, due_times_fn
from pipelines.analytics.transpile import NoDuckDBForm, to_duckdb
from pipelines.analytics.views import PYTHON_VIEWS, VIEW_NAMES, view_sql
from schemas import get as get_spec

if TYPE_CHECKING:
    import pyarrow as pa

    from pipelines.config import Config
    from pipelines.tableio import TableIO
    from schemas.base import TableSpec


class DuckDBSession:
    """One in-memory DuckDB connection with the warehouse's tables and views registered on demand."""

    def __init__(self, io: TableIO) -> None:
        import duckdb

        self.io = io
        self.cfg = io.conf
        spill = os.path.join(tempfile.gettempdir(), f"offsetlake-duckdb-{os.getuid()}")
        self.con = duckdb.connect(":memory:", config={"temp_directory": spill})
        self.con.execute("SET TimeZone = 'UTC'")
        _lock_down(self.con, [io.warehouse, spill])
        self._registered: set[str] = set()
        self._replayed: bool | None = None

    @property
    def replayed_commits(self) -> bool:
        if self._replayed is None:
            self._replayed = self.io.exists("offset_commits_replayed")
        return self._replayed

    def view_form(self, name: str) -> str:
        return view_form(name, self.cfg, replayed_commits=self.replayed_commits)

    def register(self, closure: list[str]) -> None:
        """Register ``closure`` (``views.view_closure``: views in dependency order, then tables);
        a declared table the warehouse does not hold is an empty stand-in (the caller refuses a
        statement that names one itself)."""

        views = [n for n in closure if n in VIEW_NAMES]
        forms = {v: self.view_form(v) for v in views if v not in self._registered}  # all, before any work
        for name in closure:
            if name in VIEW_NAMES or name in self._registered:
                continue
            self._register_table(name, get_spec(name))
            self._registered.add(name)
        for v in views:
            if v in forms:
                if v == "offsets_at_risk":  # its Python step first (views.PYTHON_VIEWS)
                    joined = self.query(to_duckdb(AT_RISK_JOIN_SQL))
                    self.con.register("_offsets_due", offsets_due_arrow(joined, self.cfg))
                self.con.execute(f'CREATE OR REPLACE VIEW "{v}" AS {forms[v]}')
                self._registered.add(v)

    def _register_table(self, name: str, spec: TableSpec) -> None:
        """The snapshot's Parquet files scanned by DuckDB (its own reader: footer statistics,
        parallel); the snapshot as Arrow when its file list is not the snapshot; an empty table
        with the declared schema when the table does not exist."""
        files = self.io.snapshot_files(name)
        if files:
            listed = ", ".join("'" + _local(f).replace("'", "''") + "'" for f in files)
            cols = ", ".join(self._columns(name, spec, listed))
            self.con.execute(
                f'CREATE OR REPLACE VIEW "{name}" AS SELECT {cols} FROM read_parquet([{listed}], union_by_name = true)'
            )
            return
        # not ``dataset()`` with DuckDB's filter pushdown: delta-rs turns a file's missing string
        # min/max into ``col >= null`` guarantees, so any pushed filter on a string column drops
        # every file (found here: ``WHERE cause IN (...)`` returned nothing)
        table = self.io.read_arrow(name) if files is None and self.io.exists(name) else None
        self.con.register(name, table if table is not None else spec.arrow_schema().empty_table())

    def _columns(self, name: str, spec: TableSpec, listed: str) -> list[str]:
        """The declared columns; one no file holds (a warehouse written before it was declared:
        ``group_type``, the consumer member columns) is a typed NULL, as Spark's declared-schema
        read gives it."""
        present = {r[0] for r in self.con.execute(f"SELECT DISTINCT name FROM parquet_schema([{listed}])").fetchall()}
        missing = [c for c in spec.column_names if c not in present]
        if not missing:
            return [f'"{c}"' for c in spec.column_names]
        self.con.register(f"_declared_{name}", spec.arrow_schema().empty_table())
        types = {r[0]: r[1] for r in self.con.execute(f'DESCRIBE "_declared_{name}"').fetchall()}
        return [f'CAST(NULL AS {types[c]}) AS "{c}"' if c in missing else f'"{c}"' for c in spec.column_names]

    def query(self, duck_sql: str, limit: int | None = None) -> pa.Table:
        """The statement's rows as Arrow (``limit``: at most that many)."""
        rel = self.con.sql(duck_sql)
        if rel is None:  # a statement without a result
            import pyarrow as pa

            return pa.table({})
        if limit:
            rel = rel.limit(limit)
        return _arrow(rel)


def _lock_down(con: Any, directories: list[str]) -> None:
    """Files only under ``directories``, external access off, configuration locked (module rules)."""

    allowed = []
    for d in directories:
        if uri.is_local(d):  # delta-rs names the files by the resolved path (symlinks followed)
            path = uri.local_path(d)
            allowed += [path.rstrip("/") + "/", os.path.realpath(path).rstrip("/") + "/"]
        else:
            allowed.append(d.rstrip("/") + "/")
    con.execute("SET allowed_directories = ?", [allowed])
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def _local(file_uri: str) -> str:
    """A local ``file://`` URI as a path (DuckDB's reader takes paths and s3/http URLs)."""

    return uri.local_path(file_uri) if uri.is_local(file_uri) else file_uri


def view_form(name: str, cfg: Config, *, replayed_commits: bool) -> str:
    """The DuckDB SQL of analytics view ``name`` (raises ``NoDuckDBForm``)."""

    if name in PYTHON_VIEWS and name != "offsets_at_risk":
        raise NoDuckDBForm(f"view {name} {PYTHON_VIEWS[name][0]}")
    try:
        if name == "offsets_at_risk":  # over _offsets_due, the Python step's output (register)
            return to_duckdb(at_risk_sql(cfg))
        return to_duckdb(view_sql(name, cfg, replayed_commits=replayed_commits))
    except NoDuckDBForm as exc:
        raise NoDuckDBForm(f"view {name} {exc}") from None


def offsets_due_arrow(joined: pa.Table, cfg: Config) -> pa.Table:
    """``_offsets_due`` from ``at_risk.AT_RISK_JOIN_SQL``'s rows on the driver: the grouped function
    Spark runs per group (``at_risk.due_times_fn``: the core's expiry rules), group by group."""
    import pandas as pd
    import pyarrow as pa

    types = {"string": pa.string(), "int": pa.int32(), "bigint": pa.int64(), "timestamp": pa.timestamp("us", "UTC")}
    schema = pa.schema([(n, types[t]) for n, t in (f.strip().split(" ") for f in AT_RISK_SCHEMA.split(","))])
    pdf = joined.to_pandas()
    if cfg.replay.retention_ms is None or pdf.empty:
        out = pdf[list(DUE_COLUMNS)].copy()
        out["predicted_expiry_timestamp"] = pd.NaT
    else:
        fn = due_times_fn(int(cfg.replay.retention_ms), cfg.replay.rules)
        out = pd.concat([fn(g) for _, g in pdf.groupby("group_id", sort=False)], ignore_index=True)
    return pa.Table.from_pandas(out, schema=schema, preserve_index=False)


def _arrow(rel: Any) -> pa.Table:
    fetch = getattr(rel, "fetch_arrow_table", None) or rel.arrow
    out = fetch()
    import pyarrow as pa

    return out if isinstance(out, pa.Table) else pa.table(out)
