"""Rows decoded by the core codec: the reference rows, group metadata columns, quarantine rows.

Group metadata (key version 2) is always decoded by the core codec; its rows are collected
column-wise, and each distinct member subscription/assignment blob is parsed once (bounded cache;
plain assignments by a struct reader that defers anything unusual to the core), so the rows equal
``slow_row``'s (``_members_rows``: every member parsed alone by the core).
"""

from __future__ import annotations

import json
import operator
import struct
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from coordinator_core import (
    CONSUMER_PROTOCOL_TYPE,
    VALUE_TYPE_BY_CLASS,
    CorruptRecordError,
    GroupKey,
    GroupMemberKey,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    RegularExpressionKey,
    UnknownKey,
    UnknownValue,
    decode_record,
    group_type,
    parse_member_blobs,
    record_type_name,
    to_kafka_json,
)

if TYPE_CHECKING:
    from coordinator_core import Record

from pipelines.records.decode_common import (
    KIND_GROUP_METADATA,
    KIND_GROUP_RECORD,
    KIND_OFFSET_COMMIT,
    KIND_QUARANTINE,
    KIND_UNSUPPORTED,
    MAX_ABS_MS,
    UNION_SCHEMA,
)
from pipelines.records.decode_common import MEMBER_ARROW as _MEMBER_ARROW


# =============================================================================================
# The core codec: reference rows (used by the fallback and by the property test)
# =============================================================================================
def offset_commit_fields(record: Record) -> dict[str, Any]:
    """The ``FAST_SCHEMA`` row of an offset-commit ``Record`` decoded by the core codec."""
    key = record.key
    value = record.value
    row: dict[str, Any] = {
        "key_version": key.version,
        "group_id": key.group,
        "topic": key.topic,  # type: ignore[union-attr]
        "partition": key.partition,  # type: ignore[union-attr]
        "is_tombstone": value is None,
        "value_version": None,
        "committed_offset": None,
        "leader_epoch": None,
        "metadata": None,
        "commit_timestamp_ms": None,
        "expire_timestamp_ms": None,
    }
    if isinstance(value, OffsetCommitValue):
        row.update(
            value_version=value.version,
            committed_offset=value.offset,
            leader_epoch=value.leader_epoch,
            metadata=value.metadata,
            commit_timestamp_ms=value.commit_timestamp,
            expire_timestamp_ms=value.expire_timestamp,
        )
    return row


def _ts(ms: int | None) -> int | None:
    """Epoch ms -> epoch µs for a TIMESTAMP column."""
    return None if ms is None else ms * 1000


def _members_rows(value: Any) -> list[dict[str, Any]]:
    """Member structs of a GroupMetadataValue; blobs parsed by the core's per-member view
    (``consumer_protocol.parse_member_blobs``: consumer protocol only, never raises)."""
    rows = []
    for m in value.members:
        parsed = parse_member_blobs(value.protocol_type, m)
        sub, asg = parsed.subscription, parsed.assignment
        rows.append(
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "rebalance_timeout": m.rebalance_timeout,
                "session_timeout": m.session_timeout,
                "subscription": m.subscription,
                "assignment": m.assignment,
                "subscribed_topics": None if sub is None else list(sub.topics),
                "assigned_partitions": None
                if asg is None
                else [{"topic": tp.topic, "partition": p} for tp in asg.assigned_partitions for p in tp.partitions],
            }
        )
    return rows


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_FALLBACK = object()


def _fast_assigned_partitions(blob: bytes) -> Any:
    """``assigned_partitions`` rows of a ConsumerProtocolAssignment blob (spec §5: i16 version
    >= 0 | i32 count | count x (STRING topic | i32 count | count x i32 partition) | nullable
    BYTES user_data | ignored trailing bytes; the same layout in every version), or
    ``_FALLBACK`` for anything else (negative lengths, short data, bad UTF-8): the core decides."""
    end = len(blob)
    try:
        if _I16.unpack_from(blob, 0)[0] < 0:
            return _FALLBACK
        (count,) = _I32.unpack_from(blob, 2)
        pos = 6
        if count < 0 or count > end:
            return _FALLBACK
        rows: list[dict[str, Any]] = []
        for _ in range(count):
            (tlen,) = _I16.unpack_from(blob, pos)
            if tlen < 0 or pos + 2 + tlen > end:
                return _FALLBACK
            topic = blob[pos + 2 : pos + 2 + tlen].decode("utf-8")
            (pcount,) = _I32.unpack_from(blob, pos + 2 + tlen)
            pos += 6 + tlen
            if pcount < 0 or pos + 4 * pcount > end:
                return _FALLBACK
            rows.extend({"topic": topic, "partition": p} for p in struct.unpack_from(f">{pcount}i", blob, pos))
            pos += 4 * pcount
        (ulen,) = _I32.unpack_from(blob, pos)
        if ulen < -1 or pos + 4 + max(ulen, 0) > end:
            return _FALLBACK
    except (struct.error, UnicodeDecodeError):
        return _FALLBACK
    return rows


