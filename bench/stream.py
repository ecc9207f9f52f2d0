"""Benchmark the streaming replay (Structured Streaming, local[2]): throughput, micro-batch
latency, state size, recovery time — against the batch replay of the same log in the same run.

What is measured:
1. A generated log (``coordinator_core.simulator.generator``: time-ordered, many groups, rebalances,
   expiries) is landed as Parquet files of ``--rows-per-file`` rows (mtimes in name order).
2. For each ``--files-per-trigger`` value (the micro-batch size: an input rate R with a trigger
   interval T gives batches of R·T records), the streaming job runs with ``--available-now`` over
   the whole backlog (fresh checkpoint and warehouse): records/s = input rows / wall time of the
   query and over the steady batches (all but the first), p50/p95 of the micro-batch durations (``triggerExecution``), state rows and bytes per
   group (RocksDB's estimate, and the checkpoint's state files on disk).
3. Sustained: ``--rates`` input rates (records/s): files are landed at that rate while the job
   runs continuously (``trigger(processingTime=--trigger)``) for ``--duration`` seconds; the
   rate is sustained when the backlog at the end is at most one trigger's input and the
   micro-batches finish within the trigger (p50/p95 of their durations reported).
4. Recovery: the last ``--holdback`` files are landed after the biggest run finished; the query
   restarts from its checkpoint; time from ``start()`` to the first committed batch is reported
   next to that batch's own duration.
5. Baseline: the batch job (``run_batch``: ingest, decode, replay, Delta tables) over the same files,
   (no Delta writes), records/s.

The machine has 2 cores shared with other engineers: wall times include their load (the load
average is printed); ratios within one run are the comparable numbers, and records per CPU
second of the whole process tree (driver + JVM + Python workers) do not depend on the load.
A small warm-up run first takes the JVM's and the workers' one-time start-up out of the figures.

usage: .venv/bin/python bench/stream.py [--groups 120] [--hours 0.5] [--rows-per-file 25000]
                                        [--files-per-trigger 2,8] [--holdback 2] [--rates 50000,100000]
                                        [--trigger "5 seconds"] [--duration 60] [--write-results]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.proc import tree_cpu_seconds

SECTION = "## stream (Structured Streaming, local[2])"


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    idx = min(len(s) - 1, max(0, round(q * (len(s) - 1))))
    return s[idx]


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def set_mtimes(landing: Path) -> None:
    for i, f in enumerate(sorted(landing.glob("*.parquet"))):
        os.utime(f, (1_600_000_000 + i, 1_600_000_000 + i))


def make_config(
    root: Path, landing: Path, files_per_trigger: int, retention_ms: int, trigger: str = "30 seconds"
) -> Any:
    from pipelines.config import config_from_dict

    return config_from_dict(
        {
            "paths": {"root": str(root)},
            "input": {"path": str(landing)},
            "delta": {"engine": "rust"},
            "replay": {"retention_ms": retention_ms},
            "stream": {
                "max_files_per_trigger": files_per_trigger,
                "watermark_delay_ms": 60_000,
                "trigger_interval": trigger,
            },
        }
    )


def run_sustained(
    spark: Any,
    files: list[Path],
    work: Path,
    rate: int,
    rows_per_file: int,
    trigger: str,
    duration: float,
    retention: int,
) -> dict[str, Any]:
    """Land files at ``rate`` records/s while the job runs continuously; stop after ``duration``."""
    import threading

    import pyarrow.parquet as pq

    from pipelines.jobs import stream as stream_job

    root = work / f"sustained-{rate}"
    landing = root / "landing"
    landing.mkdir(parents=True)
    cfg = make_config(root, landing, 10_000, retention, trigger=trigger)
    stop = threading.Event()
    landed: list[tuple[float, int]] = []

    class Stopper:
        requested = threading.Event()
        signal = None

    def producer() -> None:
        period = rows_per_file / rate
        t0 = time.perf_counter()
        for i, f in enumerate(files):
            due = t0 + i * period
            while time.perf_counter() < due:
                if stop.wait(min(0.05, max(0.0, due - time.perf_counter()))):
                    return
            tmp = landing / f".{f.name}.tmp"
            shutil.copy(f, tmp)
            os.utime(tmp, (1_600_000_000 + i, 1_600_000_000 + i))
            rows = pq.read_metadata(tmp).num_rows
            tmp.rename(landing / f.name)
            landed.append((time.time(), rows))
        stop.wait()

    stopper = Stopper()
    prod = threading.Thread(target=producer, daemon=True)
    timer = threading.Timer(duration, stopper.requested.set)
    t0 = time.perf_counter()
    prod.start()
    timer.start()
    rec = stream_job.run(spark, cfg, available_now=False, with_quarantine=False, poll_seconds=0.5, stopper=stopper)
    wall = time.perf_counter() - t0
    stop.set()
    timer.cancel()
    rows = [r for r in rec.rows if r["query_name"] == stream_job.REPLAY_QUERY and r["input_rows"]]
    durs = [r["batch_duration_ms"] / 1000 for r in rows]
    steady = durs[1:] or durs
    n_landed = sum(n for _, n in landed)
    n_done = sum(r["input_rows"] for r in rows)
    # End-to-end latency of each landed file: from its rename to the end of the micro-batch
    # whose cumulative input first covers it (batches take files in landing order).
    ends, cum = [], 0
    for r in rows:
        cum += r["input_rows"]
        ends.append((cum, r["timestamp"].timestamp() + r["batch_duration_ms"] / 1000))
    lat, cum_in = [], 0
    for t_landed, n in landed:
        cum_in += n
        done = next((t for c, t in ends if c >= cum_in), None)
        if done is not None:
            lat.append(done - t_landed)
    landing_s = (landed[-1][0] - landed[0][0]) if len(landed) > 1 else 0.0
    return {
        "rate": rate,
        "trigger": trigger,
        "duration_s": wall,
        "landed": n_landed,
        "processed": n_done,
        "backlog": n_landed - n_done,
        "batches": len(rows),
        "landing_s": landing_s,
        "files_landed": len(landed),
        "files_done": len(lat),
        "p50_s": percentile(steady, 0.5),
        "p95_s": percentile(steady, 0.95),
        "max_s": max(steady or [0.0]),
        "e2e_p50_s": percentile(lat, 0.5),
        "e2e_p95_s": percentile(lat, 0.95),
        "e2e_max_s": max(lat or [0.0]),
        "processed_per_s": n_done / wall,
    }


def run_stream(spark: Any, cfg: Any) -> tuple[list[dict[str, Any]], float]:
    from pipelines.jobs import stream as stream_job

    t0 = time.perf_counter()
    rec = stream_job.run(spark, cfg, available_now=True, with_quarantine=False, poll_seconds=0.5)
    wall = time.perf_counter() - t0
    return [r for r in rec.rows if r["query_name"] == stream_job.REPLAY_QUERY], wall


def baseline_batch(spark: Any, landing: Path, retention_ms: int, work: Path) -> tuple[int, float]:
    """The batch job (``run batch``'s one path: ingest, decode, replay, Delta tables) over the same
    landing files, in this session: (records, seconds)."""
    from pipelines.jobs.batch import run_batch

    cfg = make_config(work / "baseline-batch", landing, 1, retention_ms)
    t0 = time.perf_counter()
    summary = run_batch(cfg, spark)
    return summary.raw_total, time.perf_counter() - t0


def component_rate(groups: int, hours: float, seed: int, retention_ms: int, calls: int = 11) -> tuple[int, float]:
    """CPU seconds of the stateful function's pure part (``BucketReplayer.replay_bucket``) over a
    generated log: groups in ``STATE_BUCKETS`` buckets (by CRC-32 here; Spark's key is xxhash64,
    the spread is alike), each group's records split into ``calls`` consecutive calls (the
    bucket's state carried across). Returns (records, CPU seconds)."""
    import zlib

    import pyarrow as pa

    from coordinator_core import ReplaySettings, decode_record
    from coordinator_core.simulator.generator import generate
    from pipelines.records.carried import BucketReplayer
    from pipelines.records.gold import DEFAULT_TABLES
    from pipelines.records.replay_input import REC_GROUP_METADATA, REC_OFFSET_COMMIT
    from pipelines.records.replay_input import schema as replay_input_schema
    from pipelines.stream.state import STATE_BUCKETS

    log = generate(groups, hours, seed=seed)
    rows: dict[str, list[dict[str, Any]]] = {}
    for k, v, p, o, t in zip(log.keys, log.values, log.partitions, log.offsets, log.timestamps):
        rec = decode_record(k, v)
        key, val = rec.key, rec.value
        if key.group is None:
            continue
        row: dict[str, Any] = {
            "group_id": key.group,
            "coordinator_partition": p,
            "log_offset": o,
            "log_timestamp_ms": t,
            "is_tombstone": val is None,
            "key_version": key.version,
        }
        if hasattr(key, "topic"):
            row.update(rec_kind=REC_OFFSET_COMMIT, topic=key.topic, partition=key.partition)
            if val is not None:
                row.update(
                    value_version=val.version,
                    committed_offset=val.offset,
                    leader_epoch=val.leader_epoch,
                    metadata=val.metadata,
                    commit_timestamp_ms=val.commit_timestamp,
                    expire_timestamp_ms=val.expire_timestamp,
                )
        else:
            row.update(rec_kind=REC_GROUP_METADATA)
            if val is not None:
                row.update(
                    value_version=val.version,
                    protocol_type=val.protocol_type,
                    generation=val.generation,
                    protocol=val.protocol,
                    leader=val.leader,
                    current_state_timestamp_ms=val.current_state_timestamp,
                    members=[
                        {
                            "member_id": m.member_id,
                            "group_instance_id": m.group_instance_id,
                            "client_id": m.client_id,
                            "client_host": m.client_host,
                            "rebalance_timeout": m.rebalance_timeout,
                            "session_timeout": m.session_timeout,
                            "subscription": m.subscription,
                            "assignment": m.assignment,
                        }
                        for m in val.members
                    ],
                )
        rows.setdefault(key.group, []).append(row)
    schema = replay_input_schema()
    buckets: dict[int, list[list[dict[str, Any]]]] = {}
    for g, rs in rows.items():
        calls_of = buckets.setdefault(zlib.crc32(g.encode()) % STATE_BUCKETS, [[] for _ in range(calls)])
        for i in range(calls):
            calls_of[i].extend(rs[i * len(rs) // calls : (i + 1) * len(rs) // calls])
    tables = {b: [pa.Table.from_pylist(rs, schema=schema) for rs in cs] for b, cs in buckets.items()}
    fn = BucketReplayer(ReplaySettings(retention_ms=retention_ms, rules="current"), tuple(DEFAULT_TABLES), 50)
    t0 = time.process_time()
    for ts in tables.values():
        state: dict[str, Any] = {}
        for t in ts:
            state, _out, _timer = fn.replay_bucket(state, t, 0)
    return sum(len(r) for r in rows.values()), time.process_time() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=120)
    ap.add_argument("--hours", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rows-per-file", type=int, default=25_000)
    ap.add_argument("--files-per-trigger", default="2,8")
    ap.add_argument("--holdback", type=int, default=2)
    ap.add_argument("--rates", default="", help="sustained input rates, records/s (comma separated)")
    ap.add_argument("--trigger", default="5 seconds", help="trigger interval of the sustained runs")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds per sustained run")
    ap.add_argument("--retention-ms", type=int, default=None, help="default: the generator's")
    ap.add_argument("--work", default=None, help="scratch directory (default: a temp dir, removed)")
    ap.add_argument("--write-results", action="store_true")
    ap.add_argument(
        "--component-only", action="store_true", help="only the stateful function's pure part (CPU time, no Spark)"
    )
    args = ap.parse_args()
    if args.component_only:
        n, cpu = component_rate(args.groups, args.hours, args.seed, args.retention_ms or 900_000)
        print(f"stateful function: {n} records in {cpu:.2f} CPU s = {n / cpu:,.0f} records/s per core")
        return 0

    from pipelines.commands.generate import write_generated
    from pipelines.runtime.spark_session import build_spark

    work = Path(args.work or tempfile.mkdtemp(prefix="bench-stream-"))
    shutil.rmtree(work, ignore_errors=True)
    landing_all = work / "generated"
    t0 = time.perf_counter()
    n_total = write_generated(
        landing_all, groups=args.groups, hours=args.hours, seed=args.seed, rows_per_file=args.rows_per_file
    )
    gen_s = time.perf_counter() - t0
    files = sorted(landing_all.glob("*.parquet"))
    import json

    truth_path = landing_all / "_truth.json"
    retention = args.retention_ms
    if retention is None and truth_path.exists():
        retention = int(json.loads(truth_path.read_text()).get("retention_ms") or 0) or None
    retention = retention or 3_600_000
    print(f"generated {n_total} records in {len(files)} files ({gen_s:.0f}s); retention_ms={retention}")

    spark = build_spark(
        "bench-stream", master="local[2]", conf={"spark.sql.shuffle.partitions": "2"}, log_level="ERROR"
    )
    load = os.getloadavg()[0]
    results: list[dict[str, Any]] = []
    rates = [int(x) for x in args.files_per_trigger.split(",") if x]  # '' : sustained runs only
    recovery: dict[str, Any] = {}
    head = files[: len(files) - args.holdback]
    # warm-up: the JVM's class loading/JIT and the Python workers' imports happen once per process
    warm = work / "warmup"
    (warm / "landing").mkdir(parents=True)
    for f in files[:2]:
        shutil.copy(f, warm / "landing" / f.name)
    set_mtimes(warm / "landing")
    run_stream(spark, make_config(warm, warm / "landing", 1, retention))
    for i, fpt in enumerate(rates):
        root = work / f"run-{fpt}"
        landing = root / "landing"
        landing.mkdir(parents=True)
        for f in head:
            shutil.copy(f, landing / f.name)
        set_mtimes(landing)
        cfg = make_config(root, landing, fpt, retention)
        cpu0 = tree_cpu_seconds()
        rows, wall = run_stream(spark, cfg)
        cpu = tree_cpu_seconds() - cpu0
        data = [r for r in rows if r["input_rows"]]
        durs = [r["batch_duration_ms"] / 1000 for r in data]
        steady = durs[1:] or durs
        n_in = sum(r["input_rows"] for r in data)
        last = rows[-1]
        groups = args.groups  # the state rows are state buckets (pipelines.stream.state), not groups
        res = {
            "files_per_trigger": fpt,
            "rows_per_batch": round(n_in / max(1, len(data))),
            "batches": len(data),
            "input_rows": n_in,
            "wall_s": wall,
            "records_per_s": n_in / wall,
            "records_per_s_in_batches": n_in / max(1e-9, sum(durs)),
            "records_per_s_steady": (
                sum(r["input_rows"] for r in data[1:]) / max(1e-9, sum(durs[1:]))
                if len(data) > 1
                else n_in / max(1e-9, sum(durs))
            ),
            "records_per_cpu_s": n_in / cpu if cpu else float("nan"),
            "p50_s": percentile(steady, 0.5),
            "p95_s": percentile(steady, 0.95),
            "first_batch_s": durs[0] if durs else float("nan"),
            "state_rows": last["state_rows"],
            "state_bytes_per_group": (last["state_memory_bytes"] or 0) / groups,
            "checkpoint_state_bytes_per_group": dir_size(root / "checkpoints" / "stream_replay" / "state") / groups,
        }
        results.append(res)
        print(res)
        if i == len(rates) - 1 and args.holdback:
            for f in files[len(files) - args.holdback :]:
                shutil.copy(f, landing / f.name)
            set_mtimes(landing)
            t1 = time.perf_counter()
            rows2, wall2 = run_stream(spark, cfg)
            data2 = [r for r in rows2 if r["input_rows"]]
            first = data2[0] if data2 else None
            recovery = {
                "restart_wall_s": wall2,
                "first_batch_s": (first["batch_duration_ms"] / 1000) if first else float("nan"),
                "first_batch_rows": first["input_rows"] if first else 0,
                "time_to_first_commit_s": None,
            }
            # time from start() to the first batch's end = wall of the run minus later batches
            later = sum(r["batch_duration_ms"] for r in rows2[1:]) / 1000
            recovery["time_to_first_commit_s"] = max(0.0, wall2 - later)
            recovery["steady_p50_s"] = res["p50_s"]
            print("recovery", recovery, f"({time.perf_counter() - t1:.0f}s)")

    sustained = []
    for rate in [int(x) for x in args.rates.split(",") if x]:
        res_s = run_sustained(spark, files, work, rate, args.rows_per_file, args.trigger, args.duration, retention)
        sustained.append(res_s)
        print("sustained", res_s)

    base_n, base_s = baseline_batch(spark, landing_all, retention, work)
    base_rate = base_n / base_s
    print(f"baseline batch replay: {base_n} records in {base_s:.1f}s = {base_rate:.0f}/s")
    spark.stop()

    import shlex

    cmd = "`.venv/bin/python bench/stream.py " + shlex.join(sys.argv[1:]) + "`"
    lines = [
        SECTION,
        "",
        f"Command: {cmd}",
        "",
        f"Log: `coordinator_core.simulator.generator` {args.groups} groups × {args.hours} h (seed {args.seed}) = "
        f"{n_total:,} records in {len(files)} files of {args.rows_per_file:,} rows; retention {retention} ms; "
        f"watermark delay 60 s; RocksDB state store; delta-rs MERGE sink; 2 shuffle partitions. "
        f"Machine: 2 cores shared with other engineers (1-min load average at start: {load:.1f}), so "
        "wall times include their load; the ratio to the batch replay measured in the same run is the "
        "comparable number.",
        "",
        "| files/trigger | rows/batch | batches | records/s (wall) | records/s (steady batches) | "
        "records per CPU s | ratio to batch | "
        "p50 batch s | p95 batch s | first batch s | state rows (buckets) | state B/group (RocksDB est.) | "
        "checkpoint state B/group |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['files_per_trigger']} | {r['rows_per_batch']:,} | {r['batches']} | {r['records_per_s']:,.0f} | "
            f"{r['records_per_s_steady']:,.0f} | {r['records_per_cpu_s']:,.0f} | "
            f"{r['records_per_s'] / base_rate:.2f} | {r['p50_s']:.1f} | "
            f"{r['p95_s']:.1f} | {r['first_batch_s']:.1f} | {r['state_rows']} | "
            f"{r['state_bytes_per_group']:,.0f} | {r['checkpoint_state_bytes_per_group']:,.0f} |"
        )
    lines += [
        "",
        f"Baseline (same run): batch decode + replay of the same log, collected: {base_rate:,.0f} records/s "
        f"({base_n:,} records in {base_s:.1f} s).",
    ]
    if sustained:
        lines += [
            "",
            f"Sustained (files of {args.rows_per_file:,} records landed at the input rate while the job runs "
            f"continuously, trigger {args.trigger!r}, {args.duration:.0f} s each):",
            "",
            "| input rate rec/s | landed (s of landing) | processed by stop | files done / landed | batches | "
            "p50 batch s | p95 batch s | max batch s | file landed→committed p50 s | p95 s | max s |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in sustained:
            lines.append(
                f"| {r['rate']:,} | {r['landed']:,} ({r['landing_s']:.0f} s) | {r['processed']:,} | "
                f"{r['files_done']} / {r['files_landed']} | {r['batches']} | "
                f"{r['p50_s']:.1f} | {r['p95_s']:.1f} | {r['max_s']:.1f} | {r['e2e_p50_s']:.1f} | "
                f"{r['e2e_p95_s']:.1f} | {r['e2e_max_s']:.1f} |"
            )
        lines.append("")
    if recovery:
        lines.append(
            f"Recovery: restart from the checkpoint of the last run with {args.holdback} new files: first "
            f"batch committed {recovery['time_to_first_commit_s']:.1f} s after start ({recovery['first_batch_rows']:,} "
            f"rows; that batch took {recovery['first_batch_s']:.1f} s vs steady-state p50 "
            f"{recovery['steady_p50_s']:.1f} s)."
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write_results:
        write_section(Path(__file__).resolve().parent / "RESULTS.md", text)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def write_section(path: Path, text: str) -> None:
    """Replace (or append) this benchmark's section of RESULTS.md, leaving the others alone."""
    old = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n"
    start = old.find(SECTION)
    if start < 0:
        new = old.rstrip("\n") + "\n\n" + text
    else:
        end = old.find("\n## ", start + len(SECTION))
        new = old[:start] + text + ("" if end < 0 else old[end + 1 :])
    path.write_text(new, encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
