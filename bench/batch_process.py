"""The batch job as a user runs it: a fresh process per run, the whole command timed.

What is measured, per size (the landings ``bench/batch.py`` generates: 12,000 groups), in turn
(A B, B A, ...: the order alternates), each run from an empty warehouse:

- ``run``:   ``python -m pipelines.cli run batch --conf <conf>`` — the user's command, in a fresh
             process: wall time of the whole process (JVM start included), the job's own wall
             time and stages (from the run's record in ``<warehouse>/_runs/batch/``), and the peak
             resident memory of the whole process tree (driver, JVM, Python workers; sampled);
- ``scan``:  the floor, in a fresh process of its own: a plain Spark scan of the same landing
             consuming every key and value byte (``sum(length(key)) + sum(length(value))``), the
             session built by the project's own builder and settings; it reports the warm scan's
             records/s (second scan) and the whole process's wall time; then, in the same
             process, the copy floor: Spark's own Parquet writer copying the landing once;
- ``--vs TREE`` (optional): the same command from another checkout (an older commit in a
             ``git worktree``), run with that tree as its working directory and ``PYTHONPATH``,
             so its own modules are imported — the driver's and Spark's Python workers' alike —
             with this venv's packages. Ratios are taken pair by pair.

The conf of each tree ``extends`` that tree's ``conf/local.yaml`` (the embedded defaults a user
gets) and only points ``paths.root`` and ``input.path`` at the bench's directories.

Usage:
    .venv/bin/python bench/batch_process.py [--sizes 1000000,10000000] [--rounds 3]
        [--vs /path/to/old/tree] [--write-results]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.proc import tree_pss, tree_rss  # noqa: E402
from bench.results import write_section  # noqa: E402

BENCH_ROOT = Path("/tmp/offsetlake-bench")
WORK = BENCH_ROOT / "process"
HEADER = "## batch as a user runs it (fresh process, whole command)"

SCAN = """
import sys, time
from pipelines.config import load_config
from pipelines.runtime.spark_session import build_spark_from_config
from pyspark.sql import functions as F
spark = build_spark_from_config(load_config(sys.argv[1]), app_suffix="scan")
def scan():
    row = spark.read.parquet(sys.argv[2]).agg(F.count(F.lit(1)).alias("n"),
        (F.sum(F.length("key").cast("bigint")) + F.sum(F.coalesce(F.length("value"), F.lit(0)).cast("bigint"))).alias("b")
    ).collect()[0]
    return int(row["n"])
t0 = time.perf_counter(); n = scan(); cold = time.perf_counter() - t0
t0 = time.perf_counter(); scan(); warm = time.perf_counter() - t0
print(f"SCAN {n} {cold:.3f} {warm:.3f}")
if len(sys.argv) > 3:  # the copy floor: Spark's own Parquet writer copies the landing, warm
    import shutil
    t0 = time.perf_counter(); spark.read.parquet(sys.argv[2]).write.parquet(sys.argv[3]); copy = time.perf_counter() - t0
    shutil.rmtree(sys.argv[3])
    print(f"COPY {copy:.3f}")
"""


@dataclass
class Run:
    wall_s: float
    peak_rss: int
    job_s: float | None = None
    stages: dict[str, float] = field(default_factory=dict)
    scan_warm_s: float | None = None
    copy_s: float | None = None
    load: float = 0.0
    #: the tree's peak proportional set size (shared pages once: ``bench.proc.tree_pss``)
    peak_pss: int = 0


class Finished(NamedTuple):
    """A timed process: wall seconds, its tree's peak summed RSS and peak PSS, its stdout."""

    wall: float
    peak_rss: int
    peak_pss: int
    out: str


