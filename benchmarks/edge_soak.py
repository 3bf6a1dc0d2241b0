"""The edge alone under sustained load while its modules change.

The figures: ``docs/reliability.md``, "The edge alone under sustained load".

The controller's soak (``soak.py``) runs the edge inside the controller process, so its memory
figure is the controller's. This runs the data plane as its own process — a
:class:`~interlock.edge.standalone.StandaloneEdge` (``interlock edge``'s server and admin API,
on the same event loop choice: uvloop when installed) whose one upstream is a local backend —
and programs it through its admin API with :class:`~interlock.edge.http_provider.HttpEdge`, as
a controller does:

* ``web.soak.example`` gets a new module chain every ``--module-interval`` seconds, always
  adding a guard header to the request (its value and the other modules change: compression,
  ipRestriction), modules first and the backend kept attached, as the EdgeActor does;
* a rotating set of hosts under fresh names (``r-N.soak.example``: modules, backend, later
  removed) so that anything the edge keeps per host or route would show up as growth;
* requests at a steady rate (``--rps``) to ``web.soak.example``; the backend counts those that
  arrive **without the guard**: served without its modules, the fail-closed property on the
  wire. Every sample also reads the edge's own snapshot: a route with a backend whose modules
  are not applied is a violation.

The edge process's RSS and file descriptors are sampled every ``--sample`` seconds; the report
gives the RSS least-squares slope after the warm-up (MiB per hour), the answers by status, and
the client errors.

    .venv/bin/python benchmarks/edge_soak.py --minutes 10 [--rps 50] [--out build/edge-soak.json]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from bench_report import rss_mib, slope_mib_per_hour

from interlock.edge.http_provider import HttpEdge
from interlock.edge.provider import ApplyModules, BackendTarget
from interlock.model.moduleset import Modules, SecretValue
from interlock.model.service import ServicePortKey

ROOT = Path(__file__).resolve().parent.parent
HOST = "web.soak.example"
GUARD = "X-Soak-Guard"
BACKEND = BackendTarget(ServicePortKey("default", "web", 80))
ADMIN_TOKEN = SecretValue(b"soak-admin-token")


def guarded_modules(version: int) -> Modules:
    """Always the guard header; the other modules change with ``version``."""
    modules: dict[str, Any] = {"headers": {"request": {"add": {GUARD: f"v{version}"}}}}
    if version % 3 == 1:
        modules["compression"] = {"enabled": True}
    if version % 3 == 2:
        modules["ipRestriction"] = {"allow": ["127.0.0.0/8"]}
    return Modules.model_validate(modules)


# --- the edge process ------------------------------------------------------------------------


async def edge_main(backend_port: int) -> None:
    from interlock.dataplane.upstreams import StaticUpstreams
    from interlock.edge.standalone import StandaloneEdge

    upstreams = StaticUpstreams({("default", "web", 80): [("127.0.0.1", backend_port)]})
    standalone = StandaloneEdge(admin_token=ADMIN_TOKEN, upstreams=upstreams)
    addresses = await standalone.start(listen="127.0.0.1:0", admin="127.0.0.1:0")
    edge_host, edge_port = addresses.edge.http
    admin_host, admin_port = addresses.admin
    ready = {
        "edge": f"http://{edge_host}:{edge_port}",
        "admin": f"http://{admin_host}:{admin_port}",
    }
    print("READY " + json.dumps(ready), flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    try:
        await reader.readline()  # stdin closed or a line: stop
    finally:
        await standalone.stop()


def proc_figures(pid: int) -> dict[str, float]:
    return {"rss_mib": round(rss_mib(pid), 2), "fds": len(os.listdir(f"/proc/{pid}/fd"))}


# --- the driver --------------------------------------------------------------------------------


@dataclass
class Figures:
    """What the driver counts: module changes and hosts on one side, traffic on the other."""

    module_changes: int = 0
    hosts_created: int = 0
    module_change_errors: collections.Counter[str] = field(default_factory=collections.Counter)
    statuses: collections.Counter[int] = field(default_factory=collections.Counter)
    backend_requests: int = 0
    backend_unguarded: int = 0
    client_errors: collections.Counter[str] = field(default_factory=collections.Counter)
    snapshot_violations: list[str] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)


async def serve(edge: HttpEdge, host: str, route: str, path: str, modules: Modules) -> None:
    await edge.apply_modules(
        ApplyModules(
            host=host, route_id=route, path=path, path_type="Prefix", modules=modules, secrets={}
        )
    )
    await edge.attach_backend(host=host, route_id=route, backend=BACKEND)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    figures = Figures()

    async def handle(request: web.Request) -> web.Response:
        figures.backend_requests += 1
        if request.headers.get(GUARD) is None and request.host == HOST:
            figures.backend_unguarded += 1
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    backend_port = runner.addresses[0][1]
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--edge-child",
        str(backend_port),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=open(args.out.with_suffix(".edge.log"), "w"),  # noqa: SIM115 - the child owns it
    )
    assert child.stdout is not None and child.stdin is not None
    while not (line := (await asyncio.wait_for(child.stdout.readline(), 120)).decode()).startswith(
        "READY "
    ):
        if not line:
            raise RuntimeError("the edge child exited")
    urls = json.loads(line[6:])
    edge = HttpEdge(base_url=urls["admin"], token=ADMIN_TOKEN, timeout=30)
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    running = True
    try:
        await serve(edge, HOST, "default/web/0", "/", guarded_modules(0))

        async def module_changes() -> None:
            version = 0
            rotating: collections.deque[str] = collections.deque()
            while running:
                await asyncio.sleep(args.module_interval)
                version += 1
                try:
                    await edge.apply_modules(
                        ApplyModules(
                            host=HOST,
                            route_id="default/web/0",
                            path="/",
                            path_type="Prefix",
                            modules=guarded_modules(version),
                            secrets={},
                        )
                    )
                    figures.module_changes += 1
                    host = f"r-{version}.soak.example"
                    await serve(edge, host, f"default/r-{version}/0", "/", guarded_modules(version))
                    figures.hosts_created += 1
                    rotating.append(host)
                    if len(rotating) > 10:
                        old = rotating.popleft()
                        route = f"default/{old.split('.')[0]}/0"
                        await edge.detach_backend(host=old, route_id=route)
                        await edge.remove_route(host=old, route_id=route)
                except Exception as error:  # counted and reported, the soak goes on
                    figures.module_change_errors[type(error).__name__] += 1

        async def traffic() -> None:
            interval = 1.0 / args.rps
            pending: set[asyncio.Task[None]] = set()

            async def one() -> None:
                try:
                    async with session.get(
                        urls["edge"] + "/",
                        headers={"Host": HOST},
                        timeout=aiohttp.ClientTimeout(30),
                    ) as response:
                        await response.read()
                        figures.statuses[response.status] += 1
                except (TimeoutError, aiohttp.ClientError) as error:
                    figures.client_errors[type(error).__name__] += 1

            next_at = time.monotonic()
            while running:
                task = asyncio.create_task(one())
                pending.add(task)
                task.add_done_callback(pending.discard)
                next_at += interval
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            await asyncio.gather(*pending)

        async def sampler(started: float) -> None:
            minute = 0
            while running:
                await asyncio.sleep(args.sample)
                sample: dict[str, Any] = {"t": time.time(), **proc_figures(child.pid)}
                snapshot = await edge.snapshot()
                for host in snapshot.to_json()["hosts"]:
                    for route in host["routes"]:
                        if route.get("backend") and not route.get("applied"):
                            figures.snapshot_violations.append(f"{host['host']} {route}")
                figures.samples.append(sample)
                if time.monotonic() - started >= 60 * (minute + 1):
                    minute += 1
                    print(
                        f"edge soak {minute:>3} min: rss {sample['rss_mib']:.1f} MiB, fds "
                        f"{sample['fds']}, answers {dict(figures.statuses)}, unguarded "
                        f"{figures.backend_unguarded}, module changes {figures.module_changes}",
                        flush=True,
                    )

        started = time.monotonic()
        start = {"t": time.time(), **proc_figures(child.pid)}
        tasks = [
            asyncio.create_task(module_changes()),
            asyncio.create_task(traffic()),
            asyncio.create_task(sampler(started)),
        ]
        await asyncio.sleep(args.minutes * 60)
        running = False
        await asyncio.gather(*tasks)
        warmup_end = start["t"] + args.warmup_minutes * 60
        after = [s["rss_mib"] for s in figures.samples if s["t"] >= warmup_end]
        return {
            "settings": {k: str(v) for k, v in vars(args).items()},
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}",
            "seconds": round(time.monotonic() - started, 1),
            "start": start,
            "end": figures.samples[-1] if figures.samples else None,
            "rss_slope_mib_per_hour_after_warmup": slope_mib_per_hour(figures.samples, warmup_end),
            "rss_min_max_after_warmup": [min(after, default=None), max(after, default=None)],
            "requests": sum(figures.statuses.values()) + sum(figures.client_errors.values()),
            "answers": {str(k): v for k, v in sorted(figures.statuses.items())},
            "client_errors": dict(figures.client_errors),
            "backend_requests": figures.backend_requests,
            "backend_reached_without_modules": figures.backend_unguarded,
            "module_changes": figures.module_changes,
            "module_change_errors": dict(figures.module_change_errors),
            "hosts_created_and_removed": figures.hosts_created,
            "snapshot_violations": figures.snapshot_violations[:20],
            "samples": figures.samples,
        }
    finally:
        running = False
        await session.close()
        await edge.close()
        child.stdin.close()
        try:
            await asyncio.wait_for(child.wait(), 30)
        except TimeoutError:
            child.kill()
            await child.wait()
        await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rps", type=float, default=50.0, help="edge requests per second")
    parser.add_argument("--module-interval", type=float, default=3.0, help="seconds")
    parser.add_argument("--sample", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--warmup-minutes", type=float, default=2.0)
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "edge-soak.json")
    parser.add_argument("--edge-child", type=int, metavar="BACKEND_PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.edge_child:
        from interlock.cli.loop import run_on_loop

        run_on_loop(edge_main(args.edge_child))
        return
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = asyncio.run(run(args))
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}, indent=2))
    print(f"edge soak: figures and samples in {args.out}")


if __name__ == "__main__":
    main()
