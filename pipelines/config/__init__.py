"""Configuration: ``conf/base.yaml`` + an environment overlay, validated on load.

Rules:
- Every setting is declared once, as a typed field of the frozen dataclasses below; their defaults
  are the values in ``conf/base.yaml`` (a test keeps the two equal). Nothing else defines keys.
- Loading order: ``conf/base.yaml`` (from the repo's ``conf/`` directory), then the overlay's
  ``extends:`` chain (paths relative to the overlay), then the overlay, then ``--set`` style
  overrides. A chain that ends without ``extends:`` continues with ``conf/local.yaml`` (the
  embedded default: user overlays and ``quickstart.yaml`` inherit its Spark settings); an overlay
  that wants only ``base.yaml`` says ``extends: base.yaml`` (``conf/cluster.example.yaml``). Mappings merge key by key; lists and scalars replace.
- Every file is validated on its own before merging, so an error names the file that holds the bad
  value: ``UsageError("conf/local.yaml: replay.retention_ms: expected a positive integer, got
  'abc'")``. Unknown keys are errors too (with a "did you mean" hint).
- Secrets (Kafka SASL/SSL passwords, anything under ``kafka.secrets``, and any entry of the
  free-form option maps ``input.kafka_options`` / ``spark.conf`` whose key names a secret:
  ``password``, ``secret``, ``jaas``, ``token``, ``credential``, ``...key``, Azure account keys,
  SAS tokens; a credentials-provider class name is not one: ``is_secret_key``)
  may only be written as ``${ENV_VAR}`` references; a literal is refused without echoing it.
  The loader stores the reference, never the value: ``Secret.reveal()``
  reads the environment at the moment of use, ``repr``/``redacted()`` show ``${ENV_VAR}`` only, so
  a secret cannot reach a log through the config object. ``${...}`` is NOT interpolated anywhere else.
- Paths: ``paths.root`` resolves against the current working directory; the other ``paths.*`` and
  ``report.out`` resolve against ``paths.root``. URIs with a scheme (``s3a://``, ``abfss://``,
  ``file:/``) are kept verbatim. Tables live at ``<paths.warehouse>/<table name>``; a local
  warehouse path holding a percent-escape (``%20``) is refused (``pipelines.uri.delta_rs_problem``).
"""

from __future__ import annotations

import dataclasses
import os
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipelines import uri
from pipelines.config.sections import (
    AirflowConf,
    DeltaConf,
    DqConf,
    GenerateConf,
    InputConf,
    KafkaConf,
    OffsetsTopicConf,
    PathsConf,
    ReplayConf,
    ReportConf,
    Secret,
    SparkConf,
    StreamConf,
)
from pipelines.config.validation import (
    deep_merge,
    dotted_to_nested,
    fields_of,
    hints_of,
    show,
    to_plain,
    validated_partial,
)
from pipelines.errors import UsageError

REPO_ROOT = Path(__file__).resolve().parents[2]
CONF_DIR = REPO_ROOT / "conf"
BASE_CONF = CONF_DIR / "base.yaml"
DEFAULT_CONF = CONF_DIR / "local.yaml"
CONF_ENV_VAR = "OFFSETLAKE_CONF"


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
        return typing.cast(dict[str, Any], to_plain(self))

    def redacted(self) -> dict[str, Any]:
        """A printable view: secrets appear as ``${ENV_VAR}`` (set) or ``${ENV_VAR} (unset)``."""
        return typing.cast(dict[str, Any], to_plain(self, redact=True))

    def with_overrides(self, overrides: Mapping[str, Any], origin: str = "overrides") -> Config:
        """A new validated Config with dotted-key overrides (``{"replay.retention_ms": 1000}``)."""
        raw = self.to_dict()
        raw.pop("sources", None)
        raw = deep_merge(raw, validated_partial(dotted_to_nested(overrides), origin, Config))
        cfg: Config = _build(raw, origin)
        return dataclasses.replace(cfg, sources=(*self.sources, origin))


# --------------------------------------------------------------------------------------------
# loading


def join_path(base: str, name: str) -> str:
    """``<base>/<name>`` for local paths and URIs alike (``pipelines.uri.join``)."""
    return uri.join(base, name)


def _is_uri(value: str) -> bool:
    return uri.is_uri(value)


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
        raise UsageError(f"{origin}: expected a mapping of sections at the top level, got {show(data)}")
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
            # an overlay without ``extends:`` extends the embedded default (local.yaml's Spark
            # and Delta settings); ``extends: base.yaml`` starts from the bare defaults instead
            default = DEFAULT_CONF.resolve()
            current = default if current not in (default, BASE_CONF.resolve()) and default.is_file() else None
        elif not isinstance(parent, str) or not parent:
            raise UsageError(f"{_display(current)}: extends: expected a file path, got {show(parent)}")
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


def load_config(path: str | Path | None = None, *, overrides: Mapping[str, Any] | None = None) -> Config:
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
        merged = deep_merge(merged, validated_partial(data, origin, Config))
    sources = [_display(f) for f in chain]
    if overrides:
        merged = deep_merge(merged, validated_partial(dotted_to_nested(overrides), "overrides", Config))
        sources.append("overrides")
    cfg: Config = _build(merged, sources[-1])
    return dataclasses.replace(cfg, sources=tuple(sources))


def config_from_dict(data: Mapping[str, Any], origin: str = "<dict>") -> Config:
    """Validate a nested mapping on top of the defaults (tests, programmatic use)."""
    cfg: Config = _build(validated_partial(dict(data), origin, Config), origin)
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
        help="override one setting, e.g. --set replay.retention_ms=86400000 (repeatable); an option name "
        "with dots is quoted or bracketed: --set 'spark.conf.\"spark.sql.shuffle.partitions\"=8' or "
        "--set 'spark.conf[spark.sql.shuffle.partitions]=8'",
    )


def config_from_args(args: Any) -> Config:
    """Load the config named by ``--conf``/``--set`` (see ``add_conf_arguments``)."""
    overrides = dict(parse_set_option(s) for s in getattr(args, "set_options", None) or [])
    return load_config(getattr(args, "conf", None), overrides=overrides or None)


# --------------------------------------------------------------------------------------------
# validation


def _build(raw: Mapping[str, Any], origin: str, cls: type = Config, prefix: str = "") -> Any:
    """Instantiate the dataclasses from validated data; resolve paths; cross-field checks."""
    kwargs: dict[str, Any] = {}
    hints = hints_of(cls)
    for name in fields_of(cls):
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
    if problem := uri.delta_rs_problem(paths.warehouse):  # every engine reads the tables' logs with delta-rs
        raise UsageError(f"{origin}: paths.warehouse: {paths.warehouse}: {problem}")
    sec = cfg.kafka.secrets
    sasl = cfg.kafka.security.protocol.startswith("SASL") or cfg.kafka.security.sasl_mechanism is not None
    if sasl and sec.sasl_password is not None and sec.sasl_username is None:
        raise UsageError(
            f"{origin}: kafka.secrets.sasl_username: required when kafka.secrets.sasl_password "
            "is set (SASL authenticates a user name with the password)"
        )
    if cfg.kafka.partitions is not None:
        bad = [p for p in cfg.kafka.partitions if not 0 <= p < cfg.offsets_topic.num_partitions]
        if bad:
            raise UsageError(
                f"{origin}: kafka.partitions: {bad[0]} is outside 0..{cfg.offsets_topic.num_partitions - 1} "
                "(offsets_topic.num_partitions)"
            )
    return dataclasses.replace(cfg, paths=paths, report=report, input=inp)


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
    return typing.cast(dict[str, Any], to_plain(Config()))


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
