"""The broker's assignors for consumer groups (KIP-848): ``uniform`` (Kafka's default) and the
sticky ``range``; the examples are ``RangeAssignorTest`` / ``OptimizedUniformAssignmentBuilderTest``
scenarios (group-coordinator module), the properties are what both promise."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator_core.simulator.assignors import MemberSubscription, server_range_assign, uniform_assign


def _owned(**owned: list[tuple[str, int]]) -> dict[str, MemberSubscription]:
    return {m: MemberSubscription(("t1",), tuple(tps)) for m, tps in owned.items()}


def test_server_range_gives_consecutive_ranges_on_a_first_assignment() -> None:
    # RangeAssignorTest.testFirstAssignmentTwoMembersTwoTopicsSameSubscriptions
    subs = {m: MemberSubscription(("t1", "t3")) for m in ("A", "B")}
    assert server_range_assign({"t1": 3, "t3": 2}, subs) == {
        "A": [("t1", 0), ("t1", 1), ("t3", 0)],
        "B": [("t1", 2), ("t3", 1)],
    }


def test_server_range_keeps_each_members_lowest_partitions_when_a_member_joins() -> None:
    # RangeAssignorTest.testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics
    subs = _owned(A=[("t1", 0), ("t1", 1)], B=[("t1", 2)], C=[])
    assert server_range_assign({"t1": 3}, subs) == {"A": [("t1", 0)], "B": [("t1", 2)], "C": [("t1", 1)]}


def test_uniform_is_sticky_and_balanced_when_a_member_joins() -> None:
    subs = _owned(A=[("t1", p) for p in range(0, 3)], B=[("t1", p) for p in range(3, 6)], C=[])
    result = uniform_assign({"t1": 6}, subs)
    assert [len(result[m]) for m in "ABC"] == [2, 2, 2]
    assert set(result["A"]) <= {("t1", p) for p in range(0, 3)}
    assert set(result["B"]) <= {("t1", p) for p in range(3, 6)}


def test_uniform_keeps_the_extra_partition_of_a_member_that_had_more() -> None:
    # 7 partitions over 3 members: quota 2, one member keeps a third
    subs = _owned(A=[("t1", p) for p in range(0, 4)], B=[("t1", p) for p in range(4, 7)], C=[])
    result = uniform_assign({"t1": 7}, subs)
    assert sorted(len(v) for v in result.values()) == [2, 2, 3]
    assert result["A"] == [("t1", 0), ("t1", 1), ("t1", 2)]  # the extra goes to the first in order


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 6),
    st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(1, 12), min_size=1),
    st.randoms(use_true_random=False),
)
def test_server_assignors_assign_every_subscribed_partition_once_and_balance_it(
    n: int, topics: dict[str, int], rnd: random.Random
) -> None:
    members = [f"m{i}" for i in range(n)]
    every = [(t, p) for t, c in topics.items() for p in range(c)]
    owned: dict[str, list[tuple[str, int]]] = {m: [] for m in members}
    for tp in every:  # a random previous target (disjoint)
        if rnd.random() < 0.7:
            owned[rnd.choice(members)].append(tp)
    subs = {m: MemberSubscription(tuple(sorted(topics)), tuple(sorted(owned[m]))) for m in members}
    for fn in (uniform_assign, server_range_assign):
        result = fn(topics, subs)
        got = [tp for m in members for tp in result[m]]
        assert sorted(got) == sorted(every), fn.__name__
    sizes = [len(v) for v in uniform_assign(topics, subs).values()]
    assert max(sizes) - min(sizes) <= 1
    for t in topics:  # range: balanced per topic
        per = [sum(1 for tp in v if tp[0] == t) for v in server_range_assign(topics, subs).values()]
        assert max(per) - min(per) <= 1
