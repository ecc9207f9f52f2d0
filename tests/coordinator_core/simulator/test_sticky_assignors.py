"""The sticky assignors against Kafka's own test scenarios (AbstractStickyAssignorTest,
StickyAssignorTest, CooperativeStickyAssignorTest: the facts, ported; member and topic names as
in Kafka's tests, because the member order is ``java.util.HashMap``'s)."""

from __future__ import annotations

import itertools

import pytest

from coordinator_core.codec.records import Subscription, TopicPartitions
from coordinator_core.simulator.assignors import (
    MemberSubscription,
    abstract_sticky_assign,
    cooperative_sticky_assign,
    decode_sticky_user_data,
    encode_cooperative_user_data,
    encode_sticky_user_data,
    java_hashmap_order,
    member_data,
    sticky_assign,
)

TP = tuple[str, int]


def sub(topics: tuple[str, ...], owned: list[TP], generation: int | None) -> MemberSubscription:
    """``buildSubscriptionV2Above``: the owned partitions and the same generation everywhere."""
    return MemberSubscription(topics, tuple(owned), None, generation, generation)


def valid_and_balanced(result: dict[str, list[TP]], ppt: dict[str, int], subs: dict[str, MemberSubscription]) -> None:
    every = [tp for tps in result.values() for tp in tps]
    assert len(every) == len(set(every))
    for m, tps in result.items():
        assert all(tp[0] in subs[m].topics for tp in tps)
    subscribed = {t for s in subs.values() for t in s.topics if t in ppt}
    assert set(every) == {(t, q) for t in subscribed for q in range(ppt[t])}


def fully_balanced(result: dict[str, list[TP]]) -> bool:
    sizes = [len(v) for v in result.values()]
    return max(sizes) - min(sizes) <= 1


def test_members_are_visited_in_java_hashmap_order_not_sorted() -> None:
    # String.hashCode spread over a 16-slot table: consumer3, consumer2, consumer1
    assert java_hashmap_order(["consumer1", "consumer2", "consumer3"]) == ["consumer3", "consumer2", "consumer1"]
    # the order does not depend on insertion order unless two keys share a bucket
    assert java_hashmap_order(["consumer3", "consumer1", "consumer2"]) == java_hashmap_order(
        ["consumer1", "consumer2", "consumer3"]
    )


def test_a_member_owning_min_quota_keeps_it_and_gets_one_more_when_max_quota_is_expected() -> None:
    ppt = {"topic1": 2, "topic2": 3}
    both = ("topic1", "topic2")
    subs = {
        "consumer1": sub(both, [("topic1", 0), ("topic2", 1)], 1),
        "consumer2": sub(both, [("topic1", 1), ("topic2", 2)], 1),
    }
    r = abstract_sticky_assign(ppt, subs)
    assert sorted(r.assignment["consumer1"]) == [("topic1", 0), ("topic2", 0), ("topic2", 1)]
    assert sorted(r.assignment["consumer2"]) == [("topic1", 1), ("topic2", 2)]
    assert r.transferring == {}


def test_only_as_many_members_keep_max_quota_as_the_remainder_allows_the_first_in_hashmap_order() -> None:
    ppt = {"topic1": 2, "topic2": 2}
    both = ("topic1", "topic2")
    subs = {
        "consumer1": sub(both, [("topic1", 0), ("topic2", 0)], 1),
        "consumer2": sub(both, [("topic1", 1), ("topic2", 1)], 1),
        "consumer3": sub(both, [], 1),
    }
    r = abstract_sticky_assign(ppt, subs)
    assert r.assignment == {
        "consumer1": [("topic1", 0)],
        "consumer2": [("topic1", 1), ("topic2", 1)],
        "consumer3": [("topic2", 0)],
    }
    assert r.transferring == {("topic2", 0): "consumer3"}


def test_members_under_min_quota_keep_everything_and_are_filled_round_robin_by_member_id() -> None:
    ppt = {"topic1": 2, "topic2": 3}
    both = ("topic1", "topic2")
    subs = {
        "consumer1": sub(both, [("topic1", 0)], 1),
        "consumer2": sub(both, [("topic1", 1)], 1),
        "consumer3": sub(both, [], 1),
    }
    r = abstract_sticky_assign(ppt, subs)
    assert {m: sorted(v) for m, v in r.assignment.items()} == {
        "consumer1": [("topic1", 0), ("topic2", 1)],
        "consumer2": [("topic1", 1), ("topic2", 2)],
        "consumer3": [("topic2", 0)],
    }
    assert r.transferring == {}


