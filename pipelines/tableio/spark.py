"""The spark engine: Spark's own Delta (``delta-spark``) writes, merges and reads the tables.

Rules:
- Used when Delta's Spark classes load (``delta.engine: auto`` or ``spark``; DESIGN §3).
- Appends and replacements use ``format("delta")`` with Delta's idempotent-write options
  (``txnAppId``/``txnVersion``): Delta itself skips a duplicate append, so ``TableIO`` checks no
  append marker first (``checks_append_marker = False``). The marker also goes to the commit's
  ``userMetadata`` JSON, which ``deltars.latest_commit_info`` reads back.
- MERGE is ``DeltaTable.merge``; a marked MERGE sets Delta's idempotent-DML SQL confs (Delta >=
  2.3) for that one statement.
- A routed write (several tables in one pass) runs the same routes as the rust engine, as a
  persisted ``mapInArrow`` pass (``pipelines.tableio.routed``); the driver makes the same checks
  (counts, side outputs, ``commit_check``), writes the side manifest, then writes each table with
  Spark's Delta (one commit per table, skipped when it carries the marker already; staged tables
  unmarked under the staging path).
- Snapshot files: delta-rs reads the table's log (any Delta table): the files are the snapshot
  unless the table uses deletion vectors or column mapping.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pipelines.tableio import deltars
from pipelines.tableio.base import EngineName, WriteMode, WriteResult, before_commit

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.tableio import TableIO
    from schemas import TableSpec


class SparkEngine:
    """``base.Engine`` on Spark's Delta."""

    name: EngineName = "spark"
    checks_append_marker = False

    def __init__(self, io: TableIO, spark: SparkSession | None) -> None:
        if spark is None:
            raise ValueError("the spark engine needs a SparkSession")
        self.io = io
        self.spark = spark

    def _table(self, uri: str) -> Any:
        from delta.tables import DeltaTable

        return DeltaTable.forPath(self.spark, uri)

    def create(self, uri: str, spec: TableSpec) -> None:
        from delta.tables import DeltaTable

        builder = (
            DeltaTable.createIfNotExists(self.spark).location(uri).addColumns(spec.spark_schema()).comment(spec.doc)
        )
        if spec.partition_by:
            builder = builder.partitionedBy(*spec.partition_by)
        before_commit(uri)
        builder.execute()

    def add_columns(self, uri: str, spec: TableSpec, names: list[str]) -> None:
        cols = {c.name: c for c in spec.columns}
        ddl = ", ".join(f"`{n}` {cols[n].type}" for n in names)
        before_commit(uri)
        self.spark.sql(f"ALTER TABLE delta.`{uri}` ADD COLUMNS ({ddl})")

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
        writer = data.write.format("delta").mode(mode)
        if app_id is not None:
            writer = writer.option("txnAppId", app_id).option("txnVersion", str(version))
        writer = writer.option("userMetadata", json.dumps(deltars.marker(app_id, version, metadata)))
        if spec.partition_by:
            writer = writer.partitionBy(*spec.partition_by)
        before_commit(uri)
        writer.save(uri)

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
        if hasattr(source, "toArrow"):
            data = source
        elif source.num_rows == 0:  # PySpark 4.2 cannot convert an Arrow table of no chunks
            data = self.spark.createDataFrame([], spec.spark_schema())
        else:
            data = self.spark.createDataFrame(source, spec.spark_schema())
        session_conf = {}
        if app_id is not None and version is not None:
            # Delta's idempotent DML (SQL confs, Delta >= 2.3) + our marker in commitInfo
            session_conf = {
                "spark.databricks.delta.write.txnAppId": app_id,
                "spark.databricks.delta.write.txnVersion": str(version),
                "spark.databricks.delta.commitInfo.userMetadata": json.dumps(deltars.marker(app_id, version)),
            }
        for key, value in session_conf.items():
            self.spark.conf.set(key, value)
        m = (
            self._table(uri)
            .alias("t")
            .merge(data.alias("s"), on)
            .whenMatchedUpdateAll(condition=changed)
            .whenNotMatchedInsertAll()
        )
        if delete_missing:
            m = m.whenNotMatchedBySourceDelete()
        try:
            before_commit(uri)
            m.execute()
        finally:
            for key in session_conf:
                self.spark.conf.unset(key)
        return {}

    def delete_keys(self, uri: str, keys: pa.Table, *, on: str, app_id: str | None, version: int | None) -> int | None:
        before_commit(uri)
        self._table(uri).alias("t").merge(self.spark.createDataFrame(keys).alias("s"), on).whenMatchedDelete().execute()
        return None

    def read(self, uri: str, spec: TableSpec, version: int | None) -> DataFrame:
        reader = self.spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return reader.load(uri).select(*spec.column_names)

    def snapshot_files(self, uri: str, spec: TableSpec, version: int | None = None) -> list[str] | None:
        if spec.partition_by or not deltars.is_table(uri):
            return None
        dt = deltars.open_table(uri, version)
        return deltars.data_files(dt) if deltars.file_list_is_snapshot(dt) else None

    def write_routed(self, names: list[str], df: DataFrame, route: str, **options: Any) -> dict[str, WriteResult]:
        """``TableIO.write_routed`` (its docstring has the options) with Spark's Delta."""
        from pipelines.tableio import uri as uris
        from pipelines.tableio.base import COMMIT_REFUSED
        from pipelines.tableio.routed import routed_frames
        from pipelines.tableio.rust_sink import load_route
        from schemas import get as get_spec

        if options.get("appended"):  # its routes hand over whole files (ParquetFileCopy)
            raise ValueError("write_routed(appended=...) is the rust engine's: its tasks copy the files")
        route_options: dict[str, Any] = options.get("route_options") or {}
        txn_app_id, txn_version = options.get("txn_app_id"), options.get("txn_version")
        mode: WriteMode = options.get("mode", "overwrite")
        staged = set(options.get("staged", ()))
        commit_check, side_manifest = options.get("commit_check"), options.get("side_manifest")

        io = self.io
        before = {n: io.version(n) for n in names}
        out = routed_frames(df, route, route_options, list(names))
        try:
            # the check first, as the rust engine does
            refused = load_route(commit_check)(out.side, route_options) if commit_check else None
            if refused:
                raise RuntimeError(f"{COMMIT_REFUSED}: {refused}")
            problem = out.problem(
                rows_equal_input=bool(options.get("rows_equal_input")), expected_rows=options.get("expected_rows")
            )
            if problem is not None:
                raise RuntimeError(f"count mismatch, nothing committed: {problem}")
            if side_manifest:  # saved before the tables are committed, as the rust engine does
                filesystem, inner = uris.filesystem(side_manifest)
                with filesystem.open_output_stream(inner) as fh:
                    fh.write(json.dumps(out.side, separators=(",", ":")).encode())
            results = {}
            for name in names:
                spec = get_spec(name)
                if name in staged:
                    io.drop_staged(name)
                    self.write(io.staging_path(name), spec, out.frames[name], "overwrite", None, None, None)
                    continue
                marked = txn_app_id is not None and txn_version is not None
                if marked and io.applied(name, txn_app_id, txn_version, latest=mode == "overwrite"):  # type: ignore[arg-type]
                    results[name] = WriteResult(name, mode, before[name] or 0, True)
                    continue
                self.write(
                    io.path(name), spec, out.frames[name], mode, txn_app_id, txn_version, options.get("metadata")
                )
                results[name] = WriteResult(name, mode, io.version(name) or 0, False, out.rows_out[name])
            return results
        finally:
            out.packed.unpersist()

    def optimize(self, uri: str) -> dict[str, Any]:
        before_commit(uri)
        self._table(uri).optimize().executeCompaction()
        return {"version": deltars.open_table(uri).version()}

    def vacuum(self, uri: str, retention_hours: int, dry_run: bool) -> list[str]:
        if dry_run:  # Spark's VACUUM DRY RUN returns no list: delta-rs lists the same files
            return deltars.vacuum(uri, retention_hours, dry_run=True)
        before_commit(uri)
        # the retention is the config's (or --retention-hours): as delta-rs (enforce_retention_duration
        # off), Spark's Delta takes it as given instead of refusing one under its 168 h default
        check = "spark.databricks.delta.retentionDurationCheck.enabled"
        before = self.spark.conf.get(check, None)
        self.spark.conf.set(check, "false")
        try:
            self._table(uri).vacuum(float(retention_hours))
        finally:
            if before is None:
                self.spark.conf.unset(check)
            else:
                self.spark.conf.set(check, before)
        return []
