"""The quality suites: which frames are validated and what is expected of them.

Rules:
- A ``Suite`` is named after what it guards (a table, or ``reconciliation``) and lists the
  tables it reads. It has one or more ``Target``s: a frame built from those tables with Spark
  (the table itself, an exploded view, or a one-row summary of counts) and its ``Check``s.
- A ``Check`` is one Great Expectations expectation with a stable ``name`` (``dq.blocking`` and
  ``dq_results.expectation`` use it) and a default ``blocking`` flag. Thresholds come from the
  ``dq`` section of the config, never from literals here, except Kafka's own invariants (the
  five group states, key versions 0/1, offsets ≥ -1).
- Summary targets (one row) carry their observed values in their columns; the check validates
  that column, so the value is recorded exactly as computed. A key's uniqueness is checked
  this way too (``repeated_keys``: one aggregation, not GX's per-row window).
- Frames are ``DataFrame -> DataFrame`` functions of their inputs; nothing here reads or
  writes storage (``runner.py`` does), so suites are testable on any DataFrame.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from great_expectations.expectations.expectation import Expectation
    from pyspark.sql import DataFrame

    from pipelines.config.sections import DqConf

#: Kafka's classic group states (``ClassicGroupState`` / ``GroupState.scala``) and a consumer
#: group's (KIP-848, ``ConsumerGroup.ConsumerGroupState``: Assigning, Reconciling)
GROUP_STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Assigning", "Reconciling")
#: OffsetCommitKey versions: 0 (0.8.2) and 1 (0.9+); 2 is GroupMetadataKey (``GroupMetadataManager``).
OFFSET_COMMIT_KEY_VERSIONS = (0, 1)
#: GroupMetadataKey version.
GROUP_METADATA_KEY_VERSIONS = (2,)

Frames = Mapping[str, "DataFrame"]


@dataclass(frozen=True)
class Check:
    """One named expectation; ``blocking`` is its default (``dq.blocking`` can add more)."""

    name: str
    expectation: Callable[[DqConf, bool], Expectation]
    blocking: bool = True
    doc: str = ""


@dataclass(frozen=True)
class Target:
    """A frame to validate: ``name`` (table or derived), how to build it, its checks."""

    name: str
    build: Callable[[Frames, Baseline], DataFrame]
    checks: tuple[Check, ...]
    summary: bool = False  # a one-row frame whose columns are the observed values


@dataclass(frozen=True)
class Suite:
    """A quality suite: the tables it reads and the targets it validates."""

    name: str
    tables: tuple[str, ...]
    targets: tuple[Target, ...]
    doc: str = ""
    groups: tuple[str, ...] = ("batch",)


@dataclass(frozen=True)
class Baseline:
    """State carried from the previous run (the group generations of the last passing run)."""

    group_generations: DataFrame | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _severity(blocking: bool) -> str:
    return "critical" if blocking else "warning"


def _gx() -> Any:
    import great_expectations.expectations as gxe

    return gxe


# ---- expectation factories (the conf is passed so thresholds come from it) --------------------
def not_null(column: str, row_condition: str | None = None) -> Callable[[DqConf, bool], Expectation]:
    def make(conf: DqConf, blocking: bool) -> Expectation:
        kw: dict[str, Any] = {}
        if row_condition:
            kw = {"row_condition": row_condition, "condition_parser": "spark"}
        return cast(
            "Expectation", _gx().ExpectColumnValuesToNotBeNull(column=column, severity=_severity(blocking), **kw)
        )

    return make


def in_set(column: str, values: tuple[Any, ...]) -> Callable[[DqConf, bool], Expectation]:
    def make(conf: DqConf, blocking: bool) -> Expectation:
        return cast(
            "Expectation",
            _gx().ExpectColumnValuesToBeInSet(column=column, value_set=list(values), severity=_severity(blocking)),
        )

    return make


def between(
    column: str,
    low: float | Callable[[DqConf], float] | None = None,
    high: float | Callable[[DqConf], float] | None = None,
) -> Callable[[DqConf, bool], Expectation]:
    """``low <= column <= high`` (nulls are not checked: pair with ``not_null`` when needed)."""

    def make(conf: DqConf, blocking: bool) -> Expectation:
        lo = low(conf) if callable(low) else low
        hi = high(conf) if callable(high) else high
        return cast(
            "Expectation",
            _gx().ExpectColumnValuesToBeBetween(
                column=column, min_value=lo, max_value=hi, severity=_severity(blocking)
            ),
        )

    return make


# ---- frames ----------------------------------------------------------------------------------
def table(name: str) -> Callable[[Frames, Baseline], DataFrame]:
    def build(frames: Frames, baseline: Baseline) -> DataFrame:
        return frames[name]

    return build


def repeated_keys(name: str, *columns: str) -> Callable[[Frames, Baseline], DataFrame]:
    """One row of table ``name``'s key ``columns``: ``repeated_rows`` (rows that share their key
    with another row), ``rows``, ``keys`` (distinct) and one repeated key (``example``).

    One hash aggregation: GX's own uniqueness expectations run a window over every row on Spark,
    once per metric (31 s against ~7 s for 10M raw records; bench/RESULTS.md, *dq*). Rows whose
    key columns are all null are left out, as GX leaves them out (``ignore_row_if``)."""

    def build(frames: Frames, baseline: Baseline) -> DataFrame:
        from functools import reduce

        from pyspark.sql import functions as F

        present = reduce(lambda a, b: a | b, [F.col(c).isNotNull() for c in columns])
        keyed = frames[name].where(present).groupBy(*columns).agg(F.count(F.lit(1)).alias("n"))
        repeated = F.col("n") > 1
        return keyed.agg(
            F.coalesce(F.sum(F.when(repeated, F.col("n"))), F.lit(0)).cast("bigint").alias("repeated_rows"),
            F.coalesce(F.sum("n"), F.lit(0)).cast("bigint").alias("rows"),
            F.count(F.lit(1)).cast("bigint").alias("keys"),
            F.min(F.when(repeated, F.concat_ws(", ", *[F.col(c).cast("string") for c in columns]))).alias("example"),
        )

    return build


def _no_repeated_rows(conf: DqConf, blocking: bool) -> Expectation:
    """The check of a ``repeated_keys`` row: no row shares its key."""
    return between("repeated_rows", 0, 0)(conf, blocking)


def members_frame(frames: Frames, baseline: Baseline) -> DataFrame:
    """One row per member of every (non-tombstone) group-metadata record."""
    from pyspark.sql import functions as F

    gm = frames["group_metadata"]
    m = gm.select("group_id", "generation", F.explode("members").alias("m"))
    return m.select(
        "group_id",
        "generation",
        F.col("m.member_id").alias("member_id"),
        F.col("m.session_timeout").alias("session_timeout"),
        F.col("m.rebalance_timeout").alias("rebalance_timeout"),
    )


def generation_regressions_frame(frames: Frames, baseline: Baseline) -> DataFrame:
    """One row: how many groups have a lower generation than at the previous passing run.

    A group that was ``Dead`` at the previous run may legitimately restart (Kafka creates a new
    group object whose generation starts again at 0), so it is not counted.
    """
    from pyspark.sql import functions as F

    gs = frames["group_state"]
    spark = gs.sparkSession
    prev = baseline.group_generations
    if prev is None:
        return spark.createDataFrame(
            [(0, 0, None)], "decreased_generations bigint, compared_groups bigint, example string"
        )
    joined = gs.select("group_id", F.col("generation").alias("gen")).join(
        prev.select("group_id", F.col("generation").alias("prev_gen"), F.col("state").alias("prev_state")), "group_id"
    )
    bad = F.col("gen") < F.col("prev_gen")
    legit = F.coalesce(F.col("prev_state") == F.lit("Dead"), F.lit(False))
    flagged = bad & ~legit
    return joined.agg(
        F.sum(F.when(flagged, 1).otherwise(0)).cast("bigint").alias("decreased_generations"),
        F.count(F.lit(1)).cast("bigint").alias("compared_groups"),
        F.min(
            F.when(
                flagged,
                F.concat_ws(
                    "",
                    F.col("group_id"),
                    F.lit(": "),
                    F.col("prev_gen").cast("string"),
                    F.lit(" -> "),
                    F.col("gen").cast("string"),
                ),
            )
        ).alias("example"),
    )


def _count(frames: Frames, name: str) -> DataFrame:
    from pyspark.sql import functions as F

    return frames[name].agg(F.count(F.lit(1)).cast("bigint").alias(name))


def reconciliation_frame(frames: Frames, baseline: Baseline) -> DataFrame:
    """One row: raw count, each decoded table's count and ``unaccounted = raw - sum``."""
    from pyspark.sql import functions as F

    names: tuple[str, ...] = ("raw_records", "offset_commits", "group_metadata", "quarantine", "unsupported_records")
    # group_records (Kafka 4 group records) is absent from warehouses written before it existed
    names += ("group_records",) if "group_records" in frames else ()
    row = _count(frames, names[0])
    for name in names[1:]:
        row = row.crossJoin(_count(frames, name))
    return row.withColumn("unaccounted", F.col("raw_records") - sum((F.col(n) for n in names[2:]), F.col(names[1])))


