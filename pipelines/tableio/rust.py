"""The rust engine: Spark tasks write Parquet through ``rust_sink``'s writers, the driver
commits with delta-rs; MERGE and DELETE run in delta-rs with an Arrow source on the driver.

Rules:
- Used without Delta's Spark classes (``delta.engine: auto`` on a jar-free install, or
  ``rust``; ARCHITECTURE.md, "One path per stage"). Nothing funnels a large table through the driver: appends, replacements
  and routed writes are written by the tasks and committed once (``rust_sink``).
- MERGE collects its source to the driver as Arrow: only for current-state tables (one row per
  group or per group-partition — small by construction), never for event tables.
- Reading back respects the snapshot: the snapshot's file list read by Spark, not a directory
  listing; an empty table yields an empty DataFrame with the declared schema; a table another
  engine wrote with deletion vectors or column mapping is read by delta-rs on the driver.
- Routed writes (``rust_sink.RoutedWriter``) write several tables in one pass; a staged table
  goes to a fresh unmarked table under ``TableIO.staging_path``.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from pipelines.tableio import deltars, rust_sink
from pipelines.tableio.base import EngineName, RoutedWriteOptions, Tables, WriteMode, WriteResult
from schemas import get as get_spec

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.tableio.task_rows import TaskRows
    from schemas import TableSpec

log = logging.getLogger("pipelines.tableio")


class RustEngine:
    """``base.Engine`` on delta-rs and ``rust_sink``'s task writers."""

    name: EngineName = "rust"
    checks_append_marker = True

    def __init__(self, io: Tables, spark: SparkSession | None) -> None:
        self.io = io
        self.spark = spark

    def _spark(self) -> SparkSession:
        if self.spark is None:
            raise ValueError("this TableIO has no SparkSession (metadata and Arrow reads only)")
        return self.spark

    def create(self, uri: str, spec: TableSpec) -> None:
        deltars.create(
            uri,
            spec.arrow_schema(),
            list(spec.partition_by),
            name=spec.name,
            description=spec.doc.strip() or None,
            mode="ignore",
        )

    def add_columns(self, uri: str, spec: TableSpec, names: list[str]) -> None:
        import pyarrow as pa

        schema = spec.arrow_schema()
        deltars.add_columns(uri, pa.schema([schema.field(n) for n in names]))

    def write(
        self,
        uri: str,
        spec: TableSpec,
        data: DataFrame,
        mode: WriteMode,
        app_id: str | None,
        version: int | None,
        metadata: dict[str, Any] | None,
    ) -> None:
        options = {
            "path": uri,
            "arrow_schema": rust_sink.encode_schema(spec.arrow_schema()),
            "partition_by": ",".join(spec.partition_by),
            "target_file_rows": str(self.io.conf.delta.target_file_rows),
            "write_mode": mode,
            "require_latest": "true" if mode == "overwrite" else "false",
            "commit_metadata": json.dumps(metadata or {}),
        }
        if app_id is not None:
            options.update(txn_app_id=app_id, txn_version=str(version))
        rust_sink.run(data, rust_sink.TableWriter(options, mode == "overwrite"))

    def append_arrow(self, uri: str, spec: TableSpec, table: pa.Table, app_id: str | None, version: int | None) -> None:
        deltars.append_marked(uri, table, partition_by=list(spec.partition_by), app_id=app_id, version=version)

    def merge(
        self,
        uri: str,
        spec: TableSpec,
        source: DataFrame | pa.Table,
        *,
        on: str,
        changed: str | None,
        delete_missing: bool,
        app_id: str | None,
        version: int | None,
    ) -> dict[str, Any]:
        arrow = source.toArrow().cast(spec.arrow_schema()) if hasattr(source, "toArrow") else source
        return deltars.merge_arrow(
            uri, arrow, on=on, changed=changed, delete_missing=delete_missing, app_id=app_id, version=version
        )

    def delete_keys(self, uri: str, keys: pa.Table, *, on: str, app_id: str | None, version: int | None) -> int | None:
        return deltars.delete_matching(uri, keys, on=on, app_id=app_id, version=version)

    def read(self, uri: str, spec: TableSpec, version: int | None) -> DataFrame:
        spark = self._spark()
        dt = deltars.open_table(uri, version)
        schema = spec.spark_schema()
        if not deltars.file_list_is_snapshot(dt):
            # Written by another engine with deletion vectors / column mapping: the file list alone
            # is not the snapshot. delta-rs applies them; the rows pass through the driver.
            log.warning(
                "%s: reader features %s: reading through delta-rs on the driver", spec.name, deltars.reader_features(dt)
            )
            table = dt.to_pyarrow_table().select(list(spec.column_names)).cast(spec.arrow_schema())
            return spark.createDataFrame(table, schema=schema)
        files = deltars.data_files(dt)
        if not files:
            return spark.createDataFrame([], schema)
        reader = spark.read.schema(schema)
        if spec.partition_by:
            reader = reader.option("basePath", uri)
        return reader.parquet(*files).select(*spec.column_names)

    def snapshot_files(self, uri: str, spec: TableSpec, version: int | None = None) -> list[str] | None:
        if spec.partition_by:  # partition columns are kept out of the files
            return None
        dt = deltars.open_table(uri, version)
        return deltars.data_files(dt) if deltars.file_list_is_snapshot(dt) else None

    def optimize(self, uri: str) -> dict[str, Any]:
        return deltars.optimize(uri)

    def vacuum(self, uri: str, retention_hours: int, dry_run: bool) -> list[str]:
        return deltars.vacuum(uri, retention_hours, dry_run=dry_run)

    # ---- one pass, several tables ----------------------------------------------------------
    def write_routed(
        self, names: list[str], tasks: TaskRows, route: str, options: RoutedWriteOptions
    ) -> dict[str, WriteResult]:
        """``TableIO.write_routed`` (its docstring has the options)."""
        return _RoutedWrite(self.io, list(names), options).run(tasks, route)


