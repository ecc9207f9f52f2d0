"""Test helper: open a local HTML file in headless Chromium with networking disabled.

Every host is unresolvable and the proxy is a dead port, so any request for a remote resource
fails (and a script that depends on it logs to the console). The DOM after the page's scripts
ran and the console lines are returned for the test to assert on.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class OfflineRender:
    dom: str
    console: list[str]


def render_offline(page: Path, profile: Path) -> OfflineRender:
    """Open ``page`` in headless Chromium without network; skip the test when Chromium is absent."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    run = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--proxy-server=127.0.0.1:9",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--virtual-time-budget=10000",
            f"--user-data-dir={profile}",
            "--dump-dom",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return OfflineRender(run.stdout, [line for line in run.stderr.splitlines() if ":CONSOLE" in line])
