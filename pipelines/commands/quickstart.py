"""``offsetlake quickstart``: generate a sample log, run the batch job, show the results.

Rules:
- Everything goes under one directory (``--dir``, default ``./offsetlake-data/quickstart``) so the
  quickstart never touches a real warehouse; ``--fresh`` deletes it first.
- The log comes from the coordinator simulator (``offsetlake generate``'s ``write_generated``)
  when present; otherwise from ``sample_records`` below: a small deterministic log of consumer groups
  (join, commits, a member leaving, an empty group, a deleted group) encoded with the shared
  codec (``coordinator_core.codec``).
- The sample cluster runs Kafka 4's coordinator (``generate.coordinator``) and ``--world
  realistic`` (the default) has the shapes real clusters hold: idle partitions committed once,
  offset-less groups, members restarting all at once (``GeneratorConfig``'s defaults);
  ``--world plain`` turns them off. ``--compaction cleaned`` reads the log as a capture from
  ``earliest`` of the compacted topic would (the summary then says which groups' history starts
  inside the compacted part).
- The batch job is the real one (``pipelines.batch.job.run_batch``); the three example queries
  are printed with their SQL and their results.
"""

from __future__ import annotations

import argparse
import random
import shutil
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines.errors import UsageError

if TYPE_CHECKING:
    from pipelines.raw_files import RawRecord

EXAMPLE_QUERIES: list[tuple[str, str]] = [
    (
        # due is not dead: a group whose deletion is only due is still there (Empty, offsets due)
        "Groups by state (a deletion only due is a forecast: the group is still there)",
        "SELECT state, count(*) AS groups, count_if(death_forecast_from_time IS NOT NULL) AS deletion_due, "
        "sum(coalesce(offsets_due, 0)) AS offsets_due FROM group_state GROUP BY state ORDER BY groups DESC, state",
    ),
    (
        "Busiest groups: committed partitions and latest commit",
        "SELECT group_id, count(*) AS partitions, max(commit_timestamp) AS last_commit "
        "FROM offsets_current GROUP BY group_id ORDER BY partitions DESC, group_id LIMIT 5",
    ),
    (
        "What each group went through: rebalances, and expiries (forecast, or confirmed by a tombstone)",
        "SELECT g.group_id, g.state, g.generation, coalesce(r.rebalances, 0) AS rebalances, "
        "coalesce(e.forecast, 0) AS expiry_forecasts, coalesce(e.confirmed, 0) AS expiries_confirmed "
        "FROM group_state g "
        "LEFT JOIN (SELECT group_id, count(*) AS rebalances FROM rebalances "
        "WHERE cause <> 'static_member_rejoined' GROUP BY group_id) r ON r.group_id = g.group_id "
        "LEFT JOIN (SELECT group_id, count_if(status = 'predicted') AS forecast, count_if(confirmed) AS confirmed "
        "FROM offset_expirations WHERE cause = 'retention' GROUP BY group_id) e ON e.group_id = g.group_id "
        "ORDER BY rebalances DESC, g.group_id LIMIT 8",
    ),
]


# --------------------------------------------------------------------------------------------
# fallback sample log


def _str16(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack(">h", len(b)) + b


def _subscription_v0(topics: list[str]) -> bytes:
    try:
        from coordinator_core.consumer_protocol import encode_subscription
        from coordinator_core.records import Subscription

        return encode_subscription(Subscription(topics=tuple(topics)))
    except ImportError:  # ConsumerProtocolSubscription v0: version, topics, user_data
        return struct.pack(">hi", 0, len(topics)) + b"".join(_str16(t) for t in topics) + struct.pack(">i", -1)


def _assignment_v0(parts: dict[str, list[int]]) -> bytes:
    try:
        from coordinator_core.consumer_protocol import encode_assignment
        from coordinator_core.records import Assignment, TopicPartitions

        return encode_assignment(
            Assignment(assigned_partitions=tuple(TopicPartitions(t, tuple(p)) for t, p in parts.items()))
        )
    except ImportError:  # ConsumerProtocolAssignment v0
        out = struct.pack(">hi", 0, len(parts))
        for topic, ps in parts.items():
            out += _str16(topic) + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p) for p in ps)
        return out + struct.pack(">i", -1)


