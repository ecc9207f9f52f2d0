"""CLI subcommands: one module per command group, each exposing ``register(subparsers)``.

The commands import most of the project's modules inside their functions, not at the top:
``cli.py`` imports every command module to build its parser, and hoisting their imports took
that from 214 to 426 ms and the modules it loads from 50 to 152 (measured, issue 32). At the top
stand only modules the parser loads anyway."""
