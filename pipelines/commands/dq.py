"""``offsetlake dq``: run the data-quality suites (see ``pipelines.jobs.dq``)."""

from __future__ import annotations

import argparse
from typing import Any

from pipelines.jobs.dq import add_dq_arguments, run_from_args

DESCRIPTION = """\
Validate the Delta tables with Great Expectations suites (run on Spark) and record the results.

Prints one line per expectation (failures first), appends them to the dq_results table
(dq.results_table), writes the data docs under paths.dq_docs and exits 1 when a blocking
expectation failed. The data docs' index.html (its path is printed) is a self-contained page
that works offline: this run, every expectation with its result, and the recent runs from
dq_results; Great Expectations' own pages (which load their assets from CDNs) stay beside it,
from gx-index.html. Thresholds and extra blocking checks: the dq section of conf/.
"""

EPILOG = """\
examples:
  offsetlake dq --conf conf/local.yaml
  offsetlake dq --conf conf/local.yaml --suites stream          # gold tables only
  offsetlake dq --suites raw_records,reconciliation --set dq.quarantine_max_fraction=0.05
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "dq",
        help="run the data-quality suites (Great Expectations) over the Delta tables",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_dq_arguments(parser)
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    return run_from_args(args)
