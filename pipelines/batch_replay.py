"""The batch replay stage (rust engine): the replay input travels as Arrow IPC, never as JVM rows.

Rules:
- Same rows as ``pipelines.replay_job.replay_to_gold`` (tests compare them): the replay input
  is the same projection of the decoded tables (``replay_job.REPLAY_INPUT_DDL``), every group is
  replayed once, in (coordinator_partition, log_offset) order, by
  ``replay_job.replay_sorted_batches`` (the core's bulk path).
- Rows are cut into buckets: ``bucket = string_hash64(group_id) mod B`` (B = 4 per replay task,
  ``replay_tasks``), so a group lives in exactly one bucket. A replay task reads whole buckets,
  sorts each by (group_id, coordinator_partition, log_offset) (``replay_job.replay_order``,
  integer keys) and replays it.
- The spool (the usual path): the decode pass, while it writes the decoded tables, also projects
  their rows and appends them to one Arrow IPC stream file (lz4) per bucket per task under
  ``<warehouse>/_staging/<run id>/replay_spool`` (``Spool``). Its commit lists the successful tasks'
  files in a manifest (the routed writer's side outputs). The replay is then one Spark stage:
  each task reads its buckets' files (``route_replay_spool``). No shuffle, no second read of
  the decoded tables; the newest record time (``as_of``) comes from the manifest.
- Without a spool (the replay stage run on its own, or after a crash between decode and
  replay): the tasks read the decoded tables' snapshot files (pyarrow), project and cut them,
  and each (file, bucket) slice crosses a Spark shuffle (``repartition`` by bucket +
  ``sortWithinPartitions``) as ONE Arrow IPC message (``packed_input``, ``route_replay``).
- Either way the replaying tasks write the gold tables' files themselves
  (``offsetlake_delta_rs_multi``). Event tables are replaced with the job's marker; the
  current-state tables are staged and MERGEd by the driver. The spool is deleted afterwards.
- Used when every decoded table's snapshot is its file list (``TableIO.snapshot_files``) or a
  spool exists; otherwise the batch job uses ``replay_to_gold`` over ``TableIO.read``.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from coordinator_core.expiry import DEFAULT_CLEANUP_INTERVAL_MS, DEFAULT_COORDINATOR

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from pipelines.tableio import TableIO

log = logging.getLogger(__name__)

BUCKETS_PER_SHUFFLE_PARTITION = 4
#: replay tasks per core at least (measured at 10M records on 2 cores: 4 per core was slower)
REPLAY_TASKS_PER_CORE = 2
PACK_DDL = "bucket int, rows int, max_ts bigint, records binary"
READ_ROWS = 131_072
SOURCES = ("offset_commits", "group_metadata", "unsupported_records")
_MEMBER_FIELDS = ("member_id", "group_instance_id", "client_id", "client_host", "rebalance_timeout",
                  "session_timeout", "subscription", "assignment")


def input_schema() -> pa.Schema:
    """The replay input in Arrow (``replay_job.replay_input_arrow_schema``)."""
    from pipelines.replay_job import replay_input_arrow_schema

    return replay_input_arrow_schema()


def _ms(arr: Any) -> Any:
    """timestamp[us] → epoch ms (decoded timestamps come from ms: the division is exact)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.divide(arr.cast(pa.int64()), 1000)


