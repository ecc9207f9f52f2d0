"""``offsetlake metrics`` and ``offsetlake serve``: the monitoring face (``pipelines.serve``).

Rules:
- Both read the warehouse through DuckDB without a JVM and never write to it.
- ``metrics`` prints the Prometheus text format, or writes it to ``--out`` by a temp name and a
  rename (node_exporter's textfile collector must never read half a file).
- ``serve`` answers until interrupted; ``--port 0`` picks a free port (printed on stderr).
- No warehouse (no ``group_state`` table) is a usage error: exit 2, one line.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from pipelines.config import add_conf_arguments, config_from_args
from pipelines.errors import UsageError


def register(subparsers: Any) -> None:
    m = subparsers.add_parser(
        "metrics",
        help="print the warehouse's consumer-group metrics in the Prometheus text format",
        description="Prometheus text format (textfile-collector style) computed from the Delta tables, no Spark.",
    )
    add_conf_arguments(m)
    _common(m)
    m.add_argument("--out", metavar="FILE", default=None, help="write to FILE atomically (default: stdout)")
    m.set_defaults(func=run_metrics)

    s = subparsers.add_parser(
        "serve",
        help="serve /metrics, Burrow-like /v3/kafka/<cluster>/consumer/<group>/status and /healthz",
        description="A read-only HTTP server over the warehouse's Delta tables (DuckDB, no Spark).",
    )
    add_conf_arguments(s)
    _common(s)
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s)")
    s.add_argument("--port", type=int, default=9308, help="port (default: %(default)s; 0 = a free one)")
    s.add_argument(
        "--cache-seconds",
        type=float,
        default=5.0,
        help="serve a computed snapshot this long before checking the tables' versions (default: %(default)s)",
    )
    s.add_argument(
        "--max-connections",
        type=int,
        default=256,
        help="connections served at once; past it the longest-idle one is closed (default: %(default)s, "
        "at most a quarter of the open-file limit)",
    )
    s.add_argument(
        "--idle-timeout",
        type=float,
        default=10.0,
        help="seconds a connection may wait for its next request or header line (default: %(default)s)",
    )
    s.add_argument("--verbose", "-v", action="store_true", help="log each request on stderr")
    s.set_defaults(func=run_serve)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--cluster",
        default="local",
        help="cluster name: the cluster_name label and the Burrow path segment (default: %(default)s)",
    )
    p.add_argument(
        "--window-seconds",
        type=float,
        default=3600.0,
        help="rebalance metrics count the rebalances that ended this long before as_of (default: %(default)s)",
    )


def _io(args: argparse.Namespace) -> Any:
    from pipelines.tableio import TableIO

    if args.window_seconds <= 0:
        raise UsageError("--window-seconds must be > 0")
    cfg = config_from_args(args)
    io = TableIO(cfg, None, engine="rust")  # metadata and Arrow reads only: no Spark
    if not io.exists("group_state"):
        raise UsageError(f"no group_state table under {cfg.paths.warehouse} (run: offsetlake run batch --conf ...)")
    return io


def run_metrics(args: argparse.Namespace) -> int:
    from pipelines.serve import metrics

    io = _io(args)
    text = metrics.render(metrics.collect(io, window_s=args.window_seconds), args.cluster)
    if args.out is None:
        sys.stdout.write(text)
        return 0
    tmp = f"{args.out}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, args.out)
    except OSError as exc:
        raise UsageError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    return 0


def run_serve(args: argparse.Namespace) -> int:
    from pipelines.serve.http import make_server

    if args.max_connections < 1 or args.idle_timeout <= 0:
        raise UsageError("--max-connections must be >= 1 and --idle-timeout > 0")
    io = _io(args)
    try:
        server = make_server(
            io,
            host=args.host,
            port=args.port,
            cluster=args.cluster,
            ttl_s=args.cache_seconds,
            window_s=args.window_seconds,
            verbose=args.verbose,
            max_connections=args.max_connections,
            idle_timeout_s=args.idle_timeout,
        )
    except OSError as exc:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    port = server.server_address[1]
    print(f"offsetlake serve: http://{args.host}:{port}/metrics (cluster {args.cluster})", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
