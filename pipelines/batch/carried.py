"""The batch job's incremental runs: decode only the raw records that are new, replay only the
groups they touch (and those whose timer is due), from the groups' snapshots the previous run
kept.

Rules:
- Every whole replay keeps its groups: each replay task writes its buckets' groups
  (``pipelines.records.carried``: the snapshot's plain values and timer per group, pickled) under
  ``<warehouse>/_replay_state/v<raw version>-<run>/bucket-<b>.pkl``; once every gold table is
  written the driver writes ``STATE_DONE`` there (the raw version, the gold app id, the bucket
  count, the evidence horizon, the gold tables' versions). An incremental run writes the same
  for its version. Only the newest done state is kept.
- The decode is incremental (``decode_base``) when the decoded tables' latest commits carry the
  marker of an earlier raw_records version V1 whose replay input is complete, raw_records' files
  at V1 are all still there or were compacted by an OPTIMIZE of V1's rows only (the scheduled
  maintenance: ``_files_added_since``), and no transaction was ever seen (``raw_transactions``
  empty: a marker in the new records could change what became of an old one). It decodes only
  the files added since V1 (and the landing's), appends to the decoded tables, and its replay
  input continues V1's (``replay.new_replay_input(base=...)``: the manifest names the whole
  input, the new entries marked).
- The replay is incremental (``replay_base``) when a done state exists for the replay input's
  base version, with the same gold app id (settings) and buckets, nobody wrote a gold table since
  (their data versions are those it recorded: maintenance, OPTIMIZE and VACUUM, is not a write,
  ``TableIO.data_version``; so are the versions of raw_records the stages are marked with),
  "now" is the log's own (no pinned ``as_of``, no clock outliers), and the new records continue
  the log: in every ``__consumer_offsets`` partition they start after the last offset replayed,
  and none is older than the previous run's evidence horizon (it judged forecasts up to there).
  Then each bucket's groups go through ``BucketReplayer.replay_bucket`` with the watermark =
  this run's evidence horizon — the stream's micro-batch, so the tables equal one replay over the
  whole log as the stream's do — and the changed rows are MERGEd, withdrawn forecasts and dropped
  offsets deleted (``carried.change_writes``), each write with the gold marker.
- A replay input continued ``MAX_RUNS`` times is written anew by a whole decode (and replay):
  each incremental decode adds its tasks' files, and the replay reads them all when it must.
- Anything else runs the whole decode or the whole replay, as a first run does, and the stage
  line says why. ``--full`` asks for that.
"""

from __future__ import annotations

import json
import pickle
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipelines.batch import replay
from pipelines.batch.file_tasks import spread
from pipelines.batch.kept_groups import read_bucket_state, replayer, write_bucket
from pipelines.batch.replay import RAW_TRANSACTIONS
from pipelines.config import join_path
from pipelines.inputs.log_shape import STATS_KIND
from pipelines.records.carried import change_writes, gold_tables, output_tables
from pipelines.tableio.deltars import MAINTENANCE_OPERATIONS
from pipelines.uri import filesystem, read_json, table_to_ipc, write_json
from pipelines.warehouse.layout import REPLAY_STATE_DIR

if TYPE_CHECKING:
    import pyarrow as pa

    from pipelines.tableio import TableIO

STATE_DONE = "_state.json"
#: an incremental decode continues a replay input of at most this many runs' directories; the
#: next decode reads every raw record and writes it anew (fewer, larger files for the replay)
MAX_RUNS = 48


# ---------------------------------------------------------------------------------------------
# The kept groups
# ---------------------------------------------------------------------------------------------
def _root(io: TableIO) -> str:
    return join_path(io.warehouse, REPLAY_STATE_DIR)


def new_state_dir(io: TableIO, raw_version: int) -> str:
    """A fresh directory for the groups a replay of raw_records ``raw_version`` keeps."""

    return join_path(_root(io), f"v{raw_version:010d}-{uuid.uuid4().hex[:12]}")


