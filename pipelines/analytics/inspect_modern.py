"""``inspect group`` for Kafka 4's share groups (KIP-932) and streams groups (KIP-1071): their
description from the core's fold, printed the way Kafka's own tools print them.

Rules: the description is the core's fold as it stands (``GroupSnapshot.modern``); nothing here
decides a Kafka rule. A share group is shown as ``kafka-share-groups.sh --describe --state
--verbose`` (GROUP, COORDINATOR (ID), STATE, GROUP-EPOCH, ASSIGNMENT-EPOCH, #MEMBERS) and
``--members --verbose`` (CONSUMER-ID, HOST, CLIENT-ID, #PARTITIONS, MEMBER-EPOCH, ASSIGNMENT as
``topic:p,p;topic:p``); a streams group as ``kafka-streams-groups.sh --describe --state
--verbose`` (GROUP-EPOCH, TARGET-ASSIGNMENT-EPOCH) and ``--members --verbose`` (TARGET-ASSIGNMENT-
EPOCH, TOPOLOGY-EPOCH, MEMBER, MEMBER-PROTOCOL, MEMBER-EPOCH, PROCESS, CLIENT-ID, ASSIGNMENTS as
``ACTIVE: 0:[0,1]; STANDBY: ...; TARGET-ACTIVE: ...``), plus its topology.
"""

from __future__ import annotations

from typing import Any

from coordinator_core.modern.share.model import DEFAULT_SHARE_ASSIGNOR, OFFSETS_KEPT_IN, pairs
from coordinator_core.streams.model import NO_TASKS


def share_description(m: Any, coordinator_partition: int) -> dict[str, Any]:
    """A share group's ``--describe --state --members --verbose`` fields (``m``: the core's
    ``ModernGroupSnapshot`` of a share group)."""

    label = m.details.topic_names.get

    def assignment(a: Any) -> str:
        by_topic: dict[str, list[int]] = {}
        for t, p in pairs(a):
            by_topic.setdefault(label(t, t), []).append(p)
        return ";".join(sorted(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in by_topic.items()))

    members = [
        {
            "member_id": mid,
            "client_host": x.client_host,
            "client_id": x.client_id,
            "rack_id": x.rack_id,
            "partitions": sum(1 for _ in pairs(x.assigned_partitions)),
            "member_epoch": x.member_epoch,
            "assignment": assignment(x.assigned_partitions),
            "subscribed_topics": list(x.subscribed_topic_names),
        }
        for mid, x in sorted(m.members.items())
    ]
    st = m.details.state_topics
    return {
        "coordinator": f"__consumer_offsets-{coordinator_partition}",
        "assignment_strategy": DEFAULT_SHARE_ASSIGNOR,
        "state": m.state,
        "group_epoch": m.group_epoch,
        "assignment_epoch": m.target_assignment_epoch,
        "member_count": len(members),
        "members": members,
        "offsets_kept_in": OFFSETS_KEPT_IN,
        "initialized": [] if st is None else [f"{n}:{','.join(map(str, ps))}" for _, n, ps in st.initialized],
    }


def _tasks(t: Any, prefix: str = "") -> str:
    out = []
    for role, ts in (("ACTIVE", t.active), ("STANDBY", t.standby), ("WARMUP", t.warmup)):
        if ts:
            out.append(prefix + role + ": " + "".join(f"{s}:[{','.join(map(str, ps))}]; " for s, ps in ts))
    return "".join(out)


