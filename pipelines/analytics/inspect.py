"""``inspect group G --as-of T``: one group at any past moment, exactly, without Spark.

Rules:
- Only G's coordinator partition (``partition_for(G, offsets_topic.num_partitions)``) of the
  ``raw_records`` Delta table is read, with delta-rs (a pyarrow dataset filter), decoded with the
  core codec (undecodable records are skipped: they are in ``quarantine``) and replayed with
  the core. Nothing here re-implements a Kafka rule. Records of broker segments keep their
  transactions (``with_transactions``: producer ids and markers from ``raw_transactions``).
- The snapshot at T replays G's records with timestamp <= T (``snapshot_as_of``, expiry run at
  T under the configured retention/rules). The STATE at T comes from the transitions of the
  replay of ALL of G's records: the log tells a rebalance only when it ends (the next
  group-metadata record), so a T inside a rebalance is PreparingRebalance/CompletingRebalance
  only in hindsight. State at T = the last transition at or before T (inferred ones included,
  flagged); generation likewise. An inferred rebalance start is a window (issue 17,
  ``coordinator_core.loader.rebalance.start_window``): a T inside it is told as both states it may be
  (``Stable or PreparingRebalance``), with the window, never as the estimate's side of it.
- Lag (``pipelines.analytics.lag``, the rules the views follow): without ``--as-of`` the NEWEST
  ``partition_end_offsets`` sample of each topic-partition (a sampler run after the last batch
  is the freshest truth); at T the log end interpolated between the samples around T. Time lag:
  the group's own sample (the timestamp of the record at its committed offset) when it is of
  the current offset, else kafka-lag-exporter's interpolation. A committed offset above the log
  end is flagged (topic recreated or truncated); topics without any sample are listed.
- Owner of each partition (``kafka-consumer-groups --describe``'s CONSUMER-ID, HOST, CLIENT-ID):
  the member whose assignment (group_members' ``assigned_partitions``) holds it at T.
- Status: Burrow's (``pipelines.analytics.burrow.evaluate``) per partition over its last 10
  commits at or before T (lag at each commit from the samples, as ``consumer_lag``), rolled up
  with ``burrow.group_status``; group totals: total lag, max lag, max time lag.
- Expiry: each offset's due time from ``coordinator_core.expiry.offset_due_times`` as the group
  stands at T.
- History: the partition's offsets tell where its compacted part ends
  (``coordinator_core.log_shape``); a group whose first record lies before it may have lost
  older history to the log cleaner, and the view says so instead of inventing it.
"""

from __future__ import annotations

import datetime as dt
import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from coordinator_core import (
    CoordinatorError,
    LogRecord,
    OffsetCommitKey,
    OffsetCommitted,
    OffsetCommitValue,
    PartitionShape,
    Rebalance,
    StateTransition,
    TxnMarker,
    decode_record,
    new_snapshot,
    offset_commit_topic_id,
    offset_due_times,
    partition_for,
    partition_shape,
    replay,
    snapshot_as_of,
)
from coordinator_core.modern.consumer.model import pairs
from pipelines.analytics.group_lag import add_lag
from pipelines.analytics.inspect_modern import share_description, streams_description
from pipelines.analytics.reads import driver_io, epoch_ms
from pipelines.errors import UsageError
from pipelines.log_clock import evidence_horizon, newest_ms, now_ms

if TYPE_CHECKING:
    from pipelines.config import Config

RECENT = 10


def parse_time(text: str | None) -> int | None:
    """Epoch ms from ``text``: an integer (epoch ms) or an ISO-8601 time (UTC when no zone)."""
    if text is None:
        return None
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--as-of: expected epoch ms or an ISO time like 2026-01-01T00:10:00Z, got {text!r}") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return int(t.timestamp() * 1000)


