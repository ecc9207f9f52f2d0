"""Data-quality suites: pass on a clean generated run, catch each deliberately broken table.

The clean warehouse is the real pipeline's output (a generated log through ``run_batch``).
Broken tables are written directly with delta-rs (``write_deltalake`` / ``DeltaTable.delete``):
they are the input of the thing under test, which is ``run_quality`` and ``offsetlake dq``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

pytestmark = pytest.mark.spark


def _generate_args(func: Any, **kwargs: Any) -> dict[str, Any]:
    """Arguments for ``quickstart.generate_sample`` (the simulator's log, 4 coordinator partitions)."""
    import inspect

    kwargs["num_partitions"] = 4
    if "retention_ms" in inspect.signature(func).parameters:
        kwargs["retention_ms"] = 7 * 24 * 3600 * 1000
    return kwargs


def _conf(root: Path, **dq: Any) -> Any:
    from pipelines.config import config_from_dict

    return config_from_dict(
        {
            "paths": {"root": str(root)},
            "delta": {"engine": "rust"},
            "spark": {"conf": {"spark.sql.shuffle.partitions": 2}},
            **({"dq": dq} if dq else {}),
        }
    )


def _table(conf: Any, name: str) -> pa.Table:
    from deltalake import DeltaTable

    return DeltaTable(conf.table_path(name)).to_pyarrow_table()


def _write(conf: Any, name: str, data: pa.Table, mode: str = "overwrite") -> None:
    from deltalake import write_deltalake

    import schemas

    write_deltalake(conf.table_path(name), data.cast(schemas.get(name).arrow_schema()), mode=mode)


def _outcome(report: Any, suite: str, expectation: str) -> Any:
    found = [o for o in report.outcomes if o.suite == suite and o.expectation == expectation]
    assert found, f"{suite}.{expectation} not evaluated; got {[(o.suite, o.expectation) for o in report.outcomes]}"
    return found[0]


def _failed(report: Any) -> set[str]:
    return {f"{o.suite}.{o.expectation}" for o in report.outcomes if not o.success}


@pytest.fixture(scope="module")
def clean_root(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> Path:
    """A warehouse built by the real batch job from a small generated log."""
    from pipelines.commands.quickstart import generate_sample
    from pipelines.jobs.batch import run_batch

    root = tmp_path_factory.mktemp("dq_clean")
    conf = _conf(root)
    n, _ = generate_sample(conf.paths.landing, **_generate_args(generate_sample, groups=4, hours=0.25, seed=11))
    assert n > 0
    summary = run_batch(conf, spark)
    assert summary.reconciled and summary.groups > 0
    return root


@pytest.fixture()
def broken_root(clean_root: Path, tmp_path: Path) -> Path:
    """A private copy of the clean warehouse for one test to break."""
    root = tmp_path / "data"
    shutil.copytree(clean_root, root, ignore=shutil.ignore_patterns("dq_docs"))
    for name in ("dq_results", "dq_group_generations"):
        shutil.rmtree(root / "warehouse" / name, ignore_errors=True)
    return root


@pytest.fixture(scope="module")
def clean_report(clean_root: Path, spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    from pipelines.quality.runner import run_quality

    root = tmp_path_factory.mktemp("dq_clean_run") / "data"
    shutil.copytree(clean_root, root)
    conf = _conf(root)
    return conf, run_quality(conf, spark, run_id="clean-run")


def test_every_suite_passes_on_a_clean_generated_run(clean_report: tuple[Any, Any]) -> None:
    from pipelines.quality.suites import SUITES

    _, report = clean_report
    assert report.success, report.blocking_failures
    assert not _failed(report), _failed(report)
    assert {o.suite for o in report.outcomes} == {s.name for s in SUITES}
    reconciliation = json.loads(_outcome(report, "reconciliation", "raw_equals_decoded_plus_set_aside").observed_value)
    assert reconciliation["unaccounted"] == 0 and reconciliation["raw_records"] > 0


def test_results_are_appended_to_dq_results_and_data_docs_are_built(clean_report: tuple[Any, Any]) -> None:
    conf, report = clean_report
    rows = _table(conf, "dq_results").to_pylist()
    assert len(rows) == len(report.outcomes)
    assert {r["run_id"] for r in rows} == {"clean-run"}
    by_name = {(r["suite"], r["expectation"]): r for r in rows}
    row = by_name[("raw_records", "offset_unique")]
    assert row["success"] is True and row["blocking"] is True and row["target"] == "raw_records.keys"
    observed = json.loads(row["observed_value"])
    assert observed["repeated_rows"] == 0 and observed["rows"] == observed["keys"] > 0, observed
    assert report.docs_index and Path(report.docs_index).is_file()
    validations = list(Path(conf.paths.dq_docs, "validations").rglob("*.html"))
    assert validations, "GX data docs have no validation pages"


def test_data_docs_index_is_our_page_and_opens_offline_in_headless_chromium(
    clean_report: tuple[Any, Any], tmp_path: Path
) -> None:
    """A real browser with no network opens ``paths.dq_docs/index.html``: every expectation of
    the run is rendered with its result, the run is in the history read back from dq_results, and
    the console stays empty (GX's CDN-styled index is kept beside it as gx-index.html)."""
    from tests.pipelines.browser import render_offline

    conf, report = clean_report
    index = Path(conf.paths.dq_docs, "index.html")
    run = render_offline(index, tmp_path / "profile")

    assert run.console == []
    for o in report.outcomes:
        row = f'<tr data-expectation="{o.suite}.{o.expectation}">'
        assert row in run.dom, f"{o.suite}.{o.expectation} not rendered"
        cells = run.dom.split(row, 1)[1].split("</tr>", 1)[0]
        assert "<td>PASS</td>" in cells and ("<td>blocking</td>" if o.blocking else "<td>warning</td>") in cells
    history = run.dom.split('<section id="history">', 1)[1]
    assert f"{report.run_id} (this run)" in history and str(len(report.outcomes)) in history
    assert report.docs_index == str(index) and Path(conf.paths.dq_docs, "gx-index.html").is_file()


def test_duplicate_offsets_fail_raw_records_uniqueness_and_reconciliation(broken_root: Path, spark: Any) -> None:
    from pipelines.quality.runner import run_quality

    conf = _conf(broken_root)
    raw = _table(conf, "raw_records")
    _write(conf, "raw_records", raw.slice(0, 3), mode="append")  # a non-idempotent re-ingest

    report = run_quality(conf, spark, suites="raw_records,reconciliation", write_results=False, build_docs=False)

    assert not report.success
    unique = _outcome(report, "raw_records", "offset_unique")
    observed = json.loads(unique.observed_value)
    assert not unique.success and unique.blocking and observed["repeated_rows"] == 6  # 3 records, twice each
    assert observed["rows"] - observed["keys"] == 3 and observed["example"], observed
    counts = json.loads(_outcome(report, "reconciliation", "raw_equals_decoded_plus_set_aside").observed_value)
    assert counts["unaccounted"] == 3
    assert _failed(report) == {"raw_records.offset_unique", "reconciliation.raw_equals_decoded_plus_set_aside"}


def test_a_run_leaves_nothing_cached_in_the_session(broken_root: Path, spark: Any) -> None:
    """GX caches every frame it validates unless told not to, whole and for good: at 10M records
    that cache spilled and cost more than the checks (bench/RESULTS.md, *dq*)."""
    from pipelines.quality.runner import run_quality

    spark.catalog.clearCache()
    report = run_quality(_conf(broken_root), spark, write_results=False, build_docs=False)
    assert report.success
    assert spark.sparkContext._jsc.getPersistentRDDs().isEmpty()


def test_an_invalid_group_state_is_caught(broken_root: Path, spark: Any) -> None:
    from pipelines.quality.runner import run_quality

    conf = _conf(broken_root)
    gs = _table(conf, "group_state")
    states = gs.column("state").to_pylist()
    states[0] = "Rebalancing"  # not one of Kafka's five states
    _write(conf, "group_state", gs.set_column(gs.schema.get_field_index("state"), "state", pa.array(states)))

    report = run_quality(conf, spark, suites="group_state", write_results=False, build_docs=False)

    outcome = _outcome(report, "group_state", "state_is_a_kafka_state")
    assert not outcome.success and outcome.unexpected_count == 1
    assert "Rebalancing" in json.loads(outcome.observed_value)["sample"]
    assert _failed(report) == {"group_state.state_is_a_kafka_state"}
    assert not report.success


def test_a_group_listed_twice_breaks_one_row_per_group(broken_root: Path, spark: Any) -> None:
    from pipelines.quality.runner import run_quality

    conf = _conf(broken_root)
    _write(conf, "group_state", _table(conf, "group_state").slice(0, 1), mode="append")

    report = run_quality(conf, spark, suites="group_state", write_results=False, build_docs=False)

    assert _failed(report) == {"group_state.one_row_per_group"}


def test_a_quarantine_spike_fails_the_threshold_while_counts_still_reconcile(broken_root: Path, spark: Any) -> None:
    from deltalake import DeltaTable

    from pipelines.quality.runner import run_quality

    conf = _conf(broken_root, quarantine_max_fraction=0.05)
    raw = _table(conf, "raw_records")
    commits = _table(conf, "offset_commits")
    spike = max(2, int(raw.num_rows * 0.2))
    moved = commits.slice(0, spike)
    positions = set(zip(moved.column("coordinator_partition").to_pylist(), moved.column("log_offset").to_pylist()))
    mask = [(p, o) in positions for p, o in zip(raw.column("partition").to_pylist(), raw.column("offset").to_pylist())]
    bad = raw.filter(pa.array(mask)).select(["key", "value", "topic", "partition", "offset", "timestamp"])
    n = bad.num_rows
    quarantined = (
        bad.append_column("error_class", pa.array(["CorruptRecordError"] * n))
        .append_column("error_message", pa.array(["injected"] * n))
        .append_column("part", pa.array(["value"] * n))
        .append_column("byte_position", pa.array([0] * n, pa.int32()))
        .append_column("record_type", pa.array([1] * n, pa.int32()))
        .append_column("version", pa.array([3] * n, pa.int32()))
    )
    _write(conf, "quarantine", quarantined, mode="append")
    keep = pc.invert(
        pa.array(
            [
                (p, o) in positions
                for p, o in zip(
                    commits.column("coordinator_partition").to_pylist(), commits.column("log_offset").to_pylist()
                )
            ]
        )
    )
    DeltaTable(conf.table_path("offset_commits")).delete()  # rewrite without the moved rows
    _write(conf, "offset_commits", commits.filter(keep))

    report = run_quality(conf, spark, suites="quarantine,reconciliation", write_results=False, build_docs=False)

    outcome = _outcome(report, "quarantine", "quarantined_fraction_under_threshold")
    observed = json.loads(outcome.observed_value)
    assert not outcome.success and outcome.blocking
    assert observed["quarantine"] >= n and observed["quarantined_fraction"] > 0.05
    assert _outcome(report, "reconciliation", "raw_equals_decoded_plus_set_aside").success
    assert not report.success


def test_a_generation_lower_than_at_the_previous_run_fails_until_fixed(broken_root: Path, spark: Any) -> None:
    from pipelines.quality.runner import run_quality

    conf = _conf(broken_root)
    first = run_quality(conf, spark, suites="group_state", build_docs=False)
    assert first.success, first.blocking_failures
    gs = _table(conf, "group_state")
    gens = gs.column("generation").to_pylist()
    states = gs.column("state").to_pylist()
    i = max(range(len(gens)), key=lambda k: (states[k] != "Dead", gens[k] or 0))
    assert gens[i] and gens[i] > 0, "the generated log has a group past generation 0"
    gens[i] = gens[i] - 1
    _write(
        conf,
        "group_state",
        gs.set_column(gs.schema.get_field_index("generation"), "generation", pa.array(gens, pa.int32())),
    )

    second = run_quality(conf, spark, suites="group_state", build_docs=False)
    third = run_quality(conf, spark, suites="group_state", build_docs=False)  # e.g. an Airflow retry

    for report in (second, third):
        outcome = _outcome(report, "group_state", "generation_not_decreasing")
        assert not outcome.success and json.loads(outcome.observed_value)["decreased_generations"] == 1
        assert not report.success


def test_duplicate_current_offsets_are_caught(broken_root: Path, spark: Any) -> None:
    from pipelines.quality.runner import run_quality

    conf = _conf(broken_root)
    _write(conf, "offsets_current", _table(conf, "offsets_current").slice(0, 2), mode="append")

    report = run_quality(conf, spark, suites="stream", write_results=False, build_docs=False)

    assert {o.suite for o in report.outcomes} == {"group_state", "offsets_current"}
    assert _failed(report) == {"offsets_current.one_row_per_group_topic_partition"}


def test_commits_without_timestamp_or_with_a_foreign_key_version_are_caught(broken_root: Path, spark: Any) -> None:
    from pipelines.quality.runner import run_quality

    conf = _conf(broken_root)
    oc = _table(conf, "offset_commits")
    live = [i for i, t in enumerate(oc.column("is_tombstone").to_pylist()) if not t]
    ts = oc.column("commit_timestamp").to_pylist()
    ts[live[0]] = None
    versions = oc.column("key_version").to_pylist()
    versions[live[1]] = 2
    oc = oc.set_column(
        oc.schema.get_field_index("commit_timestamp"),
        "commit_timestamp",
        pa.array(ts, oc.schema.field("commit_timestamp").type),
    )
    oc = oc.set_column(oc.schema.get_field_index("key_version"), "key_version", pa.array(versions, pa.int32()))
    _write(conf, "offset_commits", oc)

    report = run_quality(conf, spark, suites="offset_commits", write_results=False, build_docs=False)

    assert _failed(report) == {"offset_commits.commit_timestamp_present", "offset_commits.key_version_0_or_1"}


def test_implausible_session_timeouts_warn_unless_conf_makes_them_blocking(broken_root: Path, spark: Any) -> None:
    from pipelines.quality.runner import run_quality

    name = "group_metadata.session_timeout_within_broker_bounds"
    lenient = _conf(broken_root, session_timeout_min_ms=1, session_timeout_max_ms=2)  # every member outside
    report = run_quality(lenient, spark, suites="group_metadata", write_results=False, build_docs=False)
    assert _failed(report) == {name}
    assert report.success and [f"{o.suite}.{o.expectation}" for o in report.warnings] == [name]

    strict = _conf(broken_root, session_timeout_min_ms=1, session_timeout_max_ms=2, blocking=[name])
    report = run_quality(strict, spark, suites="group_metadata", write_results=False, build_docs=False)
    assert not report.success and [f"{o.suite}.{o.expectation}" for o in report.blocking_failures] == [name]


def test_a_missing_table_fails_the_gate_instead_of_passing_silently(broken_root: Path, spark: Any) -> None:
    from pipelines.quality.runner import run_quality

    conf = _conf(broken_root)
    shutil.rmtree(conf.table_path("offsets_current"))

    report = run_quality(conf, spark, suites="offsets_current", write_results=False, build_docs=False)

    assert _failed(report) == {"offsets_current.tables_present"} and not report.success


def test_dq_command_exits_nonzero_on_a_blocking_failure_and_zero_when_clean(
    broken_root: Path, spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipelines.cli import main

    conf_file = tmp_path / "dq.yaml"
    conf_file.write_text(f"paths:\n  root: {broken_root}\ndelta:\n  engine: rust\n")
    args = ["dq", "--conf", str(conf_file), "--suites", "group_state", "--no-docs"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "state_is_a_kafka_state" in out and "PASS" in out

    conf = _conf(broken_root)
    gs = _table(conf, "group_state")
    states = ["Unknown"] * gs.num_rows
    _write(conf, "group_state", gs.set_column(gs.schema.get_field_index("state"), "state", pa.array(states)))
    assert main(args) == 1
    captured = capsys.readouterr()
    assert "group_state.state_is_a_kafka_state" in captured.err
    assert main(["dq", "--conf", str(conf_file), "--suites", "nope"]) == 2
