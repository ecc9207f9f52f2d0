"""Configuration: ``conf/base.yaml`` + an environment overlay, validated on load.

Rules:
- Every setting is declared once, as a typed field of the frozen dataclasses below; their defaults
  are the values in ``conf/base.yaml`` (a test keeps the two equal). Nothing else defines keys.
- Loading order: ``conf/base.yaml`` (from the repo's ``conf/`` directory), then the overlay's
  ``extends:`` chain (paths relative to the overlay), then the overlay, then ``--set`` style
  overrides. Mappings merge key by key; lists and scalars replace.
- Every file is validated on its own before merging, so an error names the file that holds the bad
  value: ``UsageError("conf/local.yaml: replay.retention_ms: expected a positive integer, got
  'abc'")``. Unknown keys are errors too (with a "did you mean" hint).
- Secrets (Kafka SASL/SSL passwords, anything under ``kafka.secrets``, and any entry of the
  free-form option maps ``input.kafka_options`` / ``spark.conf`` whose key names a secret:
  ``password``, ``secret``, ``jaas``, ``token``, ``credential``, ``...key``; ``SECRET_KEY_RE``)
  may only be written as ``${ENV_VAR}`` references; a literal is refused without echoing it.
  The loader stores the reference, never the value: ``Secret.reveal()``
  reads the environment at the moment of use, ``repr``/``redacted()`` show ``${ENV_VAR}`` only, so
  a secret cannot reach a log through the config object. ``${...}`` is NOT interpolated anywhere else.
- Paths: ``paths.root`` resolves against the current working directory; the other ``paths.*`` and
  ``report.out`` resolve against ``paths.root``. URIs with a scheme (``s3a://``, ``abfss://``,
  ``file:/``) are kept verbatim. Tables live at ``<paths.warehouse>/<table name>``.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from coordinator_core.settings import ReplaySettings
from pipelines.errors import UsageError

REPO_ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = REPO_ROOT / "conf"
BASE_CONF = CONF_DIR / "base.yaml"
DEFAULT_CONF = CONF_DIR / "local.yaml"
CONF_ENV_VAR = "OFFSETLAKE_CONF"

_ENV_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")
#: An option key that names a secret (matched case-insensitively on the whole key).
SECRET_KEY_RE = re.compile(
    r"(password|passwd|secret|jaas|token|credential|private[._-]?key|api[._-]?key|access[._-]?key|(^|[._])key$)",
    re.IGNORECASE)


# --------------------------------------------------------------------------------------------
# secrets


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


# --------------------------------------------------------------------------------------------
# field helpers: metadata carries the human description used in error messages


def _f(default: Any, check: str | None = None, *, secret: bool = False, path: bool = False) -> Any:
    meta = {"check": check, "secret": secret, "path": path}
    if isinstance(default, (dict, list)):
        template: dict[str, Any] | list[Any] = default
        return field(default_factory=lambda: template.copy(), metadata=meta)
    return field(default=default, metadata=meta)


# --------------------------------------------------------------------------------------------
# sections (defaults == conf/base.yaml)


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
    format: Literal["parquet", "json", "auto"] = _f("auto")
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
    clock_outlier_ms: int = _f(86_400_000, "positive")

    def settings(self) -> ReplaySettings:
        """The core's replay settings from this section (the one place they are built)."""
        return ReplaySettings.from_strings(
            retention_ms=self.retention_ms, rules=self.rules, coordinator=self.coordinator,
            cleanup_interval_ms=self.cleanup_interval_ms,
        )


@dataclass(frozen=True)
class StreamConf:
    """The streaming job (applyInPandasWithState, event-time timeouts, foreachBatch MERGE)."""

    trigger_interval: str = _f("30 seconds", "non_empty")
    max_files_per_trigger: int = _f(100, "positive")
    max_bytes_per_trigger: int | None = _f(None, "positive")
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
    """How the DAGs schedule the jobs (they call spark-submit / the CLI with ``conf_path``)."""

    batch_schedule: str = _f("@daily", "non_empty")
    stream_schedule_minutes: int = _f(15, "positive")
    conf_path: str = _f("conf/local.yaml", "non_empty")
    spark_conn_id: str = _f("spark_default", "non_empty")
    retries: int = _f(2, "non_negative")
    sla_minutes: int = _f(60, "positive")


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


