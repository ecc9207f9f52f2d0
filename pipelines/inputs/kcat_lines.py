"""kcat's JSON envelope (``kcat -C -J``) as input lines of ``pipelines.inputs.raw_files``.

The accepted command line (one JSON object per record, one per line)::

    kcat -C -b BROKER:9092 -t __consumer_offsets -X isolation.level=read_uncommitted -J -e -o beginning -q > dump.jsonl

(``-p N`` for one partition.) ``read_uncommitted`` reads what ``offsetlake capture`` and Spark's
Kafka source read (every offset commit, ``pipelines.kafka.client``); librdkafka's default,
``read_committed``, would drop aborted transactional commits and stop at the last stable
offset. Neither shows the COMMIT/ABORT markers: only segment files carry them
(``pipelines.inputs.segment_files``). Keep the file byte for byte as kcat wrote it.

Rules (facts from kcat's ``json.c`` with yajl):
- kcat writes ``key`` and ``payload`` with ``yajl_gen_string`` over the raw bytes: ``"`` and
  ``\\`` are escaped, bytes below 0x20 become ``\\u00XX`` (or ``\\b \\f \\n \\r \\t``) and every
  other byte, 0x80-0xFF included, is written as it is — so the line is not UTF-8 in general.
  ``pipelines.inputs.raw_files`` reads lines as bytes (each byte one character), which makes each
  character of ``key``/``payload`` exactly one byte again. A character above U+00FF means the
  file was re-encoded after kcat wrote it (e.g. invalid bytes replaced by U+FFFD): an error,
  never a guess.
- Fields: ``topic, partition, offset, tstype, ts, broker, headers, key, payload``. Required:
  ``topic``, ``partition``, ``offset``, ``ts``, ``key`` (non-null: ``__consumer_offsets`` keys
  never are) and ``payload`` (``null`` = tombstone). ``tstype`` is ``create`` (0) or
  ``logappend`` (1). ``broker`` is ignored. ``headers`` must be empty (the coordinator writes
  none; offsetlake would not keep them). Any other field (``key_error``, ``payload_error``,
  ``key_schema_id``, ``value_schema_id`` come from ``-s`` deserializers, whose output is not
  the bytes) is an error naming the line and the field.
- Not accepted: kcat's text output (``-f``, ``-D``/``-K`` delimiters) and
  ``kafka-console-consumer`` text: neither delimits arbitrary bytes unambiguously (keys of
  ``__consumer_offsets`` are binary and may contain any delimiter). For those, capture with
  ``offsetlake capture`` or copy the segment files.
"""

from __future__ import annotations

from typing import Any

from pipelines.errors import UsageError

KCAT_FIELDS = frozenset({"topic", "partition", "offset", "tstype", "ts", "broker", "headers", "key", "payload"})
KCAT_REQUIRED = ("topic", "partition", "offset", "ts", "key", "payload")
_TSTYPES = {"create": 0, "logappend": 1}


def is_kcat_line(obj: dict[str, Any]) -> bool:
    """A parsed line is kcat's envelope when it carries ``payload`` (ours carry ``value``)."""
    return "payload" in obj and "value" not in obj


def text(value: str) -> str:
    """A text field of a line read one byte per character, back to its UTF-8 text."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeEncodeError:  # came from a \\uXXXX escape: already text
        return value
    except UnicodeDecodeError:
        return value


def _raw(value: Any, where: str, field: str) -> bytes:
    if not isinstance(value, str):
        raise UsageError(
            f"{where}: kcat '{field}' must be a string (the record's bytes), got {type(value).__name__}; "
            "run kcat without -s deserializers"
        )
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError as exc:
        ch = value[exc.start]
        raise UsageError(
            f"{where}: kcat '{field}' has the character U+{ord(ch):04X}, which kcat -J never writes for a byte: "
            "the file was re-encoded after kcat wrote it; keep kcat's output byte for byte"
        ) from None


def _int(obj: dict[str, Any], field: str, where: str) -> int:
    v = obj[field]
    if isinstance(v, bool) or not isinstance(v, int):
        raise UsageError(f"{where}: kcat '{field}' must be an integer, got {v!r}")
    return v


def kcat_fields(obj: dict[str, Any], where: str) -> tuple[bytes, bytes | None, str, int, int, int, int]:
    """``(key, value, topic, partition, offset, timestamp_ms, timestamp_type)`` of one kcat
    ``-J`` line (parsed from the line's bytes, one byte per character)."""
    unknown = sorted(set(obj) - KCAT_FIELDS)
    if unknown:
        raise UsageError(
            f"{where}: unknown field '{unknown[0]}' in a kcat -J line (accepted: {', '.join(sorted(KCAT_FIELDS))}; "
            "key_error/payload_error/*_schema_id come from kcat -s deserializers, run kcat without -s)"
        )
    for field in KCAT_REQUIRED:
        if field not in obj:
            raise UsageError(f"{where}: kcat -J line without '{field}' (every record needs it)")
    if obj["key"] is None:
        raise UsageError(f"{where}: kcat 'key' is null (keys of __consumer_offsets are never null)")
    key = _raw(obj["key"], where, "key")
    value = None if obj["payload"] is None else _raw(obj["payload"], where, "payload")
    if not isinstance(obj["topic"], str):
        raise UsageError(f"{where}: kcat 'topic' must be a string")
    tstype = obj.get("tstype", "create")
    if tstype not in _TSTYPES:
        raise UsageError(f"{where}: kcat 'tstype' must be 'create' or 'logappend', got {tstype!r}")
    headers = obj.get("headers")
    if headers:
        raise UsageError(
            f"{where}: kcat 'headers' is not empty: __consumer_offsets records carry none "
            "and offsetlake would not keep them"
        )
    return (
        key,
        value,
        text(obj["topic"]),
        _int(obj, "partition", where),
        _int(obj, "offset", where),
        _int(obj, "ts", where),
        _TSTYPES[tstype],
    )


__all__ = ["KCAT_FIELDS", "KCAT_REQUIRED", "is_kcat_line", "kcat_fields", "text"]
