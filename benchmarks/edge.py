"""Edge data plane throughput and tail latency, against nginx as the ceiling.

Four targets, each in its own process, all on this machine: the backend called directly; our
edge (empty module chain) in front of it; our edge with ipRestriction + headers modules; and
nginx as a reverse proxy (one worker, upstream keepalive) if it is installed. The load generator
is ``wrk`` when installed (else an aiohttp client with the same number of connections). Rounds
alternate the targets so drift on a shared machine hits them alike; figures are medians over
rounds, and ratios are taken within the same run.

Why CPUs are pinned: unpinned, the load generator, the proxy and the backend fight over the same
CPUs, and "backend direct" (one process fewer in the fight) stopped being an upper bound — nginx
beat it. With ``taskset`` each proxy under test gets a CPU of its own, the load generator and the
backend share the others (``--no-pin`` turns this off). On a machine with fewer than three CPUs
the backend called directly still shares its CPU with the load generator, so it is not a
ceiling there; nginx, a proxy in C in the same seat as ours, is the ceiling the figures compare
against, and the report says which seat each process had.

    .venv/bin/python benchmarks/edge.py [--rounds 5] [--seconds 4] [--connections 32]
        [--no-pin] [--write-docs]

Prints a table; with ``--write-docs`` it rewrites the ``## Edge`` section of
``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_report import write_section

HOST = "bench.local"
ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "benchmarks.md"
BODY = b"hello from the backend\n" * 4


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# ---- child processes -------------------------------------------------------------------------


def run_edge_child(main: Coroutine[Any, Any, None]) -> None:
    """Run an edge child on the loop ``interlock edge`` runs on: uvloop unless
    ``INTERLOCK_NO_UVLOOP=true`` (a checkout without ``interlock.cli.loop`` runs on asyncio's)."""
    try:
        from interlock.cli.env import env_bool
        from interlock.cli.loop import NO_UVLOOP_FLAG, run_on_loop
    except ImportError:
        asyncio.run(main)
        return
    run_on_loop(main, uvloop=not env_bool(NO_UVLOOP_FLAG))


async def serve_backend(port: int) -> None:
    from aiohttp import web

    async def handle(request: web.BaseRequest) -> web.Response:
        return web.Response(body=BODY, content_type="text/plain")

    runner = web.ServerRunner(web.Server(handle), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    await asyncio.Event().wait()


async def serve_edge(port: int, backend_port: int, with_modules: bool) -> None:
    from loguru import logger

    from interlock.edge.inprocess import InProcessEdge
    from interlock.edge.provider import BackendTarget
    from interlock.edge.server import EdgeServer
    from interlock.edge.upstreams import StaticUpstreams
    from interlock.model.moduleset import Modules

    logger.remove()
    edge = InProcessEdge()
    modules = Modules()
    if with_modules:
        modules = Modules.model_validate(
            {
                "ipRestriction": {"allow": ["127.0.0.0/8"]},
                "headers": {
                    "request": {"add": {"X-Team": "blue"}, "remove": ["X-Debug"]},
                    "response": {"add": {"X-Frame-Options": "DENY"}},
                },
            }
        )
    await edge.apply_modules(
        host=HOST, route_id="bench", path="/", path_type="Prefix", modules=modules, secrets={}
    )
    await edge.attach_backend(
        host=HOST, route_id="bench", backend=BackendTarget("bench", "backend", 80)
    )
    upstreams = StaticUpstreams({("bench", "backend", 80): [("127.0.0.1", backend_port)]})
    server = EdgeServer(edge=edge, upstreams=upstreams)
    await server.start(addr=f"127.0.0.1:{port}")
    # SIGTERM stops it cleanly, so a profiler wrapping the process (edge_profile.py) can
    # write its output at exit.
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await server.stop()


NGINX_CONF = """
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log error;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {prefix}/body;
  proxy_temp_path {prefix}/proxy;
  fastcgi_temp_path {prefix}/fastcgi;
  uwsgi_temp_path {prefix}/uwsgi;
  scgi_temp_path {prefix}/scgi;
  upstream backend {{ server 127.0.0.1:{backend_port}; keepalive 64; }}
  server {{
    listen 127.0.0.1:{port};
    server_name {host};
    location / {{
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header X-Forwarded-Host $host;
    }}
  }}
}}
"""


# ---- load generation -------------------------------------------------------------------------


@dataclass
class Result:
    rps: float
    p99_ms: float
    errors: int


def _duration_ms(text: str) -> float:
    value, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text).groups()  # type: ignore[union-attr]
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}[unit]