def _done_states(io: TableIO) -> list[tuple[str, dict[str, Any]]]:
    """(directory, done file) of every done state, oldest first."""
    from pyarrow import fs as pafs

    fs, inner = filesystem(_root(io))
    out = []
    for info in sorted(fs.get_file_info(pafs.FileSelector(inner, allow_not_found=True)), key=lambda i: i.path):
        if info.type == pafs.FileType.Directory:
            done = read_json(f"{_root(io)}/{info.base_name}/{STATE_DONE}")
            if done is not None:
                out.append((f"{_root(io)}/{info.base_name}", done))
    return out


def mark_done(io: TableIO, state_dir: str, done: dict[str, Any]) -> None:
    """``state_dir`` is complete (``STATE_DONE``); every other state directory goes."""
    from pyarrow import fs as pafs

    write_json(f"{state_dir}/{STATE_DONE}", done)
    fs, inner = filesystem(_root(io))
    keep = state_dir.rstrip("/").rsplit("/", 1)[-1]
    for info in fs.get_file_info(pafs.FileSelector(inner, allow_not_found=True)):
        if info.type == pafs.FileType.Directory and info.base_name != keep:
            fs.delete_dir(info.path)


def gold_versions(io: TableIO, tables: Sequence[str]) -> dict[str, int | None]:
    """Each table's data version: the maintenance between two runs (OPTIMIZE, VACUUM) is not a write."""
    return {t: io.data_version(t) for t in tables}


def done_record(
    io: TableIO,
    raw_version: int,
    gold_app: str,
    buckets: int,
    options: dict[str, Any],
    tables: Sequence[str],
    pinned: bool,
) -> dict[str, Any]:
    """What a replay records beside the groups it kept (``STATE_DONE``), once its tables are written."""
    return {
        "raw_version": raw_version,
        "gold_app": gold_app,
        "buckets": int(buckets),
        "watermark_ms": options["watermark_ms"],
        "pinned": pinned,
        "gold_versions": gold_versions(io, tables),
    }


def up_to_date(io: TableIO, raw_version: int, gold_app: str, tables: Sequence[str]) -> bool:
    """True when the newest kept groups are of ``raw_version``, by this gold app, and nobody wrote
    a gold table since (an incremental run leaves unchanged tables without its marker)."""
    states = _done_states(io)
    if not states:
        return False
    done = states[-1][1]
    return (
        done.get("raw_version") == raw_version
        and done.get("gold_app") == gold_app
        and done.get("gold_versions") == gold_versions(io, tables)
    )


# ---------------------------------------------------------------------------------------------
# The decode's base
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DecodeBase:
    """An incremental decode: the raw version the decoded tables hold, its replay input's
    manifest, the raw_records files added since and the rows the decoded tables hold."""

    raw_version: int
    manifest: str
    new_files: list[str]
    decoded_rows: int


def decode_base(io: TableIO, target: int, current: int, app_id: str, tables: Sequence[str]) -> DecodeBase | str:
    """The base of an incremental decode to raw version ``target`` (raw_records now at
    ``current``: ``target`` - 1 when the ingest's append joins the pass), or why the decode must
    read every raw record."""

    if io.exists(RAW_TRANSACTIONS) and io.count(RAW_TRANSACTIONS):
        return "the log holds transactions (a new marker may settle an old record)"
    if not all(io.exists(t) for t in tables):
        return "no decoded tables yet"
    held = {io.txn_version(t, app_id) for t in tables}
    base = held.pop() if len(held) == 1 else None
    if base is None or base >= target:
        return "the decoded tables hold no earlier version of raw_records"
    if not all(io.applied(t, app_id, base, latest=True) for t in tables):
        return "the decoded tables were written since their last decode"
    manifest = replay.current_replay_input(io, base)
    if manifest is None:
        return f"no complete replay input of raw_records v{base}"
    runs = {str(e["path"]).rsplit("/", 2)[-2] for e in replay.read_entries(manifest) if "path" in e}
    if len(runs) >= MAX_RUNS:
        return f"the replay input spans {len(runs)} runs' files: rewritten in one"
    latest = io.version("raw_records") or 0
    if (io.data_version("raw_records") or 0) <= current:
        current = latest  # the same rows, in the files the table holds now (maintenance since)
    new = _files_added_since(io, base, current, latest)
    if isinstance(new, str):
        return new
    return DecodeBase(base, manifest, new, sum(io.count(t) for t in tables))


