"""Spark SQL read by ``sqlglot``: the tables a statement reads, and its DuckDB form.

Rules:
- Spark SQL is the one language of ``offsetlake sql`` and of the analytics views
  (``pipelines.analytics.views``), whichever engine answers: DuckDB gets the statement transpiled
  here (``to_duckdb``), never a second hand-written copy.
- ``sqlglot``'s Spark → DuckDB mapping is kept where it preserves Spark's answer; where it does
  not, a rewrite of the parsed tree below makes it so (each says which Spark rule it keeps):
  ``last(x, true) OVER`` keeps IGNORE NULLS; a cast of a fractional value to an integer type
  truncates (Spark) instead of rounding (DuckDB); ``percentile_approx`` becomes ``quantile_disc``
  (an element of the data, nearest rank: Spark's answer while a group has fewer values than
  its accuracy, 10,000); ``timestamp_millis(x)`` becomes ``epoch_ms(x)`` as a UTC instant;
  ``max_by``/``min_by`` become ``arg_max_null``/``arg_min_null`` (Spark returns a null value of
  the extreme row; DuckDB's ``arg_max`` would skip it).
- Higher-order functions: ``transform`` maps to ``list_transform``; ``exists``, ``forall`` and
  ``zip_with`` (which sqlglot drops or keeps in forms DuckDB lacks) are rewritten to DuckDB list
  functions with Spark's null rules (``_higher_order``). Any other lambda, and a statement that
  is not a query, raises ``NoDuckDBForm`` with the reason; callers then use Spark.
- A statement sqlglot cannot parse raises ``SqlSyntaxError`` with its first message line.
- ``offsetlake sql`` is query-only (``check_query_only``, for every engine, before any engine
  sees the statement): a SELECT, a set operation (UNION/INTERSECT/EXCEPT), a WITH query or a
  VALUES list, plus ``SHOW TABLES``/``SHOW VIEWS``. Refused with the reason
  (``NotAQuery``): any other statement kind (INSERT, INSERT OVERWRITE DIRECTORY, CREATE, DROP,
  DELETE, MERGE, CACHE, SET, ADD JAR, COPY, ATTACH, ...), ``SELECT ... INTO``, a table that is
  not a plain name (``parquet.`/path```, ``db.t``, a table function such as ``read_files(...)``,
  ``read_parquet(...)``, ``IDENTIFIER(...)``; only ``range`` and the generators are allowed),
  a script transform (``SELECT TRANSFORM(...) USING 'cmd'``: Spark runs the command), and a
  function that reads files, the environment or runs code (``READERS``). EXPLAIN is not
  allowed (DuckDB's ``EXPLAIN ANALYZE`` runs its statement).
"""

from __future__ import annotations

import re
from typing import Any

INTEGER_TYPES = ("TINYINT", "SMALLINT", "INT", "BIGINT")


class NoDuckDBForm(Exception):
    """The statement (or a view it reads) has no faithful DuckDB form: Spark answers it."""


class SqlSyntaxError(Exception):
    """The statement does not parse as Spark SQL."""


class NotAQuery(Exception):
    """The statement is not a read-only query over the warehouse's tables (module rules)."""


#: functions that read files or other sources, reach the environment or run code (Spark and
#: DuckDB names; a prefix ends with ``_``)
READERS = (
    "read_",
    "parquet_",
    "duckdb_",
    "pragma_",
    "sniff_",
    "glob",
    "getenv",
    "current_setting",
    "query",
    "query_table",
    "java_method",
    "reflect",
    "try_reflect",
    "delta_scan",
    "iceberg_",
    "parquet_scan",
    "seq_scan",
    "csv_scan",
    "json_scan",
    "load_",
    "install_",
    "which_secret",
    "sql_auto_complete",
    "http_",
    "url_get",
)
#: table functions allowed in FROM (they read no file)
TABLE_GENERATORS = frozenset(
    {"range", "explode", "explode_outer", "posexplode", "posexplode_outer", "inline", "inline_outer", "stack"}
)
_SHOW = re.compile(r"^\s*SHOW\s+(TABLES|VIEWS)(\s+LIKE\s+'[^']*')?\s*;?\s*$", re.IGNORECASE)


def is_show_tables(sql: str) -> bool:
    """``SHOW TABLES`` / ``SHOW VIEWS`` (optionally ``LIKE 'pattern'``): the one non-query allowed."""
    return bool(_SHOW.match(sql))


