"""``offsetlake serve`` under a slow-client flood and on a failure (issue 37, items 6 and 14): with
its open-file limit lowered to 256, 400 idle sockets neither stop ``/healthz`` (answered within
2 s) nor make it spin; idle connections time out; a failure answers 500 with an id and no server
path, the detail going to the server's stderr under that id."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipelines.config import Config, load_config

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
FD_LIMIT = 256
IDLE_SOCKETS = 400


@pytest.fixture(scope="module")
def wh(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Config:
    from pipelines.inputs.raw_files import write_raw_records
    from pipelines.inputs.sample import sample_records
    from pipelines.jobs.batch import run_batch

    root = tmp_path_factory.mktemp("serveflood")
    cfg = load_config(overrides={"paths.root": str(root)})
    write_raw_records(sample_records(3, seed=9), cfg.paths.landing)
    run_batch(cfg, spark)
    return cfg


class Server:
    def __init__(self, proc: subprocess.Popen[str], port: int, err: Path) -> None:
        self.proc, self.port, self.err = proc, port, err

    def get(self, path: str, timeout: float = 2.0) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def _serve(root: str, tmp_path: Path, *extra: str) -> Iterator[Server]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))

    err = tmp_path / "serve.err"
    env = dict(os.environ, PYTHONPATH=str(REPO), JAVA_HOME="/nonexistent")
    with open(err, "w") as err_fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pipelines.cli", "serve", "--set", f"paths.root={root}", "--port", "0", *extra],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err_fh,
            text=True,
            preexec_fn=limit,
        )
    try:
        deadline = time.monotonic() + 120
        port = None
        while port is None and time.monotonic() < deadline and proc.poll() is None:
            for line in err.read_text().splitlines():
                if line.startswith("offsetlake serve: http://127.0.0.1:"):
                    port = int(line.split(":")[3].split("/")[0])
            time.sleep(0.1)
        assert port is not None, err.read_text()
        yield Server(proc, port, err)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _open_idle(port: int, n: int) -> list[socket.socket]:
    """``n`` connections that never send a byte (connect may not complete past the backlog)."""
    out = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            s.connect(("127.0.0.1", port))
        out.append(s)
    return out


def test_healthz_answers_within_2s_under_400_idle_sockets_at_a_256_file_limit_and_the_server_does_not_spin(
    wh: Config, tmp_path: Path
) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert hard == resource.RLIM_INFINITY or hard >= IDLE_SOCKETS + 64, "the test process needs the fds"
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    with _serve(wh.paths.root, tmp_path) as server:
        assert server.get("/healthz", timeout=60)[0] == 200  # the snapshot computed once
        idle = _open_idle(server.port, IDLE_SOCKETS)
        try:
            time.sleep(1.0)  # the server has accepted what it will
            cpu0, t0 = server.cpu_s(), time.monotonic()
            for _ in range(3):
                start = time.monotonic()
                code, body = server.get("/healthz", timeout=2.0)
                assert code == 200 and json.loads(body)["status"] == "ok"
                assert time.monotonic() - start < 2.0
                time.sleep(0.5)
            time.sleep(1.0)
            cpu = (server.cpu_s() - cpu0) / (time.monotonic() - t0)
            assert cpu < 0.5, f"the server used {cpu:.0%} of a core with idle sockets open"
            assert server.proc.poll() is None
        finally:
            for s in idle:
                s.close()
        assert server.get("/metrics", timeout=10)[0] == 200


def test_an_idle_connection_is_closed_after_the_idle_timeout(wh: Config, tmp_path: Path) -> None:
    with _serve(wh.paths.root, tmp_path, "--idle-timeout", "1") as server:
        assert server.get("/healthz", timeout=60)[0] == 200
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            start = time.monotonic()
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # a header never finished
            assert s.recv(1024) == b""  # closed by the server, not by our 10 s timeout
            assert time.monotonic() - start < 5


def test_a_failure_answers_500_with_an_id_and_no_server_path_and_logs_the_detail(wh: Config, tmp_path: Path) -> None:
    root = tmp_path / "broken"
    shutil.copytree(wh.paths.root, root)
    data = sorted((root / "warehouse" / "offset_commits").glob("*.parquet"))
    assert data
    for f in data:
        f.unlink()  # the log still names them: reading the table fails with their paths
    with _serve(str(root), tmp_path) as server:
        code, body = server.get("/metrics", timeout=60)
        assert code == 500, body[:500]
        answer = json.loads(body)
        assert answer["error"] is True and answer["id"]
        assert str(root) not in body.decode() and str(tmp_path) not in body.decode()
        assert "/" not in answer["message"]
        time.sleep(0.5)
        log = server.err.read_text()
        assert answer["id"] in log and "offset_commits" in log  # the detail, server-side only
