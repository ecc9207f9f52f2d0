"""Cost as the work grows (issue 36): the batch job at several sizes and group counts, and an
incremental run on a large warehouse, each as a user runs it (a fresh ``offsetlake run batch``
process, the whole command timed) beside the scan floor of the same landing in the same run.

What is measured:

- ``--sizes`` x ``--groups``: per landing (``bench/batch.py``'s generator: Zipf-ish group
  popularity, 0.2% group-metadata records, 0.1% tombstones), the scan floor (a fresh process,
  warm scan) then the job from an empty warehouse: process and job wall time, records/s, the job
  / floor ratio, the stages, the peak resident memory of the whole process tree (driver, JVM,
  Python workers; sampled every 0.2 s) and the per-record cost relative to the smallest size of
  the same group count.
- ``--incremental BASE:NEW``: one log of BASE+NEW records generated once; the warehouse first
  runs over its first BASE records (the landing holds those files), then the NEW records' files
  are linked into the landing and the job runs again: that second run's time against a run of
  NEW records into an empty warehouse (a landing of its own, same group count), and the
  gold tables of the incremental warehouse compared with one run over all BASE+NEW.
  With ``--job stream`` the three runs are ``offsetlake run stream --available-now`` (the second
  restarts on the first's checkpoint; "job s" is the sum of its micro-batches' durations in
  ``stream_progress``) and the reference is still one batch run over all BASE+NEW (the stream
  equals the batch job at its final watermark).

Usage:
    .venv/bin/python bench/scale.py --sizes 1000000,10000000,30000000 --groups 1000,12000,100000
    .venv/bin/python bench/scale.py --sizes 0 --incremental 30000000:1000000 --groups 12000
    .venv/bin/python bench/scale.py --sizes 0 --incremental 30000000:1000000 --groups 12000 --job stream
    (add --write-results to replace the section in bench/RESULTS.md)
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.batch_process import BENCH_ROOT, WORK, Run, run_conf, run_job, run_scan, write_conf  # noqa: E402
from bench.results import write_section  # noqa: E402

HEADER = "## scale: records x groups, and incremental runs (issue 36)"
ROWS_PER_FILE = 500_000
#: the tables an incremental run must leave equal to one run over everything: every gold table
STATE_TABLES = (
    "group_state",
    "offsets_current",
    "group_members",
    "group_lifecycle",
    "group_transitions",
    "rebalances",
    "offset_expirations",
)


def landing(records: int, groups: int) -> Path:
    path = BENCH_ROOT / (f"raw-{records}" if groups == 12_000 else f"raw-{records}-g{groups}")
    if not any(path.glob("*.parquet")):
        from bench.batch import generate_log

        print(f"generating {records:,} records of {groups:,} groups into {path} ...", flush=True)
        generate_log(path, records, groups)
    return path


def state_tables(root: Path) -> dict[str, object]:
    """The compared tables, sorted on every column: what must be equal."""
    from pipelines.tableio.deltars import read_arrow

    out = {}
    for name in STATE_TABLES:
        t = read_arrow(str(root / "warehouse" / name))
        drop = [c for c in t.column_names if c.startswith("_") or c in ("run_id", "updated_at")]
        t = t.drop_columns(drop)
        out[name] = t.sort_by(
            [
                (c, "ascending")
                for c in t.column_names
                if not str(t.schema.field(c).type).startswith(("list", "struct", "map"))
            ]
        )
    return out


def measure_grid(sizes: list[int], groups: list[int]) -> list[dict[str, object]]:
    rows = []
    for g in groups:
        for n in sizes:
            land = landing(n, g)
            scan = run_scan(land)
            r = run_job(REPO, "scale", land)
            row = {"records": n, "groups": g, "run": r, "floor": n / (scan.scan_warm_s or 1.0)}
            rows.append(row)
            print(
                f"{n:,} x {g:,}: process {r.wall_s:.1f} s, job {r.job_s:.1f} s, {n / (r.job_s or 1):,.0f}/s, "
                f"peak {r.peak_rss / 2**30:.2f} GiB, floor {row['floor']:,.0f}/s, load {r.load:.1f}",
                flush=True,
            )
    return rows


@dataclass
class Incremental:
    base: int
    new: int
    groups: int
    first: Run  # BASE records into an empty warehouse
    second: Run  # NEW records on top of it
    small: Run  # NEW records (a landing of their own) into an empty warehouse
    once: Run  # BASE+NEW in one run
    equal: dict[str, bool]
    rows: dict[str, int]
    job: str = "batch"


def run_stream(conf: Path, root: Path) -> Run:
    """``run stream --available-now --conf conf``, a fresh process, into whatever ``root`` (and its
    checkpoint) holds; job s: the durations of the replay query's micro-batches this process ran."""
    from bench.batch_process import env_for, timed_process
    from pipelines.stream.settings import REPLAY_QUERY
    from pipelines.tableio.deltars import read_arrow

    def batches() -> dict[int, float]:
        path = root / "warehouse" / "stream_progress"
        if not path.exists():
            return {}
        rows = read_arrow(str(path)).to_pylist()
        return {r["batch_id"]: r["batch_duration_ms"] / 1000 for r in rows if r["query_name"] == REPLAY_QUERY}

    before = batches()
    load = os.getloadavg()[0]
    argv = [sys.executable, "-m", "pipelines.cli", "run", "stream", "--available-now", "--conf", str(conf)]
    done = timed_process(argv, REPO, env_for(REPO))
    ran = {k: v for k, v in batches().items() if k not in before}
    if not ran:
        raise SystemExit(f"no micro-batch ran for {conf}")
    return Run(
        done.wall,
        done.peak_rss,
        sum(ran.values()),
        {"micro-batches": float(len(ran))},
        load=load,
        peak_pss=done.peak_pss,
    )


