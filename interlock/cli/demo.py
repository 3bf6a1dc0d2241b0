"""``interlock demo``: the README's first command.

Interlock with no cluster, two echo backends, the example manifests, something to curl and a
live trace (see ``docs/demo.md``). Thin: the work is in :mod:`interlock.demo`.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path
from typing import Any

from interlock.cli.env import EnvDefaults, seconds
from interlock.cli.loop import add_loop_flag, run_on_loop
from interlock.cli.signals import serve_until_signalled
from interlock.config import parse_address
from interlock.logs import configure_logging

DEFAULT_DEMO_EDGE = "127.0.0.1:8080"
DEFAULT_DEMO_POLICY = "127.0.0.1:8090"
DEFAULT_DEMO_ADMIN = "127.0.0.1:9090"
DEFAULT_DEMO_MESH = "127.0.0.1:4140"


def _positive_seconds(text: str) -> float:
    value = seconds(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0 seconds")
    return value


_HELP = "run interlock with no cluster: echo backends, example manifests, a live trace"
_DESCRIPTION = (
    "Start the embedded API server and the controller loaded with manifests/examples, "
    "two local echo backends behind an Ingress with modules and an 80/20 HTTPRoute "
    "split, and print what to curl, the kubectl line to change things live, and each "
    "message the actors handle. Busy default ports fall back to free ones."
)


def add_demo_parser(subparsers: Any) -> None:
    flags = EnvDefaults.subcommand(subparsers, "demo", help=_HELP, description=_DESCRIPTION)
    parser = flags.parser
    for flag, default, what in (
        ("--edge-addr", DEFAULT_DEMO_EDGE, "edge data plane"),
        ("--policy-addr", DEFAULT_DEMO_POLICY, "policy API"),
        ("--admin-addr", DEFAULT_DEMO_ADMIN, "admin server (/readyz, /metrics, /debug/)"),
        ("--mesh-addr", DEFAULT_DEMO_MESH, "mesh listener (HTTP_PROXY for Services)"),
    ):
        parser.add_argument(
            flag,
            default=default,
            metavar="HOST:PORT",
            help=f"{what} address; a busy port or port 0 picks a free one (default: {default})",
        )
    parser.add_argument(
        "--duration",
        type=_positive_seconds,
        default=None,
        metavar="DURATION",
        help="stop by itself after this long (30s, 2m, or seconds), exit 0 (default: run until "
        "Ctrl-C)",
    )
    parser.add_argument(
        "--quiet-trace", action="store_true", help="write the trace file but do not print it"
    )
    parser.add_argument(
        "--show-startup",
        action="store_true",
        help="also print the trace of start-up (actors starting, the first list of every "
        "object); by default the live trace begins with the first change after the banner",
    )
    parser.add_argument(
        "--manifests",
        default=None,
        metavar="DIR",
        help="the manifests/ folder holding ingressclass.yaml and examples/ "
        "(default: the ones shipped with interlock)",
    )
    add_loop_flag(flags)
    parser.set_defaults(handler=demo_command)


def demo_command(args: argparse.Namespace) -> int:
    from interlock.demo.runner import DemoError, DemoOptions, run_demo

    try:
        options = DemoOptions(
            edge_addr=parse_address(args.edge_addr, flag="--edge-addr"),
            policy_addr=parse_address(args.policy_addr, flag="--policy-addr"),
            admin_addr=parse_address(args.admin_addr, flag="--admin-addr"),
            mesh_addr=parse_address(args.mesh_addr, flag="--mesh-addr"),
            duration=args.duration,
            quiet_trace=args.quiet_trace,
            show_startup=args.show_startup,
            manifests=Path(args.manifests) if args.manifests else None,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # The live trace is read as it happens, also through a pipe.
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)
    configure_logging("WARNING")
    try:
        return run_on_loop(
            serve_until_signalled(run_demo(options), doing="stopping the demo"),
            uvloop=not args.no_uvloop,
        )
    except DemoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        # A port taken between the demo's check and its bind, most likely.
        print(f"error: the demo could not start: {exc}", file=sys.stderr)
        return 1


def register(subparsers: Any) -> None:
    """Add ``demo`` to the main parser's subcommands."""
    add_demo_parser(subparsers)
