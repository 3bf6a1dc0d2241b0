"""``interlock policy get|watch NS/SVC:PORT``: the smallest client of the policy API.

For people debugging what a mesh proxy would be told: print a Service port's outbound policy
once (``get``), or follow it as the controller changes it (``watch``). A watch is what a proxy
holds open for hours, so this one behaves like a proxy should: when the stream ends (the
controller restarted, the connection dropped) it says when and why on stderr and reconnects with
backoff, printing the current policy again first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from interlock.cli.signals import serve_until_signalled
from interlock.mailbox.backoff import BackoffPolicy

DEFAULT_POLICY_SERVER = "http://127.0.0.1:8090"

RECONNECT = BackoffPolicy(initial=0.5, maximum=30.0)
"""Delays between reconnects of ``policy watch``: 0.5 s doubling to 30 s, with jitter."""

_TARGET = re.compile(r"^(?P<ns>[^/\s]+)/(?P<svc>[^:\s]+):(?P<port>\d+)$")


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target",
        metavar="NS/SVC:PORT",
        help="the Service port, for example default/web:80",
    )
    parser.add_argument(
        "--client-namespace",
        default=None,
        metavar="NS",
        help="the namespace of the client asking (default: the Service's namespace)",
    )
    parser.add_argument(
        "--server",
        default=os.environ.get("INTERLOCK_SERVER", DEFAULT_POLICY_SERVER),
        metavar="URL",
        help=f"policy API URL (env INTERLOCK_SERVER; default: {DEFAULT_POLICY_SERVER})",
    )
    parser.add_argument(
        "--pretty", action="store_true", help="indent the JSON (default: one line per policy)"
    )


def add_policy_parser(subparsers: Any) -> None:
    """Register ``interlock policy get|watch NS/SVC:PORT``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "policy",
        help="read the outbound policy of a Service port from a running controller",
        description="Print the outbound policy of a Service port (get) or follow it (watch).",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    get = actions.add_parser(
        "get",
        help="print the policy once",
        description="Print the outbound policy of a Service port once, as JSON.",
    )
    _add_common(get)
    watch = actions.add_parser(
        "watch",
        help="print the policy, then again each time it changes",
        description=(
            "Print the outbound policy of a Service port, then again each time it changes, one "
            "JSON document per change, until Ctrl-C. When the stream ends (the controller "
            "restarted, the connection dropped) it says so on stderr and reconnects with "
            "backoff (0.5s doubling to 30s)."
        ),
    )
    _add_common(watch)
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


def _render(text: str, *, pretty: bool) -> str:
    text = text.strip()
    if not pretty:
        return text
    try:
        return json.dumps(json.loads(text), indent=2)
    except ValueError:
        return text


def _why(error: BaseException) -> str:
    """A connection failure in a person's words: no Python reprs."""
    import aiohttp

    if isinstance(error, aiohttp.ClientConnectorError):
        os_error = error.os_error
        cause = os.strerror(os_error.errno).lower() if os_error.errno else type(os_error).__name__
        return f"cannot connect to {error.host}:{error.port} ({cause})"
    if isinstance(error, TimeoutError):
        return "timed out"
    return str(error) or type(error).__name__


def _stamp() -> str:
    return datetime.now(UTC).strftime("%H:%M:%SZ")


async def print_policy(
    url: str,
    *,
    watch: bool,
    pretty: bool = False,
    out: Callable[[str], None] = print,
    err: Callable[[str], None] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    rng: random.Random | None = None,
) -> int:
    """GET ``url`` and print the policy; with ``watch``, print each line of the stream as it
    arrives and reconnect (saying why on ``err``) until cancelled."""
    import aiohttp

    say = err if err is not None else (lambda line: print(line, file=sys.stderr, flush=True))
    timeout = aiohttp.ClientTimeout(total=None if watch else 30, sock_connect=10)
    rng = rng if rng is not None else random.Random()
    attempt = 0
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while True:
            try:
                async with session.get(url) as response:
                    if response.status != 200:
                        body = (await response.text()).strip()
                        if not watch or 400 <= response.status < 500:
                            say(f"error: HTTP {response.status}: {body}")
                            return 1
                        why = f"HTTP {response.status}: {body}"
                    elif not watch:
                        out(_render(await response.text(), pretty=pretty))
                        return 0
                    else:
                        if attempt:
                            say(f"{_stamp()} reconnected to {url}")
                        async for line in response.content:
                            if line.strip():
                                attempt = 0
                                out(_render(line.decode(), pretty=pretty))
                                sys.stdout.flush()
                        why = "the server ended the stream (the controller stopped or restarted?)"
            except (aiohttp.ClientError, OSError, TimeoutError) as error:
                if not watch:
                    raise
                why = _why(error)
            delay = RECONNECT.delay(attempt, rng)
            attempt += 1
            say(f"{_stamp()} watch ended: {why}; reconnecting in {delay:.1f}s")
            await sleep(delay)


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
    import aiohttp

    # stdout holds only policies (for jq and friends); what happens to the stream goes to stderr.
    def note(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        return asyncio.run(
            serve_until_signalled(
                print_policy(url, watch=watch, pretty=args.pretty, err=note), announce=note
            )
        )
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        print(f"error: cannot reach {args.server}: {_why(exc)}", file=sys.stderr)
        return 1


def register(subparsers: Any) -> None:
    """Add ``policy`` to the main parser's subcommands."""
    add_policy_parser(subparsers)
