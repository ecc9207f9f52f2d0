"""Replay settings: one typed value for the broker settings a replay assumes (spec §8).

Rules:
- ``ReplaySettings`` is frozen and validated on construction: a bad value raises ``ValueError``
  naming the field, the value and the choices. Strings are accepted where an enum is expected
  (``ReplaySettings(rules="2.1-2.3")``) and converted once, here; ``from_strings`` is the one
  parser for configuration values.
- ``ReplaySettings()`` is the project's one default, the same as ``conf/local.yaml`` /
  ``pipelines.config.ReplayConf``: Kafka's ``offsets.retention.minutes`` default (7 days,
  KIP-186), the current expiry rules (KAFKA-13636), ``auto`` coordinator, and
  ``offsets.retention.check.interval.ms`` (10 minutes, ``OffsetConfig``), and
  ``group.initial.rebalance.delay.ms`` (3 s, KIP-134) for the start windows of rebalances from
  Empty (``coordinator_core.loader.rebalance.start_window``): the log does not store it.
- ``FACTS_ONLY`` (``retention_ms=None``) replays the log's facts only: no expiry prediction.
  It is the default of the core's replay functions, which cannot assume a broker's retention.
- ``Coordinator.AUTO`` is for reading a log: Kafka 4's rules once the group's own records show
  Kafka 4's coordinator wrote them (a generation-0 group record), else Kafka 3's. A decider
  (``coordinator_core.expiry.plan_expiry``) takes a resolved ``OLD`` or ``NEW``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TypeVar


class ExpiryRules(StrEnum):
    """Which Kafka version's offset-expiry rules (see the table in ``coordinator_core.expiry``)."""

    #: KAFKA-13636 (2.8.2/3.0.1/3.1.1/3.2+): a Stable consumer group expires unsubscribed topics
    CURRENT = "current"
    #: KIP-496 (2.4-3.1): the consumer rule in any non-Empty state
    V2_4_TO_3_1 = "2.4-3.1"
    #: KIP-211 (2.1-2.3): only Empty groups and groups without protocol type expire offsets
    V2_1_TO_2_3 = "2.1-2.3"
    #: before KIP-211: every offset expires at its (explicit or computed) expire timestamp
    PRE_2_1 = "pre-2.1"


class Coordinator(StrEnum):
    """Whose group-deletion rules: Kafka 3's ``GroupCoordinator`` (``OLD``: group tombstone only
    when generation > 0), Kafka 4's ``group-coordinator`` (``NEW``: always), or ``AUTO``."""

    AUTO = "auto"
    OLD = "old"
    NEW = "new"


#: ``offsets.retention.minutes`` default (KIP-186: 7 days), in ms.
DEFAULT_RETENTION_MS = 604_800_000
#: ``offsets.retention.check.interval.ms`` default (Kafka's ``OffsetConfig``).
DEFAULT_CLEANUP_INTERVAL_MS = 600_000
#: ``group.initial.rebalance.delay.ms`` default (KIP-134, Kafka 0.11+)
DEFAULT_INITIAL_REBALANCE_DELAY_MS = 3_000

_E = TypeVar("_E", ExpiryRules, Coordinator)


def parse_choice(enum: type[_E], value: str | _E, name: str) -> _E:
    """``value`` as a member of ``enum``, else ``ValueError`` naming ``name`` and the choices."""
    if isinstance(value, enum):
        return value
    try:
        return enum(value)
    except ValueError:
        choices = ", ".join(m.value for m in enum)
        raise ValueError(f"unknown {name} {value!r}; choose one of {choices}") from None


@dataclass(frozen=True, slots=True)
class ReplaySettings:
    """The broker settings a replay assumes.

    Attributes:
        retention_ms: ``offsets.retention.minutes`` in ms; None: predict nothing (facts only).
        rules: the expiry rule set.
        coordinator: ``auto``, ``old`` or ``new`` (see ``Coordinator``).
        cleanup_interval_ms: ``offsets.retention.check.interval.ms``: the broker removes what is
            due at its next cleanup, so a prediction is judged only once that has passed.
        initial_rebalance_delay_ms: ``group.initial.rebalance.delay.ms``: how long a join from
            Empty waits (0: a plain join phase); bounds the start of rebalances from Empty.
    """

    retention_ms: int | None = DEFAULT_RETENTION_MS
    rules: ExpiryRules = ExpiryRules.CURRENT
    coordinator: Coordinator = Coordinator.AUTO
    cleanup_interval_ms: int = DEFAULT_CLEANUP_INTERVAL_MS
    initial_rebalance_delay_ms: int = DEFAULT_INITIAL_REBALANCE_DELAY_MS

    def __post_init__(self) -> None:
        # frozen: validated values are set through object.__setattr__ (the dataclass idiom)
        object.__setattr__(self, "rules", parse_choice(ExpiryRules, self.rules, "expiry rule set"))
        object.__setattr__(self, "coordinator", parse_choice(Coordinator, self.coordinator, "coordinator"))
        if self.retention_ms is not None and (type(self.retention_ms) is not int or self.retention_ms <= 0):
            raise ValueError(f"retention_ms must be a positive integer or None, got {self.retention_ms!r}")
        if type(self.cleanup_interval_ms) is not int or self.cleanup_interval_ms <= 0:
            raise ValueError(f"cleanup_interval_ms must be positive, got {self.cleanup_interval_ms!r}")
        delay = self.initial_rebalance_delay_ms
        if type(delay) is not int or delay < 0:
            raise ValueError(f"initial_rebalance_delay_ms must be a non-negative integer, got {delay!r}")

    @classmethod
    def from_strings(
        cls,
        *,
        retention_ms: int | None = DEFAULT_RETENTION_MS,
        rules: str = ExpiryRules.CURRENT.value,
        coordinator: str = Coordinator.AUTO.value,
        cleanup_interval_ms: int = DEFAULT_CLEANUP_INTERVAL_MS,
        initial_rebalance_delay_ms: int = DEFAULT_INITIAL_REBALANCE_DELAY_MS,
    ) -> ReplaySettings:
        """The settings from configuration values (strings for the enums).

        Raises:
            ValueError: an unknown rule set or coordinator, a non-positive retention or interval.
        """
        return cls(
            retention_ms,
            parse_choice(ExpiryRules, rules, "expiry rule set"),
            parse_choice(Coordinator, coordinator, "coordinator"),
            cleanup_interval_ms,
            initial_rebalance_delay_ms,
        )

    def as_strings(self) -> dict[str, int | str | None]:
        """The settings as plain values (JSON-able): ``from_strings(**s.as_strings()) == s``."""
        return {
            "retention_ms": self.retention_ms,
            "rules": self.rules.value,
            "coordinator": self.coordinator.value,
            "cleanup_interval_ms": self.cleanup_interval_ms,
            "initial_rebalance_delay_ms": self.initial_rebalance_delay_ms,
        }

    @property
    def predicts(self) -> bool:
        """Whether expiry is predicted (a retention is set)."""
        return self.retention_ms is not None

    def with_retention(self, retention_ms: int | None) -> ReplaySettings:
        """The same settings with another retention (None: facts only)."""
        return replace(self, retention_ms=retention_ms)


#: Replay the log's facts only (no expiry prediction): the core replay functions' default.
FACTS_ONLY = ReplaySettings(retention_ms=None)
