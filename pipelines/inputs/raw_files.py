"""Raw-record files: the landing format every producer writes and every reader reads.

Rules:
- Columns are exactly ``schemas.raw.RAW_RECORDS`` (Spark's Kafka source schema).
- Files are named ``<prefix>-<seq:08d>.parquet`` so lexical order is log order, and appear
  atomically: written under a hidden temp name (``.<name>.tmp``, ignored by Spark's file source
  because it starts with a dot) and renamed. A writer appending to an existing directory
  continues the sequence after the highest existing number.
- Readers accept a Parquet file, a JSON-lines file, or a directory of them (name order). JSON
  lines carry ``key``/``value`` as hex (default) or base64 (``"encoding": "base64"`` per line,
  or auto-detected). Positions (``positions=``): ``required`` (what ingest uses) — a line
  without ``partition`` or ``offset`` is an error naming file, line and field, because default
  positions of two files would collide and one file's records would be dropped as duplicates;
  ``synthesize`` (``input.synthesize_positions``) — a missing position is made up in a space of
  its own per file, clearly marked: topic ``synthetic:<file name>``, partition 0 unless given,
  offset = file mtime (ms) * 10^6 + line number, so two files never collide and files replay
  in modification order; ``line`` (the pure-Python ``decode``/``replay`` commands, one file at a
  time) — partition 0, offset = line number. ``timestamp`` defaults to 0. Bad input raises
  ``UsageError`` naming the file and line.
- JSON-lines fields are checked: a line with a field this reader does not know, or without
  ``key`` and ``value`` (``null`` for a tombstone, never implied), is an error naming the line
  and the field. A line with ``payload`` is kcat's ``-J`` envelope (``pipelines.inputs.kcat_lines``).
  Lines are read as bytes (each byte one character, then text fields re-read as UTF-8), so a
  kcat key/payload comes back byte for byte and a binary or text file is a one-line error.
- Broker log segments (``.log`` files, ``<topic>-<N>`` partition directories, a directory of
  them; ``pipelines.inputs.segment_files``) are read as their data records; their partition comes
  from the directory name (``positions="required"``: a segment outside one is an error).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Iterable, Iterator
from datetime import UTC
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.errors import UsageError
from pipelines.inputs.kcat_lines import is_kcat_line, kcat_fields, text
from pipelines.inputs.segment_files import raw_records, segment_files
from schemas.raw import RAW_RECORDS

OFFSETS_TOPIC = "__consumer_offsets"
RAW_ARROW_SCHEMA: pa.Schema = RAW_RECORDS.arrow_schema()
#: raw-record landing files: Parquet captures and JSON-lines dumps (kcat, console consumer)
JSON_SUFFIXES = frozenset({".json", ".jsonl", ".ndjson"})
RAW_FILE_SUFFIXES = frozenset({".parquet"}) | JSON_SUFFIXES
_SEQ_RE = re.compile(r"^(?P<prefix>.+)-(?P<seq>\d{8,})\.parquet$")


class RawRecord(NamedTuple):
    """One record of ``__consumer_offsets`` with its log position; ``value None`` = tombstone."""

    key: bytes
    value: bytes | None
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    timestamp_type: int = 0


def records_to_batch(records: Iterable[RawRecord]) -> pa.RecordBatch:
    """Build one Arrow batch in the raw-record schema from ``RawRecord``s."""
    keys: list[bytes] = []
    values: list[bytes | None] = []
    topics: list[str] = []
    partitions: list[int] = []
    offsets: list[int] = []
    timestamps: list[int] = []
    types: list[int] = []
    for r in records:
        keys.append(r.key)
        values.append(r.value)
        topics.append(r.topic)
        partitions.append(r.partition)
        offsets.append(r.offset)
        timestamps.append(r.timestamp_ms * 1000)
        types.append(r.timestamp_type)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array(topics, pa.string()),
            pa.array(partitions, pa.int32()),
            pa.array(offsets, pa.int64()),
            pa.array(timestamps, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            pa.array(types, pa.int32()),
        ],
        schema=RAW_ARROW_SCHEMA,
    )


def _next_sequence(out_dir: Path, prefix: str) -> int:
    highest = -1
    if out_dir.is_dir():
        for entry in out_dir.iterdir():
            m = _SEQ_RE.match(entry.name)
            if m and m.group("prefix") == prefix:
                highest = max(highest, int(m.group("seq")))
    return highest + 1


class RawRecordWriter:
    """Writes raw records into sequentially numbered Parquet files, each appearing atomically.

    Args:
        out_dir: the landing directory (created if missing).
        rows_per_file: a file is closed and renamed into place after this many rows.
        prefix: file-name prefix; the sequence continues after existing files of that prefix.
        compression: Parquet compression codec.
    """

    def __init__(
        self,
        out_dir: str | os.PathLike[str],
        rows_per_file: int = 500_000,
        prefix: str = "part",
        compression: str = "zstd",
    ) -> None:
        if rows_per_file <= 0:
            raise ValueError("rows_per_file must be positive")
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.rows_per_file = rows_per_file
        self.prefix = prefix
        self.compression = compression
        self._seq = _next_sequence(self.out_dir, prefix)
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self.files: list[Path] = []
        self.rows_written = 0

    # -- writing ----------------------------------------------------------------------------
    def write(self, records: Iterable[RawRecord]) -> None:
        """Buffer ``records``; full files are flushed as they fill."""
        chunk: list[RawRecord] = []
        for r in records:
            chunk.append(r)
            if len(chunk) >= 65_536:
                self.write_batch(records_to_batch(chunk))
                chunk = []
        if chunk:
            self.write_batch(records_to_batch(chunk))

    def write_batch(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Buffer an Arrow batch already in the raw-record schema."""
        if isinstance(batch, pa.Table):
            batches = batch.to_batches()
        else:
            batches = [batch]
        for b in batches:
            if not b.schema.equals(RAW_ARROW_SCHEMA, check_metadata=False):
                b = pa.RecordBatch.from_arrays(
                    [b.column(n).cast(RAW_ARROW_SCHEMA.field(n).type) for n in RAW_ARROW_SCHEMA.names],
                    schema=RAW_ARROW_SCHEMA,
                )
            start = 0
            while start < b.num_rows:
                room = self.rows_per_file - self._pending_rows
                piece = b.slice(start, room)
                self._pending.append(piece)
                self._pending_rows += piece.num_rows
                start += piece.num_rows
                if self._pending_rows >= self.rows_per_file:
                    self.flush()

    def flush(self) -> Path | None:
        """Write buffered rows as one file (temp name + rename). Returns its path, if any."""
        if not self._pending_rows:
            return None
        table = pa.Table.from_batches(self._pending, schema=RAW_ARROW_SCHEMA)
        name = f"{self.prefix}-{self._seq:08d}.parquet"
        tmp = self.out_dir / f".{name}.tmp"
        final = self.out_dir / name
        pq.write_table(table, tmp, compression=self.compression)
        os.replace(tmp, final)
        self._seq += 1
        self._pending = []
        self.rows_written += self._pending_rows
        self._pending_rows = 0
        self.files.append(final)
        return final

    def close(self) -> list[Path]:
        """Flush what is left; returns every file this writer created."""
        self.flush()
        return list(self.files)

    def __enter__(self) -> RawRecordWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()


