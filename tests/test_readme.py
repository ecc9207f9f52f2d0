"""The README stays true: its table reference is the generated one, and it names every table."""

from __future__ import annotations

from pathlib import Path

import schemas
from schemas.__main__ import render_section

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_table_reference_is_generated_from_schemas() -> None:
    text = README.read_text(encoding="utf-8")
    assert render_section() in text, "run: python -m schemas --write-readme README.md"
    for name in schemas.TABLES:
        assert f"### `{name}`" in text


def test_readme_has_exactly_the_two_setup_commands_that_ci_runs() -> None:
    text = README.read_text(encoding="utf-8")
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    test_cmd = next(line for line in text.splitlines() if line.startswith("python3 -m venv") and "pytest" in line)
    assert test_cmd.strip() in ci
    assert sum(1 for line in text.splitlines() if line.startswith("python3 -m venv .venv")) == 2
