"""The streaming job on broker log segments vs on the Parquet landing of the same records, as a
user runs it (a fresh process per run, the whole command timed).

    .venv/bin/python bench/stream_segments.py [--groups 120 --hours 0.5 | --landing DIR]
        [--per-batch 5] [--codec none] [--rounds 2] [--write-results]

1. Generates a raw-record landing (``offsetlake generate``'s writer: ``--groups``, ``--hours``;
   the stream's own bench uses 120 groups) or takes ``--landing``, and writes the same records as
   a broker log dir under ``/tmp/offsetlake-bench/segments-<landing>-<codec>-<per batch>/``: one segment per
   ``__consumer_offsets`` partition, records in offset order, ``--per-batch`` records per batch
   of one partition (the coordinator writes one batch per commit request; ``none`` is
   ``offsets.topic.compression.codec``'s default), written once and reused.
2. Runs ``python -m pipelines.cli run stream --available-now`` on each input in turn (Parquet,
   segments, Parquet, ...), each from an empty warehouse and checkpoint, ``--rounds`` times:
   wall time of the whole command and the job's own time (its ``stream finished`` line);
   records/s of each, and segments / Parquet pair by pair.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.results import write_section  # noqa: E402

ROOT = Path("/tmp/offsetlake-bench")
HEADER = "## stream on broker segments vs the Parquet landing (fresh process)"


def landing_as_log_dir(landing: Path, out: Path, per_batch: int, codec: str) -> int:
    """The landing's records as a broker log dir (``segment_files.write_log_dir``), written by
    temp name + rename; returns the record count."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    from coordinator_core import segments as S
    from pipelines.inputs.segment_files import write_log_dir

    table = ds.dataset(str(landing), format="parquet").to_table(
        columns=["key", "value", "partition", "offset", "timestamp"]
    )
    ts = pc.divide(table.column("timestamp").cast("int64"), 1000).to_pylist()
    cols = [table.column(c).to_pylist() for c in ("key", "value", "partition", "offset")]
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    n = write_log_dir(zip(*cols, ts, strict=True), tmp, per_batch=per_batch, codec=S.CODEC_NAMES.index(codec))
    os.replace(tmp, out)
    return n


def run_stream(inp: Path, work: Path) -> tuple[float, float, int]:
    """(whole command s, job s, records) of one fresh ``run stream --available-now``."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    conf = work / "c.yaml"
    conf.write_text(f"extends: {REPO / 'conf' / 'local.yaml'}\npaths:\n  root: {work}\ninput:\n  path: {inp}\n")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "run", "stream", "--available-now", "--conf", str(conf)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"run stream on {inp} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    m = re.search(r"stream finished: \d+ micro-batches, (\d+) input rows.*?, ([\d.]+)s", proc.stderr)
    if m is None:
        raise SystemExit(f"no 'stream finished' line for {inp}")
    return wall, float(m.group(2)), int(m.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--landing", help="a raw-record landing (default: generate one)")
    ap.add_argument("--groups", type=int, default=120)
    ap.add_argument("--hours", type=float, default=0.5)
    ap.add_argument("--per-batch", type=int, default=5)
    ap.add_argument("--codec", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args()
    if args.landing:
        landing = Path(args.landing)
    else:
        from pipelines.commands.generate import write_generated

        landing = ROOT / f"stream-gen-{args.groups}-{args.hours}"
        if not landing.exists():
            n = write_generated(landing.with_name(landing.name + ".tmp"), groups=args.groups, hours=args.hours, seed=1)
            os.replace(landing.with_name(landing.name + ".tmp"), landing)
            print(f"generated {n:,} records in {landing}", flush=True)
    segs = ROOT / f"segments-{landing.name.removeprefix('raw-')}-{args.codec}-{args.per_batch}"
    if not segs.exists():
        t0 = time.perf_counter()
        n = landing_as_log_dir(landing, segs, args.per_batch, args.codec)
        print(f"wrote {n:,} records as segments in {segs} ({time.perf_counter() - t0:.1f}s)", flush=True)
    runs: dict[str, list[tuple[float, float, int]]] = {"parquet": [], "segments": []}
    for r in range(args.rounds):
        for name, inp in (("parquet", landing), ("segments", segs)):
            got = run_stream(inp, ROOT / "stream-segments-work" / name)
            runs[name].append(got)
            print(f"round {r + 1} {name}: command {got[0]:.1f}s, job {got[1]:.1f}s, {got[2]:,} records", flush=True)
    load = os.getloadavg()[0]
    lines = [
        HEADER,
        "",
        "Command: `.venv/bin/python bench/stream_segments.py "
        + (f"--landing {landing}" if args.landing else f"--groups {args.groups} --hours {args.hours}")
        + f" --per-batch {args.per_batch} "
        f"--codec {args.codec} --rounds {args.rounds}` (medians; load average {load:.1f} at the end).",
        "",
        "| input | records | command s | job s | job records/s | command records/s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, rs in runs.items():
        wall = statistics.median(x[0] for x in rs)
        job = statistics.median(x[1] for x in rs)
        n = rs[0][2]
        lines.append(f"| {name} | {n:,} | {wall:.1f} | {job:.1f} | {n / job:,.0f} | {n / wall:,.0f} |")
    pairs = [s[1] / p[1] for p, s in zip(runs["parquet"], runs["segments"], strict=True)]
    lines += [
        "",
        f"Segments / Parquet, job time pair by pair: {statistics.median(pairs):.2f}x "
        f"({min(pairs):.2f}-{max(pairs):.2f}).",
    ]
    print("\n".join(lines))
    if args.write_results:
        write_section(HEADER, "\n".join(lines))


if __name__ == "__main__":
    main()
