"""Benchmark: the stream with many active groups in every micro-batch (issue 36), as a user runs it.

The question: a cluster with G consumer groups that all commit within every trigger interval —
can ``offsetlake run stream`` keep up, and what does one active group cost per micro-batch?

The landing (deterministic from ``--seed``; ``bench/batch.py``'s groups: 1–8 partitions of one
topic, 1–4 members): file 0 holds every group's join record (group metadata, generation 1) and a
commit of each of its partitions; files 1..W each hold one trigger's worth of log time (10 s):
``--commits`` offset commits of EVERY group (so all G groups are active in every micro-batch) and a
new generation (a rebalance) for ~0.5 % of them, in log order per ``__consumer_offsets`` partition.

The job: a fresh ``offsetlake run stream --available-now`` with ``stream.max_files_per_trigger=1``,
so each micro-batch is exactly one trigger's worth of a live cluster: a micro-batch that finishes
within the trigger interval keeps up. Read back from the warehouse's ``stream_progress`` table:
each micro-batch's wall time (``triggerExecution``); p50/p95/max over the steady ones (all but the
first, which creates the state of every group); ms per active group. The floor beside it, in the
same run: a fresh process's warm Spark scan of the same landing (``bench/batch_process.py``).

    .venv/bin/python bench/stream_groups.py --groups 20000 --windows 12 [--write-results]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.batch_process import BENCH_ROOT, WORK, env_for, run_scan, timed_process, write_conf
from bench.results import write_section

REPO = Path(__file__).resolve().parents[1]
SECTION = "## stream with many active groups (issue 36)"
WINDOW_MS = 10_000
BASE_MS = 1_700_000_000_000
REBALANCE_SHARE = 0.005


def write_landing(out: Path, groups: int, windows: int, commits: int, seed: int) -> int:
    """The landing described in the module docstring; returns its record count."""
    import pyarrow.parquet as pq

    from bench.batch import _group_setup
    from coordinator_core import GroupMetadataKey, GroupMetadataValue, encode_key, encode_value
    from schemas.raw import RAW_RECORDS

    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    gids, gpart, gkeys, gmembers = _group_setup(rng, groups)
    gm_keys = [encode_key(GroupMetadataKey(g)) for g in gids]
    generation = np.zeros(groups, dtype=np.int64)
    next_off = np.zeros(int(gpart.max()) + 1, dtype=np.int64)
    schema = RAW_RECORDS.arrow_schema()
    total = 0

    def join(g: int, ts: int) -> bytes:
        generation[g] += 1
        m = gmembers[g]
        value = GroupMetadataValue(
            "consumer", int(generation[g]), "range", m[0].member_id, m, current_state_timestamp=ts - 1500, version=3
        )
        return encode_value(value)

    for w in range(windows + 1):
        keys: list[bytes] = []
        is_join: list[bool] = []
        grp: list[int] = []
        if w == 0:
            for g in range(groups):
                keys.append(gm_keys[g])
                is_join.append(True)  # its value is made below, once its timestamp is known
                grp.append(g)
                for k in gkeys[g]:
                    keys.append(k)
                    is_join.append(False)
                    grp.append(g)
        else:
            for g in range(groups):
                if rng.random() < REBALANCE_SHARE:
                    keys.append(gm_keys[g])
                    is_join.append(True)
                    grp.append(g)
                for j in rng.integers(0, len(gkeys[g]), size=commits):
                    keys.append(gkeys[g][int(j)])
                    is_join.append(False)
                    grp.append(g)
        n = len(keys)
        order = rng.permutation(n)  # the groups' records interleave within the window
        ts = BASE_MS + w * WINDOW_MS + (np.arange(n) * WINDOW_MS) // max(n, 1)
        rows_k, rows_v, rows_p, rows_o = [], [], [], []
        for i, r in enumerate(order.tolist()):
            g = grp[r]
            t = int(ts[i])
            p = int(gpart[g])
            if is_join[r]:
                v = join(g, t)
            else:
                # offset commit value v3: i16 3 | i64 offset | i32 -1 | i16 0 | i64 commit_ts
                v = (
                    (3).to_bytes(2, "big")
                    + int(next_off[p] + w * 1_000_000).to_bytes(8, "big")
                    + b"\xff\xff\xff\xff\x00\x00"
                    + t.to_bytes(8, "big")
                )
            rows_k.append(keys[r])
            rows_v.append(v)
            rows_p.append(p)
            rows_o.append(int(next_off[p]))
            next_off[p] += 1
        table = pa.Table.from_arrays(
            [
                pa.array(rows_k, pa.binary()),
                pa.array(rows_v, pa.binary()),
                pa.array(["__consumer_offsets"] * n),
                pa.array(rows_p, pa.int32()),
                pa.array(rows_o, pa.int64()),
                pa.array(ts * 1000, pa.timestamp("us", tz="UTC")),
                pa.array(np.zeros(n, np.int32)),
            ],
            schema=schema,
        )
        path = out / f"part-{w:08d}.parquet"
        pq.write_table(table, path)
        os.utime(path, (1_600_000_000 + w, 1_600_000_000 + w))  # the file source's order
        total += n
    return total


@dataclass
class StreamRun:
    process_s: float
    peak_bytes: int
    batches: list[tuple[int, float]]  # (input rows, seconds) per micro-batch of the replay query
    load: float


def run_stream(landing: Path, label: str, tree: Path = REPO) -> StreamRun:
    """A fresh ``offsetlake run stream --available-now`` of ``tree``'s code, one landing file per
    micro-batch."""
    from pipelines.stream.settings import REPLAY_QUERY
    from pipelines.tableio.deltars import read_arrow

    conf, root = write_conf(tree, label, landing)
    shutil.rmtree(root, ignore_errors=True)
    load = os.getloadavg()[0]
    argv = [sys.executable, "-m", "pipelines.cli", "run", "stream", "--available-now", "--conf", str(conf)]
    argv += ["--set", "stream.max_files_per_trigger=1", "--set", "stream.trigger_interval=10 seconds"]
    wall, peak, out = timed_process(argv, tree, env_for(tree))
    progress = read_arrow(str(root / "warehouse" / "stream_progress")).to_pylist()
    rows = sorted(
        (r for r in progress if r["query_name"] == REPLAY_QUERY and r["input_rows"]), key=lambda r: r["timestamp"]
    )
    if not rows:
        raise SystemExit(f"no replay micro-batch in stream_progress; the job said:\n{out[-3000:]}")
    shutil.rmtree(root, ignore_errors=True)
    return StreamRun(wall, peak, [(int(r["input_rows"]), r["batch_duration_ms"] / 1000) for r in rows], load)


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def render(args: argparse.Namespace, records: int, run: StreamRun, scan: Any, command: str) -> str:
    steady = [s for _, s in run.batches[1:]]
    per_group = [s / args.groups * 1000 for s in steady]
    floor_rps = records / scan.scan_warm_s
    rows_per_batch = sum(n for n, _ in run.batches[1:]) / max(1, len(steady))
    lines = [
        SECTION,
        "",
        f"Command: `{command}` (commit {os.popen('git -C ' + str(REPO) + ' rev-parse --short HEAD').read().strip()}).",
        f"{args.groups:,} groups, every one active in each of {args.windows} micro-batches of one 10 s trigger's "
        f"worth ({args.commits} commits per group, ~{REBALANCE_SHARE:.1%} rebalancing): {records:,} records; "
        f"~{rows_per_batch:,.0f} records per steady micro-batch. A fresh `offsetlake run stream --available-now` "
        f"(`stream.max_files_per_trigger=1`), local[2]; load {run.load:.1f} at the start.",
        "",
        "| micro-batch | input rows | seconds | ms per active group |",
        "|---:|---:|---:|---:|",
    ]
    for i, (n, s) in enumerate(run.batches):
        lines.append(
            f"| {i}{' (creates every group)' if i == 0 else ''} | {n:,} | {s:.2f} | {s / args.groups * 1000:.3f} |"
        )
    lines += [
        "",
        f"Steady micro-batches: p50 **{pct(steady, 0.5):.2f} s**, p95 **{pct(steady, 0.95):.2f} s**, max "
        f"{max(steady):.2f} s against the 10 s trigger; **{pct(per_group, 0.5):.3f} ms per active group** (p50; "
        f"p95 {pct(per_group, 0.95):.3f}) all in. Whole process {run.process_s:.1f} s, peak "
        f"{run.peak_bytes / 2**30:.2f} GiB. Floor in the same run: a warm Spark scan of the same landing, "
        f"{floor_rps:,.0f} records/s ({scan.scan_warm_s:.2f} s for all {records:,}); a steady micro-batch "
        f"processes {rows_per_batch / pct(steady, 0.5):,.0f} records/s "
        f"= {rows_per_batch / pct(steady, 0.5) / floor_rps:.3f}× the floor.",
    ]
    return "\n".join(lines) + "\n"


def paired(run: StreamRun, vs: StreamRun, tree: Path) -> str:
    """The steady micro-batches of this tree against ``tree``'s, run right after."""
    mine, theirs = pct([s for _, s in run.batches[1:]], 0.5), pct([s for _, s in vs.batches[1:]], 0.5)
    rev = os.popen(f"git -C {tree} rev-parse --short HEAD").read().strip()
    return (
        f"\nPaired with {rev} (its own tree, run right after, load {vs.load:.1f}): steady micro-batch p50 "
        f"{mine:.2f} s against {theirs:.2f} s = **{mine / theirs:.2f}×**; whole process {run.process_s:.1f} s "
        f"against {vs.process_s:.1f} s; peak {run.peak_bytes / 2**30:.2f} against {vs.peak_bytes / 2**30:.2f} GiB.\n"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=20_000)
    ap.add_argument("--windows", type=int, default=12, help="steady micro-batches after the first")
    ap.add_argument("--commits", type=int, default=2, help="offset commits per group per window")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--vs", type=Path, help="another tree (a git worktree) run right after, paired")
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    landing = BENCH_ROOT / f"stream-groups-{args.groups}-{args.windows}-{args.commits}-{args.seed}"
    if not (landing / f"part-{args.windows:08d}.parquet").exists():
        t0 = time.perf_counter()
        n = write_landing(landing, args.groups, args.windows, args.commits, args.seed)
        print(f"landed {n:,} records in {args.windows + 1} files ({time.perf_counter() - t0:.0f} s)", flush=True)
    import pyarrow.parquet as pq

    records = sum(pq.read_metadata(f).num_rows for f in landing.glob("*.parquet"))
    scan = run_scan(landing)
    run = run_stream(landing, "stream-groups")
    vs = run_stream(landing, "stream-groups-vs", args.vs.resolve()) if args.vs else None
    command = ".venv/bin/python bench/stream_groups.py " + " ".join(sys.argv[1:] if argv is None else argv)
    text = render(args, records, run, scan, command.strip())
    if vs is not None:
        text += paired(run, vs, args.vs.resolve())
    print(text)
    if args.write_results:
        write_section(SECTION, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
