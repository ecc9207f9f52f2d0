"""Data-quality tables written by ``offsetlake dq`` (``pipelines.quality``).

Rules:
- ``dq_results`` is append-only: one row per (run, suite, target, expectation). A run never
  rewrites an earlier run's rows, so the table is the history of every quality gate.
- ``observed_value`` is JSON text (numbers, counts, small samples of unexpected values): the
  shape differs per expectation, the column type does not.
- ``dq_group_generations`` is the memory behind "generation never decreases against the previous
  run": the (group, generation, state) seen by the last run whose generation check passed.
  It is overwritten as a whole; it is not history.
"""

from __future__ import annotations

from schemas.base import Column, TableSpec

DQ_RESULTS = TableSpec(
    name="dq_results",
    doc="One row per expectation evaluated by `offsetlake dq`: which run, suite and target, "
    "whether it passed, whether it blocks the pipeline, and the observed value. The table name "
    "is `dq.results_table` in the config.",
    columns=(
        Column("run_id", "string", False, "Quality run id (UTC time + random suffix, or the Airflow run id)."),
        Column("run_timestamp", "timestamp", False, "When the run started, UTC."),
        Column(
            "suite", "string", False, "Suite name: a table (`raw_records`, `group_state`, ...) or `reconciliation`."
        ),
        Column(
            "target",
            "string",
            False,
            "What was validated: the table itself or a derived frame (`group_metadata.members`, `quarantine.summary`).",
        ),
        Column(
            "expectation",
            "string",
            False,
            "Stable check name within the suite (e.g. `offset_unique`); `dq.blocking` refers to `suite.expectation`.",
        ),
        Column(
            "expectation_type", "string", False, "Great Expectations type, e.g. `expect_column_values_to_be_unique`."
        ),
        Column("kwargs", "string", True, "The expectation's arguments as JSON (columns, bounds, value sets)."),
        Column("blocking", "boolean", False, "True when a failure of this expectation fails the quality gate."),
        Column("success", "boolean", False, "True when the expectation held."),
        Column("observed_value", "string", True, "Observed value as JSON (a count, a fraction, unexpected values)."),
        Column("element_count", "bigint", True, "Rows evaluated, when the expectation is row-wise."),
        Column("unexpected_count", "bigint", True, "Rows that broke the expectation, when row-wise."),
        Column("error", "string", True, "Exception raised while evaluating, if any (the expectation then fails)."),
    ),
    primary_key=("run_id", "suite", "target", "expectation"),
    mode="append",
)

DQ_GROUP_GENERATIONS = TableSpec(
    name="dq_group_generations",
    doc="Baseline for the `group_state.generation_not_decreasing` check: each group's generation "
    "and state as seen by the last quality run whose generation check passed.",
    columns=(
        Column("group_id", "string", False, "Consumer group id."),
        Column("generation", "int", True, "Generation id at that run."),
        Column("state", "string", True, "Group state at that run (a Dead group may restart at generation 0)."),
        Column("run_id", "string", False, "Quality run that recorded it."),
    ),
    primary_key=("group_id",),
    mode="overwrite",
)

TABLES = [DQ_RESULTS, DQ_GROUP_GENERATIONS]
