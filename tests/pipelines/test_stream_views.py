"""Every analytics view answers the same on a streaming-only warehouse as on a batch one.

Both warehouses are built from ONE landing (the batch job with ``replay.as_of_ms`` = the present the
stream states after ``--available-now``: its final watermark + the delay, the newest record), get the same ``partition_end_offsets``
samples, and every view in ``views.VIEWS`` is read from each (DuckDB, the views' one
definition) and compared row for row.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from tests.pipelines.test_stream_job import DELAY_MS, RETENTION_MS, land, sample_log


def _cfg(root: Path, as_of_ms: int) -> Any:
    from pipelines.config import config_from_dict

    return config_from_dict(
        {
            "paths": {"root": str(root), "landing": str(root.parent / "landing")},
            "delta": {"engine": "rust"},
            "replay": {"retention_ms": RETENTION_MS, "as_of_ms": as_of_ms},
            "stream": {"max_files_per_trigger": 3, "watermark_delay_ms": DELAY_MS},
        }
    )


def _samples(io: Any, records: list[Any]) -> None:
    """End-offset samples of every committed topic-partition: two per partition (before and after
    the log), log end = 1,000 + the partition number, so lag is known at every commit."""
    import pyarrow as pa

    from pipelines.tableio import append_arrow_at
    from schemas.end_offsets import PARTITION_END_OFFSETS

    cur = io.read_arrow("offsets_current", ["topic", "partition"])
    tps = sorted(set(zip(cur.column("topic").to_pylist(), cur.column("partition").to_pylist())))
    assert tps
    first = min(r.timestamp_ms for r in records)
    rows = [
        {
            "sampled_at": dt.datetime.fromtimestamp(t / 1000, dt.UTC),
            "topic": topic,
            "partition": p,
            "log_start_offset": 0,
            "log_end_offset": 1_000 + p + k,
            "bootstrap_servers": "test",
        }
        for topic, p in tps
        for k, t in enumerate((first - 1, first + 3_600_000))
    ]
    schema = PARTITION_END_OFFSETS.arrow_schema()
    append_arrow_at(io.path("partition_end_offsets"), pa.Table.from_pylist(rows, schema=schema))


def _rows(io: Any, view: str) -> list[tuple[Any, ...]]:
    from pipelines.analytics.duck import DuckDBSession
    from pipelines.analytics.transpile import to_duckdb
    from pipelines.analytics.views import view_closure

    s = DuckDBSession(io)
    s.register(view_closure([view], io.conf, replayed_commits=s.replayed_commits))
    table = s.query(to_duckdb(f"SELECT * FROM {view}"))
    return sorted((tuple(repr(v) for v in r.values()) for r in table.to_pylist()), key=repr)


@pytest.mark.spark
def test_every_view_on_a_streaming_only_warehouse_is_the_batch_warehouse_view(spark: Any, tmp_path: Path) -> None:
    from pipelines.analytics.views import VIEW_NAMES
    from pipelines.jobs import stream as stream_job
    from pipelines.jobs.batch import run_batch
    from pipelines.tableio import TableIO

    records = sample_log(groups=6, seed=5)
    land(records, tmp_path / "landing", rows_per_file=400)
    watermark = max(r.timestamp_ms for r in records) - DELAY_MS
    batch_cfg = _cfg(tmp_path / "batch", watermark + DELAY_MS)
    stream_cfg = _cfg(tmp_path / "stream", watermark + DELAY_MS)
    run_batch(batch_cfg, spark, io=TableIO(batch_cfg, spark))
    stream_job.run(spark, stream_cfg, available_now=True, poll_seconds=0.5)

    batch_io, stream_io = TableIO(batch_cfg, None, engine="rust"), TableIO(stream_cfg, None, engine="rust")
    assert not stream_io.exists("raw_records")  # a streaming-only warehouse
    for io in (batch_io, stream_io):
        _samples(io, records)
    counts = {}
    for view in VIEW_NAMES:
        want, got = _rows(batch_io, view), _rows(stream_io, view)
        assert got == want, view
        counts[view] = len(want)
    for view in ("partition_status_now", "commit_cadence", "coordinator_load", "consumer_lag"):
        assert counts[view] > 0, (view, counts)
