"""What a quality run found, as values: each evaluated expectation (``Outcome``) and the run's
report (``DqReport``). The runner makes them, the page and the ``dq`` job read them."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Outcome:
    """One evaluated expectation (a ``dq_results`` row without the run columns)."""

    suite: str
    target: str
    expectation: str
    expectation_type: str
    kwargs: str
    blocking: bool
    success: bool
    observed_value: str | None
    element_count: int | None = None
    unexpected_count: int | None = None
    error: str | None = None


@dataclass
class DqReport:
    """What a quality run found."""

    run_id: str
    run_timestamp: dt.datetime
    outcomes: list[Outcome] = field(default_factory=list)
    docs_index: str | None = None
    results_table: str | None = None

    @property
    def blocking_failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.blocking and not o.success]

    @property
    def warnings(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.blocking and not o.success]

    @property
    def success(self) -> bool:
        """True when no blocking expectation failed."""
        return not self.blocking_failures

    def rows(self) -> list[dict[str, Any]]:
        """``dq_results`` rows (column order of ``schemas.dq.DQ_RESULTS``)."""
        return [{"run_id": self.run_id, "run_timestamp": self.run_timestamp, **o.__dict__} for o in self.outcomes]
