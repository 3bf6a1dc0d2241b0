"""Edge data plane throughput and tail latency, against nginx, Caddy and HAProxy in one run.

Every target runs in its own process, all on this machine, in front of one backend: nginx
returning a fixed 92-byte body (``return 200``, one worker), a server in C that costs far less
per request than any proxy in front of it. The targets: our edge with modules
off; our edge with ipRestriction + basicAuth (the bcrypt check cached after the first request) +
headers; our mesh listener (an embedded controller with ``--mesh-addr``, a Service and
EndpointSlice pointing at the backend, requests with ``Host: echo.default``); and, each when
installed (a peer that is not is skipped and the report says so), nginx (one worker, upstream
keepalive), Caddy (``reverse_proxy``, ``GOMAXPROCS=1``) and HAProxy (one thread,
``http-reuse always``); the backend called directly. Caddy runs its ``reverse_proxy`` defaults
(keep-alive to the backend with 32 idle connections per host, as many as the load's
connections; no access log): :data:`CADDYFILE` says why its row is what it is. The load
generator is ``wrk`` when installed (else an aiohttp client with the same number of
connections). Rounds alternate the order of the targets so drift on a shared machine hits them
alike; figures are medians over rounds with their spread (lowest to highest), and ratios are
taken within a round.

Why the backend is nginx and the run checks it: with one aiohttp backend behind every proxy
(this benchmark before issue 29) the backend's own rate capped every target near it, nginx and
HAProxy included, and the ratios were compressed toward 1 — the benchmark measured the backend.
A ratio between proxies means something only when each proxy is the bottleneck of its own
measurement, so the report measures it for every row (``bottleneck.py``): during each
measurement, the CPU time of the proxy's processes, of ``wrk`` and the backend, and of every
other process on the machine, from ``/proc``. A row is proxy-bound when the proxy's CPU was
saturated and the load side's was not; the report says what limited each row, marks a row whose
proxy shared its CPU with other processes, and reads each ratio accordingly (a ratio over a
load-bound row is an upper bound). Issue 29's first rule — the backend called directly must
carry :data:`VALID_HEADROOM` times the fastest proxy — is still printed, but it is not the
verdict: on two CPUs the backend and ``wrk`` share one CPU and carry about twice what nginx
carries on the other, so it cannot be met against a C proxy however proxy-bound the edge is;
nor is the load average, which the benchmark's own processes raise to about 2.

Why CPUs are pinned: unpinned, the load generator, the proxy and the backend fight over the same
CPUs. With ``taskset`` each proxy under test gets a CPU of its own and the load generator and
the backend share the others (``--no-pin`` turns this off). On a machine with two CPUs the
backend and the load generator share CPU 0, so "backend direct" is what that CPU can supply:
the ceiling of every proxied measurement; a row reaching it is load-bound, and its CPU columns
say so.

With ``--workers 2[,4...]`` it also measures, for each N, the edge as ``interlock run
--edge-workers N`` serves it (N ``interlock edge`` processes sharing the port) and nginx with
``worker_processes N``: each pinned to N CPUs, the proxies' CPU first, then the backend's and the
load generator's (on two CPUs, N = 2 shares CPU 0 with them, and the report says so).

    .venv/bin/python benchmarks/edge.py [--rounds 5] [--seconds 4] [--connections 32]
        [--no-pin] [--no-mesh] [--workers N[,N...]] [--write-docs]

Prints a table; with ``--write-docs`` it rewrites the ``## Edge`` section of
``docs/benchmarks.md``. Needs nginx (``apt-get install nginx``) for the backend.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
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
from bottleneck import (
    FOREIGN_LIMIT,
    SATURATED,
    Roles,
    Snapshot,
    Usage,
    Verdict,
    headroom_rule,
    median_usage,
    ratio_reading,
    snapshot,
    usage,
    verdict,
)

from interlock.model.service import ServicePortKey

HOST = "bench.local"
MESH_HOST = "echo.default"
USER, PASSWORD = "bench", "bench-password"
AUTHORIZATION = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "benchmarks.md"
BODY = b"hello from the backend\n" * 4
VALID_HEADROOM = 3.0
"""The backend called directly must carry this many times the fastest proxy's requests/s for
the run's ratios to be read as the proxies' (else the backend, not the proxy, may be what was
measured)."""
NGINX = "/usr/sbin/nginx"


def stop_processes(processes: list[subprocess.Popen[bytes]], *, within: float) -> None:
    """SIGTERM to each, last started first; then each still running after ``within`` seconds
    is killed."""
    for process in reversed(processes):
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout=within)
        except subprocess.TimeoutExpired:
            process.kill()


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
    """An aiohttp backend answering :data:`BODY`: the one ``edge_profile.py`` runs (it counts the
    edge's instructions only, so the backend's speed does not matter there); this benchmark's
    backend is nginx (:func:`start_backend`)."""
    from aiohttp import web

    async def handle(request: web.BaseRequest) -> web.Response:
        return web.Response(body=BODY, content_type="text/plain")

    runner = web.ServerRunner(web.Server(handle), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    await asyncio.Event().wait()


async def serve_edge(port: int, backend_port: int, with_modules: bool) -> None:
    from loguru import logger

    from interlock.dataplane.upstreams import StaticUpstreams
    from interlock.edge.inprocess import InProcessEdge
    from interlock.edge.provider import ApplyModules, BackendTarget
    from interlock.edge.server import EdgeServer
    from interlock.model.moduleset import Modules, SecretValue

    logger.remove()
    edge = InProcessEdge()
    modules = Modules()
    secrets: dict[tuple[str, str], SecretValue] = {}
    if with_modules:
        import bcrypt

        modules = Modules.model_validate(
            {
                "ipRestriction": {"allow": ["127.0.0.0/8"]},
                "basicAuth": {"realm": "bench", "secretRef": {"name": "users", "key": "htpasswd"}},
                "headers": {
                    "request": {"add": {"X-Team": "blue"}, "remove": ["X-Debug"]},
                    "response": {"add": {"X-Frame-Options": "DENY"}},
                },
            }
        )
        hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=10))
        secrets[("users", "htpasswd")] = SecretValue(USER.encode() + b":" + hashed + b"\n")
    await edge.apply_modules(
        ApplyModules(
            host=HOST,
            route_id="bench",
            path="/",
            path_type="Prefix",
            modules=modules,
            secrets=secrets,
        )
    )
    await edge.attach_backend(
        host=HOST, route_id="bench", backend=BackendTarget(ServicePortKey("bench", "backend", 80))
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


async def serve_edge_workers(port: int, backend_port: int, count: int) -> None:
    """``count`` ``interlock edge`` worker processes on ``port`` (what ``interlock run
    --edge-workers`` starts: :class:`~interlock.edge.workers.EdgeWorkers`), programmed through
    their admin APIs with the plain route; ``--upstream`` points the backend Service at nginx."""
    from loguru import logger

    from interlock.edge.provider import ApplyModules, BackendTarget
    from interlock.edge.workers import EdgeWorkers
    from interlock.model.moduleset import Modules

    logger.remove()
    workers = EdgeWorkers(
        count=count,
        listen=f"127.0.0.1:{port}",
        child_args=["--upstream", f"bench/backend:80=127.0.0.1:{backend_port}"],
    )
    await workers.start()
    await workers.provider.apply_modules(
        ApplyModules(host=HOST, route_id="bench", path="/", path_type="Prefix", modules=Modules())
    )
    await workers.provider.attach_backend(
        host=HOST, route_id="bench", backend=BackendTarget(ServicePortKey("bench", "backend", 80))
    )
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await workers.stop()


async def serve_mesh(port: int, backend_port: int) -> None:
    """An embedded controller whose mesh listener on ``port`` routes ``echo.default`` to the
    backend (a Service and its EndpointSlice), once it does."""
    import yaml
    from loguru import logger
    from mesh import objects as mesh_service

    from interlock.config import (
        Address,
        AdminConfig,
        ClusterConfig,
        ControllerConfig,
        MeshConfig,
        PolicyApiConfig,
    )
    from interlock.controller.app import Controller

    logger.remove()
    local = Address("127.0.0.1", 0)
    controller = Controller(
        ControllerConfig(
            cluster=ClusterConfig(embedded=True),
            policy=PolicyApiConfig(addr=local),
            admin=AdminConfig(addr=local),
            mesh=MeshConfig(addr=Address("127.0.0.1", port)),
        )
    )
    await controller.start()
    await controller.wait_ready()
    assert controller.embedded is not None
    with tempfile.TemporaryDirectory() as folder:
        manifest = Path(folder) / "backend.yaml"
        manifest.write_text(yaml.safe_dump_all(mesh_service("echo", backend_port)))
        report = await controller.embedded.apply_manifests([str(manifest)])
        assert not report.errors, report.errors
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await controller.stop()


CADDYFILE = """
{{
  admin off
  auto_https off
  storage file_system {prefix}/caddy
}}
http://:{port} {{
  bind 127.0.0.1
  reverse_proxy 127.0.0.1:{backend_port}
}}
"""

"""Caddy's row is Caddy's ``reverse_proxy`` as shipped, on one CPU (``GOMAXPROCS=1``, as the
pinning would set anyway): no access log (Caddy logs none unless told to), plain HTTP/1.1 from
``wrk`` (no TLS, so no HTTP/2 negotiation), keep-alive to the backend with Caddy's default of 32
idle connections per host (the load has 32). It costs far more CPU per request than nginx and
HAProxy, measured (2026-12-02, loaded machine, Caddy 2.6.2 alone with ``wrk -c32``): 140 to 214
µs of CPU per request against nginx's ~20; 64 idle connections, ``GOGC=400`` and no
``X-Forwarded-For`` changed nothing beyond the rounds' spread; ``perf`` put 46% of its samples in
the kernel, a fifth of them the Go runtime's threads sleeping and waking (``nanosleep``, 6
threads on one CPU, ~7,700 context switches a second). The row's CPU per request (161 µs in
the 13:39 UTC run, nginx 26) is Caddy's cost on one core, not a misconfiguration."""

