"""The batch job on a Spark standalone cluster (a master and two 1-core workers on 127.0.0.1, the
executors in a venv without offsetlake, the project as a zip) beside the embedded ``local[*]``
run, on the same generated log: the job's own wall time (the summary's) and the whole command's,
and their ratio. The tables are compared too (``tests/cluster``'s comparison).

    python bench/cluster.py [--groups 12 --hours 1]           # the simulator's log (~165k records)
    python bench/cluster.py --records 1000000 [--groups 12000]  # the scale benchmark's landing

Uses the cluster tests' helpers (``tests/pipelines/standalone.py``, ``tests/cluster/jobs.py``);
``--records`` uses ``bench/scale.py``'s landing (generated once into the bench cache).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.cluster.jobs import assert_same_tables, job_args, run, submit_command  # noqa: E402
from tests.pipelines.standalone import StandaloneCluster, executor_python, project_zip  # noqa: E402


def _job_seconds(log: Path) -> float:
    found = re.findall(r"wall time\s*│\s*([\d.]+)s", log.read_text(errors="replace"))
    return float(found[-1]) if found else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=None, help="12 for the simulator, 12000 for --records")
    parser.add_argument("--hours", type=float, default=1.0, help="the simulator's log length")
    parser.add_argument("--records", type=int, default=0, help="use the scale benchmark's landing of this size")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with tempfile.TemporaryDirectory(prefix="offsetlake-bench-cluster-") as tmp:
        work = Path(tmp)
        if args.records:
            from bench.scale import landing as scale_landing

            landing = scale_landing(args.records, args.groups or 12_000)
        else:
            landing = work / "landing"
            generate = [sys.executable, "-m", "pipelines", "generate", "--groups", str(args.groups or 12)]
            generate += ["--hours", str(args.hours), "--seed", "34", "--rows-per-file", "8000", "--out", str(landing)]
            subprocess.run([*generate, "--quiet"], check=True)
        shipped, python = project_zip(work / "offsetlake.zip"), executor_python()
        roots = {n: work / n for n in ("cluster", "local")}
        for root in roots.values():
            root.mkdir()
            (root / "landing").symlink_to(landing, target_is_directory=True)
        cluster = StandaloneCluster(work / "standalone").start()
        try:
            cmd = submit_command(
                cluster.url,
                "pipelines/jobs/batch.py",
                job_args("conf/local.yaml", roots["cluster"]),
                executor_python=python,
                shipped=shipped,
            )
            cluster_s = run(cmd, work / "cluster.log")
        finally:
            cluster.stop()
        local_cmd = [
            sys.executable,
            str(REPO / "pipelines/jobs/batch.py"),
            *job_args("conf/local.yaml", roots["local"]),
        ]
        local_s = run(local_cmd, work / "local.log")
        counts = assert_same_tables(roots["cluster"] / "warehouse", roots["local"] / "warehouse")
        job_c, job_l = _job_seconds(work / "cluster.log"), _job_seconds(work / "local.log")
        load = os.getloadavg()[0]
        print(f"records {counts['raw_records']:,}; tables equal ({len(counts)}); load {load:.1f}")
        print(f"| job (summary wall time) | cluster {job_c:.1f} s | local[*] {job_l:.1f} s | {job_c / job_l:.2f}x |")
        print(f"| whole command | cluster {cluster_s:.1f} s | local[*] {local_s:.1f} s | {cluster_s / local_s:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
