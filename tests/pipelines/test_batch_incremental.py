"""The batch job's incremental runs (``pipelines.batch.carried``): a second run over new records
decodes only them and replays only the groups they touch (and those whose timer is due), from the
groups the first run kept, and leaves every table equal to one run over the whole log; what it
cannot continue (records inside a replayed range, ``--full``) it runs over the whole log, saying
why, with the same tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

from pipelines.config import Config, load_config  # noqa: E402
from pipelines.inputs.raw_files import RawRecord, write_raw_records  # noqa: E402
from pipelines.jobs.batch import DECODED_TABLES, gold_table_names, run_batch  # noqa: E402
from pipelines.tableio import TableIO  # noqa: E402
from tests.pipelines.test_replay_job import DAY, build_log  # noqa: E402

Log = list[tuple[bytes, bytes | None, int, int, int]]


def _cfg(root: Path, **extra: object) -> Config:
    return load_config(
        overrides={
            "paths.root": str(root),
            "replay.retention_ms": 3 * DAY,
            "replay.rules": "current",
            "stream.watermark_delay_ms": 60_000,
            **extra,
        }
    )


def _land(cfg: Config, log: Log) -> None:
    write_raw_records([RawRecord(k, v, "__consumer_offsets", p, o, ts) for k, v, p, o, ts in log], cfg.paths.landing)


def _rows(io: TableIO) -> dict[str, list[str]]:
    from deltalake import DeltaTable

    out = {}
    for name in (*DECODED_TABLES, *gold_table_names(), "log_partitions"):
        if io.exists(name):
            rows = DeltaTable(io.path(name)).to_pyarrow_table().to_pylist()
            out[name] = sorted(repr(sorted(r.items())) for r in rows)
    return out


def _split(log: Log, fraction: float) -> tuple[Log, Log]:
    times = sorted(ts for *_, ts in log)
    cut = times[int(len(times) * fraction)]
    return [r for r in log if r[4] < cut], [r for r in log if r[4] >= cut]


def _kafka4_world() -> Log:
    """A generated cluster as a Kafka 4 coordinator writes it: KIP-848 consumer groups, classic
    groups converted to them, idle partitions, mass restarts, and captured from the compacted topic."""
    from coordinator_core.simulator.generator import generate

    g = generate(16, 3, seed=4, coordinator="new", consumer_groups=0.4, conversions=0.3, compaction="cleaned")
    log = list(zip(g.keys, g.values, g.partitions, g.offsets, g.timestamps, strict=True))
    return sorted(log, key=lambda r: (r[4], r[2], r[3]))


def test_a_kafka4_compacted_capture_continues_after_maintenance_and_equals_one_run(tmp_path: Path, spark: Any) -> None:
    from pipelines.jobs.maintenance import maintain

    log = _kafka4_world()
    once = _cfg(tmp_path / "once")
    _land(once, log)
    io_once = TableIO(once, spark)
    run_batch(once, spark, io=io_once)
    first, second = _split(log, 0.6)
    cfg = _cfg(tmp_path / "inc")
    io = TableIO(cfg, spark)
    _land(cfg, first)
    s1 = run_batch(cfg, spark, io=io)
    assert not [m.error for m in maintain(io, retention_hours=0) if m.error]  # as the batch DAG does
    _land(cfg, second)
    said: list[str] = []
    run_batch(cfg, spark, io=io, echo=said.append)
    assert f"records new since raw_records v{s1.raw_version}" in "\n".join(said), said
    assert f"groups changed since raw_records v{s1.raw_version}" in "\n".join(said), said
    want, got = _rows(io_once), _rows(io)
    assert io.count("group_records") > 0  # KIP-848 records were replayed
    for name, rows in want.items():
        assert got[name] == rows, name


def _continue_with(cfg: Config, spark: Any, io: TableIO, new: Log, base: int, want: dict[str, list[str]]) -> None:
    """Land ``new`` and run: it decodes only them and replays only the groups they touch, from
    raw_records v``base``, and the tables equal ``want`` (one run over the whole log)."""
    _land(cfg, new)
    said: list[str] = []
    summary = run_batch(cfg, spark, io=io, echo=said.append)
    assert summary.reconciled and summary.records_new == len(new)
    lines = "\n".join(said)
    assert f"records new since raw_records v{base}" in lines, lines
    assert f"groups changed since raw_records v{base}" in lines, lines
    got = _rows(io)
    for name, rows in want.items():
        assert got[name] == rows, name


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> tuple[Log, dict[str, list[str]]]:
    """The log (many groups, offsets expiring within it) and the tables of one run over all of it."""
    log = build_log(n_groups=40, seed=9)
    cfg = _cfg(tmp_path_factory.mktemp("whole"))
    _land(cfg, log)
    io = TableIO(cfg, spark)
    run_batch(cfg, spark, io=io)
    return log, _rows(io)


def test_a_run_over_new_records_replays_only_them_and_equals_one_run(
    tmp_path: Path, spark: Any, whole: tuple[Log, dict[str, list[str]]]
) -> None:
    log, want = whole
    first, second = _split(log, 0.7)
    cfg = _cfg(tmp_path)
    io = TableIO(cfg, spark)
    _land(cfg, first)
    said: list[str] = []
    s1 = run_batch(cfg, spark, io=io, echo=said.append)
    assert s1.reconciled
    _continue_with(cfg, spark, io, second, s1.raw_version, want)
    # nothing new: every stage up to date, no table written
    versions = {n: io.version(n) for n in want}
    said.clear()
    run_batch(cfg, spark, io=io, echo=said.append)
    assert {n: io.version(n) for n in want} == versions
    assert "up to date with raw_records" in "\n".join(said)


def test_the_maintenance_between_two_runs_leaves_the_second_incremental(
    tmp_path: Path, spark: Any, whole: tuple[Log, dict[str, list[str]]]
) -> None:
    """The batch DAG runs batch -> dq -> maintenance: OPTIMIZE and VACUUM of every table between
    two runs change no row, so a run with nothing new writes nothing, and a run over new records
    still decodes only them and replays only the groups they touch."""
    from pipelines.jobs.maintenance import maintain

    log, want = whole
    first, second = _split(log, 0.7)
    cfg = _cfg(tmp_path, **{"delta.target_file_rows": 200})  # several files per table to compact
    io = TableIO(cfg, spark)
    _land(cfg, first[: len(first) // 2])
    run_batch(cfg, spark, io=io)
    _land(cfg, first[len(first) // 2 :])
    s1 = run_batch(cfg, spark, io=io)  # raw_records now holds two runs' files
    done = maintain(io, retention_hours=0)
    assert not [m.error for m in done if m.error]
    compacted = {m.table for m in done if m.files_removed}
    assert {"raw_records", "offset_commits", "group_transitions"} <= compacted, compacted

    versions = {n: io.version(n) for n in [*want, "raw_records"]}
    said: list[str] = []
    run_batch(cfg, spark, io=io, echo=said.append)
    assert {n: io.version(n) for n in versions} == versions  # nothing new: nothing written
    assert f"up to date with raw_records v{s1.raw_version}" in "\n".join(said), said

    _continue_with(cfg, spark, io, second, s1.raw_version, want)


def test_records_inside_a_replayed_range_and_full_replay_the_whole_log(
    tmp_path: Path, spark: Any, whole: tuple[Log, dict[str, list[str]]]
) -> None:
    log, want = whole
    # every partition's records but the last few of one partition, then those: they continue the
    # log; then a partition's missing middle record lands last: inside the replayed range
    first, second = _split(log, 0.5)
    part = first[len(first) // 2][2]
    middle = next(r for r in first if r[2] == part and r[3] > 0)
    cfg = _cfg(tmp_path)
    io = TableIO(cfg, spark)
    _land(cfg, [r for r in first if r is not middle])
    run_batch(cfg, spark, io=io)
    _land(cfg, [middle])
    said: list[str] = []
    run_batch(cfg, spark, io=io, echo=said.append)
    lines = "\n".join(said)
    assert "inside partition" in lines and "replayed range" in lines, lines
    said.clear()
    _land(cfg, second)
    run_batch(cfg, spark, io=io, echo=said.append, full=True)
    assert "whole log (--full)" in "\n".join(said)
    got = _rows(io)
    for name, rows in want.items():
        assert got[name] == rows, name


def test_kept_groups_that_do_not_read_replay_the_whole_log_and_a_newer_releases_are_refused(
    tmp_path: Path, spark: Any, whole: tuple[Log, dict[str, list[str]]]
) -> None:
    """The groups the last run kept are derived data: a bucket of them that does not read (here
    truncated) makes the run replay the whole log, saying why, with the tables of one run. Groups a
    newer release kept (an entry format this release does not know) are refused in one line naming
    their directory and ``--full``, before any gold table is written."""
    import pickle

    from pipelines.errors import UsageError

    log, want = whole
    first, second = _split(log, 0.7)
    cfg = _cfg(tmp_path)
    io = TableIO(cfg, spark)
    _land(cfg, first)
    run_batch(cfg, spark, io=io)
    kept = max(Path(io.warehouse).rglob("_replay_state/*/bucket-*.pkl"), key=lambda p: p.stat().st_size)
    entries = pickle.loads(kept.read_bytes())
    assert entries
    _land(cfg, second)

    newer = {gid: (99, *entry[1:]) for gid, entry in entries.items()}
    kept.write_bytes(pickle.dumps(newer))
    gold = {n: io.version(n) for n in gold_table_names()}
    with pytest.raises(UsageError) as refused:
        run_batch(cfg, spark, io=io)
    line = str(refused.value)
    assert "\n" not in line and "newer release" in line and str(kept.parent) in line and "--full" in line, line
    assert {n: io.version(n) for n in gold} == gold

    kept.write_bytes(kept.read_bytes()[: kept.stat().st_size // 2])
    said: list[str] = []
    run_batch(cfg, spark, io=io, echo=said.append)
    lines = "\n".join(said)
    assert "whole log (the kept groups do not read" in lines and kept.name in lines, lines
    got = _rows(io)
    for name, rows in want.items():
        assert got[name] == rows, name
