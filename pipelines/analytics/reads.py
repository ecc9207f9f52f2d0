"""Driver-side reads of the warehouse for the analytics commands (delta-rs, no Spark): the one
place ``inspect`` and its lag view get their ``TableIO`` and turn Arrow timestamps into epoch ms."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipelines.tableio import TableIO

if TYPE_CHECKING:
    from pipelines.config import Config


def epoch_ms(col: Any) -> list[int | None]:
    """Epoch ms of an Arrow timestamp column (any unit)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.cast(pc.cast(col, pa.timestamp("ms", "UTC")), pa.int64()).to_pylist()  # type: ignore[no-any-return]


def driver_io(cfg: Config) -> TableIO:
    """Driver-side reads (delta-rs, no Spark) of the warehouse's tables."""

    return TableIO(cfg, None, engine="rust")
