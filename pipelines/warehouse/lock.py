"""One writer per warehouse: an exclusive lock, a staging area per run, and the cleanup of
what a failed attempt left behind.

Rules:
- Every job that writes the warehouse's tables (``run batch`` and each of its stages, ``run
  stream``, maintenance) holds ``<warehouse>/_offsetlake.lock`` for its whole run. The lock is
  an ``flock`` on that file (``LOCK_EX | LOCK_NB``): the kernel releases it when the holder
  exits in any way (SIGKILL included), so a lock left by a dead process is never an obstacle
  and taking it over is safe by construction — there is no window in which two processes both
  believe they hold it. The file's content names the holder (pid, host, start time, command,
  run id) for the refusal message and is rewritten by each new holder; a dead holder's content
  is reported as taken over.
- A second writer is refused at once with one line naming the holder (``WarehouseBusyError``,
  a ``UsageError``: exit 2). Nothing has been read or written at that point.
- The lock is re-entrant within one process (a command that runs the batch job inside another
  command takes it once); it does not serialise threads of one process.
- Object-store warehouses (``s3://`` ...) have no portable file lock: the lock is skipped there
  with a warning (one writer must be ensured by the scheduler, e.g. Airflow's max_active_runs).
- Staging: each run stages under ``<warehouse>/_staging/<run id>``; on taking the lock the run
  deletes every other run's staging directory (none of them can be live: their run held the
  lock) and every *orphan* data file of the tables: a file under a Delta table's directory
  that no action of the table's log (add or remove, JSON commits and checkpoints) mentions and
  that is older than the lock. Such a file was written by an attempt that died before its
  commit; no reader can ever see it. Files the log mentions are left alone (removed ones are
  VACUUM's business, with its retention for time travel). Which files a table's log mentions
  is ``pipelines.tableio.orphans``' business (Delta-log knowledge stays in ``tableio``); this
  module only walks the local warehouse it holds the lock of.
- One job per warehouse: the batch and the streaming job write the same tables (the batch
  appends a run's events, the stream merges its micro-batches' keys), so a warehouse written
  by one is never written by the other — the lock alone would only serialise them, and the
  second job would then duplicate or overwrite the first one's rows. The first job to write a
  warehouse records itself in ``<warehouse>/_offsetlake.job``; the other job is refused with
  one line (``WarehouseKeptError``, exit 2) before it reads anything. A warehouse written
  before this file existed is recognised by what only one job writes (``stream_progress``; the
  batch's run records or ``raw_records``). Maintenance, dq and the readers serve either.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipelines.errors import UsageError
from pipelines.tableio.orphans import orphan_files
from pipelines.tableio.uri import is_delta_table, is_local, local_path
from pipelines.warehouse.layout import BATCH_RUNS_DIR, JOB_FILE, LOCK_FILE, STAGING_DIR

log = logging.getLogger("offsetlake.lock")

JOBS = ("batch", "stream")


class WarehouseBusyError(UsageError):
    """Another live process holds the warehouse's lock."""


class WarehouseKeptError(UsageError):
    """The warehouse is written by the other job (batch vs stream)."""


@dataclass(frozen=True)
class Holder:
    """Who holds (or held) a warehouse lock."""

    pid: int
    host: str
    started: str  # ISO-8601 UTC
    command: str
    run_id: str

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host} since {self.started} ({self.command})"


@dataclass
class CleanupReport:
    """What taking the lock removed."""

    staging_dirs: int = 0
    orphan_files: int = 0
    orphan_bytes: int = 0

    def line(self) -> str | None:
        if not (self.staging_dirs or self.orphan_files):
            return None
        return (
            f"removed {self.staging_dirs} leftover staging dir(s) and {self.orphan_files} orphan "
            f"data file(s) ({self.orphan_bytes / 1e6:.1f} MB) of failed attempts"
        )


