"""``inspect group``'s terminal view: a ``GroupView`` (``pipelines.analytics.inspect``) as rich
tables, in ``kafka-consumer-groups --describe``'s vocabulary.

Rules: nothing here reads the warehouse or decides a Kafka rule; it prints what the view holds
(the header with the state at T and its window when the start of a rebalance is inferred, a
classic group's members or a consumer/share/streams group's ``--describe --state --members``, lag totals and
status, committed offsets with owner/lag/status, recent transitions and rebalances, offsets due to
expire). Piped output is 160 columns wide so member ids are not cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipelines.analytics.inspect import RECENT, GroupView, fmt_ms
from pipelines.analytics.inspect_modern import render_share, render_streams


def render(view: GroupView, console: Any = None) -> None:
    """Print ``view`` as rich tables (header, members, offsets, transitions, rebalances, expiry)."""
    import sys

    from rich.console import Console

    # piped or captured output gets room for member ids instead of rich's 80 columns
    console = console or (Console() if sys.stdout.isatty() else Console(width=160))
    console.print(_header(view))
    if view.consumer is not None:  # a consumer group's members are in its own table
        _render_consumer(console, view.group_id, view.consumer)
    elif view.share is not None:  # share and streams groups: as Kafka's own tools print them
        render_share(console, view.group_id, view.share, _table)
    elif view.streams is not None:
        render_streams(console, view.group_id, view.streams, _table)
    else:
        _render_members(console, view.members)
    console.print(_lag_summary(view))
    console.print(_offsets_table(view))
    _print_history(view, console)
    ret = (
        "no retention configured"
        if view.retention_ms is None
        else f"retention {view.retention_ms / 3_600_000:g} h, rules {view.rules}"
    )
    if not view.expiring:
        console.print(f"Offsets due to expire ({ret}): none as the group stands")
        return
    due = [(e["topic"], str(e["partition"]), fmt_ms(e["expires_ms"]), _hours_left(e)) for e in view.expiring[:20]]
    console.print(_table(f"Offsets due to expire ({ret})", ("topic", "partition", "expires", "hours left"), due))


def _hours_left(e: dict[str, Any]) -> str:
    """Hours to expiry, or for a due offset (``forecast.expiry_status``) its removal window: due is
    not dead, the broker's next cleanup removes it between its due time and ``removal_by_ms``."""
    status = e.get("status")
    if status == "due":
        return f"due: removal between {fmt_ms(e['expires_ms'])} and {fmt_ms(e['removal_by_ms'])} (still committed)"
    if status == "kept_past_due":
        return f"kept past due ({e['hours_left']:g}; the broker's retention or rules differ)"
    return f"{e['hours_left']:g}"


def _expires_cell(o: dict[str, Any]) -> str:
    """The offsets table's expiry: its time, ``never``, or ``due`` with the removal window's end."""
    if not o["expires_ms"]:
        return "never"
    status = o.get("expiry_status")
    if status == "due":
        return f"due {fmt_ms(o['expires_ms'])}, removal by {fmt_ms(o['removal_by_ms'])}"
    if status == "kept_past_due":
        return f"{fmt_ms(o['expires_ms'])} (kept past due)"
    return fmt_ms(o["expires_ms"])


def _print_history(view: GroupView, console: Any) -> None:
    """The recent transitions and rebalances, each inferred start with its window."""
    transitions = [
        (
            fmt_ms(e["time_ms"]) + _window_text(e.get("earliest_ms"), e.get("latest_ms"), e.get("estimate_method")),
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
            fmt_ms(r["start_ms"])
            + _window_text(r.get("start_earliest_ms"), r.get("start_latest_ms"), r.get("start_method")),
            fmt_ms(r["end_ms"]),
            _duration_text(r),
            r["cause"],
            str(len(r["joined"])),
            str(len(r["left"])),
            "-" if r["partitions_moved"] is None else str(r["partitions_moved"]),
            r["protocol"] or "-",
        )
        for r in view.rebalances
    ]
    rebalance_cols = (
        "generation",
        "start (estimate, window)",
        "end",
        "duration ms",
        "cause",
        "joined",
        "left",
        "moved",
        "assignor",
    )
    console.print(_table(f"Recent rebalances (last {RECENT})", rebalance_cols, rebalances, fold=True))


def _window_text(earliest: int | None, latest: int | None, method: str | None) -> str:
    """`` ~ [A .. B] (method)`` for an inferred start, else nothing."""
    if latest is None:
        return ""
    return f" ~ [{fmt_ms(earliest) if earliest is not None else 'unbounded'} .. {fmt_ms(latest)}] ({method})"


def _duration_text(r: dict[str, Any]) -> str:
    """The duration, as its interval when the start is inferred (``3000 (1000-9000)``)."""
    lo, hi = r.get("duration_min_ms"), r.get("duration_max_ms")
    if r.get("start_method") is None or (lo == hi == r["duration_ms"]):
        return str(r["duration_ms"])
    return f"{r['duration_ms']} ({lo}-{hi if hi is not None else '?'})"


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
        "GROUP-INSTANCE-ID",
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
            m.get("group_instance_id") or "-",
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