def fmt_ms(ms: int | None) -> str:
    """An epoch-ms time as ``YYYY-mm-dd HH:MM:SS.fff`` UTC ('-' when None)."""
    if ms is None:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def read_group_records(cfg: Config, group_id: str) -> tuple[int, list[LogRecord], int, PartitionShape | None]:
    """G's records from ``raw_records`` (its coordinator partition only), in log order.

    Returns (coordinator partition, records, undecodable records skipped, the partition's shape:
    where its compacted part ends).
    """
    import pyarrow.dataset as ds

    part = partition_for(group_id, cfg.offsets_topic.num_partitions)
    table = driver_io(cfg).read_arrow(
        "raw_records", ["key", "value", "partition", "offset", "timestamp"], ds.field("partition") == part
    )
    if table is None:
        raise UsageError(f"no raw_records table under {cfg.paths.warehouse} (run: offsetlake run batch)")
    table = table.sort_by([("offset", "ascending")])
    shape = partition_shape(table.column("offset").to_pylist()) if table.num_rows else None
    ts = epoch_ms(table.column("timestamp"))
    out: list[LogRecord] = []
    bad = 0
    for key, value, off, t in zip(
        table.column("key").to_pylist(), table.column("value").to_pylist(), table.column("offset").to_pylist(), ts
    ):
        try:
            rec = decode_record(key, value, lenient=True, modern=True)  # Kafka 4 group records too
        except CoordinatorError:
            bad += 1
            continue
        if rec.key.group == group_id:
            out.append(LogRecord(part, off, 0 if t is None else t, rec.key, rec.value))  # as the replay input
    return part, out, bad, shape


def with_transactions(cfg: Config, part: int, records: list[LogRecord]) -> list[Any]:
    """G's records with their producer ids and the COMMIT/ABORT markers of its producers in its
    partition (``raw_transactions``, broker segments only; KIP-98), in log order, as the batch
    replay gives them to the core (``pipelines.records.transactions``)."""
    import dataclasses

    import pyarrow.dataset as ds

    cols = ["offset", "producer_id", "control_type", "timestamp"]
    txn = driver_io(cfg).read_arrow("raw_transactions", cols, ds.field("partition") == part)
    if txn is None or txn.num_rows == 0:
        return list(records)
    rows = zip(*(txn.column(c).to_pylist() for c in cols[:3]), epoch_ms(txn.column("timestamp")), strict=True)
    pids: dict[int, int] = {}
    markers: list[tuple[int, int, int, bool]] = []
    for off, pid, ctype, ts in rows:
        if ctype is None:
            pids[off] = pid
        elif ctype in (0, 1):  # ControlRecordType ABORT, COMMIT
            markers.append((off, 0 if ts is None else ts, pid, ctype == 1))
    out: list[Any] = [dataclasses.replace(r, producer_id=pids[r.offset]) if r.offset in pids else r for r in records]
    mine = {r.producer_id for r in out if r.producer_id is not None}
    out.extend(TxnMarker(part, off, ts, pid, c) for off, ts, pid, c in markers if pid in mine)
    return sorted(out, key=lambda r: r.offset)


def known_groups(cfg: Config) -> list[str]:
    """Group ids in ``group_state`` (for close-match suggestions); empty when absent."""
    table = driver_io(cfg).read_arrow("group_state", ["group_id"])
    return [] if table is None else sorted(table.column("group_id").to_pylist())


@dataclass
class GroupView:
    """Everything ``inspect group`` shows (JSON-ready via ``as_dict``)."""

    group_id: str
    as_of_ms: int | None
    coordinator_partition: int
    state: str
    state_inferred: bool
    state_since_ms: int | None
    generation: int
    protocol_type: str | None
    protocol: str | None
    leader: str | None
    exists: bool
    records: int
    members: list[dict[str, Any]] = field(default_factory=list)
    offsets: list[dict[str, Any]] = field(default_factory=list)
    transitions: list[dict[str, Any]] = field(default_factory=list)
    rebalances: list[dict[str, Any]] = field(default_factory=list)
    expiring: list[dict[str, Any]] = field(default_factory=list)
    retention_ms: int | None = None
    rules: str = "current"
    history: str = "complete as captured"
    # [earliest, latest] of the inferred rebalance start the state at T depends on (None: certain)
    state_window_ms: list[int | None] | None = None
    group_type: str = "classic"
    #: a consumer group (KIP-848) as ``kafka-consumer-groups --describe --state --members --verbose``
    #: shows it: assignment strategy, state, group and target-assignment epochs, members
    consumer: dict[str, Any] | None = None
    #: a share group (KIP-932) / streams group (KIP-1071) as ``kafka-share-groups.sh`` /
    #: ``kafka-streams-groups.sh --describe --state --members --verbose`` show it (``inspect_modern``)
    share: dict[str, Any] | None = None
    streams: dict[str, Any] | None = None
    #: group totals (total lag, max lag, max time lag), Burrow's group status, topics never sampled
    lag: dict[str, Any] = field(default_factory=dict)
    #: where the as-of came from: ``--as-of`` or the one "now" (``pipelines.log_clock.now_ms``)
    as_of_source: str = "--as-of"
    #: due is not dead: held offsets whose removal is forecast, the group's deletion window
    forecast: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


