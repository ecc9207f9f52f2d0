"""The driver JVM's class-data-sharing archive cache (pipelines.runtime.jvm_archive): no JVM started here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.runtime import jvm_archive
from pipelines.runtime.jvm_archive import JvmArchive, archive_key


@pytest.fixture
def spark_home(tmp_path: Path) -> Path:
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    (home / "jars" / "spark-core.jar").write_bytes(b"x" * 10)
    return home


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("OFFSETLAKE_JVM_ARCHIVE", raising=False)
    return tmp_path / "cache" / "offsetlake" / "jvm"


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_the_key_changes_with_the_jars_the_java_and_the_driver_memory(spark_home: Path) -> None:
    java = sys.executable  # any existing file stands in for the binary
    base = archive_key(java, "openjdk 17", str(spark_home), {"spark.driver.memory": "3g"})
    assert base == archive_key(java, "openjdk 17", str(spark_home), {"spark.driver.memory": "3g"})
    assert base != archive_key(java, "openjdk 21", str(spark_home), {"spark.driver.memory": "3g"})
    assert base != archive_key(java, "openjdk 17", str(spark_home), {"spark.driver.memory": "4g"})
    (spark_home / "jars" / "delta.jar").write_bytes(b"y")
    assert base != archive_key(java, "openjdk 17", str(spark_home), {"spark.driver.memory": "3g"})


def test_a_first_start_asks_its_jvm_to_write_the_archive_and_the_next_start_maps_it(
    spark_home: Path, cache: Path
) -> None:
    first = JvmArchive(sys.executable, "openjdk 17", str(spark_home), {})
    assert first.part is not None and first.options[0] == f"-XX:ArchiveClassesAtExit={first.part}"

    class _Proc:
        pid = _dead_pid()  # the JVM has exited since

    class _Gateway:
        proc = _Proc()

    class _Context:
        _gateway = _Gateway()

    class _Spark:
        sparkContext = _Context()

    first.started(_Spark())
    first.part.write_bytes(b"archive")  # what the JVM writes when it exits
    second = JvmArchive(sys.executable, "openjdk 17", str(spark_home), {})
    final = cache / f"{archive_key(sys.executable, 'openjdk 17', str(spark_home), {})}.jsa"
    assert final.read_bytes() == b"archive"
    assert second.part is None and second.options[0] == f"-XX:SharedArchiveFile={final}"
    assert not list(cache.glob("*.part*"))


def test_a_part_whose_jvm_still_runs_is_left_alone_and_not_written_twice(spark_home: Path, cache: Path) -> None:
    first = JvmArchive(sys.executable, "openjdk 17", str(spark_home), {})
    assert first.part is not None
    Path(str(first.part) + ".pid").write_text(str(os.getpid()))  # alive
    first.part.write_bytes(b"half")
    second = JvmArchive(sys.executable, "openjdk 17", str(spark_home), {})
    assert second.options == [] and second.part is None
    assert first.part.exists() and not list(cache.glob("*.jsa"))


def test_a_part_never_written_by_a_dead_jvm_is_cleared_and_a_new_one_asked_for(spark_home: Path, cache: Path) -> None:
    first = JvmArchive(sys.executable, "openjdk 17", str(spark_home), {})
    assert first.part is not None
    Path(str(first.part) + ".pid").write_text(str(_dead_pid()))  # died before writing
    second = JvmArchive(sys.executable, "openjdk 17", str(spark_home), {})
    assert second.part is not None and second.part != first.part
    assert not list(cache.glob("*.jsa"))
    assert not Path(str(first.part) + ".pid").exists()


def test_old_archives_are_pruned_to_the_newest_few(spark_home: Path, cache: Path) -> None:
    cache.mkdir(parents=True)
    for i in range(jvm_archive.KEEP + 3):
        p = cache / f"old{i}.jsa"
        p.write_bytes(b"a")
        os.utime(p, (1_000_000 + i, 1_000_000 + i))
    JvmArchive(sys.executable, "openjdk 17", str(spark_home), {})
    left = sorted(p.name for p in cache.glob("*.jsa"))
    assert left == sorted(f"old{i}.jsa" for i in range(3, jvm_archive.KEEP + 3))


def test_the_archive_is_off_when_asked_or_when_the_cache_cannot_be_written(
    spark_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OFFSETLAKE_JVM_ARCHIVE", "0")
    assert JvmArchive(sys.executable, "openjdk 17", str(spark_home), {}).options == []
    monkeypatch.delenv("OFFSETLAKE_JVM_ARCHIVE")
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    archive = JvmArchive(sys.executable, "openjdk 17", str(spark_home), {})
    assert archive.options == [] and archive.part is None


def test_a_finished_part_of_another_checkout_becomes_its_archive_and_counts_for_pruning(
    spark_home: Path, cache: Path
) -> None:
    cache.mkdir(parents=True)
    other = cache / "otherkey.jsa.abc.part"
    other.write_bytes(b"other")
    Path(str(other) + ".pid").write_text(str(_dead_pid()))
    stray = cache / "gonekey.jsa.def.part"  # its pid file is gone: nobody will ever finish it
    stray.write_bytes(b"stray")
    JvmArchive(sys.executable, "openjdk 17", str(spark_home), {})
    assert (cache / "otherkey.jsa").read_bytes() == b"other"
    assert not stray.exists() and not list(cache.glob("otherkey.jsa.*"))
