"""The configuration's sections: one frozen dataclass per top-level key of ``conf/base.yaml``.

Every setting is declared here once, as a typed field whose default is the value in
``conf/base.yaml`` (a test keeps the two equal); field metadata carries the check used in error
messages (``_f``). Loading, merging and validation live in ``pipelines.config``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Literal

from coordinator_core import ReplaySettings
from pipelines.errors import UsageError


@dataclass(frozen=True, slots=True)
class Secret:
    """A reference to an environment variable holding a secret; the value is never stored."""

    env_var: str

    def reveal(self) -> str:
        """Read the secret from the environment now; a missing variable is a ``UsageError``."""
        value = os.environ.get(self.env_var)
        if value is None:
            raise UsageError(f"secret ${{{self.env_var}}} is referenced by the config but not set")
        return value

    def is_set(self) -> bool:
        return self.env_var in os.environ

    def __repr__(self) -> str:
        return f"Secret(${{{self.env_var}}})"

    __str__ = __repr__


def _f(default: Any, check: str | None = None, *, secret: bool = False, path: bool = False) -> Any:
    meta = {"check": check, "secret": secret, "path": path}
    if isinstance(default, (dict, list)):
        template: dict[str, Any] | list[Any] = default
        return field(default_factory=lambda: template.copy(), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class PathsConf:
    """Where data lives. ``root`` is relative to the CWD, the others to ``root``."""

    root: str = _f("offsetlake-data", path=True)
    landing: str = _f("landing", path=True)
    warehouse: str = _f("warehouse", path=True)
    checkpoints: str = _f("checkpoints", path=True)
    reports: str = _f("reports", path=True)
    dq_docs: str = _f("dq_docs", path=True)


@dataclass(frozen=True)
class SparkConf:
    """The SparkSession: ``master: null`` = ``local[*]``, or whatever spark-submit was given."""

    master: str | None = _f(None)
    app_name: str = _f("offsetlake", "non_empty")
    log_level: Literal["ERROR", "WARN", "INFO", "DEBUG"] = _f("WARN")
    conf: dict[str, str | int | float | bool] = _f({})  # noqa: RUF009


@dataclass(frozen=True)
class DeltaConf:
    """Delta table IO: ``auto`` = Spark's Delta when its jars load, else delta-rs (``rust``)."""

    engine: Literal["auto", "spark", "rust"] = _f("auto")
    target_file_rows: int = _f(1_000_000, "positive")
    vacuum_retention_hours: int = _f(168, "non_negative")


@dataclass(frozen=True)
class InputConf:
    """Where raw records come from: a landing directory, the raw_records table, or Kafka."""

    source: Literal["landing", "delta", "kafka"] = _f("landing")
    format: Literal["parquet", "json", "segments", "auto"] = _f("auto")
    path: str | None = _f(None, path=True)
    kafka_options: dict[str, str | int | bool] = _f({})  # noqa: RUF009
    synthesize_positions: bool = _f(False)


@dataclass(frozen=True)
class KafkaSecurityConf:
    """Kafka client security (librdkafka / Kafka client names); passwords via ``kafka.secrets``."""

    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = _f("PLAINTEXT")
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"] | None = _f(None)
    ssl_ca_location: str | None = _f(None)
    ssl_certificate_location: str | None = _f(None)
    ssl_key_location: str | None = _f(None)
    ssl_endpoint_identification_algorithm: Literal["https", "none"] = _f("https")


@dataclass(frozen=True)
class KafkaSecretsConf:
    """Secrets: only ``${ENV_VAR}`` references are accepted; values are read at use time."""

    sasl_username: Secret | None = _f(None, secret=True)  # noqa: RUF009
    sasl_password: Secret | None = _f(None, secret=True)  # noqa: RUF009
    ssl_key_password: Secret | None = _f(None, secret=True)  # noqa: RUF009


@dataclass(frozen=True)
class KafkaConf:
    """A live Kafka cluster: ``engine`` jvm = Spark's format("kafka"), python = confluent-kafka."""

    engine: Literal["auto", "jvm", "python"] = _f("auto")
    bootstrap_servers: str | None = _f(None)
    topic: str = _f("__consumer_offsets", "non_empty")
    partitions: list[int] | None = _f(None)  # noqa: RUF009
    starting_offsets: Literal["earliest", "latest"] = _f("earliest")
    client_id: str = _f("offsetlake", "non_empty")
    poll_timeout_ms: int = _f(1000, "positive")
    security: KafkaSecurityConf = field(default_factory=KafkaSecurityConf)
    secrets: KafkaSecretsConf = field(default_factory=KafkaSecretsConf)


