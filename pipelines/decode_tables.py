"""Decode raw records straight into the four decoded Delta tables in one pass (rust engine).

Rules:
- The same decoder as ``pipelines.decode`` (``decode_batch``: the vectorised fast path plus the
  core codec for everything else) and the same projection as ``split_union``, done in Arrow on
  the executors: a raw batch goes in, the rows of ``offset_commits``, ``group_metadata``,
  ``unsupported_records`` and ``quarantine`` come out and are written as Parquet files by the
  same task (``pipelines.tableio.rust_sink``'s ``offsetlake_delta_rs_multi``). Nothing is decoded
  twice and no decoded row crosses back into the JVM.
- Every raw record becomes exactly one row of exactly one table; the driver checks that the
  rows written add up to the rows read before committing anything (raw = decoded + quarantined
  + unsupported, enforced at the commit).
- ``split_union_arrow`` is the Arrow twin of ``pipelines.decode.split_union``; a test keeps the
  two equal.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from schemas.decoded import GROUP_METADATA, OFFSET_COMMITS, QUARANTINE, UNSUPPORTED_RECORDS

if TYPE_CHECKING:
    import pyarrow as pa

    from pipelines.tableio import TableIO, WriteResult

ROUTE = "pipelines.decode_tables:route_decode"
FILE_ROUTE = "pipelines.decode_tables:route_decode_files"

_RAW_NAMES = {
    "key": "raw_key", "value": "raw_value", "topic": "raw_topic", "partition": "coordinator_partition",
    "offset": "log_offset", "timestamp": "log_timestamp",
}
# table -> (union kind, {table column: union column})
_PROJECTIONS: dict[str, tuple[str, dict[str, str]]] = {
    OFFSET_COMMITS.name: ("KIND_OFFSET_COMMIT", {}),
    GROUP_METADATA.name: ("KIND_GROUP_METADATA", {}),
    UNSUPPORTED_RECORDS.name: ("KIND_UNSUPPORTED", {**_RAW_NAMES, "reason": "error_message"}),
    QUARANTINE.name: ("KIND_QUARANTINE", _RAW_NAMES),
}
TABLES = tuple(_PROJECTIONS)
_SPECS = {s.name: s for s in (OFFSET_COMMITS, GROUP_METADATA, UNSUPPORTED_RECORDS, QUARANTINE)}


def split_union_arrow(union: pa.RecordBatch | pa.Table) -> dict[str, pa.Table]:
    """The decoded tables' rows of one union batch (Arrow, declared schemas; empty tables left out)."""
    import numpy as np
    import pyarrow as pa

    from pipelines import decode

    table = union if isinstance(union, pa.Table) else pa.Table.from_batches([union])
    kinds = table.column("kind").to_numpy()
    out: dict[str, pa.Table] = {}
    for name, (kind_attr, renames) in _PROJECTIONS.items():
        idx = np.flatnonzero(kinds == getattr(decode, kind_attr))
        if not len(idx):
            continue
        part = table if len(idx) == table.num_rows else table.take(pa.array(idx, pa.int64()))
        schema = _SPECS[name].arrow_schema()
        cols = [part.column(renames.get(f.name, f.name)).cast(f.type) for f in schema]
        out[name] = pa.Table.from_arrays(cols, schema=schema)
    return out


def decode_tables(batch: pa.RecordBatch, *, lenient: bool = False) -> dict[str, pa.Table]:
    """One raw batch → the decoded tables' rows."""
    import pyarrow as pa

    from pipelines.decode import decode_batch

    parts: dict[str, list[pa.Table]] = {}
    for union in decode_batch(batch, lenient=lenient):
        for name, rows in split_union_arrow(union).items():
            parts.setdefault(name, []).append(rows)
    return {name: pa.concat_tables(ts) if len(ts) > 1 else ts[0] for name, ts in parts.items()}