def _partition_for(group: str, num_partitions: int) -> int:
    try:
        from coordinator_core.partitioner import partition_for

        return int(partition_for(group, num_partitions))
    except ImportError:
        h = 0
        for ch in group.encode("utf-16-be").decode("utf-16-be"):
            h = (31 * h + ord(ch)) & 0xFFFFFFFF
        h = h - (1 << 32) if h >= 1 << 31 else h
        return (0 if h == -(1 << 31) else abs(h)) % num_partitions


def _group_metadata(gen: int, mids: list[str], ts: int, topic: str, n_parts: int, host_net: int) -> Any:
    from coordinator_core.records import GroupMetadataValue, MemberMetadata

    if not mids:  # Empty: no protocol, no leader, no members (GroupMetadataManager writes this)
        return GroupMetadataValue(
            protocol_type="consumer",
            generation=gen,
            protocol=None,
            leader=None,
            members=(),
            current_state_timestamp=ts,
            version=3,
        )
    owned: dict[str, dict[str, list[int]]] = {m: {topic: []} for m in mids}
    for p in range(n_parts):  # range-style assignment
        owned[mids[p % len(mids)]][topic].append(p)
    members = tuple(
        MemberMetadata(
            member_id=m,
            client_id=m.rsplit("-", 1)[0],
            client_host=f"/10.0.{host_net}.{i + 10}",
            session_timeout=45_000,
            rebalance_timeout=300_000,
            group_instance_id=None,
            subscription=_subscription_v0([topic]),
            assignment=_assignment_v0(owned[m]),
        )
        for i, m in enumerate(mids)
    )
    return GroupMetadataValue(
        protocol_type="consumer",
        generation=gen,
        protocol="range",
        leader=mids[0],
        members=members,
        current_state_timestamp=ts,
        version=3,
    )


def sample_records(
    groups: int = 6,
    *,
    seed: int = 7,
    num_partitions: int = 50,
    start_ms: int = 1_700_000_000_000,
    commits_per_member: int = 4,
) -> list[RawRecord]:
    """A small deterministic ``__consumer_offsets`` log (raw records, encoded by the core codec).

    Each group: a generation with 2-3 members (the GroupMetadata record written when the group
    goes Stable), offset commits, one member leaving (next generation), more commits; every third
    group then goes Empty and every fifth is deleted (offset tombstones + group tombstone).
    """
    from coordinator_core.codec import encode_key, encode_value
    from coordinator_core.records import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue
    from pipelines.raw_files import OFFSETS_TOPIC, RawRecord

    rng = random.Random(seed)
    events: list[tuple[int, int, int, bytes, bytes | None]] = []  # (ts, seq, partition, key, value)
    services = ["orders", "payments", "billing", "search", "inventory", "shipping", "audit", "fraud"]

    def emit(part: int, ts: int, key: Any, value: Any) -> None:
        events.append((ts, len(events), part, encode_key(key), None if value is None else encode_value(value)))

    for g in range(groups):
        group = f"{services[g % len(services)]}-consumer-{g}"
        part = _partition_for(group, num_partitions)
        topic = f"{services[g % len(services)]}-events"
        n_parts = rng.choice([3, 4, 6])
        t = start_ms + g * 7_000
        members = [f"consumer-{group}-{i}-{rng.randrange(16**8):08x}" for i in range(rng.choice([2, 3]))]
        committed = dict.fromkeys(range(n_parts), 0)
        for gen, mids in ((1, members), (2, members[:-1])):
            emit(part, t, GroupMetadataKey(group), _group_metadata(gen, mids, t, topic, n_parts, g))
            for _ in range(commits_per_member):
                t += rng.randrange(800, 2_500)
                for p in range(n_parts):
                    committed[p] += rng.randrange(1, 500)
                    emit(
                        part,
                        t,
                        OffsetCommitKey(group, topic, p),
                        OffsetCommitValue(
                            offset=committed[p],
                            metadata="",
                            commit_timestamp=t,
                            leader_epoch=rng.choice([None, 3]),
                            version=3,
                        ),
                    )
            t += 3_000
        if g % 3 == 2 or g % 5 == 4:
            t += 10_000
            emit(part, t, GroupMetadataKey(group), _group_metadata(3, [], t, topic, n_parts, g))
        if g % 5 == 4:
            t += 1_000
            for p in range(n_parts):
                emit(part, t, OffsetCommitKey(group, topic, p), None)
            emit(part, t, GroupMetadataKey(group), None)
    # a log's offsets follow time: assign them per partition in (timestamp, emission) order
    events.sort(key=lambda e: (e[0], e[1]))
    next_offset: dict[int, int] = {}
    out: list[RawRecord] = []
    for ts, _, part, key, value in events:
        off = next_offset.get(part, 0)
        next_offset[part] = off + 1
        out.append(RawRecord(key, value, OFFSETS_TOPIC, part, off, ts))
    out.sort(key=lambda r: (r.partition, r.offset))
    return out


