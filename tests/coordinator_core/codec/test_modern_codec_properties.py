"""Property tests (hypothesis) of Kafka 4's modern group records (KIP-848/932/1071): every
record type round-trips byte for byte, and random or mutated bytes only ever raise the typed
``CorruptRecordError`` (never IndexError, struct.error, UnicodeDecodeError, ValueError...)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator_core.codec.formatter import to_kafka_json, to_rich_json
from coordinator_core.codec.modern_records import MODERN_TYPES
from coordinator_core.codec.record_codec import decode_record, encode_record
from coordinator_core.codec.records import Record
from coordinator_core.codec.wire import WireError
from coordinator_core.errors import CorruptRecordError
from tests.coordinator_core import strategies as S
from tests.coordinator_core.codec.test_codec_properties import _mutations

PROPS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(S.modern_records())
def test_decode_of_encode_is_identity_for_every_modern_record(record: Record) -> None:
    assert decode_record(*encode_record(record), modern=True) == record


@PROPS
@given(S.modern_records())
def test_encode_of_decode_is_identity_for_valid_modern_bytes(record: Record) -> None:
    key, value = encode_record(record)
    assert encode_record(decode_record(key, value, modern=True)) == (key, value)


def _check_decodes_or_raises_typed_error(key: bytes, value: bytes | None) -> None:
    try:
        record = decode_record(key, value, modern=True)
    except CorruptRecordError as exc:
        assert exc.part in ("key", "value")
        assert exc.position >= 0
        return
    # whatever decodes prints, and re-encodes to bytes that decode to the same record
    json.dumps(to_kafka_json(record))
    json.dumps(to_rich_json(record))
    assert decode_record(*encode_record(record), modern=True) == record


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(3, 26), st.binary(max_size=40), st.one_of(st.none(), st.binary(max_size=80)))
def test_random_bytes_only_raise_the_typed_error(record_type: int, key_tail: bytes, value: bytes | None) -> None:
    _check_decodes_or_raises_typed_error(record_type.to_bytes(2, "big") + key_tail, value)


@st.composite
def corrupted(draw: st.DrawFn) -> tuple[bytes, bytes | None]:
    key, value = encode_record(draw(S.modern_records(tombstones=False)))
    if value is not None and draw(st.booleans()):
        return key, draw(_mutations(value))
    return draw(_mutations(key)), value


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corrupted())
def test_mutated_and_truncated_modern_records_only_raise_the_typed_error(kv: tuple[bytes, bytes | None]) -> None:
    _check_decodes_or_raises_typed_error(*kv)


@st.composite
def layout_inputs(draw: st.DrawFn) -> tuple[Any, bytes]:
    """A modern key or value layout and bytes near its valid encodings."""
    record_type = draw(st.sampled_from(sorted(MODERN_TYPES)))
    modern_type = MODERN_TYPES[record_type]
    if draw(st.booleans()):
        layout, obj = modern_type.value_layout, draw(S.modern_values(record_type))
    else:
        layout, obj = modern_type.key_layout, draw(S.modern_keys(record_type))
    data = layout.encode(obj)
    if data and draw(st.booleans()):
        data = draw(_mutations(data))
    return layout, data


@PROPS
@given(layout_inputs())
def test_fused_reader_agrees_with_the_generic_step_reader_on_modern_layouts(case: tuple[Any, bytes]) -> None:
    layout, data = case

    def outcome(read: Any) -> object:
        try:
            return read(data, 0, len(data))
        except WireError as exc:
            return ("error", exc.reason, exc.position)

    assert outcome(layout.read) == outcome(layout.read_generic)