def inspect_group(cfg: Config, group_id: str, as_of_ms: int | None = None) -> GroupView:
    """Build the view of ``group_id`` at ``as_of_ms`` (None = the one "now" of every view:
    ``pipelines.log_clock``, the newest evidence by default)."""

    part, records, _, shape = read_group_records(cfg, group_id)
    if not records:
        close = difflib.get_close_matches(group_id, known_groups(cfg), n=5, cutoff=0.5)
        hint = f"; close matches: {', '.join(close)}" if close else ""
        raise UsageError(f"group {group_id!r} has no records in raw_records (partition {part}){hint}")
    retention = cfg.replay.retention_ms
    rules = cfg.replay.rules
    settings = cfg.replay.settings()
    items = with_transactions(cfg, part, records)  # transactional commits as Kafka replays them
    full = replay(
        new_snapshot(group_id),
        items,
        event_kinds=("state_transition", "rebalance", "offset_commit"),
        settings=settings.with_retention(None),
    )
    t_end, as_of_source, log_end = _as_of(cfg, as_of_ms, items[-1].timestamp_ms)
    snap = snapshot_as_of(items, group_id=group_id, as_of_ms=t_end, settings=settings, log_end_ms=log_end)
    history = _history(shape, part, records[0])
    transitions = [e for e in full.events if isinstance(e, StateTransition)]
    before = [e for e in transitions if e.timestamp_ms is not None and e.timestamp_ms <= t_end]
    state, inferred, since, generation = snap.state.value, False, snap.state_timestamp_ms, snap.generation
    # the as-of snapshot is the fold + one cleanup at T: a deletion it forecasts stands only when
    # nothing after T can judge it; with later records, hindsight (the whole log's transitions) wins
    later = any(r.timestamp_ms > t_end for r in records)
    if before:
        last = before[-1]
        if later or not (snap.state.value == "Dead" and last.to_state != "Dead"):
            state, inferred, since, generation = last.to_state, not last.observed, last.timestamp_ms, last.generation
    window: list[int | None] | None = None
    if later:
        uncertain = _rebalance_window_at(transitions, t_end)
        if uncertain is not None:
            state, inferred, since, generation, window = uncertain
    row = snap.to_state_row(settings=settings, num_partitions=cfg.offsets_topic.num_partitions)
    members = _member_rows(row["members"])
    due = offset_due_times(snap, retention, settings.rules) if retention is not None else {}
    offsets = _offset_rows(snap.offset_rows(), due)
    commits = [e for e in full.events if isinstance(e, OffsetCommitted) and e.commit_timestamp <= t_end]
    lag = add_lag(cfg, group_id, offsets, row["members"], commits, as_of_ms, t_end)
    expiring = _expiring(offsets, t_end, cfg.replay.cleanup_interval_ms, log_end)
    rebalances = [e for e in full.events if isinstance(e, Rebalance) and e.end_ms <= t_end]
    return GroupView(
        group_id=group_id,
        as_of_ms=t_end,
        as_of_source=as_of_source,
        forecast={k: row[k] for k in ("offsets_due", "death_forecast_from_ms", "death_forecast_to_ms")},
        coordinator_partition=part,
        state=state,
        state_inferred=inferred,
        state_since_ms=since,
        generation=generation,
        protocol_type=snap.protocol_type,
        protocol=snap.protocol,
        leader=snap.leader,
        exists=(state != "Dead") if later else snap.exists,
        records=sum(1 for r in records if r.timestamp_ms <= t_end),
        members=members,
        offsets=offsets,
        transitions=[_transition_row(e) for e in before[-RECENT:]],
        rebalances=[_rebalance_row(e) for e in rebalances[-RECENT:]],
        expiring=expiring,
        retention_ms=retention,
        rules=rules,
        history=history,
        state_window_ms=window,
        group_type=snap.kind_told(),  # as group_state tells it: a deleted group keeps its kind
        **_descriptions(snap, part, records),
        lag=lag,
    )


def _history(shape: Any, part: int, first: Any) -> str:
    """How complete the group's history is: compaction may have removed its start."""
    if shape is not None and shape.compacted_until is not None and first.offset < shape.compacted_until:
        return (
            f"starts inside the compacted part of __consumer_offsets-{part} (the log cleaner removed "
            f"records before offset {shape.compacted_until}): what came before {fmt_ms(first.timestamp_ms)} "
            "is unknown"
        )
    return "complete as captured"


