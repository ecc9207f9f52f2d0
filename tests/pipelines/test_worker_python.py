"""The launcher Spark's Python processes start through on a local master (pipelines.runtime.worker_python)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pyspark
import pytest

from pipelines.runtime import worker_python
from pipelines.runtime.worker_python import launcher_text, spark_zip


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(worker_python.OFF_ENV, raising=False)
    return tmp_path / "cache" / "offsetlake" / "python"


def _spark_home(root: Path, version: str) -> Path:
    lib = root / "python" / "lib"
    lib.mkdir(parents=True)
    with zipfile.ZipFile(lib / "pyspark.zip", "w") as z:
        z.writestr("pyspark/version.py", f'__version__: str = "{version}"\n')
    return root


def _path_seen(launcher: Path, pythonpath: str) -> list[str]:
    out = subprocess.run(
        [
            str(launcher),
            "-c",
            "import json, os, sys; print(json.dumps(os.environ['PYTHONPATH'])); print(sys.argv[1:])",
            "a b",
        ],
        env={**os.environ, "PYTHONPATH": pythonpath},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out[1] == "['a b']"  # arguments pass through unchanged
    seen = json.loads(out[0])
    return seen.split(":") if seen else []


def test_the_launcher_removes_exactly_spark_s_zip_and_keeps_every_other_entry_in_order(tmp_path: Path) -> None:
    """The script itself, run by /bin/sh: entries with spaces, the zip alone, no zip at all."""
    launcher = tmp_path / "py.sh"
    launcher.write_text(launcher_text(sys.executable, "/spark home/python/lib/pyspark.zip"))
    launcher.chmod(0o755)
    path = "/spark home/python/lib/pyspark.zip:/spark home/python/lib/py4j.zip:/my project:/other/pyspark.zip"
    assert _path_seen(launcher, path) == ["/spark home/python/lib/py4j.zip", "/my project", "/other/pyspark.zip"]
    assert _path_seen(launcher, "/spark home/python/lib/pyspark.zip") == []
    assert _path_seen(launcher, "/a:/b") == ["/a", "/b"]
    assert _path_seen(launcher, "/*:/spark home/python/lib/pyspark.zip:/b?") == ["/*", "/b?"]  # no globbing


def test_a_zip_of_the_installed_version_gets_a_launcher_written_once(tmp_path: Path, cache: Path) -> None:
    home = _spark_home(tmp_path / "spark", pyspark.__version__)
    assert spark_zip(str(home)) == home / "python" / "lib" / "pyspark.zip"
    first = worker_python.worker_python(str(home), sys.executable)
    assert first is not None and Path(first).parent == cache
    assert os.access(first, os.X_OK)
    assert Path(first).read_text() == launcher_text(sys.executable, str(home / "python" / "lib" / "pyspark.zip"))
    stamp = Path(first).stat().st_mtime_ns
    assert worker_python.worker_python(str(home), sys.executable) == first
    assert Path(first).stat().st_mtime_ns == stamp
    assert [p.name for p in cache.iterdir()] == [Path(first).name]  # no part left behind


def test_launchers_of_interpreters_that_are_gone_are_removed(tmp_path: Path, cache: Path) -> None:
    cache.mkdir(parents=True)
    gone = cache / "0000000000000000.sh"
    gone.write_text(launcher_text(str(tmp_path / "deleted-venv" / "bin" / "python"), "/x/pyspark.zip"))
    unreadable = cache / "1111111111111111.sh"
    unreadable.write_text("#!/bin/sh\n")  # not ours to judge: kept
    home = _spark_home(tmp_path / "spark", pyspark.__version__)
    kept = worker_python.worker_python(str(home), sys.executable)
    assert kept is not None
    assert sorted(p.name for p in cache.iterdir()) == sorted([Path(kept).name, unreadable.name])


def test_no_launcher_for_another_version_a_missing_zip_an_unwritable_cache_or_when_switched_off(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert worker_python.worker_python(str(_spark_home(tmp_path / "old", "3.5.1")), sys.executable) is None
    assert worker_python.worker_python(str(tmp_path / "nothing"), sys.executable) is None
    home = _spark_home(tmp_path / "spark", pyspark.__version__)
    monkeypatch.setenv(worker_python.OFF_ENV, "0")
    assert worker_python.worker_python(str(home), sys.executable) is None
    monkeypatch.delenv(worker_python.OFF_ENV)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert worker_python.worker_python(str(home), sys.executable) is None


def test_this_interpreter_by_another_name_of_the_same_virtualenv_is_this_interpreter(tmp_path: Path) -> None:
    here = Path(sys.executable)
    alias = here.with_name("python3" if here.name != "python3" else "python")
    if alias.exists():
        assert worker_python.same_interpreter(str(alias)) == str(alias)
    assert worker_python.same_interpreter(sys.executable) == os.path.abspath(sys.executable)
    elsewhere = tmp_path / "python"
    elsewhere.symlink_to(os.path.realpath(sys.executable))  # the same binary, another environment
    assert worker_python.same_interpreter(str(elsewhere)) is None
    assert worker_python.same_interpreter(str(tmp_path / "missing")) is None


@pytest.mark.spark
def test_spark_s_python_processes_import_the_installed_pyspark(spark: object) -> None:
    """A UDF worker and a Python data source's reader import pyspark's installed bytecode, not
    Spark's zip (the session's ``PYSPARK_PYTHON`` is the launcher)."""
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import DataSource, DataSourceReader

    assert isinstance(spark, SparkSession)
    launcher = Path(os.environ["PYSPARK_PYTHON"])
    assert launcher.suffix == ".sh" and launcher.parent.parts[-2:] == ("offsetlake", "python")

    def where(batches):  # type: ignore[no-untyped-def]
        import pyarrow as pa
        import pyspark as worker_pyspark

        for _ in batches:
            yield pa.record_batch([pa.array([worker_pyspark.__file__])], names=["f"])

    files = {r.f for r in spark.range(2).mapInArrow(where, "f string").collect()}

    class _Reader(DataSourceReader):
        def read(self, partition):  # type: ignore[no-untyped-def]
            import pyspark as reader_pyspark

            yield (reader_pyspark.__file__,)

    class _Where(DataSource):
        @classmethod
        def name(cls) -> str:
            return "offsetlake_test_where"

        def schema(self) -> str:
            return "f string"

        def reader(self, schema):  # type: ignore[no-untyped-def]
            return _Reader()

    spark.dataSource.register(_Where)
    files |= {r.f for r in spark.read.format("offsetlake_test_where").load().collect()}
    assert files == {pyspark.__file__}
