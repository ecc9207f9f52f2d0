"""librdkafka client settings, secrets and connection checks (confluent-kafka).

Rules:
- One ``KafkaSettings`` value describes a cluster: bootstrap servers, topic, client id, the
  non-secret security properties (``kafka.security``) and, for secrets, only the NAMES of the
  environment variables holding them. ``client_conf()`` reads the secrets at the moment a client
  is built; ``redacted()`` and ``repr`` never contain a secret, so logging a settings object or a
  client config through ``redact_conf`` is safe.
- Secret sources, first hit wins: a ``${ENV}`` reference in ``kafka.secrets`` (the config), then
  ``OFFSETLAKE_KAFKA_SASL_USERNAME`` / ``OFFSETLAKE_KAFKA_SASL_PASSWORD`` /
  ``OFFSETLAKE_KAFKA_SSL_KEY_PASSWORD``. CLI flags override config values (never secrets).
- librdkafka's own log lines go to the ``offsetlake.kafka.librdkafka`` logger, silent unless
  ``OFFSETLAKE_KAFKA_DEBUG`` is set: an unreachable broker must produce ONE clear line from us,
  not a stream of reconnect messages.
- Every client reads ``__consumer_offsets`` with ``isolation.level=read_committed``, no
  consumer-group subscription, no commits (``assign()`` + explicit offsets). A client never sees
  the COMMIT/ABORT markers the broker's own loader applies (KIP-98), so a read_uncommitted reader
  took an aborted ``send_offsets_to_transaction`` for a commit; read_committed drops the aborted
  records and delivers a committed one at its own position, where Kafka's loader applies it too
  (found against a real Kafka 3.9 broker: tests/broker/test_classic_scenarios.py). End-offset
  sampling of users' topics keeps read_uncommitted (kafka-consumer-groups' LOG-END-OFFSET).
- Reading clients use ``fetch.queue.backoff.ms=10``: with librdkafka's 1000 ms default a reader
  that drains its queue in ``consume()`` batches idles a second each time the queue passes
  ``queued.min.messages``.
- Timestamp types are Kafka's ids (``TimestampType``: -1 none, 0 CREATE_TIME, 1 LOG_APPEND_TIME);
  confluent-kafka reports them shifted by one (0, 1, 2).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipelines.errors import UsageError

if TYPE_CHECKING:
    from pipelines.config import Config

OFFSETS_TOPIC = "__consumer_offsets"

# librdkafka property -> fallback environment variable
SECRET_ENV_FALLBACKS: dict[str, str] = {
    "sasl.username": "OFFSETLAKE_KAFKA_SASL_USERNAME",
    "sasl.password": "OFFSETLAKE_KAFKA_SASL_PASSWORD",
    "ssl.key.password": "OFFSETLAKE_KAFKA_SSL_KEY_PASSWORD",
}
BOOTSTRAP_ENV = "OFFSETLAKE_KAFKA_BOOTSTRAP_SERVERS"
DEBUG_ENV = "OFFSETLAKE_KAFKA_DEBUG"
_SECRET_WORDS = ("password", "secret", "sasl.username", "sasl.oauthbearer.config", "token")

LIBRDKAFKA_LOGGER = logging.getLogger("offsetlake.kafka.librdkafka")
if not os.environ.get(DEBUG_ENV):
    LIBRDKAFKA_LOGGER.addHandler(logging.NullHandler())
    LIBRDKAFKA_LOGGER.propagate = False


class KafkaUnavailableError(UsageError):
    """The cluster cannot be reached (or the topic does not exist): one line, non-zero exit."""


def require_confluent_kafka() -> Any:
    """Import ``confluent_kafka`` or raise a one-line ``UsageError`` naming the extra to install."""
    try:
        import confluent_kafka
    except ImportError:  # pragma: no cover - the dev venv has it
        raise UsageError(
            "the Python Kafka client is not installed: pip install 'offsetlake[kafka]' (confluent-kafka)"
        ) from None
    return confluent_kafka


def is_secret_key(key: str) -> bool:
    """True for librdkafka properties that hold credentials."""
    k = key.lower()
    return any(word in k for word in _SECRET_WORDS)


def redact_conf(conf: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a client config that is safe to print (secrets replaced by ``***``)."""
    out: dict[str, Any] = {}
    for key, value in conf.items():
        if key == "logger":
            continue
        out[key] = "***" if is_secret_key(key) else value
    return out


