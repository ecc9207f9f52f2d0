"""A small deterministic ``__consumer_offsets`` log for tests and benchmarks (``sample_records``).

Rules:
- Each group: a generation with 2-3 members (the GroupMetadata record written when the group goes
  Stable), offset commits, one member leaving (next generation), more commits; every third group
  then goes Empty and every fifth is deleted (offset tombstones + group tombstone).
- The records and their consumer protocol blobs (v0) are encoded by the core's codecs
  (``coordinator_core``); offsets follow time per partition, as a broker assigns them.
- The coordinator simulator's logs (``coordinator_core.simulator.generator``) are the realistic
  ones; this one is small and fast, and its shape does not change when the simulator does.
"""

from __future__ import annotations

import random
from typing import Any

from coordinator_core import (
    Assignment,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Subscription,
    TopicPartitions,
    encode_assignment,
    encode_key,
    encode_subscription,
    encode_value,
    partition_for,
)
from pipelines.inputs.raw_files import OFFSETS_TOPIC, RawRecord


def _subscription_v0(topics: list[str]) -> bytes:
    return encode_subscription(Subscription(topics=tuple(topics)))


def _assignment_v0(parts: dict[str, list[int]]) -> bytes:
    return encode_assignment(
        Assignment(assigned_partitions=tuple(TopicPartitions(t, tuple(p)) for t, p in parts.items()))
    )


def _group_metadata(gen: int, mids: list[str], ts: int, topic: str, n_parts: int, host_net: int) -> Any:
    if not mids:  # Empty: no protocol, no leader, no members (GroupMetadataManager writes this)
        return GroupMetadataValue(
            protocol_type="consumer",
            generation=gen,
            protocol=None,
            leader=None,
            members=(),
            current_state_timestamp=ts,
            version=3,
        )
    owned: dict[str, dict[str, list[int]]] = {m: {topic: []} for m in mids}
    for p in range(n_parts):  # range-style assignment
        owned[mids[p % len(mids)]][topic].append(p)
    members = tuple(
        MemberMetadata(
            member_id=m,
            client_id=m.rsplit("-", 1)[0],
            client_host=f"/10.0.{host_net}.{i + 10}",
            session_timeout=45_000,
            rebalance_timeout=300_000,
            group_instance_id=None,
            subscription=_subscription_v0([topic]),
            assignment=_assignment_v0(owned[m]),
        )
        for i, m in enumerate(mids)
    )
    return GroupMetadataValue(
        protocol_type="consumer",
        generation=gen,
        protocol="range",
        leader=mids[0],
        members=members,
        current_state_timestamp=ts,
        version=3,
    )


def sample_records(
    groups: int = 6,
    *,
    seed: int = 7,
    num_partitions: int = 50,
    start_ms: int = 1_700_000_000_000,
    commits_per_member: int = 4,
) -> list[RawRecord]:
    """A small deterministic ``__consumer_offsets`` log (raw records, encoded by the core codec).

    Each group: a generation with 2-3 members (the GroupMetadata record written when the group
    goes Stable), offset commits, one member leaving (next generation), more commits; every third
    group then goes Empty and every fifth is deleted (offset tombstones + group tombstone).
    """
    rng = random.Random(seed)
    events: list[tuple[int, int, int, bytes, bytes | None]] = []  # (ts, seq, partition, key, value)
    services = ["orders", "payments", "billing", "search", "inventory", "shipping", "audit", "fraud"]

    def emit(part: int, ts: int, key: Any, value: Any) -> None:
        events.append((ts, len(events), part, encode_key(key), None if value is None else encode_value(value)))

    for g in range(groups):
        group = f"{services[g % len(services)]}-consumer-{g}"
        part = partition_for(group, num_partitions)
        topic = f"{services[g % len(services)]}-events"
        n_parts = rng.choice([3, 4, 6])
        t = start_ms + g * 7_000
        members = [f"consumer-{group}-{i}-{rng.randrange(16**8):08x}" for i in range(rng.choice([2, 3]))]
        committed = dict.fromkeys(range(n_parts), 0)
        for gen, mids in ((1, members), (2, members[:-1])):
            emit(part, t, GroupMetadataKey(group), _group_metadata(gen, mids, t, topic, n_parts, g))
            for _ in range(commits_per_member):
                t += rng.randrange(800, 2_500)
                for p in range(n_parts):
                    committed[p] += rng.randrange(1, 500)
                    emit(
                        part,
                        t,
                        OffsetCommitKey(group, topic, p),
                        OffsetCommitValue(
                            offset=committed[p],
                            metadata="",
                            commit_timestamp=t,
                            leader_epoch=rng.choice([None, 3]),
                            version=3,
                        ),
                    )
            t += 3_000
        if g % 3 == 2 or g % 5 == 4:
            t += 10_000
            emit(part, t, GroupMetadataKey(group), _group_metadata(3, [], t, topic, n_parts, g))
        if g % 5 == 4:
            t += 1_000
            for p in range(n_parts):
                emit(part, t, OffsetCommitKey(group, topic, p), None)
            emit(part, t, GroupMetadataKey(group), None)
    # a log's offsets follow time: assign them per partition in (timestamp, emission) order
    events.sort(key=lambda e: (e[0], e[1]))
    next_offset: dict[int, int] = {}
    out: list[RawRecord] = []
    for ts, _, part, key, value in events:
        off = next_offset.get(part, 0)
        next_offset[part] = off + 1
        out.append(RawRecord(key, value, OFFSETS_TOPIC, part, off, ts))
    out.sort(key=lambda r: (r.partition, r.offset))
    return out
