"""Nothing lost, round two (issue 37, items 3, 4, 5): broker log dirs as a hostile user leaves
them. Overlapping segments and unreadable tails are read by the stream as the batch reads them
(nothing dropped, every record counted), other topics' directories are never read as offsets,
and a compression bomb is quarantined within a bounded memory."""

from __future__ import annotations

import json
import logging
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

from coordinator_core import segments as S
from tests.pipelines.test_batch_segments import _commit

REPO = Path(__file__).resolve().parents[2]
SPARK = pytest.mark.spark
N = 60  # offsets 0..N-1 in the first segment


def _batches(offsets: range, group: str, per: int = 5) -> bytes:
    recs = [_commit(o, group, o % 3, 1000 + o) for o in offsets]
    return b"".join(S.encode_batch_v2(recs[i : i + per]) for i in range(0, len(recs), per))


def _overlapping_log_dir(landing: Path) -> None:
    """Partition 0: offsets 0..N-1, then a second file holding offsets 5..9 with other bytes;
    partition 1: a plain segment; plus another topic's directory beside them."""
    p0 = landing / "__consumer_offsets-0"
    p0.mkdir(parents=True)
    (p0 / "00000000000000000000.log").write_bytes(_batches(range(N), "g"))
    (p0 / "00000000000000000005.log").write_bytes(_batches(range(5, 10), "intruder"))
    p1 = landing / "__consumer_offsets-1"
    p1.mkdir()
    (p1 / "00000000000000000000.log").write_bytes(_batches(range(10), "h"))
    app = landing / "orders-0"  # an application topic's partition, copied with the log dir
    app.mkdir()
    (app / "00000000000000000000.log").write_bytes(_batches(range(7), "app"))


def _conf(tmp: Path, root: str, landing: Path, extra: str = "") -> Path:
    conf = tmp / f"{root}.yaml"
    conf.write_text(
        f"paths:\n  root: {tmp / root}\ninput:\n  path: {landing}\nstream:\n  watermark_delay_ms: 5000\n{extra}"
    )
    return conf


def _table(warehouse: Path, name: str) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    path = warehouse / name
    return DeltaTable(str(path)).to_pyarrow_table().to_pylist() if (path / "_delta_log").is_dir() else []