@dataclass(frozen=True)
class KafkaSettings:
    """Where and how to connect. Secrets are environment-variable NAMES, read in ``client_conf``.

    Attributes:
        bootstrap_servers: ``host:port[,host:port]``.
        topic: the topic to read (``__consumer_offsets``).
        client_id: librdkafka ``client.id``.
        properties: non-secret librdkafka properties (security protocol, SASL mechanism, SSL
            file locations, timeouts, ...).
        secret_env: librdkafka property -> environment variable holding its value.
    """

    bootstrap_servers: str
    topic: str = OFFSETS_TOPIC
    client_id: str = "offsetlake"
    properties: dict[str, str] = field(default_factory=dict)
    secret_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.bootstrap_servers or not self.bootstrap_servers.strip():
            raise UsageError(
                "no Kafka bootstrap servers: pass --bootstrap-servers HOST:PORT, set "
                f"kafka.bootstrap_servers in the config or ${BOOTSTRAP_ENV}"
            )
        bad = [k for k in self.properties if is_secret_key(k)]
        if bad:
            raise UsageError(
                f"Kafka property {bad[0]!r} is a secret: put it in an environment variable "
                "(kafka.secrets in the config), not in plain settings"
            )

    # ---- building clients ----------------------------------------------------------------
    def client_conf(self, **extra: Any) -> dict[str, Any]:
        """A confluent-kafka config with secrets read from the environment now."""
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "client.id": self.client_id,
            "logger": LIBRDKAFKA_LOGGER,
        }
        conf.update(self.properties)
        for prop, env in self.secret_env.items():
            value = os.environ.get(env)
            if value is None:
                raise UsageError(f"Kafka secret {prop} is configured from ${env}, which is not set")
            conf[prop] = value
        if os.environ.get(DEBUG_ENV):
            conf.setdefault("debug", os.environ[DEBUG_ENV] if os.environ[DEBUG_ENV] != "1" else "broker")
        conf.update(extra)
        return conf

    def consumer_conf(self, **extra: Any) -> dict[str, Any]:
        """Config for a reading consumer: no group membership, no commits, every record."""
        base: dict[str, Any] = {
            # confluent-kafka wants a group.id even for assign(); it is never joined or committed.
            "group.id": f"{self.client_id}-reader-unused",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
            "queued.max.messages.kbytes": 262_144,
            # Once the client's queue holds queued.min.messages (100k) records, librdkafka stops
            # fetching for fetch.queue.backoff.ms (default 1000 ms): a reader that drains the
            # queue in consume() batches then sat idle ~1 s per 100k records.
            "fetch.queue.backoff.ms": 10,
        }
        base.update(extra)
        return self.client_conf(**base)

    def redacted(self) -> dict[str, Any]:
        """Printable settings: secrets appear as ``${ENV_VAR}``."""
        out: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "topic": self.topic,
            "client.id": self.client_id,
        }
        out.update(self.properties)
        out.update({prop: f"${{{env}}}" for prop, env in self.secret_env.items()})
        return out

    def __repr__(self) -> str:
        return f"KafkaSettings({self.redacted()!r})"

    # ---- shipping to Spark executors (options are strings; secrets stay env-var names) ----
    def to_options(self) -> dict[str, str]:
        """Data-source options: plain properties as ``kafka.<prop>``, secrets as env-var names."""
        opts = {
            "kafka.bootstrap.servers": self.bootstrap_servers,
            "topic": self.topic,
            "kafka.client.id": self.client_id,
        }
        opts.update({f"kafka.{k}": str(v) for k, v in self.properties.items()})
        opts.update({f"secretenv.{k}": v for k, v in self.secret_env.items()})
        return opts

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> KafkaSettings:
        """Inverse of ``to_options`` (keys are case-insensitive in Spark: compare lower-cased)."""
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        bootstrap = opts.pop("kafka.bootstrap.servers", "") or os.environ.get(BOOTSTRAP_ENV, "")
        topic = opts.pop("topic", None) or opts.pop("subscribe", None) or OFFSETS_TOPIC
        client_id = opts.pop("kafka.client.id", "offsetlake")
        props = {k[len("kafka.") :]: v for k, v in opts.items() if k.startswith("kafka.")}
        secrets = {k[len("secretenv.") :]: v for k, v in opts.items() if k.startswith("secretenv.")}
        for prop, env in SECRET_ENV_FALLBACKS.items():
            if prop not in secrets and env in os.environ:
                secrets[prop] = env
        return cls(bootstrap, topic, client_id, props, secrets)


