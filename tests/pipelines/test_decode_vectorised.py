"""The vectorised offset-commit decoder agrees with the core codec on every record.

Pure Python (numpy/pyarrow, no Spark): hypothesis builds records of every key/value version,
encodes them with the core codec, mutates some (truncation, bit flips, trailing garbage, random
bytes, bad UTF-8), and checks:
- every row the fast path accepts decodes to exactly the core codec's values;
- every well-formed, plain record (the bulk of a real log) is accepted by the fast path;
- ``decode_batch`` (fast path + core fallback) gives every row exactly one kind and the same
  row as decoding it alone with the core;
- group metadata with consumer-protocol members (real, truncated, empty and random blobs
  shared between members, records and protocol types, so the per-blob cache is hit): every
  row equals ``slow_row``'s, which parses every member alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator_core import (
    Assignment,
    CoordinatorError,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Subscription,
    TopicPartitions,
    decode_record,
    encode_assignment,
    encode_key,
    encode_subscription,
    encode_value,
)
from pipelines.records.decode import (
    KIND_OFFSET_COMMIT,
    MAX_ABS_MS,
    UNION_SCHEMA,
    decode_batch,
    decode_offset_commits_arrow,
    slow_row,
)
from pipelines.records.decode_rows import offset_commit_fields

INT64 = st.integers(-(2**63), 2**63 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
TEXT = st.text(max_size=40)
ASCII = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40)
TS = st.one_of(st.integers(0, 2**45), INT64)


@st.composite
def offset_commit(draw: st.DrawFn, text: st.SearchStrategy[str] = TEXT) -> tuple[bytes, bytes | None]:
    key = OffsetCommitKey(draw(text), draw(text), draw(INT32), version=draw(st.sampled_from([0, 1])))
    if draw(st.integers(0, 9)) == 0:
        return encode_key(key), None
    version = draw(st.integers(0, 4))
    value = OffsetCommitValue(
        offset=draw(INT64),
        metadata=draw(text),
        commit_timestamp=draw(TS),
        leader_epoch=draw(st.one_of(st.none(), INT32.filter(lambda x: x != -1))) if version >= 3 else None,
        expire_timestamp=draw(st.one_of(st.none(), TS.filter(lambda x: x != -1))) if version == 1 else None,
        version=version,
        tagged_fields=draw(st.sampled_from([(), ((0, b"x"),)])) if version == 4 else (),
    )
    return encode_key(key), encode_value(value)


@st.composite
def group_metadata(draw: st.DrawFn) -> tuple[bytes, bytes | None]:
    key = GroupMetadataKey(draw(ASCII))
    if draw(st.booleans()):
        return encode_key(key), None
    version = draw(st.integers(0, 4))
    members = tuple(
        MemberMetadata(
            draw(ASCII),
            draw(ASCII),
            draw(ASCII),
            draw(INT32),
            draw(st.binary(max_size=8)),
            draw(st.binary(max_size=8)),
            rebalance_timeout=draw(INT32.filter(lambda x: x != -1)) if version >= 1 else None,
            group_instance_id=draw(st.one_of(st.none(), ASCII)) if version >= 3 else None,
        )
        for _ in range(draw(st.integers(0, 2)))
    )
    value = GroupMetadataValue(
        draw(ASCII),
        draw(INT32),
        draw(st.one_of(st.none(), ASCII)),
        draw(st.one_of(st.none(), ASCII)),
        members,
        current_state_timestamp=draw(st.integers(0, 2**45)) if version >= 2 else None,
        version=version,
    )
    return encode_key(key), encode_value(value)


TOPIC_PARTITIONS = st.lists(st.builds(TopicPartitions, ASCII, st.lists(INT32, max_size=4).map(tuple)), max_size=3).map(
    tuple
)


@st.composite
def member_blob(draw: st.DrawFn) -> bytes:
    """A subscription or assignment blob: real (any version), truncated, padded, empty or random."""
    how = draw(st.sampled_from(["sub", "asg", "empty", "random", "truncated", "padded"]))
    if how == "empty":
        return b""
    if how == "random":
        return draw(st.binary(max_size=24))
    version = draw(st.integers(0, 4))
    if draw(st.booleans()):
        blob = encode_subscription(
            Subscription(
                tuple(draw(st.lists(TEXT, max_size=3))),
                draw(st.one_of(st.none(), st.binary(max_size=4))),
                draw(TOPIC_PARTITIONS) if version >= 1 else (),
                draw(st.one_of(st.none(), st.integers(0, 99))) if version >= 2 else None,
                draw(st.one_of(st.none(), ASCII)) if version >= 3 else None,
                version=version,
            )
        )
    else:
        blob = encode_assignment(
            Assignment(draw(TOPIC_PARTITIONS), draw(st.one_of(st.none(), st.binary(max_size=4))), version=version)
        )
    if how == "truncated" and blob:
        return blob[: draw(st.integers(0, len(blob) - 1))]
    if how == "padded":
        return blob + draw(st.binary(min_size=1, max_size=3))
    return blob


@st.composite
def consumer_groups(draw: st.DrawFn) -> list[tuple[bytes, bytes | None]]:
    """Group-metadata records whose members draw their blobs from one small shared pool."""
    pool = draw(st.lists(member_blob(), min_size=1, max_size=5))
    blob = st.sampled_from(pool)
    rows: list[tuple[bytes, bytes | None]] = []
    for _ in range(draw(st.integers(1, 12))):
        key = GroupMetadataKey(draw(st.sampled_from(["g1", "g2", draw(ASCII)])))
        if draw(st.integers(0, 9)) == 0:
            rows.append((encode_key(key), None))
            continue
        version = draw(st.integers(0, 4))
        members = tuple(
            MemberMetadata(
                draw(ASCII),
                draw(ASCII),
                draw(ASCII),
                draw(INT32),
                draw(blob),
                draw(blob),
                rebalance_timeout=draw(INT32.filter(lambda x: x != -1)) if version >= 1 else None,
                group_instance_id=draw(st.one_of(st.none(), ASCII)) if version >= 3 else None,
            )
            for _ in range(draw(st.integers(0, 4)))
        )
        value = GroupMetadataValue(
            draw(st.sampled_from(["consumer", "consumer", "connect", ""])),
            draw(INT32),
            draw(st.one_of(st.none(), ASCII)),
            draw(st.one_of(st.none(), ASCII)),
            members,
            current_state_timestamp=draw(st.one_of(st.none(), st.integers(0, 2**45), INT64)) if version >= 2 else None,
            version=version,
        )
        rows.append((encode_key(key), encode_value(value)))
    return rows


def mutate(data: st.DataObject, raw: bytes | None) -> bytes | None:
    if raw is None:
        return data.draw(st.one_of(st.none(), st.binary(max_size=30)))
    how = data.draw(st.sampled_from(["keep", "truncate", "flip", "append", "random", "utf8", "version"]))
    if how == "keep" or not raw:
        return raw
    if how == "truncate":
        return raw[: data.draw(st.integers(0, len(raw) - 1))]
    if how == "flip":
        i = data.draw(st.integers(0, len(raw) - 1))
        return raw[:i] + bytes([raw[i] ^ data.draw(st.integers(1, 255))]) + raw[i + 1 :]
    if how == "append":
        return raw + data.draw(st.binary(min_size=1, max_size=4))
    if how == "utf8" and len(raw) > 6:
        i = data.draw(st.integers(4, len(raw) - 1))
        return raw[:i] + b"\xff" + raw[i + 1 :]
    if how == "version":
        return data.draw(st.integers(-2, 12)).to_bytes(2, "big", signed=True) + raw[2:]
    return data.draw(st.binary(max_size=40))


def batch_of(rows: list[tuple[bytes | None, bytes | None]]) -> pa.RecordBatch:
    n = len(rows)
    return pa.RecordBatch.from_pydict(
        {
            "key": pa.array([k for k, _ in rows], pa.binary()),
            "value": pa.array([v for _, v in rows], pa.binary()),
            "topic": pa.array(["__consumer_offsets"] * n),
            "partition": pa.array(np.full(n, 7, np.int32)),
            "offset": pa.array(np.arange(n, dtype=np.int64)),
            "timestamp": pa.array(np.arange(n, dtype=np.int64) * 1000, pa.timestamp("us", tz="UTC")),
        }
    )


def as_python(table: pa.Table) -> list[dict[str, object]]:
    """Rows with TIMESTAMP columns as epoch microseconds (Python datetimes stop at year 9999)."""
    cols = [c.cast(pa.int64()) if pa.types.is_timestamp(c.type) else c for c in table.columns]
    return pa.table(cols, names=table.column_names).to_pylist()


def core_fields(key: bytes | None, value: bytes | None) -> dict[str, object] | None:
    """The core's FAST_SCHEMA row for an offset commit, None if the core says otherwise."""
    if key is None:
        return None
    try:
        rec = decode_record(key, value)
    except CoordinatorError:
        return None
    if not isinstance(rec.key, OffsetCommitKey) or not (rec.value is None or isinstance(rec.value, OffsetCommitValue)):
        return None
    return offset_commit_fields(rec)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(offset_commit(), min_size=1, max_size=30))
