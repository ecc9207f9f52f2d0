"""Property tests (hypothesis): round-trips of every record type/version, and corrupt input
(random mutations, truncations) only ever raising the typed error. CI-sized; the ≥100k-case
run is ``bench/fuzz_codec.py``."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator_core.codec.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    parse_member_blobs,
)
from coordinator_core.codec.record_codec import (
    decode_key,
    decode_record,
    decode_value,
    encode_key,
    encode_record,
    encode_value,
)
from coordinator_core.codec.records import GroupMetadataValue, Record
from coordinator_core.errors import CorruptRecordError
from tests.coordinator_core import strategies as S

PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(S.records)
def test_decode_of_encode_is_identity_for_every_record(record: Record) -> None:
    key, value = encode_record(record)
    assert decode_record(key, value) == record


@PROPS
@given(S.records)
def test_encode_of_decode_is_identity_for_valid_bytes(record: Record) -> None:
    key, value = encode_record(record)
    again = decode_record(key, value)
    assert encode_record(again) == (key, value)


@PROPS
@given(st.integers(0, 4).flatmap(lambda v: S.group_metadata_values(version=v, max_members=6)))
def test_group_values_roundtrip_with_many_members(value: GroupMetadataValue) -> None:
    assert decode_value(S.GroupMetadataKey("g"), encode_value(value)) == value


@PROPS
@given(S.subscriptions(), S.assignments())
def test_consumer_protocol_roundtrips(sub: S.Subscription, asg: S.Assignment) -> None:
    assert decode_subscription(encode_subscription(sub)) == sub
    assert decode_assignment(encode_assignment(asg)) == asg


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(S.consumer_group_values())
def test_member_blobs_of_consumer_groups_always_parse(value: GroupMetadataValue) -> None:
    for m in value.members:
        parsed = parse_member_blobs(value.protocol_type, m)
        assert parsed.errors == ()
        assert parsed.subscription is not None and encode_subscription(parsed.subscription) == m.subscription


def _mutations(data: bytes) -> st.SearchStrategy[bytes]:
    n = len(data)
    flip = st.tuples(st.integers(0, n - 1), st.integers(0, 255)).map(
        lambda t: data[: t[0]] + bytes([t[1]]) + data[t[0] + 1 :]
    )
    cut = st.integers(0, n).map(lambda i: data[:i])
    insert = st.tuples(st.integers(0, n), st.binary(min_size=1, max_size=4)).map(
        lambda t: data[: t[0]] + t[1] + data[t[0] :]
    )
    absurd = st.tuples(
        st.integers(0, max(n - 4, 0)),
        st.sampled_from([b"\x7f\xff\xff\xff", b"\xff\xff", b"\x80\x00\x00\x00", b"\xff\xff\xff\xff\x0f"]),
    ).map(lambda t: data[: t[0]] + t[1] + data[t[0] + len(t[1]) :])
    if n == 0:
        return st.one_of(cut, insert)
    return st.one_of(flip, cut, insert, absurd)


@st.composite
def corrupted(draw: st.DrawFn) -> tuple[bytes, bytes | None]:
    record = draw(
        st.one_of(
            S.offset_commit_records(tombstones=False), S.group_metadata_records(tombstones=False), S.unknown_records()
        )
    )
    key, value = encode_record(record)
    if value is not None and draw(st.booleans()):
        return key, draw(_mutations(value))
    return draw(_mutations(key)), value


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corrupted(), st.booleans())
def test_mutated_and_truncated_records_only_raise_the_typed_error(
    kv: tuple[bytes, bytes | None], lenient: bool
) -> None:
    key, value = kv
    try:
        record = decode_record(key, value, lenient=lenient)
    except CorruptRecordError as exc:
        assert exc.part in ("key", "value")
        assert exc.position >= 0
        return
    # whatever decodes must re-encode and decode to the same record
    assert decode_record(*encode_record(record), lenient=lenient) == record


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(S.consumer_group_values(max_members=2), st.data())
def test_mutated_member_blobs_never_fail_the_record(value: GroupMetadataValue, data: st.DataObject) -> None:
    for m in value.members:
        blob = data.draw(_mutations(m.subscription))
        mutated = S.MemberMetadata(
            m.member_id,
            m.client_id,
            m.client_host,
            m.session_timeout,
            blob,
            m.assignment,
            m.rebalance_timeout,
            m.group_instance_id,
            m.tagged_fields,
        )
        parsed = parse_member_blobs("consumer", mutated)
        assert parsed.subscription is not None or parsed.errors or blob == b""


def test_keys_are_exact_identities() -> None:
    key = S.OffsetCommitKey("g", "t", 1)
    assert decode_key(encode_key(key)) == key


def _all_layouts() -> list[object]:
    from coordinator_core.codec import consumer_protocol
    from coordinator_core.codec import record_codec as codec

    layouts: list[object] = [
        *codec._KEY_LAYOUTS.values(),
        *codec._OFFSET_VALUE_LAYOUTS.values(),
        *codec._GROUP_VALUE_LAYOUTS.values(),
    ]
    for message in (consumer_protocol.SUBSCRIPTION, consumer_protocol.ASSIGNMENT):
        layouts += [consumer_protocol._layout(message, v, v) for v in range(4)]
    return layouts


LAYOUTS = _all_layouts()


@st.composite
def layout_inputs(draw: st.DrawFn) -> tuple[object, bytes]:
    """A layout and bytes near its valid encodings (valid, mutated or truncated)."""
    from coordinator_core.codec import record_codec as codec

    layout = draw(st.sampled_from(LAYOUTS))
    msg = layout.message.name  # type: ignore[attr-defined]
    v = layout.version  # type: ignore[attr-defined]
    if msg == "OffsetCommitKey":
        obj = draw(S.offset_commit_keys(version=v))
    elif msg == "GroupMetadataKey":
        obj = draw(S.group_metadata_keys)
    elif msg == "OffsetCommitValue":
        obj = draw(S.offset_commit_values(version=v))
    elif msg == "GroupMetadataValue":
        obj = draw(S.group_metadata_values(version=v))
    elif msg == "ConsumerProtocolSubscription":
        obj = draw(S.subscriptions(version=v))
    else:
        obj = draw(S.assignments(version=v))
    data = layout.encode(obj)  # type: ignore[attr-defined]
    assert codec is not None
    if data and draw(st.booleans()):
        data = draw(_mutations(data))
    return layout, data


@PROPS
@given(layout_inputs())
def test_fused_reader_agrees_with_the_generic_step_reader(case: tuple[object, bytes]) -> None:
    from coordinator_core.codec.wire import WireError

    layout, data = case

    def outcome(read: object) -> object:
        try:
            return read(data, 0, len(data))  # type: ignore[operator]
        except WireError as exc:
            return ("error", exc.reason, exc.position)

    assert outcome(layout.read) == outcome(layout.read_generic)  # type: ignore[attr-defined]
