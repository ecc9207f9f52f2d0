"""Benchmark: the pure-Python replay's CPU time in one consumer group's member count (issue 37,
item 7: the trial's 20k members took 25.9 s, 40k 101 s, quadratic).

The log: ``tests/coordinator_core/test_replay_member_scaling.py::_many_members(n)``: n members
join one KIP-848 consumer group (member subscription, target assignment, current assignment
each: one record per member and kind), the group and target epochs are bumped, then every
member reconciles to it: 4n + 2 records, built with the core's codec (untimed). Each member
count is measured in a fresh process (no heap left by a larger run), the cyclic GC off during
the timing (its passes over every live object are not the replay's; the pipeline's tasks freeze
the heap likewise), this process's CPU time (``time.process_time``: steadier than wall time on
a shared machine), best of ``--repeat``. Linear: seconds per member stays flat as n doubles.

    .venv/bin/python bench/replay_members.py --members 1500,3000,20000,40000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def measure(n: int, repeat: int) -> dict[str, float]:
    """One member count, in this process: build seconds, best replay CPU seconds."""
    from tests.coordinator_core.test_replay_member_scaling import _many_members, best_replay_cpu

    t = time.process_time()
    records = _many_members(n)
    build = time.process_time() - t
    best = best_replay_cpu(records, repeat)
    return {"members": n, "records": len(records), "build_s": build, "replay_cpu_s": best}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", default="1500,3000,20000,40000", help="member counts, comma-separated")
    ap.add_argument("--repeat", type=int, default=2, help="replays per member count (best is kept)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # internal: measure one count, print JSON
    args = ap.parse_args(argv)
    if args.one is not None:
        print(json.dumps(measure(args.one, args.repeat)))
        return 0
    counts = [int(x) for x in args.members.split(",") if x.strip()]
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"machine: {platform.machine()}, Python {platform.python_version()}, {os.cpu_count()} cores")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    print("| members | records | build s | replay CPU s | µs per member | load (1 min) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in counts:  # a fresh process per count
        out = subprocess.run(
            [sys.executable, __file__, "--one", str(n), "--repeat", str(args.repeat)],
            check=True,
            capture_output=True,
            text=True,
            cwd=ROOT,
        ).stdout
        r = json.loads(out.strip().splitlines()[-1])
        per = r["replay_cpu_s"] / n * 1e6
        load = os.getloadavg()[0]
        print(
            f"| {n:,} | {r['records']:,} | {r['build_s']:.2f} | {r['replay_cpu_s']:.2f} | {per:.0f} | {load:.1f} |",
            flush=True,
        )
    print(f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
