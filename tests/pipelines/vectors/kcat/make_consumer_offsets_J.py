"""Regenerates consumer_offsets_J.jsonl: real `kcat -J` output (Debian bookworm kcat 1.7.1,
librdkafka 2.0.2) over records produced to librdkafka's mock cluster.

    .venv/bin/python tests/pipelines/vectors/kcat/make_consumer_offsets_J.py > tests/pipelines/vectors/kcat/consumer_offsets_J.jsonl

The keys/values are the ones tests/pipelines/test_raw_files.py expects (they cover every byte
value, quote, backslash and newline bytes, non-ASCII UTF-8 metadata and a tombstone).
"""

import subprocess
import sys

from coordinator_core import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue, encode_key, encode_value
from pipelines.kafka.mock import MockKafkaCluster


def main() -> None:
    T0 = 1_700_000_000_000
    recs = []
    # a key with quote, backslash and newline bytes; UTF-8 metadata; a tombstone; a value holding
    # every byte value 0x00-0xff (the last one is no valid OffsetCommitValue: it stays raw bytes)
    recs.append(
        (
            encode_key(OffsetCommitKey('g-"q\\b\n', "orders", 0)),
            encode_value(OffsetCommitValue(42, "", T0, leader_epoch=3, version=3)),
            0,
            T0,
        )
    )
    recs.append(
        (
            encode_key(OffsetCommitKey("billing", "orders", 1)),
            encode_value(OffsetCommitValue(7, "é€", T0 + 1, version=1, expire_timestamp=None)),
            0,
            T0 + 1,
        )
    )
    recs.append((encode_key(GroupMetadataKey("billing")), None, 0, T0 + 2))
    recs.append((encode_key(OffsetCommitKey("bin", "t", 2)), bytes([0, 3]) + bytes(range(256)), 0, T0 + 3))
    with MockKafkaCluster(1) as mock:
        mock.produce(recs)
        out = subprocess.run(
            [
                "kcat",
                "-C",
                "-b",
                mock.bootstrap_servers,
                "-t",
                "__consumer_offsets",
                "-p",
                "0",
                "-J",
                "-e",
                "-o",
                "beginning",
                "-q",
            ],
            capture_output=True,
            timeout=60,
        )
        sys.stdout.buffer.write(out.stdout)
        sys.stderr.buffer.write(out.stderr)


if __name__ == "__main__":
    main()