def route_decode(
    batches: Iterator[pa.RecordBatch], options: dict[str, Any]
) -> Iterator[tuple[dict[str, pa.Table], int]]:
    """``offsetlake_delta_rs_multi`` route over raw records: each batch of them → decoded rows
    (and, with a ``spool`` option, the replay input cut into buckets: ``batch_replay.Spool``)."""
    lenient = bool(options.get("lenient", False))
    stats = _stats_for(options)
    yield from _spooled(((decode_tables(_seen(b, stats), lenient=lenient), b.num_rows) for b in batches), options,
                        stats)


def _stats_for(options: dict[str, Any]) -> Any:
    """With a spool, the raw records' per-partition figures go beside it (``log_shape``)."""
    if not options.get("spool"):
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
    """Pass decoded batches on; when the options ask for it, also feed them to the replay spool
    (and report the raw records' per-partition figures beside it)."""
    from pipelines.batch_replay import SOURCES, spool_for
    from pipelines.tableio import SIDE_KEY

    spool = spool_for(options)
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


def route_decode_files(
    batches: Iterator[pa.RecordBatch], options: dict[str, Any]
) -> Iterator[tuple[dict[str, pa.Table], int]]:
    """``offsetlake_delta_rs_multi`` route over FILE PATHS (column ``path``) of raw_records'
    snapshot: each file is read with pyarrow in bounded batches and decoded (no row crosses
    the JVM)."""
    from pipelines.decode import INPUT_COLUMNS
    from pipelines.file_tasks import parquet_batches

    lenient = bool(options.get("lenient", False))
    stats = _stats_for(options)

    def decoded() -> Iterator[tuple[dict[str, pa.Table], int]]:
        for batch in batches:
            for path in batch.column("path").to_pylist():
                for raw in parquet_batches(path, INPUT_COLUMNS):
                    yield decode_tables(_seen(raw, stats), lenient=lenient), raw.num_rows

    yield from _spooled(decoded(), options, stats)


def write_decoded_tables(
    io: TableIO, raw_df: Any, *, app_id: str, version: int, lenient: bool = False,
    expected_rows: int | None = None, spool: tuple[dict[str, Any], str] | None = None,
) -> dict[str, WriteResult]:
    """Decode ``raw_df`` (raw records) into the four decoded tables in one pass (rust engine).

    Raises:
        Py4JJavaError / RuntimeError: the rows written do not add up to the rows read (or to
            ``expected_rows``); nothing was committed.
    """
    from pipelines.decode import INPUT_COLUMNS

    cols = [c for c in INPUT_COLUMNS if c in raw_df.columns]
    return io.write_routed(
        TABLES, raw_df.select(*cols), ROUTE, route_options=_route_options(lenient, spool), txn_app_id=app_id,
        txn_version=version, rows_equal_input=True, expected_rows=expected_rows,
        side_manifest=spool[1] if spool else None,
    )


def _route_options(lenient: bool, spool: tuple[dict[str, Any], str] | None) -> dict[str, Any]:
    return {"lenient": lenient, **({"spool": spool[0]} if spool else {})}


def write_decoded_from_raw_table(
    io: TableIO, *, app_id: str, version: int, lenient: bool = False, expected_rows: int | None = None,
    spool: tuple[dict[str, Any], str] | None = None,
) -> dict[str, WriteResult]:
    """Decode ``raw_records`` into the four decoded tables in one pass (rust engine).

    When the table's snapshot is its file list, the tasks read those files themselves (one
    Spark task per group of files, pyarrow reads, no JVM row conversion); otherwise the rows
    come through ``TableIO.read``. ``spool`` (``batch_replay.spool_options``): the same pass
    also writes the replay input, cut into buckets, and the commit lists it in the manifest.
    """
    from pipelines.file_tasks import spread

    files = io.snapshot_files("raw_records")
    if files is None:
        return write_decoded_tables(io, io.read("raw_records"), app_id=app_id, version=version,
                                    lenient=lenient, expected_rows=expected_rows, spool=spool)
    return io.write_routed(
        TABLES, spread(io.spark, [(f,) for f in files], "path string"), FILE_ROUTE,
        route_options=_route_options(lenient, spool), txn_app_id=app_id, txn_version=version,
        rows_equal_input=True, expected_rows=expected_rows, side_manifest=spool[1] if spool else None,
    )
