"""The spark engine: Spark's own Delta (``delta-spark``) writes, merges and reads the tables.

Rules:
- Used when Delta's Spark classes load (``delta.engine: auto`` or ``spark``; ARCHITECTURE.md,
  "One path per stage").
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
- Delta's state reconstruction (the file list every MERGE, DELETE, OPTIMIZE needs, recomputed for
  each new table version) is a Spark job over ``spark.databricks.delta.snapshotPartitions``
  partitions, 50 by default: on the platform's small tables (a few files each) that was most of
  the engine's time (50 tasks per MERGE; seconds each, minutes under the stream's concurrent
  MERGEs). Unless the user set it, the engine sets it to the session's default parallelism
  (at most 50).
- VACUUM lists the table in ``spark.sql.sources.parallelPartitionDiscovery.parallelism``
  partitions (Spark's default: 10000 tasks, each of its counts over the listing): left at the
  default, the engine scopes it to the snapshot partitions for the VACUUM. VACUUM is skipped
  when the table holds nothing it could delete (a driver-side listing against the snapshot's
  files), OPTIMIZE when the table has fewer than two files.
- Marked MERGEs carry their txn and marker in session-wide SQL confs (Spark's Delta has no
  per-statement option for them): the engine's commits (writes, MERGEs, deletes) run one at a
  time in a process (``_DML_LOCK``), so a concurrent writer (the stream's sinks write tables side
  by side) never commits under another's marker nor has its own unset by another (which failed
  the stream: ``DELTA_INVALID_IDEMPOTENT_WRITES_OPTIONS``).
- A routed table is written in one file per ``delta.target_file_rows`` rows (the pass counted
  them), not one per task.
- A MERGE into a table without data files (just created) is its insert clause: an append with
  the same txn and marker, skipping the state reconstruction and the scan for matches; a key
  delete on such a table commits nothing.
- No Spark write for rows known to be none (a routed table the pass gave no rows, an empty Arrow
  MERGE source, a frame whose plan holds at most 0 rows): Spark's file writer always writes one
  file from its first task, empty when the rows are none, and Delta leaves an empty file out of
  its commit (its ``add`` dropped) but on disk, a file no log mentions. Such a write commits what
  the rust engine commits for it instead, through the same delta-rs commit
  (``deltars.commit_files`` without files): the table created first, then the txn and marker
  alone (an overwrite also removes the table's files); an unmarked append commits nothing; an
  empty MERGE source changes nothing (no commit) unless it deletes the missing rows, then every
  row (a replacement by nothing, with the marker).
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

from pipelines import uri as uris
from pipelines.runtime.spark_session import session_conf
from pipelines.tableio import deltars
from pipelines.tableio.base import (
    COMMIT_REFUSED,
    EngineName,
    RoutedWriteOptions,
    Tables,
    WriteMode,
    WriteResult,
    before_commit,
)
from pipelines.tableio.routed import routed_frames
from pipelines.tableio.rust_sink import load_route
from schemas import get as get_spec

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.tableio.task_rows import TaskRows
    from schemas import TableSpec

#: Delta's state reconstruction partitions (a SQL conf; Delta's default: 50)
SNAPSHOT_PARTITIONS = "spark.databricks.delta.snapshotPartitions"
#: the partitions of Spark's parallel file listings, VACUUM's listing of a table among them
LISTING_PARALLELISM = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
SPARK_LISTING_PARALLELISM = "10000"  # Spark's default
#: one marked DML at a time per process: its txn and marker are session-wide SQL confs
_DML_LOCK = threading.Lock()


def snapshot_partitions(spark: SparkSession) -> int:
    """The state reconstruction's partitions for this session: its default parallelism, 1..50."""
    return max(1, min(50, int(spark.sparkContext.defaultParallelism)))


