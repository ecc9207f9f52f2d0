"""``offsetlake capture``: a live ``__consumer_offsets`` into raw-record landing files.

Rules:
- A real Kafka client (confluent-kafka / librdkafka) reads the topic with ``assign()`` and
  explicit offsets: no consumer group is joined, nothing is committed to the cluster.
- Keys and values are kept as raw bytes (a null value = a tombstone); partition, offset,
  timestamp and timestamp type are the log's own (Spark's Kafka source schema).
- Output files are ``capture-<seq:08d>.parquet`` via ``RawRecordWriter``: lexical order = log
  order per partition, each file appears atomically (temp name + rename).
- Progress lives in ``_offsetlake_capture.json`` in the output directory (a leading ``_`` hides
  it from Spark's file source): ``{"topic", "next_offsets": {partition: offset}, "last_file"}``,
  replaced atomically AFTER the data file is renamed. On start, capture files newer than
  ``last_file`` (a crash between the rename and the state write) are read back and folded in,
  so a restart after a crash at any point neither loses nor duplicates a record: the files are
  the truth, the state file a checkpoint over them.
- ``--until-end`` stops at the high watermarks sampled at start (records produced later wait
  for the next run), like Spark's ``availableNow``; without it the capture follows the log until
  SIGINT/SIGTERM, then flushes and saves its state.
- An unreachable cluster is a one-line ``KafkaUnavailableError`` within ``connect_timeout_s``;
  a cluster that stops answering mid-way fails after ``stall_timeout_s`` without progress.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import operator
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from pipelines.errors import UsageError
from pipelines.inputs.raw_files import RawRecordWriter
from pipelines.kafka.batch_builder import MessageBatchBuilder
from pipelines.kafka.client import (
    KafkaSettings,
    KafkaUnavailableError,
    require_confluent_kafka,
    topic_partitions,
    watermarks,
)

STATE_FILE = "_offsetlake_capture.json"
FILE_PREFIX = "capture"


# ---------------------------------------------------------------------------------------------
# state
# ---------------------------------------------------------------------------------------------
@dataclass
class CaptureState:
    """Next offset to read per partition, and the last data file those offsets cover."""

    topic: str
    next_offsets: dict[int, int] = field(default_factory=dict)
    last_file: str | None = None

    def save(self, path: Path) -> None:
        """Replace the state file atomically (temp + fsync + rename)."""
        tmp = path.with_name(f".{path.name}.tmp")
        data = {
            "topic": self.topic,
            "next_offsets": {str(p): o for p, o in sorted(self.next_offsets.items())},
            "last_file": self.last_file,
        }
        with tmp.open("w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path, topic: str) -> CaptureState:
        """Read the state file (a fresh state if it does not exist)."""
        if not path.exists():
            return cls(topic)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            state = cls(
                str(data["topic"]), {int(p): int(o) for p, o in data["next_offsets"].items()}, data.get("last_file")
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise UsageError(f"{path}: not a valid capture state file ({exc})") from None
        if state.topic != topic:
            raise UsageError(f"{path}: this directory holds a capture of topic {state.topic!r}, not {topic!r}")
        return state


def capture_files(out_dir: Path) -> list[Path]:
    """The capture's data files in log order."""
    if not out_dir.is_dir():
        return []
    return sorted(p for p in out_dir.glob(f"{FILE_PREFIX}-*.parquet") if p.is_file())


def reconcile_state(state: CaptureState, out_dir: Path) -> list[Path]:
    """Fold files written after ``state.last_file`` into ``state`` (crash after rename).

    Returns:
        The files that were folded in (empty in the normal case).
    """
    newer = [p for p in capture_files(out_dir) if state.last_file is None or p.name > state.last_file]
    for path in newer:
        table = pq.read_table(path, columns=["topic", "partition", "offset"])
        if table.num_rows == 0:
            continue
        import pyarrow.compute as pc

        mine = table.filter(pc.equal(table.column("topic"), state.topic))
        if mine.num_rows == 0:
            continue
        grouped = mine.group_by("partition").aggregate([("offset", "max")])
        for p, o in zip(grouped.column("partition").to_pylist(), grouped.column("offset_max").to_pylist()):
            state.next_offsets[int(p)] = max(state.next_offsets.get(int(p), 0), int(o) + 1)
        state.last_file = path.name
    return newer


