"""Every table and state shape of offsetlake, declared once.

Rules:
- Each module in this package that defines a module-level ``TABLES`` list of
  ``schemas.base.TableSpec`` contributes those tables; ``TABLES`` here is their union keyed by
  name (a name declared twice is an error). Modules are discovered, so adding a table touches
  only its own module.
- Nothing outside this package declares columns.
"""

from __future__ import annotations

import importlib
import pkgutil

from schemas.base import Column, TableSpec

__all__ = ["TABLES", "Column", "TableSpec", "get", "reference_markdown"]


def _collect() -> dict[str, TableSpec]:
    tables: dict[str, TableSpec] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name in {"base"} or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for spec in getattr(module, "TABLES", ()):
            if spec.name in tables:
                raise ValueError(f"table {spec.name!r} declared twice (second in schemas.{info.name})")
            tables[spec.name] = spec
    return tables


TABLES: dict[str, TableSpec] = _collect()


def get(name: str) -> TableSpec:
    """The spec of table ``name``; ``KeyError`` naming the known tables otherwise."""
    try:
        return TABLES[name]
    except KeyError:
        raise KeyError(f"unknown table {name!r}; known: {', '.join(sorted(TABLES))}") from None


def reference_markdown() -> str:
    """Markdown reference of every table (the README's table section is generated from this)."""
    return "\n".join(TABLES[n].markdown() for n in sorted(TABLES))