class SparkEngine:
    """``base.Engine`` on Spark's Delta."""

    name: EngineName = "spark"
    checks_append_marker = False

    def __init__(self, io: Tables, spark: SparkSession | None) -> None:
        if spark is None:
            raise ValueError("the spark engine needs a SparkSession")
        self.io = io
        self.spark = spark
        if spark.conf.get(SNAPSHOT_PARTITIONS, None) is None:  # the user's value wins
            spark.conf.set(SNAPSHOT_PARTITIONS, str(snapshot_partitions(spark)))

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
        if _holds_no_rows(data):  # no empty file for Delta to leave out of its commit
            self._commit_without_rows(uri, spec, mode, app_id, version, metadata)
            return
        writer = data.write.format("delta").mode(mode)
        if app_id is not None:
            writer = writer.option("txnAppId", app_id).option("txnVersion", str(version))
        writer = writer.option("userMetadata", json.dumps(deltars.marker(app_id, version, metadata)))
        if spec.partition_by:
            writer = writer.partitionBy(*spec.partition_by)
        with _DML_LOCK:  # never under a concurrent marked MERGE's session confs
            before_commit(uri)
            writer.save(uri)

    def append_arrow(self, uri: str, spec: TableSpec, table: pa.Table, app_id: str | None, version: int | None) -> None:
        data = self.spark.createDataFrame(table, schema=spec.spark_schema())
        self.write(uri, spec, data, "append", app_id, version, None)

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
        if source.num_rows == 0 if not hasattr(source, "toArrow") else _holds_no_rows(source):
            # nothing to insert or update (delta-rs's MERGE commits nothing either); Spark's MERGE
            # would write an empty file it leaves out of its commit
            if delete_missing and not _holds_no_files(uri):  # every row is missing: all deleted
                self._commit_without_rows(uri, spec, "overwrite", app_id, version, None)
            return {}
        data = source if hasattr(source, "toArrow") else self.spark.createDataFrame(source, spec.spark_schema())
        if _holds_no_files(uri):
            # nothing to match, update or delete: the MERGE is its insert clause, an append (one
            # commit with the same txn and marker, without the state reconstruction and the
            # scan for matches a MERGE runs first)
            # (a driver-side Arrow source is small: one file, not one per default partition)
            self.write(
                uri, spec, data if hasattr(source, "toArrow") else data.coalesce(1), "append", app_id, version, None
            )
            return {}
        session_conf = {}
        if app_id is not None and version is not None:
            # Delta's idempotent DML (SQL confs, Delta >= 2.3) + our marker in commitInfo
            session_conf = {
                "spark.databricks.delta.write.txnAppId": app_id,
                "spark.databricks.delta.write.txnVersion": str(version),
                "spark.databricks.delta.commitInfo.userMetadata": json.dumps(deltars.marker(app_id, version)),
            }
        m = (
            self._table(uri)
            .alias("t")
            .merge(data.alias("s"), on)
            .whenMatchedUpdateAll(condition=changed)
            .whenNotMatchedInsertAll()
        )
        if delete_missing:
            m = m.whenNotMatchedBySourceDelete()
        with _DML_LOCK:
            for key, value in session_conf.items():
                self.spark.conf.set(key, value)
            try:
                before_commit(uri)
                m.execute()
            finally:
                for key in session_conf:
                    self.spark.conf.unset(key)
        return {}

    def _commit_without_rows(
        self,
        uri: str,
        spec: TableSpec,
        mode: WriteMode,
        app_id: str | None,
        version: int | None,
        metadata: dict[str, Any] | None,
    ) -> None:
        """A write of no rows into the existing table at ``uri``, committed as the rust engine
        commits it (module rules): no data file, the txn and marker alone (an overwrite removes
        the table's files; a marker already there: no commit, as Delta's ``txnAppId`` skips a
        duplicate; an unmarked append: no commit)."""
        with _DML_LOCK:  # never beside a marked MERGE's session confs; commit_files checks the lock
            deltars.commit_files(
                uri,
                [],
                schema=spec.arrow_schema(),
                partition_by=list(spec.partition_by),
                overwrite=mode == "overwrite",
                app_id=app_id,
                txn_version=version,
                require_latest=mode == "overwrite",
                metadata=dict(metadata or {}),
            )

    def delete_keys(self, uri: str, keys: pa.Table, *, on: str, app_id: str | None, version: int | None) -> int | None:
        if keys.num_rows == 0 or _holds_no_files(uri):
            return 0  # nothing can match: no commit (as a MERGE deleting nothing changes nothing)
        m = self._table(uri).alias("t").merge(self.spark.createDataFrame(keys).alias("s"), on).whenMatchedDelete()
        with _DML_LOCK:  # no marked DML's session confs while it commits
            before_commit(uri)
            m.execute()
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

    def write_routed(
        self, names: list[str], tasks: TaskRows, route: str, options: RoutedWriteOptions
    ) -> dict[str, WriteResult]:
        """``TableIO.write_routed`` (its docstring has the options) with Spark's Delta."""

        if options.appended:  # its routes hand over whole files (ParquetFileCopy)
            raise ValueError("write_routed(appended=...) is the rust engine's: its tasks copy the files")
        route_options: dict[str, Any] = options.route_options or {}
        txn_app_id, txn_version = options.txn_app_id, options.txn_version
        mode: WriteMode = options.mode
        staged = set(options.staged)
        commit_check, side_manifest = options.commit_check, options.side_manifest

        io = self.io
        before = {n: io.version(n) for n in names}
        out = routed_frames(tasks.frame(), route, route_options, list(names))
        try:
            # the check first, as the rust engine does
            refused = load_route(commit_check)(out.side, route_options) if commit_check else None
            if refused:
                raise RuntimeError(f"{COMMIT_REFUSED}: {refused}")
            problem = out.problem(rows_equal_input=options.rows_equal_input, expected_rows=options.expected_rows)
            if problem is not None:
                raise RuntimeError(f"count mismatch, nothing committed: {problem}")
            if side_manifest:  # saved before the tables are committed, as the rust engine does
                filesystem, inner = uris.filesystem(side_manifest)
                with filesystem.open_output_stream(inner) as fh:
                    fh.write(json.dumps(out.side, separators=(",", ":")).encode())
            results = {}
            for name in names:
                spec = get_spec(name)
                rows = int(out.rows_out.get(name, 0))
                if name in staged:
                    io.drop_staged(name)
                    if rows:
                        self.write(io.staging_path(name), spec, out.frames[name], "overwrite", None, None, None)
                    else:  # an empty staging table, as the rust engine makes it (no Spark write)
                        deltars.create(io.staging_path(name), spec.arrow_schema(), list(spec.partition_by))
                    continue
                marked = txn_app_id is not None and txn_version is not None
                if marked and io.applied(name, txn_app_id, txn_version, latest=mode == "overwrite"):  # type: ignore[arg-type]
                    results[name] = WriteResult(name, mode, before[name] or 0, True)
                    continue
                metadata = options.metadata
                if rows:
                    self.write(io.path(name), spec, self._sized(out, name), mode, txn_app_id, txn_version, metadata)
                else:  # no Spark write: the table created, then the marker alone (as the rust engine)
                    io.ensure(name)
                    self._commit_without_rows(io.path(name), spec, mode, txn_app_id, txn_version, metadata)
                results[name] = WriteResult(name, mode, io.version(name) or 0, False, out.rows_out[name])
            return results
        finally:
            out.packed.unpersist()

    def _sized(self, out: Any, name: str) -> DataFrame:
        """A routed table's rows in one file per ``delta.target_file_rows`` (its row count is
        known from the pass): not one small file per task of the pass, which OPTIMIZE would
        then rewrite and VACUUM delete, each a handful of Spark jobs per table."""
        frame: DataFrame = out.frames[name]
        files = max(1, -(-int(out.rows_out.get(name, 0)) // self.io.conf.delta.target_file_rows))
        return frame.coalesce(files)  # never more partitions than the pass had

    def optimize(self, uri: str) -> dict[str, Any]:
        dt = deltars.open_table(uri)
        if len(dt.file_uris()) < 2:  # nothing to compact: Delta's OPTIMIZE would commit nothing
            return {"version": dt.version()}
        before_commit(uri)
        self._table(uri).optimize().executeCompaction()
        return {"version": deltars.open_table(uri).version()}

    def vacuum(self, uri: str, retention_hours: int, dry_run: bool) -> list[str]:
        if dry_run:  # Spark's VACUUM DRY RUN returns no list: delta-rs lists the same files
            return deltars.vacuum(uri, retention_hours, dry_run=True)
        if not _vacuum_has_candidates(uri):  # nothing it could delete: no state reconstruction
            return []
        before_commit(uri)
        # the retention is the config's (or --retention-hours): as delta-rs (enforce_retention_duration
        # off), Spark's Delta takes it as given instead of refusing one under its 168 h default
        scoped = {"spark.databricks.delta.retentionDurationCheck.enabled": "false"}
        if self.spark.conf.get(LISTING_PARALLELISM, None) in (None, SPARK_LISTING_PARALLELISM):  # unset or Spark's
            # VACUUM repartitions its listing of the table to this many partitions (Spark's
            # default 10000: 10000 tasks, a minute and more per table on two cores)
            scoped[LISTING_PARALLELISM] = str(snapshot_partitions(self.spark))
        with session_conf(self.spark, scoped):
            self._table(uri).vacuum(float(retention_hours))
        return []


def _holds_no_rows(data: DataFrame) -> bool:
    """The frame's optimized plan holds at most 0 rows (an empty Arrow or local relation, a
    filter or LIMIT folded to nothing): known on the driver, no Spark job. A frame that only
    turns out empty when it runs is not seen here."""
    most = data._jdf.queryExecution().optimizedPlan().maxRows()
    return bool(most.isDefined() and int(most.get()) == 0)


def _holds_no_files(uri: str) -> bool:
    """The table's snapshot has no data files (just created, or emptied): read from its log
    with delta-rs, no Spark job."""
    return not deltars.open_table(uri).file_uris()


def _vacuum_has_candidates(uri: str) -> bool:
    """Whether VACUUM could delete something: a file under the table that the snapshot does not
    hold, or a directory holding none of its files (hidden names, ``_…``/``.…`` outside
    partition directories, left out as Delta's VACUUM leaves them). A driver-side listing of the
    table (Delta's VACUUM lists it too, in several Spark jobs)."""
    from pyarrow import fs

    dt = deltars.open_table(uri)
    if not deltars.file_list_is_snapshot(dt):  # deletion vectors' files: Delta decides
        return True
    # relative paths: delta-rs answers locations under its own (resolved) spelling of the root
    base = uris.from_delta_rs(dt.table_uri).rstrip("/") + "/"
    live = {f[len(base) :] if f.startswith(base) else f for f in deltars.data_files(dt)}
    live_dirs = {p.rsplit("/", i)[0] for p in live for i in range(1, p.count("/") + 1)}
    filesystem, root = uris.filesystem(uri)
    root = root.rstrip("/")
    for info in filesystem.get_file_info(fs.FileSelector(root, recursive=True)):
        rel = info.path[len(root) + 1 :]
        if any(p.startswith(("_", ".")) and "=" not in p for p in rel.split("/")):
            continue
        if rel not in (live if info.type == fs.FileType.File else live_dirs):
            return True
    return False