def _files_added_since(io: TableIO, base: int, current: int, latest: int) -> list[str] | str:
    """raw_records' files at version ``current`` that hold the rows written after version
    ``base``: the files its appends added, when every commit that removed a file since was an
    OPTIMIZE of rows already held at ``base`` (the scheduled maintenance); else why not."""

    then = io.snapshot_files("raw_records", base)
    now = io.snapshot_files("raw_records", current)
    if then is None or now is None:
        return "raw_records cannot be read as its file list"
    if not set(then) - set(now):  # appends only
        known = set(then)
        return [f for f in now if f not in known]
    operations = {int(h["version"]): h.get("operation") for h in io.history("raw_records", latest - base)}
    held, added, before = set(then), set(), set(then)
    for version in range(base + 1, current + 1):
        files = now if version == current else io.snapshot_files("raw_records", version)
        if files is None:
            return "raw_records cannot be read as its file list"
        after = set(files)
        removed = before - after
        if removed and (operations.get(version) not in MAINTENANCE_OPERATIONS or not removed <= held):
            return f"raw_records was rewritten since v{base} (v{version}: {operations.get(version)})"
        if removed:  # a compaction of rows held at base: its files hold nothing new
            held = (held - removed) | (after - before)
        else:
            added |= after - before
        before = after
    return [f for f in now if f in added]


# ---------------------------------------------------------------------------------------------
# The replay's base
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReplayBase:
    """An incremental replay: the kept groups' directory and what their run recorded."""

    state_dir: str
    done: dict[str, Any]


def replay_base(
    io: TableIO, manifest: str, gold_app: str, tables: Sequence[str], *, log_clock_pinned: bool
) -> ReplayBase | str:
    """The kept groups an incremental replay of ``manifest`` continues, or why the replay must
    run over the whole log."""
    if log_clock_pinned:
        return "'now' is not the log's own (replay.as_of_ms or clock outliers)"
    info = replay.input_info(manifest)
    base_version = info.get("base_version")
    if base_version is None:
        return "the decode read every raw record"
    done = next((d for d in reversed(_done_states(io)) if d[1].get("raw_version") == base_version), None)
    if done is None:
        return f"no kept groups of raw_records v{base_version}"
    state_dir, rec = done
    if rec.get("gold_app") != gold_app:
        return "the replay settings changed"
    if rec.get("pinned"):
        return "the last run's 'now' was not the log's own"
    if int(rec.get("buckets", -1)) != int(info["buckets"]):
        return "the replay input's buckets changed"
    if rec.get("gold_versions") != {k: v for k, v in gold_versions(io, tables).items()}:
        return "the gold tables were written since the last run"
    why = _continues(manifest, rec.get("watermark_ms"))
    return why if why else ReplayBase(state_dir, rec)


def _continues(manifest: str, watermark_ms: int | None) -> str | None:
    """None when the new records continue the log the kept groups replayed (module rules)."""

    last: dict[tuple[str, int], int] = {}
    for e in replay.read_manifest(manifest, STATS_KIND):
        if e.get("base"):
            key = (str(e["topic"]), int(e["partition"]))
            last[key] = max(last.get(key, -1), int(e["v"][2]))
    for e in replay.read_manifest(manifest, STATS_KIND, new_only=True):
        first, oldest = int(e["v"][1]), int(e["v"][3])
        key = (str(e["topic"]), int(e["partition"]))
        if first <= last.get(key, -1):
            return f"new records inside partition {key[1]}'s replayed range (offset {first} <= {last[key]})"
        if watermark_ms is not None and oldest < watermark_ms:
            return "new records older than the last run's evidence horizon"
    return None


