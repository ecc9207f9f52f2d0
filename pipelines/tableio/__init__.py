"""Table IO: the only package that knows how Delta tables are written and read.

Rules:
- Every table is declared in ``schemas/`` and lives at ``<paths.warehouse>/<name>``
  (``uri.join``: local paths and ``file://``, ``s3a://``, ``abfss://``, ``gs://`` URIs alike).
  Callers pass DataFrames (or small Arrow tables); the declared columns are selected in declared
  order and cast to the declared types (a missing or extra column is an error naming the table).
- Two engines, one behaviour (ARCHITECTURE.md, "One path per stage"), behind ``base.Engine``: ``spark.SparkEngine`` (Spark's
  Delta) and ``rust.RustEngine`` (executors write through ``rust_sink``, delta-rs commits).
  ``delta.engine: auto`` = Spark's Delta when its classes load (``delta_available``), else rust.
  ``TableIO`` picks one engine at construction and never branches on it afterwards.
- Idempotence. ``append(..., txn_app_id, txn_version)`` is skipped when the table's Delta ``txn``
  for that app id is already ``>= txn_version`` (a retried batch never duplicates rows).
  ``overwrite``/``merge`` with a marker are skipped when the table's latest commit carries exactly
  that marker. MERGE only rewrites rows whose values changed, so a MERGE of identical data
  commits nothing and leaves the table version unchanged.
- Schema evolution: a table written before a nullable column was declared gets it at the first
  write of the process (``ensure``: Delta ADD COLUMNS; older rows read null); a missing
  non-nullable column is an error, never a silent rewrite.
- Reading back: ``read(name)`` respects the current snapshot on both engines; ``read_arrow``
  reads the snapshot on the driver with delta-rs (reports, ``inspect``, the end-offsets feed);
  ``snapshot_files`` + ``size_bytes`` let a driver-side engine scan the snapshot itself
  (``offsetlake sql`` on DuckDB).
- Table metadata (version, txn, history, row counts) is read with delta-rs on both engines
  (``deltars``): it reads any Delta table's log without a Spark job.
- Nothing outside this package imports ``deltalake`` or ``delta`` (``tests/test_architecture.py``).
  Callers that hold a location rather than a warehouse table name use the ``*_at`` functions.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from pipelines import uri
from pipelines.errors import UsageError
from pipelines.runtime.spark_session import delta_available
from pipelines.tableio import deltars, rust_sink
from pipelines.tableio.base import (
    COMMIT_REFUSED,
    SIDE_KEY,
    Engine,
    EngineName,
    RoutedWriteOptions,
    TableInfo,
    WriteMode,
    WriteResult,
    conform,
    conform_arrow,
)
from pipelines.tableio.rust import RustEngine
from pipelines.tableio.spark import SparkEngine
from pipelines.warehouse.layout import STAGING_DIR
from pipelines.warehouse.lock import current_run_id, new_run_id
from schemas import get as get_spec

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.config import Config
    from pipelines.tableio.task_rows import TaskRows

__all__ = [
    "COMMIT_REFUSED",
    "SIDE_KEY",
    "ParquetFileCopy",
    "TableIO",
    "TableInfo",
    "WriteResult",
    "append_arrow_at",
    "column_names_at",
    "conform",
    "conform_arrow",
    "file_matches",
    "file_uris_at",
    "is_table_at",
    "read_arrow_at",
    "resolve_engine",
]

log = logging.getLogger(__name__)


def resolve_engine(requested: str, spark: SparkSession | None) -> EngineName:
    """``auto`` → ``spark`` when Delta's Spark classes load, else ``rust``."""

    if requested == "rust":
        return "rust"
    has_delta = spark is not None and delta_available(spark)
    if requested == "spark":
        if not has_delta:
            raise UsageError(
                "delta.engine: spark needs Delta Lake's jars on the classpath (fetched into spark.jars when this process starts Spark; under spark-submit: --jars or --packages "
                "io.delta:delta-spark_2.13:<version>); use delta.engine: auto or rust without them"
            )
        return "spark"
    return "spark" if has_delta else "rust"