# ---------------------------------------------------------------------------------------------
# capture
# ---------------------------------------------------------------------------------------------
@dataclass
class CaptureResult:
    """What one ``capture`` run did."""

    records: int
    files: list[Path]
    next_offsets: dict[int, int]
    lag: dict[int, int]
    seconds: float
    recovered_files: list[Path] = field(default_factory=list)

    @property
    def total_lag(self) -> int:
        return sum(self.lag.values())


ProgressFn = Callable[[int, int], None]  # (records captured so far, current lag)


def parse_start(spec: str) -> tuple[str, int | None]:
    """``earliest`` | ``latest`` | ``timestamp:<epoch ms>`` -> (mode, ms)."""
    s = spec.strip().lower()
    if s in ("earliest", "latest"):
        return s, None
    if s.startswith("timestamp:"):
        try:
            return "timestamp", int(s.split(":", 1)[1])
        except ValueError:
            pass
    raise UsageError(f"--from {spec}: expected earliest, latest or timestamp:<epoch ms>")


def _resolve_start(
    consumer: Any,
    settings: KafkaSettings,
    partitions: list[int],
    mode: str,
    ts_ms: int | None,
    marks: dict[int, tuple[int, int]],
    timeout_s: float,
) -> dict[int, int]:
    if mode == "earliest":
        return {p: marks[p][0] for p in partitions}
    if mode == "latest":
        return {p: marks[p][1] for p in partitions}
    ck = require_confluent_kafka()
    assert ts_ms is not None
    try:
        found = consumer.offsets_for_times(
            [ck.TopicPartition(settings.topic, p, ts_ms) for p in partitions], timeout=timeout_s
        )
    except ck.KafkaException as exc:
        raise KafkaUnavailableError(f"offsets_for_times failed: {exc.args[0]}") from None
    out: dict[int, int] = {}
    for tp in found:
        # ListOffsets: the earliest offset whose timestamp >= ts; -1 = none (start at the end).
        out[tp.partition] = tp.offset if tp.offset >= 0 else marks[tp.partition][1]
    return out


def capture(
    settings: KafkaSettings,
    out_dir: str | os.PathLike[str],
    *,
    partitions: list[int] | None = None,
    start: str = "earliest",
    until_end: bool = True,
    rows_per_file: int = 100_000,
    flush_interval_s: float = 5.0,
    max_records: int | None = None,
    max_rate: float | None = None,
    connect_timeout_s: float = 15.0,
    stall_timeout_s: float = 60.0,
    state_path: str | os.PathLike[str] | None = None,
    fetch_batch: int = 10_000,
    progress: ProgressFn | None = None,
    stop_event: threading.Event | None = None,
    log: Callable[[str], None] | None = None,
) -> CaptureResult:
    """Capture ``settings.topic`` into raw-record Parquet files under ``out_dir``.

    Args:
        settings: the cluster.
        out_dir: landing directory (created); holds the data files and the state file.
        partitions: partitions to read (``None`` = all).
        start: where partitions without saved state start (``earliest`` | ``latest`` |
            ``timestamp:<ms>``).
        until_end: stop at the high watermarks sampled at start; ``False`` = follow the log.
        rows_per_file: a file is written when this many records are buffered.
        flush_interval_s: in follow mode, buffered records are written at least this often.
        max_records: stop after this many records (then save state as usual).
        max_rate: records/s ceiling (``None`` = as fast as possible).
        connect_timeout_s: how long the first metadata request may take.
        stall_timeout_s: fail if the cluster stops answering for this long while behind.
        state_path: state file (default ``<out_dir>/_offsetlake_capture.json``).
        fetch_batch: messages per ``consume()`` call.
        progress: called with (records so far, current lag) after every fetch.
        stop_event: set it (or send SIGTERM/SIGINT in the main thread) to stop cleanly.
        log: one-line notes (state recovery, data lost to retention).

    Raises:
        KafkaUnavailableError: the cluster is unreachable or stops answering.
    """
    ck = require_confluent_kafka()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    spath = Path(state_path) if state_path else out / STATE_FILE
    note = log or (lambda msg: None)
    mode, ts_ms = parse_start(start)
    t0 = time.monotonic()

    state, recovered = _load_state(spath, settings.topic, out, note)
    consumer = _open_consumer(ck, settings, connect_timeout_s)
    stop = stop_event or threading.Event()
    restore = _install_signal_handlers(stop)
    writer = RawRecordWriter(out, rows_per_file=max(rows_per_file, 1), prefix=FILE_PREFIX)
    limits = _Limits(
        until_end,
        rows_per_file,
        flush_interval_s,
        max_records,
        max_rate,
        connect_timeout_s,
        stall_timeout_s,
        fetch_batch,
    )
    try:
        run = _Capture(ck, consumer, settings, state, spath, writer, limits, stop, note, progress, t0)
        run.start(partitions, mode, ts_ms)
        run.fetch_until_done()
        run.flush()
        return run.result(recovered)
    finally:
        restore()
        consumer.close()


