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
- ``sticky`` / ``cooperative-sticky`` follow ``AbstractStickyAssignor`` (Kafka 3.x clients):
  - the members are visited in ``java.util.HashMap`` iteration order of their member ids (the
    leader's subscriptions map): ``java_hashmap_order``;
  - owned partitions (``MemberSubscription.owned_partitions`` = the assignor's ``memberData``)
    count only for subscribed, existing topics; a partition claimed by two members goes to the
    higher generation (the other claimant's generation is its *subscription's* generation id, as
    Kafka reads it); claimed twice in the same generation, neither keeps it and it is marked as
    claimed by multiple previous owners;
  - all subscriptions equal → the constrained builder: each member keeps its owned partitions
    sorted by (partition, topic) up to minQuota, or maxQuota while fewer than ``total % members``
    members hold maxQuota; the rest are dealt round-robin (members sorted by id) to the members
    under minQuota, then to those at exactly minQuota; otherwise the general builder (balance by
    moving partitions between the members sorted by (assignment size, id), the previous
    generation's owner preferred, a reassignment kept only if it improves the balance score);
  - ``cooperative-sticky`` then removes every partition changing owner (KIP-429: revoked first,
    assigned by the follow-up rebalance); doubly claimed partitions too.
  - Racks are not modelled (no ``client.rack``). ``maxGeneration`` is computed per call (Java
    keeps it on the assignor instance across rebalances).
- ``StickyAssignor``'s eager clients carry their ownership in the subscription's user data
  (``StickyAssignorUserData`` v1: previous assignment + generation; ``encode_sticky_user_data``),
  cooperative-sticky clients their generation (v0: one int32) and owned partitions in the
  subscription itself; ``member_data`` reads either, as each assignor's ``memberData`` does.
- Deterministic: no randomness; Java's hash orders are reproduced, not Python's.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from coordinator_core.codec.records import Subscription
from coordinator_core.partitioner import java_string_hash

TopicPartition = tuple[str, int]
AssignmentMap = dict[str, list[TopicPartition]]


#: ``AbstractStickyAssignor.DEFAULT_GENERATION``
DEFAULT_GENERATION = -1


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """What the leader knows about one member: its subscription (decoded) and identity.

    ``owned_partitions`` / ``generation`` are the sticky assignors' ``memberData`` (None: no
    generation known); ``subscription_generation`` is the subscription's own generation id (v2+,
    None: the same as ``generation``), which Kafka reads for the *other* claimant of a partition.
    """

    topics: tuple[str, ...]
    owned_partitions: tuple[TopicPartition, ...] = ()
    group_instance_id: str | None = None
    generation: int | None = None
    subscription_generation: int | None = None


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


# ---------------------------------------------------------------------------------------------
# Java hash orders (the sticky assignors iterate HashMaps / HashSets)
# ---------------------------------------------------------------------------------------------
def _spread(h: int) -> int:
    h &= 0xFFFFFFFF
    return h ^ (h >> 16)  # HashMap.hash


def _capacity(n: int) -> int:
    cap = 16  # default initial capacity; resize once size exceeds 0.75 * capacity
    while n > cap * 3 // 4:
        cap *= 2
    return cap


def java_hashmap_order(keys: Sequence[str]) -> list[str]:
    """The iteration order of a ``java.util.HashMap<String, ?>`` filled with ``keys`` in order.

    Buckets by ``spread(String.hashCode) & (capacity - 1)``, insertion order within a bucket
    (a resize splits buckets keeping that order); tree bins (8+ collisions) are not modelled.
    """
    cap = _capacity(len(keys))
    return [k for _, _, k in sorted((_spread(java_string_hash(k)) & (cap - 1), i, k) for i, k in enumerate(keys))]


def topic_partition_hash(tp: TopicPartition) -> int:
    """``TopicPartition.hashCode``: 31 * (31 + partition) + topic.hashCode, as a 32-bit int."""
    return (31 * (31 + tp[1]) + java_string_hash(tp[0])) & 0xFFFFFFFF


class _JavaHashSet:
    """A ``HashSet<TopicPartition>`` whose first element is the one Java's iterator returns."""

    __slots__ = ("_cap", "_items", "_seq")

    def __init__(self) -> None:
        self._items: dict[TopicPartition, int] = {}
        self._seq = 0
        self._cap = 16

    def add(self, tp: TopicPartition) -> None:
        if tp not in self._items:
            self._seq += 1
            self._items[tp] = self._seq
            self._cap = max(self._cap, _capacity(len(self._items)))  # tables never shrink

    def remove(self, tp: TopicPartition) -> None:
        self._items.pop(tp, None)

    def __len__(self) -> int:
        return len(self._items)

    def first(self) -> TopicPartition:
        cap = self._cap
        return min(self._items, key=lambda tp: (_spread(topic_partition_hash(tp)) & (cap - 1), self._items[tp]))


# ---------------------------------------------------------------------------------------------
# user data (StickyAssignor v0/v1, CooperativeStickyAssignor v0) and memberData
# ---------------------------------------------------------------------------------------------
def _group_by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """``CollectionUtils.groupPartitionsByTopic``: a HashMap, so topics come in its order."""
    grouped: dict[str, list[int]] = {}
    for topic, part in partitions:
        grouped.setdefault(topic, []).append(part)
    return {t: grouped[t] for t in java_hashmap_order(list(grouped))}


def encode_sticky_user_data(partitions: Sequence[TopicPartition], generation: int | None) -> bytes:
    """``StickyAssignor.serializeTopicPartitionAssignment`` (schema v1; without a generation the
    field is left unset, which Kafka's ``Struct`` writes as v0 would not: we write v1 with the
    generation only when it is known, as Kafka's clients always know it)."""
    out = [struct.pack(">i", len(_group_by_topic(partitions)))]
    for topic, parts in _group_by_topic(partitions).items():
        name = topic.encode()
        out.append(struct.pack(">h", len(name)) + name + struct.pack(">i", len(parts)))
        out.append(struct.pack(f">{len(parts)}i", *parts))
    if generation is not None:
        out.append(struct.pack(">i", generation))
    return b"".join(out)


def decode_sticky_user_data(data: bytes | None) -> tuple[tuple[TopicPartition, ...], int | None]:
    """``StickyAssignor.memberData``: v1, else v0, else nothing owned at generation -1."""
    if not data:
        return (), None

    def read(with_generation: bool) -> tuple[tuple[TopicPartition, ...], int | None]:
        pos = 0

        def take(fmt: str) -> tuple[int, ...]:
            nonlocal pos
            size = struct.calcsize(fmt)
            if pos + size > len(data):
                raise ValueError("short user data")
            vals = struct.unpack_from(fmt, data, pos)
            pos += size
            return vals

        parts: list[TopicPartition] = []
        (n_topics,) = take(">i")
        for _ in range(max(n_topics, 0)):
            (n,) = take(">h")
            if n < 0 or pos + n > len(data):
                raise ValueError("bad topic")
            topic = data[pos : pos + n].decode()
            pos += n
            (count,) = take(">i")
            parts.extend((topic, q) for q in take(f">{max(count, 0)}i"))
        generation = take(">i")[0] if with_generation else None
        return tuple(parts), generation

    try:
        return read(True)
    except (ValueError, UnicodeDecodeError, struct.error):
        pass
    try:
        return read(False)
    except (ValueError, UnicodeDecodeError, struct.error):
        return (), DEFAULT_GENERATION


def encode_cooperative_user_data(generation: int) -> bytes:
    """``CooperativeStickyAssignor.subscriptionUserData``: the generation (schema v0)."""
    return struct.pack(">i", generation)


def member_data(protocol: str, sub: Subscription) -> MemberSubscription:
    """The leader's view of one member's subscription for ``protocol`` (each assignor's
    ``memberData``): eager ``sticky`` reads ownership and generation from its user data (its
    clients revoke everything before joining, so the subscription owns nothing);
    ``cooperative-sticky`` takes the subscription's owned partitions and its generation (v2+) or
    the one in its user data; others take the subscription as it is."""
    owned = tuple((tp.topic, q) for tp in sub.owned_partitions for q in tp.partitions)
    sub_gen = sub.generation_id if sub.generation_id is not None else DEFAULT_GENERATION
    if protocol == "sticky":
        parts, sticky_gen = decode_sticky_user_data(sub.user_data)
        return MemberSubscription(sub.topics, parts, None, sticky_gen, sub_gen)
    if protocol == "cooperative-sticky" and sub.generation_id is None:
        coop_gen: int | None = None
        if sub.user_data is not None:
            coop_gen = struct.unpack(">i", sub.user_data[:4])[0] if len(sub.user_data) >= 4 else DEFAULT_GENERATION
        return MemberSubscription(sub.topics, owned, None, coop_gen, sub_gen)
    return MemberSubscription(sub.topics, owned, None, sub.generation_id, sub_gen)


# ---------------------------------------------------------------------------------------------
# AbstractStickyAssignor
# ---------------------------------------------------------------------------------------------
def _gen(g: int | None) -> int:
    return DEFAULT_GENERATION if g is None else g


def _remove_first(items: list[TopicPartition], tp: TopicPartition) -> None:
    if tp in items:
        items.remove(tp)  # List.remove(Object): the first occurrence, nothing if absent


@dataclass(slots=True)
class StickyResult:
    """An assignment plus what the cooperative assignor needs from the builder."""

    assignment: dict[str, list[TopicPartition]]
    #: partition -> new owner (constrained builder); None after the general builder
    transferring: dict[TopicPartition, str] | None


def abstract_sticky_assign(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, MemberSubscription]
) -> StickyResult:
    """``AbstractStickyAssignor.assignPartitions`` (see the module rules); lists unsorted."""
    # AbstractPartitionAssignor.assign: only subscribed topics that exist
    subscribed = {t for sub in subscriptions.values() for t in sub.topics}
    ppt = {t: n for t, n in partitions_per_topic.items() if t in subscribed and n > 0}
    members = java_hashmap_order(list(subscriptions))
    owned: dict[str, list[TopicPartition]] = {}
    multiple: set[TopicPartition] = set()
    prev_owner: dict[TopicPartition, str] = {}
    first_topics: set[str] = set()
    all_equal = True
    max_generation = DEFAULT_GENERATION
    for m in members:
        sub = subscriptions[m]
        topics = set(sub.topics)
        if not first_topics:
            first_topics = topics
        elif all_equal and topics != first_topics:
            all_equal = False
        generation = _gen(sub.generation)
        max_generation = max(max_generation, generation)
        mine: list[TopicPartition] = []
        owned[m] = mine
        for tp in sub.owned_partitions:
            # Kafka checks the topic only; a partition beyond the topic's count cannot be kept
            if tp[0] not in ppt or not 0 <= tp[1] < ppt[tp[0]]:
                continue
            other = prev_owner.get(tp)
            if other is None:
                mine.append(tp)
                prev_owner[tp] = m
                continue
            o = subscriptions[other]
            other_generation = _gen(
                o.subscription_generation if o.subscription_generation is not None else o.generation
            )
            if generation == other_generation:
                multiple.add(tp)
                _remove_first(owned[other], tp)
                prev_owner[tp] = m
            elif generation > other_generation:
                mine.append(tp)
                _remove_first(owned[other], tp)
                prev_owner[tp] = m
    if all_equal:
        return _constrained(ppt, members, owned, multiple)
    return _general(ppt, members, owned, subscriptions, max_generation)


def _constrained(
    ppt: Mapping[str, int], members: list[str], owned: dict[str, list[TopicPartition]], multiple: set[TopicPartition]
) -> StickyResult:
    total = sum(ppt.values())
    n = len(members)
    min_quota, max_quota = total // n, -(-total // n)
    expected_over = total % n
    over = 0
    assignment: dict[str, list[TopicPartition]] = {m: [] for m in members}
    assigned: set[TopicPartition] = set()
    maybe_revoked: dict[TopicPartition, str] = {}
    under: list[str] = []
    exactly: list[str] = []
    for m in members:  # consumerToOwnedPartitions: the same keys in the same HashMap order
        mine = sorted(owned[m], key=lambda tp: (tp[1], tp[0]))
        for tp in multiple:
            _remove_first(mine, tp)
        if len(mine) < min_quota:
            assignment[m].extend(mine)
            assigned.update(mine)
            under.append(m)
        elif len(mine) >= max_quota and over < expected_over:
            over += 1
            if over == expected_over:
                exactly.clear()
            assignment[m].extend(mine[:max_quota])
            assigned.update(mine[:max_quota])
            for tp in mine[max_quota:]:
                maybe_revoked[tp] = m
        else:
            assignment[m].extend(mine[:min_quota])
            assigned.update(mine[:min_quota])
            for tp in mine[min_quota:]:
                maybe_revoked[tp] = m
            if over < expected_over:
                exactly.append(m)
    unassigned = [(t, q) for t in sorted(ppt) for q in range(ppt[t]) if (t, q) not in assigned]
    under.sort()
    exactly.sort()
    transferring: dict[TopicPartition, str] = {}
    pos = 0  # the LinkedList iterator over ``under``: the next index to return
    last = -1
    for tp in unassigned:
        from_iterator = True
        if pos < len(under):
            consumer = under[pos]
            last = pos
            pos += 1
        elif not under and not exactly:
            raise RuntimeError("No more unfilled consumers to be assigned.")
        elif not under:
            consumer = exactly.pop(0)
            from_iterator = False
        else:
            pos = 1
            last = 0
            consumer = under[0]
        assignment[consumer].append(tp)
        if (tp in maybe_revoked and maybe_revoked[tp] != consumer) or tp in multiple:
            transferring[tp] = consumer
        count = len(assignment[consumer])
        if count == min_quota:
            if from_iterator:
                del under[last]
                pos -= 1
            exactly.append(consumer)
        elif count == max_quota:
            over += 1
    if under:
        if over != expected_over:
            raise RuntimeError(
                "We haven't reached the expected number of members with more than the minQuota "
                "partitions, but no more partitions to be assigned"
            )
        for m in under:
            if len(assignment[m]) != min_quota:
                raise RuntimeError(
                    f"Consumer: [{m}] doesn't reach minQuota partitions, and no more partitions to be assigned"
                )
    return StickyResult(assignment, transferring)


class _Movements:
    """``AbstractStickyAssignor.PartitionMovements`` (only what the general builder asks)."""

    def __init__(self) -> None:
        self.by_topic: dict[str, dict[tuple[str, str], _JavaHashSet]] = {}
        self.moves: dict[TopicPartition, tuple[str, str]] = {}

    def _remove(self, tp: TopicPartition) -> tuple[str, str]:
        pair = self.moves.pop(tp)
        pairs = self.by_topic[tp[0]]
        pairs[pair].remove(tp)
        if not len(pairs[pair]):
            del pairs[pair]
        if not pairs:
            del self.by_topic[tp[0]]
        return pair

    def _add(self, tp: TopicPartition, pair: tuple[str, str]) -> None:
        self.moves[tp] = pair
        self.by_topic.setdefault(tp[0], {}).setdefault(pair, _JavaHashSet()).add(tp)

    def move(self, tp: TopicPartition, old: str, new: str) -> None:
        if tp in self.moves:
            src, _ = self._remove(tp)
            if src != new:
                self._add(tp, (src, new))
        else:
            self._add(tp, (old, new))

    def actual_partition(self, tp: TopicPartition, old: str, new: str) -> TopicPartition:
        pairs = self.by_topic.get(tp[0])
        if pairs is None:
            return tp
        if tp in self.moves:
            old = self.moves[tp][0]
        reverse = pairs.get((new, old))
        return tp if reverse is None else reverse.first()


def _general(
    ppt: Mapping[str, int],
    members: list[str],
    owned: dict[str, list[TopicPartition]],
    subscriptions: Mapping[str, MemberSubscription],
    max_generation: int,
) -> StickyResult:
    current: dict[str, list[TopicPartition]] = {m: list(owned[m]) for m in members}
    topic_consumers: dict[str, list[str]] = {t: [] for t in ppt}
    consumer_topics: dict[str, list[str]] = {}
    for m in members:
        mine = [t for t in subscriptions[m].topics if t in ppt]
        consumer_topics[m] = mine
        for t in mine:
            topic_consumers[t].append(m)
    owner: dict[TopicPartition, str] = {}
    for m in members:
        for tp in current[m]:
            owner[tp] = m
    sorted_topics = sorted(topic_consumers, key=lambda t: (len(topic_consumers[t]), t))
    all_partitions = [(t, q) for t in sorted_topics for q in range(ppt[t])]
    # the previous generation's owners (prepopulateCurrentAssignments)
    prev: dict[TopicPartition, tuple[str, int]] = {}

    def update_prev(parts: Sequence[TopicPartition], consumer: str, generation: int) -> None:
        for tp in parts:
            if tp not in prev or generation > prev[tp][1]:
                prev[tp] = (consumer, generation)

    for m in members:
        sub = subscriptions[m]
        if sub.generation is not None and sub.generation < max_generation:
            update_prev(sub.owned_partitions, m, sub.generation)
        elif sub.generation is None and max_generation > DEFAULT_GENERATION:
            update_prev(sub.owned_partitions, m, DEFAULT_GENERATION)
    # keep what is still subscribed (assignOwnedPartitions)
    assigned: set[TopicPartition] = set()
    revocation_required = False
    for m in members:
        keep = []
        for tp in current[m]:
            if tp[0] not in subscriptions[m].topics:
                revocation_required = True  # Kafka leaves the partition's owner entry as it was
            else:
                keep.append(tp)
                assigned.add(tp)
        current[m] = keep
    unassigned = [tp for tp in all_partitions if tp not in assigned]

    def by_size() -> list[str]:
        return sorted(current, key=lambda c: (len(current[c]), c))  # SubscriptionComparator

    def max_size(topics: Sequence[str]) -> int:
        return sum(ppt.values()) if len(topics) == len(ppt) else sum(ppt[t] for t in topics)

    def balanced() -> bool:
        order = by_size()
        if len(current[order[0]]) >= len(current[order[-1]]) - 1:
            return True
        holder = {tp: c for c in current for tp in current[c]}
        for c in order:
            count = len(current[c])
            if count == max_size(consumer_topics[c]):
                continue
            mine = set(current[c])
            for t in consumer_topics[c]:
                for q in range(ppt[t]):
                    other = holder.get((t, q))
                    if (t, q) not in mine and other is not None and count + 1 < len(current[other]):
                        return False
        return True

    def score(a: Mapping[str, list[TopicPartition]]) -> int:
        sizes = [len(v) for v in a.values()]
        return sum(abs(x - y) for i, x in enumerate(sizes) for y in sizes[i + 1 :])

    movements = _Movements()

    def process(tp: TopicPartition, new: str) -> None:
        old = owner[tp]
        movements.move(tp, old, new)
        current[old].remove(tp)
        current[new].append(tp)
        owner[tp] = new

    def reassign(tp: TopicPartition, new: str | None = None) -> None:
        if new is None:
            new = next(c for c in by_size() if tp[0] in consumer_topics[c])
        process(movements.actual_partition(tp, owner[tp], new), new)

    def perform(reassignable: list[TopicPartition]) -> bool:
        performed = False
        modified = True
        while modified:
            modified = False
            for tp in reassignable:
                if balanced():
                    break
                consumer = owner.get(tp)
                if consumer is None or consumer not in current:
                    continue
                before = prev.get(tp)
                # Kafka does not check that the previous owner still subscribes to the topic (its
                # memberData may list partitions of a topic it dropped); an assignment must be
                # valid, so that owner is skipped here.
                if (
                    before is not None
                    and before[0] in current
                    and tp[0] in consumer_topics[before[0]]
                    and len(current[consumer]) > len(current[before[0]]) + 1
                ):
                    reassign(tp, before[0])
                    performed = modified = True
                    continue
                if any(len(current[consumer]) > len(current[o]) + 1 for o in topic_consumers[tp[0]] if o in current):
                    reassign(tp)
                    performed = modified = True
        return performed

    # balance()
    initializing = not current[by_size()[-1]]
    for tp in unassigned:  # maybeAssign(unassigned, removeAssigned = false)
        if not topic_consumers[tp[0]]:
            continue
        for c in by_size():
            if tp[0] in consumer_topics[c]:
                current[c].append(tp)
                owner[tp] = c
                break
    fixed_topics = {t for t, cs in topic_consumers.items() if len(cs) < 2}
    all_partitions = [tp for tp in all_partitions if tp[0] not in fixed_topics]
    unassigned = [tp for tp in unassigned if tp[0] not in fixed_topics]
    fixed: dict[str, list[TopicPartition]] = {}
    for c in members:
        size = len(current[c])
        if size < max_size(consumer_topics[c]) or any(tp[0] not in fixed_topics for tp in current[c]):
            continue
        fixed[c] = current.pop(c)
    pre = {c: list(v) for c, v in current.items()}
    pre_owner = dict(owner)
    if not revocation_required:
        perform(unassigned)
    performed = perform(all_partitions)
    if not initializing and performed and score(current) >= score(pre):
        current.clear()
        current.update(pre)
        owner.clear()
        owner.update(pre_owner)
    current.update(fixed)
    return StickyResult(current, None)


def sticky_assign(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, MemberSubscription]
) -> AssignmentMap:
    """``StickyAssignor`` (eager): ``AbstractStickyAssignor``'s assignment, sorted per member."""
    if not subscriptions:
        return {}
    result = abstract_sticky_assign(partitions_per_topic, subscriptions).assignment
    return {m: sorted(result.get(m, [])) for m in subscriptions}


def cooperative_sticky_assign(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, MemberSubscription]
) -> AssignmentMap:
    """``CooperativeStickyAssignor`` (KIP-429): the sticky assignment minus every partition that
    changes owner (the constrained builder's transfers, or added-and-revoked after the general
    one): its owner revokes it first and the follow-up rebalance assigns it."""
    if not subscriptions:
        return {}
    result = abstract_sticky_assign(partitions_per_topic, subscriptions)
    assignment = result.assignment
    transferring = result.transferring
    if transferring is None:
        added: dict[TopicPartition, str] = {}
        revoked: set[TopicPartition] = set()
        for consumer, parts in assignment.items():
            mine = set(subscriptions[consumer].owned_partitions)
            got = set(parts)
            for tp in parts:
                if tp not in mine:
                    added[tp] = consumer
            revoked.update(tp for tp in subscriptions[consumer].owned_partitions if tp not in got)
        transferring = {tp: c for tp, c in added.items() if tp in revoked}
    for tp, consumer in transferring.items():
        _remove_first(assignment[consumer], tp)
    return {m: sorted(assignment.get(m, [])) for m in subscriptions}


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


