"""The batch decode stage: raw_records' files -> the five decoded tables and the replay input, one pass.

Rules:
- Tasks read raw_records' snapshot files themselves (pyarrow, bounded batches) and decode them
  with ``pipelines.records.decode`` (``decode_batch``: the vectorised fast path plus the core
  codec for everything else); the rows of ``offset_commits``, ``group_metadata``,
  ``group_records``, ``unsupported_records`` and ``quarantine`` are written as Parquet files by the same task
  (``TableIO.write_routed``). Nothing is decoded twice and no decoded row crosses the JVM.
- The same pass writes the replay input, cut into buckets (``pipelines.batch.replay``), and the
  raw records' per-partition figures (``pipelines.log_shape``) beside it.
- Transactions (broker segments, KIP-98): the driver resolves ``raw_transactions`` with the core's
  rule (``coordinator_core.transactions.transaction_fates``: a record's transaction is closed by
  the first COMMIT/ABORT marker of its producer in its partition after it, else open) into one
  Arrow IPC file under the run's staging directory; each task sets ``producer_id``,
  ``txn_outcome`` and ``txn_marker_offset`` of its offset-commit rows found there
  (``with_txn_fates``). Other rows keep nulls; no row is added or removed.
- Every raw record becomes exactly one row of exactly one table; the driver checks that the
  rows written add up to the rows read before committing anything (raw = decoded + quarantined
  + unsupported, enforced at the commit).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pipelines.records.decode import TABLES, decode_tables

if TYPE_CHECKING:
    import pyarrow as pa

    from pipelines.tableio import TableIO, WriteResult

FILE_ROUTE = "pipelines.batch.decode:route_decode_files"


def _stats_for(options: dict[str, Any]) -> Any:
    """With the replay input, the raw records' per-partition figures go beside it (``log_shape``)."""
    if not options.get("replay_input"):
        return None
    from pipelines.log_shape import StatsAccumulator

    return StatsAccumulator()


def _seen(batch: pa.RecordBatch, stats: Any) -> pa.RecordBatch:
    if stats is not None:
        stats.add(batch)
    return batch


def _spooled(
    decoded: Iterator[tuple[dict[str, pa.Table], int]], options: dict[str, Any], stats: Any = None
) -> Iterator[tuple[dict[str, pa.Table], int]]:
    """Pass decoded batches on; when the options ask for it, also feed them to the replay input's
    bucket files (and report the raw records' per-partition figures beside them)."""
    from pipelines.batch.replay import bucket_files_for
    from pipelines.records.replay_input import SOURCES
    from pipelines.tableio import SIDE_KEY

    spool = bucket_files_for(options)
    if spool is None:
        yield from decoded
        return
    from schemas import get as get_spec

    for tables, consumed in decoded:
        for name in SOURCES:
            if name in tables:
                # cast once to the declared schema: the spool and the table writer share it
                spec = get_spec(name)
                tables[name] = tables[name].select(list(spec.column_names)).cast(spec.arrow_schema())
                spool.add(name, tables[name])
        yield tables, consumed
    spool.close()
    if stats is not None:
        options[SIDE_KEY].extend(stats.entries())


RAW_TRANSACTIONS = "raw_transactions"
#: the staged fates: ``<TXN_FATES>/fates.arrow`` in the run's staging directory (``TableIO.drop_staged``)
TXN_FATES = "txn_fates"
_OUTCOMES = {True: "committed", False: "aborted", None: "open"}
#: partitions < 2^19, offsets < 2^44: one sortable int64 per position
_OFFSET_BITS = 44


def _position_keys(part: Any, off: Any) -> Any:
    import numpy as np

    return (np.asarray(part, np.int64) << _OFFSET_BITS) | np.asarray(off, np.int64)


def txn_fates_table(txn: pa.Table) -> pa.Table:
    """``raw_transactions`` rows -> one row per transactional record: (coordinator_partition,
    log_offset, producer_id, txn_outcome, txn_marker_offset), sorted by position (module rules)."""
    import pyarrow as pa

    from coordinator_core.records import TxnMarker
    from coordinator_core.transactions import transaction_fates
    from schemas.decoded import OFFSET_COMMITS

    rows = txn.select(["partition", "offset", "producer_id", "control_type"]).to_pylist()
    records = [(r["partition"], r["offset"], r["producer_id"]) for r in rows if r["control_type"] is None]
    # COMMIT (1) / ABORT (0) only: the other control types (KRaft's) close no transaction
    markers = [
        TxnMarker(r["partition"], r["offset"], 0, r["producer_id"], r["control_type"] == 1)
        for r in rows
        if r["control_type"] in (0, 1)
    ]
    if any(p >= 1 << 19 or o >= 1 << _OFFSET_BITS for p, o, _ in records):
        raise ValueError("raw_transactions: a partition or offset beyond the decode's key range")
    fates = transaction_fates(records, markers)
    records.sort()
    schema = OFFSET_COMMITS.arrow_schema()
    names = ("coordinator_partition", "log_offset", "producer_id", "txn_outcome", "txn_marker_offset")
    cols = (
        [p for p, _, _ in records],
        [o for _, o, _ in records],
        [pid for _, _, pid in records],
        [_OUTCOMES[fates[(p, o)].committed] for p, o, _ in records],
        [fates[(p, o)].marker_offset for p, o, _ in records],
    )
    return pa.Table.from_arrays(
        [pa.array(c, schema.field(n).type) for n, c in zip(names, cols, strict=True)],
        schema=pa.schema([schema.field(n) for n in names]),
    )


