"""The replay query's checkpoint, read back: a micro-batch's source offsets from the offset log.

Rules:
- Spark writes ``<checkpoint>/offsets/<batch id>`` before the batch runs: a version line, the
  batch's metadata, then one line per source with its end offset (``-`` for none). The start of a
  batch is the end of the batch before it (the first starts at its source's initial offset).
- Only a local checkpoint can be read back (``source.local_dir``); elsewhere there is nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipelines.stream.source import local_dir


def checkpoint_offsets(checkpoint: str, batch_id: int) -> tuple[dict[str, Any], list[Any]] | None:
    """(metadata, source offsets) of a micro-batch from the checkpoint's offset log."""
    try:
        lines = (Path(checkpoint) / "offsets" / str(batch_id)).read_text().splitlines()
        return json.loads(lines[1]), [json.loads(x) if x.strip() not in ("", "-") else None for x in lines[2:]]
    except (OSError, ValueError, IndexError):
        return None


def batch_offsets(
    checkpoint: str, batch_id: int, initial: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(start, end) offsets of the packed landing (or segment) source in micro-batch
    ``batch_id``, from the checkpoint's offset log (written before the batch runs), else None;
    the first micro-batch starts at ``initial`` (the source's initial offset)."""
    local = local_dir(checkpoint)
    cur = checkpoint_offsets(str(local), batch_id) if local else None
    if cur is None or not cur[1] or not isinstance(cur[1][0], dict) or "records" not in cur[1][0]:
        return None
    prev = checkpoint_offsets(str(local), batch_id - 1) if batch_id > 0 else None
    start = prev[1][0] if prev and prev[1] and isinstance(prev[1][0], dict) else None
    return start or initial, cur[1][0]