def test_all_members_reaching_their_quota_are_filled() -> None:
    subs = {
        "consumer1": sub(("topic",), [("topic", 0), ("topic", 1)], 1),
        "consumer2": sub(("topic",), [("topic", 2)], 1),
        "consumer3": sub(("topic",), [], 1),
    }
    r = abstract_sticky_assign({"topic": 4}, subs)
    assert {m: sorted(v) for m, v in r.assignment.items()} == {
        "consumer1": [("topic", 0), ("topic", 1)],
        "consumer2": [("topic", 2)],
        "consumer3": [("topic", 3)],
    }


def test_a_partition_claimed_twice_in_one_generation_is_kept_by_neither_claimant() -> None:
    subs = {
        "consumer1": sub(("topic",), [("topic", 0), ("topic", 1)], 1),
        "consumer2": sub(("topic",), [("topic", 0), ("topic", 2)], 1),
        "consumer3": sub(("topic",), [], 1),
    }
    r = abstract_sticky_assign({"topic": 3}, subs)
    assert r.assignment == {"consumer1": [("topic", 1)], "consumer2": [("topic", 2)], "consumer3": [("topic", 0)]}
    assert r.transferring == {("topic", 0): "consumer3"}
    # cooperative: the doubly claimed partition may still be consumed by both, so it waits a round
    coop = cooperative_sticky_assign({"topic": 3}, subs)
    assert coop == {"consumer1": [("topic", 1)], "consumer2": [("topic", 2)], "consumer3": []}


def test_a_partition_claimed_in_two_generations_goes_to_the_higher_generation() -> None:
    both = ("topic", "topic2")
    owned = [("topic", 0), ("topic", 2), ("topic2", 1)]
    subs = {"consumer1": sub(both, owned, 10), "consumer2": sub(both, owned, 9)}
    r = abstract_sticky_assign({"topic": 3, "topic2": 3}, subs)
    assert set(r.assignment["consumer1"]) == set(owned)
    assert set(r.assignment["consumer2"]) == {("topic", 1), ("topic2", 0), ("topic2", 2)}
    assert r.transferring == {}


def test_partitions_go_to_the_highest_of_three_generations() -> None:
    t3 = ("topic", "topic2", "topic3")
    subs = {
        "consumer1": sub(t3, [("topic", 0), ("topic2", 0), ("topic3", 0)], 10),
        "consumer2": sub(t3, [("topic", 1), ("topic2", 1), ("topic3", 1)], 9),
        "consumer3": sub(t3, [("topic2", 1), ("topic3", 0), ("topic3", 2)], 8),
    }
    r = abstract_sticky_assign({"topic": 3, "topic2": 3, "topic3": 3}, subs)
    assert set(r.assignment["consumer1"]) == {("topic", 0), ("topic2", 0), ("topic3", 0)}
    assert set(r.assignment["consumer2"]) == {("topic", 1), ("topic2", 1), ("topic3", 1)}
    assert set(r.assignment["consumer3"]) == {("topic", 2), ("topic2", 2), ("topic3", 2)}
    assert r.transferring == {}


def test_a_stale_generations_claims_are_dropped_only_where_they_conflict() -> None:
    both = ("topic", "topic2")
    subs = {
        "consumer1": sub(both, [("topic", 0), ("topic2", 1), ("topic", 1)], 10),
        "consumer2": sub(both, [("topic", 0), ("topic2", 1), ("topic2", 2)], 8),
    }
    r = abstract_sticky_assign({"topic": 3, "topic2": 3}, subs)
    assert set(r.assignment["consumer1"]) == {("topic", 0), ("topic2", 1), ("topic", 1)}
    assert set(r.assignment["consumer2"]) == {("topic", 2), ("topic2", 2), ("topic2", 0)}


@pytest.mark.parametrize("order", list(itertools.permutations((1, 2, 3))))
def test_unequal_subscriptions_with_one_partition_claimed_in_three_generations_stay_valid(
    order: tuple[int, int, int],
) -> None:
    subs = {
        "consumer1": sub(("topic",), [("topic", 0), ("topic", 2)], order[0]),
        "consumer2": sub(("topic",), [("topic", 1), ("topic", 2), ("topic", 3)], order[1]),
        "consumer3": sub(("topic",), [("topic", 2), ("topic", 4), ("topic", 5)], order[2]),
        "consumer4": sub(("topic1",), [("topic1", 0)], 2),
    }
    ppt = {"topic": 6, "topic1": 1}
    r = abstract_sticky_assign(ppt, subs)
    assert r.transferring is None  # the general builder
    valid_and_balanced(r.assignment, ppt, subs)
    assert all(1 <= len(v) <= 2 for v in r.assignment.values())


