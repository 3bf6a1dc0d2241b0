"""``interlock edge``: the data plane on its own.

Serves the edge, programmed by a controller through its admin API (``interlock run
--edge-admin-url``). Thin: the work is in :mod:`interlock.edge.standalone`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

from interlock.cli.edge_limits import add_edge_limit_flags, edge_limits_from_args
from interlock.cli.env import EnvDefaults, env_name
from interlock.cli.signals import serve_until_signalled
from interlock.logs import configure_logging


def add_edge_parser(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "edge",
        help="run the edge data plane alone (programmed through its admin API)",
        description=(
            "Serve the edge data plane and its admin API in this process; a controller programs "
            "it remotely. Upstreams resolve through cluster DNS ({service}.{namespace}.svc)."
        ),
    )
    for flag, default, what in (
        ("--listen", "0.0.0.0:8080", "edge HTTP address"),
        ("--admin", "127.0.0.1:9091", "admin API address"),
        ("--tls-listen", None, "edge HTTPS address (off unless given)"),
    ):
        env = env_name(flag)
        parser.add_argument(
            flag,
            default=os.environ.get(env, default),
            metavar="HOST:PORT",
            help=f"{what} (env {env}; default {default})",
        )
    parser.add_argument(
        "--trusted-proxy",
        action="append",
        default=[],
        metavar="CIDR",
        help="a proxy in front of the edge whose X-Forwarded-For is believed; repeatable",
    )
    add_edge_limit_flags(EnvDefaults(parser))
    EnvDefaults(parser).logging()
    parser.set_defaults(handler=edge_command)


async def _edge_until_signalled(args: argparse.Namespace) -> int:
    from interlock.edge.standalone import run_standalone_edge

    return await serve_until_signalled(
        run_standalone_edge(
            listen=args.listen,
            admin=args.admin,
            trusted_proxies=tuple(args.trusted_proxy),
            tls_listen=args.tls_listen,
            limits=edge_limits_from_args(args),
        )
    )


def edge_command(args: argparse.Namespace) -> int:
    configure_logging(args.log_level, format=args.log_format)
    return asyncio.run(_edge_until_signalled(args))


def register(subparsers: Any) -> None:
    """Add ``edge`` to the main parser's subcommands."""
    add_edge_parser(subparsers)
