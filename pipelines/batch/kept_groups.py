"""The groups a batch replay keeps for the next incremental run (``pipelines.batch.carried``):
one file per replay bucket, its groups' entries (``pipelines.records.carried.GroupEntry``)
pickled together, under the run's state directory. Written by the replay tasks of both the whole
replay (``replay.route_replay``) and the incremental one (``carried.route_carried``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coordinator_core import ReplaySettings
from pipelines.errors import KEPT_STATE
from pipelines.uri import filesystem

if TYPE_CHECKING:
    from pipelines.records.carried import BucketReplayer, GroupEntry


def bucket_path(state_dir: str, bucket: int) -> str:
    return f"{state_dir}/bucket-{bucket:05d}.pkl"


def write_bucket(state_dir: str, bucket: int, groups: dict[str, GroupEntry]) -> None:
    """One bucket's groups (``carried.encode_bucket``), written whole (a retried task rewrites it)."""
    # lazy: pipelines.records.carried loads numpy/pyarrow when imported (measured: heavy_probe)
    from pipelines.records.carried import encode_bucket

    fs, inner = filesystem(bucket_path(state_dir, bucket))
    fs.create_dir(inner.rsplit("/", 1)[0], recursive=True)
    with fs.open_output_stream(inner) as fh:
        fh.write(encode_bucket(groups))


def read_bucket_state(state_dir: str, bucket: int) -> dict[str, GroupEntry]:
    """One bucket's kept groups ({} when the bucket had none)."""
    from pyarrow import fs as pafs

    # lazy: pipelines.records.carried loads numpy/pyarrow when imported (measured: heavy_probe)
    from pipelines.records.carried import decode_bucket

    fs, inner = filesystem(bucket_path(state_dir, bucket))
    if fs.get_file_info(inner).type == pafs.FileType.NotFound:
        return {}
    with fs.open_input_stream(inner) as fh:
        blob = fh.read()
    try:
        return decode_bucket(blob)
    except Exception as exc:  # a truncated or foreign file: unpickling raises many kinds
        raise ValueError(f"{KEPT_STATE} file {inner} does not read: {type(exc).__name__}: {exc}") from exc


def replayer(options: dict[str, Any]) -> BucketReplayer:
    """The carried replay of a route's options (``state_options``)."""
    # lazy: pipelines.records.carried loads numpy/pyarrow when imported (measured: heavy_probe)
    from pipelines.records.carried import BucketReplayer

    return BucketReplayer(
        ReplaySettings.from_strings(**options["settings"]),
        tuple(options["tables"]),
        int(options["num_partitions"]),
        int(options["delay_ms"]),
    )
