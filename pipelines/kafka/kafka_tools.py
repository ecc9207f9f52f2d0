"""Kafka's own command-line tools, run from the same jars as the broker, their output parsed.

The judge's voice in the real-broker tests (``tests/broker/``): what Kafka itself prints about a
group and about each record of ``__consumer_offsets``, next to what offsetlake says.

- ``describe_group``: ``kafka-consumer-groups --describe --group G --verbose`` with one of
  ``--offsets`` / ``--members`` / ``--state`` (Kafka refuses them together) → rows of dicts keyed by
  Kafka's own column headers.
- ``dump_log``: ``kafka-dump-log --offsets-decoder`` over segment files → one dict per batch, one per
  record (offset, timestamps, producer fields, the decoded ``key`` and ``payload`` as JSON).
- ``console_formatted``: the console consumer on ``__consumer_offsets`` with Kafka's offsets and group
  metadata formatters → one JSON object per record.

Each call starts one JVM (seconds); every run is bounded by a timeout and a failure raises
``KafkaToolFailed`` with one line (the tool's own last error line).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipelines.kafka.local_broker import java_binary
from pipelines.runtime import jvm_deps

TOOL_TIMEOUT_S = 120.0
CONSUMER_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
OFFSETS_FORMATTER = "org.apache.kafka.tools.consumer.OffsetsMessageFormatter"
GROUP_METADATA_FORMATTER = "org.apache.kafka.tools.consumer.GroupMetadataMessageFormatter"
_TOOL_JVM = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData", "-Xshare:auto")
_LOG4J1 = "log4j.rootLogger=WARN, err\nlog4j.appender.err=org.apache.log4j.ConsoleAppender\nlog4j.appender.err.Target=System.err\nlog4j.appender.err.layout=org.apache.log4j.PatternLayout\nlog4j.appender.err.layout.ConversionPattern=%p %m%n\n"
_LOG4J2 = "appender.err.type = Console\nappender.err.name = ERR\nappender.err.target = SYSTEM_ERR\nappender.err.layout.type = PatternLayout\nappender.err.layout.pattern = %p %m%n\nrootLogger.level = WARN\nrootLogger.appenderRef.err.ref = ERR\n"


class KafkaToolFailed(RuntimeError):
    """A Kafka tool exited non-zero or ran too long; one line."""


def _major(bundle: str) -> int:
    return int(jvm_deps.version(bundle).split(".", 1)[0])


def dump_log_class(bundle: str) -> str:
    """``DumpLogSegments`` moved from the Scala core (3.x) to kafka-tools (4.x)."""
    return "org.apache.kafka.tools.DumpLogSegments" if _major(bundle) >= 4 else "kafka.tools.DumpLogSegments"


def _log_flag(bundle: str) -> str:
    folder = Path(tempfile.gettempdir()) / f"offsetlake-kafka-tools-{os.getuid()}"
    folder.mkdir(parents=True, exist_ok=True)
    if _major(bundle) >= 4:
        path = folder / "log4j2.properties"
        path.write_text(_LOG4J2)
        return f"-Dlog4j2.configurationFile={path}"
    path = folder / "log4j.properties"
    path.write_text(_LOG4J1)
    return f"-Dlog4j.configuration=file:{path}"


def run_tool(bundle: str, main_class: str, args: Sequence[str], *, timeout_s: float = TOOL_TIMEOUT_S) -> str:
    """Run one of Kafka's tools from the bundle's jars; its stdout."""

    cmd = [java_binary(), *_TOOL_JVM, _log_flag(bundle), "-cp", jvm_deps.classpath(bundle), main_class, *args]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise KafkaToolFailed(f"{main_class.rsplit('.', 1)[-1]} ran over {timeout_s:.0f} s") from exc
    if done.returncode != 0:
        lines = [ln.strip() for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
        why = next((ln for ln in reversed(lines) if "Error" in ln or "Exception" in ln), lines[-1] if lines else "")
        raise KafkaToolFailed(f"{main_class.rsplit('.', 1)[-1]} exited {done.returncode}: {why[:300]}")
    return done.stdout


# -- kafka-consumer-groups --------------------------------------------------------------------------


def describe_group(bundle: str, bootstrap: str, group: str, what: str = "members") -> list[dict[str, str]]:
    """``--describe --group G --<what> --verbose`` (what: offsets, members, state) as rows.

    Values are Kafka's text ("-" for none); the header names are Kafka's own.
    """
    if what not in ("offsets", "members", "state"):
        raise ValueError(f"describe what={what!r}: offsets, members or state")
    args = ["--bootstrap-server", bootstrap, "--describe", "--group", group, f"--{what}", "--verbose"]
    if what == "offsets":
        args = [a for a in args if a != "--offsets"]  # --offsets is the default view
    return parse_table(run_tool(bundle, CONSUMER_GROUP_COMMAND, args))


_HEADER_RE = re.compile(r"\S+(?: \([A-Z]+\))?")


def parse_table(text: str) -> list[dict[str, str]]:
    """Kafka's fixed-width tables: the header line starts with GROUP; columns sliced at its positions."""
    lines = text.splitlines()
    rows: list[dict[str, str]] = []
    header_at = [i for i, ln in enumerate(lines) if ln.startswith("GROUP ")]
    for h in header_at:
        header = lines[h]
        cols = [(m.group(0), m.start()) for m in _HEADER_RE.finditer(header)]
        for line in lines[h + 1 :]:
            if not line.strip() or line.startswith("GROUP "):
                break
            row = {}
            for i, (name, start) in enumerate(cols):
                end = cols[i + 1][1] if i + 1 < len(cols) else None
                row[name] = line[start:end].strip()
            rows.append(row)
    notes = [ln.strip() for ln in lines if ln.startswith(("Consumer group", "Error:", "Warning:"))]
    if notes:
        rows.append({"MESSAGE": " ".join(notes)})
    return rows


