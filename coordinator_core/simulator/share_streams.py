"""The generator's share groups (KIP-932) and streams groups (KIP-1071): planned lives written
by ``modern.share.writer.ShareGroupWriter`` / ``streams.writer.StreamsGroupWriter`` into the
simulated cluster's log at their times, and their truth.

Rules:
- A share group: two or three consumers join a few seconds apart (each join one write, the
  other members' next heartbeats 200 ms later), one leaves later in the run (its fence, then the
  others' heartbeats); one group in three then loses its last members and is deleted
  (DeleteGroups) near the end.
- A streams group: two processes join and reconcile (revocations, then releases, 300 ms apart),
  one leaves and the other takes its tasks; one group in two gets a third process later.
- A streams group commits every ``STREAMS_COMMIT_MS`` from its first join to the end of the run
  (Kafka Streams' ``commit.interval.ms``): one OffsetCommit write (value version 3, no expire
  timestamp) of its source partitions, the input topic's and the repartition topic's, each
  offset a little further on. They are its subscribed topics and the group never empties here,
  so none expires (``coordinator_core.expiry``'s streams rule): the truth keeps them all. A
  share group commits nothing (its delivery state is in ``__share_group_state``).
- Truth per group: kind, final state, group and assignment epochs, members, deletion time, and
  a streams group's committed offsets.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from coordinator_core.codec.records import OffsetCommitKey, OffsetCommitValue, Record
from coordinator_core.simulator.share_writer import ShareGroupWriter
from coordinator_core.simulator.streams_writer import StreamsGroupWriter

HEARTBEAT_MS = 200
#: a streams application's commit interval (Kafka Streams' ``commit.interval.ms`` default)
STREAMS_COMMIT_MS = 30_000


class ShareStreamsPlan:
    """Schedules the share and streams groups of a run on ``schedule(at_ms, fn)``; ``append(records)``
    writes one coordinator write at the simulator's now."""

    def __init__(
        self,
        schedule: Callable[[int, Callable[[], None]], None],
        append: Callable[[Iterable[Record]], None],
        topics: dict[str, int],
        seed: int,
        start_ms: int,
        end_ms: int,
    ) -> None:
        self.schedule, self.append = schedule, append
        self.topics = topics
        self.rng = random.Random(f"share-streams:{seed}")
        self.start, self.end = start_ms, end_ms
        self.share: dict[str, ShareGroupWriter] = {}
        self.streams: dict[str, StreamsGroupWriter] = {}
        self.deleted: dict[str, int] = {}
        self.offsets: dict[str, dict[tuple[str, int], int]] = {}  # streams group -> committed

    def _at(self, lo: float, hi: float) -> int:
        return self.start + int((self.end - self.start) * (lo + (hi - lo) * self.rng.random()))

    def _writes(self, at: int, batches: Sequence[list[Record]], spacing: int) -> None:
        for i, b in enumerate(batches):
            self.schedule(at + (i + 1) * spacing, lambda b=b: self.append(b))  # type: ignore[misc]

    def plan_share(self, n: int) -> None:
        names = sorted(self.topics)
        for k in range(n):
            gid = f"share-workers-{k:03d}"
            topic = self.rng.choice(names)
            w = self.share[gid] = ShareGroupWriter(gid, self.topics)
            t = self._at(0.02, 0.3)
            members = [f"{gid}-c{j}" for j in range(self.rng.choice((2, 3)))]
            for mid in members:
                t += self.rng.randint(2_000, 30_000)
                self.schedule(t, lambda w=w, mid=mid, t=t, topic=topic: self._join_share(w, mid, topic, t))  # type: ignore[misc]
            t_leave = self._at(0.5, 0.75)
            self.schedule(t_leave, lambda w=w, mid=members[0], t=t_leave: self._leave_share(w, mid, t))  # type: ignore[misc]
            if k % 3 == 2:
                t_end = self._at(0.8, 0.9)
                for mid in members[1:]:
                    t_end += 1_000
                    self.schedule(t_end, lambda w=w, mid=mid, t=t_end: self._leave_share(w, mid, t))  # type: ignore[misc]
                self.schedule(t_end + 60_000, lambda w=w, t=t_end + 60_000: self._delete(w.group_id, w.delete(), t))  # type: ignore[misc]

    def _join_share(self, w: ShareGroupWriter, mid: str, topic: str, t: int) -> None:
        self.append(w.join(mid, [topic]))
        self._writes(t, w.reconcile(), HEARTBEAT_MS)

    def _leave_share(self, w: ShareGroupWriter, mid: str, t: int) -> None:
        self.append(w.leave(mid))
        self._writes(t, w.reconcile(), HEARTBEAT_MS)

    def _delete(self, gid: str, records: list[Record], t: int) -> None:
        self.append(records)
        self.deleted[gid] = t

    def plan_streams(self, n: int) -> None:
        names = sorted(self.topics)
        for k in range(n):
            gid = f"streams-app-{k:03d}"
            topic = self.rng.choice(names)
            w = self.streams[gid] = StreamsGroupWriter(gid, topic, min(self.topics[topic], 8))
            t = self._at(0.02, 0.3)
            for j in (0, 1):
                t += self.rng.randint(3_000, 20_000)
                self.schedule(t, lambda w=w, j=j, t=t: self._join_streams(w, f"{w.group_id}-p{j}", t))  # type: ignore[misc]
                if j == 0:
                    self.offsets[gid] = {}
                    for tc in range(t + STREAMS_COMMIT_MS, self.end, STREAMS_COMMIT_MS):
                        self.schedule(tc, lambda w=w, tc=tc: self._commit_streams(w, tc))  # type: ignore[misc]
            t_leave = self._at(0.45, 0.6)
            self.schedule(t_leave, lambda w=w, t=t_leave: self._leave_streams(w, f"{w.group_id}-p0", t))  # type: ignore[misc]
            if k % 2 == 1:
                t3 = self._at(0.65, 0.85)
                self.schedule(t3, lambda w=w, t=t3: self._join_streams(w, f"{w.group_id}-p2", t))  # type: ignore[misc]

    def _join_streams(self, w: StreamsGroupWriter, mid: str, t: int) -> None:
        self.append(w.join(mid, f"process-{mid}"))
        self._writes(t, w.reconcile(), 300)

    def _commit_streams(self, w: StreamsGroupWriter, t: int) -> None:
        """One OffsetCommit of the group's source partitions (input and repartition topics)."""
        committed = self.offsets[w.group_id]
        records = []
        for topic in (w.source, w.repartition):
            for p in range(w.partitions):
                offset = committed.get((topic, p), 0) + self.rng.randint(0, 500)
                committed[(topic, p)] = offset
                records.append(
                    Record(OffsetCommitKey(w.group_id, topic, p), OffsetCommitValue(offset, "", t, None, None, 3))
                )
        self.append(records)

    def _leave_streams(self, w: StreamsGroupWriter, mid: str, t: int) -> None:
        self.append(w.leave(mid))
        self._writes(t, w.reconcile(), 300)

    def truth(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for gid, s in sorted(self.share.items()):
            out[gid] = {
                "group_type": "share",
                "final_state": "Dead" if gid in self.deleted else s.state,
                "group_epoch": s.epoch,
                "assignment_epoch": s.target_epoch,
                "members": sorted(s.subscriptions),
                "deleted_ms": self.deleted.get(gid),
            }
        for gid, st in sorted(self.streams.items()):
            out[gid] = {
                "group_type": "streams",
                "final_state": st.state,
                "group_epoch": st.epoch,
                "assignment_epoch": st.target_epoch,
                "members": sorted(st.members),
                "processes": sorted(set(st.members.values())),
                "source_topics": list(st.source_topics),
                "deleted_ms": None,
                "offsets": {f"{t}:{p}": o for (t, p), o in sorted(self.offsets.get(gid, {}).items())},
            }
        return out
