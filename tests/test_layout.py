"""The layout rules of ARCHITECTURE.md, checked: file and function sizes, one path per stage.

- No module of ``pipelines/``, ``schemas/`` or ``airflow_dags/`` is over 600 lines.
- No function there is over 80 lines unless the line above its ``def`` (or its first decorator)
  is a ``# long: <reason>`` comment saying why it is one piece.
- The wings do not reach into each other: ``pipelines.batch`` never imports ``pipelines.stream``
  and the other way round; both build on ``pipelines.records``, which imports neither and no Spark.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECKED = ("pipelines", "schemas", "airflow_dags")
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80


def _modules() -> list[Path]:
    return sorted(p for d in CHECKED for p in (REPO / d).rglob("*.py"))


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def test_no_module_is_over_600_lines() -> None:
    long = {str(p.relative_to(REPO)): n for p in _modules() if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES}
    assert long == {}


def test_no_function_is_over_80_lines_without_a_reason_next_to_it() -> None:
    unexplained = []
    for path in _modules():
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            above = lines[first - 2].strip() if first >= 2 else ""
            if size > MAX_FUNCTION_LINES and not above.startswith("# long: "):
                unexplained.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({size} lines)")
    assert unexplained == []


def test_the_wings_build_on_records_and_not_on_each_other() -> None:
    for wing, other in (("batch", "stream"), ("stream", "batch")):
        for path in (REPO / "pipelines" / wing).rglob("*.py"):
            bad = {m for m in _imports(path) if m == f"pipelines.{other}" or m.startswith(f"pipelines.{other}.")}
            assert bad == set(), f"{path.relative_to(REPO)} imports {sorted(bad)}"
    for path in (REPO / "pipelines" / "records").rglob("*.py"):
        bad = {m for m in _imports(path) if m.startswith(("pyspark", "pipelines.batch", "pipelines.stream"))}
        assert bad == set(), f"{path.relative_to(REPO)} imports {sorted(bad)}"


# ---- the pipelines' rooms (issue 32) -----------------------------------------------------------
#: what stands at the root of ``pipelines/`` besides its rooms (ARCHITECTURE.md, "The pipelines' rooms")
PIPELINES_ROOT = {"__init__.py", "__main__.py", "cli.py", "errors.py", "log_clock.py", "uri.py"}
#: every name of the warehouse's own layout, spelled only in ``pipelines/warehouse/layout.py``
WAREHOUSE_NAMES = ("_offsetlake.lock", "_offsetlake.job", "_staging", "_replay_input", "_runs")


def test_the_pipelines_root_holds_rooms_not_loose_modules() -> None:
    loose = {p.name for p in (REPO / "pipelines").glob("*.py")}
    assert loose == PIPELINES_ROOT


def test_every_job_is_in_the_jobs_room() -> None:
    jobs = {p.stem for p in (REPO / "pipelines" / "jobs").glob("*.py")} - {"__init__"}
    assert jobs == {"batch", "stream", "dq", "maintenance"}
    strays = [str(p.relative_to(REPO)) for p in (REPO / "pipelines").rglob("job.py")]
    assert strays == []
    for path in (REPO / "pipelines").rglob("*.py"):
        if {REPO / "pipelines" / "jobs", REPO / "pipelines" / "commands"} & set(path.parents):
            continue  # the commands start the jobs; nothing else imports one
        bad = {m for m in _imports(path) if m.startswith("pipelines.jobs")}
        assert bad == set(), f"{path.relative_to(REPO)} imports a job: {sorted(bad)}"


def test_the_warehouse_layout_is_spelled_in_one_module() -> None:
    owner = REPO / "pipelines" / "warehouse" / "layout.py"
    spelled = []
    for path in _modules():
        if path == owner:
            continue
        tree = ast.parse(path.read_text())
        prose = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}  # docstrings
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
                parts = node.value.split("/")
                if any(part in WAREHOUSE_NAMES for part in parts):
                    spelled.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value!r}")
    assert spelled == []
    text = owner.read_text()
    assert all(f'"{name}' in text for name in WAREHOUSE_NAMES)


# no import circle in the stream wing, nor anywhere else in pipelines/: tests/test_architecture.py
