"""Table IO: the only module that knows how Delta tables are written and read.

Rules:
- Every table is declared in ``schemas/`` and lives at ``<paths.warehouse>/<name>``. Callers pass
  DataFrames; this module selects the declared columns in declared order and casts them to the
  declared types (a missing or extra column is an error naming the table).
- Two engines, one behaviour (DESIGN §3). ``delta.engine: auto`` = Spark's Delta when its classes
  load (``delta_available``), else ``rust``:
    spark: ``format("delta")`` writes with Delta's own idempotent-write options
           (``txnAppId``/``txnVersion``), ``DeltaTable.merge``.
    rust:  executors write Parquet files through the Python data source in
           ``pipelines.delta_rs_sink`` and the driver commits them once with delta-rs; MERGE goes
           through delta-rs with an Arrow source collected on the driver (only for current-state
           tables: one row per group or per group-partition — small by construction).
- Idempotence. ``append(..., txn_app_id, txn_version)`` is skipped when the table's Delta ``txn``
  for that app id is already ``>= txn_version`` (a retried batch never duplicates rows).
  ``overwrite``/``merge`` with a marker are skipped when the table's latest commit carries exactly
  that marker. MERGE only rewrites rows whose values changed, so a MERGE of identical data
  commits nothing and leaves the table version unchanged.
- Reading back: ``read(name)`` respects the current snapshot on both engines (rust: the
  snapshot's file list, not a directory listing; an empty table yields an empty DataFrame with
  the declared schema; a table another engine wrote with deletion vectors or column mapping is
  read by delta-rs itself, through the driver).
- Table metadata (version, txn, history, row counts) is read with delta-rs on both engines: it
  reads any Delta table's log without a Spark job.
"""

from __future__ import annotations

import contextlib
import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pipelines import delta_rs_sink
from pipelines.errors import UsageError
from schemas import TableSpec
from schemas import get as get_spec

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.config import Config

log = logging.getLogger(__name__)

Engine = Literal["spark", "rust"]


@dataclass(frozen=True)
class WriteResult:
    """What a write did: the table version after it and whether it was skipped as a duplicate."""

    table: str
    operation: str
    version: int
    skipped: bool
    rows: int | None = None  # rows written (append/overwrite) or affected (merge), when known
    metrics: dict[str, Any] | None = None


def resolve_engine(requested: str, spark: SparkSession | None) -> Engine:
    """``auto`` → ``spark`` when Delta's Spark classes load, else ``rust``."""
    from pipelines.spark_session import delta_available

    if requested == "rust":
        return "rust"
    has_delta = spark is not None and delta_available(spark)
    if requested == "spark":
        if not has_delta:
            raise UsageError(
                "delta.engine: spark needs Delta Lake's jars on the classpath (spark-submit --packages "
                "io.delta:delta-spark_2.13:<version>); use delta.engine: auto or rust without them"
            )
        return "spark"
    return "spark" if has_delta else "rust"


def conform(df: DataFrame, spec: TableSpec) -> DataFrame:
    """Select ``spec``'s columns in order, cast to the declared types; missing/extra → error."""
    from pyspark.sql import functions as F

    have = df.columns
    missing = [c for c in spec.column_names if c not in have]
    extra = [c for c in have if c not in spec.column_names]
    if missing or extra:
        parts = []
        if missing:
            parts.append("missing " + ", ".join(missing))
        if extra:
            parts.append("unexpected " + ", ".join(extra))
        raise ValueError(f"table {spec.name}: DataFrame does not match schemas/: {'; '.join(parts)}")
    target = {f.name: f.dataType for f in spec.spark_schema().fields}
    current = {f.name: f.dataType for f in df.schema.fields}
    cols = []
    for name in spec.column_names:
        if _same_type(current[name], target[name]):
            cols.append(F.col(name))
        else:
            cols.append(F.col(name).cast(target[name]).alias(name))
    return df.select(*cols)


