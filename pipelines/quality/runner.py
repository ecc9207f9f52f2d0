"""Run the quality suites with Great Expectations on Spark and record the results.

Rules:
- One ephemeral GX context per run (nothing persisted by GX except the data docs folder); one
  Spark datasource (frames not persisted) and one pandas datasource for the summary targets'
  collected rows; per target a dataframe asset, a whole-dataframe batch definition, an
  ``ExpectationSuite`` named ``<target>`` and a ``ValidationDefinition`` run with the run id.
- Tables are read through ``pipelines.tableio.TableIO`` (either Delta engine). A suite whose
  tables are missing yields one failed, blocking ``tables_present`` row instead of an error,
  so a pipeline that silently wrote nothing fails its quality gate.
- Results: one ``dq_results`` row per expectation (append, one commit per run), GX data docs
  rebuilt under ``paths.dq_docs`` (local paths only; remote URIs skip the docs with a warning),
  GX's site index renamed ``gx-index.html`` and ``index.html`` replaced by offsetlake's own
  self-contained page (``page.py``: this run's outcomes and the recent runs from ``dq_results``),
  which works offline where GX's CDN-styled pages do not.
- The group-generation baseline (``dq_group_generations``) is replaced only when the
  ``generation_not_decreasing`` check passed, so an Airflow retry of a failed run fails again
  instead of comparing against the bad data it just recorded.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re
import uuid
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import schemas
from pipelines.quality.page import GX_INDEX_NAME, HISTORY_RUNS, PAGE_NAME, RunSummary, write_page
from pipelines.quality.report import DqReport, Outcome
from pipelines.quality.suites import Baseline, Check, Suite, Target, is_blocking, select_suites
from pipelines.tableio import TableIO
from schemas.dq import DQ_RESULTS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from pipelines.config import Config

log = logging.getLogger(__name__)

BASELINE_TABLE = "dq_group_generations"
_SAMPLE = 5


class LazyFrames(Mapping[str, "DataFrame"]):
    """Tables by name, read through ``TableIO`` on first use; missing tables are absent keys."""

    def __init__(self, io: TableIO, names: tuple[str, ...]) -> None:
        self._io = io
        self._names = names
        self._cache: dict[str, DataFrame] = {}
        self._exists: dict[str, bool] = {}

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        if name not in self._exists:
            self._exists[name] = self._io.exists(name)
        return self._exists[name]

    def __getitem__(self, name: str) -> DataFrame:
        if name not in self:
            raise KeyError(name)
        if name not in self._cache:
            self._cache[name] = self._io.read(name)
        return self._cache[name]

    def __iter__(self) -> Iterator[str]:
        return iter(n for n in self._names if n in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def new_run_id(now: dt.datetime | None = None) -> str:
    """``dq-<UTC time>-<6 hex>``: sortable and unique."""
    now = now or dt.datetime.now(dt.UTC)
    return f"dq-{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


def _quiet_gx() -> None:
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    for name in ("great_expectations", "great_expectations.core", "great_expectations.data_context"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _docs_dir(conf: Config) -> str | None:
    path = conf.paths.dq_docs
    if path.startswith("file:"):
        path = re.sub(r"^file:/*", "/", path)
    elif re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", path):
        log.warning("paths.dq_docs %s is not a local folder: data docs are not built", path)
        return None
    return path


def _new_context(docs_dir: str | None) -> Any:
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    if docs_dir is not None:
        context.add_data_docs_site(
            site_name="offsetlake",
            site_config={
                "class_name": "SiteBuilder",
                "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": docs_dir},
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            },
        )
    return context


def _json(value: Any) -> str:
    def default(o: Any) -> Any:
        if isinstance(o, (bytes, bytearray)):
            return o.hex()
        if isinstance(o, (dt.datetime, dt.date)):
            return o.isoformat()
        return str(o)

    return json.dumps(value, default=default, sort_keys=False)


def _asset_name(target: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", target)


def _validate(
    context: Any,
    datasource: Any,
    suite: Suite,
    target: Target,
    df: Any,
    summary_row: dict[str, Any] | None,
    conf: Config,
    run_identifier: Any,
) -> list[Outcome]:
    import great_expectations as gx

    asset = datasource.add_dataframe_asset(name=_asset_name(target.name))
    batch = asset.add_batch_definition_whole_dataframe("whole")
    gx_suite = context.suites.add(gx.ExpectationSuite(name=target.name))
    checks: dict[str, tuple[Check, bool]] = {}
    for check in target.checks:
        blocking = is_blocking(suite.name, check, conf.dq)
        expectation = check.expectation(conf.dq, blocking)
        expectation.meta = {"check": check.name, "suite": suite.name, "blocking": blocking}
        if check.doc:
            expectation.notes = check.doc
        gx_suite.add_expectation(expectation)
        checks[check.name] = (check, blocking)
    vd = context.validation_definitions.add(
        gx.ValidationDefinition(name=f"{target.name}.validation", data=batch, suite=gx_suite)
    )
    result = vd.run(batch_parameters={"dataframe": df}, result_format="SUMMARY", run_id=run_identifier)
    outcomes: list[Outcome] = []
    for r in result.results:
        cfg = r.expectation_config
        name = (cfg.meta or {}).get("check", cfg.type)
        _, blocking = checks.get(name, (None, True))
        kwargs = {k: v for k, v in cfg.kwargs.items() if k not in ("batch_id",)}
        res = dict(r.result or {})
        error = None
        if r.exception_info and r.exception_info.get("raised_exception"):
            error = str(r.exception_info.get("exception_message"))[:2000]
        if summary_row is not None:
            column = str(kwargs.get("column"))
            observed: Any = {column: summary_row.get(column), **{k: v for k, v in summary_row.items() if k != column}}
        elif "observed_value" in res:
            observed = res["observed_value"]
        elif "unexpected_count" in res:
            observed = {
                "unexpected_count": res.get("unexpected_count"),
                "element_count": res.get("element_count"),
                "unexpected_percent": res.get("unexpected_percent"),
                "sample": (res.get("partial_unexpected_list") or [])[:_SAMPLE],
            }
        else:
            observed = None
        outcomes.append(
            Outcome(
                suite=suite.name,
                target=target.name,
                expectation=name,
                expectation_type=cfg.type,
                kwargs=_json(kwargs),
                blocking=blocking,
                success=bool(r.success),
                observed_value=None if observed is None else _json(observed),
                element_count=res.get("element_count"),
                unexpected_count=res.get("unexpected_count"),
                error=error,
            )
        )
    return outcomes


def _read_baseline(io: TableIO) -> Baseline:
    if not io.exists(BASELINE_TABLE):
        return Baseline()
    return Baseline(group_generations=io.read(BASELINE_TABLE))


def run_quality(
    conf: Config,
    spark: SparkSession,
    *,
    suites: str | None = None,
    run_id: str | None = None,
    io: TableIO | None = None,
    write_results: bool = True,
    build_docs: bool = True,
    update_baseline: bool = True,
) -> DqReport:
    """Validate the selected suites and record the results.

    Args:
        conf: the loaded config (``dq`` thresholds, ``paths.dq_docs``, the warehouse).
        spark: the session the tables are read with.
        suites: ``None``/``all``, a group (``batch``, ``stream``) or comma-separated suite names.
        run_id: the run's id (default: ``new_run_id()``); Airflow passes its own.
        io: a ``TableIO`` (default: one for ``conf``/``spark``).
        write_results: append the outcomes to ``dq.results_table``.
        build_docs: rebuild GX data docs under ``paths.dq_docs``.
        update_baseline: record group generations for the next run's comparison.

    Raises:
        ValueError: an unknown suite name.
    """
    from great_expectations.core.run_identifier import RunIdentifier

    _quiet_gx()
    chosen = select_suites(suites)
    io = io or TableIO(conf, spark)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    report = DqReport(run_id=run_id or new_run_id(now), run_timestamp=now)
    all_tables = tuple(dict.fromkeys(t for s in chosen for t in s.tables))
    frames = LazyFrames(
        io,
        (
            *all_tables,
            "raw_records",
            "offset_commits",
            "group_metadata",
            "group_records",
            "quarantine",
            "unsupported_records",
        ),
    )
    baseline = _read_baseline(io)
    docs_dir = _docs_dir(conf) if build_docs else None
    context = _new_context(docs_dir)
    # not persisted: GX caches every batch frame whole (all columns) and never releases it; at 10M
    # records that cache spilled and cost more than the checks (bench/RESULTS.md, *dq*)
    datasource = context.data_sources.add_spark(name="offsetlake", persist=False)
    # a summary target's one row is validated on GX's pandas engine: on Spark each costs jobs
    summaries = context.data_sources.add_pandas(name="offsetlake-summaries")
    run_identifier = RunIdentifier(run_name=report.run_id, run_time=now)

    for suite in chosen:
        missing = [t for t in suite.tables if t not in frames]
        if missing:
            report.outcomes.append(_tables_missing(suite, missing, conf))
            continue
        for target in suite.targets:
            df, row = _target_frame(target, frames, baseline)
            log.info("dq: validating %s", target.name)
            source = datasource if row is None else summaries
            outcomes = _validate(context, source, suite, target, df, row, conf, run_identifier)
            report.outcomes.extend(outcomes)

    gx_index = _build_gx_docs(context, docs_dir) if docs_dir is not None else None
    if write_results and report.outcomes:
        report.results_table = _write_results(conf, spark, io, report)
    if docs_dir is not None:
        history = read_history(io, _results_table(conf.dq.results_table))
        report.docs_index = write_page(docs_dir, report, history, gx_index=gx_index)
    if update_baseline and _generation_ok(report.outcomes) and "group_state" in frames:
        _save_baseline(io, frames["group_state"], report.run_id)
    return report


def _build_gx_docs(context: Any, docs_dir: str) -> str | None:
    """GX's data docs in ``docs_dir``; its index loads its assets from CDNs, so it is kept beside
    our offline page (which is ``index.html``) under ``GX_INDEX_NAME``, returned (None: GX wrote
    no index)."""
    os.makedirs(docs_dir, exist_ok=True)
    context.build_data_docs()
    if not os.path.isfile(os.path.join(docs_dir, PAGE_NAME)):
        return None
    os.replace(os.path.join(docs_dir, PAGE_NAME), os.path.join(docs_dir, GX_INDEX_NAME))
    return GX_INDEX_NAME


def _tables_missing(suite: Suite, missing: list[str], conf: Config) -> Outcome:
    """The failed, blocking ``tables_present`` row of a suite whose tables are missing."""
    return Outcome(
        suite.name,
        suite.name,
        "tables_present",
        "table_exists",
        _json({"tables": list(suite.tables)}),
        True,
        False,
        _json({"missing": missing, "warehouse": conf.paths.warehouse}),
    )


def _target_frame(target: Target, frames: LazyFrames, baseline: Baseline) -> tuple[Any, dict[str, Any] | None]:
    """The target's Spark dataframe, or for a summary target its one row (collected once) as a
    pandas frame, with the row."""
    import pandas as pd

    df = target.build(frames, baseline)
    if not target.summary:
        return df, None
    collected = df.collect()
    row: dict[str, Any] = collected[0].asDict() if collected else {}
    return pd.DataFrame([row], columns=df.columns), row


def _generation_ok(outcomes: list[Outcome]) -> bool | None:
    """The (last) ``generation_not_decreasing`` result; ``None`` when it did not run."""
    generation_ok: bool | None = None
    for o in outcomes:
        if o.expectation == "generation_not_decreasing":
            generation_ok = o.success
    return generation_ok


def _write_results(conf: Config, spark: SparkSession, io: TableIO, report: DqReport) -> str:
    """Append the outcomes to ``dq.results_table`` (one commit); returns the table's name."""

    name = _results_table(conf.dq.results_table)
    rows = report.rows()
    df = spark.createDataFrame([tuple(r[c] for c in DQ_RESULTS.column_names) for r in rows], DQ_RESULTS.spark_schema())
    io.append(name, df)
    return name