# -- kafka-dump-log --offsets-decoder ---------------------------------------------------------------

_FIELD_RE = re.compile(r"(\w+): (\S+)")


def dump_log(bundle: str, files: Sequence[str | Path]) -> list[dict[str, Any]]:
    """``DumpLogSegments --offsets-decoder --files a,b,...`` (one JVM) as entries in file order.

    A batch line becomes ``{"kind": "batch", ...fields}``; a record line ``{"kind": "record", "offset",
    "CreateTime"..., "key": <json or text>, "payload": <json or text>}``; a control record carries
    ``endTxnMarker`` and ``coordinatorEpoch``. ``file`` names the segment each entry came from.
    """
    if not files:
        return []
    text = run_tool(bundle, dump_log_class(bundle), ["--offsets-decoder", "--files", ",".join(str(f) for f in files)])
    return parse_dump(text)


def parse_dump(text: str, *, file: str = "") -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    for line in text.splitlines():
        if line.startswith("Dumping "):
            file = line[len("Dumping ") :].strip()
        elif line.startswith("| offset:"):
            entries.append({"kind": "record", "file": file, **_record_fields(line[2:])})
        elif line.startswith("baseOffset:"):
            entries.append({"kind": "batch", "file": file, **dict(_FIELD_RE.findall(line))})
    return entries


def _record_fields(line: str) -> dict[str, Any]:
    decoder = json.JSONDecoder()
    fields: dict[str, Any] = {}
    head, found, _ = line.partition(" key: ")
    fields.update(_FIELD_RE.findall(head))
    if found:
        fields["key"], rest = _json_or_text(decoder, line[len(head) + len(" key: ") :], " payload: ")
        if rest.startswith(" payload: "):
            fields["payload"], _ = _json_or_text(decoder, rest[len(" payload: ") :], "")
    for name in ("endTxnMarker", "coordinatorEpoch"):
        m = re.search(rf"\b{name}: (\S+)", line)
        if m:
            fields[name] = m.group(1)
    return fields


def _json_or_text(decoder: json.JSONDecoder, text: str, stop: str) -> tuple[Any, str]:
    try:
        value, end = decoder.raw_decode(text)
        return value, text[end:]
    except json.JSONDecodeError:
        cut = text.find(stop) if stop else -1
        return (text[:cut], text[cut:]) if cut >= 0 else (text, "")


# -- the console consumer with Kafka's offsets formatters -------------------------------------------


def console_formatted(
    bundle: str, bootstrap: str, formatter: str = OFFSETS_FORMATTER, *, group: str, idle_ms: int = 4000
) -> list[Any]:
    """Every record of ``__consumer_offsets`` from the beginning through a Kafka formatter (JSON).

    The offsets formatter prints offset commits only, the group metadata formatter group records
    only; tombstones print with a ``null`` value. The console consumer is itself a member of
    ``group`` (a real group: it writes its own records to the topic), so callers name it.
    Kafka 3.9's formatters print no line break between records: the JSON is read object by object.
    """
    args = ["--bootstrap-server", bootstrap, "--topic", "__consumer_offsets", "--from-beginning"]
    args += ["--formatter", formatter, "--timeout-ms", str(idle_ms), "--group", group]
    args += ["--consumer-property", "exclude.internal.topics=false", "--isolation-level", "read_committed"]
    # its own auto-commits would be records of the topic it reads: never idle for ``idle_ms`` > 5 s
    args += ["--consumer-property", "enable.auto.commit=false"]
    return json_objects(run_tool(bundle, CONSOLE_CONSUMER, args))


def json_objects(text: str) -> list[Any]:
    """Every top-level JSON object in ``text``, in order (other text skipped)."""
    decoder = json.JSONDecoder()
    out: list[Any] = []
    at = text.find("{")
    while at >= 0:
        try:
            value, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            at = text.find("{", at + 1)
            continue
        out.append(value)
        at = text.find("{", end)
    return out