@pytest.mark.parametrize("equal", [True, False])
def test_conflicting_previous_generations_keep_each_member_within_what_it_owned(equal: bool) -> None:
    t = {"topic": 4, "topic2": 4, "topic3": 4}
    every = ("topic", "topic2", "topic3")
    c1_topics = every if equal else ("topic",)
    c2_topics = every if equal else ("topic", "topic2")
    c1 = (
        [("topic", 0), ("topic", 1), ("topic", 2), ("topic2", 2), ("topic2", 3), ("topic3", 0)]
        if equal
        else [("topic", q) for q in range(4)]
    )
    c2 = [("topic", 0), ("topic", 1), ("topic2", 0), ("topic2", 1), ("topic2", 2), ("topic2", 3)]
    c3 = [("topic", 2), ("topic", 3), ("topic3", 0), ("topic3", 1), ("topic3", 2), ("topic3", 3)]
    subs = {"consumer1": sub(c1_topics, c1, 1), "consumer2": sub(c2_topics, c2, 2), "consumer3": sub(every, c3, 2)}
    r = sticky_assign(t, subs)
    assert [len(r[m]) for m in ("consumer1", "consumer2", "consumer3")] == [4, 4, 4]
    assert set(r["consumer2"]) <= set(c2) and set(r["consumer3"]) <= set(c3)
    valid_and_balanced(r, t, subs)


def test_three_rounds_of_generations_keep_the_owned_partitions_and_never_assign_twice() -> None:
    t = {"topic": 6, "topic2": 6}
    every = ("topic", "topic2")
    first = sticky_assign(t, {m: MemberSubscription(every) for m in ("consumer1", "consumer2", "consumer3")})
    assert all(len(v) == 4 for v in first.values())
    second = sticky_assign(
        t, {"consumer1": sub(every, first["consumer1"], 1), "consumer2": sub(every, first["consumer2"], 1)}
    )
    assert set(first["consumer1"]) <= set(second["consumer1"]) and set(first["consumer2"]) <= set(second["consumer2"])
    third_subs = {"consumer2": sub(every, second["consumer2"], 2), "consumer3": sub(every, first["consumer3"], 1)}
    third = sticky_assign(t, third_subs)
    assert len(third["consumer2"]) == len(third["consumer3"]) == 6
    assert not set(third["consumer2"]) & set(third["consumer3"])


def test_kept_partitions_are_chosen_by_partition_then_topic_not_by_topic() -> None:
    # one member keeps minQuota = 2 of the 4 it owns: (topic-a, 0) and (topic-b, 0), not a-0 and a-1
    owned = [("topic-a", 0), ("topic-a", 1), ("topic-b", 0), ("topic-b", 1)]
    both = ("topic-a", "topic-b")
    subs = {"consumer1": sub(both, owned, 3), "consumer2": sub(both, [], 3)}
    r = abstract_sticky_assign({"topic-a": 2, "topic-b": 2}, subs)
    assert sorted(r.assignment["consumer1"]) == [("topic-a", 0), ("topic-b", 0)]


# ---------------------------------------------------------------------------------------------
# memberData: StickyAssignor's user data, CooperativeStickyAssignor's generation
# ---------------------------------------------------------------------------------------------
def test_sticky_user_data_v1_round_trips_and_v0_has_no_generation() -> None:
    owned = [("topic1", 0), ("topic2", 1), ("topic1", 3)]
    data = encode_sticky_user_data(owned, 7)
    parts, generation = decode_sticky_user_data(data)
    assert sorted(parts) == sorted(owned) and generation == 7
    v0 = encode_sticky_user_data(owned, None)
    assert decode_sticky_user_data(v0)[1] is None
    assert decode_sticky_user_data(b"\x00\x00") == ((), -1)  # unreadable: nothing owned, generation -1
    assert decode_sticky_user_data(None) == ((), None)


def test_the_eager_sticky_assignor_reads_ownership_from_user_data_not_from_the_subscription() -> None:
    s = Subscription(
        ("topic",),
        encode_sticky_user_data([("topic1", 0), ("topic2", 1)], 0),
        (TopicPartitions("topic", (5,)),),
        1,
        version=2,
    )
    md = member_data("sticky", s)
    assert (md.owned_partitions, md.generation, md.subscription_generation) == ((("topic1", 0), ("topic2", 1)), 0, 1)


