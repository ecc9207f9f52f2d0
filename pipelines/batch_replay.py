"""The batch replay stage over the decoded tables' files: packed buckets, one Spark shuffle of blobs.

Rules:
- Same rows as ``pipelines.replay_job.replay_to_gold`` (tests compare them): the replay input
  is the same projection of the decoded tables (``replay_job.REPLAY_INPUT_DDL``), every group is
  replayed once, in (coordinator_partition, log_offset) order, by
  ``replay_job.replay_sorted_batches`` (the core's bulk path).
- How the rows travel differs. The tasks read the decoded tables' snapshot files themselves
  (pyarrow), project them to replay input and cut them into buckets: ``bucket = crc32(group_id)
  mod B`` (B = 4 per shuffle partition: few, large messages), so a group lives in exactly one
  bucket. Each (file, bucket) slice crosses the
  shuffle as ONE Arrow IPC message (lz4). Spark's shuffle (``repartition`` by bucket +
  ``sortWithinPartitions``) brings a bucket's messages together; the replay task unpacks them,
  sorts the bucket by (group_id, coordinator_partition, log_offset) in Arrow and replays it. A 10M
  record log is a few thousand blobs to shuffle instead of 10M rows to convert, shuffle, sort and
  convert back.
- The replaying tasks write the gold tables' files themselves (``offsetlake_delta_rs_multi``):
  the replay output never becomes JVM rows either. Event tables are replaced with the job's
  marker; the current-state tables are staged and MERGEd by the driver.
- Used when every decoded table's snapshot is its file list (``TableIO.snapshot_files``);
  otherwise the batch job uses ``replay_to_gold`` over ``TableIO.read``.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from pipelines.tableio import TableIO

BUCKETS_PER_SHUFFLE_PARTITION = 4
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


def bucket_of(group_ids: Any, buckets: int) -> Any:
    """crc32(group id, UTF-8) mod ``buckets`` per row (computed once per distinct group)."""
    import numpy as np
    import pyarrow as pa

    enc = group_ids.combine_chunks().dictionary_encode() if isinstance(group_ids, pa.ChunkedArray) \
        else group_ids.dictionary_encode()
    per_group = np.array([zlib.crc32(g.encode()) % buckets for g in enc.dictionary.to_pylist()], dtype=np.int32)
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


def pack(table: pa.Table, buckets: int) -> Iterator[pa.RecordBatch]:
    """Replay-input rows → packed rows (bucket, rows, newest record ms, IPC message)."""
    import numpy as np
    import pyarrow as pa

    if table.num_rows == 0:
        return
    per_row = bucket_of(table.column("group_id"), buckets)
    order = np.argsort(per_row, kind="stable")
    b_sorted = per_row[order]
    starts = np.flatnonzero(np.r_[True, b_sorted[1:] != b_sorted[:-1]])
    ends = np.r_[starts[1:], len(order)]
    ts = table.column("log_timestamp_ms").to_numpy(zero_copy_only=False)
    out_b, out_n, out_ts, out_blob = [], [], [], []
    for s, e in zip(starts.tolist(), ends.tolist()):
        idx = order[s:e]
        out_b.append(int(b_sorted[s]))
        out_n.append(e - s)
        out_ts.append(int(ts[idx].max()))
        out_blob.append(_serialize(table.take(pa.array(idx, pa.int64()))))
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


def replay_buckets(
    batches: Iterator[pa.RecordBatch], replay: Callable[[list[pa.RecordBatch]], Iterator[pa.Table]]
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body over packed rows sorted by bucket: one replay per bucket."""
    import pyarrow.compute as pc

    def flush(blobs: list[bytes]) -> Iterator[pa.RecordBatch]:
        table = unpack(blobs)
        order = pc.sort_indices(table, [("group_id", "ascending"), ("coordinator_partition", "ascending"),
                                        ("log_offset", "ascending")])
        for out in replay(table.take(order).to_batches(max_chunksize=65_536)):
            yield from out.to_batches()

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


def source_files(io: TableIO) -> list[tuple[str, str]] | None:
    """(decoded table, file) of every source's snapshot, or ``None`` if one needs ``read``."""
    out: list[tuple[str, str]] = []
    for name in SOURCES:
        files = io.snapshot_files(name)
        if files is None:
            return None
        out.extend((name, f) for f in files)
    return out


def packed_input(io: TableIO, files: list[tuple[str, str]]) -> DataFrame:
    """The packed replay input of the decoded tables (one Spark stage, tasks read the files)."""
    from pipelines.file_tasks import spread

    spark = io.spark
    assert spark is not None
    paths = spread(spark, files, "source string, path string")
    buckets = BUCKETS_PER_SHUFFLE_PARTITION * int(spark.conf.get("spark.sql.shuffle.partitions") or 4)

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
    from pipelines.gold import from_union
    from pipelines.replay_job import replay_sorted_batches

    tables = tuple(options["tables"])
    opts = {k: options[k] for k in ("retention_ms", "rules", "as_of_ms", "num_partitions", "coordinator")}
    for union in replay_buckets(batches, lambda bs: replay_sorted_batches(bs, tables=tables, **opts)):
        yield from_union(union, tables), 0


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
    coordinator: str = "old",
    on_as_of: Callable[[int | None], None] | None = None,
) -> dict[str, str] | None:
    """Replay the decoded tables' files and write the gold tables (rust engine).

    One Spark job: packed input → shuffle by bucket → the replaying tasks write every gold table's
    files (``offsetlake_delta_rs_multi``). Event tables are replaced with the marker
    (``app_id``, ``version``); ``current_state`` tables are staged and then MERGEd (only changed
    rows rewritten, rows gone from the rebuild deleted). Returns ``{table: written | merged |
    unchanged}``, or ``None`` when the decoded tables must be read through ``TableIO.read``.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from schemas import get as get_spec

    files = source_files(io)
    if files is None:
        return None
    packed = packed_input(io, files).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        if as_of_ms is None and retention_ms is not None:
            row = packed.agg(F.max("max_ts").alias("m")).collect()[0]
            as_of_ms = None if row["m"] is None else int(row["m"])
        if on_as_of is not None:
            on_as_of(as_of_ms)
        n = int(packed.sparkSession.conf.get("spark.sql.shuffle.partitions") or 4)
        shuffled = packed.repartition(n, "bucket").sortWithinPartitions("bucket")
        options = {"tables": list(tables), "retention_ms": retention_ms, "rules": rules, "as_of_ms": as_of_ms,
                   "num_partitions": num_partitions, "coordinator": coordinator}
        staged = [t for t in tables if t in current_state]
        results = io.write_routed(list(tables), shuffled, "pipelines.batch_replay:route_replay",
                                  route_options=options, txn_app_id=app_id, txn_version=version, staged=staged)
    finally:
        packed.unpersist()
    out = {name: "unchanged" if wr.skipped else "written" for name, wr in results.items()}
    for name in staged:
        try:
            wr = io.merge(name, io.read_staged(name), get_spec(name).primary_key, delete_missing=True,
                          txn_app_id=app_id, txn_version=version)
        finally:
            io.drop_staged(name)
        out[name] = "unchanged" if wr.skipped else "merged"
    return out
