"""What a process's first Spark job costs, by how it is run: a SQL plan (``mapInArrow`` over
``TaskRows.frame()``; ``sql-nocodegen``: with whole-stage code generation off, as the routed
passes ran before commit "TaskRows") or an RDD job (``TaskRows.run``, what they use now).

Each mode runs in a fresh process (the project's own session builder and settings): three jobs of
two tasks that touch pyarrow, each timed (wall) with the CPU seconds the driver JVM and the Python
workers spent on it (``/proc``, via psutil). The first job of a process carries the cold costs
(planning, code generation, class loading, the worker daemon's start); the later ones show the
warm cost. Modes alternate over ``--rounds`` processes each.

Usage:
    .venv/bin/python bench/first_job.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_CHILD = r"""
import sys, time
sys.path.insert(0, sys.argv[2])
import psutil
from pipelines.runtime.spark_session import build_spark
from pipelines.tableio.task_rows import TaskRows
from pyspark.sql.types import StringType, StructField, StructType

spark = build_spark("first-job", quick_jit=True)
if sys.argv[1] == "sql-nocodegen":
    spark.conf.set("spark.sql.codegen.wholeStage", "false")

def cpu():
    out = {"jvm": 0.0, "workers": 0.0}
    for c in psutil.Process().children(recursive=True):
        try:
            t = c.cpu_times()
            out["jvm" if "java" in c.name() else "workers"] += t.user + t.system
        except psutil.Error:
            pass
    return out

def task(batches):
    import pyarrow as pa
    for b in batches:
        yield pa.RecordBatch.from_pydict({"n": [b.num_rows]})

schema = StructType([StructField("path", StringType())])
for i in range(3):
    rows = TaskRows(spark, schema, [[(f"a{i}",)], [(f"b{i}",)]])
    c0, t0 = cpu(), time.perf_counter()
    if sys.argv[1].startswith("sql"):
        rows.frame().mapInArrow(task, "n long").collect()
    else:
        rows.run(task)
    t1, c1 = time.perf_counter(), cpu()
    print(f"{sys.argv[1]} job {i}: wall {t1 - t0:.2f} s, driver JVM {c1['jvm'] - c0['jvm']:.2f} CPU-s, "
          f"workers {c1['workers'] - c0['workers']:.2f} CPU-s", flush=True)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    print(f"load {os.getloadavg()[0]:.1f}")
    for _ in range(args.rounds):
        for mode in ("sql", "sql-nocodegen", "rdd"):
            out = subprocess.run(
                [sys.executable, "-c", _CHILD, mode, str(REPO)], env=env, capture_output=True, text=True, check=True
            )
            print("\n".join(line for line in out.stdout.splitlines() if line.startswith(mode + " ")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
