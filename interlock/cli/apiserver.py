"""``interlock apiserver``: the embedded Kubernetes API server on its own.

For developing against a cluster-shaped API with no cluster: run a controller (this one under a
debugger, or any other kubernetes client) and kubectl against it. ``interlock run --embedded``
starts the same server inside the controller's process.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from interlock.cli.announce import announcer
from interlock.cli.env import EnvDefaults
from interlock.cli.signals import announce_with, serve_until_signalled
from interlock.config import parse_address
from interlock.logs import configure_logging
from interlock.model.allowed_hosts import AllowedHosts

SHIPPED_CRDS = Path(__file__).resolve().parents[1] / "manifests" / "crds"


_HELP = "run only the embedded Kubernetes API server (no controller)"
_DESCRIPTION = (
    "Serve the embedded Kubernetes API server with interlock's CRDs installed, write a "
    "kubeconfig for it, and run until SIGINT/SIGTERM. Data lives in memory."
)


def register(subparsers: Any) -> None:
    add = EnvDefaults.subcommand(subparsers, "apiserver", help=_HELP, description=_DESCRIPTION)
    parser = add.parser
    add.value(
        "--listen",
        default="127.0.0.1:0",
        metavar="HOST:PORT",
        help="address to serve on; port 0 picks a free one",
        shown="127.0.0.1 on a free port",
    )
    add.value(
        "--write-kubeconfig",
        default=None,
        metavar="PATH",
        help="write a kubeconfig for kubectl here",
        shown="none written",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name the server answers besides IP addresses and localhost (NAME or "
        "*.SUFFIX); others get 421 (DNS rebinding); repeatable",
    )
    parser.add_argument(
        "--manifests",
        action="append",
        default=[],
        metavar="PATH",
        help="YAML file or folder applied at start, after the CRDs; repeatable",
    )
    add.logging()
    parser.set_defaults(handler=apiserver_command)


async def _serve_until_signalled(args: argparse.Namespace) -> int:
    from interlock.embedded import serve_forever

    address = parse_address(args.listen, flag="--listen")
    return await serve_until_signalled(
        serve_forever(
            host=address.host,
            port=address.port,
            kubeconfig_path=args.write_kubeconfig,
            manifests=[str(SHIPPED_CRDS), *args.manifests],
            announce=announcer(args.log_format, logger="cli.apiserver"),
            allowed_hosts=AllowedHosts.parse(args.allowed_host, flag="--allowed-host"),
        )
    )


def apiserver_command(args: argparse.Namespace) -> int:
    configure_logging(args.log_level, format=args.log_format)
    announce_with(announcer(args.log_format, logger="cli.apiserver"))
    try:
        return asyncio.run(_serve_until_signalled(args))
    except (ValueError, OSError) as error:
        print(f"interlock apiserver: {error}", file=sys.stderr)
        return 1
