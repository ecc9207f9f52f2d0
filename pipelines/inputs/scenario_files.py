"""Load simulator scenarios from YAML files (the core takes plain dicts).

Rules:
- ``load_scenario(path)`` parses YAML with ``yaml.safe_load`` and validates with
  ``coordinator_core.simulator.Scenario.from_dict``; any problem becomes a one-line
  ``UsageError`` naming the file (and the key path for validation errors).
- ``SCENARIO_DIR`` is ``conf/scenarios``; ``find_scenario(name)`` accepts a path or the bare
  name of a shipped scenario.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from coordinator_core import ConfigError
from coordinator_core.simulator import Scenario
from pipelines.errors import UsageError

SCENARIO_DIR = Path(__file__).resolve().parents[2] / "conf" / "scenarios"


def find_scenario(name_or_path: str) -> Path:
    """A scenario file: an existing path, or ``conf/scenarios/<name>.yaml``."""
    p = Path(name_or_path)
    if p.is_file():
        return p
    candidate = SCENARIO_DIR / f"{name_or_path.removesuffix('.yaml')}.yaml"
    if candidate.is_file():
        return candidate
    known = ", ".join(sorted(x.stem for x in SCENARIO_DIR.glob("*.yaml")))
    raise UsageError(f"no scenario file {name_or_path!r} (shipped scenarios: {known})")


def load_scenario(path: str | Path) -> Scenario:
    """Parse and validate one scenario file."""
    p = find_scenario(str(path))
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise UsageError(f"{p}: not valid YAML: {str(exc).splitlines()[0]}") from None
    try:
        return Scenario.from_dict(raw, path=p.stem)
    except ConfigError as exc:
        raise UsageError(f"{p}: {exc}") from None


def shipped_scenarios() -> list[Path]:
    """Every scenario file in ``conf/scenarios`` (name order)."""
    return sorted(SCENARIO_DIR.glob("*.yaml"))
