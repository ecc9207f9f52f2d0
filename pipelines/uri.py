"""Table and file locations as URIs: local paths, ``file://``, ``s3://``/``s3a://``, ``abfs(s)://``, ``gs://``.

A leaf at the root of ``pipelines`` (it imports nothing of ours but ``errors``): the config, the
warehouse's lock, ``tableio`` and the wings all spell locations with it (ARCHITECTURE.md, "The
pipelines' rooms").

Rules:
- A location is a string. It is a URI when it starts with ``<scheme>:/`` (``is_uri``); anything
  else is a local path. Nothing here builds a ``pathlib.Path`` from a URI: ``Path("s3a://b/t")``
  collapses the ``//`` and never exists locally.
- ``join`` appends path segments with ``/`` (no separator doubled, the scheme and authority
  kept): the one way the project makes ``<warehouse>/<table>`` and the paths under a table.
- Two readers of a location, two spellings. delta-rs (``object_store``) reads ``s3``, ``s3a``,
  ``abfs``, ``abfss``, ``az``, ``gs``, ``file`` and local paths as they are (``for_delta_rs``).
  pyarrow's ``FileSystem.from_uri`` knows ``s3``, ``gs``/``gcs``, ``abfs``/``abfss``, ``hdfs``,
  ``file``, but not Hadoop's ``s3a``/``s3n`` (they name the same S3 objects): ``for_pyarrow``
  rewrites those to ``s3``.
- A location is always the plain spelling (``/data/wh ré/t``, ``s3a://b/wh/t``), never
  percent-encoded. delta-rs answers data files percent-encoded (``/data/wh%20r%C3%A9/t/part-…``,
  with or without ``file://``): ``from_delta_rs`` turns them back into locations, and every
  file list taken from delta-rs passes through it (``deltars.data_files``), so Spark, DuckDB and
  pyarrow get paths that exist.
- delta-kernel decodes a local table path once more than it encodes it (delta-kernel-rs #918,
  delta-rs 1.6): a path holding ``%`` and two hex digits (``/data/wh%20x``) is written but never
  read back, whatever its spelling (plain, ``file://``, or through a symlink: delta-rs resolves
  it). ``for_delta_rs`` refuses such a path (``UsageError``, one line) before delta-rs writes
  anything; spaces, ``#``, ``?``, a lone ``%`` and non-ASCII names are fine.
- ``filesystem`` resolves a location to (pyarrow filesystem, path inside it); ``exists`` and
  ``is_delta_table`` ask that filesystem, so they answer for object stores too. Building an
  object-store filesystem may contact the store (S3 region lookup): only these two functions
  and ``filesystem`` do I/O; the rest is string handling.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pipelines.errors import UsageError

#: ``<scheme>:/``: a URI (Windows drive letters are one character and not supported as schemes)
_URI = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]+):/")
#: Hadoop's S3 connectors' schemes: the same objects as ``s3://`` for pyarrow
_S3_ALIASES = ("s3a", "s3n")
DELTA_LOG = "_delta_log"


def scheme(location: str) -> str | None:
    """The URI scheme in lower case (``"s3a"``), or ``None`` for a local path."""
    m = _URI.match(location)
    return m.group("scheme").lower() if m else None


def is_uri(location: str) -> bool:
    """True for ``<scheme>:/...`` (``file:///x``, ``s3a://b/x``), False for a local path."""
    return scheme(location) is not None


def is_local(location: str) -> bool:
    """A local path or a ``file:`` URI."""
    return scheme(location) in (None, "file")


def local_path(location: str) -> str:
    """The local path of a local location (``file:///x`` → ``/x``); a ValueError otherwise."""
    from urllib.parse import unquote, urlparse

    s = scheme(location)
    if s is None:
        return location
    if s != "file":
        raise ValueError(f"{location}: not a local path")
    return unquote(urlparse(location).path)


def join(base: str, *parts: str) -> str:
    """``base`` with ``parts`` appended, ``/``-separated: ``join("s3a://b/wh/", "t")`` →
    ``"s3a://b/wh/t"``; ``join("/data/wh", "_staging", "r1")`` → ``"/data/wh/_staging/r1"``."""
    stripped = base.rstrip("/")
    if not stripped:
        out = "/" if base else ""
    elif stripped.endswith(":"):  # "file:///" would lose its root: keep it
        out = base
    else:
        out = stripped
    for part in parts:
        piece = part.strip("/")
        if not piece:
            continue
        out = out + piece if out.endswith("/") else out + "/" + piece
    return out


def parent(location: str) -> str:
    """The location one segment up (``s3a://b/wh/t`` → ``s3a://b/wh``)."""
    head, _, _ = location.rstrip("/").rpartition("/")
    return head


#: ``%`` and two hex digits: what delta-kernel decodes in a local path (module rules)
_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")


def for_delta_rs(location: str) -> str:
    """The spelling delta-rs expects: ``object_store`` parses every scheme above as it is; a local
    path holding a percent-escape is refused (module rules)."""
    problem = delta_rs_problem(location)
    if problem:
        raise UsageError(f"{local_path(location)}: {problem}")
    return location


def delta_rs_problem(location: str) -> str | None:
    """Why delta-rs cannot keep tables at ``location`` (module rules), or ``None``."""
    m = _ESCAPE.search(local_path(location)) if is_local(location) else None
    if m is None:
        return None
    return (
        f"a path holding {m.group(0)!r} cannot be read back by delta-rs "
        "(it decodes the escape: delta-kernel-rs #918); rename the directory"
    )


def from_delta_rs(file_uri: str) -> str:
    """A data file's location from delta-rs' percent-encoded spelling (``file_uris()``): local
    files as plain paths, object-store files with their path decoded once."""
    from urllib.parse import unquote

    s = scheme(file_uri)
    if s is None:
        return unquote(file_uri)
    if s == "file":
        return local_path(file_uri)
    head, sep, rest = file_uri.partition("://")
    if not sep:
        return file_uri
    authority, slash, path = rest.partition("/")
    return f"{head}://{authority}{slash}{unquote(path)}"


def for_pyarrow(location: str) -> str:
    """The spelling ``pyarrow.fs.FileSystem.from_uri`` accepts: ``s3a://``/``s3n://`` → ``s3://``."""
    s = scheme(location)
    if s in _S3_ALIASES:
        return "s3" + location[len(s) :]
    return location


def filesystem(location: str) -> tuple[Any, str]:
    """(pyarrow filesystem, path inside it) of a location; a local path keeps its form."""
    from pyarrow import fs

    if is_uri(location):
        filesystem_, path = fs.FileSystem.from_uri(for_pyarrow(location))
        return filesystem_, path.rstrip("/") or path
    return fs.LocalFileSystem(), location.rstrip("/") or location


def write_arrow_file(location: str, table: Any) -> str:
    """``table`` as one Arrow IPC file at ``location`` (its directory made); returns ``location``."""
    import pyarrow as pa

    filesystem_, path = filesystem(location)
    filesystem_.create_dir(path.rsplit("/", 1)[0], recursive=True)
    with filesystem_.open_output_stream(path) as fh, pa.ipc.new_file(fh, table.schema) as writer:
        writer.write_table(table)
    return location


def read_arrow_file(location: str | None) -> Any:
    """The table of an Arrow IPC file written by ``write_arrow_file`` (None for None)."""
    import pyarrow as pa

    if location is None:
        return None
    filesystem_, path = filesystem(location)
    with filesystem_.open_input_file(path) as fh:
        return pa.ipc.open_file(fh).read_all()


def table_to_ipc(table: Any) -> bytes:
    """``table`` as Arrow IPC stream bytes (to pickle or ship to a task; ``table_from_ipc``)."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def table_from_ipc(blob: bytes) -> Any:
    """The table of ``table_to_ipc``'s bytes."""
    import pyarrow as pa

    return pa.ipc.open_stream(pa.py_buffer(blob)).read_all()


def exists(location: str) -> bool:
    """True when a file or directory is at ``location`` (asks its filesystem)."""
    from pyarrow import fs

    filesystem_, path = filesystem(location)
    try:
        return bool(filesystem_.get_file_info(path).type != fs.FileType.NotFound)
    except (FileNotFoundError, PermissionError):
        return False


def is_delta_table(table_uri: str) -> bool:
    """True when ``table_uri`` has a Delta log directory (``_delta_log``), on any filesystem."""
    from pyarrow import fs

    filesystem_, path = filesystem(join(table_uri, DELTA_LOG))
    try:
        return bool(filesystem_.get_file_info(path).type == fs.FileType.Directory)
    except (FileNotFoundError, PermissionError):
        return False


def write_json(path: str, value: Any) -> None:
    """``value`` as one JSON file at ``path`` (any filesystem; its directory made)."""
    fs_, inner = filesystem(path)
    fs_.create_dir(inner.rsplit("/", 1)[0], recursive=True)
    with fs_.open_output_stream(inner) as fh:
        fh.write(json.dumps(value, separators=(",", ":")).encode())


def read_json(path: str) -> Any:
    """The JSON file at ``path``, or None when there is none."""
    from pyarrow import fs

    fs_, inner = filesystem(path)
    if fs_.get_file_info(inner).type == fs.FileType.NotFound:
        return None
    with fs_.open_input_stream(inner) as fh:
        return json.loads(fh.read().decode())
