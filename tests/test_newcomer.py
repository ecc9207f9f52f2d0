"""A newcomer's first minutes: the README's commands, verbatim, in a fresh directory.

The README's first command ends in ``offsetlake quickstart``; the block after it ("Then:") asks the
quickstart's warehouse three questions. Each command is taken from the README as written (only
``.venv/bin/`` is pointed at the interpreter running the tests: the install itself is what
``.ci/run`` does), run in an empty working directory in a fresh process, and must exit 0 without a
traceback and leave nothing in that directory but what the README says it writes.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_commands() -> list[str]:
    """The quickstart (the tail of the README's first command) and the commands of the block that
    follows it, in the README's order."""
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    setup = next(line for line in blocks[0].splitlines() if line.startswith("python3 -m venv"))
    quickstart = setup.split("&&")[-1].strip()
    assert quickstart.startswith(".venv/bin/offsetlake quickstart"), setup
    after = [line.strip() for line in blocks[1].splitlines() if line.strip() and not line.startswith("#")]
    return [quickstart, *after]


def test_the_readme_commands_run_in_a_fresh_directory_and_leave_only_what_they_document(tmp_path: Path) -> None:
    venv_bin = Path(sys.executable).parent
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    commands = readme_commands()
    assert len(commands) >= 4, commands
    for command in commands:
        argv = shlex.split(command)
        argv[0] = str(venv_bin / Path(argv[0]).name)
        proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, f"{command}\n{proc.stderr[-3000:]}"
        assert "Traceback" not in proc.stderr + proc.stdout, command
    # what the README says these commands write: the quickstart's folder and the report
    assert sorted(p.name for p in tmp_path.iterdir()) == ["offsetlake-data", "report.html"]
    assert sorted(p.name for p in (tmp_path / "offsetlake-data").iterdir()) == ["quickstart"]
    assert (tmp_path / "report.html").stat().st_size > 10_000