def measure_incremental(base: int, new: int, groups: int, job: str = "batch") -> Incremental:
    whole = landing(base + new, groups)
    files = sorted(whole.glob("*.parquet"))
    cut = base // ROWS_PER_FILE
    if base % ROWS_PER_FILE or len(files) * ROWS_PER_FILE < base + new:
        raise SystemExit(f"BASE must be a multiple of {ROWS_PER_FILE:,} and the log must hold BASE+NEW")
    inc = WORK / f"incremental-{base}-{new}-g{groups}"
    shutil.rmtree(inc, ignore_errors=True)
    inc.mkdir(parents=True)
    for f in files[:cut]:
        os.link(f, inc / f.name)  # same inode, size and mtime: the ingest's identity of a file
    conf, root = write_conf(REPO, "scale", inc)
    shutil.rmtree(root, ignore_errors=True)
    run = run_conf if job == "batch" else (lambda _tree, c, r: run_stream(c, r))
    first = run(REPO, conf, root)
    print(f"incremental: first run over {base:,}: job {first.job_s:.1f} s", flush=True)
    for f in files[cut:]:
        os.link(f, inc / f.name)
    second = run(REPO, conf, root)
    print(f"incremental: run over {new:,} new: process {second.wall_s:.1f} s, job {second.job_s:.1f} s", flush=True)
    if job == "batch":
        small = run_job(REPO, "scale", landing(new, groups))
    else:
        small_conf, small_root = write_conf(REPO, "scale-stream", landing(new, groups))
        shutil.rmtree(small_root, ignore_errors=True)
        small = run_stream(small_conf, small_root)
        shutil.rmtree(small_root, ignore_errors=True)
    print(f"incremental: {new:,} into an empty warehouse: process {small.wall_s:.1f} s, job {small.job_s:.1f} s")
    once_conf, once_root = write_conf(REPO, "scale", whole)
    shutil.rmtree(once_root, ignore_errors=True)
    once = run_conf(REPO, once_conf, once_root)
    a, b = state_tables(root), state_tables(once_root)
    equal = {name: a[name].equals(b[name]) for name in STATE_TABLES}  # type: ignore[attr-defined]
    rows = {name: a[name].num_rows for name in STATE_TABLES}  # type: ignore[attr-defined]
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(once_root, ignore_errors=True)
    shutil.rmtree(inc, ignore_errors=True)
    return Incremental(base, new, groups, first, second, small, once, equal, rows, job)