def write_raw_records(
    records: Iterable[RawRecord], out_dir: str | os.PathLike[str], rows_per_file: int = 500_000
) -> list[Path]:
    """Write ``records`` into ``out_dir`` as raw-record Parquet files; returns the files."""
    with RawRecordWriter(out_dir, rows_per_file=rows_per_file) as writer:
        writer.write(records)
    return writer.files


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------
def input_files(path: Path) -> list[Path]:
    """The raw files at ``path``: the file itself, or a directory's visible raw files (suffixes
    ``RAW_FILE_SUFFIXES``) in name order, then its log segments (``segment_files``); a missing
    path is a ``UsageError``."""

    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    if path.is_dir():
        files = sorted(
            p
            for p in path.iterdir()
            if p.is_file() and not p.name.startswith((".", "_")) and p.suffix in RAW_FILE_SUFFIXES
        )
        return files + segment_files(path)
    return [path]


def _decode_bytes(text: Any, encoding: str | None, where: str, field: str) -> bytes | None:
    if text is None:
        return None
    if not isinstance(text, str):
        raise UsageError(f"{where}: '{field}' must be a hex or base64 string or null")
    if encoding == "base64":
        try:
            return base64.b64decode(text, validate=True)
        except binascii.Error as exc:
            raise UsageError(f"{where}: '{field}' is not valid base64 ({exc})") from None
    stripped = text.strip()
    if encoding in (None, "hex"):
        try:
            return bytes.fromhex(stripped)
        except ValueError:
            if encoding == "hex":
                raise UsageError(f"{where}: '{field}' is not valid hex") from None
    try:
        return base64.b64decode(stripped, validate=True)
    except binascii.Error:
        raise UsageError(f"{where}: '{field}' is neither hex nor base64") from None


