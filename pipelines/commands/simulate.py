"""``offsetlake simulate``: run one scenario through the coordinator simulator.

Rules:
- The scenario is a YAML file (``pipelines.inputs.scenario_files``; a bare name means a file shipped
  in ``conf/scenarios``). Bad files exit 2 with the offending key path.
- Output in ``--out DIR``: the records as raw-record Parquet (``part-00000000.parquet``, the
  schema every reader of captured logs takes) and the trace as JSON lines (``_trace.jsonl``:
  every transition, request, response, timer, record and client callback). The leading
  underscore keeps the trace out of Spark's file source.
- stdout: each group's state sequence; ``--check`` exits 1 when the scenario's ``expect``
  block is not met.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pipelines.errors import UsageError

DESCRIPTION = """\
Run a scenario (topics, consumer configs, a timeline of starts/stops/crashes/pauses or scripted
requests) against a model of Kafka's classic group coordinator; write the __consumer_offsets
records it produces and a JSON-lines trace.

examples:
  offsetlake simulate --list
  offsetlake simulate book_three_consumers_at_once --out /tmp/sim
  offsetlake simulate conf/scenarios/rolling_restart_static.yaml --out /tmp/sim --check
"""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "simulate",
        help="run a scenario through the group-coordinator simulator (records + trace)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("scenario", nargs="?", help="a scenario YAML file or the name of a shipped one")
    p.add_argument("--out", metavar="DIR", help="where to write part-*.parquet and _trace.jsonl")
    p.add_argument("--check", action="store_true", help="exit 1 unless the scenario's expect block holds")
    p.add_argument("--list", action="store_true", help="list the shipped scenarios")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from pipelines.inputs.scenario_files import load_scenario, shipped_scenarios

    if args.list:
        for path in shipped_scenarios():
            s = load_scenario(path)
            first = s.description.strip().split(". ")[0]
            print(f"{path.stem:40s} {first}")
        return 0
    if not args.scenario:
        raise UsageError("give a scenario file or name (or --list)")
    scenario = load_scenario(args.scenario)
    result = scenario.run()
    if args.out:
        write_outputs(result, Path(args.out))
    groups = sorted({e.group_id for e in result.events if e.kind == "transition"})
    for gid in groups:
        print(f"{gid}: {' -> '.join(result.states(gid))}")
    print(
        f"{len(result.records)} records, {len(result.events)} trace events"
        + (f", written to {args.out}" if args.out else ""),
        file=sys.stderr,
    )
    problems = result.check()
    if problems:
        for line in problems:
            print(f"expectation not met: {line}", file=sys.stderr)
        if args.check:
            return 1
    elif args.check and scenario.expect:
        print("expectations met", file=sys.stderr)
    return 0


def write_outputs(result: Any, out: Path) -> None:
    """Write the records (raw-record Parquet) and the trace (JSON lines) into ``out``."""
    from coordinator_core import encode_key, encode_value
    from pipelines.inputs.raw_files import RawRecord, RawRecordWriter

    out.mkdir(parents=True, exist_ok=True)
    rows = [
        RawRecord(encode_key(r.key), encode_value(r.value), "__consumer_offsets", r.partition, r.offset, r.timestamp_ms)
        for r in result.records
    ]
    if rows:
        with RawRecordWriter(out) as writer:
            writer.write(rows)
    tmp = out / "._trace.jsonl.tmp"
    with tmp.open("w", encoding="utf-8") as fh:
        for e in result.events:
            fh.write(json.dumps(e.to_dict(), sort_keys=True) + "\n")
    tmp.replace(out / "_trace.jsonl")
