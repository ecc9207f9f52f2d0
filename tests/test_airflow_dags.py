"""Airflow DAGs: they load, their task graphs and parameters come from conf/, and
``offsetlake_batch`` runs end to end with ``dag.test()`` and real spark-submit.

The DagBag tests parse the DAG files in this process. The ``dag.test()`` runs happen in a
subprocess with a temporary ``AIRFLOW_HOME`` (after ``airflow db migrate``), the Spark
connection given as ``AIRFLOW_CONN_SPARK_DEFAULT`` (Airflow 3 JSON format) and the venv's
``bin`` on ``PATH``. ``dag.test()`` returns normally when a task fails, so the run's state and
each task's state are asserted explicitly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.airflow

REPO = Path(__file__).resolve().parents[1]
DAGS = REPO / "airflow_dags"
BIN = Path(sys.executable).parent

BATCH_EDGES = {("batch", "dq"), ("dq", "maintenance")}
STREAM_EDGES = {("stream_available_now", "dq")}

RUN_DAG = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
dag_id, tasks = sys.argv[1], [t for t in sys.argv[2].split(",") if t]
bag = DagBag(dag_folder=sys.argv[3])
assert not bag.import_errors, bag.import_errors
dag = bag.dags[dag_id]
if tasks:
    dag = dag.partial_subset(task_ids=tasks, include_upstream=False, include_downstream=True)
dr = dag.test()
states = {ti.task_id: str(ti.state) for ti in dr.get_task_instances()}
print("RESULT " + json.dumps({"state": str(dr.state), "tasks": states, "run_id": dr.run_id}))
"""


def _generate_args(func: Any, **kwargs: Any) -> dict[str, Any]:
    """Arguments for ``quickstart.generate_sample`` (the simulator's log, 4 coordinator partitions)."""
    import inspect

    kwargs["num_partitions"] = 4
    if "retention_ms" in inspect.signature(func).parameters:
        kwargs["retention_ms"] = 7 * 24 * 3600 * 1000
    return kwargs


def _write_conf(path: Path, root: Path, **sections: dict[str, Any]) -> Path:
    import yaml

    data: dict[str, Any] = {
        "paths": {"root": str(root)},
        "delta": {"engine": "rust", "vacuum_retention_hours": 0},
        "spark": {
            "conf": {"spark.sql.shuffle.partitions": 2, "spark.default.parallelism": 2, "spark.driver.memory": "1g"}
        },
        "airflow": {"conf_path": str(path)},
    }
    for key, value in sections.items():
        data.setdefault(key, {}).update(value)
    path.write_text(yaml.safe_dump(data))
    return path


