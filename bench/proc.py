"""What the benchmarks read about processes (Linux ``/proc``)."""

from __future__ import annotations

import os
from pathlib import Path


def tree_cpu_seconds(root: int | None = None) -> float:
    """CPU seconds (user + system, reaped children included) of process ``root`` (default: this
    one) and every descendant: Spark's JVM, its Python daemons and workers."""
    tick = os.sysconf("SC_CLK_TCK")
    kids: dict[int, list[int]] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            # after "pid (comm)": state ppid ... utime(14) stime(15) cutime(16) cstime(17), 1-based
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        cpu[int(entry)] = sum(int(x) for x in fields[11:15]) / tick
        kids.setdefault(int(fields[1]), []).append(int(entry))
    total, todo = 0.0, [os.getpid() if root is None else root]
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0.0)
        todo.extend(kids.get(pid, []))
    return total


def tree_pss(pid: int | None = None) -> int:
    """Proportional set size (bytes) of process ``pid`` (default: this one) and every descendant,
    now: each shared page counted once across them (``/proc/<pid>/smaps_rollup``). Spark's
    forked Python workers share their daemon's pages, which ``tree_rss`` counts once per worker;
    this is the memory the tree holds. A process whose rollup cannot be read counts its RSS."""
    import contextlib

    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for p in procs:
        try:
            text = Path(f"/proc/{p.pid}/smaps_rollup").read_text()
            total += next(int(line.split()[1]) * 1024 for line in text.splitlines() if line.startswith("Pss:"))
        except (OSError, StopIteration):
            with contextlib.suppress(psutil.Error):
                total += p.memory_info().rss
    return total


def tree_rss(pid: int | None = None) -> int:
    """Resident bytes of process ``pid`` (default: this one) and every descendant, now."""
    import contextlib

    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total