def settings_from_config(
    cfg: Config | None,
    *,
    bootstrap_servers: str | None = None,
    topic: str | None = None,
    extra_properties: Mapping[str, str] | None = None,
) -> KafkaSettings:
    """Build ``KafkaSettings`` from the config's ``kafka`` section; arguments override it.

    Args:
        cfg: the loaded config (``None`` = defaults, env fallbacks only).
        bootstrap_servers: overrides ``kafka.bootstrap_servers`` / ``$OFFSETLAKE_KAFKA_BOOTSTRAP_SERVERS``.
        topic: overrides ``kafka.topic``.
        extra_properties: librdkafka properties from the command line (``-X key=value``).
    """
    props: dict[str, str] = {}
    secrets: dict[str, str] = {}
    client_id = "offsetlake"
    cfg_topic = OFFSETS_TOPIC
    cfg_bootstrap: str | None = None
    if cfg is not None:
        k = cfg.kafka
        client_id = k.client_id
        cfg_topic = k.topic
        cfg_bootstrap = k.bootstrap_servers
        sec = k.security
        props["security.protocol"] = sec.protocol
        if sec.sasl_mechanism:
            props["sasl.mechanism"] = sec.sasl_mechanism
        if sec.ssl_ca_location:
            props["ssl.ca.location"] = sec.ssl_ca_location
        if sec.ssl_certificate_location:
            props["ssl.certificate.location"] = sec.ssl_certificate_location
        if sec.ssl_key_location:
            props["ssl.key.location"] = sec.ssl_key_location
        if sec.protocol in ("SSL", "SASL_SSL"):
            props["ssl.endpoint.identification.algorithm"] = sec.ssl_endpoint_identification_algorithm
        for attr, prop in (
            ("sasl_username", "sasl.username"),
            ("sasl_password", "sasl.password"),
            ("ssl_key_password", "ssl.key.password"),
        ):
            ref = getattr(k.secrets, attr)
            if ref is not None:
                secrets[prop] = ref.env_var
    for prop, env in SECRET_ENV_FALLBACKS.items():
        if prop not in secrets and env in os.environ:
            secrets[prop] = env
    if extra_properties:
        props.update({str(a): str(b) for a, b in extra_properties.items()})
    bootstrap = bootstrap_servers or cfg_bootstrap or os.environ.get(BOOTSTRAP_ENV, "")
    return KafkaSettings(bootstrap, topic or cfg_topic, client_id, props, secrets)


def parse_properties(items: list[str] | None) -> dict[str, str]:
    """Parse ``-X key=value`` items into a dict (``UsageError`` on a malformed item)."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"-X {item}: expected librdkafka PROPERTY=VALUE")
        out[key.strip()] = value
    return out


def topic_partitions(
    client: Any, settings: KafkaSettings, timeout_s: float, wanted: list[int] | None = None
) -> list[int]:
    """The topic's partition ids, checking the cluster answers within ``timeout_s``.

    Raises:
        KafkaUnavailableError: the brokers did not answer, or the topic does not exist, or a
            wanted partition is missing.
    """
    ck = require_confluent_kafka()
    try:
        md = client.list_topics(settings.topic, timeout=timeout_s)
    except ck.KafkaException as exc:
        err = exc.args[0] if exc.args else exc
        reason = err.str() if hasattr(err, "str") else str(err)
        raise KafkaUnavailableError(
            f"cannot reach Kafka at {settings.bootstrap_servers} within {timeout_s:g}s ({reason})"
        ) from None
    meta = md.topics.get(settings.topic)
    if meta is None or meta.error is not None or not meta.partitions:
        why = meta.error.str() if meta is not None and meta.error is not None else "no partitions"
        raise KafkaUnavailableError(
            f"topic {settings.topic!r} is not available at {settings.bootstrap_servers} ({why})"
        )
    available = sorted(meta.partitions)
    if wanted is None:
        return available
    missing = sorted(set(wanted) - set(available))
    if missing:
        raise KafkaUnavailableError(
            f"topic {settings.topic!r} has partitions 0..{available[-1]}; asked for missing {missing}"
        )
    return sorted(set(wanted))


def watermarks(
    consumer: Any, topic: str, partitions: list[int], timeout_s: float, *, cached: bool = False
) -> dict[int, tuple[int, int]]:
    """``{partition: (log_start_offset, high_watermark)}`` via ListOffsets.

    Raises:
        KafkaUnavailableError: the brokers did not answer within ``timeout_s``.
    """
    ck = require_confluent_kafka()
    out: dict[int, tuple[int, int]] = {}
    for p in partitions:
        try:
            lo, hi = consumer.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=timeout_s, cached=cached)
        except ck.KafkaException as exc:
            err = exc.args[0] if exc.args else exc
            reason = err.str() if hasattr(err, "str") else str(err)
            raise KafkaUnavailableError(
                f"cannot read the offsets of {topic}-{p} within {timeout_s:g}s ({reason})"
            ) from None
        out[p] = (int(lo), int(hi))
    return out