@dataclass(frozen=True)
class OffsetsTopicConf:
    """``__consumer_offsets`` itself (broker setting ``offsets.topic.num.partitions``)."""

    num_partitions: int = _f(50, "positive")


@dataclass(frozen=True)
class ReplayConf:
    """Replay rules: ``offsets.retention.minutes`` in ms, the Kafka rule set, a fixed ``as_of``."""

    retention_ms: int = _f(604_800_000, "positive")
    rules: Literal["current", "2.4-3.1", "2.1-2.3", "pre-2.1"] = _f("current")
    as_of_ms: int | None = _f(None, "non_negative")
    coordinator: Literal["auto", "old", "new"] = _f("auto")
    cleanup_interval_ms: int = _f(600_000, "positive")
    initial_rebalance_delay_ms: int = _f(3_000, "non_negative")
    clock_outlier_ms: int = _f(86_400_000, "positive")
    now: Literal["evidence", "log", "wall"] = _f("evidence")

    def settings(self) -> ReplaySettings:
        """The core's replay settings from this section (the one place they are built)."""
        return ReplaySettings.from_strings(
            retention_ms=self.retention_ms,
            rules=self.rules,
            coordinator=self.coordinator,
            cleanup_interval_ms=self.cleanup_interval_ms,
            initial_rebalance_delay_ms=self.initial_rebalance_delay_ms,
        )


@dataclass(frozen=True)
class StreamConf:
    """The streaming job (applyInPandasWithState, event-time timeouts, foreachBatch MERGE)."""

    trigger_interval: str = _f("30 seconds", "non_empty")
    max_files_per_trigger: int = _f(100, "positive")
    max_bytes_per_trigger: int | None = _f(None, "positive")
    max_records_per_trigger: int | None = _f(2_000_000, "positive")
    watermark_delay_ms: int = _f(60_000, "non_negative")
    state_store: Literal["rocksdb", "hdfs"] = _f("rocksdb")
    timeout_mode: Literal["event_time", "processing_time"] = _f("event_time")
    landing_reader: Literal["python", "spark"] = _f("python")
    state_partitions: int | None = _f(None, "positive")
    allow_late_drops: bool = _f(False)


@dataclass(frozen=True)
class DqConf:
    """Data quality: thresholds and which expectations block the pipeline."""

    quarantine_max_fraction: float = _f(0.01, "fraction")
    session_timeout_min_ms: int = _f(6_000, "positive")
    session_timeout_max_ms: int = _f(1_800_000, "positive")
    blocking: list[str] = _f([])  # noqa: RUF009
    results_table: str = _f("dq_results", "non_empty")


@dataclass(frozen=True)
class AirflowConf:
    """How the DAGs schedule the jobs: spark-submit with ``--conf <conf_path>``; ``conf_path:
    null`` = the overlay the DAGs were configured from (``$OFFSETLAKE_CONF``); ``py_files``: the
    project shipped to a cluster's executors (``--py-files``: a zip or wheel of it)."""

    batch_schedule: str = _f("@daily", "non_empty")
    stream_schedule_minutes: int = _f(15, "positive")
    conf_path: str | None = _f(None)
    spark_conn_id: str = _f("spark_default", "non_empty")
    retries: int = _f(2, "non_negative")
    sla_minutes: int = _f(60, "positive")
    py_files: str | None = _f(None)


@dataclass(frozen=True)
class ReportConf:
    """HTML reports: ``out: null`` = ``paths.reports``."""

    out: str | None = _f(None, path=True)


@dataclass(frozen=True)
class GenerateConf:
    """The simulator behind ``offsetlake generate`` / ``quickstart``."""

    groups: int = _f(20, "positive")
    hours: float = _f(2.0, "positive")
    seed: int = _f(7)
    retention_ms: int = _f(604_800_000, "positive")
    coordinator: Literal["old", "new"] = _f("new")
    consumer_groups: float = _f(0.0, "fraction")
    conversions: float = _f(0.0, "fraction")

    @property
    def cluster(self) -> dict[str, Any]:
        """The simulated cluster's kind: its coordinator and the mixed Kafka 4 cluster's shares,
        as ``GeneratorConfig`` names them."""
        return {
            "coordinator": self.coordinator,
            "consumer_groups": self.consumer_groups,
            "conversions": self.conversions,
        }
