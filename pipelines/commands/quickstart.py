"""``offsetlake quickstart``: generate a sample log, run the batch job, show the results.

Rules:
- Everything goes under one directory (``--dir``, default ``./offsetlake-data/quickstart``) so the
  quickstart never touches a real warehouse; ``--fresh`` deletes it first. A landing already there
  is reused, except with ``--kafka real``: without ``--fresh`` that is refused (exit 2, one line),
  never a silent reuse of the old log.
- The log comes from the coordinator simulator (``offsetlake generate``'s ``write_generated``).
- The sample cluster runs Kafka 4's coordinator (``generate.coordinator``) and ``--world
  realistic`` (the default) has the shapes real clusters hold: idle partitions committed once,
  offset-less groups, members restarting all at once (``GeneratorConfig``'s defaults);
  ``--world plain`` turns them off. ``--compaction cleaned`` reads the log as a capture from
  ``earliest`` of the compacted topic would (the summary then says which groups' history starts
  inside the compacted part).
- The batch job is the real one (``pipelines.jobs.batch.run_batch``); the three example queries
  are printed with their SQL and their results, answered as ``offsetlake sql`` answers them
  (``pipelines.commands.sql.open_session``, engine ``auto``: DuckDB over the sample's small local
  tables, Spark where a statement has no DuckDB form or the warehouse is large or remote).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

from pipelines.batch.summary import render_summary
from pipelines.commands import quickstart_real
from pipelines.commands.generate import write_generated
from pipelines.commands.sql import open_session, print_table, register_views
from pipelines.config import load_config
from pipelines.errors import UsageError
from pipelines.jobs.batch import run_batch

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
    quickstart_real.add_args(p)
    p.add_argument("--fresh", action="store_true", help="delete --dir first")
    p.add_argument("--conf", default=None, help="base overlay to start from (default: conf/local.yaml)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from pipelines.runtime.spark_session import build_spark_from_config

    root = Path(args.dir).expanduser().resolve()
    if args.retention_ms <= 0:
        raise UsageError("--retention-ms: expected a positive integer")
    real = getattr(args, "kafka", "generated") == "real"
    overrides: dict[str, Any] = {
        "paths.root": str(root),
        "input.source": "landing",
        "replay.retention_ms": args.retention_ms,
        "generate.retention_ms": args.retention_ms,
    }
    if real:  # the local broker's own settings (pipelines/kafka/local_broker.py), not the simulator's
        overrides.update(quickstart_real.REPLAY_SETTINGS)
    cfg = load_config(args.conf, overrides=overrides)
    groups, hours = args.groups, args.hours
    seed = args.seed if args.seed is not None else cfg.generate.seed
    if groups <= 0:
        raise UsageError("--groups: expected a positive integer")
    if hours <= 0:
        raise UsageError("--hours: expected a positive number")
    if real and not args.fresh and _has_landing(Path(cfg.paths.landing)):
        raise UsageError(
            f"--kafka real: {cfg.paths.landing} already holds a sample log; add --fresh to capture a new one "
            "from a real broker (without --kafka real the quickstart reuses it)"
        )
    # after every check: a refused quickstart leaves no directory behind
    if args.fresh and root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    import sys

    # piped or captured output gets a width that fits group ids instead of rich's 80 columns
    console = Console() if sys.stdout.isatty() else Console(width=132)
    err = Console(stderr=True)
    conf_file = _write_conf(cfg, root)

    world = _land(cfg, args, root, seed, err)

    spark = build_spark_from_config(cfg, app_suffix="quickstart", quick_jit=True)
    summary = run_batch(cfg, spark, echo=lambda m: err.print(m, highlight=False))
    render_summary(summary, console)

    session = open_session(cfg)
    _print_now(session, cfg, console)
    for title, sql in EXAMPLE_QUERIES:
        console.rule(title)
        console.print(sql, style="cyan", highlight=False)
        missing = [
            n for n in ("group_state", "offsets_current", "offset_commits") if n in sql and n not in session.tables
        ]
        if missing:
            console.print(f"(skipped: table {', '.join(missing)} not built)")
            continue
        print_table(session.execute(sql, limit=21), console, limit=20)
    disagree = 0
    if world is not None:
        register_views(spark, cfg)
        disagree = quickstart_real.print_agreement(spark, world, console)
    nexts = ['sql "SELECT * FROM group_state"', "tables", "inspect group <id>", "report", "metrics", "serve"]
    console.print("\nnext: " + "   |   ".join(f"offsetlake {n} --conf {conf_file}" for n in nexts))
    if disagree:
        err.print(f"[quickstart] offsetlake and the broker disagree on {disagree} group(s): see the table above")
        return 1
    return 0


def _write_conf(cfg: Any, root: Path) -> Path:
    """``<dir>/quickstart.yaml``: the sample cluster's settings, for the commands after the quickstart."""
    conf_file = root / "quickstart.yaml"
    conf_file.write_text(
        "# written by offsetlake quickstart: the sample cluster's settings\n"
        f"paths:\n  root: {root}\n"
        f"offsets_topic:\n  num_partitions: {cfg.offsets_topic.num_partitions}\n"
        f"replay:\n  retention_ms: {cfg.replay.retention_ms}\n  coordinator: {cfg.replay.coordinator}\n"
        f"  cleanup_interval_ms: {cfg.replay.cleanup_interval_ms}\n"
        f"  initial_rebalance_delay_ms: {cfg.replay.initial_rebalance_delay_ms}\n"
        f"generate:\n  coordinator: {cfg.generate.coordinator}\n"
    )
    return conf_file


def _land(cfg: Any, args: argparse.Namespace, root: Path, seed: int, err: Any) -> Any:
    """The landing: reused, generated, or captured from a real broker (then its world is returned)."""
    landing = Path(cfg.paths.landing)
    if _has_landing(landing):  # never with --kafka real: refused above unless --fresh removed it
        err.print(f"[quickstart] reusing the sample log in {landing} (use --fresh to regenerate)")
        return None
    if getattr(args, "kafka", "generated") == "real":
        return quickstart_real.capture_real_world(
            cfg, root, args.kafka_version, lambda m: err.print(m, highlight=False)
        )
    n, how = generate_sample(
        landing,
        groups=args.groups,
        hours=args.hours,
        seed=seed,
        num_partitions=cfg.offsets_topic.num_partitions,
        retention_ms=cfg.generate.retention_ms,
        world=args.world,
        compaction=args.compaction,
        **cfg.generate.cluster,
    )
    err.print(f"[quickstart] generated {n:,} records for {args.groups} groups ({how}) into {landing}")
    return None


def _has_landing(landing: Path) -> bool:
    return landing.exists() and any(landing.glob("*.parquet"))


def _print_now(session: Any, cfg: Any, console: Any) -> None:
    """The as-of the state below is told at (``pipelines.log_clock``: one "now" for every view)."""
    import datetime as dt

    from pipelines.log_clock import now_ms

    ms, source = now_ms(cfg, session.io.read_arrow)
    if ms is None:
        console.print("state as of: nothing replayed yet")
        return
    at = dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    how = source if "replay.now" in source else f"{source}; replay.now: {cfg.replay.now}"
    console.print(f"state as of {at} UTC ({how})")
