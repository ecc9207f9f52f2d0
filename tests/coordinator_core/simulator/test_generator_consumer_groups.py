"""Issue 14: the generator writes mixed Kafka 4 clusters (classic groups, KIP-848 consumer groups,
classic groups converted online to the consumer protocol and some back), and the core's replay
of its log equals what the simulator knows (its truth): group types, states, epochs, members
with their epochs and assignments, offsets. The records follow Kafka's reconciliation rules."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from coordinator_core.codec.modern_records import (
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    GroupKey,
    GroupMemberKey,
)
from coordinator_core.codec.record_codec import decode_record
from coordinator_core.codec.records import GroupMetadataKey, GroupMetadataValue, LogRecord
from coordinator_core.loader.replay import ReplayResult, replay, replay_groups
from coordinator_core.loader.snapshot import new_snapshot
from coordinator_core.settings import ReplaySettings
from coordinator_core.simulator.client import ClientConfig
from coordinator_core.simulator.consumer_group_writer import UNREVOKED_PARTITIONS, topic_id_for
from coordinator_core.simulator.consumer_groups import STALE_MEMBER_EPOCH
from coordinator_core.simulator.coordinator import CoordinatorConfig
from coordinator_core.simulator.engine import Simulator
from coordinator_core.simulator.generator import GeneratedLog, generate
from coordinator_core.simulator.log import RecordLog
from coordinator_core.simulator.protocol import ILLEGAL_GENERATION, NONE, UNKNOWN_MEMBER_ID

MIXED = {"coordinator": "new", "consumer_groups": 0.5, "conversions": 0.5, "retention_check_phase_ms": 0}


@pytest.fixture(scope="module")
def mixed() -> GeneratedLog:
    # seed 8: consumer groups (dynamic, static with restarts, console, offset-less), online
    # upgrades, downgrades back to classic, session timeouts, rejected stale commits
    return generate(24, 1.0, seed=8, **MIXED)


@pytest.fixture(scope="module")
def records(mixed: GeneratedLog) -> list[LogRecord]:
    out = []
    for k, v, p, o, ts in zip(mixed.keys, mixed.values, mixed.partitions, mixed.offsets, mixed.timestamps):
        r = decode_record(k, v, modern=True)
        out.append(LogRecord(p, o, ts, r.key, r.value))
    return out


@pytest.fixture(scope="module")
def replayed(records: list[LogRecord]) -> dict[str, ReplayResult]:
    return replay_groups(records, assume_log_start=True)


def _names(truth: dict[str, Any]) -> dict[str, str]:
    return {topic_id_for(t): t for t in truth["topics"]}


def _by_group(records: list[LogRecord]) -> dict[str, list[LogRecord]]:
    by: dict[str, list[LogRecord]] = defaultdict(list)
    for r in records:
        by[str(r.key.group)].append(r)
    return by


def test_mixed_log_holds_every_kind_of_group(mixed: GeneratedLog) -> None:
    groups = mixed.truth["groups"]
    consumer = [g for g in groups.values() if g["client_protocol"] == "consumer"]
    assert {g["kind"] for g in consumer} == {"app", "static", "ephemeral"}
    assert any(g["group_type"] == "classic" and g["client_protocol"] == "classic" for g in groups.values())
    assert any("upgraded" in g["traits"] and g["group_type"] == "consumer" for g in groups.values())
    assert any("downgraded" in g["traits"] and g["group_type"] == "classic" for g in groups.values())
    history = [g["consumer_history"] for g in groups.values() if "consumer_history" in g]
    assert sum(h["static_replacements"] for h in history) > 0
    assert sum(h["session_timeouts"] for h in history) > 0
    assert sum(h["rejected_commits"] for h in history) > 0
    assert set(mixed.truth["consumer_group_assignors"]) == {"uniform", "range"}


def test_replay_of_a_mixed_log_is_the_generators_truth(mixed: GeneratedLog, replayed: dict[str, ReplayResult]) -> None:
    names = _names(mixed.truth)
    consumer_groups = 0
    for gid, t in mixed.truth["groups"].items():
        if t["final_state"] == "NeverCreated":
            continue
        snap = replayed[gid].snapshot
        offsets = {f"{tp[0]}:{tp[1]}": v[0].offset for tp, v in snap.offsets.items()}
        assert len(offsets) == t["live_offsets"], gid
        if t["group_type"] != "consumer":
            assert snap.consumer is None or snap.consumer.group_type != "consumer", gid
            if not (t["final_state"] == "Dead" and t["generation"] == 0):
                assert snap.state.value == t["final_state"], gid
            if t["exists"]:
                assert (snap.generation, snap.member_count) == (t["generation"], t["members"]), gid
            continue
        consumer_groups += 1
        c, tc = snap.consumer, t["consumer"]
        assert c is not None and c.group_type == "consumer" and snap.group_type == "consumer", gid
        assert snap.to_state_row()["state"] == c.state.value == t["final_state"], gid
        assert (c.group_epoch, c.target_assignment_epoch) == (tc["group_epoch"], tc["target_assignment_epoch"]), gid
        assert snap.generation == t["generation"] and snap.protocol == tc["assignor"], gid
        members = {
            mid: {
                "instance_id": m.instance_id,
                "member_epoch": m.member_epoch,
                "previous_member_epoch": m.previous_member_epoch,
                "state": m.state,
                "classic": m.uses_classic_protocol,
                "subscribed_topics": list(m.subscribed_topic_names),
                "assigned": sorted([names[tid], q] for tid, ps in m.assigned_partitions for q in ps),
                "pending_revocation": sorted(
                    [names[tid], q] for tid, ps in m.partitions_pending_revocation for q in ps
                ),
                "target": sorted([names[tid], q] for tid, ps in c.target_assignment.get(mid, ()) for q in ps),
            }
            for mid, m in c.members.items()
        }
        assert members == tc["members"], gid
        assert offsets == tc["offsets"], gid
    assert consumer_groups >= 5


def test_a_consumer_group_with_members_is_never_replayed_simple_or_dead(
    mixed: GeneratedLog, records: list[LogRecord]
) -> None:
    # with the simulator's retention and as of the end of the log (predictions included)
    truth = mixed.truth
    settings = ReplaySettings(retention_ms=truth["retention_ms"])
    out = replay_groups(
        records, assume_log_start=True, settings=settings, as_of_ms=truth["end_ms"], log_end_ms=truth["end_ms"]
    )
    with_members = 0
    for gid, t in truth["groups"].items():
        if t["final_state"] == "NeverCreated":
            continue
        row = out[gid].snapshot.to_state_row(settings=settings)
        assert row["state"] == t["final_state"], gid
        if t["group_type"] == "consumer" and t["members"]:
            with_members += 1
            assert row["state"] != "Dead" and row["exists"], gid
            assert row["protocol_type"] == "consumer" and row["generation"] > 0, gid
            assert row["member_count"] == t["members"], gid
    assert with_members >= 5


def test_at_every_epoch_of_its_life_a_consumer_group_with_members_replays_as_one(records: list[LogRecord]) -> None:
    """Replayed piece by piece (cut after every coordinator write holding a Kafka 4 record: the
    next record has another timestamp; the snapshot carried across), a group that holds a
    consumer group with members is shown as that consumer group: type consumer, protocol type
    consumer, Kafka's state, its group epoch - never simple or Dead."""
    checked = 0
    for gid, recs in _by_group(records).items():
        cuts = [
            i
            for i in range(1, len(recs))
            if recs[i].timestamp_ms != recs[i - 1].timestamp_ms and recs[i - 1].key.version >= 3
        ]
        if not cuts:
            continue
        snap = new_snapshot(gid)
        for a, b in zip([0, *cuts], [*cuts, len(recs)]):
            snap = replay(snap, recs[a:b], assume_log_start=a == 0, event_kinds=()).snapshot
            c = snap.consumer
            if c is None or c.group_type != "consumer" or not c.members:
                continue
            row = snap.to_state_row()
            assert row["state"] == c.state.value != "Dead", (gid, b)
            assert (snap.group_type, row["protocol_type"], row["exists"]) == ("consumer", "consumer", True), (gid, b)
            assert row["member_count"] == len(c.members) and row["generation"] == c.group_epoch > 0, (gid, b)
            checked += 1
    assert checked > 50


