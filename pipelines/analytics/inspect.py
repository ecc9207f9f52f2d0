"""``inspect group G --as-of T``: one group at any past moment, exactly, without Spark.

Rules:
- Only G's coordinator partition (``partition_for(G, offsets_topic.num_partitions)``) of the
  ``raw_records`` Delta table is read, with delta-rs (a pyarrow dataset filter), decoded with the
  core codec (undecodable records are skipped: they are in ``quarantine``) and replayed with
  the core. Nothing here re-implements a Kafka rule.
- The snapshot at T replays G's records with timestamp <= T (``snapshot_as_of``, expiry run at
  T under the configured retention/rules). The STATE at T comes from the transitions of the
  replay of ALL of G's records: the log tells a rebalance only when it ends (the next
  group-metadata record), so a T inside a rebalance is PreparingRebalance/CompletingRebalance
  only in hindsight. State at T = the last transition at or before T (inferred ones included,
  flagged); generation likewise.
- Lag: the latest ``partition_end_offsets`` sample of each topic-partition at or before T
  (when that table exists). Expiry: each offset's due time from
  ``coordinator_core.expiry.offset_due_times`` as the group stands at T.
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

from pipelines.errors import UsageError

if TYPE_CHECKING:
    from coordinator_core.log_shape import PartitionShape
    from coordinator_core.records import LogRecord
    from pipelines.config import Config
    from pipelines.tableio import TableIO

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


def _ms(col: Any) -> list[int | None]:
    """Epoch ms of an Arrow timestamp column (any unit)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.cast(pc.cast(col, pa.timestamp("ms", "UTC")), pa.int64()).to_pylist()  # type: ignore[no-any-return]


def _io(cfg: Config) -> TableIO:
    """Driver-side reads (delta-rs, no Spark) of the warehouse's tables."""
    from pipelines.tableio import TableIO

    return TableIO(cfg, None, engine="rust")


def read_group_records(cfg: Config, group_id: str) -> tuple[int, list[LogRecord], int, PartitionShape | None]:
    """G's records from ``raw_records`` (its coordinator partition only), in log order.

    Returns (coordinator partition, records, undecodable records skipped, the partition's shape:
    where its compacted part ends).
    """
    import pyarrow.dataset as ds

    from coordinator_core.codec import decode_record
    from coordinator_core.errors import CoordinatorError
    from coordinator_core.log_shape import partition_shape
    from coordinator_core.partitioner import partition_for
    from coordinator_core.records import LogRecord

    part = partition_for(group_id, cfg.offsets_topic.num_partitions)
    table = _io(cfg).read_arrow(
        "raw_records", ["key", "value", "partition", "offset", "timestamp"], ds.field("partition") == part
    )
    if table is None:
        raise UsageError(f"no raw_records table under {cfg.paths.warehouse} (run: offsetlake run batch)")
    table = table.sort_by([("offset", "ascending")])
    shape = partition_shape(table.column("offset").to_pylist()) if table.num_rows else None
    ts = _ms(table.column("timestamp"))
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


def known_groups(cfg: Config) -> list[str]:
    """Group ids in ``group_state`` (for close-match suggestions); empty when absent."""
    table = _io(cfg).read_arrow("group_state", ["group_id"])
    return [] if table is None else sorted(table.column("group_id").to_pylist())


