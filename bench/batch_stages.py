"""The batch command's stages, paired against another checkout: wall and CPU per stage.

Each run is ``python -m pipelines.cli run batch`` in a fresh process from an empty warehouse (the
bench's landings, ``/tmp/offsetlake-bench/raw-<n>``), A B A B between the trees, each tree run
from its own directory with ``PYTHONPATH`` set to it (its own modules, this venv's packages).
Per stage: wall from the run's record (``<warehouse>/_runs/batch/``) and CPU of the whole process
tree (driver, JVM, Python workers: ``bench.proc.tree_cpu_seconds``) read when the progress lines
``<stage> ...`` and ``<stage> done`` appear. Prints one JSON line per run, then the medians.

Usage:
    .venv/bin/python bench/batch_stages.py SIZE ROUNDS label=TREE [label=TREE ...]
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.proc import tree_cpu_seconds  # noqa: E402

STAGES = ("ingest", "decode", "replay")
_LINE = re.compile(r"^\s*(ingest|decode|replay|summary) (\.\.\.|done)")


def run_once(label: str, tree: str, size: int) -> dict[str, object]:
    root = f"/tmp/offsetlake-bench/stages/{label}-{size}"
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    conf = f"{root}.yaml"
    Path(conf).write_text(
        f"extends: {tree}/conf/local.yaml\npaths: {{root: {root}}}\n"
        f"input: {{source: landing, path: /tmp/offsetlake-bench/raw-{size}, format: parquet}}\n"
    )
    env = dict(os.environ, PYTHONPATH=tree, PYTHONUNBUFFERED="1", SPARK_LOCAL_IP="127.0.0.1")
    env["PYSPARK_PYTHON"] = sys.executable
    start = time.time()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipelines.cli", "run", "batch", "--conf", conf],
        cwd=tree,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    marks: dict[tuple[str, str], float] = {}
    last = 0.0
    assert proc.stdout is not None
    for line in proc.stdout:
        m = _LINE.match(line)
        if m:
            last = marks[(m.group(1), m.group(2))] = tree_cpu_seconds(proc.pid)
    proc.wait()
    wall = time.time() - start
    record = json.loads(Path(sorted(glob.glob(f"{root}/warehouse/_runs/batch/*.json"))[-1]).read_text())
    row: dict[str, object] = {
        "label": label,
        "rc": proc.returncode,
        "wall": round(wall, 2),
        "cpu_to_summary": round(last, 2),
        "job": record["wall_seconds"],
        "load": os.getloadavg()[0],
    }
    for st in STAGES:
        a, b = marks.get((st, "...")), marks.get((st, "done"))
        row[st] = record["stages"].get(st)
        row[f"{st}_cpu"] = round(b - a, 2) if a is not None and b is not None else None
    return row


def main(argv: list[str]) -> int:
    size, rounds = int(argv[0]), int(argv[1])
    trees = [a.split("=", 1) for a in argv[2:]]
    rows: list[dict[str, object]] = []
    for _ in range(rounds):
        for label, tree in trees:
            row = run_once(label, tree, size)
            print(json.dumps(row), flush=True)
            rows.append(row)
    keys = ["wall", "job", *[k for st in STAGES for k in (st, f"{st}_cpu")]]
    for label, _ in trees:
        mine = [r for r in rows if r["label"] == label]
        print(label, {k: round(statistics.median(float(str(r[k])) for r in mine), 2) for k in keys})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
