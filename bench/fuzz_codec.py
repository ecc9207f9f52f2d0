"""Mutation/truncation fuzzing of the core codec (not a CI test: ≥100k cases).

Takes valid records of every type and version (from the hypothesis strategies of
``tests/coordinator_core/strategies.py``, plus the spec's golden vectors), applies random byte
flips, truncations, insertions, deletions and absurd length/count splices (0x7fffffff,
0xffff, 0x80000000, 5-byte varints) to the key, the value or a member's consumer-protocol blob,
and checks that decoding either succeeds (then the result must re-encode and decode to itself)
or raises ``CorruptRecordError`` with a sane part/position — never any other exception, never a
hang (each case is timed; the slowest is reported).

``--modern`` adds Kafka 4's consumer/share/streams group records (KIP-848/932/1071) to the
seeds (strategies + ``tests/coordinator_core/vectors/kip848``) and decodes with ``modern=True``.

Usage:
    .venv/bin/python bench/fuzz_codec.py [--cases 100000] [--seed 7] [--modern] [--write-results]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import time
import traceback
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from coordinator_core import (  # noqa: E402
    CorruptRecordError,
    GroupMetadataValue,
    decode_assignment,
    decode_record,
    decode_subscription,
    encode_record,
)
from tests.coordinator_core import strategies as S  # noqa: E402

SECTION = "## fuzz (core codec)"
ABSURD = [
    b"\x7f\xff\xff\xff",
    b"\xff\xff",
    b"\x7f\xff",
    b"\x80\x00\x00\x00",
    b"\xff\xff\xff\xff\x0f",
    b"\xff\xff\xff\xfe",
]
VECTORS = REPO / "docs" / "spec" / "vectors"


def collect_seeds(n: int, modern: bool = False) -> list[tuple[bytes, bytes | None]]:
    """``n`` valid encoded records drawn with the shared hypothesis strategies, + golden vectors."""
    seeds: list[tuple[bytes, bytes | None]] = []
    strategy = st.one_of(S.records, S.consumer_group_values().map(lambda v: S.Record(S.GroupMetadataKey("g"), v)))
    if modern:
        strategy = st.one_of(strategy, S.modern_records())

    @settings(max_examples=n, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def draw(record: S.Record) -> None:
        seeds.append(encode_record(record))

    draw()
    for name in ("kafka_formatter_tests.json", "konsumer_offsets_real.json", "burrow.json", "franz.json"):
        for v in json.loads((VECTORS / name).read_text()):
            if v.get("key_hex"):
                seeds.append(
                    (bytes.fromhex(v["key_hex"]), bytes.fromhex(v["value_hex"]) if v.get("value_hex") else None)
                )
    if modern:
        for path in sorted((REPO / "tests" / "coordinator_core" / "vectors" / "kip848").glob("*.json")):
            for c in json.loads(path.read_text())["cases"]:
                seeds.append((bytes.fromhex(c["key_hex"]), bytes.fromhex(c["value_hex"]) if c["value_hex"] else None))
    return seeds


def member_blobs(seeds: list[tuple[bytes, bytes | None]]) -> list[bytes]:
    """The valid consumer-protocol blobs of the seeds' consumer-group members."""
    blobs: list[bytes] = []
    for key, value in seeds:
        try:
            record = decode_record(key, value)
        except CorruptRecordError:
            continue
        if isinstance(record.value, GroupMetadataValue) and record.value.protocol_type == "consumer":
            for m in record.value.members:
                for blob, fn in ((m.subscription, decode_subscription), (m.assignment, decode_assignment)):
                    try:
                        fn(blob)
                    except CorruptRecordError:
                        continue
                    blobs.append(blob)
    return blobs


