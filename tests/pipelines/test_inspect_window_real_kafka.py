"""``inspect --as-of`` after a rebalance whose generation has no record (no Spark, no broker).

A real Kafka 3.9 broker (tests/broker/test_classic_scenarios.py, group ``c39-atonce``): three members
leave one by one; the first departure starts a rebalance whose join completes (generation 3) but
whose SyncGroup never comes, so the broker writes only generation 4, Empty, when the last member
leaves. The core tells generation 3's transitions without a time. At a moment after the Empty
record the broker described the group as Empty; offsetlake said PreparingRebalance because the
untimed transitions hid the Empty one from the rebalance-window lookup.
"""

from __future__ import annotations

from coordinator_core import StateTransition
from pipelines.analytics.inspect import _rebalance_window_at


def _t(frm: str, to: str, gen: int, t: int | None, lo: int | None = None, hi: int | None = None) -> StateTransition:
    return StateTransition("g", "k", frm, to, gen, t, "log", t is not None, "c", None, None, lo, hi)


def test_untimed_transitions_of_a_skipped_generation_do_not_hide_the_empty_that_followed() -> None:
    transitions = [  # the broker's timeline (epoch ms from the real run, shifted)
        _t("CompletingRebalance", "Stable", 2, 1141),
        _t("Stable", "PreparingRebalance", 2, 1361, 1141, 2317),  # inferred start: a window
        _t("PreparingRebalance", "CompletingRebalance", 3, None),  # generation 3: no record
        _t("CompletingRebalance", "PreparingRebalance", 3, None),
        _t("PreparingRebalance", "Empty", 4, 2317),  # the record the broker wrote
    ]
    assert _rebalance_window_at(transitions, 2480) is None  # after the Empty record: no window
    inside = _rebalance_window_at(transitions, 1500)
    assert inside is not None and inside[0] == "Stable or PreparingRebalance"
