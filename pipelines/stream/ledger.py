"""What the stream's landing source takes in a micro-batch, decided before anything is replayed:
positions validated, copies judged against what earlier micro-batches took, and records far
ahead of their log partition kept from moving the watermark (``plan_batch``).

Rules:
- Positions: the batch ingest's rules, the same code (``pipelines.records.positions``): a record
  with a null or missing topic/partition/offset, a partition outside
  0..``offsets_topic.num_partitions``-1 or a negative offset is refused; so is a copy that
  conflicts with another (same position, other bytes). Refused records go to
  ``ingest_quarantine`` with the reason (and the other copy's bytes) and are never replayed;
  identical copies are counted as duplicates and replayed once. Per micro-batch: records read =
  replayed + duplicates + refused.
- What was taken: the files of the earlier micro-batches (the source's offsets name them; they
  stay in the landing directory). Bounded: per taken file only its offset range per log
  partition and its log-clock staircase are kept (a few numbers per file and partition, cached
  per process and, for the landing source, in the checkpoint's ``landing_plans/_facts``: a
  restart does not read the taken files again); a position of this batch inside an earlier file's range is looked up in that
  file (a column-pruned read), so a batch that overlaps nothing costs one read of its own
  position and timestamp columns. A taken file later removed from the landing directory can no
  longer be compared: its positions count as new.
- Conflicts and the batch job: copies that disagree inside one micro-batch are all refused (the
  batch job: inside one run); a copy arriving in a later micro-batch that differs from the one
  taken is refused and the taken one stays (the batch job: the copy already in
  ``raw_records`` stays). A position whose earlier copies already disagreed refuses every
  further copy, identical ones included (never guess which one was right).
- Clock: ``pipelines.log_clock`` (the batch job's robust clock, the same code), each file one
  "task": over the taken files and this batch, a record more than ``replay.clock_outlier_ms``
  ahead of every later record of its partition (or of the wall clock, when it is the last) is
  an outlier. An outlier of this batch is replayed as it is, but its pack's event time is the
  clock's "now" (the newest record that is not an outlier), so one record dated 9999 does not
  move the watermark. A record that is ahead only of records still to come (and not of the
  wall clock) cannot be recognised when it arrives; it moves the watermark as before.
- Deterministic for (taken files, batch files), and made once per micro-batch: the source plans
  it (its tasks skip what the plan refuses or finds duplicated) and leaves the plan in the
  replay checkpoint's ``landing_plans`` directory, where the sink takes it to write the refused
  records and give the progress its counts (``LandingPackedReader.batch_output``; a plan that is
  not there, e.g. a non-local checkpoint, is made again by the same ``plan_batch``: the wall
  clock only decides about a partition's last record).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipelines.log_clock import Outlier, decide, staircase
from pipelines.records.positions import CONFLICTING_DUPLICATE, POSITION, judge_copies, refusal_columns
from schemas.raw import INGEST_QUARANTINE, RAW_RECORDS

if TYPE_CHECKING:
    import pyarrow as pa

DEFAULT_TOPIC = "__consumer_offsets"
#: How the copies taken earlier are named in a conflict's detail.
TAKEN_WHERE = "an earlier micro-batch of the stream"


Stair = tuple[str, int, int, int, "int | None", bool]  # log_clock.staircase row


@dataclass(frozen=True)
class FileFacts:
    """What is kept of a taken file, per log partition: its trusted offset range, and its clock
    level (last offset, newest timestamp of its staircase rows that are not a jump ahead)."""

    ranges: tuple[tuple[str, int, int, int], ...]  # (topic, partition, first, last)
    levels: tuple[tuple[str, int, int, int], ...]  # (topic, partition, last offset, level ms)
    rows: int


def _facts(t: pa.Table, stairs: Sequence[Stair], rows: int) -> FileFacts:
    levels: dict[tuple[str, int], tuple[int, int]] = {}
    for topic, part, off, ts, _prev, jump in stairs:
        if jump:
            continue
        last, level = levels.get((topic, part), (off, ts))
        levels[(topic, part)] = (max(last, off), max(level, ts))
    return FileFacts(_ranges(t), tuple((k[0], k[1], v[0], v[1]) for k, v in sorted(levels.items())), rows)


@dataclass
class BatchPlan:
    """A micro-batch's decision (see the module rules)."""

    records: int = 0
    skip: dict[str, list[int]] = field(default_factory=dict)  # file path -> row indexes not replayed
    duplicates: int = 0
    refused: list[dict[str, Any]] = field(default_factory=list)  # ingest_quarantine rows (no record_id/run_id)
    outliers: tuple[Outlier, ...] = ()  # this batch's records ignored by the clock
    clock_ms: int | None = None
    controls: int = 0  # broker segments' control records (transaction markers: not replayed as records)

    @property
    def replayed(self) -> int:
        return self.records - self.duplicates - len(self.refused) - self.controls

    def reasons(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.refused:
            out[r["reason"]] = out.get(r["reason"], 0) + 1
        return out

    def outlier_positions(self) -> set[tuple[int, int]]:
        return {(o.partition, o.offset) for o in self.outliers}


_FACTS: dict[tuple[str, int, int], FileFacts] = {}


def _read(path: str, columns: Sequence[str]) -> pa.Table:
    """``columns`` of a landing file; a missing column is all nulls (a missing topic is
    ``__consumer_offsets``, as the ingest takes it)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    present = [c for c in columns if c in pf.schema_arrow.names]
    t = pf.read(columns=present)
    n = pf.metadata.num_rows
    types = RAW_RECORDS.arrow_schema()
    cols = []
    for c in columns:
        if c in present:
            cols.append(t.column(c))
        elif c == "topic":
            cols.append(pa.array([DEFAULT_TOPIC] * n, pa.string()))
        else:
            cols.append(pa.nulls(n, types.field(c).type))
    return pa.Table.from_arrays(cols, names=list(columns))


def _trusted(path: str, num_partitions: int) -> tuple[pa.Table, pa.Array, pa.Array]:
    """(positions + timestamp + ``_row`` of the file's trusted rows, reasons, details per row)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = _read(path, (*POSITION, "timestamp"))
    reason, detail = refusal_columns(t, num_partitions)
    t = t.append_column("_row", pa.array(range(t.num_rows), pa.int64()))
    return t.filter(pc.is_null(reason)), reason, detail


def _ranges(t: pa.Table) -> tuple[tuple[str, int, int, int], ...]:
    if t.num_rows == 0:
        return ()
    g = t.group_by(["topic", "partition"]).aggregate([("offset", "min"), ("offset", "max")]).to_pydict()
    return tuple(zip(g["topic"], g["partition"], g["offset_min"], g["offset_max"], strict=True))


def _stairs(t: pa.Table, tolerance_ms: int) -> tuple[Stair, ...]:
    st = staircase(t.select(["topic", "partition", "offset", "timestamp"]), tolerance_ms).to_pydict()
    return tuple(zip(st["topic"], st["partition"], st["offset"], st["ts"], st["prev_ts"], st["jump"], strict=True))


def file_facts(path: str, num_partitions: int, tolerance_ms: int, facts_dir: str | None = None) -> FileFacts:
    """A taken file's facts, cached per (path, size, mtime) in the process and, with
    ``facts_dir``, on disk (``keep_facts``): a restarted stream reads a few numbers per taken
    file instead of every taken file's positions and timestamps (15 s of a restart's first
    micro-batch after 30M records)."""
    st = os.stat(path)
    key = (path, st.st_size, st.st_mtime_ns)
    facts = _FACTS.get(key)
    if facts is None and facts_dir is not None:
        facts = _load_facts(facts_dir, key, num_partitions, tolerance_ms)
    if facts is None:
        t, reason, _ = _trusted(path, num_partitions)
        facts = _facts(t, _stairs(t, tolerance_ms), len(reason))
        keep_facts(facts_dir, key, num_partitions, tolerance_ms, facts)
    _FACTS[key] = facts
    return facts


def _facts_file(facts_dir: str, key: tuple[str, int, int], num_partitions: int, tolerance_ms: int) -> str:
    """The facts of a file as it is (path, size, mtime) under these settings: one JSON file."""
    name = hashlib.sha256(repr((key, num_partitions, tolerance_ms)).encode()).hexdigest()[:32]
    return os.path.join(facts_dir, f"{name}.json")


def keep_facts(
    facts_dir: str | None, key: tuple[str, int, int], num_partitions: int, tolerance_ms: int, facts: FileFacts
) -> None:
    """Write a file's facts into ``facts_dir`` (atomically: a crash leaves the old or none)."""
    import json

    if facts_dir is None:
        return
    os.makedirs(facts_dir, exist_ok=True)
    target = _facts_file(facts_dir, key, num_partitions, tolerance_ms)
    body = {"key": list(key), "ranges": facts.ranges, "levels": facts.levels, "rows": facts.rows}
    tmp = f"{target}.{os.getpid()}.tmp"
    with open(tmp, "w") as fh:
        json.dump(body, fh)
    os.replace(tmp, target)


def _load_facts(facts_dir: str, key: tuple[str, int, int], num_partitions: int, tolerance_ms: int) -> FileFacts | None:
    import json

    try:
        with open(_facts_file(facts_dir, key, num_partitions, tolerance_ms)) as fh:
            body = json.load(fh)
    except (OSError, ValueError):
        return None
    if tuple(body.get("key", ())) != key:
        return None
    return FileFacts(
        ranges=tuple(tuple(r) for r in body["ranges"]),
        levels=tuple(tuple(r) for r in body["levels"]),
        rows=int(body["rows"]),
    )


def _candidates(valid: pa.Table, taken: Sequence[tuple[str, FileFacts]]) -> tuple[pa.Table, dict[str, pa.Table]]:
    """Rows of ``valid`` (this batch's trusted rows, with ``_file``/``_row``) that share a
    position with another row of the batch or fall inside a taken file's range, and per taken
    file whose range they touch its rows at those positions (``_row``)."""
    import numpy as np
    import pyarrow as pa

    if valid.num_rows == 0:
        return valid, {}
    inside = np.zeros(valid.num_rows, bool)
    touched: set[str] = set()
    topics = valid.column("topic").combine_chunks().dictionary_encode()
    code_of = {name: i for i, name in enumerate(topics.dictionary.to_pylist())}
    codes = topics.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    part = valid.column("partition").to_numpy(zero_copy_only=False).astype(np.int64)
    off = valid.column("offset").to_numpy(zero_copy_only=False).astype(np.int64)
    seg = codes * (1 << 32) + (part & 0xFFFFFFFF)
    order = np.lexsort((off, seg))
    seg_s, off_s = seg[order], off[order]
    # a position twice in this batch: both rows are candidates
    same = np.r_[False, (seg_s[1:] == seg_s[:-1]) & (off_s[1:] == off_s[:-1])]
    repeated = np.zeros(valid.num_rows, bool)
    repeated[order[same | np.r_[same[1:], False]]] = True
    if taken:
        spans: dict[int, list[tuple[int, int, str]]] = {}
        for path, facts in taken:
            for topic, p, first, last in facts.ranges:
                if topic in code_of:
                    spans.setdefault(code_of[topic] * (1 << 32) + (p & 0xFFFFFFFF), []).append((first, last, path))
        for key, ivs in spans.items():
            lo, hi = np.searchsorted(seg_s, key, "left"), np.searchsorted(seg_s, key, "right")
            if lo == hi:
                continue
            offs = off_s[lo:hi]  # this batch's offsets of the log partition, sorted
            ivs.sort()
            firsts = np.array([iv[0] for iv in ivs], np.int64)
            reach = np.maximum.accumulate(np.array([iv[1] for iv in ivs], np.int64))
            k = np.searchsorted(firsts, offs, "right") - 1
            hit = (k >= 0) & (reach[np.maximum(k, 0)] >= offs)
            if not hit.any():
                continue
            inside[order[lo:hi][hit]] = True
            hit_offs = offs[hit]
            for first, last, path in ivs:  # the taken files holding one of those offsets
                i = np.searchsorted(hit_offs, first, "left")
                if i < len(hit_offs) and hit_offs[i] <= last:
                    touched.add(path)
    earlier: dict[str, pa.Table] = {}
    cand_pos = valid.filter(pa.array(inside)).select(list(POSITION))
    for path in sorted(touched):
        rows = _read(path, POSITION)
        rows = rows.append_column("_row", pa.array(range(rows.num_rows), pa.int64()))
        hits = rows.join(cand_pos.group_by(list(POSITION)).aggregate([]), list(POSITION), join_type="inner")
        if hits.num_rows:
            earlier[path] = hits
    matched = [t.select(list(POSITION)) for t in earlier.values()]
    out = valid.filter(pa.array(repeated))
    if matched:
        keys = pa.concat_tables(matched).group_by(list(POSITION)).aggregate([])
        rest = valid.filter(pa.array(inside & ~repeated)).join(keys, list(POSITION), join_type="inner")
        out = pa.concat_tables([out, rest.select(out.column_names)])
    return out, earlier


def _copies(paths: Sequence[str], rows: pa.Table) -> list[dict[str, Any]]:
    """Full rows (``RAW_RECORDS`` columns + ``source_file``, ``_file``, ``_row``) of ``rows``
    (``_file`` index into ``paths``, ``_row``), in (file, row) order."""

    out: list[dict[str, Any]] = []
    d = rows.select(["_file", "_row"]).to_pydict()
    by_file: dict[int, list[int]] = {}
    for f, r in zip(d["_file"], d["_row"], strict=True):
        by_file.setdefault(int(f), []).append(int(r))
    for f in sorted(by_file):
        idx = sorted(by_file[f])
        t = _read(paths[f], RAW_RECORDS.column_names).take(idx).to_pylist()
        for r, row in zip(idx, t, strict=True):
            out.append({**row, "source_file": paths[f], "_file": f, "_row": r})
    return out


# long: one decision over the batch's files, in the order the module rules give it
def plan_batch(
    landing: str,
    taken: Sequence[str],
    batch: Sequence[str],
    *,
    num_partitions: int,
    tolerance_ms: int,
    wall_ms: int | None = None,
    facts_dir: str | None = None,
) -> BatchPlan:
    """The plan of a micro-batch of ``batch`` files (names in ``landing``, in the order taken)
    after the ``taken`` files of earlier micro-batches (see the module rules); ``facts_dir``:
    where the files' facts are kept across processes (``file_facts``)."""
    import pyarrow as pa

    paths = [os.path.join(landing, n) for n in batch]
    plan = BatchPlan()
    valid_parts: list[pa.Table] = []
    stairs: list[Stair] = []
    bad_files: dict[int, list[tuple[int, str, str]]] = {}
    for f, path in enumerate(paths):
        t, reason, detail = _trusted(path, num_partitions)
        plan.records += len(reason)
        if t.num_rows < len(reason):
            rs, ds = reason.to_pylist(), detail.to_pylist()
            bad_files[f] = [(i, r, d) for i, (r, d) in enumerate(zip(rs, ds, strict=True)) if r is not None]
        own = _stairs(t, tolerance_ms)
        stairs.extend(own)
        st = os.stat(path)  # taken by the next micro-batches: no second read
        key = (path, st.st_size, st.st_mtime_ns)
        if key not in _FACTS:
            _FACTS[key] = _facts(t, own, len(reason))
            keep_facts(facts_dir, key, num_partitions, tolerance_ms, _FACTS[key])
        valid_parts.append(t.append_column("_file", pa.array([f] * t.num_rows, pa.int64())))
    skip: dict[int, set[int]] = {}
    for f, bad in bad_files.items():
        full = _read(paths[f], _raw_columns()).take([i for i, _, _ in bad]).to_pylist()
        for (i, reason, detail), row in zip(bad, full, strict=True):
            plan.refused.append(_refused(row, reason, detail, None, paths[f]))
            skip.setdefault(f, set()).add(i)
    taken_facts = [
        (p, file_facts(p, num_partitions, tolerance_ms, facts_dir)) for p in (os.path.join(landing, n) for n in taken)
    ]
    if valid_parts:
        valid = pa.concat_tables(valid_parts)
        cand, earlier = _candidates(valid, taken_facts)
        if cand.num_rows:
            copies = _copies(paths, cand)
            before: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
            for path, rows in earlier.items():
                full = _read(path, _raw_columns()).take(rows.column("_row").to_pylist()).to_pylist()
                for row in full:
                    before.setdefault(tuple(row[c] for c in POSITION), []).append(row)
            verdict = judge_copies(copies, before, TAKEN_WHERE)
            for i in verdict.duplicate:
                skip.setdefault(copies[i]["_file"], set()).add(copies[i]["_row"])
            plan.duplicates = len(verdict.duplicate)
            for i, detail, other, other_taken in verdict.refused:
                c = copies[i]
                skip.setdefault(c["_file"], set()).add(c["_row"])
                plan.refused.append(_refused(c, CONFLICTING_DUPLICATE, detail, (other, other_taken), c["source_file"]))
    plan.skip = {paths[f]: sorted(rows) for f, rows in skip.items()}
    # the log clock over what was taken and this batch (each file one task)
    mine = {(s[0], s[1], s[2]) for s in stairs}
    # what was taken enters the clock as one row per log partition: its level (bounded; a taken
    # record is never the "later" record that shows one of this batch ahead of its time)
    levels: dict[tuple[str, int], tuple[int, int]] = {}
    for _, facts in taken_facts:
        for topic, part, last, level in facts.levels:
            was = levels.get((topic, part), (last, level))
            levels[(topic, part)] = (max(was[0], last), max(was[1], level))
    taken_rows = [(k[0], k[1], v[0], v[1], None, False) for k, v in levels.items()]
    clock = decide([*taken_rows, *stairs], tolerance_ms, wall_ms)
    plan.clock_ms = clock.now_ms
    plan.outliers = tuple(o for o in clock.outliers if (o.topic, o.partition, o.offset) in mine)
    return plan


def _raw_columns() -> list[str]:
    return list(RAW_RECORDS.column_names)


def _refused(
    row: Mapping[str, Any], reason: str, detail: str, other: tuple[Mapping[str, Any], bool] | None, source: str
) -> dict[str, Any]:
    out = {c: row.get(c) for c in _raw_columns()}
    out.update(
        reason=reason,
        detail=detail,
        other_key=other[0].get("key") if other else None,
        other_value=other[0].get("value") if other else None,
        other_in_raw_records=other[1] if other else None,
        source_file=source,
    )
    return out


def quarantine_rows(plan: BatchPlan, run_id: str) -> pa.Table:
    """The plan's refused records as ``ingest_quarantine`` rows; ``record_id`` hashes every
    column, the reason, the other copy and the file (identical refusals are one row)."""
    import pyarrow as pa

    rows = []
    for r in plan.refused:
        parts = []
        for c in (*_raw_columns(), "reason", "other_key", "other_value", "source_file"):
            v = r.get(c)
            parts.append("\\N" if v is None else v.hex() if isinstance(v, bytes) else str(v))
        rows.append({**r, "record_id": hashlib.sha256("|".join(parts).encode()).hexdigest(), "run_id": run_id})
    return pa.Table.from_pylist(rows, schema=INGEST_QUARANTINE.arrow_schema())
