"""The core's shape (issue 15): modules small enough to read, one varint implementation.

- No module of ``coordinator_core`` is longer than ``MAX_LINES``, except the ones listed in
  ``KNOWN_LONG`` with the reason they are (each must still exist and still be long: a module
  brought under the limit leaves the list).
- The snapshot codec composes ``coordinator_core.codec.wire``'s primitives: it imports ``wire`` and
  has no varint loop of its own.
- The commit-run bulk path reaches the replay's working state only through
  ``expiry.BulkFold``: it imports neither the fold nor the replay.

The core's rooms (issue 32; ARCHITECTURE.md, "The core's rooms"):

- Every room (a sub-package) and every module at the core's root stands on a floor (``FLOORS``)
  and imports only from lower floors: the arrows point down. An import inside a function or
  under ``TYPE_CHECKING`` is an arrow too.
- No import circle anywhere in the core, between modules of one room included.
- Inside the core nothing imports through the front door (``coordinator_core/__init__.py``): a
  module imports the module that defines a name. The rooms' own ``__init__.py`` files import
  nothing, except the faces listed in ``FACES``.
- Outside the core (``pipelines``, ``schemas``, ``bench``, ``airflow_dags``, the tests outside
  ``tests/coordinator_core``) code imports the front door (``from coordinator_core import X``),
  or a room's public module (``PUBLIC_MODULES``) for a name the front door does not carry;
  never a private name (``_x``).
- A module's ``__all__`` lists what it defines: re-exports for old callers are gone (the front
  door and the faces are the only modules that hand names on).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import coordinator_core
from tests.import_graph import circles

CORE = Path(coordinator_core.__file__).resolve().parent
REPO = CORE.parent
MAX_LINES = 600

#: modules over the limit, each with its reason (not part of issue 15's carve of the replay)
KNOWN_LONG: dict[str, str] = {
    "codec/wire.py": "the message-layout compiler: one fused reader/writer per layout, kept together for speed",
    "codec/modern_records.py": "generated-style table of KIP-848 record schemas (one declaration per record type)",
    "simulator/assignors.py": "Kafka's range/round-robin/sticky assignors, one algorithm each (issue of its own)",
    "simulator/generator.py": "the sample-cluster generator's world model (issue of its own)",
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
    carved = ["loader/replay.py", "loader/snapshot.py", "loader/snapshot_codec.py", "loader/group_fold.py",
              "loader/record_handlers.py", "loader/rebalance.py", "loader/commit_runs.py", "settings.py", "expiry.py"]  # fmt: skip
    assert {m: _lines(modules[m]) for m in carved if _lines(modules[m]) > MAX_LINES} == {}


def test_snapshot_codec_is_written_on_wire_primitives() -> None:
    path = CORE / "loader" / "snapshot_codec.py"
    assert "coordinator_core.codec.wire" in _imports(path)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    # a varint of its own would shift by 7 or mask with 0x7F/0x80
    consts = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, int)}
    assert not consts & {0x7F, 0x80}, "the snapshot codec encodes varints itself"


def test_commit_runs_reach_the_fold_only_through_the_expiry_interface() -> None:
    imports = _imports(CORE / "loader" / "commit_runs.py")
    assert "coordinator_core.expiry.BulkFold" in imports
    assert not {
        m for m in imports if m.startswith(("coordinator_core.loader.group_fold", "coordinator_core.loader.replay"))
    }


# ---- the core's rooms (issue 32) ---------------------------------------------------------------
#: floor -> the rooms (sub-packages) and root modules standing on it; each imports only from
#: lower floors. ``streams`` (Kafka 4's streams groups, KIP-1071) stands above ``modern``: it
#: builds on ``modern/group_epochs`` (what share and streams groups share).
FLOORS: dict[int, frozenset[str]] = {
    1: frozenset({"errors", "settings", "partitioner", "compaction", "log_shape", "segments"}),
    2: frozenset({"state", "codec"}),
    3: frozenset({"events", "expiry"}),
    4: frozenset({"modern"}),
    5: frozenset({"streams"}),
    6: frozenset({"loader"}),
    7: frozenset({"simulator"}),
}
FLOOR_OF = {unit: floor for floor, units in FLOORS.items() for unit in units}

#: packages whose ``__init__.py`` hands names on (``__all__``); every other room's imports nothing
FACES = frozenset({"coordinator_core", "coordinator_core.segments", "coordinator_core.simulator"})

#: what code outside the core may import besides the front door, each with why it is public
PUBLIC_MODULES: dict[str, str] = {
    "coordinator_core.segments": "log segments' bytes, sans-IO: the face of its own room",
    "coordinator_core.segments.headers": "the header walk the stream's segment log reads batches with",
    "coordinator_core.simulator": "the simulator's face (scenarios)",
    "coordinator_core.simulator.generator": "the sample-cluster generator (the generate command, benchmarks, tests)",
    "coordinator_core.simulator.consumer_group_writer": "a KIP-848 group's life as Kafka 4 writes it (tests)",
    "coordinator_core.simulator.rebalance_truth": "inferred rebalance windows against the generator's truth",
    "coordinator_core.codec.modern_records": "every Kafka 4 record value and key (building records)",
    "coordinator_core.modern.consumer.model": "a KIP-848 group as a value (inspect renders it)",
    "coordinator_core.modern.share.model": "a KIP-932 share group as a value (inspect renders it)",
    "coordinator_core.streams.model": "a KIP-1071 streams group as a value (inspect renders it)",
}
OUTSIDE = ("pipelines", "schemas", "bench", "airflow_dags", "tests")


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(CORE.rglob("*.py"))}


def _unit(module: str) -> str:
    """The room (sub-package) or root module a core module belongs to."""
    return module.split(".")[1]


def _import_nodes(path: Path) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node


def _arrows(module: str) -> set[str]:
    """The core modules ``module`` imports (top level, in functions, under TYPE_CHECKING)."""
    out: set[str] = set()
    for node in _import_nodes(MODULES[module]):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in MODULES)
        elif node.level == 0 and node.module and node.module.split(".")[0] == "coordinator_core":
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                out.add(sub if sub in MODULES else node.module)
    out.discard(module)
    return out


def test_every_room_and_root_module_stands_on_a_floor() -> None:
    units = {_unit(m) for m in MODULES if m != "coordinator_core"}
    assert units - set(FLOOR_OF) == set(), "give each new room a floor in FLOORS (and ARCHITECTURE.md)"
    assert len(units) >= 12  # the walk found the rooms


def test_the_rooms_import_only_downward() -> None:
    upward = []
    for module in MODULES:
        if module == "coordinator_core":
            continue
        for target in _arrows(module):
            a, b = _unit(module), _unit(target)
            if a != b and FLOOR_OF[a] <= FLOOR_OF[b]:
                upward.append(f"{module} (floor {FLOOR_OF[a]}) -> {target} (floor {FLOOR_OF[b]})")
    assert upward == []


def test_nothing_in_the_core_imports_through_the_front_door() -> None:
    through = [
        f"{module}: {a.name}"
        for module, path in MODULES.items()
        if module != "coordinator_core"
        for node in _import_nodes(path)
        if isinstance(node, ast.ImportFrom) and node.module == "coordinator_core"
        for a in node.names
        if f"coordinator_core.{a.name}" not in MODULES
    ]
    assert through == []


def test_no_import_circle_anywhere_in_the_core() -> None:
    graph = {m: _arrows(m) - {"coordinator_core"} for m in MODULES}
    assert circles(graph) == []


def test_the_circle_finder_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_rooms_faces_import_nothing_but_the_listed_faces() -> None:
    talking = [m for m, p in MODULES.items() if p.name == "__init__.py" and m not in FACES and any(_import_nodes(p))]
    assert talking == []


def test_the_modern_room_is_kafka_4s_groups() -> None:
    text = (CORE / "modern" / "__init__.py").read_text(encoding="utf-8")
    assert text == (
        '"""Kafka 4\'s groups (the new coordinator): consumer groups (KIP-848), share groups (KIP-932)."""\n'
    )


