"""partition_for: Java String.hashCode over UTF-16 units and Kafka's Utils.abs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator_core.partitioner import java_string_hash, kafka_abs, partition_for


def _reference_hash(s: str) -> int:
    """Straight transcription of the Java loop over UTF-16 code units, wrapping at 32 bits."""
    units: list[int] = []
    for ch in s:
        cp = ord(ch)
        if cp >= 0x10000:
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    h = 0
    for u in units:
        h = (h * 31 + u) % 2**32
    return h - 2**32 if h >= 2**31 else h


def test_astral_characters_count_as_two_utf16_units() -> None:
    # "😀" is U+1F600 = surrogates D83D DE00: 31 * 0xD83D + 0xDE00
    assert java_string_hash("😀") == 31 * 0xD83D + 0xDE00
    assert java_string_hash("😀") != ord("😀")


def test_utils_abs_of_min_value_is_zero() -> None:
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-5) == 5


def test_default_partition_count_is_50() -> None:
    assert partition_for("mykafka-group_4") == 37
    assert partition_for("mykafka-group_4", 50) == 37


@pytest.mark.parametrize("n", [0, -1])
def test_non_positive_partition_count_is_refused(n: int) -> None:
    with pytest.raises(ValueError):
        partition_for("g", n)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40), st.integers(1, 1000))
def test_partition_matches_the_reference_java_loop(group: str, n: int) -> None:
    h = _reference_hash(group)
    assert java_string_hash(group) == h
    assert partition_for(group, n) == (0 if h == -(2**31) else abs(h)) % n
    assert 0 <= partition_for(group, n) < n
