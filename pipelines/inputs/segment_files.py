"""Broker log segments as input: ``__consumer_offsets-N/*.log`` files copied off a broker.

Rules:
- Input: one ``.log`` file, a partition directory named ``<topic>-<N>`` (e.g.
  ``__consumer_offsets-7``) holding segment files, or a directory of such partition directories
  (a copy of a broker's log dir). In a directory only Kafka's segment names are taken
  (``%020d.log``, the base offset: lexical order is log order); a file given by name is read
  whatever its name. The partition (and topic) come from the parent directory's name; a
  segment outside a ``<topic>-<N>`` directory has no known partition (``partition None``:
  ``offsetlake decode`` shows it, readers that need positions refuse it with one line).
- Bytes are parsed by ``coordinator_core.segments`` (batch v2, v0/v1 message sets, CRCs
  checked); codecs come from ``cramjam`` (snappy raw blocks, LZ4 blocks) and ``zstandard``
  (zstd frames); gzip is the core's own zlib and the CRC-32C from ``google-crc32c`` (C; the core's pure-Python CRC
  is the fallback).
- Every record comes out once: a data record as a ``SegmentRecord`` (the raw-record columns plus
  what a segment adds: producer id/epoch, transactional flag, batch position, base sequence);
  a control record (COMMIT/ABORT marker, KRaft control types) as a ``SegmentRecord`` with
  ``control_type`` set (key/value are the control record's own bytes); anything unreadable —
  a bad batch (CRC mismatch, codec failure, malformed record, truncated tail) or a data record
  without a key — as a ``SegmentProblem`` (file, byte position, length, reason, raw bytes).
  ``read_segment_items`` yields them in file order; counts: records read = data + control,
  problems are counted as batches (their records cannot be counted).
- ``pipelines.inputs.raw_files`` reads segments through ``raw_records``: data records only, in the
  raw-record shape (Spark's Kafka source schema has no producer/control columns, and Kafka's
  consumers and Spark's Kafka source never return control records either); control records
  and problems are logged as warnings there. The full view (control markers, producer ids,
  problems) is ``read_segment_items`` / ``segment_tables`` (Arrow: ``SEGMENT_RECORDS_SCHEMA``
  = the raw-record columns + the segment columns, ``SEGMENT_PROBLEMS_SCHEMA``), which
  ``offsetlake decode`` prints. Nothing here applies transaction semantics (the core's replay
  does); ``pipelines.inputs.segment_input`` shapes segments for the batch job and the core.
- Bad bytes are never fatal: a segment reader never raises on a file's content, only on a path
  that does not exist or cannot be read, or a file that does not start with a batch header
  (no magic 0-2 at byte 16: a text ``.log``, an index file): ``UsageError``, one line.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa

from coordinator_core import segments as seg
from pipelines.errors import UsageError

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
SEGMENT_SUFFIX = ".log"
_SEGMENT_NAME = re.compile(r"^\d{20}\.log$")
_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


class SegmentRecord(NamedTuple):
    """One record of a segment, with its batch's producer state."""

    key: bytes
    value: bytes | None
    topic: str
    partition: int | None
    offset: int
    timestamp_ms: int
    timestamp_type: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    control_type: int | None
    coordinator_epoch: int | None
    magic: int
    codec: int
    headers: tuple[tuple[str, bytes | None], ...]
    source_file: str
    batch_position: int

    @property
    def control_name(self) -> str | None:
        return None if self.control_type is None else seg.CONTROL_TYPE_NAMES.get(self.control_type, "UNKNOWN")


class SegmentProblem(NamedTuple):
    """Bytes of a segment that could not be read as records (quarantined, never dropped)."""

    source_file: str
    topic: str
    partition: int | None
    position: int
    length: int
    reason: str
    data: bytes
    base_offset: int | None
    magic: int | None
    offset: int | None = None  # set for one bad record of a readable batch
    key: bytes | None = None  # the record's key, when the problem is one whole record


OVERLAPPING = "overlapping segment"


def overlap_problem(r: SegmentRecord) -> SegmentProblem:
    """A record of a segment whose offsets an earlier segment of its partition holds (an
    overlapping copy, ``pipelines.inputs.segment_log``): quarantined with its key and value."""
    return SegmentProblem(
        r.source_file,
        r.topic,
        r.partition,
        r.batch_position,
        0,
        f"{OVERLAPPING}: offset {r.offset} is also in an earlier segment of partition {r.partition}",
        r.value or b"",
        None,
        r.magic,
        r.offset,
        r.key,
    )