def end_offsets_at(cfg: Config, at_ms: int | None) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (log_end_offset, sampled_at ms) of the latest sample at or before T."""
    t = _io(cfg).read_arrow("partition_end_offsets", ["sampled_at", "topic", "partition", "log_end_offset"])
    if t is None:
        return {}
    ms = _ms(t.column("sampled_at"))
    out: dict[tuple[str, int], tuple[int, int]] = {}
    for s, topic, p, leo in zip(
        ms, t.column("topic").to_pylist(), t.column("partition").to_pylist(), t.column("log_end_offset").to_pylist()
    ):
        if s is None or (at_ms is not None and s > at_ms):
            continue
        prev = out.get((topic, p))
        if prev is None or s >= prev[1]:
            out[(topic, p)] = (leo, s)
    return out


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
    group_type: str = "classic"
    #: a consumer group (KIP-848) as ``kafka-consumer-groups --describe --state --members --verbose``
    #: shows it: assignment strategy, state, group and target-assignment epochs, members
    consumer: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


def inspect_group(cfg: Config, group_id: str, as_of_ms: int | None = None) -> GroupView:
    """Build the view of ``group_id`` at ``as_of_ms`` (None = end of its log)."""
    from coordinator_core.events import Rebalance, StateTransition
    from coordinator_core.expiry import offset_due_times
    from coordinator_core.replay import new_snapshot, replay, snapshot_as_of

    part, records, _, shape = read_group_records(cfg, group_id)
    if not records:
        close = difflib.get_close_matches(group_id, known_groups(cfg), n=5, cutoff=0.5)
        hint = f"; close matches: {', '.join(close)}" if close else ""
        raise UsageError(f"group {group_id!r} has no records in raw_records (partition {part}){hint}")
    retention = cfg.replay.retention_ms
    rules = cfg.replay.rules
    settings = cfg.replay.settings()
    full = replay(
        new_snapshot(group_id),
        records,
        event_kinds=("state_transition", "rebalance"),
        settings=settings.with_retention(None),
    )
    t_end = records[-1].timestamp_ms if as_of_ms is None else as_of_ms
    snap = snapshot_as_of(records, group_id=group_id, as_of_ms=t_end, settings=settings)
    history = "complete as captured"
    if shape is not None and shape.compacted_until is not None and records[0].offset < shape.compacted_until:
        history = (
            f"starts inside the compacted part of __consumer_offsets-{part} (the log cleaner removed "
            f"records before offset {shape.compacted_until}): what came before {fmt_ms(records[0].timestamp_ms)} "
            "is unknown"
        )
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
    row = snap.to_state_row(settings=settings, num_partitions=cfg.offsets_topic.num_partitions)
    members = _member_rows(row["members"])
    ends = end_offsets_at(cfg, t_end)
    due = offset_due_times(snap, retention, settings.rules) if retention is not None else {}
    offsets = _offset_rows(snap.offset_rows(), ends, due)
    expiring = _expiring(offsets, t_end)
    rebalances = [e for e in full.events if isinstance(e, Rebalance) and e.end_ms <= t_end]
    return GroupView(
        group_id=group_id,
        as_of_ms=as_of_ms,
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
        group_type=snap.group_type,
        consumer=consumer_description(snap.consumer, snap.protocol) if snap.group_type == "consumer" else None,
    )


def consumer_description(c: Any, assignor: str | None) -> dict[str, Any] | None:
    """A consumer group's (KIP-848) description from the core's fold (``ConsumerGroupSnapshot``),
    the fields ``kafka-consumer-groups --describe --state --members --verbose`` prints for one:
    ASSIGNMENT-STRATEGY, STATE, GROUP-EPOCH, TARGET-ASSIGNMENT-EPOCH, #MEMBERS; per member
    CONSUMER-ID, HOST, CLIENT-ID, #PARTITIONS, CURRENT-EPOCH, CURRENT-ASSIGNMENT, TARGET-EPOCH,
    TARGET-ASSIGNMENT (plus its MemberState, partitions pending revocation, subscription)."""
    from coordinator_core.consumer_group_model import pairs

    if c is None:
        return None

    def parts(a: Any) -> list[str]:
        return sorted(f"{c.topic_label(t)}-{p}" for t, p in pairs(a))

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


def _offset_rows(
    rows: list[dict[str, Any]], ends: dict[tuple[str, int], tuple[int, int]], due: dict[tuple[str, int], int | None]
) -> list[dict[str, Any]]:
    out = []
    for o in rows:
        tp = (o["topic"], o["partition"])
        end = ends.get(tp)
        out.append(
            {
                "topic": o["topic"],
                "partition": o["partition"],
                "offset": o["offset"],
                "commit_timestamp_ms": o["commit_timestamp"],
                "metadata": o["metadata"],
                "log_end_offset": None if end is None else end[0],
                "lag": None if end is None or o["offset"] is None else max(end[0] - o["offset"], 0),
                "expires_ms": due.get(tp),
            }
        )
    return out


def _expiring(offsets: list[dict[str, Any]], t_end: int) -> list[dict[str, Any]]:
    rows = [
        {
            "topic": o["topic"],
            "partition": o["partition"],
            "expires_ms": o["expires_ms"],
            "hours_left": round((o["expires_ms"] - t_end) / 3_600_000, 2),
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
    }


def _rebalance_row(e: Any) -> dict[str, Any]:
    return {
        "generation": e.generation,
        "start_ms": e.start_ms,
        "end_ms": e.end_ms,
        "duration_ms": e.duration_ms,
        "cause": e.cause,
        "joined": list(e.joined),
        "left": list(e.left),
        "partitions_moved": e.partitions_moved,
        "protocol": e.protocol,
    }


def compact_partitions(parts: list[str]) -> str:
    """``["t-0", "t-4", "u-1"]`` -> ``"t[0,4] u[1]"`` (topic names may contain dashes)."""
    by_topic: dict[str, list[int]] = {}
    for tp in parts:
        topic, _, num = tp.rpartition("-")
        by_topic.setdefault(topic, []).append(int(num))
    return " ".join(f"{t}[{','.join(map(str, sorted(ps)))}]" for t, ps in sorted(by_topic.items()))


def render(view: GroupView, console: Any = None) -> None:
    """Print ``view`` as rich tables (header, members, offsets, transitions, rebalances, expiry)."""
    import sys

    from rich.console import Console

    # piped or captured output gets room for member ids instead of rich's 80 columns
    console = console or (Console() if sys.stdout.isatty() else Console(width=160))
    console.print(_header(view))
    if view.consumer is not None:  # a consumer group's members are in its own table
        _render_consumer(console, view.group_id, view.consumer)
    else:
        _render_members(console, view.members)
    offsets = [
        (
            o["topic"],
            str(o["partition"]),
            str(o["offset"]),
            fmt_ms(o["commit_timestamp_ms"]),
            "-" if o["log_end_offset"] is None else str(o["log_end_offset"]),
            "-" if o["lag"] is None else str(o["lag"]),
            fmt_ms(o["expires_ms"]) if o["expires_ms"] else "never",
        )
        for o in view.offsets
    ]
    offset_cols = ("topic", "partition", "offset", "commit time", "log end", "lag", "expires")
    right = ("partition", "offset", "log end", "lag")
    console.print(_table(f"Committed offsets ({len(view.offsets)})", offset_cols, offsets, right=right))
    transitions = [
        (
            fmt_ms(e["time_ms"]),
            e["from"] or "-",
            e["to"],
            str(e["generation"]),
            "yes" if e["observed"] else "inferred",
            e["cause"],
        )
        for e in view.transitions
    ]
    transition_cols = ("time", "from", "to", "generation", "observed", "cause")
    console.print(_table(f"Recent transitions (last {RECENT})", transition_cols, transitions))
    rebalances = [
        (
            str(r["generation"]),
            fmt_ms(r["start_ms"]),
            fmt_ms(r["end_ms"]),
            str(r["duration_ms"]),
            r["cause"],
            str(len(r["joined"])),
            str(len(r["left"])),
            "-" if r["partitions_moved"] is None else str(r["partitions_moved"]),
            r["protocol"] or "-",
        )
        for r in view.rebalances
    ]
    rebalance_cols = ("generation", "start", "end", "duration ms", "cause", "joined", "left", "moved", "assignor")
    console.print(_table(f"Recent rebalances (last {RECENT})", rebalance_cols, rebalances, fold=True))
    ret = (
        "no retention configured"
        if view.retention_ms is None
        else f"retention {view.retention_ms / 3_600_000:g} h, rules {view.rules}"
    )
    if not view.expiring:
        console.print(f"Offsets due to expire ({ret}): none as the group stands")
        return
    due = [
        (e["topic"], str(e["partition"]), fmt_ms(e["expires_ms"]), f"{e['hours_left']:g}") for e in view.expiring[:20]
    ]
    console.print(_table(f"Offsets due to expire ({ret})", ("topic", "partition", "expires", "hours left"), due))


def _render_members(console: Any, members: list[dict[str, Any]]) -> None:
    """A classic group's members (the leader starred)."""
    rows = [
        (
            m["member_id"] + (" *" if m["is_leader"] else ""),
            m["group_instance_id"] or "-",
            m["client_id"] or "-",
            m["client_host"] or "-",
            f"{m['session_timeout']}/{m['rebalance_timeout']}",
            "?" if m["assigned_partitions"] is None else compact_partitions(m["assigned_partitions"]) or "-",
        )
        for m in members
    ]
    member_cols = ("member id", "instance id", "client id", "host", "session/rebalance ms", "assigned")
    console.print(_table(f"Members ({len(members)})", member_cols, rows, fold=True))