def _load_state(spath: Path, topic: str, out: Path, note: Callable[[str], None]) -> tuple[CaptureState, list[Path]]:
    """The saved state with files written after it folded in (saved again if there were any)."""
    state = CaptureState.load(spath, topic)
    recovered = reconcile_state(state, out)
    if recovered:
        note(f"recovered {len(recovered)} file(s) written after the last saved state")
        state.save(spath)
    return state, recovered


def _open_consumer(ck: Any, settings: KafkaSettings, connect_timeout_s: float) -> Any:
    """A consumer whose requests time out within ``connect_timeout_s``."""
    timeout_ms = max(1000, int(connect_timeout_s * 1000))
    conf = {"socket.timeout.ms": timeout_ms, "socket.connection.setup.timeout.ms": timeout_ms}
    return ck.Consumer(settings.consumer_conf(**conf))


@dataclass(frozen=True)
class _Limits:
    """The knobs of one ``capture`` run (see its arguments)."""

    until_end: bool
    rows_per_file: int
    flush_interval_s: float
    max_records: int | None
    max_rate: float | None
    connect_timeout_s: float
    stall_timeout_s: float
    fetch_batch: int


class _Capture:
    """One ``capture`` run: the consumer's position per partition and what is buffered.

    ``position`` is the next offset to read; ``pending_next`` the offsets read since the last
    flush (they reach ``state`` only in ``flush``, after the data file is renamed, so a crash
    never saves offsets whose records are not on disk); ``high`` the log end as last seen;
    ``target`` the end sampled at start (``--until-end`` stops there); ``done`` the partitions
    that reached it (paused).
    """

    def __init__(
        self,
        ck: Any,
        consumer: Any,
        settings: KafkaSettings,
        state: CaptureState,
        spath: Path,
        writer: RawRecordWriter,
        limits: _Limits,
        stop: threading.Event,
        note: Callable[[str], None],
        progress: ProgressFn | None,
        t0: float,
    ) -> None:
        self.ck, self.consumer, self.settings = ck, consumer, settings
        self.state, self.spath, self.writer = state, spath, writer
        self.limits, self.stop, self.note, self.progress, self.t0 = limits, stop, note, progress, t0
        self.files: list[Path] = []
        self.total = 0
        self.parts: list[int] = []
        self.position: dict[int, int] = {}
        self.target: dict[int, int] = {}
        self.high: dict[int, int] = {}
        self.done: set[int] = set()
        self.pending_next: dict[int, int] = {}
        self.builder = MessageBatchBuilder(settings.topic)
        self.last_flush = time.monotonic()
        self.last_progress = time.monotonic()

    # -- start ------------------------------------------------------------------------------
    def start(self, partitions: list[int] | None, mode: str, ts_ms: int | None) -> None:
        """Find the partitions and their start offsets; assign the ones with work to do."""
        consumer, settings, timeout_s = self.consumer, self.settings, self.limits.connect_timeout_s
        parts = topic_partitions(consumer, settings, timeout_s, partitions)
        marks = watermarks(consumer, settings.topic, parts, timeout_s)
        unknown = [p for p in parts if p not in self.state.next_offsets]
        starts = _resolve_start(consumer, settings, unknown, mode, ts_ms, marks, timeout_s) if unknown else {}
        self.parts = parts
        self.position = self._start_positions(marks, starts)
        self.target = {p: marks[p][1] for p in parts}
        self.done = {p for p in parts if self.limits.until_end and self.position[p] >= self.target[p]}
        for p in parts:  # a partition first seen in this run is part of the state from now on
            self.state.next_offsets.setdefault(p, self.position[p])
        active = [p for p in parts if p not in self.done]
        if active:
            consumer.assign([self.ck.TopicPartition(settings.topic, p, self.position[p]) for p in active])
        self.last_flush = time.monotonic()
        self.last_progress = time.monotonic()
        self.high = dict(self.target)

    def _start_positions(self, marks: dict[int, tuple[int, int]], starts: dict[int, int]) -> dict[int, int]:
        """Saved offset, else the ``--from`` start; never below the log start (noted as lost)."""
        position: dict[int, int] = {}
        for p in self.parts:
            pos = self.state.next_offsets.get(p, starts.get(p, marks[p][0]))
            if pos < marks[p][0]:
                self.note(
                    f"{self.settings.topic}-{p}: offsets {pos}..{marks[p][0] - 1} were deleted by the broker "
                    "(retention/compaction) before they were captured"
                )
                pos = marks[p][0]
            position[p] = pos
        return position

    # -- the fetch loop ---------------------------------------------------------------------
    def fetch_until_done(self) -> None:
        """Fetch until every partition is done, ``max_records`` is reached or a stop is asked."""
        limits = self.limits
        while len(self.done) < len(self.parts) and not self.stop.is_set():
            if limits.max_records is not None and self.total >= limits.max_records:
                break
            msgs = self.consumer.consume(num_messages=self._fetch_size(), timeout=0.5)
            got = self._take(msgs)
            self.total += got
            now = time.monotonic()
            if got:
                self.last_progress = now
            # --until-end writes full files only (and the rest at the end); a follower also
            # writes what it has every flush_interval_s so new records land promptly
            if len(self.builder) >= limits.rows_per_file or (
                not limits.until_end
                and (len(self.builder) or self.pending_next)
                and now - self.last_flush >= limits.flush_interval_s
            ):
                self.flush()
            if not got and not msgs:
                self._idle(now)
            if self.progress is not None:
                self.progress(self.total, self.lag_now())
            if limits.max_rate and got:
                self._throttle(limits.max_rate)

    def _fetch_size(self) -> int:
        """How many messages the next ``consume()`` may return."""
        limits = self.limits
        # never buffer past a file's worth: every file but the last of a run is full
        want = max(1, min(limits.fetch_batch, limits.rows_per_file - len(self.builder)))
        if limits.max_records is not None:
            want = min(want, limits.max_records - self.total)
        if limits.until_end:  # consume() returns once it has `want` messages: never ask for more than is left
            left = sum(max(0, self.target[p] - self.position[p]) for p in self.parts if p not in self.done)
            want = max(1, min(want, left))
        if limits.max_rate:
            want = max(1, min(want, int(limits.max_rate / 10) or 1))
        return want

    def _take(self, msgs: list[Any]) -> int:
        """Buffer the records of one fetch, handle its error events; returns the records kept.

        Fields are read with the C methods mapped over the fetch (no Python frame per message):
        a fetch returns each partition's records in log order, so ``dict(zip(partitions,
        offsets))`` is the last offset per partition, and only a fetch that crosses the end
        sampled at start (``--until-end``) is filtered record by record.
        """
        if not msgs:
            return 0
        cls = type(msgs[0])
        errors = list(map(cls.error, msgs))
        # (`errors.count(None)` would compare a KafkaError with None, which raises)
        if any(map(operator.is_not, errors, itertools.repeat(None))):
            for m, err in zip(msgs, errors, strict=True):
                if err is not None:
                    self._on_error(m, err)
            msgs = [m for m, err in zip(msgs, errors, strict=True) if err is None]
            if not msgs:
                return 0
        parts = list(map(cls.partition, msgs))
        offs = list(map(cls.offset, msgs))
        last = dict(zip(parts, offs, strict=True))  # partition -> last offset of this fetch
        until_end, target = self.limits.until_end, self.target
        if until_end and any(off >= target[p] for p, off in last.items()):
            # records beyond the end sampled at start are left for the next run
            for p, off in last.items():
                if off >= target[p]:
                    self._finish(p)
            keep = [i for i, (p, off) in enumerate(zip(parts, offs, strict=True)) if off < target[p]]
            msgs, parts, offs = [msgs[i] for i in keep], [parts[i] for i in keep], [offs[i] for i in keep]
            last = dict(zip(parts, offs, strict=True))
        self.builder.extend(msgs, parts, offs)
        for p, off in last.items():
            self._advance(p, off + 1)
            self.high[p] = max(self.high[p], off + 1)
            if until_end and self.position[p] >= target[p]:
                self._finish(p)
        return len(offs)

    def _on_error(self, m: Any, err: Any) -> None:
        """A partition EOF moves the position; a fatal error raises; anything else is retried."""
        ck = self.ck
        p = m.partition()
        if err.code() == ck.KafkaError._PARTITION_EOF:
            # The log end at this moment; offsets below it without a record are
            # transaction markers or compacted away: nothing left to read there.
            eof_at = m.offset()
            if eof_at > self.position.get(p, 0):
                self._advance(p, eof_at)
            self.high[p] = max(self.high.get(p, 0), eof_at)
            if self.limits.until_end and self.position[p] >= self.target[p]:
                self._finish(p)
            self.last_progress = time.monotonic()
            return
        if err.fatal() or err.code() in (
            ck.KafkaError.TOPIC_AUTHORIZATION_FAILED,
            ck.KafkaError._UNKNOWN_PARTITION,
            ck.KafkaError.UNKNOWN_TOPIC_OR_PART,
        ):
            raise KafkaUnavailableError(f"reading {self.settings.topic}: {err.str()}")
        # transient (broker down, ...): librdkafka retries; stall timer decides

    def _advance(self, p: int, next_offset: int) -> None:
        """Partition ``p`` has been read up to ``next_offset`` (saved at the next flush)."""
        self.position[p] = max(self.position.get(p, 0), next_offset)
        self.pending_next[p] = max(self.pending_next.get(p, 0), next_offset)

    def _finish(self, p: int) -> None:
        """Partition ``p`` reached the end sampled at start: stop fetching it."""
        if p not in self.done:
            self.done.add(p)
            self.consumer.pause([self.ck.TopicPartition(self.settings.topic, p)])

    def _idle(self, now: float) -> None:
        """An empty fetch: a follower refreshes the log end; ``--until-end`` checks for a stall."""
        if not self.limits.until_end:
            self.last_progress = now  # idle at the end of the log is normal when following
            marks = watermarks(self.consumer, self.settings.topic, self.parts, 1.0, cached=True)
            for p, (_, hi) in marks.items():
                self.high[p] = max(self.high[p], hi)
        elif now - self.last_progress > self.limits.stall_timeout_s:
            raise KafkaUnavailableError(
                f"no data from {self.settings.bootstrap_servers} for {self.limits.stall_timeout_s:g}s while "
                f"{self.lag_now()} records behind the end"
            )

    def _throttle(self, max_rate: float) -> None:
        """Sleep (interruptibly) while ahead of ``max_rate`` records/s."""
        ahead = self.total / max_rate - (time.monotonic() - self.t0)
        if ahead > 0:
            self.stop.wait(ahead)

    # -- flush and result -------------------------------------------------------------------
    def flush(self) -> None:
        """Write the buffered records, then (and only then) save the offsets they cover."""
        if len(self.builder):
            before = len(self.writer.files)
            self.writer.write_batch(self.builder.to_batch())
            self.writer.flush()
            new = self.writer.files[before:]
            self.files.extend(new)
            if new:
                self.state.last_file = new[-1].name
            self.builder.clear()
        if self.pending_next:
            for p, o in self.pending_next.items():
                self.state.next_offsets[p] = max(self.state.next_offsets.get(p, 0), o)
            self.pending_next.clear()
            self.state.save(self.spath)
        self.last_flush = time.monotonic()

    def lag_now(self) -> int:
        """Records between what was read and the log end as last seen."""
        position, pending = self.position, self.pending_next
        return sum(max(0, self.high[p] - max(position[p], pending.get(p, 0))) for p in self.parts)

    def result(self, recovered: list[Path]) -> CaptureResult:
        """The run's summary (after the last ``flush``); reports the final lag to ``progress``."""
        final_lag = {p: max(0, self.high[p] - self.state.next_offsets.get(p, 0)) for p in self.parts}
        if self.progress is not None:
            self.progress(self.total, sum(final_lag.values()))
        return CaptureResult(
            records=self.total,
            files=self.files,
            next_offsets=dict(self.state.next_offsets),
            lag=final_lag,
            seconds=time.monotonic() - self.t0,
            recovered_files=recovered,
        )


def _install_signal_handlers(stop: threading.Event) -> Callable[[], None]:
    """SIGTERM/SIGINT set ``stop`` (only possible in the main thread); returns the undo."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous: dict[int, Any] = {}

    def handler(signum: int, frame: Any) -> None:
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(ValueError, OSError):
            previous[sig] = signal.signal(sig, handler)

    def restore() -> None:
        for sig, h in previous.items():
            signal.signal(sig, h)

    return restore


def print_result(result: CaptureResult, out: Any = sys.stdout) -> None:
    """One summary line for the CLI."""
    rate = result.records / result.seconds if result.seconds > 0 else 0.0
    print(
        f"captured {result.records} records into {len(result.files)} file(s) in {result.seconds:.1f}s "
        f"({rate:,.0f} records/s); lag to end {result.total_lag}",
        file=out,
    )
