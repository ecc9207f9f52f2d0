"""The rust engine's writes from Spark: tasks write Parquet files, the driver commits with delta-rs.

Rules:
- ``run(data, writer)``: each Spark task hands its Arrow batches to ``writer.write`` (the driver's
  ``TaskRows`` by Spark's RDD API, a DataFrame's partitions by ``mapInArrow``: no row is converted
  to a JVM row on the way out), which writes Parquet
  files straight into the table directory (rolling at ``target_file_rows``) and returns a message
  listing them (path, size, row count, stats); the messages (one small pickled object per task)
  are collected, and the driver's ``writer.commit`` makes the Delta commit in this process.
  Nothing else funnels through the driver. The writers are plain classes, not Spark Python data
  sources: a data source costs a planner and a commit process (and a lookup at registration) per
  application, ~1.4 s of a fresh process's critical path measured here, for nothing a plain
  Spark job does not give.
- ONE Delta commit per write and table (``deltars.commit_files``:
  ``DeltaTable.create_write_transaction`` (append or overwrite; overwrite removes the previous files
  logically)). A Delta ``txn`` action (app id, version) and ``offsetlake.*`` commit-info keys record
  the idempotency marker. If the marker is already present at commit time (a retried batch racing a
  finished one), the new files are deleted and nothing is committed.
- A refused commit (counts that do not add up, a failed ``commit_check``) deletes the files the
  tasks wrote. A failed task fails the job before any commit: the files other tasks wrote are
  unreferenced, the next run's orphan cleanup removes them (``pipelines.warehouse.lock``), and
  readers never see them because Delta readers only read files named in the log.
- Batches are cast to the table's declared Arrow schema (``schemas/``), so files written here and
  files written by delta-rs MERGE are identical in type. Only string/bytes and 32-bit columns are
  dictionary-encoded (``dictionary_columns``) and 64-bit ones are delta-encoded
  (``delta_columns``): encoding choices, no value changes.
- ``RoutedWriter`` is the same machinery for one pass that feeds several tables: each task
  routes its batches through a ``module:function`` (e.g. the decoder, which splits raw records
  into the five decoded tables), writes every table's files, and the driver commits each table
  once — after checking that the rows add up (nothing is committed if not).
- A route may hand over a whole Parquet file instead of rows (``ParquetFileCopy``: a landing
  file whose schema is already the table's): the task copies its bytes into the table directory
  and takes the stats from the file's footer (reading columns only where the footer lacks them).
- Stats: ``numRecords``, ``nullCount`` of top-level columns and min/max of integer columns (exact, so
  data skipping stays correct). Partition columns (if any) are written Hive-style
  (``col=value/``) and left out of the data files, as the Delta protocol prescribes.
- Every task starts with ``pipelines.runtime.worker_gc.freeze_worker_heap()``.
"""

from __future__ import annotations

import base64
import functools
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from pipelines.runtime.worker_gc import freeze_worker_heap
from pipelines.tableio.base import COMMIT_REFUSED, SIDE_KEY
from pipelines.tableio.deltars import FileAdd, commit_files, delete_files
from pipelines.uri import filesystem

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from pipelines.tableio.task_rows import TaskRows

NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"


# --------------------------------------------------------------------------------------------
# helpers shared by driver and executors


def encode_schema(schema: pa.Schema) -> str:
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


def decode_schema(text: str) -> pa.Schema:
    import pyarrow as pa

    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


def _integer_stats(table: pa.Table) -> tuple[dict[str, Any], dict[str, Any], dict[str, int]]:
    import pyarrow as pa
    import pyarrow.compute as pc

    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for name, column in zip(table.column_names, table.columns):
        nulls[name] = column.null_count
        if pa.types.is_integer(column.type) and column.null_count < len(column):
            mm = pc.min_max(column)
            mins[name] = mm["min"].as_py()
            maxs[name] = mm["max"].as_py()
    return mins, maxs, nulls


