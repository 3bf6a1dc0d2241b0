"""What one attacker costs the other hosts of the edge: password guessing.

The figures: ``docs/benchmarks.md``, "Edge under attack".

Forty concurrent wrong-password requests to one basicAuth route (bcrypt cost 10), then one
unauthenticated request to another host of the same edge: how long that request takes, with
bcrypt in the edge's thread pool (as shipped) and with bcrypt on the event loop (as before:
``OnTheLoop`` runs the same check inline). Both run in the same process, rounds alternating,
and the figure is the median of the rounds; the ratio is what to read on a shared machine.

    .venv/bin/python benchmarks/edge_attacks.py [--rounds 3] [--guesses 40] [--write-docs]

Prints a table; with ``--write-docs`` it rewrites the ``## Edge under attack`` section of
``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import bcrypt
from aiohttp import web
from bench_report import write_section

from interlock.dataplane.upstreams import StaticUpstreams
from interlock.edge.inprocess import InProcessEdge
from interlock.edge.modules.basic_auth import BasicAuth, PasswordCheck
from interlock.edge.modules.view import Rejection
from interlock.edge.passwords import PasswordChecker
from interlock.edge.provider import ApplyModules, BackendTarget
from interlock.edge.server import EdgeServer
from interlock.model.moduleset import Modules, SecretValue
from interlock.model.service import ServicePortKey

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
COST = 10


class OnTheLoop(PasswordChecker):
    """The old behaviour, for comparison: bcrypt runs inline on the event loop."""

    async def check(self, auth: BasicAuth, check: PasswordCheck) -> Rejection | None:
        return auth.record(check, valid=bcrypt.checkpw(check.password[:72], check.hashed))


async def _backend() -> tuple[web.AppRunner, int]:
    async def hello(_: web.BaseRequest) -> web.Response:
        return web.Response(text="hello")

    runner = web.ServerRunner(web.Server(hello), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, int(runner.addresses[0][1])


async def _request(port: int, host: str, authorization: str | None = None) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    auth = f"Authorization: {authorization}\r\n" if authorization else ""
    writer.write(f"GET / HTTP/1.1\r\nHost: {host}\r\n{auth}Connection: close\r\n\r\n".encode())
    answer = await reader.read(-1)
    writer.close()
    return int(answer.split(b" ", 2)[1])


async def one_round(*, checker: PasswordChecker, guesses: int, htpasswd: bytes) -> float:
    """Seconds the other host's request took while ``guesses`` wrong passwords were checked."""
    runner, backend_port = await _backend()
    edge = InProcessEdge()
    upstreams = StaticUpstreams({("default", "web", 80): [("127.0.0.1", backend_port)]})
    server = EdgeServer(edge=edge, upstreams=upstreams)
    server.passwords = checker
    target = BackendTarget(ServicePortKey("default", "web", 80))
    for host, modules in (
        (
            "login.example",
            Modules.model_validate({"basicAuth": {"secretRef": {"name": "u", "key": "h"}}}),
        ),
        ("other.example", Modules()),
    ):
        await edge.apply_modules(
            ApplyModules(
                host=host,
                route_id="root",
                path="/",
                path_type="Prefix",
                modules=modules,
                secrets={("u", "h"): SecretValue(htpasswd)},
            )
        )
        await edge.attach_backend(host=host, route_id="root", backend=target)
    await server.start(addr="127.0.0.1:0")
    port = server.addresses.http[1]
    try:
        attack = [
            asyncio.create_task(
                _request(
                    port,
                    "login.example",
                    "Basic " + base64.b64encode(f"alice:guess-{n}".encode()).decode(),
                )
            )
            for n in range(guesses)
        ]
        await asyncio.sleep(0.05)  # let the guesses reach the edge first
        started = time.perf_counter()
        status = await _request(port, "other.example")
        took = time.perf_counter() - started
        assert status == 200, status
        assert set(await asyncio.gather(*attack)) <= {401, 503}
        return took
    finally:
        await server.stop()
        await runner.cleanup()


async def run(rounds: int, guesses: int) -> dict[str, list[float]]:
    htpasswd = b"alice:" + bcrypt.hashpw(b"right", bcrypt.gensalt(rounds=COST)) + b"\n"
    figures: dict[str, list[float]] = {"pool": [], "loop": []}
    for _ in range(rounds):
        figures["pool"].append(
            await one_round(checker=PasswordChecker(), guesses=guesses, htpasswd=htpasswd)
        )
        figures["loop"].append(
            await one_round(checker=OnTheLoop(), guesses=guesses, htpasswd=htpasswd)
        )
    return figures


def section(figures: dict[str, list[float]], *, guesses: int, rounds: int) -> str:
    pool, loop = (statistics.median(figures[k]) for k in ("pool", "loop"))
    return "\n".join(
        [
            "## Edge under attack",
            "",
            f"`benchmarks/edge_attacks.py --guesses {guesses} --rounds {rounds}` on "
            f"{platform.machine()}, {os.cpu_count()} CPUs (shared), Python "
            f"{platform.python_version()}: {guesses} concurrent wrong-password requests to one "
            f"basicAuth route (bcrypt cost {COST}), then one request to another host; the "
            "other host's answer time, median of the rounds:",
            "",
            "| bcrypt runs | other host answers in |",
            "|---|---|",
            f"| in the edge's thread pool (2 threads, as shipped) | {pool * 1000:.0f} ms |",
            f"| on the event loop (before the thread pool) | {loop * 1000:.0f} ms |",
            "",
            f"Ratio: {loop / pool:.0f}x faster for the other host with the pool. On the loop the "
            "other host waits for every queued check; with the pool it waits for none.",
            "",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--guesses", type=int, default=40)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    figures = asyncio.run(run(args.rounds, args.guesses))
    text = section(figures, guesses=args.guesses, rounds=args.rounds)
    print(text)
    if args.write_docs:
        write_section(text, "## Edge under attack", DOCS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
