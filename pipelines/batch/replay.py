"""The batch replay stage: the decode pass writes the replay input by bucket, tasks replay buckets.

Rules:
- The replay input (``pipelines.records.replay_input``) is part of the decode stage's output:
  the decode pass, while it writes the decoded tables, projects their rows and appends them to
  one Arrow IPC file (lz4) per table per task, each record batch one bucket's rows
  (``BucketFiles``), under ``<warehouse>/_replay_input/v<raw_records version>-<layout>-<run>/``.
  The commit lists, per (bucket, file), the batch indices in that directory's manifest (the
  routed writer's side outputs), before the tables are committed, together with the raw
  records' per-partition figures (``pipelines.inputs.log_shape``). The replay input of a raw_records
  version is complete when its manifest exists; the decode stage keeps one (the newest, of this
  ``LAYOUT``) and deletes the others. Files = decode tasks x tables, whatever the bucket count.
- Buckets: ``bucket = string_hash64(group_id) mod B`` (B = ``replay_buckets``, fixed by the
  decode: 32 on the embedded default), so a group lives in exactly one bucket. The replay is
  one Spark stage: each task (one per core, ``file_tasks.spread``) reads whole buckets' batches,
  orders each by (group_id, coordinator_partition, log_offset) (``replay_order_and_groups``:
  row indices, the rows are never gathered) and replays it in that order (``replay_ordered``,
  the core's bulk path: only the rows that become records are taken). No shuffle, no second read of the decoded tables; the newest record time
  comes from the manifest. The same path whether decode and replay run in one process or not.
- Transactions (broker segments' ``raw_transactions``, KIP-98): the driver stages that table next to
  the manifest as one Arrow IPC file (``_transactions.arrow``, rewritten by each replay) and each
  task gives its buckets' rows their producer ids and their groups' COMMIT/ABORT markers
  (``pipelines.records.transactions``) before the sort; without it the rows replay as plain.
- The replaying tasks write the gold tables' files themselves (``TableIO.write_routed``). Event
  tables are replaced with the job's marker; the current-state tables are staged and MERGEd by
  the driver (only changed rows rewritten, rows gone from the rebuild deleted).
"""

from __future__ import annotations

import functools
import json
import logging
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from coordinator_core import FACTS_ONLY, ReplaySettings
from pipelines.batch.file_tasks import spread
from pipelines.batch.kept_groups import replayer, write_bucket
from pipelines.config import join_path
from pipelines.log_clock import evidence_horizon
from pipelines.records import replay_input
from pipelines.records.replay import as_of_and_log_end, replay_ordered
from pipelines.records.transactions import attach_transactions
from pipelines.tableio import SIDE_KEY
from pipelines.uri import filesystem as filesystem_of
from pipelines.uri import read_arrow_file, read_json, write_arrow_file, write_json
from pipelines.warehouse.layout import REPLAY_INPUT_DIR
from schemas import get as get_spec

if TYPE_CHECKING:
    import pyarrow as pa

    from pipelines.tableio import TableIO
    from pipelines.tableio.task_rows import TaskRows

log = logging.getLogger(__name__)

MANIFEST = "_manifest.json"
#: written before the decode pass: its bucket count and, for an incremental decode, the raw
#: version and the entries of the replay input it continues (``new_replay_input``)
INPUT_FILE = "_input.json"
#: rows a task buffers per (bucket, source) before writing them as one record batch
BATCH_ROWS = 32_768


#: The most replay-input rows a bucket holds: a replay task sorts and replays a bucket at once, so
#: its memory grows with it (100M records in 32 buckets of ~3.1M rows: the job's peak was 4.8 GiB,
#: against 1.8 GiB at 10M; bench/RESULTS.md, *scale*).
MAX_BUCKET_ROWS = 1_000_000


