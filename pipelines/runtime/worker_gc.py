"""What a task does first in a reused Python worker: keep Spark's per-task ``gc.collect()`` cheap.

Rules:
- A reused PySpark worker (``spark.python.worker.reuse``) runs ``gc.collect()`` after every task
  (``pyspark/daemon.py``). A full collection walks every tracked object in the process: the
  modules imported by earlier tasks (pyarrow, numpy, pandas, the replay) and whatever they keep,
  ~70 ms per task measured here, 48 times in a 10M-record batch job.
- Our tasks (the rust engine's writers, the stream's landing reader and stateful function) call
  ``freeze_worker_heap()`` first: everything alive at a task's start survived the
  previous task's collection, so it moves to the permanent generation (``gc.freeze``: O(1)) and
  later collections walk only what the task itself made. A frozen object that later becomes
  cyclic garbage stays until the worker exits (workers are per job and per Spark application).
"""

from __future__ import annotations

import gc


def freeze_worker_heap() -> None:
    """Move every object alive now out of the collector's reach (see the module rules)."""
    gc.freeze()
