"""Transactional offset commits in the batch decode (KIP-98): what became of each one.

Rules:
- Input: ``raw_transactions`` (``schemas.raw``: broker segments' transactional records and
  COMMIT/ABORT markers). The driver resolves it with the core's rule
  (``coordinator_core.loader.transactions.transaction_fates``: a record's transaction is closed by the
  first COMMIT/ABORT marker of its producer in its partition after it, whatever the group; none:
  open at the end of the log) into one row per transactional record (``txn_fates_table``), staged
  as one Arrow IPC file under the run's staging directory (``stage_txn_fates``; the decode drops
  it after its write). Transactional records are few next to the log, and the core's rule is
  applied as is (a Python pass on the driver).
- Each decode task sets ``producer_id``, ``txn_outcome`` (committed | aborted | open) and
  ``txn_marker_offset`` of its ``offset_commits`` rows found there by (coordinator_partition,
  log_offset) (``with_txn_fates``, numpy over Arrow); every other row keeps nulls. No row is added
  or removed: the counts rule is untouched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipelines.records.txn_fates import txn_fates_table, with_txn_fates
from pipelines.uri import read_arrow_file, write_arrow_file

if TYPE_CHECKING:
    import pyarrow as pa

    from pipelines.tableio import TableIO

RAW_TRANSACTIONS = "raw_transactions"
#: the staged fates: ``<TXN_FATES>/fates.arrow`` in the run's staging directory (``TableIO.drop_staged``)
TXN_FATES = "txn_fates"


def stage_txn_fates(io: TableIO) -> str | None:
    """``txn_fates_table`` of ``raw_transactions`` as one Arrow IPC file under the run's staging
    directory (None: no transactional record)."""

    txn = io.read_arrow(RAW_TRANSACTIONS, ["partition", "offset", "producer_id", "control_type"])
    if txn is None or not txn.num_rows:
        return None
    table = txn_fates_table(txn)
    if not table.num_rows:
        return None
    return write_arrow_file(io.staging_path(TXN_FATES) + "/fates.arrow", table)


def read_txn_fates(path: str | None) -> pa.Table | None:
    """The staged fates (``stage_txn_fates``), or None."""
    return read_arrow_file(path)


__all__ = ["RAW_TRANSACTIONS", "TXN_FATES", "read_txn_fates", "stage_txn_fates", "txn_fates_table", "with_txn_fates"]
