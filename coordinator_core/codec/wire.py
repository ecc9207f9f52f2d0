"""Generic Kafka wire reader/writer driven by declarative per-version field specs.

A ``Message`` mirrors one of Kafka's message JSON files (``validVersions``,
``flexibleVersions``, fields with ``versions`` / ``nullableVersions`` / ``default``):
``compile_layout(message, version, builders)`` turns it into a ``Layout`` — a short list of
read/write steps for that version (runs of fixed-width integers merged into one precompiled
``struct.Struct``). ONE generic reader executes the steps over any buffer (``bytes`` or
``memoryview``), the way Kafka's generated ``read(Readable, version)`` methods do. For speed,
each layout also gets a *fused* reader generated from its step plan: the happy path of every
step inlined into one function, anything unusual (nulls, varint lengths, arrays, bad bytes)
handed to the very same step functions — so the fused and generic readers return identical
results and identical errors (a property test checks it on mutated bytes).

Rules (Kafka's ``MessageDataGenerator`` / ``ByteBufferAccessor`` semantics, spec §1):
- Big-endian two's-complement integers; non-flexible STRING (int16 length), BYTES and ARRAY
  (int32 length/count); flexible versions use COMPACT forms (unsigned varint N+1, 0 = null)
  and end EVERY struct (each array element too) with a tagged-field section.
- Every length and count is checked against the bytes left BEFORE anything is allocated or
  looped over (Kafka: "Tried to allocate a collection of size N, but there are only M bytes
  remaining"), so an absurd count such as 2^31-1 fails at once.
- A null (-1 / compact 0) in a non-nullable field is corrupt ("non-nullable field X was
  serialized as null"). Other negative lengths are corrupt too (Kafka reads any negative length
  of a nullable field as null; we reject them so re-encoding stays byte-exact).
- Strings must be valid UTF-8 and at most 0x7fff bytes.
- Wire sentinels (``Field.sentinel``, e.g. leader epoch -1) become ``None`` when read and are
  written back for ``None``. Fields absent in a version are neither read nor written (Kafka's
  "ignorable" fields: their values are dropped when encoding an older version).
- Unknown tagged fields are kept as ``((tag, bytes), ...)`` under ``tagged_fields`` and written
  back in the same order, so re-encoding is byte-exact. Varints are re-encoded minimally.
- Known tagged fields (``Field.tag``, the KIP-848/932/1071 records) are read into their attribute
  whatever their order in the section; a field whose value equals the dataclass default (Kafka's
  ``default``, through the sentinel) is not written, and the others are written in tag order with
  the unknown ones interleaved the way Kafka's ``RawTaggedFieldWriter`` does, so re-encoding is
  byte-exact for every section Kafka writes. A known tagged field must fill its declared size
  exactly (Kafka would silently misread the rest of the section). A tagged *struct* field is
  the exception, as Kafka's generated code has it whatever the JSON's ``default`` says: its
  default is the empty struct (``empty_struct``, ``new Struct()``): an absent tag reads as the
  empty struct, null is written (presence varint 0) and read as ``None``, and only the empty
  struct is left out (the Kafka 4.4 broker writes a consumer-protocol member's null
  ClassicMemberMetadata as the section ``01 00 01 00``; without the tag Kafka reads a classic
  member with no protocols).
- A nullable struct is a presence byte (-1 null, 1 present; other values corrupt, for exact
  re-encoding) then the struct; a tagged nullable struct a varint (0 null, 1 present). A ``uuid``
  is 16 bytes and is shown as Kafka's ``Uuid.toString()`` (URL-safe base64, no padding).
- The reader never checks for trailing bytes (neither does Kafka); callers that must (record
  keys) compare the returned position with the end.
- Errors are ``WireError(reason, position)`` with the byte position inside the buffer; the
  codec turns them into ``CorruptRecordError`` carrying record type, version and part.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import struct
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

Buffer: TypeAlias = bytes | bytearray | memoryview
Builder: TypeAlias = tuple[type[Any], dict[str, Any]]
"""(dataclass, fixed constructor arguments such as ``version``) that a struct is read into."""
ReadStep: TypeAlias = Callable[[Buffer, int, int, list[Any]], int]
WriteStep: TypeAlias = Callable[[Any, list[bytes]], None]

INT16: Final = struct.Struct(">h")
INT32: Final = struct.Struct(">i")
INT64: Final = struct.Struct(">q")
_FIXED_CODES: Final = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "int64": "q"}
_FIXED_SIZES: Final = {"int8": 1, "int16": 2, "uint16": 2, "int32": 4, "int64": 8}
_INT_ARRAY_CODES: Final = {"[]int16": ("h", 2), "[]int32": ("i", 4), "[]int64": ("q", 8)}
_PRIMITIVES: Final = frozenset({*_FIXED_CODES, "uuid", "string", "bytes"})
MAX_STRING_LENGTH: Final = 0x7FFF


class WireError(Exception):
    """Bytes that do not follow the layout; ``position`` is the byte offset of the problem."""

    def __init__(self, reason: str, position: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.position = position


# ---------------------------------------------------------------------------------------------
# Declarative specs
# ---------------------------------------------------------------------------------------------
def parse_versions(spec: str) -> tuple[int, int]:
    """Kafka's version-range syntax: ``"0+"``, ``"3+"``, ``"1"``, ``"1-3"``, ``"none"``."""
    if spec in ("", "none"):
        return (1, 0)  # empty range
    if spec.endswith("+"):
        return (int(spec[:-1]), 1 << 15)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


