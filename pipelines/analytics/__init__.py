"""Analytics over the gold tables: SQL views (``views``), the Burrow evaluator reference
(``burrow``), the as-of group inspector (``inspect``) and the HTML report (``report``)."""
