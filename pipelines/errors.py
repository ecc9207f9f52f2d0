"""Errors of the pipeline layer (the core has its own hierarchy in ``coordinator_core.errors``)."""

from __future__ import annotations


class UsageError(Exception):
    """Bad configuration or input: the CLI prints one line (the message) and exits with code 2."""


class JavaNotFoundError(UsageError):
    """Spark needs Java 17+; raised before Py4J can print a stack trace."""