@dataclass(frozen=True)
class Seats:
    """Which CPUs each role may run on (empty: unpinned)."""

    load: tuple[int, ...] = ()
    proxy: tuple[int, ...] = ()
    backend: tuple[int, ...] = ()

    def prefix(self, cpus: tuple[int, ...]) -> list[str]:
        return ["taskset", "-c", ",".join(map(str, cpus))] if cpus else []

    def describe(self) -> str:
        if not self.proxy:
            return "not pinned: load generator, proxy and backend share every CPU"
        shared = " (shared with the load generator)" if self.backend == self.load else ""
        return (
            f"pinned with taskset: proxy under test on CPU {_cpus(self.proxy)}, load generator on "
            f"CPU {_cpus(self.load)}, backend on CPU {_cpus(self.backend)}{shared}"
        )


def _cpus(cpus: tuple[int, ...]) -> str:
    return ",".join(map(str, cpus))


def plan_seats(available: list[int], *, pin: bool) -> Seats:
    """The proxy gets a CPU of its own; the load generator and the backend the rest."""
    if not pin or len(available) < 2 or not shutil.which("taskset"):
        return Seats()
    cpus = sorted(available)
    if len(cpus) == 2:
        return Seats(load=(cpus[0],), proxy=(cpus[1],), backend=(cpus[0],))
    return Seats(load=(cpus[0],), proxy=(cpus[1],), backend=tuple(cpus[2:]))


def run_wrk(port: int, *, seconds: int, connections: int, seats: Seats) -> Result:
    out = subprocess.run(
        [
            *seats.prefix(seats.load),
            "wrk",
            "-t1",
            f"-c{connections}",
            f"-d{seconds}s",
            "--latency",
            "-H",
            f"Host: {HOST}",
            f"http://127.0.0.1:{port}/",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p99 = _duration_ms(re.search(r"99%\s+([\d.]+\w+)", out).group(1))  # type: ignore[union-attr]
    errors_match = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    socket_errors = re.search(r"Socket errors: (.*)", out)
    errors = int(errors_match.group(1)) if errors_match else 0
    if socket_errors:
        errors += sum(int(n) for n in re.findall(r"\d+", socket_errors.group(1)))
    return Result(rps, p99, errors)


async def run_aiohttp(port: int, *, seconds: int, connections: int) -> Result:
    import aiohttp

    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds
    url = f"http://127.0.0.1:{port}/"
    connector = aiohttp.TCPConnector(limit=connections)
    async with aiohttp.ClientSession(connector=connector) as client:

        async def worker() -> None:
            nonlocal errors
            while time.perf_counter() < deadline:
                start = time.perf_counter()
                async with client.get(url, headers={"Host": HOST}) as response:
                    await response.read()
                    if response.status != 200:
                        errors += 1
                latencies.append(time.perf_counter() - start)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(connections)))
        elapsed = time.perf_counter() - started
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99) - 1] * 1000 if latencies else float("nan")
    return Result(len(latencies) / elapsed, p99, errors)


def measure(port: int, *, seconds: int, connections: int, seats: Seats) -> Result:
    if shutil.which("wrk"):
        return run_wrk(port, seconds=seconds, connections=connections, seats=seats)
    if seats.load:  # the aiohttp generator runs in this process
        os.sched_setaffinity(0, seats.load)
    return asyncio.run(run_aiohttp(port, seconds=seconds, connections=connections))