def test_the_decoded_record_path_writes_the_same_mixed_log() -> None:
    """``fast=False`` (decoded records, the codec's encoding, failovers reloaded by replay)
    writes the bytes of the fast path."""
    fast = generate(16, 0.5, seed=2, **MIXED, conversions_back=0.5)
    slow = generate(16, 0.5, seed=2, **MIXED, conversions_back=0.5, fast=False)
    assert (fast.keys, fast.values, fast.timestamps) == (slow.keys, slow.values, slow.timestamps)
    assert fast.truth == slow.truth


def test_the_mixed_generator_is_deterministic_under_a_seed() -> None:
    a = generate(8, 0.5, seed=21, **MIXED)
    b = generate(8, 0.5, seed=21, **MIXED)
    c = generate(8, 0.5, seed=22, **MIXED)
    assert (a.keys, a.values, a.partitions, a.offsets, a.timestamps) == (
        b.keys,
        b.values,
        b.partitions,
        b.offsets,
        b.timestamps,
    )
    assert a.truth == b.truth
    assert a.keys != c.keys
    assert any(g["group_type"] == "consumer" for g in a.truth["groups"].values())


def test_without_consumer_shares_the_log_is_the_classic_only_one() -> None:
    classic = generate(8, 0.5, seed=21, coordinator="new")
    zero = generate(8, 0.5, seed=21, coordinator="new", consumer_groups=0.0, conversions=0.0, conversions_back=1.0)
    assert (classic.keys, classic.values, classic.timestamps) == (zero.keys, zero.values, zero.timestamps)
    assert all(int.from_bytes(k[:2], "big") in (0, 1, 2) for k in classic.keys)