def new_run_id() -> str:
    """A run id: UTC time + random suffix (sortable, unique)."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:8]


def _command() -> str:
    argv = [os.path.basename(sys.argv[0] or "python"), *sys.argv[1:]]
    text = " ".join(argv)
    return text if len(text) <= 200 else text[:197] + "..."


def pid_alive(pid: int) -> bool:
    """True while a process with this pid exists on this host (ours or another user's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_holder(warehouse: str) -> Holder | None:
    """The holder recorded in the warehouse's lock file (live or not), if any."""
    try:
        text = (Path(warehouse) / LOCK_FILE).read_text()
        data = json.loads(text)
        return Holder(
            int(data["pid"]), str(data["host"]), str(data["started"]), str(data["command"]), str(data.get("run_id", ""))
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


# path -> [fd, depth, holder, cleanup report, previous holder taken over]
_HELD: dict[str, list[Any]] = {}


class WarehouseLock:
    """The exclusive writer lock of one warehouse (see the module rules)."""

    def __init__(
        self, warehouse: str, command: str | None = None, run_id: str | None = None, job: str | None = None
    ) -> None:
        if job is not None and job not in JOBS:
            raise ValueError(f"job must be one of {JOBS}, not {job!r}")
        self.job = job
        self.warehouse = warehouse
        self.local = is_local(warehouse)
        self.root = local_path(warehouse) if self.local else warehouse
        self.path = os.path.abspath(os.path.join(self.root, LOCK_FILE))
        self.command = command or _command()
        self.run_id = run_id or new_run_id()
        self.acquired_at = 0.0
        self.cleanup = CleanupReport()
        self.took_over: Holder | None = None

    def acquire(self) -> WarehouseLock:
        import fcntl

        self.acquired_at = time.time()
        if not self.local:
            log.warning("warehouse %s is not a local path: no writer lock (ensure one writer yourself)", self.warehouse)
            return self
        held = _HELD.get(self.path)
        if held is not None:  # re-entrant within this process
            if self.job is not None:
                claim_job(self.root, self.job)
            held[1] += 1
            self.run_id = held[2].run_id
            self.cleanup, self.took_over = held[3], held[4]
            return self
        os.makedirs(self.root, exist_ok=True)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise UsageError(
                f"warehouse {self.root}: cannot open the lock file {self.path} ({exc.strerror or exc})"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = _holder_soon(self.root)
            who = holder.describe() if holder else "another process (holder unknown)"
            raise WarehouseBusyError(
                f"warehouse {self.root} is in use by {who}; one writer at a time: wait for it to end "
                f"or stop it (lock: {self.path})"
            ) from None
        previous = read_holder(self.root)
        if previous is not None and previous.pid != os.getpid():
            # the kernel released the previous holder's lock: it is gone (or on another host
            # whose lock was not shared, which a local path rules out)
            same_host = previous.host == socket.gethostname()
            if not same_host or not pid_alive(previous.pid):
                self.took_over = previous
        holder = Holder(
            os.getpid(),
            socket.gethostname(),
            datetime.now(UTC).isoformat(timespec="seconds"),
            self.command,
            self.run_id,
        )
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(asdict(holder)).encode(), 0)
        os.fsync(fd)
        entry: list[Any] = [fd, 1, holder, self.cleanup, self.took_over]
        _HELD[self.path] = entry
        if self.took_over is not None:
            log.info("warehouse lock: took over from %s (no longer running)", self.took_over.describe())
        try:
            if self.job is not None:
                claim_job(self.root, self.job)
            self.cleanup = entry[3] = clean_warehouse(self.root, before=self.acquired_at)
        except BaseException:
            self.release()
            raise
        return self

    def release(self) -> None:
        import fcntl

        held = _HELD.get(self.path)
        if held is None:
            return
        held[1] -= 1
        if held[1] > 0:
            return
        del _HELD[self.path]
        fd = held[0]
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)  # nobody holds it now
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def staging_root(self) -> str:
        return os.path.join(self.root, STAGING_DIR, self.run_id)

    def __enter__(self) -> WarehouseLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


@contextlib.contextmanager
def warehouse_lock(warehouse: str, command: str | None = None, *, job: str | None = None) -> Iterator[WarehouseLock]:
    """Hold ``warehouse``'s writer lock for the block (re-entrant in one process); ``job``
    (``batch``/``stream``) also claims the warehouse for that job (see the module rules)."""
    lock = WarehouseLock(warehouse, command, job=job)
    lock.acquire()
    try:
        yield lock
    finally:
        lock.release()


def warehouse_job(root: str) -> str | None:
    """The job that writes the local warehouse ``root``: its record, else what only one job
    writes (a warehouse from before the record), else None (a new or empty warehouse)."""
    try:
        job = json.loads((Path(root) / JOB_FILE).read_text())["job"]
        if job in JOBS:
            return str(job)
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if is_delta_table(os.path.join(root, "stream_progress")):
        return "stream"
    if os.path.isdir(os.path.join(root, BATCH_RUNS_DIR)) or is_delta_table(os.path.join(root, "raw_records")):
        return "batch"
    return None


def claim_job(root: str, job: str) -> None:
    """Record ``job`` as the writer of ``root`` or refuse it when the other job writes there
    (called with the lock held)."""
    kept = warehouse_job(root)
    if kept is not None and kept != job:
        raise WarehouseKeptError(
            f"warehouse {root} is written by the {kept} job; the batch and the streaming job write the same "
            f"tables, so the {job} job needs a warehouse of its own (set paths.warehouse)"
        )
    path = Path(root) / JOB_FILE
    if kept is None or not path.exists():
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"job": job, "since": datetime.now(UTC).isoformat(timespec="seconds")}) + "\n")
        os.replace(tmp, path)


def _holder_soon(root: str, wait_s: float = 2.0) -> Holder | None:
    """The lock's holder; the holder writes its record just after taking the lock, so a refused
    process that looks in between waits a moment for it rather than naming nobody."""
    import time

    deadline = time.monotonic() + wait_s
    while True:
        holder = read_holder(root)
        if holder is not None or time.monotonic() >= deadline:
            return holder
        time.sleep(0.05)


def current_run_id(warehouse: str) -> str | None:
    """The run id of this process's hold on ``warehouse``'s lock, if it holds it."""
    root = local_path(warehouse) if is_local(warehouse) else warehouse
    held = _HELD.get(os.path.abspath(os.path.join(root, LOCK_FILE)))
    return None if held is None else str(held[2].run_id)


# --------------------------------------------------------------------------------------------
# cleanup


def clean_warehouse(root: str, before: float) -> CleanupReport:
    """Remove other runs' staging directories and the tables' orphan files (lock held)."""
    import shutil

    report = CleanupReport()
    base = Path(root)
    staging = base / STAGING_DIR
    if staging.is_dir():
        for entry in staging.iterdir():
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    entry.unlink()
            report.staging_dirs += 1
        with contextlib.suppress(OSError):
            staging.rmdir()  # when empty
    if not base.is_dir():
        return report
    for table_dir in sorted(base.iterdir()):
        if not table_dir.is_dir() or table_dir.name.startswith(("_", ".")):
            continue
        if not is_delta_table(str(table_dir)):
            continue
        for f in orphan_files(table_dir, before):
            with contextlib.suppress(FileNotFoundError):
                size = f.stat().st_size
                f.unlink()
                report.orphan_files += 1
                report.orphan_bytes += size
    line = report.line()
    if line:
        log.info("warehouse %s: %s", root, line)
    return report
