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

  job     the streaming job as a user runs it: ``offsetlake run stream --available-now`` (or, with
          ``--trigger``, continuous with that trigger, stopped by SIGTERM once its progress shows
          every record) in its own process, reading the mock's ``__consumer_offsets`` created
          with ``--partitions`` (50, Kafka's default) holding ``--log`` (a log of the project's
          generator, ``offsetlake generate``, made once if missing); every source option
          (``--option``, e.g. ``maxOffsetsPerTrigger``) goes to ``input.kafka_options``. Figures
          from the job's own ``stream_progress`` rows: per query, records / (end of its last
          micro-batch − start of its first), micro-batch p50/p95; the whole command's wall and
          the CPU s of its process tree (sampled every 0.2 s).

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
    .venv/bin/python bench/kafka_source.py --mode job --option maxOffsetsPerTrigger=250000
    .venv/bin/python bench/kafka_source.py --compare /work/main --modes job --runs 2 \
        --option maxOffsetsPerTrigger=250000 [--trigger "5 seconds"]
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
    from pipelines.inputs.sample import sample_records

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
    if args.mode == "job":
        with _JobCluster(args) as jc:
            return jc.run(ROOT)
    import pipelines
    from pipelines.kafka.client import KafkaSettings
    from pipelines.kafka.mock import MockKafkaCluster
    from pipelines.kafka.source import SOURCE_NAME, register_kafka_source
    from pipelines.runtime.spark_session import build_spark

    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    with MockKafkaCluster(num_brokers=3) as mc:
        mc.produce(_records(args.records, mc.num_partitions))
        settings = KafkaSettings(mc.bootstrap_servers)
        marks = mc.watermarks()
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
    from pipelines.kafka.source import KafkaRange, raw_schema, read_range

    pa.array([b""], pa.binary())  # pyarrow's one-time pandas import: outside the timings
    schema = to_arrow_schema(raw_schema(), timezone="UTC")
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


# ---------------------------------------------------------------------------------------------
# --mode job: the streaming job as a user runs it
# ---------------------------------------------------------------------------------------------
REPLAY, QUARANTINE = "offsetlake_stream_replay", "offsetlake_stream_quarantine"


def _generated_log(args: argparse.Namespace) -> Path:
    """The generator's log (``offsetlake generate``'s writer), made once into ``--log``."""
    from pipelines.commands.generate import write_generated

    log = Path(args.log)
    if not any(log.glob("*.parquet")):
        shutil.rmtree(log, ignore_errors=True)
        write_generated(log, groups=args.groups, hours=args.hours, seed=11, num_partitions=args.partitions)
    return log


