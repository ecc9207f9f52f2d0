"""Hypothesis strategies for every record type and version of ``__consumer_offsets``.

Reusable by every helper: ``from tests.coordinator_core.strategies import records, ...``.

Every strategy builds values that are *canonical for their version*: fields absent in a version
are ``None`` (the codec's read of them), sentinel-valued fields are ``None`` rather than -1,
so ``decode(encode(x)) == x`` holds for everything generated here.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from coordinator_core.codec.records import (
    Assignment,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    Subscription,
    TopicPartitions,
    UnknownKey,
    UnknownValue,
)

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

int32s = st.integers(INT32_MIN, INT32_MAX)
int64s = st.integers(INT64_MIN, INT64_MAX)
# Any int32/int64 except the -1 sentinel (which decodes to None): None or a non-sentinel value.
sentinel_int32s = st.one_of(st.none(), int32s.filter(lambda n: n != -1))
sentinel_int64s = st.one_of(st.none(), int64s.filter(lambda n: n != -1))

# Short strings (incl. non-ASCII, astral) — UTF-8 length stays far below 0x7fff.
texts = st.text(max_size=24)
names = st.text(alphabet=st.characters(codec="utf-8"), max_size=24)
blobs = st.binary(max_size=48)
tagged_fields = st.lists(st.tuples(st.integers(0, 2**31 - 1), st.binary(max_size=12)), max_size=3).map(tuple)

VALUE_VERSIONS = (0, 1, 2, 3, 4)


# ---------------------------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------------------------
@st.composite
def offset_commit_keys(draw: st.DrawFn, version: int | None = None) -> OffsetCommitKey:
    v = draw(st.sampled_from((0, 1))) if version is None else version
    return OffsetCommitKey(group=draw(names), topic=draw(names), partition=draw(int32s), version=v)


group_metadata_keys = st.builds(GroupMetadataKey, group=names)


@st.composite
def unknown_keys(draw: st.DrawFn) -> UnknownKey:
    """Newer record types (3-24): raw bytes = version + GroupId (+ one more string)."""
    from coordinator_core.codec.record_codec import decode_key

    version = draw(st.integers(3, 24))
    parts = [version.to_bytes(2, "big", signed=True)]
    for _ in range(draw(st.integers(1, 2))):
        s = draw(names).encode()
        parts.append(len(s).to_bytes(2, "big") + s)
    key = decode_key(b"".join(parts))
    assert isinstance(key, UnknownKey)
    return key


# ---------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------
@st.composite
def offset_commit_values(draw: st.DrawFn, version: int | None = None) -> OffsetCommitValue:
    v = draw(st.sampled_from(VALUE_VERSIONS)) if version is None else version
    return OffsetCommitValue(
        offset=draw(int64s),
        metadata=draw(texts),
        commit_timestamp=draw(int64s),
        leader_epoch=draw(sentinel_int32s) if v >= 3 else None,
        expire_timestamp=draw(sentinel_int64s) if v == 1 else None,
        version=v,
        tagged_fields=draw(tagged_fields) if v >= 4 else (),
    )


@st.composite
def member_metadata(draw: st.DrawFn, version: int, blob: st.SearchStrategy[bytes] = blobs) -> MemberMetadata:
    return MemberMetadata(
        member_id=draw(names),
        client_id=draw(names),
        client_host=draw(names),
        session_timeout=draw(int32s),
        subscription=draw(blob),
        assignment=draw(blob),
        rebalance_timeout=draw(sentinel_int32s) if version >= 1 else None,
        group_instance_id=draw(st.one_of(st.none(), names)) if version >= 3 else None,
        tagged_fields=draw(tagged_fields) if version >= 4 else (),
    )


@st.composite
def group_metadata_values(
    draw: st.DrawFn, version: int | None = None, min_members: int = 0, max_members: int = 4
) -> GroupMetadataValue:
    v = draw(st.sampled_from(VALUE_VERSIONS)) if version is None else version
    members = draw(st.lists(member_metadata(v), min_size=min_members, max_size=max_members))
    return GroupMetadataValue(
        protocol_type=draw(st.sampled_from(["consumer", "", "connect"]) | names),
        generation=draw(int32s),
        protocol=draw(st.one_of(st.none(), names)),
        leader=draw(st.one_of(st.none(), names)),
        members=tuple(members),
        current_state_timestamp=draw(sentinel_int64s) if v >= 2 else None,
        version=v,
        tagged_fields=draw(tagged_fields) if v >= 4 else (),
    )


# ---------------------------------------------------------------------------------------------
# Records (key + value or tombstone)
# ---------------------------------------------------------------------------------------------
@st.composite
def offset_commit_records(draw: st.DrawFn, tombstones: bool = True) -> Record:
    value = draw(st.one_of(st.none(), offset_commit_values())) if tombstones else draw(offset_commit_values())
    return Record(draw(offset_commit_keys()), value)


@st.composite
def group_metadata_records(draw: st.DrawFn, tombstones: bool = True) -> Record:
    value = draw(st.one_of(st.none(), group_metadata_values())) if tombstones else draw(group_metadata_values())
    return Record(draw(group_metadata_keys), value)


@st.composite
def unknown_records(draw: st.DrawFn) -> Record:
    key = draw(unknown_keys())
    raw = draw(st.one_of(st.none(), st.binary(max_size=40)))
    value = (
        None
        if raw is None
        else UnknownValue(int.from_bytes(raw[:2], "big", signed=True) if len(raw) >= 2 else None, raw)
    )
    return Record(key, value)


records = st.one_of(offset_commit_records(), group_metadata_records(), unknown_records())
"""Any record of any type and version (tombstones included)."""


# ---------------------------------------------------------------------------------------------
# Embedded consumer protocol
# ---------------------------------------------------------------------------------------------
topic_partitions = st.builds(TopicPartitions, topic=names, partitions=st.lists(int32s, max_size=6).map(tuple))


@st.composite
def subscriptions(draw: st.DrawFn, version: int | None = None) -> Subscription:
    v = draw(st.integers(0, 3)) if version is None else version
    return Subscription(
        topics=tuple(draw(st.lists(names, max_size=5))),
        user_data=draw(st.one_of(st.none(), blobs)),
        owned_partitions=tuple(draw(st.lists(topic_partitions, max_size=3))) if v >= 1 else (),
        generation_id=draw(sentinel_int32s) if v >= 2 else None,
        rack_id=draw(st.one_of(st.none(), names)) if v >= 3 else None,
        version=v,
    )


@st.composite
def assignments(draw: st.DrawFn, version: int | None = None) -> Assignment:
    v = draw(st.integers(0, 3)) if version is None else version
    return Assignment(
        assigned_partitions=tuple(draw(st.lists(topic_partitions, max_size=4))),
        user_data=draw(st.one_of(st.none(), blobs)),
        version=v,
    )


@st.composite
def consumer_group_values(draw: st.DrawFn, version: int | None = None, max_members: int = 4) -> GroupMetadataValue:
    """A "consumer" group whose members carry valid subscription/assignment blobs."""
    from coordinator_core.codec.consumer_protocol import encode_assignment, encode_subscription

    base = draw(group_metadata_values(version=version, max_members=0))
    members = []
    for _ in range(draw(st.integers(0, max_members))):
        m = draw(member_metadata(base.version))
        members.append(
            MemberMetadata(
                member_id=m.member_id,
                client_id=m.client_id,
                client_host=m.client_host,
                session_timeout=m.session_timeout,
                subscription=encode_subscription(draw(subscriptions())),
                assignment=encode_assignment(draw(assignments())),
                rebalance_timeout=m.rebalance_timeout,
                group_instance_id=m.group_instance_id,
                tagged_fields=m.tagged_fields,
            )
        )
    return GroupMetadataValue(
        protocol_type="consumer",
        generation=base.generation,
        protocol=base.protocol,
        leader=base.leader,
        members=tuple(members),
        current_state_timestamp=base.current_state_timestamp,
        version=base.version,
        tagged_fields=base.tagged_fields,
    )


# ---------------------------------------------------------------------------------------------
# Kafka 4's modern group records (KIP-848 consumer, KIP-932 share, KIP-1071 streams), derived
# from the declarative layouts of ``coordinator_core.codec.modern_records`` so every field of every
# record type is exercised: sentinel ints are None rather than -1, nullable fields may be None,
# unknown tags are above the known ones (Kafka's writer puts them there), uuids are 16 random
# bytes in ``Uuid.toString()`` form.
# ---------------------------------------------------------------------------------------------
_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (INT32_MIN, INT32_MAX),
    "int64": (INT64_MIN, INT64_MAX),
}


def _modern_field(f: Any, builders: dict[str, Any]) -> st.SearchStrategy[Any]:
    from coordinator_core.codec.wire import uuid_to_str

    t = f.type
    base: st.SearchStrategy[Any]
    if t in _INT_RANGES:
        base = st.integers(*_INT_RANGES[t])
        if f.sentinel is not None:
            return st.one_of(st.none(), base.filter(lambda n, s=f.sentinel: n != s))
    elif t == "uuid":
        base = st.binary(min_size=16, max_size=16).map(uuid_to_str)
    elif t == "string":
        base = names
    elif t == "bytes":
        base = blobs
    elif t == "[]string":
        base = st.lists(names, max_size=3).map(tuple)
    elif t[2:] in _INT_RANGES:
        base = st.lists(st.integers(*_INT_RANGES[t[2:]]), max_size=4).map(tuple)
    elif f.struct_name is not None:
        base = st.lists(_modern_struct(f.fields, builders[f.struct_name], builders), max_size=2).map(tuple)
    else:
        base = _modern_struct(f.fields, builders[f.single_struct_name], builders)
    return st.one_of(st.none(), base) if f.nullable_versions else base


def _modern_struct(fields: tuple[Any, ...], builder: Any, builders: dict[str, Any]) -> st.SearchStrategy[Any]:
    cls, fixed = builder
    known = [f.tag for f in fields if f.tag is not None]
    unknown = st.lists(
        st.tuples(st.integers(max(known, default=-1) + 1, 2**31 - 1), st.binary(max_size=6)), max_size=2
    ).map(tuple)
    consts = {k: st.just(v) for k, v in fixed.items()}
    return st.builds(cls, **{f.name: _modern_field(f, builders) for f in fields}, tagged_fields=unknown, **consts)


def modern_values(record_type: int) -> st.SearchStrategy[Any]:
    from coordinator_core.codec.modern_records import MODERN_TYPES, struct_builders

    t = MODERN_TYPES[record_type]
    builders = struct_builders(t.value_message)
    return _modern_struct(t.value_message.fields, (t.value_cls, {"version": 0}), builders)


def modern_keys(record_type: int) -> st.SearchStrategy[Any]:
    from coordinator_core.codec.modern_records import MODERN_TYPES, GroupKey, GroupMemberKey, RegularExpressionKey

    cls = MODERN_TYPES[record_type].key_layout.cls
    if cls is GroupKey:
        return st.builds(GroupKey, group=names, version=st.just(record_type))
    if cls is GroupMemberKey:
        return st.builds(GroupMemberKey, group=names, member_id=names, version=st.just(record_type))
    return st.builds(RegularExpressionKey, group=names, regular_expression=names)


@st.composite
def modern_records(draw: st.DrawFn, tombstones: bool = True) -> Record:
    from coordinator_core.codec.modern_records import MODERN_TYPES

    record_type = draw(st.sampled_from(sorted(MODERN_TYPES)))
    key = draw(modern_keys(record_type))
    if tombstones and draw(st.integers(0, 4)) == 0:
        return Record(key, None)
    return Record(key, draw(modern_values(record_type)))
