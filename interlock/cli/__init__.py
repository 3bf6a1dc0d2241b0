"""The ``interlock`` command line.

One binary with subcommands, so that in-cluster, local and no-cluster use share one entry point.
Each subcommand lives in its own module of this package (``run``, ``policy``, ``demo``,
``edge``, ``apiserver``, ``trace``); environment variables are read through :mod:`.env` and
signals handled by :mod:`.signals`. Wiring of the controller itself is in ``controller/``.
"""

from __future__ import annotations

from collections.abc import Sequence

from interlock import __version__
from interlock.cli import apiserver, demo, edge, policy, run, signals, trace
from interlock.cli.parser import Parser, chosen_parser


def build_parser() -> Parser:
    parser = Parser(
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
    """Run the subcommand ``argv`` names (default: the program's arguments); its exit status.

    Run as the program (``argv`` not given), the process ends as soon as the subcommand returned
    and its output is flushed, without tearing down the interpreter object by object: after a
    controller ran that takes about a second on a loaded machine, and it would count against
    the two seconds a stop signal may take (the subcommands close their files and release
    their Lease before returning).
    """
    with signals.early_handlers():
        parser = build_parser()
        args, extras = parser.parse_known_args(argv)
        if extras:
            chosen_parser(parser, args).unrecognized(extras)
        if args.command is None:
            parser.error("a command is required: run, demo, policy, trace, edge or apiserver")
        handler = getattr(args, "handler", None)
        result: int = handler(args) if handler is not None else 0
    if argv is None:
        signals.exit_now(result)
    return result