def read_history(io: TableIO, table: str, limit: int = HISTORY_RUNS) -> list[RunSummary]:
    """The newest ``limit`` runs recorded in the results table, newest first (empty if absent)."""
    from pyspark.sql import functions as F

    if not io.exists(table):
        return []
    failed = ~F.col("success")
    summary = (
        io.read(table)
        .groupBy("run_id")
        .agg(
            F.max("run_timestamp").alias("run_timestamp"),
            F.count(F.lit(1)).alias("expectations"),
            F.sum(F.col("success").cast("long")).alias("passed"),
            F.sum((failed & F.col("blocking")).cast("long")).alias("blocking_failures"),
            F.sum((failed & ~F.col("blocking")).cast("long")).alias("warnings"),
        )
        .orderBy(F.col("run_timestamp").desc(), F.col("run_id").desc())
        .limit(limit)
    )
    return [
        RunSummary(
            r["run_id"], r["run_timestamp"], r["expectations"], r["passed"], r["blocking_failures"], r["warnings"]
        )
        for r in summary.collect()
    ]


def _save_baseline(io: TableIO, group_state: DataFrame, run_id: str) -> None:
    """Replace the group-generation baseline with this run's ``group_state``."""
    from pyspark.sql import functions as F

    gs = group_state.select(
        "group_id", F.col("generation").cast("int").alias("generation"), "state", F.lit(run_id).alias("run_id")
    )
    io.overwrite(BASELINE_TABLE, gs)


