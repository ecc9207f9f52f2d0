"""``jvm_deps`` without Maven or without Maven Central, and what the ``broker`` tests say then.

A fake ``mvn`` on ``PATH`` stands for a machine with no network: no test here reaches Maven Central.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.runtime import jvm_deps

REPO = Path(__file__).resolve().parents[2]
MAVEN_OFFLINE = """#!/bin/sh
echo call >> "{calls}"
{sleep}
echo "[ERROR] Failed to execute goal on project kafka-3.9: Could not resolve dependencies for project offsetlake.jvm:kafka-3.9:pom:1: Could not transfer artifact org.apache.kafka:kafka_2.13:pom:3.9.2 from/to central (https://repo.maven.apache.org/maven2): Unknown host repo.maven.apache.org -> [Help 1]"
echo "[ERROR] "
echo "[ERROR] To see the full stack trace of the errors, re-run Maven with the -e switch."
exit 1
"""


def _bin(tmp_path: Path, *, mvn: bool, sleep: str = "") -> Path:
    """A PATH folder with ``java`` (when the machine has one) and, when asked, an offline ``mvn``."""
    folder = tmp_path / "bin"
    folder.mkdir()
    java = subprocess.run(["sh", "-c", "command -v java"], capture_output=True, text=True, check=False).stdout.strip()
    if java:
        (folder / "java").symlink_to(java)
    if mvn:
        script = folder / "mvn"
        script.write_text(MAVEN_OFFLINE.format(calls=tmp_path / "mvn-calls", sleep=sleep))
        script.chmod(0o755)
    return folder


def _env(tmp_path: Path, path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "JAVA_HOME")}
    env.update(PATH=str(path), OFFSETLAKE_JVM_CACHE=str(tmp_path / "cache"), PYTHONPATH=str(REPO), JAVA_HOME="")
    env.update(extra)
    return env


def _fetch_cli(tmp_path: Path, path: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pipelines.runtime.jvm_deps", "fetch", "kafka-3.9"]
    return subprocess.run(cmd, capture_output=True, text=True, env=_env(tmp_path, path), timeout=120, check=False)


def test_no_mvn_on_path_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = _fetch_cli(tmp_path, _bin(tmp_path, mvn=False))
    assert done.returncode == 2
    assert done.stderr.splitlines() == ["jvm_deps: cannot fetch the kafka-3.9 jars: mvn (Apache Maven) is not on PATH"]
    assert done.stdout == ""


def test_maven_without_network_is_one_line_with_mavens_reason_and_nothing_cached(tmp_path: Path) -> None:
    done = _fetch_cli(tmp_path, _bin(tmp_path, mvn=True))
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("jvm_deps: mvn could not fetch the kafka-3.9 jars: Failed to execute goal")
    assert "Unknown host repo.maven.apache.org" in line
    deps = tmp_path / "cache" / "deps"
    assert list(deps.iterdir()) == []  # the half-made folder is gone: the next run fetches anew
    assert (tmp_path / "mvn-calls").read_text().count("call") == 1


def test_a_maven_that_hangs_is_cut_at_the_time_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _bin(tmp_path, mvn=True, sleep="exec /bin/sleep 30")
    for key, value in _env(tmp_path, folder, JAVA_HOME=str(tmp_path)).items():
        monkeypatch.setenv(key, value)
    with pytest.raises(jvm_deps.JvmDepsUnavailable, match=r"^fetching the kafka-3.9 jars with mvn took over 1 s$"):
        jvm_deps.fetch("kafka-3.9", timeout_s=1)


def _broker_tests(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    files = ["tests/broker/test_local_broker.py", "tests/broker/test_due_is_not_dead.py"]
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-m", "broker", *files]
    env = _env(tmp_path, _bin(tmp_path, mvn=True), **extra)
    return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env, timeout=300, check=False)


@pytest.mark.slow
def test_the_broker_tests_skip_with_one_line_outside_ci_and_run_maven_once(tmp_path: Path) -> None:
    done = _broker_tests(tmp_path)
    assert done.returncode == 0, done.stdout[-2000:]
    skipped = [ln for ln in done.stdout.splitlines() if ln.startswith("SKIPPED")]
    assert len(skipped) == 1, done.stdout[-2000:]
    assert skipped[0].startswith("SKIPPED [5] tests/broker/conftest.py:")
    assert "real Kafka broker unavailable: mvn could not fetch the kafka-3.9 jars" in skipped[0]
    assert "5 skipped" in done.stdout
    assert (tmp_path / "mvn-calls").read_text().count("call") == 1  # both bundles, one Maven run


@pytest.mark.slow
def test_in_ci_the_broker_tests_fail_instead(tmp_path: Path) -> None:
    done = _broker_tests(tmp_path, CI="true")
    assert done.returncode == 1, done.stdout[-2000:]
    assert "5 errors" in done.stdout and "skipped" not in done.stdout