def timed_process(argv: list[str], cwd: Path, env: dict[str, str]) -> Finished:
    """Run ``argv`` to its end, sampling its process tree's memory every 0.2 s.

    Two peaks: the summed RSS (what every earlier row of bench/RESULTS.md states; it counts the
    pages Spark's forked Python workers share once per worker, so it is an upper bound) and the
    PSS (each page once: the memory the tree holds)."""
    peak = peak_pss = 0
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read() if proc.stdout else ""), daemon=True)
    reader.start()
    while proc.poll() is None:
        peak = max(peak, tree_rss(proc.pid))
        peak_pss = max(peak_pss, tree_pss(proc.pid))
        time.sleep(0.2)
    wall = time.perf_counter() - t0
    reader.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} (in {cwd}) exited {proc.returncode}")
    return Finished(wall, peak, peak_pss, "".join(out))


def write_conf(tree: Path, label: str, landing: Path) -> tuple[Path, Path]:
    """A conf that extends ``tree``'s embedded defaults and points at the bench's directories."""
    root = WORK / f"{label}-{landing.name}"
    conf = WORK / f"{label}-{landing.name}.yaml"
    conf.write_text(
        f"extends: {tree / 'conf' / 'local.yaml'}\n"
        f"paths:\n  root: {root}\n"
        f"input:\n  source: landing\n  path: {landing}\n  format: parquet\n"
    )
    return conf, root