HAPROXY_CFG = """
global
  nbthread 1
  maxconn 4096
defaults
  mode http
  timeout connect 5s
  timeout client 60s
  timeout server 60s
  option http-keep-alive
frontend edge
  bind 127.0.0.1:{port}
  option forwardfor
  default_backend app
backend app
  http-reuse always
  server backend 127.0.0.1:{backend_port}
"""


NGINX_CONF = """
worker_processes {workers};
pid {prefix}/nginx-{workers}.pid;
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
    listen 127.0.0.1:{port}{reuseport};
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


BACKEND_CONF = """
worker_processes 1;
pid {prefix}/backend.pid;
error_log {prefix}/backend-error.log error;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {prefix}/backend-body;
  proxy_temp_path {prefix}/backend-proxy;
  fastcgi_temp_path {prefix}/backend-fastcgi;
  uwsgi_temp_path {prefix}/backend-uwsgi;
  scgi_temp_path {prefix}/backend-scgi;
  keepalive_requests 1000000;
  server {{
    listen 127.0.0.1:{port};
    location / {{
      default_type text/plain;
      return 200 "{body}";
    }}
  }}
}}
"""
"""The backend: nginx answering every request with :data:`BODY` (``\\n`` is a newline in an
nginx string)."""


def start_backend(prefix: str, port: int, cpus: list[str]) -> subprocess.Popen[bytes]:
    """nginx as the backend on ``port`` (its config and files under ``prefix``)."""
    if not os.path.exists(NGINX):
        raise SystemExit(
            f"benchmarks/edge.py needs nginx for its backend ({NGINX}): apt-get install nginx"
        )
    config = Path(prefix) / "backend.conf"
    body = BODY.decode().replace("\n", "\\n")
    config.write_text(BACKEND_CONF.format(prefix=prefix, port=port, body=body))
    return subprocess.Popen(
        [*cpus, NGINX, "-p", prefix, "-c", str(config), "-g", "daemon off;"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


# ---- load generation -------------------------------------------------------------------------


@dataclass
class Result:
    rps: float
    p99_ms: float
    errors: int
    cpu: Usage | None = None
    p50_ms: float = float("nan")
    """The measurement's CPU (``bottleneck.py``): what limited it."""


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

    def proxies(self, count: int, available: list[int]) -> tuple[int, ...]:
        """CPUs for a proxy of ``count`` workers: the proxy's, then others (the load
        generator's and the backend's last) until there are ``count``."""
        if not self.proxy or count <= len(self.proxy):
            return self.proxy
        rest = [c for c in sorted(available) if c not in self.proxy and c not in self.load]
        rest += [c for c in self.load if c not in self.proxy]
        return tuple(sorted({*self.proxy, *rest[: count - len(self.proxy)]}))

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


