"""The stream's log tail over a broker log dir (``pipelines.inputs.segment_log``): what is pending
after a position, where a micro-batch's time cut ends, what a rewritten or damaged segment gives.
Pure Python over files written with the project's encoder (no Spark)."""

from __future__ import annotations

import os
from pathlib import Path

from coordinator_core import segments as S
from pipelines.inputs import segment_log as L


def _batch(offset: int, ts: int) -> bytes:
    return S.encode_batch_v2([S.Record(offset, ts, b"key%d" % offset, b"value")])


def _segment(d: Path, base: int, offsets: range, ts0: int) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    f = d / f"{base:020d}.log"
    f.write_bytes(b"".join(_batch(o, ts0 + o) for o in offsets))
    return f


def _take_all(files: list[tuple[int, str]], pos: L.Pos) -> tuple[L.Pos, int]:
    spans = L.pending(files, pos)
    return L.advance(spans, sum(len(s) for s in spans), pos)


def test_a_growing_segment_is_followed_and_a_partial_batch_waits(tmp_path: Path) -> None:
    d = tmp_path / "__consumer_offsets-3"
    f = _segment(d, 0, range(0, 5), 1000)
    files = L.partition_files(str(tmp_path))[3]
    pos, n = _take_all(files, L.START)
    assert (pos[0], n) == (5, 5)
    more = b"".join(_batch(o, 1000 + o) for o in range(5, 8))
    with f.open("ab") as fh:
        fh.write(more + _batch(8, 1008)[:20])  # the broker is still writing offset 8
    pos2, n2 = _take_all(files, pos)
    assert (pos2[0], n2) == (8, 3)
    with f.open("ab") as fh:
        fh.write(_batch(8, 1008)[20:])
    assert _take_all(files, pos2)[0][0] == 9


def test_a_rewritten_segment_is_read_by_offset_never_twice(tmp_path: Path) -> None:
    d = tmp_path / "__consumer_offsets-0"
    f = _segment(d, 0, range(0, 10), 0)
    files = L.partition_files(str(tmp_path))[0]
    spans = L.pending(files, L.START)
    pos, _ = L.advance(spans, 6, L.START)  # offsets 0..5 read
    # the cleaner's copy: fewer batches (compacted), a new file in place of the old one
    tmp = d / "x.cleaned"
    tmp.write_bytes(b"".join(_batch(o, o) for o in (1, 4, 7, 8, 9, 10)))
    os.replace(tmp, f)
    rest = L.pending(files, pos)
    assert [int(o) for s in rest for o in s.last] == [7, 8, 9, 10]


def test_the_time_cut_advances_every_partition_together(tmp_path: Path) -> None:
    _segment(tmp_path / "__consumer_offsets-1", 0, range(0, 50), 10_000)  # ts 10000..10049
    _segment(tmp_path / "__consumer_offsets-2", 0, range(0, 50), 10_025)  # ts 10025..10074
    files = L.partition_files(str(tmp_path))
    pend = {p: L.pending(fs, L.START) for p, fs in files.items()}
    limit = 30 * len(_batch(10, 0))
    take = L.cut(pend, limit)
    assert take[1] > take[2] > 0
    # one cut time T for both partitions: every batch up to T, none after; within the byte limit,
    # and the next batch in time order would not fit
    t = max(int(pend[p][0].max_ts[take[p] - 1]) for p in (1, 2))
    for p in (1, 2):
        ts = pend[p][0].max_ts
        assert all(ts[: take[p]] <= t) and all(ts[take[p] :] > t)
    taken = sum(int((pend[p][0].end - pend[p][0].start)[: take[p]].sum()) for p in (1, 2))
    # the next timestamp's batches (over both partitions) would not fit
    nxt = min(int(pend[p][0].max_ts[take[p]]) for p in (1, 2))
    more = sum(int((s.end - s.start)[s.max_ts == nxt].sum()) for p in (1, 2) for s in pend[p])
    assert taken <= limit < taken + more
    assert L.cut(pend, 1) == {1: 1, 2: 0}  # at least one batch


def test_bytes_a_finished_segment_cannot_step_over_go_to_the_parser_a_last_segment_waits(tmp_path: Path) -> None:
    d = tmp_path / "__consumer_offsets-4"
    f = _segment(d, 0, range(0, 3), 0)
    with f.open("ab") as fh:
        fh.write(b"\xff" * 40)  # no header to trust
    files = L.partition_files(str(tmp_path))[4]
    spans = L.pending(files, L.START)
    assert [int(x) for x in spans[0].last] == [0, 1, 2]  # the last segment: the garbage waits
    _segment(d, 3, range(3, 5), 3)
    files = L.partition_files(str(tmp_path))[4]
    spans = L.pending(files, L.START)
    first = spans[0]
    assert int(first.attrs[-1]) == L.UNREADABLE and int(first.last[-1]) == 2  # up to the next base
    assert int(first.end[-1]) == f.stat().st_size
    pos, _ = _take_all(files, L.START)
    assert pos[0] == 5
    ranges = L.ranges_between(files, L.START, pos)
    assert [(Path(r.path).name, r.end) for r in ranges] == [
        (f.name, f.stat().st_size),
        ("00000000000000000003.log", (d / "00000000000000000003.log").stat().st_size),
    ]
