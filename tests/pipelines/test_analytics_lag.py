"""Lag between end-offset samples: the pure reference (``pipelines.analytics.lag``) on hand-made
cases of each rule (kafka-lag-exporter's interpolation, Burrow's latest known end), and its one
SQL form (``lag_sql.lag_ctes``, run by DuckDB after the transpiler) agreeing with it on random
sample sets; Burrow's group roll-up in SQL agreeing with ``burrow.group_status``."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from pipelines.analytics.burrow import ERR, OK, REWIND, STALL, STOP, UNKNOWN, WARN, group_status, group_status_sql
from pipelines.analytics.lag import EXACT, INTERPOLATED, NEXT, PREVIOUS, Sample, lag_now, log_end_at, time_lag_ms

# the log end grows 10 offsets a second, sampled every 10 s, from offset 1,000 at t = 100 s
SAMPLES = [Sample(100_000 + i * 10_000, 1_000 + i * 100) for i in range(5)]


@pytest.mark.parametrize(
    ("t", "want"),
    [
        (100_000, (1_000, EXACT)),
        (105_000, (1_050, INTERPOLATED)),
        (109_999, (1_099, INTERPOLATED)),  # floored
        (140_000, (1_400, EXACT)),
        (500_000, (1_400, PREVIOUS)),  # after the newest: Burrow's latest known end
        (50_000, (1_000, NEXT)),  # before the oldest: the oldest, an upper bound of the lag
    ],
)
def test_log_end_between_samples_is_interpolated_in_time(t: int, want: tuple[int, str]) -> None:
    assert log_end_at(SAMPLES, t) == want
    assert log_end_at([], t) is None


def test_time_lag_is_when_the_log_end_passed_the_offset_as_kafka_lag_exporter_predicts() -> None:
    # at t = 140 s the end is 1,400; offset 1,250 was the end at 125 s: 15 s behind
    assert time_lag_ms(SAMPLES, 1_250, 140_000) == 15_000
    assert time_lag_ms(SAMPLES, 1_400, 140_000) == 0  # caught up
    assert time_lag_ms(SAMPLES, 1_250, 120_000) == 0  # at 120 s the newest known end is 1,200
    # below the oldest sample: extrapolated along the oldest..newest line (10/s): 900 at 90 s
    assert time_lag_ms(SAMPLES, 900, 140_000) == 50_000
    assert time_lag_ms(SAMPLES, 900, 90_000) is None  # nothing sampled yet
    assert time_lag_ms([Sample(1, 5), Sample(2, 5)], 3, 10) is None  # flat log: unknown
    assert time_lag_ms(SAMPLES, 1_250, 140_000, record_ms=100_000) == 40_000  # the record's own timestamp


def test_lag_now_takes_the_newest_sample_and_flags_an_offset_above_the_end() -> None:
    now = lag_now(SAMPLES, 1_350)
    assert now == {"log_end_offset": 1_400, "sampled_ms": 140_000, "lag": 50, "lag_ms": 5_000, "ahead_of_end": False}
    ahead = lag_now(SAMPLES, 1_500)
    assert ahead["lag"] == 0 and ahead["ahead_of_end"]


def _duck_lag(samples: list[tuple[str, int, int, int]], rows: list[tuple[str, int, int, int]]) -> list[Any]:
    """lag_ctes over (topic, partition, time, end) samples and (topic, partition, offset, x) rows."""
    import datetime as dt

    import duckdb
    import pyarrow as pa

    from pipelines.analytics.lag_sql import lag_ctes
    from pipelines.analytics.transpile import to_duckdb
    from schemas.end_offsets import PARTITION_END_OFFSETS

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    pe = pa.Table.from_pylist(
        [
            {
                "sampled_at": dt.datetime.fromtimestamp(t / 1000, dt.UTC),
                "topic": tp,
                "partition": p,
                "log_end_offset": e,
            }
            for tp, p, t, e in samples
        ],
        schema=PARTITION_END_OFFSETS.arrow_schema(),
    )
    src = pa.table(
        {
            "id": list(range(len(rows))),
            "group_id": ["g"] * len(rows),
            "topic": [r[0] for r in rows],
            "partition": pa.array([r[1] for r in rows], pa.int32()),
            "offset": pa.array([r[2] for r in rows], pa.int64()),
            "x": pa.array([r[3] for r in rows], pa.int64()),
        }
    )
    con.register("partition_end_offsets", pe)
    con.register("src", src)
    sql = f"WITH {lag_ctes('src', ('id',))} SELECT id, log_end_offset, log_end_method, lag_offsets, lag_ms, ahead_of_end FROM lag_out ORDER BY id"
    return con.sql(to_duckdb(sql)).fetchall()


def test_sql_lag_agrees_with_the_reference_on_random_samples() -> None:
    from pipelines.analytics.lag import end_at_or_after, lag_offsets

    rng = random.Random(17)
    samples: list[tuple[str, int, int, int]] = []
    by_tp: dict[tuple[str, int], list[Sample]] = {}
    for tp in (("a", 0), ("a", 1), ("b", 0)):
        t, e = 1_000_000, rng.randrange(0, 1_000)
        for _ in range(rng.randrange(1, 8)):
            t += rng.randrange(1, 60_000)
            e += rng.choice([0, 0, rng.randrange(1, 5_000)])  # flat stretches too
            samples.append((*tp, t, e))
            by_tp.setdefault(tp, []).append(Sample(t, e))
    rows = []
    for _ in range(300):
        tp = rng.choice([("a", 0), ("a", 1), ("b", 0), ("c", 9)])  # c-9: never sampled
        pts = by_tp.get(tp, [Sample(1_000_000, 0)])
        x = rng.randrange(pts[0].time_ms - 50_000, pts[-1].time_ms + 50_000)
        rows.append((*tp, rng.randrange(0, pts[-1].log_end + 200), x))
    got = _duck_lag(samples, rows)
    for (topic, part, offset, x), (_, end, method, lag, lag_ms, ahead) in zip(rows, got, strict=True):
        pts = by_tp.get((topic, part), [])
        found = log_end_at(pts, x)
        after = end_at_or_after(pts, x)
        want = (
            None if found is None else found[0],
            None if found is None else found[1],
            lag_offsets(None if found is None else found[0], offset),
            time_lag_ms(pts, offset, x),
            after is not None and offset > after,
        )
        assert (end, method, lag, lag_ms, ahead) == want, (topic, part, offset, x, pts)
    assert {INTERPOLATED, PREVIOUS, NEXT, None} <= {r[2] for r in got}  # every rule exercised
    assert any(r[4] for r in got) and any(r[5] for r in got)  # time lags and offsets above the end


def test_sql_group_status_agrees_with_burrows_roll_up() -> None:
    import duckdb

    from pipelines.analytics.transpile import to_duckdb

    con = duckdb.connect()
    statuses = [OK, WARN, STOP, STALL, REWIND, UNKNOWN, None]
    cases = [list(c) for n in range(1, 4) for c in itertools.combinations_with_replacement(statuses, n)]
    for case in cases:
        values = ", ".join("(NULL)" if s is None else f"('{s}')" for s in case)
        sql = to_duckdb(f"SELECT {group_status_sql('status')} AS g FROM (VALUES {values}) AS v(status)")
        assert con.sql(sql).fetchall() == [(group_status(case),)], case
    assert group_status([OK, STOP]) == ERR