class _RoutedWrite:
    """One routed write: markers checked, staging made, one Spark job and its commits, results."""

    def __init__(self, io: Tables, names: list[str], o: RoutedWriteOptions) -> None:
        self.io, self.names, self.mode, self.staged = io, names, o.mode, set(o.staged)
        self.appended = o.appended or {}
        self.app_id, self.version = o.txn_app_id, o.txn_version
        self.options = {
            "route_options": json.dumps(o.route_options or {}),
            "target_file_rows": str(io.conf.delta.target_file_rows),
            "write_mode": o.mode,
            "require_latest": "true" if o.mode == "overwrite" else "false",
            "rows_equal_input": "true" if o.rows_equal_input else "false",
            "expected_rows": "" if o.expected_rows is None else str(o.expected_rows),
            "commit_metadata": json.dumps(o.metadata or {}),
            "side_manifest": o.side_manifest or "",
            "commit_check": o.commit_check or "",
        }

    def run(self, tasks: TaskRows, route: str) -> dict[str, WriteResult]:
        io, names, mode = self.io, self.names, self.mode
        specs = [get_spec(n) for n in names]
        for n in names:
            io.ensure(n)
        before = {n: io.version(n) for n in names}
        app_id, version = self.app_id, self.version
        # a pass that must write its side outputs runs even when the tables carry the marker
        # already (their files are then deleted at the commit): e.g. the replay input
        if (
            app_id is not None
            and version is not None
            and not self.staged
            and not self.options["side_manifest"]
            and all(io.applied(n, app_id, version, latest=mode == "overwrite") for n in names)
        ):
            return {n: WriteResult(n, mode, before[n] or 0, True) for n in names}
        for n in self.staged:
            io.drop_staged(n)
            spec = get_spec(n)
            deltars.create(io.staging_path(n), spec.arrow_schema(), list(spec.partition_by))
        tables = [
            {
                "name": sp.name,
                "path": io.staging_path(sp.name) if sp.name in self.staged else io.path(sp.name),
                "arrow_schema": rust_sink.encode_schema(sp.arrow_schema()),
                "partition_by": list(sp.partition_by),
                "marked": sp.name not in self.staged,
                **({"append": self.appended[sp.name]} if sp.name in self.appended else {}),
            }
            for sp in specs
        ]
        options = {**self.options, "tables": json.dumps(tables), "route": route, "write_mode": mode}
        if app_id is not None and version is not None:
            options.update(txn_app_id=app_id, txn_version=str(version))
        rust_sink.run(tasks, rust_sink.RoutedWriter(options, mode == "overwrite"))
        out = {}
        for n in names:
            if n in self.staged:
                continue
            after = io.version(n) or 0
            rows = deltars.rows_of_latest_commit(io.path(n)) if after != before[n] else None
            out[n] = WriteResult(n, "append" if n in self.appended else mode, after, after == before[n], rows)
        return out
