"""Whether this run is CI: there the tests that need Java, Maven or a real broker must run, never skip.

``.ci/run`` exports ``CI=true`` (unless already set); hosted runners set ``CI`` themselves. Any value
other than empty, ``0``, ``false`` or ``no`` counts.
"""

from __future__ import annotations

import os


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
