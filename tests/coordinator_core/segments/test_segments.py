"""Broker log segments: record batches v2 and v0/v1 message sets, every codec, CRCs, bad bytes.

Segments are written by the module's own encoder (every codec and batch shape), plus real
broker bytes published in kafka-python's test suite (see ``REAL_*`` below).
"""

from __future__ import annotations

import random
import struct
import zlib

import cramjam
import pytest

from coordinator_core import segments as S


def _compress(codec: int, data: bytes) -> bytes:
    if codec == S.CODEC_SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == S.CODEC_LZ4:
        return bytes(cramjam.lz4.compress_block(data, store_size=False))
    return bytes(cramjam.zstd.compress(data))


def _decompress(codec: int, data: bytes, max_size: int) -> bytes:
    if codec == S.CODEC_SNAPPY:
        return bytes(cramjam.snappy.decompress_raw(data))
    if codec == S.CODEC_LZ4:
        out = bytearray(max_size)
        return bytes(out[: cramjam.lz4.decompress_block_into(data, out)])
    return bytes(cramjam.zstd.decompress(data))


def _read(data: bytes) -> list[S.RecordBatch | S.BadBatch]:
    return list(S.iter_batches(data, decompress=_decompress))


def _records(batches: list[S.RecordBatch | S.BadBatch]) -> list[S.Record]:
    return [r for b in batches if isinstance(b, S.RecordBatch) for r in b.records]


def _recs(n: int, base: int = 100, ts: int = 1_700_000_000_000, big: bool = False) -> list[S.Record]:
    # keys/values shaped like __consumer_offsets records; 'big' makes several 64 KB LZ4 / 32 KB snappy blocks
    return [
        S.Record(
            base + i,
            ts + 7 * i,
            b"\x00\x01\x00\x05group\x00\x05topic" + struct.pack(">i", i),
            None if i % 5 == 3 else b"\x00\x03" + bytes([i % 251]) * (3000 if big else 20 + i),
        )
        for i in range(n)
    ]


def _fix_v2_crc(batch: bytearray) -> bytearray:
    batch[17:21] = struct.pack(">I", S.crc32c(bytes(batch[21:])))
    return batch


# ---------------------------------------------------------------------------------------------
# checksums


def test_crc32c_is_castagnolis_check_value_and_continues_across_chunks() -> None:
    assert S.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value (RFC 3720 B.4 catalogue)
    data = bytes(range(256)) * 5 + b"tail"
    assert S.crc32c(data[700:], S.crc32c(data[:700])) == S.crc32c(data) == S.crc32c(bytearray(data))


def test_xxh32_matches_the_reference_vectors() -> None:
    assert S.xxh32(b"") == 0x02CC5D05
    assert S.xxh32(b"abc") == 0x32D153FF
    assert S.xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


