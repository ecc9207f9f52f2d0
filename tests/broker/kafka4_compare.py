"""offsetlake's view of a group at a recorded moment against what the Kafka 4.4 broker said then.

``disagreements(view_at, obs)`` takes ``view_at(t)`` (``inspect group G --as-of t`` as a dict,
or None when offsetlake has no record of G) and one ``Observation``; it returns one line per
disagreement. The broker answered somewhere between ``t_before`` and ``t_after`` (members keep
committing), so a field agrees when offsetlake's view at either end equals the broker's answer.

Compared: the group's type and state; for consumer groups (KIP-848) the assignor, group epoch and
target-assignment epoch (``kafka-consumer-groups --describe --state --verbose``) and each
member's current epoch, assignment, target epoch and target assignment (``--members
--verbose``); for every group its members (member id, instance id, client id, host) and their
assignments (Admin API) and the committed offsets with their metadata (Admin API; librdkafka
returns metadata as a C string, so the NUL its commits carry, which the broker stores and
``DumpLogSegments`` prints, is cut there: compared without trailing NULs). A group the broker
no longer knows must be gone (Dead, or no longer existing) in offsetlake's view too.

A classic group's state at a moment inside the window of an inferred rebalance start is told by
offsetlake as both states it may be (``Stable or PreparingRebalance``: the log tells a rebalance
only when it ends, issue 17); it agrees when the broker's state is one of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.broker.kafka4_scenarios import Observation

View = dict[str, Any]

# Admin API ConsumerGroupState names -> Kafka's own (kafka-consumer-groups prints these)
STATE_NAMES = {
    "STABLE": "Stable",
    "EMPTY": "Empty",
    "PREPARING_REBALANCE": "PreparingRebalance",
    "COMPLETING_REBALANCE": "CompletingRebalance",
    # librdkafka's own spelling (ConsumerGroupState's names: judge.STATE)
    "PREPARING_REBALANCING": "PreparingRebalance",
    "COMPLETING_REBALANCING": "CompletingRebalance",
    "DEAD": "Dead",
    "ASSIGNING": "Assigning",
    "RECONCILING": "Reconciling",
}


def broker_facts(obs: Observation) -> dict[str, Any] | None:
    """What the broker said, in offsetlake's terms (None: the group is gone)."""
    d = obs.description
    if d is None:
        return None
    facts: dict[str, Any] = {
        "group_type": d["type"].lower(),
        "state": STATE_NAMES.get(d["state"], d["state"]),
        "members": {
            m["member_id"]: {
                "group_instance_id": m["group_instance_id"],
                "client_id": m["client_id"],
                "client_host": m["host"],
                "assignment": sorted(m["assignment"]),
            }
            for m in d["members"]
        },
        "offsets": {tp: (off, meta.rstrip("\x00")) for tp, (off, meta) in obs.offsets.items()},
    }
    if obs.state_rows and d["type"] == "CONSUMER":
        row = obs.state_rows[0]
        facts["consumer"] = {
            "assignment_strategy": row["ASSIGNMENT-STRATEGY"],
            "state": row["STATE"],
            "group_epoch": int(row["GROUP-EPOCH"]),
            "target_assignment_epoch": int(row["TARGET-ASSIGNMENT-EPOCH"]),
        }
        facts["consumer_members"] = {
            r["CONSUMER-ID"]: {
                "current_epoch": int(r["CURRENT-EPOCH"]),
                "current_assignment": _tool_parts(r["CURRENT-ASSIGNMENT"]),
                "target_epoch": int(r["TARGET-EPOCH"]),
                "target_assignment": _tool_parts(r["TARGET-ASSIGNMENT"]),
            }
            for r in obs.member_rows
            if "CONSUMER-ID" in r
        }
    return facts


