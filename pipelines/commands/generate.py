"""``offsetlake generate``: a realistic multi-group ``__consumer_offsets`` log from the simulator.

Rules:
- The log comes from ``coordinator_core.simulator.generator`` (deterministic for a seed) and is written
  with ``pipelines.inputs.raw_files.RawRecordWriter`` (raw-record Parquet, sequential file names,
  temp + rename), so every reader of captured logs reads it unchanged.
- ``<out>/_truth.json`` holds what the simulator knows (per group: kind, traits, final state,
  generation, rebalances, every death with its cause, tombstones by cause; the retention checks'
  schedule; with ``--compaction cleaned`` what the cleaner removed). The leading underscore
  keeps it out of Spark's file source and of ``read_raw_records``.
- Progress goes to stderr with ``rich`` when stderr is a terminal (``--quiet`` turns it off).
- ``write_generated(...)`` is the same thing as a function (``offsetlake quickstart`` uses it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from coordinator_core import SIMULATED_COORDINATOR
from pipelines.errors import UsageError

#: ``--mixed``: (consumer-protocol groups, online conversions) shares
MIXED = (0.4, 0.3)

DESCRIPTION = """\
Simulate consumer groups against a model of Kafka's group coordinator and write the
__consumer_offsets records they produce (raw-record Parquet) plus _truth.json.

The mix: dynamic consumer groups (range / roundrobin / sticky / cooperative-sticky) with
auto-commit, rolling deploys, crashes (session timeouts), GC pauses and slow polls; static
members (KIP-345: restarts without rebalances); simple consumers committing with generation -1;
short-lived console consumers that go Empty and expire or get deleted; topic deletions. And the
shapes real clusters hold (defaults in brackets): idle partitions [30% of topics] with consumers
committing only what they consumed [30% of application groups], groups that never commit
[10%], groups whose members all restart within seconds [20%], retention checks on the broker's
own seeded phase; optionally the compacted capture a reader from `earliest` gets.

Mixed Kafka 4 clusters (KIP-848, with --coordinator new): --consumer-groups SHARE of the
application, static and console groups use group.protocol=consumer (ConsumerGroupHeartbeat,
server-side uniform/range assignors, member epochs and reconciliation), --conversions SHARE of
the classic application groups are upgraded online member by member (and --conversions-back
SHARE of those go back to classic later); --share-groups N and --streams-groups N add share groups
(KIP-932) and streams groups (KIP-1071); --mixed is --consumer-groups 0.4 --conversions 0.3 and one
share and one streams group per 20 groups (at least one each).

examples:
  offsetlake generate --groups 20 --hours 2 --seed 7 --out landing/
  offsetlake generate --groups 2000 --hours 6 --seed 1 --out /tmp/big --quiet
  offsetlake generate --groups 50 --hours 24 --retention-ms 21600000 --coordinator new --out x/
  offsetlake generate --groups 40 --hours 6 --coordinator new --compaction cleaned \
      --delete-retention-ms 3600000 --out compacted/
  offsetlake generate --groups 30 --hours 2 --mixed --out mixed/
