"""``offsetlake report [--group G] --out FILE.html``: one self-contained HTML report.

Rules: gold tables read with delta-rs into pandas (``pipelines.analytics.report``), plotly.js
inlined so the file opens offline; per-group detail for ``--group`` (repeatable) or the
``--max-groups`` most active groups.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    from pipelines.config import add_conf_arguments

    p = subparsers.add_parser(
        "report",
        help="write a self-contained HTML report (cluster overview + per-group timelines)",
        description=(
            "Write one HTML file (no network needed to open it): cluster overview (groups by state, top\n"
            "rebalancing groups, rebalance minutes over time, coordinator partition load) and per group a\n"
            "state/generation timeline, member joins/leaves, commits per partition, rebalance durations\n"
            "and an expiry forecast.\n"
            "examples:\n"
            "  offsetlake report --out report.html\n"
            "  offsetlake report --group orders-service --out orders.html"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--group", action="append", default=None, help="group(s) to detail (default: the most active)")
    p.add_argument("--max-groups", type=int, default=50, help="groups detailed without --group (default: %(default)s)")
    p.add_argument("--out", default=None, help="output file (default: <paths.reports>/report.html)")
    add_conf_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipelines.analytics.report import write_report
    from pipelines.config import config_from_args

    cfg = config_from_args(args)
    out = args.out or str(Path(cfg.paths.reports) / "report.html")
    path = write_report(cfg, out, groups=args.group, max_groups=args.max_groups)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")
    return 0
