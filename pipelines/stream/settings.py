"""The streaming job's settings: the ``stream`` section of the config (and what it uses of the
others), validated and resolved once into a frozen ``StreamSettings``.

Rules:
- Refused with one line (``UsageError``, exit 2) before Spark starts: processing-time timeouts
  (offset expiry is event time, and processing-time timeouts never end under
  ``trigger(availableNow)``), JSON landing files, a Delta input, and landing files read by
  Spark's file source (``stream.landing_reader: spark``, or a landing that is not a local
  directory): it takes files in modification-time order and cannot check positions against
  earlier micro-batches (``pipelines.stream.ledger``), so it could replay a conflicting copy or
  fail on a re-landed file; the stream's own reader does both.
- A local landing of broker log segments (``__consumer_offsets-N/*.log``; ``input.format`` auto
  or segments) is read by the segment source (``landing_kind`` "segments":
  ``pipelines.stream.segment_source``); a landing holding segments and raw-record files both is
  refused, and so is a non-local checkpoint with segments.
- Query names and the Delta txn app ids derived from them (``offsetlake-stream-<query>``) are
  registered names: existing checkpoints and Delta txns depend on them; they never change.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from coordinator_core import ReplaySettings
from pipelines import uri as uris
from pipelines.errors import UsageError

if TYPE_CHECKING:
    from pipelines.config import Config

REPLAY_QUERY = "offsetlake_stream_replay"
QUARANTINE_QUERY = "offsetlake_stream_quarantine"
APP_ID_PREFIX = "offsetlake-stream-"


@dataclass(frozen=True)
class StreamSettings:
    """What the streaming job needs from the config, resolved once."""

    source: str
    landing: str
    replay_checkpoint: str
    quarantine_checkpoint: str
    max_files_per_trigger: int
    max_bytes_per_trigger: int | None
    watermark_delay_ms: int
    trigger_interval: str
    replay: ReplaySettings
    num_partitions: int
    tables: tuple[str, ...]
    query_name: str = REPLAY_QUERY
    quarantine_query_name: str = QUARANTINE_QUERY
    landing_reader: str = "python"
    state_partitions: int | None = None
    allow_late_drops: bool = False
    clock_outlier_ms: int = 86_400_000
    #: records per micro-batch (landing files, whole; Kafka's maxOffsetsPerTrigger): None = no cap
    max_records_per_trigger: int | None = None
    #: what the landing holds: "files" (raw-record Parquet) or "segments" (broker log segments)
    landing_kind: str = "files"
    topic: str = "__consumer_offsets"  # kafka.topic: the only <topic>-N directories a log dir is read from

    @property
    def app_id(self) -> str:
        return APP_ID_PREFIX + self.query_name


def settings_from_config(cfg: Config) -> StreamSettings:
    """Validate and resolve the ``stream`` section (and what it uses of the others)."""
    # lazy: pipelines.records.gold loads numpy/pyarrow when imported (measured: heavy_probe)
    from pipelines.records.gold import DEFAULT_TABLES

    if cfg.stream.timeout_mode != "event_time":
        raise UsageError(
            "stream.timeout_mode: processing_time is not supported by the streaming replay (offset "
            "expiry is event time, and processing-time timeouts never end under --available-now); "
            "use event_time"
        )
    if cfg.input.source == "landing" and cfg.input.format == "json":
        raise UsageError("input.format: json landing files are not supported by the streaming job; use parquet")
    if cfg.input.source == "delta":
        raise UsageError("input.source: delta is not supported by the streaming job; use landing or kafka")
    landing_path = cfg.input.path or cfg.paths.landing
    if cfg.input.source == "landing" and (cfg.stream.landing_reader == "spark" or not uris.is_local(landing_path)):
        # Spark's file source takes files by modification time and sees no earlier micro-batch:
        # it cannot order by content, refuse a conflicting copy or skip a re-landed file
        what = "stream.landing_reader: spark" if cfg.stream.landing_reader == "spark" else f"landing {landing_path}"
        raise UsageError(
            f"{what}: the streaming job reads landing files only with its own reader on a local directory "
            "(content order, positions checked); Spark's file source takes modification-time order and "
            "cannot; use stream.landing_reader: python on a local landing, or input.source: kafka"
        )
    landing = cfg.input.path or cfg.paths.landing
    if cfg.input.source == "landing" and uris.is_local(landing) and not os.path.exists(uris.local_path(landing)):
        # the file source needs it when the query starts: say so before Spark starts
        raise UsageError(f"input: landing path {landing} does not exist (generate data first: offsetlake generate)")
    kind = "files"
    if cfg.input.source == "landing" and uris.is_local(landing):
        kind = _landing_kind(cfg, uris.local_path(landing))
        if kind == "segments" and not uris.is_local(cfg.checkpoint_path("stream_replay")):
            # its plans and open transactions live beside the checkpoint, read by driver and tasks
            raise UsageError("stream: broker segments need a local checkpoint directory (paths.checkpoints)")
    return StreamSettings(
        source=cfg.input.source,
        landing=cfg.input.path or cfg.paths.landing,
        replay_checkpoint=cfg.checkpoint_path("stream_replay"),
        quarantine_checkpoint=cfg.checkpoint_path("stream_quarantine"),
        max_files_per_trigger=cfg.stream.max_files_per_trigger,
        max_bytes_per_trigger=cfg.stream.max_bytes_per_trigger,
        max_records_per_trigger=cfg.stream.max_records_per_trigger,
        watermark_delay_ms=cfg.stream.watermark_delay_ms,
        trigger_interval=cfg.stream.trigger_interval,
        replay=cfg.replay.settings(),
        num_partitions=cfg.offsets_topic.num_partitions,
        tables=tuple(DEFAULT_TABLES),
        landing_reader=cfg.stream.landing_reader,
        state_partitions=cfg.stream.state_partitions,
        allow_late_drops=cfg.stream.allow_late_drops,
        clock_outlier_ms=cfg.replay.clock_outlier_ms,
        landing_kind=kind,
        topic=cfg.kafka.topic,
    )


def _landing_kind(cfg: Config, path: str) -> str:
    """ "segments" when the local landing holds broker log segments (``input.format`` auto or
    segments), else "files"; a landing holding both is refused (one reader per stream)."""
    from pathlib import Path

    # lazy: pipelines.inputs.raw_files loads numpy/pyarrow when imported (measured: heavy_probe)
    from pipelines.inputs.raw_files import RAW_FILE_SUFFIXES
    from pipelines.inputs.segment_files import SEGMENT_SUFFIX, segment_files

    if cfg.input.format not in ("auto", "segments"):
        return "files"
    p = Path(path)
    if not p.exists() or (p.is_file() and p.suffix != SEGMENT_SUFFIX) or not segment_files(p, cfg.kafka.topic):
        if cfg.input.format == "segments":
            raise UsageError(f"input: no broker log segments (__consumer_offsets-N/*.log) in {path}")
        return "files"
    if p.is_file():
        raise UsageError(
            f"input: {path} is one segment file; the stream follows a partition directory "
            "(__consumer_offsets-N/) or a log dir of them: point input.path there"
        )
    others = [f.name for f in p.iterdir() if f.is_file() and f.suffix in RAW_FILE_SUFFIXES]
    if others:
        raise UsageError(
            f"input: {path} holds both broker log segments and raw-record files ({others[0]}); the stream "
            "reads one kind per landing: keep them in separate directories"
        )
    return "segments"