def test_consumer_groups_need_kafka_4s_coordinator() -> None:
    with pytest.raises(ValueError, match="coordinator 'new'"):
        generate(4, 0.1, seed=1, coordinator="old", consumer_groups=0.5)


def _tps(value: Any, field: str) -> set[tuple[str, int]]:
    return {(t.topic_id, q) for t in getattr(value, field) for q in t.partitions}


# long: one walk over every record of the log, checking each rule where the record is
def test_reconciliation_never_gives_a_partition_to_a_new_owner_before_its_owner_revoked_it(
    records: list[LogRecord],
) -> None:
    """``CurrentAssignmentBuilder``: a member first revokes what it owns but no longer targets
    (UNREVOKED_PARTITIONS, epoch kept); a partition is assigned to its new owner only once no
    other member owns or is revoking it; a STABLE member at the target epoch owns its target."""
    moves = revocations = 0
    for gid, recs in _by_group(records).items():
        owner: dict[tuple[str, int], str] = {}
        owned: dict[str, set[tuple[str, int]]] = {}
        released: dict[tuple[str, int], tuple[str, int]] = {}  # tp -> (last owner, offset released)
        epochs: dict[str, int] = {}
        targets: dict[str, set[tuple[str, int]]] = {}
        group_epoch = target_epoch = 0
        for r in recs:
            k, v = r.key, r.value
            if isinstance(k, GroupMetadataKey) or (isinstance(k, GroupKey) and k.version == 3 and v is None):
                owner, owned, released, epochs, targets = {}, {}, {}, {}, {}  # another group's life
                continue
            if isinstance(v, ConsumerGroupMetadataValue):
                group_epoch = v.epoch
            elif isinstance(v, ConsumerGroupTargetAssignmentMetadataValue):
                target_epoch = v.assignment_epoch
            elif isinstance(k, GroupMemberKey) and k.version == 7:
                targets[k.member_id] = set() if v is None else _tps(v, "topic_partitions")
                assert v is None or isinstance(v, ConsumerGroupTargetAssignmentMemberValue)
            elif isinstance(k, GroupMemberKey) and k.version == 8:
                mid = k.member_id
                before = owned.pop(mid, set())
                for tp in before:
                    owner.pop(tp, None)
                    released[tp] = (mid, r.offset)
                if v is None:
                    continue
                assert isinstance(v, ConsumerGroupCurrentMemberAssignmentValue)
                now = _tps(v, "assigned_partitions") | _tps(v, "partitions_pending_revocation")
                for tp in now:
                    assert tp not in owner, (gid, r.offset, tp, owner.get(tp), mid)
                    if tp not in before and tp in released and released[tp][0] != mid:
                        assert released[tp][1] < r.offset
                        moves += 1
                    owner[tp] = mid
                owned[mid] = now
                pending = _tps(v, "partitions_pending_revocation")
                assert (v.state == UNREVOKED_PARTITIONS) == bool(pending), (gid, r.offset)
                if pending:
                    revocations += 1
                    assert v.member_epoch == epochs.get(mid, v.member_epoch), (gid, r.offset)  # epoch kept
                assert v.member_epoch <= group_epoch, (gid, r.offset)
                if v.state == 0 and v.member_epoch == target_epoch and v.member_epoch >= 0:
                    assert _tps(v, "assigned_partitions") == targets.get(mid, set()), (gid, r.offset)
                epochs[mid] = v.member_epoch
    assert moves > 20 and revocations > 10


