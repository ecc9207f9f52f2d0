"""``offsetlake run batch|stream --conf FILE``: run a job (the same code spark-submit runs).

Rules: ``run batch`` is ``pipelines/jobs/batch.py`` (its options, ``--stage`` included, come from
``add_batch_arguments``: one definition); ``run stream`` calls
``pipelines.jobs.stream.run_job(conf, available_now=...)`` (imported lazily: it is optional).
"""

from __future__ import annotations

import argparse
from typing import Any

from pipelines.config import add_conf_arguments, config_from_args
from pipelines.errors import UsageError
from pipelines.jobs.batch import add_batch_arguments, run_from_args


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "run",
        help="run the batch or streaming job (same code as spark-submit runs)",
        description=(
            "Run a job with a config overlay (conf/base.yaml is always loaded first).\n"
            "examples:\n"
            "  offsetlake run batch --conf conf/local.yaml\n"
            "  offsetlake run batch --set replay.as_of_ms=1700000000000 --json\n"
            "  offsetlake run batch --stage replay   # one stage: ingest | decode | replay | all\n"
            "  offsetlake run stream --conf conf/local.yaml --available-now"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="job", metavar="JOB", required=True)
    b = sub.add_parser("batch", help="ingest → decode → replay into Delta tables, then print a summary")
    add_batch_arguments(b)
    b.set_defaults(func=run_batch)
    s = sub.add_parser("stream", help="the streaming replay (Structured Streaming, state store, MERGE into Delta)")
    add_conf_arguments(s)
    s.add_argument(
        "--available-now", action="store_true", help="process everything available, then stop (trigger availableNow)"
    )
    s.set_defaults(func=run_stream)


def run_batch(args: argparse.Namespace) -> int:
    return run_from_args(args)


def run_stream(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    import importlib

    try:
        stream_job = importlib.import_module("pipelines.jobs.stream")
    except ImportError as exc:
        raise UsageError(f"the streaming job is not available in this build ({exc})") from None
    rc = stream_job.run_job(cfg, available_now=args.available_now)
    return int(rc or 0)