def _render_consumer(console: Any, group_id: str, c: dict[str, Any]) -> None:
    """A consumer group as ``kafka-consumer-groups --describe --state`` and ``--members``
    (``--verbose``) print it."""
    state_cols = ("GROUP", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS")
    state = (
        group_id,
        c["assignment_strategy"] or "-",
        c["state"],
        str(c["group_epoch"]),
        str(c["target_assignment_epoch"]),
        str(c["member_count"]),
    )
    console.print(_table("Consumer group (KIP-848): --describe --state", state_cols, [state], fold=True))
    member_cols = (
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
        "#PARTITIONS",
        "CURRENT-EPOCH",
        "CURRENT-ASSIGNMENT",
        "TARGET-EPOCH",
        "TARGET-ASSIGNMENT",
        "MEMBER-STATE",
        "REVOKING",
    )
    rows = [
        (
            m["member_id"] + (" (classic)" if m["member_protocol"] == "classic" else ""),
            m["client_host"] or "-",
            m["client_id"] or "-",
            str(m["partitions"]),
            str(m["current_epoch"]),
            compact_partitions(m["current_assignment"]) or "-",
            str(m["target_epoch"]),
            compact_partitions(m["target_assignment"]) or "-",
            m["member_state"],
            compact_partitions(m["pending_revocation"]) or "-",
        )
        for m in c["members"]
    ]
    console.print(_table(f"Members ({len(rows)}): --describe --members", member_cols, rows, fold=True))


def _header(view: GroupView) -> Any:
    from rich.table import Table

    state = view.state + (" (inferred)" if view.state_inferred else "")
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    for k, v in (
        ("group", f"{view.group_id} ({view.group_type})"),
        ("as of", fmt_ms(view.as_of_ms) if view.as_of_ms is not None else "end of log"),
        ("state", f"{state} since {fmt_ms(view.state_since_ms)}"),
        ("generation", str(view.generation)),
        ("protocol", f"{view.protocol_type or '-'} / {view.protocol or '-'}"),
        ("leader", view.leader or "-"),
        ("coordinator", f"__consumer_offsets-{view.coordinator_partition}"),
        ("records", f"{view.records:,} up to the as-of time"),
        ("history", view.history),
    ):
        head.add_row(k, v)
    return head


def _table(
    title: str,
    columns: tuple[str, ...],
    rows: Sequence[tuple[Any, ...]],
    *,
    fold: bool = False,
    right: tuple[str, ...] = (),
) -> Any:
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for c in columns:
        if fold:
            t.add_column(c, overflow="fold")
        else:
            t.add_column(c, justify="right" if c in right else "left")
    for row in rows:
        t.add_row(*row)
    return t