# ---------------------------------------------------------------------------------------------
# codecs (cramjam for snappy and lz4 blocks, zstandard for zstd frames)
def _decompress(codec: int, data: bytes, max_size: int) -> bytes:
    import cramjam

    if codec == seg.CODEC_SNAPPY:
        return bytes(cramjam.snappy.decompress_raw(data))
    if codec == seg.CODEC_LZ4:
        out = bytearray(max_size)
        n = cramjam.lz4.decompress_block_into(data, out)
        return bytes(out[:n])
    if codec == seg.CODEC_ZSTD:
        return _unzstd(data, max_size)
    raise ValueError(f"codec {codec} is not a callback codec")


_ZSTD = threading.local()


#: compressed bytes fed to the zstd decoder at a time: a zstd block inflates at most ~128 KiB
#: from a few bytes, so one step of a bomb stays a few MiB before the bound is checked
_ZSTD_STEP = 512


def _unzstd(data: bytes, max_size: int = seg.MAX_INFLATED_BYTES) -> bytes:
    # zstandard, not cramjam: cramjam sets up a decoder per call (~40 us, 100x zstandard's), and
    # the coordinator writes one small zstd frame per commit. Kafka's zstd-jni stream writes no
    # content size, hence the decompression object; every frame must end (eof) or it is truncated.
    # The input goes in small steps so that the output is bounded by ``max_size`` (a bomb is
    # stopped after at most one step past the bound, never inflated whole).
    dctx = getattr(_ZSTD, "dctx", None)
    if dctx is None:  # one context per thread: making one costs ~20 us, zstandard's are not thread-safe
        import zstandard

        dctx = _ZSTD.dctx = zstandard.ZstdDecompressor()
    parts = []
    total = 0
    while True:
        obj = dctx.decompressobj()
        pos = 0
        while not obj.eof and pos < len(data):
            chunk = obj.decompress(data[pos : pos + _ZSTD_STEP])
            pos += _ZSTD_STEP
            total += len(chunk)
            if total > max_size:
                raise ValueError(f"inflates past {max_size} bytes, the bound of one batch (a compression bomb?)")
            parts.append(chunk)
        if not obj.eof:
            raise ValueError("truncated zstd frame")
        data = obj.unused_data + data[pos:]
        if not data:
            return b"".join(parts)


def compress(codec: int, data: bytes) -> bytes:
    """The compression primitive ``coordinator_core.segments`` frames (tests, generator)."""
    import cramjam

    if codec == seg.CODEC_SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == seg.CODEC_LZ4:
        return bytes(cramjam.lz4.compress_block(data, store_size=False))
    if codec == seg.CODEC_ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"codec {codec} is not a callback codec")


decompress: seg.Decompress = _decompress


def _fast_crc32c() -> Callable[[bytes], int] | None:
    """google-crc32c's C CRC-32C (20-30x the core's pure-Python one, which checks the same
    bytes when the wheel is missing)."""
    try:
        import google_crc32c
    except ImportError:  # pragma: no cover - a dependency; the core's own CRC still checks
        return None
    return google_crc32c.value  # type: ignore[no-any-return]


crc32c = _fast_crc32c()


# ---------------------------------------------------------------------------------------------
# finding files
def partition_of(path: Path) -> tuple[str, int | None]:
    """(topic, partition) from a segment's directory name (``__consumer_offsets-7``)."""
    m = _PARTITION_DIR.match(path.parent.name)
    if m is None:
        return OFFSETS_TOPIC, None
    return m.group("topic"), int(m.group("partition"))


def is_segment_dir(path: Path) -> bool:
    """A ``<topic>-<N>`` directory holding at least one segment file."""
    return (
        path.is_dir()
        and _PARTITION_DIR.match(path.name) is not None
        and any(_SEGMENT_NAME.match(p.name) for p in path.iterdir())
    )


def _dir_order(d: Path) -> tuple[str, int]:
    m = _PARTITION_DIR.match(d.name)
    return ("", -1) if m is None else (m.group("topic"), int(m.group("partition")))