def wait_listening(port: int, process: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"process {process.args!r} exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} after {timeout}s")


# ---- the run ---------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=4)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument(
        "--write-docs", action="store_true", help="rewrite the Edge section of docs/benchmarks.md"
    )
    parser.add_argument(
        "--no-pin", action="store_true", help="do not pin processes to CPUs with taskset"
    )
    parser.add_argument(
        "--child", choices=["backend", "edge", "edge-modules"], help=argparse.SUPPRESS
    )
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--backend-port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child == "backend":
        asyncio.run(serve_backend(args.port))
        return 0
    if args.child in ("edge", "edge-modules"):
        run_edge_child(serve_edge(args.port, args.backend_port, args.child == "edge-modules"))
        return 0

    seats = plan_seats(sorted(os.sched_getaffinity(0)), pin=not args.no_pin)
    print(seats.describe(), flush=True)
    processes: list[subprocess.Popen[bytes]] = []
    prefix = tempfile.mkdtemp(prefix="interlock-bench-nginx-")
    try:
        backend_port = free_port()
        backend = subprocess.Popen(
            [
                *seats.prefix(seats.backend),
                sys.executable,
                __file__,
                "--child",
                "backend",
                "--port",
                str(backend_port),
            ],
        )
        processes.append(backend)
        wait_listening(backend_port, backend)
        targets: dict[str, int] = {"backend direct": backend_port}
        for name, child in (
            ("interlock edge", "edge"),
            ("interlock edge + modules", "edge-modules"),
        ):
            port = free_port()
            process = subprocess.Popen(
                [
                    *seats.prefix(seats.proxy),
                    sys.executable,
                    __file__,
                    "--child",
                    child,
                    "--port",
                    str(port),
                    "--backend-port",
                    str(backend_port),
                ],
                cwd=ROOT,
            )
            processes.append(process)
            wait_listening(port, process)
            targets[name] = port
        nginx = shutil.which("nginx") or (
            "/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None
        )
        if nginx:
            port = free_port()
            conf = Path(prefix) / "nginx.conf"
            conf.write_text(
                NGINX_CONF.format(prefix=prefix, port=port, backend_port=backend_port, host=HOST)
            )
            process = subprocess.Popen(
                [
                    *seats.prefix(seats.proxy),
                    nginx,
                    "-p",
                    prefix,
                    "-c",
                    str(conf),
                    "-g",
                    "daemon off;",
                ],
                stderr=subprocess.DEVNULL,
            )
            processes.append(process)
            wait_listening(port, process)
            targets["nginx 1.x proxy"] = port

        for port in targets.values():  # warm up connections and code paths
            measure(port, seconds=1, connections=args.connections, seats=seats)
        results: dict[str, list[Result]] = {name: [] for name in targets}
        for round_ in range(args.rounds):
            order = list(targets.items())
            if round_ % 2:
                order.reverse()
            for name, port in order:
                result = measure(
                    port, seconds=args.seconds, connections=args.connections, seats=seats
                )
                results[name].append(result)
                print(
                    f"round {round_ + 1} {name:<26} {result.rps:>9.0f} req/s  "
                    f"p99 {result.p99_ms:>7.2f} ms  errors {result.errors}",
                    flush=True,
                )
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(prefix, ignore_errors=True)

    nginx_version = ""
    if nginx:
        version = subprocess.run([nginx, "-v"], capture_output=True, text=True).stderr.strip()
        nginx_version = version.split("/")[-1]
        results[f"nginx {nginx_version} proxy"] = results.pop("nginx 1.x proxy")
    generator = "wrk" if shutil.which("wrk") else "aiohttp"
    section = render(results, args=args, generator=generator, seats=seats)
    print()
    print(section)
    if args.write_docs:
        write_section(section, "## Edge", DOCS)
        print(f"wrote the Edge section of {DOCS.relative_to(ROOT)}")
    return 0


