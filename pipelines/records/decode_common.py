"""Constants the decoder's parts share: union kinds, input columns, output schemas.

(``schemas.shapes`` declares the shapes; this module holds their Arrow forms and codes.)
"""

from __future__ import annotations

import pyarrow as pa

from schemas.decoded import GROUP_METADATA
from schemas.shapes import DECODE_FAST, DECODE_UNION

# kind codes of the union output
KIND_OFFSET_COMMIT = 0
KIND_GROUP_METADATA = 1
KIND_UNSUPPORTED = 2
KIND_QUARANTINE = 3
KIND_GROUP_RECORD = 4  # Kafka 4 group records (KIP-848/932/1071), decoded with ``modern=True``
KIND_NAMES = {
    KIND_OFFSET_COMMIT: "offset_commits",
    KIND_GROUP_METADATA: "group_metadata",
    KIND_UNSUPPORTED: "unsupported_records",
    KIND_QUARANTINE: "quarantine",
    KIND_GROUP_RECORD: "group_records",
}

# |ms| above this overflows int64 microseconds (Spark/Delta TIMESTAMP): such rows are quarantined.
MAX_ABS_MS = (2**63 - 1) // 1000

# Raw columns the decoder reads: only these enter mapInArrow (every input column is shipped to
# the Python worker, read or not).
INPUT_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp")

# Fields the fast path produces and the union batch emitted by the decode (``schemas.shapes``).
FAST_SCHEMA = DECODE_FAST.arrow_schema()
UNION_SCHEMA = DECODE_UNION.arrow_schema()
TS = pa.timestamp("us", tz="UTC")
MEMBER_ARROW = GROUP_METADATA.arrow_schema().field("members").type
