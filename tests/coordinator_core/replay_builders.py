"""Builders for the replay tests: a group's log written the way Kafka's coordinator writes it.

``GroupLog`` hands out consecutive log offsets in one ``__consumer_offsets`` partition and keeps
a clock; each method appends the record the coordinator would write and returns it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from coordinator_core.codec.consumer_protocol import encode_assignment, encode_subscription
from coordinator_core.codec.records import (
    Assignment,
    GroupMetadataKey,
    GroupMetadataValue,
    LogRecord,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Subscription,
    TopicPartitions,
    UnknownKey,
    UnknownValue,
)

T0 = 1_700_000_000_000


def member(
    member_id: str,
    topics: Sequence[str] = ("t",),
    assigned: Mapping[str, Sequence[int]] | None = None,
    *,
    instance: str | None = None,
    client_id: str = "consumer",
    rebalance_timeout: int | None = 30_000,
    session_timeout: int = 10_000,
    subscription: bytes | None = None,
) -> MemberMetadata:
    """A consumer-protocol member with encoded subscription/assignment blobs."""
    sub = subscription if subscription is not None else encode_subscription(Subscription(tuple(sorted(topics))))
    asg = encode_assignment(
        Assignment(tuple(TopicPartitions(t, tuple(ps)) for t, ps in sorted((assigned or {}).items())))
    )
    return MemberMetadata(
        member_id=member_id,
        client_id=client_id,
        client_host="/10.0.0.1",
        session_timeout=session_timeout,
        subscription=sub,
        assignment=asg,
        rebalance_timeout=rebalance_timeout,
        group_instance_id=instance,
    )


class GroupLog:
    """One group's records in log order."""

    def __init__(self, group: str = "g", partition: int = 7, start_ms: int = T0, first_offset: int = 100) -> None:
        self.group = group
        self.partition = partition
        self.now = start_ms
        self.next_offset = first_offset
        self.records: list[LogRecord] = []

    def _append(self, key: object, value: object, at: int | None) -> LogRecord:
        if at is not None:
            self.now = at
        rec = LogRecord(self.partition, self.next_offset, self.now, key, value)  # type: ignore[arg-type]
        self.next_offset += 1
        self.records.append(rec)
        return rec

    def advance(self, ms: int) -> GroupLog:
        self.now += ms
        return self

    def stable(
        self,
        generation: int,
        members: Sequence[MemberMetadata],
        *,
        leader: str | None = None,
        protocol: str = "range",
        protocol_type: str = "consumer",
        cst: int | None = -1,
        at: int | None = None,
        version: int = 3,
    ) -> LogRecord:
        """The leader's SyncGroup record (members with assignments); cst defaults to 'now - 50'."""
        if at is not None:
            self.now = at
        state_ts = (self.now - 50) if cst == -1 else cst
        return self._append(
            GroupMetadataKey(self.group),
            GroupMetadataValue(
                protocol_type,
                generation,
                protocol,
                leader if leader is not None else members[0].member_id,
                tuple(members),
                state_ts if version >= 2 else None,
                version,
            ),
            None,
        )

    def empty(
        self, generation: int, *, protocol_type: str = "consumer", cst: int | None = -1, at: int | None = None
    ) -> LogRecord:
        """The record of a rebalance that ended Empty (protocol/leader null, no members)."""
        if at is not None:
            self.now = at
        state_ts = self.now if cst == -1 else cst
        return self._append(
            GroupMetadataKey(self.group), GroupMetadataValue(protocol_type, generation, None, None, (), state_ts), None
        )

    def commit(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        at: int | None = None,
        expire: int | None = None,
        commit_ts: int | None = None,
    ) -> LogRecord:
        if at is not None:
            self.now = at
        version = 1 if expire is not None else 3
        value = OffsetCommitValue(offset, "", self.now if commit_ts is None else commit_ts, None, expire, version)
        return self._append(OffsetCommitKey(self.group, topic, partition), value, None)

    def offset_tombstone(self, topic: str, partition: int, *, at: int | None = None) -> LogRecord:
        return self._append(OffsetCommitKey(self.group, topic, partition), None, at)

    def group_tombstone(self, *, at: int | None = None) -> LogRecord:
        return self._append(GroupMetadataKey(self.group), None, at)

    def unknown(self, key_version: int = 5, *, at: int | None = None) -> LogRecord:
        gid = self.group.encode()
        raw = key_version.to_bytes(2, "big") + len(gid).to_bytes(2, "big") + gid  # KIP-848 keys start with GroupId
        key = UnknownKey(key_version, raw, self.group, (("group_id", self.group),))
        return self._append(key, UnknownValue(0, b"\x00\x00"), at)
