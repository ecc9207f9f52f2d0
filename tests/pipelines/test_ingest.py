"""Ingest into raw_records: idempotent on (topic, partition, offset), Parquet and JSON-lines landing."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

from pipelines.batch.ingest import ingest, normalize  # noqa: E402
from pipelines.batch.ingest_sources import read_landing  # noqa: E402
from pipelines.config import Config, load_config  # noqa: E402
from pipelines.errors import UsageError  # noqa: E402
from pipelines.inputs.raw_files import RawRecord, write_raw_records  # noqa: E402
from pipelines.tableio import TableIO  # noqa: E402


def _records(start: int, n: int, partition: int = 0) -> list[RawRecord]:
    return [
        RawRecord(
            b"\x00\x01key%d" % i,
            None if i % 7 == 0 else b"val%d" % i,
            "__consumer_offsets",
            partition,
            i,
            1_700_000_000_000 + i,
        )
        for i in range(start, start + n)
    ]


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    return load_config(overrides={"paths.root": str(tmp_path)})


def _positions(io: TableIO) -> list[tuple[int, int]]:
    return sorted((r["partition"], r["offset"]) for r in io.read("raw_records").collect())


def test_rerun_over_the_same_landing_appends_nothing(cfg: Config, spark: Any) -> None:
    write_raw_records(_records(0, 50) + _records(0, 30, partition=3), cfg.paths.landing)
    io = TableIO(cfg, spark)
    first = ingest(spark, cfg, io)
    assert (first.records_read, first.records_new, first.raw_total) == (80, 80, 80)
    version = io.version("raw_records")
    second = ingest(spark, cfg, io)
    assert (second.records_read, second.records_new, second.raw_total) == (80, 0, 80)
    assert io.version("raw_records") == version  # no empty commit either


def test_duplicates_inside_and_across_inputs_are_dropped(cfg: Config, spark: Any) -> None:
    landing = Path(cfg.paths.landing)
    write_raw_records(_records(0, 40), landing)
    write_raw_records(_records(20, 40), landing)  # overlaps 20..39 inside one input
    io = TableIO(cfg, spark)
    res = ingest(spark, cfg, io)
    assert res.records_read == 80 and res.records_new == 60 and res.duplicates == 20
    write_raw_records(_records(50, 30), landing)  # overlaps 50..59 with the table
    res2 = ingest(spark, cfg, io)
    assert res2.records_new == 20
    assert _positions(io) == [(0, i) for i in range(80)]
    # the refused one-pass copies left no file behind: the directory holds the snapshot only
    table = Path(io.path("raw_records"))
    assert {p.name for p in table.glob("*.parquet")} == {Path(f).name for f in io.snapshot_files("raw_records") or []}


def test_ingested_bytes_are_untouched(cfg: Config, spark: Any) -> None:
    recs = _records(0, 10)
    write_raw_records(recs, cfg.paths.landing)
    io = TableIO(cfg, spark)
    ingest(spark, cfg, io)
    got = {r["offset"]: (r["key"], r["value"], r["timestamp"]) for r in io.read("raw_records").collect()}
    for rec in recs:
        key, value, ts = got[rec.offset]
        assert (bytes(key), None if value is None else bytes(value)) == (rec.key, rec.value)
        assert int(ts.replace(tzinfo=dt.UTC).timestamp() * 1000) == rec.timestamp_ms


def test_json_lines_landing_with_hex_and_base64(cfg: Config, spark: Any) -> None:
    import base64

    landing = Path(cfg.paths.landing)
    landing.mkdir(parents=True)
    lines = [
        {"key": "0001abcd", "value": "0003ff", "partition": 2, "offset": 5, "timestamp": 1_700_000_000_000},
        {
            "key": base64.b64encode(b"\x00\x02g").decode(),
            "value": None,
            "encoding": "base64",
            "partition": 2,
            "offset": 6,
            "timestamp": 1_700_000_000_001,
        },
    ]
    (landing / "capture.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    io = TableIO(cfg, spark)
    res = ingest(spark, cfg, io)
    assert res.records_new == 2
    rows = {r["offset"]: r for r in io.read("raw_records").collect()}
    assert bytes(rows[5]["key"]) == bytes.fromhex("0001abcd") and bytes(rows[5]["value"]) == bytes.fromhex("0003ff")
    assert bytes(rows[6]["key"]) == b"\x00\x02g" and rows[6]["value"] is None


def test_normalize_drops_kafka_headers_and_defaults_topic(spark: Any) -> None:
    df = spark.createDataFrame(
        [(b"k", b"v", 1, 10, None, [("h", b"x")])],
        "key binary, value binary, partition int, offset bigint, timestamp timestamp, "
        "headers array<struct<key:string,value:binary>>",
    )
    out = normalize(df)
    assert out.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    row = out.collect()[0]
    assert row["topic"] == "__consumer_offsets" and row["timestampType"] == 0


def test_missing_landing_directory_is_a_usage_error(cfg: Config, spark: Any) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        read_landing(spark, cfg.paths.landing)


def test_delta_source_that_is_the_raw_table_itself_ingests_nothing(cfg: Config, spark: Any) -> None:
    write_raw_records(_records(0, 5), cfg.paths.landing)
    io = TableIO(cfg, spark)
    ingest(spark, cfg, io)
    cfg2 = cfg.with_overrides({"input.source": "delta"})
    res = ingest(spark, cfg2, TableIO(cfg2, spark))
    assert res.records_new == 0 and res.raw_total == 5


def test_delta_source_elsewhere_is_copied_idempotently(cfg: Config, spark: Any, tmp_path: Path) -> None:
    other = load_config(overrides={"paths.root": str(tmp_path / "other")})
    write_raw_records(_records(0, 12), other.paths.landing)
    ingest(spark, other, TableIO(other, spark))
    cfg2 = cfg.with_overrides({"input.source": "delta", "input.path": other.table_path("raw_records")})
    io = TableIO(cfg2, spark)
    assert ingest(spark, cfg2, io).records_new == 12
    assert ingest(spark, cfg2, io).records_new == 0


def test_kafka_jvm_source_without_connector_jar_says_what_to_do(cfg: Config, spark: Any) -> None:
    cfg2 = cfg.with_overrides(
        {"input.source": "kafka", "kafka.engine": "jvm", "kafka.bootstrap_servers": "localhost:9092"}
    )
    with pytest.raises(UsageError, match="spark-sql-kafka"):
        ingest(spark, cfg2, TableIO(cfg2, spark))


def test_a_position_repeated_inside_one_file_is_ingested_once(cfg: Config, spark: Any) -> None:
    recs = _records(0, 10)
    write_raw_records([*recs[:6], recs[3], *recs[6:]], cfg.paths.landing)  # offset 3 twice, one file
    io = TableIO(cfg, spark)
    res = ingest(spark, cfg, io)
    assert (res.records_read, res.records_new, res.raw_total) == (11, 10, 10)
    assert _positions(io) == [(0, i) for i in range(10)]


def test_input_filling_a_gap_between_ingested_ranges_is_appended_whole(cfg: Config, spark: Any) -> None:
    landing = Path(cfg.paths.landing)
    write_raw_records(_records(0, 10) + _records(30, 10), landing)
    io = TableIO(cfg, spark)
    ingest(spark, cfg, io)
    for f in landing.iterdir():
        f.unlink()
    write_raw_records(_records(10, 20), landing)  # inside the table's 0..39 range, no duplicate
    res = ingest(spark, cfg, io)
    assert (res.records_read, res.records_new, res.raw_total) == (20, 20, 40)
    assert _positions(io) == [(0, i) for i in range(40)]


def test_input_without_duplicates_is_appended_in_source_order(cfg: Config, spark: Any) -> None:
    # two log partitions interleaved, each in offset order: no shuffle, so files keep that order
    recs = [r for pair in zip(_records(0, 40, partition=1), _records(0, 40, partition=2), strict=True) for r in pair]
    write_raw_records(recs, cfg.paths.landing)
    io = TableIO(cfg, spark)
    assert ingest(spark, cfg, io).records_new == 80
    got = [(r["partition"], r["offset"]) for r in io.read("raw_records").collect()]
    assert got == [(r.partition, r.offset) for r in recs]


def test_position_ranges_report_repeats_and_overlaps(spark: Any) -> None:
    from pipelines.batch.positions import PositionRange, position_ranges, ranges_disjoint

    df = spark.createDataFrame(
        [("t", 0, 5), ("t", 0, 6), ("t", 1, 5), ("t", 0, 5)], "topic string, partition int, offset bigint"
    ).coalesce(1)
    (p0,) = [r for r in position_ranges(df) if r.partition == 0]
    assert (p0.first, p0.last, p0.rows, p0.repeats) == (5, 6, 3, True)
    a, b = PositionRange("t", 0, 0, 9, 10, False), PositionRange("t", 0, 10, 19, 10, False)
    assert ranges_disjoint([a, b]) and ranges_disjoint([a, PositionRange("t", 1, 0, 9, 10, False)])
    assert not ranges_disjoint([a, b, PositionRange("t", 0, 9, 9, 1, False)])


def test_landing_files_already_ingested_are_not_read_again(cfg: Config, spark: Any) -> None:
    landing = Path(cfg.paths.landing)
    first_files = write_raw_records(_records(0, 30), landing, rows_per_file=10)
    io = TableIO(cfg, spark)
    assert ingest(spark, cfg, io).records_new == 30
    version = io.version("raw_records")
    # garble one ingested file in place, keeping its size and mtime: it is known, so never opened
    victim = first_files[0]
    st = victim.stat()
    victim.write_bytes(b"\0" * st.st_size)
    os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns))
    again = ingest(spark, cfg, io)
    assert (again.records_read, again.records_new, again.raw_total) == (30, 0, 30)
    assert io.version("raw_records") == version
    # a new file is read (only it), a rewritten file (new mtime) is read again and de-duplicated
    write_raw_records(_records(30, 10), landing, rows_per_file=10)
    rewritten = first_files[1]
    rewritten.write_bytes(rewritten.read_bytes())
    os.utime(rewritten, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    third = ingest(spark, cfg, io)
    assert (third.records_read, third.records_new, third.raw_total) == (40, 10, 40)  # 4 files of 10
    assert _positions(io) == [(0, i) for i in range(40)]


def test_an_unreadable_landing_file_stops_ingest_with_its_name_and_writes_nothing(cfg: Config, spark: Any) -> None:
    landing = Path(cfg.paths.landing)
    write_raw_records(_records(0, 10), landing)
    (landing / "part-99999999.parquet").write_bytes(b"not parquet at all")
    io = TableIO(cfg, spark)
    with pytest.raises(UsageError, match=r"part-99999999\.parquet is not a readable Parquet file"):
        ingest(spark, cfg, io)
    assert io.count("raw_records") == 0


def test_landing_files_in_the_table_schema_are_copied_byte_for_byte(tmp_path: Path, spark: Any) -> None:
    import hashlib

    from deltalake import DeltaTable

    # target 40 rows per file: files of >= 10 rows are copied as they are, smaller ones rewritten
    cfg = load_config(overrides={"paths.root": str(tmp_path), "delta.target_file_rows": 40})
    landing = Path(cfg.paths.landing)
    big = write_raw_records(_records(0, 25) + _records(0, 12, partition=4), landing, rows_per_file=37)
    small = write_raw_records(_records(25, 5), landing)
    io = TableIO(cfg, spark)
    assert ingest(spark, cfg, io).records_new == 42
    table = Path(io.path("raw_records"))
    digest = {hashlib.sha256(f.read_bytes()).hexdigest() for f in table.glob("*.parquet")}
    assert {hashlib.sha256(f.read_bytes()).hexdigest() for f in big} <= digest
    assert not {hashlib.sha256(f.read_bytes()).hexdigest() for f in small} & digest
    assert _positions(io) == sorted([(0, i) for i in range(30)] + [(4, i) for i in range(12)])
    # the copied file's stats (from its footer) are exact: data skipping stays correct
    import pyarrow as pa

    adds = pa.table(DeltaTable(str(table)).get_add_actions(flatten=True)).to_pylist()
    copied = [a for a in adds if a["num_records"] == 37]
    assert len(copied) == 1 and len(adds) == 2
    a = copied[0]
    assert (a["min.partition"], a["max.partition"], a["min.offset"], a["max.offset"]) == (0, 4, 0, 24)
    assert a["null_count.value"] == sum(1 for r in _records(0, 25) + _records(0, 12) if r.value is None)


def test_a_damaged_landing_file_is_refused_with_its_name_before_its_bytes_are_copied(
    tmp_path: Path, spark: Any
) -> None:
    # footer intact (so the schema matches and the file would be copied as it is), first page garbled
    cfg = load_config(overrides={"paths.root": str(tmp_path), "delta.target_file_rows": 40})
    (victim,) = write_raw_records(_records(0, 30), Path(cfg.paths.landing))
    data = bytearray(victim.read_bytes())
    data[4:64] = b"\xff" * 60
    victim.write_bytes(bytes(data))
    io = TableIO(cfg, spark)
    with pytest.raises(Exception, match=rf"{victim.name}: unreadable landing Parquet file"):
        ingest(spark, cfg, io)
    assert io.count("raw_records") == 0
