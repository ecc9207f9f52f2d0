"""``offsetlake quickstart --kafka real`` as a user runs it: a real broker, real clients, the batch job.

The command's own last table compares what the broker said (Admin API) with offsetlake's tables
for every group; the command exits 1 on any disagreement, so the exit code is the verdict.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.commands.quickstart_real import agreement_rows
from pipelines.kafka.real_world import BrokerGroup, WorldRun
from tests.broker.conftest import jars_or_skip


@pytest.mark.broker("kafka-4")
@pytest.mark.spark
@pytest.mark.slow
def test_the_quickstart_on_a_real_kafka_4_broker_agrees_with_the_broker(tmp_path: Path) -> None:
    jars_or_skip("kafka-4")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1", "COLUMNS": "160"}
    cmd = [sys.executable, "-m", "pipelines", "quickstart", "--kafka", "real", "--dir", str(tmp_path / "qs"), "--fresh"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    rows = [ln for ln in done.stdout.splitlines() if re.match(r"^\s*│\s*[a-z-]+\s*│", ln)]
    verdicts = {ln.split("│")[1].strip(): ln.split("│")[-2].strip() for ln in rows if ln.count("│") >= 9}
    expected = {"orders-service", "payments-service", "audit-archiver", "billing-reconciler", "ledger-txn"}
    assert expected | {"reports-legacy", "fraud-service"} <= set(verdicts), done.stdout[-3000:]
    assert set(verdicts.values()) == {"yes"}, done.stdout[-3000:]
    assert "Kafka 4.4" in done.stderr and "captured" in done.stderr


def _world() -> WorldRun:
    run = WorldRun(groups=["a", "gone"], deleted=["gone"])
    run.broker_groups["a"] = BrokerGroup("a", "STABLE", "CLASSIC", [{"member_id": "m"}], {("t", 0): 5})
    return run


def test_a_group_agrees_only_when_state_members_and_every_offset_agree() -> None:
    state = [{"group_id": "a", "state": "Stable", "exists": True, "member_count": 1}]
    gone = [{"group_id": "gone", "state": "Dead", "exists": False, "member_count": 0}]
    ok = agreement_rows(_world(), state + gone, [{"group_id": "a", "topic": "t", "partition": 0, "offset": 5}])
    assert [r[-1] for r in ok] == ["yes", "yes"]
    off = agreement_rows(_world(), state + gone, [{"group_id": "a", "topic": "t", "partition": 0, "offset": 4}])
    assert off[0][-1] == "NO"
    alive = agreement_rows(_world(), [*state, {**gone[0], "state": "Empty", "exists": True}], [])
    assert [r[-1] for r in alive] == ["NO", "NO"]


def test_kafka_real_over_an_existing_landing_without_fresh_is_refused(tmp_path: Path) -> None:
    """No broker starts and nothing is touched: one line, exit 2 (the old quickstart silently reused
    the landing and printed no agreement with any broker)."""
    landing = tmp_path / "qs" / "landing"
    landing.mkdir(parents=True)
    (landing / "part-0.parquet").write_bytes(b"an earlier quickstart's log")
    before = sorted(p.name for p in (tmp_path / "qs").rglob("*"))
    cmd = [sys.executable, "-m", "pipelines", "quickstart", "--kafka", "real", "--dir", str(tmp_path / "qs")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"offsetlake quickstart: error: --kafka real: {landing} already holds a sample log; add --fresh to "
        "capture a new one from a real broker (without --kafka real the quickstart reuses it)"
    ]
    assert sorted(p.name for p in (tmp_path / "qs").rglob("*")) == before
