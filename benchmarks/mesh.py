"""What the mesh listener adds to a request: sequential round trips direct vs through it.

One embedded controller with ``--mesh-addr``, one echo backend (aiohttp) and one gRPC backend
(grpcio) in a child process each, one client in this process. For each of four paths — HTTP/1.1
direct to the backend, HTTP/1.1 through the mesh listener (``Host: echo.default``), a unary gRPC
call direct, the same call through the mesh listener (h2c) — ``--requests`` sequential round
trips are timed; rounds alternate the paths so a loaded machine hits them alike. Printed: the
median round trip per path (median over rounds) and the ratio of each path through the listener
to the same path direct, taken within each round.

    .venv/bin/python benchmarks/mesh.py [--rounds 5] [--requests 300]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SERVICE = "bench.Echo"


def serve_http(port: int) -> None:
    from aiohttp import web

    async def handle(_request: web.BaseRequest) -> web.Response:
        return web.Response(body=b"hello\n" * 8)

    async def main() -> None:
        runner = web.ServerRunner(web.Server(handle), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        await asyncio.Event().wait()

    asyncio.run(main())


def serve_grpc(port: int) -> None:
    import grpc

    async def say(request: bytes, _context: grpc.aio.ServicerContext) -> bytes:
        return request

    async def main() -> None:
        server = grpc.aio.server()
        handler = grpc.method_handlers_generic_handler(
            SERVICE, {"Say": grpc.unary_unary_rpc_method_handler(say)}
        )
        server.add_generic_rpc_handlers((handler,))
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        await server.wait_for_termination()

    asyncio.run(main())


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def objects(name: str, port: int) -> list[dict[str, object]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"ports": [{"name": "p80", "port": 80, "protocol": "TCP"}]},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": name,
                "namespace": "default",
                "labels": {"kubernetes.io/service-name": name},
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
            "ports": [{"name": "p80", "port": port, "protocol": "TCP"}],
        },
    ]


async def timed(call: Callable[[], Awaitable[object]], requests: int) -> float:
    """Median seconds of one round trip over ``requests`` sequential calls."""
    samples = []
    for _ in range(requests):
        started = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


async def main(rounds: int, requests: int) -> None:
    import aiohttp
    import grpc
    import yaml
    from loguru import logger

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
    http_port, grpc_port = free_port(), free_port()
    children = [
        multiprocessing.Process(target=serve_http, args=(http_port,), daemon=True),
        multiprocessing.Process(target=serve_grpc, args=(grpc_port,), daemon=True),
    ]
    for child in children:
        child.start()
    local = Address("127.0.0.1", 0)
    controller = Controller(
        ControllerConfig(
            cluster=ClusterConfig(embedded=True),
            policy=PolicyApiConfig(addr=local),
            admin=AdminConfig(addr=local),
            mesh=MeshConfig(addr=local),
        )
    )
    await controller.start()
    await controller.wait_ready()
    assert controller.embedded is not None and controller.mesh is not None
    with tempfile.TemporaryDirectory() as folder:
        manifest = Path(folder) / "backends.yaml"
        manifest.write_text(
            yaml.safe_dump_all([*objects("echo", http_port), *objects("grpc", grpc_port)])
        )
        report = await controller.embedded.apply_manifests([str(manifest)])
        assert not report.errors, report.errors
    mesh = controller.mesh.url
    async with (
        aiohttp.ClientSession() as http,
        grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as direct_channel,
        grpc.aio.insecure_channel(
            mesh.removeprefix("http://"), options=(("grpc.default_authority", "grpc.default"),)
        ) as mesh_channel,
    ):

        async def get(url: str, headers: dict[str, str]) -> None:
            async with http.get(url, headers=headers) as response:
                await response.read()
                assert response.status == 200, response.status

        direct_say = direct_channel.unary_unary(f"/{SERVICE}/Say")
        mesh_say = mesh_channel.unary_unary(f"/{SERVICE}/Say")
        paths: dict[str, Callable[[], Awaitable[object]]] = {
            "HTTP/1.1 direct": lambda: get(f"http://127.0.0.1:{http_port}/", {}),
            "HTTP/1.1 mesh": lambda: get(mesh + "/", {"Host": "echo.default"}),
            "gRPC direct": lambda: direct_say(b"ping", timeout=30),
            "gRPC mesh": lambda: mesh_say(b"ping", timeout=30),
        }
        deadline = time.monotonic() + 60
        while True:  # until the controller has the Services and their endpoints
            try:
                for call in paths.values():
                    await call()
                break
            except (AssertionError, grpc.aio.AioRpcError):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
        results: dict[str, list[float]] = {name: [] for name in paths}
        for index in range(rounds):
            names = list(paths) if index % 2 == 0 else list(reversed(paths))
            for name in names:
                results[name].append(await timed(paths[name], requests))
    await controller.stop()
    for child in children:
        child.terminate()
    print(
        f"Machine: {platform.platform()}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
        f"{rounds} rounds of {requests} sequential requests per path"
    )
    print("| path | median round trip (ms) | through the listener vs direct |")
    print("|---|---:|---:|")
    for name, values in results.items():
        ratio = ""
        if name.endswith("mesh"):
            direct = results[name.replace("mesh", "direct")]
            per_round = [m / d for m, d in zip(values, direct, strict=True)]
            ratio = f"{statistics.median(per_round):.2f}x"
        print(f"| {name} | {statistics.median(values) * 1000:.2f} | {ratio} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=300)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.rounds, arguments.requests))
