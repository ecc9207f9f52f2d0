"""The header walk (``coordinator_core.segments.headers``) agrees with the parser, batch by batch,
and stops where a log tail must: at a batch not all there yet, at a header it cannot trust."""

from __future__ import annotations

from coordinator_core import segments as S
from coordinator_core.segments.headers import walk_headers


def _rec(offset: int, ts: int) -> S.Record:
    return S.Record(offset, ts, b"k%d" % offset, b"v" * (offset % 7))


def _log() -> bytes:
    return b"".join(
        [
            S.encode_batch_v2([_rec(0, 10), _rec(1, 30), _rec(2, 20)], codec=S.CODEC_GZIP),
            S.encode_batch_v2([_rec(3, 40)], transactional=True, producer_id=7, producer_epoch=0),
            S.encode_control_batch(S.CONTROL_COMMIT, offset=4, timestamp_ms=50, producer_id=7, producer_epoch=0),
            S.encode_legacy([_rec(5, 60), _rec(6, 70)], magic=1, codec=S.CODEC_GZIP),
            S.encode_legacy([_rec(7, 80)], magic=0),
        ]
    )


def test_walked_headers_match_the_parsed_batches() -> None:
    data = _log()
    walk = walk_headers(data)
    parsed = list(S.iter_batches(data))
    assert walk.stop == "end" and walk.end == len(data)
    assert [(h.position, h.size, h.last_offset) for h in walk.headers] == [
        (b.position, b.size, b.last_offset) for b in parsed
    ]
    assert [h.records for h in walk.headers] == [3, 1, 1, -1, 1]  # a compressed legacy wrapper: inside
    assert [h.max_timestamp for h in walk.headers][:3] == [30, 40, 50]
    assert walk.headers[1].attributes & 0x10 and walk.headers[2].attributes & 0x20
    assert walk.headers[4].max_timestamp == -1  # v0 has no timestamp


def test_walk_stops_at_a_partial_batch_and_at_an_implausible_header() -> None:
    data = _log()
    whole = walk_headers(data)
    cut_at = whole.headers[2].position + 5
    partial = walk_headers(data[:cut_at])
    assert partial.stop == "partial" and partial.end == whole.headers[2].position
    assert len(partial.headers) == 2
    garbage = data[: whole.headers[1].position] + b"\x00" * 12 + b"\x00\x00\x00\x00\x07" + b"\x00" * 40
    bad = walk_headers(garbage)
    assert bad.stop == "implausible" and bad.end == whole.headers[1].position
    resumed = walk_headers(data, whole.headers[3].position)
    assert [h.last_offset for h in resumed.headers] == [6, 7]
