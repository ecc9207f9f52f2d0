"""Data quality: Great Expectations suites over the Delta tables, run on Spark DataFrames.

Rules:
- Suites are declared in code (``suites.py``): one per table plus ``reconciliation``; each
  suite has one or more *targets* (the table itself, or a small frame derived from it with
  Spark, e.g. exploded members or a one-row summary of counts) and named expectations.
- Everything row-wise runs in Spark through GX's Spark datasource (the ``[spark]`` extra is not
  needed; the installed pyspark is used; frames are not persisted: GX would cache each whole).
  A key's uniqueness, cross-table and "previous run" checks compute their observed values with
  Spark (one aggregation each) and validate the one-row summary on GX's pandas engine, so every
  check is a GX expectation with a recorded observed value.
- The GX context is ephemeral (nothing is written under the repo); results go to the
  ``dq_results`` Delta table; ``paths.dq_docs`` gets offsetlake's own offline page as
  ``index.html`` (``page.py``) with GX's HTML data docs beside it (``gx-index.html``).
- A check is *blocking* when its suite declares it so or when ``dq.blocking`` names it
  (``suite.expectation``, ``suite`` or ``*``); ``offsetlake dq`` exits 1 when a blocking
  check fails.
"""

from __future__ import annotations

from pipelines.quality.runner import run_quality
from pipelines.quality.suites import SUITES

__all__ = ["SUITES", "run_quality"]


def __getattr__(name: str) -> object:
    # Lazy: importing the package must not import Great Expectations or pyspark.
    if name == "SUITES":
        return SUITES
    if name == "run_quality":
        return run_quality
    raise AttributeError(name)
