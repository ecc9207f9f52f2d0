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


def _markdown_files() -> list[Path]:
    repo = README.parent
    skip = {".venv", ".git", "node_modules"}
    return [p for p in repo.rglob("*.md") if not skip.intersection(p.relative_to(repo).parts)]


def test_every_relative_link_in_the_docs_names_a_file_of_the_repository() -> None:
    """A newcomer follows links: each relative Markdown link (and each backquoted ``../`` path)
    must resolve inside the repository, so nothing points at notes that only exist beside it."""
    import re

    repo = README.parent.resolve()
    dead: list[str] = []
    for md in _markdown_files():
        text = md.read_text(encoding="utf-8")
        targets = re.findall(r"\]\(([^)\s]+)\)", text) + re.findall(r"`(\.\./[^`\s]+)`", text)
        for target in targets:
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue  # a URL or an anchor in the same page
            path = (md.parent / target.split("#", 1)[0]).resolve()
            if not path.exists() or not path.is_relative_to(repo):
                dead.append(f"{md.relative_to(repo)}: {target}")
    assert not dead, "links to files that are not in the repository:\n" + "\n".join(dead)
