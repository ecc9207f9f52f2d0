"""delta-rs on the driver: a table's log, its markers, Arrow reads and writes, one commit.

Rules:
- With ``rust_sink`` this is the only module that imports ``deltalake`` (the architecture test
  holds everything outside ``pipelines/tableio/`` to it). Both engines read metadata here: a
  Delta log is a Delta log whoever wrote it, and delta-rs reads it without a Spark job.
- Every function takes a table location (``uri``: a local path or a URI, ``pipelines.uri``);
  none takes a table name: names and the warehouse are ``TableIO``'s business.
- Idempotence markers. A marked write records a Delta ``txn`` action (app id, version) and the
  ``offsetlake.txn_app_id``/``offsetlake.txn_version`` commit-info keys (Spark's Delta writes
  them as the ``userMetadata`` JSON; ``latest_commit_info`` merges both spellings).
  ``already_applied``: appends follow Delta's ``txn`` rule (recorded version >= version);
  replacing writes need the LATEST write to carry exactly the marker.
- Maintenance changes no row: a commit whose operation is OPTIMIZE (Delta rewrites the files
  with ``dataChange: false``) or VACUUM START/END (no file of the snapshot) is passed over by
  ``latest_commit_info`` and ``data_version`` ("the latest write", "the version of the rows"),
  so the scheduled maintenance between two batch runs leaves the second one incremental and a
  retried write recognised (ARCHITECTURE.md, "One path per stage": incremental runs).
- A table's history is ``history`` here: delta-rs 1.6 answers ``DeltaTable.history()`` empty
  for a local table whose path holds ``#`` or ``?`` (its log listing takes them for a URL's
  query and fragment), which would hide every marker; then the commits' ``commitInfo`` are read
  from the log's JSON files themselves.
- Arrow reads go through the snapshot (``to_pyarrow_dataset``), never a directory listing, and
  read the files through pyarrow's own filesystem (``read_arrow`` says why).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipelines import uri as uris
from pipelines.tableio.base import before_commit

if TYPE_CHECKING:
    import pyarrow as pa

MARKER_APP = "offsetlake.txn_app_id"
MARKER_VERSION = "offsetlake.txn_version"
ROWS_KEY = "offsetlake.rows"  # commit info: rows a routed/sink commit added
#: reader features a snapshot's file list does not capture (rows hidden or columns renamed)
_FILE_LIST_BREAKERS = {"deletionVectors", "columnMapping"}


@dataclass
class FileAdd:
    """One Parquet file written by a task, ready to become a Delta ``add`` action."""

    path: str  # relative to the table root, URL-encoded as Delta requires
    size: int
    partition_values: dict[str, str | None]
    modification_time: int
    stats: str
    num_records: int


def delete_files(table_uri: str, files: list[FileAdd]) -> None:
    """Remove files a task wrote that will never be committed."""
    from urllib.parse import unquote

    fs_, root = uris.filesystem(table_uri)
    for f in files:
        with contextlib.suppress(OSError):
            fs_.delete_file(f"{root}/{unquote(f.path)}")


def open_table(uri: str, version: int | None = None) -> Any:
    """The ``deltalake.DeltaTable`` at ``uri`` (at ``version``)."""
    from deltalake import DeltaTable

    return DeltaTable(uris.for_delta_rs(uri), version=version)


def is_table(uri: str) -> bool:
    """True when a Delta table is at ``uri`` (delta-rs asks the location's object store)."""
    from deltalake import DeltaTable

    return bool(DeltaTable.is_deltatable(uris.for_delta_rs(uri)))


def column_names(uri: str) -> list[str]:
    """The column names of the table at ``uri``."""
    return [f.name for f in open_table(uri).schema().fields]


def marker(app_id: str | None, version: int | None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Commit-info keys of a write: ``extra`` plus the idempotency marker when there is one."""
    out: dict[str, Any] = dict(extra or {})
    if app_id is not None:
        out[MARKER_APP] = app_id
        out[MARKER_VERSION] = version
    return out


def commit_properties(app_id: str | None, version: int | None, extra: dict[str, Any] | None = None) -> Any:
    """delta-rs ``CommitProperties`` carrying the marker (and a ``txn`` action), or ``None``."""
    from deltalake import CommitProperties, Transaction

    if app_id is None or version is None:
        return CommitProperties(custom_metadata=dict(extra)) if extra else None
    return CommitProperties(
        custom_metadata=marker(app_id, version, extra), app_transactions=[Transaction(app_id, version)]
    )


def history(dt: Any, limit: int | None = None) -> list[dict[str, Any]]:
    """The newest ``limit`` (all: ``None``) commits' commitInfo, newest first (module rules)."""
    hist = [dict(h) for h in dt.history(limit)]
    if hist or dt.version() < 0:
        return hist
    fs_, root = uris.filesystem(uris.from_delta_rs(str(dt.table_uri)))
    newest = int(dt.version())
    oldest = 0 if limit is None else max(0, newest - limit + 1)
    for version in range(newest, oldest - 1, -1):
        try:
            with fs_.open_input_stream(f"{root}/{uris.DELTA_LOG}/{version:020d}.json") as fh:
                lines = fh.read().decode().splitlines()
        except (FileNotFoundError, OSError):
            break  # cleaned up behind a checkpoint: what delta-rs would not list either
        info: dict[str, Any] = next(
            (json.loads(ln)["commitInfo"] for ln in lines if ln.startswith('{"commitInfo"')), {}
        )
        hist.append({**info, "version": version})
    return hist


#: operations that change no row of the table (module rules)
MAINTENANCE_OPERATIONS = frozenset({"OPTIMIZE", "VACUUM START", "VACUUM END"})


def latest_write(dt: Any, at: int | None = None) -> dict[str, Any] | None:
    """The commitInfo (with its ``version``) of the newest commit at or below version ``at``
    (default: the latest) that is not maintenance; ``None`` when there is none."""
    newest = int(dt.version())
    top = newest if at is None else min(at, newest)
    limit = newest - top + 1
    while True:
        hist = history(dt, limit)
        for info in hist:
            if int(info.get("version", -1)) <= top and info.get("operation") not in MAINTENANCE_OPERATIONS:
                return info
        if len(hist) < limit:
            return None
        limit *= 4


def data_version(dt: Any, at: int | None = None) -> int | None:
    """The version of the table's rows at version ``at`` (default: now): its latest write's."""
    info = latest_write(dt, at)
    return None if info is None else int(info["version"])


def latest_commit_info(dt: Any) -> dict[str, Any]:
    """The latest write's commitInfo (maintenance passed over, module rules); Spark-Delta's
    ``userMetadata`` JSON is merged in (same markers)."""
    info = dict(latest_write(dt) or {})
    user = info.get("userMetadata")
    if isinstance(user, str) and user.startswith("{"):
        with contextlib.suppress(ValueError):
            info.update(json.loads(user))
    return info


def rows_of_latest_commit(uri: str) -> int | None:
    """The rows the latest commit added, when a sink commit recorded them."""
    info = latest_commit_info(open_table(uri))
    return int(info[ROWS_KEY]) if ROWS_KEY in info else None


def already_applied(dt: Any, app_id: str, version: int, *, require_latest: bool = False) -> bool:
    """True when ``dt`` already holds the write (app_id, version) (module rules)."""
    if require_latest:
        info = latest_commit_info(dt)
        return bool(info.get(MARKER_APP) == app_id and str(info.get(MARKER_VERSION)) == str(version))
    recorded = dt.transaction_version(app_id)
    return recorded is not None and recorded >= version


def file_list_is_snapshot(dt: Any) -> bool:
    """False when the snapshot needs more than its file list (deletion vectors, column mapping)."""
    proto = dt.protocol()
    return not (proto.min_reader_version >= 2 or set(proto.reader_features or ()) & _FILE_LIST_BREAKERS)


def reader_features(dt: Any) -> list[str]:
    return list(dt.protocol().reader_features or ())


def file_uris(uri: str, version: int | None = None) -> list[str]:
    """The data files of the snapshot at ``uri`` (locations: ``data_files``)."""
    return data_files(open_table(uri, version))


def data_files(dt: Any) -> list[str]:
    """The data files of an open table as locations (``uri.from_delta_rs``: delta-rs answers
    them percent-encoded), the one way file lists leave delta-rs."""
    return [uris.from_delta_rs(f) for f in dt.file_uris()]


def create(
    uri: str,
    schema: pa.Schema,
    partition_by: list[str],
    *,
    name: str | None = None,
    description: str | None = None,
    mode: str = "error",
) -> None:
    """An empty table with ``schema`` (``mode="ignore"``: leave an existing one alone)."""
    from deltalake import DeltaTable

    before_commit(uri)
    DeltaTable.create(
        uris.for_delta_rs(uri),
        schema=schema,
        mode=mode,  # type: ignore[arg-type]
        partition_by=partition_by or None,
        name=name,
        description=description,
    )


def add_columns(uri: str, fields: pa.Schema) -> None:
    """Add nullable ``fields`` to the table at ``uri`` (one metadata commit; rows read null)."""
    from deltalake import Schema

    before_commit(uri)
    open_table(uri).alter.add_columns(list(Schema.from_arrow(fields).fields))


def read_arrow(uri: str, columns: list[str] | None = None, filter: Any = None, version: int | None = None) -> pa.Table:
    """The snapshot's rows as Arrow (only ``columns``; ``filter``: a ``pyarrow.dataset``
    expression pushed down to the scan)."""
    import pyarrow.dataset as pds
    from pyarrow import fs

    # pyarrow's own filesystem, not delta-rs's default (a Python ``PyFileSystem`` handler): with
    # the handler, Parquet pre-buffering leaves futures holding Python-owned buffers that Arrow's
    # I/O threads release after ``to_table`` returned; one released while the interpreter shuts
    # down takes the GIL, is killed by Python's finalization (pthread_exit through a noexcept
    # destructor) and the process aborts: "terminate called without an active exception", exit
    # 134 (seen on ``inspect group`` in ~2% of runs). Arrow-native buffers need no GIL.
    filesystem, root = uris.filesystem(uri)
    dt = open_table(uri, version)
    dataset = dt.to_pyarrow_dataset(filesystem=fs.SubTreeFileSystem(root, filesystem))
    if filter is None:
        return dataset.to_table(columns=columns)
    # A filter is never pushed into delta-rs's dataset: it turns each file's log statistics into
    # a guarantee, and a column whose statistics the log lacks (files written by a writer that
    # records min/max for integers only, or past Spark's first 32 columns) gets the bounds
    # ``>= null and <= null``, so every filter on it drops the whole file: a filter on a string
    # column returned no rows at all. The same files read as a plain Parquet dataset (the
    # table's schema: columns a file lacks are null) still skip row groups by their own Parquet
    # statistics. A partitioned table keeps its partition values in the log, not in the files:
    # it is read whole and filtered after.
    if dt.metadata().partition_columns:
        table = dataset.to_table().filter(filter)
        return table.select(columns) if columns is not None else table
    files = [fragment.path for fragment in dataset.get_fragments()]
    plain = pds.dataset(files, schema=dataset.schema, format="parquet", filesystem=dataset.filesystem)
    return plain.to_table(columns=columns, filter=filter)


def size_bytes(uri: str) -> int:
    """Bytes of the snapshot's data files, from the log's add actions (no listing, no scan)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    sizes = pa.table(open_table(uri).get_add_actions(flatten=True)).column("size_bytes")
    return int(pc.sum(sizes).as_py() or 0)


def write_arrow(uri: str, table: pa.Table, mode: str = "append") -> None:
    """Append (or overwrite with) an Arrow table on the driver; the table is created on first use."""
    from deltalake import write_deltalake

    if uris.is_local(uri):
        import os

        os.makedirs(uris.local_path(uri), exist_ok=True)
    before_commit(uri)
    write_deltalake(uris.for_delta_rs(uri), table, mode=mode)  # type: ignore[call-overload]


def append_marked(
    uri: str, table: pa.Table, *, partition_by: list[str], app_id: str | None, version: int | None
) -> None:
    """ONE commit appending an Arrow table from the driver, with the marker (and ``txn``)."""
    from deltalake import write_deltalake

    before_commit(uri)
    write_deltalake(
        uris.for_delta_rs(uri),
        table,
        mode="append",
        partition_by=partition_by or None,
        commit_properties=commit_properties(app_id, version),
    )


def rows_not_held(uri: str, rows: pa.Table, keys: Sequence[str]) -> pa.Table:
    """``rows`` without those whose ``keys`` the table already holds.

    Only the table's key columns are read, and only where its Parquet statistics allow a key at
    or above the batch's smallest last key (a log position: the stream's new records are at the
    end of their partitions, so the files and row groups of older micro-batches are skipped, not
    read); the match is then exact (a semi join on all keys). A MERGE for the same purpose reads
    the whole table whatever the source (delta-rs 1.6: 10.8 s and 6.4 GB of memory for 130k
    rows into a 31M-row ``offset_commits``, all its files skipped)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as pds

    if not rows.num_rows:
        return rows
    last = keys[-1]
    low = pc.min(rows.column(last)).as_py()
    held = read_arrow(uri, list(keys), None if low is None else pds.field(last) >= low)
    if not held.num_rows:
        return rows
    probe = rows.select(list(keys))
    # the hash table on the rows' keys (Arrow builds it on the right side), then the few matches
    matched = held.join(probe, list(keys), join_type="left semi")
    if not matched.num_rows:
        return rows
    numbered = probe.append_column("_row", pa.array(np.arange(rows.num_rows, dtype=np.int64)))
    hit = numbered.join(matched, list(keys), join_type="left semi").column("_row").to_numpy()
    if not len(hit):
        return rows
    keep = np.ones(rows.num_rows, bool)
    keep[hit] = False
    return rows.filter(pa.array(keep))


def merge_arrow(
    uri: str,
    source: pa.Table,
    *,
    on: str,
    changed: str | None,
    delete_missing: bool,
    app_id: str | None,
    version: int | None,
) -> dict[str, Any]:
    """MERGE an Arrow source into the table: update rows where ``changed``, insert new ones,
    delete target rows absent from the source when ``delete_missing``; the merge metrics."""
    before_commit(uri)
    builder = open_table(uri).merge(
        source, predicate=on, source_alias="s", target_alias="t", commit_properties=commit_properties(app_id, version)
    )
    builder = builder.when_matched_update_all(predicate=changed).when_not_matched_insert_all()
    if delete_missing:
        builder = builder.when_not_matched_by_source_delete()
    return dict(builder.execute())


def delete_matching(uri: str, keys: pa.Table, *, on: str, app_id: str | None, version: int | None) -> int:
    """Delete the target rows matching ``keys`` (a MERGE with only a delete clause); rows deleted."""
    before_commit(uri)
    metrics = (
        open_table(uri)
        .merge(
            keys, predicate=on, source_alias="s", target_alias="t", commit_properties=commit_properties(app_id, version)
        )
        .when_matched_delete()
        .execute()
    )
    return int(metrics.get("num_target_rows_deleted", 0))


def commit_files(
    uri: str,
    files: list[FileAdd],
    *,
    schema: pa.Schema,
    partition_by: list[str],
    overwrite: bool,
    app_id: str | None,
    txn_version: int | None,
    require_latest: bool,
    metadata: dict[str, Any],
) -> bool:
    """ONE Delta commit adding ``files`` (append or overwrite) with the idempotency marker.

    Returns False (and deletes ``files``) when the marker is already applied, True otherwise.
    """
    from deltalake.transaction import AddAction

    marked = app_id is not None and txn_version is not None
    if not files and not marked and not overwrite:
        return True  # an empty unmarked append would only bump the version
    dt = open_table(uri)
    if (
        app_id is not None
        and txn_version is not None
        and already_applied(dt, app_id, txn_version, require_latest=require_latest)
    ):
        delete_files(uri, files)
        return False
    adds: list[Any] = [AddAction(f.path, f.size, f.partition_values, f.modification_time, True, f.stats) for f in files]
    extra = dict(metadata)
    extra[ROWS_KEY] = sum(f.num_records for f in files)
    before_commit(uri)
    dt.create_write_transaction(
        adds,
        mode="overwrite" if overwrite else "append",
        schema=schema,
        partition_by=partition_by or None,
        commit_properties=commit_properties(app_id, txn_version, extra),
    )
    return True


def optimize(uri: str) -> dict[str, Any]:
    before_commit(uri)
    return dict(open_table(uri).optimize.compact())


def vacuum(uri: str, retention_hours: int, *, dry_run: bool) -> list[str]:
    if not dry_run:
        before_commit(uri)
    return list(
        open_table(uri).vacuum(retention_hours=retention_hours, dry_run=dry_run, enforce_retention_duration=False)
    )