# ---------------------------------------------------------------------------------------------
# Server-side assignors (KIP-848): the broker computes a consumer group's target assignment
# ---------------------------------------------------------------------------------------------
# Facts from apache/kafka's group-coordinator module (4.0): ``UniformAssignor`` (homogeneous
# subscriptions: ``OptimizedUniformAssignmentBuilder`` / ``UniformHomogeneousAssignmentBuilder``;
# heterogeneous: ``GeneralUniformAssignmentBuilder``) and ``RangeAssignor`` (sticky range).
# ``MemberSubscription.owned_partitions`` is the member's *current target* assignment (the
# broker's AssignmentMemberSpec.assignedPartitions), not what the client owns. Members are
# visited in member-id order (Kafka: HashMap order of the members map; racks are not modelled).


def _subscribed_partitions(partitions_per_topic: Mapping[str, int], topics: Iterable[str]) -> list[TopicPartition]:
    return [(t, p) for t in sorted(set(topics)) if t in partitions_per_topic for p in range(partitions_per_topic[t])]


def uniform_assign(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, MemberSubscription]
) -> AssignmentMap:
    """``UniformAssignor``. Homogeneous subscriptions (the optimized builder): minQuota = total //
    members and ``total % members`` members may hold one more; each member keeps its current
    target partitions (still subscribed) up to minQuota, plus one extra while extras remain; the
    unassigned partitions, sorted by (topic, partition), go round-robin to the members under
    quota (a member at exactly minQuota takes one only while extras remain). Heterogeneous
    subscriptions: each member keeps what it holds of its topics up to the balanced share of
    the members subscribed to the same topics, the rest go to the least-loaded subscriber."""
    result: AssignmentMap = {m: [] for m in subscriptions}
    if not subscriptions:
        return result
    members = sorted(subscriptions)
    subs = {m: frozenset(t for t in subscriptions[m].topics if t in partitions_per_topic) for m in members}
    if len(set(subs.values())) == 1:
        topics = subs[members[0]]
        every = _subscribed_partitions(partitions_per_topic, topics)
        if not every:
            return result
        min_quota, extras = divmod(len(every), len(members))
        unassigned = set(every)
        remaining: dict[str, int] = {}
        for m in members:
            current = sorted(tp for tp in subscriptions[m].owned_partitions if tp[0] in topics and tp in unassigned)
            keep = min(len(current), min_quota)
            taken = current[:keep]
            if len(current) > min_quota and extras > 0:
                taken.append(current[min_quota])
                extras -= 1
            result[m].extend(taken)
            unassigned.difference_update(taken)
            if min_quota - len(current) >= 0:
                remaining[m] = min_quota - len(current)
        queue = [m for m in members if m in remaining]
        for tp in sorted(unassigned):
            while queue:
                m = queue.pop(0)
                if remaining[m] > 0:
                    remaining[m] -= 1
                elif extras > 0:
                    extras -= 1
                    remaining[m] = -1  # took its extra: full
                else:
                    continue
                result[m].append(tp)
                if remaining[m] > 0 or (remaining[m] == 0 and extras > 0):
                    queue.append(m)
                break
            else:  # pragma: no cover - the quotas always cover every partition
                raise AssertionError("partitions were left unassigned")
        return {m: sorted(v) for m, v in result.items()}
    # heterogeneous subscriptions
    owner: dict[TopicPartition, str] = {}
    every_tp = sorted({tp for m in members for tp in _subscribed_partitions(partitions_per_topic, subs[m])})
    subscribers = {tp: [m for m in members if tp[0] in subs[m]] for tp in every_tp}
    for m in members:
        for tp in sorted(subscriptions[m].owned_partitions):
            if tp in subscribers and m in subscribers[tp] and tp not in owner:
                share = -(-sum(partitions_per_topic[t] for t in subs[m]) // max(1, len(subscribers[tp])))
                if len(result[m]) < share:
                    owner[tp] = m
                    result[m].append(tp)
    for tp in every_tp:
        if tp not in owner:
            m = min(subscribers[tp], key=lambda x: (len(result[x]), x))
            owner[tp] = m
            result[m].append(tp)
    return {m: sorted(v) for m, v in result.items()}


def server_range_assign(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, MemberSubscription]
) -> AssignmentMap:
    """The broker's ``RangeAssignor`` (sticky range): per topic, with n partitions and k
    subscribed members, quota n // k and ``n % k`` members one more; each member keeps its
    current target partitions of the topic (lowest first) up to the quota (one more while
    extras remain); the members still under quota, in order, take consecutive ranges of the
    topic's unassigned partitions (ascending)."""
    result: AssignmentMap = {m: [] for m in subscriptions}
    members = sorted(subscriptions)
    topics = sorted({t for m in members for t in subscriptions[m].topics if t in partitions_per_topic})
    for topic in topics:
        n = partitions_per_topic[topic]
        consumers = [m for m in members if topic in subscriptions[m].topics]
        quota, extras = divmod(n, len(consumers))
        sticky: set[int] = set()
        unfilled: list[tuple[str, int]] = []
        for m in consumers:
            current = sorted(p for t, p in subscriptions[m].owned_partitions if t == topic and p < n)
            kept = current[:quota]
            remaining = quota - len(current)
            if remaining < 0 and extras > 0:
                extras -= 1
                kept.append(current[quota])
            else:
                unfilled.append((m, remaining))
            sticky.update(kept)
            result[m].extend((topic, p) for p in kept)
        free = [p for p in range(n) if p not in sticky]
        start = 0
        for m, remaining in unfilled:
            if extras > 0:
                remaining += 1
                extras -= 1
            if remaining > 0:
                result[m].extend((topic, p) for p in free[start : start + remaining])
                start += remaining
    return {m: sorted(v) for m, v in result.items()}


#: ``group.consumer.assignors``: the server-side assignors by name (uniform is Kafka's default).
SERVER_ASSIGNORS: dict[str, Assignor] = {"uniform": uniform_assign, "range": server_range_assign}
