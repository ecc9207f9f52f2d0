"""``offsetlake replay``: rebuild every group's state from a capture, in pure Python.

Rules:
- Input: the files ``offsetlake decode --input`` reads (JSON lines with hex/base64 key/value,
  Parquet with Spark's Kafka source schema, or a directory of them), read with
  ``pipelines.inputs.raw_files.read_raw_records`` and decoded with ``coordinator_core.codec.record_codec``.
- Records are grouped by group id and replayed in (partition, offset) order by
  ``coordinator_core.loader.replay`` (the same core the Spark jobs run). Corrupt records are counted
  and skipped (``--strict``: exit 2 at the first one).
- Output: JSON lines on stdout, one per group (sorted by group id): the ``group_state`` row plus
  ``offsets``; ``--events`` prints the event stream instead (one row per event, with ``kind``
  and ``table``). A summary goes to stderr.
- ``--as-of-ms T`` / ``--as-of-offset O``: the groups as they were at time T / log offset O
  (later records are ignored); with ``--retention-ms`` offsets expire as Kafka would at T.
  Without ``--as-of-ms``, T is the robust log clock (``pipelines.log_clock``): a record far ahead
  of its partition's later records does not move it (a warning names what was ignored).
- Broker log segments in the input carry transactions (KIP-98): a record of a transactional batch
  keeps its producer id and the COMMIT/ABORT markers join the replay (``_with_transactions``), so
  transactional commits replay as Kafka's loader does (``coordinator_core.loader.transactions``).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from coordinator_core import (
    DEFAULT_CLEANUP_INTERVAL_MS,
    DEFAULT_COORDINATOR,
    DEFAULT_INITIAL_REBALANCE_DELAY_MS,
    REPLAY_COORDINATORS,
    RULE_SETS,
    TxnMarker,
)
from pipelines.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from coordinator_core import LogRecord
    from pipelines.inputs.raw_files import RawRecord

DESCRIPTION = """\
Replay __consumer_offsets records into each group's state (Kafka's loader rules) and print
one JSON line per group, or the inferred events (--events).

examples:
  offsetlake replay --input capture.parquet
  offsetlake replay --input dump.jsonl --as-of-ms 1700000000000
  offsetlake replay --input dir/ --retention-ms 604800000 --rules 2.1-2.3
  offsetlake replay --input dir/ --events --kinds rebalance,state_transition
