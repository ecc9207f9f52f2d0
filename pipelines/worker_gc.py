"""The Python workers' garbage collector and our task code.

Rules:
- A reused PySpark worker runs ``gc.collect()`` after every task (``pyspark/daemon.py``): a full
  collection walks every object the worker holds (imported modules, caches, the replay's
  tables), ~70 ms per task once the heap is large. Our task code calls
  ``freeze_worker_heap()`` when a task starts: what already lives moves to the permanent
  generation, so that collection only walks what the task itself allocated. Young garbage is
  still collected as the task runs; nothing frozen is ever freed by the cycle collector (these
  are long-lived objects: modules, caches).
"""


def freeze_worker_heap() -> None:
    """Move every object the worker holds now to the GC's permanent generation (``gc.freeze``)."""
    import gc

    gc.freeze()
