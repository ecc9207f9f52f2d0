"""Crash at every commit (issue 19; not a CI test): SIGKILL the batch job right after its N-th
Delta commit, rerun it, and compare every table's content with a clean run.

For N = 1, 2, ... (until a run finishes before its N-th commit): a fresh warehouse over the same
landing (a generated log plus hostile rows: bad positions and a conflicting duplicate, so
``ingest_quarantine`` is written too and the ingest takes its exact path; ``--clean``: the
generated log alone, whose files the decode's pass copies into raw_records, committing
raw_records before the decoded tables), ``offsetlake run batch`` started in its own process
group, killed (SIGKILL, the whole group: driver and JVM) as soon as the N-th ``_delta_log``
commit file appears; then ``offsetlake run batch`` again, which must exit 0. Every table's rows
are hashed (sorted, order-free; ``ingest_quarantine.run_id`` left out: it names the run) and
compared with a clean run's. Also checked after each rerun: no ``_staging`` left, no data file
that no Delta log mentions.

``--engine spark`` runs the matrix on Spark's Delta (``delta.engine: spark``, the delta-spark jars
the project fetches) instead of delta-rs.

Usage:
    .venv/bin/python bench/crash_matrix.py [--groups 10] [--max-commits 40] [--engine rust|spark] [--write-results]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from bench.results import write_section  # noqa: E402
from pipelines.inputs.raw_files import RAW_ARROW_SCHEMA, records_to_batch, write_raw_records  # noqa: E402
from pipelines.inputs.sample import sample_records  # noqa: E402
from pipelines.tableio import is_table_at  # noqa: E402
from pipelines.warehouse.orphans import orphan_files  # noqa: E402

SECTION = "## crash at every commit (batch job)"
SECTION_CLEAN = "## crash at every commit (batch job, a clean landing: the decode's pass copies it)"
ENV = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
EXE = str(Path(sys.executable).parent / "offsetlake")


def make_landing(landing: Path, groups: int, clean: bool) -> None:
    records = sample_records(groups, seed=21)
    write_raw_records(records, landing)
    if clean:
        return
    bad = records_to_batch(records[:6])
    cols = {n: bad.column(n) for n in RAW_ARROW_SCHEMA.names}
    cols["offset"] = pa.array([None, None, 5, 6, 7, 8], pa.int64())
    cols["partition"] = pa.array([1, 2, None, 2_147_483_647, -3, 60], pa.int32())
    pq.write_table(pa.table(cols), landing / "hostile-00000000.parquet")
    src = next(r for r in records if r.value)
    write_raw_records([src._replace(value=src.value[:-1] + b"\x7f")], landing)  # type: ignore[index]


def commits(warehouse: Path) -> int:
    return sum(1 for p in warehouse.glob("*/_delta_log/*.json"))


def table_hashes(warehouse: Path) -> dict[str, str]:
    from pipelines.tableio import read_arrow_at

    out = {}
    for d in sorted(warehouse.iterdir()):
        if not d.is_dir() or not is_table_at(str(d)):  # the warehouse also holds the lock's files
            continue
        t = read_arrow_at(str(d))
        if "run_id" in t.column_names and d.name == "ingest_quarantine":
            t = t.drop(["run_id"])
        cols = [c.cast(pa.int64()) if pa.types.is_timestamp(c.type) else c for c in t.columns]
        rows = sorted(repr(sorted(r.items())) for r in pa.Table.from_arrays(cols, names=t.column_names).to_pylist())
        out[d.name] = hashlib.sha256("\n".join(rows).encode()).hexdigest()[:16]
    return out


def run(conf: Path, kill_at: int | None, timeout: float = 600) -> tuple[int | None, bool]:
    """(exit code or None when killed, whether it was killed)."""
    wh = conf.parent / "data" / "warehouse"
    proc = subprocess.Popen(
        [EXE, "run", "batch", "--conf", str(conf), "--json"],
        cwd=conf.parent,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        if kill_at is not None and wh.is_dir() and commits(wh) >= kill_at:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return None, True
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return -1, False
        time.sleep(0.005)
    return proc.returncode, False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=10)
    ap.add_argument("--max-commits", type=int, default=40)
    ap.add_argument("--clean", action="store_true", help="no hostile rows: the decode's pass copies the landing")
    ap.add_argument("--engine", choices=("rust", "spark"), default="rust", help="delta.engine of every run")
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="crash-matrix-"))
    try:
        landing = tmp / "landing"
        make_landing(landing, args.groups, args.clean)

        def fresh(name: str) -> Path:
            root = tmp / name
            root.mkdir()
            conf = root / "c.yaml"
            conf.write_text(
                f"paths:\n  root: {root / 'data'}\n  landing: {landing}\nspark:\n  master: local[2]\n"
                f"delta:\n  engine: {args.engine}\n"
            )
            return conf

        clean_conf = fresh("clean")
        rc, _ = run(clean_conf, None)
        assert rc == 0, "the clean run failed"
        clean_wh = clean_conf.parent / "data" / "warehouse"
        total = commits(clean_wh)
        want = table_hashes(clean_wh)
        results: list[tuple[int, bool, bool, str]] = []
        for n in range(1, min(total, args.max_commits) + 1):
            conf = fresh(f"k{n}")
            _, killed = run(conf, n)
            rc2, _ = run(conf, None)
            wh = conf.parent / "data" / "warehouse"
            same = rc2 == 0 and table_hashes(wh) == want
            leftovers = (wh / "_staging").exists() or any(
                orphan_files(d, time.time()) for d in wh.iterdir() if d.is_dir() and is_table_at(str(d))
            )
            diff = "" if same else ", ".join(k for k, v in table_hashes(wh).items() if want.get(k) != v)
            results.append((n, killed, same and not leftovers, diff or ("leftovers" if leftovers else "")))
            print(
                f"kill after commit {n}/{total}: killed={killed} rerun exit={rc2} "
                f"{'identical' if same else 'DIFFERENT ' + diff}{' LEFTOVERS' if leftovers else ''}",
                flush=True,
            )
            shutil.rmtree(conf.parent, ignore_errors=True)
        ok = all(r[2] for r in results)
        section = (SECTION_CLEAN if args.clean else SECTION) + (" on Spark's Delta" if args.engine == "spark" else "")
        lines = [
            section,
            "",
            f"`.venv/bin/python bench/crash_matrix.py --groups {args.groups}{' --clean' if args.clean else ''}"
            f"{' --engine spark' if args.engine == 'spark' else ''} "
            f"--write-results` (local[2]; {'the generated log alone' if args.clean else 'with hostile rows'}; "
            f"{len(want)} tables, {total} commits in a clean run).",
            "",
            "| kill points | killed before finishing | reruns identical to the clean run (every table) "
            "| staging or orphan files left |",
            "|---|---|---|---|",
            f"| {len(results)} (after each commit 1..{len(results)}) | {sum(r[1] for r in results)} | "
            f"{sum(r[2] for r in results)} / {len(results)} | "
            f"{sum(1 for r in results if r[3] == 'leftovers')} |",
            "",
            *(f"- commit {n}: {d}" for n, _, good, d in results if not good),
            "",
        ]
        text = "\n".join(lines)
        print(text)
        if args.write_results:
            write_section(section, text)
        return 0 if ok else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