"""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "replay",
        help="rebuild every group's state (and events) from captured records, pure Python",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--input", required=True, metavar="PATH", help="JSON lines, Parquet, or a directory of them")
    p.add_argument("--as-of-ms", type=int, metavar="T", help="the groups as they were at time T (epoch ms)")
    p.add_argument("--as-of-offset", type=int, metavar="O", help="ignore records after log offset O")
    p.add_argument(
        "--clock-outlier-ms",
        type=int,
        default=86_400_000,
        metavar="MS",
        help="without --as-of-ms, 'now' is the newest record time ignoring records more than MS "
        "ahead of every later record of their partition (default: one day)",
    )
    p.add_argument(
        "--retention-ms",
        type=int,
        metavar="R",
        help="predict offset expiry with this retention (offsets.retention.minutes in ms; 7 days = 604800000)",
    )
    p.add_argument(
        "--rules",
        choices=RULE_SETS,
        default="current",
        help="expiry rules of the broker version: current (default), 2.4-3.1, 2.1-2.3, pre-2.1",
    )
    p.add_argument(
        "--coordinator",
        choices=REPLAY_COORDINATORS,
        default=DEFAULT_COORDINATOR,
        help="whose rules: auto (default: new for a group whose records show Kafka 4 wrote them, "
        "else old), old (Kafka 3: group tombstone only when generation > 0) or new (Kafka 4)",
    )
    p.add_argument(
        "--cleanup-interval-ms",
        type=int,
        default=DEFAULT_CLEANUP_INTERVAL_MS,
        metavar="I",
        help="offsets.retention.check.interval.ms (default 600000): a predicted expiry falls on the "
        "broker's next cleanup and is withdrawn when the log shows that cleanup passed without it",
    )
    p.add_argument(
        "--initial-rebalance-delay-ms",
        type=int,
        default=DEFAULT_INITIAL_REBALANCE_DELAY_MS,
        metavar="D",
        help="group.initial.rebalance.delay.ms (default 3000; not in the log): bounds when a rebalance from "
        "Empty began (the window of its inferred start)",
    )
    p.add_argument("--events", action="store_true", help="print the event stream instead of the group states")
    p.add_argument(
        "--kinds", metavar="K1,K2", help="with --events: only these kinds (e.g. rebalance,offset_expiration)"
    )
    p.add_argument("--group", action="append", metavar="ID", help="only this group (repeatable)")
    p.add_argument(
        "--assume-log-start",
        action="store_true",
        help="the input starts at the groups' creation (not compacted): infer generations before the first record",
    )
    p.add_argument("--strict", action="store_true", help="stop (exit 2) at the first corrupt record")
    p.add_argument("--num-partitions", type=int, default=50, help="offsets.topic.num.partitions (default 50)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from coordinator_core import TABLE_BY_KIND, ReplaySettings, replay_groups
    from pipelines.inputs.raw_files import RawRecord, read_raw_records

    if args.retention_ms is not None and args.retention_ms <= 0:
        raise UsageError("--retention-ms must be a positive number of milliseconds")
    kinds = _event_kinds(args)
    records, clock_rows, counts = _read_input(read_raw_records(args.input), args)
    n_records = len(records)
    records = _with_transactions(records, args)

    if args.cleanup_interval_ms <= 0:
        raise UsageError(f"--cleanup-interval-ms must be positive, got {args.cleanup_interval_ms}")
    if args.initial_rebalance_delay_ms < 0:
        raise UsageError(f"--initial-rebalance-delay-ms must be >= 0, got {args.initial_rebalance_delay_ms}")
    as_of_ms, log_end_ms = args.as_of_ms, None
    clock_note = None
    if args.retention_ms is not None and records:
        # "now" = the robust log clock: one record dated 9999 must not expire every group
        newest = max(r.timestamp_ms for r in records)
        if as_of_ms is None and clock_rows:
            from pipelines.log_clock import records_clock

            clock = records_clock((RawRecord(b"", None, *row) for row in clock_rows), args.clock_outlier_ms)
            if clock.outliers and clock.now_ms is not None:
                newest = clock.now_ms
                clock_note = clock.describe()
        # the end of the log judges predictions (up to as_of: a later as_of is a forecast)
        as_of_ms = newest if as_of_ms is None else as_of_ms
        log_end_ms = min(as_of_ms, newest)
    settings = ReplaySettings.from_strings(
        retention_ms=args.retention_ms,
        rules=args.rules,
        coordinator=args.coordinator,
        cleanup_interval_ms=args.cleanup_interval_ms,
        initial_rebalance_delay_ms=args.initial_rebalance_delay_ms,
    )
    results = replay_groups(
        records,
        settings=settings,
        as_of_ms=as_of_ms,
        log_end_ms=log_end_ms,
        event_kinds=(kinds if kinds is not None else None) if args.events else (),
        assume_log_start=args.assume_log_start,
    )
    out = sys.stdout
    n_events = 0
    for group_id, result in results.items():
        if args.events:
            for e in result.events:
                row = {"kind": e.kind, "table": TABLE_BY_KIND[e.kind], **e.to_row()}
                out.write(json.dumps(row, separators=(",", ":")) + "\n")
                n_events += 1
        else:
            snap = result.snapshot
            row = {"group": group_id}
            row.update(snap.to_state_row(settings=settings, num_partitions=args.num_partitions))
            row["offsets"] = [{k: v for k, v in o.items() if k != "group_id"} for o in snap.offset_rows()]
            out.write(json.dumps(row, separators=(",", ":")) + "\n")
    _print_summary(args, n_records, counts, len(results), n_events, clock_note)
    return 0


def _event_kinds(args: argparse.Namespace) -> frozenset[str] | None:
    """The ``--kinds`` asked for (``None`` = all), checked against the known event kinds."""
    from coordinator_core import TABLE_BY_KIND

    kinds: frozenset[str] | None = None
    if args.kinds:
        if not args.events:
            raise UsageError("--kinds goes with --events")
        kinds = frozenset(k.strip() for k in args.kinds.split(",") if k.strip())
        unknown = kinds - set(TABLE_BY_KIND)
        if unknown:
            raise UsageError(f"unknown event kind(s) {sorted(unknown)}; known: {', '.join(sorted(TABLE_BY_KIND))}")
    return kinds


@dataclass
class _ReadCounts:
    """What reading the input saw and skipped (for the summary line)."""

    total: int = 0
    corrupt: int = 0
    cut: int = 0


def _read_input(
    raws: Iterable[RawRecord], args: argparse.Namespace
) -> tuple[list[LogRecord], list[tuple[str, int, int, int]], _ReadCounts]:
    """Decode the input records into the ones to replay (the as-of cut and ``--group`` applied).

    Returns:
        The records, every record's (topic, partition, offset, timestamp) for the log clock
        (records after the cut included), and the counts.
    """
    from coordinator_core import CorruptRecordError, LogRecord, decode_record

    wanted = set(args.group) if args.group else None
    records: list[LogRecord] = []
    counts = _ReadCounts()
    clock_rows: list[tuple[str, int, int, int]] = []  # every record's position and time
    for raw in raws:
        counts.total += 1
        clock_rows.append((raw.topic, raw.partition, raw.offset, raw.timestamp_ms))
        if (args.as_of_ms is not None and raw.timestamp_ms > args.as_of_ms) or (
            args.as_of_offset is not None and raw.offset > args.as_of_offset
        ):
            counts.cut += 1
            continue
        try:
            rec = decode_record(raw.key, raw.value, modern=True)  # Kafka 4 group records folded
        except CorruptRecordError as exc:
            if args.strict:
                raise UsageError(
                    f"record {counts.total} (partition {raw.partition}, offset {raw.offset}): {exc}"
                ) from None
            counts.corrupt += 1
            continue
        if wanted is not None and rec.key.group not in wanted:
            continue
        records.append(LogRecord(raw.partition, raw.offset, raw.timestamp_ms, rec.key, rec.value))
    return records, clock_rows, counts


def _with_transactions(records: list[Any], args: argparse.Namespace) -> list[Any]:
    """The records with their segment's producer ids (transactional batches) and the input's
    COMMIT/ABORT markers (within the as-of cut); records of other inputs unchanged."""
    from pathlib import Path

    from pipelines.inputs.segment_files import SEGMENT_SUFFIX, SegmentProblem, read_segment_items
    from pipelines.inputs.segment_input import producer_of, txn_marker

    path = Path(args.input)
    if not (path.is_dir() or path.suffix == SEGMENT_SUFFIX):
        return records
    pids: dict[tuple[int, int], int] = {}
    markers: list[TxnMarker] = []
    for item in read_segment_items(path):
        if isinstance(item, SegmentProblem) or item.partition is None:
            continue
        marker = txn_marker(item)
        if marker is not None:
            if (args.as_of_ms is None or marker.timestamp_ms <= args.as_of_ms) and (
                args.as_of_offset is None or marker.offset <= args.as_of_offset
            ):
                markers.append(marker)
        elif item.control_type is None and (pid := producer_of(item)) is not None:
            pids[(item.partition, item.offset)] = pid
    if not pids and not markers:
        return records
    out = [
        r if (r.partition, r.offset) not in pids else replace(r, producer_id=pids[(r.partition, r.offset)])
        for r in records
    ]
    return out + markers


def _print_summary(
    args: argparse.Namespace, n_records: int, counts: _ReadCounts, n_groups: int, n_events: int, clock_note: str | None
) -> None:
    """The summary line (and the log clock's warning) on stderr."""
    summary = f"replayed {n_records} of {counts.total} records into {n_groups} groups"
    extras = []
    if counts.corrupt:
        extras.append(f"{counts.corrupt} corrupt skipped")
    if counts.cut:
        extras.append(f"{counts.cut} after the as-of cut")
    if args.events:
        extras.append(f"{n_events} events")
    print(summary + (f" ({', '.join(extras)})" if extras else ""), file=sys.stderr)
    if clock_note:
        print(f"warning: {clock_note}", file=sys.stderr)


__all__ = ["register", "run"]
