"""What a stream source leaves of a micro-batch beside its rows: the one interface the replay
query's sink receives (ARCHITECTURE.md, "One path per stage": stream).

Rules:
- A source that plans and decodes in its own tasks (the packed landing source, the segment
  source, the jar-free Kafka source) leaves, per micro-batch, its plan (records read, refused
  records), the decoded tables its tasks wrote, and what removes those files once written.
  ``SourceOutput.take(batch_id)`` hands them to the sink; the sink does not know which source
  it has. Spark's own Kafka source leaves nothing (``NO_OUTPUT``).
- The job builds the source and its ``SourceOutput`` together (``pipelines.jobs.stream``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from pipelines.stream.checkpoint import batch_offsets

if TYPE_CHECKING:
    import pyarrow as pa

    from pipelines.stream.ledger import BatchPlan

#: (the batch's plan or None, its decoded tables, what removes the batch's files once written)
Taken = tuple["BatchPlan | None", dict[str, "pa.Table"], Callable[[], None]]


class SourceOutput(Protocol):
    """A source's output of one micro-batch beside its rows (module rules)."""

    def take(self, batch_id: int) -> Taken: ...


class _Nothing:
    """A source that leaves nothing beside its rows (Spark's Kafka source, the plain landing)."""

    def take(self, batch_id: int) -> Taken:
        return None, {}, _nothing


def _nothing() -> None:
    return None


NO_OUTPUT: SourceOutput = _Nothing()


class BatchReader(Protocol):
    """A ``DataSourceStreamReader`` that planned its micro-batches (landing, segments)."""

    def initialOffset(self) -> dict[str, Any]: ...

    def batch_output(self, start: dict[str, Any], end: dict[str, Any]) -> tuple[BatchPlan, dict[str, pa.Table]]: ...

    def release(self, start: dict[str, Any], end: dict[str, Any]) -> None: ...


class ReaderOutput:
    """The output of a planning reader's micro-batch, found by the batch's offsets in the
    replay checkpoint (``checkpoint.batch_offsets``): a batch without offsets has nothing.
    ``make_reader`` builds a fresh reader per batch (a reader keeps state of its own query)."""

    def __init__(self, make_reader: Callable[[], BatchReader], checkpoint: str) -> None:
        self.make_reader = make_reader
        self.checkpoint = checkpoint

    def take(self, batch_id: int) -> Taken:
        reader = self.make_reader()
        offsets = batch_offsets(self.checkpoint, batch_id, reader.initialOffset())
        if offsets is None:
            return None, {}, _nothing
        plan, decoded = reader.batch_output(*offsets)
        return plan, decoded, lambda: reader.release(*offsets)
