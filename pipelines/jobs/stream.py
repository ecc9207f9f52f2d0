"""spark-submit entry of the streaming replay (``pipelines.stream_job``).

    spark-submit pipelines/jobs/stream.py --conf conf/local.yaml [--available-now]
    python -m pipelines.jobs.stream --conf conf/local.yaml [--available-now]

Rules: continuous by default (``stream.trigger_interval``); ``--available-now`` processes what is
there and stops (what Airflow schedules). SIGTERM stops cleanly (exit 0); bad config exits 2
with one line.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

if __name__ == "__main__" and __package__ in (None, ""):  # spark-submit pipelines/jobs/stream.py
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``--conf``/``--set``/``--available-now`` and run the streaming job."""
    import argparse

    from pipelines.config import add_conf_arguments, config_from_args
    from pipelines.errors import UsageError

    parser = argparse.ArgumentParser(
        prog="stream.py",
        description="offsetlake streaming replay: raw records → decode → per-group state → Delta tables.",
    )
    add_conf_arguments(parser)
    parser.add_argument("--available-now", action="store_true",
                        help="process everything available, then stop (trigger availableNow)")
    args = parser.parse_args(argv)
    try:
        cfg = config_from_args(args)
        from pipelines import stream_job

        return stream_job.main(cfg, available_now=args.available_now)
    except UsageError as exc:
        print(f"stream.py: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
