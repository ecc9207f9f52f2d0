"""Crash recovery and shutdown of the streaming job, in a real subprocess (and its refusal of a
checkpoint a newer release wrote).

The job runs as ``python -m pipelines.jobs.stream`` (what spark-submit runs) with its own
checkpoint. It is SIGKILLed (its whole process group: the Python driver and its JVM) once the
checkpoint's ``commits/`` holds k micro-batches — usually in the middle of batch k's Delta
writes — then restarted with ``--available-now``. The final gold tables must equal the batch
job's: nothing lost, nothing written twice.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.pipelines.test_stream_job import (
    DELAY_MS,
    RETENTION_MS,
    assert_gold_equal,
    batch_gold,
    land,
    sample_log,
    stream_config,
)

REPO = Path(__file__).resolve().parents[2]


def write_conf(root: Path) -> Path:
    conf = root / "stream.yaml"
    conf.write_text(
        f"""paths:
  root: {root}
spark:
  master: local[2]
  log_level: ERROR
  conf:
    spark.sql.shuffle.partitions: 2
    spark.driver.memory: 1g
delta:
  engine: rust
replay:
  retention_ms: {RETENTION_MS}
stream:
  max_files_per_trigger: 3
  watermark_delay_ms: {DELAY_MS}
  trigger_interval: 1 second
""",
        encoding="utf-8",
    )
    return conf


def start_job(conf: Path, log: Path, *, available_now: bool) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "pipelines.jobs.stream", "--conf", str(conf)]
    if available_now:
        cmd.append("--available-now")
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    with open(log, "ab") as out:
        return subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def committed_batches(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    if not commits.is_dir():
        return 0
    return sum(1 for p in commits.iterdir() if p.name.isdigit())


def wait_for_commits(proc: subprocess.Popen[bytes], checkpoint: Path, k: int, log: Path, timeout: float = 600) -> None:
    deadline = time.time() + timeout
    while committed_batches(checkpoint) < k:
        if proc.poll() is not None:
            pytest.fail(f"job exited (rc={proc.returncode}) before {k} batches:\n{log.read_text()[-3000:]}")
        if time.time() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"no {k} committed batches within {timeout}s:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def recovery_reference(spark: Any, tmp_path_factory: Any) -> tuple[list[Any], dict[str, Any]]:
    records = sample_log()
    landing = tmp_path_factory.mktemp("stream_recovery_ref") / "landing"
    land(records, landing, rows_per_file=10_000)
    watermark = max(r.timestamp_ms for r in records) - DELAY_MS
    return records, batch_gold(spark, landing, watermark)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 3])
def test_sigkill_after_k_batches_then_restart_gives_the_batch_tables(
    spark: Any, recovery_reference: Any, tmp_path: Path, k: int
) -> None:
    records, gold = recovery_reference
    land(records, tmp_path / "landing", rows_per_file=25)
    conf = write_conf(tmp_path)
    log = tmp_path / "job.log"
    checkpoint = tmp_path / "checkpoints" / "stream_replay"

    proc = start_job(conf, log, available_now=True)
    wait_for_commits(proc, checkpoint, k, log)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM, mid-batch
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    killed_at = committed_batches(checkpoint)
    assert killed_at >= k

    restart = start_job(conf, log, available_now=True)
    assert restart.wait(timeout=900) == 0, log.read_text()[-3000:]
    assert committed_batches(checkpoint) > killed_at  # the restart resumed and finished the log

    assert_gold_equal(spark, stream_config(tmp_path), gold)


@pytest.mark.spark
@pytest.mark.slow
def test_sigterm_stops_the_continuous_job_cleanly(tmp_path: Path) -> None:
    records = sample_log(groups=4)
    land(records, tmp_path / "landing", rows_per_file=50)
    conf = write_conf(tmp_path)
    log = tmp_path / "job.log"
    proc = start_job(conf, log, available_now=False)
    wait_for_commits(proc, tmp_path / "checkpoints" / "stream_replay", 1, log)
    os.kill(proc.pid, signal.SIGTERM)  # the driver (what `kill <pid>`, Airflow, systemd's main PID get)
    try:
        rc = proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("the job did not stop within 120s of SIGTERM")
    text = log.read_text()
    assert rc == 0, text[-3000:]
    assert "stopped by signal" in text
    assert "offsetlake_stream_replay batch=0" in text  # one progress line per micro-batch


def test_stream_job_script_refuses_a_bad_config_with_one_line_and_exit_2(tmp_path: Path) -> None:
    """``spark-submit pipelines/jobs/stream.py`` runs the file as a script (no package, any working
    directory): it imports the project and refuses a bad config before Spark starts."""
    script = REPO / "pipelines" / "jobs" / "stream.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--set", "input.source=delta"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "stream: error: input.source: delta is not supported by the streaming job; use landing or kafka"
    ]
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def _digests(root: Path, skip: Callable[[Path], bool] = lambda _p: False) -> dict[str, str]:
    """Every file under ``root`` (relative path → sha256), but those ``skip`` names."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not skip(p.relative_to(root))
    }