# ---------------------------------------------------------------------------------------------
# The replay tasks
# ---------------------------------------------------------------------------------------------
def route_carried(batches: Iterator[pa.RecordBatch], options: dict[str, Any]) -> Iterator[pa.RecordBatch]:
    """A task over (bucket, its new rows' (file, batch indices) as JSON) (``TaskRows.run``): each bucket's
    kept groups and new rows → ``replay_bucket`` at the run's watermark → the bucket's groups
    written to the new state directory, its changed gold rows yielded as one pickled blob of
    Arrow IPC tables (``carried.gold_tables``)."""
    import pyarrow as pa

    fn = replayer(options)
    watermark = int(options["watermark_ms"])
    for batch in batches:
        for bucket, parts in zip(batch.column("bucket").to_pylist(), batch.column("parts").to_pylist(), strict=True):
            groups = read_bucket_state(options["base_dir"], int(bucket))
            pairs = json.loads(parts)
            rows = replay.read_bucket([(p, b) for p, b in pairs]).combine_chunks() if pairs else None
            after, changed, _timer = fn.replay_bucket(groups, rows, watermark)
            write_bucket(options["state_dir"], int(bucket), after)
            if changed:
                blob = {name: table_to_ipc(t) for name, t in gold_tables(changed).items()}
                yield pa.RecordBatch.from_pydict({"blob": [pickle.dumps(blob, protocol=pickle.HIGHEST_PROTOCOL)]})


def replay_incremental(
    io: TableIO,
    manifest: str,
    base: ReplayBase,
    *,
    app_id: str,
    version: int,
    tables: Sequence[str],
    options: dict[str, Any],
) -> dict[str, str]:
    """The incremental replay (module rules): one Spark stage over every bucket, the changed rows
    collected (only what changed: bounded by the new records) and written from the driver.
    Returns ``{table: merged | unchanged}``."""
    import functools
    from concurrent.futures import ThreadPoolExecutor

    buckets = int(base.done["buckets"])
    by_bucket: dict[int, list[tuple[str, list[int]]]] = {b: [] for b in range(buckets)}
    weight = dict.fromkeys(range(buckets), 1)
    for e in replay.read_manifest(manifest, new_only=True):
        by_bucket[int(e["bucket"])].append((str(e["path"]), [int(i) for i in e["batches"]]))
        weight[int(e["bucket"])] += int(e["rows"])
    assert io.spark is not None
    state_dir = new_state_dir(io, version)
    opts = {**options, "base_dir": base.state_dir, "state_dir": state_dir}
    work = spread(
        io.spark,
        [(b, json.dumps(ps)) for b, ps in sorted(by_bucket.items())],
        "bucket int, parts string",
        weights=[weight[b] for b in sorted(by_bucket)],
    )
    batches = work.run(functools.partial(route_carried, options=opts))
    changed = output_tables([b for batch in batches for b in batch.column("blob").to_pylist() if b])
    written = dict.fromkeys(tables, "unchanged")

    def write_chain(chain: list[tuple[str, str, pa.Table]]) -> None:
        for op, name, rows in chain:
            if op == "merge":
                io.merge(name, rows, txn_app_id=app_id, txn_version=version)
            else:
                io.delete_keys(name, rows, txn_app_id=app_id, txn_version=version)
            written[name] = "merged"

    with ThreadPoolExecutor(max_workers=4) as pool:
        for job in [pool.submit(write_chain, c) for c in change_writes(changed, tables)]:
            job.result()
    mark_done(
        io, state_dir, done_record(io, version, str(base.done["gold_app"]), buckets, options, tables, pinned=False)
    )
    return written
