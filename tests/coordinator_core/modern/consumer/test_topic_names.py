"""Naming a Kafka 4 consumer group's topic ids by elimination (``model.names_by_elimination``, asked
by the fold), on the records a real Kafka 4.4.0 broker wrote (kept as hex: no broker needed).

Kafka 4.1+ writes no ConsumerGroupPartitionMetadata: the assignments carry topic ids, the broker
names them from its metadata image. Found by a real-broker probe (``tests/broker/kafka4_scenarios
.regex_subscription``): a KIP-848 member subscribed to ``^p-rx-.*`` while only ``p-rx-a`` existed,
committed on it (its commits carry the TopicId), then ``p-rx-b`` was created and matched; nothing
was committed on ``p-rx-b``, so offsetlake showed its id where ``kafka-consumer-groups`` printed
``p-rx-b``.
"""

from __future__ import annotations

from coordinator_core import new_snapshot, replay
from coordinator_core.codec.record_codec import decode_record
from coordinator_core.codec.records import LogRecord, OffsetCommitKey
from coordinator_core.events import Rebalance
from coordinator_core.modern.consumer.model import ConsumerGroupSnapshot, pairs
from coordinator_core.modern.consumer.rows import member_events

MEMBER = "00050007702d72656765780016524d2f5a67566778532f53586e6a4d4673634c315741"
CURRENT = "00080007702d72656765780016524d2f5a67566778532f53586e6a4d4673634c315741"
TARGET = "00070007702d72656765780016524d2f5a67566778532f53586e6a4d4673634c315741"
REGEX = "00100007702d7265676578000a285e702d72782d2e2a29"
EPOCH, TARGET_EPOCH = "00030007702d7265676578", "00060007702d7265676578"
A, B = "I0slOKrCRjyVbPhsi0N_Zw", "TybKQlLDQJ2Js1AikRKl4Q"  # p-rx-a's and p-rx-b's topic ids
#: (offset, key, value): group p-regex on __consumer_offsets-1, as the broker wrote it
RECORDS = (
    (0, MEMBER, "000000000572782d310b2f3132372e302e302e31010b285e702d72782d2e2a29000493e00001000100"),
    (1, CURRENT, "0000000000010000000000010100"),
    (2, REGEX, "00000207702d72782d610000000000000044000001a22a08a51e00"),  # matches p-rx-a
    (3, EPOCH, "0000000000020100087aee62171031bfd7"),
    (4, TARGET, "000002234b2538aac2463c956cf86c8b437f670300000000000000010000"),
    (5, TARGET_EPOCH, "000000000002010008000001a22a08a708"),
    (
        6,
        CURRENT,
        "000000000002000000010002234b2538aac2463c956cf86c8b437f670300000000000000010100090300000002000000020100",
    ),
    (
        7,  # rx-1 commits p-rx-a-0 (its value v4 carries p-rx-a's TopicId)
        "00010007702d72656765780006702d72782d6100000000",
        "0004000000000000000effffffff0872782d31233100000001a22a08a916010010234b2538aac2463c956cf86c8b437f67",
    ),
    (25, REGEX, "00000307702d72782d6107702d72782d62000000000000005b000001a22a08cc3600"),  # p-rx-b created
    (26, EPOCH, "00000000000301000808694eb3d2194903"),
    (
        27,
        TARGET,
        "0000034f26ca4252c3409d89b350229112a5e103000000000000000100234b2538aac2463c956cf86c8b437f670300000000000000010000",
    ),
    (28, TARGET_EPOCH, "000000000003010008000001a22a08ce2a"),
)


def _replayed(until: int, *, commits: bool = True, start: int = 0) -> ConsumerGroupSnapshot:
    """The group after its records in [start, until] (the loader's replay: commits included)."""
    records = []
    for offset, key, value in RECORDS:
        rec = decode_record(bytes.fromhex(key), bytes.fromhex(value), modern=True)
        if start <= offset <= until and (commits or not isinstance(rec.key, OffsetCommitKey)):
            records.append(LogRecord(1, offset, 1_700_000_000_000 + offset, rec.key, rec.value))
    snap = replay(new_snapshot("p-regex"), records).snapshot
    assert snap.consumer is not None
    return snap.consumer


def test_the_topic_no_commit_names_is_the_one_subscribed_name_left() -> None:
    group = _replayed(28)
    assert group.subscribed_topics == {"p-rx-a", "p-rx-b"}
    assert group.topic_names == {A: "p-rx-a", B: "p-rx-b"}  # A by its commit's TopicId, B left over
    target = {(group.topic_label(t), p) for a in group.target_assignment.values() for t, p in pairs(a)}
    assert target == {("p-rx-a", 0), ("p-rx-a", 1), ("p-rx-b", 0), ("p-rx-b", 1)}
    (member,) = member_events(group, 1, 28, 0)  # its current assignment: epoch 2's, by name
    assert member.assigned_partitions == (("p-rx-a", 0), ("p-rx-a", 1))


def test_the_rebalance_names_the_partitions_it_gave() -> None:
    records = []
    for offset, key, value in RECORDS:
        rec = decode_record(bytes.fromhex(key), bytes.fromhex(value), modern=True)
        records.append(LogRecord(1, offset, 1_700_000_000_000 + offset, rec.key, rec.value))
    events = replay(new_snapshot("p-regex"), records).events
    last = [e for e in events if isinstance(e, Rebalance)][-1]
    assert last.generation == 3 and [(t, p) for _, t, p in last.partitions_gained] == [("p-rx-b", 0), ("p-rx-b", 1)]


def test_a_lone_topic_is_named_without_any_commit() -> None:
    assert _replayed(6, commits=False).topic_names == {A: "p-rx-a"}


def test_two_unnamed_topics_stay_ids_unless_one_was_named_before() -> None:
    # met first together (the replay resumed at the regex's second match): ambiguous
    assert _replayed(28, commits=False, start=25).topic_names == {}
    # from the start: p-rx-a named alone at epoch 2 (an id names one topic for good), then p-rx-b
    assert _replayed(28, commits=False).topic_names == {A: "p-rx-a", B: "p-rx-b"}


def test_a_target_assignment_older_than_the_group_epoch_names_nothing() -> None:
    """At offset 26 the regex matched p-rx-b and the group epoch is 3, but the target assignment
    is still epoch 2's (p-rx-a only): it does not tell the subscribed topics yet."""
    group = _replayed(26, commits=False, start=25)
    assert (group.group_epoch, group.target_assignment_epoch) == (3, 0)
    assert group.topic_names == {}
