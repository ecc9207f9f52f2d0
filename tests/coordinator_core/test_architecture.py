"""The core's shape (issue 15): modules small enough to read, one varint implementation.

- No module of ``coordinator_core`` is longer than ``MAX_LINES``, except the ones listed in
  ``KNOWN_LONG`` with the reason they are (each must still exist and still be long: a module
  brought under the limit leaves the list).
- The snapshot codec composes ``coordinator_core.wire``'s primitives: it imports ``wire`` and
  has no varint loop of its own.
- The commit-run bulk path reaches the replay's working state only through
  ``expiry.BulkFold``: it imports neither the fold nor the replay.
"""

from __future__ import annotations

import ast
from pathlib import Path

import coordinator_core

CORE = Path(coordinator_core.__file__).resolve().parent
MAX_LINES = 600

#: modules over the limit, each with its reason (not part of issue 15's carve of the replay)
KNOWN_LONG: dict[str, str] = {
    "wire.py": "the message-layout compiler: one fused reader/writer per layout, kept together for speed",
    "modern_records.py": "generated-style table of KIP-848 record schemas (one declaration per record type)",
    "assignors.py": "Kafka's range/round-robin/sticky assignors, one algorithm each (issue of its own)",
    "generator.py": "the sample-cluster generator's world model (issue of its own)",
    "simulator/coordinator.py": "the classic coordinator's request handlers, one per protocol API (issue of its own)",
    "simulator/client.py": "the simulated consumer's protocol state machine (issue of its own)",
}


def _modules() -> dict[str, Path]:
    return {p.relative_to(CORE).as_posix(): p for p in sorted(CORE.rglob("*.py"))}


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_every_core_module_is_at_most_600_lines_or_a_listed_exception() -> None:
    too_long = {name: _lines(p) for name, p in _modules().items() if _lines(p) > MAX_LINES}
    assert set(too_long) - set(KNOWN_LONG) == set(), f"modules over {MAX_LINES} lines: {too_long}"


def test_listed_long_modules_are_still_long() -> None:
    modules = _modules()
    stale = [name for name in KNOWN_LONG if name not in modules or _lines(modules[name]) <= MAX_LINES]
    assert stale == [], f"no longer over {MAX_LINES} lines (remove from KNOWN_LONG): {stale}"


def test_the_replay_modules_are_each_under_the_limit() -> None:
    modules = _modules()
    carved = ["replay.py", "snapshot.py", "snapshot_codec.py", "group_fold.py", "record_handlers.py",
              "rebalance.py", "commit_runs.py", "settings.py", "expiry.py"]  # fmt: skip
    assert {m: _lines(modules[m]) for m in carved if _lines(modules[m]) > MAX_LINES} == {}


def test_snapshot_codec_is_written_on_wire_primitives() -> None:
    path = CORE / "snapshot_codec.py"
    assert "coordinator_core.wire" in _imports(path)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    # a varint of its own would shift by 7 or mask with 0x7F/0x80
    consts = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, int)}
    assert not consts & {0x7F, 0x80}, "the snapshot codec encodes varints itself"


def test_commit_runs_reach_the_fold_only_through_the_expiry_interface() -> None:
    imports = _imports(CORE / "commit_runs.py")
    assert "coordinator_core.expiry.BulkFold" in imports
    assert not {m for m in imports if m.startswith(("coordinator_core.group_fold", "coordinator_core.replay"))}
