"""The stream sink's MERGE source of the decoded tables: one row per log position (no Spark)."""

from __future__ import annotations

import pyarrow as pa

from pipelines.stream.sinks import first_per_key

KEYS = ("coordinator_partition", "log_offset")


def _table(parts: list[int | None], offsets: list[int], tag: list[str]) -> pa.Table:
    return pa.table(
        {"coordinator_partition": pa.array(parts, pa.int32()), "log_offset": pa.array(offsets, pa.int64()), "tag": tag}
    )


def test_unique_positions_are_the_table_itself() -> None:
    t = _table([3, 0, 3, 49], [7, 7, 8, (1 << 40) + 5], ["a", "b", "c", "d"])
    assert first_per_key(t, KEYS) is t


def test_a_repeated_position_keeps_its_first_row_in_table_order() -> None:
    t = _table([0, 1, 0, 0, 1], [5, 5, 6, 5, 5], ["first", "p1", "x", "again", "p1 again"])
    assert first_per_key(t, KEYS).column("tag").to_pylist() == ["first", "p1", "x"]


def test_keys_that_cannot_be_packed_are_grouped_all_the_same() -> None:
    negative = _table([0, 0, 0], [-1, -1, 2], ["a", "b", "c"])
    assert first_per_key(negative, KEYS).column("tag").to_pylist() == ["a", "c"]
    null = _table([None, None, 1], [4, 4, 4], ["a", "b", "c"])
    assert first_per_key(null, KEYS).column("tag").to_pylist() == ["a", "c"]
    wide = _table([1 << 30, 1 << 30, 0], [(1 << 62), (1 << 62), 1], ["a", "b", "c"])
    assert first_per_key(wide, KEYS).column("tag").to_pylist() == ["a", "c"]
    assert first_per_key(wide.slice(1), KEYS).column("tag").to_pylist() == ["b", "c"]
