"""Assignors: the seed's examples (seed 003), Java client results, and properties."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator_core.simulator.assignors import (
    MemberSubscription,
    assign,
    cooperative_sticky_assign,
    range_assign,
    roundrobin_assign,
    sticky_assign,
)


def _subs(**topics: tuple[str, ...]) -> dict[str, MemberSubscription]:
    return {m: MemberSubscription(t) for m, t in topics.items()}


def test_range_matches_the_seed_example_two_consumers_two_topics_three_partitions() -> None:
    result = range_assign({"t0": 3, "t1": 3}, _subs(C0=("t0", "t1"), C1=("t0", "t1")))
    assert result == {"C0": [("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)], "C1": [("t0", 2), ("t1", 2)]}


def test_roundrobin_deals_sorted_partitions_over_sorted_members() -> None:
    result = roundrobin_assign({"t0": 3, "t1": 3}, _subs(C0=("t0", "t1"), C1=("t0", "t1")))
    assert result == {"C0": [("t0", 0), ("t0", 2), ("t1", 1)], "C1": [("t0", 1), ("t1", 0), ("t1", 2)]}


def test_roundrobin_with_unequal_subscriptions_matches_the_javadoc_example() -> None:
    # RoundRobinAssignor javadoc: C0 [t0], C1 [t0, t1], C2 [t0, t1, t2]; t0 1, t1 2, t2 3 partitions.
    result = roundrobin_assign({"t0": 1, "t1": 2, "t2": 3}, _subs(C0=("t0",), C1=("t0", "t1"), C2=("t0", "t1", "t2")))
    assert result == {"C0": [("t0", 0)], "C1": [("t1", 0)], "C2": [("t1", 1), ("t2", 0), ("t2", 1), ("t2", 2)]}


def test_static_members_sort_before_dynamic_ones_by_instance_id() -> None:
    subs = {
        "a-member": MemberSubscription(("t",)),
        "z-member": MemberSubscription(("t",), group_instance_id="instance-1"),
    }
    result = range_assign({"t": 2}, subs)
    assert result == {"z-member": [("t", 0)], "a-member": [("t", 1)]}


def test_unknown_topic_gets_no_partitions_and_unknown_assignor_is_rejected() -> None:
    assert range_assign({"t": 1}, _subs(C0=("missing",))) == {"C0": []}
    try:
        assign("nope", {}, {})
    except ValueError as exc:
        assert "nope" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("unknown assignor accepted")


def test_sticky_keeps_owned_partitions_when_a_member_joins() -> None:
    before = {"C0": [("t", 0), ("t", 1), ("t", 2)], "C1": [("t", 3), ("t", 4), ("t", 5)]}
    subs = {m: MemberSubscription(("t",), tuple(tps), generation=1) for m, tps in before.items()}
    subs["C2"] = MemberSubscription(("t",))
    after = sticky_assign({"t": 6}, subs)
    assert all(len(v) == 2 for v in after.values())
    kept = sum(len(set(after[m]) & set(before[m])) for m in before)
    assert kept == 4  # only one partition moves away from each old member


def test_cooperative_sticky_never_hands_out_a_partition_another_member_still_owns() -> None:
    before = {"C0": [("t", 0), ("t", 1), ("t", 2)], "C1": [("t", 3), ("t", 4), ("t", 5)]}
    subs = {m: MemberSubscription(("t",), tuple(tps), generation=1) for m, tps in before.items()}
    subs["C2"] = MemberSubscription(("t",))
    first = cooperative_sticky_assign({"t": 6}, subs)
    assert first["C2"] == []  # the moving partitions are revoked first
    # second round: owners revoked, the new member gets them
    subs2 = {m: MemberSubscription(("t",), tuple(first[m]), generation=2) for m in first}
    second = cooperative_sticky_assign({"t": 6}, subs2)
    assert sorted(len(v) for v in second.values()) == [2, 2, 2]


topics_strategy = st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.integers(1, 7), min_size=1)


@settings(max_examples=150, deadline=None)
@given(topics=topics_strategy, n_members=st.integers(1, 6), name=st.sampled_from(["range", "roundrobin", "sticky"]))
def test_every_partition_is_owned_exactly_once_and_identical_subscriptions_balance(
    topics: dict[str, int], n_members: int, name: str
) -> None:
    subs = {f"m{i}": MemberSubscription(tuple(sorted(topics))) for i in range(n_members)}
    result = assign(name, topics, subs)
    owned = [tp for tps in result.values() for tp in tps]
    assert sorted(owned) == sorted((t, p) for t, n in topics.items() for p in range(n))
    counts = [len(v) for v in result.values()]
    if name == "range":
        for t in topics:  # range balances each topic, not the total
            per_topic = [sum(1 for tp in v if tp[0] == t) for v in result.values()]
            assert max(per_topic) - min(per_topic) <= 1
    else:
        assert max(counts) - min(counts) <= 1


@settings(max_examples=150, deadline=None)
@given(partitions=st.integers(1, 24), before=st.integers(1, 6), leaving=st.integers(0, 3), joining=st.integers(0, 3))
def test_sticky_moves_the_minimum_number_of_partitions(
    partitions: int, before: int, leaving: int, joining: int
) -> None:
    topics = {"t": partitions}
    start = sticky_assign(topics, {f"m{i}": MemberSubscription(("t",)) for i in range(before)})
    survivors = [f"m{i}" for i in range(min(leaving, before - 1), before)]
    subs = {m: MemberSubscription(("t",), tuple(start[m]), generation=1) for m in survivors}
    for j in range(joining):
        subs[f"n{j}"] = MemberSubscription(("t",))
    after = sticky_assign(topics, subs)
    n = len(subs)
    lo, extra = divmod(partitions, n)
    # The most partitions that can stay put: members with the most owned get the ceil slots.
    owned = sorted((len(start[m]) for m in survivors), reverse=True) + [0] * joining
    keepable = sum(min(o, lo + (1 if i < extra else 0)) for i, o in enumerate(owned))
    kept = sum(len(set(after[m]) & set(start[m])) for m in survivors)
    assert kept == keepable
    counts = [len(v) for v in after.values()]
    assert max(counts) - min(counts) <= 1
