"""Requests and responses exchanged between simulated clients and the coordinator.

Rules:
- Field names follow Kafka's request/response JSON (``JoinGroupRequest.json`` …), snake_case.
- Errors are Kafka ``Errors`` names as strings (``"NONE"``, ``"REBALANCE_IN_PROGRESS"`` …).
- A request carries the ``Endpoint`` its response goes back to; the runtime delivers it later
  (network delay), or drops it when a scenario says the response is lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

NONE = "NONE"
UNKNOWN_MEMBER_ID = "UNKNOWN_MEMBER_ID"
MEMBER_ID_REQUIRED = "MEMBER_ID_REQUIRED"
REBALANCE_IN_PROGRESS = "REBALANCE_IN_PROGRESS"
ILLEGAL_GENERATION = "ILLEGAL_GENERATION"
FENCED_INSTANCE_ID = "FENCED_INSTANCE_ID"
INCONSISTENT_GROUP_PROTOCOL = "INCONSISTENT_GROUP_PROTOCOL"
GROUP_MAX_SIZE_REACHED = "GROUP_MAX_SIZE_REACHED"
COORDINATOR_NOT_AVAILABLE = "COORDINATOR_NOT_AVAILABLE"
COORDINATOR_LOAD_IN_PROGRESS = "COORDINATOR_LOAD_IN_PROGRESS"
NOT_COORDINATOR = "NOT_COORDINATOR"
INVALID_SESSION_TIMEOUT = "INVALID_SESSION_TIMEOUT"
NON_EMPTY_GROUP = "NON_EMPTY_GROUP"
GROUP_ID_NOT_FOUND = "GROUP_ID_NOT_FOUND"
UNKNOWN_TOPIC_OR_PARTITION = "UNKNOWN_TOPIC_OR_PARTITION"

TopicPartition = tuple[str, int]


class Endpoint(Protocol):
    """Something that receives responses (a simulated client)."""

    name: str

    def on_response(self, response: Response) -> None: ...


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    group_id: str
    member_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    group_instance_id: str | None = None
    client_id: str = "consumer"
    client_host: str = "/127.0.0.1"
    version: int = 5
    endpoint: Endpoint | None = field(default=None, compare=False)
    api: str = "JoinGroup"

    @property
    def require_known_member_id(self) -> bool:
        """KIP-394: v4+ dynamic members get MEMBER_ID_REQUIRED first."""
        return self.version >= 4 and self.group_instance_id is None


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    assignments: tuple[tuple[str, bytes], ...] = ()
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    endpoint: Endpoint | None = field(default=None, compare=False)
    api: str = "SyncGroup"


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    endpoint: Endpoint | None = field(default=None, compare=False)
    api: str = "Heartbeat"


@dataclass(frozen=True, slots=True)
class LeaveGroupRequest:
    group_id: str
    members: tuple[tuple[str, str | None], ...]  # (member_id, group_instance_id)
    endpoint: Endpoint | None = field(default=None, compare=False)
    api: str = "LeaveGroup"


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest:
    group_id: str
    member_id: str
    generation_id: int
    offsets: tuple[tuple[TopicPartition, int, str, int | None], ...]  # (tp, offset, metadata, epoch)
    group_instance_id: str | None = None
    retention_time_ms: int | None = None
    endpoint: Endpoint | None = field(default=None, compare=False)
    api: str = "OffsetCommit"


@dataclass(frozen=True, slots=True)
class OffsetFetchRequest:
    group_id: str
    partitions: tuple[TopicPartition, ...] | None = None
    endpoint: Endpoint | None = field(default=None, compare=False)
    api: str = "OffsetFetch"


@dataclass(frozen=True, slots=True)
class DeleteGroupsRequest:
    group_ids: tuple[str, ...]
    endpoint: Endpoint | None = field(default=None, compare=False)
    api: str = "DeleteGroups"


Request = (
    JoinGroupRequest
    | SyncGroupRequest
    | HeartbeatRequest
    | LeaveGroupRequest
    | OffsetCommitRequest
    | OffsetFetchRequest
    | DeleteGroupsRequest
)


@dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResponse:
    error: str
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str | None = None
    members: tuple[JoinedMember, ...] = ()
    skip_assignment: bool = False
    api: str = "JoinGroup"


@dataclass(frozen=True, slots=True)
class SyncGroupResponse:
    error: str
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None
    api: str = "SyncGroup"


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    error: str
    api: str = "Heartbeat"


@dataclass(frozen=True, slots=True)
class LeaveGroupResponse:
    error: str
    member_errors: tuple[tuple[str, str], ...] = ()
    api: str = "LeaveGroup"


@dataclass(frozen=True, slots=True)
class OffsetCommitResponse:
    error: str
    partitions: tuple[TopicPartition, ...] = ()
    api: str = "OffsetCommit"


@dataclass(frozen=True, slots=True)
class OffsetFetchResponse:
    error: str
    offsets: tuple[tuple[TopicPartition, int, str], ...] = ()
    api: str = "OffsetFetch"


@dataclass(frozen=True, slots=True)
class DeleteGroupsResponse:
    errors: tuple[tuple[str, str], ...]
    api: str = "DeleteGroups"

    @property
    def error(self) -> str:
        bad = [e for _, e in self.errors if e != NONE]
        return bad[0] if bad else NONE


Response = (
    JoinGroupResponse
    | SyncGroupResponse
    | HeartbeatResponse
    | LeaveGroupResponse
    | OffsetCommitResponse
    | OffsetFetchResponse
    | DeleteGroupsResponse
)