class TableIO:
    """Read and write the platform's Delta tables (see the package docstring for the rules).

    Args:
        conf: the loaded config (``paths.warehouse``, ``delta.*``).
        spark: the session; ``None`` allows metadata and Arrow reads (``version``, ``exists``,
            ``count``, ``history``, ``read_arrow``, ...).
        engine: override ``delta.engine`` (tests; ``"rust"`` for driver-only use).
    """

    def __init__(self, conf: Config, spark: SparkSession | None, *, engine: str | None = None) -> None:
        self.conf = conf
        self.spark = spark
        self.warehouse = conf.paths.warehouse
        self.engine: EngineName = resolve_engine(engine or conf.delta.engine, spark)
        self._engine: Engine = self._make_engine()
        self._run_id: str | None = None
        self._evolved: set[str] = set()  # tables whose declared columns ``ensure`` checked

    def _make_engine(self) -> Engine:
        """The engine ``resolve_engine`` chose (``spark`` only ever with a session)."""

        engines: dict[EngineName, type[RustEngine] | type[SparkEngine]] = {"rust": RustEngine, "spark": SparkEngine}
        return engines[self.engine](self, self.spark)

    @property
    def run_id(self) -> str:
        """This run's id: the warehouse lock's when this process holds it (its staging
        directory is ``_staging/<run id>``), else one of its own."""

        held = current_run_id(self.warehouse)  # a TableIO may outlive one run (tests, quickstart)
        if held is not None:
            return held
        if self._run_id is None:
            self._run_id = new_run_id()
        return self._run_id

    # ---- locations and metadata -----------------------------------------------------------
    def path(self, name: str) -> str:
        return self.conf.table_path(name)

    def exists(self, name: str) -> bool:
        return deltars.is_table(self.path(name))

    def _dt(self, name: str) -> Any:
        if not self.exists(name):
            raise UsageError(f"table {name} does not exist at {self.path(name)} (run the batch job first)")
        return deltars.open_table(self.path(name))

    def version(self, name: str) -> int | None:
        """The table's current version, or ``None`` when it does not exist."""
        return int(self._dt(name).version()) if self.exists(name) else None

    def data_version(self, name: str, at: int | None = None) -> int | None:
        """The version of the table's rows (at version ``at``, default now): its latest write,
        maintenance (OPTIMIZE, VACUUM) passed over; ``None`` when the table does not exist."""

        return deltars.data_version(self._dt(name), at) if self.exists(name) else None

    def txn_version(self, name: str, app_id: str) -> int | None:
        """The Delta ``txn`` version recorded for ``app_id`` (``None`` if never written)."""
        if not self.exists(name):
            return None
        v = self._dt(name).transaction_version(app_id)
        return None if v is None else int(v)

    def applied(self, name: str, app_id: str, version: int, *, latest: bool = True) -> bool:
        """True when ``name`` already holds the write (app_id, version): its latest write
        (maintenance passed over) carries exactly this marker (``latest``), or its ``txn`` for
        app_id is >= version."""

        return self.exists(name) and deltars.already_applied(self._dt(name), app_id, version, require_latest=latest)

    def count(self, name: str) -> int:
        """Row count from the Delta log (sum of ``numRecords``), no data scan."""
        return int(self._dt(name).count()) if self.exists(name) else 0

    def history(self, name: str, limit: int | None = None) -> list[dict[str, Any]]:
        return deltars.history(self._dt(name), limit)

    def describe(self, name: str) -> TableInfo:
        """Version, rows, data files and latest commit info, from the log."""

        dt = self._dt(name)
        hist = deltars.history(dt, 1)
        return TableInfo(int(dt.version()), int(dt.count()), len(dt.file_uris()), dict(hist[0]) if hist else {})

    def list_tables(self) -> list[str]:
        """Names of the Delta tables present under the warehouse (sorted)."""
        from pyarrow import fs

        filesystem, root = uri.filesystem(self.warehouse)
        try:
            infos = filesystem.get_file_info(fs.FileSelector(root, recursive=False))
        except (FileNotFoundError, OSError):
            return []
        names = sorted(i.base_name for i in infos if i.type == fs.FileType.Directory)
        return [n for n in names if self.exists(n)]

    # ---- create -----------------------------------------------------------------------------
    def ensure(self, name: str) -> None:
        """Create the table (empty, declared schema) if it does not exist yet; an existing table
        written before a column was declared gets the column (nullable only; once per process)."""
        if not self.exists(name):
            self._engine.create(self.path(name), get_spec(name))
        elif name not in self._evolved:
            self._add_new_columns(name)
        self._evolved.add(name)

    def _add_new_columns(self, name: str) -> None:
        """Schema evolution: the declared columns a table lacks are added (older rows read null).
        A missing non-nullable column cannot be added to rows that exist: one line says so."""

        spec = get_spec(name)
        have = set(deltars.column_names(self.path(name)))
        missing = [c for c in spec.columns if c.name not in have]
        if not missing:
            return
        strict = [c.name for c in missing if not c.nullable]
        if strict:
            raise UsageError(
                f"table {name} at {self.path(name)} lacks the non-nullable columns {strict}: it predates them; "
                "rebuild it (offsetlake run batch into a new warehouse)"
            )
        self._engine.add_columns(self.path(name), spec, [c.name for c in missing])
        log.info("table %s: added columns %s (schema evolution)", name, [c.name for c in missing])

    # ---- writes -----------------------------------------------------------------------------
    def append(
        self,
        name: str,
        df: DataFrame,
        *,
        txn_app_id: str | None = None,
        txn_version: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> WriteResult:
        """Append ``df``; with (txn_app_id, txn_version) a retried batch is skipped, never doubled."""
        return self._write(name, df, "append", txn_app_id, txn_version, metadata)

    def overwrite(
        self,
        name: str,
        df: DataFrame,
        *,
        txn_app_id: str | None = None,
        txn_version: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> WriteResult:
        """Replace the table's contents with ``df`` in one commit (skipped if the latest commit
        already carries this marker)."""
        return self._write(name, df, "overwrite", txn_app_id, txn_version, metadata)

    def _write(
        self,
        name: str,
        df: DataFrame,
        mode: Literal["append", "overwrite"],
        app_id: str | None,
        version: int | None,
        metadata: dict[str, Any] | None,
    ) -> WriteResult:
        if (app_id is None) != (version is None):
            raise ValueError("txn_app_id and txn_version go together")
        spec = get_spec(name)
        data = conform(df, spec)
        self.ensure(name)
        if app_id is not None and version is not None and self._skip(name, app_id, version, mode != "append"):
            log.info("%s: %s skipped, already applied (%s, %s)", name, mode, app_id, version)
            return WriteResult(name, mode, self.version(name) or 0, True)
        before = self.version(name)
        self._engine.write(self.path(name), spec, data, mode, app_id, version, metadata)
        after = self.version(name) or 0
        rows = deltars.rows_of_latest_commit(self.path(name)) if after != before else None
        return WriteResult(name, mode, after, after == before, rows)

    def _skip(self, name: str, app_id: str, version: int, replacing: bool) -> bool:
        """Whether a marked write is a duplicate to skip before writing (an engine that skips
        duplicate appends itself is not asked for appends)."""
        if not replacing and not self._engine.checks_append_marker:
            return False
        return self.applied(name, app_id, version, latest=replacing)

    def write_routed(
        self,
        names: list[str] | tuple[str, ...],
        tasks: TaskRows,
        route: str,
        *,
        route_options: dict[str, Any] | None = None,
        txn_app_id: str | None = None,
        txn_version: int | None = None,
        mode: WriteMode = "overwrite",
        rows_equal_input: bool = False,
        expected_rows: int | None = None,
        staged: Sequence[str] = (),
        metadata: dict[str, Any] | None = None,
        side_manifest: str | None = None,
        commit_check: str | None = None,
        appended: dict[str, dict[str, Any]] | None = None,
    ) -> dict[str, WriteResult]:
        """Write the tables ``names`` in ONE pass over ``tasks`` (``pipelines.batch.file_tasks.spread``;
        default: replace them).

        Each task passes its Arrow batches through ``route`` (``"module:function"``, called as
        ``route(batches, route_options)``, yielding ``({table name: pa.Table}, input records
        consumed)``) and writes every table's files; the driver then commits each table once
        (with the marker, when given). Options (keyword-only): ``route_options``, ``txn_app_id`` /
        ``txn_version``, ``mode`` (``"overwrite"``), ``rows_equal_input`` (the routed rows must
        add up to the input rows or nothing is committed), ``expected_rows`` (the input must have
        exactly that many rows), ``staged`` (tables written to a fresh unmarked staging table
        instead: ``staging_path``/``read_staged``/``drop_staged``, e.g. rows a caller MERGEs
        next), ``metadata``, ``side_manifest`` (where the commit lists what the routes wrote
        beside the tables under ``route_options[SIDE_KEY]``), ``commit_check``
        (``module:function``: may refuse the commit after seeing the side outputs; the error then
        contains ``COMMIT_REFUSED``), ``appended`` (rust engine only: ``{name: {"rows": n,
        "metadata": {...}}}``: tables of ``names`` that receive the pass's input itself, e.g. the
        landing files a pass copies into raw_records while it decodes them; each is committed
        first, as an append without the marker and with its own metadata, and must receive
        exactly ``rows`` rows, so the others' marker can name the version it makes). Tables
        already carrying the marker are left alone. Both engines run the same routes: the rust
        engine's tasks write the files themselves, the spark engine writes each table from a
        persisted pass (``pipelines.tableio.routed``).
        """
        options = RoutedWriteOptions(
            route_options=route_options,
            txn_app_id=txn_app_id,
            txn_version=txn_version,
            mode=mode,
            rows_equal_input=rows_equal_input,
            expected_rows=expected_rows,
            staged=tuple(staged),
            metadata=metadata,
            side_manifest=side_manifest,
            commit_check=commit_check,
            appended=appended,
        )
        return self._engine.write_routed(list(names), tasks, route, options)

    def merge(
        self,
        name: str,
        df: DataFrame | pa.Table,
        keys: tuple[str, ...] | list[str] | None = None,
        *,
        delete_missing: bool = False,
        txn_app_id: str | None = None,
        txn_version: int | None = None,
    ) -> WriteResult:
        """Upsert ``df`` (a DataFrame, or a small pyarrow Table already on the driver) into a
        current-state table on ``keys`` (default: the spec's primary key).

        Only rows whose values differ are rewritten; ``delete_missing`` also deletes target rows
        absent from ``df`` (a full rebuild). On the rust engine the source is collected to the
        driver as Arrow: use it for current-state tables (one row per group / group-partition),
        never for event tables.
        """
        spec = get_spec(name)
        keys = tuple(keys or spec.primary_key)
        if not keys:
            raise ValueError(f"table {name}: merge needs key columns (none given, none declared)")
        source = conform(df, spec) if hasattr(df, "toArrow") else conform_arrow(df, spec)
        self.ensure(name)
        if txn_app_id is not None and txn_version is not None and self.applied(name, txn_app_id, txn_version):
            return WriteResult(name, "merge", self.version(name) or 0, True)
        before = self.version(name)
        on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in keys)
        changed = " OR ".join(f"(t.`{c}` IS DISTINCT FROM s.`{c}`)" for c in spec.column_names if c not in keys)
        metrics = self._engine.merge(
            self.path(name),
            spec,
            source,
            on=on,
            changed=changed or None,
            delete_missing=delete_missing,
            app_id=txn_app_id,
            version=txn_version,
        )
        after = self.version(name) or 0
        affected = None
        if metrics:
            affected = int(
                metrics.get("num_target_rows_inserted", 0)
                + metrics.get("num_target_rows_updated", 0)
                + metrics.get("num_target_rows_deleted", 0)
            )
        return WriteResult(name, "merge", after, after == before, affected, metrics or None)

    def merge_log_rows(
        self, name: str, rows: pa.Table, *, txn_app_id: str | None = None, txn_version: int | None = None
    ) -> WriteResult:
        """``merge`` for a table keyed on a log position whose rows are new positions but for a
        few repeats (the stream's decoded tables): when the table holds none of the rows'
        positions (``deltars.rows_not_held``: a read of the key columns at or above the rows'
        smallest position) the rows are APPENDED, else MERGEd as ``merge`` does (a repeat updates
        its row where it differs: a transaction's fate learned later). delta-rs's MERGE reads the
        whole table whatever the source, so a stream MERGEing every micro-batch would pay for
        its whole history each time. Same marker, one commit, either way. Also for
        ``ingest_quarantine`` (keyed on ``record_id``, a hash): the statistics then prune little,
        but only that one column is read, where a MERGE reads every column of every file."""

        spec = get_spec(name)
        rows = conform_arrow(rows, spec)
        self.ensure(name)
        if txn_app_id is not None and txn_version is not None and self.applied(name, txn_app_id, txn_version):
            return WriteResult(name, "append", self.version(name) or 0, True)
        if deltars.rows_not_held(self.path(name), rows, spec.primary_key).num_rows < rows.num_rows:
            return self.merge(name, rows, txn_app_id=txn_app_id, txn_version=txn_version)
        before = self.version(name)
        self._engine.append_arrow(self.path(name), spec, rows, txn_app_id, txn_version)
        after = self.version(name) or 0
        return WriteResult(name, "append", after, after == before, rows.num_rows)

    def delete_keys(
        self,
        name: str,
        keys: Any,
        key_cols: tuple[str, ...] | list[str] | None = None,
        *,
        txn_app_id: str | None = None,
        txn_version: int | None = None,
    ) -> WriteResult:
        """Delete the rows of ``name`` whose key (default: the primary key) is in ``keys`` (a
        DataFrame or an Arrow table). A MERGE with only a delete clause: deleting absent rows
        deletes nothing and makes no commit, so a retry is harmless."""
        import pyarrow as pa

        spec = get_spec(name)
        cols = tuple(key_cols or spec.primary_key)
        self.ensure(name)
        target = spec.arrow_schema()
        key_schema = pa.schema([target.field(k) for k in cols])
        table = keys if isinstance(keys, pa.Table) else keys.select(*cols).toArrow()
        source = table.select(list(cols)).cast(key_schema)
        on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in cols)
        before = self.version(name)
        deleted = self._engine.delete_keys(self.path(name), source, on=on, app_id=txn_app_id, version=txn_version)
        after = self.version(name) or 0
        return WriteResult(name, "delete", after, after == before, deleted)

    # ---- staging ----------------------------------------------------------------------------
    def staging_path(self, name: str) -> str:
        """Where a routed write stages ``name``'s rows: ``_staging/<run id>/<name>`` under the
        warehouse, so two runs never share a staging directory (``pipelines.warehouse.lock``
        removes the ones a dead run left)."""
        return uri.join(self.warehouse, STAGING_DIR, self.run_id, name)

    def read_staged(self, name: str) -> pa.Table:
        """The staged rows of ``name`` as an Arrow table (declared schema)."""

        spec = get_spec(name)
        return conform_arrow(deltars.read_arrow(self.staging_path(name)), spec)

    def drop_staged(self, name: str) -> None:
        """Delete ``name``'s staging table (files and log), if any."""
        from pyarrow import fs

        filesystem, root = uri.filesystem(self.staging_path(name))
        if filesystem.get_file_info(root).type != fs.FileType.NotFound:
            filesystem.delete_dir(root)
        parent = root.rsplit("/", 1)[0]
        for _ in range(2):  # the run's directory, then ``_staging`` itself, when empty
            with contextlib.suppress(OSError):
                if not filesystem.get_file_info(fs.FileSelector(parent, allow_not_found=True)):
                    filesystem.delete_dir(parent)
            parent = parent.rsplit("/", 1)[0]

    # ---- reads ------------------------------------------------------------------------------
    def snapshot_files(self, name: str, version: int | None = None) -> list[str] | None:
        """The data files of the table's current snapshot (or ``version``'s), when they ARE the snapshot.

        ``None`` when a reader needs more than the file list (spark engine's own log semantics,
        deletion vectors, column mapping, partition columns kept out of the files): read the
        table with ``read`` then.
        """
        if not self.exists(name):
            return None
        return self._engine.snapshot_files(self.path(name), get_spec(name), version)

    def read(self, name: str, version: int | None = None) -> DataFrame:
        """The table as a DataFrame at its current snapshot (or ``version``), declared column order."""
        assert self.spark is not None, "TableIO.read needs a SparkSession"
        if not self.exists(name):
            raise UsageError(f"table {name} does not exist at {self.path(name)} (run the batch job first)")
        return self._engine.read(self.path(name), get_spec(name), version)

    def read_arrow(
        self, name: str, columns: list[str] | None = None, filter: Any = None, version: int | None = None
    ) -> pa.Table | None:
        """The table's rows on the driver as Arrow (delta-rs, no Spark): only ``columns``,
        ``filter`` (a ``pyarrow.dataset`` expression) pushed down; ``None`` when the table does
        not exist. For small tables and narrow reads (reports, ``inspect``)."""
        if not self.exists(name):
            return None
        return read_arrow_at(self.path(name), columns, filter, version)

    def size_bytes(self, name: str) -> int:
        """Bytes of the table's current data files (from the log; 0 when it does not exist)."""

        return deltars.size_bytes(self.path(name)) if self.exists(name) else 0

    # ---- maintenance --------------------------------------------------------------------------
    def optimize(self, name: str) -> dict[str, Any]:
        """Compact small files (OPTIMIZE)."""
        return self._engine.optimize(self.path(name))

    def vacuum(self, name: str, retention_hours: int | None = None, *, dry_run: bool = False) -> list[str]:
        """Delete files no longer referenced and older than the retention (VACUUM)."""
        hours = self.conf.delta.vacuum_retention_hours if retention_hours is None else retention_hours
        self._dt(name)  # a clear error for a missing table
        return self._engine.vacuum(self.path(name), hours, dry_run)


