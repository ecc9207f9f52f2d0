"""The replay input the streaming job feeds its stateful function: decode-union rows → replay-input
rows (Arrow) → ONE packed row per group and raw Arrow batch.

Rules:
- Decode and pack before the shuffle: the batch job's vectorised decoder
  (``pipelines.decode.decode_batch``), the replay-input projection in Arrow
  (``replay_input_arrow``, equal to the batch's ``replay_input``), then one row per group and
  raw Arrow batch holding that group's rows as an Arrow IPC message (``pack_replay_input``):
  ``applyInPandasWithState`` converts its input to pandas row by row, so the per-record
  columns must not cross it. Spark's file/Kafka source feeds one ``mapInArrow`` doing this
  (``packed_replay_input``); the packed landing source (``pipelines.stream.source``) calls the
  same ``pack_batches`` in its tasks.
- A pack's ``log_timestamp`` is its newest record's time: the watermark (max event time − delay)
  is unchanged, and a pack is dropped as late only when all of its records are.
- Inside a pack the rows are sorted by (coordinator_partition, log_offset)
  (``pipelines.replay_job.replay_order``); ``unpack_replay_input`` is the exact inverse.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame


#: The packed replay input: one row per (group, input Arrow batch) — see ``pack_batches``.
PACK_DDL = "group_id string, log_timestamp timestamp, records binary"


def _input_arrow_schema() -> pa.Schema:
    from pipelines.replay_job import replay_input_arrow_schema

    return replay_input_arrow_schema()


def replay_input_arrow(union: pa.RecordBatch | pa.Table) -> pa.Table:
    """Decode-union rows → replay-input rows (``pipelines.replay_job.REPLAY_INPUT_DDL``), in Arrow.

    The same projection as the batch job's ``replay_input`` (Spark SQL over the split decoded
    tables; ``tests/pipelines/test_stream_job.py`` proves both agree): offset commits, group
    metadata and unsupported records of a known group; each kind's columns, the others null;
    timestamps as epoch ms (the decoder builds them from ms, so ``us // 1000`` is exact).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    from pipelines.decode import KIND_GROUP_METADATA, KIND_OFFSET_COMMIT, KIND_UNSUPPORTED
    from pipelines.replay_job import REC_GROUP_METADATA, REC_OFFSET_COMMIT, REC_UNSUPPORTED

    table = union if isinstance(union, pa.Table) else pa.Table.from_batches([union])
    kind = table.column("kind")
    is_oc = pc.equal(kind, KIND_OFFSET_COMMIT)
    is_gm = pc.equal(kind, KIND_GROUP_METADATA)
    is_un = pc.equal(kind, KIND_UNSUPPORTED)
    keep = pc.and_(pc.or_(pc.or_(is_oc, is_gm), is_un), pc.is_valid(table.column("group_id")))
    table = table.filter(keep)
    schema = _input_arrow_schema()
    if table.num_rows == 0:
        return schema.empty_table()
    kind = table.column("kind")
    is_oc = pc.equal(kind, KIND_OFFSET_COMMIT)
    is_gm = pc.equal(kind, KIND_GROUP_METADATA)
    is_un = pc.equal(kind, KIND_UNSUPPORTED)
    not_un = pc.invert(is_un)

    n = table.num_rows

    def masked(cond: Any, col: Any) -> Any:
        # The decoder leaves other kinds' columns null: mask only when a stray value exists
        # (if_else over ~20 columns, nested ones among them, cost 10x the decode itself).
        if col.null_count == n or not pc.any(pc.and_(pc.invert(cond), pc.is_valid(col))).as_py():
            return col
        return pc.if_else(cond, col, pa.scalar(None, col.type))

    def when(cond: Any, name: str) -> Any:
        col = table.column(name)
        typ = schema.field(name).type
        if col.null_count == n:
            return pa.nulls(n, typ)
        return masked(cond, col.cast(typ))

    def ms(cond: Any, name: str) -> Any:
        col = table.column(name)
        if col.null_count == n:
            return pa.nulls(n, pa.int64())
        return masked(cond, pc.divide(col.cast(pa.int64()), 1000))

    rec_kind = pc.if_else(is_oc, REC_OFFSET_COMMIT, pc.if_else(is_gm, REC_GROUP_METADATA, REC_UNSUPPORTED))
    cols: dict[str, Any] = {
        "group_id": table.column("group_id"),
        "coordinator_partition": table.column("coordinator_partition"),
        "log_offset": table.column("log_offset"),
        "log_timestamp_ms": pc.divide(table.column("log_timestamp").cast(pa.int64()), 1000),
        "rec_kind": rec_kind,
        "key_version": (pc.if_else(is_un, table.column("record_type"), table.column("key_version"))
                        if pc.any(is_un).as_py() else table.column("key_version")),
        "is_tombstone": when(not_un, "is_tombstone"),
        "value_version": when(not_un, "value_version"),
        "commit_timestamp_ms": ms(is_oc, "commit_timestamp"),
        "expire_timestamp_ms": ms(is_oc, "expire_timestamp"),
        "current_state_timestamp_ms": ms(is_gm, "current_state_timestamp"),
    }
    for name in ("topic", "partition", "committed_offset", "leader_epoch", "metadata"):
        cols[name] = when(is_oc, name)
    for name in ("protocol_type", "generation", "protocol", "leader", "members"):
        cols[name] = when(is_gm, name)  # members: the struct cast keeps the replay's 8 fields
    for name in ("raw_key", "raw_value"):
        cols[name] = when(is_un, name)
    return pa.Table.from_arrays([pc.cast(cols[f.name], f.type) for f in schema], schema=schema)


def pack_replay_input(table: pa.Table) -> pa.RecordBatch:
    """Replay-input rows → one packed row per group: (group_id, max record time, the group's rows
    as one Arrow IPC record-batch message, sorted by (coordinator_partition, log_offset))."""
    import numpy as np
    import pyarrow as pa

    from pipelines.replay_job import replay_order

    schema = pa.schema([("group_id", pa.string()), ("log_timestamp", pa.timestamp("us", tz="UTC")),
                        ("records", pa.binary())])
    if table.num_rows == 0:
        return pa.RecordBatch.from_pylist([], schema=schema)
    order = pa.array(replay_order(table), pa.int64())
    batch = table.take(order).combine_chunks().to_batches()[0]
    ids = batch.column("group_id").dictionary_encode().indices.to_numpy(zero_copy_only=False)
    starts = np.concatenate(([0], np.flatnonzero(ids[1:] != ids[:-1]) + 1))
    ends = np.append(starts[1:], batch.num_rows)
    ts = batch.column("log_timestamp_ms").to_numpy(zero_copy_only=False)
    blobs = [batch.slice(int(s), int(e - s)).serialize().to_pybytes() for s, e in zip(starts, ends)]
    return pa.RecordBatch.from_arrays(
        [batch.column("group_id").take(pa.array(starts)),
         pa.array(np.maximum.reduceat(ts, starts) * 1000, pa.int64()).cast(schema.field("log_timestamp").type),
         pa.array(blobs, pa.binary())],
        schema=schema,
    )


def unpack_replay_input(blobs: Sequence[bytes]) -> pa.Table:
    """The inverse of ``pack_replay_input`` for one group's packed rows (any order)."""
    import pyarrow as pa

    schema = _input_arrow_schema()
    return pa.Table.from_batches(
        [pa.ipc.read_record_batch(pa.py_buffer(b), schema) for b in blobs], schema=schema
    )


def pack_batches(batches: Iterator[pa.RecordBatch], *, lenient: bool = False) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` function of the replay query: raw batches → decode → replay input → packed
    rows (one per group and raw batch)."""
    import pyarrow as pa

    from pipelines.decode import UNION_SCHEMA, decode_batch

    for batch in batches:
        parts = decode_batch(batch, lenient=lenient)
        if not parts:
            continue
        packed = pack_replay_input(replay_input_arrow(pa.Table.from_batches(parts, schema=UNION_SCHEMA)))
        if packed.num_rows:
            yield packed


def packed_replay_input(raw_df: DataFrame, *, lenient: bool = False) -> DataFrame:
    """Raw records → packed replay input (``PACK_DDL``), in ONE ``mapInArrow`` pass.

    Why packed: ``applyInPandasWithState`` hands its input to Python as pandas; converting ~25
    decoded columns (a nested ``members`` array among them) to pandas and back to Arrow per
    record cost more than the replay itself. Packed, a group's records of one raw batch cross
    as one Arrow IPC message (one bytes object), and a micro-batch of N records gives at most
    groups × raw batches rows to shuffle, sort and convert. ``log_timestamp`` is the pack's
    newest record time: the watermark (max event time − delay) is unchanged; a pack is dropped
    as late only when all of its records are (Spark drops whole rows).
    """
    from pipelines.decode import INPUT_COLUMNS

    # ``topic`` only fills the quarantine's raw_topic (the other query's business): not converted.
    cols = [c for c in INPUT_COLUMNS if c in raw_df.columns and c != "topic"]

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return pack_batches(batches, lenient=lenient)

    return raw_df.select(*cols).mapInArrow(fn, PACK_DDL)
