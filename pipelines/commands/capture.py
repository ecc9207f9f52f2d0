"""``offsetlake capture`` and ``offsetlake capture-end-offsets``: read a live Kafka cluster.

Rules:
- A real Kafka client (confluent-kafka), no Spark, no jars. Cluster settings come from the
  config's ``kafka`` section (``--conf``/``--set``); flags override; secrets only from
  environment variables and never printed (``--show-config`` prints the redacted settings).
- An unreachable cluster: one line on stderr and exit code 2 within ``--connect-timeout``.
- Progress (records, lag to the end) on stderr when it is a terminal; one summary line on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pipelines.config import add_conf_arguments, config_from_args
from pipelines.errors import UsageError

HELP = """\
Capture __consumer_offsets from a running cluster into raw-record Parquet files (the landing
format of `offsetlake run batch`/`stream`). Resumable: the next offset per partition is kept in
DIR/_offsetlake_capture.json, so running the same command again continues where it stopped.

examples:
  offsetlake capture --bootstrap-servers broker:9092 --until-end --out landing/
  offsetlake capture --bootstrap-servers broker:9092 --from timestamp:1700000000000 --out landing/
  OFFSETLAKE_KAFKA_SASL_PASSWORD=... offsetlake capture --conf conf/cluster.yaml --out landing/
"""

END_HELP = """\
Sample each partition's log-start and log-end offsets (and, with --groups-from-table, the
timestamp of the record at every group's committed offset) into the partition_end_offsets
Delta table; lag in offsets and in time is computed from it.

examples:
  offsetlake capture-end-offsets --bootstrap-servers broker:9092 --topics orders,payments
  offsetlake capture-end-offsets --groups-from-table offsets_current --interval-s 60 --iterations 0
