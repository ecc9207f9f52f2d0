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
- The lock file is opened without following symbolic links (``O_NOFOLLOW``) and must be a
  regular file of this account with one link: a symlink, a FIFO, a hard link or another
  account's file at ``_offsetlake.lock`` is refused (exit 2, one line) and never truncated.
- Deleting the lock file does not let a second writer in. The holder records itself in its
  staging directory (``_staging/<run id>/_holder.json``: pid, host, process start), and a run
  that takes the lock is refused while any recorded holder is alive (same host, same pid, same
  process start). Before every commit (``check_held``, called by ``pipelines.tableio``) the
  holder checks that the path still names the inode it locked: a removed file is re-created
  and locked again; a file another process holds stops the run before it commits (exit 2).
- The lock is re-entrant within one process (a command that runs the batch job inside another
  command takes it once); it does not serialise threads of one process.
- Object-store warehouses (``s3://`` ...) have no portable file lock: the lock is skipped there
  with a warning (one writer must be ensured by the scheduler, e.g. Airflow's max_active_runs).
- Staging: each run stages under ``<warehouse>/_staging/<run id>``; on taking the lock the run
  deletes every other run's staging directory whose holder is known dead (its record names a
  process of this host that no longer runs, or there is no record: a run from before the
  record) and, when no recorded holder may be alive, every *orphan* data file of the tables: a file under a Delta table's directory
  that no action of the table's log (add or remove, JSON commits and checkpoints) mentions and
  that is older than the lock. Such a file was written by an attempt that died before its
  commit; no reader can ever see it. Files the log mentions are left alone (removed ones are
  VACUUM's business, with its retention for time travel). Which files a table's log mentions
  is ``pipelines.warehouse.orphans``' business (it reads the paths of a local table's log
  actions with the standard library and pyarrow, never ``deltalake``); this module only walks
  the local warehouse it holds the lock of.
- One job per warehouse: the batch and the streaming job write the same tables (the batch
  appends a run's events, the stream merges its micro-batches' keys), so a warehouse written
  by one is never written by the other — the lock alone would only serialise them, and the
  second job would then duplicate or overwrite the first one's rows. The first job to write a
  warehouse records itself in ``<warehouse>/_offsetlake.job`` (written to a temporary file
  created with ``O_EXCL|O_NOFOLLOW``: a link planted there is removed, never written through);
  the other job is refused with
  one line (``WarehouseKeptError``, exit 2) before it reads anything. A warehouse written
  before this file existed is recognised by what only one job writes (``stream_progress``; the
  batch's run records or ``raw_records``). Maintenance, dq and the readers serve either.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import socket
import stat
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipelines.errors import UsageError
from pipelines.runtime.process import pid_alive, proc_start
from pipelines.uri import is_delta_table, is_local, local_path
from pipelines.warehouse.layout import BATCH_RUNS_DIR, JOB_FILE, LOCK_FILE, STAGING_DIR
from pipelines.warehouse.orphans import orphan_files

log = logging.getLogger("offsetlake.lock")

HOLDER_FILE = "_holder.json"
#: how long a holder that finds its lock path held by another process waits before it stops
#: (a run refused for the staging record holds the new file for a moment only)
RECHECK_WAIT_S = 10.0
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
    proc_start: str = ""  # the process's start time in clock ticks since boot (/proc), if known

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


def holder_alive(holder: Holder) -> bool | None:
    """True/False for a holder of this host; None (unknown) for another host's."""
    if holder.host != socket.gethostname():
        return None
    if not pid_alive(holder.pid):
        return False
    started = proc_start(holder.pid)
    return not (holder.proc_start and started and started != holder.proc_start)


def _read_record(path: Path) -> Holder | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            data = json.loads(os.read(fd, 65536))
        finally:
            os.close(fd)
        return Holder(
            int(data["pid"]),
            str(data["host"]),
            str(data["started"]),
            str(data["command"]),
            str(data.get("run_id", "")),
            str(data.get("proc_start", "")),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_holder(warehouse: str) -> Holder | None:
    """The holder recorded in the warehouse's lock file (live or not), if any."""
    return _read_record(Path(warehouse) / LOCK_FILE)


def _open_lock_file(root: str, path: str) -> int:
    """The lock file opened for writing without following links; only a regular file of this
    account with one link (anything else is refused, never truncated)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UsageError(
                f"warehouse {root}: the lock file {path} is a symbolic link; refusing to follow it (remove it)"
            ) from None
        raise UsageError(f"warehouse {root}: cannot open the lock file {path} ({exc.strerror or exc})") from None
    st = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(st.st_mode):
        problem = "is not a regular file"
    elif st.st_nlink != 1:
        problem = f"has {st.st_nlink} hard links"
    elif st.st_uid != os.geteuid():
        problem = f"belongs to uid {st.st_uid}, not this account (uid {os.geteuid()})"
    if problem:
        os.close(fd)
        raise UsageError(f"warehouse {root}: the lock file {path} {problem}; refusing to use it (remove it)")
    return fd


def _write_record(fd: int, holder: Holder) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(asdict(holder)).encode(), 0)
    os.fsync(fd)


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
        fd = _open_lock_file(self.root, self.path)
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
        holder = Holder(
            os.getpid(),
            socket.gethostname(),
            datetime.now(UTC).isoformat(timespec="seconds"),
            self.command,
            self.run_id,
            proc_start(os.getpid()),
        )
        live = [h for h in staging_holders(self.root) if h.run_id != self.run_id and holder_alive(h)]
        if live:  # the lock file was removed under a live run: its staging record names it
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            raise WarehouseBusyError(
                f"warehouse {self.root} is in use by {live[0].describe()} (its lock file {self.path} was "
                "removed while it runs); one writer at a time: wait for it to end or stop it"
            )
        previous = read_holder(self.root)
        # the kernel released the previous holder's lock: it is gone (or on another host whose
        # lock was not shared, which a local path rules out)
        if previous is not None and previous.pid != os.getpid() and holder_alive(previous) is not True:
            self.took_over = previous
        _write_record(fd, holder)
        entry: list[Any] = [fd, 1, holder, self.cleanup, self.took_over]
        _HELD[self.path] = entry
        if self.took_over is not None:
            log.info("warehouse lock: took over from %s (no longer running)", self.took_over.describe())
        try:
            _record_staging_holder(self.root, holder)
            if self.job is not None:
                claim_job(self.root, self.job)
            self.cleanup = entry[3] = clean_warehouse(self.root, before=self.acquired_at, own_run=self.run_id)
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
        _drop_staging_holder(self.root, held[2].run_id)
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
        _write_new(tmp, json.dumps({"job": job, "since": datetime.now(UTC).isoformat(timespec="seconds")}) + "\n")
        os.replace(tmp, path)


def _write_new(tmp: Path, text: str) -> None:
    """Write ``text`` to a file created here (``O_EXCL|O_NOFOLLOW``): a symbolic link or file
    planted at ``tmp`` is removed (the link itself, never its target) and never written through."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, 0o644)
    except FileExistsError:  # a leftover of a dead process with this pid, or a planted link
        os.unlink(tmp)
        fd = os.open(tmp, flags, 0o644)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)


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


def check_held(location: str, *, wait_s: float | None = None) -> None:
    """Before a commit to ``location``: when this process holds the lock of a warehouse that
    contains it, the lock path must still name the inode it locked. A removed file is created
    and locked again; a file another process holds stops the run (``WarehouseBusyError``)
    after ``wait_s`` (default ``RECHECK_WAIT_S``)."""
    if not _HELD:
        return
    target = os.path.abspath(local_path(location)) if is_local(location) else None
    for path, held in list(_HELD.items()):
        root = os.path.dirname(path)
        if target is None or not (target == root or target.startswith(root + os.sep)):
            continue
        deadline = time.monotonic() + (RECHECK_WAIT_S if wait_s is None else wait_s)
        while not _still_ours(root, path, held):
            if time.monotonic() >= deadline:
                other = read_holder(root)
                who = other.describe() if other else "another process"
                raise WarehouseBusyError(
                    f"warehouse {root}: the lock file {path} was replaced while this run held it and "
                    f"{who} holds it now; stopped before the next commit (one writer at a time)"
                )
            time.sleep(0.1)


def _still_ours(root: str, path: str, held: list[Any]) -> bool:
    """True when ``path`` names the locked inode, or names a file this process could lock
    again (the old one was removed: nobody else holds the new one)."""
    import fcntl

    fd = held[0]
    mine = os.fstat(fd)
    try:
        st = os.stat(path, follow_symlinks=False)
        if (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino):
            return True
    except FileNotFoundError:
        pass
    new = _open_lock_file(root, path)
    try:
        fcntl.flock(new, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(new)
        return False
    _write_record(new, held[2])
    held[0] = new
    os.close(fd)
    log.warning("warehouse %s: the lock file %s was removed while this run held it; locked it again", root, path)
    return True


def _staging_record(root: str, run_id: str) -> Path:
    return Path(root) / STAGING_DIR / run_id / HOLDER_FILE


def _record_staging_holder(root: str, holder: Holder) -> None:
    """Write ``holder`` in its run's staging directory (how a run that takes a removed lock
    finds a live holder, and how the cleanup knows whose staging it may remove)."""
    record = _staging_record(root, holder.run_id)
    record.parent.mkdir(parents=True, exist_ok=True)
    tmp = record.with_name(f".{HOLDER_FILE}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps(asdict(holder)))
    os.replace(tmp, record)


def _drop_staging_holder(root: str, run_id: str) -> None:
    record = _staging_record(root, run_id)
    with contextlib.suppress(OSError):
        record.unlink()
    for d in (record.parent, record.parent.parent):  # the run's directory, then ``_staging``, when empty
        with contextlib.suppress(OSError):
            d.rmdir()


def staging_holders(root: str) -> list[Holder]:
    """The holders recorded in the staging directories of ``root`` (live or not)."""
    staging = Path(root) / STAGING_DIR
    if not staging.is_dir():
        return []
    found = (_read_record(d / HOLDER_FILE) for d in sorted(staging.iterdir()) if d.is_dir())
    return [h for h in found if h is not None]


# --------------------------------------------------------------------------------------------
# cleanup


def clean_warehouse(root: str, before: float, own_run: str | None = None) -> CleanupReport:
    """Remove other runs' staging directories whose holder is known dead and, when no other
    recorded holder may be alive, the tables' orphan files (lock held)."""
    import shutil

    report = CleanupReport()
    base = Path(root)
    staging = base / STAGING_DIR
    kept: list[str] = []
    if staging.is_dir():
        for entry in staging.iterdir():
            if entry.name == own_run:
                continue
            record = _read_record(entry / HOLDER_FILE) if entry.is_dir() else None
            if record is not None and holder_alive(record) is not False:
                kept.append(f"{entry.name} ({record.describe()})")
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    entry.unlink()
            report.staging_dirs += 1
        with contextlib.suppress(OSError):
            staging.rmdir()  # when empty
    if kept:
        log.warning("warehouse %s: kept the staging of runs that may be alive, no orphan cleanup: %s", root, kept)
        return report
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
