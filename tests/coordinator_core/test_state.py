"""Kafka's classic group state table (spec §7): every one of the 25 (from, to) edges."""

from __future__ import annotations

import itertools

import pytest

from coordinator_core.errors import IllegalStateTransitionError
from coordinator_core.state import VALID_PREVIOUS_STATES, GroupState, is_legal, transition

E, PR, CR, S, D = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)

# ClassicGroupState.java / GroupMetadata.scala, written out edge by edge
KAFKA_LEGAL = {(PR, E), (S, PR), (CR, PR), (E, PR), (PR, CR), (CR, S), (S, D), (PR, D), (CR, D), (E, D), (D, D)}
ALL_PAIRS = list(itertools.product(list(GroupState), repeat=2))


def test_states_carry_kafkas_names() -> None:
    assert [s.value for s in GroupState] == ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"]


def test_there_are_25_pairs_and_11_legal_ones() -> None:
    assert len(ALL_PAIRS) == 25
    assert sum(is_legal(a, b) for a, b in ALL_PAIRS) == len(KAFKA_LEGAL) == 11


@pytest.mark.parametrize(("current", "target"), sorted(KAFKA_LEGAL), ids=lambda s: s.value)
def test_legal_transition_returns_the_target(current: GroupState, target: GroupState) -> None:
    assert transition("g", current, target) is target
    assert current in VALID_PREVIOUS_STATES[target]


@pytest.mark.parametrize(("current", "target"), [p for p in ALL_PAIRS if p not in KAFKA_LEGAL], ids=lambda s: s.value)
def test_illegal_transition_raises_and_leaves_the_group_unchanged(current: GroupState, target: GroupState) -> None:
    group_state = current
    with pytest.raises(IllegalStateTransitionError) as info:
        group_state = transition("my-group", group_state, target)
    assert group_state is current
    assert info.value.group == "my-group"
    assert info.value.current == current.value
    assert info.value.target == target.value
    assert f"{current.value} -> {target.value}" in str(info.value)


def test_table_is_read_only_data() -> None:
    with pytest.raises(TypeError):
        VALID_PREVIOUS_STATES[E] = frozenset({S})  # type: ignore[index]
