"""One job per warehouse: the batch and the streaming job write the same tables, so a warehouse
written by one is refused to the other with one line, before anything is read or written
(``pipelines.warehouse.lock``: the job record, and what an older warehouse shows)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from pipelines.config import load_config
from pipelines.inputs.raw_files import write_raw_records
from pipelines.inputs.sample import sample_records
from pipelines.warehouse.lock import WarehouseKeptError, claim_job, warehouse_job


def test_the_first_job_keeps_the_warehouse_and_the_other_is_refused_naming_both(tmp_path: Path) -> None:
    root = str(tmp_path / "wh")
    Path(root).mkdir()
    assert warehouse_job(root) is None
    claim_job(root, "batch")
    claim_job(root, "batch")  # the same job again: fine
    assert warehouse_job(root) == "batch"
    with pytest.raises(WarehouseKeptError) as err:
        claim_job(root, "stream")
    msg = str(err.value)
    assert "\n" not in msg and "written by the batch job" in msg and "paths.warehouse" in msg


def test_the_job_record_is_not_written_through_a_link_planted_at_its_temporary_name(tmp_path: Path) -> None:
    import json
    import os

    root = tmp_path / "wh"
    root.mkdir()
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    tmp = root / f"_offsetlake.job.{os.getpid()}.tmp"
    tmp.symlink_to(precious)
    claim_job(str(root), "batch")
    assert precious.read_text() == "keep me\n"  # the link's target untouched
    assert not tmp.is_symlink() and not tmp.exists()
    record = root / "_offsetlake.job"
    assert not record.is_symlink() and json.loads(record.read_text())["job"] == "batch"


@pytest.mark.parametrize(
    ("written", "kept"), [("stream_progress/_delta_log", "stream"), ("raw_records/_delta_log", "batch")]
)
def test_a_warehouse_from_before_the_job_record_is_recognised_by_its_tables(
    tmp_path: Path, written: str, kept: str
) -> None:
    root = tmp_path / "wh"
    (root / written).mkdir(parents=True)
    assert warehouse_job(str(root)) == kept
    other = "batch" if kept == "stream" else "stream"
    with pytest.raises(WarehouseKeptError):
        claim_job(str(root), other)


def _tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.name != "_offsetlake.lock":
            h.update(str(p.relative_to(root)).encode() + p.read_bytes())
    return h.hexdigest()


@pytest.mark.spark
def test_a_stream_on_the_batch_warehouse_is_refused_with_one_line_and_writes_nothing(
    tmp_path: Path, spark: object, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipelines.cli import main

    conf = tmp_path / "test.yaml"
    conf.write_text(f"paths:\n  root: {tmp_path / 'data'}\n")
    cfg = load_config(conf)
    write_raw_records(sample_records(3, seed=5), cfg.paths.landing)
    assert main(["run", "batch", "--conf", str(conf), "--json"]) == 0
    capsys.readouterr()
    before = _tree_digest(Path(cfg.paths.warehouse))
    rc = main(["run", "stream", "--conf", str(conf), "--available-now"])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("offsetlake ")]
    assert rc == 2 and len(lines) == 1 and "written by the batch job" in lines[0], err
    assert "Traceback" not in err
    assert _tree_digest(Path(cfg.paths.warehouse)) == before
