"""Real Kafka brokers for the ``broker``-marked tests: one per version per session, started lazily.

``kafka39`` (Kafka 3.9, the classic group coordinator) and ``kafka4`` (Kafka 4.4, the new coordinator:
KIP-848 consumer groups, share and streams groups) are single-node KRaft brokers on 127.0.0.1
(``pipelines.kafka.local_broker``), stopped when the session ends. Scenarios share a broker, so
each one uses its own group ids and topics.

When the jars cannot be had (no Maven, no network to Maven Central) or there is no Java, the tests
skip with one line outside CI; with ``CI`` set they fail: in CI they always run.
A broker that does not come up fails the test with one line and the tail of its log.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipelines.kafka.local_broker import BrokerFailed, LocalBroker, java_binary
from pipelines.runtime import jvm_deps


def unavailable(reason: str) -> None:
    """Skip outside CI, fail in CI: the real-broker tests are never skipped there."""
    line = f"real Kafka broker unavailable: {reason}"
    if os.environ.get("CI"):
        pytest.fail(line, pytrace=False)
    pytest.skip(line)


def jars_or_skip(bundle: str) -> list[Path]:
    try:
        java_binary()
        return jvm_deps.fetch(bundle)
    except (jvm_deps.JvmDepsUnavailable, BrokerFailed) as exc:
        unavailable(str(exc))
        raise AssertionError("unreachable") from exc


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
