"""The rules of ARCHITECTURE.md on imports: the core imports the standard library only (checked in
a fresh interpreter, "The layers"); nothing outside ``pipelines/tableio/`` imports Delta; nothing
in ``pipelines/`` imports in a circle, between modules or between rooms ("The pipelines' rooms")."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import coordinator_core
from tests.import_graph import circles

REPO = Path(__file__).resolve().parents[1]

_PROBE = """
import importlib, json, pkgutil, sys
before = set(sys.modules)
import coordinator_core
for info in pkgutil.walk_packages(coordinator_core.__path__, "coordinator_core."):
    importlib.import_module(info.name)
for name in coordinator_core.__all__:
    getattr(coordinator_core, name)
top = sorted({m.split(".")[0] for m in set(sys.modules) - before})
print(json.dumps(top))
"""


def test_core_and_every_submodule_import_only_the_standard_library() -> None:
    submodules = [m.name for m in pkgutil.walk_packages(coordinator_core.__path__, "coordinator_core.")]
    assert "coordinator_core.codec.record_codec" in submodules and "coordinator_core.codec.wire" in submodules
    out = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(REPO)!r})\n" + _PROBE],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        timeout=120,
    )
    top_level = json.loads(out.stdout.strip().splitlines()[-1])
    outside = [m for m in top_level if m not in sys.stdlib_module_names and m != "coordinator_core"]
    assert outside == [], f"coordinator_core pulled in non-stdlib modules: {outside}"


# ---- the table seam (issue 15) ------------------------------------------------------------------
#: where the rule holds: every module of the product and its benchmarks. ``tests/`` is left out
#: on purpose: tests open tables with delta-rs to check what ``TableIO`` wrote independently of it.
_SEAM_ROOTS = ("pipelines", "airflow_dags", "bench")
_SEAM = REPO / "pipelines" / "tableio"
_DELTA_MODULES = {"deltalake", "delta"}


def _imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in ``path`` (top level or inside functions)."""
    import ast

    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
    return out


def test_nothing_outside_the_tableio_package_imports_deltalake_or_delta() -> None:
    offenders = []
    checked = 0
    for root in _SEAM_ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            if _SEAM in path.parents:
                continue
            checked += 1
            offenders += [
                f"{path.relative_to(REPO)}:{line}: {mod}"
                for line, mod in _imported_modules(path)
                if mod.split(".")[0] in _DELTA_MODULES
            ]
    assert checked > 50  # the walk found the code
    assert offenders == [], "import Delta only inside pipelines/tableio/:\n" + "\n".join(offenders)


def test_the_tableio_package_is_where_delta_is_imported() -> None:
    inside = {
        path.name
        for path in _SEAM.glob("*.py")
        if any(mod.split(".")[0] in _DELTA_MODULES for _, mod in _imported_modules(path))
    }
    assert inside == {"deltars.py", "spark.py"}  # delta-rs on the driver; Spark's Delta


def test_table_io_does_not_branch_on_its_engine() -> None:
    import ast

    tree = ast.parse((_SEAM / "__init__.py").read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "TableIO")
    branches = [
        n.lineno
        for n in ast.walk(cls)
        if isinstance(n, ast.Compare)
        and any(isinstance(side, ast.Attribute) and side.attr == "engine" for side in (n.left, *n.comparators))
    ]
    assert branches == [], f"TableIO compares its engine at lines {branches}: put the difference in an engine"


def test_tableio_files_stay_small() -> None:
    sizes = {path.name: len(path.read_text(encoding="utf-8").splitlines()) for path in _SEAM.glob("*.py")}
    assert sizes and max(sizes.values()) <= 600, sizes


# ---- no import circle in pipelines/ (issue 32) ----------------------------------------------------
def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)  # a package is named by its directory


def _import_graph(package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports: at the top, inside functions and under
    ``TYPE_CHECKING`` alike; ``from a import b`` is an arrow to ``a.b`` when that is a module, else
    to ``a``; relative imports resolved."""
    import ast

    paths = {_module_name(p): p for p in sorted((REPO / package).rglob("*.py"))}

    def resolve(name: str) -> str | None:
        while name not in paths and "." in name:
            name = name.rsplit(".", 1)[0]
        return name if name in paths else None

    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(resolve(a.name) for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                targets.update(resolve(f"{base}.{a.name}") for a in node.names)
        graph[name] = {t for t in targets if t is not None and t != name}
    return graph


def _rooms(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph between ``pipelines``' rooms: its first sub-packages and its root modules."""
    room = lambda m: ".".join(m.split(".")[:2])  # noqa: E731
    out: dict[str, set[str]] = {}
    for m, ts in graph.items():
        out.setdefault(room(m), set()).update(room(t) for t in ts if room(t) != room(m))
    return out


def test_the_circle_finder_finds_circles_and_names_packages_by_their_directory() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
    graph = _import_graph("pipelines")
    assert "pipelines.tableio" in graph and "pipelines.tableio.__init__" not in graph
    assert "pipelines.tableio.base" in graph["pipelines.tableio"]  # top level
    assert "pipelines.tableio.rust" in graph["pipelines.tableio"]  # inside a function
    assert "pipelines.config" in graph["pipelines.tableio"]  # under TYPE_CHECKING


def test_no_module_of_pipelines_imports_in_a_circle() -> None:
    """Every module, the stream wing's among them (issue 32: its six-file circle is gone)."""
    graph = _import_graph("pipelines")
    assert len(graph) > 100  # the walk found the code
    assert circles(graph) == []


def test_no_room_of_pipelines_imports_in_a_circle() -> None:
    rooms = _rooms(_import_graph("pipelines"))
    assert {"pipelines.tableio", "pipelines.warehouse", "pipelines.config", "pipelines.runtime"} <= set(rooms)
    assert circles(rooms) == []