def test_fast_path_equals_core_codec_on_well_formed_commits(rows: list[tuple[bytes, bytes | None]]) -> None:
    decoded, ok = decode_offset_commits_arrow(batch_of(rows))
    got = decoded.to_pylist()
    assert len(got) == int(ok.sum())
    for row, i in zip(got, np.flatnonzero(ok)):
        assert row == core_fields(*rows[i])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(offset_commit(ASCII), min_size=1, max_size=30))
def test_fast_path_accepts_every_plain_commit(rows: list[tuple[bytes, bytes | None]]) -> None:
    """Plain = ASCII strings, no tagged fields, times that fit a TIMESTAMP, short v4 metadata."""
    _, ok = decode_offset_commits_arrow(batch_of(rows))
    for (key, value), accepted in zip(rows, ok):
        rec = decode_record(key, value)
        v = rec.value
        plain = v is None or (
            isinstance(v, OffsetCommitValue)
            and not v.tagged_fields
            and abs(v.commit_timestamp) <= MAX_ABS_MS
            and (v.expire_timestamp is None or abs(v.expire_timestamp) <= MAX_ABS_MS)
            and (v.version != 4 or len(v.metadata.encode()) <= 126)
        )
        assert accepted == plain, (key.hex(), None if value is None else value.hex())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fast_path_never_disagrees_with_core_on_mutated_bytes(data: st.DataObject) -> None:
    rows = data.draw(st.lists(st.one_of(offset_commit(), group_metadata()), min_size=1, max_size=20))
    rows = [(mutate(data, k), mutate(data, v)) for k, v in rows]
    decoded, ok = decode_offset_commits_arrow(batch_of(rows))
    for row, i in zip(decoded.to_pylist(), np.flatnonzero(ok)):
        assert row == core_fields(*rows[i]), (rows[i][0], rows[i][1])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_decode_batch_gives_every_row_exactly_the_core_row(data: st.DataObject) -> None:
    rows = data.draw(st.lists(st.one_of(offset_commit(), group_metadata()), min_size=1, max_size=20))
    rows = [(mutate(data, k), mutate(data, v)) for k, v in rows]
    batch = batch_of(rows)
    out = pa.Table.from_batches(decode_batch(batch), schema=UNION_SCHEMA)
    assert out.num_rows == len(rows)
    by_offset = {r["log_offset"]: r for r in as_python(out)}
    assert sorted(by_offset) == list(range(len(rows)))
    expected_rows = as_python(
        pa.Table.from_pylist(
            [
                {**slow_row(k, v), **({"raw_topic": "__consumer_offsets"} if slow_row(k, v)["kind"] > 1 else {})}
                for k, v in rows
            ],
            schema=UNION_SCHEMA,
        )
    )
    for i, expected in enumerate(expected_rows):
        got = by_offset[i]
        assert got["coordinator_partition"] == 7
        for name, value in expected.items():
            if name in ("coordinator_partition", "log_offset", "log_timestamp"):
                continue
            assert got[name] == value, (name, rows[i])


