"""The driver JVM's class-data-sharing archive: every fresh process after the first starts Spark sooner.

Rules:
- A fresh ``offsetlake`` process spends ~6 s before its first Spark job, most of it loading and
  verifying the same ~9,000 Spark classes every time. Java's dynamic class-data-sharing archive
  (JEP 350, Java 13+) maps them from one file instead: measured here, session start 3.6 s →
  2.3–2.9 s and the first job 1.8 s → 0.9–1.1 s.
- Used only where this process starts the JVM itself on a local master (the embedded path, like
  ``pipelines/runtime/log4j2.properties``); under spark-submit or on a cluster nothing changes.
- The archive is a cache file, ``<cache>/offsetlake/jvm/<key>.jsa`` (``$XDG_CACHE_HOME`` or
  ``~/.cache``). The key hashes what the archive is only valid for: the java binary and its
  version, Spark's jar directory and its jars (names and sizes), the classpath settings and the
  driver's memory. The JVM checks the archive again when it maps it and ignores one that does not
  match (``-Xshare:auto``): a wrong or damaged archive costs the speed-up, never a result.
- Without an archive for its key, the process asks its JVM to write one when it exits
  (``-XX:ArchiveClassesAtExit``) to ``<key>.jsa.<uuid>.part``, and notes the JVM's pid beside
  it. The JVM writes it after the command's work (the command itself returns when Python exits;
  the JVM, already orphaned, takes ~3 s of CPU more). A later start renames a part whose JVM is
  gone to ``<key>.jsa`` (an atomic rename: nobody maps a half-written file), so concurrent
  first runs are safe; a part whose JVM still runs is left alone.
- The JVM's own CDS notices are switched off (``-Xlog:cds=off,cds+dynamic=off``).
- ``OFFSETLAKE_JVM_ARCHIVE=0`` turns it off; a cache directory that cannot be written turns it
  off silently. At most ``KEEP`` archives are kept (the newest); older ones are removed, and a part
  whose JVM has exited becomes its key's archive whatever process finds it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipelines.runtime.process import pid_alive

#: archives kept in the cache directory (one per Spark install / Java / memory setting)
KEEP = 3
QUIET = "-Xlog:cds=off,cds+dynamic=off"
#: a part whose JVM pid was never noted (its process died before the JVM ran) counts as being
#: written for this long
UNNOTED_S = 300
CLASSPATH_SETTINGS = (
    "spark.jars",
    "spark.jars.packages",
    "spark.driver.extraClassPath",
    "spark.driver.memory",
    "spark.driver.userClassPathFirst",
)


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "offsetlake" / "jvm"


def archive_key(java: str, banner: str, spark_home: str, conf: Mapping[str, str]) -> str:
    """What the archive is valid for, hashed (see the module rules)."""
    h = hashlib.sha256()
    st = os.stat(java)
    h.update(f"{os.path.realpath(java)}|{st.st_size}|{int(st.st_mtime)}|{banner}|".encode())
    jars = Path(spark_home) / "jars"
    h.update(str(jars.resolve()).encode())
    for jar in sorted(jars.glob("*.jar")):
        h.update(f"|{jar.name}:{jar.stat().st_size}".encode())
    for name in CLASSPATH_SETTINGS:
        h.update(f"|{name}={conf.get(name, '')}".encode())
    return h.hexdigest()[:20]


def _writing(pid_file: Path) -> bool:
    """True while the part's JVM may still run (its pid is alive, or not noted yet and recent)."""
    try:
        pid = int(pid_file.read_text().strip() or "0")
        age = time.time() - pid_file.stat().st_mtime
    except (OSError, ValueError):
        return False
    return pid_alive(pid) if pid else age < UNNOTED_S


def _finish_parts(directory: Path, key: str) -> bool:
    """Rename every part whose JVM has exited to its key's ``.jsa`` (whatever its key: a part of
    a checkout that never runs again must not stay behind as a part); True while another JVM may
    still be writing one for ``key``."""
    busy = False
    for pid_file in directory.glob("*.jsa.*.part.pid"):
        part = Path(str(pid_file)[: -len(".pid")])
        if _writing(pid_file):
            busy = busy or part.name.startswith(f"{key}.jsa.")
            continue
        with contextlib.suppress(OSError):
            if part.exists() and part.stat().st_size > 0:
                os.replace(part, directory / (part.name.split(".jsa.", 1)[0] + ".jsa"))
            part.unlink(missing_ok=True)
            pid_file.unlink(missing_ok=True)
    return busy


def _prune(directory: Path) -> None:
    """Keep the ``KEEP`` newest archives (and no part without its pid file: its writer is gone)."""
    for part in directory.glob("*.jsa.*.part"):
        if not part.with_name(part.name + ".pid").exists():
            with contextlib.suppress(OSError):
                part.unlink()
    archives = sorted(directory.glob("*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in archives[KEEP:]:
        with contextlib.suppress(OSError):
            old.unlink()


class JvmArchive:
    """The options for one JVM start, and what to note once it runs (``started``)."""

    def __init__(self, java: str, banner: str, spark_home: str, conf: Mapping[str, str]) -> None:
        self.options: list[str] = []
        self.part: Path | None = None
        if os.environ.get("OFFSETLAKE_JVM_ARCHIVE", "1") == "0":
            return
        try:
            directory = cache_dir()
            directory.mkdir(parents=True, exist_ok=True)
            key = archive_key(java, banner, spark_home, conf)
            busy = _finish_parts(directory, key)
            _prune(directory)
            final = directory / f"{key}.jsa"
            if final.exists():
                self.options = [f"-XX:SharedArchiveFile={final}", "-Xshare:auto", QUIET]
                return
            if busy:
                return  # another process's JVM is writing it: one archive at a time
            self.part = directory / f"{key}.jsa.{uuid.uuid4().hex}.part"
            self.part.with_name(self.part.name + ".pid").write_text("0")
            self.options = [f"-XX:ArchiveClassesAtExit={self.part}", QUIET]
        except OSError:
            self.options, self.part = [], None

    def started(self, spark: Any) -> None:
        """Note the JVM's pid beside the part it will write (the JVM is ``spark-submit``'s
        process after its ``exec``)."""
        if self.part is None:
            return
        pid = 0
        with contextlib.suppress(Exception):
            pid = int(spark.sparkContext._gateway.proc.pid)
        with contextlib.suppress(OSError):
            self.part.with_name(self.part.name + ".pid").write_text(str(pid))
