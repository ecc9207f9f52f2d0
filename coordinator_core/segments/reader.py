"""Parsing a segment's bytes into batches, records and bad batches (see ``coordinator_core.segments``)."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator

from coordinator_core.segments.checksums import crc32c
from coordinator_core.segments.format import (
    _ATTR_CODEC,
    _ATTR_CONTROL,
    _ATTR_DELETE_HORIZON,
    _ATTR_TIMESTAMP_TYPE,
    _ATTR_TRANSACTIONAL,
    _I32,
    _I64,
    _LEGACY,
    _LEGACY_MIN_SIZE,
    _V2,
    _V2_MIN_LENGTH,
    CODEC_LZ4,
    CODEC_NONE,
    CODEC_ZSTD,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CONTROL_TYPE_NAMES,
    CREATE_TIME,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    NO_TIMESTAMP_TYPE,
    V2_HEADER_SIZE,
    BadBatch,
    ControlMarker,
    Decompress,
    Record,
    RecordBatch,
    _Bad,
    _varint,
)
from coordinator_core.segments.framing import MAX_INFLATED_BYTES, _decompress


# ---------------------------------------------------------------------------------------------
# parsing
def iter_batches(
    data: bytes,
    *,
    decompress: Decompress | None = None,
    check_crc: bool = True,
    position: int = 0,
    crc32c_fn: Callable[[bytes], int] | None = None,
    max_inflated: int = MAX_INFLATED_BYTES,
) -> Iterator[RecordBatch | BadBatch]:
    """Every batch in ``data`` (a segment file's bytes), in order; ``position`` is added to
    reported positions (where ``data`` starts in its file). Never raises on bad bytes; a
    compressed batch that would inflate past ``max_inflated`` bytes is a bad batch."""
    data = bytes(data)
    crc_fn = crc32c_fn or crc32c
    n = len(data)
    pos = 0
    while pos < n:
        left = n - pos
        if left < LOG_OVERHEAD + 5:
            yield BadBatch(
                position + pos,
                left,
                f"truncated: {left} bytes left, less than a batch header",
                data[pos:],
                stopped=True,
            )
            return
        base_offset, length = struct.unpack_from(">qi", data, pos)
        magic = data[pos + 16]
        size = LOG_OVERHEAD + length
        plausible, why = _plausible_header(data, pos)
        if plausible and size > left:
            yield BadBatch(
                position + pos,
                left,
                f"truncated: batch of {size} bytes but only {left} left in the data",
                data[pos:],
                magic=magic,
                base_offset=base_offset,
                stopped=True,
            )
            return
        try:
            if not plausible:
                raise _Bad(why)
            if magic == 2:
                yield _read_v2(data, pos, size, decompress, check_crc, crc_fn, position, max_inflated)
            else:
                yield _read_legacy(data, pos, size, magic, decompress, check_crc, position, max_inflated)
        except _Bad as exc:
            # the length field is outside every CRC: go on only if it leads to the end of the
            # data or to something that looks like the next batch header
            nxt = pos + size
            trusted = (
                length >= min(_LEGACY_MIN_SIZE.values()) and nxt <= n and (nxt == n or _plausible_header(data, nxt)[0])
            )
            if not trusted:
                yield BadBatch(
                    position + pos,
                    left,
                    f"stopped: {exc}; the batch length {length} cannot be trusted "
                    f"(it leads to no batch header), the rest of the data is not read",
                    data[pos:],
                    magic=magic,
                    base_offset=base_offset,
                    stopped=True,
                )
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


def _read_v2(
    data: bytes,
    pos: int,
    size: int,
    decompress: Decompress | None,
    check_crc: bool,
    crc_fn: Callable[[bytes], int],
    position: int,
    max_inflated: int = MAX_INFLATED_BYTES,
) -> RecordBatch:
    (
        base_offset,
        _length,
        leader_epoch,
        magic,
        crc,
        attrs,
        last_delta,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_seq,
        count,
    ) = _V2.unpack_from(data, pos)
    end = pos + size
    if check_crc:
        actual = crc_fn(data[pos + 21 : end])
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
        body = _decompress(codec, data[body_start:end], decompress, 2, max_inflated)
        records = _read_records(body, 0, len(body), count, base_offset, base_ts, ts_type, max_ts, control)
    else:
        records = _read_records(data, body_start, end, count, base_offset, base_ts, ts_type, max_ts, control)
    return RecordBatch(
        position=position + pos,
        size=size,
        magic=magic,
        base_offset=base_offset,
        last_offset=base_offset + last_delta,
        codec=codec,
        timestamp_type=ts_type,
        records=records,
        crc=crc,
        partition_leader_epoch=leader_epoch,
        is_transactional=bool(attrs & _ATTR_TRANSACTIONAL),
        is_control=control,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        delete_horizon_ms=base_ts if attrs & _ATTR_DELETE_HORIZON else None,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_seq,
    )


def _read_records(
    buf: bytes, pos: int, end: int, count: int, base_offset: int, base_ts: int, ts_type: int, max_ts: int, control: bool
) -> tuple[Record, ...]:
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
                key: bytes | None = buf[pos : pos + klen]
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
                value: bytes | None = buf[pos : pos + vlen]
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
                        hkey = buf[pos : pos + hk].decode("utf-8")
                    except UnicodeDecodeError:
                        raise _Bad("header key is not UTF-8") from None
                    pos += hk
                    hv, pos = _varint(buf, pos, rec_end)
                    if hv >= 0:
                        if pos + hv > rec_end:
                            raise _Bad("header value overruns the record")
                        hval: bytes | None = buf[pos : pos + hv]
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
        append(
            Record(base_offset + off_delta, max_ts if log_append else base_ts + ts_delta, key, value, headers, marker)
        )
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


def _read_legacy(
    data: bytes,
    pos: int,
    size: int,
    magic: int,
    decompress: Decompress | None,
    check_crc: bool,
    position: int,
    max_inflated: int = MAX_INFLATED_BYTES,
) -> RecordBatch:
    offset, crc, codec, ts_type, ts, key, value = _legacy_message(data, pos, size, magic, check_crc)
    if codec == CODEC_NONE:
        rec = Record(offset, ts, key, value)
        return RecordBatch(
            position=position + pos,
            size=size,
            magic=magic,
            base_offset=offset,
            last_offset=offset,
            codec=codec,
            timestamp_type=ts_type,
            records=(rec,),
            crc=crc,
            base_timestamp=ts,
            max_timestamp=ts,
        )
    if codec > CODEC_LZ4:
        raise _Bad(f"compression codec {codec} is not valid for magic {magic}")
    if value is None:
        raise _Bad("compressed wrapper message with a null value")
    inner_bytes = _decompress(codec, value, decompress, magic, max_inflated)
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
    return RecordBatch(
        position=position + pos,
        size=size,
        magic=magic,
        base_offset=recs[0].offset,
        last_offset=recs[-1].offset,
        codec=codec,
        timestamp_type=ts_type,
        records=recs,
        crc=crc,
        base_timestamp=ts,
        max_timestamp=ts,
    )


def _legacy_message(
    buf: bytes, pos: int, size: int, magic: int, check_crc: bool
) -> tuple[int, int, int, int, int, bytes | None, bytes | None]:
    end = pos + size
    offset, _size, crc, _magic, attrs = _LEGACY.unpack_from(buf, pos)
    if check_crc:
        actual = zlib.crc32(buf[pos + 16 : end])
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
        fields.append(buf[p : p + ln])
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
