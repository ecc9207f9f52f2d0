"""The one error hierarchy of the core.

Rules:
- The core raises; the pipeline decides (quarantine, skip, abort).
- Every error about bytes carries enough to find the byte: record type (key version),
  version, which part of the record (key, value, subscription, assignment) and the byte
  position where reading failed.
"""

from __future__ import annotations

from typing import Literal

Part = Literal["key", "value", "subscription", "assignment"]


class CoordinatorError(Exception):
    """Base class of every error raised by ``coordinator_core``."""


class CorruptRecordError(CoordinatorError):
    """Bytes that cannot be a valid record of the claimed type and version.

    Attributes:
        record_type: the key version (0/1 offset commit, 2 group metadata, ...) or None if the
            key itself could not be read far enough to know it.
        version: the version of the part being read (key version or value version), if known.
        part: "key", "value", "subscription" or "assignment".
        position: byte offset inside that part where reading failed.
        reason: a short human sentence.
    """

    def __init__(
        self, reason: str, *, part: Part, position: int, record_type: int | None = None, version: int | None = None
    ) -> None:
        self.reason = reason
        self.part: Part = part
        self.position = position
        self.record_type = record_type
        self.version = version
        super().__init__(self._render())

    def _render(self) -> str:
        rt = "?" if self.record_type is None else str(self.record_type)
        ver = "?" if self.version is None else str(self.version)
        return f"corrupt {self.part} (record type {rt}, version {ver}) at byte {self.position}: {self.reason}"

    def __reduce__(self) -> tuple[object, ...]:  # picklable across Spark workers
        return (_rebuild_corrupt, (self.reason, self.part, self.position, self.record_type, self.version))


def _rebuild_corrupt(
    reason: str, part: Part, position: int, record_type: int | None, version: int | None
) -> CorruptRecordError:
    return CorruptRecordError(reason, part=part, position=position, record_type=record_type, version=version)


class IllegalStateTransitionError(CoordinatorError):
    """A group state change that Kafka's ClassicGroupState table forbids."""

    def __init__(self, group: str, current: str, target: str) -> None:
        self.group = group
        self.current = current
        self.target = target
        super().__init__(
            f"group {group!r}: illegal transition {current} -> {target} "
            f"(allowed previous states of {target} do not include {current})"
        )


class ConfigError(CoordinatorError):
    """A bad scenario or simulator configuration (wrong key, bad value)."""
