"""The batch decode stage: raw_records' files -> the five decoded tables and the replay input, one pass.

Rules:
- Tasks read raw_records' snapshot files themselves (pyarrow, bounded batches) and decode them
  with ``pipelines.records.decode`` (``decode_batch``: the vectorised fast path plus the core
  codec for everything else); the rows of ``offset_commits``, ``group_metadata``,
  ``group_records``, ``unsupported_records`` and ``quarantine`` are written as Parquet files by the same task
  (``TableIO.write_routed``). Nothing is decoded twice and no decoded row crosses the JVM.
- The same pass writes the replay input, cut into buckets (``pipelines.batch.replay``), and the
  raw records' per-partition figures (``pipelines.inputs.log_shape``) beside it.
- Transactions (broker segments, KIP-98): the driver stages what became of each transactional
  record (``pipelines.batch.decode_txn``) and the tasks set the transaction columns of their
  offset-commit rows from it; no row is added or removed.
- The ingest's landing files may join the pass (``LandingAppend``, the batch job running both
  stages): each is read once, copied into raw_records and decoded; raw_records is committed
  first, then the decoded tables with the marker of the version that append made.
- Every raw record becomes exactly one row of exactly one table; the driver checks that the
  rows written add up to the rows read before committing anything (raw = decoded + quarantined
  + unsupported, enforced at the commit).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pipelines.batch.decode_txn import TXN_FATES, read_txn_fates, stage_txn_fates, with_txn_fates
from pipelines.batch.file_tasks import parquet_batches, spread
from pipelines.batch.ingest import CHECK, RAW_TABLE, landing_file
from pipelines.batch.replay import bucket_files_for
from pipelines.errors import UsageError
from pipelines.inputs.log_shape import StatsAccumulator
from pipelines.records.decode import INPUT_COLUMNS, TABLES, decode_tables
from pipelines.records.positions import POSITION
from pipelines.records.replay_input import SOURCES
from pipelines.tableio import SIDE_KEY
from schemas import get as get_spec

if TYPE_CHECKING:
    import pyarrow as pa

    from pipelines.batch.ingest import LandingAppend
    from pipelines.tableio import TableIO, WriteResult

FILE_ROUTE = "pipelines.batch.decode:route_decode_files"
#: raw rows per decoded batch: the per-batch costs (distinct group ids hashed for the replay
#: input's buckets, schema casts, one union split) are paid 4x less often than at
#: ``file_tasks.BATCH_ROWS``; the fast path still works in ``decode_commits.CHUNK_ROWS`` slices
DECODE_BATCH_ROWS = 262_144


def _stats_for(options: dict[str, Any]) -> Any:
    """With the replay input, the raw records' per-partition figures go beside it (``log_shape``)."""
    if not options.get("replay_input"):
        return None

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

    spool = bucket_files_for(options)
    if spool is None:
        yield from decoded
        return

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
) -> Iterator[tuple[dict[str, Any], int]]:
    """``RoutedWriter`` route (``pipelines.tableio.rust_sink``) over FILE PATHS (column ``path``) of raw_records'
    snapshot: each file is read with pyarrow in bounded batches and decoded (no row crosses
    the JVM). The landing files listed under ``options[LANDING_KEY]`` are the ingest's
    (``pipelines.batch.ingest.landing_file``): their rows also go to raw_records as they are
    decoded."""

    lenient = bool(options.get("lenient", False))
    stats = _stats_for(options)
    fates = read_txn_fates(options.get("txn_fates"))
    landing = set(options.get(LANDING_KEY, ()))

    def decode(raw: pa.RecordBatch) -> dict[str, Any]:
        tables: dict[str, Any] = decode_tables(_seen(raw, stats), lenient=lenient)
        if fates is not None and "offset_commits" in tables:
            tables["offset_commits"] = with_txn_fates(tables["offset_commits"], fates)
        return tables

    def decoded() -> Iterator[tuple[dict[str, Any], int]]:
        for batch in batches:
            for path in batch.column("path").to_pylist():
                if path in landing:
                    for out, rows in landing_file(path, options, options[SIDE_KEY], DECODE_BATCH_ROWS):
                        # rows without a position are not decoded: the ingest's check refuses
                        # this pass (``ingest.check_disjoint``), and its exact path takes them
                        if rows is None or any(rows.column(c).null_count for c in POSITION):
                            yield out, 0
                        else:
                            yield {**decode(rows), **out}, rows.num_rows
                    continue
                for raw in parquet_batches(path, INPUT_COLUMNS, DECODE_BATCH_ROWS):
                    yield decode(raw), raw.num_rows

    yield from _spooled(decoded(), options, stats)


#: route option: the landing files a decode pass also copies into raw_records (``LandingAppend``)
LANDING_KEY = "landing_files"


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
    landing: LandingAppend | None = None,
    only_files: list[str] | None = None,
) -> dict[str, WriteResult]:
    """Decode ``raw_records`` into the five decoded tables in one pass, one Spark task per group of
    raw_records' files. ``spool`` (``pipelines.batch.replay.new_replay_input``): the same pass
    writes the replay input, and the commit lists it in the manifest (then the pass runs even when
    the tables already carry the marker: only the replay input is new).

    ``landing``: the ingest's routed write joins the pass. Its landing files are read once, copied
    into raw_records (checked as the ingest checks them) and decoded with raw_records' own files;
    raw_records' append is committed first, then the decoded tables with the marker ``version``
    (the version that append makes: ``landing.table_version + 1``). ``expected_rows`` counts
    both. When the check refuses, nothing is committed (``COMMIT_REFUSED``).

    ``only_files``: an incremental decode (``pipelines.batch.carried``): only these raw_records
    files (those added since the version the decoded tables hold), appended to the decoded tables
    (``expected_rows`` counts them and the landing's); ``spool`` then continues the base's replay
    input.

    Raises:
        UsageError: raw_records' snapshot is not its file list (deletion vectors, column mapping).
        RuntimeError: the rows written do not add up to the rows read; nothing was committed.
    """

    assert io.spark is not None
    files = io.snapshot_files("raw_records") if only_files is None else list(only_files)
    if files is None:
        raise UsageError(
            "raw_records uses deletion vectors or column mapping; offsetlake reads its files "
            "directly and needs a plain Delta table (rewrite it without those features)"
        )
    fates = stage_txn_fates(io)
    route_options = _route_options(lenient, spool, fates)
    names = list(TABLES)
    commit_check: str | None = None
    appended: dict[str, dict[str, Any]] | None = None
    if landing is not None:
        route_options.update(landing.options, **{LANDING_KEY: landing.files})
        files = [*files, *landing.files]
        names = [RAW_TABLE, *names]
        commit_check = CHECK
        appended = {RAW_TABLE: {"rows": landing.rows, "metadata": landing.metadata}}
    try:
        results = io.write_routed(
            names,
            spread(io.spark, [(f,) for f in files], "path string"),
            FILE_ROUTE,
            route_options=route_options,
            txn_app_id=app_id,
            txn_version=version,
            mode="overwrite" if only_files is None else "append",
            rows_equal_input=True,
            expected_rows=expected_rows,
            side_manifest=spool[1] if spool else None,
            commit_check=commit_check,
            appended=appended,
        )
        return {name: wr for name, wr in results.items() if name in TABLES}
    finally:
        if fates is not None:
            io.drop_staged(TXN_FATES)