def _results_table(name: str) -> str:
    """The results table's name; a name other than ``dq_results`` (``dq.results_table``) is
    registered as an alias of the ``dq_results`` spec so TableIO can write it."""
    import dataclasses

    if name not in schemas.TABLES:
        schemas.TABLES[name] = dataclasses.replace(DQ_RESULTS, name=name)
    elif schemas.TABLES[name].column_names != DQ_RESULTS.column_names:
        raise ValueError(f"dq.results_table {name!r} is another table of the platform")
    return name


def format_summary(report: DqReport) -> str:
    """A fixed-width text table of the outcomes, failures first, then a one-line verdict."""
    header = ("suite", "target", "expectation", "ok", "blocking", "observed")
    ordered = sorted(report.outcomes, key=lambda o: (o.success, not o.blocking, o.suite, o.target))
    lines = [
        (
            o.suite,
            o.target,
            o.expectation,
            "PASS" if o.success else "FAIL",
            "yes" if o.blocking else "no",
            _short(f"error: {o.error}" if o.error else _readable(o.observed_value)),
        )
        for o in ordered
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *lines)]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(str(c).ljust(w) for c, w in zip(line, widths)).rstrip() for line in lines]
    failed = report.blocking_failures
    verdict = (
        f"dq run {report.run_id}: {len(report.outcomes)} expectations, "
        f"{sum(o.success for o in report.outcomes)} passed, {len(failed)} blocking failure(s), "
        f"{len(report.warnings)} warning(s) -> {'PASS' if report.success else 'FAIL'}"
    )
    out += ["", verdict]
    return "\n".join(out)


def _readable(observed: str | None) -> str | None:
    """``3/1000 unexpected, e.g. [...]`` for row-wise results; the JSON itself otherwise."""
    if observed is None:
        return None
    try:
        value = json.loads(observed)
    except ValueError:
        return observed
    if isinstance(value, dict) and "unexpected_count" in value and "element_count" in value:
        text = f"{value['unexpected_count'] or 0}/{value['element_count'] or 0} unexpected"
        sample = value.get("sample")
        return f"{text}, e.g. {json.dumps(sample, default=str)}" if sample else text
    return observed


def _short(text: str | None, width: int = 70) -> str:
    if text is None:
        return ""
    return text if len(text) <= width else text[: width - 1] + "…"
