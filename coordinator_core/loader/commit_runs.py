"""Runs of offset commits given as their survivors plus a summary: the replay's bulk path.

Rules: this module belongs to the expiry decider (``coordinator_core.expiry``): whether a run may
be applied from its survivors is an expiry question, asked of the replay's working state only
through ``expiry.BulkFold`` (``emits_commit_events``, ``last_position``, ``quiet_through``,
``skip_commits``); nothing here reads or writes the fold's state. ``replay_runs``
(``coordinator_core.loader.replay``) gives the same result as replaying every record:

Within a group, the offset commits between two other records (group metadata, tombstones,
unsupported records) form a run; of a run only the last commit per (topic, partition) stays
in the state. The others matter only for (a) ``offset_commit`` events, (b) the counters and
(c) expiry, which runs before a record at time t when t >= next_check. ``replay_runs`` applies
a run from its survivors when that is exact, and from all its records otherwise:
- No commit event is asked for, and every record of the run lies above the last applied
  position (so none is a duplicate): then the dropped commits are applied-then-replaced and
  only add to ``records_seen``/``applied``/``offset_commits``. The run's last record is a
  survivor (the last commit of its key), so last_position/last_timestamp_ms come out the same.
- Nothing can be due inside the run: the group's next expiry (``next_expiry_ms``, exact; the
  lower bound ``next_check`` when that already proves it) and a lower bound of the due time of
  every commit of the run (``expiry.min_due_ms``; for a group the run creates, the new group's
  situation: no protocol type) are all later than the run's largest timestamp. Then, in the
  full replay, every expiry check inside the run finds nothing (the state then holds the
  earlier offsets and commits of the run only); the same holds for the survivors. A check
  that finds nothing only recomputes ``next_check``.
- ``next_check`` differs afterwards (the dropped commits never lowered it) but stays a lower
  bound of the next due time in both replays: a check fires at least at the first record at
  or past the true due time, and a check before it finds nothing, so the first check that
  expires something happens at the same record with the same state, and from there on the
  two replays are the same.
- The run's first commit is a survivor: a commit that finds no live group creates one
  (``offset_created_group``, with its time and position), and from then on the group holds
  an offset, so it cannot die of being Empty without offsets inside the run.
- The dropped commits cannot have removed a predicted expiry that a survivor does not remove
  again (the same key comes later in the run, and nothing is predicted inside a safe run), and
  the run of offset tombstones (``tombstone_run``) is cleared by the first commit either way.
The offsets mapping may hold its keys in another insertion order; snapshots compare equal,
serialise to the same bytes, and every row producer sorts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from coordinator_core.codec.records import LogRecord, OffsetCommitKey, OffsetCommitValue, ReplayItem
from coordinator_core.expiry import BulkFold

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class CommitRun:
    """Consecutive offset commits of one group, given by their survivors and a summary.

    The run's records are offset commits (``OffsetCommitKey`` with an ``OffsetCommitValue``) in
    strictly increasing log position with no other record of the group between them.

    Attributes:
        kept: the survivors in log order: the run's first record and the last commit of every
            (topic, partition) of the run (so also its last record), and possibly others.
        count: commits in the run, survivors included.
        first_position: (partition, offset) of the run's first record.
        max_timestamp_ms: the largest record timestamp in the run.
        min_commit_timestamp_ms: least commit timestamp of the run's commits without an
            explicit expire timestamp (None: there are none).
        min_expire_timestamp_ms: least explicit (v1) expire timestamp in the run (None: none).
        expand: returns all ``count`` records in log order (used when the run is not safe to
            apply from its survivors).
    """

    kept: Sequence[ReplayItem]
    count: int
    first_position: tuple[int, int]
    max_timestamp_ms: int
    min_commit_timestamp_ms: int | None
    min_expire_timestamp_ms: int | None
    expand: Callable[[], Iterable[ReplayItem]] = field(compare=False, repr=False)


@dataclass(slots=True)
class RunCounters:
    """What ``replay_runs`` did with the runs it was given (accumulates across calls)."""

    runs: int = 0
    compressed: int = 0
    expanded: int = 0
    commits_skipped: int = 0
    expanded_by_reason: dict[str, int] = field(default_factory=dict)


def _run_unsafe(fold: BulkFold, run: CommitRun, last: tuple[int, int] | None) -> str | None:
    """Why ``run`` cannot be applied from its survivors now (None: it can)."""
    kept = run.kept
    if fold.emits_commit_events:
        return "offset_commit_events"
    if not kept or run.count <= len(kept) or kept[0].position != run.first_position:
        return "shape"
    if last is not None and run.first_position <= last:
        return "duplicates"
    if not fold.quiet_through(run.max_timestamp_ms, run.min_commit_timestamp_ms, run.min_expire_timestamp_ms):
        return "expiry"
    return None


def unroll(items: Iterable[ReplayItem | CommitRun], fold: BulkFold, counters: RunCounters) -> Iterator[ReplayItem]:
    """The records the replay applies one by one: a safe run's survivors, an unsafe run's
    records. Lazy: a run is judged after every record before it has been applied."""
    last = fold.last_position  # the running maximum of positions (= the replay loop's ``last``)
    for item in items:
        if type(item) is CommitRun:
            counters.runs += 1
            reason = _run_unsafe(fold, item, last)
            if reason is None:
                counters.compressed += 1
                n = item.count - len(item.kept)
                counters.commits_skipped += n
                fold.skip_commits(n)
                kept = item.kept
                yield from kept
                pos = kept[-1].position
                if last is None or pos > last:
                    last = pos
            else:
                counters.expanded += 1
                counters.expanded_by_reason[reason] = counters.expanded_by_reason.get(reason, 0) + 1
                for rec in item.expand():
                    yield rec
                    pos = (rec.partition, rec.offset)
                    if last is None or pos > last:
                        last = pos
        else:
            rec = item  # type: ignore[assignment]
            yield rec
            pos = (rec.partition, rec.offset)
            if last is None or pos > last:
                last = pos


def _is_commit(rec: ReplayItem) -> bool:
    # a plain commit only: a transactional one (pending until its marker) and a marker end a run
    return (
        type(rec) is LogRecord
        and type(rec.key) is OffsetCommitKey
        and type(rec.value) is OffsetCommitValue
        and rec.producer_id is None
    )


def compress_commit_runs(
    records: Iterable[ReplayItem], *, max_span_ms: int | None = None
) -> list[ReplayItem | CommitRun]:
    """Group a group's records into plain records and ``CommitRun``s (the reference reducer).

    A run is a maximal stretch of offset commits in strictly increasing position; it is also
    cut where ``timestamp_ms // max_span_ms`` changes (short runs stay safe under a short
    retention). Survivors: the run's first record and the last commit per (topic, partition).
    A run of one record, or one where every record survives, is given as plain records.
    """
    out: list[ReplayItem | CommitRun] = []
    run: list[LogRecord] = []

    def flush() -> None:
        if len(run) < 2:
            out.extend(run)
            return
        last_of: dict[TopicPartition, int] = {}
        for i, r in enumerate(run):
            k = r.key
            assert isinstance(k, OffsetCommitKey)
            last_of[(k.topic, k.partition)] = i
        keep = sorted({0, *last_of.values()})
        if len(keep) == len(run):
            out.extend(run)
            return
        min_cts: int | None = None
        min_exp: int | None = None
        for r in run:
            v = r.value
            assert isinstance(v, OffsetCommitValue)
            if v.expire_timestamp is None:
                if min_cts is None or v.commit_timestamp < min_cts:
                    min_cts = v.commit_timestamp
            elif min_exp is None or v.expire_timestamp < min_exp:
                min_exp = v.expire_timestamp
        full = tuple(run)
        out.append(
            CommitRun(
                kept=[run[i] for i in keep],
                count=len(run),
                first_position=run[0].position,
                max_timestamp_ms=max(r.timestamp_ms for r in run),
                min_commit_timestamp_ms=min_cts,
                min_expire_timestamp_ms=min_exp,
                expand=lambda: full,
            )
        )

    prev: tuple[int, int] | None = None
    for rec in records:
        pos = rec.position
        if _is_commit(rec):
            assert type(rec) is LogRecord
            if run and (
                prev is None
                or pos <= prev
                or (max_span_ms is not None and rec.timestamp_ms // max_span_ms != run[-1].timestamp_ms // max_span_ms)
            ):
                flush()
                run = []
            run.append(rec)
        else:
            flush()
            run = []
            out.append(rec)
        prev = pos
    flush()
    return out
