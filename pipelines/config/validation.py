"""Validating configuration data against the declared sections (``pipelines.config.sections``).

Rules:
- Every file is validated on its own before merging, so an error names the file that holds the
  bad value: ``UsageError("conf/local.yaml: replay.retention_ms: expected a positive integer, got
  'abc'")``. Unknown keys are errors too (with a "did you mean" hint).
- Secrets may only be written as ``${ENV_VAR}`` references (``is_secret_key`` names the free-form
  option keys that hold secrets); a literal is refused without echoing it.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal

from pipelines.config.sections import Secret
from pipelines.errors import UsageError


def show(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def split_key(key: str) -> list[str]:
    """The segments of a dotted override key; a segment holding dots (a Spark or Kafka option
    name) is quoted, ``spark.conf."spark.sql.shuffle.partitions"``, or bracketed,
    ``spark.conf[spark.sql.shuffle.partitions]``."""
    parts: list[str] = []
    i, n = 0, len(key)
    while i < n:
        if key[i] == '"':
            end = key.find('"', i + 1)
            if end < 0:
                raise UsageError(f"--set {key}: unclosed quote")
            parts.append(key[i + 1 : end])
            i = end + 1
        elif key[i] == "[":
            end = key.find("]", i + 1)
            if end < 0:
                raise UsageError(f"--set {key}: unclosed [")
            parts.append(key[i + 1 : end])
            i = end + 1
        else:
            j = i
            while j < n and key[j] not in '.["':
                j += 1
            parts.append(key[i:j])
            i = j
        if i < n and key[i] == ".":
            i += 1
            if i == n:
                parts.append("")
        elif i < n and key[i] not in '["':
            raise UsageError(f"--set {key}: expected '.' after a quoted or bracketed segment")
    if not parts or any(not p for p in parts):
        raise UsageError(f"--set {key}: empty key segment")
    return parts


def dotted_to_nested(overrides: Mapping[str, Any]) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for key, value in overrides.items():
        parts = split_key(key)
        node = nested
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise UsageError(f"overrides: {key}: conflicts with another override")
        node[parts[-1]] = value
    return nested


def deep_merge(a: dict[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for key, value in b.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def fields_of(cls: type) -> dict[str, dataclasses.Field[Any]]:
    return {f.name: f for f in dataclasses.fields(cls) if not f.metadata.get("internal")}


_HINTS: dict[type, dict[str, Any]] = {}


def hints_of(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def validated_partial(data: Any, origin: str, cls: type, prefix: str = "") -> dict[str, Any]:
    """Check types/values of the keys present in ``data`` (missing keys keep their defaults)."""
    where = prefix.rstrip(".") or "(top level)"
    if not isinstance(data, dict):
        raise UsageError(f"{origin}: {where}: expected a mapping, got {show(data)}")
    fields = fields_of(cls)
    hints = hints_of(cls)
    out: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if not isinstance(key, str) or key not in fields:
            hint = difflib.get_close_matches(str(key), list(fields), n=1)
            more = f" (did you mean '{prefix}{hint[0]}'?)" if hint else f" (known: {', '.join(fields)})"
            raise UsageError(f"{origin}: {path}: unknown key{more}")
        f = fields[key]
        tp = hints[key]
        if dataclasses.is_dataclass(tp):
            out[key] = validated_partial(value, origin, tp, f"{path}.")  # type: ignore[arg-type]
        else:
            out[key] = check_value(value, tp, f.metadata, origin, path)
    return out


def check_value(value: Any, tp: Any, meta: Mapping[str, Any], origin: str, path: str) -> Any:
    """``value`` checked against the field type ``tp`` and its metadata; the value to keep."""
    if meta.get("secret"):
        return _secret(value, origin, path)
    optional = False
    origin_tp = typing.get_origin(tp)
    if origin_tp in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        optional = len(args) < len(typing.get_args(tp))
        tp = args[0] if len(args) == 1 else typing.Union[tuple(args)]  # noqa: UP007
        origin_tp = typing.get_origin(tp)
    if value is None:
        if optional:
            return None
        raise _fail(origin, path, value, describe(tp, meta))
    if origin_tp is Literal:
        choices = typing.get_args(tp)
        if value not in choices:
            raise _fail(origin, path, value, "one of " + " | ".join(str(c) for c in choices))
        return value
    if tp in (bool, int, float, str):
        return _scalar(value, tp, meta, origin, path)
    if origin_tp is list:
        (item_tp,) = typing.get_args(tp)
        if not isinstance(value, list):
            raise _fail(origin, path, value, f"a list of {describe(item_tp, {})}")
        return [check_value(v, item_tp, {}, origin, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin_tp is dict:
        return _mapping(value, typing.get_args(tp)[1], origin, path)
    if origin_tp in (typing.Union, types.UnionType):
        for alt in typing.get_args(tp):
            try:
                return check_value(value, alt, meta, origin, path)
            except UsageError:
                continue
        raise _fail(origin, path, value, " or ".join(describe(a, {}) for a in typing.get_args(tp)))
    raise _fail(origin, path, value, str(tp))  # pragma: no cover - a field type the validator does not know


def _fail(origin: str, path: str, value: Any, expected: str) -> UsageError:
    return UsageError(f"{origin}: {path}: expected {expected}, got {show(value)}")


def _secret(value: Any, origin: str, path: str) -> Secret | None:
    if value is None:
        return None
    if isinstance(value, Secret):
        return value
    if isinstance(value, str) and (m := _ENV_REF.match(value.strip())):
        return Secret(m.group(1))
    raise UsageError(
        f"{origin}: {path}: secrets must be an environment reference like ${{KAFKA_SASL_PASSWORD}}, "
        "never a literal value"
    )


def _scalar(value: Any, tp: type, meta: Mapping[str, Any], origin: str, path: str) -> Any:
    check = meta.get("check")
    if tp is bool:
        if not isinstance(value, bool):
            raise _fail(origin, path, value, "true or false")
        return value
    if tp is int:
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or (check == "positive" and value <= 0)
            or (check == "non_negative" and value < 0)
        ):
            raise _fail(origin, path, value, describe(tp, meta))
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _fail(origin, path, value, describe(tp, meta))
        v = float(value)
        if (check == "positive" and v <= 0) or (check == "fraction" and not 0.0 <= v <= 1.0):
            raise _fail(origin, path, value, describe(tp, meta))
        return v
    if not isinstance(value, str) or (check == "non_empty" and not value.strip()):
        raise _fail(origin, path, value, describe(tp, meta))
    return value


def _mapping(value: Any, val_tp: Any, origin: str, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(origin, path, value, "a mapping")
    out: dict[str, Any] = {}
    for k, v in value.items():
        if not isinstance(k, str):
            raise UsageError(f"{origin}: {path}: keys must be strings, got {show(k)}")
        if is_secret_key(k):
            if isinstance(v, Secret):
                out[k] = v
                continue
            if isinstance(v, str) and (m := _ENV_REF.match(v.strip())):
                out[k] = Secret(m.group(1))
                continue
            raise UsageError(
                f"{origin}: {path}.{k}: this key holds a secret: write it as an environment reference "
                "like ${MY_SECRET}, never a literal value"
            )
        if isinstance(v, (dict, list)) or v is None:
            # never echo a nested value: a dotted option key given with --set arrives nested
            got = "a mapping" if isinstance(v, dict) else "a list" if isinstance(v, list) else "null"
            hint = (
                f" (an option name with dots: --set '{path}.\"{k}.…\"=VALUE' or {path}[{k}.…]=VALUE)"
                if isinstance(v, dict)
                else ""
            )
            raise UsageError(f"{origin}: {path}.{k}: expected a scalar, got {got}{hint}")
        out[k] = check_value(v, val_tp, {}, origin, f"{path}.{k}")
    return out


def describe(tp: Any, meta: Mapping[str, Any]) -> str:
    check = meta.get("check")
    if tp is int:
        return {"positive": "a positive integer", "non_negative": "a non-negative integer"}.get(
            check or "", "an integer"
        )
    if tp is float:
        return {"positive": "a positive number", "fraction": "a number between 0 and 1"}.get(check or "", "a number")
    if tp is str:
        return "a non-empty string" if check == "non_empty" else "a string"
    if tp is bool:
        return "true or false"
    return getattr(tp, "__name__", str(tp))


def to_plain(obj: Any, *, redact: bool = False) -> Any:
    if isinstance(obj, Secret):
        if redact and not obj.is_set():
            return f"${{{obj.env_var}}} (unset)"
        return f"${{{obj.env_var}}}"
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {
            f.name: to_plain(getattr(obj, f.name), redact=redact)
            for f in dataclasses.fields(obj)
            if not f.metadata.get("internal")
        }
    if isinstance(obj, dict):
        return {k: to_plain(v, redact=redact) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_plain(v, redact=redact) for v in obj]
    return obj


#: An option key that names a secret (searched case-insensitively in the whole key): passwords,
#: secrets, JAAS configs, tokens, credentials, private/API/access keys, any key ending in ``key``,
#: Azure account keys (``fs.azure.account.key.<account>...``), SAS tokens
#: (``fs.azure.sas.<container>.<account>...``, ``fs.azure.sas.fixed.token...``), connection
#: strings and authorization headers
SECRET_KEY_RE = re.compile(
    r"(password|passwd|secret|jaas|token|credential|private[._-]?key|api[._-]?key|access[._-]?key"
    r"|account[._-]?key|(^|[._-])sas([._-]|$)|connection[._-]?string|authorization|(^|[._])key$)",
    re.IGNORECASE,
)
#: A key that names how a secret is obtained, not a secret: a provider class
#: (``fs.s3a.aws.credentials.provider``, ``fs.azure.sas.token.provider.type``,
#: ``fs.azure.account.keyprovider.<account>``), a type, class or implementation name
NOT_SECRET_KEY_RE = re.compile(r"(provider|[._](type|class|impl)$)", re.IGNORECASE)


def is_secret_key(key: str) -> bool:
    """True when a free-form option key holds a secret (``SECRET_KEY_RE``, ``NOT_SECRET_KEY_RE``)."""
    return bool(SECRET_KEY_RE.search(key)) and not NOT_SECRET_KEY_RE.search(key)


_ENV_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")