def assert_rows_equal_core(rows: list[tuple[bytes | None, bytes | None]]) -> None:
    """``decode_batch`` of ``rows`` equals ``slow_row`` of each row (positions aside)."""
    out = pa.Table.from_batches(decode_batch(batch_of(rows)), schema=UNION_SCHEMA)
    assert out.num_rows == len(rows)
    by_offset = {r["log_offset"]: r for r in as_python(out)}
    assert sorted(by_offset) == list(range(len(rows)))
    expected_rows = as_python(
        pa.Table.from_pylist(
            [
                {**slow_row(k, v), **({"raw_topic": "__consumer_offsets"} if slow_row(k, v)["kind"] > 1 else {})}
                for k, v in rows
            ],
            schema=UNION_SCHEMA,
        )
    )
    for i, expected in enumerate(expected_rows):
        got = by_offset[i]
        assert (got["coordinator_partition"], got["log_timestamp"]) == (7, i * 1000)
        for name, value in expected.items():
            if name not in ("coordinator_partition", "log_offset", "log_timestamp"):
                assert got[name] == value, (name, rows[i])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(consumer_groups(), st.lists(offset_commit(ASCII), max_size=5), st.randoms(use_true_random=False))
def test_group_metadata_with_shared_member_blobs_equals_the_core(
    groups: list[tuple[bytes, bytes | None]], commits: list[tuple[bytes, bytes | None]], rnd: Any
) -> None:
    rows = groups + commits
    rnd.shuffle(rows)
    assert_rows_equal_core(rows)


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_fast_assignment_reader_agrees_with_the_core_or_defers(data: st.DataObject) -> None:
    from coordinator_core import parse_member_blobs
    from pipelines.records.decode_rows import _FALLBACK, _fast_assigned_partitions

    real = encode_assignment(
        Assignment(
            data.draw(TOPIC_PARTITIONS),
            data.draw(st.one_of(st.none(), st.binary(max_size=4))),
            version=data.draw(st.integers(0, 5)),
        )
    )
    blob = data.draw(st.one_of(st.just(real), member_blob()))
    blob = mutate(data, blob) or b"\x00"
    fast = _fast_assigned_partitions(blob)
    asg = parse_member_blobs("consumer", MemberMetadata("m", "c", "h", 1, b"", blob)).assignment
    core = (
        None
        if asg is None
        else [{"topic": tp.topic, "partition": p} for tp in asg.assigned_partitions for p in tp.partitions]
    )
    if blob == real:
        assert fast == core
    else:
        assert fast is _FALLBACK or fast == core, blob