def partition_value_string(value: Any) -> str | None:
    """Delta's partition-value serialization for the types we allow as partition columns."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


#: Parquet physical types written with dictionary encoding: strings/bytes and 32-bit values.
#: 64-bit columns (offsets, timestamps, ids: mostly distinct) are not: hashing them cost ~25 % of
#: a decoded table's write for no smaller file (measured: bench/RESULTS.md).
_DICTIONARY_TYPES = frozenset({"BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY", "INT32", "BOOLEAN"})
#: Parquet physical types written DELTA_BINARY_PACKED: 64-bit values. Log offsets and record,
#: commit and state timestamps follow each other closely in log order, so their differences
#: pack into a few bits: 1M offset-commit rows wrote in 95 ms instead of 128 ms, into 6.5 MB
#: instead of 22.5 MB (snappy either way). Readers: Spark >= 3.3, delta-rs, DuckDB, pyarrow.
_DELTA_TYPES = frozenset({"INT64"})


@functools.lru_cache(maxsize=64)
def _leaves(schema: pa.Schema) -> tuple[tuple[str, str], ...]:
    """(dotted path, Parquet physical type) of every leaf column of ``schema`` (each task's
    writers ask for the same few schemas: cached)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = pa.BufferOutputStream()
    pq.write_table(schema.empty_table(), buf)
    leaves = pq.ParquetFile(pa.BufferReader(buf.getvalue())).schema
    return tuple((leaves.column(i).path, leaves.column(i).physical_type) for i in range(len(leaves)))


def dictionary_columns(schema: pa.Schema) -> list[str]:
    """The Parquet leaf columns (dotted paths, nested ones included) of ``schema`` to
    dictionary-encode: those of ``_DICTIONARY_TYPES``. The encoding changes no value."""
    return [path for path, physical in _leaves(schema) if physical in _DICTIONARY_TYPES]


def delta_columns(schema: pa.Schema) -> dict[str, str]:
    """The leaf columns of ``schema`` to write ``DELTA_BINARY_PACKED`` (those of
    ``_DELTA_TYPES``), as ``pyarrow.parquet``'s ``column_encoding``."""
    return {path: "DELTA_BINARY_PACKED" for path, physical in _leaves(schema) if physical in _DELTA_TYPES}


@dataclass(frozen=True)
class ParquetFileCopy:
    """A route's output for one table: this Parquet file, byte for byte (``file_matches`` said its
    schema is the table's; the table must not be partitioned)."""

    path: str
    num_rows: int


def file_matches(schema: pa.Schema, target: pa.Schema) -> bool:
    """True when a Parquet file with ``schema`` can join a table of ``target`` as it is: the
    same column names, order and types (nullability and metadata aside)."""
    return schema.names == target.names and all(a.type.equals(b.type) for a, b in zip(schema, target, strict=True))


def _footer_stats(meta: Any, schema: pa.Schema) -> tuple[dict[str, Any], dict[str, Any], dict[str, int]] | None:
    """``_integer_stats`` from a Parquet footer (row-group statistics), or ``None`` when a row
    group lacks them."""
    import pyarrow as pa

    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    if meta.num_columns != len(schema):
        return None
    for c, f in enumerate(schema):
        lo = hi = None
        n_null = 0
        for g in range(meta.num_row_groups):
            col = meta.row_group(g).column(c)
            st = col.statistics
            if st is None or not st.has_null_count:
                return None
            n_null += st.null_count
            if pa.types.is_integer(f.type) and col.num_values > st.null_count:
                if not st.has_min_max:
                    return None
                lo = st.min if lo is None else min(lo, st.min)
                hi = st.max if hi is None else max(hi, st.max)
        nulls[f.name] = n_null
        if lo is not None:
            mins[f.name], maxs[f.name] = int(lo), int(hi)  # type: ignore[arg-type]
    return mins, maxs, nulls


