"""Benchmark: ``format("offsetlake_kafka")`` alone, one query per fresh process, old tree vs new.

One run (``--mode batch|stream``) starts librdkafka's mock cluster (3 brokers on 127.0.0.1, real
Kafka protocol, ``__consumer_offsets`` auto-created with 4 partitions), produces ``--records``
records (the generated log's bytes with fresh positions and timestamps, as ``bench/capture.py``),
starts Spark (local[2]), warms the Python workers up with a 40-record read, then times ONE query
(``--repeat R``: then R more of the same query in the same session, the warm figures):

  batch   ``spark.read.format("offsetlake_kafka").load().write.parquet(...)``
  stream  ``readStream.format("offsetlake_kafka")`` -> Parquet sink, ``trigger(availableNow)``
  read    no Spark: the source's ``read_range`` over every partition in this process (its own
          Python cost; ``--repeat R``: median of 1 + R passes, process CPU incl. librdkafka)

(``--sink noop``: the same query into Spark's no-op sink, to time the source without Parquet) and
prints one JSON line: records, seconds, records/s, CPU seconds of the whole process tree during
the query, which tree's ``pipelines`` the driver and a Python worker loaded, load average. The
mock keeps ~50k records per partition: a run whose topic does not hold exactly ``--records``
refuses to measure (exit 2).

``--compare BASE_TREE --runs N`` runs both modes N times each for BASE_TREE (e.g. a ``git worktree``
of main) and for this tree, alternating, each in a fresh process whose cwd and ``PYTHONPATH`` are
that tree (so the tree's own modules load, in the driver and in Spark's Python workers), and
prints the medians as a Markdown table.

    .venv/bin/python bench/kafka_source.py --mode batch
    .venv/bin/python bench/kafka_source.py --compare /tmp/kafkasrc-base --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if "PYTHONPATH" not in os.environ:  # a --compare child imports the tree its PYTHONPATH names
    sys.path.insert(0, str(ROOT))


def _records(n: int, partitions: int) -> list[tuple[bytes, bytes | None, int, int]]:
    from pipelines.commands.quickstart import sample_records

    base = sample_records(200, seed=3, num_partitions=partitions)
    t0 = 1_700_000_000_000
    return [(r.key, r.value, r.partition, t0 + i) for i, r in ((i, base[i % len(base)]) for i in range(n))]


def _worker_tree(spark: Any) -> str:
    """Where a Spark Python worker imports ``pipelines`` from (proves which tree was measured)."""

    def where(_: Any) -> str:
        import pipelines

        return str(Path(pipelines.__file__).resolve().parents[1])

    return str(spark.sparkContext.parallelize([0], 1).map(where).collect()[0])


def _tree_cpu_seconds() -> float:
    """CPU seconds of this process and all its descendants (the JVM, Spark's Python workers),
    including children they have reaped: a load-independent companion to the wall time."""
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        # after the command: state ppid ...; utime stime cutime cstime are fields 14-17 of stat
        stats[int(entry)] = (int(fields[1]), sum(int(x) for x in fields[11:15]) / tick)
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += stats.get(pid, (0, 0.0))[1]
        todo.extend(children.get(pid, []))
    return total


def run_once(args: argparse.Namespace) -> dict[str, Any]:
    import pipelines
    from pipelines.kafka.client import KafkaSettings, watermarks
    from pipelines.kafka.mock import MockKafkaCluster
    from pipelines.kafka.source import SOURCE_NAME, register_kafka_source
    from pipelines.spark_session import build_spark

    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    with MockKafkaCluster(num_brokers=3) as mc:
        mc.produce(_records(args.records, mc.num_partitions))
        from confluent_kafka import Consumer

        settings = KafkaSettings(mc.bootstrap_servers)
        probe = Consumer(settings.consumer_conf())
        marks = watermarks(probe, settings.topic, list(range(mc.num_partitions)), 10.0)
        probe.close()
        kept = sum(hi - lo for lo, hi in marks.values())
        if kept != args.records:
            print(f"the mock cluster kept {kept:,} of {args.records:,} records: use 200000 or fewer", file=sys.stderr)
            raise SystemExit(2)

        if args.mode == "read":
            return _read_only(args, settings, marks)
        spark = build_spark(
            "bench-kafka-source", master="local[2]", conf={"spark.sql.shuffle.partitions": "2"}, log_level="ERROR"
        )
        register_kafka_source(spark)
        opts = {"kafka.bootstrap.servers": mc.bootstrap_servers}
        opts.update(dict(o.split("=", 1) for o in args.option))
        warm_end = json.dumps({settings.topic: {str(p): 10 for p in range(mc.num_partitions)}})
        spark.read.format(SOURCE_NAME).options(**opts).option("endingOffsets", warm_end).load().count()
        worker = _worker_tree(spark)
        load_before = os.getloadavg()[0]
        runs = [_timed_query(spark, args, opts, work / f"q{i}") for i in range(1 + args.repeat)]
        spark.stop()
    rows, secs, cpu = runs[0]
    bad = [r for r, _, _ in runs if r != args.records]
    if bad:
        raise SystemExit(f"read {bad[0]:,} of {args.records:,} records")
    warm = [s for _, s, _ in runs[1:]]
    return {
        "mode": args.mode,
        "sink": args.sink,
        "records": rows,
        "seconds": round(secs, 3),
        "rate": round(rows / secs),
        "cpu_seconds": round(cpu, 2),
        "warm_seconds": [round(s, 3) for s in warm],
        "warm_rate": round(rows / statistics.median(warm)) if warm else None,
        "warm_cpu_seconds": round(statistics.median(c for _, _, c in runs[1:]), 2) if warm else None,
        "driver_tree": str(Path(pipelines.__file__).resolve().parents[1]),
        "worker_tree": worker,
        "load": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }


def _read_only(args: argparse.Namespace, settings: Any, marks: dict[int, tuple[int, int]]) -> dict[str, Any]:
    """``--mode read``: the source's executor side alone (``read_range`` over every partition, in
    this process, no Spark): its own Python cost, what the source can change."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    import pipelines
    from pipelines.kafka.source import KafkaRange, _raw_schema, read_range

    pa.array([b""], pa.binary())  # pyarrow's one-time pandas import: outside the timings
    schema = to_arrow_schema(_raw_schema(), timezone="UTC")
    runs = []
    for _ in range(1 + args.repeat):
        cpu, t, rows = time.process_time(), time.perf_counter(), 0
        for p, (lo, hi) in sorted(marks.items()):
            rows += sum(b.num_rows for b in read_range(settings, schema, KafkaRange(settings.topic, p, lo, hi)))
        runs.append((rows, time.perf_counter() - t, time.process_time() - cpu))
    if any(r[0] != args.records for r in runs):
        raise SystemExit(f"read {runs[0][0]:,} of {args.records:,} records")
    secs = statistics.median(r[1] for r in runs)
    return {
        "mode": "read",
        "sink": "-",
        "records": runs[0][0],
        "seconds": round(secs, 3),
        "rate": round(runs[0][0] / secs),
        "cpu_seconds": round(statistics.median(r[2] for r in runs), 3),
        "warm_seconds": [],
        "driver_tree": str(Path(pipelines.__file__).resolve().parents[1]),
        "worker_tree": str(Path(pipelines.__file__).resolve().parents[1]),
        "load": [round(os.getloadavg()[0], 2)] * 2,
    }


