"""Deterministic simulator of Kafka's classic group coordinator and Java-like consumers.

``Simulator`` (the event loop) holds a ``Coordinator`` (``coordinator.py``), clients
(``client.py``), the topics, the ``__consumer_offsets`` log it writes (``log.py``) and the trace
(``trace.py``). ``Scenario.from_dict`` (``scenario.py``) builds one from a plain dict.
Standard library only; time is simulated; randomness only from a seeded ``random.Random``.
"""

from __future__ import annotations

from coordinator_core.simulator.client import ClientConfig, ConsumerClient
from coordinator_core.simulator.coordinator import Coordinator, CoordinatorConfig, Group, Member
from coordinator_core.simulator.engine import Simulator
from coordinator_core.simulator.log import BytesLog, RecordLog
from coordinator_core.simulator.scenario import Scenario, ScenarioResult
from coordinator_core.simulator.trace import TraceEvent, state_sequence

__all__ = [
    "BytesLog",
    "ClientConfig",
    "ConsumerClient",
    "Coordinator",
    "CoordinatorConfig",
    "Group",
    "Member",
    "RecordLog",
    "Scenario",
    "ScenarioResult",
    "Simulator",
    "TraceEvent",
    "state_sequence",
]
