"""The simulator's trace: every state change, request, response, timer and record.

Rules:
- One flat, JSON-serialisable dataclass per event (``TraceEvent``); ``to_dict`` drops ``None``
  fields so JSON lines stay short. ``kind`` is one of ``transition``, ``request``, ``response``,
  ``timer``, ``record``, ``client`` (a client-side callback such as onPartitionsAssigned).
- Times are simulated milliseconds (the coordinator's clock), never wall-clock.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

TraceKind = Literal["transition", "request", "response", "timer", "record", "client"]


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """One line of the trace (see module docstring)."""

    time_ms: int
    group_id: str
    kind: TraceKind
    from_state: str | None = None
    to_state: str | None = None
    generation: int | None = None
    cause: str | None = None
    member: str | None = None
    api: str | None = None
    error: str | None = None
    detail: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict without the ``None`` fields."""
        return {k: v for k, v in asdict(self).items() if v is not None}


def state_sequence(events: list[TraceEvent], group_id: str) -> list[str]:
    """The group's states in order: the first ``from_state`` then every ``to_state``."""
    out: list[str] = []
    for e in events:
        if e.kind == "transition" and e.group_id == group_id:
            if not out and e.from_state is not None:
                out.append(e.from_state)
            if e.to_state is not None:
                out.append(e.to_state)
    return out