# ---- a Delta table at a location (not a warehouse table name) ----------------------------------
def is_table_at(location: str) -> bool:
    """True when a Delta table is at ``location`` (a path or URI)."""

    return deltars.is_table(location)


def column_names_at(location: str) -> list[str]:
    return deltars.column_names(location)


def read_arrow_at(
    location: str, columns: list[str] | None = None, filter: Any = None, version: int | None = None
) -> pa.Table:
    """The snapshot's rows at ``location`` as Arrow on the driver (``TableIO.read_arrow``)."""

    return deltars.read_arrow(location, columns, filter, version)


def file_uris_at(location: str) -> list[str]:
    """The data files of the snapshot at ``location``."""

    return deltars.file_uris(location)


def append_arrow_at(location: str, table: pa.Table, *, mode: Literal["append", "overwrite"] = "append") -> None:
    """Append an Arrow table from the driver (the table is created on first use): for small
    driver-side feeds (the end-offsets sampler), never for a table tasks could write."""

    deltars.write_arrow(location, table, mode)


def __getattr__(name: str) -> Any:
    """The executor-side names routes use (``ParquetFileCopy``, ``file_matches``), imported
    from ``rust_sink`` on first use: importing this package must not import pyspark."""
    if name in ("ParquetFileCopy", "file_matches"):
        return getattr(rust_sink, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
