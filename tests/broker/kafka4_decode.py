"""Kafka's own printing of ``__consumer_offsets`` records against offsetlake's, field by field.

- ``parse_dump``: the lines ``DumpLogSegments --offsets-decoder --print-data-log`` prints for
  data records (``| offset: N ... key: {...} payload: {...}`` or ``payload: <DELETE>``); Kafka 4
  prints the key's record ``type`` and the value's ``version`` as strings, the ``data`` objects
  with its generated JsonConverters.
- ``parse_markers`` / ``our_markers``: the transaction markers (control records) as
  ``DumpLogSegments`` prints them (``endTxnMarker: COMMIT coordinatorEpoch: 0``) and as
  offsetlake's segment reader reads them.
- ``parse_console``: the lines ``kafka-console-consumer --formatter <Kafka 4 formatter>``
  printed (one JSON object per record it allows; ``{"key":{"type":T,...},"value":...}``).
- ``ours_by_offset``: offsetlake's decode of the same segment files (``coordinator_core.codec``
  with ``modern=True``) printed by ``coordinator_core.to_kafka_json``; ``kafka4_form``
  puts it in the form Kafka 4's formatters print (the record type under ``type``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from coordinator_core import decode_record, to_kafka_json
from pipelines.inputs.segment_files import SegmentRecord, read_segment_items

Position = tuple[int, int]  # (__consumer_offsets partition, offset)


def parse_dump(text: str, partition: int) -> dict[Position, dict[str, Any]]:
    """``DumpLogSegments`` output of one partition's segments -> {(partition, offset): record}."""
    out: dict[Position, dict[str, Any]] = {}
    for line in text.splitlines():
        if not line.startswith("| offset: ") or " key: " not in line:
            continue  # batch headers, control records (no key), other notes
        offset = int(line.split()[2])
        _, _, rest = line.partition(" key: ")
        key_text, _, payload_text = rest.partition(" payload: ")
        key = json.loads(key_text)
        value = None if payload_text.strip() == "<DELETE>" else json.loads(payload_text)
        out[(partition, offset)] = {
            "key": {"type": int(key["type"]), "data": key["data"]},
            "value": None if value is None else {"version": int(value["version"]), "data": value["data"]},
        }
    return out


def parse_markers(text: str, partition: int) -> dict[Position, tuple[str, int]]:
    """The control records of one partition's ``DumpLogSegments`` output -> {(partition, offset):
    (marker, coordinator epoch)}."""
    out: dict[Position, tuple[str, int]] = {}
    for line in text.splitlines():
        m = _MARKER.search(line)
        if line.startswith("| offset: ") and m:
            out[(partition, int(line.split()[2]))] = (m.group(1), int(m.group(2)))
    return out


_MARKER = re.compile(r"\bendTxnMarker: (\w+) coordinatorEpoch: (-?\d+)")


def our_markers(log_dir: Path) -> dict[Position, tuple[str, int]]:
    """offsetlake's segment reader on the same files: every control record's type and epoch."""
    out: dict[Position, tuple[str, int]] = {}
    for item in read_segment_items(log_dir):
        if isinstance(item, SegmentRecord) and item.control_type is not None:
            assert item.partition is not None and item.control_name is not None
            out[(item.partition, item.offset)] = (item.control_name, item.coordinator_epoch or 0)
    return out


def parse_console(text: str) -> list[dict[str, Any]]:
    """One JSON object per line the console consumer printed (other lines are not records)."""
    return [json.loads(line) for line in text.splitlines() if line.startswith('{"key"')]


def kafka4_form(printed: dict[str, Any]) -> dict[str, Any]:
    """offsetlake's ``to_kafka_json`` in the form Kafka 4's formatters print: the key's record
    type under ``type`` (offsetlake prints a classic key's version, as Kafka 3.x's formatter)."""
    key = printed["key"]
    if "type" in key:
        return printed
    return {"key": {"type": key["version"], "data": key["data"]}, "value": printed["value"]}


def segment_records(log_dir: Path) -> Iterable[SegmentRecord]:
    for item in read_segment_items(log_dir):
        if isinstance(item, SegmentRecord) and item.control_type is None:
            yield item


def ours_by_offset(log_dir: Path) -> dict[Position, dict[str, Any]]:
    """offsetlake's printing of every data record under ``log_dir`` (``__consumer_offsets-N/``)."""
    out: dict[Position, dict[str, Any]] = {}
    for r in segment_records(log_dir):
        assert r.partition is not None
        rec = decode_record(r.key, r.value, modern=True)
        out[(r.partition, r.offset)] = kafka4_form(to_kafka_json(rec))
    return out


def diff_records(kafka: dict[Position, dict[str, Any]], ours: dict[Position, dict[str, Any]]) -> list[str]:
    """Every disagreement, one line each: positions only one side has, then fields that differ."""
    problems = [f"{pos}: only Kafka printed it" for pos in sorted(kafka.keys() - ours.keys())]
    problems += [f"{pos}: only offsetlake read it" for pos in sorted(ours.keys() - kafka.keys())]
    for pos in sorted(kafka.keys() & ours.keys()):
        k, o = kafka[pos], ours[pos]
        if k == o:
            continue
        if k["key"] != o["key"]:
            problems.append(f"{pos}: key {json.dumps(k['key'])} != ours {json.dumps(o['key'])}")
        kv, ov = k["value"], o["value"]
        if (kv is None) != (ov is None) or (kv is not None and ov is not None and kv["version"] != ov["version"]):
            problems.append(f"{pos} type {k['key']['type']}: value {json.dumps(kv)} != ours {json.dumps(ov)}")
            continue
        if kv is not None and ov is not None:
            for name in sorted(set(kv["data"]) | set(ov["data"])):
                a, b = kv["data"].get(name, "<absent>"), ov["data"].get(name, "<absent>")
                if a != b:
                    problems.append(f"{pos} type {k['key']['type']}: {name} = {json.dumps(a)}, ours {json.dumps(b)}")
    return problems