def render(
    results: dict[str, list[Result]], *, args: argparse.Namespace, generator: str, seats: Seats
) -> str:
    medians = {
        name: (
            statistics.median(r.rps for r in runs),
            statistics.median(r.p99_ms for r in runs),
            sum(r.errors for r in runs),
        )
        for name, runs in results.items()
    }
    edge_rps, edge_p99, _ = medians["interlock edge"]
    lines = [
        "## Edge",
        "",
        "Requests per second and p99 latency of a small GET (92-byte body) through the edge",
        "data plane to a local aiohttp backend, against nginx as a reverse proxy (one worker,",
        "upstream keepalive) — the ceiling: a proxy in C in the same seat as ours — and, for",
        "reference, the backend called directly. Every target runs in its own process, all in one",
        "run, rounds alternating the order. Load: "
        f"`{generator}`, {args.connections} connections, {args.seconds} s per measurement, "
        f"median of {args.rounds} rounds.",
        "",
        "```",
        f".venv/bin/python benchmarks/edge.py --rounds {args.rounds} --seconds {args.seconds} "
        f"--connections {args.connections}{' --no-pin' if args.no_pin else ''}",
        "```",
        "",
        f"Machine: {platform.platform()}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs; {seats.describe()}; load average "
        f"{os.getloadavg()[0]:.1f} at the end of the run.",
        "",
        "| target | req/s (median) | p99 ms (median) | errors | req/s vs edge | p99 vs edge |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, (rps, p99, errors) in medians.items():
        lines.append(
            f"| {name} | {rps:,.0f} | {p99:.2f} | {errors} | "
            f"{rps / edge_rps:.2f}x | {p99 / edge_p99:.2f}x |"
        )
    lines += [
        "",
        "Ratios within each round (the figure is their median; each round in brackets):",
        "",
    ]
    # The edge against the ceiling (nginx); the modules variant against the plain edge (their
    # cost). The backend called directly is not a ceiling unless it had CPUs of its own.
    backend_is_ceiling = bool(seats.backend) and seats.backend != seats.load
    pairs = [
        ("interlock edge", name)
        for name in results
        if name.startswith("nginx") or (name == "backend direct" and backend_is_ceiling)
    ]
    pairs.append(("interlock edge + modules", "interlock edge"))
    for mine, other in pairs:
        ours, theirs = results[mine], results[other]
        throughput = [a.rps / b.rps for a, b in zip(ours, theirs, strict=True)]
        tail = [a.p99_ms / b.p99_ms for a, b in zip(ours, theirs, strict=True)]
        lines.append(
            f"- {mine} vs {other}: {statistics.median(throughput):.0%} of its throughput "
            f"[{', '.join(f'{r:.0%}' for r in throughput)}], "
            f"p99 {statistics.median(tail):.1f}x its p99 "
            f"[{', '.join(f'{r:.1f}' for r in tail)}]"
        )
    if not any(name.startswith("nginx") for name in results):
        lines.append("- nginx was not installed, so this run has no nginx comparison.")
    if not backend_is_ceiling:
        lines.append(
            "- backend direct is listed for reference only: it shared its CPU with the load "
            "generator (or nothing was pinned), so it bounds nothing; nginx is the ceiling."
        )
    lines += NOTE
    return "\n".join(lines) + "\n"


NOTE = [
    "",
    "Reading the figures: the edge is a Python proxy on one asyncio loop, so each request costs",
    "parsing, the module chain, an aiohttp client exchange with the backend and two `send` system",
    "calls (headers and body leave in one); profiling puts most of the time in the aiohttp client",
    "and in `send` (tens of microseconds each on this VM). nginx does the same work in C. The",
    "machine is shared with other test runs, hence the spread between rounds: compare the ratios",
    "within a round, not absolute figures across runs.",
]


if __name__ == "__main__":
    sys.exit(main())
