"""This host's processes, by pid: is one alive, and when did it start (so that a pid names one
process, never a later one that reuses it). Shared by the warehouse's lock (its holders) and the
JVM archive (the process that is writing it)."""

from __future__ import annotations

import os
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """True while a process with this pid exists on this host (ours or another user's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def proc_start(pid: int) -> str:
    """The start time of process ``pid`` in clock ticks since boot ("" when unknown): with the
    pid it names one process, never a later one that reuses the pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2 :].split()[19]
    except (OSError, ValueError, IndexError):
        return ""
