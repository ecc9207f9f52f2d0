"""``offsetlake config``: show the effective configuration (secrets redacted) or just validate it.

Rules: prints ``Config.redacted()`` — secrets appear as their ``${ENV_VAR}`` reference (with
"(unset)" when the variable is missing), never as values. ``--check`` prints one line and exits 0,
or exits 2 with the offending file and key path.
"""

from __future__ import annotations

import argparse
from typing import Any

from pipelines.config import add_conf_arguments, config_from_args


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "config",
        help="show the effective configuration (base + overlay, secrets redacted) or validate it",
        description=(
            "Load conf/base.yaml + the overlay (+ --set overrides), validate, and print the result as YAML "
            "with resolved paths. Secrets are shown as ${ENV_VAR} references only.\n"
            "examples:\n"
            "  offsetlake config --conf conf/cluster.example.yaml\n"
            "  offsetlake config --conf conf/local.yaml --check"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_conf_arguments(p)
    p.add_argument("--check", action="store_true", help="only validate; print one line")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import yaml

    cfg = config_from_args(args)
    if args.check:
        print(f"ok: {' + '.join(cfg.sources)}")
        return 0
    print(f"# effective configuration: {' + '.join(cfg.sources)}")
    print(yaml.safe_dump(cfg.redacted(), sort_keys=False, default_flow_style=False), end="")
    return 0
