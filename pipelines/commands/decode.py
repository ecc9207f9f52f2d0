"""``offsetlake decode``: decode ``__consumer_offsets`` records like Kafka's console formatters.

Rules:
- ``--key HEX [--value HEX]`` decodes one record and prints ONE JSON object, exactly what
  ``kafka-console-consumer --formatter ...OffsetsMessageFormatter`` (offset records) or
  ``...GroupMetadataMessageFormatter`` (group records) prints: compact JSON, camelCase
  fields, bytes as base64, ``"data":"unknown"`` for unknown versions, ``"value":null`` for a
  tombstone (no ``--value``).
- ``--input FILE`` decodes a file (JSON lines with hex/base64 ``key``/``value``, a Parquet file
  with binary ``key``/``value`` columns, or a directory of them) to JSON lines on stdout. A
  corrupt record becomes an ``{"error": ...}`` line and decoding goes on (``--strict`` stops
  at the first one with exit code 2).
- ``--format rich`` adds the record-type name, the coordinator partition, the parsed
  consumer-protocol subscription/assignment of each member and, with ``--input``, the log
  position.
- Kafka 4's modern group records (KIP-848 consumer groups, KIP-932 share groups, KIP-1071
  streams groups) are decoded to named fields and printed as Kafka 4's
  ``CoordinatorRecordMessageFormatter`` prints them (``decode_record(..., modern=True)``), as the
  batch/stream jobs decode them (into ``group_records``). A key whose record type is a
  modern one but whose bytes are not that type's key (e.g. a group key written with version
  10, as Kafka 3.x's formatter tests do) is shown as before (``"data":"unknown"``; ``rich`` adds
  ``modernKeyError``); a modern key with a corrupt value is a corrupt record.
- ``--input`` also reads broker log segments (``00000000000000000000.log``, a
  ``__consumer_offsets-N`` directory, or a directory of them; ``pipelines.inputs.segment_files``):
  data records print as above (``rich`` adds ``segment``: file, batch position, producer
  id/epoch, transactional flag); a control record prints as ``{"control": {...}}`` (COMMIT/ABORT
  with the producer id/epoch and coordinator epoch) and an unreadable batch (CRC mismatch, codec
  failure, truncated tail) as ``{"error": {"class": "BadBatch", ...}, "dataHex": ...}`` with its
  file, byte position and length; decoding goes on (``--strict``: exit 2 at the first).
- Bad input (bad hex, corrupt single record, unreadable file, a text or binary file that is
  none of these formats): exit code 2, one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from coordinator_core import CorruptRecordError
from pipelines.errors import UsageError

DESCRIPTION = """\
Decode __consumer_offsets records to the JSON Kafka's console formatters print.

examples:
  offsetlake decode --key 0001000867726f75702d69640003666f6f00000001 \\
                    --value 000300000000000000640000000a00086d6574616461746100000000000004d2
  offsetlake decode --key 0002000867726f75702d6964            # a group tombstone
  offsetlake decode --format rich --key ... --value ...       # + parsed subscriptions, partition
  offsetlake decode --input capture.parquet > decoded.jsonl   # or a .jsonl file, or a directory
  offsetlake decode --input __consumer_offsets-7/00000000000000000000.log   # a broker segment
  offsetlake decode --input dump.jsonl   # kcat -C -b B -t __consumer_offsets -J -e -q > dump.jsonl