"""


def _add_cluster_args(p: argparse.ArgumentParser) -> None:
    add_conf_arguments(p)
    p.add_argument(
        "--bootstrap-servers",
        "-b",
        metavar="HOST:PORT[,...]",
        help="brokers (default: kafka.bootstrap_servers or $OFFSETLAKE_KAFKA_BOOTSTRAP_SERVERS)",
    )
    p.add_argument(
        "-X",
        dest="properties",
        metavar="PROP=VALUE",
        action="append",
        default=[],
        help="extra librdkafka property (repeatable), e.g. -X security.protocol=SSL; "
        "secrets are refused here: use kafka.secrets / OFFSETLAKE_KAFKA_SASL_PASSWORD",
    )
    p.add_argument(
        "--connect-timeout",
        type=float,
        default=15.0,
        metavar="SECONDS",
        help="give up if the cluster does not answer within this time (default 15)",
    )
    p.add_argument(
        "--show-config", action="store_true", help="print the client settings (secrets redacted) to stderr and continue"
    )


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "capture",
        help="read a live __consumer_offsets into landing files (resumable)",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_cluster_args(p)
    p.add_argument("--topic", default=None, help="topic to read (default: kafka.topic = __consumer_offsets)")
    p.add_argument("--out", required=True, metavar="DIR", help="landing directory for the Parquet files")
    p.add_argument(
        "--partitions", default=None, metavar="0,1,5-9", help="partitions to read (default: kafka.partitions or all)"
    )
    p.add_argument(
        "--from",
        dest="start",
        default=None,
        metavar="earliest|latest|timestamp:MS",
        help="where partitions without saved state start (default: kafka.starting_offsets)",
    )
    p.add_argument(
        "--until-end",
        action="store_true",
        help="stop at the end offsets sampled at start (default: follow until Ctrl-C)",
    )
    p.add_argument("--rows-per-file", type=int, default=100_000, help="records per Parquet file (default 100000)")
    p.add_argument(
        "--flush-interval",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="when following, write buffered records at least this often (default 5)",
    )
    p.add_argument("--max-records", type=int, default=None, help="stop after this many records")
    p.add_argument(
        "--max-rate",
        type=float,
        default=None,
        metavar="RECORDS_PER_S",
        help="throttle to this many records/s (to spare a busy cluster)",
    )
    p.add_argument(
        "--stall-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="fail if the cluster stops answering for this long while behind (default 60)",
    )
    p.add_argument("--state", default=None, metavar="FILE", help="state file (default DIR/_offsetlake_capture.json)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_capture)

    e = subparsers.add_parser(
        "capture-end-offsets",
        help="sample log-end offsets into the partition_end_offsets table",
        description=END_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_cluster_args(e)
    src = e.add_mutually_exclusive_group()
    src.add_argument(
        "--topics", default=None, metavar="T1,T2", help="topics to sample (default: every topic in --groups-from-table)"
    )
    src.add_argument(
        "--groups-from-table",
        default=None,
        metavar="TABLE",
        help="take (group, topic, partition, committed offset) from this Delta table "
        "(e.g. offsets_current) and also sample the committed record's timestamp",
    )
    e.add_argument(
        "--table",
        default=None,
        metavar="PATH",
        help="output Delta table (default <paths.warehouse>/partition_end_offsets)",
    )
    e.add_argument("--interval-s", type=float, default=0.0, help="seconds between samples (default 0)")
    e.add_argument("--iterations", type=int, default=1, help="number of samples (default 1; 0 = until Ctrl-C)")
    e.set_defaults(func=run_capture_end_offsets)


def parse_partitions(text: str | None) -> list[int] | None:
    """``"0,3,5-7"`` -> ``[0, 3, 5, 6, 7]``."""

    if text is None or not text.strip():
        return None
    out: set[int] = set()
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                a, b = part.split("-", 1)
                out.update(range(int(a), int(b) + 1))
            elif part:
                out.add(int(part))
    except ValueError:
        raise UsageError(f"--partitions {text}: expected numbers and ranges like 0,3,5-9") from None
    if any(p < 0 for p in out):
        raise UsageError(f"--partitions {text}: partitions are non-negative")
    return sorted(out)


def _settings(args: argparse.Namespace, topic: str | None = None) -> tuple[Any, Any]:
    from pipelines.kafka.client import parse_properties, settings_from_config

    cfg = config_from_args(args)
    settings = settings_from_config(
        cfg, bootstrap_servers=args.bootstrap_servers, topic=topic, extra_properties=parse_properties(args.properties)
    )
    if args.show_config:
        print(json.dumps(settings.redacted(), indent=1), file=sys.stderr)
    return cfg, settings


def run_capture(args: argparse.Namespace) -> int:
    from pipelines.kafka.capture import capture, print_result

    if args.rows_per_file <= 0:
        raise UsageError("--rows-per-file must be positive")
    cfg, settings = _settings(args, topic=args.topic)
    partitions = parse_partitions(args.partitions)
    if partitions is None and cfg.kafka.partitions:
        partitions = sorted(cfg.kafka.partitions)
    start = args.start or cfg.kafka.starting_offsets

    def note(msg: str) -> None:
        print(f"offsetlake capture: {msg}", file=sys.stderr)

    show = not args.no_progress and sys.stderr.isatty()
    options: dict[str, Any] = {
        "partitions": partitions,
        "start": start,
        "until_end": args.until_end,
        "rows_per_file": args.rows_per_file,
        "flush_interval_s": args.flush_interval,
        "max_records": args.max_records,
        "max_rate": args.max_rate,
        "connect_timeout_s": args.connect_timeout,
        "stall_timeout_s": args.stall_timeout,
        "state_path": args.state,
        "log": note,
    }
    if not show:
        result = capture(settings, args.out, **options)
    else:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(
            TextColumn("[bold]capture[/bold] {task.fields[topic]}"),
            BarColumn(),
            TextColumn("{task.completed:,} records"),
            TextColumn("lag {task.fields[lag]:,}"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=False,
        ) as bar:
            task = bar.add_task("capture", total=None, topic=settings.topic, lag=0)

            def progress(done: int, lag: int) -> None:
                bar.update(task, completed=done, total=done + lag, lag=lag)

            result = capture(settings, args.out, progress=progress, **options)
    print_result(result)
    return 0


def run_capture_end_offsets(args: argparse.Namespace) -> int:
    from pipelines.kafka.end_offsets import run_sampler

    cfg, settings = _settings(args)
    topics = [t.strip() for t in args.topics.split(",") if t.strip()] if args.topics else None
    table = args.table or cfg.table_path("partition_end_offsets")
    groups_table = None
    if args.groups_from_table:
        groups_table = (
            args.groups_from_table if "/" in args.groups_from_table else cfg.table_path(args.groups_from_table)
        )
    total = run_sampler(
        settings,
        table,
        topics=topics,
        groups_table=groups_table,
        interval_s=args.interval_s,
        iterations=args.iterations,
        timeout_s=args.connect_timeout,
        log=lambda msg: print(f"offsetlake capture-end-offsets: {msg}", file=sys.stderr),
    )
    print(f"wrote {total} partition_end_offsets rows to {table}")
    return 0
