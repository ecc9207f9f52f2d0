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


def _modern(state: str, group_type: str, subs: list[str] | None) -> dict[str, object]:
    return {**_state(state, subs), "group_type": group_type, "protocol_type": group_type}


def test_a_kip848_consumer_group_empty_expires_from_each_commit_not_its_state_timestamp() -> None:
    """Kafka 4's ConsumerGroup.offsetExpirationCondition: the commit timestamp is the base in every
    state; the row's group_type decides the rule (a classic Empty group's base is its state time)."""
    assert due_times(_modern("Empty", "consumer", None), OFFSETS, R) == {("a", 0): MS0 + R, ("b", 1): MS0 + 60_000 + R}


def test_a_streams_group_in_a_kafka4_only_state_is_forecast_by_the_streams_rule() -> None:
    """NotReady (and Assigning, Reconciling) are live states a GroupState cannot name: the topics
    its topology reads never expire while it lives, the others from their commit time."""
    for state in ("NotReady", "Assigning", "Reconciling", "Stable"):
        assert due_times(_modern(state, "streams", ["a"]), OFFSETS, R) == {("a", 0): None, ("b", 1): MS0 + 60_000 + R}
    assert due_times(_modern("Empty", "streams", None), OFFSETS, R) == {("a", 0): MS0 + R, ("b", 1): MS0 + 60_000 + R}