def stage_txn_fates(io: TableIO) -> str | None:
    """``txn_fates_table`` of ``raw_transactions`` as one Arrow IPC file under the run's staging
    directory (None: no transactional record)."""
    import pyarrow as pa

    from pipelines.tableio.uri import filesystem as filesystem_of

    txn = io.read_arrow(RAW_TRANSACTIONS, ["partition", "offset", "producer_id", "control_type"])
    if txn is None or not txn.num_rows:
        return None
    table = txn_fates_table(txn)
    if not table.num_rows:
        return None
    path = io.staging_path(TXN_FATES) + "/fates.arrow"
    filesystem, inner = filesystem_of(path)
    filesystem.create_dir(inner.rsplit("/", 1)[0], recursive=True)
    with filesystem.open_output_stream(inner) as fh, pa.ipc.new_file(fh, table.schema) as writer:
        writer.write_table(table)
    return path


def _read_fates(path: str | None) -> pa.Table | None:
    import pyarrow as pa

    from pipelines.tableio.uri import filesystem as filesystem_of

    if path is None:
        return None
    filesystem, inner = filesystem_of(path)
    with filesystem.open_input_file(inner) as fh:
        return pa.ipc.open_file(fh).read_all()


def with_txn_fates(commits: pa.Table, fates: pa.Table | None) -> pa.Table:
    """``offset_commits`` rows with the transaction columns of the rows ``fates`` holds (by
    position; ``txn_fates_table``); the others unchanged."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if fates is None or not fates.num_rows or not commits.num_rows:
        return commits
    keys = _position_keys(fates.column("coordinator_partition"), fates.column("log_offset"))
    mine = _position_keys(commits.column("coordinator_partition"), commits.column("log_offset"))
    at = np.minimum(np.searchsorted(keys, mine), len(keys) - 1)
    hit = keys[at] == mine
    if not hit.any():
        return commits
    take = pa.array(np.where(hit, at, 0), pa.int64())
    for name in ("producer_id", "txn_outcome", "txn_marker_offset"):
        col = pc.if_else(pa.array(hit), fates.column(name).take(take), commits.column(name))
        commits = commits.set_column(commits.schema.get_field_index(name), commits.schema.field(name), col)
    return commits


def route_decode_files(
    batches: Iterator[pa.RecordBatch], options: dict[str, Any]
) -> Iterator[tuple[dict[str, pa.Table], int]]:
    """``offsetlake_delta_rs_multi`` route over FILE PATHS (column ``path``) of raw_records'
    snapshot: each file is read with pyarrow in bounded batches and decoded (no row crosses
    the JVM)."""
    from pipelines.batch.file_tasks import parquet_batches
    from pipelines.records.decode import INPUT_COLUMNS

    lenient = bool(options.get("lenient", False))
    stats = _stats_for(options)
    fates = _read_fates(options.get("txn_fates"))

    def decoded() -> Iterator[tuple[dict[str, pa.Table], int]]:
        for batch in batches:
            for path in batch.column("path").to_pylist():
                for raw in parquet_batches(path, INPUT_COLUMNS):
                    tables = decode_tables(_seen(raw, stats), lenient=lenient)
                    if fates is not None and "offset_commits" in tables:
                        tables["offset_commits"] = with_txn_fates(tables["offset_commits"], fates)
                    yield tables, raw.num_rows

    yield from _spooled(decoded(), options, stats)


def _route_options(lenient: bool, spool: tuple[dict[str, Any], str] | None, fates: str | None) -> dict[str, Any]:
    return {"lenient": lenient, "txn_fates": fates, **({"replay_input": spool[0]} if spool else {})}


def write_decoded_from_raw_table(
    io: TableIO,
    *,
    app_id: str,
    version: int,
    lenient: bool = False,
    expected_rows: int | None = None,
    spool: tuple[dict[str, Any], str] | None = None,
) -> dict[str, WriteResult]:
    """Decode ``raw_records`` into the five decoded tables in one pass, one Spark task per group of
    raw_records' files. ``spool`` (``pipelines.batch.replay.new_replay_input``): the same pass
    writes the replay input, and the commit lists it in the manifest (then the pass runs even when
    the tables already carry the marker: only the replay input is new).

    Raises:
        UsageError: raw_records' snapshot is not its file list (deletion vectors, column mapping).
        RuntimeError: the rows written do not add up to the rows read; nothing was committed.
    """
    from pipelines.batch.file_tasks import spread
    from pipelines.errors import UsageError

    assert io.spark is not None
    files = io.snapshot_files("raw_records")
    if files is None:
        raise UsageError(
            "raw_records uses deletion vectors or column mapping; offsetlake reads its files "
            "directly and needs a plain Delta table (rewrite it without those features)"
        )
    fates = stage_txn_fates(io)
    try:
        return io.write_routed(
            TABLES,
            spread(io.spark, [(f,) for f in files], "path string"),
            FILE_ROUTE,
            route_options=_route_options(lenient, spool, fates),
            txn_app_id=app_id,
            txn_version=version,
            rows_equal_input=True,
            expected_rows=expected_rows,
            side_manifest=spool[1] if spool else None,
        )
    finally:
        if fates is not None:
            io.drop_staged(TXN_FATES)