def check_query_only(tree: Any) -> None:
    """Raise ``NotAQuery`` unless ``tree`` is a read-only query (module rules)."""
    from sqlglot import exp

    if not isinstance(tree, (exp.Query, exp.Values)):
        raise NotAQuery(f"only queries are allowed (SELECT, UNION, WITH, VALUES), not {_kind(tree)}")
    writers = (
        exp.DDL,
        exp.DML,
        exp.Command,
        exp.Into,
        exp.Set,
        exp.Cache,
        exp.Uncache,
        exp.Use,
        exp.Pragma,
        exp.QueryTransform,  # SELECT TRANSFORM(...) USING 'script': Spark runs the script
    )
    for node in tree.walk():
        if isinstance(node, writers):
            raise NotAQuery(f"only queries are allowed: the statement holds {_kind(node)}")
        if isinstance(node, exp.Table):
            _check_table(node)
        if isinstance(node, exp.Func):
            name = _func_name(node)
            if any(name.startswith(r) if r.endswith("_") else name == r for r in READERS):
                raise NotAQuery(f"function {name} is not allowed (it reads files or runs code)")


def _check_table(node: Any) -> None:
    from sqlglot import exp

    if isinstance(node.this, exp.Identifier):
        if node.args.get("db") or node.args.get("catalog"):
            raise NotAQuery(f"{node.sql('spark')}: tables are named by their bare name (no path, no database)")
        return
    fn = node.this
    name = _func_name(fn) if isinstance(fn, exp.Func) else type(fn).__name__.lower()
    if name not in TABLE_GENERATORS:
        raise NotAQuery(f"table function {name} is not allowed (tables are read by their name)")


