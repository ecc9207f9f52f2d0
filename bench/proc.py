"""What the benchmarks read about processes (Linux ``/proc``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


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


def _tree(pid: int | None) -> list[Any]:
    """Process ``pid`` (default: this one) and every descendant, as psutil processes ([] if gone)."""
    import psutil

    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def _rss(p: Any) -> int:
    import psutil

    try:
        return int(p.memory_info().rss)
    except psutil.Error:  # gone meanwhile
        return 0


def tree_pss(pid: int | None = None) -> int:
    """Proportional set size (bytes) of process ``pid`` (default: this one) and every descendant,
    now: each shared page counted once across them (``/proc/<pid>/smaps_rollup``). Spark's
    forked Python workers share their daemon's pages, which ``tree_rss`` counts once per worker;
    this is the memory the tree holds. A process whose rollup cannot be read counts its RSS."""
    total = 0
    for p in _tree(pid):
        try:
            text = Path(f"/proc/{p.pid}/smaps_rollup").read_text()
            total += next(int(line.split()[1]) * 1024 for line in text.splitlines() if line.startswith("Pss:"))
        except (OSError, StopIteration):
            total += _rss(p)
    return total


def tree_rss(pid: int | None = None) -> int:
    """Resident bytes of process ``pid`` (default: this one) and every descendant, now."""
    return sum(_rss(p) for p in _tree(pid))