def _tool_parts(text: str) -> list[str]:
    """``t1:0,1,2;t2:3`` (kafka-consumer-groups) -> ["t1-0", "t1-1", "t1-2", "t2-3"]."""
    out: list[str] = []
    for chunk in text.split(";"):
        if not chunk or chunk == "-" or ":" not in chunk:
            continue
        topic, parts = chunk.rsplit(":", 1)
        out += [f"{topic}-{p}" for p in parts.split(",") if p]
    return sorted(out)


def offsetlake_facts(view: View | None) -> dict[str, Any] | None:
    if view is None or view["state"] == "Dead" or not view["exists"]:
        return None
    c = view.get("consumer")
    if c is not None:
        members = {
            m["member_id"]: {
                "group_instance_id": m["group_instance_id"],
                "client_id": m["client_id"],
                "client_host": m["client_host"],
                "assignment": sorted(m["current_assignment"]),
            }
            for m in c["members"]
        }
    else:
        members = {
            m["member_id"]: {
                "group_instance_id": m["group_instance_id"],
                "client_id": m["client_id"],
                "client_host": m["client_host"],
                "assignment": sorted(m["assigned_partitions"] or []),
            }
            for m in view["members"]
        }
    facts: dict[str, Any] = {
        "group_type": view["group_type"],
        "state": view["state"],
        "members": members,
        "offsets": {
            f"{o['topic']}-{o['partition']}": (o["offset"], (o["metadata"] or "").rstrip("\x00"))
            for o in view["offsets"]
        },
    }
    if c is not None:
        facts["consumer"] = {
            k: c[k] for k in ("assignment_strategy", "state", "group_epoch", "target_assignment_epoch")
        }
        facts["consumer_members"] = {
            m["member_id"]: {
                "current_epoch": m["current_epoch"],
                "current_assignment": sorted(m["current_assignment"]),
                "target_epoch": m["target_epoch"],
                "target_assignment": sorted(m["target_assignment"]),
            }
            for m in c["members"]
        }
    return facts


TOOL_FIELDS = ("consumer", "consumer_members")  # kafka-consumer-groups' answers, after the Admin API's


def disagreements(view_at: Callable[[int], View | None], obs: Observation, instants: list[int]) -> list[str]:
    """``instants``: times of the group's records (epoch ms). The broker answered somewhere in
    ``[t_before, t_admin]`` (Admin API) and ``[t_admin, t_after]`` (the tools); a field agrees
    when offsetlake's view equals the broker's answer at some instant of its window: its start or
    a record's time inside it (the view changes only there)."""
    broker = broker_facts(obs)
    t_admin = obs.t_admin or obs.t_after
    admin_at = [obs.t_before, *(t for t in instants if obs.t_before < t <= t_admin)]
    tools_at = [t_admin, *(t for t in instants if t_admin < t <= obs.t_after)]
    facts = {t: offsetlake_facts(view_at(t)) for t in sorted({*admin_at, *tools_at})}
    where = f"{obs.scenario}/{obs.group} '{obs.label}'"
    if broker is None:
        if any(facts[t] is None for t in admin_at):
            return []
        return [f"{where}: the broker has no such group, offsetlake {facts[admin_at[-1]]}"]
    if all(facts[t] is None for t in admin_at):
        return [f"{where}: the broker has the group ({broker['state']}), offsetlake does not"]
    out = []
    for name, want in broker.items():
        ends = [facts[t] for t in (tools_at if name in TOOL_FIELDS else admin_at)]
        got = [None if e is None else e.get(name) for e in ends]
        if name == "consumer_members" and not want:
            continue  # no --members table taken at this moment
        if name == "consumer":
            got = [None if g is None else {k: g[k] for k in want} for g in got]
        if name == "state" and any(isinstance(g, str) and want in g.split(" or ") for g in got):
            continue  # inside an inferred rebalance start's window offsetlake names both states
        if want not in got:
            out.append(f"{where}: {name}: broker {want}, offsetlake {got[-1]}")
    return out