def _timestamp_ms(value: Any, where: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool):
        raise UsageError(f"{where}: 'timestamp' must be epoch milliseconds")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    if isinstance(value, str):
        from datetime import datetime

        try:
            dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(f"{where}: 'timestamp' {value!r} is neither epoch ms nor ISO-8601") from None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        return int(dt.timestamp() * 1000)
    raise UsageError(f"{where}: 'timestamp' must be epoch milliseconds")


#: the fields of our JSON lines (anything else on a line is an error, see the module rules)
_JSONL_FIELDS = frozenset(
    {"key", "value", "encoding", "topic", "partition", "offset", "timestamp", "timestampType", "timestamp_type"}
)
#: ``positions=`` of the JSON-lines reader (see the module rules)
POSITION_MODES = ("line", "required", "synthesize")
SYNTHETIC_TOPIC_PREFIX = "synthetic:"


class _DuplicateField(ValueError):
    """A JSON object names one field twice (the message is the field)."""


def _no_duplicate_fields(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateField(k[:80])
        out[k] = v
    return out


#: the raw-record schema's integer ranges: partition int32, offset int64, timestamp in
#: microseconds int64 (so milliseconds within int64 / 1000)
_RANGES = (("partition", 2**31), ("offset", 2**63), ("timestamp_ms", 2**63 // 1000))


def _in_range(record: RawRecord, where: str) -> RawRecord:
    """``record`` when its position and time fit the raw-record schema; else one line naming the
    file, the line and the field (Arrow would fail later without either)."""
    for field, bound in _RANGES:
        v = getattr(record, field)
        if not -bound <= v < bound:
            name = "timestamp" if field == "timestamp_ms" else field
            raise UsageError(
                f"{where}: '{name}' {v} is out of range (the raw-record schema holds {-bound}..{bound - 1})"
            )
    if record.timestamp_type not in (0, 1) and not -(2**31) <= record.timestamp_type < 2**31:
        raise UsageError(f"{where}: 'timestampType' {record.timestamp_type} is out of range")
    return record


def _read_jsonl(path: Path, positions: str = "line") -> Iterator[RawRecord]:
    if positions not in POSITION_MODES:
        raise ValueError(f"positions must be one of {POSITION_MODES}")
    base = (path.stat().st_mtime_ns // 1_000_000) * 1_000_000 if positions == "synthesize" else 0

    with path.open("rb") as fh:  # bytes: kcat -J lines carry raw bytes (pipelines.inputs.kcat_lines)
        for lineno, raw_line in enumerate(fh, start=1):
            line = raw_line.decode("latin-1")
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                obj = json.loads(line, object_pairs_hook=_no_duplicate_fields)
            except _DuplicateField as exc:
                raise UsageError(
                    f"{where}: the field '{exc}' appears twice on the line: which copy is the record's is "
                    "ambiguous (JSON readers disagree), so the line is refused"
                ) from None
            except json.JSONDecodeError as exc:
                raise UsageError(
                    f"{where}: not valid JSON ({exc.msg}): input files are JSON lines (our fields or "
                    "kcat -J), Parquet or broker .log segments; console-consumer text is not accepted"
                ) from None
            if not isinstance(obj, dict) or "key" not in obj:
                raise UsageError(f"{where}: each line must be an object with at least 'key'")
            if is_kcat_line(obj):
                yield _in_range(RawRecord(*kcat_fields(obj, where)), where)
                continue
            unknown = sorted(set(obj) - _JSONL_FIELDS)
            if unknown:
                raise UsageError(
                    f"{where}: unknown field '{unknown[0]}' (a line has key, value and optionally "
                    "encoding, topic, partition, offset, timestamp, timestampType; kcat -J lines "
                    "have payload)"
                )
            enc = obj.get("encoding")
            if enc not in (None, "hex", "base64"):
                raise UsageError(f"{where}: 'encoding' must be 'hex' or 'base64'")
            key = _decode_bytes(obj["key"], enc, where, "key")
            if key is None:
                raise UsageError(f"{where}: 'key' is null (keys of __consumer_offsets are never null)")
            value = _decode_bytes(obj.get("value"), enc, where, "value")
            topic = text(str(obj.get("topic", OFFSETS_TOPIC)))
            missing = [f for f in ("partition", "offset") if obj.get(f) is None]
            if missing and positions == "required":
                raise UsageError(
                    f"{where}: no '{missing[0]}': every line needs its log position (partition and offset); "
                    "set input.synthesize_positions: true to make up positions that cannot collide"
                )
            if missing and positions == "synthesize":
                topic = SYNTHETIC_TOPIC_PREFIX + path.name
            try:
                partition = int(obj["partition"]) if obj.get("partition") is not None else 0
                if obj.get("offset") is not None:
                    offset = int(obj["offset"])
                else:
                    offset = base + lineno - 1
                declared: Any = obj.get("timestampType", obj.get("timestamp_type", 0))
                ttype = int(declared)
            except (TypeError, ValueError):
                raise UsageError(f"{where}: 'partition', 'offset' and 'timestampType' must be integers") from None
            if "value" not in obj:
                raise UsageError(f"{where}: no 'value' (write \"value\": null for a tombstone)")
            ts = _timestamp_ms(obj.get("timestamp"), where)
            yield _in_range(RawRecord(key, value, topic, partition, offset, ts, ttype), where)


def _read_records(path: Path, positions: str = "line") -> Iterator[RawRecord]:
    if path.suffix == ".log":  # a broker log segment (pipelines.inputs.segment_files)
        loose = SYNTHETIC_TOPIC_PREFIX + path.name if positions == "synthesize" else None
        for fields in raw_records(path, require_partition=positions == "required", loose_topic=loose):
            yield RawRecord(*fields)
        return
    yield from _read_jsonl(path, positions)


def _parquet_batches(path: Path) -> Iterator[pa.RecordBatch]:
    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise UsageError(f"{path}: not a readable Parquet file ({exc})") from None
    names = set(pf.schema_arrow.names)
    if "key" not in names:
        raise UsageError(f"{path}: Parquet file has no 'key' column (columns: {sorted(names)})")
    for batch in pf.iter_batches(batch_size=65_536):
        yield _normalise_batch(batch, path)


def _normalise_batch(batch: pa.RecordBatch, path: Path) -> pa.RecordBatch:
    n = batch.num_rows
    cols = {name: batch.column(name) for name in batch.schema.names}
    out = []
    for field in RAW_ARROW_SCHEMA:
        if field.name in cols:
            col = cols[field.name]
            try:
                if field.name == "timestamp" and pa.types.is_integer(col.type):
                    col = col.cast(pa.int64()).cast(pa.timestamp("ms", tz="UTC"))
                col = col.cast(field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise UsageError(
                    f"{path}: column {field.name!r} has type {col.type}, expected {field.type} ({exc})"
                ) from None
        elif field.name == "topic":
            col = pa.array([OFFSETS_TOPIC] * n, pa.string())
        elif field.name in ("partition", "timestampType"):
            col = pa.array([0] * n, field.type)
        elif field.name == "timestamp":
            col = pa.array([0] * n, pa.int64()).cast(field.type)
        elif field.name == "value":
            col = pa.nulls(n, pa.binary())
        else:  # offset: position in the file
            col = pa.array(range(n), pa.int64())
        out.append(col)
    return pa.RecordBatch.from_arrays(out, schema=RAW_ARROW_SCHEMA)


def iter_raw_batches(
    path: str | os.PathLike[str], batch_rows: int = 65_536, *, positions: str = "line"
) -> Iterator[pa.RecordBatch]:
    """Arrow batches in the raw-record schema from a file or a directory of files
    (``positions``: how JSON lines without a position are treated, see the module rules)."""
    for file in input_files(Path(path)):
        if file.suffix == ".parquet":
            yield from _parquet_batches(file)
        else:
            chunk: list[RawRecord] = []
            for rec in _read_records(file, positions):
                chunk.append(rec)
                if len(chunk) >= batch_rows:
                    yield records_to_batch(chunk)
                    chunk = []
            if chunk:
                yield records_to_batch(chunk)


def read_raw_records(path: str | os.PathLike[str]) -> Iterator[RawRecord]:
    """``RawRecord``s from a Parquet file, a JSON-lines file or a directory of them."""
    for file in input_files(Path(path)):
        if file.suffix != ".parquet":
            yield from _read_records(file)
            continue
        for batch in _parquet_batches(file):
            cols = batch.to_pydict()
            ts = batch.column("timestamp").cast(pa.int64()).to_pylist()
            for i in range(batch.num_rows):
                yield RawRecord(
                    cols["key"][i],
                    cols["value"][i],
                    cols["topic"][i],
                    cols["partition"][i],
                    cols["offset"][i],
                    (ts[i] or 0) // 1000,
                    cols["timestampType"][i] or 0,
                )
