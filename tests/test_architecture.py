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
    assert "coordinator_core.codec" in submodules and "coordinator_core.wire" in submodules
    out = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(REPO)!r})\n" + _PROBE],
        capture_output=True, text=True, check=True, cwd=REPO, timeout=120,
    )
    top_level = json.loads(out.stdout.strip().splitlines()[-1])
    outside = [m for m in top_level if m not in sys.stdlib_module_names and m != "coordinator_core"]
    assert outside == [], f"coordinator_core pulled in non-stdlib modules: {outside}"
