"""decode_raw in Spark: each decoded table equals the core codec's reading of the same bytes.

The input mixes every offset-commit value version, tombstones, group metadata v0-v4, newer
record types, unknown value versions and corrupt bytes; expected DataFrames are built row by
row from ``coordinator_core.codec.record_codec`` and compared with chispa.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from coordinator_core import (
    VALUE_TYPE_BY_CLASS,
    Assignment,
    CorruptRecordError,
    GroupMemberKey,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Subscription,
    TopicPartitions,
    UnknownKey,
    UnknownValue,
    decode_record,
    encode_assignment,
    encode_key,
    encode_subscription,
    encode_value,
)
from coordinator_core.codec.modern_records import ConsumerGroupMemberMetadataValue
from schemas.decoded import GROUP_METADATA, OFFSET_COMMITS, QUARANTINE, UNSUPPORTED_RECORDS

pytestmark = pytest.mark.spark

RAW_DDL = "key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp, timestampType int"
T0 = 1_700_000_000_000


def _ts(ms: int | None) -> dt.datetime | None:
    return None if ms is None else dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ms)


def sample_log() -> list[tuple[bytes | None, bytes | None]]:
    member = MemberMetadata(
        "m-1",
        "client",
        "/10.0.0.1",
        10_000,
        encode_subscription(Subscription(("orders", "payments"))),
        encode_assignment(Assignment((TopicPartitions("orders", (0, 1)),))),
        rebalance_timeout=60_000,
    )
    rows: list[tuple[bytes | None, bytes | None]] = []
    for i in range(40):
        version = i % 5
        value = OffsetCommitValue(
            100 + i,
            "meta" if i % 3 else "",
            T0 + i,
            leader_epoch=(7 if i % 2 else None) if version >= 3 else None,
            expire_timestamp=T0 + 99 if version == 1 else None,
            version=version,
        )
        rows.append((encode_key(OffsetCommitKey(f"g{i % 4}", "orders", i % 3, version=i % 2)), encode_value(value)))
    rows.append((encode_key(OffsetCommitKey("g1", "orders", 0)), None))  # offset tombstone
    for version in range(5):
        m = (
            member
            if version >= 1
            else MemberMetadata("m-1", "client", "/10.0.0.1", 10_000, member.subscription, member.assignment)
        )
        value = GroupMetadataValue(
            "consumer", 3, "range", "m-1", (m,), current_state_timestamp=T0 if version >= 2 else None, version=version
        )
        rows.append((encode_key(GroupMetadataKey("g1")), encode_value(value)))
    rows.append((encode_key(GroupMetadataKey("g2")), None))  # group tombstone
    rows.append((encode_key(GroupMetadataKey("g3")), encode_value(GroupMetadataValue("consumer", 4, None, None, ()))))
    # a KIP-848 ConsumerGroupMemberMetadata record as a Kafka 4 broker writes it
    kip848 = ConsumerGroupMemberMetadataValue(None, None, "client", "/10.0.0.1", ("orders",), None, "uniform", 45_000)
    rows.append((encode_key(GroupMemberKey("g1", "m1", 5)), encode_value(kip848)))
    rows.append((b"\x00\x19\x00\x02g1", b"\x00\x00\x01"))  # a record type no Kafka release knows
    rows.append((encode_key(OffsetCommitKey("g1", "orders", 0)), b"\x00\x05" + b"\x00" * 30))  # value v5
    rows.append((encode_key(OffsetCommitKey("g1", "orders", 0)), b"\x00\x03\x00\x00"))  # truncated value
    rows.append((b"\x00\x01\x00\x09g1", None))  # truncated key
    rows.append((b"\x00\x01\x00\x02\xff\xfe\x00\x01t\x00\x00\x00\x01", encode_value(OffsetCommitValue(1, "", T0))))
    rows.append((None, b"\x00\x03"))  # null key
    return rows


def raw_df(spark: Any, rows: list[tuple[bytes | None, bytes | None]]) -> Any:
    data = [(k, v, "__consumer_offsets", 9, i, _ts(T0 + i * 10), 0) for i, (k, v) in enumerate(rows)]
    return spark.createDataFrame(data, RAW_DDL)


def expected_tables(rows: list[tuple[bytes | None, bytes | None]]) -> dict[str, list[dict[str, Any]]]:
    """Each decoded table's rows, built independently from the core codec."""
    from coordinator_core import parse_member_blobs

    out: dict[str, list[dict[str, Any]]] = {"oc": [], "gm": [], "un": [], "q": [], "gr": []}
    for i, (k, v) in enumerate(rows):
        pos = {"coordinator_partition": 9, "log_offset": i, "log_timestamp": _ts(T0 + i * 10)}
        raw = {
            "key": k,
            "value": v,
            "topic": "__consumer_offsets",
            "partition": 9,
            "offset": i,
            "timestamp": _ts(T0 + i * 10),
        }
        try:
            if k is None:
                raise CorruptRecordError("null key", part="key", position=0)
            rec = decode_record(k, v, modern=True)  # the jobs' reading: Kafka 4 group records too
        except CorruptRecordError as exc:
            out["q"].append({**raw, "part": exc.part, "byte_position": exc.position})
            continue
        key, value = rec.key, rec.value
        if isinstance(key, GroupMemberKey) and (value is None or type(value) in VALUE_TYPE_BY_CLASS):
            out["gr"].append({**raw, "group_id": key.group, "record_type": key.version, "member_id": key.member_id})
        elif isinstance(key, UnknownKey) or isinstance(value, UnknownValue):
            out["un"].append(
                {
                    **raw,
                    "group_id": key.group,
                    "record_type": key.version,
                    "version": None if value is None else value.version,
                }
            )
        elif isinstance(key, OffsetCommitKey):
            assert value is None or isinstance(value, OffsetCommitValue)
            out["oc"].append(
                {
                    **pos,
                    "group_id": key.group,
                    "topic": key.topic,
                    "partition": key.partition,
                    "key_version": key.version,
                    "is_tombstone": value is None,
                    "value_version": None if value is None else value.version,
                    "committed_offset": None if value is None else value.offset,
                    "leader_epoch": None if value is None else value.leader_epoch,
                    "metadata": None if value is None else value.metadata,
                    "commit_timestamp": None if value is None else _ts(value.commit_timestamp),
                    "expire_timestamp": None if value is None else _ts(value.expire_timestamp),
                }
            )
        else:
            assert isinstance(key, GroupMetadataKey)
            row: dict[str, Any] = {
                **pos,
                "group_id": key.group,
                "key_version": key.version,
                "is_tombstone": value is None,
            }
            if isinstance(value, GroupMetadataValue):
                members = []
                for m in value.members:
                    p = parse_member_blobs(value.protocol_type, m)
                    members.append(
                        {
                            "member_id": m.member_id,
                            "group_instance_id": m.group_instance_id,
                            "client_id": m.client_id,
                            "client_host": m.client_host,
                            "rebalance_timeout": m.rebalance_timeout,
                            "session_timeout": m.session_timeout,
                            "subscription": m.subscription,
                            "assignment": m.assignment,
                            "subscribed_topics": None if p.subscription is None else list(p.subscription.topics),
                            "assigned_partitions": None
                            if p.assignment is None
                            else [
                                {"topic": tp.topic, "partition": q}
                                for tp in p.assignment.assigned_partitions
                                for q in tp.partitions
                            ],
                        }
                    )
                row.update(
                    value_version=value.version,
                    protocol_type=value.protocol_type,
                    generation=value.generation,
                    protocol=value.protocol,
                    leader=value.leader,
                    current_state_timestamp=_ts(value.current_state_timestamp),
                    member_count=len(members),
                    members=members,
                )
            out["gm"].append(row)
    return out


