"""``offsetlake report [--group G] [--since T] [--until T | --window 6h] --out FILE.html``: one
self-contained HTML report.

Rules: gold tables read with delta-rs into pandas (``pipelines.analytics.report``), plotly.js
inlined so the file opens offline (``--plotly cdn``: a script tag to plotly's CDN instead, the
installed plotly's version); per-group detail for ``--group`` (repeatable) or the
``--max-groups`` most active groups.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pipelines.config import add_conf_arguments, config_from_args
from pipelines.errors import UsageError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "report",
        help="write a self-contained HTML report (cluster overview + per-group timelines)",
        description=(
            "Write one HTML file (no network needed to open it): cluster overview (groups by state, top\n"
            "rebalancing groups, rebalance minutes over time, coordinator partition load) and per group a\n"
            "state/generation timeline, member joins/leaves, commits per partition, rebalance durations\n"
            "and an expiry forecast.\n"
            "size: plotly.js, inlined so the file opens offline, is ~4.8 MB of it whatever --window or\n"
            "--max-groups; the rest grows with the groups detailed. --plotly cdn loads plotly.js from\n"
            "cdn.plot.ly instead (the installed plotly's version): a few hundred KB, but opening it needs\n"
            "the network.\n"
            "examples:\n"
            "  offsetlake report --out report.html\n"
            "  offsetlake report --group orders-service --out orders.html\n"
            "  offsetlake report --window 6h --plotly cdn --out small.html"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--group", action="append", default=None, help="group(s) to detail (default: the most active)")
    p.add_argument("--max-groups", type=int, default=50, help="groups detailed without --group (default: %(default)s)")
    p.add_argument("--out", default=None, help="output file (default: <paths.reports>/report.html)")
    p.add_argument("--since", default=None, metavar="T", help="history shown from T (epoch ms or ISO time, UTC)")
    p.add_argument("--until", default=None, metavar="T", help="history shown up to T (epoch ms or ISO time, UTC)")
    p.add_argument(
        "--window",
        default=None,
        metavar="DURATION",
        help="history shown over the last DURATION before --until or the warehouse's last record (e.g. 90m, 6h, 7d)",
    )
    p.add_argument(
        "--plotly",
        choices=("inline", "cdn"),
        default="inline",
        help="plotly.js inline (default: ~4.8 MB, opens offline) or a script tag to its CDN (small file, needs "
        "the network to draw)",
    )
    add_conf_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipelines.analytics.report import write_report

    cfg = config_from_args(args)
    since, until = _window(args, cfg)
    out = args.out or str(Path(cfg.paths.reports) / "report.html")
    path = write_report(
        cfg, out, groups=args.group, max_groups=args.max_groups, since_ms=since, until_ms=until, plotly=args.plotly
    )
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")
    return 0


_UNITS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def _window(args: argparse.Namespace, cfg: Any) -> tuple[int | None, int | None]:
    """(since, until) in epoch ms from --since/--until/--window; bad values are a UsageError."""
    from pipelines.analytics.inspect import parse_time

    until = parse_time(args.until)
    since = parse_time(args.since)
    if args.window is not None:
        text = args.window.strip()
        if since is not None:
            raise UsageError("--window and --since: give one of them")
        if len(text) < 2 or text[-1] not in _UNITS or not text[:-1].isdigit() or int(text[:-1]) <= 0:
            raise UsageError(f"--window: expected a duration like 90m, 6h or 7d, got {args.window!r}")
        end = until if until is not None else _last_record_ms(cfg)
        since = None if end is None else end - int(text[:-1]) * _UNITS[text[-1]]
    if since is not None and until is not None and since > until:
        raise UsageError("--since is after --until")
    return since, until


def _last_record_ms(cfg: Any) -> int | None:
    """The warehouse's last record time (group_state's last_timestamp), None when unknown."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from pipelines.tableio import TableIO

    t = TableIO(cfg, None, engine="rust").read_arrow("group_state", ["last_timestamp"])
    if t is None or not t.num_rows:
        return None
    top = pc.max(pc.cast(t.column("last_timestamp"), pa.timestamp("ms", "UTC"))).cast(pa.int64()).as_py()
    return None if top is None else int(top)
