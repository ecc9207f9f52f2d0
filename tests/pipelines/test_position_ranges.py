"""``table_ranges_arrow`` (the ingest's proof that files hold no position twice) against a plain
Python reading of its rule: per log partition, smallest and largest offset, rows, and whether
an offset occurs twice; rows ordered by topic (first appearance) then partition as unsigned."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.records.positions import table_ranges_arrow


def _reference(rows: list[tuple[str, int, int]]) -> list[dict[str, Any]]:
    topics: list[str] = []
    for t, _, _ in rows:
        if t not in topics:
            topics.append(t)
    by: dict[tuple[str, int], list[int]] = {}
    for t, p, o in rows:
        by.setdefault((t, p), []).append(o)
    keys = sorted(by, key=lambda k: (topics.index(k[0]), k[1] & 0xFFFFFFFF))
    return [
        {
            "topic": t,
            "partition": p,
            "first": min(by[(t, p)]),
            "last": max(by[(t, p)]),
            "rows": len(by[(t, p)]),
            "repeats": len(set(by[(t, p)])) < len(by[(t, p)]),
        }
        for t, p in keys
    ]


def _table(rows: list[tuple[str, int, int]]) -> pa.Table:
    return pa.table(
        {
            "topic": pa.array([r[0] for r in rows], pa.string()),
            "partition": pa.array([r[1] for r in rows], pa.int32()),
            "offset": pa.array([r[2] for r in rows], pa.int64()),
        }
    )


_ROWS = st.lists(
    st.tuples(
        st.sampled_from(["__consumer_offsets", "other"]),
        st.one_of(st.integers(0, 60), st.integers(-(2**31), 2**31 - 1)),
        st.one_of(st.integers(0, 50), st.integers(-(2**63), 2**63 - 1)),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(_ROWS)
def test_table_ranges_are_each_log_partitions_range_rows_and_repeats(rows: list[tuple[str, int, int]]) -> None:
    assert table_ranges_arrow(_table(rows)).to_pylist() == _reference(rows)


@settings(max_examples=100, deadline=None)
@given(_ROWS)
def test_table_ranges_of_one_topic_in_several_chunks_are_the_whole_tables(rows: list[tuple[str, int, int]]) -> None:
    single = [("__consumer_offsets", p, o) for _, p, o in rows]
    half = len(single) // 2
    chunked = pa.concat_tables([_table(single[:half]), _table(single[half:])])
    assert table_ranges_arrow(chunked).to_pylist() == _reference(single)


def test_table_ranges_of_no_rows_are_empty() -> None:
    assert table_ranges_arrow(_table([])).num_rows == 0
