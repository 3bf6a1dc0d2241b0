"""Figures for docs/embedded.md: list and watch of 10,000 Services and HTTPRoutes.

Run: ``.venv/bin/python tests/kit/bench_embedded.py`` (not collected by pytest). Prints
medians over 3 repeats; timings on shared machines are noisy, compare within one run.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config

from interlock.embedded import running_api_server
from interlock.embedded.watches import WatchFilter

OBJECTS = 10_000
REPEATS = 3


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def _median_ms(action: Callable[[], Awaitable[object]]) -> float:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        await action()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


async def main() -> None:
    async with running_api_server() as server:
        rss_before = _rss_mib()
        start = time.perf_counter()
        for index in range(OBJECTS):
            server.store.create(
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": {"name": f"svc-{index}", "namespace": "default"},
                    "spec": {
                        "ports": [{"name": "http", "port": 80}, {"name": "grpc", "port": 9090}]
                    },
                }
            )
            server.store.create(
                {
                    "apiVersion": "gateway.networking.k8s.io/v1",
                    "kind": "HTTPRoute",
                    "metadata": {"name": f"route-{index}", "namespace": "default"},
                    "spec": {
                        "parentRefs": [
                            {"kind": "Service", "group": "", "name": f"svc-{index}", "port": 80}
                        ],
                        "rules": [{"backendRefs": [{"name": f"svc-{index}", "port": 80}]}],
                    },
                }
            )
        print(f"create {2 * OBJECTS} objects in-process: {time.perf_counter() - start:.2f} s")
        print(f"resident memory for them: {_rss_mib() - rss_before:.0f} MiB")
        kubeconfig = server.write_kubeconfig(Path(tempfile.mkdtemp()) / "kubeconfig")
        async with await config.new_client_from_config(config_file=str(kubeconfig)) as api:
            core = client.CoreV1Api(api)

            async def raw_list() -> None:
                # Not preloaded: the raw aiohttp response, whatever the typed API says.
                response: Any = await core.list_service_for_all_namespaces(_preload_content=False)
                await response.read()

            async def raw_watch() -> None:
                response: Any = await core.list_service_for_all_namespaces(
                    watch=True, resource_version="0", timeout_seconds=30, _preload_content=False
                )
                for _ in range(OBJECTS):
                    await response.content.readline()
                response.close()

            print(
                f"GET /api/v1/services ({OBJECTS} items), raw: {await _median_ms(raw_list):.0f} ms"
            )
            print(
                f"watch from rv 0, {OBJECTS} ADDED lines read: {await _median_ms(raw_watch):.0f} ms"
            )
            custom = client.CustomObjectsApi(api)

            async def parsed_routes() -> None:
                await custom.list_cluster_custom_object(
                    "gateway.networking.k8s.io", "v1", "httproutes"
                )

            parsed = await _median_ms(parsed_routes)
            print(f"list {OBJECTS} HTTPRoutes, parsed by the client: {parsed:.0f} ms")
        rtype = server.registry.by_kind(api_version="v1", kind="Service")
        assert rtype is not None
        for watches in (0, 50):
            opened = [
                server.store.open_watch(
                    rtype, where=WatchFilter(), resource_version=str(server.store.resource_version)
                )
                for _ in range(watches)
            ]
            start = time.perf_counter()
            for index in range(1000):
                server.store.patch(
                    api_version="v1",
                    kind="Service",
                    namespace="default",
                    name=f"svc-{index}",
                    patch={"metadata": {"labels": {"round": str(watches)}}},
                )
            elapsed = (time.perf_counter() - start) * 1000
            print(f"1000 patches with {watches} open watches: {elapsed:.0f} ms")
            for watch in opened:
                server.store.close_watch(watch)


if __name__ == "__main__":
    asyncio.run(main())