@dataclass
class TableMessage:
    """What a task of a one-table write reports back: the files it wrote."""

    files: list[FileAdd] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# executor side


class _TaskWriter:
    """Writes one task's batches into rolling Parquet files (one open file per partition value)."""

    def __init__(self, table_uri: str, schema: pa.Schema, partition_by: list[str], target_rows: int) -> None:
        self.fs, self.root = filesystem(table_uri)
        self.schema = schema
        self.partition_by = partition_by
        self.data_schema = self._data_schema()
        self.dictionary = dictionary_columns(self.data_schema)
        self.encodings = delta_columns(self.data_schema)
        self.target_rows = target_rows
        self.task_id = uuid.uuid4().hex
        self.open: dict[tuple[str | None, ...], tuple[Any, str, int]] = {}
        self.pending: dict[tuple[str | None, ...], list[pa.Table]] = {}
        self.files: list[FileAdd] = []
        self.seq = 0

    def _data_schema(self) -> pa.Schema:
        import pyarrow as pa

        return pa.schema([f for f in self.schema if f.name not in self.partition_by])

    def write(self, table: pa.Table) -> None:
        import pyarrow.compute as pc

        if not self.partition_by:
            self._append((), table)
            return
        keys = table.select(self.partition_by)
        combos = keys.group_by(self.partition_by).aggregate([]).to_pylist()
        for combo in combos:
            mask = None
            for col in self.partition_by:
                v = combo[col]
                cond = pc.is_null(table[col]) if v is None else pc.equal(table[col], v)
                mask = cond if mask is None else pc.and_(mask, cond)
            part = table.filter(mask)
            key = tuple(partition_value_string(combo[c]) for c in self.partition_by)
            self._append(key, part.drop_columns(self.partition_by))

    def _append(self, key: tuple[str | None, ...], table: pa.Table) -> None:
        import pyarrow as pa

        buf = self.pending.setdefault(key, [])
        buf.append(table)
        rows = sum(t.num_rows for t in buf)
        if rows >= self.target_rows:
            merged = pa.concat_tables(buf)
            self.pending[key] = []
            start = 0
            while merged.num_rows - start >= self.target_rows:
                self._write_file(key, merged.slice(start, self.target_rows))
                start += self.target_rows
            if start < merged.num_rows:
                self.pending[key] = [merged.slice(start)]

    def _write_file(self, key: tuple[str | None, ...], table: pa.Table) -> None:
        import pyarrow.parquet as pq

        if table.num_rows == 0:
            return
        # written as it is chunked: the same row groups, pages and bytes as after
        # ``combine_chunks``, without copying every column first (~0.1 s per 500k offset commits)
        subdir = "/".join(
            f"{quote(col, safe='')}={quote(val if val is not None else NULL_PARTITION, safe='')}"
            for col, val in zip(self.partition_by, key)
        )
        name = f"part-{self.seq:05d}-{self.task_id}.snappy.parquet"
        self.seq += 1
        rel = f"{subdir}/{name}" if subdir else name
        full = f"{self.root}/{rel}"
        if subdir:
            self.fs.create_dir(f"{self.root}/{subdir}", recursive=True)
        with self.fs.open_output_stream(full) as out:
            pq.write_table(
                table, out, compression="snappy", use_dictionary=self.dictionary, column_encoding=self.encodings or None
            )
        info = self.fs.get_file_info(full)
        mins, maxs, nulls = _integer_stats(table)
        stats = json.dumps(
            {"numRecords": table.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls},
            separators=(",", ":"),
        )
        self.files.append(
            FileAdd(
                path=rel,
                size=int(info.size),
                partition_values=dict(zip(self.partition_by, key)),
                modification_time=int(time.time() * 1000),
                stats=stats,
                num_records=table.num_rows,
            )
        )

    def adopt(self, src: str) -> None:
        """Copy the Parquet file ``src`` (the table's schema, ``file_matches``) into the table as
        one more file: bytes unchanged, stats from its footer."""
        import pyarrow.parquet as pq

        if self.partition_by:
            raise ValueError("a Parquet file can only be adopted by an unpartitioned table")
        src_fs, src_inner = filesystem(src)
        with src_fs.open_input_file(src_inner) as fh:
            meta = pq.ParquetFile(fh).metadata
        if meta.num_rows == 0:
            return
        stats3 = _footer_stats(meta, self.schema)
        if stats3 is None:
            with src_fs.open_input_file(src_inner) as fh:
                stats3 = _integer_stats(pq.read_table(fh))
        mins, maxs, nulls = stats3
        rel = f"part-{self.seq:05d}-{self.task_id}.c000.parquet"
        self.seq += 1
        full = f"{self.root}/{rel}"
        with src_fs.open_input_file(src_inner) as fin, self.fs.open_output_stream(full) as out:
            while chunk := fin.read(8 << 20):
                out.write(chunk)
        info = self.fs.get_file_info(full)
        stats = json.dumps(
            {"numRecords": meta.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls},
            separators=(",", ":"),
        )
        self.files.append(
            FileAdd(
                path=rel,
                size=int(info.size),
                partition_values={},
                modification_time=int(time.time() * 1000),
                stats=stats,
                num_records=meta.num_rows,
            )
        )

    def close(self) -> list[FileAdd]:
        import pyarrow as pa

        for key, buf in list(self.pending.items()):
            if buf:
                self._write_file(key, pa.concat_tables(buf))
        self.pending.clear()
        return self.files


