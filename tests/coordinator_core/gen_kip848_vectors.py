"""Generate the golden vectors of Kafka 4's modern group records from Kafka's own message JSON.

Run once (the output is committed under ``tests/coordinator_core/vectors/kip848/``)::

    python tests/coordinator_core/gen_kip848_vectors.py \\
        --git /path/to/apache-kafka.git --ref 4.4        # or: --dir .../common/message

(The committed files were made from confluentinc/kafka's branch ``4.4``, its mirror of Apache
Kafka 4.4 — ``--source-name`` records that.)

It reads ``group-coordinator/src/main/resources/common/message/*Key.json`` / ``*Value.json``
(Kafka 4.4 = trunk for these files), and for every record type with a final schema builds
sample values straight from the schema — ``min`` (nulls, empty arrays, tagged fields absent),
``full`` (every nullable set, two-element arrays, every tagged field set to a non-default value,
non-ASCII strings, negative and 64-bit integers), ``unknown_tags`` (``full`` plus unknown tagged
fields at the top level and in the first nested struct) and ``tombstone`` — and encodes them
with the small schema-driven encoder below, written from Kafka's ``MessageDataGenerator`` rules
and independent of ``coordinator_core.codec.wire``. The expected console JSON is produced the same
way, from ``JsonConverterGenerator``'s rules (camelCase names, tagged fields only when not
default, uuids as ``Uuid.toString()``, bytes base64). The test suite then checks that the core
codec decodes every vector to exactly that JSON and re-encodes it byte for byte.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import struct
import subprocess
from pathlib import Path
from typing import Any

MESSAGE_DIR = "group-coordinator/src/main/resources/common/message"
OUT_DIR = Path(__file__).parent / "vectors" / "kip848"
# Final schemas of Kafka 4.x (share/streams "in development" until 4.2; 9, 18, 24 never final).
RECORD_TYPES = (3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15, 16, 17, 19, 20, 21, 22, 23)
FIXED = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "int64": "q"}


# ---------------------------------------------------------------------------------------------
# Schema loading
# ---------------------------------------------------------------------------------------------
def strip_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.strip().startswith("//"))


def load_schemas(args: argparse.Namespace) -> tuple[dict[str, dict[str, Any]], dict[str, str], str]:
    """name -> parsed JSON, name -> git blob id, provenance string."""
    schemas: dict[str, dict[str, Any]] = {}
    blobs: dict[str, str] = {}
    if args.git:
        listing = subprocess.run(
            ["git", "-C", args.git, "ls-tree", args.ref, MESSAGE_DIR + "/"], check=True, capture_output=True, text=True
        ).stdout
        for line in listing.splitlines():
            meta, path = line.split("\t")
            blob = meta.split()[2]
            text = subprocess.run(
                ["git", "-C", args.git, "cat-file", "blob", blob], check=True, capture_output=True, text=True
            ).stdout
            spec = json.loads(strip_comments(text))
            schemas[spec["name"]] = spec
            blobs[spec["name"]] = blob
        commit = subprocess.run(
            ["git", "-C", args.git, "rev-parse", args.ref], check=True, capture_output=True, text=True
        ).stdout.strip()
        provenance = f"{args.source_name} {args.ref} ({commit}) {MESSAGE_DIR}"
    else:
        for path in sorted(Path(args.dir).glob("*.json")):
            spec = json.loads(strip_comments(path.read_text()))
            schemas[spec["name"]] = spec
            data = path.read_bytes()
            blobs[spec["name"]] = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        provenance = f"{args.dir}"
    return schemas, blobs, provenance


def versions_include(spec: str | None, version: int) -> bool:
    if spec is None or spec == "none":
        return False
    if spec.endswith("+"):
        return version >= int(spec[:-1])
    if "-" in spec:
        lo, hi = spec.split("-")
        return int(lo) <= version <= int(hi)
    return version == int(spec)


def field_versions(f: dict[str, Any]) -> str:
    return f.get("versions") or f.get("taggedVersions")  # FieldSpec: versions defaults to taggedVersions


def struct_fields(f: dict[str, Any], common: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    if "fields" in f:
        return f["fields"]
    name = f["type"][2:] if f["type"].startswith("[]") else f["type"]
    return common[name]


# ---------------------------------------------------------------------------------------------
# Kafka defaults and sample values
# ---------------------------------------------------------------------------------------------
def kafka_default(f: dict[str, Any]) -> Any:
    t = f["type"]
    d = f.get("default")
    if d is None and "default" in f:
        return None
    if d == "null":
        return None
    if t in FIXED:
        return int(d) if d is not None else 0
    if t == "uuid":
        return bytes(16)
    if t == "string":
        return d if d is not None else ""
    if t == "bytes":
        return b""
    if t.startswith("[]"):
        return []
    return None  # struct: FieldSpec default for a nullable struct is null


def tag_left_out(f: dict[str, Any], v: Any, common: dict[str, list[dict[str, Any]]]) -> bool:
    """Whether Kafka's generated writer and JsonConverter leave a tagged field out: it equals its
    default; a struct field only when it equals the empty struct (``new Struct()``), whatever its
    JSON ``default`` says, so a null struct is written (presence varint 0) and printed (null), as
    the Kafka 4.4 broker writes ConsumerGroupMemberMetadataValue's ClassicMemberMetadata."""
    t = f["type"]
    if t in FIXED or t in ("uuid", "string", "bytes") or t.startswith("[]"):
        return bool(v == kafka_default(f))
    empty = {
        sub["name"]: kafka_default(sub) for sub in struct_fields(f, common) if versions_include(field_versions(sub), 0)
    }
    return v is not None and v == empty


