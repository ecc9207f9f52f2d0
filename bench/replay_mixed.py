"""Benchmark: the pure-Python replay on a mixed Kafka 4 cluster's log (issue 14) next to a
classic-only log of the same size, in one run.

Both logs come from the generator (``coordinator_core.simulator.generator``) with the same seed, groups and
hours; the mixed one has ``--consumer-groups`` of its application/static/console groups on the
KIP-848 consumer protocol and ``--conversions`` of its classic application groups upgraded online
(some back), plus ``--share-groups`` share groups (KIP-932) and ``--streams-groups`` streams
groups (KIP-1071). Both are cut to the same number of records (the first N in log order) and decoded
to ``LogRecord`` objects up front (``decode_record(..., modern=True)``: the codec is not measured).
Then ``replay_groups`` runs on each, in turn, in three modes (state only, every event, every
event + offset expiry at the log's end), best of ``--repeat`` in CPU seconds of the process; the
figure to read is mixed / classic in the same run.

    .venv/bin/python bench/replay_mixed.py --groups 80 --hours 1 --repeat 3 --write-results
"""

from __future__ import annotations

import argparse
import collections
import gc
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.results import write_section
from coordinator_core import LogRecord, ReplaySettings, decode_record, replay_groups
from coordinator_core.simulator.generator import generate

WEEK = 7 * 86_400_000
HEADER = "## replay, mixed Kafka 4 cluster vs classic-only"


def _log(groups: int, hours: float, seed: int, **options: Any) -> tuple[list[LogRecord], dict[str, Any], float]:
    """The decoded log, its truth, and the generator's CPU seconds for it."""
    t = time.process_time()
    g = generate(groups, hours, seed, coordinator="new", **options)
    cpu = time.process_time() - t
    out = []
    for k, v, p, o, ts in zip(g.keys, g.values, g.partitions, g.offsets, g.timestamps):
        r = decode_record(k, v, modern=True)
        out.append(LogRecord(p, o, ts, r.key, r.value))
    return out, g.truth, cpu


def _cpu(fn: Callable[[], Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return best


def _composition(records: list[LogRecord]) -> dict[str, int]:
    kinds: collections.Counter[str] = collections.Counter()
    for r in records:
        v = r.key.version
        if v in (0, 1):
            kinds["offset commits"] += 1
        elif v == 2:
            kinds["classic group records"] += 1
        else:
            kinds["KIP-848 records" if v in (3, 4, 5, 6, 7, 8, 16) else "share/streams records"] += 1
    return dict(kinds)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=80)
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--consumer-groups", type=float, default=0.5)
    ap.add_argument("--conversions", type=float, default=0.3)
    ap.add_argument("--share-groups", type=int, default=4)
    ap.add_argument("--streams-groups", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--write-results", action="store_true", help="replace this section of bench/RESULTS.md")
    args = ap.parse_args(argv)

    t = time.perf_counter()
    classic, _, gen_classic = _log(args.groups, args.hours, args.seed)
    gen_classic_n = len(classic)
    mixed, truth, gen_mixed = _log(
        args.groups,
        args.hours,
        args.seed,
        consumer_groups=args.consumer_groups,
        conversions=args.conversions,
        share_groups=args.share_groups,
        streams_groups=args.streams_groups,
    )
    gen_mixed_n = len(mixed)
    n = min(len(classic), len(mixed))
    classic, mixed = classic[:n], mixed[:n]
    print(f"generated and decoded 2 x {n:,} records in {time.perf_counter() - t:.1f}s")
    types = collections.Counter(g["group_type"] or "gone" for g in truth["groups"].values())
    converted = sum(1 for g in truth["groups"].values() if "upgraded" in g["traits"])
    comp = {"classic-only": _composition(classic), "mixed": _composition(mixed)}
    end = {name: recs[-1].timestamp_ms for name, recs in (("classic-only", classic), ("mixed", mixed))}

    def run(recs: list[LogRecord], name: str, kinds: Any, retention: int | None) -> Callable[[], Any]:
        settings = ReplaySettings(retention_ms=retention)
        as_of = end[name] if retention is not None else None
        return lambda: replay_groups(recs, assume_log_start=True, event_kinds=kinds, settings=settings, as_of_ms=as_of)

    modes = (("state only", (), None), ("every event", None, None), ("every event + expiry (7 d)", None, WEEK))
    rows = []
    load = os.getloadavg()
    for label, kinds, retention in modes:
        # in turn, each log measured right after the other, so both see the same machine
        c = _cpu(run(classic, "classic-only", kinds, retention), args.repeat)
        m = _cpu(run(mixed, "mixed", kinds, retention), args.repeat)
        rows.append((label, c, m))
        print(f"{label:30s} classic {n / c:>10,.0f}/s  mixed {n / m:>10,.0f}/s  mixed/classic {c / m:.2f}x")
    load_after = os.getloadavg()
    cond = (
        f"Python {platform.python_version()}, one process, CPU seconds best of {args.repeat}; "
        f"load average {load[0]:.1f} before, {load_after[0]:.1f} after"
    )
    print(cond)
    if args.write_results:
        lines = [
            HEADER,
            "",
            f"Command: `.venv/bin/python bench/replay_mixed.py --groups {args.groups} --hours {args.hours} "
            f"--seed {args.seed} --consumer-groups {args.consumer_groups} --conversions {args.conversions} "
            f"--share-groups {args.share_groups} --streams-groups {args.streams_groups} "
            f"--repeat {args.repeat} --write-results`",
            "",
            f"Two generated logs (seed {args.seed}, {args.groups} groups, {args.hours} h, Kafka 4's coordinator) cut to "
            f"the same {n:,} records: a classic-only cluster, and a mixed one ({types.get('consumer', 0)} consumer "
            f"groups at the end, {converted} classic groups upgraded online, {types.get('classic', 0)} classic, "
            f"{args.share_groups} share groups, {args.streams_groups} streams groups). "
            "Records decoded up front; `replay_groups` on each, in turn. " + cond + ".",
            "",
            "| log | offset commits | classic group records | KIP-848 records | share/streams records |",
            "|---|---:|---:|---:|---:|",
        ]
        for name, c in comp.items():
            lines.append(
                f"| {name} | {c.get('offset commits', 0):,} | {c.get('classic group records', 0):,} "
                f"| {c.get('KIP-848 records', 0):,} | {c.get('share/streams records', 0):,} |"
            )
        lines += [
            "",
            "| replay mode | classic-only records/s | mixed records/s | mixed / classic |",
            "|---|---:|---:|---:|",
        ]
        for label, c, m in rows:
            lines.append(f"| {label} | {n / c:,.0f} | {n / m:,.0f} | **{c / m:.2f}×** |")
        lines += [
            "",
            f"The generator on the same configs (whole logs, CPU s once): classic-only {gen_classic_n:,} records in "
            f"{gen_classic:.1f} s ({gen_classic_n / gen_classic:,.0f}/CPU-s), mixed {gen_mixed_n:,} in "
            f"{gen_mixed:.1f} s ({gen_mixed_n / gen_mixed:,.0f}/CPU-s).",
        ]
        write_section(HEADER, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
