"""Progress of the streaming job: one log line and one ``stream_progress`` row per micro-batch, the
late-data count, and the rows of batches a kill left unrecorded.

Rules:
- Progress: one log line and one ``stream_progress`` row per micro-batch (raw records — the
  packed source counts them in its offsets —, rates, state rows/memory, watermark, duration),
  MERGEd on (query_name, batch_id): idempotent whatever a restart re-reports. Progress is
  observational: a failed progress write never fails the job.
- Late data: Spark drops records older than the previous batch's watermark; such drops are
  counted from the progress (``numRowsDroppedByWatermark`` counts packs — a pack's event time is
  its newest record's, so it is dropped only when all of its records are late —; the packed
  landing source's dropped records are counted exactly, ``late_records``) and FAIL the run
  (``DataLossError``, exit 2) unless ``stream.allow_late_drops`` is true.
- Rows of batches committed just before a kill are rebuilt from the checkpoint's offset log on
  the next start (``reconstruct_progress``).
- Positions: the replay query's line of a landing micro-batch says what its plan
  (``pipelines.stream.ledger``) did: input records = replayed + duplicates + refused (into
  ``ingest_quarantine``), and how many records the log clock ignored for the watermark.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines.records.replay_input import unpack_packs
from pipelines.stream.checkpoint import checkpoint_offsets
from pipelines.stream.packing import bucket_options
from pipelines.stream.settings import APP_ID_PREFIX, REPLAY_QUERY
from pipelines.stream.source import LandingPackedReader, local_dir
from schemas.stream import STREAM_PROGRESS

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql.streaming.query import StreamingQuery

    from pipelines.stream.ledger import BatchPlan
    from pipelines.tableio import TableIO

log = logging.getLogger("offsetlake.stream")


def _parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def _input_records(progress: dict[str, Any]) -> int:
    """Raw records of the micro-batch: the packed landing source counts them in its offsets
    (its rows are packs); other sources' rows are records."""
    total = 0
    for src in progress.get("sources") or []:
        start, end = src.get("startOffset"), src.get("endOffset")
        start = json.loads(start) if isinstance(start, str) else start
        end = json.loads(end) if isinstance(end, str) else end
        if isinstance(end, dict) and "records" in end:
            total += int(end["records"]) - int((start or {}).get("records") or 0)
        else:
            total += int(src.get("numInputRows") or 0)
    return total if progress.get("sources") else int(progress.get("numInputRows") or 0)


def progress_row(progress: dict[str, Any], query_name: str, records: int | None = None) -> dict[str, Any]:
    """A ``stream_progress`` row from a ``StreamingQueryProgress`` (its JSON as a dict);
    ``records``: the raw records of the batch when its source counted them (the packed Kafka
    source's rows are packs and its offsets are positions, not records)."""
    ops = progress.get("stateOperators") or []
    event_time = progress.get("eventTime") or {}
    records = _input_records(progress) if records is None else records
    rows = int(progress.get("numInputRows") or 0)
    scale = records / rows if rows else 1.0  # rates in records, not packs
    wm = _parse_time(event_time.get("watermark"))
    if wm is not None and wm.timestamp() <= 0:
        wm = None
    return {
        "query_name": query_name,
        "batch_id": int(progress["batchId"]),
        "timestamp": _parse_time(progress.get("timestamp")),
        "input_rows": records,
        "input_rows_per_second": float(progress.get("inputRowsPerSecond") or 0.0) * scale,
        "processed_rows_per_second": float(progress.get("processedRowsPerSecond") or 0.0) * scale,
        "batch_duration_ms": int((progress.get("durationMs") or {}).get("triggerExecution") or 0),
        "state_rows": sum(int(o.get("numRowsTotal") or 0) for o in ops) if ops else None,
        "state_memory_bytes": sum(int(o.get("memoryUsedBytes") or 0) for o in ops) if ops else None,
        "watermark": wm,
        "sources": json.dumps(progress.get("sources") or []),
    }


def progress_line(row: dict[str, Any]) -> str:
    """The one log line per micro-batch."""
    wm = row["watermark"].strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z" if row["watermark"] else "-"
    return (
        f"{row['query_name']} batch={row['batch_id']} input_rows={row['input_rows']} "
        f"rows/s={row['processed_rows_per_second']:.0f} state_rows={row['state_rows']} "
        f"state_bytes={row['state_memory_bytes']} watermark={wm} duration_ms={row['batch_duration_ms']}"
    )