def test_same_blob_in_consumer_and_other_protocol_groups_is_parsed_per_protocol() -> None:
    sub = encode_subscription(Subscription(("orders",), version=1))
    asg = encode_assignment(Assignment((TopicPartitions("orders", (0, 2)),)))
    rows = [
        (
            encode_key(GroupMetadataKey(g)),
            encode_value(
                GroupMetadataValue(ptype, 1, "range", "m", (MemberMetadata("m", "c", "h", 10, sub, asg),), version=3)
            ),
        )
        for g, ptype in (("a", "consumer"), ("b", "connect"), ("c", "consumer"))
    ]
    assert_rows_equal_core(rows)
    out = pa.Table.from_batches(decode_batch(batch_of(rows)), schema=UNION_SCHEMA).sort_by("log_offset").to_pylist()
    got = [(r["members"][0]["subscribed_topics"], r["members"][0]["assigned_partitions"]) for r in out]
    assert got == [
        (["orders"], [{"topic": "orders", "partition": 0}, {"topic": "orders", "partition": 2}]),
        (None, None),
        (["orders"], [{"topic": "orders", "partition": 0}, {"topic": "orders", "partition": 2}]),
    ]


def test_batches_larger_than_a_chunk_decode_every_row() -> None:
    from pipelines.records import decode_commits

    rows = [
        (encode_key(OffsetCommitKey(f"g{i % 7}", "t", i)), encode_value(OffsetCommitValue(i, "", i, version=3)))
        for i in range(2_500)
    ]
    rows[1_234] = (b"\x00\x01\x00", None)  # corrupt: quarantined
    old = decode_commits.CHUNK_ROWS
    decode_commits.CHUNK_ROWS = 1_000
    try:
        fast, ok = decode_offset_commits_arrow(batch_of(rows))
        union = pa.Table.from_batches(decode_batch(batch_of(rows)), schema=UNION_SCHEMA)
    finally:
        decode_commits.CHUNK_ROWS = old
    assert int(ok.sum()) == fast.num_rows == 2_499 and not ok[1_234]
    assert fast.column("committed_offset").to_pylist() == [i for i in range(2_500) if i != 1_234]
    assert sorted(union.column("log_offset").to_pylist()) == list(range(2_500))
    assert union.filter(pc.equal(union.column("kind"), 3)).column("log_offset").to_pylist() == [1_234]


