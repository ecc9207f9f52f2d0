"""The one-pass decode into the four decoded tables equals the DataFrame path, and refuses to
commit anything when the rows do not add up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

from pipelines.batch.decode import TABLES, write_decoded_from_raw_table  # noqa: E402
from pipelines.batch.ingest import ingest  # noqa: E402
from pipelines.config import Config, load_config  # noqa: E402
from pipelines.inputs.raw_files import RawRecord, write_raw_records  # noqa: E402
from pipelines.inputs.sample import sample_records  # noqa: E402
from pipelines.tableio import TableIO, conform  # noqa: E402
from schemas import get as get_spec  # noqa: E402
from tests.pipelines.pipeline_helpers import decode_raw  # noqa: E402


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    return load_config(overrides={"paths.root": str(tmp_path)})


def _mixed_log() -> list[RawRecord]:
    """A generated log plus one record of every undecodable kind, each at its own position."""
    records = sample_records(6, seed=11)
    oc = next(r for r in records if r.value is not None and r.key[:2] == b"\x00\x01")
    last = max(r.offset for r in records if r.partition == oc.partition)
    extra = [
        oc._replace(value=oc.value[:5], offset=last + 1),  # type: ignore[index]  # truncated value
        oc._replace(key=oc.key[:4], offset=last + 2),  # truncated key
        oc._replace(key=b"\x00\x19" + oc.key[2:], offset=last + 3),  # record type 25 (no release): unsupported
        oc._replace(value=b"\x00\x09" + oc.value[2:], offset=last + 4),  # type: ignore[index]  # value v9
        # a KIP-848 member key (type 5) that does not parse as one (trailing bytes): quarantined
        oc._replace(key=b"\x00\x05" + oc.key[2:], offset=last + 5),
    ]
    return [*records, *extra]


def _rows(df: Any) -> list[str]:
    return sorted(repr(sorted(r.asDict(recursive=True).items())) for r in df.collect())


def test_one_pass_decode_writes_what_the_dataframe_path_computes(cfg: Config, spark: Any) -> None:
    write_raw_records(_mixed_log(), cfg.paths.landing, rows_per_file=40)  # several raw_records files
    io = TableIO(cfg, spark)
    ingest(spark, cfg, io)
    raw = io.read("raw_records")
    assert len(io.snapshot_files("raw_records") or []) > 1
    results = write_decoded_from_raw_table(io, app_id="t", version=1, expected_rows=io.count("raw_records"))
    assert all(not r.skipped for r in results.values())
    expected = decode_raw(raw).tables()
    for name in TABLES:
        assert _rows(io.read(name)) == _rows(conform(expected[name], get_spec(name))), name
    assert io.count("quarantine") == 3 and io.count("unsupported_records") == 2
    assert sum(io.count(n) for n in TABLES) == io.count("raw_records")
    # the same marker again: nothing is written, no version moves
    versions = {n: io.version(n) for n in TABLES}
    again = write_decoded_from_raw_table(io, app_id="t", version=1)
    assert all(r.skipped for r in again.values())
    assert {n: io.version(n) for n in TABLES} == versions


def test_a_count_mismatch_commits_nothing(cfg: Config, spark: Any) -> None:
    write_raw_records(sample_records(3, seed=2), cfg.paths.landing)
    io = TableIO(cfg, spark)
    ingest(spark, cfg, io)
    from pipelines.batch.replay import current_replay_input, new_replay_input

    spool = new_replay_input(io, 1)
    with pytest.raises(Exception, match="count mismatch, nothing committed"):
        write_decoded_from_raw_table(io, app_id="t", version=1, expected_rows=io.count("raw_records") + 1, spool=spool)
    assert current_replay_input(io, 1) is None  # the replay never trusts this pass's files
    assert all(io.count(n) == 0 for n in TABLES)
    leftovers = [p for n in TABLES for p in Path(io.path(n)).glob("*.parquet")]
    assert leftovers == []