class Sampler:
    def __init__(self) -> None:
        self.k = 0

    def next(self) -> int:
        self.k += 1
        return self.k

    def value(self, f: dict[str, Any], mode: str, common: dict[str, list[dict[str, Any]]]) -> Any:
        t = f["type"]
        nullable = versions_include(f.get("nullableVersions"), 0)
        if mode == "min":
            if "tag" in f:
                return kafka_default(f)
            if nullable:
                return None
        k = self.next()
        if t == "int8":
            return 0 if mode == "min" else 1 + k % 2
        if t == "int16":
            return 0 if mode == "min" else -3 - k
        if t == "uint16":
            return 0 if mode == "min" else 65535 - k
        if t == "int32":
            if mode == "min":
                return 0
            v = 1000 * k + 7
            return -v if f["name"].endswith("Epoch") and k % 5 == 0 else v
        if t == "int64":
            return 0 if mode == "min" else -(2**62) + 12345 * k
        if t == "uuid":
            return bytes(16) if mode == "min" else hashlib.md5(f"{f['name']}{k}".encode()).digest()
        if t == "string":
            return "" if mode == "min" else f"{f['name'][:6].lower()}-{k}-\u00fc\u20ac"
        if t == "bytes":
            return b"" if mode == "min" else bytes(range(k % 5 + 2))
        if t.startswith("[]"):
            if mode == "min":
                return []
            elem = t[2:]
            if elem in FIXED:
                lo, hi = {
                    "int16": (-(2**15), 2**15 - 1),
                    "int32": (-(2**31), 2**31 - 1),
                    "int64": (-(2**63), 2**63 - 1),
                }[elem]
                return [k, lo, hi]
            if elem == "string":
                return [f"t{k}-a", f"t{k}-\u00e9"]
            sub = struct_fields(f, common)
            return [self.struct(sub, mode, common) for _ in range(2)]
        return self.struct(struct_fields(f, common), mode, common)

    def struct(
        self, fields: list[dict[str, Any]], mode: str, common: dict[str, list[dict[str, Any]]]
    ) -> dict[str, Any]:
        return {f["name"]: self.value(f, mode, common) for f in fields if versions_include(field_versions(f), 0)}


