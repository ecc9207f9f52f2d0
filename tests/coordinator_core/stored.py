"""A snapshot stored between replay calls the two ways the core can store it, for the tests."""

from __future__ import annotations

import pickle

from coordinator_core.loader.snapshot import GroupSnapshot
from coordinator_core.loader.snapshot_codec import deserialize_snapshot, serialize_snapshot
from coordinator_core.loader.snapshot_values import snapshot_from_values, snapshot_values


def stored(s: GroupSnapshot) -> GroupSnapshot:
    """``s`` written and read back as a carried replay keeps it (plain values, pickled), after
    checking that the byte codec gives back the same snapshot."""
    assert deserialize_snapshot(serialize_snapshot(s)) == s
    back = snapshot_from_values(pickle.loads(pickle.dumps(snapshot_values(s), protocol=pickle.HIGHEST_PROTOCOL)))
    assert back == s
    return back
