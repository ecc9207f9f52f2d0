"""``offsetlake`` — one entry point, one subcommand per module in ``pipelines.commands``.

Rules:
- Each module in ``pipelines/commands/`` exposes ``register(subparsers)`` which adds its
  subcommand(s) and sets ``func`` (a callable taking the parsed ``argparse.Namespace`` and
  returning an exit code). Modules are discovered, so adding a command touches no shared file.
- Bad config or input: exit code 2 and one clear line on stderr (raise ``UsageError``). Bad
  flags and arguments too: argparse's errors are one line naming the command (``--help`` shows
  the usage), not the usage block; a missing command is one line as well. A
  known failure class raised anywhere below (disk full, read-only warehouse, a corrupt or
  mistyped input file: ``pipelines.errors.describe_failure``) is one line and exit 2 as well;
  any other exception is one line and exit 1. ``--debug`` shows the trace instead (and keeps
  Spark's own task-failure logs on).
- Heavy imports (pyspark, pandas) happen inside the command, never at discovery time, so
  ``offsetlake --help`` and pure-Python commands start fast.
- ``--version`` is the installed distribution's version (package metadata, one definition:
  ``pyproject.toml``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from collections.abc import Sequence
from typing import NoReturn

from pipelines import commands as _commands_pkg
from pipelines.errors import DEBUG_ENV, UsageError, describe_failure, first_line

EPILOG = """\
typical session:
  offsetlake quickstart                         generate a sample log, run the batch job, show results
  offsetlake decode --key 0001... --value 0003...   decode one record like Kafka's console formatter
  offsetlake replay --input records.parquet     rebuild every group's state from a capture
  offsetlake run batch --conf conf/local.yaml   the batch job into Delta tables
  offsetlake sql "SELECT * FROM group_state"    query the tables
"""


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line on stderr and exit code 2 (subcommand
    parsers inherit it: ``add_subparsers`` builds them with the parent's class)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see: {self.prog} --help)\n")


def distribution_version() -> str:
    """The installed ``offsetlake`` distribution's version, from its metadata."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("offsetlake")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="offsetlake",
        description="Batch and streaming analytics over Kafka's __consumer_offsets log.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--debug", action="store_true", help="show the full trace (and Spark's failure logs) when a command fails"
    )
    parser.add_argument("--version", action="version", version=f"offsetlake {distribution_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(_commands_pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{_commands_pkg.__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


def _writes_under(args: argparse.Namespace) -> str | None:
    """Where the command writes: its ``--out``, else the warehouse of its config (named by a
    failure that names no path, e.g. a disk full while a library wrote a buffer)."""
    out = getattr(args, "out", None)
    if isinstance(out, str) and out:
        return out
    if not hasattr(args, "set_options"):
        return None
    try:
        # lazy: only a failure's message needs the config; pipelines.config costs 35 ms of
        # `import pipelines.cli` (python -X importtime), which loads it nowhere else
        from pipelines.config import config_from_args

        return config_from_args(args).paths.warehouse
    except Exception:  # the config itself is not the failure being described
        return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        print("offsetlake: error: a command is required (see: offsetlake --help)", file=sys.stderr)
        return 2
    debug = bool(getattr(args, "debug", False))
    if debug:
        os.environ[DEBUG_ENV] = "1"
    try:
        rc = func(args)
    except UsageError as exc:
        print(f"offsetlake {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:
        if debug:
            raise
        known = describe_failure(exc, _writes_under(args))
        if known is not None:
            print(f"offsetlake {args.command}: error: {known}", file=sys.stderr)
            return 2
        print(f"offsetlake {args.command}: failed: {first_line(exc)} (run with --debug for the trace)", file=sys.stderr)
        return 1
    return int(rc or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