class TableWriter:
    """Tasks: Arrow batches → Parquet files of one table; driver: one delta-rs commit."""

    def __init__(self, options: dict[str, str], overwrite: bool) -> None:
        self.table_uri = options["path"]
        self.schema_b64 = options["arrow_schema"]
        self.partition_by = [c for c in options.get("partition_by", "").split(",") if c]
        self.target_rows = int(options.get("target_file_rows", "1000000"))
        self.overwrite = overwrite or options.get("write_mode") == "overwrite"
        self.app_id = options.get("txn_app_id") or None
        self.txn_version = int(options["txn_version"]) if options.get("txn_version") else None
        self.require_latest = options.get("require_latest", "false") == "true"
        self.metadata = json.loads(options.get("commit_metadata", "{}"))

    # executors ------------------------------------------------------------------------------
    def write(self, iterator: Iterator[pa.RecordBatch]) -> TableMessage:
        import pyarrow as pa

        schema = decode_schema(self.schema_b64)
        writer = _TaskWriter(self.table_uri, schema, self.partition_by, self.target_rows)
        for batch in iterator:
            if batch.num_rows == 0:
                continue
            table = pa.Table.from_batches([batch]).select(schema.names).cast(schema)
            writer.write(table)
        return TableMessage(files=writer.close())

    # driver ---------------------------------------------------------------------------------
    def commit(self, messages: list[Any]) -> None:
        files = [f for m in messages if isinstance(m, TableMessage) for f in m.files]
        commit_files(
            self.table_uri,
            files,
            schema=decode_schema(self.schema_b64),
            partition_by=self.partition_by,
            overwrite=self.overwrite,
            app_id=self.app_id,
            txn_version=self.txn_version,
            require_latest=self.require_latest,
            metadata=self.metadata,
        )

    def abort(self, messages: list[Any]) -> None:
        delete_files(self.table_uri, [f for m in messages if isinstance(m, TableMessage) for f in m.files])


# --------------------------------------------------------------------------------------------
# one pass, several tables


@dataclass
class RoutedMessage:
    """What a task of a routed write reports back: the files it wrote, by table."""

    files: dict[str, list[FileAdd]] = field(default_factory=dict)
    rows_in: int = 0
    side: list[dict[str, Any]] = field(default_factory=list)


