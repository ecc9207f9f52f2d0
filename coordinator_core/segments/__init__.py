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

from coordinator_core.segments.checksums import crc32c, xxh32
from coordinator_core.segments.format import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_NAMES,
    CODEC_NONE,
    CODEC_SNAPPY,
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
    Compress,
    ControlMarker,
    Decompress,
    Record,
    RecordBatch,
)
from coordinator_core.segments.framing import MAX_INFLATED_BYTES, frame
from coordinator_core.segments.reader import iter_batches, iter_records
from coordinator_core.segments.writer import control_record, encode_batch_v2, encode_control_batch, encode_legacy

__all__ = [
    "CODEC_GZIP",
    "CODEC_LZ4",
    "CODEC_NAMES",
    "CODEC_NONE",
    "CODEC_SNAPPY",
    "CODEC_ZSTD",
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
    "CONTROL_TYPE_NAMES",
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "LOG_OVERHEAD",
    "MAX_INFLATED_BYTES",
    "NO_TIMESTAMP",
    "NO_TIMESTAMP_TYPE",
    "V2_HEADER_SIZE",
    "BadBatch",
    "Compress",
    "ControlMarker",
    "Decompress",
    "Record",
    "RecordBatch",
    "control_record",
    "crc32c",
    "encode_batch_v2",
    "encode_control_batch",
    "encode_legacy",
    "frame",
    "iter_batches",
    "iter_records",
    "xxh32",
]
