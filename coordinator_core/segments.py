"""Kafka log segments (``__consumer_offsets-N/*.log``): record batches in and out, sans-IO.

A segment file is a plain concatenation of batches as the broker wrote them. This module
parses the bytes (``iter_batches``) and builds them (``encode_batch_v2``,
``encode_control_batch``, ``encode_legacy``), standard library only; the caller does the I/O
and hands in the codecs it has (``decompress(codec, data)`` / ``compress(codec, data)``).

Rules (facts from Kafka's ``DefaultRecordBatch``, ``DefaultRecord``, ``LegacyRecord``,
``AbstractLegacyRecordBatch``, ``ControlRecordType``, ``EndTransactionMarker``,
``CompressionType``, ``KafkaLZ4BlockInputStream``/``OutputStream``):
- Every batch starts with ``baseOffset int64, length int32`` (the log overhead: 12 bytes) and
  has its magic byte at +16. Magic 2 is a record batch (61-byte header, CRC-32C over
  attributes..end, records with zigzag varints); magic 0/1 is a legacy message (CRC-32 over
  magic..end, int32 key/value lengths; v1 adds a timestamp), and a compressed legacy message is
  a *wrapper* whose value is a compressed message set of inner messages.
- v2 attributes: bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd), bit 3 timestamp
  type (1 = LOG_APPEND_TIME: every record's timestamp is the batch's maxTimestamp), bit 4
  transactional, bit 5 control, bit 6 hasDeleteHorizonMs (KIP-534: baseTimestamp then holds
  the delete horizon and record timestamps stay baseTimestamp + delta). Record offset =
  baseOffset + offsetDelta; a record must use exactly its declared size and the records
  exactly the batch (Kafka: "Incorrect declared batch size").
- Control batches (KIP-98) hold control records: key = int16 version + int16 type
  (``ControlRecordType``: 0 ABORT, 1 COMMIT, 2-6 KRaft, others UNKNOWN; a key version above
  0 is read as version 0, a negative one is corrupt); ABORT/COMMIT values are
  ``EndTransactionMarker``: int16 version + int32 coordinatorEpoch. They are surfaced as
  ``Record.control`` with the batch's producer id/epoch: nothing here applies transaction
  semantics, the caller (replay) decides.
- Legacy offsets: a v1 wrapper's inner offsets are relative, the absolute offset of an inner
  message is ``wrapper.offset - last_inner.offset + inner.offset``; v0 inner offsets are
  absolute. A v1 wrapper with LOG_APPEND_TIME gives its timestamp to every inner message.
  Inner messages must have the wrapper's magic and no codec of their own. v0 has no timestamp
  (``-1``, timestamp type ``-1``, Kafka's ``NO_TIMESTAMP_TYPE``).
- Codec framing is handled here; the callbacks only see each codec's plain primitive:
  gzip is done here with ``zlib`` (multi-member streams read); snappy is snappy-java's xerial
  stream (``\\x82SNAPPY\\x00``, version and compatible version int32, then int32-length raw
  snappy blocks; a payload without that magic is one raw block) — the callback gets one raw
  block at a time; lz4 is the LZ4 frame format as Kafka's ``KafkaLZ4BlockOutputStream``
  writes it (independent blocks, 64 KB, no content size) parsed here, the callback gets one
  raw LZ4 block plus its maximum size (``decompress(CODEC_LZ4, block)`` must accept
  ``max_size``); the frame header checksum is checked with xxHash32 except on magic 0, where
  Kafka wrote it over the magic number too (the "broken HC" of KAFKA-3160) and its reader
  ignores it; zstd is a zstd frame, passed through whole.
- Never raises on bad bytes: a batch that cannot be read becomes ``BadBatch`` (position,
  length, reason, raw bytes) and parsing goes on at the next batch when its length can be
  trusted (the header is whole, the length is plausible for the magic and the next position is
  the end of the data or a plausible batch header); otherwise it stops there with a final
  ``BadBatch`` (``stopped=True``) covering the rest of the data. A CRC mismatch, a codec
  failure, a malformed record or control record make the batch bad and never fatal.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

# ---------------------------------------------------------------------------------------------
# constants (Kafka's CompressionType ids, TimestampType ids, ControlRecordType ids)
CODEC_NONE = 0
CODEC_GZIP = 1
CODEC_SNAPPY = 2
CODEC_LZ4 = 3
CODEC_ZSTD = 4
CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")

NO_TIMESTAMP_TYPE = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1
NO_TIMESTAMP = -1

CONTROL_ABORT = 0
CONTROL_COMMIT = 1
CONTROL_TYPE_NAMES = {
    0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION", 6: "KRAFT_VOTERS",
}

LOG_OVERHEAD = 12  # baseOffset int64 + length int32 (Kafka's Records.LOG_OVERHEAD)
V2_HEADER_SIZE = 61  # DefaultRecordBatch.RECORD_BATCH_OVERHEAD
_V2_MIN_LENGTH = V2_HEADER_SIZE - LOG_OVERHEAD
_LEGACY_MIN_SIZE = {0: 14, 1: 22}  # LegacyRecord.RECORD_OVERHEAD_V0 / _V1

_ATTR_CODEC = 0x07
_ATTR_TIMESTAMP_TYPE = 0x08
_ATTR_TRANSACTIONAL = 0x10
_ATTR_CONTROL = 0x20
_ATTR_DELETE_HORIZON = 0x40

_V2 = struct.Struct(">qiibIhiqqqhii")  # the 61-byte DefaultRecordBatch header
_LEGACY = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_U32 = struct.Struct(">I")


class Decompress(Protocol):
    """``decompress(codec, data, max_size)``: one codec primitive (see the module rules)."""

    def __call__(self, codec: int, data: bytes, max_size: int) -> bytes: ...


Compress = Callable[[int, bytes], bytes]


# ---------------------------------------------------------------------------------------------
# checksums: CRC-32C (batch v2), xxHash32 (LZ4 frame descriptor and block checksums)
def _crc32c_tables() -> tuple[tuple[int, ...], ...]:
    poly = 0x82F63B78  # Castagnoli, reflected
    t0 = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        t0.append(c)
    tables = [tuple(t0)]
    for _ in range(7):  # slicing-by-8: table k = CRC of a byte followed by k zero bytes
        prev = tables[-1]
        tables.append(tuple((prev[n] >> 8) ^ t0[prev[n] & 0xFF] for n in range(256)))
    return tuple(tables)


_CRC_T = _crc32c_tables()
_Q8 = struct.Struct("<Q")


def crc32c(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC-32C (Castagnoli) of ``data``, continuing from ``crc`` (Kafka's ``Crc32C``)."""
    t0, t1, t2, t3, t4, t5, t6, t7 = _CRC_T
    crc ^= 0xFFFFFFFF
    mv = memoryview(data).cast("B") if not isinstance(data, bytes) else data
    n = len(mv)
    whole = n - n % 8
    if whole:
        for (word,) in _Q8.iter_unpack(mv[:whole]):
            x = word ^ crc
            crc = (t7[x & 0xFF] ^ t6[(x >> 8) & 0xFF] ^ t5[(x >> 16) & 0xFF] ^ t4[(x >> 24) & 0xFF]
                   ^ t3[(x >> 32) & 0xFF] ^ t2[(x >> 40) & 0xFF] ^ t1[(x >> 48) & 0xFF] ^ t0[x >> 56])
    for i in range(whole, n):
        crc = t0[(crc ^ mv[i]) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 (the LZ4 frame format's checksum; Kafka uses lz4-java's ``XXHash32``)."""
    n = len(data)
    i = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed & _M32
        v4 = (seed - _P1) & _M32
        while i <= n - 16:
            a, b, c, d = struct.unpack_from("<IIII", data, i)
            v1 = _rotl((v1 + a * _P2) & _M32, 13) * _P1 & _M32
            v2 = _rotl((v2 + b * _P2) & _M32, 13) * _P1 & _M32
            v3 = _rotl((v3 + c * _P2) & _M32, 13) * _P1 & _M32
            v4 = _rotl((v4 + d * _P2) & _M32, 13) * _P1 & _M32
            i += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        (w,) = struct.unpack_from("<I", data, i)
        h = _rotl((h + w * _P3) & _M32, 17) * _P4 & _M32
        i += 4
    while i < n:
        h = _rotl((h + data[i] * _P5) & _M32, 11) * _P1 & _M32
        i += 1
    h ^= h >> 15
    h = h * _P2 & _M32
    h ^= h >> 13
    h = h * _P3 & _M32
    h ^= h >> 16
    return h


# ---------------------------------------------------------------------------------------------
# what the parser yields
class ControlMarker(NamedTuple):
    """A control record's key (and, for ABORT/COMMIT, its ``EndTransactionMarker`` value)."""

    type: int
    key_version: int
    value_version: int | None = None
    coordinator_epoch: int | None = None

    @property
    def name(self) -> str:
        return CONTROL_TYPE_NAMES.get(self.type, "UNKNOWN")


class Record(NamedTuple):
    """One record. ``headers`` is ``((key, value-or-None), ...)``; ``control`` is set for the
    records of a control batch."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    control: ControlMarker | None = None


@dataclass(frozen=True, slots=True)
class RecordBatch:
    """A batch as found in the data: a v2 record batch, or a legacy (v0/v1) message —
    a compressed wrapper with its inner messages, or one plain message."""

    position: int
    size: int  # bytes in the data, log overhead included
    magic: int
    base_offset: int
    last_offset: int
    codec: int
    timestamp_type: int
    records: tuple[Record, ...]
    crc: int
    partition_leader_epoch: int = -1
    is_transactional: bool = False
    is_control: bool = False
    base_timestamp: int = NO_TIMESTAMP
    max_timestamp: int = NO_TIMESTAMP
    delete_horizon_ms: int | None = None
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1


@dataclass(frozen=True, slots=True)
class BadBatch:
    """Bytes that could not be read as a batch. ``stopped``: parsing ended here (the length
    could not be trusted); ``data`` is then everything from ``position`` to the end."""

    position: int
    length: int
    reason: str
    data: bytes
    magic: int | None = None
    base_offset: int | None = None
    stopped: bool = False


class _Bad(Exception):
    """Internal: why the batch being read is bad (never escapes this module)."""


# ---------------------------------------------------------------------------------------------
# varints (DefaultRecord: zigzag varint / varlong, Kafka's ByteUtils)
def _varint(buf: bytes, pos: int, end: int, limit_bits: int = 32) -> tuple[int, int]:
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise _Bad("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
        if shift >= limit_bits + 3:  # 5 bytes for a varint, 10 for a varlong
            raise _Bad("varint too long")


def _write_varint(out: bytearray, n: int) -> None:
    z = (n << 1) ^ (n >> 63)
    z &= 0xFFFFFFFFFFFFFFFF
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)


# ---------------------------------------------------------------------------------------------
# codecs: framing here, primitives through the callback
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_BLOCK = 32 * 1024  # snappy-java SnappyOutputStream's default block size
_LZ4_MAGIC = 0x184D2204
_LZ4_BLOCK_MAX = {4: 1 << 16, 5: 1 << 18, 6: 1 << 20, 7: 1 << 22}


def _gunzip(data: bytes) -> bytes:
    out = []
    while data:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out.append(d.decompress(data))
            out.append(d.flush())
        except zlib.error as exc:
            raise _Bad(f"gzip: {exc}") from None
        if not d.eof:
            raise _Bad("gzip: truncated stream")
        data = d.unused_data
    return b"".join(out)


def _call(decompress: Decompress | None, codec: int, data: bytes, max_size: int) -> bytes:
    if decompress is None:
        raise _Bad(f"{CODEC_NAMES[codec]}: no decompressor for this codec was given")
    try:
        return bytes(decompress(codec, data, max_size))
    except _Bad:
        raise
    except Exception as exc:  # a codec library's error, whatever its class
        raise _Bad(f"{CODEC_NAMES[codec]}: {type(exc).__name__}: {exc}") from None


def _unsnappy(data: bytes, decompress: Decompress | None) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return _call(decompress, CODEC_SNAPPY, data, 0)
    if len(data) < _XERIAL_HEADER.size:
        raise _Bad("snappy: truncated xerial header")
    pos = _XERIAL_HEADER.size
    out = []
    while pos < len(data):
        if pos + 4 > len(data):
            raise _Bad("snappy: truncated xerial block length")
        (n,) = _I32.unpack_from(data, pos)
        pos += 4
        if n < 0 or pos + n > len(data):
            raise _Bad(f"snappy: xerial block of {n} bytes overruns the data")
        out.append(_call(decompress, CODEC_SNAPPY, data[pos:pos + n], 0))
        pos += n
    return b"".join(out)


def _unlz4(data: bytes, decompress: Decompress | None, magic: int) -> bytes:
    if len(data) < 7 or struct.unpack_from("<I", data, 0)[0] != _LZ4_MAGIC:
        raise _Bad("lz4: not an LZ4 frame (bad magic number)")
    flg, bd = data[4], data[5]
    if flg >> 6 != 1:
        raise _Bad(f"lz4: frame version {flg >> 6} is unsupported")
    if not flg & 0x20:  # KafkaLZ4BlockInputStream refuses linked blocks too
        raise _Bad("lz4: dependent block stream is unsupported")
    block_max = _LZ4_BLOCK_MAX.get((bd >> 4) & 7)
    if block_max is None:
        raise _Bad(f"lz4: bad block size code {(bd >> 4) & 7}")
    pos = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if pos >= len(data):
        raise _Bad("lz4: truncated frame descriptor")
    hc = data[pos]
    if magic != 0:  # magic 0: Kafka hashed the magic number too and its reader skips the check
        want = (xxh32(data[4:pos]) >> 8) & 0xFF
        if hc != want:
            raise _Bad(f"lz4: frame descriptor checksum {hc:#04x}, expected {want:#04x}")
    pos += 1
    out = []
    while True:
        if pos + 4 > len(data):
            raise _Bad("lz4: truncated block header (no end mark)")
        (n,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if n == 0:
            break
        raw = n & 0x80000000
        n &= 0x7FFFFFFF
        if n > block_max or pos + n > len(data):
            raise _Bad(f"lz4: block of {n} bytes overruns the frame or the block size")
        block = data[pos:pos + n]
        pos += n
        if flg & 0x10:
            if pos + 4 > len(data):
                raise _Bad("lz4: truncated block checksum")
            if struct.unpack_from("<I", data, pos)[0] != xxh32(block):
                raise _Bad("lz4: block checksum mismatch")
            pos += 4
        out.append(block if raw else _call(decompress, CODEC_LZ4, block, block_max))
    return b"".join(out)


def _decompress(codec: int, data: bytes, decompress: Decompress | None, magic: int) -> bytes:
    if codec == CODEC_GZIP:
        return _gunzip(data)
    if codec == CODEC_SNAPPY:
        return _unsnappy(data, decompress)
    if codec == CODEC_LZ4:
        return _unlz4(data, decompress, magic)
    if codec == CODEC_ZSTD:
        return _call(decompress, CODEC_ZSTD, data, 0)
    raise _Bad(f"unknown compression codec {codec}")


def frame(codec: int, data: bytes, compress: Compress | None, magic: int = 2) -> bytes:
    """``data`` compressed and framed as Kafka frames ``codec`` for ``magic`` (the encoder's
    half of the module rules: xerial snappy in 32 KB blocks, Kafka's LZ4 frame with 64 KB
    independent blocks and, for magic 0, the broken descriptor checksum)."""
    if codec == CODEC_GZIP:
        c = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return c.compress(data) + c.flush()
    if compress is None:
        raise ValueError(f"{CODEC_NAMES[codec]} needs a compress callback")
    if codec == CODEC_SNAPPY:
        out = bytearray(_XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1))
        for i in range(0, len(data), _XERIAL_BLOCK):
            block = bytes(compress(CODEC_SNAPPY, data[i:i + _XERIAL_BLOCK]))
            out += _I32.pack(len(block)) + block
        return bytes(out)
    if codec == CODEC_LZ4:
        header = struct.pack("<IBB", _LZ4_MAGIC, 0x60, 0x40)  # v1, independent blocks; 64 KB
        hashed = header if magic == 0 else header[4:]
        out = bytearray(header)
        out.append((xxh32(hashed) >> 8) & 0xFF)
        for i in range(0, len(data), 1 << 16):
            chunk = data[i:i + (1 << 16)]
            block = bytes(compress(CODEC_LZ4, chunk))
            if len(block) >= len(chunk):  # incompressible: stored raw, high bit set
                out += struct.pack("<I", len(chunk) | 0x80000000) + chunk
            else:
                out += struct.pack("<I", len(block)) + block
        out += b"\x00\x00\x00\x00"
        return bytes(out)
    if codec == CODEC_ZSTD:
        return bytes(compress(CODEC_ZSTD, data))
    raise ValueError(f"unknown compression codec {codec}")


# ---------------------------------------------------------------------------------------------
# parsing
def iter_batches(
    data: bytes,
    *,
    decompress: Decompress | None = None,
    check_crc: bool = True,
    position: int = 0,
    crc32c_fn: Callable[[bytes], int] | None = None,
) -> Iterator[RecordBatch | BadBatch]:
    """Every batch in ``data`` (a segment file's bytes), in order; ``position`` is added to
    reported positions (where ``data`` starts in its file). Never raises on bad bytes."""
    data = bytes(data)
    crc_fn = crc32c_fn or crc32c
    n = len(data)
    pos = 0
    while pos < n:
        left = n - pos
        if left < LOG_OVERHEAD + 5:
            yield BadBatch(position + pos, left, f"truncated: {left} bytes left, less than a batch header",
                           data[pos:], stopped=True)
            return
        base_offset, length = struct.unpack_from(">qi", data, pos)
        magic = data[pos + 16]
        size = LOG_OVERHEAD + length
        plausible, why = _plausible_header(data, pos)
        if plausible and size > left:
            yield BadBatch(position + pos, left,
                           f"truncated: batch of {size} bytes but only {left} left in the data",
                           data[pos:], magic=magic, base_offset=base_offset, stopped=True)
            return
        try:
            if not plausible:
                raise _Bad(why)
            if magic == 2:
                yield _read_v2(data, pos, size, decompress, check_crc, crc_fn, position)
            else:
                yield _read_legacy(data, pos, size, magic, decompress, check_crc, position)
        except _Bad as exc:
            # the length field is outside every CRC: go on only if it leads to the end of the
            # data or to something that looks like the next batch header
            nxt = pos + size
            trusted = length >= min(_LEGACY_MIN_SIZE.values()) and nxt <= n and (
                nxt == n or _plausible_header(data, nxt)[0])
            if not trusted:
                yield BadBatch(position + pos, left,
                               f"stopped: {exc}; the batch length {length} cannot be trusted "
                               f"(it leads to no batch header), the rest of the data is not read",
                               data[pos:], magic=magic, base_offset=base_offset, stopped=True)
                return
            yield BadBatch(position + pos, size, str(exc), data[pos:nxt], magic=magic, base_offset=base_offset)
        pos += size


def _plausible_header(data: bytes, pos: int) -> tuple[bool, str]:
    left = len(data) - pos
    if left < LOG_OVERHEAD + 5:
        return True, ""  # a truncated tail: reported as such by the caller
    length = _I32.unpack_from(data, pos + 8)[0]
    magic = data[pos + 16]
    if magic not in (0, 1, 2):
        return False, f"unknown magic {magic}"
    minimum = _V2_MIN_LENGTH if magic == 2 else _LEGACY_MIN_SIZE[magic]
    if length < minimum:
        return False, f"batch length {length} is below the minimum {minimum} for magic {magic}"
    return True, ""


def _read_v2(data: bytes, pos: int, size: int, decompress: Decompress | None, check_crc: bool,
             crc_fn: Callable[[bytes], int], position: int) -> RecordBatch:
    (base_offset, _length, leader_epoch, magic, crc, attrs, last_delta, base_ts, max_ts,
     producer_id, producer_epoch, base_seq, count) = _V2.unpack_from(data, pos)
    end = pos + size
    if check_crc:
        actual = crc_fn(data[pos + 21:end])
        if actual != crc:
            raise _Bad(f"CRC-32C mismatch: stored {crc:#010x}, computed {actual:#010x}")
    codec = attrs & _ATTR_CODEC
    if codec > CODEC_ZSTD:
        raise _Bad(f"unknown compression codec {codec}")
    ts_type = LOG_APPEND_TIME if attrs & _ATTR_TIMESTAMP_TYPE else CREATE_TIME
    control = bool(attrs & _ATTR_CONTROL)
    if count < 0:
        raise _Bad(f"negative record count {count}")
    body_start = pos + V2_HEADER_SIZE
    if codec:
        body = _decompress(codec, data[body_start:end], decompress, 2)
        records = _read_records(body, 0, len(body), count, base_offset, base_ts, ts_type, max_ts, control)
    else:
        records = _read_records(data, body_start, end, count, base_offset, base_ts, ts_type, max_ts, control)
    return RecordBatch(
        position=position + pos, size=size, magic=magic, base_offset=base_offset,
        last_offset=base_offset + last_delta, codec=codec, timestamp_type=ts_type,
        records=records, crc=crc, partition_leader_epoch=leader_epoch,
        is_transactional=bool(attrs & _ATTR_TRANSACTIONAL), is_control=control,
        base_timestamp=base_ts, max_timestamp=max_ts,
        delete_horizon_ms=base_ts if attrs & _ATTR_DELETE_HORIZON else None,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_seq,
    )


def _read_records(buf: bytes, pos: int, end: int, count: int, base_offset: int, base_ts: int,
                  ts_type: int, max_ts: int, control: bool) -> tuple[Record, ...]:
    out: list[Record] = []
    append = out.append
    log_append = ts_type == LOG_APPEND_TIME
    for i in range(count):
        if pos >= end:
            raise _Bad(f"record {i} of {count}: the batch ends before it (incorrect declared batch size)")
        # fast path for the one-byte varints that dominate __consumer_offsets records
        b = buf[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            length, pos = _varint(buf, pos, end)
        rec_end = pos + length
        if length < 0 or rec_end > end:
            raise _Bad(f"record {i} of {count}: size {length} overruns the batch")
        try:
            pos += 1  # attributes: unused
            if pos + 3 <= rec_end and buf[pos] < 0x80 and buf[pos + 1] < 0x80 and buf[pos + 2] < 0x80:
                b0, b1, b2 = buf[pos], buf[pos + 1], buf[pos + 2]  # the common one-byte varints
                ts_delta = (b0 >> 1) ^ -(b0 & 1)
                off_delta = (b1 >> 1) ^ -(b1 & 1)
                klen = (b2 >> 1) ^ -(b2 & 1)
                pos += 3
            else:
                ts_delta, pos = _varint(buf, pos, rec_end, 64)
                off_delta, pos = _varint(buf, pos, rec_end)
                klen, pos = _varint(buf, pos, rec_end)
            if klen >= 0:
                if pos + klen > rec_end:
                    raise _Bad("key overruns the record")
                key: bytes | None = buf[pos:pos + klen]
                pos += klen
            elif klen == -1:
                key = None
            else:
                raise _Bad(f"invalid key length {klen}")
            if pos < rec_end and buf[pos] < 0x80:
                b0 = buf[pos]
                vlen = (b0 >> 1) ^ -(b0 & 1)
                pos += 1
            else:
                vlen, pos = _varint(buf, pos, rec_end)
            if vlen >= 0:
                if pos + vlen > rec_end:
                    raise _Bad("value overruns the record")
                value: bytes | None = buf[pos:pos + vlen]
                pos += vlen
            elif vlen == -1:
                value = None
            else:
                raise _Bad(f"invalid value length {vlen}")
            if pos < rec_end and buf[pos] == 0:  # no headers: what the coordinator writes
                nh = 0
                pos += 1
            else:
                nh, pos = _varint(buf, pos, rec_end)
            headers: tuple[tuple[str, bytes | None], ...] = ()
            if nh:
                if nh < 0:
                    raise _Bad(f"invalid header count {nh}")
                hs = []
                for _ in range(nh):
                    hk, pos = _varint(buf, pos, rec_end)
                    if hk < 0 or pos + hk > rec_end:
                        raise _Bad(f"invalid header key length {hk}")
                    try:
                        hkey = buf[pos:pos + hk].decode("utf-8")
                    except UnicodeDecodeError:
                        raise _Bad("header key is not UTF-8") from None
                    pos += hk
                    hv, pos = _varint(buf, pos, rec_end)
                    if hv >= 0:
                        if pos + hv > rec_end:
                            raise _Bad("header value overruns the record")
                        hval: bytes | None = buf[pos:pos + hv]
                        pos += hv
                    elif hv == -1:
                        hval = None
                    else:
                        raise _Bad(f"invalid header value length {hv}")
                    hs.append((hkey, hval))
                headers = tuple(hs)
            if pos != rec_end:
                raise _Bad(f"declared size {length} but the fields use {length + pos - rec_end}")
        except _Bad as exc:
            raise _Bad(f"record {i} of {count}: {exc}") from None
        marker = _control_marker(key, value) if control else None
        append(Record(base_offset + off_delta, max_ts if log_append else base_ts + ts_delta,
                      key, value, headers, marker))
    if pos != end:
        raise _Bad(f"{end - pos} bytes left after the {count} declared records (incorrect declared batch size)")
    return tuple(out)


def _control_marker(key: bytes | None, value: bytes | None) -> ControlMarker:
    if key is None or len(key) < 4:
        raise _Bad("control record key shorter than 4 bytes")
    version, ctype = struct.unpack_from(">hh", key, 0)
    if version < 0:
        raise _Bad(f"invalid control record key version {version}")
    if ctype not in (CONTROL_ABORT, CONTROL_COMMIT):
        return ControlMarker(ctype, version)
    if value is None or len(value) < 6:
        raise _Bad(f"{CONTROL_TYPE_NAMES[ctype]} marker value shorter than 6 bytes")
    vversion, epoch = struct.unpack_from(">hi", value, 0)
    if vversion < 0:
        raise _Bad(f"invalid end transaction marker version {vversion}")
    return ControlMarker(ctype, version, vversion, epoch)


def _read_legacy(data: bytes, pos: int, size: int, magic: int, decompress: Decompress | None,
                 check_crc: bool, position: int) -> RecordBatch:
    offset, crc, codec, ts_type, ts, key, value = _legacy_message(data, pos, size, magic, check_crc)
    if codec == CODEC_NONE:
        rec = Record(offset, ts, key, value)
        return RecordBatch(position=position + pos, size=size, magic=magic, base_offset=offset,
                           last_offset=offset, codec=codec, timestamp_type=ts_type, records=(rec,),
                           crc=crc, base_timestamp=ts, max_timestamp=ts)
    if codec > CODEC_LZ4:
        raise _Bad(f"compression codec {codec} is not valid for magic {magic}")
    if value is None:
        raise _Bad("compressed wrapper message with a null value")
    inner_bytes = _decompress(codec, value, decompress, magic)
    inner: list[tuple[int, int, int, bytes | None, bytes | None]] = []
    ipos = 0
    n = len(inner_bytes)
    while ipos < n:
        if n - ipos < LOG_OVERHEAD + 5:
            raise _Bad(f"inner message {len(inner)}: truncated ({n - ipos} bytes left)")
        isize = LOG_OVERHEAD + _I32.unpack_from(inner_bytes, ipos + 8)[0]
        imagic = inner_bytes[ipos + 16]
        if imagic != magic:
            raise _Bad(f"inner message {len(inner)}: magic {imagic} inside a magic {magic} wrapper")
        if isize < LOG_OVERHEAD + _LEGACY_MIN_SIZE[magic] or ipos + isize > n:
            raise _Bad(f"inner message {len(inner)}: size {isize - LOG_OVERHEAD} does not fit")
        try:
            ioff, _icrc, icodec, _itype, its, ikey, ivalue = _legacy_message(inner_bytes, ipos, isize, magic, check_crc)
        except _Bad as exc:
            raise _Bad(f"inner message {len(inner)}: {exc}") from None
        if icodec != CODEC_NONE:
            raise _Bad(f"inner message {len(inner)}: nested compression")
        inner.append((ioff, its, icodec, ikey, ivalue))
        ipos += isize
    if not inner:
        raise _Bad("compressed wrapper message with no inner messages")
    shift = offset - inner[-1][0] if magic > 0 else 0
    recs = tuple(
        Record(ioff + shift, ts if ts_type == LOG_APPEND_TIME else its, ikey, ivalue)
        for ioff, its, _c, ikey, ivalue in inner
    )
    return RecordBatch(position=position + pos, size=size, magic=magic, base_offset=recs[0].offset,
                       last_offset=recs[-1].offset, codec=codec, timestamp_type=ts_type, records=recs,
                       crc=crc, base_timestamp=ts, max_timestamp=ts)


def _legacy_message(buf: bytes, pos: int, size: int, magic: int, check_crc: bool
                    ) -> tuple[int, int, int, int, int, bytes | None, bytes | None]:
    end = pos + size
    offset, _size, crc, _magic, attrs = _LEGACY.unpack_from(buf, pos)
    if check_crc:
        actual = zlib.crc32(buf[pos + 16:end])
        if actual != crc:
            raise _Bad(f"CRC-32 mismatch: stored {crc:#010x}, computed {actual:#010x}")
    p = pos + 18
    if magic == 1:
        ts = _I64.unpack_from(buf, p)[0]
        p += 8
        ts_type = LOG_APPEND_TIME if attrs & _ATTR_TIMESTAMP_TYPE else CREATE_TIME
    else:
        ts, ts_type = NO_TIMESTAMP, NO_TIMESTAMP_TYPE
    fields: list[bytes | None] = []
    for what in ("key", "value"):
        if p + 4 > end:
            raise _Bad(f"{what} length overruns the message")
        (ln,) = _I32.unpack_from(buf, p)
        p += 4
        if ln == -1:
            fields.append(None)
            continue
        if ln < 0 or p + ln > end:
            raise _Bad(f"{what} length {ln} overruns the message")
        fields.append(buf[p:p + ln])
        p += ln
    if p != end:
        raise _Bad(f"{end - p} bytes after the value (size does not match the fields)")
    return offset, crc, attrs & _ATTR_CODEC, ts_type, ts, fields[0], fields[1]


def iter_records(data: bytes, **kwargs: object) -> Iterator[tuple[RecordBatch, Record] | BadBatch]:
    """Flattened ``iter_batches``: ``(batch, record)`` pairs and ``BadBatch`` items."""
    for item in iter_batches(data, **kwargs):  # type: ignore[arg-type]
        if isinstance(item, BadBatch):
            yield item
        else:
            for rec in item.records:
                yield item, rec


# ---------------------------------------------------------------------------------------------
# encoding
def encode_batch_v2(
    records: Sequence[Record],
    *,
    base_offset: int | None = None,
    codec: int = CODEC_NONE,
    compress: Compress | None = None,
    timestamp_type: int = CREATE_TIME,
    log_append_time: int | None = None,
    transactional: bool = False,
    control: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = 0,
    delete_horizon_ms: int | None = None,
    last_offset: int | None = None,
) -> bytes:
    """One v2 record batch holding ``records`` (their ``offset`` and ``timestamp_ms`` are
    absolute; ``base_offset`` defaults to the first one, ``last_offset`` to the last)."""
    if not records and (base_offset is None or last_offset is None):
        raise ValueError("an empty batch needs base_offset and last_offset")
    base = records[0].offset if base_offset is None else base_offset
    last = records[-1].offset if last_offset is None else last_offset
    if delete_horizon_ms is not None:
        base_ts = delete_horizon_ms
    else:
        base_ts = records[0].timestamp_ms if records else NO_TIMESTAMP
    max_ts = max((r.timestamp_ms for r in records), default=NO_TIMESTAMP)
    if timestamp_type == LOG_APPEND_TIME:
        max_ts = log_append_time if log_append_time is not None else max_ts
    body = bytearray()
    for r in records:
        rec = bytearray(b"\x00")
        _write_varint(rec, r.timestamp_ms - base_ts)
        _write_varint(rec, r.offset - base)
        for part in (r.key, r.value):
            if part is None:
                _write_varint(rec, -1)
            else:
                _write_varint(rec, len(part))
                rec += part
        _write_varint(rec, len(r.headers))
        for hk, hv in r.headers:
            hkb = hk.encode("utf-8")
            _write_varint(rec, len(hkb))
            rec += hkb
            if hv is None:
                _write_varint(rec, -1)
            else:
                _write_varint(rec, len(hv))
                rec += hv
        _write_varint(body, len(rec))
        body += rec
    payload = frame(codec, bytes(body), compress) if codec else bytes(body)
    attrs = (codec | (_ATTR_TIMESTAMP_TYPE if timestamp_type == LOG_APPEND_TIME else 0)
             | (_ATTR_TRANSACTIONAL if transactional else 0) | (_ATTR_CONTROL if control else 0)
             | (_ATTR_DELETE_HORIZON if delete_horizon_ms is not None else 0))
    after_crc = struct.pack(">hiqqqhii", attrs, last - base, base_ts, max_ts, producer_id,
                            producer_epoch, base_sequence, len(records)) + payload
    length = 4 + 1 + 4 + len(after_crc)
    return (struct.pack(">qiibI", base, length, partition_leader_epoch, 2, crc32c(after_crc))
            + after_crc)


def control_record(control_type: int, offset: int, timestamp_ms: int, coordinator_epoch: int = 0) -> Record:
    """The control record Kafka writes to end a transaction (``EndTransactionMarker`` v0)."""
    key = struct.pack(">hh", 0, control_type)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return Record(offset, timestamp_ms, key, value, (), ControlMarker(control_type, 0, 0, coordinator_epoch))


def encode_control_batch(
    control_type: int, *, offset: int, timestamp_ms: int, producer_id: int, producer_epoch: int,
    coordinator_epoch: int = 0, partition_leader_epoch: int = 0,
) -> bytes:
    """A COMMIT or ABORT marker batch: one control record, transactional + control flags,
    the transaction's producer id/epoch and base sequence -1 (the marker is outside the
    producer's sequence)."""
    rec = control_record(control_type, offset, timestamp_ms, coordinator_epoch)
    return encode_batch_v2([rec], transactional=True, control=True, producer_id=producer_id,
                           producer_epoch=producer_epoch, base_sequence=-1,
                           partition_leader_epoch=partition_leader_epoch)


def _legacy_message_bytes(offset: int, magic: int, attrs: int, timestamp_ms: int,
                          key: bytes | None, value: bytes | None) -> bytes:
    body = struct.pack(">bb", magic, attrs)
    if magic == 1:
        body += _I64.pack(timestamp_ms)
    for part in (key, value):
        body += _I32.pack(-1) if part is None else _I32.pack(len(part)) + part
    msg = _U32.pack(zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(msg)) + msg


def encode_legacy(
    records: Sequence[Record],
    *,
    magic: int,
    codec: int = CODEC_NONE,
    compress: Compress | None = None,
    timestamp_type: int = CREATE_TIME,
    wrapper_timestamp: int | None = None,
) -> bytes:
    """A v0/v1 message set: one message per record, or (``codec``) one wrapper message whose
    value is the compressed inner set (v1: relative inner offsets, wrapper offset = last)."""
    if magic not in (0, 1):
        raise ValueError("legacy magic is 0 or 1")
    ts_bit = _ATTR_TIMESTAMP_TYPE if (magic == 1 and timestamp_type == LOG_APPEND_TIME) else 0
    if codec == CODEC_NONE:
        return b"".join(_legacy_message_bytes(r.offset, magic, ts_bit, r.timestamp_ms, r.key, r.value)
                        for r in records)
    if not records:
        raise ValueError("a compressed wrapper needs at least one record")
    first = records[0].offset
    inner = b"".join(
        _legacy_message_bytes(r.offset - first if magic == 1 else r.offset, magic, 0, r.timestamp_ms, r.key, r.value)
        for r in records)
    wrapped = frame(codec, inner, compress, magic)
    ts = wrapper_timestamp if wrapper_timestamp is not None else max(r.timestamp_ms for r in records)
    return _legacy_message_bytes(records[-1].offset, magic, codec | ts_bit, ts, None, wrapped)


__all__ = [
    "CODEC_GZIP", "CODEC_LZ4", "CODEC_NAMES", "CODEC_NONE", "CODEC_SNAPPY", "CODEC_ZSTD",
    "CONTROL_ABORT", "CONTROL_COMMIT", "CONTROL_TYPE_NAMES", "CREATE_TIME", "LOG_APPEND_TIME",
    "NO_TIMESTAMP", "NO_TIMESTAMP_TYPE", "BadBatch", "Compress", "ControlMarker", "Decompress",
    "Record", "RecordBatch", "control_record", "crc32c", "encode_batch_v2", "encode_control_batch",
    "encode_legacy", "frame", "iter_batches", "iter_records", "xxh32",
]
