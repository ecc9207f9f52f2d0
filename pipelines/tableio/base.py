"""What both engines share: the result of a write, the conforming of rows to ``schemas/``, and
the protocol an engine implements for ``TableIO``.

Rules:
- ``conform``/``conform_arrow`` select a spec's columns in declared order and cast them to the
  declared types; a missing or extra column is a ``ValueError`` naming the table.
- An engine receives conformed data and table locations; it never resolves names, checks
  markers before a write, or computes results: ``TableIO`` does that once for both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pipelines.warehouse.lock import check_held

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

    from pipelines.config import Config
    from pipelines.tableio.task_rows import TaskRows
    from schemas import TableSpec

EngineName = Literal["spark", "rust"]

#: route-options key under which a routed write's task finds its side-output list
SIDE_KEY = "_side_outputs"
#: the message of a commit a ``commit_check`` refused (nothing was committed)
COMMIT_REFUSED = "offsetlake: commit refused"
WriteMode = Literal["append", "overwrite"]


def before_commit(location: str) -> None:
    """Called right before every Delta commit: the writer lock this process holds on the
    warehouse of ``location`` must still be its own (``pipelines.warehouse.lock.check_held``;
    a lock file removed under a running job must not let a second writer commit too)."""

    check_held(location)


@dataclass(frozen=True)
class RoutedWriteOptions:
    """How ``TableIO.write_routed`` writes its tables (its docstring says what each means): what
    ``TableIO`` hands the engine, one value instead of keywords."""

    route_options: dict[str, Any] | None = None
    txn_app_id: str | None = None
    txn_version: int | None = None
    mode: WriteMode = "overwrite"
    rows_equal_input: bool = False
    expected_rows: int | None = None
    staged: tuple[str, ...] = ()
    metadata: dict[str, Any] | None = None
    side_manifest: str | None = None
    commit_check: str | None = None
    appended: dict[str, dict[str, Any]] | None = None


@dataclass(frozen=True)
class WriteResult:
    """What a write did: the table version after it and whether it was skipped as a duplicate."""

    table: str
    operation: str
    version: int
    skipped: bool
    rows: int | None = None  # rows written (append/overwrite) or affected (merge), when known
    metrics: dict[str, Any] | None = None


@dataclass(frozen=True)
class TableInfo:
    """A table's figures from its log (no data scan): ``offsetlake tables``."""

    version: int
    rows: int
    files: int
    last_commit: dict[str, Any]


def conform(df: DataFrame, spec: TableSpec) -> DataFrame:
    """Select ``spec``'s columns in order, cast to the declared types; missing/extra → error."""
    from pyspark.sql import functions as F

    have = df.columns
    missing = [c for c in spec.column_names if c not in have]
    extra = [c for c in have if c not in spec.column_names]
    if missing or extra:
        parts = []
        if missing:
            parts.append("missing " + ", ".join(missing))
        if extra:
            parts.append("unexpected " + ", ".join(extra))
        raise ValueError(f"table {spec.name}: DataFrame does not match schemas/: {'; '.join(parts)}")
    target = {f.name: f.dataType for f in spec.spark_schema().fields}
    current = {f.name: f.dataType for f in df.schema.fields}
    cols = []
    for name in spec.column_names:
        if _same_type(current[name], target[name]):
            cols.append(F.col(name))
        else:
            cols.append(F.col(name).cast(target[name]).alias(name))
    return df.select(*cols)


def conform_arrow(table: pa.Table, spec: TableSpec) -> pa.Table:
    """``conform`` for a pyarrow Table: the declared columns in order, cast; missing/extra → error."""
    have = table.column_names
    missing = [c for c in spec.column_names if c not in have]
    extra = [c for c in have if c not in spec.column_names]
    if missing or extra:
        raise ValueError(
            f"table {spec.name}: Arrow table does not match schemas/: missing {missing}, unexpected {extra}"
        )
    return table.select(list(spec.column_names)).cast(spec.arrow_schema())


