"""The warehouse's own layout: every name offsetlake keeps under ``<paths.warehouse>`` beside the
tables, declared once (ARCHITECTURE.md, "The pipelines' rooms").

Rules:
- Tables live at ``<warehouse>/<table name>``; what is not a table starts with ``_`` so that no
  table name can collide with it and walks over the tables skip it.
- Nothing else spells these names: the lock, the stages, the routed writes and the run records
  import them from here.
"""

from __future__ import annotations

#: the one writer's lock (``pipelines.warehouse.lock``), held for a job's whole run
LOCK_FILE = "_offsetlake.lock"
#: which job (batch or stream) writes this warehouse: the other one is refused
JOB_FILE = "_offsetlake.job"
#: routed writes' staged rows, ``_staging/<run id>/<table>`` (a dead run's are removed; its holder
#: is recorded in ``_staging/<run id>/_holder.json``, ``pipelines.warehouse.lock.HOLDER_FILE``)
STAGING_DIR = "_staging"
#: the decode stage's replay input, ``_replay_input/v<raw version>-<run>/`` with a manifest
REPLAY_INPUT_DIR = "_replay_input"
#: the groups a batch replay keeps for the next incremental run, ``_replay_state/v<raw version>-<run>/``
REPLAY_STATE_DIR = "_replay_state"
#: the batch job's run records, ``_runs/batch/<UTC time>-<run id>.json``
BATCH_RUNS_DIR = "_runs/batch"