"""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "decode",
        help="decode __consumer_offsets records (hex or a file) to Kafka's formatter JSON",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--key", metavar="HEX", help="the record key as hex (with its 2-byte version)")
    src.add_argument(
        "--input",
        metavar="FILE",
        help="JSON lines (key/value hex or base64, or kcat -J), Parquet (binary key/value), broker .log "
        "segments, or a directory of them",
    )
    p.add_argument("--value", metavar="HEX", help="the record value as hex; omit for a tombstone")
    p.add_argument(
        "--format",
        choices=["kafka", "rich"],
        default="kafka",
        help="kafka: exactly Kafka's console formatter JSON (default); rich: + record type, "
        "coordinator partition, parsed subscription/assignment",
    )
    p.add_argument(
        "--lenient",
        action="store_true",
        help="read value versions above 4 with the v4 layout (Kafka's newer loader) instead of 'unknown'",
    )
    p.add_argument(
        "--num-partitions",
        type=int,
        default=50,
        help="offsets.topic.num.partitions, for the coordinator partition (default: %(default)s)",
    )
    p.add_argument("--strict", action="store_true", help="with --input: stop at the first corrupt record")
    p.set_defaults(func=run)


def _parse_hex(text: str, what: str) -> bytes:
    cleaned = "".join(text.split())
    if cleaned[:2].lower() == "0x":
        cleaned = cleaned[2:]
    try:
        return bytes.fromhex(cleaned)
    except ValueError:
        raise UsageError(f"--{what} is not valid hex: {text[:40]!r}") from None


def _render(record: Any, fmt: str, num_partitions: int) -> dict[str, Any]:
    from coordinator_core import to_kafka_json, to_rich_json

    if fmt == "rich":
        return to_rich_json(record, num_partitions)
    return to_kafka_json(record)


def _decode(key: bytes, value: bytes | None, lenient: bool) -> tuple[Any, str | None]:
    """The record (modern types materialised) and, when its key is of a modern type but does
    not parse as one, the reason it is shown as an unknown record instead."""
    from coordinator_core import CorruptRecordError, decode_record

    try:
        return decode_record(key, value, lenient=lenient, modern=True), None
    except CorruptRecordError as exc:
        if exc.part != "key" or exc.record_type is None or exc.record_type < 3:
            raise
        return decode_record(key, value, lenient=lenient), str(exc)


def _render_decoded(decoded: tuple[Any, str | None], fmt: str, num_partitions: int) -> dict[str, Any]:
    record, key_error = decoded
    obj = _render(record, fmt, num_partitions)
    if fmt == "rich" and key_error is not None:
        obj["modernKeyError"] = key_error
    return obj


def _dump(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def run(args: argparse.Namespace) -> int:
    if args.num_partitions <= 0:
        raise UsageError(f"--num-partitions must be positive, got {args.num_partitions}")
    if args.input is None:
        key = _parse_hex(args.key, "key")
        value = None if args.value is None else _parse_hex(args.value, "value")
        try:
            decoded = _decode(key, value, args.lenient)
        except CorruptRecordError as exc:
            raise UsageError(str(exc)) from None
        print(_dump(_render_decoded(decoded, args.format, args.num_partitions)))
        return 0
    if args.value is not None:
        raise UsageError("--value goes with --key, not with --input")
    return _decode_file(args)


def _error_json(exc: Any, key: bytes, value: bytes | None) -> dict[str, Any]:
    return {
        "error": {
            "class": type(exc).__name__,
            "message": str(exc),
            "part": exc.part,
            "position": exc.position,
            "recordType": exc.record_type,
            "version": exc.version,
        },
        "keyHex": key.hex(),
        "valueHex": None if value is None else value.hex(),
    }


def _decode_file(args: argparse.Namespace) -> int:
    from pathlib import Path

    from pipelines.inputs.raw_files import input_files, read_raw_records
    from pipelines.inputs.segment_files import SegmentProblem, SegmentRecord, read_segment_file, segment_json

    out = sys.stdout
    total = corrupt = controls = problems = 0
    for file in input_files(Path(args.input)):
        # broker log segments: control records and unreadable batches get lines of their own
        items = read_segment_file(file) if file.suffix == ".log" else read_raw_records(file)
        for raw in items:
            seg_info = None
            if isinstance(raw, SegmentProblem | SegmentRecord):
                shown = segment_json(raw)
                if shown is not None:
                    if isinstance(raw, SegmentProblem):
                        problems += 1
                        if args.strict:
                            raise UsageError(f"{raw.source_file}: byte {raw.position}: {raw.reason}")
                    else:
                        controls += 1
                    out.write(_dump(shown) + "\n")
                    continue
                assert isinstance(raw, SegmentRecord)
                seg_info = segment_json(raw, data=True)
            total += 1
            try:
                decoded = _decode(raw.key, raw.value, args.lenient)
            except CorruptRecordError as exc:
                corrupt += 1
                if args.strict:
                    raise UsageError(
                        f"record {total} (partition {raw.partition}, offset {raw.offset}): {exc}"
                    ) from None
                obj = _error_json(exc, raw.key, raw.value)
            else:
                obj = _render_decoded(decoded, args.format, args.num_partitions)
            if args.format == "rich" or "error" in obj:
                obj["position"] = {"partition": raw.partition, "offset": raw.offset, "timestamp": raw.timestamp_ms}
                if seg_info is not None:
                    obj["segment"] = seg_info
            out.write(_dump(obj) + "\n")
    extra = f", {controls} control records, {problems} unreadable batches" if controls or problems else ""
    print(f"decoded {total} records ({corrupt} corrupt{extra})", file=sys.stderr)
    return 0


__all__ = ["register", "run"]