@SPARK
def test_the_stream_over_overlapping_segments_drops_nothing_and_reads_no_other_topic(
    tmp_path: Path, spark: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from pipelines.config import load_config
    from pipelines.jobs import stream as stream_job

    landing = tmp_path / "landing"
    _overlapping_log_dir(landing)
    cfg = load_config(_conf(tmp_path, "stream", landing, "  max_bytes_per_trigger: 400\n"))
    with caplog.at_level(logging.WARNING):
        run = stream_job.run(spark, cfg, available_now=True, poll_seconds=0.5)
    wh = tmp_path / "stream" / "warehouse"
    commits = _table(wh, "offset_commits")
    by_part = {p: sorted(r["log_offset"] for r in commits if r["coordinator_partition"] == p) for p in (0, 1)}
    assert by_part[0] == list(range(N)) and by_part[1] == list(range(10))  # offsets 10..N-1 read
    assert not any(r["group_id"] in ("intruder", "app") for r in commits)
    bad = _table(wh, "ingest_quarantine")
    assert sorted((r["reason"], r["partition"], r["offset"]) for r in bad) == [
        ("overlapping_segment", 0, o) for o in range(5, 10)
    ]
    assert all(r["key"] and r["value"] and "00000000000000000005.log" in r["source_file"] for r in bad)
    counted = run.counted
    records, replayed, _dups, refused = (sum(c[i] for c in counted) for i in range(1, 5))
    assert (records, replayed, refused) == (N + 5 + 10, N + 10, 5)  # counts in == out
    assert any("orders-0" in m and "other topics" in m for m in caplog.messages)


@SPARK
def test_the_batch_over_the_same_log_dir_reads_no_other_topic_and_says_refused_not_compacted(
    tmp_path: Path, spark: Any
) -> None:
    from pipelines.config import load_config
    from pipelines.jobs.batch import run_batch

    landing = tmp_path / "landing"
    _overlapping_log_dir(landing)
    cfg = load_config(_conf(tmp_path, "batch", landing))
    summary = run_batch(cfg, spark)
    raw = _table(tmp_path / "batch" / "warehouse", "raw_records")
    assert {r["topic"] for r in raw} == {"__consumer_offsets"}
    # the stream's rule for a second copy: the first copy in log order read, the later one quarantined
    assert sorted(r["offset"] for r in raw if r["partition"] == 0) == list(range(N)) and len(raw) == N + 10
    bad = _table(tmp_path / "batch" / "warehouse", "ingest_quarantine")
    assert sorted((r["reason"], r["partition"], r["offset"]) for r in bad) == [
        ("overlapping_segment", 0, o) for o in range(5, 10)
    ]
    # nothing is said to be the log cleaner's work
    said = " ".join(summary.warnings)
    assert "log cleaner" not in said and "transaction markers" not in said, summary.warnings
    (p0,) = [r for r in _table(tmp_path / "batch" / "warehouse", "log_partitions") if r["log_partition"] == 0]
    assert (p0["missing_offsets"], p0["compacted"]) == (0, False)


def _content(warehouse: Path, name: str, drop: tuple[str, ...] = ()) -> list[tuple[Any, ...]]:
    rows = _table(warehouse, name)
    return sorted(tuple((k, repr(v)) for k, v in sorted(r.items()) if k not in drop) for r in rows)


@SPARK
def test_the_batch_and_the_stream_give_equal_tables_on_overlapping_segments(tmp_path: Path, spark: Any) -> None:
    """One rule for both (``segment_log.overlap_starts``): the first copy in log order is read,
    the later copy's records are quarantined as ``overlapping_segment``; counts in == out."""
    from pipelines.config import load_config
    from pipelines.jobs import stream as stream_job
    from pipelines.jobs.batch import run_batch

    landing = tmp_path / "landing"
    _overlapping_log_dir(landing)
    run = stream_job.run(
        spark,
        load_config(_conf(tmp_path, "stream", landing, "  max_bytes_per_trigger: 400\n")),
        available_now=True,
        poll_seconds=0.5,
    )
    run_batch(load_config(_conf(tmp_path, "batch", landing)), spark)
    stream_wh, batch_wh = tmp_path / "stream" / "warehouse", tmp_path / "batch" / "warehouse"
    for name in ("offset_commits", "offsets_current", "group_metadata", "raw_transactions"):
        assert _content(stream_wh, name) == _content(batch_wh, name), name
    assert len(_table(batch_wh, "offset_commits")) == N + 10
    # quarantine: the same records, reasons and files (run ids and hashes are per job)
    quarantine = ("run_id", "record_id", "detail")
    assert _content(stream_wh, "ingest_quarantine", quarantine) == _content(batch_wh, "ingest_quarantine", quarantine)
    assert len(_table(batch_wh, "ingest_quarantine")) == 5
    records, replayed, _dups, refused = (sum(c[i] for c in run.counted) for i in range(1, 5))
    assert records == replayed + refused == N + 5 + 10


@SPARK
def test_a_five_record_bad_batch_is_refused_as_five_offsets_not_compaction(tmp_path: Path, spark: Any) -> None:
    """Issue 37 item 8: a quarantined batch accounts every offset it held (base..base+delta
    from its header), so none of them is called the log cleaner's work."""
    from pipelines.config import load_config
    from pipelines.jobs.batch import run_batch

    landing = tmp_path / "landing"
    p0 = landing / "__consumer_offsets-0"
    p0.mkdir(parents=True)
    bad = bytearray(_batches(range(5, 10), "g"))
    bad[-1] ^= 0xFF  # CRC mismatch, header intact
    (p0 / "00000000000000000000.log").write_bytes(_batches(range(5), "g") + bytes(bad) + _batches(range(10, 15), "g"))
    summary = run_batch(load_config(_conf(tmp_path, "batch", landing)), spark)
    wh = tmp_path / "batch" / "warehouse"
    (q,) = _table(wh, "ingest_quarantine")
    assert (q["reason"], q["offset"]) == ("bad_batch", 5) and q["detail"].endswith("; offsets 5..9")
    (p,) = _table(wh, "log_partitions")
    assert (p["missing_offsets"], p["gaps"], p["compacted"]) == (0, 0, False)
    said = " ".join(summary.warnings)
    assert "log cleaner" not in said and "transaction markers" not in said, summary.warnings
    assert "5 offsets refused or quarantined" in said, summary.warnings
    assert "1 unreadable broker segment batches quarantined, 5 offsets" in said, summary.warnings
    assert summary.bad_batches == 1 and summary.refused == 0


def _torn_tails(landing: Path) -> dict[str, int]:
    """Three partitions whose last segment ends in bytes no batch can be read from."""
    tails = {
        "bad length": struct.pack(">qi", 100, 2_000_000_000) + b"\x00" * 4 + b"\x02" + b"\x00" * 60,
        "zero tail": b"\x00" * 200,
        "torn batch": _batches(range(100, 105), "torn")[:-7],
    }
    sizes = {}
    for n, (name, tail) in enumerate(tails.items()):
        d = landing / f"__consumer_offsets-{n}"
        d.mkdir(parents=True)
        body = _batches(range(20), f"g{n}")
        (d / "00000000000000000000.log").write_bytes(body + tail)
        sizes[name] = len(body)
    return sizes


def test_an_unreadable_tail_warns_in_a_running_stream_and_is_read_by_a_finite_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from pipelines.inputs.segment_log import START, UNREADABLE, partition_files, pending

    _torn_tails(tmp_path)
    files = partition_files(str(tmp_path))
    assert sorted(files) == [0, 1, 2]
    for p, fs in files.items():
        with caplog.at_level(logging.WARNING, logger="offsetlake.stream"):
            live = pending(fs, START)
        assert not any((s.attrs == UNREADABLE).any() for s in live)
        assert any("cannot advance past byte" in m and fs[0][1] in m for m in caplog.messages), p
        final = pending(fs, START, final=True)
        assert (final[-1].attrs[-1], final[-1].end[-1]) == (UNREADABLE, os.path.getsize(fs[0][1]))


@SPARK
def test_the_stream_quarantines_unreadable_tails_as_the_batch_does(tmp_path: Path, spark: Any) -> None:
    from pipelines.config import load_config
    from pipelines.jobs import stream as stream_job
    from pipelines.jobs.batch import run_batch

    landing = tmp_path / "landing"
    _torn_tails(landing)
    run = stream_job.run(spark, load_config(_conf(tmp_path, "stream", landing)), available_now=True, poll_seconds=0.5)
    run_batch(load_config(_conf(tmp_path, "batch", landing)), spark)

    def bad(root: str) -> list[tuple[Any, ...]]:
        rows = _table(tmp_path / root / "warehouse", "ingest_quarantine")
        return sorted((r["reason"], r["partition"], r["source_file"], r["value"]) for r in rows)

    assert len(bad("stream")) == 3 and bad("stream") == bad("batch")
    assert len(_table(tmp_path / "stream" / "warehouse", "offset_commits")) == 60
    records, replayed, _dups, refused = (sum(c[i] for c in run.counted) for i in range(1, 5))
    assert (records, replayed, refused) == (63, 60, 3)


# --------------------------------------------------------------------------------------------
# other topics (item 4)


def test_a_log_dir_is_read_for_the_configured_topic_only_with_one_line_naming_the_rest(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipelines.cli import main
    from pipelines.errors import UsageError
    from pipelines.inputs.segment_files import segment_files

    _overlapping_log_dir(tmp_path / "logs")
    backup = tmp_path / "logs" / "__consumer_offsets_backup-0"
    backup.mkdir()
    (backup / "00000000000000000000.log").write_bytes(_batches(range(3), "backup"))
    with caplog.at_level(logging.WARNING):
        files = segment_files(tmp_path / "logs")
    assert {f.parent.name for f in files} == {"__consumer_offsets-0", "__consumer_offsets-1"}
    (line,) = [m for m in caplog.messages if "other topics" in m]
    assert "__consumer_offsets_backup-0" in line and "orders-0" in line
    assert {f.parent.name for f in segment_files(tmp_path / "logs", "orders")} == {"orders-0"}
    with pytest.raises(UsageError, match="not '__consumer_offsets'"):
        segment_files(tmp_path / "logs" / "orders-0")
    # offsetlake decode --input DIR: the offsets topic's records only
    capsys.readouterr()
    assert main(["decode", "--input", str(tmp_path / "logs")]) == 0
    out = capsys.readouterr().out
    lines = [json.loads(x) for x in out.splitlines() if x.strip()]
    assert len(lines) == N + 5 + 10
    assert "app" not in out and "backup" not in out


# --------------------------------------------------------------------------------------------
# compression bombs (item 5)

_BOMB_READER = """
import json, resource, sys
from pipelines.inputs.segment_files import SegmentProblem, read_segment_items
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
items = list(read_segment_items(sys.argv[1]))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
probs = [i.reason for i in items if isinstance(i, SegmentProblem)]
print(json.dumps({"growth_kb": after - before, "records": len(items) - len(probs), "problems": probs}))
"""


def _with_payload(codec: int, payload: bytes, offset: int) -> bytes:
    good = bytearray(S.encode_batch_v2([_commit(offset, "b", 0, 1)]))
    batch = bytearray(good[: S.V2_HEADER_SIZE]) + payload
    batch[21:23] = struct.pack(">h", codec)  # attributes: the codec
    batch[8:12] = struct.pack(">i", len(batch) - S.LOG_OVERHEAD)
    batch[17:21] = struct.pack(">I", S.crc32c(bytes(batch[21:])))
    return bytes(batch)


def test_compression_bombs_are_quarantined_with_bounded_memory(tmp_path: Path) -> None:
    import zstandard

    member = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    one = member.compress(b"\0" * (64 << 20)) + member.flush()  # 64 MiB in ~64 KB
    gzip_bomb = one * 40  # 2.5 GiB in ~2.6 MB: the trial's 6.4 GB RSS
    zstd_bomb = zstandard.ZstdCompressor().compress(b"\0" * (1 << 30))  # 1 GiB
    snappy_lie = b"\xff\xff\xff\xff\x0f\x00"  # a raw snappy block claiming 4 GiB
    d = tmp_path / "__consumer_offsets-0"
    d.mkdir()
    (d / "00000000000000000000.log").write_bytes(
        _batches(range(5), "g")
        + _with_payload(S.CODEC_GZIP, gzip_bomb, 5)
        + _with_payload(S.CODEC_ZSTD, zstd_bomb, 6)
        + _with_payload(S.CODEC_SNAPPY, snappy_lie, 7)
        + _batches(range(8, 13), "g")
    )
    assert os.path.getsize(d / "00000000000000000000.log") > 2_500_000
    res = subprocess.run(
        [sys.executable, "-c", _BOMB_READER, str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout)
    assert got["records"] == 10
    assert len(got["problems"]) == 3 and all("inflates past" in p for p in got["problems"]), got
    assert got["growth_kb"] < 400 * 1024, got  # a 64 MiB bound, a few copies: never the bomb's GiBs


def test_the_stream_plan_reads_every_record_past_an_earlier_segments_tail_and_an_overlap(tmp_path: Path) -> None:
    """Found by bench/hostile_segments.py: a torn tail in the first segment (its span ends at the
    next segment's base) then an overlapping second segment: the next offset never goes back."""
    from pipelines.inputs.segment_files import SegmentProblem
    from pipelines.inputs.segment_log import START, advance, partition_files, pending, ranges_between
    from pipelines.stream.segment_task import range_items

    d = tmp_path / "__consumer_offsets-0"
    d.mkdir()
    (d / "00000000000000000000.log").write_bytes(_batches(range(N), "g") + b"\x00" * 50)
    (d / "00000000000000000007.log").write_bytes(_batches(range(7, 11), "intruder"))
    files = partition_files(str(tmp_path))[0]
    spans = pending(files, START, final=True)
    end, _ = advance(spans, sum(len(s) for s in spans), START)
    assert end[0] == N
    items = range_items(ranges_between(files, START, end, final=True))
    data = sorted(i.offset for i in items if not isinstance(i, SegmentProblem))
    probs = [i for i in items if isinstance(i, SegmentProblem)]
    assert data == list(range(N)) and len(probs) == 1 + 4  # the tail, the 4 overlapping copies
