"""The batch job's driver JVM compiles with C1 only (``spark_session.QUICK_JIT``) on a local
master, and a user's own ``-XX:TieredStopAtLevel`` in ``spark.driver.extraJavaOptions`` still
wins. Each case starts a JVM of its own (a subprocess: the tests' shared session already runs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
PROBE = """
import json, sys
from pipelines.config import load_config
from pipelines.runtime.spark_session import build_spark_from_config
cfg = load_config(overrides=json.loads(sys.argv[1]))
spark = build_spark_from_config(cfg, app_suffix="batch", quick_jit=sys.argv[2] == "quick")
jvm = spark.sparkContext._jvm
bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
    jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
print(json.dumps({"level": bean.getVMOption("TieredStopAtLevel").getValue()}))
spark.stop()
"""


def _tiered_stop_at(tmp_path: Path, quick: bool, user_options: str | None = None) -> str:
    overrides: dict[str, object] = {"paths.root": str(tmp_path), "spark.master": "local[1]"}
    if user_options:
        overrides["spark.conf"] = {"spark.driver.extraJavaOptions": user_options}
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable, PYTHONPATH=str(REPO))
    out = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(overrides), "quick" if quick else "full"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    return str(json.loads(out.strip().splitlines()[-1])["level"])


def test_a_quick_jit_session_compiles_with_c1_only_and_the_users_option_wins(tmp_path: Path) -> None:
    assert _tiered_stop_at(tmp_path, quick=True) == "1"
    assert _tiered_stop_at(tmp_path, quick=True, user_options="-XX:TieredStopAtLevel=4") == "4"
    assert _tiered_stop_at(tmp_path, quick=False) == "4"  # Java's default: C1 and C2