def test_an_online_upgrade_converts_the_stable_classic_group_at_its_generation(
    mixed: GeneratedLog, records: list[LogRecord]
) -> None:
    """``convertToConsumerGroup``: the classic group's tombstone, then its members as
    classic-protocol members, the group epoch = its generation, in one write."""
    by = _by_group(records)
    upgraded = [gid for gid, t in mixed.truth["groups"].items() if "upgraded" in t["traits"]]
    checked = 0
    for gid in upgraded:
        recs = by[gid]
        generation = None
        for i, r in enumerate(recs):
            if isinstance(r.value, GroupMetadataValue):
                generation = r.value.generation
            if isinstance(r.key, GroupMetadataKey) and r.value is None and i + 1 < len(recs):
                nxt = recs[i + 1]
                if not (
                    isinstance(nxt.value, ConsumerGroupMemberMetadataValue)
                    and nxt.value.classic_member_metadata is not None
                ):
                    continue  # an Empty classic group replaced (maybeDeleteEmptyClassicGroup): a new group
                batch = [x for x in recs[i:] if x.timestamp_ms == r.timestamp_ms]
                members = [x.value for x in batch if isinstance(x.value, ConsumerGroupMemberMetadataValue)]
                epoch = next(x.value for x in batch if isinstance(x.value, ConsumerGroupMetadataValue))
                assert epoch.epoch == generation, gid
                assert members[0].classic_member_metadata is not None, gid
                checked += 1
    assert checked >= 1


def test_a_downgrade_replaces_the_empty_consumer_group_in_one_write(
    mixed: GeneratedLog, records: list[LogRecord]
) -> None:
    """``maybeDeleteEmptyConsumerGroup``: the consumer group's tombstones (epoch last), then the
    new classic group's first record, at one timestamp; the offsets stay with the group id."""
    by = _by_group(records)
    down = [gid for gid, t in mixed.truth["groups"].items() if "downgraded" in t["traits"]]
    assert down
    for gid in down:
        recs = by[gid]
        i = next(
            i for i, r in enumerate(recs) if isinstance(r.key, GroupKey) and r.key.version == 3 and r.value is None
        )
        after = recs[i + 1]
        assert isinstance(after.key, GroupMetadataKey) and isinstance(after.value, GroupMetadataValue)
        assert after.timestamp_ms == recs[i].timestamp_ms and after.value.generation == 0


