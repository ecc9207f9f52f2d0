"""A real Apache Kafka broker on 127.0.0.1: one KRaft node (broker + controller), Kafka's own jars.

Used by the real-broker tests (``tests/broker/``) and by ``offsetlake quickstart --kafka real``.

Rules:
- The jars come only through ``pipelines.runtime.jvm_deps`` (bundles ``kafka-3.9`` and ``kafka-4``);
  nothing is downloaded here. The log dir is formatted by Kafka's own ``StorageTool`` and the broker
  is ``kafka.Kafka <server.properties>`` run with ``java -cp <jars>`` on two free loopback ports.
- Every wait is bounded. A broker that does not come up raises ``BrokerFailed`` with one line: what
  failed and the tail of the broker's own log; the process is killed first, never left running.
- The defaults make groups move in seconds (no initial rebalance delay, short session minimums,
  offsets retention of one minute checked every second) and make the log cleaner compact
  ``__consumer_offsets`` while a test runs (16 KiB segments, rolled every few seconds, a dirty ratio
  of 0.01, no compaction lag). ``overrides`` win over every default.
- ``stop()`` sends SIGTERM (a controlled shutdown), waits, then SIGKILL; the log dir stays for the
  caller to read (``offsets_dirs``, ``copy_offsets_segments``).
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from pipelines.runtime import jvm_deps

START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 20.0
FORMAT_TIMEOUT_S = 60.0
#: JVM flags for a fast start on a small machine (C1 only, serial GC, small heap)
JVM_FLAGS = (
    "-Xms128m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-Xshare:auto",
    "-Djava.awt.headless=true",
    "-Djava.net.preferIPv4Stack=true",
)

_COMMON = {
    "num.partitions": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    "num.network.threads": "2",
    "num.io.threads": "2",
    "background.threads": "2",
    "num.recovery.threads.per.data.dir": "1",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.segment.bytes": "16384",
    "offsets.retention.minutes": "1",
    "offsets.retention.check.interval.ms": "1000",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "log.cleaner.enable": "true",
    "log.cleaner.threads": "1",
    "log.cleaner.backoff.ms": "500",
    "log.cleaner.min.cleanable.ratio": "0.01",
    "log.cleaner.min.compaction.lag.ms": "0",
    "log.cleaner.dedupe.buffer.size": str(4 * 1024 * 1024),
    "log.cleaner.io.buffer.size": str(256 * 1024),
    "log.roll.ms": "3000",
    "log.segment.delete.delay.ms": "1000",
    "log.retention.check.interval.ms": "5000",
    "auto.create.topics.enable": "false",
}
#: Kafka 4.x: the new coordinator's groups (KIP-848 consumer, KIP-932 share, KIP-1071 streams) are on
#: by default in 4.4 (``group.coordinator.rebalance.protocols`` is deprecated there; share and streams
#: groups are switched by the ``share.version`` / ``streams.version`` features, set when the log dir is
#: formatted); only their timings are shortened. Topic ``segment.bytes`` has a 1 MiB minimum on 4.x,
#: so ``__consumer_offsets`` rolls by time (``log.roll.ms``) there, not by size.
_KAFKA4 = {
    "offsets.topic.segment.bytes": str(1024 * 1024),
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.heartbeat.interval.ms": "250",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.share.min.session.timeout.ms": "1000",
    "group.share.session.timeout.ms": "6000",
    "group.share.min.heartbeat.interval.ms": "250",
    "group.share.heartbeat.interval.ms": "500",
    "group.streams.min.session.timeout.ms": "1000",
    "group.streams.session.timeout.ms": "6000",
    "group.streams.min.heartbeat.interval.ms": "250",
    "group.streams.heartbeat.interval.ms": "500",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "share.coordinator.state.topic.num.partitions": "1",
}
_FORMAT_FEATURES_KAFKA4 = ("share.version=1", "streams.version=1")

_LOG4J1 = """log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.org.apache.kafka.raft=WARN
log4j.logger.kafka.log.LogCleaner=INFO
"""
_LOG4J2 = """status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = STDOUT
logger.raft.name = org.apache.kafka.raft
logger.raft.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""


class BrokerFailed(RuntimeError):
    """The broker could not be formatted, started or reached; one line with its log's tail."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cluster_id() -> str:
    """A KRaft cluster id: a random UUID in Kafka's form (url-safe base64, no padding)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def java_binary() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise BrokerFailed("Java was not found (no java on PATH, no JAVA_HOME)")
    return found


