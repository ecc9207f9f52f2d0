"""offsetlake_batch: the batch job (ingest → decode → replay) → dq → Delta maintenance, on a schedule.

Every task is a spark-submit of the project's entry scripts with the config from ``conf/`` (see
``airflow_dags/common.py`` and ``airflow_dags/README.md``); no business logic here. The batch job
is ONE task, exactly what ``offsetlake run batch`` and ``bench/batch.py`` run: one JVM start for
the three stages, and the decode pass hands the replay its input by bucket on the one path
(``pipelines/batch/replay.py``). A retry reruns the job, which skips every stage already
committed for the same raw_records version, so retry granularity is not lost.
With ``kafka.bootstrap_servers`` configured the job also samples end offsets (lag) after its
replay, inside the same submit (``pipelines.kafka.end_offsets.scheduled_sample``).
Schedule: ``airflow.batch_schedule``; retries: ``airflow.retries`` (dq: none); run and task
timeouts: ``airflow.sla_minutes``. A failed blocking data-quality check fails the ``dq`` task,
skips maintenance and fails the run.
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import DAG

from airflow_dags.common import default_args, load_settings, spark_job

DAG_ID = "offsetlake_batch"
settings = load_settings()

with DAG(
    dag_id=DAG_ID,
    description="Rebuild offsetlake's Delta tables from __consumer_offsets, check them, compact them",
    schedule=settings.batch_schedule,
    start_date=datetime(2024, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,  # stages share the warehouse: never two runs at once
    default_args=default_args(settings),
    dagrun_timeout=settings.sla,
    tags=["offsetlake", "batch"],
    doc_md=__doc__,
) as dag:
    batch = spark_job(settings, "batch", "pipelines/jobs/batch.py")
    dq = spark_job(
        settings,
        "dq",
        "pipelines/jobs/dq.py",
        ["--suites", "batch", "--run-id", "{{ dag.dag_id }}:{{ run_id }}:{{ ti.try_number }}"],
        retries=0,  # a failed expectation is deterministic: retrying cannot fix the data
    )
    maintenance = spark_job(settings, "maintenance", "pipelines/jobs/maintenance.py")

    batch >> dq >> maintenance