def in_versions(spec: str, version: int) -> bool:
    lo, hi = parse_versions(spec)
    return lo <= version <= hi


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a Kafka message JSON.

    Attributes:
        name: attribute name on the record dataclass (snake_case).
        json_name: Kafka's field name (camelCase), used by the console-formatter JSON.
        type: ``int8``/``int16``/``uint16``/``int32``/``int64``/``uuid``/``string``/``bytes``,
            ``[]int16``/``[]int32``/``[]int64``/``[]string``, ``[]StructName`` or ``StructName``
            (then ``fields`` holds the struct's fields).
        versions: versions the field exists in (Kafka syntax).
        nullable_versions: versions in which null is legal ("" = never): strings, bytes, arrays
            and structs.
        sentinel: wire value that means "absent" and becomes ``None`` (``Utils.ofSentinel``).
        fields: element fields of a struct array.
        tag: the tag of a tagged field (tagged in every flexible version it exists in; Kafka's
            ``taggedVersions``); its default is the dataclass attribute's default.
    """

    name: str
    json_name: str
    type: str
    versions: str = "0+"
    nullable_versions: str = ""
    sentinel: int | None = None
    fields: tuple[Field, ...] = ()
    tag: int | None = None

    @property
    def struct_name(self) -> str | None:
        """The element struct of a struct array (``[]X``), else None."""
        if self.type.startswith("[]") and self.type[2:] not in _PRIMITIVES:
            return self.type[2:]
        return None

    @property
    def single_struct_name(self) -> str | None:
        """The struct of a (non-array) struct field, else None."""
        if not self.type.startswith("[]") and self.type not in _PRIMITIVES:
            return self.type
        return None


@dataclass(frozen=True, slots=True)
class Message:
    """A message JSON: name, valid and flexible version ranges, fields in wire order."""

    name: str
    valid_versions: str
    flexible_versions: str
    fields: tuple[Field, ...]

    @property
    def highest_version(self) -> int:
        return parse_versions(self.valid_versions)[1]


# ---------------------------------------------------------------------------------------------
# Primitive readers (shared by the compiled steps)
# ---------------------------------------------------------------------------------------------
def read_uvarint(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    """Unsigned varint, at most 5 bytes (Kafka ``ByteUtils.readUnsignedVarint``)."""
    start = pos
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise WireError("truncated unsigned varint", start)
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            if value > 0xFFFFFFFF:
                raise WireError("unsigned varint exceeds 32 bits", start)
            return value, pos
        shift += 7
        if shift > 28:
            raise WireError("unsigned varint longer than 5 bytes", start)


def write_uvarint(value: int) -> bytes:
    if value < 0 or value > 0xFFFFFFFF:
        raise ValueError(f"unsigned varint out of range: {value}")
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_tagged_fields(buf: Buffer, pos: int, end: int) -> tuple[tuple[tuple[int, bytes], ...], int]:
    """A tagged-field section: uvarint count, then (uvarint tag, uvarint size, bytes) each."""
    count_pos = pos
    count, pos = read_uvarint(buf, pos, end)
    if count == 0:
        return (), pos
    if count * 2 > end - pos:
        raise WireError(f"tagged-field count {count} exceeds the {end - pos} bytes left", count_pos)
    fields: list[tuple[int, bytes]] = []
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos, end)
        size_pos = pos
        size, pos = read_uvarint(buf, pos, end)
        if size > end - pos:
            raise WireError(f"tagged field {tag} size {size} exceeds the {end - pos} bytes left", size_pos)
        fields.append((tag, bytes(buf[pos : pos + size])))
        pos += size
    return tuple(fields), pos


def write_tagged_fields(fields: Sequence[tuple[int, bytes]]) -> bytes:
    parts = [write_uvarint(len(fields))]
    for tag, data in fields:
        parts.append(write_uvarint(tag))
        parts.append(write_uvarint(len(data)))
        parts.append(bytes(data))
    return b"".join(parts)


# ---------------------------------------------------------------------------------------------
# 64-bit varints and compact nullable bytes (``ByteUtils.writeUnsignedVarlong`` /
# ``writeVarlong``, ``COMPACT_NULLABLE_BYTES``): the snapshot codec's integers are timestamps
# ---------------------------------------------------------------------------------------------
def append_uvarlong(out: bytearray, value: int) -> None:
    """Append an unsigned varint of any size below 2**70 (no range check: the caller's values)."""
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def read_uvarlong(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    """Unsigned varint of at most 10 bytes (Kafka ``ByteUtils.readUnsignedVarlong``)."""
    if pos < end:
        b = buf[pos]
        if b < 0x80:  # one byte: most lengths, flags and small counters
            return b, pos + 1
    start = pos
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise WireError("truncated unsigned varlong", start)
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise WireError("unsigned varlong longer than 10 bytes", start)


def append_varlong(out: bytearray, value: int) -> None:
    """Append a signed varint, zigzag-encoded (Kafka ``ByteUtils.writeVarlong``)."""
    append_uvarlong(out, (value << 1) if value >= 0 else ((-value) << 1) - 1)


def read_varlong(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    """The inverse of ``append_varlong`` (Kafka ``ByteUtils.readVarlong``)."""
    n, pos = read_uvarlong(buf, pos, end)
    return ((n >> 1) if not n & 1 else -((n + 1) >> 1)), pos


def zigzag(value: int) -> int:
    """Signed to unsigned, small magnitudes small (Kafka ``ByteUtils.writeVarlong``)."""
    return (value << 1) if value >= 0 else ((-value) << 1) - 1


def unzigzag(value: int) -> int:
    """The inverse of ``zigzag``."""
    return (value >> 1) if not value & 1 else -((value + 1) >> 1)


def append_compact_nullable_bytes(out: bytearray, data: bytes | None) -> None:
    """``uvarint(len + 1)`` then the bytes; ``0`` is null (``COMPACT_NULLABLE_BYTES``)."""
    if data is None:
        out.append(0)
    else:
        append_uvarlong(out, len(data) + 1)
        out += data


def read_compact_nullable_bytes(buf: Buffer, pos: int, end: int) -> tuple[bytes | None, int]:
    """The inverse of ``append_compact_nullable_bytes``."""
    start = pos
    n, pos = read_uvarlong(buf, pos, end)
    if n == 0:
        return None, pos
    stop = pos + n - 1
    if stop > end:
        raise WireError(f"compact bytes of length {n - 1} exceed the {end - pos} bytes left", start)
    return bytes(buf[pos:stop]), stop


# ---------------------------------------------------------------------------------------------
# Compiled layouts
# ---------------------------------------------------------------------------------------------
class Layout:
    """The read and write steps of one message at one version.

    Reading fills a list laid out like the target dataclass's ``__init__`` parameters (a
    template holding the defaults and the fixed arguments), each step writing its fields by
    index, and calls the dataclass positionally: the cheapest construction Python offers.
    """

    __slots__ = (
        "build",
        "cls",
        "fast_read",
        "fields",
        "flexible",
        "message",
        "read_steps",
        "template",
        "version",
        "write_steps",
    )

    def __init__(
        self,
        message: Message,
        fields: tuple[Field, ...],
        version: int,
        flexible: bool,
        cls: type[Any],
        template: list[Any],
        read_steps: list[ReadStep],
        write_steps: list[WriteStep],
    ) -> None:
        self.message = message
        self.fields = fields
        self.version = version
        self.flexible = flexible
        self.cls = cls
        self.build = fast_constructor(cls)
        self.template = template
        self.read_steps = read_steps
        self.write_steps = write_steps
        self.fast_read: Callable[[Buffer, int, int], tuple[Any, int]] = self.read_generic

    def read(self, buf: Buffer, pos: int, end: int) -> tuple[Any, int]:
        """Read one struct starting at ``pos``; return (built object, position after it).

        Runs the fused reader (same result and same errors as ``read_generic``).

        Raises:
            WireError: the bytes do not follow the layout.
        """
        return self.fast_read(buf, pos, end)

    def read_generic(self, buf: Buffer, pos: int, end: int) -> tuple[Any, int]:
        """The reference reader: run the compiled steps one by one."""
        vals = self.template.copy()
        for step in self.read_steps:
            pos = step(buf, pos, end, vals)
        return self.build(vals), pos

    def write(self, obj: Any, out: list[bytes]) -> None:
        """Append the wire bytes of ``obj`` (read with ``getattr``) to ``out``.

        Raises:
            ValueError: a value cannot be represented (None in a non-nullable field, an
                integer out of range, a string longer than 0x7fff bytes).
        """
        for step in self.write_steps:
            step(obj, out)

    def encode(self, obj: Any) -> bytes:
        out: list[bytes] = []
        self.write(obj, out)
        return b"".join(out)


def compile_layout(message: Message, version: int, builders: dict[str, Builder]) -> Layout:
    """Compile ``message`` at ``version``.

    Args:
        message: the declarative spec.
        version: the layout version (fields present, flexible or not).
        builders: struct name -> (dataclass, fixed constructor kwargs); the top level is
            ``builders[message.name]``, struct arrays use their element type name.
    """
    flexible = in_versions(message.flexible_versions, version)
    return _compile_struct(message, message.name, message.fields, version, flexible, builders)


def fast_constructor(cls: type[Any]) -> Callable[[Sequence[Any]], Any]:
    """A positional constructor for a frozen, slotted dataclass that fills the slots directly.

    A frozen dataclass's ``__init__`` assigns each field through ``object.__setattr__``; for
    the millions of records a replay decodes, setting the slot descriptors directly (an
    unrolled function generated once per class) halves the construction cost. Classes with a
    ``__post_init__``, non-init fields or no slots get their ordinary constructor.
    """
    fields = dataclasses.fields(cls)
    descriptors = [cls.__dict__.get(f.name) for f in fields]
    if (
        hasattr(cls, "__post_init__")
        or any(not f.init for f in fields)
        or not all(isinstance(d, types.MemberDescriptorType) for d in descriptors)
    ):
        return lambda vals: cls(*vals)
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    lines = ["def build(vals):", "    o = _new(_cls)"]
    for i, d in enumerate(descriptors):
        namespace[f"_s{i}"] = d.__set__  # type: ignore[union-attr]
        lines.append(f"    _s{i}(o, vals[{i}])")
    lines.append("    return o")
    exec("\n".join(lines), namespace)  # generated from the dataclass's own field list
    build: Callable[[Sequence[Any]], Any] = namespace["build"]
    return build


def _template(cls: type[Any], fixed: dict[str, Any], present: set[str]) -> tuple[list[Any], dict[str, int]]:
    template: list[Any] = []
    index: dict[str, int] = {}
    for i, f in enumerate(dataclasses.fields(cls)):
        index[f.name] = i
        if f.name in fixed:
            template.append(fixed[f.name])
        elif f.default is not dataclasses.MISSING:
            template.append(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            template.append(f.default_factory())
        elif f.name in present:
            template.append(None)
        else:
            raise TypeError(f"{cls.__name__}.{f.name} has no default and no wire field")
    return template, index


def _compile_struct(
    message: Message,
    struct_name: str,
    all_fields: tuple[Field, ...],
    version: int,
    flexible: bool,
    builders: dict[str, Builder],
) -> Layout:
    fields = tuple(f for f in all_fields if in_versions(f.versions, version))
    cls, fixed = builders[struct_name]
    template, index = _template(cls, fixed, {f.name for f in fields})
    read_steps: list[ReadStep] = []
    write_steps: list[WriteStep] = []
    plan: list[tuple[Any, ...]] = []  # what each read step does, for the fused fast reader
    tagged = sorted((f for f in fields if f.tag is not None), key=lambda f: f.tag or 0)
    if tagged and not flexible:  # pragma: no cover - spec error
        raise TypeError(f"{message.name}: tagged fields in non-flexible version {version}")
    untagged = tuple(f for f in fields if f.tag is None)
    i = 0
    while i < len(untagged):
        f = untagged[i]
        idx = index[f.name]
        nullable = in_versions(f.nullable_versions, version)
        if f.type in _FIXED_CODES:
            run = [f]
            while i + 1 < len(untagged) and untagged[i + 1].type in _FIXED_CODES:
                i += 1
                run.append(untagged[i])
            read_steps.append(_read_fixed(run, [index[r.name] for r in run]))
            plan.append(
                (
                    "fixed",
                    ">" + "".join(_FIXED_CODES[r.type] for r in run),
                    tuple((index[r.name], r.sentinel) for r in run),
                )
            )
            write_steps.append(_write_fixed(run))
        elif f.type == "string":
            read_steps.append(_read_string(f.name, idx, nullable, flexible))
            plan.append(("string", idx))
            write_steps.append(_write_string(f.name, nullable, flexible))
        elif f.type == "bytes":
            read_steps.append(_read_bytes(f.name, idx, nullable, flexible))
            plan.append(("bytes", idx))
            write_steps.append(_write_bytes(f.name, nullable, flexible))
        else:
            read_step, write_step = _field_steps(message, f, idx, version, flexible, nullable, builders)
            read_steps.append(read_step)
            plan.append(("other", (idx,)))
            write_steps.append(write_step)
        i += 1
    if flexible:
        if tagged:
            known = [
                _tagged_spec(message, f, index[f.name], template[index[f.name]], version, builders) for f in tagged
            ]
            read_steps.append(_read_tagged_known(index["tagged_fields"], known))
            write_steps.append(_write_tagged_known(known))
            plan.append(("other", (index["tagged_fields"], *(k.idx for k in known))))
        else:
            read_steps.append(_read_tagged(index["tagged_fields"]))
            write_steps.append(_write_tagged)
            plan.append(("tagged", index["tagged_fields"]))
    layout = Layout(message, fields, version, flexible, cls, template, read_steps, write_steps)
    layout.fast_read = _fuse(layout, plan)
    return layout


def _field_steps(
    message: Message, f: Field, idx: int, version: int, flexible: bool, nullable: bool, builders: dict[str, Builder]
) -> tuple[ReadStep, WriteStep]:
    """Read/write steps of a uuid, array or struct field (everything but fixed ints and
    strings/bytes, which have their own fast paths)."""
    if f.type == "uuid":
        return _read_uuid(f.name, idx), _write_uuid(f.name)
    if f.type in _INT_ARRAY_CODES or f.type == "[]string":
        return (
            _read_array(f.name, idx, f.type, None, flexible, nullable),
            _write_array(f.name, f.type, None, flexible, nullable),
        )
    if f.struct_name is not None:
        element = _compile_struct(message, f.struct_name, f.fields, version, flexible, builders)
        return (
            _read_array(f.name, idx, f.type, element, flexible, nullable),
            _write_array(f.name, f.type, element, flexible, nullable),
        )
    if f.single_struct_name is not None:
        element = _compile_struct(message, f.single_struct_name, f.fields, version, flexible, builders)
        return _read_struct(f.name, idx, element, nullable), _write_struct(f.name, element, nullable)
    raise TypeError(f"unsupported field type {f.type!r} in {message.name}")  # pragma: no cover


def _fuse(layout: Layout, plan: list[tuple[Any, ...]]) -> Callable[[Buffer, int, int], tuple[Any, int]]:
    """Generate one straight-line reader for ``layout`` from its step plan.

    The generated function inlines the happy path of each step (fixed-width runs through one
    precompiled ``struct.Struct``, strings/bytes whose length is in range, a zero tagged-field
    count) and hands anything else — nulls, compact varint lengths, arrays, bad bytes — to the
    very step function the generic reader runs, so results and errors are identical by
    construction (``tests/coordinator_core/codec/test_codec_properties.py`` checks it on mutants).
    """
    n = len(layout.template)
    ns: dict[str, Any] = {"_scratch": None, "_n": n, "_u16": INT16.unpack_from, "_u32": INT32.unpack_from}
    flexible = layout.flexible
    body: list[str] = ["def read(buf, pos, end):"]
    assigned: set[int] = set()

    def slow(k: int, idxs: tuple[int, ...]) -> list[str]:
        ns[f"_step{k}"] = layout.read_steps[k]
        out = ["_t = [None] * _n", f"pos = _step{k}(buf, pos, end, _t)"]
        out += [f"v{i} = _t[{i}]" for i in idxs]
        return out

    def indent(lines: list[str], level: int) -> list[str]:
        return ["    " * level + line for line in lines]

    for k, entry in enumerate(plan):
        kind = entry[0]
        if kind == "fixed":
            fmt, slots = entry[1], entry[2]
            st_ = struct.Struct(fmt)
            ns[f"_f{k}"] = st_.unpack_from
            idxs = tuple(i for i, _ in slots)
            names = ", ".join(f"v{i}" for i in idxs) + ("," if len(idxs) == 1 else "")
            body += indent([f"if pos + {st_.size} <= end:"], 1)
            body += indent([f"{names} = _f{k}(buf, pos)", f"pos += {st_.size}"], 2)
            for i, sentinel in slots:
                if sentinel is not None:
                    body += indent([f"if v{i} == {sentinel}:", f"    v{i} = None"], 2)
            body += indent(["else:"], 1) + indent(slow(k, idxs), 2)
            assigned.update(idxs)
        elif kind in ("string", "bytes") and not flexible:
            i = entry[1]
            width, unpack = (2, "_u16") if kind == "string" else (4, "_u32")
            value = f"str(buf[pos + {width}:_e], 'utf-8')" if kind == "string" else f"bytes(buf[pos + {width}:_e])"
            body += indent([f"if pos + {width} <= end:"], 1)
            body += indent([f"_l = {unpack}(buf, pos)[0]", f"_e = pos + {width} + _l"], 2)
            body += indent(["if _l >= 0 and _e <= end:"], 2)
            if kind == "string":
                body += indent(["try:", f"    v{i} = {value}", "    pos = _e", "except UnicodeDecodeError:"], 3)
                body += indent(slow(k, (i,)), 4)
            else:
                body += indent([f"v{i} = {value}", "pos = _e"], 3)
            body += indent(["else:"], 2) + indent(slow(k, (i,)), 3)
            body += indent(["else:"], 1) + indent(slow(k, (i,)), 2)
            assigned.add(i)
        elif kind == "tagged":
            i = entry[1]
            body += indent(["if pos < end and buf[pos] == 0:", "    pos += 1", f"    v{i} = ()", "else:"], 1)
            body += indent(slow(k, (i,)), 2)
            assigned.add(i)
        elif kind == "other":  # uuids, arrays, structs, known tagged fields: the generic step
            idxs = entry[1]
            body += indent(slow(k, idxs), 1)
            assigned.update(idxs)
        else:  # compact strings/bytes: the generic step
            i = entry[1]
            body += indent(slow(k, (i,)), 1)
            assigned.add(i)
    for i, default in enumerate(layout.template):
        if i not in assigned:
            ns[f"_d{i}"] = default
            body.insert(1, f"    v{i} = _d{i}")
    ns["_build"] = layout.build
    body.append("    return _build((" + ", ".join(f"v{i}" for i in range(n)) + ",)), pos")
    exec("\n".join(body), ns)  # generated from the layout's own step plan
    fused: Callable[[Buffer, int, int], tuple[Any, int]] = ns["read"]
    return fused


def _read_fixed(run: list[Field], idxs: list[int]) -> ReadStep:
    s = struct.Struct(">" + "".join(_FIXED_CODES[f.type] for f in run))
    size = s.size
    unpack = s.unpack_from
    slots = tuple(zip(idxs, (f.sentinel for f in run)))

    def underflow(pos: int, end: int) -> WireError:
        for f in run:
            n = _FIXED_SIZES[f.type]
            if pos + n > end:
                return WireError(f"{f.type} field {f.name} needs {n} bytes, {max(end - pos, 0)} left", pos)
            pos += n
        return WireError("underflow", pos)  # pragma: no cover

    if len(run) == 1 and run[0].sentinel is None:
        idx = idxs[0]

        def step1(buf: Buffer, pos: int, end: int, vals: list[Any]) -> int:
            if pos + size > end:
                raise underflow(pos, end)
            vals[idx] = unpack(buf, pos)[0]
            return pos + size

        return step1

    def step(buf: Buffer, pos: int, end: int, vals: list[Any]) -> int:
        if pos + size > end:
            raise underflow(pos, end)
        for (idx, sentinel), v in zip(slots, unpack(buf, pos)):
            vals[idx] = None if v == sentinel else v
        return pos + size

    return step


def _write_fixed(run: list[Field]) -> WriteStep:
    s = struct.Struct(">" + "".join(_FIXED_CODES[f.type] for f in run))
    pack = s.pack
    spec = tuple((f.name, f.sentinel) for f in run)

    def step(obj: Any, out: list[bytes]) -> None:
        vals = []
        for name, sentinel in spec:
            v = getattr(obj, name)
            if v is None:
                if sentinel is None:
                    raise ValueError(f"field {name} must not be None")
                v = sentinel
            vals.append(v)
        try:
            out.append(pack(*vals))
        except struct.error as exc:
            raise ValueError(f"fields {[n for n, _ in spec]}: {exc}") from None

    return step


def _read_string(name: str, idx: int, nullable: bool, flexible: bool) -> ReadStep:
    unpack16 = INT16.unpack_from

    def step(buf: Buffer, pos: int, end: int, vals: list[Any]) -> int:
        start = pos
        if flexible:
            n, pos = read_uvarint(buf, pos, end)
            n -= 1
        else:
            if pos + 2 > end:
                raise WireError(f"string field {name} length needs 2 bytes, {max(end - pos, 0)} left", pos)
            n = unpack16(buf, pos)[0]
            pos += 2
        if n < 0:
            if n == -1 and nullable:
                vals[idx] = None
                return pos
            if n == -1:
                raise WireError(f"non-nullable field {name} was serialized as null", start)
            raise WireError(f"string field {name} has negative length {n}", start)
        if n > MAX_STRING_LENGTH:
            raise WireError(f"string field {name} had invalid length {n}", start)
        e = pos + n
        if e > end:
            raise WireError(f"string field {name} length {n} exceeds the {end - pos} bytes left", start)
        try:
            vals[idx] = str(buf[pos:e], "utf-8")
        except UnicodeDecodeError as exc:
            raise WireError(f"field {name} is not valid UTF-8", pos + exc.start) from None
        return e

    return step


def _write_string(name: str, nullable: bool, flexible: bool) -> WriteStep:
    def step(obj: Any, out: list[bytes]) -> None:
        v = getattr(obj, name)
        if v is None:
            if not nullable:
                raise ValueError(f"non-nullable field {name} is None")
            out.append(b"\x00" if flexible else b"\xff\xff")
            return
        out.append(_string_bytes(name, v, flexible))

    return step


def _string_bytes(name: str, v: str, flexible: bool) -> bytes:
    try:
        data = v.encode("utf-8")
    except (UnicodeEncodeError, AttributeError) as exc:
        raise ValueError(f"string field {name}: {exc}") from None
    n = len(data)
    if n > MAX_STRING_LENGTH:
        raise ValueError(f"string field {name} is {n} bytes, more than {MAX_STRING_LENGTH}")
    return (write_uvarint(n + 1) if flexible else INT16.pack(n)) + data


def _read_bytes(name: str, idx: int, nullable: bool, flexible: bool) -> ReadStep:
    unpack32 = INT32.unpack_from

    def step(buf: Buffer, pos: int, end: int, vals: list[Any]) -> int:
        start = pos
        if flexible:
            n, pos = read_uvarint(buf, pos, end)
            n -= 1
        else:
            if pos + 4 > end:
                raise WireError(f"bytes field {name} length needs 4 bytes, {max(end - pos, 0)} left", pos)
            n = unpack32(buf, pos)[0]
            pos += 4
        if n < 0:
            if n == -1 and nullable:
                vals[idx] = None
                return pos
            if n == -1:
                raise WireError(f"non-nullable field {name} was serialized as null", start)
            raise WireError(f"bytes field {name} has negative length {n}", start)
        e = pos + n
        if e > end:
            raise WireError(f"bytes field {name} length {n} exceeds the {end - pos} bytes left", start)
        vals[idx] = bytes(buf[pos:e])
        return e

    return step


def _write_bytes(name: str, nullable: bool, flexible: bool) -> WriteStep:
    def step(obj: Any, out: list[bytes]) -> None:
        v = getattr(obj, name)
        if v is None:
            if not nullable:
                raise ValueError(f"non-nullable field {name} is None")
            out.append(b"\x00" if flexible else b"\xff\xff\xff\xff")
            return
        n = len(v)
        out.append(write_uvarint(n + 1) if flexible else INT32.pack(n))
        out.append(bytes(v))

    return step


def _read_array(
    name: str, idx: int, type_: str, element: Layout | None, flexible: bool, nullable: bool = False
) -> ReadStep:
    unpack32 = INT32.unpack_from
    string_element = _read_string(name, 0, False, flexible)
    int_code = _INT_ARRAY_CODES.get(type_)

    def step(buf: Buffer, pos: int, end: int, vals: list[Any]) -> int:
        start = pos
        if flexible:
            n, pos = read_uvarint(buf, pos, end)
            n -= 1
        else:
            if pos + 4 > end:
                raise WireError(f"array field {name} count needs 4 bytes, {max(end - pos, 0)} left", pos)
            n = unpack32(buf, pos)[0]
            pos += 4
        if n < 0:
            if n == -1 and nullable:
                vals[idx] = None
                return pos
            if n == -1:
                raise WireError(f"non-nullable field {name} was serialized as null", start)
            raise WireError(f"array field {name} has negative count {n}", start)
        left = end - pos
        if n > left:
            raise WireError(
                f"array field {name}: tried to allocate a collection of size {n}, "
                f"but there are only {left} bytes remaining",
                start,
            )
        if int_code is not None:
            code, width = int_code
            if n * width > left:
                raise WireError(f"array field {name}: {n} {type_[2:]} elements exceed the {left} bytes left", start)
            vals[idx] = struct.unpack_from(f">{n}{code}", buf, pos)
            return pos + width * n
        items: list[Any] = []
        if element is not None:
            read = element.read
            for _ in range(n):
                item, pos = read(buf, pos, end)
                items.append(item)
        else:  # []string
            tmp: list[Any] = [None]
            for _ in range(n):
                pos = string_element(buf, pos, end, tmp)
                items.append(tmp[0])
        vals[idx] = tuple(items)
        return pos

    return step


def _write_array(name: str, type_: str, element: Layout | None, flexible: bool, nullable: bool = False) -> WriteStep:
    int_code = _INT_ARRAY_CODES.get(type_)

    def step(obj: Any, out: list[bytes]) -> None:
        items = getattr(obj, name)
        if items is None:
            if not nullable:
                raise ValueError(f"non-nullable array field {name} is None")
            out.append(b"\x00" if flexible else b"\xff\xff\xff\xff")
            return
        n = len(items)
        out.append(write_uvarint(n + 1) if flexible else INT32.pack(n))
        if int_code is not None:
            try:
                out.append(struct.pack(f">{n}{int_code[0]}", *items))
            except struct.error as exc:
                raise ValueError(f"array field {name}: {exc}") from None
        elif element is not None:
            for item in items:
                element.write(item, out)
        else:
            for item in items:
                out.append(_string_bytes(name, item, flexible))

    return step


def uuid_to_str(data: bytes) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def uuid_from_str(text: str) -> bytes:
    """The 16 bytes of a ``Uuid.toString()`` form (Kafka's ``Uuid.fromString``).

    Raises:
        ValueError: not 22 URL-safe base64 characters encoding 16 bytes.
    """
    try:
        data = base64.urlsafe_b64decode(text.encode("ascii") + b"==")
    except (binascii.Error, UnicodeEncodeError, AttributeError) as exc:
        raise ValueError(f"not a Kafka uuid string: {text!r} ({exc})") from None
    if len(data) != 16 or uuid_to_str(data) != text:
        raise ValueError(f"not a Kafka uuid string: {text!r}")
    return data


def _read_uuid(name: str, idx: int) -> ReadStep:
    def step(buf: Buffer, pos: int, end: int, vals: list[Any]) -> int:
        if pos + 16 > end:
            raise WireError(f"uuid field {name} needs 16 bytes, {max(end - pos, 0)} left", pos)
        vals[idx] = uuid_to_str(bytes(buf[pos : pos + 16]))
        return pos + 16

    return step


def _write_uuid(name: str) -> WriteStep:
    def step(obj: Any, out: list[bytes]) -> None:
        v = getattr(obj, name)
        if v is None:
            raise ValueError(f"uuid field {name} must not be None")
        out.append(uuid_from_str(v))

    return step


def _read_struct(name: str, idx: int, element: Layout, nullable: bool) -> ReadStep:
    """A (non-array, untagged) struct field; nullable ones start with a presence byte."""

    def step(buf: Buffer, pos: int, end: int, vals: list[Any]) -> int:
        if nullable:
            if pos >= end:
                raise WireError(f"struct field {name} presence byte needs 1 byte, 0 left", pos)
            marker = buf[pos]
            if marker == 0xFF:  # (byte) -1
                vals[idx] = None
                return pos + 1
            if marker != 1:
                # Kafka reads any non-negative byte as "present" but only ever writes 1
                raise WireError(f"struct field {name} has presence byte {marker} (Kafka writes -1 or 1)", pos)
            pos += 1
        vals[idx], pos = element.read(buf, pos, end)
        return pos

    return step


def _write_struct(name: str, element: Layout, nullable: bool, absent: bytes = b"\xff") -> WriteStep:
    """A (nullable) struct field: ``absent`` for None (int8 -1; a tagged struct's varint 0),
    else 1 when nullable, then the struct."""

    def step(obj: Any, out: list[bytes]) -> None:
        v = getattr(obj, name)
        if v is None:
            if not nullable:
                raise ValueError(f"non-nullable struct field {name} is None")
            out.append(absent)
            return
        if nullable:
            out.append(b"\x01")
        element.write(v, out)

    return step


@dataclass(frozen=True, slots=True)
class _TaggedSpec:
    """A known tagged field: where it goes and how its content is read and written."""

    tag: int
    name: str
    idx: int
    default: Any  # the value read when the tag is absent
    read: ReadStep  # reads the content into slot 0 of a scratch list
    write: WriteStep  # writes the content of ``getattr(obj, name)``
    skip: Any = None  # the value not written: ``default`` (a struct's: its empty struct)


def _tagged_spec(
    message: Message, f: Field, idx: int, default: Any, version: int, builders: dict[str, Builder]
) -> _TaggedSpec:
    assert f.tag is not None
    nullable = in_versions(f.nullable_versions, version)
    read: ReadStep
    write: WriteStep
    if f.type in _FIXED_CODES:
        read, write = _read_fixed([f], [0]), _write_fixed([f])
    elif f.type == "string":
        read, write = _read_string(f.name, 0, nullable, True), _write_string(f.name, nullable, True)
    elif f.type == "bytes":
        read, write = _read_bytes(f.name, 0, nullable, True), _write_bytes(f.name, nullable, True)
    elif f.single_struct_name is not None:
        element = _compile_struct(message, f.single_struct_name, f.fields, version, True, builders)
        read, write = (_read_tagged_struct(f.name, element, nullable), _write_tagged_struct(f.name, element, nullable))
        empty = empty_struct(f.fields, builders[f.single_struct_name][0], version)
        return _TaggedSpec(f.tag, f.name, idx, empty, read, write, empty)
    else:
        read, write = _field_steps(message, f, 0, version, True, nullable, builders)
    return _TaggedSpec(f.tag, f.name, idx, default, read, write, default)


def zero_value(f: Field) -> Any:
    """The value Kafka's generated constructor gives a field without a declared default (a
    sentinel field: its sentinel, i.e. ``None`` here)."""
    if f.sentinel is not None:
        return None
    if f.type.startswith("[]"):
        return ()
    if f.type in _FIXED_CODES:
        return 0
    return {"string": "", "bytes": b"", "uuid": uuid_to_str(bytes(16))}.get(f.type)


def empty_struct(fields: tuple[Field, ...], cls: type[Any], version: int) -> Any:
    """``new Struct()`` of Kafka's generated code: every field at its zero value. Kafka's writer
    and JsonConverter leave a tagged struct field out only when it equals this."""
    names = {f.name: zero_value(f) for f in fields if in_versions(f.versions, version)}
    return cls(**{k: v for k, v in names.items() if k in {d.name for d in dataclasses.fields(cls)}})


def _read_tagged_struct(name: str, element: Layout, nullable: bool) -> ReadStep:
    """Kafka's tagged nullable struct: an unsigned varint (0 = null, 1 = present) then the struct."""

    def step(buf: Buffer, pos: int, end: int, vals: list[Any]) -> int:
        if nullable:
            start = pos
            marker, pos = read_uvarint(buf, pos, end)
            if marker == 0:
                vals[0] = None
                return pos
            if marker != 1:
                raise WireError(f"tagged struct field {name} has presence varint {marker} (Kafka writes 0 or 1)", start)
        vals[0], pos = element.read(buf, pos, end)
        return pos

    return step


def _write_tagged_struct(name: str, element: Layout, nullable: bool) -> WriteStep:
    return _write_struct(name, element, nullable, absent=b"\x00")


def _read_tagged_known(idx: int, known: list[_TaggedSpec]) -> ReadStep:
    """A tagged-field section with known tags: each known tag is read into its attribute
    (any order, like Kafka's generated ``switch (_tag)``), the others kept raw."""
    by_tag = {k.tag: k for k in known}
    defaults = tuple((k.idx, k.default) for k in known)

    def step(buf: Buffer, pos: int, end: int, vals: list[Any]) -> int:
        for i, default in defaults:
            vals[i] = default
        count_pos = pos
        count, pos = read_uvarint(buf, pos, end)
        if count == 0:
            vals[idx] = ()
            return pos
        if count * 2 > end - pos:
            raise WireError(f"tagged-field count {count} exceeds the {end - pos} bytes left", count_pos)
        unknown: list[tuple[int, bytes]] = []
        scratch: list[Any] = [None]
        for _ in range(count):
            tag, pos = read_uvarint(buf, pos, end)
            size_pos = pos
            size, pos = read_uvarint(buf, pos, end)
            if size > end - pos:
                raise WireError(f"tagged field {tag} size {size} exceeds the {end - pos} bytes left", size_pos)
            e = pos + size
            spec = by_tag.get(tag)
            if spec is None:
                unknown.append((tag, bytes(buf[pos:e])))
            else:
                after = spec.read(buf, pos, e, scratch)
                if after != e:
                    raise WireError(
                        f"tagged field {spec.name} (tag {tag}) left {e - after} of its {size} bytes unread", after
                    )
                vals[spec.idx] = scratch[0]
            pos = e
        vals[idx] = tuple(unknown)
        return pos

    return step


def _write_tagged_known(known: list[_TaggedSpec]) -> WriteStep:
    """Kafka's writer: known fields that differ from their default, in tag order, with the
    unknown ones written before the first known tag they precede (``RawTaggedFieldWriter``)."""

    def step(obj: Any, out: list[bytes]) -> None:
        unknown = list(getattr(obj, "tagged_fields", ()))
        for tag, _data in unknown:
            if any(k.tag == tag for k in known):
                raise ValueError(f"unknown tagged field {tag} duplicates a known tag")
        parts: list[bytes] = []
        count = 0
        u = 0

        def raw_until(limit: int) -> None:
            nonlocal u, count
            while u < len(unknown) and unknown[u][0] < limit:
                tag, data = unknown[u]
                parts.append(write_uvarint(tag) + write_uvarint(len(data)) + bytes(data))
                u += 1
                count += 1

        for k in known:
            if getattr(obj, k.name) == k.skip:
                continue
            raw_until(k.tag)
            content: list[bytes] = []
            k.write(obj, content)
            data = b"".join(content)
            parts.append(write_uvarint(k.tag) + write_uvarint(len(data)) + data)
            count += 1
        raw_until(1 << 32)
        out.append(write_uvarint(count))
        out.extend(parts)

    return step


def _read_tagged(idx: int) -> ReadStep:
    def step(buf: Buffer, pos: int, end: int, vals: list[Any]) -> int:
        if pos < end and buf[pos] == 0:  # the common case: no tagged fields
            return pos + 1
        vals[idx], pos = read_tagged_fields(buf, pos, end)
        return pos

    return step


def _write_tagged(obj: Any, out: list[bytes]) -> None:
    tagged = getattr(obj, "tagged_fields", ())
    out.append(write_tagged_fields(tagged) if tagged else b"\x00")