def _sim() -> Simulator:
    return Simulator(CoordinatorConfig(coordinator="new"), {"orders": 4}, log=RecordLog(), seed=1, start_ms=0)


def test_offset_commits_carry_the_member_epoch_and_a_stale_one_is_refused() -> None:
    sim = _sim()
    a = sim.add_consumer_group_client("a", ClientConfig("ca", "g", ("orders",), enable_auto_commit=False))
    sim.at(0, a.start)
    sim.run(10_000)
    assert a.epoch == 1 and len(a.owned) == 4
    cg = sim.consumer_groups
    written = len(sim.log.records)
    offsets = ((("orders", 0), 42, "", None),)
    assert cg.commit("g", a.member_id, a.epoch - 1, offsets, classic=False) == STALE_MEMBER_EPOCH
    assert cg.commit("g", "nobody", 1, offsets, classic=False) == UNKNOWN_MEMBER_ID
    assert cg.commit("g", a.member_id, a.epoch + 1, offsets, classic=True) == ILLEGAL_GENERATION
    assert len(sim.log.records) == written
    assert cg.commit("g", a.member_id, a.epoch, offsets, classic=False) == NONE
    assert len(sim.log.records) == written + 1 and cg.groups["g"].offsets[("orders", 0)][0] == 42


def test_a_second_member_waits_for_the_first_to_revoke() -> None:
    sim = _sim()
    a = sim.add_consumer_group_client("a", ClientConfig("ca", "g", ("orders",), enable_auto_commit=False))
    b = sim.add_consumer_group_client("b", ClientConfig("cb", "g", ("orders",), enable_auto_commit=False))
    sim.at(0, a.start)
    sim.at(10_000, b.start)
    sim.run(10_000)
    # b joined (epoch 2) but a still owns everything: b owns nothing yet
    assert (b.epoch, b.owned) == (2, frozenset())
    sim.run(30_000)
    assert len(a.owned) == len(b.owned) == 2 and not (a.owned & b.owned)
    kinds = [h[1] for h in a.history]
    assert kinds == ["assigned", "revoked"]
    assert cg_state(sim) == "Stable"


def cg_state(sim: Simulator) -> str:
    return sim.consumer_groups.state_of("g").value


def test_a_static_member_back_within_its_session_replaces_itself_without_an_epoch_bump() -> None:
    sim = _sim()
    cfg = ClientConfig("cs", "g", ("orders",), group_instance_id="pod-0", enable_auto_commit=False)
    s = sim.add_consumer_group_client("s", cfg)
    sim.at(0, s.start)
    sim.at(20_000, s.stop)
    sim.at(30_000, s.start)
    sim.run(19_000)
    first = s.member_id
    mark = len(sim.log.records)
    sim.run(40_000)
    after = sim.log.records[mark:]
    shapes = [(r.key.version, r.value is None) for r in after]  # type: ignore[union-attr]
    # the -2 leave, then replaceMember (8, 7, 5 tombstones; 5, 7, 8) and the reconciliation
    assert shapes == [(8, False), (8, True), (7, True), (5, True), (5, False), (7, False), (8, False), (8, False)]
    assert not any(isinstance(r.value, ConsumerGroupMetadataValue) for r in after)
    assert s.member_id != first and s.epoch == 1 and len(s.owned) == 4
    # back only after the session timeout (45 s): the old member was removed, a new epoch
    sim.at(50_000, s.stop)
    sim.at(120_000, s.start)
    sim.run(130_000)
    assert s.epoch == 3