def _func_name(node: Any) -> str:
    from sqlglot import exp

    return str(node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()


def _kind(node: Any) -> str:
    key = str(getattr(node, "key", "") or type(node).__name__).upper()
    return f"{key} ({node.sql('spark')[:40]})" if key in ("COMMAND", "INTO") else key


def parse(sql: str) -> Any:
    """The one statement of ``sql`` as a sqlglot tree (Spark dialect)."""
    import sqlglot
    from sqlglot.errors import ParseError, TokenError

    try:
        trees = [t for t in sqlglot.parse(sql, read="spark") if t is not None]
    except (ParseError, TokenError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SqlSyntaxError(first) from None
    if len(trees) != 1:
        raise SqlSyntaxError(f"expected one statement, got {len(trees)}")
    return trees[0]


def referenced_tables(tree: Any) -> list[str]:
    """Names (lower case) of the tables and views ``tree`` reads, CTE names left out, in order."""
    from sqlglot import exp

    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    out: list[str] = []
    for t in tree.find_all(exp.Table):
        name = t.name.lower() if isinstance(t.this, exp.Identifier) else ""
        if name and name not in ctes and name not in out:
            out.append(name)
    return out


def to_duckdb(tree_or_sql: Any) -> str:
    """DuckDB SQL for a Spark SQL statement (module rules); raises ``NoDuckDBForm``."""
    from sqlglot import exp

    tree = parse(tree_or_sql) if isinstance(tree_or_sql, str) else tree_or_sql.copy()
    if not isinstance(tree, exp.Query):
        raise NoDuckDBForm(f"not a query ({type(tree).__name__})")
    for node in reversed(list(tree.find_all(exp.Exists, exp.Anonymous))):  # innermost first
        _higher_order(node)
    for lam in tree.find_all(exp.Lambda):
        parent = lam.parent
        if not (isinstance(parent, exp.Transform) or _is_fn(parent, "list_transform")):
            raise NoDuckDBForm(
                f"uses a higher-order function DuckDB has no form of ({(parent or lam).sql('spark')[:60]})"
            )
    for win in list(tree.find_all(exp.Window)):
        _keep_ignore_nulls(win)
    for cast in list(tree.find_all(exp.Cast)):  # TryCast is a Cast
        _truncate_to_integer(cast)
    for fn in list(tree.find_all(exp.Anonymous)):
        if _is_fn(fn, "timestamp_millis") and len(fn.expressions) == 1:  # Spark: a UTC instant
            fn.replace(exp.cast(exp.Anonymous(this="epoch_ms", expressions=[fn.expressions[0]]), "TIMESTAMPTZ"))
    for arg in list(tree.find_all(exp.ArgMax, exp.ArgMin)):  # Spark keeps a null x; DuckDB's arg_max skips it
        name = "ARG_MAX_NULL" if isinstance(arg, exp.ArgMax) else "ARG_MIN_NULL"
        arg.replace(exp.Anonymous(this=name, expressions=[arg.this, arg.expression]))
    for q in list(tree.find_all(exp.ApproxQuantile)):
        q.replace(exp.Anonymous(this="QUANTILE_DISC", expressions=[q.this, q.args["quantile"]]))
    return str(tree.sql(dialect="duckdb"))


def _keep_ignore_nulls(win: Any) -> None:
    """Spark ``last(x, true) OVER w`` / ``first(x, true) OVER w`` skip nulls: DuckDB's
    ``last_value(x IGNORE NULLS) OVER w`` (sqlglot would drop IGNORE NULLS)."""
    from sqlglot import exp

    inner = win.this
    if isinstance(inner, exp.IgnoreNulls):
        fn = inner.this
        if isinstance(fn, exp.Last):
            inner.set("this", exp.LastValue(this=fn.this))
        elif isinstance(fn, exp.First):
            inner.set("this", exp.FirstValue(this=fn.this))


def _truncate_to_integer(cast: Any) -> None:
    """Spark casts a fractional value to an integer type by truncation; DuckDB rounds."""
    from sqlglot import exp

    to = cast.args.get("to")
    if to is None or to.this.name not in INTEGER_TYPES:
        return
    value = cast.this
    if isinstance(value, (exp.Avg, exp.Div)) or (isinstance(value, exp.Literal) and "." in value.name):
        value.replace(exp.Anonymous(this="TRUNC", expressions=[value.copy()]))


def _is_fn(node: Any, name: str) -> bool:
    from sqlglot import exp

    return isinstance(node, exp.Anonymous) and str(node.name).lower() == name


def _higher_order(node: Any) -> None:
    """Spark's ``exists``/``forall``/``zip_with`` with a lambda → DuckDB list functions, Spark's
    null rules kept: ``exists`` is true if any element is true, else null if any is null, else
    false (an empty array: false); ``forall`` is false if any is false, else null if any is null,
    else true (empty: true); ``zip_with`` pads the shorter array with nulls."""
    from sqlglot import exp

    if isinstance(node, exp.Exists) and isinstance(node.args.get("expression"), exp.Lambda):
        node.replace(_any_all(_transform(node.this, node.args["expression"]), want=True))
    elif _is_fn(node, "forall") and len(node.expressions) == 2 and isinstance(node.expressions[1], exp.Lambda):
        node.replace(_any_all(_transform(node.expressions[0], node.expressions[1]), want=False))
    elif _is_fn(node, "zip_with") and len(node.expressions) == 3 and isinstance(node.expressions[2], exp.Lambda):
        left, right, lam = node.expressions
        if len(lam.expressions) != 2:
            return
        i = exp.to_identifier("_ol_i")
        body = _substitute(
            lam.this.copy(),
            {
                lam.expressions[0].name: exp.Bracket(this=exp.paren(left.copy()), expressions=[i.copy()]),
                lam.expressions[1].name: exp.Bracket(this=exp.paren(right.copy()), expressions=[i.copy()]),
            },
        )
        n = exp.func("greatest", _len(left), _len(right))
        indexes = exp.Anonymous(
            this="range", expressions=[exp.Literal.number(1), exp.Add(this=n, expression=exp.Literal.number(1))]
        )
        node.replace(
            exp.Anonymous(this="list_transform", expressions=[indexes, exp.Lambda(this=body, expressions=[i])])
        )


def _len(arr: Any) -> Any:
    from sqlglot import exp

    return exp.Coalesce(this=exp.Anonymous(this="len", expressions=[arr.copy()]), expressions=[exp.Literal.number(0)])


def _transform(arr: Any, lam: Any) -> Any:
    from sqlglot import exp

    return exp.Anonymous(this="list_transform", expressions=[arr.copy(), lam.copy()])


def _any_all(values: Any, *, want: bool) -> Any:
    """``exists`` (``want`` true) / ``forall`` (``want`` false) over a list of booleans."""
    from sqlglot import exp

    v = exp.to_identifier("_ol_v")
    hit = exp.column(v.copy()) if want else exp.Not(this=exp.column(v.copy()))
    is_null = exp.Is(this=exp.column(v.copy()), expression=exp.Null())
    found = exp.Anonymous(
        this="list_bool_or",
        expressions=[
            exp.Anonymous(
                this="list_transform", expressions=[values.copy(), exp.Lambda(this=hit, expressions=[v.copy()])]
            )
        ],
    )
    nulls = exp.Anonymous(
        this="list_bool_or",
        expressions=[
            exp.Anonymous(
                this="list_transform", expressions=[values.copy(), exp.Lambda(this=is_null, expressions=[v.copy()])]
            )
        ],
    )
    return exp.Case(
        ifs=[
            exp.If(this=found, true=exp.Boolean(this=want)),
            exp.If(this=nulls, true=exp.Null()),
            exp.If(this=exp.Is(this=values.copy(), expression=exp.Null()), true=exp.Null()),
        ],
        default=exp.Boolean(this=not want),
    )


def _substitute(body: Any, names: dict[str, Any]) -> Any:
    """``body`` with the lambda parameters ``names`` replaced by expressions."""
    from sqlglot import exp

    def swap(node: Any) -> Any:
        if isinstance(node, exp.Column) and not node.table and node.name in names:
            return names[node.name].copy()
        if (
            isinstance(node, exp.Identifier)
            and node.name in names
            and not isinstance(node.parent, (exp.Column, exp.Lambda))
            and not (isinstance(node.parent, exp.Dot) and node.arg_key == "expression")  # a field name
        ):
            return names[node.name].copy()
        return node

    return body.transform(swap)