# Parsed consumer-protocol blobs, by (protocol_type == "consumer", kind, blob bytes): the same
# subscription/assignment bytes recur across members and records of a group (bounded cache).
# Bounded by the blob bytes it holds (a parsed assignment is ~50x its blob in Python objects).
_BLOB_CACHE: dict[tuple[bool, str, bytes], Any] = {}
_BLOB_CACHE_BYTES = 1 << 20
_blob_cache_used = 0
_EMPTY_MEMBER = MemberMetadata(
    member_id="", client_id="", client_host="", session_timeout=0, subscription=b"", assignment=b""
)


def _parsed_blob(consumer: bool, kind: str, blob: bytes) -> Any:
    """``subscribed_topics`` (kind "s") or ``assigned_partitions`` (kind "a") of one member
    blob, exactly as ``_members_rows`` derives it (``consumer_protocol.parse_member_blobs`` on
    a member holding just that blob: the two blobs are parsed independently). Assignments of
    the plain layout are read by ``_fast_assigned_partitions`` (the property test holds it to
    the core)."""
    key = (consumer, kind, blob)
    try:
        return _BLOB_CACHE[key]
    except KeyError:
        pass
    ptype = CONSUMER_PROTOCOL_TYPE if consumer else None
    if kind == "s":
        sub = parse_member_blobs(ptype, replace(_EMPTY_MEMBER, subscription=blob)).subscription
        out: Any = None if sub is None else list(sub.topics)
    elif consumer and blob and (fast := _fast_assigned_partitions(blob)) is not _FALLBACK:
        out = fast
    else:
        asg = parse_member_blobs(ptype, replace(_EMPTY_MEMBER, assignment=blob)).assignment
        out = (
            None
            if asg is None
            else [{"topic": tp.topic, "partition": p} for tp in asg.assigned_partitions for p in tp.partitions]
        )
    global _blob_cache_used
    _blob_cache_used += len(blob) + 64
    if _blob_cache_used > _BLOB_CACHE_BYTES:
        _BLOB_CACHE.clear()
        _blob_cache_used = len(blob) + 64
    _BLOB_CACHE[key] = out
    return out


