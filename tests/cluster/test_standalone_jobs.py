"""The batch job, spark-submit'd to a real standalone cluster (a master and two
workers on 127.0.0.1, each executor its own JVM and Python), with the project shipped as one zip
and the executors' Python unable to import it from anywhere else: its tables equal the
embedded ``local[*]`` run's on the same log, table for table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster.jobs import assert_same_tables, job_args, run, submit_command
from tests.pipelines.standalone import StandaloneCluster, clean_env

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

CONF = "conf/local.yaml"


def test_the_executors_python_cannot_import_the_project(executor_env: Path) -> None:
    done = subprocess.run(
        [str(executor_env), "-c", "import pyarrow, pandas, deltalake, yaml; import pipelines"],
        capture_output=True,
        text=True,
        env=clean_env(),
        cwd="/",
        timeout=120,
    )
    assert done.returncode != 0
    assert "No module named 'pipelines'" in done.stderr, done.stderr


def test_tasks_run_in_the_executors_python_with_the_shipped_zip(
    standalone: StandaloneCluster, executor_env: Path, shipped: Path, tmp_path: Path
) -> None:
    cmd = submit_command(
        standalone.url, "tests/cluster/probe_job.py", [], executor_python=executor_env, shipped=shipped
    )
    run(cmd, tmp_path / "probe.log")
    (line,) = [ln for ln in (tmp_path / "probe.log").read_text().splitlines() if ln.startswith('{"tasks"')]
    report = json.loads(line)
    pythons = {t[0] for t in report["tasks"]}
    modules = {t[1] for t in report["tasks"]}
    assert pythons == {str(executor_env)}
    assert all(shipped.name in m and "/pipelines/__init__.py" in m for m in modules), modules
    assert len({t[2] for t in report["tasks"]}) == 2  # both executors ran tasks
    assert report["executors"] == 2


# the stream on the cluster (delta-rs, submitted by its Airflow DAG) is test_airflow_cluster.py's
def test_the_batch_job_on_the_cluster_writes_the_tables_of_local(
    standalone: StandaloneCluster, executor_env: Path, shipped: Path, small_log: Path, tmp_path: Path
) -> None:
    script = "pipelines/jobs/batch.py"
    roots = {}
    for name in ("cluster", "local"):
        root = tmp_path / name
        root.mkdir()
        (root / "landing").symlink_to(small_log, target_is_directory=True)
        roots[name] = root
    on_cluster = submit_command(
        standalone.url, script, job_args(CONF, roots["cluster"]), executor_python=executor_env, shipped=shipped
    )
    cluster_s = run(on_cluster, tmp_path / "cluster.log")
    local = [sys.executable, str(Path(__file__).parents[2] / script), *job_args(CONF, roots["local"])]
    local_s = run(local, tmp_path / "local.log")
    counts = assert_same_tables(roots["cluster"] / "warehouse", roots["local"] / "warehouse")
    assert sum(counts.values()) > 10_000 and counts["group_state"] > 0
    print(f"{script}: cluster {cluster_s:.1f} s, local {local_s:.1f} s ({cluster_s / local_s:.2f}x)")