"""


# long: the subcommand's argument declarations, one statement per option
def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "generate",
        help="generate a realistic __consumer_offsets log with the coordinator simulator",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--groups", type=int, required=True, help="number of consumer groups")
    p.add_argument("--hours", type=float, required=True, help="simulated hours")
    p.add_argument("--seed", type=int, default=0, help="random seed (same seed, same bytes)")
    p.add_argument("--out", required=True, metavar="DIR", help="landing directory for the Parquet files")
    p.add_argument(
        "--retention-ms",
        type=int,
        default=None,
        help="offsets.retention.minutes in ms (default: a quarter of the run, 15 min .. 7 days)",
    )
    p.add_argument("--start-ms", type=int, default=None, help="simulated start time, epoch ms (default 2026-01-01)")
    p.add_argument("--partitions", type=int, default=50, help="__consumer_offsets partitions (default 50)")
    p.add_argument(
        "--coordinator",
        choices=("old", "new"),
        default=SIMULATED_COORDINATOR,
        help="old: the Scala GroupCoordinator; new: the KIP-848 runtime's classic groups",
    )
    p.add_argument("--offset-value-version", type=int, choices=(1, 2, 3), default=3)
    p.add_argument("--group-value-version", type=int, choices=(0, 1, 2, 3), default=3)
    p.add_argument(
        "--expiry-rules",
        choices=("current", "2.4-3.1", "2.1-2.3", "pre-2.1"),
        default="current",
        help="the broker's offset expiry rules (pre-2.1 also writes v1 values with expire timestamps)",
    )
    p.add_argument("--churn-per-hour", type=float, default=0.5, help="lifecycle events per group per hour")
    p.add_argument(
        "--failovers-per-hour",
        type=float,
        default=0.2,
        help="coordinator failovers (partition leader moves) per hour, cluster-wide",
    )
    p.add_argument("--no-topic-deletions", action="store_true", help="never delete a topic")
    p.add_argument(
        "--compaction",
        choices=("none", "cleaned"),
        default="none",
        help="cleaned: what a capture from earliest of the compacted topic reads (default none)",
    )
    p.add_argument(
        "--dirty-ratio",
        type=float,
        default=0.25,
        help="with --compaction cleaned: the uncleaned tail of each partition, 0..1 (default 0.25)",
    )
    p.add_argument(
        "--delete-retention-ms",
        type=int,
        default=86_400_000,
        help="delete.retention.ms: how long the cleaner keeps tombstones (default 1 day)",
    )
    p.add_argument(
        "--retention-check-interval-ms",
        type=int,
        default=600_000,
        help="offsets.retention.check.interval.ms (default 600000)",
    )
    p.add_argument(
        "--retention-check-phase-ms",
        type=int,
        default=None,
        help="retention checks at start + phase + k*interval (default: a seeded phase per broker/shard)",
    )
    p.add_argument(
        "--idle-partitions",
        type=float,
        default=0.3,
        metavar="SHARE",
        help="share of topics with partitions that go quiet (default 0.3)",
    )
    p.add_argument(
        "--commit-changed-only",
        type=float,
        default=0.3,
        metavar="SHARE",
        help="share of application groups committing only the partitions they consumed (default 0.3)",
    )
    p.add_argument(
        "--offsetless-groups",
        type=float,
        default=0.1,
        metavar="SHARE",
        help="share of application groups that never commit offsets (default 0.1)",
    )
    p.add_argument(
        "--mass-restarts",
        type=float,
        default=0.2,
        metavar="SHARE",
        help="share of application/Connect groups whose members all restart at once (default 0.2)",
    )
    p.add_argument(
        "--consumer-groups",
        type=float,
        default=None,
        metavar="SHARE",
        help="share of application/static/console groups on the KIP-848 consumer protocol (default 0, --mixed 0.4)",
    )
    p.add_argument(
        "--conversions",
        type=float,
        default=None,
        metavar="SHARE",
        help="share of classic application groups upgraded online to the consumer protocol (default 0, --mixed 0.3)",
    )
    p.add_argument(
        "--conversions-back",
        type=float,
        default=0.3,
        metavar="SHARE",
        help="share of the upgraded groups redeployed back to the classic protocol later (default 0.3)",
    )
    p.add_argument(
        "--share-groups",
        type=int,
        default=None,
        metavar="N",
        help="share groups (KIP-932) beside the others (default 0, --mixed one per 20 groups, at least 1)",
    )
    p.add_argument(
        "--streams-groups",
        type=int,
        default=None,
        metavar="N",
        help="streams groups (KIP-1071) beside the others (default 0, --mixed one per 20 groups, at least 1)",
    )
    p.add_argument(
        "--mixed",
        action="store_true",
        help="a mixed Kafka 4 cluster: --consumer-groups 0.4 --conversions 0.3 and share and streams groups "
        "unless given",
    )
    p.add_argument("--rows-per-file", type=int, default=500_000)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=main)


def _options(args: argparse.Namespace) -> dict[str, Any]:
    opts: dict[str, Any] = {
        "num_partitions": args.partitions,
        "coordinator": args.coordinator,
        "offset_value_version": args.offset_value_version,
        "group_value_version": args.group_value_version,
        "churn_per_hour": args.churn_per_hour,
        "topic_deletions": not args.no_topic_deletions,
        "failovers_per_hour": args.failovers_per_hour,
        "expiry_rules": args.expiry_rules,
        "compaction": args.compaction,
        "compaction_dirty_ratio": args.dirty_ratio,
        "delete_retention_ms": args.delete_retention_ms,
        "retention_check_interval_ms": args.retention_check_interval_ms,
        "retention_check_phase_ms": args.retention_check_phase_ms,
        "idle_partitions": args.idle_partitions,
        "commit_changed_only": args.commit_changed_only,
        "offsetless_groups": args.offsetless_groups,
        "mass_restarts": args.mass_restarts,
        "consumer_groups": args.consumer_groups
        if args.consumer_groups is not None
        else MIXED[0]
        if args.mixed
        else 0.0,
        "conversions": args.conversions if args.conversions is not None else MIXED[1] if args.mixed else 0.0,
        "conversions_back": args.conversions_back,
    }
    for name in ("share_groups", "streams_groups"):
        given = getattr(args, name, None)
        opts[name] = given if given is not None else max(1, args.groups // 20) if args.mixed else 0
    if args.retention_ms is not None:
        opts["retention_ms"] = args.retention_ms
    if args.start_ms is not None:
        opts["start_ms"] = args.start_ms
    return opts


def write_generated(
    out: str | Path,
    *,
    groups: int,
    hours: float,
    seed: int = 0,
    num_partitions: int = 50,
    rows_per_file: int = 500_000,
    progress: Callable[[int, int, int], None] | None = None,
    **options: Any,
) -> int:
    """Generate a log into ``out`` (Parquet files + ``_truth.json``); returns the record count."""
    import pyarrow as pa

    from coordinator_core.simulator.generator import GeneratorConfig, LogGenerator
    from pipelines.inputs.raw_files import RAW_ARROW_SCHEMA, RawRecordWriter

    try:
        gen = LogGenerator(
            GeneratorConfig(groups=groups, hours=hours, seed=seed, num_partitions=num_partitions, **options)
        )
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    out_dir = Path(out)
    n = 0
    topic = pa.array(["__consumer_offsets"], pa.string())
    with RawRecordWriter(out_dir, rows_per_file=rows_per_file) as writer:
        for chunk in gen.chunks(progress=progress):
            rows = len(chunk)
            batch = pa.RecordBatch.from_arrays(
                [
                    pa.array(chunk.keys, pa.binary()),
                    pa.array(chunk.values, pa.binary()),
                    pa.repeat(topic[0], rows).cast(pa.string()),
                    pa.array(chunk.partitions, pa.int32()),
                    pa.array(chunk.offsets, pa.int64()),
                    pa.array(chunk.timestamps, pa.int64())
                    .cast(pa.timestamp("ms", tz="UTC"))
                    .cast(RAW_ARROW_SCHEMA.field("timestamp").type),
                    pa.repeat(pa.scalar(0, pa.int32()), rows),
                ],
                schema=RAW_ARROW_SCHEMA,
            )
            writer.write_batch(batch)
            n += rows
    truth = gen.truth()
    tmp = out_dir / "._truth.json.tmp"
    tmp.write_text(json.dumps(truth, indent=1, sort_keys=True), encoding="utf-8")
    tmp.replace(out_dir / "_truth.json")
    return n


def main(args: argparse.Namespace) -> int:
    if args.groups < 1:
        raise UsageError("--groups must be at least 1")
    if args.hours <= 0:
        raise UsageError("--hours must be positive")
    show = not args.quiet and sys.stderr.isatty()
    started = time.perf_counter()
    if show:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(
            TextColumn("[bold]simulating[/bold]"),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}% of {task.fields[hours]} h"),
            TextColumn("{task.fields[records]:,} records"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
        ) as bar:
            task = bar.add_task("sim", total=1.0, hours=args.hours, records=0)

            def progress(done: int, total: int, records: int) -> None:
                bar.update(task, completed=done / total if total else 1.0, records=records)

            n = write_generated(
                args.out,
                groups=args.groups,
                hours=args.hours,
                seed=args.seed,
                rows_per_file=args.rows_per_file,
                progress=progress,
                **_options(args),
            )
    else:
        n = write_generated(
            args.out,
            groups=args.groups,
            hours=args.hours,
            seed=args.seed,
            rows_per_file=args.rows_per_file,
            **_options(args),
        )
    elapsed = time.perf_counter() - started
    print(
        f"wrote {n:,} records for {args.groups} groups over {args.hours:g} h to {args.out} "
        f"({n / elapsed:,.0f} records/s); truth in {Path(args.out) / '_truth.json'}",
        file=sys.stderr,
    )
    return 0
