"""``offsetlake inspect group G [--as-of T]``: a group at any past moment, like
``kafka-consumer-groups --describe --members --offsets --state`` but for history.

Rules: reads G's coordinator partition of ``raw_records`` with delta-rs and replays it with the
core (``pipelines.analytics.inspect``); no Spark. An unknown group exits 2 with one line listing
close matches. ``--json`` prints one JSON object (times in epoch ms).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from pipelines.config import add_conf_arguments, config_from_args


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "inspect",
        help="show a consumer group at any past moment (state, members, offsets, lag, rebalances, expiry)",
        description=(
            "Show a consumer group as it was at --as-of (default: the end of its log): state and generation\n"
            "(a time inside a rebalance shows the inferred PreparingRebalance/CompletingRebalance; inside the\n"
            "window where its start must lie, both states: 'Stable or PreparingRebalance'), protocol,\n"
            "leader, coordinator partition, members with assignments, committed offsets with their owner\n"
            "(consumer id, host, client id), log end, lag, time lag and Burrow status, the group's total/max\n"
            "lag and status (when partition_end_offsets exists; without --as-of the newest sample), recent\n"
            "transitions and rebalances, offsets due to expire.\n"
            "examples:\n"
            "  offsetlake inspect group orders-service --as-of 2026-01-01T00:10:00Z\n"
            "  offsetlake inspect group orders-service --as-of 1767226200000 --json"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="what", required=True)
    g = sub.add_parser("group", help="inspect one consumer group")
    g.add_argument("group", help="group id")
    g.add_argument("--as-of", default=None, metavar="T", help="epoch ms or ISO time (UTC when no zone)")
    g.add_argument("--json", action="store_true", help="print JSON instead of tables")
    add_conf_arguments(g)
    g.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipelines.analytics.inspect import inspect_group, parse_time
    from pipelines.analytics.inspect_render import render

    cfg = config_from_args(args)
    view = inspect_group(cfg, args.group, parse_time(args.as_of))
    if args.json:
        print(json.dumps(view.as_dict(), default=str))
    else:
        render(view)
    return 0