def segment_files(path: str | os.PathLike[str], topic: str = OFFSETS_TOPIC) -> list[Path]:
    """Segment files under ``path`` (see the module rules), partitions in number order; only
    ``<topic>-N`` directories are read (``kafka.topic``): a broker's log dir holds every topic,
    and another topic's records are no offsets. The other topics' directories are skipped with
    one warning naming them; a partition directory or file of another topic is refused."""
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{p}: no such file or directory")
    own_dir = p if p.is_dir() else p.parent
    m = _PARTITION_DIR.match(own_dir.name)
    if m is not None and m.group("topic") != topic and (p.is_file() or is_segment_dir(p)):
        raise UsageError(
            f"{p}: a segment of topic {m.group('topic')!r}, not {topic!r} (kafka.topic): "
            "another topic's records are not offsets"
        )
    if p.is_file():
        return [p]
    own = sorted(f for f in p.iterdir() if f.is_file() and _SEGMENT_NAME.match(f.name))
    dirs = sorted((d for d in p.iterdir() if is_segment_dir(d)), key=_dir_order)
    other = [d.name for d in dirs if _dir_order(d)[0] != topic]
    if other:
        shown = ", ".join(other[:5]) + (f" and {len(other) - 5} more" if len(other) > 5 else "")
        log.warning(
            "%s: skipped %d partition directories of other topics (kafka.topic is %s): %s", p, len(other), topic, shown
        )
    dirs = [d for d in dirs if _dir_order(d)[0] == topic]
    return own + [f for d in dirs for f in sorted(d.iterdir()) if f.is_file() and _SEGMENT_NAME.match(f.name)]


# ---------------------------------------------------------------------------------------------
# reading
def read_segment_file(path: Path) -> Iterator[SegmentRecord | SegmentProblem]:
    """Every record and problem of one segment file, in file order."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror or exc})") from None
    first = True
    for item in read_segment_bytes(data, path):
        if first and isinstance(item, SegmentProblem) and item.position == 0 and item.magic not in (0, 1, 2):
            # not one batch header at the start: this is no segment (a text log, an index file)
            raise UsageError(f"{path}: not a Kafka log segment (no record batch at byte 0: {item.reason})")
        first = False
        yield item


def read_segment_range(path: str, start: int, end: int) -> Iterator[SegmentRecord | SegmentProblem]:
    """Every record and problem of bytes ``start``..``end`` of a segment file (whole batches: a
    log tail's range, ``pipelines.inputs.segment_log``), positions as in the file."""
    with open(path, "rb") as fh:
        fh.seek(start)
        data = fh.read(end - start)
    return read_segment_bytes(data, Path(path), start)


def read_segment_bytes(data: bytes, path: Path, position: int = 0) -> Iterator[SegmentRecord | SegmentProblem]:
    """Every record and problem of ``data``, bytes of the segment file ``path`` from ``position``."""
    topic, partition = partition_of(path)
    name = str(path)
    for item in seg.iter_batches(data, decompress=decompress, crc32c_fn=crc32c, position=position):
        if isinstance(item, seg.BadBatch):
            yield SegmentProblem(
                name, topic, partition, item.position, item.length, item.reason, item.data, item.base_offset, item.magic
            )
            continue
        b = item
        for r in b.records:
            if r.key is None and r.control is None:
                # every __consumer_offsets record has a key (Kafka's loader fails on a null key)
                yield SegmentProblem(
                    name,
                    topic,
                    partition,
                    b.position,
                    b.size,
                    f"record at offset {r.offset} has a null key",
                    r.value or b"",
                    b.base_offset,
                    b.magic,
                    r.offset,
                )
                continue
            c = r.control
            assert r.key is not None  # a control record without a key is a bad batch (core)
            yield SegmentRecord(
                r.key,
                r.value,
                topic,
                partition,
                r.offset,
                r.timestamp_ms,
                b.timestamp_type,
                b.producer_id,
                b.producer_epoch,
                b.base_sequence,
                b.is_transactional,
                None if c is None else c.type,
                None if c is None else c.coordinator_epoch,
                b.magic,
                b.codec,
                r.headers,
                name,
                b.position,
            )


def read_segment_items(
    path: str | os.PathLike[str], topic: str = OFFSETS_TOPIC
) -> Iterator[SegmentRecord | SegmentProblem]:
    """``read_segment_file`` over every segment file of ``topic`` under ``path``."""
    for f in segment_files(path, topic):
        yield from read_segment_file(f)


def segment_json(item: SegmentRecord | SegmentProblem, data: bool = False) -> dict[str, Any] | None:
    """What ``offsetlake decode`` prints for a problem or a control record (``None`` for a data
    record, which is decoded like any other); ``data=True``: a data record's segment facts."""
    if isinstance(item, SegmentProblem):
        return {
            "error": {
                "class": "BadBatch",
                "message": item.reason,
                "file": item.source_file,
                "position": item.position,
                "length": item.length,
                "partition": item.partition,
                "baseOffset": item.base_offset,
                "offset": item.offset,
                "magic": item.magic,
            },
            "dataHex": item.data.hex(),
        }
    facts = {
        "file": item.source_file,
        "batchPosition": item.batch_position,
        "magic": item.magic,
        "codec": seg.CODEC_NAMES[item.codec],
        "producerId": item.producer_id,
        "producerEpoch": item.producer_epoch,
        "baseSequence": item.base_sequence,
        "transactional": item.is_transactional,
    }
    if item.control_type is None:
        return facts if data else None
    return {
        "control": {
            "type": item.control_name,
            "typeId": item.control_type,
            "coordinatorEpoch": item.coordinator_epoch,
            "producerId": item.producer_id,
            "producerEpoch": item.producer_epoch,
        },
        "position": {"partition": item.partition, "offset": item.offset, "timestamp": item.timestamp_ms},
        "segment": facts,
        "keyHex": item.key.hex(),
        "valueHex": None if item.value is None else item.value.hex(),
    }


# ---------------------------------------------------------------------------------------------
# Arrow
SEGMENT_RECORDS_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int32()),
        ("base_sequence", pa.int32()),
        ("is_transactional", pa.bool_()),
        ("control_type", pa.int32()),
        ("control_name", pa.string()),
        ("coordinator_epoch", pa.int32()),
        ("magic", pa.int8()),
        ("codec", pa.string()),
        ("source_file", pa.string()),
        ("batch_position", pa.int64()),
    ]
)