#: ``--world plain``: the generator's world shapes turned off (the mix before issue 13)
PLAIN_WORLD: dict[str, float] = {
    "idle_partitions": 0.0,
    "commit_changed_only": 0.0,
    "offsetless_groups": 0.0,
    "mass_restarts": 0.0,
}


def generate_sample(
    landing: str | Path,
    *,
    groups: int,
    hours: float,
    seed: int,
    num_partitions: int,
    retention_ms: int,
    coordinator: str = "new",
    world: str = "realistic",
    compaction: str = "none",
    consumer_groups: float = 0.0,
    conversions: float = 0.0,
) -> tuple[int, str]:
    """Write a sample log into ``landing``; returns (records written, generator used).

    ``world``: ``plain`` or ``realistic`` (the generator's defaults); ``compaction``: ``none`` or
    ``cleaned`` (``GeneratorConfig.compaction``); ``consumer_groups`` / ``conversions``: the
    mixed Kafka 4 cluster's shares (``generate.*`` in the config).
    """
    from pipelines.raw_files import write_raw_records

    try:
        from pipelines.commands.generate import write_generated
    except ImportError:  # the simulator is optional for the quickstart
        records = sample_records(groups, seed=seed, num_partitions=num_partitions)
        write_raw_records(records, landing)
        return len(records), "built-in sample"
    if world not in ("plain", "realistic"):
        raise UsageError(f"--world: expected plain or realistic, got {world!r}")
    shapes: dict[str, Any] = dict(PLAIN_WORLD) if world == "plain" else {}
    n = write_generated(
        landing,
        groups=groups,
        hours=hours,
        seed=seed,
        num_partitions=num_partitions,
        retention_ms=retention_ms,
        coordinator=coordinator,
        compaction=compaction,
        consumer_groups=consumer_groups,
        conversions=conversions,
        **shapes,
    )
    return int(n), "coordinator simulator"