def conform_arrow(table: pa.Table, spec: TableSpec) -> pa.Table:
    """``conform`` for a pyarrow Table: the declared columns in order, cast; missing/extra → error."""
    have = table.column_names
    missing = [c for c in spec.column_names if c not in have]
    extra = [c for c in have if c not in spec.column_names]
    if missing or extra:
        raise ValueError(f"table {spec.name}: Arrow table does not match schemas/: missing {missing}, "
                         f"unexpected {extra}")
    return table.select(list(spec.column_names)).cast(spec.arrow_schema())


def _same_type(a: Any, b: Any) -> bool:
    """Type equality ignoring nullability (Spark's containsNull/valueContainsNull/nullable)."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return _same_type(a.elementType, b.elementType)
    if isinstance(a, MapType) and isinstance(b, MapType):
        return _same_type(a.keyType, b.keyType) and _same_type(a.valueType, b.valueType)
    if isinstance(a, StructType) and isinstance(b, StructType):
        return len(a.fields) == len(b.fields) and all(
            fa.name == fb.name and _same_type(fa.dataType, fb.dataType) for fa, fb in zip(a.fields, b.fields)
        )
    return bool(a == b)


class TableIO:
    """Read and write the platform's Delta tables (see the module docstring for the rules).

    Args:
        conf: the loaded config (``paths.warehouse``, ``delta.*``).
        spark: the session; ``None`` allows metadata-only use (``version``, ``exists``, ``count``).
        engine: override ``delta.engine`` (tests).
    """

    def __init__(self, conf: Config, spark: SparkSession | None, *, engine: str | None = None) -> None:
        self.conf = conf
        self.spark = spark
        self.warehouse = conf.paths.warehouse
        self.engine: Engine = resolve_engine(engine or conf.delta.engine, spark)
        if self.engine == "rust" and spark is not None:
            delta_rs_sink.register(spark)
        self._run_id: str | None = None

    @property
    def run_id(self) -> str:
        """This run's id: the warehouse lock's when this process holds it (its staging
        directory is ``_staging/<run id>``), else one of its own."""
        from pipelines.warehouse_lock import current_run_id, new_run_id

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
        from deltalake import DeltaTable

        return bool(DeltaTable.is_deltatable(self.path(name)))

    def _dt(self, name: str) -> Any:
        from deltalake import DeltaTable

        if not self.exists(name):
            raise UsageError(f"table {name} does not exist at {self.path(name)} (run the batch job first)")
        return DeltaTable(self.path(name))

    def version(self, name: str) -> int | None:
        """The table's current version, or ``None`` when it does not exist."""
        return int(self._dt(name).version()) if self.exists(name) else None

    def txn_version(self, name: str, app_id: str) -> int | None:
        """The Delta ``txn`` version recorded for ``app_id`` (``None`` if never written)."""
        if not self.exists(name):
            return None
        v = self._dt(name).transaction_version(app_id)
        return None if v is None else int(v)

    def count(self, name: str) -> int:
        """Row count from the Delta log (sum of ``numRecords``), no data scan."""
        return int(self._dt(name).count()) if self.exists(name) else 0

    def history(self, name: str, limit: int | None = None) -> list[dict[str, Any]]:
        return [dict(h) for h in self._dt(name).history(limit)]

    def list_tables(self) -> list[str]:
        """Names of the Delta tables present under the warehouse (sorted)."""
        from pyarrow import fs

        filesystem, root = delta_rs_sink._filesystem(self.warehouse)
        try:
            infos = filesystem.get_file_info(fs.FileSelector(root, recursive=False))
        except (FileNotFoundError, OSError):
            return []
        names = sorted(i.base_name for i in infos if i.type == fs.FileType.Directory)
        return [n for n in names if self.exists(n)]

    # ---- create -----------------------------------------------------------------------------
    def ensure(self, name: str) -> None:
        """Create the table (empty, declared schema) if it does not exist yet."""
        if self.exists(name):
            return
        spec = get_spec(name)
        if self.engine == "spark":
            from delta.tables import DeltaTable as SparkDeltaTable

            assert self.spark is not None
            builder = (
                SparkDeltaTable.createIfNotExists(self.spark)
                .location(self.path(name))
                .addColumns(spec.spark_schema())
                .comment(spec.doc)
            )
            if spec.partition_by:
                builder = builder.partitionedBy(*spec.partition_by)
            builder.execute()
            return
        from deltalake import DeltaTable

        DeltaTable.create(
            self.path(name),
            schema=spec.arrow_schema(),
            mode="ignore",
            partition_by=list(spec.partition_by) or None,
            name=name,
            description=spec.doc.strip() or None,
        )

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
        require_latest = mode == "overwrite"
        if app_id is not None and version is not None and self._applied(name, app_id, version, require_latest):
            log.info("%s: %s skipped, already applied (%s, %s)", name, mode, app_id, version)
            return WriteResult(name, mode, self.version(name) or 0, True)
        before = self.version(name)
        if self.engine == "spark":
            writer = data.write.format("delta").mode(mode)
            if app_id is not None:
                writer = writer.option("txnAppId", app_id).option("txnVersion", str(version))
            writer = writer.option("userMetadata", json.dumps(_marker(app_id, version, metadata)))
            if spec.partition_by:
                writer = writer.partitionBy(*spec.partition_by)
            writer.save(self.path(name))
        else:
            writer = (
                data.write.format(delta_rs_sink.FORMAT_NAME)
                .mode(mode)
                .option("path", self.path(name))
                .option("arrow_schema", delta_rs_sink.encode_schema(spec.arrow_schema()))
                .option("partition_by", ",".join(spec.partition_by))
                .option("target_file_rows", str(self.conf.delta.target_file_rows))
                .option("write_mode", mode)
                .option("require_latest", "true" if require_latest else "false")
                .option("commit_metadata", json.dumps(metadata or {}))
            )
            if app_id is not None:
                writer = writer.option("txn_app_id", app_id).option("txn_version", str(version))
            writer.save()
        after = self.version(name) or 0
        rows = None
        if after != before and self.engine == "rust":
            info = delta_rs_sink.latest_commit_info(self._dt(name))
            rows = int(info["offsetlake.rows"]) if "offsetlake.rows" in info else None
        return WriteResult(name, mode, after, after == before, rows)

    def write_routed(
        self,
        names: list[str] | tuple[str, ...],
        df: DataFrame,
        route: str,
        *,
        route_options: dict[str, Any] | None = None,
        txn_app_id: str | None = None,
        txn_version: int | None = None,
        rows_equal_input: bool = False,
        expected_rows: int | None = None,
        mode: Literal["append", "overwrite"] = "overwrite",
        staged: tuple[str, ...] | list[str] = (),
        metadata: dict[str, Any] | None = None,
        side_manifest: str | None = None,
        commit_check: str | None = None,
    ) -> dict[str, WriteResult]:
        """Write the tables ``names`` in ONE pass over ``df`` (rust engine; default: replace them).

        Each task passes its Arrow batches through ``route`` (``"module:function"``, called as
        ``route(batch, route_options)``, yielding ``({table name: pa.Table}, input records
        consumed)``) and writes every table's files; the driver then commits each table once
        (with the marker, when given). With
        ``rows_equal_input`` the routed rows must add up to the input rows or nothing is
        committed; with ``expected_rows`` the input must have exactly that many rows. Tables in
        ``staged`` are written to a fresh unmarked staging table instead (``staging_path``; read it
        with ``read_staged``, drop it with ``drop_staged``) — e.g. rows a caller MERGEs next. Tables already carrying the marker are left alone (their files are deleted).
        ``side_manifest``: where the commit lists what the routes wrote beside the tables
        (``delta_rs_sink.SIDE_KEY``), e.g. the replay spool the decode writes in the same pass.
        ``commit_check`` (``module:function``): may refuse the commit after seeing the routes'
        side outputs (the error then contains ``delta_rs_sink.COMMIT_REFUSED``).
        The spark engine has no multi-table writer: callers use one ``overwrite`` per table.
        """
        if self.engine != "rust":
            raise ValueError("write_routed needs the rust engine (use overwrite per table on the spark engine)")
        specs = [get_spec(n) for n in names]
        for n in names:
            self.ensure(n)
        before = {n: self.version(n) for n in names}
        replace = mode == "overwrite"
        marked = txn_app_id is not None and txn_version is not None
        # a pass that must write its side outputs runs even when the tables carry the marker already
        # (their files are then deleted at the commit)
        if marked and not staged and not side_manifest and all(
                self._applied(n, txn_app_id, txn_version, replace) for n in names):  # type: ignore[arg-type]
            return {n: WriteResult(n, mode, before[n] or 0, True) for n in names}
        for n in staged:
            self._create_staging(n)
        tables = [
            {"name": sp.name, "path": self.staging_path(sp.name) if sp.name in staged else self.path(sp.name),
             "arrow_schema": delta_rs_sink.encode_schema(sp.arrow_schema()), "partition_by": list(sp.partition_by),
             "marked": sp.name not in staged}
            for sp in specs
        ]
        writer = (
            df.write.format(delta_rs_sink.MULTI_FORMAT_NAME)
            .mode(mode)
            .option("tables", json.dumps(tables))
            .option("route", route)
            .option("route_options", json.dumps(route_options or {}))
            .option("target_file_rows", str(self.conf.delta.target_file_rows))
            .option("write_mode", mode)
            .option("require_latest", "true" if replace else "false")
            .option("rows_equal_input", "true" if rows_equal_input else "false")
            .option("expected_rows", "" if expected_rows is None else str(expected_rows))
            .option("commit_metadata", json.dumps(metadata or {}))
            .option("side_manifest", side_manifest or "")
            .option("commit_check", commit_check or "")
        )
        if marked:
            writer = writer.option("txn_app_id", txn_app_id).option("txn_version", str(txn_version))
        writer.save()
        out = {}
        for n in names:
            if n in staged:
                continue
            after = self.version(n) or 0
            rows = None
            if after != before[n]:
                info = delta_rs_sink.latest_commit_info(self._dt(n))
                rows = int(info["offsetlake.rows"]) if "offsetlake.rows" in info else None
            out[n] = WriteResult(n, mode, after, after == before[n], rows)
        return out

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
        arrow_source = None
        if not hasattr(df, "toArrow"):  # a pyarrow Table (small, already on the driver)
            arrow_source = conform_arrow(df, spec)
            if self.engine == "spark":
                assert self.spark is not None
                df = self.spark.createDataFrame(arrow_source, spec.spark_schema())
        data = conform(df, spec) if arrow_source is None or self.engine == "spark" else None
        self.ensure(name)
        if txn_app_id is not None and txn_version is not None and self._applied(
            name, txn_app_id, txn_version, True
        ):
            return WriteResult(name, "merge", self.version(name) or 0, True)
        before = self.version(name)
        on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in keys)
        changed = " OR ".join(f"(t.`{c}` IS DISTINCT FROM s.`{c}`)" for c in spec.column_names if c not in keys)
        metrics: dict[str, Any] = {}
        if self.engine == "spark":
            from delta.tables import DeltaTable as SparkDeltaTable

            assert self.spark is not None
            session_conf = {}
            if txn_app_id is not None and txn_version is not None:
                # Delta's idempotent DML (SQL confs, Delta >= 2.3) + our marker in commitInfo
                session_conf = {
                    "spark.databricks.delta.write.txnAppId": txn_app_id,
                    "spark.databricks.delta.write.txnVersion": str(txn_version),
                    "spark.databricks.delta.commitInfo.userMetadata": json.dumps(
                        _marker(txn_app_id, txn_version, None)
                    ),
                }
            for key, value in session_conf.items():
                self.spark.conf.set(key, value)
            assert data is not None
            m = (
                SparkDeltaTable.forPath(self.spark, self.path(name)).alias("t")
                .merge(data.alias("s"), on)
                .whenMatchedUpdateAll(condition=changed or None)
                .whenNotMatchedInsertAll()
            )
            if delete_missing:
                m = m.whenNotMatchedBySourceDelete()
            try:
                m.execute()
            finally:
                for key in session_conf:
                    self.spark.conf.unset(key)
        else:
            from deltalake import CommitProperties, Transaction

            if arrow_source is not None:
                source = arrow_source
            else:
                assert data is not None
                source = data.toArrow().cast(spec.arrow_schema())
            props = None
            if txn_app_id is not None and txn_version is not None:
                props = CommitProperties(
                    custom_metadata=_marker(txn_app_id, txn_version, None),
                    app_transactions=[Transaction(txn_app_id, txn_version)],
                )
            builder = self._dt(name).merge(
                source, predicate=on, source_alias="s", target_alias="t", commit_properties=props
            )
            builder = builder.when_matched_update_all(predicate=changed or None).when_not_matched_insert_all()
            if delete_missing:
                builder = builder.when_not_matched_by_source_delete()
            metrics = dict(builder.execute())
        after = self.version(name) or 0
        affected = None
        if metrics:
            affected = int(
                metrics.get("num_target_rows_inserted", 0)
                + metrics.get("num_target_rows_updated", 0)
                + metrics.get("num_target_rows_deleted", 0)
            )
        return WriteResult(name, "merge", after, after == before, affected, metrics or None)

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
        deleted: int | None = None
        if self.engine == "spark":
            from delta.tables import DeltaTable as SparkDeltaTable

            assert self.spark is not None
            SparkDeltaTable.forPath(self.spark, self.path(name)).alias("t").merge(
                self.spark.createDataFrame(source).alias("s"), on).whenMatchedDelete().execute()
        else:
            from deltalake import CommitProperties, Transaction

            props = None
            if txn_app_id is not None and txn_version is not None:
                props = CommitProperties(custom_metadata=_marker(txn_app_id, txn_version, None),
                                         app_transactions=[Transaction(txn_app_id, txn_version)])
            metrics = (
                self._dt(name).merge(source, predicate=on, source_alias="s", target_alias="t",
                                     commit_properties=props)
                .when_matched_delete()
                .execute()
            )
            deleted = int(metrics.get("num_target_rows_deleted", 0))
        after = self.version(name) or 0
        return WriteResult(name, "delete", after, after == before, deleted)

    def _applied(self, name: str, app_id: str, version: int, require_latest: bool) -> bool:
        if self.engine == "spark" and not require_latest:
            return False  # Delta's txnAppId/txnVersion options skip the duplicate themselves
        return delta_rs_sink.already_applied(self._dt(name), app_id, version, require_latest=require_latest)

    # ---- staging (rust engine) ------------------------------------------------------------------
    def staging_path(self, name: str) -> str:
        """Where a routed write stages ``name``'s rows: ``_staging/<run id>/<name>`` under the
        warehouse, so two runs never share a staging directory (``pipelines.warehouse_lock``
        removes the ones a dead run left)."""
        from pipelines.config import join_path

        return join_path(join_path(join_path(self.warehouse, "_staging"), self.run_id), name)

    def _create_staging(self, name: str) -> None:
        from deltalake import DeltaTable

        self.drop_staged(name)
        spec = get_spec(name)
        DeltaTable.create(self.staging_path(name), schema=spec.arrow_schema(),
                          partition_by=list(spec.partition_by) or None)

    def read_staged(self, name: str) -> Any:
        """The staged rows of ``name`` as an Arrow table (declared schema)."""
        from deltalake import DeltaTable

        spec = get_spec(name)
        table = DeltaTable(self.staging_path(name)).to_pyarrow_table()
        return table.select(list(spec.column_names)).cast(spec.arrow_schema())

    def drop_staged(self, name: str) -> None:
        """Delete ``name``'s staging table (files and log), if any."""
        from pyarrow import fs

        filesystem, root = delta_rs_sink._filesystem(self.staging_path(name))
        if filesystem.get_file_info(root).type != fs.FileType.NotFound:
            filesystem.delete_dir(root)
        parent = root.rsplit("/", 1)[0]
        for _ in range(2):  # the run's directory, then ``_staging`` itself, when empty
            with contextlib.suppress(OSError):
                if not filesystem.get_file_info(fs.FileSelector(parent, allow_not_found=True)):
                    filesystem.delete_dir(parent)
            parent = parent.rsplit("/", 1)[0]

    # ---- reads ------------------------------------------------------------------------------
    def snapshot_files(self, name: str) -> list[str] | None:
        """The data files of the table's current snapshot, when they ARE the snapshot.

        ``None`` when a reader needs more than the file list (spark engine's own log semantics,
        deletion vectors, column mapping, partition columns kept out of the files): read the
        table with ``read`` then.
        """
        if self.engine != "rust" or not self.exists(name) or get_spec(name).partition_by:
            return None
        dt = self._dt(name)
        proto = dt.protocol()
        if proto.min_reader_version >= 2 or set(proto.reader_features or ()) & {"deletionVectors", "columnMapping"}:
            return None
        return list(dt.file_uris())

    def read(self, name: str, version: int | None = None) -> DataFrame:
        """The table as a DataFrame at its current snapshot (or ``version``), declared column order."""
        assert self.spark is not None, "TableIO.read needs a SparkSession"
        spec = get_spec(name)
        if not self.exists(name):
            raise UsageError(f"table {name} does not exist at {self.path(name)} (run the batch job first)")
        if self.engine == "spark":
            reader = self.spark.read.format("delta")
            if version is not None:
                reader = reader.option("versionAsOf", version)
            return reader.load(self.path(name)).select(*spec.column_names)
        from deltalake import DeltaTable

        dt = DeltaTable(self.path(name), version=version)
        schema = spec.spark_schema()
        proto = dt.protocol()
        if proto.min_reader_version >= 2 or set(proto.reader_features or ()) & {"deletionVectors", "columnMapping"}:
            # Written by another engine with deletion vectors / column mapping: the file list alone
            # is not the snapshot. delta-rs applies them; the rows pass through the driver.
            log.warning("%s: reader features %s: reading through delta-rs on the driver", name,
                        proto.reader_features)
            table = dt.to_pyarrow_table().select(list(spec.column_names)).cast(spec.arrow_schema())
            return self.spark.createDataFrame(table, schema=schema)
        files = dt.file_uris()
        if not files:
            return self.spark.createDataFrame([], schema)
        reader = self.spark.read.schema(schema)
        if spec.partition_by:
            reader = reader.option("basePath", self.path(name))
        return reader.parquet(*files).select(*spec.column_names)

    # ---- maintenance --------------------------------------------------------------------------
    def optimize(self, name: str) -> dict[str, Any]:
        """Compact small files (OPTIMIZE)."""
        if self.engine == "spark":
            from delta.tables import DeltaTable as SparkDeltaTable

            assert self.spark is not None
            SparkDeltaTable.forPath(self.spark, self.path(name)).optimize().executeCompaction()
            return {"version": self.version(name)}
        return dict(self._dt(name).optimize.compact())

    def vacuum(self, name: str, retention_hours: int | None = None, *, dry_run: bool = False) -> list[str]:
        """Delete files no longer referenced and older than the retention (VACUUM)."""
        hours = self.conf.delta.vacuum_retention_hours if retention_hours is None else retention_hours
        if self.engine == "spark" and not dry_run:
            from delta.tables import DeltaTable as SparkDeltaTable

            assert self.spark is not None
            SparkDeltaTable.forPath(self.spark, self.path(name)).vacuum(float(hours))
            return []
        return list(
            self._dt(name).vacuum(retention_hours=hours, dry_run=dry_run, enforce_retention_duration=False)
        )


def _marker(app_id: str | None, version: int | None, extra: dict[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = dict(extra or {})
    if app_id is not None:
        out[delta_rs_sink.MARKER_APP] = app_id
        out[delta_rs_sink.MARKER_VERSION] = version
    return out