class _JobCluster:
    """The mock cluster (``--partitions`` partitions) holding the generated log, for job runs.

    It lives in this process (its brokers are librdkafka threads here) while each run's job is
    a separate ``offsetlake run stream`` process of the tree measured; every run reads the same
    topic from the earliest offset into a fresh warehouse and checkpoint."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args

    def __enter__(self) -> _JobCluster:
        import pyarrow.parquet as pq

        from pipelines.kafka.mock import MockKafkaCluster

        table = pq.read_table(_generated_log(self.args), columns=["key", "value", "partition", "timestamp"])
        table = table.slice(0, min(table.num_rows, self.args.records or table.num_rows))
        self.records = table.num_rows
        stamps = table.column("timestamp").cast("int64").to_pylist()  # µs
        rows = zip(
            table.column("key").to_pylist(),
            table.column("value").to_pylist(),
            table.column("partition").to_pylist(),
            (t // 1000 for t in stamps),
            strict=True,
        )
        self.mock = MockKafkaCluster(num_brokers=3, partitions=self.args.partitions)
        t = time.perf_counter()
        self.mock.produce(rows)
        self.produce_s = time.perf_counter() - t
        kept = self.mock.kept()
        if kept != self.records or self.mock.num_partitions != self.args.partitions:
            self.mock.close()
            print(
                f"the mock kept {kept:,} of {self.records:,} records in {self.mock.num_partitions} partitions "
                "(~5 MiB per partition): use fewer records or more groups",
                file=sys.stderr,
            )
            raise SystemExit(2)
        return self

    def __exit__(self, *exc: object) -> None:
        self.mock.close()

    def _config(self, tree: Path, work: Path) -> Path:
        args = self.args
        opts = dict(o.split("=", 1) for o in args.option)
        lines = [
            f"extends: {tree / 'conf' / 'local.yaml'}",
            "paths:",
            f"  root: {work / 'root'}",
            "spark:",
            "  master: local[2]",
            "input:",
            "  source: kafka",
            "  kafka_options:",
            *(f"    {k}: {json.dumps(v)}" for k, v in opts.items()),
            "kafka:",
            "  engine: python",
            f"  bootstrap_servers: {self.mock.bootstrap_servers}",
            "offsets_topic:",
            f"  num_partitions: {args.partitions}",
            "stream:",
            f"  trigger_interval: {json.dumps(args.trigger or '30 seconds')}",
        ]
        if not opts:
            lines.remove("  kafka_options:")
        path = work / "bench.yaml"
        path.write_text("\n".join(lines) + "\n")
        return path

    # long: one job process: start, watch its progress lines (continuous: stop it), then its figures
    def run(self, tree: Path) -> dict[str, Any]:
        import re
        import signal
        import threading

        from bench.proc import tree_cpu_seconds

        args = self.args
        work = Path(args.work) / "job"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        conf = self._config(tree, work)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update(PYTHONPATH=str(tree), SPARK_LOCAL_IP="127.0.0.1")
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        where = subprocess.run(
            [sys.executable, "-c", "import pipelines, pathlib; print(pathlib.Path(pipelines.__file__).parents[1])"],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        cmd = [sys.executable, "-m", "pipelines", "run", "stream", "--conf", str(conf)]
        if not args.trigger:
            cmd.append("--available-now")
        if args.wrap:  # e.g. a profiler: "py-spy record --subprocesses --format raw -o out.txt --"
            import shlex

            cmd = [*shlex.split(args.wrap), *cmd]
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines: list[str] = []
        seen: dict[str, int] = {}
        cpu = [0.0]

        def sample() -> None:
            while proc.poll() is None:
                cpu[0] = max(cpu[0], tree_cpu_seconds(proc.pid))
                time.sleep(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        line_re = re.compile(r"(offsetlake_stream_\w+) batch=\d+ input_rows=(\d+)")
        stopped = False
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            m = line_re.search(line)
            if m:
                seen[m.group(1)] = seen.get(m.group(1), 0) + int(m.group(2))
            # continuous: stop once every query has taken every record
            queries = (REPLAY, QUARANTINE) if QUARANTINE in seen or not args.trigger else (REPLAY,)
            if args.trigger and not stopped and all(seen.get(q, 0) >= self.records for q in queries):
                time.sleep(args.settle)  # a second query may still start its batches
                if all(seen.get(q, 0) >= self.records for q in seen):
                    proc.send_signal(signal.SIGTERM)
                    stopped = True
        rc = proc.wait()
        wall = time.perf_counter() - t0
        sampler.join()
        if rc != 0:
            print("".join(lines[-40:]), file=sys.stderr)
            raise SystemExit(f"the job exited {rc}")
        return {
            "mode": "job",
            "trigger": args.trigger or "availableNow",
            "records": self.records,
            "partitions": args.partitions,
            "produce_seconds": round(self.produce_s, 1),
            "command_seconds": round(wall, 2),
            "command_rate": round(self.records / wall),
            "cpu_seconds": round(cpu[0], 1),
            "queries": _query_figures(work / "root", self.records),
            "driver_tree": where,
            "worker_tree": where,
            "load": [round(load0, 2), round(os.getloadavg()[0], 2)],
        }


def _query_figures(root: Path, records: int) -> dict[str, dict[str, Any]]:
    """Per query, from the job's ``stream_progress`` rows: input records, micro-batches, the
    query's wall (end of its last batch − start of its first), records/s over it, batch p50/p95."""
    from pipelines.tableio import read_arrow_at

    found = list(root.rglob("stream_progress/_delta_log"))
    if not found:
        raise SystemExit(f"no stream_progress table under {root}")
    rows = read_arrow_at(str(found[0].parent)).to_pylist()
    out: dict[str, dict[str, Any]] = {}
    for name in sorted({r["query_name"] for r in rows}):
        rs = sorted((r for r in rows if r["query_name"] == name and r["input_rows"]), key=lambda r: r["batch_id"])
        if not rs:
            continue
        start = min(r["timestamp"] for r in rs).timestamp()
        end = max(r["timestamp"].timestamp() + r["batch_duration_ms"] / 1000 for r in rs)
        durs = sorted(r["batch_duration_ms"] / 1000 for r in rs)
        got = sum(r["input_rows"] for r in rs)
        if got != records:
            raise SystemExit(f"{name}: progress shows {got:,} of {records:,} records")
        out[name] = {
            "records": got,
            "batches": len(rs),
            "seconds": round(end - start, 2),
            "rate": round(got / (end - start)),
            "batch_p50": round(durs[len(durs) // 2], 2),
            "batch_p95": round(durs[min(len(durs) - 1, round(0.95 * (len(durs) - 1)))], 2),
        }
    return out


def compare_job(args: argparse.Namespace) -> int:
    """``--compare BASE --modes job``: the same mock topic, each tree's job in turn (alternating)."""
    trees = {"before": Path(args.compare).resolve(), "after": ROOT}
    got: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    with _JobCluster(args) as jc:
        print(f"produced {jc.records:,} records in {jc.produce_s:.1f}s", file=sys.stderr, flush=True)
        for i in range(args.runs):
            for label in ("before", "after") if i % 2 == 0 else ("after", "before"):
                res = jc.run(trees[label])
                if res["driver_tree"] != str(trees[label]):
                    print(f"{label}: measured {res['driver_tree']}, not {trees[label]}", file=sys.stderr)
                    return 1
                print(json.dumps({"tree": label, **res}), file=sys.stderr, flush=True)
                got[label].append(res)
    print(
        f"records: {jc.records:,}; mock: 3 brokers, {args.partitions} partitions; job: local[2], "
        f"trigger {args.trigger or 'availableNow'}, options {args.option}; runs: {args.runs}"
    )
    print(
        "| tree | command s (runs) | job records/s | CPU s | query | query s | query records/s | batches | batch p50 / p95 s |"
    )
    print("|---|---|---:|---:|---|---:|---:|---:|---|")
    for label, rs in got.items():
        secs = [r["command_seconds"] for r in rs]
        med = statistics.median(secs)
        cpu = statistics.median(r["cpu_seconds"] for r in rs)
        for name in sorted({q for r in rs for q in r["queries"]}):
            qs = [r["queries"][name] for r in rs if name in r["queries"]]
            qsec = statistics.median(q["seconds"] for q in qs)
            print(
                f"| {label} | {med:.1f} ({', '.join(f'{s:.1f}' for s in secs)}) | {jc.records / med:,.0f} | "
                f"{cpu:.1f} | {name.removeprefix('offsetlake_stream_')} | {qsec:.1f} | {jc.records / qsec:,.0f} | "
                f"{qs[0]['batches']} | {statistics.median(q['batch_p50'] for q in qs):.2f} / "
                f"{statistics.median(q['batch_p95'] for q in qs):.2f} |"
            )
    return 0


def compare(args: argparse.Namespace) -> int:
    if args.modes == "job":
        return compare_job(args)
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
    ap.add_argument("--mode", choices=["batch", "stream", "read", "job"], default="batch")
    ap.add_argument("--modes", default="batch,stream", help="--compare: the modes to run, comma-separated")
    ap.add_argument(
        "--records",
        type=int,
        default=None,
        help="the mock keeps ~5 MiB per partition: at most 200k (4 partitions; default), job: 1.8M of the log",
    )
    ap.add_argument("--sink", choices=["parquet", "noop"], default="parquet")
    ap.add_argument("--work", default="/tmp/kafka-source-bench")
    ap.add_argument("--option", action="append", default=[], help="extra source option KEY=VALUE (repeatable)")
    ap.add_argument("--partitions", type=int, default=50, help="job: partitions of the mock's topic")
    ap.add_argument("--log", default="/tmp/kafka-source-bench-log", help="job: the generated log (made if missing)")
    ap.add_argument("--groups", type=int, default=6000, help="job: groups of a log made here")
    ap.add_argument("--hours", type=float, default=0.025, help="job: log hours of a log made here")
    ap.add_argument("--trigger", default=None, help='job: run continuously with this trigger ("5 seconds")')
    ap.add_argument("--wrap", default=None, help="job: a command prefix for the job (a profiler)")
    ap.add_argument("--settle", type=float, default=3.0, help="job, continuous: wait before SIGTERM")
    ap.add_argument("--compare", metavar="BASE_TREE", help="alternate runs of BASE_TREE and this tree")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--repeat", type=int, default=0, help="run the query this many more times in the same session (warm JVM)"
    )
    args = ap.parse_args()
    if args.records is None:
        args.records = 1_800_000 if args.mode == "job" or args.modes == "job" else 200_000
    if args.compare:
        return compare(args)
    print(json.dumps(run_once(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
