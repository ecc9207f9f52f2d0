"""Nothing lost, round two (issue 37, items 1 and 13): a removed lock file never lets a second
writer in, another run's staging is removed only when its holder is known dead, and the lock
file is never opened through a link or truncated when it is not ours. Real processes hold and
take the locks; no mock of the lock."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pipelines.config import load_config
from pipelines.inputs.raw_files import write_raw_records
from pipelines.inputs.sample import sample_records

REPO = Path(__file__).resolve().parents[2]
SPARK = pytest.mark.spark

_HOLDER = """
import sys, time
from pipelines.warehouse import lock as warehouse_lock
from pipelines.warehouse.lock import WarehouseLock
lock = WarehouseLock(sys.argv[1], sys.argv[2]).acquire()
print('held', lock.run_id, flush=True)
for line in sys.stdin:  # 'commit': the check every commit makes
    try:
        warehouse_lock.check_held(sys.argv[1], wait_s=0.5)
        print('ok', flush=True)
    except Exception as exc:
        print('refused', type(exc).__name__, exc, flush=True)
"""


def _holder(warehouse: Path, command: str = "offsetlake run batch") -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(warehouse), command],
        cwd=REPO,
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    word, run_id = proc.stdout.readline().split()
    assert word == "held"
    return proc, run_id


def _commit(proc: subprocess.Popen[str]) -> str:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("commit\n")
    proc.stdin.flush()
    return proc.stdout.readline().strip()


def _take(warehouse: Path) -> subprocess.CompletedProcess[str]:
    """Another process taking the lock as every job does; prints the run id or the refusal."""
    code = (
        "import sys\nfrom pipelines.warehouse.lock import WarehouseLock\n"
        "try:\n    l = WarehouseLock(sys.argv[1], 'second run').acquire()\n    print('took', l.run_id)\n"
        "except Exception as exc:\n    print('refused', type(exc).__name__, exc)\n"
    )
    return subprocess.run([sys.executable, "-c", code, str(warehouse)], cwd=REPO, text=True, capture_output=True)


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.wait()


def test_a_removed_lock_file_does_not_let_a_second_writer_in_and_the_holder_locks_it_again(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    holder, run_id = _holder(wh)
    try:
        staging = wh / "_staging" / run_id
        assert (staging / "_holder.json").is_file()  # the holder recorded in its staging dir
        (wh / "_offsetlake.lock").unlink()  # a cron job cleaning *.lock, or a hasty operator
        second = _take(wh)
        assert second.stdout.startswith("refused WarehouseBusyError"), second
        assert f"pid {holder.pid}" in second.stdout and "was removed" in second.stdout
        assert staging.is_dir()  # the live run's staging survived the second run's start
        # the holder's next commit finds the path free: it locks it again and goes on
        assert _commit(holder) == "ok"
        st = os.stat(wh / "_offsetlake.lock")
        third = _take(wh)
        assert third.stdout.startswith("refused WarehouseBusyError") and f"pid {holder.pid}" in third.stdout
        assert os.stat(wh / "_offsetlake.lock").st_ino == st.st_ino
    finally:
        _stop(holder)
    # the holder is dead now: its staging is removed and the lock taken over
    after = _take(wh)
    assert after.stdout.startswith("took"), after
    assert not (wh / "_staging" / run_id).exists()


def test_a_holder_whose_lock_file_another_process_holds_stops_before_its_next_commit(tmp_path: Path) -> None:
    """An older writer that does not know the staging record took a new lock file: the holder
    must not commit again (the check before every Delta commit, in tableio)."""
    from pipelines.tableio import append_arrow_at, is_table_at
    from pipelines.warehouse.lock import WarehouseBusyError, WarehouseLock

    wh = tmp_path / "wh"
    lock = WarehouseLock(str(wh), "test holder").acquire()
    other = None
    try:
        table = str(wh / "t")
        append_arrow_at(table, pa.table({"a": [1]}))
        (wh / "_offsetlake.lock").unlink()
        code = (
            "import fcntl, os, sys, time\nfd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(600)\n"
        )
        other = subprocess.Popen(
            [sys.executable, "-c", code, str(wh / "_offsetlake.lock")], text=True, stdout=subprocess.PIPE
        )
        assert other.stdout is not None and other.stdout.readline().strip() == "held"
        import pipelines.warehouse.lock as wl

        wl.RECHECK_WAIT_S = 0.3
        with pytest.raises(WarehouseBusyError, match="was replaced while this run held it"):
            append_arrow_at(table, pa.table({"a": [2]}))
        from pipelines.tableio import read_arrow_at

        assert is_table_at(table) and read_arrow_at(table).column("a").to_pylist() == [1]
    finally:
        import pipelines.warehouse.lock as wl

        wl.RECHECK_WAIT_S = 10.0
        if other is not None:
            _stop(other)
        lock.release()


def test_another_runs_staging_is_removed_only_when_its_holder_is_known_dead(tmp_path: Path) -> None:
    from pipelines.warehouse.lock import Holder, clean_warehouse

    wh = tmp_path / "wh"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        import socket
        from dataclasses import asdict

        from pipelines.runtime.process import proc_start

        host = socket.gethostname()
        records = {
            "live": Holder(sleeper.pid, host, "2026-01-01T00:00:00+00:00", "x", "live", proc_start(sleeper.pid)),
            "reused": Holder(sleeper.pid, host, "2026-01-01T00:00:00+00:00", "x", "reused", "1"),  # pid reused
            "dead": Holder(2**22 + 7, host, "2026-01-01T00:00:00+00:00", "x", "dead"),
            "elsewhere": Holder(sleeper.pid, "another-host", "2026-01-01T00:00:00+00:00", "x", "elsewhere"),
        }
        for name, h in records.items():
            (wh / "_staging" / name).mkdir(parents=True)
            (wh / "_staging" / name / "_holder.json").write_text(json.dumps(asdict(h)))
        (wh / "_staging" / "legacy" / "spool").mkdir(parents=True)  # from before the record
        report = clean_warehouse(str(wh), before=time.time())
        left = sorted(p.name for p in (wh / "_staging").iterdir())
        assert left == ["elsewhere", "live"] and report.staging_dirs == 3
    finally:
        _stop(sleeper)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# the lock file itself (item 13)


def _offsetlake(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    return subprocess.run(
        [sys.executable, "-m", "pipelines", *argv], cwd=cwd, env=env, text=True, capture_output=True, timeout=600
    )


def _one_line(err: str) -> str:
    assert "Traceback" not in err, err[-3000:]
    lines = [ln for ln in err.splitlines() if ln.startswith("offsetlake ") and ": error: " in ln]
    assert len(lines) == 1, err[-3000:]
    return lines[0]


def test_a_symlink_at_the_lock_path_is_refused_with_one_line_and_its_target_untouched(tmp_path: Path) -> None:
    conf = tmp_path / "test.yaml"
    conf.write_text(f"paths:\n  root: {tmp_path / 'data'}\n")
    cfg = load_config(conf)
    write_raw_records(sample_records(2, seed=3), cfg.paths.landing)
    wh = Path(cfg.paths.warehouse)
    wh.mkdir(parents=True)
    precious = tmp_path / "precious.txt"
    precious.write_text("another account's file\n")
    (wh / "_offsetlake.lock").symlink_to(precious)
    res = _offsetlake("run", "batch", "--conf", str(conf), cwd=tmp_path)
    assert res.returncode == 2, res.stderr[-2000:]
    assert "symbolic link" in _one_line(res.stderr)
    assert precious.read_text() == "another account's file\n"
    assert not (wh / "raw_records").exists()


@pytest.mark.parametrize("kind", ["fifo", "hardlink", "directory"])
def test_a_lock_path_that_is_not_a_regular_file_of_ours_is_refused_untouched(tmp_path: Path, kind: str) -> None:
    from pipelines.errors import UsageError
    from pipelines.warehouse.lock import WarehouseLock

    wh = tmp_path / "wh"
    wh.mkdir()
    path = wh / "_offsetlake.lock"
    other = tmp_path / "other.txt"
    other.write_text("keep me\n")
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "hardlink":
        os.link(other, path)
    else:
        path.mkdir()
    with pytest.raises(UsageError, match="lock file") as info:
        WarehouseLock(str(wh), "test").acquire()
    assert "\n" not in str(info.value)
    assert other.read_text() == "keep me\n"


def test_the_lock_file_is_never_truncated_through_a_symlink_by_the_check_before_a_commit(tmp_path: Path) -> None:
    """A symlink planted after the lock file was removed: the re-check refuses it, never follows it."""
    from pipelines.errors import UsageError
    from pipelines.warehouse.lock import WarehouseLock, check_held

    wh = tmp_path / "wh"
    lock = WarehouseLock(str(wh), "test").acquire()
    try:
        precious = tmp_path / "precious.txt"
        precious.write_text("keep me\n")
        (wh / "_offsetlake.lock").unlink()
        (wh / "_offsetlake.lock").symlink_to(precious)
        with pytest.raises(UsageError, match="symbolic link"):
            check_held(str(wh / "t"))
        assert precious.read_text() == "keep me\n"
    finally:
        lock.release()


# --------------------------------------------------------------------------------------------
# two real batch jobs


def _wait_for(pred: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@SPARK
def test_two_batch_jobs_with_the_lock_file_removed_between_them_never_both_write(tmp_path: Path) -> None:
    """`offsetlake run batch` runs; the lock file is removed; a second `run batch` starts: it is
    refused with exit 2 and one line naming the first, which ends well; raw_records holds every
    position once."""
    conf = tmp_path / "test.yaml"
    conf.write_text(f"paths:\n  root: {tmp_path / 'data'}\nspark:\n  master: local[1]\n")
    cfg = load_config(conf)
    records = sample_records(6, seed=11)
    write_raw_records(records, cfg.paths.landing)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    lock = Path(cfg.paths.warehouse) / "_offsetlake.lock"
    first = subprocess.Popen(
        [sys.executable, "-m", "pipelines", "run", "batch", "--conf", str(conf), "--json"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def held() -> bool:
        try:
            return json.loads(lock.read_text()).get("pid") == first.pid
        except (OSError, ValueError):
            return False

    _wait_for(held, 300)
    lock.unlink()
    second = _offsetlake("run", "batch", "--conf", str(conf), "--json", cwd=tmp_path)
    _out, err = first.communicate(timeout=600)
    assert first.returncode == 0, err[-3000:]
    assert second.returncode == 2, second.stderr[-3000:]
    assert f"pid {first.pid}" in _one_line(second.stderr)
    from deltalake import DeltaTable

    raw = DeltaTable(cfg.table_path("raw_records")).to_pyarrow_table(columns=["partition", "offset"])
    positions = list(zip(raw.column("partition").to_pylist(), raw.column("offset").to_pylist(), strict=True))
    assert len(positions) == len(set(positions)) == len(records)


def test_flock_semantics_the_fix_relies_on(tmp_path: Path) -> None:
    """A lock on a removed file does not exclude a lock on a new file at the same path: why the
    holder must re-check the path (and why the staging record exists)."""
    path = tmp_path / "l"
    a = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(a, fcntl.LOCK_EX | fcntl.LOCK_NB)
    path.unlink()
    b = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(b, fcntl.LOCK_EX | fcntl.LOCK_NB)  # no BlockingIOError: both "hold" it
    os.close(a)
    os.close(b)
