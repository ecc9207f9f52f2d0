"""The replay input the streaming job feeds its stateful function: raw batches → decode → replay
input → ONE packed row per state bucket and pack (``PACK_ROWS`` rows of a task's replay input).

Rules:
- Decode and pack before the shuffle, with the functions the batch job uses: the vectorised
  decoder (``pipelines.records.decode.decode_batch``), the one replay-input projection
  (``replay_input.project_union``) and packing (``replay_input.pack_buckets``): one row per state
  bucket and pack holding that bucket's rows as an Arrow IPC message, because
  ``applyInPandasWithState`` converts its input to pandas row by row, so the per-record columns
  must not cross it; packed per bucket, not per group, a micro-batch of 20,000 active groups
  crosses as ~256 rows per task, not 20,000 (1 MB of messages per 40k commits, not 51 MB). Spark's file/Kafka source feeds one ``mapInArrow`` doing this
  (``packed_replay_input``); the packed landing source (``pipelines.stream.source``) calls the
  same ``pack_batches`` in its tasks.
- The bucket is computed here, in the task (``replay_input.state_bucket_of``: Spark's
  ``pmod(xxhash64(group_id), buckets)`` in numpy, the bucket Spark computed for checkpoints
  written when the packs were per group): a group's state stays in its bucket across versions.
  The number of buckets reaches the tasks as an option of the source (``bucket_options``).
- A pack's ``log_timestamp`` is its newest record's time: the watermark (max event time − delay)
  is unchanged, and a pack is dropped as late only when all of its records are.
- Inside a pack the rows are in replay order (``replay_input.replay_order``); ``unpack_packs`` is
  the exact inverse.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pipelines.records import replay_input
from pipelines.records.decode import INPUT_COLUMNS, decode_batch, split_union_arrow
from pipelines.stream import state
from schemas.shapes import STREAM_PACK

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame


#: The packed replay input: one row per state bucket and pack — see ``pack_batches``.
PACK_DDL = STREAM_PACK.ddl()

#: The packed sources' option naming the number of state buckets (``pipelines.stream.state
#: .STATE_BUCKETS``, read on the driver when the query is planned): the tasks compute each
#: group's bucket, Spark's ``pmod(xxhash64(group_id), buckets)`` (``bucket_options``).
BUCKETS_OPTION = "stateBuckets"

#: Replay-input rows packed together: a task's raw batches are held until this many rows, then
#: packed (one row per bucket). ``applyInPandasWithState`` converts every input row of a bucket
#: to pandas, so fewer, fuller packs are cheaper; 262,144 rows hold ~30-60 MB.
PACK_ROWS = 262_144


def bucket_options() -> dict[str, str]:
    """The option every packed source gets (``BUCKETS_OPTION``): the state buckets the stateful
    operator of this version keys by."""

    return {BUCKETS_OPTION: str(state.STATE_BUCKETS)}


def buckets_of(options: Mapping[str, str]) -> int:
    """The state buckets a packed source's options name (``bucket_options``; Spark passes option
    names lowercased). A source planned without them fails: a guessed count would put groups
    in buckets that hold none of their state."""
    return int({k.lower(): v for k, v in options.items()}[BUCKETS_OPTION.lower()])


def pack_batches(
    batches: Iterator[pa.RecordBatch],
    *,
    buckets: int,
    lenient: bool = False,
    outliers: Collection[tuple[int, int]] = (),
    clock_ms: int | None = None,
    decoded: Callable[[dict[str, pa.Table]], None] | None = None,
) -> Iterator[pa.RecordBatch]:
    """The ``mapInArrow`` function of the replay query: raw batches → decode → replay input → packed
    rows: one per state bucket and ``PACK_ROWS`` rows of replay input (a task's raw batches are packed
    together, so a group's records cross the stateful operator's pandas conversion as few rows).

    ``outliers``: (partition, offset) of records the log clock ignores (``pipelines.stream.ledger``):
    in their pack's event time they count as ``clock_ms`` (the clock's "now"), so they never move
    the watermark; they are replayed as they are. ``decoded``: called with each raw batch's
    decoded tables (``split_union_arrow``), the ones the replay input is projected from."""
    import numpy as np

    held: list[tuple[pa.Table, Any]] = []
    rows_held = 0
    for batch in batches:
        parts = decode_batch(batch, lenient=lenient)
        if not parts:
            continue
        tables = split_union_arrow(parts)
        if decoded is not None:
            decoded(tables)
        rows = replay_input.project_tables(tables)
        if not rows.num_rows:
            continue
        event = None
        if outliers and clock_ms is not None:
            part = rows.column("coordinator_partition").to_numpy(zero_copy_only=False)
            off = rows.column("log_offset").to_numpy(zero_copy_only=False)
            hit = np.fromiter(((int(p), int(o)) in outliers for p, o in zip(part, off, strict=True)), bool, len(off))
            if hit.any():
                event = np.where(hit, clock_ms, rows.column("log_timestamp_ms").to_numpy(zero_copy_only=False))
        held.append((rows, event))
        rows_held += rows.num_rows
        if rows_held >= PACK_ROWS:
            yield from _pack(held, buckets)
            held, rows_held = [], 0
    yield from _pack(held, buckets)


def _pack(held: list[tuple[pa.Table, Any]], buckets: int) -> Iterator[pa.RecordBatch]:
    """The held replay-input rows (with their event times, None: the records' own) as packs."""
    import numpy as np
    import pyarrow as pa

    if not held:
        return
    rows = pa.concat_tables([t for t, _ in held]).combine_chunks()  # a take per bucket follows: one chunk each
    event = None
    if any(e is not None for _, e in held):
        event = np.concatenate(
            [e if e is not None else t.column("log_timestamp_ms").to_numpy(zero_copy_only=False) for t, e in held]
        )
    packed = replay_input.pack_buckets(rows, buckets, event)
    if packed.num_rows:
        yield packed


def packed_source_class(name: str, make_reader: Callable[[dict[str, str]], Any]) -> type:
    """A pyspark ``DataSource`` class registered as ``name`` (checkpoints depend on it: the
    caller names it) whose rows are the packed replay input (``PACK_DDL``); its stream reader is
    ``make_reader(options)``. The landing, segment and Kafka sources differ only in that."""
    from pyspark.sql.datasource import DataSource

    class _Source(DataSource):
        @classmethod
        def name(cls) -> str:
            return name

        def schema(self) -> str:
            return PACK_DDL

        def streamReader(self, schema: Any) -> Any:
            return make_reader(dict(self.options))

    return _Source


def packed_replay_input(raw_df: DataFrame, *, buckets: int, lenient: bool = False) -> DataFrame:
    """Raw records → packed replay input (``PACK_DDL``), in ONE ``mapInArrow`` pass.

    Why packed: ``applyInPandasWithState`` hands its input to Python as pandas; converting ~25
    decoded columns (a nested ``members`` array among them) to pandas and back to Arrow per
    record cost more than the replay itself. Packed, a group's records of one raw batch cross
    as one Arrow IPC message (one bytes object), and a micro-batch of N records gives at most
    groups × raw batches rows to shuffle, sort and convert. ``log_timestamp`` is the pack's
    newest record time: the watermark (max event time − delay) is unchanged; a pack is dropped
    as late only when all of its records are (Spark drops whole rows).
    """

    # ``topic`` only fills the quarantine's raw_topic (the other query's business): not converted.
    cols = [c for c in INPUT_COLUMNS if c in raw_df.columns and c != "topic"]

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return pack_batches(batches, buckets=buckets, lenient=lenient)

    return raw_df.select(*cols).mapInArrow(fn, PACK_DDL)