def env_for(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    env["PYSPARK_PYTHON"] = sys.executable
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return env


def run_conf(tree: Path, conf: Path, root: Path) -> Run:
    """``run batch --conf conf`` from ``tree``, a fresh process, into whatever ``root`` holds."""
    load = os.getloadavg()[0]
    done = timed_process(
        [sys.executable, "-m", "pipelines.cli", "run", "batch", "--conf", str(conf)], tree, env_for(tree)
    )
    record = json.loads(sorted((root / "warehouse" / "_runs" / "batch").glob("*.json"))[-1].read_text())
    return Run(done.wall, done.peak_rss, record["wall_seconds"], record["stages"], load=load, peak_pss=done.peak_pss)


def run_job(tree: Path, label: str, landing: Path) -> Run:
    """The job from an empty warehouse (removed again after the run)."""
    conf, root = write_conf(tree, label, landing)
    shutil.rmtree(root, ignore_errors=True)
    run = run_conf(tree, conf, root)
    shutil.rmtree(root, ignore_errors=True)
    return run


def run_scan(landing: Path, *, copy: bool = False) -> Run:
    """The scan floor's fresh process; with ``copy``, the copy floor after it in the same process:
    Spark's own Parquet writer copying the landing (what any job that keeps the raw records pays
    at least), warm."""
    conf, _ = write_conf(REPO, "scan", landing)
    script = WORK / "scan.py"
    script.write_text(SCAN)
    load = os.getloadavg()[0]
    argv = [sys.executable, str(script), str(conf), str(landing)]
    if copy:
        target = WORK / f"copy-{landing.name}"
        shutil.rmtree(target, ignore_errors=True)
        argv.append(str(target))
    wall, peak, _pss, out = timed_process(argv, REPO, env_for(REPO))
    line = next(x for x in out.splitlines() if x.startswith("SCAN "))
    _, _n, _cold, warm = line.split()
    copied = next((float(x.split()[1]) for x in out.splitlines() if x.startswith("COPY ")), None)
    return Run(wall, peak, scan_warm_s=float(warm), copy_s=copied, load=load)


def landing_for(records: int) -> Path:
    path = BENCH_ROOT / f"raw-{records}"
    if not any(path.glob("*.parquet")):
        from bench.batch import generate_log

        print(f"generating {records:,} records into {path} ...", flush=True)
        generate_log(path, records, 12_000)
    return path


def measure(sizes: list[int], rounds: int, vs: Path | None) -> dict[int, dict[str, list[Run]]]:
    WORK.mkdir(parents=True, exist_ok=True)
    out: dict[int, dict[str, list[Run]]] = {}
    for n in sizes:
        landing = landing_for(n)
        runs: dict[str, list[Run]] = {"run": [], "scan": [], "vs": []}
        for i in range(rounds):
            runs["scan"].append(run_scan(landing, copy=True))
            # the tree that runs right after the scan's process alternates (A B, B A, ...): a run's
            # place in the round must not decide the pair's ratio
            if vs is not None and i % 2:
                runs["vs"].append(run_job(vs, "vs", landing))
            runs["run"].append(run_job(REPO, "run", landing))
            if vs is not None and not i % 2:
                runs["vs"].append(run_job(vs, "vs", landing))
            r = runs["run"][-1]
            extra = f"; --vs {runs['vs'][-1].wall_s:.1f} s" if vs is not None else ""
            print(f"{n:,} round {i + 1}: process {r.wall_s:.1f} s, job {r.job_s:.1f} s{extra}", flush=True)
        out[n] = runs
    return out


def _med(xs: list[float]) -> float:
    return statistics.median(xs)


def render(results: dict[int, dict[str, list[Run]]], rounds: int, vs: Path | None, command: str) -> str:
    lines = [
        HEADER,
        "",
        f"Command: `{command}` ({rounds} rounds, medians; min–max in brackets). Each run is a fresh",
        "process from an empty warehouse; the scan floor is a fresh process of its own in the same",
        "round. Peak memory: the whole process tree (driver, JVM, Python workers), sampled every 0.2 s:",
        "summed RSS (an upper bound: the forked workers' shared pages count once per worker) and PSS.",
        "",
        "The copy floor, in the scan's process after it: Spark's own Parquet writer copying the landing",
        "(read once, written once, no decode): the least a job that keeps the raw records pays.",
        "",
        "| records | process s | job s | job records/s | stages (ingest / decode / replay) s | scan floor records/s (warm) | job / floor | copy floor records/s | job / copy | peak GiB (RSS / PSS) | load |",
        "|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for n, runs in results.items():
        rr, sc = runs["run"], runs["scan"]
        job = _med([r.job_s or 0.0 for r in rr])
        floor = n / _med([s.scan_warm_s or 1.0 for s in sc])
        st = {k: _med([r.stages.get(k, 0.0) for r in rr]) for k in ("ingest", "decode", "replay")}
        walls = [r.wall_s for r in rr]
        copy = n / _med([s.copy_s or 1.0 for s in sc])
        lines.append(
            f"| {n:,} | {_med(walls):.1f} ({min(walls):.1f}–{max(walls):.1f}) | {job:.1f} | {n / job:,.0f} | "
            f"{st['ingest']:.1f} / {st['decode']:.1f} / {st['replay']:.1f} | {floor:,.0f} | {n / job / floor:.3f} | "
            f"{copy:,.0f} | {n / job / copy:.2f} | "
            f"{max(r.peak_rss for r in rr) / 2**30:.2f} / {max(r.peak_pss for r in rr) / 2**30:.2f} | "
            f"{_med([r.load for r in rr]):.1f} |"
        )
    if vs is not None:
        lines += [
            "",
            f"Against `--vs` (another checkout, `{vs}`), pair by pair (this / that, whole process):",
            "",
            "| records | this s | that s | this / that (median of pairs, min–max) |",
            "|---:|---:|---:|---:|",
        ]
        for n, runs in results.items():
            ratios = [a.wall_s / b.wall_s for a, b in zip(runs["run"], runs["vs"], strict=True)]
            lines.append(
                f"| {n:,} | {_med([r.wall_s for r in runs['run']]):.1f} | {_med([r.wall_s for r in runs['vs']]):.1f} | "
                f"{_med(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f}) |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000000,10000000", help="comma-separated record counts")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--vs", type=Path, help="another checkout to run the same command from, in turn")
    ap.add_argument("--write-results", action="store_true", help="write the section into bench/RESULTS.md")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    command = ".venv/bin/python bench/batch_process.py " + " ".join(argv if argv is not None else sys.argv[1:])
    results = measure(sizes, args.rounds, args.vs.resolve() if args.vs else None)
    text = render(results, args.rounds, args.vs, command.strip())
    print(text)
    if args.write_results:
        write_section(HEADER, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
