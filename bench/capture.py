"""Benchmark: ingesting __consumer_offsets from Kafka without connector jars.

Measures, in one run on librdkafka's mock cluster (real Kafka protocol on 127.0.0.1):
  produce   records/s produced into the mock (reference only)
  capture   ``pipelines.kafka.capture.capture`` -> raw-record Parquet files (one process)
  stream    ``format("offsetlake_kafka")`` (Python data source) -> Parquet sink, availableNow
  baseline  Spark's file source over the captured files -> Parquet sink, availableNow
  batch     ``spark.read.format("offsetlake_kafka")`` -> Parquet (no streaming overhead)

Record bytes are the built-in generated log (``pipelines.inputs.sample.sample_records``) repeated with
fresh positions and timestamps, so sizes are those of real offset commits and group metadata.

    .venv/bin/python bench/capture.py --records 200000

``--cli`` measures only the capture, as a user runs it: a fresh ``offsetlake capture --until-end``
process per run, timed whole (start-up, connect, fetch, Parquet, exit), into a fresh directory.
``--baseline DIR`` (a checkout of the code before a change, e.g. a ``git worktree``) runs the same
command with ``PYTHONPATH=DIR`` in turn with this tree, alternating which goes first; the table
gives every run and the medians, and the load average before and after.

    .venv/bin/python bench/capture.py --cli --runs 5 --baseline /tmp/base
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _records(n: int, partitions: int) -> list[tuple[bytes, bytes | None, int, int]]:
    from pipelines.inputs.sample import sample_records

    base = sample_records(200, seed=3, num_partitions=partitions)
    out = []
    t0 = 1_700_000_000_000
    for i in range(n):
        r = base[i % len(base)]
        out.append((r.key, r.value, r.partition, t0 + i))
    return out


def _spark_stream(
    spark: Any, fmt: str, opts: dict[str, str], schema: Any, src: str | None, sink: Path, ckpt: Path
) -> tuple[int, float]:
    reader = spark.readStream.format(fmt).options(**opts)
    if schema is not None:
        reader = reader.schema(schema)
    df = reader.load(src) if src else reader.load()
    t = time.perf_counter()
    q = (
        df.writeStream.format("parquet")
        .option("path", str(sink))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    secs = time.perf_counter() - t
    rows = sum(p["numInputRows"] for p in q.recentProgress)
    return rows, secs


def _cli_run(bootstrap: str, tree: Path, out: Path) -> tuple[float, int, float, float]:
    """One ``offsetlake capture --until-end`` process from ``tree``: (wall s, records, own
    records/s, the process's CPU s)."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    # run from a neutral directory so the current directory never shadows PYTHONPATH
    cmd = [sys.executable, "-m", "pipelines", "capture", "-b", bootstrap, "--until-end", "--out", str(out)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    res = subprocess.run([*cmd, "--no-progress"], capture_output=True, text=True, env=env, cwd=out.parent)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if res.returncode != 0:
        raise SystemExit(f"{tree}: capture failed: {res.stderr.strip()}")
    m = re.search(r"captured (\d+) records .*\(([\d,]+) records/s\)", res.stdout)
    if m is None:
        raise SystemExit(f"{tree}: unexpected output {res.stdout!r}")
    return wall, int(m.group(1)), float(m.group(2).replace(",", "")), cpu


def _cli_bench(bootstrap: str, expected: int, runs: int, baseline: Path | None) -> int:
    """Alternating whole-process runs of this tree (and ``baseline``); prints every run and medians."""
    here = Path(__file__).resolve().parents[1]
    trees = [("new", here)] + ([("old", baseline.resolve())] if baseline else [])
    rows: dict[str, list[tuple[float, int, float, float]]] = {name: [] for name, _ in trees}
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="capture-cli-") as tmp:
        for i in range(runs):
            for name, tree in trees if i % 2 else trees[::-1]:
                out = Path(tmp) / f"{name}-{i}"
                wall, n, own, cpu = _cli_run(bootstrap, tree, out)
                if n != expected:
                    raise SystemExit(f"{name} run {i}: captured {n} of {expected} records")
                rows[name].append((wall, n, own, cpu))
                print(
                    f"run {i} {name}: {wall:.2f}s whole process ({cpu:.2f} CPU s), {n / wall:,.0f} records/s; own {own:,.0f}/s"
                )
                shutil.rmtree(out)
    load1 = os.getloadavg()
    print(f"\nrecords: {expected:,}; runs: {runs}; load average {load0[0]:.2f} before, {load1[0]:.2f} after")
    print("| tree | median wall s | median CPU s | records/s (whole process) | records/s (capture's own) |")
    print("|---|---:|---:|---:|---:|")
    for name, _ in trees:
        wall = statistics.median(r[0] for r in rows[name])
        cpu = statistics.median(r[3] for r in rows[name])
        own = statistics.median(r[2] for r in rows[name])
        print(f"| {name} | {wall:.2f} | {cpu:.2f} | {expected / wall:,.0f} | {own:,.0f} |")
    if baseline:
        ratio = statistics.median(r[0] for r in rows["old"]) / statistics.median(r[0] for r in rows["new"])
        print(f"new / old (whole process, medians): {ratio:.2f}x")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--records",
        type=int,
        default=200_000,
        help="records to produce (the mock keeps ~50k per partition: at most ~200k)",
    )
    ap.add_argument("--work", default="/tmp/kafka-bench")
    ap.add_argument(
        "--max-records-per-partition",
        type=int,
        default=25_000,
        help="split Kafka partitions into Spark tasks of at most this many offsets",
    )
    ap.add_argument("--cli", action="store_true", help="time whole `offsetlake capture` processes only (no Spark)")
    ap.add_argument("--runs", type=int, default=5, help="--cli: runs per tree (default 5)")
    ap.add_argument("--baseline", type=Path, default=None, help="--cli: a checkout of the old code to run in turn")
    args = ap.parse_args()

    from pipelines.kafka.capture import capture
    from pipelines.kafka.client import KafkaSettings
    from pipelines.kafka.mock import MockKafkaCluster
    from pipelines.kafka.source import SOURCE_NAME, register_kafka_source
    from pipelines.runtime.spark_session import build_spark
    from schemas.raw import RAW_RECORDS

    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    results: list[tuple[str, int, float]] = []

    with MockKafkaCluster(num_brokers=3) as mc:
        recs = _records(args.records, mc.num_partitions)
        t = time.perf_counter()
        mc.produce(recs)
        results.append(("produce into mock cluster (reference)", len(recs), time.perf_counter() - t))
        del recs

        settings = KafkaSettings(mc.bootstrap_servers)
        kept = mc.kept()
        if kept != args.records:
            print(
                f"the mock cluster kept {kept:,} of {args.records:,} records (it drops old segments "
                "of large partitions): use --records 200000 or fewer",
                file=sys.stderr,
            )
            return 2
        if args.cli:
            return _cli_bench(mc.bootstrap_servers, kept, args.runs, args.baseline)
        res = capture(settings, work / "landing", until_end=True, rows_per_file=250_000)
        results.append(("capture -> Parquet (confluent-kafka, 1 process)", res.records, res.seconds))

        spark = build_spark(
            "bench-capture", master="local[2]", conf={"spark.sql.shuffle.partitions": "2"}, log_level="ERROR"
        )
        register_kafka_source(spark)
        kopts = {
            "kafka.bootstrap.servers": mc.bootstrap_servers,
            "maxRecordsPerPartition": str(args.max_records_per_partition),
        }
        # warm-up: start the Python workers once, outside the timings
        spark.read.format(SOURCE_NAME).options(**kopts).option(
            "endingOffsets", '{"__consumer_offsets": {"0": 10, "1": 10, "2": 10, "3": 10}}'
        ).load().count()
        spark.read.parquet(str(work / "landing")).limit(10).count()

        rows, secs = _spark_stream(
            spark,
            "parquet",
            {},
            RAW_RECORDS.spark_schema(),
            str(work / "landing"),
            work / "sink-files",
            work / "ckpt-files",
        )
        results.append(("baseline: Spark file source (captured Parquet) -> Parquet, availableNow", rows, secs))
        rows, secs = _spark_stream(spark, SOURCE_NAME, kopts, None, None, work / "sink-kafka", work / "ckpt-kafka")
        results.append(("offsetlake_kafka stream (Python data source) -> Parquet, availableNow", rows, secs))
        t = time.perf_counter()
        spark.read.format(SOURCE_NAME).options(**kopts).load().write.parquet(str(work / "batch-kafka"))
        secs = time.perf_counter() - t
        rows = spark.read.parquet(str(work / "batch-kafka")).count()
        results.append(("offsetlake_kafka batch read -> Parquet", rows, secs))
        spark.stop()

    base = next(r for r in results if r[0].startswith("baseline"))
    base_rate = base[1] / base[2]
    print(f"records: {args.records:,}; mock cluster 3 brokers, {4} partitions; local[2]; cpus: {os.cpu_count()}")
    print("| path | records | seconds | records/s | vs file source |")
    print("|---|---:|---:|---:|---:|")
    for name, n, secs in results:
        rate = n / secs if secs else float("nan")
        print(f"| {name} | {n:,} | {secs:.1f} | {rate:,.0f} | {rate / base_rate:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
