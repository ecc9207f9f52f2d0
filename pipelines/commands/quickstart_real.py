"""``offsetlake quickstart --kafka real``: the quickstart on bytes a real Kafka broker wrote.

Rules:
- A single-node Kafka broker (``pipelines.kafka.local_broker``, Kafka 4.4 by default, 3.9 with
  ``--kafka-version 3.9``) starts on 127.0.0.1 under ``<dir>/broker``; its jars come from the
  project's poms (``pipelines.runtime.jvm_deps``: fetched with Maven into the cache once).
- Real clients run a small world of groups on it (``pipelines.kafka.real_world``); while the live
  members are still in their groups, the broker's answers are taken (the truth), then
  ``__consumer_offsets`` is captured from ``earliest`` into the landing (``offsetlake capture``'s
  own code) and one end-offset sample is written to ``partition_end_offsets`` (the lag source).
- The broker is stopped before the batch job runs; the job is the same as the generated world's.
- After the example queries, one table compares what the broker said with what offsetlake's tables
  say for every group (state, members, committed offsets); a disagreement is printed, never hidden.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pipelines.errors import UsageError

VERSIONS = {"4": "kafka-4", "3.9": "kafka-3.9"}
#: the replay settings that match the local broker's (``local_broker._COMMON``): one minute of offsets
#: retention checked every second, no initial rebalance delay, three coordinator partitions
REPLAY_SETTINGS: dict[str, Any] = {
    "replay.retention_ms": 60_000,
    "replay.cleanup_interval_ms": 1_000,
    "replay.initial_rebalance_delay_ms": 0,
    "offsets_topic.num_partitions": 3,
}
#: Admin API state names (confluent-kafka's ConsumerGroupState) in Kafka's own spelling
_STATES = {
    "STABLE": "Stable",
    "EMPTY": "Empty",
    "DEAD": "Dead",
    "PREPARING_REBALANCE": "PreparingRebalance",
    "COMPLETING_REBALANCE": "CompletingRebalance",
    "RECONCILING": "Reconciling",
    "ASSIGNING": "Assigning",
}


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--kafka",
        choices=("generated", "real"),
        default="generated",
        help="generated: the coordinator simulator's log (default); real: a local Kafka broker on 127.0.0.1 "
        "driven by real clients for ~2 minutes (needs Java and Maven for the broker's jars)",
    )
    p.add_argument(
        "--kafka-version",
        choices=tuple(VERSIONS),
        default="4",
        help="with --kafka real: 4 (Kafka 4.4, the new coordinator, KIP-848 groups too) or 3.9 (the classic "
        "coordinator) (default: %(default)s)",
    )


def capture_real_world(cfg: Any, root: Path, version: str, echo: Any) -> Any:
    """Start the broker, run the world, capture the topic and one end-offset sample; returns the run."""
    from pipelines.kafka.capture import capture
    from pipelines.kafka.client import KafkaSettings
    from pipelines.kafka.end_offsets import append_samples, sample_end_offsets
    from pipelines.kafka.local_broker import BrokerFailed, LocalBroker
    from pipelines.kafka.real_world import TOPICS, WorldRun, drive
    from pipelines.runtime import jvm_deps

    bundle = VERSIONS[version]
    try:
        jvm_deps.fetch(bundle)
    except jvm_deps.JvmDepsUnavailable as exc:
        raise UsageError(f"--kafka real: {exc}") from exc
    landing = Path(cfg.paths.landing)

    def while_live(run: WorldRun) -> None:
        settings = KafkaSettings(bootstrap_servers=broker.bootstrap)
        result = capture(settings, landing, start="earliest", until_end=True)
        echo(f"[real] captured {result.records:,} records of __consumer_offsets into {landing}")
        append_samples(cfg.table_path("partition_end_offsets"), sample_end_offsets(settings, topics=list(TOPICS)))

    broker = LocalBroker(bundle, root / "broker", {"offsets.topic.num.partitions": cfg.offsets_topic.num_partitions})
    try:
        broker.start()
    except BrokerFailed as exc:
        raise UsageError(f"--kafka real: {exc}") from exc
    echo(f"[real] Kafka {broker.version} on {broker.bootstrap} (ready in {broker.started_s:.1f} s)")
    try:
        return drive(broker.bootstrap, kip848=broker.major >= 4, while_live=while_live, echo=echo)
    finally:
        broker.stop()


def agreement_rows(run: Any, state_rows: list[dict[str, Any]], offset_rows: list[dict[str, Any]]) -> list[list[str]]:
    """One row per group: the broker's answer beside offsetlake's, and whether they agree."""
    ours = {r["group_id"]: r for r in state_rows}
    offsets: dict[str, dict[tuple[str, int], int]] = {}
    for r in offset_rows:
        offsets.setdefault(r["group_id"], {})[(r["topic"], int(r["partition"]))] = int(r["offset"])
    rows = []
    for group in run.groups:
        mine = ours.get(group)
        our_state = "absent" if mine is None else ("Dead" if mine.get("exists") is False else str(mine["state"]))
        if group in run.deleted:
            theirs = ("deleted", "-", "-")
            agree = our_state == "Dead"
        else:
            b = run.broker_groups[group]
            theirs = (_STATES.get(b.state, b.state), str(len(b.members)), str(len(b.offsets)))
            agree = (
                mine is not None
                and our_state == theirs[0]
                and int(mine.get("member_count") or 0) == len(b.members)
                and offsets.get(group, {}) == b.offsets
            )
        members = "-" if mine is None else str(mine.get("member_count") or 0)
        rows.append([group, *theirs, our_state, members, str(len(offsets.get(group, {}))), "yes" if agree else "NO"])
    return rows


def print_agreement(spark: Any, run: Any, console: Any) -> int:
    """The broker-vs-offsetlake table; returns how many groups disagree."""
    from rich.table import Table

    states = [
        r.asDict() for r in spark.sql("SELECT group_id, state, `exists`, member_count FROM group_state").collect()
    ]
    offsets = [
        r.asDict() for r in spark.sql("SELECT group_id, topic, `partition`, `offset` FROM offsets_current").collect()
    ]
    table = Table(title="The broker said / offsetlake's tables say (at the end of the capture)")
    for col in ("group", "broker state", "members", "offsets", "offsetlake state", "members", "offsets", "agree"):
        table.add_column(col)
    rows = agreement_rows(run, states, offsets)
    for row in rows:
        table.add_row(*row)
    console.print(table)
    return sum(1 for r in rows if r[-1] != "yes")
