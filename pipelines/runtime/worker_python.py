"""The interpreter Spark starts its Python processes with on a local master: the installed pyspark, not Spark's zip.

Rules:
- Spark puts its own ``python/lib/pyspark.zip`` first on the ``PYTHONPATH`` of every Python
  process it starts: the UDF workers, and the processes a Python data source or streaming source
  runs in, which Spark starts with ``pyspark.daemon`` or
  ``pyspark.sql.streaming.python_streaming_source_runner`` whatever
  ``spark.python.daemon.module`` says. Modules imported from a zip are compiled from source in
  every process (zipimport keeps no bytecode): ~0.3 s of CPU per process, ~1.3 s per fresh Kafka
  stream command (its source runner and three kinds of planner process), measured here.
- When the installed ``pyspark`` package is the zip's version (pip's pyspark always is: the
  zip ships inside it), Spark starts those processes through a launcher: a shell script that
  removes exactly that zip from ``PYTHONPATH`` and execs this interpreter, so they import the
  installed package's cached bytecode. Every other ``PYTHONPATH`` entry stays, in its order.
- Used only on a local master, and only when ``PYSPARK_PYTHON`` is unset or names this
  interpreter (``same_interpreter``: ``bin/python`` and ``bin/python3`` of one virtualenv are
  one); the launcher execs that path. Another interpreter is left alone.
- The launcher is a cache file, ``<cache>/offsetlake/python/<key>.sh`` (``$XDG_CACHE_HOME`` or
  ``~/.cache``; the key hashes the interpreter and the zip), written once under a temporary name
  and renamed; a launcher whose interpreter or zip no longer exists is removed when another is
  written. A cache directory that cannot be written, a zip of another version, or
  ``OFFSETLAKE_WORKER_LAUNCHER=0`` leave the interpreter as it is: the zip is compiled in
  every process again, slower and with the same results.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import sys
import uuid
import zipfile
from pathlib import Path

OFF_ENV = "OFFSETLAKE_WORKER_LAUNCHER"


def _version_in(text: str) -> str | None:
    m = re.search(r"""__version__\s*(?::\s*str\s*)?=\s*["']([^"']+)["']""", text)
    return m.group(1) if m else None


def spark_zip(spark_home: str) -> Path | None:
    """Spark's ``pyspark.zip`` when it holds the installed pyspark's version, else ``None``."""
    import pyspark

    zip_path = Path(spark_home) / "python" / "lib" / "pyspark.zip"
    try:
        with zipfile.ZipFile(zip_path) as z:
            zipped = _version_in(z.read("pyspark/version.py").decode())
    except (OSError, KeyError, zipfile.BadZipFile):
        return None
    return zip_path if zipped is not None and zipped == pyspark.__version__ else None


def launcher_text(python: str, zip_path: str) -> str:
    """The launcher script: ``PYTHONPATH`` without ``zip_path``, then exec ``python``."""
    return (
        "#!/bin/sh\n"
        "# offsetlake (pipelines/runtime/worker_python.py): Spark's Python processes import the installed\n"
        "# pyspark's bytecode instead of compiling Spark's zip of the same version in every process\n"
        "set -f  # the entries are split on ':' only, never expanded as patterns\n"
        f"zip={shlex.quote(zip_path)}\n"
        'rest=""\n'
        "IFS=:\n"
        "for entry in $PYTHONPATH; do\n"
        '  [ "$entry" = "$zip" ] || rest="${rest:+$rest:}$entry"\n'
        "done\n"
        "unset IFS\n"
        'PYTHONPATH="$rest"\n'
        "export PYTHONPATH\n"
        f'exec {shlex.quote(python)} "$@"\n'
    )


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "offsetlake" / "python"


def same_interpreter(python: str) -> str | None:
    """``python`` (a path or a name on ``PATH``) as an absolute path when it is this
    interpreter: the same file in the same directory (``bin/python`` and ``bin/python3`` of one
    virtualenv), else ``None``."""
    import shutil

    found = shutil.which(python)
    if found is None:
        return None
    found = os.path.abspath(found)
    here = os.path.abspath(sys.executable)
    try:
        same = os.path.dirname(found) == os.path.dirname(here) and os.path.samefile(found, here)
    except OSError:
        return None
    return found if same else None


def worker_python(spark_home: str, python: str) -> str | None:
    """The launcher's path for ``python`` (this interpreter, ``same_interpreter``) and the
    Spark install (written if missing), or ``None`` when Spark should start ``python`` as it is
    (module rules)."""
    if os.environ.get(OFF_ENV) == "0" or os.name != "posix":
        return None
    zip_path = spark_zip(spark_home)
    if zip_path is None:
        return None
    text = launcher_text(python, str(zip_path))
    key = hashlib.sha256(text.encode()).hexdigest()[:16]
    target = cache_dir() / f"{key}.sh"
    if target.is_file() and os.access(target, os.X_OK):
        return str(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name(f"{target.name}.{uuid.uuid4().hex}.part")
        part.write_text(text, encoding="utf-8")
        part.chmod(0o755)
        part.replace(target)
    except OSError:
        return None
    _prune(target.parent)
    return str(target)


def _prune(directory: Path) -> None:
    """Remove the launchers whose interpreter or zip is gone (a deleted virtualenv or Spark
    install): written once per interpreter, they would otherwise pile up."""
    for launcher in directory.glob("*.sh"):
        try:
            lines = launcher.read_text(encoding="utf-8").splitlines()
            zip_path = next(shlex.split(x[4:])[0] for x in lines if x.startswith("zip="))
            python = next(shlex.split(x)[1] for x in lines if x.startswith("exec "))
            if not (os.path.exists(python) and os.path.exists(zip_path)):
                launcher.unlink()
        except (OSError, StopIteration, ValueError, IndexError):
            continue
