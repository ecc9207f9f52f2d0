"""The share (KIP-932) or streams (KIP-1071) fold behind a ``ModernGroupSnapshot``."""

from __future__ import annotations

from coordinator_core.modern.group_epochs import ModernGroupFold, ModernGroupSnapshot
from coordinator_core.modern.share.fold import ShareGroupFold
from coordinator_core.streams.fold import StreamsGroupFold


def restore_modern(s: ModernGroupSnapshot | None) -> ModernGroupFold | None:
    """The fold that resumes from ``s`` (None: the group id was never such a group)."""
    if s is None:
        return None
    return ShareGroupFold(s.group_id, s) if s.group_type == "share" else StreamsGroupFold(s.group_id, s)
