"""The stream wing: the streaming replay, raw records → decode → per-group state → Delta tables.

Rules:
- One module per concern: ``settings`` (the ``stream`` config, validated once), ``source`` (the
  landing directory or Kafka; the packed landing source), ``packing`` (the replay input packed
  one row per state bucket and pack of a task's input), ``state`` (the ``applyInPandasWithState``
  function, keyed by state bucket, and its state layout), ``sinks`` (``foreachBatch`` MERGEs and appends), ``progress``
  (``stream_progress``, late data); the queries' lifecycle and the entry point are the job's,
  ``pipelines.jobs.stream``.
- The stream replays with the batch job's code (decoder, replay-input projection, bulk replay,
  gold rows), never a re-implementation: after ``--available-now`` its gold tables equal the
  batch job's with ``replay.as_of_ms`` = the final watermark.
- Registered names never change (existing checkpoints must resume): the query names, the
  ``offsetlake_landing_packed`` data source, ``STATE_DDL`` / ``STATE_LAYOUT_VERSION`` /
  ``STATE_BUCKETS`` (a checkpoint of another state layout is refused: ``state.check_state_layout``).
- Importing this package imports nothing else.
"""