@dataclass(frozen=True)
class Config:
    """The whole validated configuration (see ``conf/base.yaml`` for every key's meaning)."""

    paths: PathsConf = field(default_factory=PathsConf)
    spark: SparkConf = field(default_factory=SparkConf)
    delta: DeltaConf = field(default_factory=DeltaConf)
    input: InputConf = field(default_factory=InputConf)
    kafka: KafkaConf = field(default_factory=KafkaConf)
    offsets_topic: OffsetsTopicConf = field(default_factory=OffsetsTopicConf)
    replay: ReplayConf = field(default_factory=ReplayConf)
    stream: StreamConf = field(default_factory=StreamConf)
    dq: DqConf = field(default_factory=DqConf)
    airflow: AirflowConf = field(default_factory=AirflowConf)
    report: ReportConf = field(default_factory=ReportConf)
    generate: GenerateConf = field(default_factory=GenerateConf)
    # where it came from (not a config key)
    sources: tuple[str, ...] = field(default=(), compare=False, metadata={"internal": True})

    # ---- convenience -----------------------------------------------------------------------
    def table_path(self, name: str) -> str:
        """Location of a Delta table: ``<paths.warehouse>/<name>``."""
        return join_path(self.paths.warehouse, name)

    def checkpoint_path(self, name: str) -> str:
        return join_path(self.paths.checkpoints, name)

    @property
    def report_dir(self) -> str:
        return self.report.out or self.paths.reports

    def to_dict(self) -> dict[str, Any]:
        """Plain data (secrets as their ``${ENV_VAR}`` reference, never the value)."""
        return typing.cast(dict[str, Any], _to_plain(self))

    def redacted(self) -> dict[str, Any]:
        """A printable view: secrets appear as ``${ENV_VAR}`` (set) or ``${ENV_VAR} (unset)``."""
        return typing.cast(dict[str, Any], _to_plain(self, redact=True))

    def with_overrides(self, overrides: Mapping[str, Any], origin: str = "overrides") -> Config:
        """A new validated Config with dotted-key overrides (``{"replay.retention_ms": 1000}``)."""
        raw = self.to_dict()
        raw.pop("sources", None)
        raw = _deep_merge(raw, _validated_partial(_dotted_to_nested(overrides), origin))
        cfg: Config = _build(raw, origin)
        return dataclasses.replace(cfg, sources=(*self.sources, origin))


# --------------------------------------------------------------------------------------------
# loading


def join_path(base: str, name: str) -> str:
    """``<base>/<name>`` for local paths and URIs alike (``pipelines.tableio.uri.join``)."""
    from pipelines.tableio.uri import join

    return join(base, name)


def _is_uri(value: str) -> bool:
    from pipelines.tableio.uri import is_uri

    return is_uri(value)


def _resolve_path(value: str, against: Path | str) -> str:
    if _is_uri(value):
        return value
    p = Path(os.path.expanduser(value))
    if not p.is_absolute():
        if isinstance(against, str) and _is_uri(against):
            return join_path(against, value)
        p = Path(against) / p
    return str(p.resolve())


def _read_yaml(path: Path, origin: str) -> dict[str, Any]:
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{origin}: cannot read config file ({exc.strerror or exc})") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UsageError(f"{origin}:{where}: invalid YAML: {problem}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"{origin}: expected a mapping of sections at the top level, got {_show(data)}")
    return data


def _display(path: Path) -> str:
    """A path as the user would write it: CWD-relative when inside the CWD, else absolute."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def find_conf_file(path: str | Path) -> Path:
    """Locate a config file: as given (CWD-relative), else relative to the repo root."""
    p = Path(path).expanduser()
    if p.is_file():
        return p.resolve()
    if not p.is_absolute():
        alt = REPO_ROOT / p
        if alt.is_file():
            return alt.resolve()
    raise UsageError(f"{path}: config file not found")


def _chain(path: Path) -> list[Path]:
    """The ``extends:`` chain of ``path``, root first, with ``conf/base.yaml`` at the bottom."""
    chain: list[Path] = []
    seen: set[Path] = set()
    current: Path | None = path
    while current is not None:
        if current in seen:
            raise UsageError(f"{_display(current)}: extends: cycle through {_display(current)}")
        seen.add(current)
        chain.append(current)
        data = _read_yaml(current, _display(current))
        parent = data.get("extends")
        if parent is None:
            current = None
        elif not isinstance(parent, str) or not parent:
            raise UsageError(f"{_display(current)}: extends: expected a file path, got {_show(parent)}")
        else:
            candidate = (current.parent / parent).resolve()
            if not candidate.is_file():
                raise UsageError(f"{_display(current)}: extends: file not found: {parent}")
            current = candidate
    chain.reverse()
    base = BASE_CONF.resolve()
    if base.is_file() and base not in chain:
        chain.insert(0, base)
    return chain


def load_config(
    path: str | Path | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Load ``conf/base.yaml`` + the overlay at ``path`` (default: ``$OFFSETLAKE_CONF`` or
    ``conf/local.yaml``), then dotted-key ``overrides``; validate; resolve paths.

    Raises:
        UsageError: one line naming the file and the key path of the first problem.
    """
    if path is None:
        path = os.environ.get(CONF_ENV_VAR) or DEFAULT_CONF
    chain = _chain(find_conf_file(path))
    merged: dict[str, Any] = {}
    for file in chain:
        origin = _display(file)
        data = _read_yaml(file, origin)
        data.pop("extends", None)
        merged = _deep_merge(merged, _validated_partial(data, origin))
    sources = [_display(f) for f in chain]
    if overrides:
        merged = _deep_merge(merged, _validated_partial(_dotted_to_nested(overrides), "overrides"))
        sources.append("overrides")
    cfg: Config = _build(merged, sources[-1])
    return dataclasses.replace(cfg, sources=tuple(sources))


