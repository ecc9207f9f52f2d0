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
  its accuracy, 10,000).
- A statement sqlglot cannot carry over faithfully raises ``NoDuckDBForm`` with the reason:
  lambdas (``exists``/``forall``/``zip_with``/``transform``: sqlglot drops or keeps them in forms
  DuckDB does not have) and statements that are not queries. Callers then use Spark.
- A statement sqlglot cannot parse raises ``SqlSyntaxError`` with its first message line.
"""

from __future__ import annotations

from typing import Any

INTEGER_TYPES = ("TINYINT", "SMALLINT", "INT", "BIGINT")


class NoDuckDBForm(Exception):
    """The statement (or a view it reads) has no faithful DuckDB form: Spark answers it."""


class SqlSyntaxError(Exception):
    """The statement does not parse as Spark SQL."""


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
    if tree.find(exp.Lambda) is not None:
        raise NoDuckDBForm("uses higher-order functions (lambdas)")
    for win in list(tree.find_all(exp.Window)):
        _keep_ignore_nulls(win)
    for cast in list(tree.find_all(exp.Cast)):  # TryCast is a Cast
        _truncate_to_integer(cast)
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
