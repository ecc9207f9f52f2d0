"""Real Kafka brokers for the ``broker``-marked tests: one per version per session, started lazily.

``kafka39`` (Kafka 3.9, the classic group coordinator) and ``kafka4`` (Kafka 4.4, the new coordinator:
KIP-848 consumer groups, share and streams groups) are single-node KRaft brokers on 127.0.0.1
(``pipelines.kafka.local_broker``), stopped when the session ends. Scenarios share a broker, so
each one uses its own group ids and topics.

Whether the jars can be had is found once per session, when the tests are collected: Java, then
each bundle the selected ``broker`` tests need (the ``kafka39``/``kafka4`` fixtures, a ``bundle``
parameter, or ``@pytest.mark.broker("kafka-4")``), from the cache or with one ``mvn`` run; after
one Maven failure no other bundle runs Maven again. When something is missing, every test that
needs it skips from one place with one reason, so ``-ra`` prints one line
(``SKIPPED [N] tests/broker/conftest.py:…: real Kafka broker unavailable: …``); in CI
(``tests.ci.in_ci``) the same tests fail instead: there they always run.
A broker that does not come up fails the test with one line and the tail of its log.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pipelines.kafka.local_broker import BrokerFailed, LocalBroker, java_binary
from pipelines.runtime import jvm_deps
from tests.ci import in_ci

BUNDLES = ("kafka-3.9", "kafka-4")
FIXTURE_BUNDLE = {"kafka39": "kafka-3.9", "kafka4": "kafka-4"}

#: bundle -> its jars, or the one line saying why the session has none (found once per session)
_DEPS: dict[str, list[Path] | str] = {}


def _probe(bundles: list[str]) -> None:
    """Find each bundle's jars once; remember a failure as the session's one line."""
    first_failure = next((v for v in _DEPS.values() if isinstance(v, str)), None)
    for bundle in bundles:
        if bundle in _DEPS:
            continue
        if first_failure is not None and jvm_deps.jars(bundle) is None:
            _DEPS[bundle] = first_failure  # Maven already failed here: the same cause, no second run
            continue
        try:
            java_binary()
            _DEPS[bundle] = jvm_deps.fetch(bundle)
        except (jvm_deps.JvmDepsUnavailable, BrokerFailed) as exc:
            first_failure = _DEPS[bundle] = f"real Kafka broker unavailable: {exc}"


def bundles_of(item: pytest.Item) -> list[str]:
    """The bundles a ``broker`` test needs (all of them when it does not say)."""
    marker = item.get_closest_marker("broker")
    need = set(marker.args if marker else ())
    callspec = getattr(item, "callspec", None)
    names = set(getattr(item, "fixturenames", ())) | ({str(v) for v in callspec.params.values()} if callspec else set())
    need |= {bundle for name, bundle in FIXTURE_BUNDLE.items() if name in names}
    need |= names & set(BUNDLES)
    return sorted(need) if need else list(BUNDLES)


def _reason(item: pytest.Item) -> str | None:
    bundles = bundles_of(item)
    _probe(bundles)
    return next((v for b in bundles if isinstance(v := _DEPS[b], str)), None)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Find the jars of the selected ``broker`` tests once, before any runs (after ``-m``/``-k``)."""
    for item in items:
        if item.get_closest_marker("broker") is not None:
            _probe(bundles_of(item))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip (fail in CI) a ``broker`` test whose jars are missing: one place, one reason, one ``-ra`` line."""
    if item.get_closest_marker("broker") is None:
        return
    line = _reason(item)
    if line is not None:
        if in_ci():
            pytest.fail(line, pytrace=False)
        pytest.skip(line)


def jars_or_skip(bundle: str) -> list[Path]:
    """The bundle's jars (the session found them once; a missing bundle skips, or fails in CI)."""
    _probe([bundle])
    got = _DEPS[bundle]
    if isinstance(got, str):
        if in_ci():
            pytest.fail(got, pytrace=False)
        pytest.skip(got)
    return got


class _Lazy:
    """One broker per bundle per session, started on first use; a failed start is remembered."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self.factory = factory
        self.brokers: dict[str, LocalBroker] = {}
        self.failed: dict[str, str] = {}

    def get(self, bundle: str) -> LocalBroker:
        if bundle in self.failed:
            pytest.fail(self.failed[bundle], pytrace=False)
        if bundle not in self.brokers:
            jars_or_skip(bundle)
            broker = LocalBroker(bundle, self.factory.mktemp(bundle))
            try:
                broker.start()
            except BrokerFailed as exc:
                self.failed[bundle] = str(exc)
                pytest.fail(str(exc), pytrace=False)
            self.brokers[bundle] = broker
        return self.brokers[bundle]

    def stop_all(self) -> None:
        for broker in self.brokers.values():
            broker.stop()


@pytest.fixture(scope="session")
def _brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Lazy]:
    lazy = _Lazy(tmp_path_factory)
    yield lazy
    lazy.stop_all()


@pytest.fixture(scope="session")
def kafka39(_brokers: _Lazy) -> LocalBroker:
    """A running Kafka 3.9 broker (classic coordinator), shared by the session."""
    return _brokers.get("kafka-3.9")


@pytest.fixture(scope="session")
def kafka4(_brokers: _Lazy) -> LocalBroker:
    """A running Kafka 4.4 broker (new coordinator, share groups on), shared by the session."""
    return _brokers.get("kafka-4")