def render(grid: list[dict[str, object]], inc: Incremental | None, command: str) -> str:
    lines = [
        HEADER,
        "",
        f"Command: `{command}`. One fresh `offsetlake run batch` process per cell, from an empty",
        "warehouse; the scan floor is a fresh process of its own on the same landing, just before.",
        "Peak memory: the whole process tree (driver JVM, Python driver, Python workers).",
        "",
    ]
    if grid:
        lines += [
            "| records | groups | process s | job s | job records/s | stages ingest / decode / replay s | floor records/s (warm scan) | job / floor | per-record cost vs the group count's smallest size | peak GiB | load |",
            "|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|",
        ]
        first_cost: dict[int, float] = {}
        for row in grid:
            n, g, r, floor = row["records"], row["groups"], row["run"], row["floor"]
            assert isinstance(n, int) and isinstance(g, int) and isinstance(r, Run) and isinstance(floor, float)
            cost = (r.job_s or 0.0) / n
            first_cost.setdefault(g, cost)
            st = r.stages
            lines.append(
                f"| {n:,} | {g:,} | {r.wall_s:.1f} | {r.job_s:.1f} | {n / (r.job_s or 1):,.0f} | "
                f"{st.get('ingest', 0):.1f} / {st.get('decode', 0):.1f} / {st.get('replay', 0):.1f} | {floor:,.0f} | "
                f"{n / (r.job_s or 1) / floor:.3f} | {cost / first_cost[g]:.2f}× | {r.peak_rss / 2**30:.2f} | {r.load:.1f} |"
            )
    if inc:
        lines += [
            "",
            f"Incremental ({inc.job}), {inc.groups:,} groups: a warehouse built from {inc.base:,} records, then a "
            f"run over {inc.new:,} new records (their files linked into the same landing):",
            "",
            "| run | process s | job s | stages ingest / decode / replay s | peak GiB | load |",
            "|---|---:|---:|---|---:|---:|",
        ]
        for label, r in (
            (f"first, {inc.base:,} into an empty warehouse", inc.first),
            (f"incremental, {inc.new:,} new on top", inc.second),
            (f"{inc.new:,} into an empty warehouse (the target's baseline)", inc.small),
            (f"one batch run over all {inc.base + inc.new:,} (the equality's reference)", inc.once),
        ):
            st = r.stages
            lines.append(
                f"| {label} | {r.wall_s:.1f} | {r.job_s:.1f} | {st.get('ingest', 0):.1f} / {st.get('decode', 0):.1f} / "
                f"{st.get('replay', 0):.1f} | {r.peak_rss / 2**30:.2f} | {r.load:.1f} |"
            )
        second, small, equal, rows = inc.second, inc.small, inc.equal, inc.rows
        lines += [
            "",
            f"Incremental / empty-warehouse run of the same new records: **{(second.job_s or 0) / (small.job_s or 1):.2f}×** "
            f"(job), {second.wall_s / small.wall_s:.2f}× (whole process). Gold tables equal to the one run: "
            + ", ".join(f"{k} {'yes' if equal[k] else 'NO'} ({rows[k]:,} rows)" for k in STATE_TABLES)
            + ".",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000000,10000000", help="comma-separated record counts (0: none)")
    ap.add_argument("--groups", default="12000", help="comma-separated group counts")
    ap.add_argument("--incremental", help="BASE:NEW records, e.g. 30000000:1000000")
    ap.add_argument("--job", choices=("batch", "stream"), default="batch", help="the incremental runs' job")
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    sizes = [int(s) for s in args.sizes.split(",") if int(s)]
    groups = [int(g) for g in args.groups.split(",")]
    grid = measure_grid(sizes, groups)
    inc = None
    if args.incremental:
        base, new = (int(x) for x in args.incremental.split(":"))
        inc = measure_incremental(base, new, groups[0], args.job)
    command = ".venv/bin/python bench/scale.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = render(grid, inc, command.strip())
    print(text)
    if args.write_results:
        write_section(HEADER, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
