"""Benchmark ``offsetlake generate``: records/s of the simulator-backed log generator.

Two measurements in one run:
1. ratio: the generator's encoded fast path (``BytesLog``: cached keys, precompiled structs,
   commit responses off the queue) against the straightforward path on the same config
   (decoded ``LogRecord``s encoded one by one with ``coordinator_core.codec.record_codec``). Both produce the
   same bytes (a test checks it).
2. volume: ``write_generated`` end to end (simulation + Arrow + Parquet files) on a bigger
   config, and the time that rate needs for 10M records.

CPU time (``time.process_time``) is reported next to wall time: the machine is shared (2 cores,
several engineers), so wall time mostly measures the neighbours.

usage: .venv/bin/python bench/generate.py [--groups 300] [--hours 2] [--ratio-groups 40]
                                          [--ratio-hours 1] [--seed 1] [--write-results]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from coordinator_core.simulator.generator import GeneratorConfig, LogGenerator
from pipelines.commands.generate import write_generated

SECTION = "## generate (simulator)"
NOTES = """What the fast path does: offset-commit keys are encoded once per (group, topic, partition), values
with one precompiled `struct` per metadata string, records are kept as encoded columns (no
per-record dataclasses), and a successful OffsetCommit is handled without a request object or a
queue event (same validation code). The simulation itself (heartbeats, timers, rebalances) is the
rest of the cost; it grows with the number of consumers per committed partition. The end-to-end
figure includes Arrow conversion and zstd Parquet writing, whose pyarrow threads' CPU time
`process_time` also counts. Both paths produce identical bytes
(`tests/coordinator_core/simulator/test_generator.py::test_the_fast_encoded_path_writes_exactly_the_codecs_bytes`).
"""


def timed_generate(groups: int, hours: float, seed: int, fast: bool) -> tuple[int, float, float]:
    gen = LogGenerator(GeneratorConfig(groups=groups, hours=hours, seed=seed), fast=fast)
    w0, c0 = time.perf_counter(), time.process_time()
    n = 0
    for chunk in gen.chunks():
        n += len(chunk)
    return n, time.perf_counter() - w0, time.process_time() - c0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=300)
    ap.add_argument("--hours", type=float, default=2.0)
    ap.add_argument("--ratio-groups", type=int, default=40)
    ap.add_argument("--ratio-hours", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--write-results", action="store_true", help="replace our section of bench/RESULTS.md")
    args = ap.parse_args()

    load0 = os.getloadavg()[0]
    fast = timed_generate(args.ratio_groups, args.ratio_hours, args.seed, fast=True)
    slow = timed_generate(args.ratio_groups, args.ratio_hours, args.seed, fast=False)
    assert fast[0] == slow[0], "both paths must produce the same records"

    out = Path(tempfile.mkdtemp(prefix="bench-generate-"))
    try:
        w0, c0 = time.perf_counter(), time.process_time()
        n = write_generated(out, groups=args.groups, hours=args.hours, seed=args.seed)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        size = sum(p.stat().st_size for p in out.glob("*.parquet"))
        files = len(list(out.glob("*.parquet")))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    load1 = os.getloadavg()[0]

    cmd = (
        f".venv/bin/python bench/generate.py --groups {args.groups} --hours {args.hours:g} "
        f"--ratio-groups {args.ratio_groups} --ratio-hours {args.ratio_hours:g} --seed {args.seed}"
    )
    lines = [
        SECTION,
        "",
        f"Command: `{cmd}`",
        "",
        f"Machine: 2 cores shared with the other engineers; 1-minute load average {load0:.1f} at the start, "
        f"{load1:.1f} at the end, so wall-clock rates mostly measure the neighbours. CPU time "
        "(`time.process_time`) is the comparable number. Python 3.11, one process.",
        "",
        f"1. Same config for both paths ({args.ratio_groups} groups × {args.ratio_hours:g} h, seed {args.seed}, "
        f"{fast[0]:,} records):",
        "",
        "| path | CPU s | wall s | records/CPU-s | records/wall-s |",
        "|---|---:|---:|---:|---:|",
        f"| baseline: decoded records + `codec.encode_*` per record | {slow[2]:.2f} | {slow[1]:.2f} | "
        f"{slow[0] / slow[2]:,.0f} | {slow[0] / slow[1]:,.0f} |",
        f"| generator fast path (`BytesLog`) | {fast[2]:.2f} | {fast[1]:.2f} | {fast[0] / fast[2]:,.0f} | "
        f"{fast[0] / fast[1]:,.0f} |",
        f"| ratio (fast / baseline, CPU) | | | **{(fast[0] / fast[2]) / (slow[0] / slow[2]):.2f}×** | |",
        "",
        f"2. End to end, `write_generated` ({args.groups} groups × {args.hours:g} h → {n:,} records, "
        f"{files} Parquet files, {size / 1e6:.1f} MB zstd): {cpu:.1f} CPU s / {wall:.1f} wall s = "
        f"**{n / cpu:,.0f} records/CPU-s** ({n / wall:,.0f}/wall-s); 10M records ≈ "
        f"{10_000_000 / (n / cpu):.0f} CPU s ({10_000_000 / (n / cpu) / 60:.1f} min) on one core.",
        "",
        NOTES,
    ]
    text = "\n".join(lines)
    print(text)
    if args.write_results:
        results = Path(__file__).resolve().parent / "RESULTS.md"
        old = results.read_text(encoding="utf-8") if results.exists() else "# Benchmark results\n\n"
        if SECTION in old:
            start = old.index(SECTION)
            nxt = old.find("\n## ", start + len(SECTION))
            old = old[:start] + (old[nxt + 1 :] if nxt != -1 else "")
        results.write_text(old.rstrip("\n") + "\n\n" + text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
