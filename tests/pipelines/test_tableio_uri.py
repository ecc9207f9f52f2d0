"""Table locations as URIs (``pipelines.uri``): local paths, ``file://``, and the object
stores' schemes (parsed and joined here without a network; the filesystem calls run on
``file://`` URIs and local paths, which pyarrow and delta-rs resolve like any other URI)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from pipelines import uri
from pipelines.config import load_config
from pipelines.tableio import TableIO, append_arrow_at, is_table_at, read_arrow_at


@pytest.mark.parametrize(
    ("base", "parts", "want"),
    [
        ("/data/wh", ("t",), "/data/wh/t"),
        ("/data/wh/", ("_staging", "r1", "t"), "/data/wh/_staging/r1/t"),
        ("file:///tmp/wh", ("t",), "file:///tmp/wh/t"),
        ("file:///", ("t",), "file:///t"),
        ("s3a://bucket", ("wh", "t"), "s3a://bucket/wh/t"),
        ("s3a://bucket/wh/", ("/t/",), "s3a://bucket/wh/t"),
        ("abfss://cont@acct.dfs.core.windows.net/wh", ("t",), "abfss://cont@acct.dfs.core.windows.net/wh/t"),
        ("gs://bucket/wh", ("t", "_delta_log"), "gs://bucket/wh/t/_delta_log"),
    ],
)
def test_join_keeps_scheme_and_authority_and_never_doubles_a_slash(
    base: str, parts: tuple[str, ...], want: str
) -> None:
    assert uri.join(base, *parts) == want


def test_object_store_schemes_are_uris_and_local_paths_are_not() -> None:
    assert [
        uri.scheme(x) for x in ("s3a://b/x", "S3://b/x", "abfss://c@a/x", "gs://b/x", "file:///x", "/x", "x/y")
    ] == ["s3a", "s3", "abfss", "gs", "file", None, None]
    assert uri.is_local("/x") and uri.is_local("file:///x") and not uri.is_local("s3a://b/x")
    assert uri.local_path("file:///tmp/a%20b") == "/tmp/a b"
    with pytest.raises(ValueError, match="not a local path"):
        uri.local_path("s3a://b/x")


def test_hadoop_s3a_is_spelled_s3_for_pyarrow_and_kept_for_delta_rs() -> None:
    assert uri.for_pyarrow("s3a://bucket/wh/t") == "s3://bucket/wh/t"
    assert uri.for_pyarrow("s3n://bucket/t") == "s3://bucket/t"
    for kept in ("s3://bucket/t", "abfss://c@a.dfs.core.windows.net/t", "gs://b/t", "file:///t", "/t"):
        assert uri.for_pyarrow(kept) == kept
    # object_store (delta-rs) parses s3a, abfss and gs itself
    assert uri.for_delta_rs("s3a://bucket/wh/t") == "s3a://bucket/wh/t"


def test_filesystem_resolves_file_uris_and_local_paths_to_the_same_files(tmp_path: Path) -> None:
    from pyarrow import fs

    (tmp_path / "f").write_text("x")
    for loc in (str(tmp_path / "f"), "file://" + str(tmp_path / "f")):
        filesystem, inner = uri.filesystem(loc)
        assert isinstance(filesystem, fs.LocalFileSystem) and inner == str(tmp_path / "f")
        assert uri.exists(loc)
    assert not uri.exists("file://" + str(tmp_path / "missing"))


def test_a_delta_table_at_a_file_uri_is_found_written_and_read(tmp_path: Path) -> None:
    table_uri = "file://" + str(tmp_path / "wh" / "t")
    assert not uri.is_delta_table(table_uri) and not is_table_at(table_uri)
    append_arrow_at(table_uri, pa.table({"k": ["a", "b"]}))
    assert uri.is_delta_table(table_uri) and is_table_at(table_uri)
    assert sorted(read_arrow_at(table_uri).column("k").to_pylist()) == ["a", "b"]


def test_driver_reads_find_tables_of_a_warehouse_given_as_a_uri(tmp_path: Path) -> None:
    """``Path(uri, "_delta_log").exists()`` was always false for a URI warehouse: inspect saw no
    groups, the report no tables. The checks now ask the location's filesystem."""
    from pipelines.analytics.inspect import known_groups
    from pipelines.analytics.report import _read
    from pipelines.records.gold import GOLD_SPECS, rows_to_arrow

    cfg = load_config(overrides={"paths.root": str(tmp_path), "paths.warehouse": "file://" + str(tmp_path / "wh")})
    assert cfg.table_path("group_state").startswith("file:///")
    from coordinator_core import LogRecord, decode_record, replay_groups
    from coordinator_core.simulator.generator import generate

    log = generate(3, 1.0, seed=2)
    recs = []
    for k, v, p, o, ts in zip(log.keys, log.values, log.partitions, log.offsets, log.timestamps, strict=True):
        rec = decode_record(k, v, modern=True)
        recs.append(LogRecord(p, o, ts, rec.key, rec.value))
    rows = [r.snapshot.to_state_row() for r in replay_groups(recs).values()]
    groups = sorted(r["group_id"] for r in rows)
    assert groups
    append_arrow_at(cfg.table_path("group_state"), rows_to_arrow(GOLD_SPECS["group_state"], rows))
    assert known_groups(cfg) == groups
    frame = _read(cfg, "group_state", ["group_id"])
    assert frame is not None and sorted(frame["group_id"]) == groups
    io = TableIO(cfg, None, engine="rust")
    assert io.exists("group_state") and io.list_tables() == ["group_state"]
    assert io.read_arrow("offsets_current") is None


def test_an_s3a_location_resolves_to_pyarrows_s3_filesystem_without_a_network() -> None:
    """pyarrow alone refuses ``s3a://`` ("Unrecognized filesystem type"): the sink's writers and
    ``list_tables`` failed on an s3a warehouse. (The region is given so nothing is looked up.)"""
    from pyarrow import fs

    with pytest.raises(Exception, match="Unrecognized filesystem type"):
        fs.FileSystem.from_uri("s3a://bucket/wh/t?region=us-east-1")
    filesystem, inner = uri.filesystem("s3a://bucket/wh/t?region=us-east-1")
    assert isinstance(filesystem, fs.S3FileSystem) and inner == "bucket/wh/t"
    assert filesystem.region == "us-east-1"


def test_an_abfss_location_resolves_to_the_azure_filesystem_without_a_network() -> None:
    from pyarrow import fs

    if not hasattr(fs, "AzureFileSystem"):
        pytest.skip("this pyarrow build has no Azure filesystem")
    filesystem, inner = uri.filesystem("abfss://cont@acct.dfs.core.windows.net/wh/t")
    assert isinstance(filesystem, fs.AzureFileSystem) and inner == "cont/wh/t"