def late_records(
    landing: str, start: dict[str, Any], end: dict[str, Any], watermark_ms: int, options: dict[str, str] | None = None
) -> tuple[int, int]:
    """(records, packs) of a micro-batch of the packed landing source that the stateful
    operator drops as late: the batch's files packed again exactly as its tasks did (the same
    plan: refused and duplicated records left out), packs whose event time is at or before the
    batch's watermark (Spark keeps ``eventTime > watermark``)."""
    reader = LandingPackedReader({**bucket_options(), **(options or {}), "path": landing})
    limit_us = watermark_ms * 1000
    records = packs = 0
    for part in reader.partitions(start, end):
        for packed in reader.read(part):
            ts = packed.column("log_timestamp").cast("int64").to_pylist()
            for i, t in enumerate(ts):
                if t is not None and t <= limit_us:
                    packs += 1
                    records += unpack_packs([packed.column("records")[i].as_py()]).num_rows
    return records, packs


class ProgressRecorder:
    """Polls each query's ``recentProgress``; logs one line per new micro-batch and MERGEs the
    rows into ``stream_progress`` (key (query_name, batch_id); txn version = newest batch id).

    Late data: Spark's ``numRowsDroppedByWatermark`` counts packs (one per state bucket and pack of a task's input);
    for the packed landing source the dropped records are counted exactly (``late_records``)
    and logged as ``DROPPED_LATE=<records>``; otherwise the line says ``DROPPED_LATE_PACKS``.
    ``dropped`` accumulates them: the job fails on it unless ``stream.allow_late_drops``.
    """

    def __init__(
        self,
        io: TableIO | None,
        *,
        echo: Callable[[str], None] | None = None,
        landing: str | None = None,
        reader_options: dict[str, str] | None = None,
        plans: dict[int, BatchPlan] | None = None,
    ) -> None:
        self.io = io
        self.echo = echo
        self.landing = landing  # the packed landing source's directory (exact late counts)
        self.reader_options = reader_options or {}
        #: batch id -> the replay query's plan (filled by its sink): records = replayed +
        #: duplicates + refused (+ broker segments' control records), logged with the batch's line
        self.plans = plans if plans is not None else {}
        #: (batch, records, replayed, duplicates, refused, clock outliers, control records)
        self.counted: list[tuple[int, int, int, int, int, int, int]] = []
        self.seen: dict[str, int] = {}
        self.rows: list[dict[str, Any]] = []
        self.dropped: list[tuple[str, int, int, int | None]] = []  # (query, batch, packs, records)
        self.end_offsets: list[str] = []  # what each end-offsets sample of the run did

    def poll(self, query: StreamingQuery, name: str) -> None:
        try:
            recent = query.recentProgress
        except Exception:  # the query is shutting down
            return
        last = self.seen.get(name, -1)
        new: list[dict[str, Any]] = []
        for p in recent:
            data = p if isinstance(p, dict) else json.loads(p.json)
            if int(data["batchId"]) <= last:
                continue
            plan = self.plans.get(int(data["batchId"])) if name == REPLAY_QUERY else None
            row = progress_row(data, name, plan.records if plan is not None else None)
            dropped = sum(int(o.get("numRowsDroppedByWatermark") or 0) for o in data.get("stateOperators") or [])
            msg = progress_line(row)
            if plan is not None:
                self.counted.append(
                    (
                        int(data["batchId"]),
                        plan.records,
                        plan.replayed,
                        plan.duplicates,
                        len(plan.refused),
                        len(plan.outliers),
                        plan.controls,
                    )
                )
                msg += (
                    f" replayed={plan.replayed} duplicates={plan.duplicates} refused={len(plan.refused)}"
                    f" clock_outliers={len(plan.outliers)}"
                ) + (f" control_records={plan.controls}" if plan.controls else "")
            if dropped:
                records = self._late_records(data)
                self.dropped.append((name, int(data["batchId"]), dropped, records))
                msg += (
                    f" DROPPED_LATE={records} records ({dropped} packs)"
                    if records is not None
                    else f" DROPPED_LATE_PACKS={dropped} (records not counted for this source)"
                )
            (log.warning if dropped else log.info)(msg)
            if self.echo is not None:
                self.echo(msg)
            new.append(row)
            last = int(data["batchId"])
        self.seen[name] = last
        if new:
            self.rows.extend(new)
            self._write(name, new)

    def _late_records(self, progress: dict[str, Any]) -> int | None:
        wm = _parse_time((progress.get("eventTime") or {}).get("watermark"))
        sources = progress.get("sources") or []
        if self.landing is None or wm is None or len(sources) != 1:
            return None
        try:
            start, end = (
                json.loads(sources[0][k]) if isinstance(sources[0][k], str) else sources[0][k]
                for k in ("startOffset", "endOffset")
            )
            if not isinstance(start, dict):  # the first batch starts at the initial offset
                start = LandingPackedReader({"path": self.landing}).initialOffset()
            if not isinstance(end, dict):
                return None
            return late_records(self.landing, start, end, int(wm.timestamp() * 1000), self.reader_options)[0]
        except Exception as exc:  # counting is best effort; the packs are still reported
            log.warning("could not count the late records: %s", exc)
            return None

    def late_failure(self) -> str | None:
        """The one-line refusal when records were dropped as late, else ``None``."""
        if not self.dropped:
            return None
        packs = sum(d[2] for d in self.dropped)
        known = [d[3] for d in self.dropped]
        what = (
            f"{sum(k for k in known if k is not None)} records ({packs} packs)"
            if None not in known
            else f"{packs} packs (at least {packs} records)"
        )
        batches = ", ".join(f"{q} batch {b}" for q, b, *_ in self.dropped[:3])
        return (
            f"stream: {what} arrived later than the watermark and were dropped ({batches}); "
            "raise stream.watermark_delay_ms, or set stream.allow_late_drops: true to accept the loss"
        )

    def _write(self, name: str, rows: list[dict[str, Any]]) -> None:
        if self.io is None or self.io.spark is None:
            return

        try:
            # MERGE on (query_name, batch_id) from an Arrow table made here: no Spark job next
            # to the running micro-batch (a DataFrame of the rows cost one: 0.6-2.6 s of the
            # watcher's time per micro-batch, waiting for a task slot), and idempotent by key,
            # whatever a restart re-reports.
            import pyarrow as pa

            self.io.merge(
                STREAM_PROGRESS.name,
                pa.Table.from_pylist(rows, schema=STREAM_PROGRESS.arrow_schema()),
                txn_app_id=APP_ID_PREFIX + "progress-" + name,
                txn_version=max(r["batch_id"] for r in rows),
            )
        except Exception as exc:  # progress is observational: never fail the job for it
            log.warning("stream_progress write failed: %s", exc)


