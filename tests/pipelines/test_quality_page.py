"""offsetlake's own data-docs page (``pipelines.quality.page``), rendered from a run's outcomes:
every expectation is listed with its outcome, and nothing is loaded from the network."""

from __future__ import annotations

import datetime as dt
import json
from html.parser import HTMLParser

from pipelines.quality.page import RunSummary, render_page
from pipelines.quality.report import DqReport, Outcome

T0 = dt.datetime(2026, 11, 24, 0, 0, 5, tzinfo=dt.UTC)


class _Rows(HTMLParser):
    """Cells of each ``<tr data-expectation=...>`` row, and every tag attribute that could load something."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, list[str]] = {}
        self.resources: list[str] = []
        self.tags: set[str] = set()
        self._row: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        values = dict(attrs)
        self.resources += [v for k, v in attrs if k in ("src", "href", "srcset", "action", "data") and v]
        if tag == "tr" and values.get("data-expectation"):
            self._row = values["data-expectation"]
            self.rows[self._row] = []
        elif tag == "td" and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._row is not None and self._cell is not None:
            self.rows[self._row].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr":
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _report() -> DqReport:
    sample = {"unexpected_count": 3, "element_count": 120, "unexpected_percent": 2.5, "sample": [7, 7, 9]}
    outcomes = [
        Outcome(
            "raw_records",
            "raw_records",
            "offset_unique",
            "expect_compound_columns_to_be_unique",
            json.dumps({"column_list": ["partition", "offset"]}),
            True,
            False,
            json.dumps(sample),
            120,
            3,
        ),
        Outcome(
            "group_metadata",
            "group_metadata.members",
            "session_timeout_plausible",
            "expect_column_values_to_be_between",
            json.dumps({"column": "session_timeout_ms", "min_value": 1}),
            False,
            False,
            json.dumps({**sample, "sample": [0]}),
            40,
            1,
        ),
        Outcome(
            "group_state",
            "group_state.vs_previous_run",
            "generation_not_decreasing",
            "expect_column_values_to_be_between",
            json.dumps({"column": "decreased_generations", "max_value": 0}),
            True,
            True,
            json.dumps({"decreased_generations": 0, "groups": 3}),
            1,
            0,
        ),
        Outcome(
            "group_state",
            "group_state",
            "state_is_a_kafka_state",
            "expect_column_values_to_be_in_set",
            json.dumps({"column": "state", "value_set": ["Stable", "Empty"]}),
            True,
            True,
            json.dumps({"unexpected_count": 0, "element_count": 4, "sample": []}),
            4,
            0,
        ),
        Outcome(
            "reconciliation",
            "reconciliation.summary",
            "raw_equals_decoded_plus_set_aside",
            "expect_column_values_to_be_between",
            json.dumps({"column": "unaccounted"}),
            True,
            True,
            json.dumps({"unaccounted": 0, "raw_records": 500}),
        ),
        Outcome(
            "offsets_current",
            "offsets_current",
            "tables_present",
            "table_exists",
            json.dumps({"tables": ["offsets_current"]}),
            True,
            False,
            None,
            error="<boom> & gone",
        ),
    ]
    return DqReport(run_id="dq-20261124T000005Z-abc123", run_timestamp=T0, outcomes=outcomes)


def test_the_page_lists_every_expectation_with_its_outcome_and_loads_nothing_from_the_network() -> None:
    report = _report()
    history = [
        RunSummary(report.run_id, T0, 6, 3, 2, 1),
        RunSummary("dq-20261123T000000Z-000000", T0 - dt.timedelta(days=1), 5, 5, 0, 0),
    ]
    page = render_page(report, history, gx_index="gx-index.html")
    parsed = _Rows()
    parsed.feed(page)

    assert set(parsed.rows) == {f"{o.suite}.{o.expectation}" for o in report.outcomes}
    by_name = parsed.rows
    table, column, _, kind, result, unexpected, detail = by_name["raw_records.offset_unique"]
    assert (table, column, kind, result, unexpected, detail) == (
        "raw_records",
        "partition, offset",
        "blocking",
        "FAIL",
        "3/120",
        "[7, 7, 9]",
    )
    assert by_name["group_metadata.session_timeout_plausible"][3:6] == ["warning", "FAIL", "1/40"]
    assert by_name["group_state.state_is_a_kafka_state"][3:6] == ["blocking", "PASS", "0/4"]
    assert by_name["group_state.generation_not_decreasing"][5:] == ["0/1", '{"decreased_generations": 0, "groups": 3}']
    assert '"unaccounted": 0' in by_name["reconciliation.raw_equals_decoded_plus_set_aside"][6]
    assert by_name["offsets_current.tables_present"][4:] == ["FAIL", "", "error: <boom> & gone"]
    assert report.run_id in page and "2026-11-24 00:00:05 UTC" in page and 'id="verdict">FAIL<' in page
    assert "dq-20261123T000000Z-000000" in page.split('<section id="history">')[1]

    # Self-contained: no script, stylesheet link or image, and no remote URL anywhere.
    assert "http://" not in page and "https://" not in page and "//" not in "".join(parsed.resources)
    assert parsed.resources == ["gx-index.html"] and not parsed.tags & {"script", "link", "img", "iframe"}
    assert "<boom>" not in page  # values are escaped, not markup
