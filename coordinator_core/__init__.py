"""offsetlake's pure-Python core: records, codecs, the classic group coordinator's rules.

Rules: standard library only (a test imports every submodule in a fresh interpreter and checks
``sys.modules``). The public codec names are re-exported lazily so that ``import
coordinator_core`` stays cheap.
"""

from __future__ import annotations

from typing import Any

_LAZY = {
    "decode_key": "coordinator_core.codec",
    "decode_value": "coordinator_core.codec",
    "decode_record": "coordinator_core.codec",
    "encode_key": "coordinator_core.codec",
    "encode_value": "coordinator_core.codec",
    "encode_record": "coordinator_core.codec",
    "partition_for": "coordinator_core.partitioner",
    "to_kafka_json": "coordinator_core.formatter",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'coordinator_core' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