def config_from_dict(data: Mapping[str, Any], origin: str = "<dict>") -> Config:
    """Validate a nested mapping on top of the defaults (tests, programmatic use)."""
    cfg: Config = _build(_validated_partial(dict(data), origin), origin)
    return cfg


def parse_set_option(item: str) -> tuple[str, Any]:
    """Parse one ``--set key.path=value`` (value parsed as YAML: ``1000``, ``true``, ``null``)."""
    import yaml

    if "=" not in item:
        raise UsageError(f"--set {item}: expected KEY.PATH=VALUE")
    key, _, raw = item.partition("=")
    try:
        value = yaml.safe_load(raw) if raw != "" else ""
    except yaml.YAMLError:
        value = raw
    return key.strip(), value


def add_conf_arguments(parser: Any) -> None:
    """Add ``--conf`` and ``--set`` to an argparse parser (used by every job command)."""
    parser.add_argument(
        "--conf",
        metavar="FILE",
        default=None,
        help=f"config overlay (default: ${CONF_ENV_VAR} or conf/local.yaml); conf/base.yaml is always loaded first",
    )
    parser.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        dest="set_options",
        help="override one setting, e.g. --set replay.retention_ms=86400000 (repeatable)",
    )


def config_from_args(args: Any) -> Config:
    """Load the config named by ``--conf``/``--set`` (see ``add_conf_arguments``)."""
    overrides = dict(parse_set_option(s) for s in getattr(args, "set_options", None) or [])
    return load_config(getattr(args, "conf", None), overrides=overrides or None)


# --------------------------------------------------------------------------------------------
# validation


