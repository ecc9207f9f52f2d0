"""The Airflow DAGs against the standalone cluster: ``dag.test()`` of ``offsetlake_batch`` and
``offsetlake_stream`` with the Spark connection naming the cluster's master, Delta on Spark
(``delta.engine: spark``, its jars given by the DAG as ``--jars``), the executors' own Python
(``spark.pyspark.python`` in the config) and the project shipped as a zip
(``airflow.py_files``): every task succeeds and the tables are there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.tableio import read_arrow_at
from tests.cluster.jobs import tables
from tests.pipelines.standalone import StandaloneCluster
from tests.test_airflow_dags import BIN, DAGS, _dag_test, _write_conf

# Each DAG is several spark-submits to the cluster (its dq task: Great Expectations' Spark jobs;
# batch and maintenance: Delta on Spark); the local ``offsetlake_stream`` DAG test it replaced ran a
# subset of what the stream case checks here.
pytestmark = [pytest.mark.cluster, pytest.mark.airflow, pytest.mark.slow]


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


@pytest.mark.parametrize("dag_id", ["offsetlake_batch", "offsetlake_stream"])
def test_the_dags_run_every_task_on_the_cluster(
    airflow_on_cluster: dict[str, str], executor_env: Path, shipped: Path, tiny_log: Path, tmp_path: Path, dag_id: str
) -> None:
    root = tmp_path / "data"
    root.mkdir()
    (root / "landing").symlink_to(tiny_log, target_is_directory=True)
    conf = _write_conf(
        tmp_path / "conf.yaml",
        root,
        delta={"engine": "spark"},
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
    written = tables(root / "warehouse")
    assert written["group_state"] and written["offsets_current"] and written["dq_results"]
    checks = read_arrow_at(str(root / "warehouse" / "dq_results"), ["suite", "run_id"]).to_pylist()
    assert {r["run_id"].split(":")[0] for r in checks} == {dag_id}
    if dag_id == "offsetlake_stream":
        assert result["tasks"] == {"stream_available_now": "success", "dq": "success"}, result
        assert {r["suite"] for r in checks} == {"group_state", "offsets_current"}
