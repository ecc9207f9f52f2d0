"""The data-quality job: run the GX suites over the Delta tables, record and print the results.

Run it either way (same code path):
    offsetlake dq --conf conf/local.yaml [--suites batch|stream|NAME,...]
    spark-submit pipelines/jobs/dq.py --conf conf/local.yaml [--suites ...]

Rules:
- ``main`` only wires config, Spark and output; the suites and their evaluation live in
  ``pipelines.quality``.
- Exit code 0 when every blocking expectation held, 1 when one failed (so spark-submit, and
  the Airflow task running it, fail), 2 on bad config or input (a warehouse without any table
  is refused before Spark starts).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Sequence
from typing import Any

if __name__ == "__main__" and __package__ in (None, ""):  # spark-submit pipelines/jobs/dq.py
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from pipelines.config import add_conf_arguments, config_from_args
from pipelines.errors import UsageError


def add_dq_arguments(parser: Any) -> None:
    """The job's options (shared by ``offsetlake dq`` and ``spark-submit pipelines/jobs/dq.py``)."""

    add_conf_arguments(parser)
    parser.add_argument(
        "--suites",
        default=None,
        metavar="SPEC",
        help="which suites: all (default), a group (batch = every suite, stream = the gold tables), "
        "or a comma-separated list of suite names (raw_records, offset_commits, group_metadata, "
        "quarantine, reconciliation, group_state, offsets_current)",
    )
    parser.add_argument("--run-id", default=None, help="id recorded in dq_results (default: dq-<UTC time>-<random>)")
    parser.add_argument("--no-docs", action="store_true", help="do not rebuild the GX data docs (paths.dq_docs)")
    parser.add_argument(
        "--no-record", action="store_true", help="do not append to dq_results nor update the generation baseline"
    )
    parser.add_argument("--json", action="store_true", help="print the outcomes as JSON instead of a table")


def _import_gx() -> None:
    import great_expectations.expectations  # noqa: F401  (the suites' expectation classes)


def run_from_args(args: Any) -> int:
    """Load config, build Spark, run the suites, print; 0 = pass, 1 = a blocking failure."""
    # lazy: the CLI's command discovery imports this module (hoisted: 214 -> 426 ms)
    from pipelines.quality.runner import format_summary, run_quality
    from pipelines.quality.suites import select_suites
    from pipelines.runtime.spark_session import build_spark_from_config

    cfg = config_from_args(args)
    try:
        select_suites(args.suites)
    except ValueError as exc:
        raise UsageError(f"--suites: {exc}") from None
    # lazy: the CLI's command discovery imports this module (hoisted: 214 -> 426 ms)
    from pipelines.tableio import TableIO

    if not TableIO(cfg, None, engine="rust").list_tables():  # nothing to check: say so without a JVM
        raise UsageError(f"no Delta tables under {cfg.paths.warehouse} (run: offsetlake run batch)")
    # GX's import (~2 CPU-s) while the JVM starts (mostly a wait): the session is ready sooner
    importing = threading.Thread(target=_import_gx, name="import-gx", daemon=True)
    importing.start()
    spark = build_spark_from_config(cfg, app_suffix="dq")
    importing.join()
    report = run_quality(
        cfg,
        spark,
        suites=args.suites,
        run_id=args.run_id,
        write_results=not args.no_record,
        update_baseline=not args.no_record,
        build_docs=not args.no_docs,
    )
    if args.json:
        print(
            json.dumps(
                {"run_id": report.run_id, "success": report.success, "outcomes": [o.__dict__ for o in report.outcomes]},
                indent=2,
            )
        )
    else:
        print(format_summary(report))
        if report.results_table:
            print(f"results: {cfg.table_path(report.results_table)}")
        if report.docs_index:
            print(f"data docs: {report.docs_index}")
    for o in report.blocking_failures:
        print(
            f"dq: blocking expectation failed: {o.suite}.{o.expectation} ({o.target}) observed {o.observed_value}",
            file=sys.stderr,
        )
    return 0 if report.success else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point for ``spark-submit pipelines/jobs/dq.py --conf ...``."""
    import argparse

    parser = argparse.ArgumentParser(prog="dq.py", description="offsetlake data-quality job (Great Expectations).")
    add_dq_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run_from_args(args)
    except UsageError as exc:
        print(f"dq: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