PACE_SCRIPT = "function delay()\n  return math.random(0, {twice_ms})\nend\n"
"""wrk's Lua hook: after each answer a connection waits a random whole number of milliseconds
from 0 to twice the mean before its next request. A fixed wait kept the connections in step
(all started together, each waiting as long), so the requests came in bursts of one per
connection and the last of each burst waited for the others: a queue again (2026-12-03, p99
2.3 ms through the edge at 3,500 req/s, about 32 times its CPU per request)."""


def mean_wait_ms(connections: int, rate: float) -> int:
    """How long each of ``connections`` waits on average between answer and request for all of
    them together to offer about ``rate`` requests a second (at least 1 ms)."""
    return max(1, round(connections * 1000 / rate))


def run_wrk(
    target: Target, *, seconds: int, connections: int, seats: Seats, rate: float = 0.0
) -> Result:
    """``wrk`` against ``target``; with ``rate``, each connection paced so that all together
    offer about ``rate`` requests a second (each waits ``connections / rate`` on average after
    an answer, :data:`PACE_SCRIPT`: the rate reached is a little lower, by the answers' own
    time)."""
    pacing: list[str] = []
    if rate:
        script = Path(tempfile.mkdtemp(prefix="interlock-bench-pace-")) / "pace.lua"
        script.write_text(PACE_SCRIPT.format(twice_ms=2 * mean_wait_ms(connections, rate)))
        pacing = ["-s", str(script)]
    out = subprocess.run(
        [
            *seats.prefix(seats.load),
            "wrk",
            "-t1",
            f"-c{connections}",
            f"-d{seconds}s",
            "--latency",
            *pacing,
            "-H",
            f"Host: {target.host}",
            "-H",
            f"Authorization: {AUTHORIZATION}",
            f"http://127.0.0.1:{target.port}/",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p99 = _duration_ms(re.search(r"99%\s+([\d.]+\w+)", out).group(1))  # type: ignore[union-attr]
    p50 = _duration_ms(re.search(r"50%\s+([\d.]+\w+)", out).group(1))  # type: ignore[union-attr]
    if pacing:
        shutil.rmtree(Path(pacing[1]).parent, ignore_errors=True)
    errors_match = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    socket_errors = re.search(r"Socket errors: (.*)", out)
    errors = int(errors_match.group(1)) if errors_match else 0
    if socket_errors:
        errors += sum(int(n) for n in re.findall(r"\d+", socket_errors.group(1)))
    return Result(rps, p99, errors, p50_ms=p50)


async def run_aiohttp(target: Target, *, seconds: int, connections: int) -> Result:
    import aiohttp

    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds
    url = f"http://127.0.0.1:{target.port}/"
    headers = {"Host": target.host, "Authorization": AUTHORIZATION}
    connector = aiohttp.TCPConnector(limit=connections)
    async with aiohttp.ClientSession(connector=connector) as client:

        async def worker() -> None:
            nonlocal errors
            while time.perf_counter() < deadline:
                start = time.perf_counter()
                async with client.get(url, headers=headers) as response:
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


def measure(
    target: Target, *, seconds: int, connections: int, seats: Seats, rate: float = 0.0
) -> Result:
    """One measurement of ``target``, with the CPU each side of it used (:mod:`bottleneck`):
    the counters are read just before the load starts and just after it ends. ``rate``: paced
    (``run_wrk``; needs wrk)."""
    before = snapshot(os.getpid())
    if shutil.which("wrk"):
        result = run_wrk(target, seconds=seconds, connections=connections, seats=seats, rate=rate)
    else:
        if seats.load:  # the aiohttp generator runs in this process
            os.sched_setaffinity(0, seats.load)
        result = asyncio.run(run_aiohttp(target, seconds=seconds, connections=connections))
    after = snapshot(os.getpid())
    result.cpu = usage(before, after, roles(target, before, seats), root=os.getpid())
    return result


def roles(target: Target, before: Snapshot, seats: Seats) -> Roles:
    """Who is who in a measurement of ``target``: its proxy's processes (none for the backend
    called directly) on the CPUs it was pinned to, the backend's, the load generator's CPUs."""
    available = sorted(os.sched_getaffinity(0))
    return Roles(
        proxy=before.tree(target.process) if target.process else frozenset(),
        proxy_cpus=frozenset(seats.proxies(target.workers, available)),
        proxy_cores=target.workers,
        backend=before.tree(target.backend),
        generator_cpus=frozenset(seats.load),
    )


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


def wait_answering(target: Target, process: subprocess.Popen[bytes], timeout: float) -> None:
    """Until ``target`` answers 200 (the mesh listener learns its Service after it listens)."""
    request = (
        f"GET / HTTP/1.1\r\nHost: {target.host}\r\nAuthorization: {AUTHORIZATION}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        wait_listening(target.port, process, timeout=max(deadline - time.monotonic(), 0.1))
        with socket.create_connection(("127.0.0.1", target.port), timeout=10) as conn:
            conn.sendall(request)
            if conn.recv(64).startswith(b"HTTP/1.1 200"):
                return
        time.sleep(0.2)
    raise RuntimeError(f"{target.name} does not answer 200 after {timeout}s")


# ---- the run ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    name: str
    port: int
    host: str = HOST
    process: int = 0
    """The proxy's process (its workers are below it); 0 for the backend called directly."""
    backend: int = 0
    """The backend's process."""
    workers: int = 1
    """How many CPUs the proxy can keep busy at once (one per worker process or thread)."""


@dataclass(frozen=True)
class Peer:
    """A reverse proxy to compare with, if installed: how to configure and start it."""

    name: str
    binary: str
    config: str
    config_file: str
    argv: tuple[str, ...]
    version_argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()

    def find(self) -> str | None:
        return shutil.which(self.binary) or (self.binary if os.path.exists(self.binary) else None)

    def version(self, path: str) -> str:
        done = subprocess.run([path, *self.version_argv], capture_output=True, text=True)
        text = (done.stdout + done.stderr).strip()
        found = re.search(r"(\d+\.\d+(\.\d+)?)", text)
        return found.group(1) if found else "?"


PEERS = (
    Peer(
        name="nginx",
        binary="/usr/sbin/nginx",
        config=NGINX_CONF,
        config_file="nginx.conf",
        argv=("-p", "{prefix}", "-c", "{config}", "-g", "daemon off;"),
        version_argv=("-v",),
    ),
    Peer(
        name="caddy",
        binary="/usr/bin/caddy",
        config=CADDYFILE,
        config_file="Caddyfile",
        argv=("run", "--config", "{config}", "--adapter", "caddyfile"),
        version_argv=("version",),
        env=(("GOMAXPROCS", "1"),),
    ),
    Peer(
        name="haproxy",
        binary="/usr/sbin/haproxy",
        config=HAPROXY_CFG,
        config_file="haproxy.cfg",
        argv=("-db", "-f", "{config}"),
        version_argv=("-v",),
    ),
)

EDGE = "interlock edge"
EDGE_WORKERS = "interlock edge, {n} workers"
NGINX_WORKERS = "{nginx}, {n} workers"
EDGE_MODULES = "interlock edge + modules"
MESH = "interlock mesh listener"
BACKEND = "backend direct"


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
    parser.add_argument("--no-mesh", action="store_true", help="leave the mesh listener out")
    parser.add_argument(
        "--workers",
        default="",
        metavar="N[,N...]",
        help="also measure the edge with --edge-workers N (interlock edge processes sharing the "
        "port) and nginx with worker_processes N, for each N above 1 (pinned to N CPUs, the "
        "load generator's and backend's last)",
    )
    parser.add_argument(
        "--paced",
        type=float,
        default=0.0,
        metavar="RATE",
        help="also measure each single-process row's latency at about RATE req/s offered "
        "(wrk's connections paced), in every round after its saturated measurement",
    )
    parser.add_argument(
        "--paced-seconds",
        type=int,
        default=0,
        metavar="S",
        help="how long each paced measurement lasts (default: --seconds); a p99 at a few "
        "thousand req/s rests on 1%% of the requests, so a longer one steadies it",
    )
    parser.add_argument(
        "--child", choices=["edge", "edge-modules", "edge-workers", "mesh"], help=argparse.SUPPRESS
    )
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--backend-port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.paced_seconds = args.paced_seconds or args.seconds
    worker_counts = sorted({int(n) for n in args.workers.split(",") if n.strip() and int(n) > 1})

    if args.child == "edge-workers":
        run_edge_child(serve_edge_workers(args.port, args.backend_port, args.count))
        return 0
    if args.child in ("edge", "edge-modules"):
        run_edge_child(serve_edge(args.port, args.backend_port, args.child == "edge-modules"))
        return 0
    if args.child == "mesh":
        run_edge_child(serve_mesh(args.port, args.backend_port))
        return 0

    if args.paced and not shutil.which("wrk"):
        parser.error("--paced needs wrk")
    seats = plan_seats(sorted(os.sched_getaffinity(0)), pin=not args.no_pin)
    print(seats.describe(), flush=True)
    load_before = load_high = os.getloadavg()[0]
    processes: list[subprocess.Popen[bytes]] = []
    prefix = tempfile.mkdtemp(prefix="interlock-bench-peers-")
    skipped: list[str] = []
    try:
        backend_port = free_port()

        available = sorted(os.sched_getaffinity(0))

        def child(role: str, port: int, count: int = 1) -> subprocess.Popen[bytes]:
            argv = [sys.executable, __file__, "--child", role, "--port", str(port)]
            argv += ["--backend-port", str(backend_port), "--count", str(count)]
            cpus = seats.prefix(seats.proxies(count, available))
            process = subprocess.Popen([*cpus, *argv], cwd=ROOT)
            processes.append(process)
            return process

        backend = start_backend(prefix, backend_port, seats.prefix(seats.backend))
        processes.append(backend)
        targets = [Target(BACKEND, backend_port, backend=backend.pid)]
        wait_answering(targets[0], backend, timeout=30)
        ours = [(EDGE, "edge", HOST), (EDGE_MODULES, "edge-modules", HOST)]
        if not args.no_mesh:
            ours.append((MESH, "mesh", MESH_HOST))
        for name, role, host in ours:
            port = free_port()
            process = child(role, port)
            target = Target(name, port, host, process=process.pid, backend=backend.pid)
            wait_answering(target, process, timeout=120)
            targets.append(target)
        for count in worker_counts:
            port = free_port()
            process = child("edge-workers", port, count)
            target = Target(
                EDGE_WORKERS.format(n=count),
                port,
                process=process.pid,
                backend=backend.pid,
                workers=count,
            )
            wait_answering(target, process, timeout=180)
            targets.append(target)
        nginx_counts = [1, *worker_counts]
        for peer in PEERS:
            path = peer.find()
            if path is None:
                skipped.append(f"{peer.name} ({peer.binary}) is not installed: no {peer.name} row")
                continue
            for count in nginx_counts if peer.name == "nginx" else [1]:
                name = f"{peer.name} {peer.version(path)}"
                port = free_port()
                config = Path(prefix) / f"{count}-{peer.config_file}"
                config.write_text(
                    peer.config.format(
                        prefix=prefix,
                        port=port,
                        backend_port=backend_port,
                        host=HOST,
                        workers=count,
                        reuseport=" reuseport" if count > 1 else "",
                    )
                )
                argv = [a.format(prefix=prefix, config=config) for a in peer.argv]
                env = {**os.environ, "HOME": prefix, "XDG_DATA_HOME": prefix, **dict(peer.env)}
                process = subprocess.Popen(
                    [*seats.prefix(seats.proxies(count, available)), path, *argv],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env=env,
                )
                processes.append(process)
                target = Target(
                    name if count == 1 else NGINX_WORKERS.format(nginx=name, n=count),
                    port,
                    process=process.pid,
                    backend=backend.pid,
                    workers=count,
                )
                wait_answering(target, process, timeout=30)
                targets.append(target)

        for target in targets:  # warm up connections and code paths
            measure(target, seconds=1, connections=args.connections, seats=seats)
        results: dict[str, list[Result]] = {target.name: [] for target in targets}
        paced: dict[str, list[Result]] = {t.name: [] for t in targets if t.workers == 1}
        for round_ in range(args.rounds):
            order = targets if round_ % 2 == 0 else list(reversed(targets))
            for target in order:
                result = measure(
                    target, seconds=args.seconds, connections=args.connections, seats=seats
                )
                results[target.name].append(result)
                load_high = max(load_high, os.getloadavg()[0])
                print(
                    f"round {round_ + 1} {target.name:<26} {result.rps:>9.0f} req/s  "
                    f"p99 {result.p99_ms:>7.2f} ms  errors {result.errors}  "
                    f"{_cpu_line(result.cpu)}",
                    flush=True,
                )
                if args.paced and target.name in paced:
                    result = measure(
                        target,
                        seconds=args.paced_seconds,
                        connections=args.connections,
                        seats=seats,
                        rate=args.paced,
                    )
                    paced[target.name].append(result)
                    print(
                        f"round {round_ + 1} {target.name:<26} paced {result.rps:>6.0f} req/s  "
                        f"p50 {result.p50_ms:>5.2f} ms  p99 {result.p99_ms:>5.2f} ms  "
                        f"errors {result.errors}",
                        flush=True,
                    )
    finally:
        stop_processes(processes, within=10)
        shutil.rmtree(prefix, ignore_errors=True)

    generator = "wrk" if shutil.which("wrk") else "aiohttp"
    load_after = os.getloadavg()[0]
    load = (load_before, load_after, max(load_high, load_after))
    section = render(
        results, args=args, generator=generator, seats=seats, load=load, skipped=skipped
    )
    if args.paced:
        section += render_paced(paced, args=args)
    print()
    print(section)
    if args.write_docs:
        write_section(section, "## Edge", DOCS)
        print(f"wrote the Edge section of {DOCS.relative_to(ROOT)}")
    return 0


def render_paced(paced: dict[str, list[Result]], *, args: argparse.Namespace) -> str:
    """The latency table at one offered rate: what each proxy adds when none is saturated."""
    nginx = next((name for name in paced if name.startswith("nginx")), None)
    delay = mean_wait_ms(args.connections, args.paced)
    lines = [
        "",
        f"**Latency at about {args.paced:,.0f} req/s offered** (`--paced {args.paced:.0f}`): in "
        f"each round, after its saturated measurement, each single-process row again for "
        f"{args.paced_seconds} s with `wrk`'s {args.connections} connections paced (after each "
        f"answer a connection waits a random 0 to {2 * delay} ms, {delay} ms on average, before "
        "its next request, so that the connections do not send in step: a rate every row here "
        "carries without saturating, so the latency is mostly the proxy's own work per request "
        "and the chance queue of random arrivals). Above, with the connections never waiting, "
        "each p99 is mostly the queue in front of a saturated proxy: the connections over the "
        "throughput (Little's law), so those p99 ratios repeat the throughput ratios.",
        "",
        "| target | req/s reached, median | p50 ms median (spread) | p99 ms median (spread) "
        f"| errors | p50 vs {nginx} | p99 vs {nginx} |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, runs in paced.items():
        p50 = [r.p50_ms for r in runs]
        p99 = [r.p99_ms for r in runs]
        vs = (
            [
                (a.p50_ms / b.p50_ms, a.p99_ms / b.p99_ms)
                for a, b in zip(runs, paced[nginx], strict=True)
            ]
            if nginx
            else []
        )
        lines.append(
            f"| {name} | {statistics.median(r.rps for r in runs):,.0f} | "
            f"{statistics.median(p50):.3f} ({_spread(p50, '.3f')}) | "
            f"{statistics.median(p99):.3f} ({_spread(p99, '.3f')}) | "
            f"{sum(r.errors for r in runs)} | "
            + (f"{statistics.median(v[0] for v in vs):.1f}x | " if vs else "— | ")
            + (f"{statistics.median(v[1] for v in vs):.1f}x |" if vs else "— |")
        )
    return "\n".join(lines) + "\n"


def _paced_flags(args: argparse.Namespace) -> str:
    """The command line's pacing options, as given (``--paced-seconds`` only when it differs)."""
    if not args.paced:
        return ""
    flags = f" --paced {args.paced:.0f}"
    if args.paced_seconds != args.seconds:
        flags += f" --paced-seconds {args.paced_seconds}"
    return flags


def _spread(values: list[float], fmt: str) -> str:
    return f"{format(min(values), fmt)} to {format(max(values), fmt)}"


def row_verdicts(results: dict[str, list[Result]]) -> dict[str, tuple[Usage, Verdict, int]]:
    """Per row: the median of its rounds' CPU, the verdict from it, and in how many rounds the
    verdict was the same."""
    verdicts = {}
    for name, runs in results.items():
        rounds = [r.cpu for r in runs if r.cpu is not None]
        cpu = median_usage(rounds)
        found = verdict(cpu)
        same = sum(verdict(r).limit == found.limit for r in rounds)
        verdicts[name] = (cpu, found, same)
    return verdicts


def summary(
    results: dict[str, list[Result]], verdicts: dict[str, tuple[Usage, Verdict, int]]
) -> str:
    """The section's first lines: what limited each row, which rows are marked, and the issue's
    backend rule."""
    by_limit: dict[str, list[str]] = {}
    for name, (_, found, _) in verdicts.items():
        if name != BACKEND:
            by_limit.setdefault(found.limit, []).append(name)
    marked = [name for name, (_, found, _) in verdicts.items() if found.marked]
    parts = [f"{limit}: {_names(names)}" for limit, names in by_limit.items()]
    proxies = {
        name: statistics.median(r.rps for r in runs)
        for name, runs in results.items()
        if name != BACKEND
    }
    backend = statistics.median(r.rps for r in results[BACKEND])
    clean = [n for n, (_, found, _) in verdicts.items() if found.proxy_bound and not found.marked]
    marks = (
        f"Marked (more than {FOREIGN_LIMIT:.0%} of the proxy's CPU used by other processes): "
        + (_names(marked) if marked else "none")
        + ". "
        + (
            f"Proxy-bound with their CPU to themselves: {_names(clean)}; the req/s ratios "
            "between these rows compare the proxies' capacities."
            if len(clean) > 1
            else "Fewer than two rows were proxy-bound with their CPU to themselves: no req/s "
            "ratio below compares two proxies' capacities (the requests per CPU second do, "
            "roughly)."
        )
    )
    return "\n".join(
        [
            "**What limited each row** (measured per round from `/proc`, the verdict from the "
            "rounds' medians; see the columns below): " + "; ".join(parts) + ".",
            "",
            marks,
            "",
            "Issue 29's rule, kept for the record: "
            + headroom_rule(backend, proxies, VALID_HEADROOM)
            + ". On 2 CPUs it cannot be met against a C proxy: the load generator and the backend "
            "share one CPU and carry about twice what nginx carries on the other; the per-row "
            "CPU figures say which side ran out instead.",
        ]
    )


def _names(names: list[str]) -> str:
    """Row names in a sentence (in backticks: some hold commas)."""
    return ", ".join(f"`{name}`" for name in names)


def _cost(result: Result) -> float | None:
    """The proxy's CPU seconds per request/s of a measurement (its CPU per request, times the
    measurement's length, which is the same for every row): None for the backend direct."""
    if result.cpu is None or result.cpu.proxy is None or not result.rps:
        return None
    return result.cpu.proxy.seconds / result.rps


def _pct(value: float) -> str:
    return f"{value:.0%}"


def _cpu_line(cpu: Usage | None) -> str:
    """A round's CPU for the progress lines."""
    if cpu is None:
        return ""
    proxy = (
        f"proxy {_pct(cpu.proxy.own)} (CPU {_pct(cpu.proxy.busy)}, foreign "
        f"{_pct(cpu.proxy.foreign)})  "
        if cpu.proxy
        else ""
    )
    return (
        f"{proxy}load {_pct(cpu.load.own)} (CPU {_pct(cpu.load.busy)}, foreign "
        f"{_pct(cpu.load.foreign)})  {verdict(cpu).describe()}"
    )


def render(
    results: dict[str, list[Result]],
    *,
    args: argparse.Namespace,
    generator: str,
    seats: Seats,
    load: tuple[float, float, float],
    skipped: list[str],
) -> str:
    nginx = next((name for name in results if name.startswith("nginx")), None)
    ceiling = nginx or EDGE
    verdicts = row_verdicts(results)
    lines = [
        "## Edge",
        "",
        summary(results, verdicts),
        "",
        "Requests per second and p99 latency of a small GET (92-byte body) through: the edge",
        "data plane with modules off; the edge with ipRestriction + basicAuth (bcrypt, cached",
        "after the first check) + headers; the mesh listener (an embedded controller, `Host:",
        "echo.default`); nginx (one worker, upstream keepalive), Caddy (`reverse_proxy`,",
        "`GOMAXPROCS=1`) and HAProxy (one thread, `http-reuse always`); and the backend called",
        "directly. The backend is nginx answering a fixed body (`return 200`, one worker). Every",
        "target runs in its own process, all in one run, rounds alternating the order; the edge",
        "and the mesh listener run on uvloop, as `interlock run`/`edge` do. Caddy runs its",
        "`reverse_proxy` defaults (no access log, keep-alive with 32 idle connections to the",
        "backend): it costs several times nginx's CPU per request on one core, and",
        "`benchmarks/edge.py` (`CADDYFILE`) says what was tried. Load: "
        f"`{generator}`, {args.connections} connections, {args.seconds} s per measurement, "
        f"median of {args.rounds} rounds (spread: lowest to highest round).",
        *_workers_text(results, seats),
        "",
        "What limited each row is measured, not inferred (`benchmarks/bottleneck.py`): each",
        "measurement reads `/proc/stat` per CPU and `/proc/PID/stat` of every process the",
        "benchmark started just before the load starts and just after it ends. **proxy CPU**:",
        "the proxy's processes' CPU time as a share of the CPUs it can keep busy (one per",
        "worker); in brackets, how busy the CPUs it was pinned to were, whoever used them.",
        "**proxy µs CPU/request**: the proxy's CPU time over the requests it carried. **load",
        "CPU**: the busiest of `wrk`'s share of its one core, the backend's of its one, and the",
        "two's of the CPUs they share; in brackets, how busy those CPUs were. **foreign on proxy",
        "CPU**: the share of the proxy's CPUs used by processes other than the benchmark's (and",
        "the hypervisor's steal), median over rounds and, in brackets, the highest. A row is",
        f"*proxy-bound* when the proxy's processes used at least {SATURATED:.0%} of the cores they",
        "can use and the load side's did not (their use, not the CPUs' busy time: other",
        "processes fill whatever the benchmark leaves idle); *load-bound* the other way round",
        "(the proxy could carry more than its figure: a ratio over it is an upper bound);",
        "*both saturated* or *neither* when the",
        "two sides do not tell; *shared* when the proxy runs on the load's CPU too (the",
        "`, N workers` rows on 2 CPUs). A row whose proxy had more than "
        f"{FOREIGN_LIMIT:.0%} of its",
        "CPUs used by other processes is *marked*. The verdict is taken from the rounds'",
        "medians; in brackets, how many rounds agreed.",
        "",
        "```",
        f".venv/bin/python benchmarks/edge.py --rounds {args.rounds} --seconds {args.seconds} "
        f"--connections {args.connections}{' --no-pin' if args.no_pin else ''}"
        f"{' --no-mesh' if args.no_mesh else ''}"
        f"{f' --workers {args.workers}' if args.workers else ''}"
        f"{_paced_flags(args)}",
        "```",
        "",
        f"Machine: {platform.platform()}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs; {seats.describe()}; load average {load[0]:.1f} at the start "
        f"of the run, {load[1]:.1f} at its end, {load[2]:.1f} at its highest between "
        "measurements (the benchmark's own processes count in it: a saturated proxy and `wrk`",
        "alone make it about 2; the foreign column is the measure of other load).",
        "",
        f"| target | req/s median (spread) | p99 ms median (spread) | errors | req/s vs {ceiling} "
        f"| p99 vs {ceiling} | proxy CPU | proxy µs CPU/request | load CPU | foreign on proxy CPU "
        "| what limited it |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, runs in results.items():
        rps = [r.rps for r in runs]
        p99 = [r.p99_ms for r in runs]
        ratio = [a.rps / b.rps for a, b in zip(runs, results[ceiling], strict=True)]
        tail = [a.p99_ms / b.p99_ms for a, b in zip(runs, results[ceiling], strict=True)]
        cpu, found, same = verdicts[name]
        foreign = [r.cpu.proxy.foreign for r in runs if r.cpu and r.cpu.proxy]
        cost = [
            r.cpu.proxy.seconds / (r.rps * args.seconds) * 1e6
            for r in runs
            if r.cpu and r.cpu.proxy and r.rps
        ]
        lines.append(
            f"| {name} | {statistics.median(rps):,.0f} ({_spread(rps, ',.0f')}) | "
            f"{statistics.median(p99):.2f} ({_spread(p99, '.2f')}) | "
            f"{sum(r.errors for r in runs)} | {statistics.median(ratio):.0%} | "
            f"{statistics.median(tail):.1f}x | "
            + (f"{_pct(cpu.proxy.own)} ({_pct(cpu.proxy.busy)})" if cpu.proxy else "—")
            + (f" | {statistics.median(cost):.0f}" if cost else " | —")
            + f" | {_pct(cpu.load.own)} ({_pct(cpu.load.busy)}) | "
            + (f"{_pct(statistics.median(foreign))} ({_pct(max(foreign))})" if foreign else "—")
            + f" | {found.describe()} ({same}/{len(runs)}) |"
        )
    lines += [
        "",
        "Ratios within each round (the figure is their median; each round in brackets), how to",
        "read each from the two rows' verdicts, and the same comparison by CPU cost: requests",
        "per CPU second of the proxy's processes (the inverse of the CPU per request), which",
        "compares the proxies' per-core capacity whichever side limited the row — though it",
        "still moves with the load: CPU shared with other processes runs slower (caches).",
        "",
    ]
    ours = [name for name in (EDGE, EDGE_MODULES, MESH) if name in results]
    scaled = [name for name in results if name.endswith(" workers")]
    others = [name for name in results if name not in ours + scaled and name != BACKEND]
    pairs = [(mine, other) for mine in ours for other in others]
    pairs.append((EDGE_MODULES, EDGE))
    for name in scaled:
        count = name.rsplit(", ", 1)[1].split()[0]
        if name.startswith(EDGE):
            pairs.append((name, EDGE))
            twin = NGINX_WORKERS.format(nginx=nginx, n=count)
            if nginx is not None and twin in results:
                pairs.append((name, twin))
        elif nginx is not None and name.startswith(nginx):
            pairs.append((name, nginx))
    for mine, other in pairs:
        a, b = results[mine], results[other]
        throughput = [x.rps / y.rps for x, y in zip(a, b, strict=True)]
        tail = [x.p99_ms / y.p99_ms for x, y in zip(a, b, strict=True)]
        per_core = [
            y_cost / x_cost
            for x_cost, y_cost in ((_cost(x), _cost(y)) for x, y in zip(a, b, strict=True))
            if x_cost and y_cost
        ]
        lines.append(
            f"- {mine} vs {other}: {statistics.median(throughput):.0%} of its throughput "
            f"[{', '.join(f'{r:.0%}' for r in throughput)}], "
            f"p99 {statistics.median(tail):.1f}x its p99 "
            f"[{', '.join(f'{r:.1f}' for r in tail)}] — "
            f"{ratio_reading(verdicts[mine][1], verdicts[other][1])}"
            + (
                f"; per CPU second, {statistics.median(per_core):.0%} of its requests "
                f"[{', '.join(f'{r:.0%}' for r in per_core)}]"
                if per_core
                else ""
            )
        )
    lines += [f"- {line}." for line in skipped]
    lines += NOTE
    return "\n".join(lines) + "\n"


def _workers_text(results: dict[str, list[Result]], seats: Seats) -> list[str]:
    """What the ``, N workers`` rows are, when there are any."""
    counts = sorted(
        {int(name.rsplit(", ", 1)[1].split()[0]) for name in results if name.endswith(" workers")}
    )
    if not counts:
        return []
    available = sorted(os.sched_getaffinity(0))
    where = "; ".join(
        f"{n} workers on CPU {_cpus(seats.proxies(n, available)) or 'any'}" for n in counts
    )
    shared = any(set(seats.proxies(n, available)) & set(seats.load) for n in counts)
    return [
        "The rows ending in `, N workers` are the edge as `interlock run --edge-workers N` serves",
        "it (N `interlock edge` processes sharing the port with `SO_REUSEPORT`, programmed through",
        "their admin APIs; `interlock/edge/workers.py`) and nginx with `worker_processes N` and",
        f"`listen … reuseport`: {where}"
        + (
            " — on this machine that includes the CPU of the load generator and the backend, so"
            " these rows compete with their own load and show less than N cores' worth."
            if shared
            else "."
        ),
    ]


NOTE = [
    "",
    "Reading the figures: the edge is a Python proxy on one event loop (uvloop), so each request",
    "costs its parsing (`interlock/dataplane/http1_server.py`: llhttp), the module chain, the",
    "engine's decision, an exchange on a pooled keep-alive connection",
    "(`interlock/dataplane/http1.py`: one `write`, llhttp parsing the answer) and the relay;",
    "nginx, Caddy and HAProxy do the same",
    "work in C or Go. Instructions per request (below) are the repeatable measure of our own",
    "cost; requests/s on this shared machine move between rounds and with the machine's load,",
    "hence the ratios within a round.",
]


if __name__ == "__main__":
    sys.exit(main())