def quarantine_frame(frames: Frames, baseline: Baseline) -> DataFrame:
    """One row: quarantined records, the records read, and their ratio."""
    from pyspark.sql import functions as F

    if "raw_records" in frames:
        total = _count(frames, "raw_records").withColumnRenamed("raw_records", "records")
    else:  # no raw table (e.g. the streaming path): everything decoded or set aside
        total = _count(frames, "offset_commits")
        for name in ("group_metadata", "group_records", "quarantine", "unsupported_records"):
            if name in frames:
                total = total.crossJoin(_count(frames, name))
        total = total.select(sum((F.col(c) for c in total.columns), F.lit(0)).alias("records"))
    q = _count(frames, "quarantine")
    return total.crossJoin(q).withColumn(
        "quarantined_fraction",
        F.when(F.col("records") > 0, F.col("quarantine") / F.col("records")).otherwise(F.lit(0.0)),
    )


# ---- the suites ------------------------------------------------------------------------------
def _q_max(conf: DqConf) -> float:
    return conf.quarantine_max_fraction


def _st_min(conf: DqConf) -> float:
    return conf.session_timeout_min_ms


def _st_max(conf: DqConf) -> float:
    return conf.session_timeout_max_ms


SUITES: tuple[Suite, ...] = (
    Suite(
        "raw_records",
        ("raw_records",),
        (
            Target(
                "raw_records",
                table("raw_records"),
                (
                    Check("offset_non_negative", between("offset", 0)),
                    Check("partition_non_negative", between("partition", 0)),
                    Check(
                        "key_not_null",
                        not_null("key"),
                        doc="Every __consumer_offsets record has a key (the record type + group).",
                    ),
                    Check("offset_not_null", not_null("offset")),
                ),
            ),
            Target(
                "raw_records.keys",
                repeated_keys("raw_records", "topic", "partition", "offset"),
                (
                    Check(
                        "offset_unique",
                        _no_repeated_rows,
                        doc="(topic, partition, offset) identifies a record: ingest is idempotent on it.",
                    ),
                ),
                summary=True,
            ),
        ),
        doc="Raw records as read from __consumer_offsets.",
    ),
    Suite(
        "offset_commits",
        ("offset_commits",),
        (
            Target(
                "offset_commits",
                table("offset_commits"),
                (
                    Check(
                        "committed_offset_at_least_minus_one",
                        between("committed_offset", -1),
                        doc="Kafka stores -1 for 'no offset' (OffsetAndMetadata.INVALID_OFFSET); nothing lower.",
                    ),
                    Check(
                        "commit_timestamp_present",
                        not_null("commit_timestamp", "is_tombstone = false"),
                        doc="Every non-tombstone OffsetCommitValue carries commit_timestamp.",
                    ),
                    Check("key_version_0_or_1", in_set("key_version", OFFSET_COMMIT_KEY_VERSIONS)),
                    Check("group_id_not_null", not_null("group_id")),
                ),
            ),
            Target(
                "offset_commits.keys",
                repeated_keys("offset_commits", "coordinator_partition", "log_offset"),
                (Check("position_unique", _no_repeated_rows, doc="One decoded row per raw record's position."),),
                summary=True,
            ),
        ),
        doc="Decoded offset-commit records.",
    ),
    Suite(
        "group_metadata",
        ("group_metadata",),
        (
            Target(
                "group_metadata",
                table("group_metadata"),
                (
                    Check("generation_non_negative", between("generation", 0)),
                    Check("key_version_2", in_set("key_version", GROUP_METADATA_KEY_VERSIONS)),
                    Check("member_count_non_negative", between("member_count", 0)),
                ),
            ),
            Target(
                "group_metadata.keys",
                repeated_keys("group_metadata", "coordinator_partition", "log_offset"),
                (Check("position_unique", _no_repeated_rows, doc="One decoded row per raw record's position."),),
                summary=True,
            ),
            Target(
                "group_metadata.members",
                members_frame,
                (
                    Check(
                        "session_timeout_within_broker_bounds",
                        between("session_timeout", _st_min, _st_max),
                        blocking=False,
                        doc="The broker rejects a JoinGroup outside [group.min.session.timeout.ms, "
                        "group.max.session.timeout.ms] (INVALID_SESSION_TIMEOUT).",
                    ),
                    Check("session_timeout_present", not_null("session_timeout")),
                    Check("member_id_not_null", not_null("member_id")),
                ),
            ),
        ),
        doc="Decoded group-metadata records and their members.",
    ),
    Suite(
        "quarantine",
        ("quarantine",),
        (
            Target("quarantine", table("quarantine"), (Check("error_class_present", not_null("error_class")),)),
            Target(
                "quarantine.summary",
                quarantine_frame,
                (
                    Check(
                        "quarantined_fraction_under_threshold",
                        between("quarantined_fraction", 0, _q_max),
                        doc="More undecodable records than dq.quarantine_max_fraction means a format or "
                        "decoder problem, not a stray corrupt record.",
                    ),
                ),
                summary=True,
            ),
        ),
        doc="Records that could not be decoded.",
    ),
    Suite(
        "reconciliation",
        ("raw_records", "offset_commits", "group_metadata", "quarantine", "unsupported_records"),
        (
            Target(
                "reconciliation.counts",
                reconciliation_frame,
                (
                    Check(
                        "raw_equals_decoded_plus_set_aside",
                        between("unaccounted", 0, 0),
                        doc="raw_records = offset_commits + group_metadata + group_records + quarantine + "
                        "unsupported_records.",
                    ),
                ),
                summary=True,
            ),
        ),
        doc="Cross-table record counts: every raw record is decoded, quarantined or set aside exactly once.",
    ),
    Suite(
        "group_state",
        ("group_state",),
        (
            Target(
                "group_state",
                table("group_state"),
                (
                    Check("group_id_not_null", not_null("group_id")),
                    Check("state_is_a_kafka_state", in_set("state", GROUP_STATES)),
                    Check("state_not_null", not_null("state")),
                    Check("generation_non_negative", between("generation", 0)),
                ),
            ),
            Target(
                "group_state.keys",
                repeated_keys("group_state", "group_id"),
                (Check("one_row_per_group", _no_repeated_rows),),
                summary=True,
            ),
            Target(
                "group_state.vs_previous_run",
                generation_regressions_frame,
                (
                    Check(
                        "generation_not_decreasing",
                        between("decreased_generations", 0, 0),
                        doc="A group's generation only grows (GroupMetadata.initNextGeneration) unless the "
                        "group died and was re-created.",
                    ),
                ),
                summary=True,
            ),
        ),
        doc="Current state per group (gold).",
        groups=("batch", "stream"),
    ),
    Suite(
        "offsets_current",
        ("offsets_current",),
        (
            Target(
                "offsets_current",
                table("offsets_current"),
                (
                    Check("offset_at_least_minus_one", between("offset", -1)),
                    Check("partition_non_negative", between("partition", 0)),
                ),
            ),
            Target(
                "offsets_current.keys",
                repeated_keys("offsets_current", "group_id", "topic", "partition"),
                (Check("one_row_per_group_topic_partition", _no_repeated_rows),),
                summary=True,
            ),
        ),
        doc="Latest committed offset per (group, topic, partition) (gold).",
        groups=("batch", "stream"),
    ),
)


