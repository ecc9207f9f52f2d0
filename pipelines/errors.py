"""Errors of the pipeline layer (the core has its own hierarchy in ``coordinator_core.errors``)."""

from __future__ import annotations


class UsageError(Exception):
    """Bad configuration or input: the CLI prints one line (the message) and exits with code 2."""


class JavaNotFoundError(UsageError):
    """Spark needs Java 17+; raised before Py4J can print a stack trace."""


class DataLossError(UsageError):
    """The run would drop or lose input records (late stream data, unreadable input): it stops
    instead, naming what and how many, unless the configuration allows it."""


# --------------------------------------------------------------------------------------------
# one line for a failure, whatever layer raised it

#: Where the trace goes: ``--debug`` on the CLI sets it; Spark's own failure logs stay on too.
DEBUG_ENV = "OFFSETLAKE_DEBUG"

#: How ``pipelines.records.carried`` begins its refusal of a kept group's entry (a format a newer
#: release wrote, a snapshot that does not read); ``kept_state_refusal`` finds it in any layer's text.
KEPT_STATE = "a kept group's snapshot"

_PATTERNS: list[tuple[str, str]] = [
    # (regex over the whole exception text, one-line template; {0}.. are the groups)
    (
        r"(\S+?\.parquet): unreadable landing Parquet file \(([^\n)]*)",
        "input: {0}: unreadable Parquet file (corrupt page or footer: {1})",
    ),
    (
        r"Parquet column cannot be converted in file (\S+?)\.? Column: \[([^\]]+)\], Expected: (\S+), Found: (\S+)",
        "input: {0}: column {1} has type {3}, expected {2}",
    ),
    (
        r"(?:FAILED_READ_FILE|Encountered error while reading file) (\S+?)\.?\s",
        "input: {0}: the file could not be read (corrupt or not Parquet)",
    ),
    (r"No space left on device(?:[^\n]*?(/[^\s'\"]+))?", "disk full (ENOSPC): no space left on the device{0}"),
    (r"Read-only file system(?:[^\n]*?(/[^\s'\"]+))?", "read-only file system (EROFS): cannot write{0}"),
    (r"Permission denied(?:[^\n]*?(/[^\s'\"]+))?", "permission denied (EACCES): cannot write{0}"),
]


def _exc_text(exc: BaseException) -> str:
    parts = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        parts.append(f"{type(cur).__name__}: {cur}")
        if isinstance(cur, OSError) and cur.filename:
            parts.append(f"path {cur.filename}")
        cur = cur.__cause__ or cur.__context__
    return "\n".join(parts)


def describe_failure(exc: BaseException, where: str | None = None) -> str | None:
    """One line naming the file, column or device behind a known failure class (disk full,
    read-only or forbidden warehouse, a corrupt or mistyped input file, a kept group's state this
    release does not read: ``kept_state_refusal``), whatever layer raised it (Python, pyarrow,
    delta-rs, or Spark/Py4J wrapping a task's error); ``None`` otherwise.
    ``where``: what the command writes (its warehouse, its output file), named when the failure
    itself names no path, with the free space of its device."""
    kept = kept_state_refusal(exc)
    if kept is not None:  # kept in the stream's checkpoint or the batch's warehouse: the job names which
        return kept
    line = _describe(exc)
    if line is None or where is None or "/" in line.split("):", 1)[-1]:
        return line
    return f"{line} (writing under {where}{_free(where)})"


def kept_state_refusal(exc: BaseException) -> str | None:
    """The carried replay's refusal of a kept group's entry (its message, ``KEPT_STATE`` first)
    anywhere in ``exc``'s chain, a Spark task's trace in its text included; ``None`` otherwise."""
    import re

    m = re.search(rf"ValueError: ({re.escape(KEPT_STATE)}[^\n]*)", _exc_text(exc))
    return m.group(1).rstrip() if m else None


def _free(where: str) -> str:
    """``, N MiB free`` on the device holding ``where`` (its nearest existing ancestor)."""
    import os
    import shutil

    path = where
    while path and not os.path.exists(path):
        path = os.path.dirname(path.rstrip("/"))
    try:
        return f", {shutil.disk_usage(path or '/').free / 2**20:.0f} MiB free"
    except OSError:
        return ""


def _describe(exc: BaseException) -> str | None:
    import errno
    import re

    cur: BaseException | None = exc
    while cur is not None:  # a plain OSError carries errno and path
        known = {
            errno.ENOSPC: "disk full (ENOSPC): no space left on the device",
            errno.EROFS: "read-only file system (EROFS): cannot write",
            errno.EACCES: "permission denied (EACCES): cannot write",
            # a path given for a directory names a file (``--out notes.txt``), or the reverse
            errno.EEXIST: "a file is in the way (EEXIST): expected a directory at",
            errno.ENOTDIR: "not a directory (ENOTDIR):",
            errno.EISDIR: "is a directory (EISDIR), expected a file:",
        }
        if isinstance(cur, OSError) and cur.errno in known:
            what = known[cur.errno]
            return f"{what} {cur.filename}" if cur.filename else what
        cur = cur.__cause__
    text = _exc_text(exc)
    for pattern, template in _PATTERNS:
        m = re.search(pattern, text)
        if m:
            groups = [g or "" for g in m.groups()]
            if "{0}" in template and template.endswith("{0}") and groups and groups[0]:
                groups[0] = " " + groups[0]
            return template.format(*groups)
    return None


def first_line(exc: BaseException) -> str:
    """The exception's first meaningful line (Spark/Py4J messages start with a blank or a
    class name)."""
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if line:
            return f"{type(exc).__name__}: {line[:300]}"
    return type(exc).__name__
