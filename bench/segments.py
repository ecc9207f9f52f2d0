"""Segment read throughput: broker ``.log`` segments vs the Parquet landing, same records.

    .venv/bin/python bench/segments.py [--records 1000000] [--per-batch 5] [--repeat 3] [--out DIR]

Writes N offset-commit records (the coordinator's shape: small batches, one per commit
request) as one segment per codec with ``coordinator_core.segments``' encoder and as a
raw-record Parquet landing file (``RawRecordWriter``, zstd), then times, per variant:
- ``core``: ``segments.iter_batches`` over the file's bytes (CRC-32C checked, pure Python; the
  codec primitives from cramjam), records counted; ``core+C crc``: the same with
  google-crc32c's CRC (what ``pipelines.inputs.segment_files`` passes);
- ``rows``: ``segment_files.read_segment_file`` (the pipeline view: a ``SegmentRecord`` per record);
- ``raw``: ``raw_files.read_raw_records`` (the raw-record view every reader shares);
- Parquet: ``pyarrow.parquet.read_table`` (columnar, C++) and ``read_raw_records`` on it.
Prints one line per measurement (records/s) and a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow.parquet as pq

from coordinator_core import OffsetCommitKey, OffsetCommitValue, encode_key, encode_value
from coordinator_core import segments as S
from pipelines.inputs.raw_files import RawRecord, RawRecordWriter, read_raw_records
from pipelines.inputs.segment_files import compress, crc32c, decompress, read_segment_file

T0 = 1_700_000_000_000


def _records(n: int, seed: int = 18) -> list[S.Record]:
    rng = random.Random(seed)
    groups = [f"service-{i:04d}" for i in range(200)]
    out = []
    for i in range(n):
        g = rng.choice(groups)
        key = encode_key(OffsetCommitKey(g, f"topic-{rng.randrange(40)}", rng.randrange(64)))
        value = encode_value(
            OffsetCommitValue(rng.randrange(10**9), "", T0 + i, leader_epoch=rng.randrange(9), version=3)
        )
        out.append(S.Record(i, T0 + i, key, value))
    return out


def _write_segment(records: list[S.Record], codec: int, per_batch: int, path: Path) -> int:
    with path.open("wb") as fh:
        for i in range(0, len(records), per_batch):
            fh.write(S.encode_batch_v2(records[i : i + per_batch], codec=codec, compress=compress))
    return path.stat().st_size


REPEAT = 1


def _time(label: str, n_expected: int, fn: object, results: dict[str, float]) -> None:
    dt = float("inf")
    for _ in range(REPEAT):  # best of REPEAT: the machine is shared
        t = time.perf_counter()
        n = fn()  # type: ignore[operator]
        dt = min(dt, time.perf_counter() - t)
        assert n == n_expected, (label, n, n_expected)
    results[label] = n / dt
    print(f"{label:28s} {n:>9d} records {dt:7.2f} s {n / dt:>12,.0f} records/s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--per-batch", type=int, default=5, help="records per batch (one commit request each)")
    ap.add_argument("--codecs", default="none,gzip,snappy,lz4,zstd")
    ap.add_argument("--out", help="directory for the files (default: a temp dir, removed)")
    ap.add_argument("--repeat", type=int, default=1, help="best of N runs per measurement")
    args = ap.parse_args()
    global REPEAT
    REPEAT = args.repeat
    n = args.records
    recs = _records(n)
    results: dict[str, float] = {}
    sizes: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.out or tmp)
        part = root / "__consumer_offsets-0"
        part.mkdir(parents=True, exist_ok=True)
        landing = root / "landing"
        with RawRecordWriter(landing, rows_per_file=n) as w:
            w.write(RawRecord(r.key, r.value, "__consumer_offsets", 0, r.offset, r.timestamp_ms) for r in recs)  # type: ignore[arg-type]
        pfile = next(landing.glob("*.parquet"))
        sizes["parquet(zstd)"] = pfile.stat().st_size
        _time("parquet pyarrow read_table", n, lambda: pq.read_table(pfile).num_rows, results)
        _time("parquet read_raw_records", n, lambda: sum(1 for _ in read_raw_records(pfile)), results)
        for name in args.codecs.split(","):
            codec = S.CODEC_NAMES.index(name)
            seg_path = part / f"{codec:020d}.log"
            sizes[f"segment({name})"] = _write_segment(recs, codec, args.per_batch, seg_path)
            data = seg_path.read_bytes()
            _time(
                f"segment {name} core",
                n,
                lambda d=data: sum(len(b.records) for b in S.iter_batches(d, decompress=decompress)),
                results,
            )  # type: ignore[misc]
            _time(
                f"segment {name} core+C crc",
                n,
                lambda d=data: sum(len(b.records) for b in S.iter_batches(d, decompress=decompress, crc32c_fn=crc32c)),
                results,
            )  # type: ignore[misc]
            _time(f"segment {name} rows", n, lambda p=seg_path: sum(1 for _ in read_segment_file(p)), results)  # type: ignore[misc]
            _time(f"segment {name} raw_records", n, lambda p=seg_path: sum(1 for _ in read_raw_records(p)), results)  # type: ignore[misc]
            seg_path.unlink()
    print(
        json.dumps(
            {
                "records": n,
                "per_batch": args.per_batch,
                "records_per_s": {k: round(v) for k, v in results.items()},
                "bytes": sizes,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