def suite_names() -> list[str]:
    return [s.name for s in SUITES]


def select_suites(spec: str | None) -> list[Suite]:
    """Suites named by ``spec``: ``None``/``all``, a group (``batch``, ``stream``), or a
    comma-separated list of suite names. Unknown names raise ``ValueError`` naming the known ones."""
    if spec is None or spec.strip() in ("", "all"):
        return list(SUITES)
    groups = {g for s in SUITES for g in s.groups}
    chosen: list[Suite] = []
    for item in (p.strip() for p in spec.split(",")):
        if not item:
            continue
        if item in groups:
            chosen += [s for s in SUITES if item in s.groups and s not in chosen]
            continue
        match = [s for s in SUITES if s.name == item]
        if not match:
            raise ValueError(
                f"unknown suite {item!r}; known: {', '.join(suite_names())} (groups: {', '.join(sorted(groups))})"
            )
        if match[0] not in chosen:
            chosen.append(match[0])
    return chosen


def is_blocking(suite: str, check: Check, conf: DqConf) -> bool:
    """A check blocks when its suite says so or ``dq.blocking`` lists ``suite.check``, ``suite``,
    the bare check name or ``*``."""
    if check.blocking:
        return True
    listed = set(conf.blocking)
    return bool(listed & {"*", suite, check.name, f"{suite}.{check.name}"})
