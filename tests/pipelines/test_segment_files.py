"""Broker log segments as input: partition directories, every codec, control records, bad batches."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from coordinator_core import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_key,
    encode_value,
)
from coordinator_core import segments as S
from pipelines.cli import main
from pipelines.errors import UsageError
from pipelines.inputs.raw_files import iter_raw_batches, read_raw_records
from pipelines.inputs.segment_files import (
    SEGMENT_PROBLEMS_SCHEMA,
    SEGMENT_RECORDS_SCHEMA,
    SegmentProblem,
    SegmentRecord,
    compress,
    read_segment_items,
    segment_tables,
)

T0 = 1_700_000_000_000


def _commit(group: str, partition: int, offset: int) -> tuple[bytes, bytes]:
    return (
        encode_key(OffsetCommitKey(group, "orders", partition)),
        encode_value(OffsetCommitValue(offset, "", T0, leader_epoch=1, version=3)),
    )


def _recs(base: int, n: int, group: str = "billing") -> list[S.Record]:
    return [S.Record(base + i, T0 + base + i, *_commit(group, i % 3, 100 + base + i)) for i in range(n)]


def _write_log_dir(root: Path) -> dict[str, int]:
    """Two partitions of a broker log dir: every codec, a transaction with its COMMIT, a
    tombstone, a v1 wrapper, one corrupt batch and a truncated tail. Returns expected counts."""
    p7 = root / "__consumer_offsets-7"
    p7.mkdir(parents=True)
    group_key = encode_key(GroupMetadataKey("billing"))
    group_val = encode_value(GroupMetadataValue("consumer", 1, None, None, version=3, current_state_timestamp=T0))
    first = b"".join(
        [
            S.encode_batch_v2(_recs(0, 3)),
            S.encode_batch_v2(_recs(3, 3), codec=S.CODEC_GZIP),
            S.encode_batch_v2(_recs(6, 3), codec=S.CODEC_SNAPPY, compress=compress),
            S.encode_batch_v2(_recs(9, 3), codec=S.CODEC_LZ4, compress=compress),
            S.encode_batch_v2(_recs(12, 3), codec=S.CODEC_ZSTD, compress=compress),
            S.encode_batch_v2([S.Record(15, T0 + 15, group_key, group_val), S.Record(16, T0 + 16, group_key, None)]),
        ]
    )
    (p7 / "00000000000000000000.log").write_bytes(first)
    corrupt = bytearray(S.encode_batch_v2(_recs(22, 2)))
    corrupt[-3] ^= 0x40
    second = b"".join(
        [
            S.encode_batch_v2(_recs(17, 2, "payments"), transactional=True, producer_id=5001, producer_epoch=2),
            S.encode_control_batch(
                S.CONTROL_COMMIT,
                offset=19,
                timestamp_ms=T0 + 19,
                producer_id=5001,
                producer_epoch=2,
                coordinator_epoch=3,
            ),
            S.encode_legacy(_recs(20, 2), magic=1, codec=S.CODEC_LZ4, compress=compress),
            bytes(corrupt),
            S.encode_batch_v2(_recs(24, 2))[:-7],
        ]
    )
    (p7 / "00000000000000000017.log").write_bytes(second)
    (p7 / "00000000000000000017.index").write_bytes(b"\x00" * 8)  # not a segment: ignored
    p12 = root / "__consumer_offsets-12"
    p12.mkdir()
    (p12 / "00000000000000000000.log").write_bytes(S.encode_batch_v2(_recs(0, 4, "search")))
    (root / "cleaner-offset-checkpoint").write_text("0\n")
    return {"data": 17 + 2 + 2 + 4, "control": 1, "problems": 2}


def test_a_broker_log_dir_reads_every_codec_with_partitions_from_directory_names(tmp_path: Path) -> None:
    want = _write_log_dir(tmp_path)
    items = list(read_segment_items(tmp_path))
    recs = [i for i in items if isinstance(i, SegmentRecord)]
    problems = [i for i in items if isinstance(i, SegmentProblem)]
    data = [r for r in recs if r.control_type is None]
    assert (len(data), len(recs) - len(data), len(problems)) == (want["data"], want["control"], want["problems"])
    assert [(r.partition, r.offset) for r in data] == [(7, o) for o in range(21 + 1) if o != 19] + [
        (12, o) for o in range(4)
    ]
    assert {r.codec for r in data} == {0, 1, 2, 3, 4}
    assert data[16].value is None and data[16].key == encode_key(GroupMetadataKey("billing"))  # tombstone
    txn = [r for r in data if r.is_transactional]
    assert [(r.offset, r.producer_id, r.producer_epoch) for r in txn] == [(17, 5001, 2), (18, 5001, 2)]
    (marker,) = [r for r in recs if r.control_type is not None]
    assert (marker.control_name, marker.offset, marker.producer_id, marker.coordinator_epoch) == ("COMMIT", 19, 5001, 3)
    crc, tail = problems
    assert "CRC-32C mismatch" in crc.reason and crc.partition == 7 and crc.base_offset == 22
    assert crc.source_file.endswith("__consumer_offsets-7/00000000000000000017.log")
    assert tail.reason.startswith("truncated") and tail.position > crc.position


def test_segment_tables_keep_producer_and_control_columns_and_problems_with_bytes(tmp_path: Path) -> None:
    _write_log_dir(tmp_path)
    records, problems = segment_tables(tmp_path)
    assert records.schema.equals(SEGMENT_RECORDS_SCHEMA) and problems.schema.equals(SEGMENT_PROBLEMS_SCHEMA)
    assert records.num_rows == 26 and problems.num_rows == 2
    rows = records.to_pylist()
    assert rows[19]["control_name"] == "COMMIT" and rows[19]["is_transactional"]
    assert rows[17]["producer_id"] == 5001 and rows[0]["producer_id"] == -1
    raw = (tmp_path / "__consumer_offsets-7" / "00000000000000000017.log").read_bytes()
    for p in problems.to_pylist():
        assert raw[p["position"] : p["position"] + p["length"]] == p["data"]


def test_raw_files_read_a_log_dir_as_data_records_in_the_raw_shape(tmp_path: Path) -> None:
    _write_log_dir(tmp_path)
    recs = list(read_raw_records(tmp_path))
    assert len(recs) == 25 and {r.partition for r in recs} == {7, 12}
    assert 19 not in {r.offset for r in recs if r.partition == 7}  # the COMMIT marker is no data record
    assert recs[0].key == _commit("billing", 0, 100)[0] and recs[0].timestamp_ms == T0
    table = pa.Table.from_batches(list(iter_raw_batches(tmp_path / "__consumer_offsets-7", positions="required")))
    assert table.num_rows == 21 and set(table.column("partition").to_pylist()) == {7}


def test_a_segment_outside_its_partition_directory_is_refused_where_positions_are_required(tmp_path: Path) -> None:
    loose = tmp_path / "00000000000000000000.log"
    loose.write_bytes(S.encode_batch_v2(_recs(0, 2)))
    with pytest.raises(UsageError, match="cannot tell the partition"):
        list(iter_raw_batches(loose, positions="required"))
    assert [r.partition for r in read_raw_records(loose)] == [0, 0]  # the one-file commands' line mode
    synth = pa.Table.from_batches(list(iter_raw_batches(loose, positions="synthesize")))
    assert set(synth.column("topic").to_pylist()) == {"synthetic:00000000000000000000.log"}


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out.splitlines(), err


def test_decode_prints_a_segment_with_control_records_and_bad_batches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_log_dir(tmp_path)
    seg = tmp_path / "__consumer_offsets-7" / "00000000000000000017.log"
    rc, lines, err = _cli(capsys, "decode", "--input", str(seg))
    objs = [json.loads(line) for line in lines]
    assert rc == 0 and len(objs) == 2 + 1 + 2 + 2
    assert objs[0]["key"]["data"] == {"group": "payments", "topic": "orders", "partition": 0}
    assert objs[2]["control"] == {
        "type": "COMMIT",
        "typeId": 1,
        "coordinatorEpoch": 3,
        "producerId": 5001,
        "producerEpoch": 2,
    }
    assert objs[2]["position"] == {"partition": 7, "offset": 19, "timestamp": T0 + 19}
    bad = [o for o in objs if "error" in o]
    assert [o["error"]["class"] for o in bad] == ["BadBatch", "BadBatch"]
    assert (
        bad[0]["error"]["file"] == str(seg)
        and bytes.fromhex(bad[0]["dataHex"])
        == seg.read_bytes()[bad[0]["error"]["position"] : bad[0]["error"]["position"] + bad[0]["error"]["length"]]
    )
    assert "decoded 4 records (0 corrupt, 1 control records, 2 unreadable batches)" in err


def test_decode_rich_shows_a_segment_records_producer_state(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write_log_dir(tmp_path)
    rc, lines, _ = _cli(capsys, "decode", "--format", "rich", "--input", str(tmp_path / "__consumer_offsets-7"))
    txn = [json.loads(line) for line in lines if '"transactional":true' in line and "control" not in line]
    assert rc == 0 and [o["position"]["offset"] for o in txn] == [17, 18]
    assert txn[0]["segment"]["producerId"] == 5001 and txn[0]["segment"]["codec"] == "none"


def test_decode_strict_stops_at_a_bad_batch_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write_log_dir(tmp_path)
    rc, _, err = _cli(capsys, "decode", "--strict", "--input", str(tmp_path / "__consumer_offsets-7"))
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "CRC-32C mismatch" in err


def test_a_text_file_named_log_is_one_usage_error_not_a_quarantined_segment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "server.log"
    log.write_text("[2026-11-23 19:00:00,000] INFO starting (kafka.server.KafkaServer)\n")
    rc, lines, err = _cli(capsys, "decode", "--input", str(log))
    assert rc == 2 and lines == [] and len(err.strip().splitlines()) == 1
    assert "server.log: not a Kafka log segment" in err


def test_a_generated_log_as_broker_segments_replays_exactly_like_its_parquet_landing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from coordinator_core.simulator.generator import generate
    from pipelines.inputs.raw_files import RawRecord, write_raw_records

    log = generate(6, 0.5, seed=18)
    rows = sorted(zip(log.partitions, log.offsets, log.timestamps, log.keys, log.values))
    write_raw_records([RawRecord(k, v, "__consumer_offsets", p, o, t) for p, o, t, k, v in rows], tmp_path / "landing")
    codecs = [S.CODEC_NONE, S.CODEC_GZIP, S.CODEC_SNAPPY, S.CODEC_LZ4, S.CODEC_ZSTD]
    by_partition: dict[int, list[S.Record]] = {}
    for p, o, t, k, v in rows:
        by_partition.setdefault(p, []).append(S.Record(o, t, k, v))
    for p, recs in by_partition.items():  # the coordinator writes one batch per request: here 1-7 records
        d = tmp_path / "logdir" / f"__consumer_offsets-{p}"
        d.mkdir(parents=True)
        parts, i = [], 0
        while i < len(recs):
            n = 1 + (recs[i].offset % 7)
            parts.append(S.encode_batch_v2(recs[i : i + n], codec=codecs[i % 5], compress=compress))
            i += n
        (d / "00000000000000000000.log").write_bytes(b"".join(parts))
    assert list(read_raw_records(tmp_path / "logdir")) == list(read_raw_records(tmp_path / "landing"))
    outs = []
    for src in ("landing", "logdir"):
        assert main(["replay", "--input", str(tmp_path / src)]) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] and outs[0].count("\n") >= 6


def test_the_stream_job_reads_segments_but_refuses_a_landing_mixing_them_with_raw_record_files(tmp_path: Path) -> None:
    """The stream reads a landing of segments with its segment source (``test_stream_segments``);
    segments next to raw-record files are one clear error before it starts (one reader per
    stream), never a run that silently reads one kind only."""
    from pipelines.config import load_config
    from pipelines.stream.settings import settings_from_config

    landing = tmp_path / "landing"
    landing.mkdir()
    _write_log_dir(landing)
    conf = tmp_path / "c.yaml"
    conf.write_text(f"paths:\n  root: {tmp_path / 'data'}\ninput:\n  path: {landing}\n")
    assert settings_from_config(load_config(conf)).landing_kind == "segments"
    (landing / "part-0.parquet").write_bytes(b"PAR1")
    with pytest.raises(UsageError, match="holds both broker log segments and raw-record files"):
        settings_from_config(load_config(conf))
