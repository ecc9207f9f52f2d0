"""Codec framing (gzip, snappy-java's xerial stream, Kafka's LZ4 frame, zstd); the codec primitives come
through the caller's callbacks (see ``coordinator_core.segments``)."""

from __future__ import annotations

import struct
import zlib

from coordinator_core.segments.checksums import xxh32
from coordinator_core.segments.format import (
    _I32,
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_NAMES,
    CODEC_SNAPPY,
    CODEC_ZSTD,
    Compress,
    Decompress,
    _Bad,
)

# ---------------------------------------------------------------------------------------------
# codecs: framing here, primitives through the callback
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_BLOCK = 32 * 1024  # snappy-java SnappyOutputStream's default block size
_LZ4_MAGIC = 0x184D2204
_LZ4_BLOCK_MAX = {4: 1 << 16, 5: 1 << 18, 6: 1 << 20, 7: 1 << 22}

#: The most bytes one batch (or legacy wrapper) may inflate to. Kafka refuses a produce batch
#: over ``max.message.bytes`` (1 MiB by default; the coordinator's own appends are bounded by
#: ``offsets.load.buffer.size``, 5 MiB, when it loads them back), and those limits apply to the
#: compressed size: 64 MiB leaves 64x the default for a generously configured broker and a
#: highly compressible batch, while a compression bomb (gzip reaches ~1000:1, zstd and LZ4
#: more) stops at a bounded allocation and is quarantined as a bad batch with its reason.
MAX_INFLATED_BYTES = 64 << 20


def _too_big(codec: str, limit: int) -> _Bad:
    return _Bad(f"{codec}: inflates past {limit} bytes, the bound of one batch (a compression bomb?)")


def _gunzip(data: bytes, limit: int = MAX_INFLATED_BYTES) -> bytes:
    out = []
    total = 0
    while data:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        buf = data
        try:
            while True:
                chunk = d.decompress(buf, limit - total + 1)
                total += len(chunk)
                if total > limit:
                    raise _too_big("gzip", limit)
                out.append(chunk)
                buf = d.unconsumed_tail
                if d.eof or not buf:
                    break
        except zlib.error as exc:
            raise _Bad(f"gzip: {exc}") from None
        if not d.eof:
            raise _Bad("gzip: truncated stream")
        data = d.unused_data
    return b"".join(out)


def _snappy_length(data: bytes) -> int:
    """The uncompressed length a raw snappy block declares (its varint preamble)."""
    n = shift = 0
    for i, b in enumerate(data[:5]):
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return n
        shift += 7
        if i == 4:
            break
    raise _Bad("snappy: bad length preamble")


def _call(decompress: Decompress | None, codec: int, data: bytes, max_size: int) -> bytes:
    """One primitive; ``max_size`` bounds its output (the callback must not inflate past it)."""
    if decompress is None:
        raise _Bad(f"{CODEC_NAMES[codec]}: no decompressor for this codec was given")
    try:
        out = bytes(decompress(codec, data, max_size))
    except _Bad:
        raise
    except Exception as exc:  # a codec library's error, whatever its class
        raise _Bad(f"{CODEC_NAMES[codec]}: {type(exc).__name__}: {exc}") from None
    if len(out) > max_size:
        raise _too_big(CODEC_NAMES[codec], max_size)
    return out


def _unsnappy_block(data: bytes, decompress: Decompress | None, limit: int) -> bytes:
    if _snappy_length(data) > limit:  # checked before the codec allocates what it declares
        raise _too_big("snappy", limit)
    return _call(decompress, CODEC_SNAPPY, data, limit)


def _unsnappy(data: bytes, decompress: Decompress | None, limit: int = MAX_INFLATED_BYTES) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return _unsnappy_block(data, decompress, limit)
    if len(data) < _XERIAL_HEADER.size:
        raise _Bad("snappy: truncated xerial header")
    pos = _XERIAL_HEADER.size
    out = []
    total = 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise _Bad("snappy: truncated xerial block length")
        (n,) = _I32.unpack_from(data, pos)
        pos += 4
        if n < 0 or pos + n > len(data):
            raise _Bad(f"snappy: xerial block of {n} bytes overruns the data")
        block = _unsnappy_block(data[pos : pos + n], decompress, limit - total)
        total += len(block)
        out.append(block)
        pos += n
    return b"".join(out)


def _unlz4(data: bytes, decompress: Decompress | None, magic: int, limit: int = MAX_INFLATED_BYTES) -> bytes:
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
    total = 0
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
        block = data[pos : pos + n]
        pos += n
        if flg & 0x10:
            if pos + 4 > len(data):
                raise _Bad("lz4: truncated block checksum")
            if struct.unpack_from("<I", data, pos)[0] != xxh32(block):
                raise _Bad("lz4: block checksum mismatch")
            pos += 4
        plain = block if raw else _call(decompress, CODEC_LZ4, block, block_max)
        total += len(plain)
        if total > limit:
            raise _too_big("lz4", limit)
        out.append(plain)
    return b"".join(out)


def _decompress(
    codec: int, data: bytes, decompress: Decompress | None, magic: int, limit: int = MAX_INFLATED_BYTES
) -> bytes:
    """A batch's (or wrapper's) payload inflated, never past ``limit`` bytes."""
    if codec == CODEC_GZIP:
        return _gunzip(data, limit)
    if codec == CODEC_SNAPPY:
        return _unsnappy(data, decompress, limit)
    if codec == CODEC_LZ4:
        return _unlz4(data, decompress, magic, limit)
    if codec == CODEC_ZSTD:
        return _call(decompress, CODEC_ZSTD, data, limit)
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
            block = bytes(compress(CODEC_SNAPPY, data[i : i + _XERIAL_BLOCK]))
            out += _I32.pack(len(block)) + block
        return bytes(out)
    if codec == CODEC_LZ4:
        header = struct.pack("<IBB", _LZ4_MAGIC, 0x60, 0x40)  # v1, independent blocks; 64 KB
        hashed = header if magic == 0 else header[4:]
        out = bytearray(header)
        out.append((xxh32(hashed) >> 8) & 0xFF)
        for i in range(0, len(data), 1 << 16):
            chunk = data[i : i + (1 << 16)]
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
