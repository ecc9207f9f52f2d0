"""The core imports the standard library only (DESIGN §2), checked in a fresh interpreter."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import coordinator_core

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
