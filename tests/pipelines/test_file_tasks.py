"""How many tasks the batch stages make: one per task slot of the master (no Spark needed)."""

from __future__ import annotations

import os

import pytest

from pipelines.batch.file_tasks import slots_for


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@pytest.mark.parametrize(
    ("master", "default_parallelism", "slots"),
    [
        ("local[2]", 4, 2),  # conf/local.yaml sets spark.default.parallelism 4: not the cores
        ("local[3, 2]", 8, 3),  # local[N, maxFailures]
        ("local", 4, 1),
        ("spark://host:7077", 48, 48),  # a cluster: its default parallelism
        ("yarn", 0, 1),
    ],
)
def test_slots_of_a_master(master: str, default_parallelism: int, slots: int) -> None:
    assert slots_for(master, default_parallelism) == slots


def test_local_star_is_the_cores_this_process_may_use() -> None:
    assert slots_for("local[*]", 99) == _cores()
