"""The ``interlock`` command line.

One binary with subcommands, so that in-cluster, local and no-cluster use share one entry point.
Each subcommand lives in its own module of this package (``run``, ``policy``, ``demo``,
``edge``, ``apiserver``, ``trace``); environment variables are read through :mod:`.env` and
signals handled by :mod:`.signals`. Wiring of the controller itself is in ``app.py``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from interlock import __version__
from interlock.cli import apiserver, demo, edge, policy, run, trace


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="interlock",
        description=(
            "A Kubernetes controller that keeps outbound HTTPRoute policy and fail-closed "
            "edges correct while the cluster changes."
        ),
    )
    parser.add_argument("--version", action="version", version=f"interlock {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for subcommand in (run, policy, demo, edge, trace, apiserver):
        subcommand.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    handler = getattr(args, "handler", None)
    if handler is not None:
        result: int = handler(args)
        return result
    return 0
