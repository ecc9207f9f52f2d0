"""Config loading and validation (pure Python, no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pipelines.config import (
    BASE_CONF,
    CONF_DIR,
    Secret,
    config_from_dict,
    defaults_as_dict,
    load_config,
    parse_set_option,
    spark_kafka_options,
)
from pipelines.errors import UsageError


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_base_yaml_spells_out_every_declared_default() -> None:
    assert yaml.safe_load(BASE_CONF.read_text()) == defaults_as_dict()


@pytest.mark.parametrize("name", ["local.yaml", "cluster.example.yaml"])
def test_shipped_overlays_load(name: str) -> None:
    cfg = load_config(CONF_DIR / name)
    assert cfg.sources[0].endswith("base.yaml")
    assert cfg.replay.retention_ms == 604_800_000


def test_bad_value_error_names_file_and_key_path(tmp_path: Path) -> None:
    p = _write(tmp_path, "env.yaml", "replay:\n  retention_ms: abc\n")
    with pytest.raises(UsageError) as exc:
        load_config(p)
    msg = str(exc.value)
    assert "env.yaml: replay.retention_ms: expected a positive integer, got 'abc'" in msg


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("replay:\n  retention_ms: -5\n", "replay.retention_ms: expected a positive integer, got -5"),
        ("replay:\n  retention_ms: true\n", "replay.retention_ms: expected a positive integer, got true"),
        ("delta:\n  engine: java\n", "delta.engine: expected one of auto | spark | rust, got 'java'"),
        ("dq:\n  quarantine_max_fraction: 2\n", "dq.quarantine_max_fraction: expected a number between 0 and 1"),
        ("spark:\n  conf:\n    a: [1]\n", "spark.conf.a: expected a scalar"),
        ("paths: 3\n", "paths: expected a mapping, got 3"),
        ("kafka:\n  security:\n    protocol: TLS\n", "kafka.security.protocol: expected one of"),
        ("dq:\n  blocking: [1]\n", "dq.blocking[0]: expected a string, got 1"),
    ],
)
def test_bad_values_are_rejected_with_key_path(tmp_path: Path, text: str, fragment: str) -> None:
    p = _write(tmp_path, "env.yaml", text)
    with pytest.raises(UsageError, match=r"env\.yaml: ") as exc:
        load_config(p)
    assert fragment in str(exc.value)


def test_unknown_key_is_rejected_with_a_suggestion(tmp_path: Path) -> None:
    p = _write(tmp_path, "env.yaml", "replay:\n  retension_ms: 5\n")
    with pytest.raises(
        UsageError, match=r"replay\.retension_ms: unknown key \(did you mean 'replay\.retention_ms'\?\)"
    ):
        load_config(p)


def test_unknown_section_is_rejected(tmp_path: Path) -> None:
    p = _write(tmp_path, "env.yaml", "sparkk:\n  master: x\n")
    with pytest.raises(UsageError, match="sparkk: unknown key"):
        load_config(p)


def test_overlay_merges_over_base_and_extends_chain(tmp_path: Path) -> None:
    from pipelines.config import BASE_CONF

    # parent extends base.yaml itself: without it the chain continues with local.yaml
    _write(
        tmp_path,
        "parent.yaml",
        f"extends: {BASE_CONF}\nreplay:\n  retention_ms: 1000\n  rules: 2.1-2.3\nspark:\n  conf:\n    a: 1\n",
    )
    child = _write(
        tmp_path, "child.yaml", "extends: parent.yaml\nreplay:\n  retention_ms: 2000\nspark:\n  conf:\n    b: x\n"
    )
    cfg = load_config(child)
    assert cfg.replay.retention_ms == 2000
    assert cfg.replay.rules == "2.1-2.3"  # from the parent
    assert cfg.offsets_topic.num_partitions == 50  # from base.yaml
    assert cfg.spark.conf == {"a": 1, "b": "x"}
    assert [Path(s).name for s in cfg.sources] == ["base.yaml", "parent.yaml", "child.yaml"]


def test_overlay_without_extends_inherits_the_embedded_defaults(tmp_path: Path) -> None:
    # quickstart.yaml and a user's my.yaml name no parent: local.yaml's Spark and Delta settings
    # apply (before, they got base.yaml's: no spark.conf, Spark's 200 shuffle partitions)
    from pipelines.config import DEFAULT_CONF

    local = yaml.safe_load(DEFAULT_CONF.read_text())
    mine = _write(
        tmp_path, "my.yaml", f"paths:\n  root: {tmp_path}/data\nspark:\n  conf:\n    spark.sql.ansi.enabled: true\n"
    )
    cfg = load_config(mine)
    assert [Path(s).name for s in cfg.sources] == ["base.yaml", "local.yaml", "my.yaml"]
    assert cfg.spark.conf == {**local["spark"]["conf"], "spark.sql.ansi.enabled": True}
    assert cfg.spark.conf["spark.sql.shuffle.partitions"] == 4
    assert cfg.delta.target_file_rows == local["delta"]["target_file_rows"]
    assert cfg.paths.root == f"{tmp_path}/data"  # the overlay still wins


def test_overlay_extending_base_skips_the_embedded_defaults(tmp_path: Path) -> None:
    from pipelines.config import BASE_CONF

    bare = _write(tmp_path, "bare.yaml", f"extends: {BASE_CONF}\nreplay:\n  retention_ms: 5\n")
    cfg = load_config(bare)
    assert [Path(s).name for s in cfg.sources] == ["base.yaml", "bare.yaml"]
    assert cfg.spark.conf == {}


def test_extends_cycle_is_an_error(tmp_path: Path) -> None:
    _write(tmp_path, "a.yaml", "extends: b.yaml\n")
    b = _write(tmp_path, "b.yaml", "extends: a.yaml\n")
    with pytest.raises(UsageError, match="cycle"):
        load_config(b)


def test_paths_resolve_under_root(tmp_path: Path) -> None:
    p = _write(tmp_path, "env.yaml", f"paths:\n  root: {tmp_path}/data\n  landing: /abs/landing\n")
    cfg = load_config(p)
    assert cfg.paths.warehouse == str(tmp_path / "data" / "warehouse")
    assert cfg.paths.landing == "/abs/landing"
    assert cfg.table_path("group_state") == str(tmp_path / "data" / "warehouse" / "group_state")
    assert cfg.report_dir == cfg.paths.reports


def test_uri_paths_are_kept_verbatim() -> None:
    cfg = config_from_dict({"paths": {"root": "s3a://bucket/ol"}})
    assert cfg.paths.warehouse == "s3a://bucket/ol/warehouse"


def test_literal_secret_is_rejected(tmp_path: Path) -> None:
    p = _write(tmp_path, "env.yaml", "kafka:\n  secrets:\n    sasl_password: hunter2\n")
    with pytest.raises(
        UsageError, match=r"kafka\.secrets\.sasl_password: secrets must be an environment reference"
    ) as exc:
        load_config(p)
    assert "hunter2" not in str(exc.value)


def test_secret_is_read_from_environment_and_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OL_TEST_PW", "s3cr3t-value")
    cfg = config_from_dict(
        {
            "kafka": {
                "bootstrap_servers": "b:9093",
                "security": {"protocol": "SASL_SSL", "sasl_mechanism": "PLAIN"},
                "secrets": {"sasl_username": "${OL_TEST_USER}", "sasl_password": "${OL_TEST_PW}"},
            }
        }
    )
    assert cfg.kafka.secrets.sasl_password == Secret("OL_TEST_PW")
    assert "s3cr3t-value" not in repr(cfg)
    assert "s3cr3t-value" not in str(cfg.redacted())
    assert cfg.redacted()["kafka"]["secrets"]["sasl_username"] == "${OL_TEST_USER} (unset)"
    with pytest.raises(UsageError, match=r"\$\{OL_TEST_USER\}"):
        spark_kafka_options(cfg)
    monkeypatch.setenv("OL_TEST_USER", "alice")
    jaas = spark_kafka_options(cfg)["kafka.sasl.jaas.config"]
    assert 'password="s3cr3t-value"' in jaas
    assert 'username="alice"' in jaas


def test_env_references_are_not_interpolated_outside_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OL_APP", "injected")
    cfg = config_from_dict({"spark": {"app_name": "${OL_APP}"}})
    assert cfg.spark.app_name == "${OL_APP}"


def test_set_overrides_are_validated() -> None:
    key, value = parse_set_option("replay.retention_ms=1000")
    assert (key, value) == ("replay.retention_ms", 1000)
    cfg = load_config(overrides={key: value, "replay.as_of_ms": None})
    assert cfg.replay.retention_ms == 1000
    with pytest.raises(UsageError, match=r"overrides: replay\.as_of_ms: expected a non-negative integer"):
        cfg.with_overrides({"replay.as_of_ms": "soon"})


def test_cross_field_checks() -> None:
    with pytest.raises(UsageError, match=r"dq\.session_timeout_min_ms: must not exceed"):
        config_from_dict({"dq": {"session_timeout_min_ms": 10, "session_timeout_max_ms": 5}})
    with pytest.raises(UsageError, match=r"kafka\.partitions: 50 is outside 0\.\.49"):
        config_from_dict({"kafka": {"partitions": [0, 50]}})


def test_missing_file_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")
    p = _write(tmp_path, "env.yaml", "replay: [\n")
    with pytest.raises(UsageError, match="invalid YAML"):
        load_config(p)


def test_config_command_prints_redacted_yaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipelines.cli import main

    monkeypatch.setenv("OL_CMD_PW", "do-not-print-me")
    p = _write(tmp_path, "env.yaml", "kafka:\n  secrets:\n    sasl_password: ${OL_CMD_PW}\n")
    assert main(["config", "--conf", str(p)]) == 0
    out = capsys.readouterr().out
    assert "sasl_password: ${OL_CMD_PW}" in out and "do-not-print-me" not in out
    assert yaml.safe_load(out)["replay"]["retention_ms"] == 604_800_000
    assert main(["config", "--conf", str(p), "--set", "replay.rules=nope"]) == 2
    assert "replay.rules: expected one of" in capsys.readouterr().err
