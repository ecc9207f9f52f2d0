"""Expiry forecasts from gold rows (``pipelines.analytics.forecast``) are the core's due times:
an Empty consumer group expires from its current_state_timestamp, a Stable consumer group only
its unsubscribed topics (KAFKA-13636 rules), explicit v1 expire timestamps win."""

from __future__ import annotations

import pandas as pd

from pipelines.analytics.forecast import due_times

R = 3_600_000
T0 = pd.Timestamp("2026-01-01T00:00:00Z")
MS0 = 1_767_225_600_000


def _state(state: str, subs: list[str] | None) -> dict[str, object]:
    return {
        "group_id": "g",
        "state": state,
        "generation": 3,
        "protocol_type": "consumer",
        "current_state_timestamp": T0 + pd.Timedelta(minutes=10),
        "state_timestamp": T0 + pd.Timedelta(minutes=10),
        "subscribed_topics": subs,
    }


OFFSETS = [
    {"topic": "a", "partition": 0, "offset": 5, "commit_timestamp": T0, "expire_timestamp": None},
    {
        "topic": "b",
        "partition": 1,
        "offset": 7,
        "commit_timestamp": T0 + pd.Timedelta(minutes=1),
        "expire_timestamp": pd.NaT,
    },
]


def test_empty_group_expires_from_its_state_timestamp() -> None:
    assert due_times(_state("Empty", None), OFFSETS, R) == {("a", 0): MS0 + 600_000 + R, ("b", 1): MS0 + 600_000 + R}


def test_stable_consumer_group_expires_only_unsubscribed_topics_from_commit_time() -> None:
    assert due_times(_state("Stable", ["a"]), OFFSETS, R) == {("a", 0): None, ("b", 1): MS0 + 60_000 + R}


def test_older_rules_keep_a_stable_groups_offsets() -> None:
    assert due_times(_state("Stable", ["a"]), OFFSETS, R, "2.1-2.3") == {("a", 0): None, ("b", 1): None}


def test_explicit_expire_timestamp_wins_for_an_eligible_offset() -> None:
    rows = [dict(OFFSETS[0], expire_timestamp=T0 + pd.Timedelta(hours=5))]
    assert due_times(_state("Empty", None), rows, R) == {("a", 0): MS0 + 5 * R}
