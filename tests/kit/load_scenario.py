"""Load: a burst of events while policy watches are open, the scenario that
``benchmarks/load.py`` (50,000 events, 5,000 watches) and ``test_reliability_load.py`` (2,000
and 200, on every CI run) both run, importing this module as they import ``reliability_kit``.

The embedded API server runs in a child process (this file run as a script), so the
controller's RSS is its own; it is pre-loaded with S Services (ports 80 and 8080: 2·S watched
service ports), R HTTPRoutes attached to them and B backend Services. On command the child
writes the burst straight into its store, as fast as it can: HTTPRoute weight and backend
changes, backend Services deleted and re-created, parent Services relabelled (a change no policy
depends on). The controller follows it through its informers, like any client of a real API
server.

:func:`run_load` measures:

* peak RSS of the controller process during the burst, against its RSS before it;
* the largest number of messages waiting in all mailboxes at once (coalescing keeps it far
  below the number of events), dead letters and actor restarts;
* time to converge: from the burst's last write until every one of the 2·S open watches holds
  exactly the policy the model computes from the API server's final objects — nothing lost.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interlock.api.policy_json import policy_json
from interlock.config import (
    Address,
    AdminConfig,
    ClusterConfig,
    ControllerConfig,
    LeadershipConfig,
    PolicyApiConfig,
)
from interlock.controller.app import Controller
from interlock.embedded import EmbeddedApiServer
from interlock.kube.transport import request_json
from interlock.mailbox.slot import LatestValueSlot
from interlock.model.gateway import parse_http_route
from interlock.model.meta import ObjectKey
from interlock.model.outbound_policy import build_outbound_policy
from interlock.model.policy_watch import WatchTarget
from interlock.model.route_resolution import resolve_route
from interlock.model.service import ServicePortKey, parse_service

LOCAL = Address("127.0.0.1", 0)
PORTS = (80, 8080)


@dataclass(frozen=True)
class Scale:
    services: int
    routes: int
    backends: int
    events: int
    seed: int = 1


@dataclass
class LoadResult:
    watches: int
    events: int
    ready_seconds: float
    burst_write_seconds: float
    converge_seconds: float
    rss_before_mib: float
    rss_peak_mib: float
    max_queued_messages: int
    messages_processed: int
    dead_letters: int
    restarts: int
    relists: int
    differences: int


# --- the objects ---------------------------------------------------------------------------------


def parent_service(i: int, label: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"svc-{i}", "namespace": "default", "labels": {"rev": str(label)}},
        "spec": {
            "ports": [
                {"name": "http", "port": 80, "protocol": "TCP"},
                {"name": "admin", "port": 8080, "protocol": "TCP"},
            ]
        },
    }


def backend_service(j: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"be-{j}", "namespace": "default"},
        "spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP"}]},
    }


def http_route(k: int, scale: Scale, rng: random.Random) -> dict[str, Any]:
    port = PORTS[k % 2]
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": f"route-{k}", "namespace": "default"},
        "spec": {
            "parentRefs": [
                {
                    "group": "core",
                    "kind": "Service",
                    "name": f"svc-{k % scale.services}",
                    "port": port,
                }
            ],
            "rules": [
                {
                    "backendRefs": [
                        {
                            "name": f"be-{rng.randrange(scale.backends)}",
                            "port": 80,
                            "weight": rng.randrange(1, 100),
                        },
                        {
                            "name": f"be-{rng.randrange(scale.backends)}",
                            "port": 80,
                            "weight": rng.randrange(1, 100),
                        },
                    ]
                }
            ],
        },
    }


# --- the child: an API server that writes the burst on command ------------------------------------


async def api_server_main(scale: Scale) -> None:
    rng = random.Random(scale.seed)
    async with EmbeddedApiServer(history_size=100_000) as server:
        for i in range(scale.services):
            server.store.create(parent_service(i))
        for j in range(scale.backends):
            server.store.create(backend_service(j))
        for k in range(scale.routes):
            server.store.create(http_route(k, scale, rng))
        # The kubeconfig holds the server's token and certificate authority.
        kubeconfig = Path(tempfile.mkdtemp(prefix="interlock-load-")) / "kubeconfig"
        print(f"KUBECONFIG {server.write_kubeconfig(kubeconfig)}", flush=True)
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        await reader.readline()
        started = time.perf_counter()
        present = set(range(scale.backends))
        for n in range(scale.events):
            roll = rng.random()
            if roll < 0.6:
                server.store.update(http_route(rng.randrange(scale.routes), scale, rng))
            elif roll < 0.85:
                j = rng.randrange(scale.backends)
                if j in present:
                    server.store.delete(
                        api_version="v1", kind="Service", name=f"be-{j}", namespace="default"
                    )
                    present.discard(j)
                else:
                    server.store.create(backend_service(j))
                    present.add(j)
            else:
                server.store.update(parent_service(rng.randrange(scale.services), label=n))
            if n % 200 == 199:
                await asyncio.sleep(0)  # let the watch streams flush, as a busy server does
        print(f"DONE {time.perf_counter() - started:.3f}", flush=True)
        await reader.readline()


# --- the parent: the controller under load --------------------------------------------------------


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def expected_policies(api: Any, targets: list[WatchTarget]) -> dict[WatchTarget, Any]:
    services_raw = await request_json(
        api, method="GET", path="/api/v1/namespaces/default/services", what="list"
    )
    routes_raw = await request_json(
        api,
        method="GET",
        path="/apis/gateway.networking.k8s.io/v1/namespaces/default/httproutes",
        what="list",
    )
    services = {s.key: s for s in (parse_service(raw) for raw in services_raw["items"])}
    resolved = [resolve_route(parse_http_route(raw), services, ()) for raw in routes_raw["items"]]
    by_parent: dict[tuple[str, int], list[Any]] = {}
    for route in resolved:
        for parent in route.parents:
            by_parent.setdefault((parent.name, parent.port or 0), []).append(route)
    return {
        t: policy_json(
            build_outbound_policy(
                services.get(ObjectKey(namespace=t.key.namespace, name=t.key.name)),
                t.key.namespace,
                t.key.name,
                t.key.port,
                t.client_namespace,
                by_parent.get((t.key.name, t.key.port), []),
            )
        )
        for t in targets
    }


async def run_load(scale: Scale) -> LoadResult:
    """Run one load round (child API server, controller, watches, burst) and measure it."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        *(str(n) for n in (scale.services, scale.routes, scale.backends, scale.events, scale.seed)),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None and process.stdin is not None
    try:
        line = (await asyncio.wait_for(process.stdout.readline(), 300)).decode()
        if not line.startswith("KUBECONFIG "):
            raise RuntimeError(f"the API server child did not start: {line!r}")
        kubeconfig = line.split(" ", 1)[1].strip()
        try:
            config = ControllerConfig(
                cluster=ClusterConfig(kubeconfig=kubeconfig),
                policy=PolicyApiConfig(addr=LOCAL),
                admin=AdminConfig(addr=LOCAL),
                leadership=LeadershipConfig(namespace="default", identity="load"),
            )
            controller = Controller(config)
            started = time.perf_counter()
            await controller.start()
            targets = [
                WatchTarget(ServicePortKey("default", f"svc-{i}", port), client_namespace="default")
                for i in range(scale.services)
                for port in PORTS
            ]
            slots: dict[WatchTarget, LatestValueSlot[Any]] = {
                t: controller.watches.open_watch(t) for t in targets
            }
            try:
                await controller.wait_ready(within=600)
                while any(slot.latest is None for slot in slots.values()):  # noqa: ASYNC110 - slots have no event
                    await asyncio.sleep(0.05)
                ready = time.perf_counter() - started
                result = await _burst(scale, controller, slots, process, ready)
            finally:
                for target, slot in slots.items():
                    controller.watches.close_watch(target, slot)
                await controller.stop()
        finally:
            shutil.rmtree(Path(kubeconfig).parent, ignore_errors=True)
    finally:
        if process.returncode is None:
            process.stdin.write(b"stop\n")
            await process.stdin.drain()
            await process.wait()
    return result