def mutate(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    n = len(data)
    kind = rng.choice(["flip", "flip", "truncate", "insert", "delete", "absurd", "multi"])
    if n == 0:
        kind = "insert"
    if kind == "flip":
        i = rng.randrange(n)
        return kind, data[:i] + bytes([rng.randrange(256)]) + data[i + 1 :]
    if kind == "truncate":
        return kind, data[: rng.randrange(n)]
    if kind == "insert":
        i = rng.randrange(n + 1)
        return kind, data[:i] + rng.randbytes(rng.randint(1, 4)) + data[i:]
    if kind == "delete":
        i = rng.randrange(n)
        return kind, data[:i] + data[i + rng.randint(1, 4) :]
    if kind == "absurd":
        splice = rng.choice(ABSURD)
        i = rng.randrange(max(n - len(splice), 0) + 1)
        return kind, data[:i] + splice + data[i + len(splice) :]
    out = bytearray(data)
    for _ in range(rng.randint(2, 6)):
        out[rng.randrange(n)] = rng.randrange(256)
    return kind, bytes(out)


def run(cases: int, seed: int, n_seeds: int, modern: bool = False) -> dict[str, object]:
    rng = random.Random(seed)
    t0 = time.perf_counter()
    seeds = collect_seeds(n_seeds, modern)
    blobs = member_blobs(seeds)
    seed_s = time.perf_counter() - t0
    outcomes: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    failures: list[str] = []
    slowest = 0.0
    slowest_case = ""
    slowest_input: tuple[str, bytes, bytes | None, bytes] = ("", b"", None, b"")
    t1 = time.perf_counter()
    for _ in range(cases):
        key, value = rng.choice(seeds)
        target = rng.random()
        if target < 0.45 and value is not None:
            kind, value = mutate(rng, value)
            where = "value"
        elif target < 0.9:
            kind, key = mutate(rng, key)
            where = "key"
        else:
            where = "blob"
            kind, blob = mutate(rng, rng.choice(blobs))
        kinds[f"{where}:{kind}"] += 1
        c0 = time.perf_counter()
        try:
            if where == "blob":
                for fn in (decode_subscription, decode_assignment):
                    try:
                        fn(blob)
                        outcomes["blob decoded"] += 1
                    except CorruptRecordError as exc:
                        assert exc.part in ("subscription", "assignment") and exc.position >= 0
                        outcomes["blob typed error"] += 1
            else:
                lenient = rng.random() < 0.3
                try:
                    record = decode_record(key, value, lenient=lenient, modern=modern)
                except CorruptRecordError as exc:
                    assert exc.part in ("key", "value"), exc.part
                    limit = len(key) if exc.part == "key" else len(value or b"")
                    assert 0 <= exc.position <= limit, (exc.position, limit)
                    outcomes["typed error"] += 1
                else:
                    assert decode_record(*encode_record(record), lenient=lenient, modern=modern) == record
                    if isinstance(record.value, GroupMetadataValue):
                        for m in record.value.members:
                            _parse_blobs(record.value.protocol_type, m)
                    outcomes["decoded"] += 1
        except Exception:  # anything else is a finding
            outcomes["NON-TYPED ERROR"] += 1
            if len(failures) < 10:
                failures.append(
                    f"key={key.hex()} value={None if value is None else value.hex()}\n{traceback.format_exc()}"
                )
        took = time.perf_counter() - c0
        if took > slowest:
            slowest, slowest_case = took, f"{where}:{kind} key={key.hex()[:80]} value={(value or b'').hex()[:80]}"
            slowest_input = (where, key, value, blob if where == "blob" else b"")
    elapsed = time.perf_counter() - t1
    # Re-time the slowest case: on a shared machine its first timing is usually a scheduler stall.
    where, key, value, blob = slowest_input
    r0 = time.perf_counter()
    for _ in range(100):
        for fn, arg in ((decode_subscription, blob), (decode_assignment, blob)) if where == "blob" else ():
            with contextlib.suppress(CorruptRecordError):
                fn(arg)
        if where != "blob":
            with contextlib.suppress(CorruptRecordError):
                decode_record(key, value, modern=modern)
    retimed_ms = (time.perf_counter() - r0) / 100 * 1e3
    return {
        "cases": cases,
        "seeds": len(seeds),
        "blobs": len(blobs),
        "seed_seconds": seed_s,
        "seconds": elapsed,
        "slowest_ms": slowest * 1e3,
        "slowest_case": slowest_case,
        "retimed_ms": retimed_ms,
        "outcomes": dict(outcomes),
        "kinds": dict(kinds),
        "failures": failures,
    }


def _parse_blobs(protocol_type: str, member: S.MemberMetadata) -> None:
    from coordinator_core import parse_member_blobs

    parse_member_blobs(protocol_type, member)  # must never raise


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--seeds", type=int, default=2_000, help="valid records drawn from the strategies")
    ap.add_argument(
        "--modern", action="store_true", help="add Kafka 4's modern group records (decode_record(modern=True))"
    )
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args(argv)
    res = run(args.cases, args.seed, args.seeds, args.modern)
    outcomes = res["outcomes"]
    assert isinstance(outcomes, dict)
    non_typed = outcomes.get("NON-TYPED ERROR", 0)
    lines = [
        SECTION if not args.modern else SECTION.replace(")", ", with Kafka 4 modern group records)"),
        "",
        f"Command: `.venv/bin/python bench/fuzz_codec.py --cases {args.cases} --seed {args.seed} --seeds {args.seeds}"
        + (" --modern" if args.modern else "")
        + " --write-results`",
        "",
        f"{res['cases']:,} mutated/truncated cases from {res['seeds']:,} valid records (every record type and "
        f"version, from `tests/coordinator_core/strategies.py` + the golden vectors; {res['blobs']:,} valid "
        f"consumer-protocol blobs of their members) in {res['seconds']:.1f} s "
        f"(shared 2-core machine); slowest case {res['slowest_ms']:.1f} ms, the same case re-timed: "
        f"{res['retimed_ms']:.3f} ms (the first timing was scheduler noise, not a slow path).",
        "",
        f"**{non_typed} non-typed errors.** Outcomes: " + ", ".join(f"{k}: {v:,}" for k, v in sorted(outcomes.items())),
        "",
        "Mutations: " + ", ".join(f"{k} {v:,}" for k, v in sorted(res["kinds"].items())),  # type: ignore[attr-defined]
        "",
        "Every decoded mutant re-encoded and decoded to itself; every error was `CorruptRecordError` "
        "with part key/value/subscription/assignment and a position inside the buffer.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    print("slowest case:", res["slowest_case"], file=sys.stderr)
    for f in res["failures"]:  # type: ignore[attr-defined]
        print(f, file=sys.stderr)
    if args.write_results:
        from bench.decode import _write_section

        _write_section(REPO / "bench" / "RESULTS.md", text)
    return 1 if non_typed else 0


if __name__ == "__main__":
    sys.exit(main())
