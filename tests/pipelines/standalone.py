"""A real Spark standalone cluster on 127.0.0.1 for the ``cluster`` tests, and what a user ships to it.

- ``StandaloneCluster``: a master and N workers (``spark-class ...deploy.master.Master`` /
  ``...deploy.worker.Worker`` of the installed pyspark), each its own JVM; their environment has
  no ``PYTHONPATH`` and their working directories are under the test's folder, so an executor's
  Python finds only what the application ships. Bounded waits; a failure is one line with the
  log's tail; ``stop`` ends every process it started (by pid).
- ``executor_python``: a venv with the project's runtime dependencies but not the project
  (pyspark itself left out: Spark puts its own ``pyspark.zip`` and py4j on every executor's
  ``PYTHONPATH``, as on any cluster), built once per machine under
  ``~/.cache/offsetlake/executor-env/<digest of the dependency list>``.
- ``project_zip``: the project's packages as one zip for ``--py-files`` (what a user ships, made
  with the README's command).
- ``skip_or_fail``: outside CI a missing Java or Maven is one skip line; in CI (``tests.ci.in_ci``) it fails.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import NoReturn

import pytest

from tests.ci import in_ci

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("coordinator_core", "pipelines", "schemas")


def skip_or_fail(reason: str) -> NoReturn:
    if in_ci():
        pytest.fail(f"CI must run the cluster tests: {reason}")
    pytest.skip(reason)


def spark_home() -> Path:
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(t.strip() for t in text[-lines:])


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of the cluster's daemons: no PYTHONPATH, no virtualenv, loopback only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYSPARK", "VIRTUAL_ENV", "SPARK_"))}
    env.update(SPARK_LOCAL_IP="127.0.0.1", SPARK_HOME=str(spark_home()), **extra)
    return env


class StandaloneCluster:
    """A master and ``workers`` workers (``cores`` each) on 127.0.0.1 (module docstring)."""

    def __init__(self, root: Path, *, workers: int = 2, cores: int = 1, memory: str = "1200m") -> None:
        self.root = root
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.workers, self.cores, self.memory = workers, cores, memory
        self.procs: list[tuple[subprocess.Popen[bytes], Path]] = []

    def _start(self, name: str, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
        log = self.root / f"{name}.log"
        work = self.root / name
        work.mkdir(parents=True, exist_ok=True)
        cmd = [str(spark_home() / "bin" / "spark-class"), *args]
        env = clean_env(SPARK_DAEMON_MEMORY="256m", SPARK_WORKER_DIR=str(work))
        with log.open("wb") as fh:
            proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append((proc, log))
        return proc, log

    def _wait_for(self, log: Path, proc: subprocess.Popen[bytes], pattern: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{log.stem} exited with {proc.returncode}: {_tail(log)}")
            if log.exists() and re.search(pattern, log.read_text(errors="replace")):
                return
            time.sleep(0.5)
        raise RuntimeError(f"{log.stem} not ready after {timeout_s:.0f} s: {_tail(log)}")

    def start(self, timeout_s: float = 180) -> StandaloneCluster:
        try:
            master, mlog = self._start(
                "master",
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--webui-port",
                str(free_port()),
            )
            self._wait_for(mlog, master, r"I have been elected leader|Starting Spark master", timeout_s)
            for i in range(self.workers):
                worker, wlog = self._start(
                    f"worker-{i}",
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    str(self.cores),
                    "--memory",
                    self.memory,
                    "--webui-port",
                    str(free_port()),
                    self.url,
                )
                self._wait_for(wlog, worker, r"Successfully registered with master", timeout_s)
        except Exception:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for proc, _log in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc, _log in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        self.procs.clear()

    def executor_logs(self) -> list[Path]:
        """Every executor's stderr the workers kept (``<worker>/app-*/<id>/stderr``)."""
        return sorted(self.root.glob("worker-*/app-*/*/stderr"))


def runtime_dependencies() -> list[str]:
    """The project's runtime dependencies (pyproject), pyspark left out (module docstring)."""
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    return sorted(d for d in deps if not re.match(r"pyspark\b", d))


def executor_python(timeout_s: float = 900) -> Path:
    """The executors' interpreter: a venv with the runtime dependencies and no offsetlake, built
    once per machine (a lock keeps two test runs from building it at once; a half-built one is
    built again: ``COMPLETE`` is written last)."""
    import fcntl

    deps = runtime_dependencies()
    digest = hashlib.sha256(f"{sys.version_info[:2]}\n{chr(10).join(deps)}".encode()).hexdigest()[:12]
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "offsetlake" / "executor-env"
    env_dir = base / digest
    python = env_dir / "bin" / "python"
    base.mkdir(parents=True, exist_ok=True)
    with (base / f"{digest}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (env_dir / "COMPLETE").is_file():
            return python
        shutil.rmtree(env_dir, ignore_errors=True)
        interpreter = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([interpreter, "-m", "venv", str(env_dir)], check=True, capture_output=True, timeout=300)
        done = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", *deps], capture_output=True, text=True, timeout=timeout_s
        )
        if done.returncode != 0:
            raise RuntimeError(f"pip could not build the executor env: {(done.stderr or done.stdout).strip()[-300:]}")
        (env_dir / "COMPLETE").write_text("\n".join(deps) + "\n")
    return python


def project_zip(out: Path) -> Path:
    """The project's packages as one zip for ``--py-files``, made with the README's command
    (``python -m zipfile -c offsetlake.zip coordinator_core pipelines schemas``)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "zipfile", "-c", str(out), *PACKAGES], cwd=REPO, check=True, timeout=300)
    return out