class GroupMetadataColumns:
    """Group-metadata rows decoded by the core codec, collected column-wise.

    The union columns are built with one Arrow conversion per column; each distinct
    subscription / assignment blob of a batch is parsed (and converted) once and spread to the
    members by ``take`` — the values equal ``slow_row``'s (``_members_rows``) row by row.
    """

    _SCALARS = (
        "group_id",
        "key_version",
        "is_tombstone",
        "value_version",
        "protocol_type",
        "generation",
        "protocol",
        "leader",
        "current_state_timestamp",
        "member_count",
    )
    _MEMBER_FIELDS = (
        "member_id",
        "group_instance_id",
        "client_id",
        "client_host",
        "rebalance_timeout",
        "session_timeout",
        "subscription",
        "assignment",
    )

    _member_getter = operator.attrgetter(*_MEMBER_FIELDS)

    def __init__(self) -> None:
        self.rows: list[int] = []  # positions (in the caller's row order) of the collected rows
        self.scalar_rows: list[tuple[Any, ...]] = []
        self.member_offsets: list[int] = [0]
        self.member_null: list[bool] = []
        self.members: list[Any] = []  # MemberMetadata, flattened
        self.sub_idx: list[int] = []
        self.asg_idx: list[int] = []
        # blob -> index into sub_values / asg_values, per "protocol_type is consumer"
        self.sub_blobs: dict[bool, dict[bytes, int]] = {True: {}, False: {}}
        self.asg_blobs: dict[bool, dict[bytes, int]] = {True: {}, False: {}}
        self.sub_values: list[Any] = []
        self.asg_values: list[Any] = []

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, row: int, key: Any, value: Any) -> None:
        """Collect one record (``value`` None = tombstone); raises ``_OutOfRangeError`` before
        collecting anything when the state timestamp does not fit a TIMESTAMP."""
        if value is None:
            vals: tuple[Any, ...] = (key.group, key.version, True, None, None, None, None, None, None, None)
            self.member_null.append(True)
        else:
            cst = _ts(_check_ms("current_state_timestamp", value.current_state_timestamp))
            members = value.members
            vals = (
                key.group,
                key.version,
                False,
                value.version,
                value.protocol_type,
                value.generation,
                value.protocol,
                value.leader,
                cst,
                len(members),
            )
            consumer = value.protocol_type == "consumer"
            subs, asgs = self.sub_blobs[consumer], self.asg_blobs[consumer]
            for m in members:
                i = subs.get(m.subscription)
                if i is None:
                    i = subs[m.subscription] = len(self.sub_values)
                    self.sub_values.append(_parsed_blob(consumer, "s", m.subscription))
                self.sub_idx.append(i)
                i = asgs.get(m.assignment)
                if i is None:
                    i = asgs[m.assignment] = len(self.asg_values)
                    self.asg_values.append(_parsed_blob(consumer, "a", m.assignment))
                self.asg_idx.append(i)
            self.members.extend(members)
            self.member_null.append(False)
        self.scalar_rows.append(vals)
        self.member_offsets.append(len(self.members))
        self.rows.append(row)

    def arrays(self) -> dict[str, pa.Array]:
        """The union columns of the collected rows (``kind`` and positions excluded)."""
        fields = {f.name: f.type for f in UNION_SCHEMA}
        columns = list(zip(*self.scalar_rows)) or [() for _ in self._SCALARS]
        out = {name: pa.array(vals, fields[name]) for name, vals in zip(self._SCALARS, columns)}
        mtype = _MEMBER_ARROW.value_type
        per_field = list(zip(*map(self._member_getter, self.members))) or [() for _ in self._MEMBER_FIELDS]
        member_cols = [pa.array(v, mtype.field(name).type) for name, v in zip(self._MEMBER_FIELDS, per_field)]
        subs = pa.array(self.sub_values, mtype.field("subscribed_topics").type)
        asgs = pa.array(self.asg_values, mtype.field("assigned_partitions").type)
        member_cols.append(subs.take(pa.array(self.sub_idx, pa.int32())))
        member_cols.append(asgs.take(pa.array(self.asg_idx, pa.int32())))
        struct = pa.StructArray.from_arrays(member_cols, fields=list(mtype))
        out["members"] = pa.ListArray.from_arrays(
            pa.array(self.member_offsets, pa.int32()),
            struct,
            type=_MEMBER_ARROW,
            mask=pa.array(self.member_null, pa.bool_()),
        )
        return out


class _OutOfRangeError(ValueError):
    """A time value that does not fit a TIMESTAMP column (|ms| > MAX_ABS_MS)."""


def _check_ms(name: str, ms: int | None) -> int | None:
    if ms is not None and abs(ms) > MAX_ABS_MS:
        raise _OutOfRangeError(f"{name} {ms} ms does not fit a TIMESTAMP (int64 microseconds)")
    return ms


def slow_row(key: bytes | None, value: bytes | None, *, lenient: bool = False) -> dict[str, Any]:
    """Decode one record with the core codec into a union row (without position columns)."""
    row = core_row(key, value, lenient, None, 0)
    assert row is not None
    return row