# ---------------------------------------------------------------------------------------------
# real bytes: kafka-python test/record/test_records.py (dpkp/kafka-python, commit 3c6531c4),
# "real live data from Kafka 11 broker" (v2, v1) and "from Kafka 10 broker" (v0); the expected
# timestamps and CRCs are the ones that test asserts.
REAL_V2 = (
    b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00;\x00\x00\x00\x01\x02\x03"
    b"\x18\xa2p\x00\x00\x00\x00\x00\x00\x00\x00\x01]\xff{\x06<\x00\x00\x01]"
    b"\xff{\x06<\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x00"
    b"\x00\x00\x01\x12\x00\x00\x00\x01\x06123\x00"
    b"\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00@\x00\x00\x00\x02\x02\xc8"
    b"\\\xbd#\x00\x00\x00\x00\x00\x01\x00\x00\x01]\xff|\xddl\x00\x00\x01]\xff"
    b"|\xde\x14\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x00"
    b"\x00\x00\x02\x0c\x00\x00\x00\x01\x00\x00\x0e\x00\xd0\x02\x02\x01\x00"
    b"\x00"
    b"\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00;\x00\x00\x00\x02\x02.\x0b"
    b"\x85\xb7\x00\x00\x00\x00\x00\x00\x00\x00\x01]\xff|\xe7\x9d\x00\x00\x01]"
    b"\xff|\xe7\x9d\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"
    b"\x00\x00\x00\x01\x12\x00\x00\x00\x01\x06123\x00"
    b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00E\x00\x00\x00\x00\x02\\"
    b"\xd8\xefR\x00\x00\x00\x00\x00\x00\x00\x00\x01e\x85\xb6\xf3\xc1\x00\x00"
    b"\x01e\x85\xb6\xf3\xc1\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"
    b"\xff\xff\x00\x00\x00\x01&\x00\x00\x00\x01\x06hdr\x02\x08hkey\x08hval"
)
REAL_V1 = (
    b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x19G\x86(\xc2\x01\x00\x00"
    b"\x00\x01^\x18g\xab\xae\xff\xff\xff\xff\x00\x00\x00\x03123"
    b"\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x16\xef\x98\xc9 \x01\x00"
    b"\x00\x00\x01^\x18g\xaf\xc0\xff\xff\xff\xff\x00\x00\x00\x00"
)
REAL_V0 = (
    b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x11\xfe\xb0\x1d\xbf\x00"
    b"\x00\xff\xff\xff\xff\x00\x00\x00\x03123"
    b"\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x0eyWH\xe0\x00\x00\xff"
    b"\xff\xff\xff\x00\x00\x00\x00"
)


def test_real_broker_v2_batches_are_read_with_their_timestamps_headers_and_crcs() -> None:
    batches = _read(REAL_V2 + b"\x00" * 4)  # kafka-python's test appends 4 stray bytes too
    good = [b for b in batches if isinstance(b, S.RecordBatch)]
    assert [(b.base_offset, b.last_offset, len(b.records)) for b in good] == [
        (0, 0, 1),
        (1, 2, 2),
        (3, 3, 1),
        (0, 0, 1),
    ]
    first = good[0].records[0]
    assert (first.offset, first.timestamp_ms, first.key, first.value, first.headers) == (
        0,
        1503229838908,
        None,
        b"123",
        (),
    )
    assert [r.value for r in good[1].records] == [b"", b""]
    assert good[3].records[0].headers == (("hkey", b"hval"),) and good[3].records[0].value == b"hdr"
    assert all(b.magic == 2 and b.producer_id == -1 and not b.is_transactional for b in good)
    tail = batches[-1]
    assert isinstance(tail, S.BadBatch) and tail.stopped and tail.position == len(REAL_V2) and tail.length == 4


def test_real_broker_v1_and_v0_messages_are_read_with_crc32_checked() -> None:
    v1 = _read(REAL_V1)
    assert [(b.crc, b.records) for b in v1 if isinstance(b, S.RecordBatch)] == [
        (1199974594, (S.Record(0, 1503648000942, None, b"123"),)),
        (4019767584, (S.Record(1, 1503648001984, None, b""),)),
    ]
    v0 = _read(REAL_V0)
    assert [b.records[0] for b in v0 if isinstance(b, S.RecordBatch)] == [
        S.Record(0, S.NO_TIMESTAMP, None, b"123"),
        S.Record(1, S.NO_TIMESTAMP, None, b""),
    ]
    assert v0[0].crc == -22012481 & 0xFFFFFFFF and v0[0].timestamp_type == S.NO_TIMESTAMP_TYPE  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------------
# golden round trips: every codec, every batch shape
CODECS = [S.CODEC_NONE, S.CODEC_GZIP, S.CODEC_SNAPPY, S.CODEC_LZ4, S.CODEC_ZSTD]


@pytest.mark.parametrize("codec", CODECS, ids=S.CODEC_NAMES)
@pytest.mark.parametrize("shape", ["single", "multi", "big"])
def test_v2_batches_of_every_codec_read_back_exactly(codec: int, shape: int) -> None:
    recs = {"single": _recs(1), "multi": _recs(12), "big": _recs(60, big=True)}[shape]
    recs[0] = recs[0]._replace(headers=(("trace", b"\x00\xff"), ("empty", None)))
    data = S.encode_batch_v2(recs, codec=codec, compress=_compress, partition_leader_epoch=4)
    (batch,) = _read(data)
    assert isinstance(batch, S.RecordBatch), batch
    assert batch.records == tuple(recs)
    assert (batch.codec, batch.magic, batch.partition_leader_epoch, batch.base_offset, batch.last_offset) == (
        codec,
        2,
        4,
        recs[0].offset,
        recs[-1].offset,
    )
    assert batch.size == len(data) and batch.max_timestamp == recs[-1].timestamp_ms


def test_codec_framing_is_kafkas_xerial_snappy_and_lz4_frame() -> None:
    payload = bytes(range(256)) * 400  # 100 KB: several xerial (32 KB) and LZ4 (64 KB) blocks
    snappy = S.frame(S.CODEC_SNAPPY, payload, _compress)
    assert snappy[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    lz4 = S.frame(S.CODEC_LZ4, payload, _compress)
    # magic, FLG (version 1, independent blocks), BD (64 KB), header checksum over FLG+BD
    assert lz4[:6] == b"\x04\x22\x4d\x18\x60\x40" and lz4[6] == (S.xxh32(lz4[4:6]) >> 8) & 0xFF
    assert lz4.endswith(b"\x00\x00\x00\x00")
    assert bytes(cramjam.lz4.decompress(lz4)) == payload  # a standard LZ4 frame reader agrees
    gz = S.frame(S.CODEC_GZIP, payload, None)
    assert zlib.decompress(gz, 16 + zlib.MAX_WBITS) == payload


def test_a_raw_snappy_payload_without_xerial_framing_is_read_too() -> None:
    recs = _recs(3)
    batch = bytearray(S.encode_batch_v2(recs))
    body = bytes(batch[61:])
    raw = bytearray(batch[:61]) + bytes(cramjam.snappy.compress_raw(body))
    raw[8:12] = struct.pack(">i", len(raw) - 12)
    raw[21:23] = struct.pack(">h", S.CODEC_SNAPPY)
    (got,) = _read(bytes(_fix_v2_crc(raw)))
    assert isinstance(got, S.RecordBatch) and got.records == tuple(recs)


@pytest.mark.parametrize("codec", CODECS[:4], ids=S.CODEC_NAMES[:4])
@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_message_sets_and_compressed_wrappers_read_back_with_absolute_offsets(codec: int, magic: int) -> None:
    recs = [r._replace(timestamp_ms=r.timestamp_ms if magic else S.NO_TIMESTAMP) for r in _recs(7, base=500)]
    data = S.encode_legacy(recs, magic=magic, codec=codec, compress=_compress)
    batches = _read(data)
    assert all(isinstance(b, S.RecordBatch) for b in batches)
    assert _records(batches) == recs
    assert len(batches) == (7 if codec == S.CODEC_NONE else 1)
    if codec:
        wrapper = batches[0]
        assert isinstance(wrapper, S.RecordBatch)
        assert (wrapper.base_offset, wrapper.last_offset, wrapper.codec) == (500, 506, codec)


def test_v1_wrapper_with_log_append_time_gives_its_timestamp_to_every_inner_message() -> None:
    recs = _recs(3)
    data = S.encode_legacy(
        recs, magic=1, codec=S.CODEC_GZIP, timestamp_type=S.LOG_APPEND_TIME, wrapper_timestamp=1_800_000_000_000
    )
    (b,) = _read(data)
    assert isinstance(b, S.RecordBatch) and b.timestamp_type == S.LOG_APPEND_TIME
    assert [r.timestamp_ms for r in b.records] == [1_800_000_000_000] * 3


def test_lz4_magic_0_frames_carry_kafkas_broken_header_checksum_and_still_read() -> None:
    recs = [r._replace(timestamp_ms=S.NO_TIMESTAMP) for r in _recs(4)]
    data = S.encode_legacy(recs, magic=0, codec=S.CODEC_LZ4, compress=_compress)
    at = data.index(b"\x04\x22\x4d\x18")
    # KAFKA-3160: magic 0 hashed the magic number too (KafkaLZ4BlockOutputStream useBrokenFlagDescriptorChecksum)
    assert data[at + 6] == (S.xxh32(data[at : at + 6]) >> 8) & 0xFF != (S.xxh32(data[at + 4 : at + 6]) >> 8) & 0xFF
    assert _records(_read(data)) == recs
    # the same frame in a magic 1 wrapper is refused: only magic 0 may carry the broken checksum
    v1 = bytearray(
        S.encode_legacy([r._replace(timestamp_ms=1) for r in recs], magic=1, codec=S.CODEC_LZ4, compress=_compress)
    )
    at1 = bytes(v1).index(b"\x04\x22\x4d\x18")
    v1[at1 + 6] = (S.xxh32(bytes(v1[at1 : at1 + 6])) >> 8) & 0xFF
    v1[12:16] = struct.pack(">I", zlib.crc32(bytes(v1[16:])))
    (bad,) = _read(bytes(v1))
    assert isinstance(bad, S.BadBatch) and "frame descriptor checksum" in bad.reason and not bad.stopped


def test_transactional_batches_and_commit_abort_markers_are_surfaced_with_producer_ids() -> None:
    data = (
        S.encode_batch_v2(_recs(2, base=10), transactional=True, producer_id=4242, producer_epoch=3, base_sequence=0)
        + S.encode_control_batch(
            S.CONTROL_COMMIT,
            offset=12,
            timestamp_ms=1_700_000_000_100,
            producer_id=4242,
            producer_epoch=3,
            coordinator_epoch=9,
        )
        + S.encode_batch_v2(
            _recs(1, base=13),
            transactional=True,
            producer_id=77,
            producer_epoch=0,
            codec=S.CODEC_ZSTD,
            compress=_compress,
        )
        + S.encode_control_batch(
            S.CONTROL_ABORT,
            offset=14,
            timestamp_ms=1_700_000_000_200,
            producer_id=77,
            producer_epoch=0,
            coordinator_epoch=9,
        )
    )
    txn, commit, txn2, abort = _read(data)
    assert isinstance(txn, S.RecordBatch) and isinstance(commit, S.RecordBatch)
    assert isinstance(txn2, S.RecordBatch) and isinstance(abort, S.RecordBatch)
    assert (txn.is_transactional, txn.is_control, txn.producer_id, txn.producer_epoch) == (True, False, 4242, 3)
    assert all(r.control is None for r in txn.records)
    assert (commit.is_transactional, commit.is_control, commit.producer_id, commit.base_sequence) == (
        True,
        True,
        4242,
        -1,
    )
    (marker,) = commit.records
    assert marker.offset == 12 and marker.key == b"\x00\x00\x00\x01" and marker.value == b"\x00\x00\x00\x00\x00\x09"
    assert marker.control == S.ControlMarker(S.CONTROL_COMMIT, 0, 0, 9) and marker.control.name == "COMMIT"
    assert abort.records[0].control == S.ControlMarker(S.CONTROL_ABORT, 0, 0, 9) and abort.producer_id == 77


def test_control_records_of_kraft_types_and_newer_key_versions_are_named_not_failed() -> None:
    rec = S.Record(0, 5, struct.pack(">hh", 1, 2), b"\x00\x00leader")
    (b,) = _read(S.encode_batch_v2([rec], control=True))
    assert isinstance(b, S.RecordBatch) and b.records[0].control == S.ControlMarker(2, 1)
    assert b.records[0].control.name == "LEADER_CHANGE"


def test_log_append_time_and_delete_horizon_batches_keep_kafkas_timestamps() -> None:
    recs = _recs(3)
    (lat,) = _read(S.encode_batch_v2(recs, timestamp_type=S.LOG_APPEND_TIME, log_append_time=1_900_000_000_000))
    assert isinstance(lat, S.RecordBatch) and [r.timestamp_ms for r in lat.records] == [1_900_000_000_000] * 3
    (dh,) = _read(S.encode_batch_v2(recs, delete_horizon_ms=1_700_000_500_000))
    assert isinstance(dh, S.RecordBatch) and dh.delete_horizon_ms == 1_700_000_500_000
    assert dh.records == tuple(recs)  # KIP-534: timestamps stay base + delta


def test_an_empty_batch_left_by_compaction_reads_as_no_records() -> None:
    (b,) = _read(S.encode_batch_v2([], base_offset=40, last_offset=44, producer_id=9, producer_epoch=1))
    assert isinstance(b, S.RecordBatch) and b.records == () and (b.base_offset, b.last_offset) == (40, 44)


# ---------------------------------------------------------------------------------------------
# bad bytes: quarantined, never fatal


def _segment() -> tuple[bytes, list[int]]:
    parts = [
        S.encode_batch_v2(_recs(3, base=0)),
        S.encode_batch_v2(_recs(4, base=3), codec=S.CODEC_GZIP),
        S.encode_legacy(_recs(2, base=7), magic=1, codec=S.CODEC_SNAPPY, compress=_compress),
        S.encode_batch_v2(_recs(2, base=9), codec=S.CODEC_LZ4, compress=_compress),
    ]
    starts = [sum(len(p) for p in parts[:i]) for i in range(len(parts))]
    return b"".join(parts), starts


def test_a_flipped_byte_makes_only_its_batch_bad_and_the_rest_is_read() -> None:
    data, starts = _segment()
    broken = bytearray(data)
    broken[starts[1] + 70] ^= 0x20
    out = _read(bytes(broken))
    assert [type(b).__name__ for b in out] == ["RecordBatch", "BadBatch", "RecordBatch", "RecordBatch"]
    bad = out[1]
    assert isinstance(bad, S.BadBatch) and "CRC-32C mismatch" in bad.reason and not bad.stopped
    assert (bad.position, bad.length, bad.base_offset) == (starts[1], starts[2] - starts[1], 3)
    assert bad.data == bytes(broken[starts[1] : starts[2]])
    assert [r.offset for r in _records(out)] == [0, 1, 2, 7, 8, 9, 10]


def test_a_flipped_byte_in_a_legacy_message_is_a_crc32_mismatch() -> None:
    data, starts = _segment()
    broken = bytearray(data)
    broken[starts[2] + 40] ^= 0x01
    bad = _read(bytes(broken))[2]
    assert isinstance(bad, S.BadBatch) and "CRC-32 mismatch" in bad.reason


def test_a_truncated_tail_is_one_bad_batch_that_ends_the_segment() -> None:
    data, starts = _segment()
    out = _read(data[:-9])
    bad = out[-1]
    assert isinstance(bad, S.BadBatch) and bad.stopped and bad.reason.startswith("truncated")
    assert (bad.position, bad.length) == (starts[3], len(data) - 9 - starts[3])


def test_a_corrupt_length_that_leads_nowhere_stops_with_the_reason() -> None:
    data, starts = _segment()
    broken = bytearray(data)
    broken[starts[1] + 8 : starts[1] + 12] = struct.pack(">i", 77)  # not the batch's real length
    out = _read(bytes(broken))
    assert isinstance(out[0], S.RecordBatch) and len(out) == 2
    bad = out[1]
    assert isinstance(bad, S.BadBatch) and bad.stopped and "cannot be trusted" in bad.reason
    assert bad.position == starts[1] and bad.data == bytes(broken[starts[1] :])


def test_an_unknown_magic_with_a_trustworthy_length_skips_only_that_batch() -> None:
    data, starts = _segment()
    broken = bytearray(data)
    broken[starts[1] + 16] = 7
    out = _read(bytes(broken))
    assert [type(b).__name__ for b in out] == ["RecordBatch", "BadBatch", "RecordBatch", "RecordBatch"]
    assert "unknown magic 7" in out[1].reason  # type: ignore[union-attr]


def test_a_wrong_record_count_under_a_valid_crc_is_a_bad_batch() -> None:
    more = bytearray(S.encode_batch_v2(_recs(3)))
    more[57:61] = struct.pack(">i", 4)
    (bad,) = _read(bytes(_fix_v2_crc(more)))
    assert isinstance(bad, S.BadBatch) and "record 3 of 4" in bad.reason
    fewer = bytearray(S.encode_batch_v2(_recs(3)))
    fewer[57:61] = struct.pack(">i", 2)
    (bad2,) = _read(bytes(_fix_v2_crc(fewer)))
    assert isinstance(bad2, S.BadBatch) and "left after the 2 declared records" in bad2.reason


def test_a_control_batch_with_a_malformed_marker_is_a_bad_batch() -> None:
    (bad,) = _read(S.encode_batch_v2([S.Record(0, 1, b"\x00\x00", b"")], control=True))
    assert isinstance(bad, S.BadBatch) and "control record key" in bad.reason


def test_a_compressed_batch_without_its_decompressor_is_a_bad_batch_not_an_error() -> None:
    data = S.encode_batch_v2(_recs(2), codec=S.CODEC_ZSTD, compress=_compress) + S.encode_batch_v2(_recs(1, base=5))
    out = list(S.iter_batches(data))
    assert isinstance(out[0], S.BadBatch) and "no decompressor" in out[0].reason
    assert isinstance(out[1], S.RecordBatch)


def test_garbage_codec_payloads_are_bad_batches() -> None:
    for codec in CODECS[1:]:
        batch = bytearray(S.encode_batch_v2(_recs(2), codec=codec, compress=_compress))
        batch[64:72] = b"\xde\xad\xbe\xef\xde\xad\xbe\xef"
        (bad,) = _read(bytes(_fix_v2_crc(batch)))
        assert isinstance(bad, S.BadBatch), codec


def test_random_damage_never_raises_and_every_byte_is_accounted_for() -> None:
    data, _ = _segment()
    rng = random.Random(18)
    for _ in range(400):
        broken = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(broken))
            if rng.random() < 0.8:
                broken[i] = rng.randrange(256)
            else:
                del broken[i : i + rng.randint(1, 30)]
        out = _read(bytes(broken))
        # batches and bad batches tile the data: no byte read twice, none dropped
        pos = 0
        for b in out:
            assert b.position == pos
            pos += b.size if isinstance(b, S.RecordBatch) else b.length
        assert pos == len(broken)
