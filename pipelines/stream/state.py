"""The stateful function of the streaming replay: one state bucket's packed records (or its
timer) → its groups' new states and their changed gold rows (``applyInPandasWithState``,
event-time timeouts).

Rules:
- Keyed by state bucket, not by group: ``bucket = pmod(xxhash64(group_id), STATE_BUCKETS)``,
  computed by the source's tasks (``pipelines.stream.packing``: the packs are per bucket).
  ``applyInPandasWithState`` pays ~0.6 ms per key and micro-batch for its pandas conversion
  (input, state, output), more than a group's replay on a log of many small groups; a bucket
  call replays its groups together (one commit-run reduction over all their rows, one Arrow
  conversion of their gold rows) and touches only the groups with new records or a due timer.
- State: one row per bucket = (``STATE_LAYOUT_VERSION``, the bucket's groups pickled as
  ``{group_id: (snapshot format, snapshot, timer ms or None)}`` (``STATE_DDL``;
  ``pipelines.records.carried.GroupEntry``: the core's plain values, or an earlier release's
  snapshot bytes; both read). ``STATE_DDL``, ``STATE_LAYOUT_VERSION`` and
  ``STATE_BUCKETS`` are registered (``check_state_layout``): a checkpoint resumes only with the
  layout it was created with; any other is refused with one line.
- Replay: ``pipelines.records.replay.replay_onto``, the batch job's replay of many groups (commit
  runs reduced with numpy for all the bucket's groups at once, each group's items applied onto
  its snapshot by the core's ``replay_runs``): exactly the core's ``replay``; duplicates and
  overlaps are skipped by the snapshot's last applied position; the groups whose timer is due
  and that have no rows are replayed to the watermark alone (``also``). Never a
  re-implementation.
- Time: ``withWatermark(log_timestamp, stream.watermark_delay_ms)`` and
  ``GroupStateTimeout.EventTimeTimeout`` only (processing-time timeouts never end under
  ``trigger(availableNow)``). A group is replayed when it has new records or when its timer is
  due (watermark > its timer), exactly when a per-group key would have been called; each
  replay states the present at ``as_of = watermark + delay`` (``log_clock.stream_as_of``: the
  newest record time of the batches before) and judges forecasts against the log up to the
  watermark (the evidence horizon); a group's timer is the earlier of its next judgment − 1 and
  its next change of the view − delay − 1 (``coordinator_core.next_times_of``; Spark fires when
  watermark > timer), the bucket's is its groups' earliest. Predicted events carry the computed
  due time, so the result does not depend on when the timer fired. Spark drops records older
  than the previous batch's watermark (the delay must cover the time skew between
  ``__consumer_offsets`` partitions in the input order); the progress counts such drops
  (``pipelines.stream.progress``).
- Equality with the batch job: after ``--available-now`` ends, the final watermark is the newest
  record time − delay, so the stream states the present as of the newest record, as the batch
  job does, and both judge forecasts against the same evidence horizon
  (``log_clock.evidence_horizon``): the gold tables are equal, current state included.
- Output: per call that changed something, its groups' changed gold rows as Arrow tables
  (``gold_tables``: the group's state row, its changed offsets, its events, and
  ``DELETED_OFFSETS``), IPC bytes pickled into one binary row (``OUTPUT_DDL``); the sink
  concatenates each table's parts (``output_tables``).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipelines.errors import UsageError
from pipelines.records import replay_input
from pipelines.records.carried import BucketReplayer, GroupEntry, decode_bucket, encode_bucket, gold_tables
from pipelines.runtime.worker_gc import freeze_worker_heap
from pipelines.uri import filesystem, table_to_ipc
from schemas.shapes import STREAM_OUTPUT, STREAM_STATE

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.state import GroupState

    from pipelines.stream.settings import StreamSettings


#: Layout version of the state rows (1: one row per group; 2: one row per state bucket).
STATE_LAYOUT_VERSION = 2
STATE_DDL = STREAM_STATE.ddl()
#: State buckets (the stateful operator's keys); a checkpoint keeps the number it started with.
#: The sources' tasks compute a group's bucket (``pipelines.stream.packing.BUCKETS_OPTION``).
STATE_BUCKETS = 256

#: The stateful function's output: one row per call that changed something: its groups'
#: changed gold rows as Arrow IPC bytes per table, pickled (``output_tables`` reads them).
OUTPUT_DDL = STREAM_OUTPUT.ddl()


@dataclass(frozen=True)
class StatefulReplayer(BucketReplayer):
    """The ``applyInPandasWithState`` function: one bucket's new records (or its timer) → state
    update + its groups' changed gold rows (``OUTPUT_DDL``), through the carried replay
    (``pipelines.records.carried.BucketReplayer``)."""

    def __call__(self, key: tuple[Any, ...], pdfs: Iterator[pd.DataFrame], state: GroupState) -> Iterator[pd.DataFrame]:
        freeze_worker_heap()  # the worker's collection after the task walks only what it allocated
        groups: dict[str, GroupEntry] = {}
        if state.exists:
            layout, raw = state.get
            if int(layout) != STATE_LAYOUT_VERSION:
                raise RuntimeError(f"state bucket {key[0]}: layout {layout}, expected {STATE_LAYOUT_VERSION}")
            groups = decode_bucket(bytes(raw))
        watermark = int(state.getCurrentWatermarkMs())
        table: pa.Table | None = None
        if not state.hasTimedOut:
            packs = [b for pdf in pdfs for b in pdf["records"]]
            if packs:
                table = replay_input.unpack_packs(packs)
        after, rows, timer = self.replay_bucket(groups, table, watermark)
        state.update((STATE_LAYOUT_VERSION, encode_bucket(after)))
        if timer is not None:
            state.setTimeoutTimestamp(timer)
        if rows:
            import pandas as pd

            blob = {name: table_to_ipc(t) for name, t in gold_tables(rows).items()}
            yield pd.DataFrame({"records": [pickle.dumps(blob, protocol=pickle.HIGHEST_PROTOCOL)]})


#: The file in the replay checkpoint naming its state layout (``check_state_layout``).
LAYOUT_FILE = "offsetlake_state_layout.json"


def check_state_layout(checkpoint: str) -> None:
    """Refuse (one line, exit 2) a replay checkpoint whose state another layout wrote; name a new
    one's layout (``LAYOUT_FILE``) before its query first starts.

    A checkpoint with progress but no layout file was written by layout 1 (one state row per
    group), which Spark cannot read as buckets."""
    import json

    from pyarrow import fs as pafs

    want = {"layout": STATE_LAYOUT_VERSION, "buckets": STATE_BUCKETS}
    fs, root = filesystem(checkpoint)
    marker, offsets = f"{root}/{LAYOUT_FILE}", f"{root}/offsets"
    found, progress = fs.get_file_info([marker, offsets])
    if found.type == pafs.FileType.File:
        with fs.open_input_stream(marker) as fh:
            have = json.loads(fh.read())
    elif progress.type != pafs.FileType.NotFound:
        have = {"layout": 1}
    else:
        fs.create_dir(root, recursive=True)
        with fs.open_output_stream(marker) as fh:
            fh.write(json.dumps(want).encode())
        return
    if have != want:

        def said(layout: dict[str, Any]) -> str:
            if layout.get("layout") == 1:
                return "layout 1 (one state row per group)"
            return f"layout {layout.get('layout')} ({layout.get('buckets')} state buckets)"

        raise UsageError(
            f"stream: the checkpoint {checkpoint} holds state {said(have)} and this version keeps {said(want)}; "
            "move the checkpoint aside to replay the log into a new one (the gold tables are rewritten "
            "by key), or run the version that wrote it"
        )


def stateful_replay(packed: DataFrame, settings: StreamSettings) -> DataFrame:
    """Packed replay input (``packed_replay_input``) → ``withWatermark`` +
    ``groupBy(state bucket).applyInPandasWithState`` → packed gold rows (``OUTPUT_DDL``)."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    fn = StatefulReplayer(settings.replay, settings.tables, settings.num_partitions, settings.watermark_delay_ms)
    return (
        packed.withWatermark("log_timestamp", f"{settings.watermark_delay_ms} milliseconds")
        .groupBy("state_bucket")
        .applyInPandasWithState(fn, OUTPUT_DDL, STATE_DDL, "update", GroupStateTimeout.EventTimeTimeout)
    )
