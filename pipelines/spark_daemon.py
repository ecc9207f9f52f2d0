"""Spark's Python worker daemon on the embedded path (``spark.python.daemon.module``).

Rules:
- Spark starts its Python workers with its own ``pyspark.zip`` first on ``PYTHONPATH``. Modules
  imported from a zip are compiled from source in every new process (zipimport keeps no
  bytecode): ~0.3 s of CPU per worker before its first task, measured here. When the installed
  ``pyspark`` package is the zip's version, this daemon moves the zip behind it, so the workers
  import the installed package's cached bytecode.
- It imports ``pyspark.worker`` before it forks (pure Python, starts no thread: measured; pandas,
  numpy and pyarrow are NOT imported here — they start threads at import, which a fork does not
  carry, as Spark's own daemon notes) and freezes the collector's view of that heap
  (``gc.freeze``), so every forked worker starts with it imported and walks none of it.
- Then it is Spark's daemon (``pyspark.daemon.manager``), unchanged.
- Set by ``pipelines.spark_session`` on local masters only; on a cluster Spark's daemon stays.
"""

from __future__ import annotations

import os
import re
import sys
import zipfile


def _version_in(text: str) -> str | None:
    m = re.search(r"""__version__\s*(?::\s*str\s*)?=\s*["']([^"']+)["']""", text)
    return m.group(1) if m else None


def _prefer_installed_pyspark() -> None:
    zips = [p for p in sys.path if os.path.basename(p) == "pyspark.zip"]
    if not zips:
        return
    rest = [p for p in sys.path if p not in zips]
    installed = next(
        (os.path.join(p, "pyspark") for p in rest if os.path.isfile(os.path.join(p, "pyspark", "version.py"))), None
    )
    if installed is None:
        return
    try:
        with zipfile.ZipFile(zips[0]) as z:
            zipped = _version_in(z.read("pyspark/version.py").decode())
        with open(os.path.join(installed, "version.py"), encoding="utf-8") as fh:
            local = _version_in(fh.read())
    except (OSError, KeyError, zipfile.BadZipFile):
        return
    if zipped is not None and zipped == local:
        sys.path[:] = rest + zips


def main() -> None:
    _prefer_installed_pyspark()
    import gc

    import pyspark.worker  # noqa: F401  (see the module rules)
    from pyspark.daemon import manager

    gc.freeze()
    manager()


if __name__ == "__main__":
    main()