# --------------------------------------------------------------------------------------------
# command


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "quickstart",
        help="generate a sample log, run the batch job into a local warehouse, show example queries",
        description=(
            "Generate a sample __consumer_offsets log, run the batch job (ingest, decode, replay) into "
            "Delta tables under --dir, then print the job summary and three example queries with their "
            'results. Afterwards: offsetlake sql --conf <dir>/quickstart.yaml "SELECT ...".'
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--dir", default="offsetlake-data/quickstart", help="where to put landing + warehouse (default: %(default)s)"
    )
    p.add_argument("--groups", type=int, default=12, help="consumer groups to simulate (default: %(default)s)")
    p.add_argument("--hours", type=float, default=1.0, help="hours of activity to simulate (default: %(default)s)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: generate.seed)")
    p.add_argument(
        "--retention-ms",
        type=int,
        default=900_000,
        help="the sample cluster's offsets.retention in ms, used by the simulated broker AND the replay, "
        "short so offset expiry shows within the sample (default: %(default)s = 15 min)",
    )
    p.add_argument(
        "--world",
        choices=("plain", "realistic"),
        default="realistic",
        help="realistic: idle partitions, offset-less groups, mass restarts (default: %(default)s)",
    )
    p.add_argument(
        "--compaction",
        choices=("none", "cleaned"),
        default="none",
        help="cleaned: the log as a capture of the compacted topic reads it (default: %(default)s)",
    )
    p.add_argument("--fresh", action="store_true", help="delete --dir first")
    p.add_argument("--conf", default=None, help="base overlay to start from (default: conf/local.yaml)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from pipelines.batch.job import run_batch
    from pipelines.batch.summary import render_summary
    from pipelines.config import load_config
    from pipelines.spark_session import build_spark_from_config

    root = Path(args.dir).expanduser().resolve()
    if args.retention_ms <= 0:
        raise UsageError("--retention-ms: expected a positive integer")
    cfg = load_config(
        args.conf,
        overrides={
            "paths.root": str(root),
            "input.source": "landing",
            "replay.retention_ms": args.retention_ms,
            "generate.retention_ms": args.retention_ms,
        },
    )
    groups, hours = args.groups, args.hours
    seed = args.seed if args.seed is not None else cfg.generate.seed
    if groups <= 0:
        raise UsageError("--groups: expected a positive integer")
    if hours <= 0:
        raise UsageError("--hours: expected a positive number")
    # after every check: a refused quickstart leaves no directory behind
    if args.fresh and root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    import sys

    # piped or captured output gets a width that fits group ids instead of rich's 80 columns
    console = Console() if sys.stdout.isatty() else Console(width=132)
    err = Console(stderr=True)
    conf_file = root / "quickstart.yaml"
    conf_file.write_text(
        "# written by offsetlake quickstart: the sample cluster's settings\n"
        f"paths:\n  root: {root}\n"
        f"replay:\n  retention_ms: {args.retention_ms}\n  coordinator: {cfg.replay.coordinator}\n"
        f"generate:\n  coordinator: {cfg.generate.coordinator}\n"
    )

    landing = Path(cfg.paths.landing)
    if landing.exists() and any(landing.glob("*.parquet")):
        err.print(f"[quickstart] reusing the sample log in {landing} (use --fresh to regenerate)")
    else:
        n, how = generate_sample(
            landing,
            groups=groups,
            hours=hours,
            seed=seed,
            num_partitions=cfg.offsets_topic.num_partitions,
            retention_ms=cfg.generate.retention_ms,
            world=args.world,
            compaction=args.compaction,
            **cfg.generate.cluster,
        )
        err.print(f"[quickstart] generated {n:,} records for {groups} groups ({how}) into {landing}")

    spark = build_spark_from_config(cfg, app_suffix="quickstart", quick_jit=True)
    summary = run_batch(cfg, spark, echo=lambda m: err.print(m, highlight=False))
    render_summary(summary, console)

    from pipelines.commands.sql import register_views, show_query

    names = register_views(spark, cfg)
    _print_now(spark, cfg, console)
    for title, sql in EXAMPLE_QUERIES:
        console.rule(title)
        console.print(sql, style="cyan", highlight=False)
        missing = [n for n in ("group_state", "offsets_current", "offset_commits") if n in sql and n not in names]
        if missing:
            console.print(f"(skipped: table {', '.join(missing)} not built)")
            continue
        show_query(spark, sql, console, limit=20)
    nexts = ['sql "SELECT * FROM group_state"', "tables", "inspect group <id>", "report", "metrics", "serve"]
    console.print("\nnext: " + "   |   ".join(f"offsetlake {n} --conf {conf_file}" for n in nexts))
    return 0


def _print_now(spark: Any, cfg: Any, console: Any) -> None:
    """The as-of the state below is told at (``pipelines.log_clock``: one "now" for every view)."""
    from pipelines.log_clock import now_of

    row = spark.sql(f"SELECT as_of FROM ({now_of(cfg)}) a").collect()
    at = row[0]["as_of"] if row else None
    console.print(f"state as of {at} (replay.now: {cfg.replay.now}; the tables' as_of is the newest record)")
