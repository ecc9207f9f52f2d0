"""The embedded consumer protocol: member subscription / assignment blobs (spec §5).

Layouts mirror Kafka's ``ConsumerProtocolSubscription.json`` and
``ConsumerProtocolAssignment.json`` (``validVersions 0-3``, never flexible) and run on the
generic reader of ``coordinator_core.codec.wire``.

Rules (``ConsumerProtocol.java``):
- Each blob starts with an int16 version. A negative version is corrupt; a version above the
  highest known (3) is read with the highest known layout and keeps its real version (future
  versions may only append fields), so it re-encodes under the same prefix.
- Trailing bytes after the last known field are ignored (Kafka's readers do not check).
- Real-world quirk (old bsm/sarama-cluster, spec §5): a subscription claiming v1+ that stops
  exactly after the fields of a lower version (e.g. a "v1" with no owned_partitions) is
  tolerated: the fields that are there are kept, the rest take their defaults, and
  ``decode_subscription_tolerant`` reports a note. Kafka's strict reader rejects it; the broker
  itself only ever parses subscriptions as v0 (``subscribed_topics_v0``).
- The blobs follow this protocol only when ``protocol_type == "consumer"`` (Kafka Streams too,
  with its own user_data). ``parse_member_blobs`` never raises: a blob that does not parse is
  kept as bytes on the record and the failure is reported.
- Corrupt blobs raise ``CorruptRecordError`` with part "subscription"/"assignment".
- ``generation_id`` -1 is ``None``; a null ``user_data`` / ``rack_id`` is ``None``.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

from coordinator_core.codec.records import Assignment, MemberMetadata, Subscription, TopicPartitions
from coordinator_core.codec.wire import Buffer, Field, Layout, Message, WireError, compile_layout
from coordinator_core.errors import CorruptRecordError, Part

__all__ = [
    "ASSIGNMENT",
    "CONSUMER_PROTOCOL_TYPE",
    "SUBSCRIPTION",
    "MemberProtocol",
    "decode_assignment",
    "decode_subscription",
    "decode_subscription_tolerant",
    "encode_assignment",
    "encode_subscription",
    "parse_member_blobs",
    "subscribed_topics_v0",
]

CONSUMER_PROTOCOL_TYPE: Final = "consumer"

_TOPIC_PARTITION: Final = (Field("topic", "topic", "string"), Field("partitions", "partitions", "[]int32"))

SUBSCRIPTION: Final = Message(
    "ConsumerProtocolSubscription",
    valid_versions="0-3",
    flexible_versions="none",
    fields=(
        Field("topics", "topics", "[]string"),
        Field("user_data", "userData", "bytes", nullable_versions="0+"),
        Field("owned_partitions", "ownedPartitions", "[]TopicPartition", versions="1+", fields=_TOPIC_PARTITION),
        Field("generation_id", "generationId", "int32", versions="2+", sentinel=-1),
        Field("rack_id", "rackId", "string", versions="3+", nullable_versions="3+"),
    ),
)

ASSIGNMENT: Final = Message(
    "ConsumerProtocolAssignment",
    valid_versions="0-3",
    flexible_versions="none",
    fields=(
        Field("assigned_partitions", "assignedPartitions", "[]TopicPartition", fields=_TOPIC_PARTITION),
        Field("user_data", "userData", "bytes", nullable_versions="0+"),
    ),
)

HIGHEST_VERSION: Final = 3
_I16: Final = struct.Struct(">h")


_CACHE: dict[tuple[str, int, int], Layout] = {}


def _layout(message: Message, layout_version: int, version: int) -> Layout:
    """``message`` read with the fields of ``layout_version``, built with ``version``."""
    key = (message.name, layout_version, version)
    layout = _CACHE.get(key)
    if layout is None:
        cls = Subscription if message is SUBSCRIPTION else Assignment
        layout = compile_layout(
            message,
            layout_version,
            {message.name: (cls, {"version": version}), "TopicPartition": (TopicPartitions, {})},
        )
        if len(_CACHE) < 1024:  # versions are int16: bound the cache
            _CACHE[key] = layout
    return layout


def _read_version(data: Buffer, part: Part) -> int:
    if len(data) < 2:
        raise CorruptRecordError(f"{part} needs a 2-byte version, got {len(data)} bytes", part=part, position=0)
    version: int = _I16.unpack_from(data, 0)[0]
    if version < 0:
        raise CorruptRecordError(f"negative {part} version {version}", part=part, position=0, version=version)
    return version


# ---------------------------------------------------------------------------------------------
# Subscription
# ---------------------------------------------------------------------------------------------
def decode_subscription_tolerant(data: Buffer) -> tuple[Subscription, str | None]:
    """Decode a subscription, tolerating the truncated-at-a-version-boundary quirk.

    Returns:
        (subscription, note): ``note`` is None for a conformant blob, else says which lower
        version's fields were used.

    Raises:
        CorruptRecordError: the blob does not parse even with the fallback.
    """
    version = _read_version(data, "subscription")
    read_as = min(version, HIGHEST_VERSION)
    end = len(data)
    try:
        sub, _ = _layout(SUBSCRIPTION, read_as, version).read(data, 2, end)
        return sub, None
    except WireError as exc:
        first_error = exc
    # Fallback: the blob may end exactly after the fields of a lower version.
    for lower in range(read_as - 1, -1, -1):
        try:
            sub, pos = _layout(SUBSCRIPTION, lower, version).read(data, 2, end)
        except WireError:
            continue
        if pos == end:
            note = (
                f"subscription claims version {version} but ends after the version-{lower} fields "
                f"({first_error.reason}); read the version-{lower} fields, later fields defaulted"
            )
            return sub, note
    raise CorruptRecordError(first_error.reason, part="subscription", position=first_error.position, version=version)


def decode_subscription(data: Buffer) -> Subscription:
    """Decode a ``ConsumerProtocolSubscription`` blob (with its int16 version prefix).

    Raises:
        CorruptRecordError: the blob is corrupt (part "subscription").
    """
    return decode_subscription_tolerant(data)[0]


def encode_subscription(sub: Subscription) -> bytes:
    """Encode a subscription under ``sub.version`` (versions above 3 use the v3 layout).

    Raises:
        ValueError: negative version or a field that cannot be encoded.
    """
    if not 0 <= sub.version <= 0x7FFF:
        raise ValueError(f"out-of-range subscription version {sub.version}")
    out = [_I16.pack(sub.version)]
    _layout(SUBSCRIPTION, min(sub.version, HIGHEST_VERSION), 0).write(sub, out)
    return b"".join(out)


def subscribed_topics_v0(data: Buffer) -> frozenset[str] | None:
    """The broker's rule (``ClassicGroup.computeSubscribedTopics``, Kafka 3's
    ``GroupMetadata.computeSubscribedTopics``): read the version without checking it
    (``ConsumerProtocol.deserializeVersion``: any int16, negative included), parse the body as
    version 0 (the topics prefix every version shares); None on failure (SchemaException)."""
    if len(data) < 2:
        return None  # deserializeVersion: BufferUnderflowException -> SchemaException
    try:
        sub, _ = _layout(SUBSCRIPTION, 0, 0).read(data, 2, len(data))
    except (CorruptRecordError, WireError):
        return None
    return frozenset(sub.topics)


# ---------------------------------------------------------------------------------------------
# Assignment
# ---------------------------------------------------------------------------------------------
def decode_assignment(data: Buffer) -> Assignment:
    """Decode a ``ConsumerProtocolAssignment`` blob (with its int16 version prefix).

    Raises:
        CorruptRecordError: the blob is corrupt (part "assignment").
    """
    version = _read_version(data, "assignment")
    try:
        asg, _ = _layout(ASSIGNMENT, min(version, HIGHEST_VERSION), version).read(data, 2, len(data))
    except WireError as exc:
        raise CorruptRecordError(exc.reason, part="assignment", position=exc.position, version=version) from None
    return asg  # type: ignore[no-any-return]


def encode_assignment(a: Assignment) -> bytes:
    """Encode an assignment under ``a.version`` (same layout in every version).

    Raises:
        ValueError: negative version or a field that cannot be encoded.
    """
    if not 0 <= a.version <= 0x7FFF:
        raise ValueError(f"out-of-range assignment version {a.version}")
    out = [_I16.pack(a.version)]
    _layout(ASSIGNMENT, min(a.version, HIGHEST_VERSION), 0).write(a, out)
    return b"".join(out)


# ---------------------------------------------------------------------------------------------
# Per-member view (never raises)
# ---------------------------------------------------------------------------------------------
class MemberProtocol(NamedTuple):
    """The parsed blobs of one member.

    ``subscription``/``assignment`` are None when the protocol type is not "consumer", when the
    blob is empty (Kafka stores an empty assignment until SyncGroup) or when it does not parse;
    ``errors`` says why a non-empty blob did not parse; ``notes`` reports tolerated quirks.
    """

    subscription: Subscription | None
    assignment: Assignment | None
    errors: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def parse_member_blobs(protocol_type: str | None, member: MemberMetadata) -> MemberProtocol:
    """Parse a member's subscription and assignment when ``protocol_type == "consumer"``."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE:
        return MemberProtocol(None, None)
    errors: list[str] = []
    notes: list[str] = []
    sub: Subscription | None = None
    asg: Assignment | None = None
    if member.subscription:
        try:
            sub, note = decode_subscription_tolerant(member.subscription)
            if note:
                notes.append(note)
        except CorruptRecordError as exc:
            errors.append(str(exc))
    if member.assignment:
        try:
            asg = decode_assignment(member.assignment)
        except CorruptRecordError as exc:
            errors.append(str(exc))
    return MemberProtocol(sub, asg, tuple(errors), tuple(notes))
