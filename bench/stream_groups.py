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

From Kafka (``--source kafka``): a real Kafka 4 broker on 127.0.0.1 (``pipelines.kafka.local_broker``,
the project's own jars) holds the same records, produced in log order into a topic of 50 partitions
(``offsets-bench``: a client may not produce into ``__consumer_offsets`` itself; the records keep
their bytes, partitions and timestamps), and the job reads it with ``input.source: kafka``
(``--kafka-engine python``: confluent-kafka in the tasks; ``jvm``: Spark's Kafka source),
``maxOffsetsPerTrigger`` = one window's records. A micro-batch then holds about one window, not
exactly one: its groups are counted from the offsets its progress row names, and the steady
micro-batches are those after the last that holds a record of file 0 (the groups' creation).

    .venv/bin/python bench/stream_groups.py --groups 20000 --windows 12 [--write-results]
    .venv/bin/python bench/stream_groups.py --groups 20000 --windows 8 --source kafka
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

from bench.batch_process import BENCH_ROOT, WORK, Finished, env_for, run_scan, timed_process, write_conf
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
    #: per micro-batch, the groups it held records of (from Kafka; None: one landing file each, all groups)
    active: list[int] | None = None
    #: the first steady micro-batch (the ones before it create the groups)
    first_steady: int = 1
    #: the tree's peak PSS (``peak_bytes`` sums RSS: an upper bound, ``bench.proc.tree_pss``)
    peak_pss: int = 0


def run_stream(landing: Path, label: str, tree: Path = REPO) -> StreamRun:
    """A fresh ``offsetlake run stream --available-now`` of ``tree``'s code, one landing file per
    micro-batch."""

    conf, root = write_conf(tree, label, landing)
    done, rows, load = _run_replay(conf, root, tree, "--set", "stream.max_files_per_trigger=1")
    batches = [(int(r["input_rows"]), r["batch_duration_ms"] / 1000) for r in rows]
    return StreamRun(done.wall, done.peak_rss, batches, load, peak_pss=done.peak_pss)


def _run_replay(conf: Path, root: Path, tree: Path, *extra: str) -> tuple[Finished, list[dict[str, Any]], float]:
    """A fresh ``offsetlake run stream --available-now --conf conf`` of ``tree``'s code into ``root``
    (emptied before and after): the timed process (wall seconds, peaks), the replay query's
    progress rows in order, the load average at the start."""
    from pipelines.stream.settings import REPLAY_QUERY
    from pipelines.tableio.deltars import read_arrow

    shutil.rmtree(root, ignore_errors=True)
    load = os.getloadavg()[0]
    argv = [sys.executable, "-m", "pipelines.cli", "run", "stream", "--available-now", "--conf", str(conf)]
    argv += ["--set", "stream.trigger_interval=10 seconds", *extra]
    done = timed_process(argv, tree, env_for(tree))
    progress = read_arrow(str(root / "warehouse" / "stream_progress")).to_pylist()
    rows = sorted(
        (r for r in progress if r["query_name"] == REPLAY_QUERY and r["input_rows"]), key=lambda r: r["timestamp"]
    )
    if not rows:
        raise SystemExit(f"no replay micro-batch in stream_progress; the job said:\n{done.out[-3000:]}")
    shutil.rmtree(root, ignore_errors=True)
    return done, rows, load


KAFKA_TOPIC = "offsets-bench"
KAFKA_PARTITIONS = 50


class KafkaLanding:
    """A real Kafka 4 broker holding the landing's records in ``KAFKA_TOPIC``, in log order: each
    landing partition's records in file order, at the same partition, with their timestamps."""

    def __init__(self, landing: Path, work: Path) -> None:
        self.landing = landing
        self.work = work

    def __enter__(self) -> KafkaLanding:
        import confluent_kafka as ck
        import confluent_kafka.admin as cka
        import pyarrow.parquet as pq

        from pipelines.kafka.local_broker import LocalBroker

        shutil.rmtree(self.work, ignore_errors=True)
        self.broker = LocalBroker("kafka-4", self.work / "broker", heap="1g").start()
        admin = cka.AdminClient({"bootstrap.servers": self.broker.bootstrap})
        topic = cka.NewTopic(
            KAFKA_TOPIC,
            KAFKA_PARTITIONS,
            1,
            config={"retention.ms": "-1", "message.timestamp.type": "CreateTime", "segment.bytes": str(2**30)},
        )
        for fut in admin.create_topics([topic]).values():
            fut.result(60)
        producer = ck.Producer(
            {"bootstrap.servers": self.broker.bootstrap, "linger.ms": 20, "batch.size": 1 << 20, "acks": "all"}
        )
        #: per partition: the group of each record, in offset order; and file 0's record count
        self.groups: dict[int, list[bytes]] = {}
        self.first_file_end: dict[int, int] = {}
        files = sorted(self.landing.glob("part-*.parquet"))
        t0 = time.perf_counter()
        for i, f in enumerate(files):
            t = pq.read_table(f, columns=["key", "value", "partition", "offset", "timestamp"]).sort_by(
                [("partition", "ascending"), ("offset", "ascending")]
            )
            keys, values = t.column("key").to_pylist(), t.column("value").to_pylist()
            parts = t.column("partition").to_pylist()
            stamps = t.column("timestamp").cast("int64").to_pylist()  # µs
            for key, value, part, ts in zip(keys, values, parts, stamps, strict=True):
                while True:
                    try:
                        producer.produce(KAFKA_TOPIC, value=value, key=key, partition=part, timestamp=ts // 1000)
                        break
                    except BufferError:
                        producer.poll(0.1)
                # a key's group: i16 version, then the group as an i16-length string (every key type)
                self.groups.setdefault(part, []).append(key[4 : 4 + int.from_bytes(key[2:4], "big")])
            producer.poll(0)
            if i == 0:
                self.first_file_end = {p: len(g) for p, g in self.groups.items()}
        left = producer.flush(120)
        self.records = sum(len(g) for g in self.groups.values())
        consumer = ck.Consumer({"bootstrap.servers": self.broker.bootstrap, "group.id": "bench-marks"})
        held = sum(
            consumer.get_watermark_offsets(ck.TopicPartition(KAFKA_TOPIC, q), timeout=30)[1]
            for q in range(KAFKA_PARTITIONS)
        )
        consumer.close()
        if left or held != self.records:
            self.broker.stop()
            raise SystemExit(f"the broker holds {held:,} of {self.records:,} records ({left} unsent)")
        print(f"produced {self.records:,} records into {KAFKA_TOPIC} ({time.perf_counter() - t0:.0f} s)", flush=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.broker.stop()

    def active(self, start: dict[int, int], end: dict[int, int]) -> int:
        """The groups with a record in the offsets ``start``..``end`` (per partition)."""
        return len({g for p, hi in end.items() for g in self.groups.get(p, [])[start.get(p, 0) : hi]})

    def holds_creation(self, start: dict[int, int]) -> bool:
        """A micro-batch starting at ``start`` still reads records of file 0."""
        return any(start.get(p, 0) < n for p, n in self.first_file_end.items())


def run_kafka_stream(kafka: KafkaLanding, per_batch: int, engine: str, label: str, tree: Path = REPO) -> StreamRun:
    """A fresh ``offsetlake run stream --available-now`` of ``tree``'s code reading ``kafka``'s topic,
    ``per_batch`` records per micro-batch (``maxOffsetsPerTrigger``)."""
    import json

    from pipelines.kafka.source import offsets_from_json

    root = WORK / f"{label}-kafka"
    conf = WORK / f"{label}-kafka.yaml"
    conf.write_text(
        f"extends: {tree / 'conf' / 'local.yaml'}\n"
        f"paths:\n  root: {root}\n"
        f"input:\n  source: kafka\n  kafka_options:\n    maxOffsetsPerTrigger: {per_batch}\n"
        f"kafka:\n  engine: {engine}\n  bootstrap_servers: {kafka.broker.bootstrap}\n  topic: {KAFKA_TOPIC}\n"
        f"offsets_topic:\n  num_partitions: {KAFKA_PARTITIONS}\n"
    )
    done, rows, load = _run_replay(conf, root, tree)
    batches, active, first_steady = [], [], 0
    for i, r in enumerate(rows):
        (src,) = json.loads(r["sources"])
        start = offsets_from_json(KAFKA_TOPIC, src.get("startOffset") or "{}")
        end = offsets_from_json(KAFKA_TOPIC, src["endOffset"])
        read = sum(hi - start.get(q, 0) for q, hi in end.items())  # records (the source's rows are packs)
        batches.append((read, r["batch_duration_ms"] / 1000))
        active.append(kafka.active(start, end))
        if kafka.holds_creation(start):
            first_steady = i + 1
    return StreamRun(done.wall, done.peak_rss, batches, load, active, first_steady, done.peak_pss)


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def _steady(run: StreamRun, groups: int) -> tuple[list[float], list[float]]:
    """The steady micro-batches' seconds, and their ms per active group."""
    idx = range(run.first_steady, len(run.batches))
    secs = [run.batches[i][1] for i in idx]
    active = [run.active[i] if run.active else groups for i in idx]
    return secs, [s / a * 1000 for s, a in zip(secs, active, strict=True)]


def render(args: argparse.Namespace, records: int, run: StreamRun, scan: Any, command: str) -> str:
    steady, per_group = _steady(run, args.groups)
    if not steady:
        raise SystemExit("no steady micro-batch: use more --windows")
    floor_rps = records / scan.scan_warm_s
    rows_per_batch = sum(n for n, _ in run.batches[run.first_steady :]) / len(steady)
    if args.source == "kafka":
        how = (
            f"A fresh `offsetlake run stream --available-now` reading a real Kafka 4 broker's topic of "
            f"{KAFKA_PARTITIONS} partitions holding the same records (`kafka.engine: {args.kafka_engine}`, "
            f"`maxOffsetsPerTrigger` = one window's records); a micro-batch's active groups are counted from "
            f"the offsets it read"
        )
    else:
        how = "A fresh `offsetlake run stream --available-now` (`stream.max_files_per_trigger=1`)"
    lines = [
        SECTION if args.source == "landing" else SECTION + ", from Kafka",
        "",
        f"Command: `{command}` (commit {os.popen('git -C ' + str(REPO) + ' rev-parse --short HEAD').read().strip()}).",
        f"{args.groups:,} groups, every one active in each of {args.windows} windows of one 10 s trigger's "
        f"worth ({args.commits} commits per group, ~{REBALANCE_SHARE:.1%} rebalancing): {records:,} records; "
        f"~{rows_per_batch:,.0f} records per steady micro-batch. {how}; local[2]; load {run.load:.1f} at the start.",
        "",
        "| micro-batch | input rows | active groups | seconds | ms per active group |",
        "|---:|---:|---:|---:|---:|",
    ]
    for i, (n, s) in enumerate(run.batches):
        active = run.active[i] if run.active else args.groups
        note = " (creates groups)" if i < run.first_steady else ""
        lines.append(f"| {i}{note} | {n:,} | {active:,} | {s:.2f} | {s / active * 1000:.3f} |")
    lines += [
        "",
        f"Steady micro-batches: p50 **{pct(steady, 0.5):.2f} s**, p95 **{pct(steady, 0.95):.2f} s**, max "
        f"{max(steady):.2f} s against the 10 s trigger; **{pct(per_group, 0.5):.3f} ms per active group** (p50; "
        f"p95 {pct(per_group, 0.95):.3f}) all in. Whole process {run.process_s:.1f} s, peak "
        f"{run.peak_bytes / 2**30:.2f} GiB summed RSS, {run.peak_pss / 2**30:.2f} GiB PSS. Floor in the same run: a warm Spark scan of the same records as "
        f"landing files, {floor_rps:,.0f} records/s ({scan.scan_warm_s:.2f} s for all {records:,}); a steady "
        f"micro-batch processes {rows_per_batch / pct(steady, 0.5):,.0f} records/s "
        f"= {rows_per_batch / pct(steady, 0.5) / floor_rps:.3f}× the floor.",
    ]
    return "\n".join(lines) + "\n"


def paired(run: StreamRun, vs: StreamRun, tree: Path, groups: int) -> str:
    """The steady micro-batches of this tree against ``tree``'s, run right after."""
    mine, theirs = pct(_steady(run, groups)[0], 0.5), pct(_steady(vs, groups)[0], 0.5)
    rev = os.popen(f"git -C {tree} rev-parse --short HEAD").read().strip()
    return (
        f"\nPaired with {rev} (its own tree, run right after, load {vs.load:.1f}): steady micro-batch p50 "
        f"{mine:.2f} s against {theirs:.2f} s = **{mine / theirs:.2f}×**; whole process {run.process_s:.1f} s "
        f"against {vs.process_s:.1f} s; peak {run.peak_bytes / 2**30:.2f} against {vs.peak_bytes / 2**30:.2f} GiB "
        f"(summed RSS; PSS {run.peak_pss / 2**30:.2f} against {vs.peak_pss / 2**30:.2f}).\n"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=20_000)
    ap.add_argument("--windows", type=int, default=12, help="steady micro-batches after the first")
    ap.add_argument("--commits", type=int, default=2, help="offset commits per group per window")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--source", choices=("landing", "kafka"), default="landing")
    ap.add_argument("--kafka-engine", choices=("python", "jvm"), default="python", help="with --source kafka")
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
    if args.source == "kafka":
        import pyarrow.parquet as pq

        per_batch = pq.read_metadata(landing / "part-00000001.parquet").num_rows
        with KafkaLanding(landing, WORK / "kafka-broker") as kafka:
            run = run_kafka_stream(kafka, per_batch, args.kafka_engine, "stream-groups")
            vs = None
            if args.vs:
                vs = run_kafka_stream(kafka, per_batch, args.kafka_engine, "stream-groups-vs", args.vs.resolve())
    else:
        run = run_stream(landing, "stream-groups")
        vs = run_stream(landing, "stream-groups-vs", args.vs.resolve()) if args.vs else None
    command = ".venv/bin/python bench/stream_groups.py " + " ".join(sys.argv[1:] if argv is None else argv)
    text = render(args, records, run, scan, command.strip())
    if vs is not None:
        text += paired(run, vs, args.vs.resolve(), args.groups)
    print(text)
    if args.write_results:
        write_section(SECTION if args.source == "landing" else SECTION + ", from Kafka", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