def _dagbag(monkeypatch: pytest.MonkeyPatch, conf: Path, home: Path) -> Any:
    monkeypatch.setenv("OFFSETLAKE_CONF", str(conf))
    monkeypatch.setenv("AIRFLOW_HOME", str(home))
    monkeypatch.setenv("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS))


def _edges(dag: Any) -> set[tuple[str, str]]:
    return {(t.task_id, d) for t in dag.tasks for d in t.downstream_task_ids}


def test_dagbag_loads_every_dag_with_the_expected_task_graph(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    conf = _write_conf(tmp_path / "conf.yaml", tmp_path / "data")
    bag = _dagbag(monkeypatch, conf, tmp_path / "airflow")

    assert bag.import_errors == {}
    assert set(bag.dag_ids) == {"offsetlake_batch", "offsetlake_stream"}
    assert _edges(bag.dags["offsetlake_batch"]) == BATCH_EDGES
    assert _edges(bag.dags["offsetlake_stream"]) == STREAM_EDGES
    for dag in bag.dags.values():
        assert dag.max_active_runs == 1 and not dag.catchup
        for task in dag.tasks:
            assert Path(task.application).is_file(), task.application
            assert type(task).__name__ == "SparkSubmitOperator"


def test_dag_parameters_are_rendered_from_the_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    root = tmp_path / "data"
    conf = _write_conf(
        tmp_path / "conf.yaml",
        root,
        airflow={
            "batch_schedule": "30 2 * * *",
            "stream_schedule_minutes": 7,
            "spark_conn_id": "spark_test",
            "retries": 3,
            "sla_minutes": 45,
        },
    )
    bag = _dagbag(monkeypatch, conf, tmp_path / "airflow")
    batch, stream = bag.dags["offsetlake_batch"], bag.dags["offsetlake_stream"]

    assert batch.timetable.expression == "30 2 * * *"
    assert stream.timetable.delta.total_seconds() == 7 * 60
    assert batch.dagrun_timeout.total_seconds() == stream.dagrun_timeout.total_seconds() == 45 * 60
    for dag in (batch, stream):
        for task in dag.tasks:
            assert task._conn_id == "spark_test"
            assert task.execution_timeout.total_seconds() == 45 * 60
            assert task.application_args[:4] == ["--conf", str(conf), "--set", f"paths.root={root}"]
            assert task.retries == (0 if task.task_id == "dq" else 3)
            assert task.env_vars["PYSPARK_PYTHON"] == sys.executable
    # one task runs the whole batch job, as ``offsetlake run batch`` does
    assert batch.get_task("batch").application_args[4:] == []
    assert batch.get_task("batch").application.endswith("pipelines/jobs/batch.py")
    assert batch.get_task("dq").application_args[4:6] == ["--suites", "batch"]
    assert stream.get_task("dq").application_args[4:6] == ["--suites", "stream"]
    assert stream.get_task("stream_available_now").application_args[4:] == ["--available-now"]


def test_a_relative_data_root_resolves_against_the_repository_not_the_cwd(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    conf = tmp_path / "conf.yaml"
    conf.write_text(f"paths:\n  root: relative-data\nairflow:\n  conf_path: {conf}\n")
    monkeypatch.chdir(tmp_path)
    bag = _dagbag(monkeypatch, conf, tmp_path / "airflow")

    args = bag.dags["offsetlake_batch"].get_task("batch").application_args
    assert args[3] == f"paths.root={REPO / 'relative-data'}"


def test_the_jobs_get_the_overlay_named_by_offsetlake_conf(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # a user's overlay without an airflow section, named relative to the working directory:
    # before, the DAGs failed to find it (resolved against the repository) or, found, gave the
    # jobs --conf conf/local.yaml (airflow.conf_path's default) and local.yaml's warehouse
    (tmp_path / "my.yaml").write_text(f"paths:\n  root: {tmp_path / 'mine'}\n")
    monkeypatch.chdir(tmp_path)
    bag = _dagbag(monkeypatch, Path("my.yaml"), tmp_path / "airflow")

    assert bag.import_errors == {}
    for dag in bag.dags.values():
        for task in dag.tasks:
            assert task.application_args[:4] == [
                "--conf",
                str(tmp_path / "my.yaml"),
                "--set",
                f"paths.root={tmp_path / 'mine'}",
            ], task.task_id
            assert task.env_vars["OFFSETLAKE_CONF"] == str(tmp_path / "my.yaml")


# ---- end to end with dag.test() ---------------------------------------------------------------
def _corrupt_record(landing: Path) -> None:
    """Append one record whose value is truncated mid-struct (decode quarantines it)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipelines.inputs.raw_files import iter_raw_batches
    from schemas.raw import RAW_RECORDS

    table = pa.Table.from_batches(list(iter_raw_batches(landing)))
    rows = table.to_pylist()
    commit = next(r for r in rows if r["value"] is not None and r["key"][:2] in (b"\x00\x00", b"\x00\x01"))
    last = max(r["offset"] for r in rows if r["partition"] == commit["partition"])
    bad = dict(commit, value=commit["value"][:5], offset=last + 1)
    pq.write_table(pa.Table.from_pylist([bad], RAW_RECORDS.arrow_schema()), landing / "part-99999999.parquet")


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("airflow_home")
    env = dict(os.environ)
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
    )
    migrate = subprocess.run(
        [str(BIN / "airflow"), "db", "migrate"], env=env, capture_output=True, text=True, timeout=600
    )
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    return env


def _dag_test(env: dict[str, str], conf: Path, dag_id: str, tasks: str = "") -> dict[str, Any]:
    run_env = dict(env, OFFSETLAKE_CONF=str(conf))
    proc = subprocess.run(
        [sys.executable, "-c", RUN_DAG, dag_id, tasks, str(DAGS)],
        env=run_env,
        capture_output=True,
        text=True,
        timeout=2400,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, (proc.stdout[-4000:], proc.stderr[-6000:])
    return dict(json.loads(lines[-1][len("RESULT ") :]))


@pytest.mark.slow
@pytest.mark.spark
def test_a_failed_dq_fails_the_batch_run_and_skips_maintenance(airflow_env: dict[str, str], tmp_path: Path) -> None:
    """The whole DAG on a cluster, every task succeeding, is ``tests/cluster/test_airflow_cluster.py``'s."""
    from deltalake import DeltaTable

    from pipelines.commands.quickstart import generate_sample

    root = tmp_path / "data"
    landing = root / "landing"
    n, _ = generate_sample(landing, **_generate_args(generate_sample, groups=3, hours=0.25, seed=5))
    _corrupt_record(landing)  # 1 quarantined record: over 0 %
    conf = _write_conf(tmp_path / "conf.yaml", root, dq={"quarantine_max_fraction": 0.0})
    batch = subprocess.run(
        [sys.executable, "-m", "pipelines", "run", "batch", "--conf", str(conf)],
        env=airflow_env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert batch.returncode == 0, batch.stderr[-3000:]
    warehouse = root / "warehouse"
    assert DeltaTable(str(warehouse / "raw_records")).count() == n + 1
    assert DeltaTable(str(warehouse / "quarantine")).count() == 1

    # no quarantine allowed: the dq task fails, maintenance does not run, and the DAG run fails
    failed = _dag_test(airflow_env, conf, "offsetlake_batch", "dq")

    assert failed["state"] == "failed", failed
    assert failed["tasks"]["dq"] == "failed"
    assert failed["tasks"]["maintenance"] == "upstream_failed"
    rows = DeltaTable(str(warehouse / "dq_results")).to_pyarrow_table().to_pylist()
    latest = [r for r in rows if r["run_id"].startswith(f"offsetlake_batch:{failed['run_id']}")]
    assert [r["expectation"] for r in latest if not r["success"]] == ["quarantined_fraction_under_threshold"]