@pytest.mark.spark
@pytest.mark.slow
def test_a_checkpoint_a_newer_release_wrote_is_refused_in_one_line_and_left_as_it_was(tmp_path: Path) -> None:
    """A newer release (this tree, copied, whose plain-values snapshot format is the next number)
    streams the first half of a log; this release's ``offsetlake run stream`` on the same
    checkpoint and more landed records stops on the first kept group it reads: exit 2, one line
    naming the format, the newer release and the checkpoint, no trace; nothing committed past it
    (the warehouse's tables, the checkpoint's commits and state as they were)."""
    from coordinator_core import VALUES_FORMAT_VERSION

    newer = tmp_path / "newer"
    for package in ("coordinator_core", "pipelines", "schemas"):
        shutil.copytree(REPO / package, newer / package, ignore=shutil.ignore_patterns("__pycache__"))
    values = newer / "coordinator_core" / "loader" / "snapshot_values.py"
    ours = f"\nVALUES_FORMAT_VERSION = {VALUES_FORMAT_VERSION}\n"
    assert values.read_text().count(ours) == 1
    values.write_text(values.read_text().replace(ours, f"\nVALUES_FORMAT_VERSION = {VALUES_FORMAT_VERSION + 1}\n"))

    root = tmp_path / "data"
    root.mkdir()
    conf = write_conf(root)
    records = sample_log(groups=4)
    land(records[: len(records) // 2], root / "landing", rows_per_file=10_000)
    cmd = [sys.executable, "-m", "pipelines.cli", "run", "stream", "--conf", str(conf), "--available-now"]

    def stream(tree: Path) -> subprocess.CompletedProcess[str]:
        # the tree first on every Python process's path: the driver's (cwd, -m) and Spark's workers'
        env = dict(os.environ, PYTHONPATH=str(tree), PYTHONWARNINGS="ignore")
        return subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=300)

    checkpoint = root / "checkpoints" / "stream_replay"

    def committed() -> dict[str, dict[str, str]]:
        """What a run commits: its tables' files (not the lock or staging), its batches' commits
        and state versions (not an aborted task's state-store temp file, Spark's own, never read)."""
        return {
            "tables": _digests(root / "warehouse", lambda p: p.parts[0].startswith("_")),
            "commits": _digests(checkpoint / "commits"),
            "state": _digests(checkpoint / "state", lambda p: p.name.endswith((".tmp", ".tmp.crc"))),
        }

    first = stream(newer)
    assert first.returncode == 0, first.stderr[-3000:]
    land(records[len(records) // 2 :], root / "landing", rows_per_file=10_000)
    kept = committed()
    assert all(kept.values())

    second = stream(REPO)
    assert second.returncode == 2, second.stderr[-3000:]
    # Java's own module notice is the JVM's, printed before any of ours (spark_session's rules)
    lines = [ln for ln in second.stderr.splitlines() if not ln.startswith("WARNING: Using incubator modules")]
    assert len(lines) == 1, second.stderr[-3000:]
    assert lines[0] == (
        f"offsetlake run: error: stream state: a kept group's snapshot has format {VALUES_FORMAT_VERSION + 1}, "
        f"which this release does not read (it reads 1, 2 and {VALUES_FORMAT_VERSION}): a newer release wrote "
        f"this state (checkpoint {checkpoint}: run that release, or move it aside to replay the log into a new one)"
    )
    assert second.stdout == ""
    assert committed() == kept
