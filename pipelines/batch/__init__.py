"""The batch wing: ingest -> decode -> replay -> Delta tables, one path per stage.

- The job that runs the stages is ``pipelines.jobs.batch`` (``offsetlake run batch``, ``spark-submit
  pipelines/jobs/batch.py``, the Airflow DAG's one task, ``bench/batch.py``): stages in order,
  idempotent per raw_records version.
- ``ingest``: landing files -> ``raw_records`` (positions checked, duplicates dropped).
- ``decode``: tasks read raw_records' files, write the five decoded tables and the replay input.
- ``replay``: tasks read the replay input by bucket, replay, and write the gold tables.
"""
