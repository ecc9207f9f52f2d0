"""CRC-32C (record batch v2) and xxHash32 (the LZ4 frame's checksums), pure Python."""

from __future__ import annotations

import struct


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
            crc = (
                t7[x & 0xFF]
                ^ t6[(x >> 8) & 0xFF]
                ^ t5[(x >> 16) & 0xFF]
                ^ t4[(x >> 24) & 0xFF]
                ^ t3[(x >> 32) & 0xFF]
                ^ t2[(x >> 40) & 0xFF]
                ^ t1[(x >> 48) & 0xFF]
                ^ t0[x >> 56]
            )
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
