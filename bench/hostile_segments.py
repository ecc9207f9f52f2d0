"""A small hostile-input fuzz over broker log dirs: counts in == counts out, batch and stream.

    .venv/bin/python bench/hostile_segments.py [--seeds 20] [--records 400] [--out DIR]

Each seed writes a ``__consumer_offsets`` log dir (offset-commit records in batches of 1-7, a
random codec per batch) and spoils it at random with what a hostile user or a careless operator
leaves there (issue 37):
- compression bombs (gzip members, zstd, LZ4 frames of 4 MiB blocks, snappy blocks whose length
  preamble claims GiBs), each a CRC-valid batch that inflates past 64 MiB;
- overlapping segments (a second file holding offsets of the first with other bytes);
- other topics' partition directories beside the offsets topic's (must not be read);
- unreadable tails in the last segment (a bad length, a zero-filled tail, a torn batch).
Then it reads the dir the batch's way (``segment_files`` + ``segment_input.landing_tables``) and
the stream's way (``segment_log.pending`` with ``final`` + ``ranges_between`` + the tasks'
``segment_task.range_items``), and checks per seed:
- batch: data records + control records + problems == records written + spoiled batches (a
  bad batch is one problem: its records cannot be counted) + overlap copies (read as records:
  the batch's position check refuses them later, by position);
- stream: data + controls + problems == the same, the overlap copies as one problem per record;
- no record of another topic, and the peak RSS stays bounded (``ru_maxrss``).
Prints one line per seed and a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import struct
import sys
import tempfile
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import cramjam
import zstandard

from coordinator_core import OffsetCommitKey, OffsetCommitValue, encode_key, encode_value
from coordinator_core import segments as S
from pipelines.inputs.segment_files import SegmentProblem, compress, segment_files
from pipelines.inputs.segment_input import landing_tables
from pipelines.inputs.segment_log import START, advance, partition_files, pending, ranges_between
from pipelines.stream.segment_task import range_items

T0 = 1_700_000_000_000
CODECS = (S.CODEC_NONE, S.CODEC_GZIP, S.CODEC_SNAPPY, S.CODEC_LZ4, S.CODEC_ZSTD)


def _record(offset: int, group: str) -> S.Record:
    key = encode_key(OffsetCommitKey(group, "orders", offset % 4))
    return S.Record(offset, T0 + offset, key, encode_value(OffsetCommitValue(offset, "", T0 + offset, version=3)))


def _batch(recs: list[S.Record], codec: int) -> bytes:
    return S.encode_batch_v2(recs, codec=codec, compress=compress)


def _with_payload(codec: int, payload: bytes, offset: int) -> bytes:
    good = bytearray(_batch([_record(offset, "bomb")], S.CODEC_NONE))
    b = bytearray(good[: S.V2_HEADER_SIZE]) + payload
    b[21:23] = struct.pack(">h", codec)
    b[8:12] = struct.pack(">i", len(b) - S.LOG_OVERHEAD)
    b[17:21] = struct.pack(">I", S.crc32c(bytes(b[21:])))
    return bytes(b)


_BOMBS: dict[str, bytes] = {}


def _bomb(kind: str) -> tuple[int, bytes]:
    """A payload inflating past the 64 MiB bound (built once per kind)."""
    if kind not in _BOMBS:
        if kind == "gzip":
            c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
            _BOMBS[kind] = (c.compress(b"\0" * (32 << 20)) + c.flush()) * 8  # 256 MiB
        elif kind == "zstd":
            _BOMBS[kind] = zstandard.ZstdCompressor().compress(b"\0" * (256 << 20))
        elif kind == "lz4":
            flg, bd = 0x60, 7 << 4
            head = struct.pack("<I", 0x184D2204) + bytes([flg, bd, (S.xxh32(bytes([flg, bd])) >> 8) & 0xFF])
            block = bytes(cramjam.lz4.compress_block(b"\0" * (4 << 20), store_size=False))
            _BOMBS[kind] = head + (struct.pack("<I", len(block)) + block) * 20 + struct.pack("<I", 0)
        else:  # snappy: a raw block whose preamble claims 4 GiB
            _BOMBS[kind] = b"\xff\xff\xff\xff\x0f\x00"
    codec = {"gzip": S.CODEC_GZIP, "zstd": S.CODEC_ZSTD, "lz4": S.CODEC_LZ4, "snappy": S.CODEC_SNAPPY}[kind]
    return codec, _BOMBS[kind]


def _tail(kind: str, rng: random.Random, offset: int) -> bytes:
    if kind == "bad length":
        return struct.pack(">qi", offset, 2_000_000_000) + b"\x00" * 4 + b"\x02" + bytes(rng.randbytes(40))
    if kind == "zero tail":
        return b"\x00" * rng.randint(20, 300)
    whole = _batch([_record(offset + i, "torn") for i in range(3)], S.CODEC_NONE)
    return whole[: rng.randint(20, len(whole) - 1)]


def write_seed(root: Path, seed: int, n: int) -> dict[str, int]:  # long: one seed's whole log dir, read top-down
    """A spoiled log dir; returns what went in (records, spoiled batches, overlap copies)."""
    rng = random.Random(seed)
    want = {"records": 0, "spoiled_batches": 0, "overlap_records": 0, "foreign": 0}
    for part in range(rng.randint(1, 3)):
        d = root / f"__consumer_offsets-{part}"
        d.mkdir(parents=True)
        body, off, first_batches = bytearray(), 0, []
        while off < n:
            if rng.random() < 0.04:  # a bomb in place of a batch
                codec, payload = _bomb(rng.choice(["gzip", "zstd", "lz4", "snappy"]))
                body += _with_payload(codec, payload, off)
                want["spoiled_batches"] += 1
                off += 1
                continue
            k = min(rng.randint(1, 7), n - off)
            recs = [_record(off + i, f"g{part}") for i in range(k)]
            first_batches.append((off, k))
            body += _batch(recs, rng.choice(CODECS))
            want["records"] += k
            off += k
        if rng.random() < 0.6:
            tail_kind = rng.choice(["bad length", "zero tail", "torn batch"])
            body += _tail(tail_kind, rng, off)
            want["spoiled_batches"] += 1
        (d / "00000000000000000000.log").write_bytes(bytes(body))
        later = [b for b in first_batches[: len(first_batches) // 2] if b[0] > 0]  # the name is the base
        if rng.random() < 0.5 and later:  # a second file over offsets of the first
            base, k = rng.choice(later)
            over = [_record(base + i, "intruder") for i in range(k)]
            (d / f"{base:020d}.log").write_bytes(_batch(over, rng.choice(CODECS)))
            want["overlap_records"] += k
    for topic in rng.sample(["orders", "__consumer_offsets_backup", "payments"], rng.randint(0, 2)):
        d = root / f"{topic}-{rng.randint(0, 5)}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "00000000000000000000.log").write_bytes(_batch([_record(i, "foreign") for i in range(5)], 0))
        want["foreign"] += 5
    return want


def read_batch(root: Path) -> dict[str, int]:
    t = landing_tables(segment_files(root))
    groups = set(t.raw.column("key").to_pylist())
    return {
        "data": t.data_records,
        "controls": t.control_records,
        "problems": t.problems.num_rows,
        "foreign": sum(1 for k in groups if k and b"foreign" in k),
    }


def read_stream(root: Path) -> dict[str, int]:
    out = {"data": 0, "controls": 0, "problems": 0, "foreign": 0}
    for _p, files in partition_files(str(root)).items():
        spans = pending(files, START, final=True)
        end, _ = advance(spans, sum(len(s) for s in spans), START)
        for item in range_items(ranges_between(files, START, end, final=True)):
            if isinstance(item, SegmentProblem):
                out["problems"] += 1
            elif item.control_type is not None:
                out["controls"] += 1
            else:
                out["data"] += 1
                out["foreign"] += b"foreign" in item.key
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--records", type=int, default=400, help="records per partition")
    ap.add_argument("--out", default=None, help="keep the log dirs here (default: a temp dir)")
    args = ap.parse_args()
    base = Path(args.out or tempfile.mkdtemp(prefix="hostile-segments-"))
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    failures, rows = 0, []
    t0 = time.perf_counter()
    for seed in range(args.seeds):
        root = base / f"seed-{seed}"
        want = write_seed(root, seed, args.records)
        batch, stream = read_batch(root), read_stream(root)
        # batch: overlap copies are records here (the ingest's position check refuses them)
        batch_in = want["records"] + want["spoiled_batches"] + want["overlap_records"]
        batch_out = batch["data"] + batch["controls"] + batch["problems"]
        stream_in = want["records"] + want["spoiled_batches"] + want["overlap_records"]
        stream_out = stream["data"] + stream["controls"] + stream["problems"]
        ok = (
            batch_in == batch_out
            and stream_in == stream_out
            and stream["data"] == want["records"]
            and batch["foreign"] == stream["foreign"] == 0
        )
        failures += not ok
        row = {"seed": seed, "want": want, "batch": batch, "stream": stream, "ok": ok}
        rows.append(row)
        print(
            f"seed {seed:3d}: in {want['records']} records + {want['spoiled_batches']} spoiled batches + "
            f"{want['overlap_records']} overlap copies ({want['foreign']} foreign records beside) | "
            f"batch out {batch_out} | stream out {stream_out} (data {stream['data']}, problems {stream['problems']}) "
            f"{'ok' if ok else 'MISMATCH'}",
            flush=True,
        )
    growth_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
    summary = {
        "seeds": args.seeds,
        "failures": failures,
        "seconds": round(time.perf_counter() - t0, 1),
        "peak_rss_growth_mb": round(growth_mb, 1),
        "spoiled_batches": sum(r["want"]["spoiled_batches"] for r in rows),
        "overlap_records": sum(r["want"]["overlap_records"] for r in rows),
        "foreign_records_beside": sum(r["want"]["foreign"] for r in rows),
        "records": sum(r["want"]["records"] for r in rows),
    }
    print(json.dumps(summary))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