def _show(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def _dotted_to_nested(overrides: Mapping[str, Any]) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for key, value in overrides.items():
        parts = key.split(".")
        node = nested
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise UsageError(f"overrides: {key}: conflicts with another override")
        node[parts[-1]] = value
    return nested


def _deep_merge(a: dict[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for key, value in b.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _fields(cls: type) -> dict[str, dataclasses.Field[Any]]:
    return {
        f.name: f for f in dataclasses.fields(cls) if not f.metadata.get("internal")
    }


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _validated_partial(data: Any, origin: str, cls: type = Config, prefix: str = "") -> dict[str, Any]:
    """Check types/values of the keys present in ``data`` (missing keys keep their defaults)."""
    where = prefix.rstrip(".") or "(top level)"
    if not isinstance(data, dict):
        raise UsageError(f"{origin}: {where}: expected a mapping, got {_show(data)}")
    fields = _fields(cls)
    hints = _hints(cls)
    out: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if not isinstance(key, str) or key not in fields:
            hint = difflib.get_close_matches(str(key), list(fields), n=1)
            more = f" (did you mean '{prefix}{hint[0]}'?)" if hint else f" (known: {', '.join(fields)})"
            raise UsageError(f"{origin}: {path}: unknown key{more}")
        f = fields[key]
        tp = hints[key]
        if dataclasses.is_dataclass(tp):
            out[key] = _validated_partial(value, origin, tp, f"{path}.")  # type: ignore[arg-type]
        else:
            out[key] = _check_value(value, tp, f.metadata, origin, path)
    return out


def _check_value(value: Any, tp: Any, meta: Mapping[str, Any], origin: str, path: str) -> Any:
    def fail(expected: str) -> UsageError:
        return UsageError(f"{origin}: {path}: expected {expected}, got {_show(value)}")

    if meta.get("secret"):
        if value is None:
            return None
        if isinstance(value, Secret):
            return value
        if isinstance(value, str) and (m := _ENV_REF.match(value.strip())):
            return Secret(m.group(1))
        raise UsageError(
            f"{origin}: {path}: secrets must be an environment reference like ${{KAFKA_SASL_PASSWORD}}, "
            "never a literal value"
        )
    optional = False
    origin_tp = typing.get_origin(tp)
    if origin_tp in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        optional = len(args) < len(typing.get_args(tp))
        tp = args[0] if len(args) == 1 else typing.Union[tuple(args)]  # noqa: UP007
        origin_tp = typing.get_origin(tp)
    if value is None:
        if optional:
            return None
        raise fail(_describe(tp, meta))
    check = meta.get("check")
    if origin_tp is Literal:
        choices = typing.get_args(tp)
        if value not in choices:
            raise fail("one of " + " | ".join(str(c) for c in choices))
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise fail("true or false")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail(_describe(tp, meta))
        if (check == "positive" and value <= 0) or (check == "non_negative" and value < 0):
            raise fail(_describe(tp, meta))
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise fail(_describe(tp, meta))
        v = float(value)
        if (check == "positive" and v <= 0) or (check == "fraction" and not 0.0 <= v <= 1.0):
            raise fail(_describe(tp, meta))
        return v
    if tp is str:
        if not isinstance(value, str):
            raise fail(_describe(tp, meta))
        if check == "non_empty" and not value.strip():
            raise fail(_describe(tp, meta))
        return value
    if origin_tp is list:
        (item_tp,) = typing.get_args(tp)
        if not isinstance(value, list):
            raise fail(f"a list of {_describe(item_tp, {})}")
        return [_check_value(v, item_tp, {}, origin, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin_tp is dict:
        _, val_tp = typing.get_args(tp)
        if not isinstance(value, dict):
            raise fail("a mapping")
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise UsageError(f"{origin}: {path}: keys must be strings, got {_show(k)}")
            if SECRET_KEY_RE.search(k):
                if isinstance(v, Secret):
                    out[k] = v
                    continue
                if isinstance(v, str) and (m := _ENV_REF.match(v.strip())):
                    out[k] = Secret(m.group(1))
                    continue
                raise UsageError(
                    f"{origin}: {path}.{k}: this key holds a secret: write it as an environment reference "
                    "like ${MY_SECRET}, never a literal value")
            if isinstance(v, (dict, list)) or v is None:
                # never echo a nested value: a dotted option key given with --set arrives nested
                got = "a mapping" if isinstance(v, dict) else "a list" if isinstance(v, list) else "null"
                raise UsageError(f"{origin}: {path}.{k}: expected a scalar, got {got}")
            out[k] = _check_value(v, val_tp, {}, origin, f"{path}.{k}")
        return out
    if origin_tp in (typing.Union, types.UnionType):
        for alt in typing.get_args(tp):
            try:
                return _check_value(value, alt, meta, origin, path)
            except UsageError:
                continue
        raise fail(" or ".join(_describe(a, {}) for a in typing.get_args(tp)))
    raise fail(str(tp))  # pragma: no cover - a field type the validator does not know


def _describe(tp: Any, meta: Mapping[str, Any]) -> str:
    check = meta.get("check")
    if tp is int:
        return {"positive": "a positive integer", "non_negative": "a non-negative integer"}.get(
            check or "", "an integer"
        )
    if tp is float:
        return {"positive": "a positive number", "fraction": "a number between 0 and 1"}.get(
            check or "", "a number"
        )
    if tp is str:
        return "a non-empty string" if check == "non_empty" else "a string"
    if tp is bool:
        return "true or false"
    return getattr(tp, "__name__", str(tp))


def _build(raw: Mapping[str, Any], origin: str, cls: type = Config, prefix: str = "") -> Any:
    """Instantiate the dataclasses from validated data; resolve paths; cross-field checks."""
    kwargs: dict[str, Any] = {}
    hints = _hints(cls)
    for name in _fields(cls):
        if name not in raw:
            continue
        tp = hints[name]
        if dataclasses.is_dataclass(tp):
            kwargs[name] = _build(raw[name], origin, tp, f"{prefix}{name}.")  # type: ignore[arg-type]
        else:
            kwargs[name] = raw[name]
    obj = cls(**kwargs)
    if cls is Config:
        obj = _finish(obj, origin)
    return obj


def _finish(cfg: Config, origin: str) -> Config:
    root = _resolve_path(cfg.paths.root, Path.cwd())
    paths = PathsConf(
        root=root,
        **{
            f.name: _resolve_path(getattr(cfg.paths, f.name), root)
            for f in dataclasses.fields(PathsConf)
            if f.name != "root"
        },
    )
    report = ReportConf(out=_resolve_path(cfg.report.out, root) if cfg.report.out else None)
    inp = cfg.input
    if inp.path is not None:
        inp = dataclasses.replace(inp, path=_resolve_path(inp.path, root))
    if cfg.dq.session_timeout_min_ms > cfg.dq.session_timeout_max_ms:
        raise UsageError(
            f"{origin}: dq.session_timeout_min_ms: must not exceed dq.session_timeout_max_ms "
            f"({cfg.dq.session_timeout_min_ms} > {cfg.dq.session_timeout_max_ms})"
        )
    sec = cfg.kafka.secrets
    sasl = cfg.kafka.security.protocol.startswith("SASL") or cfg.kafka.security.sasl_mechanism is not None
    if sasl and sec.sasl_password is not None and sec.sasl_username is None:
        raise UsageError(f"{origin}: kafka.secrets.sasl_username: required when kafka.secrets.sasl_password "
                         "is set (SASL authenticates a user name with the password)")
    if cfg.kafka.partitions is not None:
        bad = [p for p in cfg.kafka.partitions if not 0 <= p < cfg.offsets_topic.num_partitions]
        if bad:
            raise UsageError(
                f"{origin}: kafka.partitions: {bad[0]} is outside 0..{cfg.offsets_topic.num_partitions - 1} "
                "(offsets_topic.num_partitions)"
            )
    return dataclasses.replace(cfg, paths=paths, report=report, input=inp)


def _to_plain(obj: Any, *, redact: bool = False) -> Any:
    if isinstance(obj, Secret):
        if redact and not obj.is_set():
            return f"${{{obj.env_var}}} (unset)"
        return f"${{{obj.env_var}}}"
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {
            f.name: _to_plain(getattr(obj, f.name), redact=redact)
            for f in dataclasses.fields(obj)
            if not f.metadata.get("internal")
        }
    if isinstance(obj, dict):
        return {k: _to_plain(v, redact=redact) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_to_plain(v, redact=redact) for v in obj]
    return obj


def option_value(value: Any) -> str:
    """A free-form option's value as a string for Spark/Kafka (a ``Secret`` revealed now: do
    not log the result)."""
    if isinstance(value, Secret):
        return value.reveal()
    return str(value).lower() if isinstance(value, bool) else str(value)




def spark_kafka_options(cfg: Config) -> dict[str, str]:
    """Options for Spark's ``format("kafka")`` reader (secrets revealed: do not log)."""
    k = cfg.kafka
    opts: dict[str, str] = {
        "subscribe": k.topic,
        "startingOffsets": k.starting_offsets,
        "kafka.security.protocol": k.security.protocol,
        "failOnDataLoss": "false",
        "includeHeaders": "false",
    }
    if k.bootstrap_servers:
        opts["kafka.bootstrap.servers"] = k.bootstrap_servers
    if k.security.sasl_mechanism:
        opts["kafka.sasl.mechanism"] = k.security.sasl_mechanism
        user = k.secrets.sasl_username.reveal() if k.secrets.sasl_username else ""
        pwd = k.secrets.sasl_password.reveal() if k.secrets.sasl_password else ""
        module = (
            "org.apache.kafka.common.security.scram.ScramLoginModule"
            if k.security.sasl_mechanism.startswith("SCRAM")
            else "org.apache.kafka.common.security.plain.PlainLoginModule"
        )
        opts["kafka.sasl.jaas.config"] = f'{module} required username="{user}" password="{pwd}";'
    if k.security.ssl_ca_location:
        opts["kafka.ssl.truststore.location"] = k.security.ssl_ca_location
    if k.secrets.ssl_key_password is not None:
        opts["kafka.ssl.key.password"] = k.secrets.ssl_key_password.reveal()
    opts.update({key: option_value(v) for key, v in cfg.input.kafka_options.items()})
    return opts


def defaults_as_dict() -> dict[str, Any]:
    """The declared defaults as plain data (what ``conf/base.yaml`` must spell out)."""
    return typing.cast(dict[str, Any], _to_plain(Config()))


__all__ = [
    "BASE_CONF",
    "CONF_DIR",
    "DEFAULT_CONF",
    "Config",
    "Secret",
    "add_conf_arguments",
    "config_from_args",
    "config_from_dict",
    "defaults_as_dict",
    "find_conf_file",
    "load_config",
    "parse_set_option",
    "spark_kafka_options",
]
