"""Linkerd's proxy API (gRPC) beside the JSON policy API: latency of a change and memory.

The controller runs as ``interlock run --grpc-addr`` in a child process (its RSS is its own)
against the embedded API server in another child (``api_servers.EmbeddedServer``), with Service
``web`` and an HTTPRoute ``r`` sending to Service ``api``, which does not exist yet. Measured:

1. RSS after ready with and without ``--grpc-addr`` (what serving gRPC costs at rest: grpcio,
   protobuf, the stubs, the cluster-IP index);
2. the latency of a change: one JSON watch and one gRPC Watch open on ``web:80``; Service ``api``
   is created (then deleted) through the API server, and the time until each stream delivered
   the policy with the backend present (then failing) is taken, ``--repeats`` times; medians;
3. memory per open stream: RSS after opening ``--streams`` JSON watch streams, then as many gRPC
   Watch streams, on the same target.

    .venv/bin/python benchmarks/grpc_policy.py [--repeats 10] [--streams 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import grpc
from api_servers import EmbeddedServer
from bench_report import rss_mib

from interlock.api.grpc.proto import outbound_pb2, outbound_pb2_grpc

GATEWAY = "gateway.networking.k8s.io"
WEB = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {"clusterIP": "10.96.0.10", "ports": [{"name": "http", "port": 80}]},
}
API = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "api", "namespace": "default"},
    "spec": {"ports": [{"name": "http", "port": 80}]},
}
ROUTE = {
    "apiVersion": f"{GATEWAY}/v1",
    "kind": "HTTPRoute",
    "metadata": {"name": "r", "namespace": "default"},
    "spec": {
        "parentRefs": [{"group": "core", "kind": "Service", "name": "web", "port": 80}],
        "rules": [{"backendRefs": [{"name": "api", "port": 80}]}],
    },
}
SPEC = outbound_pb2.TrafficSpec(
    source_workload=json.dumps({"ns": "default", "pod": "bench"}),
    authority="web.default.svc.cluster.local:80",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def start_controller(
    kubeconfig: str, *, grpc_port: int | None
) -> tuple[asyncio.subprocess.Process, int]:
    policy, admin = free_port(), free_port()
    args = [
        sys.executable, "-m", "interlock", "run", "--kubeconfig", kubeconfig,
        "--policy-addr", f"127.0.0.1:{policy}", "--admin-addr", f"127.0.0.1:{admin}",
    ]  # fmt: skip
    if grpc_port is not None:
        args += ["--grpc-addr", f"127.0.0.1:{grpc_port}"]
    process = await asyncio.create_subprocess_exec(
        *args, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )
    async with aiohttp.ClientSession() as http:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                async with http.get(f"http://127.0.0.1:{admin}/readyz") as response:
                    if response.status == 200:
                        return process, policy
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
    process.terminate()
    raise RuntimeError("the controller did not get ready in 300 s")


def json_api_state(line: bytes) -> bool:
    policy = json.loads(line)
    [backend] = policy["routes"][0]["rules"][0]["backends"]
    return bool(backend["exists"])


def grpc_api_state(policy: outbound_pb2.OutboundPolicy) -> bool:
    rule = policy.protocol.detect.http1.routes[0].rules[0]
    [weighted] = rule.backends.random_available.backends
    return weighted.backend.backend.HasField("balancer")


async def latencies(
    server: EmbeddedServer, policy_port: int, grpc_port: int, repeats: int
) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {"json": [], "grpc": []}
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as http,
        server.session() as kube,
        grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel,
    ):
        url = f"http://127.0.0.1:{policy_port}/v1/outbound/default/web/80?watch=true"
        json_stream = await http.get(url)
        grpc_stream = outbound_pb2_grpc.OutboundPoliciesStub(channel).Watch(SPEC)
        assert not json_api_state(await json_stream.content.readline())
        assert not grpc_api_state(await grpc_stream.read())

        async def json_until(state: bool, start: float) -> None:
            while json_api_state(await json_stream.content.readline()) != state:
                pass
            found["json"].append((time.perf_counter() - start) * 1000)

        async def grpc_until(state: bool, start: float) -> None:
            while grpc_api_state(await grpc_stream.read()) != state:
                pass
            found["grpc"].append((time.perf_counter() - start) * 1000)

        for _ in range(repeats):
            for state in (True, False):
                start = time.perf_counter()
                if state:
                    path = "/api/v1/namespaces/default/services"
                    created = await server.request(kube, "POST", path, API)
                    assert created.status == 201, created
                else:
                    path = "/api/v1/namespaces/default/services/api"
                    deleted = await server.request(kube, "DELETE", path)
                    assert deleted.status == 200, deleted
                await asyncio.wait_for(
                    asyncio.gather(json_until(state, start), grpc_until(state, start)), 60
                )
        json_stream.close()
        grpc_stream.cancel()
    return found


async def stream_memory(pid: int, policy_port: int, grpc_port: int, streams: int) -> list[float]:
    """RSS: before, with ``streams`` JSON watches, with as many gRPC Watches besides."""
    rss = [rss_mib(pid)]
    async with (
        aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None),
            connector=aiohttp.TCPConnector(limit=0),  # one connection per stream
        ) as http,
        grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel,
    ):
        url = f"http://127.0.0.1:{policy_port}/v1/outbound/default/web/80?watch=true"
        held = []
        for _ in range(streams):
            response = await http.get(url)
            await response.content.readline()
            held.append(response)
        await asyncio.sleep(1)
        rss.append(rss_mib(pid))
        stub = outbound_pb2_grpc.OutboundPoliciesStub(channel)
        calls = []
        for _ in range(streams):
            call = stub.Watch(SPEC)
            await call.read()
            calls.append(call)
        await asyncio.sleep(1)
        rss.append(rss_mib(pid))
        for call in calls:
            call.cancel()
        for response in held:
            response.close()
    return rss


async def main_async(repeats: int, streams: int) -> None:
    with tempfile.TemporaryDirectory(prefix="grpc-bench-") as workdir:
        server = await EmbeddedServer.start([WEB, ROUTE], Path(workdir))
        try:
            plain, _ = await start_controller(server.controller_kubeconfig, grpc_port=None)
            rss_plain = rss_mib(plain.pid)
            plain.terminate()
            await plain.wait()
            grpc_port = free_port()
            process, policy_port = await start_controller(
                server.controller_kubeconfig, grpc_port=grpc_port
            )
            try:
                rss_grpc = rss_mib(process.pid)
                found = await latencies(server, policy_port, grpc_port, repeats)
                rss = await stream_memory(process.pid, policy_port, grpc_port, streams)
            finally:
                process.terminate()
                await process.wait()
        finally:
            await server.stop()
    load = os.getloadavg()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load {load[0]:.1f}")
    print(f"RSS after ready: {rss_plain:.1f} MiB without --grpc-addr, {rss_grpc:.1f} MiB with")
    for api in ("json", "grpc"):
        values = found[api]
        print(
            f"{api}: Service create/delete -> watch update, median {statistics.median(values):.1f}"
            f" ms (min {min(values):.1f}, max {max(values):.1f}, n={len(values)})"
        )
    ratios = [g / j for g, j in zip(found["grpc"], found["json"], strict=True)]
    print(f"grpc/json per change: median {statistics.median(ratios):.2f}")
    per_json = (rss[1] - rss[0]) * 1024 / streams
    per_grpc = (rss[2] - rss[1]) * 1024 / streams
    print(
        f"RSS with {streams} streams: {rss[0]:.1f} -> {rss[1]:.1f} MiB (JSON, {per_json:.1f} KiB"
        f" each) -> {rss[2]:.1f} MiB (gRPC, {per_grpc:.1f} KiB each)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--streams", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(main_async(args.repeats, args.streams))


if __name__ == "__main__":
    main()