def replay_buckets(spark: Any, rows: int = 0) -> int:
    """How many buckets the decode cuts the replay input of ``rows`` raw records into: 4 x the
    larger of the shuffle partitions and twice the default parallelism (32 on the embedded
    default), and enough that none holds more than ``MAX_BUCKET_ROWS`` rows. A bucket is what a
    replay task sorts and replays at once (its memory); the tasks take whole buckets
    (``file_tasks.spread``: one task per slot). Measured at 10M records on 2 cores: 16 and 32
    buckets took the same time, 8 was slower."""
    shuffle = int(spark.conf.get("spark.sql.shuffle.partitions") or 4)
    return max(4 * max(shuffle, 2 * int(spark.sparkContext.defaultParallelism)), -(-rows // MAX_BUCKET_ROWS))


# ---------------------------------------------------------------------------------------------
# Written by the decode pass
# ---------------------------------------------------------------------------------------------
@dataclass
class _SourceFile:
    """One decode task's replay-input file of one source table."""

    stream: Any
    writer: Any
    name: str
    batches: int = 0  # record batches written so far (the next one's index)


@dataclass
class _Bucket:
    """One (bucket, source)'s rows in a decode task: written batches and the buffer."""

    newest: int  # the newest record time, ms
    batches: list[int] = field(default_factory=list)  # their indices in the source's file
    rows: int = 0
    buffered: list[pa.Table] = field(default_factory=list)
    buffered_rows: int = 0


class BucketFiles:
    """One decode task's replay input cut into buckets: ONE Arrow IPC file (lz4) per source table,
    each record batch holding one bucket's rows.

    The decode pass feeds it the decoded tables' rows (``add``) while it writes them. ``close``
    lists, per (bucket, source), the file and the indices of that bucket's batches in ``side``
    (the routed writer's side outputs: only successful tasks' files reach the manifest). A
    replay task reads only its buckets' batches (``read_bucket``). So the replay input is
    (decode tasks x sources) files whatever the bucket count: with a file per (bucket, source)
    a 200-core cluster's run would write ~640k small files.
    """

    def __init__(self, root: str, buckets: int, side: list[dict[str, Any]]) -> None:
        self.uri_root = root.rstrip("/")
        self.fs, self.root = filesystem_of(root)
        self.fs.create_dir(self.root, recursive=True)
        self.buckets = buckets
        self.side = side
        self.tag = uuid.uuid4().hex
        self.files: dict[str, _SourceFile] = {}
        self.open: dict[tuple[int, str], _Bucket] = {}

    def add(self, source: str, decoded: pa.Table) -> None:
        """Rows of decoded table ``source`` (its declared schema) → the buckets' batches."""
        if decoded.num_rows == 0:
            return
        table = replay_input.project(source, decoded)
        # only the columns this source fills: the rest are null for its rows (``read_bucket``)
        table = table.select(list(replay_input.SOURCE_COLUMNS[source]))
        for b, rows, newest in replay_input.cut(table, self.buckets):
            bucket = self.open.setdefault((b, source), _Bucket(newest))
            bucket.buffered.append(rows)
            bucket.buffered_rows += rows.num_rows
            bucket.rows += rows.num_rows
            bucket.newest = max(bucket.newest, newest)
            if bucket.buffered_rows >= BATCH_ROWS:
                self._flush(source, bucket)

    def _flush(self, source: str, bucket: _Bucket) -> None:
        """Write a (bucket, source)'s buffered slices as ONE record batch (few large batches:
        less per-batch IPC and compression overhead, fewer chunks for the replay to sort)."""
        import pyarrow as pa

        if not bucket.buffered:
            return
        batch = pa.concat_tables(bucket.buffered).combine_chunks().to_batches()[0]
        out = self.files.get(source)
        if out is None:
            name = f"{source}-{self.tag}.arrow"
            stream = self.fs.open_output_stream(f"{self.root}/{name}")
            writer = pa.ipc.new_file(stream, batch.schema, options=pa.ipc.IpcWriteOptions(compression="lz4"))
            out = self.files[source] = _SourceFile(stream, writer, name)
        out.writer.write_batch(batch)
        bucket.batches.append(out.batches)
        out.batches += 1
        bucket.buffered, bucket.buffered_rows = [], 0

    def close(self) -> None:
        for (_, source), bucket in sorted(self.open.items()):
            self._flush(source, bucket)
        for out in self.files.values():
            out.writer.close()
            out.stream.close()
        for (b, source), bucket in sorted(self.open.items()):
            self.side.append(
                {
                    "bucket": b,
                    "path": f"{self.uri_root}/{self.files[source].name}",
                    "batches": bucket.batches,
                    "rows": bucket.rows,
                    "max_ts": bucket.newest,
                }
            )
        self.open.clear()
        self.files.clear()


def bucket_files_for(options: dict[str, Any]) -> BucketFiles | None:
    """The task's ``BucketFiles`` when a routed write's options ask for them (``new_replay_input``)."""

    spec = options.get("replay_input")
    if not spec:
        return None
    return BucketFiles(spec["root"], int(spec["buckets"]), options[SIDE_KEY])


def _root(io: TableIO) -> str:
    return join_path(io.warehouse, REPLAY_INPUT_DIR)


#: the replay input's file layout, in its directory's name: a replay input of another layout (an
#: older version's files) is not this version's, so the decode runs again and removes it
LAYOUT = "L3"


def _prefix(raw_version: int) -> str:
    return f"v{raw_version:010d}-{LAYOUT}-"


def new_replay_input(
    io: TableIO, raw_version: int, *, rows: int = 0, base: tuple[int, str] | None = None
) -> tuple[dict[str, Any], str]:
    """A fresh directory for the decode pass's replay input of ``rows`` raw records (its bucket
    count: ``replay_buckets``): (route option, manifest path).

    ``base``: (raw version, manifest) of the replay input this one continues (an incremental
    decode: the pass decodes only the new raw records, into the base's buckets). Its entries are
    listed in the new directory's ``INPUT_FILE`` before the pass, so the new manifest names the
    whole replay input (the base's files stay where they are) and tells which entries are new
    (``read_manifest``)."""

    assert io.spark is not None
    root = join_path(_root(io), _prefix(raw_version) + uuid.uuid4().hex[:12])
    info: dict[str, Any] = {"buckets": replay_buckets(io.spark, rows), "base_version": None, "base": []}
    if base is not None:
        info = {
            "buckets": input_info(base[1])["buckets"],
            "base_version": base[0],
            "base": [{**e, "base": True} for e in read_entries(base[1])],
        }
    write_json(join_path(root, INPUT_FILE), info)
    return ({"root": root, "buckets": info["buckets"]}, join_path(root, MANIFEST))


def input_info(manifest: str) -> dict[str, Any]:
    """What ``new_replay_input`` wrote beside the manifest: ``buckets``, ``base_version`` (None:
    a whole decode) and ``base`` (the continued replay input's entries)."""
    info = read_json(manifest.rsplit("/", 1)[0] + "/" + INPUT_FILE)
    if info is None:
        raise FileNotFoundError(f"{manifest}: no {INPUT_FILE} beside it")
    return dict(info)


def _runs(io: TableIO) -> list[tuple[str, bool]]:
    """(directory, has a manifest) of every decode run's replay input."""
    from pyarrow import fs

    filesystem, inner = filesystem_of(_root(io))
    infos = filesystem.get_file_info(fs.FileSelector(inner, allow_not_found=True))
    out = []
    for info in sorted(infos, key=lambda i: i.path):
        if info.type == fs.FileType.Directory:
            has = filesystem.get_file_info(f"{info.path}/{MANIFEST}").type != fs.FileType.NotFound
            out.append((info.path, has))
    return out


def current_replay_input(io: TableIO, raw_version: int) -> str | None:
    """The manifest of a complete replay input of raw_records ``raw_version``, else ``None``.

    Decoding is deterministic, so any complete run of that version holds the same rows."""

    for path, complete in _runs(io):
        if complete and path.rsplit("/", 1)[-1].startswith(_prefix(raw_version)):
            return join_path(_root(io), path.rsplit("/", 1)[-1] + "/" + MANIFEST)
    return None


def drop_replay_inputs(io: TableIO, keep: str | None = None) -> int:
    """Delete every decode run's replay input but the one whose manifest is ``keep`` and those
    whose files it names (an incremental decode's replay input continues its base's)."""

    filesystem, _ = filesystem_of(_root(io))
    kept = {keep.rsplit("/", 2)[-2]} if keep else set()
    if keep:
        kept |= {str(e["path"]).rsplit("/", 2)[-2] for e in read_entries(keep) if "path" in e}
    dropped = 0
    for path, _complete in _runs(io):
        if path.rsplit("/", 1)[-1] not in kept:
            filesystem.delete_dir(path)
            dropped += 1
    return dropped


def read_entries(path: str) -> list[dict[str, Any]]:
    """Every side entry of the replay input whose manifest is ``path``: its base's (``INPUT_FILE``,
    marked ``base``) and its own."""
    base = input_info(path)["base"]
    own = read_json(path)
    if own is None:
        raise FileNotFoundError(path)
    return [*base, *own]


def read_manifest(path: str, kind: str | None = None, *, new_only: bool = False) -> list[dict[str, Any]]:
    """The bucket entries (bucket, file, batch indices, rows, newest ms) the decode's successful
    tasks wrote (``kind`` None), or their other side entries of ``kind`` (``log_shape.STATS_KIND``);
    ``new_only``: only this run's, not its base's (``new_replay_input``)."""
    return [e for e in read_entries(path) if e.get("kind") == kind and not (new_only and e.get("base"))]


# ---------------------------------------------------------------------------------------------
# Read by the replay tasks
# ---------------------------------------------------------------------------------------------
def read_bucket(parts: Sequence[tuple[str, Sequence[int]]]) -> pa.Table:
    """The replay-input rows of one bucket: (file, its batch indices) of each decode task's files."""
    import pyarrow as pa

    schema = replay_input.schema()
    tables = []
    for path, batches in parts:
        filesystem, inner = filesystem_of(path)
        with filesystem.open_input_file(inner) as fh:
            # one thread: the task already has its core (with Arrow's pool: 1.4-1.9x the CPU, measured)
            reader = pa.ipc.open_file(fh, options=pa.ipc.IpcReadOptions(use_threads=False))
            part = pa.Table.from_batches([reader.get_batch(i) for i in batches], schema=reader.schema)
        n = part.num_rows
        names = set(part.column_names)
        tables.append(
            pa.Table.from_arrays(
                [part.column(f.name) if f.name in names else pa.nulls(n, f.type) for f in schema], schema=schema
            )
        )
    return pa.concat_tables(tables) if tables else pa.Table.from_batches([], schema=schema)


def replay_bucket(table: pa.Table, replay: Callable[[pa.Table, Any, Any], Iterator[Any]]) -> Iterator[Any]:
    """One bucket's replay-input rows (any order) → ``replay(table, order, group starts)``'s
    outputs, the order being (group_id, coordinator_partition, log_offset)
    (``replay_order_and_groups``; the rows themselves are not gathered: ``replay_ordered``)."""
    # one chunk per column: a bucket is read as many record batches, and Arrow's ``take`` on a
    # chunked column concatenates its chunks first (every records or expanded run's take would)
    table = table.combine_chunks()
    order, starts = replay_input.replay_order_and_groups(table)
    yield from replay(table, order, starts)


_REPLAY_OPTIONS = ("as_of_ms", "num_partitions", "log_end_ms")
TRANSACTIONS_FILE = "_transactions.arrow"
RAW_TRANSACTIONS = "raw_transactions"


def stage_transactions(io: TableIO, manifest: str) -> str | None:
    """``raw_transactions`` as one Arrow IPC file beside ``manifest`` (None: the table is empty)."""

    if not io.exists(RAW_TRANSACTIONS) or not io.count(RAW_TRANSACTIONS):
        return None
    table = io.read(RAW_TRANSACTIONS).toArrow()
    return write_arrow_file(manifest.rsplit("/", 1)[0] + "/" + TRANSACTIONS_FILE, table)


def read_transactions(path: str | None) -> pa.Table | None:
    """The staged ``raw_transactions`` (``stage_transactions``), or None."""
    return read_arrow_file(path)


def route_replay(
    batches: Iterator[pa.RecordBatch], options: dict[str, Any]
) -> Iterator[tuple[dict[str, pa.Table], int]]:
    """``TableIO.write_routed`` route over (bucket, its (file, batch indices) as JSON) rows: each
    bucket's rows read, sorted, replayed; the task writes the gold files. With ``state_dir`` in
    the options, each bucket's groups are kept there for the next incremental run
    (``pipelines.batch.kept_groups``)."""

    tables = tuple(options["tables"])
    opts: dict[str, Any] = {k: options[k] for k in _REPLAY_OPTIONS}
    opts["settings"] = ReplaySettings.from_strings(**options["settings"])  # route options travel as JSON
    txn = read_transactions(options.get("transactions"))
    state_dir = options.get("state_dir")
    carried = replayer(options) if state_dir else None
    for batch in batches:
        for bucket, parts in zip(batch.column("bucket").to_pylist(), batch.column("parts").to_pylist(), strict=True):
            kept: dict[str, Any] = {}

            def keep(snap: Any, kept: dict[str, Any] = kept) -> None:
                assert carried is not None
                kept[snap.group_id] = carried.entry_of(snap, int(options["watermark_ms"]))

            rows = attach_transactions(read_bucket([(p, b) for p, b in json.loads(parts)]), txn)
            replay = functools.partial(
                replay_ordered, tables=tables, as_tables=True, keep=keep if carried else None, **opts
            )
            for out in replay_bucket(rows, replay):
                yield out, 0
            if state_dir:
                write_bucket(state_dir, int(bucket), kept)


def covers(io: TableIO, entries: Sequence[dict[str, Any]]) -> bool:
    """True when the replay input holds as many rows as it can have: every offset commit,
    group-metadata record and Kafka 4 group record, plus at most every unsupported record (those
    with a group)."""
    rows = sum(int(e["rows"]) for e in entries)
    base = io.count("offset_commits") + io.count("group_metadata") + io.count("group_records")
    return base <= rows <= base + io.count("unsupported_records")


def write_gold(
    io: TableIO,
    manifest: str,
    *,
    app_id: str,
    version: int,
    tables: Sequence[str],
    current_state: Sequence[str],
    settings: ReplaySettings = FACTS_ONLY,
    as_of_ms: int | None = None,
    num_partitions: int = 50,
    log_end_ms: int | None = None,
    on_as_of: Callable[[int | None], None] | None = None,
    evidence_delay_ms: int = 0,
    log_now_ms: int | None = None,
    state_dir: str | None = None,
) -> dict[str, str]:
    """Replay the replay input of ``manifest`` and write the gold tables.

    One Spark stage: each task reads its buckets' files, replays them and writes the gold files.
    Returns ``{table: written | merged | unchanged}``. ``state_dir``: the tasks keep their groups
    there (``pipelines.batch.kept_groups``) with the timers of this run's evidence horizon.

    Raises:
        RuntimeError: the replay input does not hold the decoded tables' rows (decode again).
    """

    spark = io.spark
    assert spark is not None
    entries = read_manifest(manifest)
    if not covers(io, entries):
        raise RuntimeError(
            f"the replay input {manifest} does not hold the decoded tables' rows: run the decode stage again"
        )
    log.info("replay: %d buckets' files, %d rows", len(entries), sum(int(e["rows"]) for e in entries))
    if log_end_ms is None:
        as_of_ms, log_end_ms = present(entries, settings, as_of_ms, log_now_ms, evidence_delay_ms)
    if on_as_of is not None:
        on_as_of(as_of_ms)
    options = {
        "tables": list(tables),
        "settings": settings.as_strings(),
        "as_of_ms": as_of_ms,
        "num_partitions": num_partitions,
        "log_end_ms": log_end_ms,
        "transactions": stage_transactions(io, manifest),
        **replay_options(settings, tables, num_partitions, evidence_delay_ms, log_end_ms, entries),
        "state_dir": state_dir,
    }
    by_bucket: dict[int, list[tuple[str, list[int]]]] = {}
    weight: dict[int, int] = {}
    for e in entries:
        by_bucket.setdefault(int(e["bucket"]), []).append((str(e["path"]), [int(i) for i in e["batches"]]))
        weight[int(e["bucket"])] = weight.get(int(e["bucket"]), 0) + int(e["rows"])
    work = spread(
        spark,
        [(b, json.dumps(ps)) for b, ps in sorted(by_bucket.items())],
        "bucket int, parts string",
        weights=[weight[b] for b in sorted(by_bucket)],
    )
    return _write_gold(io, work, "pipelines.batch.replay:route_replay", options, app_id, version, tables, current_state)


def present(
    entries: Sequence[dict[str, Any]],
    settings: ReplaySettings,
    as_of_ms: int | None,
    log_now_ms: int | None,
    delay_ms: int,
) -> tuple[int | None, int | None]:
    """(as_of, evidence horizon) of a replay of ``entries``. With expiry settings, the stream's
    present: as of the newest record (or ``log_now_ms``, the robust log clock), forecasts judged
    up to the evidence horizon (``pipelines.log_clock``), so both wings state the same for the
    same input; without, ``as_of_ms`` as given and no horizon."""

    if settings.retention_ms is None:
        return as_of_ms, None
    newest = log_now_ms if log_now_ms is not None else max((int(e["max_ts"]) for e in entries), default=None)
    as_of_ms, _ = as_of_and_log_end(as_of_ms, None, newest)
    return as_of_ms, evidence_horizon(as_of_ms, newest, delay_ms)


def replay_options(
    settings: ReplaySettings,
    tables: Sequence[str],
    num_partitions: int,
    delay_ms: int,
    log_end_ms: int | None,
    entries: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    """What a carried replay needs (``kept_groups.replayer``) and its watermark: the evidence
    horizon (without expiry settings, the newest record − delay: only the timers use it)."""
    newest = max((int(e["max_ts"]) for e in entries), default=0)
    watermark = log_end_ms if log_end_ms is not None else newest - delay_ms
    return {
        "settings": settings.as_strings(),
        "tables": list(tables),
        "num_partitions": num_partitions,
        "delay_ms": delay_ms,
        "watermark_ms": watermark,
    }


def _write_gold(
    io: TableIO,
    work: TaskRows,
    route: str,
    options: dict[str, Any],
    app_id: str,
    version: int,
    tables: Sequence[str],
    current_state: Sequence[str],
) -> dict[str, str]:
    staged = [t for t in tables if t in current_state]
    results = io.write_routed(
        list(tables), work, route, route_options=options, txn_app_id=app_id, txn_version=version, staged=staged
    )
    out = {name: "unchanged" if wr.skipped else "written" for name, wr in results.items()}
    for name in staged:
        try:
            wr = io.merge(
                name,
                io.read_staged(name),
                get_spec(name).primary_key,
                delete_missing=True,
                txn_app_id=app_id,
                txn_version=version,
            )
        finally:
            io.drop_staged(name)
        out[name] = "unchanged" if wr.skipped else "merged"
    return out