def _defined(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                elts = target.elts if isinstance(target, ast.Tuple) else [target]
                names.update(e.id for e in elts if isinstance(e, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_a_modules_all_lists_only_what_it_defines() -> None:
    handed_on = {}
    for module, path in MODULES.items():
        if module in FACES:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                extra = set(ast.literal_eval(node.value)) - _defined(tree)
                if extra:
                    handed_on[module] = sorted(extra)
    assert handed_on == {}


def test_the_front_door_types_what_it_loads() -> None:
    """The ``TYPE_CHECKING`` imports (what mypy sees) are the lazily loaded names, one for one."""
    tree = ast.parse((CORE / "__init__.py").read_text(encoding="utf-8"))
    typed = {
        (node.module, a.name)
        for block in tree.body
        if isinstance(block, ast.If)
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for a in node.names
    }
    loaded = {(module, name) for module, names in coordinator_core._PUBLIC.items() for name in names}
    assert typed == loaded
    assert len(coordinator_core.__all__) == len(loaded)  # no name in two modules
    assert all(not name.startswith("_") for name in coordinator_core.__all__)


def _outside_files() -> Iterator[Path]:
    for root in OUTSIDE:
        for path in sorted((REPO / root).rglob("*.py")):
            if root == "tests" and (REPO / "tests" / "coordinator_core") in path.parents:
                continue
            yield path


def test_outside_the_core_code_imports_the_front_door_or_a_public_module() -> None:
    front = set(coordinator_core.__all__)
    bad = []
    checked = 0
    for path in _outside_files():
        checked += 1
        where = path.relative_to(REPO)
        for node in _import_nodes(path):
            if isinstance(node, ast.Import):
                bad += [
                    f"{where}:{node.lineno}: import {a.name}"
                    for a in node.names
                    if a.name.startswith("coordinator_core.") and a.name not in PUBLIC_MODULES
                ]
                continue
            module = node.module or ""
            if node.level or module.split(".")[0] != "coordinator_core":
                continue
            for a in node.names:
                if a.name.startswith("_"):
                    bad.append(f"{where}:{node.lineno}: {module}.{a.name} is private")
                elif module == "coordinator_core":
                    if a.name not in front and f"coordinator_core.{a.name}" not in PUBLIC_MODULES:
                        bad.append(f"{where}:{node.lineno}: coordinator_core has no public {a.name}")
                elif module not in PUBLIC_MODULES:
                    bad.append(
                        f"{where}:{node.lineno}: {module} is no public module (import {a.name} from coordinator_core)"
                    )
                elif a.name in front:
                    bad.append(f"{where}:{node.lineno}: {a.name} comes from the front door, not {module}")
    assert checked > 100  # the walk found the code
    assert bad == []


def test_the_public_modules_exist() -> None:
    assert set(PUBLIC_MODULES) - set(MODULES) == set()