def _timed_query(spark: Any, args: argparse.Namespace, opts: dict[str, str], out: Path) -> tuple[int, float, float]:
    """One query over the whole topic: (records, wall seconds, process-tree CPU seconds)."""
    from pipelines.kafka.source import SOURCE_NAME

    cpu = _tree_cpu_seconds()
    t = time.perf_counter()
    q = None
    if args.mode == "batch":
        spark.read.format(SOURCE_NAME).options(**opts).load().write.format(args.sink).mode("overwrite").save(
            str(out / "sink")
        )
    else:
        q = (
            spark.readStream.format(SOURCE_NAME)
            .options(**opts)
            .load()
            .writeStream.format(args.sink)
            .option("path", str(out / "sink"))
            .option("checkpointLocation", str(out / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
    secs = time.perf_counter() - t
    cpu = _tree_cpu_seconds() - cpu
    if args.sink == "parquet":
        rows = spark.read.parquet(str(out / "sink")).count()
    elif q is not None:
        rows = sum(p["numInputRows"] for p in q.recentProgress)
    else:  # the no-op sink keeps nothing to count: count the source once more
        rows = spark.read.format(SOURCE_NAME).options(**opts).load().count()
    return rows, secs, cpu


def compare(args: argparse.Namespace) -> int:
    trees = {"before": Path(args.compare).resolve(), "after": ROOT}
    env0 = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env0.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env0.setdefault("PYSPARK_PYTHON", sys.executable)
    got: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for i in range(args.runs):
        for mode in args.modes.split(","):
            for label in ("before", "after") if i % 2 == 0 else ("after", "before"):
                tree = trees[label]
                cmd = [sys.executable, str(ROOT / "bench" / "kafka_source.py"), "--mode", mode]
                cmd += ["--records", str(args.records), "--work", args.work, "--sink", args.sink]
                cmd += ["--repeat", str(args.repeat)]
                cmd += [x for o in args.option for x in ("--option", o)]
                out = subprocess.run(
                    cmd, cwd=tree, env={**env0, "PYTHONPATH": str(tree)}, capture_output=True, text=True, check=False
                )
                if out.returncode != 0:
                    print(out.stdout, out.stderr[-3000:], file=sys.stderr)
                    return out.returncode
                res = json.loads(out.stdout.strip().splitlines()[-1])
                if res["driver_tree"] != str(tree) or res["worker_tree"] != str(tree):
                    print(f"{label}: measured {res['driver_tree']} / {res['worker_tree']}, not {tree}", file=sys.stderr)
                    return 1
                print(json.dumps({"tree": label, **res}), file=sys.stderr, flush=True)
                got.setdefault((mode, label), []).append(res)
    sink = "" if args.modes == "read" else f"; sink: {args.sink}"
    print(f"records: {args.records:,}; mock: 3 brokers, 4 partitions; local[2]{sink}; runs: {args.runs}")
    print("| query | tree | seconds (median, runs) | records/s (median) | CPU s, all processes (median) | load avg |")
    print("|---|---|---|---:|---:|---|")
    warm_rows = []
    for (mode, label), rs in got.items():
        secs = [r["seconds"] for r in rs]
        loads = [x for r in rs for x in r["load"]]
        med = statistics.median(secs)
        cpu = statistics.median(r["cpu_seconds"] for r in rs)
        print(
            f"| {mode} | {label} | {med:.2f} ({', '.join(f'{s:.2f}' for s in secs)}) | "
            f"{args.records / med:,.0f} | {cpu:.2f} | {min(loads):.1f}–{max(loads):.1f} |"
        )
        warm = [w for r in rs for w in r["warm_seconds"]]
        if warm:
            wcpu = statistics.median(r["warm_cpu_seconds"] for r in rs)
            wmed = statistics.median(warm)
            warm_rows.append(
                f"| {mode} | {label} | {wmed:.2f} ({len(warm)} queries) | {args.records / wmed:,.0f} | {wcpu:.2f} |"
            )
    if warm_rows:
        print("\nThe same query again in the same session (warm JVM and Python workers):\n")
        print("| query | tree | seconds (median) | records/s | CPU s (median) |")
        print("|---|---|---|---:|---:|")
        print("\n".join(warm_rows))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["batch", "stream", "read"], default="batch")
    ap.add_argument("--modes", default="batch,stream", help="--compare: the modes to run, comma-separated")
    ap.add_argument("--records", type=int, default=200_000, help="the mock keeps ~50k per partition: at most 200k")
    ap.add_argument("--sink", choices=["parquet", "noop"], default="parquet")
    ap.add_argument("--work", default="/tmp/kafka-source-bench")
    ap.add_argument("--option", action="append", default=[], help="extra source option KEY=VALUE (repeatable)")
    ap.add_argument("--compare", metavar="BASE_TREE", help="alternate runs of BASE_TREE and this tree")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--repeat", type=int, default=0, help="run the query this many more times in the same session (warm JVM)"
    )
    args = ap.parse_args()
    if args.compare:
        return compare(args)
    print(json.dumps(run_once(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