def _same_type(a: Any, b: Any) -> bool:
    """Type equality ignoring nullability (Spark's containsNull/valueContainsNull/nullable)."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return _same_type(a.elementType, b.elementType)
    if isinstance(a, MapType) and isinstance(b, MapType):
        return _same_type(a.keyType, b.keyType) and _same_type(a.valueType, b.valueType)
    if isinstance(a, StructType) and isinstance(b, StructType):
        return len(a.fields) == len(b.fields) and all(
            fa.name == fb.name and _same_type(fa.dataType, fb.dataType) for fa, fb in zip(a.fields, b.fields)
        )
    return bool(a == b)


class Tables(Protocol):
    """What an engine asks of the ``TableIO`` that holds it (names resolved, markers checked,
    tables created and staged there once for both engines): typed here so that the engines
    import ``base``, not the package that constructs them."""

    conf: Config

    def path(self, name: str) -> str: ...

    def staging_path(self, name: str) -> str: ...

    def version(self, name: str) -> int | None: ...

    def ensure(self, name: str) -> None: ...

    def drop_staged(self, name: str) -> None: ...

    def applied(self, name: str, app_id: str, version: int, *, latest: bool = True) -> bool: ...


class Engine(Protocol):
    """One Delta engine behind ``TableIO`` (``rust.RustEngine``, ``spark.SparkEngine``)."""

    name: EngineName
    #: True when an append's (app id, version) must be checked before writing; False when the
    #: engine's own write skips a duplicate (Spark Delta's ``txnAppId``/``txnVersion`` options)
    checks_append_marker: bool

    def create(self, uri: str, spec: TableSpec) -> None:
        """Create the empty table (declared schema, partitioning, description)."""

    def add_columns(self, uri: str, spec: TableSpec, names: list[str]) -> None:
        """Add ``spec``'s nullable columns ``names`` to the existing table (schema evolution)."""

    def write(
        self,
        uri: str,
        spec: TableSpec,
        data: DataFrame,
        mode: WriteMode,
        app_id: str | None,
        version: int | None,
        metadata: dict[str, Any] | None,
    ) -> None:
        """Append or replace the table's rows with conformed ``data`` in one commit."""

    def append_arrow(self, uri: str, spec: TableSpec, table: pa.Table, app_id: str | None, version: int | None) -> None:
        """Append a conformed Arrow table from the driver in one commit (with the marker)."""
        ...

    def merge(
        self,
        uri: str,
        spec: TableSpec,
        source: DataFrame | pa.Table,
        *,
        on: str,
        changed: str | None,
        delete_missing: bool,
        app_id: str | None,
        version: int | None,
    ) -> dict[str, Any]:
        """MERGE a conformed source; the metrics when the engine reports them."""
        ...

    def delete_keys(self, uri: str, keys: pa.Table, *, on: str, app_id: str | None, version: int | None) -> int | None:
        """Delete the rows matching ``keys``; rows deleted when known."""
        ...

    def read(self, uri: str, spec: TableSpec, version: int | None) -> DataFrame:
        """The snapshot (or ``version``) as a DataFrame in declared column order."""
        ...

    def snapshot_files(self, uri: str, spec: TableSpec, version: int | None = None) -> list[str] | None:
        """The snapshot's (at ``version``: that version's) data files when they ARE the snapshot, else ``None``."""
        ...

    def write_routed(
        self, names: list[str], tasks: TaskRows, route: str, options: RoutedWriteOptions
    ) -> dict[str, WriteResult]:
        """Several tables in one pass over ``tasks``' rows (``TableIO.write_routed``)."""
        ...

    def optimize(self, uri: str) -> dict[str, Any]:
        """Compact small files."""
        ...

    def vacuum(self, uri: str, retention_hours: int, dry_run: bool) -> list[str]:
        """Delete unreferenced files older than the retention; the files (dry run: to delete)."""
        ...
