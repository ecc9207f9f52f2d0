"""Client-side partition assignors, as pure functions (seed 003; Kafka's Java client).

Rules:
- An assignor takes ``partitions_per_topic`` (topic -> partition count) and the members'
  subscriptions (``MemberSubscription``: topics, owned partitions, group.instance.id) and returns
  ``member_id -> sorted list of (topic, partition)``. Every member gets an entry (possibly empty).
- Members are ordered like ``AbstractPartitionAssignor.MemberInfo.compareTo``: members with a
  group.instance.id first, ordered by it; then the others by member id.
- ``range`` (``RangeAssignor``): per topic, the subscribed members in that order get consecutive
  ranges; the first ``n % m`` members get one extra partition.
- ``roundrobin`` (``RoundRobinAssignor``): all partitions sorted by (topic, partition) are dealt
  in turn over a circular iterator of the sorted members, skipping members not subscribed.
- ``sticky`` (``StickyAssignor``): balance first (counts differ by at most one among members
  with the same subscription), then keep as many previously owned partitions as possible.
- ``cooperative-sticky`` (``CooperativeStickyAssignor``, KIP-429): the sticky result, minus
  partitions that move away from a member that still owns them (they are revoked first and
  assigned by the follow-up rebalance).
- Deterministic: no randomness, no dict-order dependence beyond the sorting rules above.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

TopicPartition = tuple[str, int]
AssignmentMap = dict[str, list[TopicPartition]]


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """What the leader knows about one member: its subscription (decoded) and identity."""

    topics: tuple[str, ...]
    owned_partitions: tuple[TopicPartition, ...] = ()
    group_instance_id: str | None = None
    generation: int = -1


def member_sort_key(member_id: str, group_instance_id: str | None) -> tuple[int, str]:
    """``MemberInfo.compareTo``: static members first (by instance id), then by member id."""
    if group_instance_id is not None:
        return (0, group_instance_id)
    return (1, member_id)


def _sorted_members(subscriptions: Mapping[str, MemberSubscription]) -> list[str]:
    return sorted(subscriptions, key=lambda m: member_sort_key(m, subscriptions[m].group_instance_id))


def _all_partitions_sorted(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, MemberSubscription]
) -> list[TopicPartition]:
    topics = sorted({t for s in subscriptions.values() for t in s.topics if t in partitions_per_topic})
    return [(t, p) for t in topics for p in range(partitions_per_topic[t])]


def range_assign(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, MemberSubscription]
) -> AssignmentMap:
    """``RangeAssignor``: per topic, consecutive ranges over the sorted subscribed members."""
    result: AssignmentMap = {m: [] for m in subscriptions}
    order = _sorted_members(subscriptions)
    topics = sorted({t for s in subscriptions.values() for t in s.topics})
    for topic in topics:
        n = partitions_per_topic.get(topic)
        if n is None:
            continue
        consumers = [m for m in order if topic in subscriptions[m].topics]
        per, extra = divmod(n, len(consumers))
        for i, member in enumerate(consumers):
            start = per * i + min(i, extra)
            length = per + (1 if i < extra else 0)
            result[member].extend((topic, p) for p in range(start, start + length))
    return {m: sorted(v) for m, v in result.items()}


def roundrobin_assign(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, MemberSubscription]
) -> AssignmentMap:
    """``RoundRobinAssignor``: deal sorted partitions over a circular list of sorted members."""
    result: AssignmentMap = {m: [] for m in subscriptions}
    order = _sorted_members(subscriptions)
    if not order:
        return result
    pos = 0
    for topic, partition in _all_partitions_sorted(partitions_per_topic, subscriptions):
        # A topic in the sorted list is subscribed by someone, so this loop terminates.
        while topic not in subscriptions[order[pos]].topics:
            pos = (pos + 1) % len(order)
        result[order[pos]].append((topic, partition))
        pos = (pos + 1) % len(order)
    return {m: sorted(v) for m, v in result.items()}


def sticky_assign(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, MemberSubscription]
) -> AssignmentMap:
    """``StickyAssignor``: balanced, keeping previously owned partitions where balance allows.

    Owned partitions that are still valid (topic exists, partition exists, member still
    subscribed, no other member claims it with a higher generation) are kept up to the member's
    quota; the rest are dealt to the least-loaded eligible member; a final pass moves partitions
    from members with two or more above the least-loaded eligible member.
    """
    order = _sorted_members(subscriptions)
    rank = {m: i for i, m in enumerate(order)}
    all_partitions = _all_partitions_sorted(partitions_per_topic, subscriptions)
    valid = set(all_partitions)
    # Resolve conflicting claims: the highest generation wins (AbstractStickyAssignor), then rank.
    claims: dict[TopicPartition, str] = {}
    for m in sorted(order, key=lambda x: (-subscriptions[x].generation, rank[x])):
        for tp in subscriptions[m].owned_partitions:
            if tp in valid and tp[0] in subscriptions[m].topics and tp not in claims:
                claims[tp] = m
    result: dict[str, list[TopicPartition]] = {m: [] for m in order}
    eligible: dict[TopicPartition, list[str]] = {
        tp: [m for m in order if tp[0] in subscriptions[m].topics] for tp in all_partitions
    }
    # Quotas assume members share the partitions they can take; for identical subscriptions
    # this is exactly floor/ceil of partitions / members (the "constrained" path in Java).
    n_members = len(order)
    total = len(all_partitions)
    max_quota = -(-total // n_members) if n_members else 0
    min_quota = total // n_members if n_members else 0
    over_min_slots = total - min_quota * n_members
    for m in order:
        mine = sorted(tp for tp, owner in claims.items() if owner == m)
        keep = min(len(mine), max_quota)
        if keep > min_quota:
            if over_min_slots > 0:
                over_min_slots -= 1
            else:
                keep = min_quota
        result[m] = mine[:keep]
    assigned = {tp for parts in result.values() for tp in parts}
    for tp in all_partitions:
        if tp in assigned:
            continue
        candidates = eligible[tp]
        if not candidates:
            continue
        target = min(candidates, key=lambda c: (len(result[c]), rank[c]))
        result[target].append(tp)
    _rebalance_pass(result, eligible, rank)
    return {m: sorted(v) for m, v in result.items()}


def _rebalance_pass(
    result: dict[str, list[TopicPartition]],
    eligible: Mapping[TopicPartition, Sequence[str]],
    rank: Mapping[str, int],
) -> None:
    """Move partitions from overloaded members while that lowers the imbalance (by >= 2)."""
    changed = True
    while changed:
        changed = False
        for m in sorted(result, key=lambda x: (-len(result[x]), rank[x])):
            for tp in sorted(result[m], reverse=True):
                targets = [c for c in eligible[tp] if c != m and len(result[c]) + 1 < len(result[m])]
                if targets:
                    target = min(targets, key=lambda c: (len(result[c]), rank[c]))
                    result[m].remove(tp)
                    result[target].append(tp)
                    changed = True
                    break
            if changed:
                break


def cooperative_sticky_assign(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, MemberSubscription]
) -> AssignmentMap:
    """``CooperativeStickyAssignor``: sticky, minus partitions still owned by another member.

    KIP-429: a partition moving from member A to member B is first revoked by A; B only gets it
    in the next rebalance (which A triggers after revoking).
    """
    sticky = sticky_assign(partitions_per_topic, subscriptions)
    owner: dict[TopicPartition, str] = {}
    for m, s in subscriptions.items():
        for tp in s.owned_partitions:
            owner.setdefault(tp, m)
    return {
        m: [tp for tp in parts if tp not in owner or owner[tp] == m or owner[tp] not in subscriptions]
        for m, parts in sticky.items()
    }


Assignor = Callable[[Mapping[str, int], Mapping[str, MemberSubscription]], AssignmentMap]

ASSIGNORS: dict[str, Assignor] = {
    "range": range_assign,
    "roundrobin": roundrobin_assign,
    "sticky": sticky_assign,
    "cooperative-sticky": cooperative_sticky_assign,
}

#: Protocols whose rebalances are incremental (``RebalanceProtocol.COOPERATIVE``).
COOPERATIVE = frozenset({"cooperative-sticky"})


def assign(
    name: str, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, MemberSubscription]
) -> AssignmentMap:
    """Run the assignor called ``name`` (Kafka's protocol name, e.g. ``"range"``)."""
    try:
        fn = ASSIGNORS[name]
    except KeyError:
        raise ValueError(f"unknown assignor {name!r}; known: {sorted(ASSIGNORS)}") from None
    return fn(partitions_per_topic, subscriptions)