def _members(arr: Any, target: pa.DataType) -> Any:
    """The decoded members list keeps only the replay's 8 fields (Spark's ``transform`` twin)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    values = arr.values
    struct = pa.StructArray.from_arrays(
        [values.field(f) for f in _MEMBER_FIELDS], fields=list(target.value_type),
        mask=values.is_null() if values.null_count else None,
    )
    offsets = arr.offsets
    if arr.offset:  # a sliced list: rebase
        offsets = pc.subtract(offsets, offsets[0])
        struct = struct.slice(arr.offsets[0].as_py(), len(struct))
    return pa.ListArray.from_arrays(offsets, struct, type=target, mask=arr.is_null() if arr.null_count else None)


def project(source: str, batch: pa.RecordBatch | pa.Table) -> pa.Table:
    """Rows of decoded table ``source`` → replay-input rows (``replay_job.replay_input``'s twin)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from pipelines.replay_job import REC_GROUP_METADATA, REC_OFFSET_COMMIT, REC_UNSUPPORTED

    t = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    schema = input_schema()
    n = t.num_rows
    if source == "unsupported_records":
        t = t.filter(pc.is_valid(t.column("group_id")))
        n = t.num_rows
        cols: dict[str, Any] = {
            "group_id": t.column("group_id"), "coordinator_partition": t.column("partition"),
            "log_offset": t.column("offset"), "log_timestamp_ms": _ms(t.column("timestamp")),
            "rec_kind": pa.array([REC_UNSUPPORTED] * n, pa.int8()), "key_version": t.column("record_type"),
            "raw_key": t.column("key"), "raw_value": t.column("value"),
        }
    else:
        cols = {name: t.column(name) for name in (
            "group_id", "coordinator_partition", "log_offset", "key_version", "is_tombstone", "value_version")}
        cols["log_timestamp_ms"] = _ms(t.column("log_timestamp"))
        if source == "offset_commits":
            cols["rec_kind"] = pa.array([REC_OFFSET_COMMIT] * n, pa.int8())
            for name in ("topic", "partition", "committed_offset", "leader_epoch", "metadata"):
                cols[name] = t.column(name)
            cols["commit_timestamp_ms"] = _ms(t.column("commit_timestamp"))
            cols["expire_timestamp_ms"] = _ms(t.column("expire_timestamp"))
        else:
            cols["rec_kind"] = pa.array([REC_GROUP_METADATA] * n, pa.int8())
            for name in ("protocol_type", "generation", "protocol", "leader"):
                cols[name] = t.column(name)
            cols["current_state_timestamp_ms"] = _ms(t.column("current_state_timestamp"))
            cols["members"] = _members(t.column("members"), schema.field("members").type)
    arrays = [cols[f.name].cast(f.type) if f.name in cols else pa.nulls(n, f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


#: the replay-input columns each decoded table fills (the others are null for its rows)
_BASE_COLUMNS = ("group_id", "coordinator_partition", "log_offset", "log_timestamp_ms", "rec_kind", "key_version",
                 "is_tombstone", "value_version")
SOURCE_COLUMNS = {
    "offset_commits": (*_BASE_COLUMNS, "topic", "partition", "committed_offset", "leader_epoch", "metadata",
                       "commit_timestamp_ms", "expire_timestamp_ms"),
    "group_metadata": (*_BASE_COLUMNS, "protocol_type", "generation", "protocol", "leader",
                       "current_state_timestamp_ms", "members"),
    "unsupported_records": (*_BASE_COLUMNS, "raw_key", "raw_value"),
}
_FNV_PRIME = 0x100000001B3
_POWERS: list[Any] = []


def _powers(n: int) -> Any:
    """``_FNV_PRIME ** i`` mod 2^64 for i < n (uint64; cached, grown by doubling)."""
    import numpy as np

    if not _POWERS or len(_POWERS[0]) < n:
        m = max(n, 2 * len(_POWERS[0]) if _POWERS else 256)
        p = np.full(m, _FNV_PRIME, np.uint64)
        p[0] = 1
        with np.errstate(over="ignore"):
            _POWERS[:] = [np.cumprod(p, dtype=np.uint64)]
    return _POWERS[0]


def string_hash64(strings: Any) -> Any:
    """A 64-bit hash of each string's UTF-8 bytes, vectorised (numpy over the Arrow buffers).

    A polynomial hash (``sum(byte_i * P^i)`` mod 2^64, plus the length) passed through
    MurmurHash3's finaliser: the same value in every process and run (no Python ``hash``
    randomisation). Nulls hash as the empty string.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = strings.combine_chunks() if isinstance(strings, pa.ChunkedArray) else strings
    if arr.null_count:
        arr = pc.fill_null(arr, "")
    arr = arr.cast(pa.large_string())
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset: arr.offset + n + 1]
    lengths = np.diff(offsets).astype(np.int64)
    h = lengths.astype(np.uint64)
    first, last = int(offsets[0]), int(offsets[-1])
    if last > first:
        data = np.frombuffer(arr.buffers()[2], dtype=np.uint8)[first:last].astype(np.uint64)
        starts = offsets[:-1] - first
        pos = np.arange(last - first, dtype=np.int64) - np.repeat(starts, lengths)
        with np.errstate(over="ignore"):
            prod = data * _powers(int(lengths.max()))[pos]
            nonempty = lengths > 0
            h[nonempty] += np.add.reduceat(prod, starts[nonempty])
    with np.errstate(over="ignore"):
        h ^= h >> np.uint64(33)
        h *= np.uint64(0xFF51AFD7ED558CCD)
        h ^= h >> np.uint64(33)
        h *= np.uint64(0xC4CEB9FE1A85EC53)
        h ^= h >> np.uint64(33)
    return h


def bucket_of(group_ids: Any, buckets: int) -> Any:
    """``string_hash64(group id) mod buckets`` per row (hashed once per distinct group)."""
    import numpy as np
    import pyarrow as pa

    enc = group_ids.combine_chunks().dictionary_encode() if isinstance(group_ids, pa.ChunkedArray) \
        else group_ids.dictionary_encode()
    per_group = (string_hash64(enc.dictionary) % np.uint64(buckets)).astype(np.int32)
    return per_group[enc.indices.to_numpy(zero_copy_only=False)]


def _serialize(table: pa.Table) -> bytes:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as w:
        w.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def unpack(blobs: Sequence[bytes]) -> pa.Table:
    """The replay input rows of packed blobs (any order)."""
    import pyarrow as pa

    tables = [pa.ipc.open_stream(pa.py_buffer(b)).read_all() for b in blobs]
    return pa.concat_tables(tables) if tables else input_schema().empty_table()


def cut(table: pa.Table, buckets: int) -> Iterator[tuple[int, pa.Table, int]]:
    """Replay-input rows → (bucket, its rows in input order, newest record ms) per bucket present."""
    import numpy as np
    import pyarrow as pa

    if table.num_rows == 0:
        return
    per_row = bucket_of(table.column("group_id"), buckets)
    order = np.argsort(per_row, kind="stable")
    b_sorted = per_row[order]
    starts = np.flatnonzero(np.r_[True, b_sorted[1:] != b_sorted[:-1]])
    ends = np.r_[starts[1:], len(order)]
    ts = table.column("log_timestamp_ms").to_numpy(zero_copy_only=False)[order]
    newest = np.maximum.reduceat(ts, starts).tolist()
    # one gather for all buckets, then zero-copy slices (a take per bucket costs per call)
    by_bucket = table.take(pa.array(order, pa.int64()))
    for s, e, m in zip(starts.tolist(), ends.tolist(), newest, strict=True):
        yield int(b_sorted[s]), by_bucket.slice(s, e - s), int(m)


def pack(table: pa.Table, buckets: int) -> Iterator[pa.RecordBatch]:
    """Replay-input rows → packed rows (bucket, rows, newest record ms, IPC message)."""
    import pyarrow as pa

    out_b, out_n, out_ts, out_blob = [], [], [], []
    for b, rows, newest in cut(table, buckets):
        out_b.append(b)
        out_n.append(rows.num_rows)
        out_ts.append(newest)
        out_blob.append(_serialize(rows))
    if not out_b:
        return
    yield pa.RecordBatch.from_arrays(
        [pa.array(out_b, pa.int32()), pa.array(out_n, pa.int32()), pa.array(out_ts, pa.int64()),
         pa.array(out_blob, pa.binary())],
        names=["bucket", "rows", "max_ts", "records"],
    )


def pack_files(batches: Iterator[pa.RecordBatch], buckets: int) -> Iterator[pa.RecordBatch]:
    """mapInArrow body over (source, path) rows: read, project, pack."""
    from pipelines.file_tasks import parquet_batches

    for batch in batches:
        for source, path in zip(batch.column("source").to_pylist(), batch.column("path").to_pylist()):
            for raw in parquet_batches(path, batch_size=READ_ROWS):
                yield from pack(project(source, raw), buckets)


def replay_bucket(table: pa.Table, replay: Callable[[list[pa.RecordBatch]], Iterator[Any]]) -> Iterator[Any]:
    """One bucket's replay-input rows (any order) → ``replay``'s outputs over them sorted by
    (group_id, coordinator_partition, log_offset)."""
    import pyarrow as pa

    from pipelines.replay_job import replay_order

    order = pa.array(replay_order(table), pa.int64())
    yield from replay(table.take(order).to_batches(max_chunksize=65_536))


def replay_buckets(
    batches: Iterator[pa.RecordBatch], replay: Callable[[list[pa.RecordBatch]], Iterator[Any]]
) -> Iterator[Any]:
    """mapInArrow body over packed rows sorted by bucket: one replay per bucket (``replay``'s
    outputs, in bucket order)."""

    def flush(blobs: list[bytes]) -> Iterator[Any]:
        return replay_bucket(unpack(blobs), replay)

    current: int | None = None
    blobs: list[bytes] = []
    for batch in batches:
        for b, blob in zip(batch.column("bucket").to_pylist(), batch.column("records").to_pylist()):
            if b != current and blobs:
                yield from flush(blobs)
                blobs = []
            current = b
            blobs.append(blob)
    if blobs:
        yield from flush(blobs)


# ---------------------------------------------------------------------------------------------
# The spool: the decode pass writes the replay input, already cut into buckets
# ---------------------------------------------------------------------------------------------
#: the spool's directory name under the warehouse's ``_staging``
SPOOL = "replay_spool"
SPOOL_MANIFEST = "_manifest.json"
#: rows a spool buffers per (bucket, source) before writing them as one record batch
SPOOL_BATCH_ROWS = 32_768


class Spool:
    """One task's replay input cut into buckets: one Arrow IPC stream file (lz4) per bucket.

    The decode pass feeds it the decoded tables' rows (``add``) while it writes them, so the
    replay never reads the decoded tables back or shuffles them through Spark: each replay task
    reads its buckets' files. ``close`` lists the files in ``side`` (the routed writer's side
    outputs: only successful tasks' files reach the manifest).
    """

    def __init__(self, root: str, buckets: int, side: list[dict[str, Any]]) -> None:
        from pipelines.tableio.uri import filesystem as _filesystem

        self.uri_root = root.rstrip("/")
        self.fs, self.root = _filesystem(root)
        self.fs.create_dir(self.root, recursive=True)
        self.buckets = buckets
        self.side = side
        self.tag = uuid.uuid4().hex
        # (bucket, source) -> [stream, writer, file name, rows, newest ms, buffered slices, their rows]
        self.open: dict[tuple[int, str], list[Any]] = {}

    def add(self, source: str, decoded: pa.Table) -> None:
        """Rows of decoded table ``source`` (its declared schema) → the buckets' files."""
        import pyarrow as pa

        if decoded.num_rows == 0:
            return
        table = project(source, decoded)
        # only the columns this source fills: the rest are null for its rows (``read_spool``)
        table = table.select(list(SOURCE_COLUMNS[source]))
        for b, rows, newest in cut(table, self.buckets):
            key = (b, source)
            entry = self.open.get(key)
            if entry is None:
                name = f"b{b:05d}-{source}-{self.tag}.arrows"
                stream = self.fs.open_output_stream(f"{self.root}/{name}")
                writer = pa.ipc.new_stream(stream, rows.schema, options=pa.ipc.IpcWriteOptions(compression="lz4"))
                entry = self.open[key] = [stream, writer, name, 0, newest, [], 0]
            entry[5].append(rows)
            entry[6] += rows.num_rows
            entry[3] += rows.num_rows
            entry[4] = max(entry[4], newest)
            if entry[6] >= SPOOL_BATCH_ROWS:
                self._flush(entry)

    @staticmethod
    def _flush(entry: list[Any]) -> None:
        """Write a (bucket, source)'s buffered slices as ONE record batch (few large batches:
        less per-batch IPC and compression overhead, fewer chunks for the replay to sort)."""
        import pyarrow as pa

        if entry[5]:
            entry[1].write_table(pa.concat_tables(entry[5]).combine_chunks())
            entry[5], entry[6] = [], 0

    def close(self) -> None:
        for (b, _), entry in sorted(self.open.items()):
            self._flush(entry)
            stream, writer, name, rows, newest = entry[:5]
            writer.close()
            stream.close()
            self.side.append({"bucket": b, "path": f"{self.uri_root}/{name}", "rows": rows, "max_ts": newest})
        self.open.clear()


def spool_for(options: dict[str, Any]) -> Spool | None:
    """The task's ``Spool`` when a routed write's options ask for one (``spool_options``)."""
    from pipelines.tableio import SIDE_KEY

    spec = options.get("spool")
    if not spec:
        return None
    return Spool(spec["root"], int(spec["buckets"]), options[SIDE_KEY])


def spool_options(io: TableIO) -> tuple[dict[str, Any], str]:
    """A fresh (emptied) spool for this warehouse: (route options entry, manifest path)."""
    from pipelines.config import join_path

    assert io.spark is not None
    io.drop_staged(SPOOL)
    root = io.staging_path(SPOOL)
    return ({"root": root, "buckets": BUCKETS_PER_SHUFFLE_PARTITION * replay_tasks(io.spark)},
            join_path(root, SPOOL_MANIFEST))


def read_spool_manifest(path: str, kind: str | None = None) -> list[dict[str, Any]] | None:
    """The spool files the decode's successful tasks wrote (``kind`` None), or their other side
    entries of ``kind`` (``log_shape.STATS_KIND``); ``None`` if there is no manifest."""
    from pyarrow import fs

    from pipelines.tableio.uri import filesystem as _filesystem

    filesystem, inner = _filesystem(path)
    if filesystem.get_file_info(inner).type == fs.FileType.NotFound:
        return None
    with filesystem.open_input_stream(inner) as fh:
        return [e for e in json.loads(fh.read().decode()) if e.get("kind") == kind]


def read_spool(paths: Sequence[str]) -> pa.Table:
    """The replay-input rows of spool files."""
    import pyarrow as pa

    from pipelines.tableio.uri import filesystem as _filesystem

    schema = input_schema()
    tables = []
    for path in paths:
        filesystem, inner = _filesystem(path)
        with filesystem.open_input_stream(inner) as fh:
            part = pa.ipc.open_stream(fh).read_all()
        n = part.num_rows
        names = set(part.column_names)
        tables.append(pa.Table.from_arrays(
            [part.column(f.name) if f.name in names else pa.nulls(n, f.type) for f in schema], schema=schema))
    return pa.concat_tables(tables) if tables else schema.empty_table()


def route_replay_spool(
    batches: Iterator[pa.RecordBatch], options: dict[str, Any]
) -> Iterator[tuple[dict[str, pa.Table], int]]:
    """``offsetlake_delta_rs_multi`` route over (bucket, spool files as JSON) rows: each bucket's
    rows read, sorted, replayed; the task writes the gold files."""
    from pipelines.replay_job import replay_sorted_batches

    tables = tuple(options["tables"])
    opts = {k: options[k] for k in ("retention_ms", "rules", "as_of_ms", "num_partitions", "coordinator", "cleanup_interval_ms", "log_end_ms")}
    for batch in batches:
        for paths in batch.column("paths").to_pylist():
            rows = read_spool(json.loads(paths))
            for out in replay_bucket(rows, lambda bs: replay_sorted_batches(bs, tables=tables, as_tables=True, **opts)):
                yield out, 0


def source_files(io: TableIO) -> list[tuple[str, str]] | None:
    """(decoded table, file) of every source's snapshot, or ``None`` if one needs ``read``."""
    out: list[tuple[str, str]] = []
    for name in SOURCES:
        files = io.snapshot_files(name)
        if files is None:
            return None
        out.extend((name, f) for f in files)
    return out


def replay_tasks(spark: Any) -> int:
    """How many tasks replay the buckets: the shuffle partitions, at least
    ``REPLAY_TASKS_PER_CORE`` per core."""
    shuffle = int(spark.conf.get("spark.sql.shuffle.partitions") or 4)
    return max(shuffle, REPLAY_TASKS_PER_CORE * spark.sparkContext.defaultParallelism)


def packed_input(io: TableIO, files: list[tuple[str, str]]) -> DataFrame:
    """The packed replay input of the decoded tables (one Spark stage, tasks read the files)."""
    from pipelines.file_tasks import spread

    spark = io.spark
    assert spark is not None
    paths = spread(spark, files, "source string, path string")
    buckets = BUCKETS_PER_SHUFFLE_PARTITION * replay_tasks(spark)

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return pack_files(batches, buckets)

    return paths.mapInArrow(fn, PACK_DDL)


def route_replay(
    batches: Iterator[pa.RecordBatch], options: dict[str, Any]
) -> Iterator[tuple[dict[str, pa.Table], int]]:
    """``offsetlake_delta_rs_multi`` route: packed rows sorted by bucket → gold tables' rows.

    The replay output never becomes JVM rows: the task that replays a bucket writes the gold
    files itself.
    """
    from pipelines.replay_job import replay_sorted_batches

    tables = tuple(options["tables"])
    opts = {k: options[k] for k in ("retention_ms", "rules", "as_of_ms", "num_partitions", "coordinator", "cleanup_interval_ms", "log_end_ms")}
    for out in replay_buckets(batches, lambda bs: replay_sorted_batches(bs, tables=tables, as_tables=True, **opts)):
        yield out, 0


def spool_covers(io: TableIO, entries: Sequence[dict[str, Any]]) -> bool:
    """True when the spool holds as many rows as the replay input can have: every offset commit
    and group-metadata record, plus at most every unsupported record (those with a group)."""
    rows = sum(int(e["rows"]) for e in entries)
    base = io.count("offset_commits") + io.count("group_metadata")
    return base <= rows <= base + io.count("unsupported_records")


def write_gold_from_files(
    io: TableIO,
    *,
    app_id: str,
    version: int,
    tables: Sequence[str],
    current_state: Sequence[str],
    retention_ms: int | None = None,
    rules: str = "current",
    as_of_ms: int | None = None,
    num_partitions: int = 50,
    coordinator: str = DEFAULT_COORDINATOR,
    cleanup_interval_ms: int = DEFAULT_CLEANUP_INTERVAL_MS,
    log_end_ms: int | None = None,
    on_as_of: Callable[[int | None], None] | None = None,
    spool_manifest: str | None = None,
) -> dict[str, str] | None:
    """Replay the decoded rows and write the gold tables (rust engine).

    From the spool when the decode pass wrote one (``spool_manifest`` exists and covers the
    decoded tables): one Spark stage, each task reads its buckets' spool files, replays them and
    writes the gold files. Otherwise from the decoded tables' files: packed input → shuffle by
    bucket → the replaying tasks write every gold table's files (``offsetlake_delta_rs_multi``).
    Event tables are replaced with the marker (``app_id``, ``version``); ``current_state``
    tables are staged and then MERGEd (only changed rows rewritten, rows gone from the rebuild
    deleted). Returns ``{table: written | merged | unchanged}``, or ``None`` when the decoded
    tables must be read through ``TableIO.read``.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from pipelines.file_tasks import spread
    from pipelines.replay_job import as_of_and_log_end

    spark = io.spark
    assert spark is not None
    options = {"tables": list(tables), "retention_ms": retention_ms, "rules": rules, "as_of_ms": as_of_ms,
               "num_partitions": num_partitions, "coordinator": coordinator,
               "cleanup_interval_ms": cleanup_interval_ms, "log_end_ms": log_end_ms}
    entries = read_spool_manifest(spool_manifest) if spool_manifest else None
    if entries is not None and not spool_covers(io, entries):
        log.warning("replay: the decode's spool does not cover the decoded tables; reading their files")
        entries = None
    if spool_manifest and entries is None:
        io.drop_staged(SPOOL)
    if entries is not None:
        log.info("replay: from the decode's spool (%d files, %d rows)", len(entries),
                 sum(int(e["rows"]) for e in entries))
        try:
            if retention_ms is not None:
                options["as_of_ms"], options["log_end_ms"] = as_of_and_log_end(
                    as_of_ms, log_end_ms, max((int(e["max_ts"]) for e in entries), default=None))
            if on_as_of is not None:
                on_as_of(options["as_of_ms"])
            by_bucket: dict[int, list[str]] = {}
            weight: dict[int, int] = {}
            for e in entries:
                by_bucket.setdefault(int(e["bucket"]), []).append(str(e["path"]))
                weight[int(e["bucket"])] = weight.get(int(e["bucket"]), 0) + int(e["rows"])
            work = spread(spark, [(b, json.dumps(ps)) for b, ps in sorted(by_bucket.items())],
                          "bucket int, paths string", weights=[weight[b] for b in sorted(by_bucket)])
            return _write_gold(io, work, "pipelines.batch_replay:route_replay_spool", options, app_id, version,
                               tables, current_state)
        finally:
            io.drop_staged(SPOOL)
    files = source_files(io)
    if files is None:
        return None
    log.info("replay: from the decoded tables' files (%d files)", len(files))
    packed = packed_input(io, files).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        if retention_ms is not None:
            row = packed.agg(F.max("max_ts").alias("m")).collect()[0]
            options["as_of_ms"], options["log_end_ms"] = as_of_and_log_end(
                as_of_ms, log_end_ms, None if row["m"] is None else int(row["m"]))
        if on_as_of is not None:
            on_as_of(options["as_of_ms"])
        shuffled = packed.repartition(replay_tasks(spark), "bucket").sortWithinPartitions("bucket")
        return _write_gold(io, shuffled, "pipelines.batch_replay:route_replay", options, app_id, version,
                           tables, current_state)
    finally:
        packed.unpersist()


def _write_gold(
    io: TableIO, work: DataFrame, route: str, options: dict[str, Any], app_id: str, version: int,
    tables: Sequence[str], current_state: Sequence[str],
) -> dict[str, str]:
    from schemas import get as get_spec

    staged = [t for t in tables if t in current_state]
    results = io.write_routed(list(tables), work, route, route_options=options, txn_app_id=app_id,
                              txn_version=version, staged=staged)
    out = {name: "unchanged" if wr.skipped else "written" for name, wr in results.items()}
    for name in staged:
        try:
            wr = io.merge(name, io.read_staged(name), get_spec(name).primary_key, delete_missing=True,
                          txn_app_id=app_id, txn_version=version)
        finally:
            io.drop_staged(name)
        out[name] = "unchanged" if wr.skipped else "merged"
    return out