async def _burst(
    scale: Scale,
    controller: Controller,
    slots: dict[WatchTarget, LatestValueSlot[Any]],
    process: asyncio.subprocess.Process,
    ready: float,
) -> LoadResult:
    assert process.stdin is not None and process.stdout is not None
    before = rss_mib()
    peak = before
    max_queued = 0
    sampling = True

    async def sample() -> None:
        nonlocal peak, max_queued
        while sampling:
            peak = max(peak, rss_mib())
            max_queued = max(max_queued, controller.system.statistics().depth)
            await asyncio.sleep(0.01)

    sampler = asyncio.create_task(sample())
    processed_before = controller.system.statistics().processed
    process.stdin.write(b"burst\n")
    await process.stdin.drain()
    done = (await process.stdout.readline()).decode()
    burst_seconds = float(done.split()[1])
    burst_end = time.perf_counter()
    expected = await expected_policies(controller.api, list(slots))
    deadline = burst_end + 600
    differences = len(slots)
    while time.perf_counter() < deadline:
        differences = sum(
            1
            for t, slot in slots.items()
            if slot.latest is None or policy_json(slot.latest.policy) != expected[t]
        )
        if differences == 0 and controller.system.statistics().busy == 0:
            break
        await asyncio.sleep(0.05)
    converge = time.perf_counter() - burst_end
    sampling = False
    await sampler
    stats = controller.system.statistics()
    assert controller.informers is not None
    relists = sum(s.relists for s in controller.informers.statistics().values())
    return LoadResult(
        watches=len(slots),
        events=scale.events,
        ready_seconds=round(ready, 2),
        burst_write_seconds=round(burst_seconds, 2),
        converge_seconds=round(converge, 2),
        rss_before_mib=round(before, 1),
        rss_peak_mib=round(peak, 1),
        max_queued_messages=max_queued,
        messages_processed=stats.processed - processed_before,
        dead_letters=stats.dead_letters,
        restarts=stats.restarts,
        relists=relists,
        differences=differences,
    )


if __name__ == "__main__":
    # The child: SERVICES ROUTES BACKENDS EVENTS SEED, as run_load starts it.
    asyncio.run(api_server_main(Scale(*(int(arg) for arg in sys.argv[1:6]))))