def add_unknown_tags(
    value: dict[str, Any], fields: list[dict[str, Any]], common: dict[str, list[dict[str, Any]]]
) -> None:
    """Unknown tagged fields (tags above every known one, a 2-byte-varint tag too), at the top
    level and in the first element of the first struct array."""
    value["_unknown"] = [(9, b"\x01\x02\x03"), (200, b"")]
    for f in fields:
        if f["type"].startswith("[]") and f["type"][2:] not in (*FIXED, "string", "uuid") and value.get(f["name"]):
            value[f["name"]][0]["_unknown"] = [(17, b"\xff")]
            return


# ---------------------------------------------------------------------------------------------
# Encoder (MessageDataGenerator's rules)
# ---------------------------------------------------------------------------------------------
def uvarint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def enc_string(s: str | None, flexible: bool) -> bytes:
    if s is None:
        return b"\x00" if flexible else b"\xff\xff"
    b = s.encode()
    return (uvarint(len(b) + 1) if flexible else struct.pack(">h", len(b))) + b


def enc_field(
    f: dict[str, Any], v: Any, flexible: bool, common: dict[str, list[dict[str, Any]]], tagged: bool = False
) -> bytes:
    t = f["type"]
    if t in FIXED:
        return struct.pack(">" + FIXED[t], v)
    if t == "uuid":
        return bytes(v)
    if t == "string":
        return enc_string(v, flexible)
    if t == "bytes":
        if v is None:
            return b"\x00" if flexible else b"\xff\xff\xff\xff"
        return (uvarint(len(v) + 1) if flexible else struct.pack(">i", len(v))) + bytes(v)
    if t.startswith("[]"):
        if v is None:
            return b"\x00" if flexible else b"\xff\xff\xff\xff"
        out = uvarint(len(v) + 1) if flexible else struct.pack(">i", len(v))
        elem = t[2:]
        for item in v:
            if elem in FIXED:
                out += struct.pack(">" + FIXED[elem], item)
            elif elem == "string":
                out += enc_string(item, flexible)
            else:
                out += enc_struct(struct_fields(f, common), item, flexible, common)
        return out
    nullable = versions_include(f.get("nullableVersions"), 0)
    if tagged:  # tagged nullable struct: varint 0 (null) / 1 then the struct
        if v is None:
            return b"\x00"
        return (b"\x01" if nullable else b"") + enc_struct(struct_fields(f, common), v, flexible, common)
    if v is None:
        return b"\xff"
    return (b"\x01" if nullable else b"") + enc_struct(struct_fields(f, common), v, flexible, common)


def enc_struct(
    fields: list[dict[str, Any]], value: dict[str, Any], flexible: bool, common: dict[str, list[dict[str, Any]]]
) -> bytes:
    out = b""
    tagged: list[tuple[int, bytes]] = []
    for f in fields:
        if not versions_include(field_versions(f), 0):
            continue
        v = value[f["name"]]
        if "tag" in f:
            if not tag_left_out(f, v, common):
                tagged.append((f["tag"], enc_field(f, v, flexible, common, tagged=True)))
        else:
            out += enc_field(f, v, flexible, common)
    if flexible:
        tagged += value.get("_unknown", [])
        tagged.sort(key=lambda x: x[0])  # Kafka writes tags in ascending order
        out += uvarint(len(tagged))
        for tag, data in tagged:
            out += uvarint(tag) + uvarint(len(data)) + data
    return out


# ---------------------------------------------------------------------------------------------
# JSON (JsonConverterGenerator's rules)
# ---------------------------------------------------------------------------------------------
def camel(name: str) -> str:
    return name[0].lower() + name[1:]