def load_route(spec: str) -> Any:
    """``"package.module:function"`` -> the function (imported on the executor)."""
    import importlib

    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValueError(f"route must be 'module:function', not {spec!r}")
    return getattr(importlib.import_module(module), name)


class RoutedWriter:
    """Tasks: each input batch → ``route(batch, options)`` → rows for several tables, written
    as Parquet files; driver: one delta-rs commit per table.

    Options: ``tables`` (JSON list of ``{name, path, arrow_schema, partition_by, marked}``;
    ``marked: false`` commits that table without the idempotency marker, e.g. a staging table;
    ``append: {rows, metadata}`` makes a table the pass's appended input: committed first, as an
    append without the marker and with its own commit metadata, its rows left out of
    ``rows_equal_input`` and required to number ``rows``),
    ``route`` (``module:function``; ``route(batches, route_options)`` takes the task's iterator of
    Arrow batches and yields ``({table name: pa.Table | ParquetFileCopy}, input records
    consumed)`` pairs — the
    input records are not the batches' rows for a route that reads the files the batches name),
    ``route_options`` (JSON), ``expected_rows``
    (optional: the input rows consumed must add up to it, else nothing is committed),
    ``rows_equal_input`` (``true``: the routed rows must add up to the input rows consumed),
    ``side_manifest`` (optional path: a route may append JSON-able entries describing files it
    wrote beside the tables to ``route_options[SIDE_KEY]``; the commit writes the successful
    tasks' entries there as one JSON list before committing the tables), ``commit_check``
    (optional ``module:function``, called on the driver as ``check(side entries, route_options)``
    after the tasks and before the counts are checked: a returned reason aborts the write,
    nothing is committed, and the error message starts with ``COMMIT_REFUSED``), and the marker
    / mode options of
    ``TableWriter``.
    """

    def __init__(self, options: dict[str, str], overwrite: bool) -> None:
        self.tables = json.loads(options["tables"])
        self.route = options["route"]
        self.route_options = json.loads(options.get("route_options", "{}"))
        self.target_rows = int(options.get("target_file_rows", "1000000"))
        self.overwrite = overwrite or options.get("write_mode") == "overwrite"
        self.app_id = options.get("txn_app_id") or None
        self.txn_version = int(options["txn_version"]) if options.get("txn_version") else None
        self.require_latest = options.get("require_latest", "false") == "true"
        self.metadata = json.loads(options.get("commit_metadata", "{}"))
        self.expected_rows = int(options["expected_rows"]) if options.get("expected_rows") else None
        self.rows_equal_input = options.get("rows_equal_input", "false") == "true"
        self.side_manifest = options.get("side_manifest") or None
        self.commit_check = options.get("commit_check") or None

    def write(self, iterator: Iterator[pa.RecordBatch]) -> RoutedMessage:
        route = load_route(self.route)
        schemas = {t["name"]: decode_schema(t["arrow_schema"]) for t in self.tables}
        writers = {
            t["name"]: _TaskWriter(t["path"], schemas[t["name"]], list(t["partition_by"]), self.target_rows)
            for t in self.tables
        }
        rows_in = 0
        side: list[dict[str, Any]] = []
        options = {**self.route_options, SIDE_KEY: side}
        for tables, consumed in route((b for b in iterator if b.num_rows), options):
            rows_in += consumed
            for name, table in tables.items():
                if isinstance(table, ParquetFileCopy):
                    writers[name].adopt(table.path)
                elif table.num_rows:
                    writers[name].write(table.select(schemas[name].names).cast(schemas[name]))
        return RoutedMessage(files={name: w.close() for name, w in writers.items()}, rows_in=rows_in, side=side)

    def _all(self, messages: list[Any]) -> tuple[dict[str, list[FileAdd]], int]:
        files: dict[str, list[FileAdd]] = {t["name"]: [] for t in self.tables}
        rows_in = 0
        for m in messages:
            if isinstance(m, RoutedMessage):
                rows_in += m.rows_in
                for name, fs in m.files.items():
                    files[name].extend(fs)
        return files, rows_in

    def _problem(self, files: dict[str, list[FileAdd]], rows_in: int) -> str | None:
        """Why the rows do not add up (nothing is committed then), or ``None``."""
        rows = {name: sum(f.num_records for f in fs) for name, fs in files.items()}
        for t in self.tables:
            if t.get("append") and rows[t["name"]] != t["append"]["rows"]:
                return f"appended {rows[t['name']]} rows to {t['name']}, expected {t['append']['rows']}"
        written = sum(rows[t["name"]] for t in self.tables if not t.get("append"))
        if self.expected_rows is not None and rows_in != self.expected_rows:
            return f"read {rows_in} input rows, expected {self.expected_rows}"
        if self.rows_equal_input and written != rows_in:
            return f"routed {written} rows from {rows_in} input rows"
        return None

    def commit(self, messages: list[Any]) -> None:
        files, rows_in = self._all(messages)
        # what the successful tasks' routes reported beside the tables (failed attempts' are not).
        # The check first: a route may leave rows of a pass the check refuses uncounted (the
        # decode's pass does not decode landing rows without a position)
        side = [e for m in messages if isinstance(m, RoutedMessage) for e in m.side]
        if self.commit_check:
            refused = load_route(self.commit_check)(side, self.route_options)
            if refused:
                self.abort(messages)
                raise RuntimeError(f"{COMMIT_REFUSED}: {refused}")
        problem = self._problem(files, rows_in)
        if problem is not None:
            self.abort(messages)
            raise RuntimeError(f"count mismatch, nothing committed: {problem}")
        if self.side_manifest:
            # saved before the tables are committed
            fs_, inner = filesystem(self.side_manifest)
            with fs_.open_output_stream(inner) as out:
                out.write(json.dumps(side, separators=(",", ":")).encode())
        # the appended input first: the other tables' marker names the version it makes
        for t in sorted(self.tables, key=lambda t: not t.get("append")):
            append = t.get("append")
            marked = t.get("marked", True) and not append
            commit_files(
                t["path"],
                files[t["name"]],
                schema=decode_schema(t["arrow_schema"]),
                partition_by=list(t["partition_by"]),
                overwrite=self.overwrite and not append,
                app_id=self.app_id if marked else None,
                txn_version=self.txn_version if marked else None,
                require_latest=self.require_latest and not append,
                metadata={**self.metadata, **append["metadata"]} if append else self.metadata,
            )

    def abort(self, messages: list[Any]) -> None:
        files, _ = self._all(messages)
        by_path = {t["name"]: t["path"] for t in self.tables}
        for name, fs in files.items():
            delete_files(by_path[name], fs)


def run(data: DataFrame | TaskRows, writer: TableWriter | RoutedWriter) -> None:
    """Write ``data`` with ``writer``: its ``write`` in every Spark task, then its ``commit`` here.
    ``TaskRows`` run by Spark's RDD API (no SQL plan: ``pipelines.tableio.task_rows``), a
    DataFrame by ``mapInArrow``."""
    import pickle

    from pipelines.tableio.task_rows import TaskRows

    if isinstance(data, TaskRows):

        def write(batches: Iterator[pa.RecordBatch]) -> Iterator[Any]:
            freeze_worker_heap()
            yield writer.write(batches)

        writer.commit(data.run(write))
        return

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        freeze_worker_heap()
        message = writer.write(batches)
        yield pa.RecordBatch.from_arrays([pa.array([pickle.dumps(message)], pa.binary())], names=["message"])

    from pyspark.sql.types import BinaryType, StructField, StructType

    # a StructType, not the DDL "message binary": parsing DDL is a py4j call (~0.2 s when first)
    out = StructType([StructField("message", BinaryType())])
    messages = [pickle.loads(row[0]) for row in data.mapInArrow(task, out).collect()]
    writer.commit(messages)
