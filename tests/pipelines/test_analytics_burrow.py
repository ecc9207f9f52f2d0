"""Burrow's partition rules: the pure reference (``pipelines.analytics.burrow``) gives the
documented status for a hand-made window of every rule, and the Spark SQL expression
(``burrow_status_sql``, higher-order functions over an array window) agrees on all of them."""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.analytics.burrow import OK, REWIND, STALL, STOP, UNKNOWN, WARN, Commit, evaluate

S = 60_000  # one commit a minute


def _w(offsets: list[int], lags: list[int | None], start: int = 0, step: int = S) -> list[Commit]:
    return [Commit(o, start + i * step, lag) for i, (o, lag) in enumerate(zip(offsets, lags, strict=True))]


# (name, window, now_ms, current_lag or None = last lag, expected)
CASES: list[tuple[str, list[Commit], int, int | None, str]] = [
    ("lag_reaches_zero_is_ok", _w([10, 20, 30, 40], [5, 0, 7, 9]), 3 * S, None, OK),
    ("zero_current_lag_is_ok", _w([10, 20, 30, 40], [5, 6, 7, 0]), 3 * S, None, OK),
    ("offsets_going_back_is_rewind", _w([10, 20, 15, 40], [5, 6, 7, 9]), 3 * S, None, REWIND),
    ("no_commit_for_longer_than_the_window_is_stop", _w([10, 20, 30, 40], [5, 4, 3, 2]), 3 * S + 3 * S + 1, None, STOP),
    ("window_span_exactly_equal_is_not_stop", _w([10, 20, 30, 40], [5, 4, 3, 2]), 6 * S, None, OK),
    ("same_offset_with_lag_is_stall", _w([40, 40, 40, 40], [5, 6, 7, 9]), 3 * S, None, STALL),
    ("lag_never_decreasing_is_warn", _w([10, 20, 30, 40], [5, 5, 7, 9]), 3 * S, None, WARN),
    ("lag_decreasing_somewhere_is_ok", _w([10, 20, 30, 40], [5, 8, 7, 9]), 3 * S, None, OK),
    ("rewind_wins_over_stop", _w([10, 20, 15, 40], [5, 6, 7, 9]), 100 * S, None, REWIND),
    ("stop_wins_over_stall", _w([40, 40, 40], [5, 6, 7]), 10 * S, None, STOP),
    ("unknown_lag_is_unknown", _w([10, 20, 30], [5, None, 7]), 2 * S, None, UNKNOWN),
    ("unknown_lag_still_reports_rewind", _w([10, 5, 30], [None, None, None]), 2 * S, None, REWIND),
    ("explicit_zero_current_lag_overrides_window", _w([10, 20, 30], [5, 6, 7]), 2 * S, 0, OK),
    ("single_commit_with_lag_is_stall", _w([10], [5]), 0, None, STALL),
    ("empty_window_is_unknown", [], 0, None, UNKNOWN),
]


@pytest.mark.parametrize(("name", "window", "now", "cur", "expected"), CASES, ids=[c[0] for c in CASES])
def test_reference_evaluator_follows_burrows_rules(
    name: str, window: list[Commit], now: int, cur: int | None, expected: str
) -> None:
    assert evaluate(window, now, cur) == expected


@pytest.mark.spark
def test_spark_sql_status_agrees_with_the_reference_on_every_rule(spark: Any) -> None:
    from pyspark.sql import types as T

    from pipelines.analytics.views import burrow_status_sql

    item = T.StructType(
        [
            T.StructField("t", T.LongType()),
            T.StructField("lo", T.LongType()),
            T.StructField("o", T.LongType()),
            T.StructField("lag", T.LongType()),
        ]
    )
    schema = T.StructType(
        [
            T.StructField("name", T.StringType()),
            T.StructField("win", T.ArrayType(item)),
            T.StructField("now", T.LongType()),
            T.StructField("cur", T.LongType()),
        ]
    )
    rows = []
    for name, window, now, cur, _ in CASES:
        win = [(c.time_ms, i, c.offset, c.lag) for i, c in enumerate(window)]
        rows.append((name, win, now, cur if cur is not None else (window[-1].lag if window else None)))
    df = spark.createDataFrame(rows, schema)
    got = {
        r["name"]: r["status"]
        for r in df.selectExpr("name", f"{burrow_status_sql('win', 'now', 'cur')} AS status").collect()
    }
    want = {name: evaluate(window, now, cur) for name, window, now, cur, _ in CASES}
    assert got == want
    assert set(want.values()) == {OK, WARN, STOP, STALL, REWIND, UNKNOWN}
