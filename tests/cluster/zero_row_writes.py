"""Run by ``test_delta_spark`` (a process of its own: its Spark has the delta-spark jars): zero-row
writes into two warehouses, one per engine, then each table's commits and the data files on
disk that no commit mentions, as one JSON line on stdout.

The writes: the decode's routed pass over a small sample (tables the pass gives no rows: the
routed write of an empty table), then a marked append and a marked overwrite of a frame without
rows, and marked MERGEs of an empty source (with and without deleting the missing rows).

Usage: ``python -m tests.cluster.zero_row_writes <root>``
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

#: the marker of the direct zero-row writes
APP = "zero-rows"


def commits(table: Path) -> list[dict[str, Any]]:
    """Each commit of the table's log: operation, files added and removed, txn, marker."""
    out = []
    for entry in sorted((table / "_delta_log").glob("*.json")):
        actions = [json.loads(line) for line in entry.read_text().splitlines() if line.strip()]
        info: dict[str, Any] = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        user = info.get("userMetadata")
        if isinstance(user, str) and user.startswith("{"):
            info = {**info, **json.loads(user)}
        out.append(
            {
                "operation": info.get("operation"),
                "adds": sum(1 for a in actions if "add" in a),
                "removes": sum(1 for a in actions if "remove" in a),
                "txn": [[a["txn"]["appId"], a["txn"]["version"]] for a in actions if "txn" in a],
                "marker": [info.get("offsetlake.txn_app_id"), info.get("offsetlake.txn_version")],
            }
        )
    return out


def main(root: Path) -> None:
    import pyarrow as pa

    from pipelines.batch.decode import write_decoded_from_raw_table
    from pipelines.batch.ingest import ingest
    from pipelines.config import load_config
    from pipelines.inputs.raw_files import write_raw_records
    from pipelines.inputs.sample import sample_records
    from pipelines.runtime.spark_session import build_spark_from_config
    from pipelines.tableio import TableIO
    from pipelines.warehouse.orphans import orphan_files
    from schemas import get as get_spec

    def config(engine: str) -> Any:
        return load_config(
            overrides={"paths.root": str(root / engine), "delta.engine": engine, "spark.master": "local[2]"}
        )

    spark = build_spark_from_config(config("spark"))
    report: dict[str, Any] = {}
    for engine in ("spark", "rust"):
        cfg = config(engine)
        write_raw_records(sample_records(3, seed=4), cfg.paths.landing, rows_per_file=50)
        io = TableIO(cfg, spark)
        ingest(spark, cfg, io)
        decoded = write_decoded_from_raw_table(io, app_id="decode", version=1, expected_rows=io.count("raw_records"))

        def empty(name: str) -> Any:  # an Arrow table without rows (one empty chunk: PySpark converts it)
            return pa.Table.from_pylist([], schema=get_spec(name).arrow_schema())

        def frame(name: str) -> Any:  # a frame whose plan has no rows
            return spark.createDataFrame(empty(name), get_spec(name).spark_schema())

        io.append("rebalances", frame("rebalances"), txn_app_id=APP, txn_version=1)
        io.overwrite("group_transitions", frame("group_transitions"), txn_app_id=APP, txn_version=1)
        io.merge("offsets_current", empty("offsets_current"), txn_app_id=APP, txn_version=1)
        io.merge("group_state", empty("group_state"), delete_missing=True, txn_app_id=APP, txn_version=1)

        warehouse = Path(cfg.paths.warehouse)
        tables = sorted(p for p in warehouse.iterdir() if (p / "_delta_log").is_dir())
        report[engine] = {
            "engine": io.engine,
            "decoded_rows": {name: wr.rows for name, wr in decoded.items()},
            "commits": {p.name: commits(p) for p in tables},
            "unreferenced": {p.name: [f.name for f in orphan_files(p, time.time() + 60)] for p in tables},
        }
    print(json.dumps(report))
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
