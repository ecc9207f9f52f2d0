"""``offsetlake serve``: a small read-only HTTP face over the warehouse (stdlib server, threads).

Rules:
- ``GET /metrics``: ``pipelines.serve.metrics.render`` (Prometheus text format 0.0.4).
  ``GET /v3/kafka/<cluster>/consumer/<group>/status``: Burrow's consumer-status JSON (``error``,
  ``message``, ``status`` with ``cluster``, ``group``, ``status``, ``complete``, ``partitions``
  (topic, partition, owner = client host, client_id, member_id of the current assignment, status, start/end commit of the window, current_lag), ``partition_count``,
  ``maxlag``, ``totallag``, and offsetlake's ``group_type``, with a ``message`` for a share group,
  whose positions live in ``__share_group_state``: no partitions, no lag; ``request``); an unknown cluster or group is 404 with
  ``error: true`` as Burrow answers. Burrow's discovery: ``GET /v3/kafka`` (the cluster list),
  ``GET /v3/kafka/<cluster>/consumer`` (its groups that exist), and ``.../consumer/<group>/lag``
  (the status with every partition). Each answer carries ``as_of_ms``, the one "now" its statuses
  were evaluated at (``pipelines.log_clock``). ``GET /healthz``: 200 with the as_of time and table versions.
  Anything else is 404; methods other than GET/HEAD are 405. Nothing is ever written.
- Connections are bounded (``max_connections``, at most a quarter of the process's open-file
  limit) and time out (``idle_timeout_s`` for each read: a request line, a header, the next
  request on a kept-alive connection). At the bound, a new connection evicts the connection
  that has waited longest without a request being answered on it (an idle or trickling
  client, one with nothing unread first; a request being answered is never cut); when every connection is mid-answer the new
  one is closed. If ``accept`` fails for want of file descriptors, the same eviction frees one,
  and with nothing to evict the loop pauses instead of spinning on the listening socket. So
  1,000 idle sockets cost at most ``max_connections`` threads and never stop ``/healthz``.
- An unexpected failure answers 500 with a generic message and an error id; the detail (the
  exception and its trace, which may name server paths) goes to the server's stderr under that
  id, never to the client.
- One ``Snapshot`` is cached: for ``ttl_s`` seconds it is served as is; after that the tables'
  Delta versions (``metrics.table_versions``) are read and the snapshot is recomputed only when
  one changed (tables change only when a job commits) or, with ``replay.now: wall``, when the
  wall clock entered a new ``ttl_s`` bucket (the now is the clock's: it must not freeze between
  commits). One thread recomputes; the others wait
  for it (no thundering herd).
"""

from __future__ import annotations

import contextlib
import errno
import json
import select
import socket
import sys
import threading
import time
import traceback
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from pipelines.analytics.burrow import group_status
from pipelines.serve import metrics

if TYPE_CHECKING:
    from pipelines.tableio import TableIO

CONTENT_TYPE_METRICS = "text/plain; version=0.0.4; charset=utf-8"
#: seconds a connection may wait for its next request line or header line (module rules)
IDLE_TIMEOUT_S = 10.0
#: connections served at once, at most (module rules)
MAX_CONNECTIONS = 256