class LocalBroker:
    """One single-node KRaft Kafka broker of a ``jvm_deps`` bundle, in ``workdir``."""

    def __init__(
        self,
        version_bundle: str,
        workdir: str | Path,
        overrides: Mapping[str, object] | None = None,
        *,
        heap: str = "512m",
        start_timeout_s: float = START_TIMEOUT_S,
    ) -> None:
        self.bundle = version_bundle
        self.version = jvm_deps.version(version_bundle)
        self.major = int(self.version.split(".", 1)[0])
        self.workdir = Path(workdir)
        self.overrides = {k: str(v) for k, v in (overrides or {}).items()}
        self.heap = heap
        self.start_timeout_s = start_timeout_s
        self.port = 0
        self.controller_port = 0
        self.log_dir = self.workdir / "data"
        self.log_file = self.workdir / "server.log"
        self.properties_file = self.workdir / "server.properties"
        self.started_s: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._classpath = ""

    # -- lifecycle -------------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def classpath(self) -> str:
        if not self._classpath:
            self._classpath = jvm_deps.classpath(self.bundle)
        return self._classpath

    def settings(self) -> dict[str, str]:
        """The broker's server.properties, defaults then ``overrides``."""
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.log_dir),
            **_COMMON,
        }
        if self.major >= 4:
            props.update(_KAFKA4)
        props.update(self.overrides)
        return props

    def start(self) -> LocalBroker:
        """Format the log dir, start the broker and wait until it answers (bounded)."""
        if self._proc is not None:
            return self
        began = time.monotonic()
        java = java_binary()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port, self.controller_port = free_port(), free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        self._write_config()
        self._format(java)
        cmd = [java, f"-Xmx{self.heap}", *JVM_FLAGS, *self._log_flags(), "-cp", self.classpath()]
        cmd += ["kafka.Kafka", str(self.properties_file)]
        with open(self.log_file, "ab") as out:
            self._proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self._wait_ready(began + self.start_timeout_s)
        except BaseException:
            self.stop()
            raise
        self.started_s = time.monotonic() - began
        return self

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM (controlled shutdown), then SIGKILL after ``timeout_s``; idempotent."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def kill(self) -> None:
        """SIGKILL at once (a crashed broker: no controlled shutdown, no clean-shutdown file)."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def __enter__(self) -> LocalBroker:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- the log dir -----------------------------------------------------------------------------

    def offsets_dirs(self) -> list[Path]:
        """The broker's ``__consumer_offsets-N`` partition directories, in partition order."""
        found = [p for p in self.log_dir.glob("__consumer_offsets-*") if p.is_dir() and "." not in p.name]
        return sorted(found, key=lambda p: int(p.name.rsplit("-", 1)[1]))

    def copy_offsets_segments(self, dest: str | Path) -> Path:
        """Copy every ``__consumer_offsets-N/*.log`` (the segments only) to ``dest/__consumer_offsets-N/``.

        Safe while the broker runs: a segment the cleaner swaps away mid-copy is skipped (it is
        gone); the copy is of what the files held at that moment.
        """
        root = Path(dest)
        for part in self.offsets_dirs():
            target = root / part.name
            target.mkdir(parents=True, exist_ok=True)
            for seg in sorted(part.glob("*.log")):
                try:
                    shutil.copyfile(seg, target / seg.name)
                except FileNotFoundError:
                    continue
        return root

    def log_tail(self, lines: int = 8) -> str:
        try:
            text = self.log_file.read_text(errors="replace")
        except OSError:
            return "(no broker log)"
        # stack frames say where, not why: the tail keeps the messages
        keep = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith(("at ", "... "))]
        keep = keep[-lines:]
        return " | ".join(keep) or "(empty broker log)"

    # -- internals -------------------------------------------------------------------------------

    def _write_config(self) -> None:
        self.properties_file.write_text("".join(f"{k}={v}\n" for k, v in self.settings().items()))
        name, text = ("log4j2.properties", _LOG4J2) if self.major >= 4 else ("log4j.properties", _LOG4J1)
        (self.workdir / name).write_text(text)

    def _log_flags(self) -> list[str]:
        if self.major >= 4:
            return [f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}"]
        return [f"-Dlog4j.configuration=file:{self.workdir / 'log4j.properties'}"]

    def _format(self, java: str) -> None:
        if (self.log_dir / "meta.properties").is_file():
            return
        cmd = [java, "-Xmx256m", *JVM_FLAGS, *self._log_flags(), "-cp", self.classpath(), "kafka.tools.StorageTool"]
        cmd += ["format", "-t", cluster_id(), "-c", str(self.properties_file)]
        if self.major >= 4:
            for feature in _FORMAT_FEATURES_KAFKA4:
                cmd += ["--feature", feature]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=FORMAT_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired as exc:
            raise BrokerFailed(f"Kafka {self.version} StorageTool format took over {FORMAT_TIMEOUT_S:.0f} s") from exc
        with open(self.log_file, "a") as out:
            out.write(done.stdout + done.stderr)
        if done.returncode != 0:
            raise BrokerFailed(f"Kafka {self.version} StorageTool format failed: {self.log_tail(4)}")

    def _wait_ready(self, deadline: float) -> None:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(
            {"bootstrap.servers": self.bootstrap, "socket.connection.setup.timeout.ms": 1000, "log_level": 0}
        )
        last = "no answer"
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                code = None if self._proc is None else self._proc.returncode
                raise BrokerFailed(
                    f"Kafka {self.version} broker exited (code {code}) before it was ready: {self.log_tail()}"
                )
            try:
                meta = admin.list_topics(timeout=1.0)
                if meta.brokers and self._coordinator_ready(admin):
                    return
                last = "metadata answered but the group coordinator is not ready"
            except KafkaException as exc:
                last = str(exc.args[0]) if exc.args else repr(exc)
            time.sleep(0.2)
        raise BrokerFailed(
            f"Kafka {self.version} broker on {self.bootstrap} not ready in {self.start_timeout_s:.0f} s ({last}): {self.log_tail()}"
        )

    @staticmethod
    def _coordinator_ready(admin: object) -> bool:
        """A group lookup reaches the group coordinator (this also creates ``__consumer_offsets``,
        so tests start warm). The classic coordinator answers an unknown group as Dead, the new one
        with GROUP_ID_NOT_FOUND: both are answers; only "coordinator not there yet" is not."""
        from confluent_kafka import KafkaError, KafkaException

        not_yet = {
            KafkaError.COORDINATOR_NOT_AVAILABLE,
            KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
            KafkaError.NOT_COORDINATOR,
            KafkaError._TIMED_OUT,
            KafkaError._TRANSPORT,
        }
        try:
            futures = admin.describe_consumer_groups(["_offsetlake_ready"], request_timeout=2.0)  # type: ignore[attr-defined]
            for fut in futures.values():
                fut.result(timeout=3.0)
            return True
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            return isinstance(err, KafkaError) and err.code() not in not_yet