def _as_of(cfg: Config, as_of_ms: int | None, group_newest_ms: int) -> tuple[int, str, int | None]:
    """(the as-of, where it came from, the evidence horizon forecasts are judged against).

    Without ``--as-of``: the one "now" of every view (``pipelines.log_clock.now_ms``), never the
    group's own last record; the horizon is the gold tables' (``log_clock.evidence_horizon``)."""

    read = driver_io(cfg).read_arrow
    t_end, source = as_of_ms, "--as-of"
    if t_end is None:
        now, source = now_ms(cfg, read)
        t_end = group_newest_ms if now is None else max(now, group_newest_ms)
        if now is None or now < group_newest_ms:
            source = "the group's newest record (raw_records is ahead of group_state: run the batch job)"
    newest = newest_ms(read, "group_state", "last_timestamp")
    return t_end, source, evidence_horizon(t_end, newest, cfg.stream.watermark_delay_ms)


def _descriptions(snap: Any, part: int, records: Sequence[LogRecord]) -> dict[str, Any]:
    """A consumer, share or streams group's own description, as Kafka's tool for its kind
    prints it (None for the other kinds)."""

    kind = snap.group_type
    return {
        "consumer": _consumer_view(snap, records),
        "share": share_description(snap.modern, part) if kind == "share" else None,
        "streams": streams_description(snap.modern, part) if kind == "streams" else None,
    }


def _rebalance_window_at(
    transitions: Sequence[Any], t: int
) -> tuple[str, bool, int | None, int, list[int | None]] | None:
    """The state at ``t`` when it depends on an inferred rebalance start: inside the start's
    window, both states it may be (``Stable or PreparingRebalance``, since the earlier state
    began); after it and before the join ended, PreparingRebalance since the estimate. None
    when no window covers ``t``."""
    for i, e in enumerate(transitions):
        latest = e.timestamp_latest_ms
        if latest is None or e.from_state is None or e.timestamp_ms is None or e.timestamp_earliest_ms == latest:
            continue  # no window, or one of a single instant: the ordinary transitions tell it
        prior = transitions[i - 1].timestamp_ms if i > 0 else None
        lo = e.timestamp_earliest_ms if e.timestamp_earliest_ms is not None else prior
        if lo is not None and lo <= t < latest:
            return f"{e.from_state} or {e.to_state}", True, prior, e.generation, [e.timestamp_earliest_ms, latest]
        # the next transition with a time: a generation whose SyncGroup never came (a member left
        # mid-rebalance; Kafka 3.9 then wrote the next generation only) has transitions of no time,
        # and they must not hide the later ones (a real broker's Empty was told as PreparingRebalance)
        nxt = next((x.timestamp_ms for x in transitions[i + 1 :] if x.timestamp_ms is not None), None)
        if latest <= t and (nxt is None or t < nxt) and e.timestamp_ms <= t:
            return e.to_state, True, e.timestamp_ms, e.generation, [e.timestamp_earliest_ms, latest]
    return None


def _consumer_view(snap: Any, records: Sequence[LogRecord]) -> dict[str, Any] | None:
    if snap.group_type != "consumer":
        return None
    return consumer_description(snap.consumer, snap.protocol, topic_names(records))


def topic_names(records: Sequence[LogRecord]) -> dict[str, str]:
    """Topic id -> name from the group's offset commits (Kafka 4.1+ writes the TopicId in each,
    ``codec.offset_commit_topic_id``), over its whole log: an id names one topic forever, so a
    moment before the first commit is named too (the broker names them from its metadata)."""

    names: dict[str, str] = {}
    for r in records:
        if isinstance(r.value, OffsetCommitValue) and isinstance(r.key, OffsetCommitKey) and r.value.tagged_fields:
            topic_id = offset_commit_topic_id(r.value)
            if topic_id is not None:
                names.setdefault(topic_id, r.key.topic)
    return names


