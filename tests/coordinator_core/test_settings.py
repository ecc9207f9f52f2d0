"""``ReplaySettings``: one typed value, one default, one parser (issue 15)."""

from __future__ import annotations

import pickle

import pytest

from coordinator_core import expiry
from coordinator_core.loader.replay import replay
from coordinator_core.loader.snapshot import new_snapshot
from coordinator_core.settings import FACTS_ONLY, Coordinator, ExpiryRules, ReplaySettings


def test_default_settings_are_the_configs_defaults() -> None:
    from pipelines.config import ReplayConf, load_config

    assert ReplaySettings() == ReplayConf().settings()
    assert ReplaySettings() == load_config().replay.settings()  # conf/local.yaml
    assert ReplaySettings().coordinator is Coordinator.AUTO


def test_from_strings_gives_enum_members() -> None:
    s = ReplaySettings.from_strings(retention_ms=1000, rules="2.1-2.3", coordinator="new", cleanup_interval_ms=5)
    assert (s.rules, s.coordinator) == (ExpiryRules.V2_1_TO_2_3, Coordinator.NEW)
    assert ReplaySettings.from_strings(**s.as_strings()) == s


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rules": "3.0"}, "unknown expiry rule set '3.0'; choose one of current, 2.4-3.1, 2.1-2.3, pre-2.1"),
        ({"coordinator": "kraft"}, "unknown coordinator 'kraft'; choose one of auto, old, new"),
        ({"retention_ms": 0}, "retention_ms must be a positive integer or None, got 0"),
        ({"cleanup_interval_ms": -1}, "cleanup_interval_ms must be positive, got -1"),
    ],
)
def test_a_bad_setting_is_a_clear_value_error(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as err:
        ReplaySettings.from_strings(**kwargs)  # type: ignore[arg-type]
    assert str(err.value) == message


def test_expiry_constants_are_enum_members() -> None:
    assert expiry.SIMULATED_COORDINATOR is Coordinator.NEW
    assert expiry.DEFAULT_COORDINATOR is Coordinator.AUTO
    assert tuple(r.value for r in ExpiryRules) == expiry.RULE_SETS


def test_settings_are_picklable_for_spark_workers() -> None:
    s = ReplaySettings(retention_ms=5, rules=ExpiryRules.PRE_2_1)
    assert pickle.loads(pickle.dumps(s)) == s


def test_facts_only_settings_predict_nothing() -> None:
    from tests.coordinator_core.replay_builders import GroupLog

    log = GroupLog()
    log.commit("t", 0, 1)
    later = log.records[-1].timestamp_ms + 30 * 86_400_000
    facts = replay(new_snapshot("g"), log.records, settings=FACTS_ONLY, as_of_ms=later)
    week = replay(new_snapshot("g"), log.records, settings=ReplaySettings(), as_of_ms=later)
    assert facts.snapshot.offset("t", 0) is not None and facts.stats.predicted_expirations == 0
    assert week.snapshot.offset("t", 0) is None and week.stats.predicted_expirations == 1
