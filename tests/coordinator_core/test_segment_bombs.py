"""A batch cannot inflate past a bound (issue 37, item 5): gzip, snappy (raw and xerial), LZ4
frames and zstd bombs are bad batches with their reason, the batches around them still read,
and a batch that inflates to just the bound is read whole."""

from __future__ import annotations

import struct
import zlib

import cramjam
import pytest

from coordinator_core import segments as S

LIMIT = 1 << 20


def _decompress(codec: int, data: bytes, max_size: int) -> bytes:
    if codec == S.CODEC_SNAPPY:
        return bytes(cramjam.snappy.decompress_raw(data))
    if codec == S.CODEC_LZ4:
        out = bytearray(max_size)
        return bytes(out[: cramjam.lz4.decompress_block_into(data, out)])
    return bytes(cramjam.zstd.decompress(data))


def with_payload(codec: int, payload: bytes, offset: int = 0) -> bytes:
    """A v2 batch of one record whose compressed payload is ``payload`` (CRC fixed)."""
    rec = [S.Record(offset, 1_700_000_000_000, b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x00", b"v")]
    good = bytearray(S.encode_batch_v2(rec, codec=codec, compress=lambda c, d: bytes(cramjam.zstd.compress(d))))
    batch = bytearray(good[: S.V2_HEADER_SIZE]) + payload
    batch[8:12] = struct.pack(">i", len(batch) - S.LOG_OVERHEAD)
    batch[17:21] = struct.pack(">I", S.crc32c(bytes(batch[21:])))
    return bytes(batch)


def _plain(offset: int) -> bytes:
    return S.encode_batch_v2([S.Record(offset, 1_700_000_000_000, b"\x00\x01k", b"v")])


def _gzip(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


def _lz4_frame(blocks: list[bytes]) -> bytes:
    """Kafka's LZ4 frame (independent blocks, 4 MiB block size code 7, no checksums)."""
    flg, bd = 0x60, 7 << 4
    hc = (S.xxh32(bytes([flg, bd])) >> 8) & 0xFF
    out = struct.pack("<I", 0x184D2204) + bytes([flg, bd, hc])
    for b in blocks:
        c = bytes(cramjam.lz4.compress_block(b, store_size=False))
        out += struct.pack("<I", len(c)) + c
    return out + struct.pack("<I", 0)


def _snappy_raw(n: int) -> bytes:
    return bytes(cramjam.snappy.compress_raw(b"\0" * n))


def _xerial(blocks: list[bytes]) -> bytes:
    out = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for b in blocks:
        out += struct.pack(">i", len(b)) + b
    return out


def _snappy_claiming(n: int) -> bytes:
    """A raw snappy block whose preamble claims ``n`` bytes (the codec would allocate them)."""
    pre = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        pre.append(b | (0x80 if n else 0))
        if not n:
            return bytes(pre) + b"\x00"


BOMBS = {
    "gzip one member": (S.CODEC_GZIP, lambda: _gzip(b"\0" * (4 * LIMIT))),
    "gzip many members": (S.CODEC_GZIP, lambda: _gzip(b"\0" * (LIMIT // 2)) * 8),
    "snappy raw": (S.CODEC_SNAPPY, lambda: _snappy_raw(2 * LIMIT)),
    "snappy raw preamble lie": (S.CODEC_SNAPPY, lambda: _snappy_claiming(1 << 31)),
    "snappy xerial blocks": (S.CODEC_SNAPPY, lambda: _xerial([_snappy_raw(32 << 10)] * 64)),
    "lz4 many blocks": (S.CODEC_LZ4, lambda: _lz4_frame([b"\0" * (1 << 20)] * 4)),
    "zstd": (S.CODEC_ZSTD, lambda: bytes(cramjam.zstd.compress(b"\0" * (4 * LIMIT)))),
}


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_a_compression_bomb_is_a_bad_batch_with_its_reason_and_the_next_batch_is_read(name: str) -> None:
    codec, make = BOMBS[name]
    data = _plain(0) + with_payload(codec, make(), offset=1) + _plain(2)
    items = list(S.iter_batches(data, decompress=_decompress, max_inflated=LIMIT))
    assert [type(i).__name__ for i in items] == ["RecordBatch", "BadBatch", "RecordBatch"], items
    bad = items[1]
    assert isinstance(bad, S.BadBatch) and "inflates past" in bad.reason and not bad.stopped
    assert bad.data == data[len(_plain(0)) : len(data) - len(_plain(2))]  # its raw bytes, whole


@pytest.mark.parametrize("codec", [S.CODEC_GZIP, S.CODEC_SNAPPY, S.CODEC_LZ4, S.CODEC_ZSTD])
def test_a_batch_that_inflates_to_the_bound_is_read(codec: int) -> None:
    recs = [S.Record(i, 1_700_000_000_000, b"\x00\x01k", b"\0" * 4000) for i in range(200)]

    def comp(c: int, d: bytes) -> bytes:
        if c == S.CODEC_SNAPPY:
            return bytes(cramjam.snappy.compress_raw(d))
        if c == S.CODEC_LZ4:
            return bytes(cramjam.lz4.compress_block(d, store_size=False))
        return bytes(cramjam.zstd.compress(d))

    data = S.encode_batch_v2(recs, codec=codec, compress=comp)
    inflated = len(S.encode_batch_v2(recs)) - S.V2_HEADER_SIZE
    (ok,) = S.iter_batches(data, decompress=_decompress, max_inflated=inflated)
    assert isinstance(ok, S.RecordBatch) and len(ok.records) == 200
    (bad,) = S.iter_batches(data, decompress=_decompress, max_inflated=inflated - 1)
    assert isinstance(bad, S.BadBatch) and "inflates past" in bad.reason


def test_the_default_bound_is_64_mib() -> None:
    assert S.MAX_INFLATED_BYTES == 64 << 20
