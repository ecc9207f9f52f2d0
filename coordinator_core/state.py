"""Classic consumer-group states and Kafka's transition table (spec §7).

Rules:
- The five states carry Kafka's names as values (``ClassicGroupState`` /
  ``GroupMetadata.scala``; ``CompletingRebalance`` was ``AwaitingSync`` before 2.0).
- ``VALID_PREVIOUS_STATES`` is data copied from ``ClassicGroupState.validPreviousStates``:
  a transition ``current -> target`` is legal iff ``current in VALID_PREVIOUS_STATES[target]``.
- ``transition()`` is the one place that checks it; an illegal edge raises
  ``IllegalStateTransitionError`` and changes nothing (states are values, the caller only
  assigns the returned state on success).
- Only ``Empty`` and ``Stable`` are ever materialised from the log (``Dead`` by a group
  tombstone); ``PreparingRebalance``/``CompletingRebalance`` are never persisted and are
  inferred by the replay.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

from coordinator_core.errors import IllegalStateTransitionError


class GroupState(StrEnum):
    """A classic group's state; the value is Kafka's state name."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_E = GroupState.EMPTY
_PR = GroupState.PREPARING_REBALANCE
_CR = GroupState.COMPLETING_REBALANCE
_S = GroupState.STABLE
_D = GroupState.DEAD

#: target state -> the states it may be entered from (ClassicGroupState.java, GroupMetadata.scala).
VALID_PREVIOUS_STATES: Mapping[GroupState, frozenset[GroupState]] = MappingProxyType(
    {
        # all members left during a rebalance (onCompleteJoin -> initNextGeneration, no members)
        _E: frozenset({_PR}),
        # a member joins/leaves/changes metadata, or the leader rejoins; first join of an Empty group
        _PR: frozenset({_S, _CR, _E}),
        # the join phase completed (DelayedJoin): initNextGeneration with members
        _CR: frozenset({_PR}),
        # the leader's SyncGroup assignment was stored
        _S: frozenset({_CR}),
        # group removed: expiry cleanup, DeleteGroups, partition emigration
        _D: frozenset({_S, _PR, _CR, _E, _D}),
    }
)


def is_legal(current: GroupState, target: GroupState) -> bool:
    """Whether Kafka allows ``current -> target``."""
    return current in VALID_PREVIOUS_STATES[target]


def transition(group: str, current: GroupState, target: GroupState) -> GroupState:
    """Check ``current -> target`` against Kafka's table and return ``target``.

    Args:
        group: the group id (for the error message).
        current: the group's state now.
        target: the state to enter.

    Returns:
        ``target`` when the edge is legal.

    Raises:
        IllegalStateTransitionError: the edge is not in ``VALID_PREVIOUS_STATES``.
    """
    if current not in VALID_PREVIOUS_STATES[target]:
        raise IllegalStateTransitionError(group, current.value, target.value)
    return target