SEGMENT_PROBLEMS_SCHEMA = pa.schema(
    [
        ("source_file", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("position", pa.int64()),
        ("length", pa.int64()),
        ("base_offset", pa.int64()),
        ("offset", pa.int64()),
        ("magic", pa.int8()),
        ("reason", pa.string()),
        ("data", pa.binary()),
    ]
)


def segment_tables(path: str | os.PathLike[str]) -> tuple[pa.Table, pa.Table]:
    """(records, problems) of every segment under ``path`` as Arrow tables."""
    recs: list[SegmentRecord] = []
    probs: list[SegmentProblem] = []
    for item in read_segment_items(path):
        (probs if isinstance(item, SegmentProblem) else recs).append(item)  # type: ignore[arg-type]
    records = pa.table(
        {
            "key": pa.array([r.key for r in recs], pa.binary()),
            "value": pa.array([r.value for r in recs], pa.binary()),
            "topic": pa.array([r.topic for r in recs], pa.string()),
            "partition": pa.array([r.partition for r in recs], pa.int32()),
            "offset": pa.array([r.offset for r in recs], pa.int64()),
            # v0 messages have no timestamp (-1): kept as -1 ms, as Kafka reports NO_TIMESTAMP
            "timestamp": pa.array([r.timestamp_ms * 1000 for r in recs], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            "timestampType": pa.array([r.timestamp_type for r in recs], pa.int32()),
            "producer_id": pa.array([r.producer_id for r in recs], pa.int64()),
            "producer_epoch": pa.array([r.producer_epoch for r in recs], pa.int32()),
            "base_sequence": pa.array([r.base_sequence for r in recs], pa.int32()),
            "is_transactional": pa.array([r.is_transactional for r in recs], pa.bool_()),
            "control_type": pa.array([r.control_type for r in recs], pa.int32()),
            "control_name": pa.array([r.control_name for r in recs], pa.string()),
            "coordinator_epoch": pa.array([r.coordinator_epoch for r in recs], pa.int32()),
            "magic": pa.array([r.magic for r in recs], pa.int8()),
            "codec": pa.array([seg.CODEC_NAMES[r.codec] for r in recs], pa.string()),
            "source_file": pa.array([r.source_file for r in recs], pa.string()),
            "batch_position": pa.array([r.batch_position for r in recs], pa.int64()),
        },
        schema=SEGMENT_RECORDS_SCHEMA,
    )
    problems = pa.table(
        {
            "source_file": pa.array([p.source_file for p in probs], pa.string()),
            "topic": pa.array([p.topic for p in probs], pa.string()),
            "partition": pa.array([p.partition for p in probs], pa.int32()),
            "position": pa.array([p.position for p in probs], pa.int64()),
            "length": pa.array([p.length for p in probs], pa.int64()),
            "base_offset": pa.array([p.base_offset for p in probs], pa.int64()),
            "offset": pa.array([p.offset for p in probs], pa.int64()),
            "magic": pa.array([p.magic for p in probs], pa.int8()),
            "reason": pa.array([p.reason for p in probs], pa.string()),
            "data": pa.array([p.data for p in probs], pa.binary()),
        },
        schema=SEGMENT_PROBLEMS_SCHEMA,
    )
    return records, problems


# ---------------------------------------------------------------------------------------------
# writing (tests, benchmarks: a capture's records as the broker would have stored them)
def write_log_dir(
    records: Iterable[tuple[bytes, bytes | None, int, int, int]],
    out: str | os.PathLike[str],
    *,
    per_batch: int = 5,
    codec: int = seg.CODEC_NONE,
) -> int:
    """``(key, value, partition, offset, timestamp_ms)`` records as a broker log dir under ``out``:
    one ``__consumer_offsets-N/<base offset>.log`` segment per partition, records in offset order,
    at most ``per_batch`` records per batch and a new batch wherever offsets skip (a compacted
    log). Returns the record count."""
    by_part: dict[int, list[tuple[int, int, bytes, bytes | None]]] = {}
    for key, value, part, off, ts in records:
        by_part.setdefault(part, []).append((off, ts, key, value))
    n = 0
    for part, recs in sorted(by_part.items()):
        recs.sort(key=lambda r: r[0])
        d = Path(out) / f"{OFFSETS_TOPIC}-{part}"
        d.mkdir(parents=True, exist_ok=True)
        batches: list[bytes] = []
        batch: list[seg.Record] = []
        for off, ts, key, value in recs:
            if batch and (len(batch) >= per_batch or off != batch[-1].offset + 1):
                batches.append(seg.encode_batch_v2(batch, codec=codec, compress=compress))
                batch = []
            batch.append(seg.Record(off, ts, key, value))
        batches.append(seg.encode_batch_v2(batch, codec=codec, compress=compress))
        (d / f"{recs[0][0]:020d}.log").write_bytes(b"".join(batches))
        n += len(recs)
    return n


# ---------------------------------------------------------------------------------------------
# the raw-record view (what pipelines.inputs.raw_files reads)
def raw_records(
    path: Path, *, require_partition: bool = False, loose_topic: str | None = None
) -> Iterator[tuple[bytes, bytes | None, str, int, int, int, int]]:
    """``(key, value, topic, partition, offset, timestamp_ms, timestamp_type)`` of the data
    records of one segment file; control records and problems are logged (module rules).
    A segment outside a partition directory gets partition 0 and, if given, ``loose_topic``."""
    _topic, partition = partition_of(path)
    if partition is None and require_partition:
        raise UsageError(
            f"{path}: cannot tell the partition of this segment: keep it in its directory "
            f"(e.g. {OFFSETS_TOPIC}-7/{path.name}) so its records get their log positions"
        )
    controls = problems = 0
    for item in read_segment_file(path):
        if isinstance(item, SegmentProblem):
            problems += 1
            log.warning("%s: position %d (%d bytes): %s", item.source_file, item.position, item.length, item.reason)
            continue
        if item.control_type is not None:
            controls += 1
            continue
        yield (
            item.key,
            item.value,
            item.topic if partition is not None or loose_topic is None else loose_topic,
            0 if item.partition is None else item.partition,
            item.offset,
            item.timestamp_ms,
            item.timestamp_type,
        )
    if controls or problems:
        log.warning(
            "%s: %d control records not passed on as data records, %d unreadable batches "
            "(offsetlake decode --input %s shows them)",
            path,
            controls,
            problems,
            path,
        )


__all__ = [
    "SEGMENT_PROBLEMS_SCHEMA",
    "SEGMENT_RECORDS_SCHEMA",
    "SEGMENT_SUFFIX",
    "SegmentProblem",
    "SegmentRecord",
    "compress",
    "decompress",
    "is_segment_dir",
    "overlap_problem",
    "partition_of",
    "raw_records",
    "read_segment_file",
    "read_segment_items",
    "segment_files",
    "segment_json",
    "segment_tables",
    "write_log_dir",
]
