"""Callbacks referenced by the DAGs (by dotted path; they run in the triggerer / executor)."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("offsetlake.airflow")


async def deadline_missed(dag_id: str, sla_minutes: int, **context: Any) -> None:
    """A DAG run is still not finished ``sla_minutes`` after it was queued: say so loudly."""
    log.error("offsetlake: DAG %s missed its %d-minute deadline (airflow.sla_minutes)", dag_id, sla_minutes)
