"""``offsetlake tables``: the warehouse's Delta tables with row counts and versions.

Rules: metadata only — read from each table's Delta log with delta-rs (row counts are the sum
of the files' ``numRecords``), so it needs no SparkSession and answers in well under a second.
A warehouse that does not exist is an error (exit 2); an existing one without tables says so.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

from pipelines import uri
from pipelines.config import add_conf_arguments, config_from_args
from pipelines.errors import UsageError
from schemas import TABLES


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "tables",
        help="list the Delta tables with row counts and versions",
        description="List the Delta tables under paths.warehouse: rows, Delta version, files, last commit.",
    )
    add_conf_arguments(p)
    p.add_argument("--json", action="store_true", help="print JSON (with each table's description) instead of a table")
    p.set_defaults(func=run)


def table_rows(cfg: Any) -> list[dict[str, Any]]:
    """One dict per table: name, rows, version, files, last_commit (ISO UTC), operation, doc."""
    from pipelines.tableio import TableIO

    io = TableIO(cfg, None, engine="rust")
    out = []
    for name in io.list_tables():
        info = io.describe(name)
        last = info.last_commit
        ts = last.get("timestamp")
        spec = TABLES.get(name)
        out.append(
            {
                "table": name,
                "rows": info.rows,
                "version": info.version,
                "files": info.files,
                "last_commit": datetime.fromtimestamp(ts / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S") if ts else None,
                "operation": last.get("operation"),
                "doc": (spec.doc.split(". ")[0].rstrip(".") + ".") if spec and spec.doc else "",
            }
        )
    return out


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    cfg = config_from_args(args)

    if not uri.exists(cfg.paths.warehouse):
        raise UsageError(f"no warehouse at {cfg.paths.warehouse} (run: offsetlake run batch, or offsetlake quickstart)")
    rows = table_rows(cfg)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    import sys

    # piped output: wide enough for every column (rich's default for a pipe is 80 columns)
    console = Console() if sys.stdout.isatty() else Console(width=160)
    if not rows:
        console.print(
            f"no Delta tables under {cfg.paths.warehouse} (run: offsetlake run batch, or offsetlake quickstart)"
        )
        return 0
    t = Table(title=f"tables in {cfg.paths.warehouse}", title_justify="left")
    for col, just in (
        ("table", "left"),
        ("rows", "right"),
        ("version", "right"),
        ("files", "right"),
        ("last commit (UTC)", "left"),
        ("operation", "left"),
    ):
        t.add_column(col, justify=just, no_wrap=col != "operation")  # type: ignore[arg-type]
    for r in rows:
        t.add_row(
            r["table"],
            f"{r['rows']:,}",
            str(r["version"]),
            str(r["files"]),
            r["last_commit"] or "",
            r["operation"] or "",
        )
    console.print(t)
    return 0