def streams_description(m: Any, coordinator_partition: int) -> dict[str, Any]:
    """A streams group's ``--describe --state --members --verbose`` fields and its topology
    (``m``: the core's ``ModernGroupSnapshot`` of a streams group)."""

    topo = m.details.topology
    members = [
        {
            "member_id": mid,
            "member_protocol": "streams",
            "member_epoch": x.member_epoch,
            "member_state": x.state,
            "process_id": x.process_id,
            "client_id": x.client_id,
            "client_host": x.client_host,
            "instance_id": x.instance_id,
            "topology_epoch": x.topology_epoch,
            "assignments": _tasks(x.assigned_tasks) + _tasks(m.target_assignment.get(mid, NO_TASKS), "TARGET-"),
            "pending_revocation": _tasks(x.tasks_pending_revocation),
        }
        for mid, x in sorted(m.members.items())
    ]
    return {
        "coordinator": f"__consumer_offsets-{coordinator_partition}",
        "state": m.state,
        "group_epoch": m.group_epoch,
        "target_assignment_epoch": m.target_assignment_epoch,
        "topology_epoch": None if topo is None else topo.epoch,
        "validated_topology_epoch": m.details.validated_topology_epoch,
        "member_count": len(members),
        "members": members,
        "subtopologies": []
        if topo is None
        else [
            {
                "subtopology_id": s.subtopology_id,
                "source_topics": list(s.source_topics) + [f"/{r}/" for r in s.source_topic_regex],
                "repartition_source_topics": list(s.repartition_source_topics),
                "repartition_sink_topics": list(s.repartition_sink_topics),
                "state_changelog_topics": list(s.state_changelog_topics),
            }
            for s in topo.subtopologies
        ],
    }


def render_share(console: Any, group_id: str, d: dict[str, Any], table: Any) -> None:
    """``kafka-share-groups.sh --describe --state --verbose`` and ``--members --verbose``."""
    cols = ("GROUP", "COORDINATOR (ID)", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS")
    row = (group_id, d["coordinator"], d["state"], str(d["group_epoch"]), str(d["assignment_epoch"]))
    console.print(table("Share group (KIP-932): --describe --state", cols, [(*row, str(d["member_count"]))], fold=True))
    member_cols = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "MEMBER-EPOCH", "ASSIGNMENT")
    rows = [
        (
            group_id,
            x["member_id"],
            x["client_host"],
            x["client_id"],
            str(x["partitions"]),
            str(x["member_epoch"]),
            x["assignment"],
        )
        for x in d["members"]
    ]
    console.print(table(f"Members ({len(rows)}): --describe --members", member_cols, rows, fold=True))
    console.print(
        f"Offsets: none in __consumer_offsets (a share group's start offsets are in {d['offsets_kept_in']}); "
        f"share state initialized for {', '.join(d['initialized']) or 'no partition'}"
    )


def render_streams(console: Any, group_id: str, d: dict[str, Any], table: Any) -> None:
    """``kafka-streams-groups.sh --describe --state --verbose`` and ``--members --verbose``,
    then the topology."""
    cols = ("GROUP", "COORDINATOR (ID)", "STATE", "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS")
    row = (group_id, d["coordinator"], d["state"], str(d["group_epoch"]), str(d["target_assignment_epoch"]))
    console.print(
        table("Streams group (KIP-1071): --describe --state", cols, [(*row, str(d["member_count"]))], fold=True)
    )
    member_cols = (
        "GROUP",
        "TARGET-ASSIGNMENT-EPOCH",
        "TOPOLOGY-EPOCH",
        "MEMBER",
        "MEMBER-PROTOCOL",
        "MEMBER-EPOCH",
        "PROCESS",
        "CLIENT-ID",
        "ASSIGNMENTS",
    )
    rows = [
        (
            group_id,
            str(d["target_assignment_epoch"]),
            "-" if d["topology_epoch"] is None else str(d["topology_epoch"]),
            x["member_id"],
            x["member_protocol"],
            "-" if x["member_epoch"] is None else str(x["member_epoch"]),
            x["process_id"],
            x["client_id"],
            x["assignments"] or "-",
        )
        for x in d["members"]
    ]
    console.print(table(f"Members ({len(rows)}): --describe --members --verbose", member_cols, rows, fold=True))
    topo_cols = ("subtopology", "source topics", "repartition sources", "repartition sinks", "changelogs")
    topo_rows = [
        (
            s["subtopology_id"],
            ", ".join(s["source_topics"]) or "-",
            ", ".join(s["repartition_source_topics"]) or "-",
            ", ".join(s["repartition_sink_topics"]) or "-",
            ", ".join(s["state_changelog_topics"]) or "-",
        )
        for s in d["subtopologies"]
    ]
    console.print(table(f"Topology (epoch {d['topology_epoch']})", topo_cols, topo_rows, fold=True))