def test_the_cooperative_assignor_reads_the_subscriptions_generation_then_its_user_data() -> None:
    v2 = Subscription(("topic",), encode_cooperative_user_data(0), (TopicPartitions("topic", (1,)),), 1, version=2)
    assert (
        member_data("cooperative-sticky", v2).owned_partitions,
        member_data("cooperative-sticky", v2).generation,
    ) == ((("topic", 1),), 1)
    v1 = Subscription(("topic",), encode_cooperative_user_data(4), (TopicPartitions("topic", (1,)),), version=1)
    assert member_data("cooperative-sticky", v1).generation == 4
    assert member_data("cooperative-sticky", Subscription(("topic",))).generation is None


# ---------------------------------------------------------------------------------------------
# the simulated eager sticky client
# ---------------------------------------------------------------------------------------------
def test_an_eager_sticky_client_sends_its_previous_assignment_and_generation_in_user_data_and_keeps_it() -> None:
    from coordinator_core.codec.consumer_protocol import decode_assignment, decode_subscription
    from coordinator_core.codec.records import GroupMetadataValue
    from coordinator_core.simulator import Scenario

    r = Scenario.from_dict(
        {
            "until_ms": 60_000,
            "coordinator": {"initial_rebalance_delay_ms": 0},
            "topics": {"t": 6},
            "client_defaults": {"group_id": "g", "topics": ["t"], "assignors": ["sticky"], "enable_auto_commit": False},
            "clients": {"c1": {}, "c2": {}, "c3": {}},
            "timeline": [
                {"at_ms": 0, "client": "c1", "action": "start"},
                {"at_ms": 0, "client": "c2", "action": "start"},
                {"at_ms": 20_000, "client": "c3", "action": "start"},
            ],
        }
    ).run()
    values = [x.value for x in r.records if isinstance(x.value, GroupMetadataValue) and x.value.members]
    first, last = values[0], values[-1]
    before = {
        m.client_id: {
            (tp.topic, q) for tp in decode_assignment(m.assignment).assigned_partitions for q in tp.partitions
        }
        for m in first.members
    }
    after = {
        m.client_id: {
            (tp.topic, q) for tp in decode_assignment(m.assignment).assigned_partitions for q in tp.partitions
        }
        for m in last.members
    }
    # the members of generation 1 rejoined with user data v1: their assignment and generation 1
    rejoined = {
        m.client_id: decode_sticky_user_data(decode_subscription(m.subscription).user_data) for m in last.members
    }
    assert {c: (set(p), g) for c, (p, g) in rejoined.items() if c != "c3"} == {c: (before[c], 1) for c in before}
    assert rejoined["c3"] == ((), None)  # a new process has no previous assignment
    assert all(len(after[c] & before[c]) == 2 for c in before)  # only one partition each moved to c3
    assert len(after["c3"]) == 2


def test_random_subscriptions_ownerships_and_generations_give_valid_balanced_assignments() -> None:
    """``testReassignmentWithRandomSubscriptionsAndChanges``' checks (``verifyValidityAndBalance``)
    over random claims, including partitions of topics a member no longer subscribes to."""
    import random

    rng = random.Random(13)
    for _ in range(600):
        topics = {f"t{i}": rng.randint(1, 8) for i in range(rng.randint(1, 4))}
        names = list(topics)
        every = [(t, q) for t, c in topics.items() for q in range(c)]
        equal = rng.random() < 0.5
        subs: dict[str, MemberSubscription] = {}
        for _ in range(rng.randint(1, 7)):
            ts = tuple(names) if equal else tuple(sorted(rng.sample(names, rng.randint(1, len(names)))))
            owned = rng.sample(every, rng.randint(0, min(len(every), 6)))
            subs[f"consumer{rng.randint(0, 10**6)}"] = sub(ts, owned, rng.choice([None, 1, 2, 3]))
        result = sticky_assign(topics, subs)
        valid_and_balanced(result, topics, subs)
        for a in result:
            for b in result:
                assert not (len(result[a]) + 1 < len(result[b]) and any(tp[0] in subs[a].topics for tp in result[b]))
        coop = cooperative_sticky_assign(topics, subs)
        assert all(set(coop[m]) <= set(result[m]) for m in subs)
