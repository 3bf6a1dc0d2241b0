"""``interlock policy get|watch NS/SVC:PORT``: the smallest client of the policy API.

For people debugging what a mesh proxy would be told: print a Service port's outbound policy
once, or follow it as the controller changes it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
from collections.abc import Callable
from typing import Any

DEFAULT_POLICY_SERVER = "http://127.0.0.1:8090"

_TARGET = re.compile(r"^(?P<ns>[^/\s]+)/(?P<svc>[^:\s]+):(?P<port>\d+)$")


def add_policy_parser(subparsers: Any) -> None:
    """Register ``interlock policy get|watch NS/SVC:PORT``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "policy",
        help="read the outbound policy of a Service port from a running controller",
        description="Print the outbound policy of a Service port (get) or follow it (watch).",
    )
    parser.add_argument("action", choices=["get", "watch"])
    parser.add_argument("target", metavar="NS/SVC:PORT")
    parser.add_argument(
        "--client-namespace", default=None, help="client namespace (default: the Service's)"
    )
    parser.add_argument(
        "--server",
        default=os.environ.get("INTERLOCK_SERVER", DEFAULT_POLICY_SERVER),
        help=f"policy API URL (env INTERLOCK_SERVER; default {DEFAULT_POLICY_SERVER})",
    )
    parser.set_defaults(handler=policy_command)


def policy_url(*, server: str, target: str, client_namespace: str | None, watch: bool) -> str:
    """The API URL for ``NS/SVC:PORT``; raises ``ValueError`` naming the bad target."""
    match = _TARGET.match(target)
    if match is None:
        raise ValueError(f"target {target!r} is not NS/SVC:PORT (for example default/web:80)")
    url = f"{server.rstrip('/')}/v1/outbound/{match['ns']}/{match['svc']}/{match['port']}"
    query = []
    if client_namespace:
        query.append(f"clientNamespace={client_namespace}")
    if watch:
        query.append("watch=true")
    return url + ("?" + "&".join(query) if query else "")


async def print_policy(url: str, *, watch: bool, out: Callable[[str], None] = print) -> int:
    """GET ``url`` and print the policy (or each line of the watch stream) as it arrives."""
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=None if watch else 30, sock_connect=10)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.get(url) as response,
    ):
        if response.status != 200:
            out(f"error: HTTP {response.status}: {(await response.text()).strip()}")
            return 1
        if not watch:
            out((await response.text()).strip())
            return 0
        async for line in response.content:
            if line.strip():
                out(line.decode().strip())
                sys.stdout.flush()
    return 0


def policy_command(args: argparse.Namespace) -> int:
    watch = args.action == "watch"
    try:
        url = policy_url(
            server=args.server,
            target=args.target,
            client_namespace=args.client_namespace,
            watch=watch,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(print_policy(url, watch=watch))
    except KeyboardInterrupt:
        return 0
    except OSError as exc:
        print(f"error: cannot reach {args.server}: {exc}", file=sys.stderr)
        return 1


def register(subparsers: Any) -> None:
    """Add ``policy`` to the main parser's subcommands."""
    add_policy_parser(subparsers)