def _offsets_table(view: GroupView) -> Any:
    """Committed offsets as ``kafka-consumer-groups --describe`` prints them (+ time lag, status)."""
    offsets = [
        (
            o["topic"],
            str(o["partition"]),
            str(o["offset"]),
            "-" if o["log_end_offset"] is None else str(o["log_end_offset"]),
            "-" if o["lag"] is None else str(o["lag"]) + (" (ahead of end)" if o["ahead_of_end"] else ""),
            _duration(o["lag_ms"]),
            o["status"],
            "-" if o["owner"] is None else o["owner"]["member_id"],
            "-" if o["owner"] is None else o["owner"]["client_host"] or "-",
            "-" if o["owner"] is None else o["owner"]["client_id"] or "-",
            fmt_ms(o["commit_timestamp_ms"]),
            _expires_cell(o),
        )
        for o in view.offsets
    ]
    offset_cols = (
        "topic",
        "partition",
        "current-offset",
        "log-end-offset",
        "lag",
        "time lag",
        "status",
        "consumer-id",
        "host",
        "client-id",
        "commit time",
        "expires",
    )
    right = ("partition", "current-offset", "log-end-offset", "lag", "time lag")
    return _table(f"Committed offsets ({len(view.offsets)})", offset_cols, offsets, right=right, fold=True)


def _duration(ms: int | None) -> str:
    """A time lag as ``1h02m03.4s`` / ``4.5s`` ('-' when unknown)."""
    if ms is None:
        return "-"
    h, rest = divmod(int(ms), 3_600_000)
    m, rest = divmod(rest, 60_000)
    sec = f"{rest / 1000:.1f}s"
    return f"{h}h{m:02d}m{sec}" if h else (f"{m}m{sec}" if m else sec)


def _lag_summary(view: GroupView) -> Any:
    """Group totals and Burrow's group status (one grid under the header)."""
    from rich.table import Table

    lag = view.lag
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    if not lag.get("end_offsets_sampled"):
        grid.add_row("lag", "unknown: no partition_end_offsets (run: offsetlake capture-end-offsets)")
        grid.add_row("status", lag.get("status", "UNKNOWN"))
        return grid
    total = "-" if lag["total_lag"] is None else f"{lag['total_lag']:,}"
    biggest = "-" if lag["max_lag"] is None else f"{lag['max_lag']:,}"
    grid.add_row("lag", f"total {total}, max {biggest}, max time lag {_duration(lag['max_lag_ms'])}")
    grid.add_row("status", f"{lag['status']} (Burrow: worst partition; STOP/STALL/REWIND count as ERR)")
    if lag["ahead_of_end"]:
        grid.add_row(
            "warning", f"{lag['ahead_of_end']} committed offset(s) above the log end (topic recreated or truncated?)"
        )
    if lag["topics_without_samples"]:
        grid.add_row(
            "not sampled", ", ".join(lag["topics_without_samples"]) + " (no end-offset sample: missing on the cluster?)"
        )
    return grid


def _header(view: GroupView) -> Any:
    from rich.table import Table

    state = view.state + (" (inferred)" if view.state_inferred else "")
    state_text = f"{state} since {fmt_ms(view.state_since_ms)}"
    if view.state_window_ms is not None:
        lo, hi = view.state_window_ms
        window = f"between {fmt_ms(lo) if lo is not None else 'the previous group record'} and {fmt_ms(hi)}"
        before, _, _ = view.state.partition(" or ")
        if " or " in view.state:
            # the log cannot tell which: the rebalance began somewhere in the window
            state_text = (
                f"{view.state} (inferred: the rebalance began {window}); {before} since {fmt_ms(view.state_since_ms)}"
            )
        else:
            state_text = f"{state} since {window} (estimate {fmt_ms(view.state_since_ms)})"
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    for k, v in (
        ("group", f"{view.group_id} ({view.group_type})"),
        ("as of", f"{fmt_ms(view.as_of_ms)} ({view.as_of_source})" if view.as_of_ms is not None else "end of log"),
        ("state", state_text + _due_text(view)),
        ("generation", str(view.generation)),
        ("protocol", f"{view.protocol_type or '-'} / {view.protocol or '-'}"),
        ("leader", view.leader or "-"),
        ("coordinator", f"__consumer_offsets-{view.coordinator_partition}"),
        ("records", f"{view.records:,} up to the as-of time"),
        ("history", view.history),
    ):
        head.add_row(k, v)
    return head


def _due_text(view: Any) -> str:
    """Due is not dead: what the rules have due and the broker's next cleanup has not yet removed."""
    f = view.forecast or {}
    lo, hi, due = f.get("death_forecast_from_ms"), f.get("death_forecast_to_ms"), f.get("offsets_due") or 0
    if lo is not None and hi is not None:
        return (
            f" — deletion due (a forecast, no tombstone yet): the broker's next cleanup removes it between "
            f"{fmt_ms(lo)} and {fmt_ms(hi)}; its {due} offset(s) are still committed"
        )
    if due:
        return f" — {due} offset(s) due for removal at the broker's next cleanup (still committed)"
    return ""


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
        t.add_column(c, justify="right" if c in right else "left", overflow="fold" if fold else "ellipsis")
    for row in rows:
        t.add_row(*row)
    return t


def compact_partitions(parts: list[str]) -> str:
    """``["t-0", "t-4", "u-1"]`` -> ``"t[0,4] u[1]"`` (topic names may contain dashes)."""
    by_topic: dict[str, list[int]] = {}
    for tp in parts:
        topic, _, num = tp.rpartition("-")
        by_topic.setdefault(topic, []).append(int(num))
    return " ".join(f"{t}[{','.join(map(str, sorted(ps)))}]" for t, ps in sorted(by_topic.items()))