def consumer_description(c: Any, assignor: str | None, names: dict[str, str] | None = None) -> dict[str, Any] | None:
    """A consumer group's (KIP-848) description from the core's fold (``ConsumerGroupSnapshot``),
    the fields ``kafka-consumer-groups --describe --state --members --verbose`` prints for one:
    ASSIGNMENT-STRATEGY, STATE, GROUP-EPOCH, TARGET-ASSIGNMENT-EPOCH, #MEMBERS; per member
    CONSUMER-ID, HOST, CLIENT-ID, #PARTITIONS, CURRENT-EPOCH, CURRENT-ASSIGNMENT, TARGET-EPOCH,
    TARGET-ASSIGNMENT (plus its MemberState, partitions pending revocation, subscription)."""
    if c is None:
        return None

    known = names or {}

    def parts(a: Any) -> list[str]:
        return sorted(f"{c.topic_label(t) if t in c.topic_names else known.get(t, t)}-{p}" for t, p in pairs(a))

    members = []
    for mid, m in sorted(c.members.items()):
        current = parts(m.assigned_partitions)
        members.append(
            {
                "member_id": mid,
                "group_instance_id": m.instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "rack_id": m.rack_id,
                "member_protocol": "classic" if m.uses_classic_protocol else "consumer",
                "partitions": len(current),
                "current_epoch": m.member_epoch,
                "current_assignment": current,
                "member_state": m.state,
                "pending_revocation": parts(m.partitions_pending_revocation),
                "target_epoch": c.target_assignment_epoch,
                "target_assignment": parts(c.target_assignment.get(mid, ())),
                "subscribed_topics": list(m.subscribed_topic_names),
                "subscribed_regex": m.subscribed_topic_regex,
            }
        )
    return {
        "assignment_strategy": assignor,
        "state": c.state.value,
        "group_epoch": c.group_epoch,
        "target_assignment_epoch": c.target_assignment_epoch,
        "member_count": len(members),
        "members": members,
    }


def _member_rows(members: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for m in members:
        parts = m.get("assigned_partitions")
        out.append(
            {
                **{k: m[k] for k in ("member_id", "group_instance_id", "client_id", "client_host", "session_timeout")},
                "rebalance_timeout": m["rebalance_timeout"],
                "is_leader": m["is_leader"],
                "assigned_partitions": None if parts is None else [f"{p['topic']}-{p['partition']}" for p in parts],
            }
        )
    return out


def _offset_rows(rows: list[dict[str, Any]], due: dict[tuple[str, int], int | None]) -> list[dict[str, Any]]:
    return [
        {
            "topic": o["topic"],
            "partition": o["partition"],
            "offset": o["offset"],
            "commit_timestamp_ms": o["commit_timestamp"],
            "metadata": o["metadata"],
            "expires_ms": due.get((o["topic"], o["partition"])),
        }
        for o in rows
    ]


def _expiring(
    offsets: list[dict[str, Any]], t_end: int, cleanup_interval_ms: int, evidence_ms: int | None = None
) -> list[dict[str, Any]]:
    """Offsets that can expire, with ``offsets_at_risk``'s rule (``forecast.expiry_status``): a due
    one is ``due`` (still committed; the broker's next cleanup removes it by ``removal_by_ms``).
    Each offset row gets its ``expiry_status`` and ``removal_by_ms`` too."""
    from pipelines.analytics.forecast import expiry_status

    for o in offsets:
        due = o["expires_ms"]
        o["removal_by_ms"] = None if due is None else due + cleanup_interval_ms
        o["expiry_status"] = expiry_status(due, t_end, cleanup_interval_ms, evidence_ms)
    rows = [
        {
            "topic": o["topic"],
            "partition": o["partition"],
            "expires_ms": o["expires_ms"],
            "hours_left": round((o["expires_ms"] - t_end) / 3_600_000, 2),
            "removal_by_ms": o["removal_by_ms"],
            "status": o["expiry_status"],
        }
        for o in offsets
        if o["expires_ms"] is not None
    ]
    return sorted(rows, key=lambda r: (r["expires_ms"], r["topic"], r["partition"]))


def _transition_row(e: Any) -> dict[str, Any]:
    return {
        "time_ms": e.timestamp_ms,
        "from": e.from_state,
        "to": e.to_state,
        "generation": e.generation,
        "observed": e.observed,
        "cause": e.cause,
        "earliest_ms": e.timestamp_earliest_ms,
        "latest_ms": e.timestamp_latest_ms,
        "estimate_method": e.estimate_method,
    }


def _rebalance_row(e: Any) -> dict[str, Any]:
    return {
        "generation": e.generation,
        "start_ms": e.start_ms,
        "start_earliest_ms": e.start_earliest_ms,
        "start_latest_ms": e.start_latest_ms,
        "start_method": e.start_method,
        "end_ms": e.end_ms,
        "duration_ms": e.duration_ms,
        "duration_min_ms": e.duration_min_ms,
        "duration_max_ms": e.duration_max_ms,
        "cause": e.cause,
        "joined": list(e.joined),
        "left": list(e.left),
        "partitions_moved": e.partitions_moved,
        "protocol": e.protocol,
    }
