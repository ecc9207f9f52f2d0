"""Delta maintenance job: compact small files (OPTIMIZE) and delete unreferenced ones (VACUUM).

Run it:
    spark-submit pipelines/jobs/maintenance.py --conf conf/local.yaml [--tables a,b] [--retention-hours N]
    python -m pipelines.jobs.maintenance --conf conf/local.yaml

Rules:
- Works on every Delta table present under ``paths.warehouse`` (or the ``--tables`` given),
  with the engine in use (``pipelines.tableio``): Spark's ``DeltaTable.optimize()/vacuum()``
  on a cluster with Delta jars, delta-rs ``optimize.compact()`` / ``vacuum()`` otherwise.
- VACUUM keeps files newer than ``delta.vacuum_retention_hours`` (time travel and concurrent
  readers need them); ``--retention-hours`` overrides it for one run.
- One table's failure does not stop the others; the job exits 1 if any table failed.
- With ``delta.engine: rust`` no SparkSession is started (delta-rs does the work).
- Holds the warehouse's writer lock (``pipelines.warehouse.lock``) while it runs.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

if __name__ == "__main__" and __package__ in (None, ""):  # spark-submit pipelines/jobs/maintenance.py
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from pipelines.config import add_conf_arguments, config_from_args
from pipelines.errors import UsageError
from pipelines.runtime.spark_session import build_spark_from_config
from pipelines.tableio import TableIO
from pipelines.warehouse.lock import warehouse_lock

log = logging.getLogger("offsetlake.maintenance")


@dataclass
class TableMaintenance:
    """What maintenance did to one table."""

    table: str
    version_before: int | None
    version_after: int | None = None
    files_added: int | None = None
    files_removed: int | None = None
    vacuumed: int = 0
    seconds: float = 0.0
    error: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)


def maintain(
    io: TableIO,
    tables: Sequence[str] | None = None,
    *,
    retention_hours: int | None = None,
    optimize: bool = True,
    vacuum: bool = True,
    dry_run: bool = False,
) -> list[TableMaintenance]:
    """OPTIMIZE (compact) then VACUUM each table; returns one record per table."""
    names = list(tables) if tables else io.list_tables()
    out: list[TableMaintenance] = []
    for name in names:
        started = time.perf_counter()
        rec = TableMaintenance(name, io.version(name))
        try:
            if not io.exists(name):
                raise FileNotFoundError(f"no Delta table {name} at {io.path(name)}")
            if optimize and not dry_run:
                metrics = io.optimize(name)
                rec.metrics = {k: v for k, v in metrics.items() if isinstance(v, (int, float, str))}
                rec.files_added = _int(metrics.get("numFilesAdded"))
                rec.files_removed = _int(metrics.get("numFilesRemoved"))
            if vacuum:
                rec.vacuumed = len(io.vacuum(name, retention_hours, dry_run=dry_run))
            rec.version_after = io.version(name)
        except Exception as exc:  # one table's failure must not stop the others
            rec.error = f"{type(exc).__name__}: {exc}"
            log.exception("maintenance of %s failed", name)
        rec.seconds = time.perf_counter() - started
        out.append(rec)
    return out


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) else None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: ``spark-submit pipelines/jobs/maintenance.py --conf ...``."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="maintenance.py", description="Delta maintenance: OPTIMIZE (compaction) and VACUUM of the tables."
    )
    add_conf_arguments(parser)
    parser.add_argument("--tables", default=None, help="comma-separated table names (default: every table present)")
    parser.add_argument(
        "--retention-hours", type=int, default=None, help="VACUUM retention (default: delta.vacuum_retention_hours)"
    )
    parser.add_argument("--no-optimize", action="store_true", help="skip compaction")
    parser.add_argument("--no-vacuum", action="store_true", help="skip VACUUM")
    parser.add_argument("--dry-run", action="store_true", help="list what VACUUM would delete; change nothing")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    try:
        cfg = config_from_args(args)
        if args.retention_hours is not None and args.retention_hours < 0:
            raise UsageError("--retention-hours: expected a non-negative integer")
        # a writer like the jobs: never next to a batch or a stream (pipelines.warehouse.lock)
        with warehouse_lock(cfg.paths.warehouse, "offsetlake maintenance"):
            # delta-rs needs no SparkSession; auto/spark need one to find (or use) Delta's jars
            spark = None if cfg.delta.engine == "rust" else build_spark_from_config(cfg, app_suffix="maintenance")
            io = TableIO(cfg, spark)
            tables = [t.strip() for t in args.tables.split(",") if t.strip()] if args.tables else None
            results = maintain(
                io,
                tables,
                retention_hours=args.retention_hours,
                optimize=not args.no_optimize,
                vacuum=not args.no_vacuum,
                dry_run=args.dry_run,
            )
    except UsageError as exc:
        print(f"maintenance: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([r.__dict__ for r in results], indent=2, default=str))
    else:
        print(f"delta maintenance ({io.engine} engine), warehouse {cfg.paths.warehouse}")
        for r in results:
            status = (
                f"error: {r.error}"
                if r.error
                else (
                    f"v{r.version_before} -> v{r.version_after}, files +{r.files_added or 0}/-{r.files_removed or 0}, "
                    f"vacuumed {r.vacuumed}"
                )
            )
            print(f"  {r.table:<22} {status}  ({r.seconds:.1f}s)")
    return 1 if any(r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
