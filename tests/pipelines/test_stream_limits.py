"""A micro-batch's size is bounded whatever the backlog (``stream.max_records_per_trigger``): the
landing source takes whole files up to the cap (at least one), Kafka gets it as
``maxOffsetsPerTrigger`` unless the user set that. The landing reader is driven by hand, as Spark's
micro-batch engine drives it (no Spark)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from pipelines.config import config_from_dict
from pipelines.kafka.source import stream_limit_options
from pipelines.stream.source import LandingPackedReader
from tests.pipelines.pipeline_helpers import sample_raw

#: rows per landing file, in content order (the files' records are consecutive slices of one log)
FILE_ROWS = (40, 25, 25, 60, 10, 30)


def _landing(root: Path) -> int:
    raw = sample_raw(400, seed=11).sort_by("timestamp")
    at = 0
    for i, n in enumerate(FILE_ROWS):
        pq.write_table(raw.slice(at, n), root / f"part-{i:05d}.parquet")
        at += n
    return at


def _micro_batches(reader: LandingPackedReader, max_files: int) -> list[int]:
    """The records of each micro-batch until the landing is drained."""
    from pyspark.sql.streaming.datasource import ReadMaxFiles

    sizes = []
    start: dict[str, Any] = reader.initialOffset()
    while True:
        end = reader.latestOffset(start, ReadMaxFiles(max_files))
        if end == start:
            return sizes
        sizes.append(end["records"] - start["records"])
        start = end


@pytest.mark.parametrize(
    ("cap", "want"),
    [
        (None, [190]),  # no cap: every file in one micro-batch (max_files 100)
        (60, [40, 50, 60, 40]),  # whole files up to 60 records
        (20, [40, 25, 25, 60, 10, 30]),  # a file over the cap is still taken, alone
        (100, [90, 100]),
    ],
)
def test_the_landing_source_takes_whole_files_up_to_the_records_cap(
    tmp_path: Path, cap: int | None, want: list[int]
) -> None:
    total = _landing(tmp_path)
    options = {"path": str(tmp_path)}
    if cap is not None:
        options["maxRecordsPerTrigger"] = str(cap)
    sizes = _micro_batches(LandingPackedReader(options), max_files=100)
    assert sizes == want and sum(sizes) == total


def test_the_files_cap_and_the_records_cap_both_hold(tmp_path: Path) -> None:
    _landing(tmp_path)
    sizes = _micro_batches(LandingPackedReader({"path": str(tmp_path), "maxRecordsPerTrigger": "100"}), max_files=1)
    assert sizes == list(FILE_ROWS)


def test_kafka_gets_the_cap_as_max_offsets_per_trigger_unless_the_user_set_it() -> None:
    assert stream_limit_options(config_from_dict({})) == {"maxOffsetsPerTrigger": "2000000"}
    cfg = config_from_dict({"stream": {"max_records_per_trigger": 5000}})
    assert stream_limit_options(cfg) == {"maxOffsetsPerTrigger": "5000"}
    assert stream_limit_options(config_from_dict({"stream": {"max_records_per_trigger": None}})) == {}
    own = config_from_dict({"input": {"kafka_options": {"maxOffsetsPerTrigger": 77}}})
    assert stream_limit_options(own) == {}


@pytest.mark.parametrize("slots", [1, 2, 4, 8])
def test_a_micro_batchs_files_spread_over_the_jobs_task_slots(tmp_path: Path, slots: int) -> None:
    """The job passes its task slots (``task_slots``: a cluster's cores, not a fixed 2): a
    micro-batch of six files runs as min(slots, 6) tasks that together read every file once,
    each task's files in log order."""
    from pyspark.sql.streaming.datasource import ReadMaxFiles

    from pipelines.stream.settings import settings_from_config
    from pipelines.stream.source import landing_reader_options

    _landing(tmp_path)
    settings = settings_from_config(config_from_dict({"input": {"path": str(tmp_path)}}))
    reader = LandingPackedReader(landing_reader_options(settings, decoded=False, tasks=slots))
    start = reader.initialOffset()

    parts = reader.partitions(start, reader.latestOffset(start, ReadMaxFiles(100)))
    assert len(parts) == min(slots, len(FILE_ROWS))
    paths = [p for part in parts for p in part.paths]
    assert sorted(paths) == sorted(str(f) for f in tmp_path.glob("*.parquet"))
    assert all(part.paths == sorted(part.paths) for part in parts)