def json_field(f: dict[str, Any], v: Any, common: dict[str, list[dict[str, Any]]]) -> Any:
    t = f["type"]
    if v is None:
        return None
    if t == "uuid":
        return base64.urlsafe_b64encode(v).rstrip(b"=").decode()
    if t == "bytes":
        return base64.b64encode(v).decode()
    if t.startswith("[]"):
        elem = t[2:]
        if elem in (*FIXED, "string"):
            return list(v)
        return [json_struct(struct_fields(f, common), item, common) for item in v]
    if t in (*FIXED, "string"):
        return v
    return json_struct(struct_fields(f, common), v, common)


def json_struct(
    fields: list[dict[str, Any]], value: dict[str, Any], common: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields:
        if not versions_include(field_versions(f), 0):
            continue
        v = value[f["name"]]
        if "tag" in f and tag_left_out(f, v, common):
            continue
        out[camel(f["name"])] = json_field(f, v, common)
    return out


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--git", help="an apache/kafka git directory")
    src.add_argument("--dir", help="a directory holding Kafka's group-coordinator message JSON files")
    ap.add_argument("--ref", default="4.4", help="with --git: the branch/tag/commit (default: %(default)s)")
    ap.add_argument("--source-name", default="apache/kafka", help="what --git is, for the provenance line")
    ap.add_argument("--out", default=str(OUT_DIR))
    args = ap.parse_args()
    schemas, blobs, provenance = load_schemas(args)
    by_type: dict[int, dict[str, dict[str, Any]]] = {}
    for spec in schemas.values():
        if spec.get("type") in ("coordinator-key", "coordinator-value") and spec.get("apiKey") in RECORD_TYPES:
            by_type.setdefault(spec["apiKey"], {})["key" if spec["type"] == "coordinator-key" else "value"] = spec
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    for rt in RECORD_TYPES:
        key_spec, value_spec = by_type[rt]["key"], by_type[rt]["value"]
        assert key_spec["validVersions"] == "0" and value_spec["validVersions"] == "0", rt
        assert value_spec["flexibleVersions"] == "0+" and key_spec.get("flexibleVersions", "none") == "none", rt
        common = {c["name"]: c["fields"] for c in value_spec.get("commonStructs", [])}
        key_fields = key_spec["fields"]
        key_value = {
            f["name"]: {"GroupId": "grp-\u00fc-1", "MemberId": "member-7f3a", "RegularExpression": "orders-.*"}[
                f["name"]
            ]
            for f in key_fields
        }
        key_bytes = struct.pack(">h", rt) + enc_struct(key_fields, key_value, False, {})
        key_json = {"type": rt, "data": json_struct(key_fields, key_value, {})}
        cases = []
        sampler = Sampler()
        for mode in ("min", "full", "unknown_tags"):
            value = sampler.struct(value_spec["fields"], "min" if mode == "min" else "full", common)
            if mode == "unknown_tags":
                add_unknown_tags(value, value_spec["fields"], common)
            value_bytes = struct.pack(">h", 0) + enc_struct(value_spec["fields"], value, True, common)
            cases.append(
                {
                    "name": mode,
                    "key_hex": key_bytes.hex(),
                    "value_hex": value_bytes.hex(),
                    "kafka_json": {
                        "key": key_json,
                        "value": {"version": 0, "data": json_struct(value_spec["fields"], value, common)},
                    },
                }
            )
        cases.append(
            {
                "name": "tombstone",
                "key_hex": key_bytes.hex(),
                "value_hex": None,
                "kafka_json": {"key": key_json, "value": None},
            }
        )
        name = value_spec["name"].removesuffix("Value")
        doc = {
            "record_type": rt,
            "name": name,
            "source": provenance,
            "schemas": {key_spec["name"]: blobs[key_spec["name"]], value_spec["name"]: blobs[value_spec["name"]]},
            "generator": "tests/coordinator_core/gen_kip848_vectors.py",
            "cases": cases,
        }
        path = out_dir / f"{rt:02d}-{re.sub(r'[^A-Za-z]', '', name)}.json"
        path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
        print(f"{path}: {len(cases)} cases")


if __name__ == "__main__":
    main()
