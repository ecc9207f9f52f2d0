"""offsetlake_stream: incremental catch-up with the streaming job, then dq on the gold tables.

Every ``airflow.stream_schedule_minutes`` the streaming job runs with ``--available-now``: it
processes what arrived since the last run from the same checkpoint and stops (cheap, exactly
once). With ``kafka.bootstrap_servers`` configured it samples end offsets (lag) when
it ends (``pipelines.kafka.end_offsets``). Then the data-quality suites of the gold tables run (``--suites stream``); a failed
blocking check fails the run. One run at a time (the checkpoint is shared).
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import DAG

from airflow_dags.common import default_args, load_settings, spark_job

DAG_ID = "offsetlake_stream"
settings = load_settings()

with DAG(
    dag_id=DAG_ID,
    description="Catch up offsetlake's streaming replay (availableNow) and check the gold tables",
    schedule=settings.stream_every,
    start_date=datetime(2024, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,  # one streaming query per checkpoint
    default_args=default_args(settings),
    dagrun_timeout=settings.sla,
    tags=["offsetlake", "stream"],
    doc_md=__doc__,
) as dag:
    stream = spark_job(settings, "stream_available_now", "pipelines/jobs/stream.py", ["--available-now"])
    dq = spark_job(
        settings,
        "dq",
        "pipelines/jobs/dq.py",
        ["--suites", "stream", "--run-id", "{{ dag.dag_id }}:{{ run_id }}:{{ ti.try_number }}"],
        retries=0,
    )

    stream >> dq