# long: one dispatch over the record kinds the core codec returns (the fallback path, per row)
def core_row(
    key: bytes | None, value: bytes | None, lenient: bool, gm: GroupMetadataColumns | None, position: int
) -> dict[str, Any] | None:
    """``slow_row``; with ``gm``, a group-metadata record is collected there (at ``position``)
    instead and None is returned."""

    row: dict[str, Any]
    if key is None:
        return quarantine_row(
            key,
            value,
            "CorruptRecordError",
            "record key is null (keys are never null in __consumer_offsets)",
            part="key",
            position=0,
        )
    try:
        rec = decode_record(key, value, lenient=lenient, modern=True)
        k, v = rec.key, rec.value
        if isinstance(k, OffsetCommitKey) and (v is None or isinstance(v, OffsetCommitValue)):
            f = offset_commit_fields(rec)
            _check_ms("commit_timestamp", f["commit_timestamp_ms"])
            _check_ms("expire_timestamp", f["expire_timestamp_ms"])
            row = {
                "kind": KIND_OFFSET_COMMIT,
                **{n: f[n] for n in f if not n.endswith("_ms")},
                "commit_timestamp": _ts(f["commit_timestamp_ms"]),
                "expire_timestamp": _ts(f["expire_timestamp_ms"]),
            }
            return row
        if isinstance(k, GroupMetadataKey) and (v is None or isinstance(v, GroupMetadataValue)):
            if gm is not None:
                gm.add(position, k, v)
                return None
            row = {
                "kind": KIND_GROUP_METADATA,
                "group_id": k.group,
                "key_version": k.version,
                "is_tombstone": v is None,
            }
            if v is not None:
                members = _members_rows(v)
                row.update(
                    value_version=v.version,
                    protocol_type=v.protocol_type,
                    generation=v.generation,
                    protocol=v.protocol,
                    leader=v.leader,
                    current_state_timestamp=_ts(_check_ms("current_state_timestamp", v.current_state_timestamp)),
                    member_count=len(members),
                    members=members,
                )
            return row
        if isinstance(k, MODERN_KEYS) and (v is None or type(v) in VALUE_TYPE_BY_CLASS):
            return group_record_row(rec, key, value)
        # recognised but not materialised: unknown record type or unknown value version
        rtype = k.version
        vversion = v.version if isinstance(v, UnknownValue | OffsetCommitValue | GroupMetadataValue) else None
        if isinstance(k, UnknownKey):
            reason = f"unknown record type {rtype} ({record_type_name(rtype)})"
        else:
            reason = f"unknown value version {vversion} for record type {rtype}"
        return {
            "kind": KIND_UNSUPPORTED,
            "group_id": k.group,
            "raw_key": key,
            "raw_value": value,
            "record_type": rtype,
            "record_type_name": record_type_name(rtype),
            "version": vversion,
            "error_message": reason,
        }
    except CorruptRecordError as exc:
        return quarantine_row(
            key,
            value,
            "CorruptRecordError",
            str(exc),
            part=exc.part,
            position=exc.position,
            record_type=exc.record_type,
            version=exc.version,
        )
    except _OutOfRangeError as exc:
        return quarantine_row(key, value, "ValueOutOfRange", str(exc), part="value")
    except Exception as exc:  # the core raised something unexpected: quarantine, never drop
        return quarantine_row(key, value, type(exc).__name__, str(exc))


#: the keys of Kafka 4's group records (``decode_record(..., modern=True)``)
MODERN_KEYS = (GroupKey, GroupMemberKey, RegularExpressionKey)


def group_record_row(rec: Record, key: bytes, value: bytes | None) -> dict[str, Any]:
    """The ``group_records`` row of a Kafka 4 group record the core decoded (``modern=True``):
    the raw record, its kind and the value as Kafka's formatter prints it."""
    k, v = rec.key, rec.value
    data = None if v is None else to_kafka_json(rec)["value"]["data"]
    return {
        "kind": KIND_GROUP_RECORD,
        "group_id": k.group,
        "group_type": group_type(k.version),
        "record_type": k.version,
        "record_type_name": record_type_name(k.version),
        "member_id": k.member_id if isinstance(k, GroupMemberKey) else None,
        "is_tombstone": v is None,
        "version": None if v is None else v.version,
        "value_json": None if data is None else json.dumps(data, separators=(",", ":")),
        "raw_key": key,
        "raw_value": value,
    }


def quarantine_row(
    key: bytes | None,
    value: bytes | None,
    error_class: str,
    message: str,
    *,
    part: str | None = None,
    position: int | None = None,
    record_type: int | None = None,
    version: int | None = None,
) -> dict[str, Any]:
    if record_type is None and key is not None and len(key) >= 2:
        record_type = int.from_bytes(key[:2], "big", signed=True)
    return {
        "kind": KIND_QUARANTINE,
        "raw_key": key,
        "raw_value": value,
        "error_class": error_class,
        "error_message": message,
        "part": part,
        "byte_position": position,
        "record_type": record_type,
        "version": version,
    }