def test_decoded_tables_equal_the_core_codec(spark: Any) -> None:
    from chispa import assert_df_equality

    from tests.pipelines.pipeline_helpers import decode_raw, reconcile_counts

    rows = sample_log()
    result = decode_raw(raw_df(spark, rows))
    want = expected_tables(rows)
    for got, spec, key in (
        (result.offset_commits, OFFSET_COMMITS, "oc"),
        (result.group_metadata, GROUP_METADATA, "gm"),
    ):
        expected = spark.createDataFrame(
            [{c: r.get(c) for c in spec.column_names} for r in want[key]], spec.spark_schema()
        )
        assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)
    cols = ["key", "value", "topic", "partition", "offset", "timestamp", "group_id", "record_type", "version"]
    from pyspark.sql.types import StructType

    schema = StructType([UNSUPPORTED_RECORDS.spark_schema()[c] for c in cols])
    expected_un = spark.createDataFrame([{c: r[c] for c in cols} for r in want["un"]], schema)
    assert_df_equality(result.unsupported.select(*cols), expected_un, ignore_row_order=True, ignore_nullable=True)
    gr_cols = ["key", "value", "offset", "group_id", "record_type", "member_id"]
    assert [r.asDict() for r in result.group_records.select(*gr_cols).collect()] == [
        {c: r[c] for c in gr_cols} for r in want["gr"]
    ]
    counts = reconcile_counts(len(rows), result)
    assert counts.ok
    assert (
        counts.offset_commits,
        counts.group_metadata,
        counts.group_records,
        counts.unsupported,
        counts.quarantine,
    ) == (len(want["oc"]), len(want["gm"]), len(want["gr"]), len(want["un"]), len(want["q"]))


def test_corrupt_records_are_quarantined_with_bytes_position_and_error(spark: Any) -> None:
    from tests.pipelines.pipeline_helpers import decode_raw

    rows = sample_log()
    want = expected_tables(rows)["q"]
    got = decode_raw(raw_df(spark, rows)).quarantine
    assert got.columns == list(QUARANTINE.column_names)
    got_rows = sorted(got.collect(), key=lambda r: r["offset"])
    assert len(got_rows) == len(want) == 4
    for g, w in zip(got_rows, sorted(want, key=lambda r: r["offset"])):
        assert (g["key"], g["value"], g["offset"], g["partition"], g["topic"]) == (
            w["key"],
            w["value"],
            w["offset"],
            9,
            "__consumer_offsets",
        )
        assert g["error_class"] == "CorruptRecordError" and g["error_message"]
        assert (g["part"], g["byte_position"]) == (w["part"], w["byte_position"])


def test_reconciliation_reports_a_mismatch(spark: Any) -> None:
    from tests.pipelines.pipeline_helpers import decode_raw, reconcile_counts

    rows = sample_log()
    result = decode_raw(raw_df(spark, rows))
    bad = reconcile_counts(len(rows) + 1, result)
    assert not bad.ok and "MISMATCH" in bad.message()
    with pytest.raises(RuntimeError):
        reconcile_counts(len(rows) + 1, result, strict=True)
