"""What both wings do to records, as Arrow functions (no tables, no Spark jobs).

- ``decode``: raw ``__consumer_offsets`` records -> the decoded union (every record decoded,
  unsupported or quarantined with its bytes and a reason).
- ``replay_input``: the decoded rows -> the replay input (one projection, one order, one packing),
  the same for the batch job's buckets and the stream's per-group packs.
- ``replay``: replay-input rows -> ``coordinator_core`` replay -> gold rows (``gold``).

The batch wing (``pipelines.batch``) and the stream wing (``pipelines.stream``) call these; they
never re-implement a rule of the core.
"""
