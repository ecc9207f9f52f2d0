"""How many tasks the batch stages make: one per task slot of the master (no Spark needed)."""

from __future__ import annotations

import pytest

from pipelines.batch.file_tasks import slots_for


@pytest.mark.parametrize(
    ("master", "default_parallelism", "slots"),
    [
        ("local[2]", 4, 2),  # conf/local.yaml sets spark.default.parallelism 4: not the cores
        ("local[3, 2]", 8, 3),  # local[N, maxFailures]
        ("local[*]", 4, 6),  # the JVM's available processors (here 6), not the default parallelism
        ("local", 4, 1),
        ("spark://host:7077", 48, 48),  # a cluster: its default parallelism
        ("yarn", 0, 1),
    ],
)
def test_slots_of_a_master(master: str, default_parallelism: int, slots: int) -> None:
    assert slots_for(master, default_parallelism, lambda: 6) == slots


def test_the_cores_are_asked_only_for_local_star() -> None:
    def cores() -> int:
        raise AssertionError("not asked")

    assert slots_for("local[4]", 2, cores) == 4
    assert slots_for("spark://h:7077", 8, cores) == 8
