"""Fuzz the batch job over hostile landing files (issue 19; not a CI test).

Each round builds a landing directory from a generated log (``sample_records``) plus hostile
input, in several Parquet files: random-byte records, truncated values, rows with a null
offset / partition / topic, partitions outside 0..49, duplicates of committed positions with
different bytes, copies the input itself disagrees about, identical re-deliveries, absurd
generations (0x7fffffff, a jump from the log's generation) and absurd timestamps (year 9999,
0, negative). Then it runs ``offsetlake run batch --json`` in a fresh process with a timeout
(a hang is a failure) — twice: the rerun must change nothing — and checks:

- the job ends with exit 0;
- raw = decoded + quarantined + unsupported (the decode reconciliation);
- read = new + identical duplicates + refused, with refused = exactly the injected bad
  positions and conflicts, raw_records = the base log + the injected records at fresh valid
  positions, and ``ingest_quarantine`` holding every refused row;
- the rerun reads everything again as duplicates and writes nothing new.

Usage:
    .venv/bin/python bench/fuzz_landing.py [--rounds 5] [--groups 12] [--seed 11] [--timeout 600]
        [--write-results]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from bench.results import write_section  # noqa: E402
from coordinator_core import GroupMetadataKey, decode_key, decode_value, encode_value  # noqa: E402
from pipelines.inputs.raw_files import RAW_ARROW_SCHEMA, RawRecord, records_to_batch, write_raw_records  # noqa: E402
from pipelines.inputs.sample import sample_records  # noqa: E402

SECTION = "## fuzz (landing files → batch job)"
FAR = 253_402_300_799_000  # 9999-12-31T23:59:59Z


def _with_generation(rec: RawRecord, generation: int) -> RawRecord | None:
    key = decode_key(rec.key)
    if not isinstance(key, GroupMetadataKey) or rec.value is None:
        return None
    value = decode_value(key, rec.value)
    return rec._replace(value=encode_value(dataclasses.replace(value, generation=generation)))  # type: ignore[type-var]


def build_base(landing: Path, groups: int, seed: int) -> list[RawRecord]:
    base = sample_records(groups, seed=seed)
    write_raw_records(base, landing)
    return base


def build_round(
    landing: Path, rng: random.Random, base: list[RawRecord], seed: int, *, jumps: bool = True
) -> dict[str, int]:
    """Add one round's hostile files to a landing whose base log is committed; returns the
    expected counts of the next run."""
    top = {p: max((r.offset for r in base if r.partition == p), default=-1) for p in range(50)}

    def fresh(partition: int) -> int:
        top[partition] += 1
        return top[partition]

    added: list[RawRecord] = []  # valid positions, new: must all reach raw_records
    # random bytes, truncated values, absurd timestamps and generations, at fresh positions
    for _ in range(rng.randint(20, 60)):
        p = rng.randrange(50)
        kind = rng.choice(["random", "truncated", "ts9999", "ts0", "tsneg", "generation"])
        if kind == "generation" and not jumps:
            kind = "ts9999"
        src = rng.choice(base)
        if kind == "random":
            rec = RawRecord(
                rng.randbytes(rng.randint(0, 40)),
                rng.choice([None, rng.randbytes(rng.randint(0, 80))]),
                "__consumer_offsets",
                p,
                fresh(p),
                src.timestamp_ms,
            )
        elif kind == "truncated" and src.value:
            rec = src._replace(value=src.value[: rng.randrange(len(src.value))], partition=p, offset=fresh(p))
        elif kind == "generation":
            gm = [r for r in base if r.key[:2] == b"\x00\x02" and r.value is not None]
            src = rng.choice(gm)
            made = _with_generation(src, rng.choice([2_147_483_647, 1_000_000_000, 0]))
            if made is None:
                continue
            rec = made._replace(offset=fresh(src.partition), timestamp_ms=src.timestamp_ms + 1)
        else:
            ts = {"ts9999": FAR, "ts0": 0, "tsneg": -86_400_000}.get(kind, src.timestamp_ms)
            rec = src._replace(partition=p, offset=fresh(p), timestamp_ms=ts)
        added.append(rec)
    write_raw_records(added, landing)

    refused = 0
    # duplicates of committed positions: identical (harmless) and with different bytes
    conflicts, identical = [], []
    for src in rng.sample(base, 15):
        identical.append(src)
        flipped = bytearray(src.value or b"\x00\x01")
        flipped[rng.randrange(len(flipped))] ^= 0xFF
        conflicts.append(src._replace(value=bytes(flipped)))
    write_raw_records(identical + conflicts, landing)
    refused += len(conflicts)
    # a position the input itself disagrees about: two new copies, both refused
    pairs = []
    for _ in range(5):
        src = rng.choice(base)
        p = rng.randrange(50)
        off = fresh(p)
        pairs += [src._replace(partition=p, offset=off), src._replace(partition=p, offset=off, value=b"\x00\x09junk")]
    write_raw_records(pairs, landing)
    refused += len(pairs)
    # null positions and partitions outside the topic, in one raw file
    n_bad = rng.randint(10, 40)
    t = records_to_batch(rng.sample(base, n_bad))
    cols = {n: t.column(n) for n in RAW_ARROW_SCHEMA.names}
    choice = [rng.choice(["offset", "partition", "topic", "range"]) for _ in range(n_bad)]
    cols["offset"] = pa.array([None if c == "offset" else 900_000 + i for i, c in enumerate(choice)], pa.int64())
    cols["partition"] = pa.array(
        [None if c == "partition" else (2_147_483_647 if c == "range" else 3) for c in choice], pa.int32()
    )
    cols["topic"] = pa.array([None if c == "topic" else "__consumer_offsets" for c in choice], pa.string())
    pq.write_table(pa.table(cols), landing / f"hostile-{seed:04d}.parquet")
    refused += n_bad
    read = len(base) + len(added) + len(identical) + len(conflicts) + len(pairs) + n_bad
    return {
        "read": read,
        "new": len(added),
        "raw": len(base) + len(added),
        "refused": refused,
        "far": sum(r.timestamp_ms == FAR for r in added),
    }


def run_batch(conf: Path, timeout: float) -> tuple[dict[str, Any] | None, str, float, int | None]:
    exe = Path(sys.executable).parent / "offsetlake"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            [str(exe), "run", "batch", "--conf", str(conf), "--json"],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=conf.parent,
        )
    except subprocess.TimeoutExpired:
        return None, "TIMEOUT (hang)", time.perf_counter() - start, None
    took = time.perf_counter() - start
    if proc.returncode != 0:
        return None, proc.stderr[-2000:], took, proc.returncode
    return json.loads(proc.stdout[proc.stdout.index("{") :]), proc.stderr, took, 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--groups", type=int, default=12)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--write-results", action="store_true")
    ap.add_argument(
        "--no-generation-jumps",
        action="store_true",
        help="leave out the absurd generations (the core replay steps through every skipped "
        "generation until issue 19 item 5 is fixed there: such a run does not end)",
    )
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    totals = {"read": 0, "raw": 0, "decoded": 0, "quarantined": 0, "unsupported": 0, "refused": 0, "outliers": 0}
    failures: list[str] = []
    times: list[float] = []
    for rnd in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="fuzz-landing-") as tmp:
            root = Path(tmp)
            conf = root / "fuzz.yaml"
            conf.write_text(f"paths:\n  root: {root / 'data'}\nspark:\n  master: local[2]\n")
            seed = args.seed * 100 + rnd
            base = build_base(root / "data" / "landing", args.groups, seed)
            first, err, took0, rc = run_batch(conf, args.timeout)
            times.append(took0)
            if first is None or first["raw_total"] != len(base):
                failures.append(
                    f"round {rnd}: base run: exit {rc}: {err.strip().splitlines()[-1] if err.strip() else ''}"
                )
                continue
            expect = build_round(root / "data" / "landing", rng, base, seed, jumps=not args.no_generation_jumps)
            summary, err, took, rc = run_batch(conf, args.timeout)
            times.append(took)
            if summary is None:
                failures.append(f"round {rnd}: exit {rc}: {err.strip().splitlines()[-1] if err.strip() else ''}")
                continue
            checks = {
                "raw = decoded + quarantined + unsupported": summary["reconciled"],
                "read": summary["records_read"] == expect["read"],
                "new": summary["records_new"] == expect["new"] and summary["raw_total"] == expect["raw"],
                "refused": summary["refused"] == expect["refused"],
                "read = new + duplicates + refused": summary["records_read"]
                == summary["records_new"] + summary["duplicates"] + summary["refused"],
                "clock outliers = the records dated 9999": summary.get("clock_outliers") == expect["far"],
                "ingest_quarantine holds every refused row": summary["tables"].get("ingest_quarantine", {}).get("rows")
                == expect["refused"],
            }
            again, _, took2, _ = run_batch(conf, args.timeout)
            times.append(took2)
            checks["rerun: no hang, exit 0"] = again is not None
            if again is not None:
                checks["rerun adds nothing"] = again["records_new"] == 0 and again["raw_total"] == summary["raw_total"]
                checks["rerun reconciles"] = again["reconciled"]
            bad = [k for k, ok in checks.items() if not ok]
            if bad:
                failures.append(
                    f"round {rnd}: {', '.join(bad)} (expected {expect}, got read {summary['records_read']} "
                    f"new {summary['records_new']} refused {summary['refused']})"
                )
            for k, v in (
                ("read", summary["records_read"]),
                ("raw", summary["raw_total"]),
                ("decoded", summary["decoded"]),
                ("quarantined", summary["quarantined"]),
                ("unsupported", summary["unsupported"]),
                ("refused", summary["refused"]),
                ("outliers", summary.get("clock_outliers", 0)),
            ):
                totals[k] += int(v)
            print(
                f"round {rnd}: read {summary['records_read']} raw {summary['raw_total']} = decoded "
                f"{summary['decoded']} + quarantined {summary['quarantined']} + unsupported "
                f"{summary['unsupported']}; refused {summary['refused']}; clock outliers "
                f"{summary.get('clock_outliers', 0)}; {took:.1f}s + rerun {took2:.1f}s; "
                f"{'OK' if not bad else 'FAIL ' + ', '.join(bad)}",
                flush=True,
            )
    ok = not failures
    lines = [
        SECTION,
        "",
        f"`.venv/bin/python bench/fuzz_landing.py --rounds {args.rounds} --groups {args.groups} "
        f"--seed {args.seed}{' --no-generation-jumps' if args.no_generation_jumps else ''} --write-results` (local[2], each run a fresh `offsetlake run batch --json` "
        f"process with a {args.timeout:.0f} s timeout; per round: the base log, then the hostile files, "
        f"then a rerun).",
        "",
        "| rounds | records read | raw_records | decoded | quarantined | unsupported | refused at ingest "
        "| clock outliers | slowest run | result |",
        "|---|---|---|---|---|---|---|---|---|---|",
        f"| {args.rounds} | {totals['read']:,} | {totals['raw']:,} | {totals['decoded']:,} | "
        f"{totals['quarantined']:,} | {totals['unsupported']:,} | {totals['refused']:,} | {totals['outliers']} | "
        f"{max(times) if times else 0:.1f} s | {'every check held, no hang' if ok else 'FAILED'} |",
        "",
        "Hostile input per round (after the base log is committed): random-byte records, truncated values, absurd timestamps (9999, 0, "
        f"negative){'' if args.no_generation_jumps else ' and generations (0x7fffffff, 10^9, 0)'} at fresh positions; 15 identical re-deliveries "
        "and 15 copies of committed positions with one byte flipped; 5 positions with two different new "
        "copies; 10-40 rows with a null offset/partition/topic or partition 0x7fffffff. Checked: raw = "
        "decoded + quarantined + unsupported; read = new + duplicates + refused with refused = exactly "
        "the injected bad positions and conflicts; ingest_quarantine holds them; the log clock ignored exactly the records dated 9999; the rerun adds nothing.",
        *(f"- {f}" for f in failures),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write_results:
        write_section(SECTION, text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
