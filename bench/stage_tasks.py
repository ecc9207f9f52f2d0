"""CPU of one batch stage's task work, in-process: the ingest's or the decode's routed writer
(``pipelines.tableio.rust_sink.RoutedWriter.write``, what each Spark task runs) over a few files,
without Spark, so the figure is the tasks' Python CPU alone (no JVM, no worker start).

- ``ingest``: ``pipelines.batch.ingest:route_copy_files`` over landing files (read and check
  every page, position ranges, byte copy);
- ``decode``: ``pipelines.batch.decode:route_decode_files`` over raw_records files (decode, the
  decoded tables' Parquet files, the replay input's bucket files, the log-shape figures);
- ``joint``: the same route over landing files that it also copies into raw_records (the batch
  job's pass when it runs both stages: ``ingest.LandingAppend``).

Prints one JSON line: rows, the first call's CPU (imports included) and the best of the next
three (warm). Run it from the tree to measure (``cd <tree> && PYTHONPATH=<tree> python
<this file> ...``) to pair old and new code.

Usage:
    python bench/stage_tasks.py ingest|decode|joint DIR_OF_PARQUET_FILES NFILES
"""

from __future__ import annotations

import glob
import json
import os
import resource
import shutil
import sys
import tempfile
import time


def main(argv: list[str]) -> int:
    import pyarrow as pa

    from pipelines.tableio.rust_sink import RoutedWriter, encode_schema
    from schemas import get as get_spec

    which, src, nfiles = argv[0], argv[1], int(argv[2])
    files = sorted(glob.glob(os.path.join(src, "*.parquet")))[:nfiles]
    out = tempfile.mkdtemp(prefix="stage-tasks-")
    if which == "ingest":
        names = ["raw_records"]
        route = "pipelines.batch.ingest:route_copy_files"
        options: dict[str, object] = {"min_copy_rows": 125_000, "existing": [], "num_partitions": 50}
    else:
        from pipelines.batch.decode import LANDING_KEY
        from pipelines.records.decode import TABLES

        names = list(TABLES)
        route = "pipelines.batch.decode:route_decode_files"
        options = {"lenient": False, "txn_fates": None, "replay_input": {"root": out + "/ri", "buckets": 32}}
        if which == "joint":
            names.insert(0, "raw_records")
            options.update(min_copy_rows=125_000, existing=[], num_partitions=50, **{LANDING_KEY: files})

    def writer() -> RoutedWriter:
        shutil.rmtree(out, ignore_errors=True)
        tables = []
        for n in names:
            spec = get_spec(n)
            os.makedirs(f"{out}/{n}")
            tables.append(
                {
                    "name": n,
                    "path": f"{out}/{n}",
                    "arrow_schema": encode_schema(spec.arrow_schema()),
                    "partition_by": list(spec.partition_by),
                    "marked": True,
                }
            )
        opts = {
            "tables": json.dumps(tables),
            "route": route,
            "route_options": json.dumps(options),
            "target_file_rows": "500000",
        }
        return RoutedWriter(opts, False)

    batch = pa.RecordBatch.from_pydict({"path": files})
    cpu = []
    rows = 0
    for _ in range(4):
        w = writer()
        start = time.process_time()
        rows = w.write(iter([batch])).rows_in
        cpu.append(time.process_time() - start)
    shutil.rmtree(out, ignore_errors=True)
    print(
        json.dumps(
            {
                "stage": which,
                "rows": rows,
                "first_cpu": round(cpu[0], 3),
                "warm_cpu_min": round(min(cpu[1:]), 3),
                "maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
