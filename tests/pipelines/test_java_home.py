"""A stale JAVA_HOME (issue 33): with a java on PATH the run uses it (spark-class would otherwise
fail with rc 1 and its own lines); without one it is one line, exit 2 (a ``UsageError``)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pipelines.errors import JavaNotFoundError, UsageError
from pipelines.runtime.spark_session import _java_binary


def test_a_stale_java_home_falls_back_to_the_java_on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    on_path = shutil.which("java")
    if on_path is None:
        pytest.skip("no java on PATH on this machine")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "gone"))
    assert _java_binary() == on_path
    assert "JAVA_HOME" not in os.environ  # spark-class then runs the PATH's java


def test_a_stale_java_home_without_java_on_path_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "gone"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(JavaNotFoundError) as info:
        _java_binary()
    assert isinstance(info.value, UsageError) and "\n" not in str(info.value) and "JAVA_HOME" in str(info.value)
