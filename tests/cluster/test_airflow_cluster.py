"""The Airflow DAGs against the standalone cluster: ``dag.test()`` of ``offsetlake_batch`` and
``offsetlake_stream`` with the Spark connection naming the cluster's master, the executors' own
Python (``spark.pyspark.python`` in the config) and the project shipped as a zip
(``airflow.py_files``): every task succeeds, and the job's tables equal those of the same job run
embedded (``local[*]``, delta-rs) on the same landing.

- ``offsetlake_batch`` with Delta on Spark (``delta.engine: spark``, its jars given by the DAG as
  ``--jars``): batch, dq (a quarantined record under the threshold) and maintenance on the
  cluster; the batch task ran the job's one path.
- ``offsetlake_stream`` with delta-rs: the executors write the decoded tables' files and the
  driver commits them, across processes (the stream on Spark's Delta is
  ``test_delta_spark.py``'s).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.tableio import read_arrow_at
from tests.cluster.jobs import assert_same_tables, job_args, run
from tests.pipelines.standalone import StandaloneCluster
from tests.test_airflow_dags import BIN, DAGS, _corrupt_record, _dag_test, _write_conf

# Each DAG is several spark-submits to the cluster: ~5 min each on two cores.
pytestmark = [pytest.mark.cluster, pytest.mark.airflow, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
JOBS = {
    "offsetlake_batch": ("pipelines/jobs/batch.py", ()),
    "offsetlake_stream": ("pipelines/jobs/stream.py", ("--available-now",)),
}


@pytest.fixture(scope="module")
def airflow_on_cluster(tmp_path_factory: pytest.TempPathFactory, standalone: StandaloneCluster) -> dict[str, str]:
    home = tmp_path_factory.mktemp("airflow_home")
    host, port = standalone.url.rsplit(":", 1)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "PYTHONPATH"))}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW_CONN_SPARK_CLUSTER": json.dumps({"conn_type": "spark", "host": host, "port": int(port)}),
            "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
    )
    migrate = subprocess.run(
        [str(BIN / "airflow"), "db", "migrate"], env=env, capture_output=True, text=True, timeout=600
    )
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    return env


@pytest.mark.parametrize(("dag_id", "engine"), [("offsetlake_batch", "spark"), ("offsetlake_stream", "rust")])
def test_the_dags_run_every_task_on_the_cluster_and_write_the_tables_of_local(
    airflow_on_cluster: dict[str, str],
    executor_env: Path,
    shipped: Path,
    tiny_log: Path,
    tmp_path: Path,
    dag_id: str,
    engine: str,
) -> None:
    landing = tmp_path / "landing"
    shutil.copytree(tiny_log, landing)
    if dag_id == "offsetlake_batch":
        _corrupt_record(landing)  # 1 quarantined record: under the dq threshold below
    roots = {}
    for name in ("cluster", "local"):
        roots[name] = tmp_path / name
        roots[name].mkdir()
        (roots[name] / "landing").symlink_to(landing, target_is_directory=True)
    conf = _write_conf(
        tmp_path / "conf.yaml",
        roots["cluster"],
        delta={"engine": engine},
        dq={"quarantine_max_fraction": 0.05},
        spark={
            "conf": {
                "spark.pyspark.python": str(executor_env),
                "spark.pyspark.driver.python": sys.executable,
                "spark.executor.cores": 1,
                "spark.executor.memory": "768m",
                "spark.cores.max": 2,
            }
        },
        airflow={"spark_conn_id": "spark_cluster", "py_files": str(shipped)},
    )
    result = _dag_test(airflow_on_cluster, conf, dag_id)
    assert result["state"] == "success", result
    assert set(result["tasks"].values()) == {"success"}, result

    warehouse = roots["cluster"] / "warehouse"
    checks = read_arrow_at(str(warehouse / "dq_results"), ["suite", "run_id", "success", "blocking"]).to_pylist()
    assert {r["run_id"].split(":")[0] for r in checks} == {dag_id}
    assert all(r["success"] for r in checks if r["blocking"])
    if dag_id == "offsetlake_stream":
        assert result["tasks"] == {"stream_available_now": "success", "dq": "success"}, result
        assert {r["suite"] for r in checks} == {"group_state", "offsets_current"}
    else:
        assert set(result["tasks"]) == {"batch", "dq", "maintenance"}, result
        assert (roots["cluster"] / "dq_docs" / "index.html").is_file()
        # the task ran the job's one path: its run record names the same path per stage as the CLI's
        from pipelines.batch.summary import run_records
        from tests.pipelines.test_batch_job import ONE_PATH

        (record,) = run_records(str(warehouse))
        assert {k: v for k, v in record["paths"].items() if k != "ingest"} == ONE_PATH

    script, extra = JOBS[dag_id]
    local = [sys.executable, str(REPO / script), *job_args("conf/local.yaml", roots["local"], *extra)]
    run(local, tmp_path / "local.log", cwd=REPO)
    counts = assert_same_tables(warehouse, roots["local"] / "warehouse", more_on_the_left=True)
    assert counts["group_state"] and counts["offsets_current"]
    if dag_id == "offsetlake_batch":
        assert counts["quarantine"] == 1
