"""Orphan data files of a Delta table: files under its directory that no log action mentions.

Rules:
- A file is known when any ``add`` or ``remove`` action of the log mentions it (JSON commits and
  Parquet checkpoints; paths URL-decoded; absolute paths inside the table made relative). A
  log that cannot be read completely yields no orphans: nothing is deleted on a guess.
- An orphan is an unknown ``.parquet`` file older than ``before`` (written by an attempt that
  died before its commit; no reader can ever see it). Removed-but-known files are VACUUM's.
- Local tables only (``pathlib``): the caller is the warehouse lock's cleanup, which runs only
  where the lock is a local ``flock`` (``pipelines.warehouse.lock``).
- Reading the log's add/remove paths needs no Delta library (JSON lines, pyarrow for Parquet
  checkpoints). It lives beside the lock, its one caller, so that the lock, which ``tableio``
  asks before every commit, imports nothing of ``tableio``.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from urllib.parse import unquote

from pipelines.uri import DELTA_LOG

log = logging.getLogger("offsetlake.lock")


def _log_paths(log_dir: Path) -> set[str] | None:
    """Every data file path (relative, decoded) any add/remove action of the log mentions, or
    ``None`` when the log cannot be read completely (then nothing is deleted)."""
    paths: set[str] = set()
    try:
        entries = sorted(log_dir.iterdir())
    except OSError:
        return None
    for entry in entries:
        name = entry.name
        try:
            if name.endswith(".json") and name[:20].isdigit():
                for line in entry.read_text().splitlines():
                    if not line.strip():
                        continue
                    action = json.loads(line)
                    for kind in ("add", "remove"):
                        if kind in action and action[kind].get("path"):
                            paths.add(unquote(action[kind]["path"]))
            elif ".checkpoint" in name and name.endswith(".parquet"):
                import pyarrow.parquet as pq

                table = pq.read_table(entry, columns=[c for c in ("add", "remove") if c in pq.read_schema(entry).names])
                for col in table.column_names:
                    for item in table.column(col).to_pylist():
                        if item and item.get("path"):
                            paths.add(unquote(item["path"]))
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            log.warning("cleanup: cannot read %s (%s): no orphan files removed from this table", entry, exc)
            return None
    return paths


def orphan_files(table_dir: Path, before: float) -> list[Path]:
    """Data files under a Delta table directory that its log never mentions, older than ``before``."""
    known = _log_paths(table_dir / DELTA_LOG)
    if known is None:
        return []
    root = table_dir.resolve().as_posix().rstrip("/") + "/"
    for p in list(known):  # absolute paths (shallow clones, other writers) → relative when inside
        local = p[len("file://") :] if p.startswith("file://") else p[len("file:") :] if p.startswith("file:") else p
        if local.startswith(root):
            known.add(local[len(root) :])
        elif "://" in p or p.startswith("/"):
            known.add(p)
    out = []
    for dirpath, dirnames, filenames in os.walk(table_dir):
        dirnames[:] = [d for d in dirnames if d != DELTA_LOG and not d.startswith(".")]
        for fname in filenames:
            if not fname.endswith(".parquet"):
                continue
            full = Path(dirpath) / fname
            rel = full.relative_to(table_dir).as_posix()
            if rel in known:
                continue
            try:
                if full.stat().st_mtime < before:
                    out.append(full)
            except FileNotFoundError:
                continue
    return out
