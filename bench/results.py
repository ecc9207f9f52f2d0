"""``bench/RESULTS.md``: each benchmark owns one ``## `` section and replaces only that one."""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def write_section(header: str, text: str, path: Path = RESULTS) -> None:
    """Replace the section that starts with ``header`` by ``text`` (or append it), leaving the
    other sections alone."""
    old = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n"
    start = old.find(header)
    if start < 0:
        new = old.rstrip("\n") + "\n\n" + text.rstrip("\n") + "\n"
    else:
        nxt = old.find("\n## ", start + len(header))
        new = old[:start] + text.rstrip("\n") + "\n" + ("" if nxt < 0 else old[nxt:])
    path.write_text(new, encoding="utf-8")