class SnapshotCache:
    """The latest ``Snapshot`` and its exposition text, refreshed per the module rules."""

    def __init__(
        self, io: TableIO, *, cluster: str, ttl_s: float = 5.0, window_s: float = metrics.DEFAULT_WINDOW_S
    ) -> None:
        self.io = io
        self.cluster = cluster
        self.ttl_s = ttl_s
        self.window_s = window_s
        self._lock = threading.Lock()
        self._snap: metrics.Snapshot | None = None
        self._text = ""
        self._body = b""  # the text encoded once per snapshot, not per request
        self._checked = 0.0
        self._bucket: int | None = None  # the wall-clock bucket of the snapshot (``_wall_bucket``)
        self.computations = 0

    def body(self) -> bytes:
        """The exposition as UTF-8 bytes (``get``'s text, encoded once per snapshot)."""
        return self._current()[2]

    def get(self) -> tuple[metrics.Snapshot, str]:
        snap, text, _ = self._current()
        return snap, text

    def _wall_bucket(self) -> int | None:
        """With ``replay.now: wall`` (and no fixed ``replay.as_of_ms``) the wall-clock bucket of
        ``ttl_s`` seconds the snapshot's now belongs to: part of the cache key, so "now" moves with
        the clock between commits; None otherwise (now moves only with the tables)."""
        conf = self.io.conf
        if conf.replay.now != "wall" or conf.replay.as_of_ms is not None:
            return None
        return int(time.time() // max(self.ttl_s, 0.001))

    def _current(self) -> tuple[metrics.Snapshot, str, bytes]:
        with self._lock:
            now = time.monotonic()
            if self._snap is None or now - self._checked >= self.ttl_s:
                bucket = self._wall_bucket()
                if self._snap is None or (metrics.table_versions(self.io), bucket) != (
                    self._snap.versions,
                    self._bucket,
                ):
                    snap = metrics.collect(self.io, window_s=self.window_s)
                    text = metrics.render(snap, self.cluster)
                    self._snap, self._text, self._body, self._bucket = snap, text, text.encode(), bucket
                    self.computations += 1
                self._checked = time.monotonic()
            return self._snap, self._text, self._body


def burrow_status(snap: metrics.Snapshot, cluster: str, group: str) -> dict[str, Any] | None:
    """Burrow's ``status`` object of ``group`` (``None`` when the warehouse has no such group), plus
    its ``group_type`` and, for a group whose positions are not in ``__consumer_offsets`` (a share
    group: ``__share_group_state``), a ``message`` saying why it has no partitions and no lag."""
    row = next((g for g in snap.groups if g["group_id"] == group), None)
    if row is None:
        return None
    parts = []
    for p in snap.partitions:
        if p["group_id"] != group:
            continue
        parts.append(
            {
                "topic": p["topic"],
                "partition": p["partition"],
                "owner": (p.get("owner") or {}).get("client_host"),
                "client_id": (p.get("owner") or {}).get("client_id"),
                "member_id": (p.get("owner") or {}).get("member_id"),
                "status": p.get("status") or "UNKNOWN",
                "start": _commit(p.get("start")),
                "end": _commit(p.get("end")),
                "current_lag": p.get("lag"),
                "complete": min((p.get("window_commits") or 0) / metrics.BURROW_WINDOW, 1.0),
            }
        )
    lagged = [q for q in parts if q["current_lag"] is not None]
    maxlag = max(lagged, key=lambda q: q["current_lag"]) if lagged else None
    group_type = row.get("group_type") or "classic"
    kept_in = row.get("offsets_kept_in") or ("__share_group_state" if group_type == "share" else "__consumer_offsets")
    extra: dict[str, Any] = {"group_type": group_type}
    if kept_in != "__consumer_offsets":
        extra["message"] = (
            f"a {group_type} group keeps its positions in {kept_in}, not in __consumer_offsets (the only log "
            "offsetlake reads): it has no committed offsets here, so no partitions and no lag; status UNKNOWN"
        )
    return {
        "cluster": cluster,
        "group": group,
        "status": group_status(q["status"] for q in parts),
        "complete": (sum(q["complete"] for q in parts) / len(parts)) if parts else 0.0,
        "partitions": parts,
        "partition_count": len(parts),
        "maxlag": maxlag,
        "totallag": sum(q["current_lag"] for q in lagged) if lagged else None,  # unknown without samples
        **extra,
    }


def _commit(c: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if c is None else {"offset": c["offset"], "timestamp": c["timestamp"], "lag": c["lag"]}


class Handler(BaseHTTPRequestHandler):
    server: OffsetlakeServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.idle_timeout_s)  # every read on the socket (module rules)

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        with self.server.answering(self.connection):
            self._get()

    def _get(self) -> None:
        path = self.path.split("?", 1)[0]
        try:
            if path == "/metrics":
                return self._send(200, self.server.cache.body(), CONTENT_TYPE_METRICS)
            if path == "/healthz":
                snap, _ = self.server.cache.get()
                return self._json(
                    200,
                    {
                        "status": "ok",
                        "as_of_ms": snap.as_of_ms,
                        "tables": dict(zip(metrics.SOURCE_TABLES, snap.versions, strict=True)),
                    },
                )
            seg = [unquote(s) for s in path.strip("/").split("/")]
            if seg == ["v3", "kafka"]:
                return self._json(200, self._burrow("cluster list returned", clusters=[self.server.cache.cluster]))
            if len(seg) == 4 and seg[:2] == ["v3", "kafka"] and seg[3] == "consumer":
                return self._consumers(seg[2])
            if len(seg) == 6 and seg[:2] == ["v3", "kafka"] and seg[3] == "consumer" and seg[5] in ("status", "lag"):
                return self._status(seg[2], seg[4], seg[5])
            return self._json(404, {"error": True, "message": "not found"})
        except Exception:  # the client gets an id, the server's stderr the detail (module rules)
            error_id = uuid.uuid4().hex[:12]
            detail = traceback.format_exc()
            print(f"offsetlake serve: error {error_id} answering {path}:\n{detail}", file=sys.stderr, flush=True)
            return self._json(
                500, {"error": True, "message": f"internal error (id {error_id}: see the server's log)", "id": error_id}
            )

    def _burrow(self, message: str, *, error: bool = False, **body: Any) -> dict[str, Any]:
        """Burrow's envelope (``error``, ``message``, ``request``) around ``body``."""
        request = {"url": self.path, "host": self.server.server_address[0]}
        return {"error": error, "message": message, **body, "request": request}

    def _consumers(self, cluster: str) -> None:
        """Burrow's ``/v3/kafka/<cluster>/consumer``: the groups the warehouse knows."""
        if cluster != self.server.cache.cluster:
            return self._json(404, self._burrow("cluster not found", error=True))
        snap, _ = self.server.cache.get()
        groups = sorted(g["group_id"] for g in snap.groups if g.get("state") != "Dead")
        return self._json(200, self._burrow("consumer list returned", consumers=groups, as_of_ms=snap.as_of_ms))

    def _status(self, cluster: str, group: str, kind: str = "status") -> None:
        """``.../status`` (Burrow's evaluation) and ``.../lag`` (the same with every partition, as
        Burrow's lag endpoint returns it: ours always lists every partition)."""
        if cluster != self.server.cache.cluster:
            return self._json(404, self._burrow("cluster not found", error=True))
        snap, _ = self.server.cache.get()
        status = burrow_status(snap, cluster, group)
        if status is None:
            return self._json(404, self._burrow("consumer group not found", error=True))
        message = "consumer status returned" if kind == "status" else "consumer lag returned"
        return self._json(200, self._burrow(message, status=status, as_of_ms=snap.as_of_ms))

    def _json(self, code: int, body: dict[str, Any]) -> None:
        self._send(code, json.dumps(body).encode(), "application/json")

    def _send(self, code: int, body: bytes, ctype: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _refuse(self) -> None:
        self._json(405, {"error": True, "message": "read-only: GET only"})

    do_POST = do_PUT = do_DELETE = do_PATCH = _refuse


@dataclass
class _Conn:
    since: float  # accepted, or its last answer sent
    answering: bool = False


class OffsetlakeServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    # socketserver's default listen backlog is 5: a burst of scrapers/clients past it has its SYNs
    # dropped and retried by TCP after 1 s, 3 s (measured: p95 2.2 s for 100 concurrent GETs)
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        cache: SnapshotCache,
        *,
        verbose: bool = False,
        max_connections: int = MAX_CONNECTIONS,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
    ) -> None:
        super().__init__(address, Handler)
        self.cache = cache
        self.verbose = verbose
        self.max_connections = connection_limit(max_connections)
        self.idle_timeout_s = idle_timeout_s
        self._conns: dict[socket.socket, _Conn] = {}
        self._conns_lock = threading.Lock()
        self.evicted = 0

    # ---- the bound (module rules) ------------------------------------------------------------
    def get_request(self) -> tuple[Any, Any]:
        try:
            return super().get_request()
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                with self._conns_lock:
                    freed = self._evict_one()
                time.sleep(0.01 if freed else 0.1)  # let the evicted thread close; never spin
            raise

    def verify_request(self, request: Any, client_address: Any) -> bool:
        with self._conns_lock:
            while len(self._conns) >= self.max_connections:
                if not self._evict_one():
                    return False  # every connection is mid-answer: this one is closed
            self._conns[request] = _Conn(time.monotonic())
        return True

    def shutdown_request(self, request: Any) -> None:
        with self._conns_lock:
            self._conns.pop(request, None)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client gone, timed out or evicted mid-read is no error worth a trace on stderr."""
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)

    def _evict_one(self) -> bool:
        """Cut the connection waiting longest without an answer in progress (lock held)."""
        idle = sorted((c.since, id(s), s) for s, c in self._conns.items() if not c.answering)
        if not idle:
            return False
        # a connection whose request already arrived is about to be answered: cut a silent one
        sock = next((s for _, _, s in idle if not _readable(s)), idle[0][2])
        del self._conns[sock]
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)  # its thread's read returns; the thread closes it
        self.evicted += 1
        return True

    def answering(self, sock: Any) -> Any:
        """A context marking ``sock`` as answering a request (not evictable)."""
        return _Answering(self, sock)

    def _mark(self, sock: Any, answering: bool) -> None:
        with self._conns_lock:
            conn = self._conns.get(sock)
            if conn is not None:
                conn.answering = answering
                conn.since = time.monotonic()


class _Answering:
    def __init__(self, server: OffsetlakeServer, sock: Any) -> None:
        self.server, self.sock = server, sock

    def __enter__(self) -> None:
        self.server._mark(self.sock, True)

    def __exit__(self, *exc: object) -> None:
        self.server._mark(self.sock, False)


def _readable(sock: Any) -> bool:
    """True when bytes (or the peer's close) wait on ``sock``; never blocks."""
    poller = select.poll()
    try:
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return False


def connection_limit(wanted: int) -> int:
    """``wanted``, at most a quarter of the open-file limit (module rules), at least 4."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    cap = wanted if soft == resource.RLIM_INFINITY else min(wanted, soft // 4)
    return max(4, cap)


def make_server(
    io: TableIO,
    *,
    host: str = "127.0.0.1",
    port: int = 9308,
    cluster: str = "local",
    ttl_s: float = 5.0,
    window_s: float = metrics.DEFAULT_WINDOW_S,
    verbose: bool = False,
    max_connections: int = MAX_CONNECTIONS,
    idle_timeout_s: float = IDLE_TIMEOUT_S,
) -> OffsetlakeServer:
    """A bound server (port 0: a free one, ``server.server_address``); call ``serve_forever``."""
    cache = SnapshotCache(io, cluster=cluster, ttl_s=ttl_s, window_s=window_s)
    return OffsetlakeServer(
        (host, port), cache, verbose=verbose, max_connections=max_connections, idle_timeout_s=idle_timeout_s
    )