def test_fast_path_matches_kafka_formatter_vectors(vectors_dir: Path) -> None:
    vectors = json.loads((vectors_dir / "kafka_formatter_tests.json").read_text())
    vectors += json.loads((vectors_dir / "konsumer_offsets_real.json").read_text())
    rows = [
        (bytes.fromhex(v["key_hex"]), bytes.fromhex(v["value_hex"]) if v.get("value_hex") else None) for v in vectors
    ]
    decoded, ok = decode_offset_commits_arrow(batch_of(rows))
    accepted = {vectors[i]["id"] for i in np.flatnonzero(ok)}
    # every offset commit of a known value version is on the fast path; nothing else is
    assert "kafka-formatter-offset-value-v4" in accepted
    assert "konsumer-offsets-offset_commit-03" in accepted
    assert not any("group" in a or "unknown" in a for a in accepted)
    for row, i in zip(decoded.to_pylist(), np.flatnonzero(ok)):
        assert row == core_fields(*rows[i])
    real = next(
        r
        for r, i in zip(decoded.to_pylist(), np.flatnonzero(ok))
        if vectors[i]["id"] == "konsumer-offsets-offset_commit-03"
    )
    assert (real["group_id"], real["topic"], real["committed_offset"], real["commit_timestamp_ms"]) == (
        "kafkesc-devcluster-group-id",
        "t01",
        106,
        1672788047244,
    )


def test_null_key_is_quarantined_not_dropped() -> None:
    out = pa.Table.from_batches(decode_batch(batch_of([(None, b"\x00\x03")])), schema=UNION_SCHEMA).to_pylist()
    assert len(out) == 1 and out[0]["kind"] == 3 and out[0]["part"] == "key"


def test_kind_of_a_plain_commit_is_offset_commit() -> None:
    key = encode_key(OffsetCommitKey("g", "t", 0))
    value = encode_value(OffsetCommitValue(1, "", 5, version=3))
    out = pa.Table.from_batches(decode_batch(batch_of([(key, value)])), schema=UNION_SCHEMA).to_pylist()
    assert out[0]["kind"] == KIND_OFFSET_COMMIT and out[0]["committed_offset"] == 1
