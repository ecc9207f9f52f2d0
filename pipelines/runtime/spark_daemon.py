"""Spark's Python worker daemon on the embedded path (``spark.python.daemon.module``).

Rules:
- It imports ``pyspark.worker`` before it forks (pure Python, starts no thread: measured; pandas,
  numpy and pyarrow are NOT imported here — they start threads at import, which a fork does not
  carry, as Spark's own daemon notes) and freezes the collector's view of that heap
  (``gc.freeze``), so every forked worker starts with it imported and walks none of it.
- Which ``pyspark`` it imports (the installed package's bytecode, not Spark's zip) is the
  interpreter launcher's business (``pipelines.runtime.worker_python``), as for every Python process
  Spark starts.
- Then it is Spark's daemon (``pyspark.daemon.manager``), unchanged.
- Set by ``pipelines.runtime.spark_session`` on local masters only; on a cluster Spark's daemon stays.
"""

from __future__ import annotations


def main() -> None:
    import gc

    import pyspark.worker  # noqa: F401  (see the module rules)
    from pyspark.daemon import manager

    gc.freeze()
    manager()


if __name__ == "__main__":
    main()