def reconstruct_progress(io: TableIO, query_name: str, checkpoint: str) -> int:
    """Add the ``stream_progress`` rows of micro-batches the checkpoint committed but the table
    misses (the job was killed between a batch's commit and its progress poll). Rebuilt from the
    offset log: trigger time, watermark, sources and — for the packed landing source — the raw
    records read; rates, duration and state sizes are unknown (null). Returns the rows added."""

    local = local_dir(checkpoint)
    commits = Path(local) / "commits" if local else None
    if commits is None or not commits.is_dir() or io.spark is None:
        return 0
    done = sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    if not done or not io.exists(STREAM_PROGRESS.name):
        return 0
    have = {
        int(r["batch_id"])
        for r in io.read(STREAM_PROGRESS.name).where(f"query_name = '{query_name}'").select("batch_id").collect()
    }
    rows = []
    for bid in done:
        if bid in have:
            continue
        cur = checkpoint_offsets(str(local), bid)
        if cur is None:
            continue
        meta, offsets = cur
        prev = checkpoint_offsets(str(local), bid - 1) if bid > 0 else None
        end = offsets[0] if offsets else None
        start = prev[1][0] if prev and prev[1] else None
        records = None
        if isinstance(end, dict) and "records" in end:
            records = int(end["records"]) - (int(start["records"]) if isinstance(start, dict) else 0)
        wm = int(meta.get("batchWatermarkMs") or 0)
        rows.append(
            {
                "query_name": query_name,
                "batch_id": bid,
                "timestamp": datetime.fromtimestamp(int(meta.get("batchTimestampMs") or 0) / 1000, UTC),
                "input_rows": records,
                "input_rows_per_second": None,
                "processed_rows_per_second": None,
                "batch_duration_ms": None,
                "state_rows": None,
                "state_memory_bytes": None,
                "watermark": datetime.fromtimestamp(wm / 1000, UTC) if wm > 0 else None,
                "sources": json.dumps(
                    [{"description": "reconstructed from the checkpoint", "startOffset": start, "endOffset": end}]
                ),
            }
        )
    if rows:
        import pyarrow as pa

        io.merge(STREAM_PROGRESS.name, pa.Table.from_pylist(rows, schema=STREAM_PROGRESS.arrow_schema()))
        log.info("stream_progress: %d micro-batch row(s) of %s rebuilt from the checkpoint", len(rows), query_name)
    return len(rows)
