"""Figures for the outbound half at scale, with the re-walk baseline.

The figures and what they show: ``docs/benchmarks.md``, "Outbound".

N Services (``svc-i``, port 80), N HTTPRoutes (``r-i``: parent ``svc-i``, backends
``svc-(i+1)`` and ``svc-(i+7)``) and N open HTTP watch streams (one per Service port, held by a
child process: ``--watch-client``). ``--server embedded`` runs the embedded API server in
another child process (so the controller's RSS is its own), pre-loaded from a generated
manifest; ``--server real`` starts etcd and kube-apiserver with ``hack/real-cluster.sh`` (or
uses ``--cluster-dir``), creates the objects as cluster admin and runs the controller as the
identity ``manifests/rbac.yaml`` grants, through TLS, RBAC and priority-and-fairness;
``--server both`` runs each in a child process of its own and puts the figures side by side.
The controller is a follower: the Lease is held by another replica, as for every replica but
one in a real deployment, so no status write runs during the measurements.

Measured, all in one run:

1. start → ready (every informer listed, every actor settled) and RSS after ready and with the
   N watch streams open;
2. end to end: delete / re-create a Service through the API server and time until every
   affected watch stream delivered the new policy (p50, p99), plus messages handled per change;
3. in memory, the same Service events handed to the router directly (no API server) vs a
   reference that re-walks every watch's routes on every Service event, as Linkerd's fix does:
   time per change (medians) and their ratio; what each side does per change (messages handled,
   backends visited) is shown beside it, never divided one by the other (different units).

It prints the figures; with ``--write-docs`` it rewrites only its own sections of
``docs/benchmarks.md`` (``## Outbound`` from the embedded run, ``## Outbound on a real API
server`` from the real one, beside the embedded figures when both ran).

    .venv/bin/python benchmarks/outbound.py [--server embedded|real|both] [--scale 10000]
        [--changes 100] [--write-docs]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from api_servers import ApiServer, EmbeddedServer, RealServer
from bench_report import quiet_logs, report, rss_mib
from change_stages import STAGES, ChangeStages

from interlock.actors.messages import INFORMER_ROUTER, ObjectChanged
from interlock.config import (
    Address,
    AdminConfig,
    ClusterConfig,
    ControllerConfig,
    LeadershipConfig,
    PolicyApiConfig,
)
from interlock.controller.app import Controller
from interlock.kube.client_metrics import client_metrics
from interlock.mailbox.slot import LatestValueSlot
from interlock.model.gateway import parse_http_route
from interlock.model.meta import ObjectKey
from interlock.model.outbound import Backend, OutboundPolicy, ResolvedRoute
from interlock.model.outbound_policy import build_outbound_policy
from interlock.model.policy_watch import WatchTarget
from interlock.model.route_resolution import resolve_route
from interlock.model.service import Service, ServicePortKey, parse_service

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
HEADING = "## Outbound"
REAL_HEADING = "## Outbound on a real API server"
GATEWAY = "gateway.networking.k8s.io"


def service_obj(i: int, *, cluster_ip: bool = True) -> dict[str, Any]:
    """``cluster_ip=False`` for a real server, which allocates one from its own range."""
    spec: dict[str, Any] = {"ports": [{"name": "http", "port": 80}]}
    if cluster_ip:
        spec["clusterIP"] = f"10.0.{i // 250}.{i % 250 + 1}"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"svc-{i}", "namespace": "default"},
        "spec": spec,
    }


def route_obj(i: int, n: int) -> dict[str, Any]:
    return {
        "apiVersion": f"{GATEWAY}/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": f"r-{i}", "namespace": "default"},
        "spec": {
            "parentRefs": [{"group": "core", "kind": "Service", "name": f"svc-{i}", "port": 80}],
            "rules": [
                {
                    "backendRefs": [
                        {"name": f"svc-{(i + 1) % n}", "port": 80},
                        {"name": f"svc-{(i + 7) % n}", "port": 80},
                    ]
                }
            ],
        },
    }


def held_lease(namespace: str) -> dict[str, Any]:
    now = "2026-01-01T00:00:00.000000Z"
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "interlock", "namespace": namespace},
        "spec": {
            "holderIdentity": "another-replica",
            "leaseDurationSeconds": 3600,
            "acquireTime": now,
            "renewTime": now,
        },
    }


def objects(n: int, *, real: bool) -> list[dict[str, Any]]:
    lease = held_lease("interlock-system" if real else "default")
    services = [service_obj(i, cluster_ip=not real) for i in range(n)]
    return [lease, *services, *(route_obj(i, n) for i in range(n))]


def follower(server: ApiServer) -> Controller:
    """The controller the benchmarks measure: a follower of ``server`` (another replica holds
    the Lease), as ``interlock run`` tunes it."""
    return Controller(
        ControllerConfig(
            cluster=ClusterConfig(kubeconfig=server.controller_kubeconfig),
            policy=PolicyApiConfig(addr=Address("127.0.0.1", 0), watch_grace=300.0),
            admin=AdminConfig(addr=Address("127.0.0.1", 0)),
            leadership=LeadershipConfig(namespace=server.lease_namespace, identity="benchmark"),
            tune_gc=True,
        )
    )


def kube_requests(controller: Controller) -> dict[str, tuple[float, float]]:
    """The controller's API requests so far by verb and resource: (seconds, requests)."""
    metrics = client_metrics(controller.api)
    if metrics is None:
        return {}
    stats = metrics.statistics()
    counts: dict[str, int] = {}
    for (verb, _group, resource, _subresource, _code), count in stats.resource_requests.items():
        counts[f"{verb} {resource}"] = counts.get(f"{verb} {resource}", 0) + count
    return {
        f"{verb} {resource}": (snapshot.total, counts.get(f"{verb} {resource}", 0))
        for (verb, _group, resource), snapshot in stats.resource_durations.items()
    }


def kube_in_flight(controller: Controller) -> dict[str, int]:
    """The controller's API requests waiting for their answer now, by verb and resource."""
    metrics = client_metrics(controller.api)
    if metrics is None:
        return {}
    return {
        f"{verb} {resource}": waiting
        for (verb, _group, resource), waiting in metrics.statistics().in_flight.items()
        if waiting
    }


def mean_delta(
    before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]]
) -> dict[str, dict[str, float]]:
    """Per series ``(sum of seconds, count)`` (a histogram, or requests and their latency),
    what was observed between two readings: how many, and their mean in ms."""
    out = {}
    for series, (total, count) in after.items():
        old_total, old_count = before.get(series, (0.0, 0.0))
        if count > old_count:
            out[series] = {
                "count": count - old_count,
                "mean_ms": 1000 * (total - old_total) / (count - old_count),
            }
    return out


def print_stages(server_kind: str, figures: dict[str, Any]) -> None:
    """The change phase's stages, steps, server histograms and client requests, on stderr."""
    summary = figures["stages"]
    out = [
        f"== {server_kind}: {summary['changes']} changes, load {figures['changes_load']}",
        f"   e2e p50 {figures['e2e_p50_ms']:.1f} ms, p99 {figures['e2e_p99_ms']:.1f} ms",
    ]
    for stage in STAGES:
        if stage in summary["stages"]:
            v = summary["stages"][stage]
            out.append(
                f"   at {stage:<10} p50 {v['p50']:8.1f}  p90 {v['p90']:8.1f}  "
                f"p99 {v['p99']:8.1f}  max {v['max']:8.1f} ms"
            )
    for step, v in summary["steps"].items():
        out.append(
            f"   step {step:<24} p50 {v['p50']:8.1f}  p90 {v['p90']:8.1f}  p99 {v['p99']:8.1f}"
        )
    if "decode_us" in summary:
        out.append(f"   decode {summary['decode_us']} us, event {summary['event_bytes']} bytes")
    for series, v in figures["server_histograms"].items():
        out.append(f"   server {series}: {v['count']:.0f} x {v['mean_ms']:.2f} ms")
    for key, v in figures["kube_requests"].items():
        out.append(f"   client {key}: {v['count']:.0f} x {v['mean_ms']:.1f} ms")
    out.append(f"   client in flight at the end: {figures['kube_in_flight']}")
    print("\n".join(out), file=sys.stderr, flush=True)


def stage_table(runs: dict[str, dict[str, Any]]) -> str:
    """A Markdown table of each server's stages (ms since the request started, p50 / p90)."""
    names = list(runs)
    rows = [
        "| stage (ms since the request started), p50 / p90 | " + " | ".join(names) + " |",
        "|---|" + "---:|" * len(names),
    ]
    for stage in STAGES:
        cells = []
        for name in names:
            found = runs[name]["stages"]["stages"].get(stage)
            cells.append(f"{found['p50']:.1f} / {found['p90']:.1f}" if found else "—")
        rows.append(f"| {stage} | " + " | ".join(cells) + " |")
    rows.append(
        "| end to end p50 / p99 | "
        + " | ".join(
            f"{runs[name]['e2e_p50_ms']:.1f} / {runs[name]['e2e_p99_ms']:.1f}" for name in names
        )
        + " |"
    )
    return "\n".join(rows)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# ---------------------------------------------------------------------------------------------
# Waiting for the watches


def backend_state(policy: OutboundPolicy, name: str) -> bool | None:
    """Whether the policy's backend ``name`` exists (None when no backend has that name)."""
    for route in policy.routes:
        for rule in route.rules:
            for backend in rule.backends:
                if backend.name == name:
                    return backend.exists
    return None


def holds(slot: LatestValueSlot[Any], *, own: bool, name: str, exists: bool) -> bool:
    update = slot.latest
    if update is None:
        return False
    policy: OutboundPolicy = update.policy
    if own:
        # Its own Service: present → the HTTPRoute is attached; gone → the Default route, failing.
        return (policy.routes[0].kind == "HTTPRoute") == exists
    return backend_state(policy, name) is exists


async def until_all(
    checks: list[tuple[LatestValueSlot[Any], bool]], name: str, exists: bool
) -> None:
    for slot, own in checks:
        while not holds(slot, own=own, name=name, exists=exists):
            await slot.next(after=slot.version)


def affected(k: int, n: int) -> list[tuple[int, bool]]:
    """Watches a change of ``svc-k`` affects: its own, and those whose route uses it."""
    return [(k, True), ((k - 1) % n, False), ((k - 7) % n, False)]


async def idle(controller: Controller) -> None:
    await controller.system.wait_idle()


async def start_measured(controller: Controller, figures: dict[str, Any], *, within: float) -> None:
    """Start ``controller`` and wait until it is ready; ``figures`` gets the RSS before, the
    wall and CPU seconds to ready, and the RSS and actors once ready."""
    figures["rss_before_mib"] = rss_mib()
    started, started_cpu = time.perf_counter(), time.process_time()
    await controller.start()
    await controller.wait_ready(within=within)
    figures["ready_s"] = time.perf_counter() - started
    figures["ready_cpu_s"] = time.process_time() - started_cpu
    figures["rss_ready_mib"] = rss_mib()
    figures["actors_ready"] = controller.system.statistics().actors


async def open_watches(controller: Controller, n: int) -> list[LatestValueSlot[Any]]:
    """A policy watch on each ``svc-i:80`` (client namespace ``default``), each with its first
    policy once this returns."""
    slots = [
        controller.watches.open_watch(
            WatchTarget(ServicePortKey("default", f"svc-{i}", 80), "default")
        )
        for i in range(n)
    ]
    await idle(controller)
    assert all(slot.version >= 1 for slot in slots)
    return slots


# ---------------------------------------------------------------------------------------------
# The reference: re-walk every watch's routes on every Service event (Linkerd's fix)


@dataclass
class RewalkWatch:
    target: WatchTarget
    routes: list[ResolvedRoute]
    policy: OutboundPolicy
    exists: list[list[list[bool]]]


class RewalkIndex:
    """Every watch's routes, re-checked against the Service set on every Service event."""

    def __init__(
        self,
        services: dict[ObjectKey, Service],
        watches: list[tuple[WatchTarget, list[ResolvedRoute]]],
    ) -> None:
        self.services = services
        self.watches: list[RewalkWatch] = []
        for target, routes in watches:
            policy = build_outbound_policy(
                services.get(ObjectKey(namespace=target.key.namespace, name=target.key.name)),
                target.key.namespace,
                target.key.name,
                target.key.port,
                target.client_namespace,
                routes,
            )
            exists = [[[b.exists for b in rule.backends] for rule in r.rules] for r in routes]
            self.watches.append(RewalkWatch(target, routes, policy, exists))
        self.visits = 0
        self.sends = 0

    def service_event(self, key: ObjectKey, service: Service | None) -> None:
        if service is None:
            self.services.pop(key, None)
        else:
            self.services[key] = service
        services = self.services
        for watch in self.watches:
            modified = False
            for r, route in enumerate(watch.routes):
                for u, rule in enumerate(route.rules):
                    for b, backend in enumerate(rule.backends):
                        self.visits += 1
                        now = backend.key in services
                        if watch.exists[r][u][b] != now:
                            watch.exists[r][u][b] = now
                            modified = True
            if modified:
                watch.routes = [
                    rebuilt(route, watch.exists[r]) for r, route in enumerate(watch.routes)
                ]
                watch.policy = build_outbound_policy(
                    services.get(
                        ObjectKey(namespace=watch.target.key.namespace, name=watch.target.key.name)
                    ),
                    watch.target.key.namespace,
                    watch.target.key.name,
                    watch.target.key.port,
                    watch.target.client_namespace,
                    watch.routes,
                )
                self.sends += 1


def rebuilt(route: ResolvedRoute, exists: list[list[bool]]) -> ResolvedRoute:
    from dataclasses import replace

    from interlock.model.outbound import FailureInjector

    def backend(b: Backend, now: bool) -> Backend:
        if b.exists == now:
            return b
        if now:
            return replace(b, exists=True, failure_injector=None, reason=None)
        return replace(
            b,
            exists=False,
            failure_injector=FailureInjector(
                message=f"backend Service {b.namespace}/{b.name} does not exist"
            ),
            reason="BackendNotFound",
        )

    return replace(
        route,
        rules=tuple(
            replace(
                rule,
                backends=tuple(
                    backend(b, e) for b, e in zip(rule.backends, exists[u], strict=True)
                ),
            )
            for u, rule in enumerate(route.rules)
        ),
    )


def build_rewalk(n: int) -> RewalkIndex:
    services = {s.key: s for s in (parse_service(service_obj(i)) for i in range(n))}
    watches = []
    for i in range(n):
        route = resolve_route(parse_http_route(route_obj(i, n)), services, [])
        watches.append((WatchTarget(ServicePortKey("default", f"svc-{i}", 80), "default"), [route]))
    return RewalkIndex(services, watches)


# ---------------------------------------------------------------------------------------------
# The watch client: a child process holding N HTTP watch streams, as N mesh proxies would


def json_holds(policy: dict[str, Any], *, own: bool, name: str, exists: bool) -> bool:
    if own:
        return (policy["routes"][0]["kind"] == "HTTPRoute") == exists
    return any(
        b["name"] == name and b["exists"] is exists
        for route in policy["routes"]
        for rule in route["rules"]
        for b in rule["backends"]
    )


async def watch_client(url: str, n: int) -> None:
    """Open ``n`` watches, say ``ready``; then answer each ``wait K EXISTS`` line on stdin with
    ``done <unix time>``: when the last of the watches affected by that change of ``svc-K``
    received it (the arrival of its line, not the time the question was answered: the
    benchmark asks once the change's request has returned, which a real API server may answer
    after the watch streams already have the change)."""
    latest: dict[int, dict[str, Any]] = {}
    arrived: dict[int, float] = {}
    changed = asyncio.Event()
    loop = asyncio.get_running_loop()
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=60)

    async def follow(session: aiohttp.ClientSession, i: int) -> None:
        target = f"{url}/v1/outbound/default/svc-{i}/80?watch=true"
        async with session.get(target) as response:
            assert response.status == 200, await response.text()
            async for line in response.content:
                arrived[i] = time.time()
                latest[i] = json.loads(line)
                changed.set()

    started = time.perf_counter()
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        tasks = [asyncio.create_task(follow(session, i)) for i in range(n)]
        while len(latest) < n:
            changed.clear()
            await changed.wait()
        print(f"ready {time.perf_counter() - started:.3f}", flush=True)
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while line := (await reader.readline()).decode().split():
            k, exists = int(line[1]), line[2] == "1"
            checks = affected(k, n)
            while not all(
                json_holds(latest[i], own=own, name=f"svc-{k}", exists=exists) for i, own in checks
            ):
                changed.clear()
                await changed.wait()
            print(f"done {max(arrived[i] for i, _ in checks):.6f}", flush=True)
        for task in tasks:
            task.cancel()


class WatchClient:
    """The controller side of :func:`watch_client`."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(cls, url: str, n: int) -> tuple[WatchClient, float]:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--watch-client",
            url,
            str(n),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        client = cls(process)
        ready = await client._line("ready")
        return client, float(ready)

    async def _line(self, word: str) -> str:
        assert self.process.stdout is not None
        line = (await asyncio.wait_for(self.process.stdout.readline(), 900)).decode().split()
        if not line or line[0] != word:
            raise RuntimeError(f"watch client: expected {word!r}, got {line!r}")
        return line[1]

    async def wait(self, k: int, exists: bool) -> float:
        """Unix time at which every watch affected by this change of ``svc-k`` had it."""
        assert self.process.stdin is not None
        self.process.stdin.write(f"wait {k} {int(exists)}\n".encode())
        await self.process.stdin.drain()
        return float(await self._line("done"))

    async def stop(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), 30)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()


# ---------------------------------------------------------------------------------------------


async def start_server(kind: str, n: int, workdir: Path, cluster_dir: Path | None) -> ApiServer:
    if kind == "real":
        return await RealServer.start(objects(n, real=True), cluster_dir=cluster_dir)
    return await EmbeddedServer.start(objects(n, real=False), workdir)


def flow_delta(
    before: dict[tuple[str, str], dict[str, float]], after: dict[tuple[str, str], dict[str, float]]
) -> dict[str, Any] | None:
    """Priority-and-fairness during the status phase: the busiest non-exempt flow."""
    rows = []
    for key, counters in after.items():
        old = before.get(key, {})
        delta = {name: value - old.get(name, 0.0) for name, value in counters.items()}
        if key[1] != "exempt" and delta.get("dispatched", 0) > 0:
            rows.append((delta.get("dispatched", 0), key, delta))
    if not rows:
        return None
    _, (flow_schema, priority_level), delta = max(rows)
    waited = delta.get("waited", 0.0)
    return {
        "flow_schema": flow_schema,
        "priority_level": priority_level,
        "dispatched": delta.get("dispatched", 0.0),
        "rejected": delta.get("rejected", 0.0),
        "mean_wait_ms": 1000 * delta.get("wait_s", 0.0) / waited if waited else 0.0,
    }


async def run(
    n: int,
    changes: int,
    seed: int,
    *,
    server_kind: str = "embedded",
    cluster_dir: Path | None = None,
    skip_status: bool = False,
    keep: bool = False,
) -> dict[str, Any]:
    """One server's figures; ``skip_status``: stop after the changes (no leader phase, no
    re-walk reference), and with ``keep`` leave the objects on a ``--cluster-dir`` cluster."""
    rng = random.Random(seed)
    figures: dict[str, Any] = {"scale": n, "changes": changes, "server": server_kind}
    figures["load_avg_start"] = os.getloadavg()[0]
    real = server_kind == "real"
    with tempfile.TemporaryDirectory(prefix="interlock-bench-") as tmp:
        loading = time.perf_counter()
        server = await start_server(server_kind, n, Path(tmp), cluster_dir)
        figures["load_s"] = time.perf_counter() - loading
        try:
            async with server.session() as http:
                version = await server.request(http, "GET", "/version")
                figures["server_version"] = (
                    json.loads(version.body).get("gitVersion", "?")
                    if version.status == 200
                    else "embedded"
                )
            controller = follower(server)
            await start_measured(controller, figures, within=900)

            # --- N watches: first their state (actors, policies) through in-process readers,
            # then N HTTP streams on the same watches, held by a child process (N mesh proxies)
            opened = time.perf_counter()
            slots = await open_watches(controller, n)
            figures["watch_state_s"] = time.perf_counter() - opened
            figures["rss_watch_state_mib"] = rss_mib()
            assert controller.policy_site is not None
            client, figures["watches_open_s"] = await WatchClient.start(
                controller.policy_site.url, n
            )
            await idle(controller)
            figures["rss_watches_mib"] = rss_mib()
            figures["actors"] = controller.system.statistics().actors

            # --- end to end: API server → informer → actors → HTTP watch streams
            latencies: list[float] = []
            messages: list[int] = []
            routes_woken: list[int] = []
            chosen = rng.sample(range(n), changes)
            services = "/api/v1/namespaces/default/services"
            stages = ChangeStages()
            requests_before = kube_requests(controller)
            histograms_before = await server.histograms()
            load_before = os.getloadavg()[0]
            async with server.session() as http:
                with stages.installed(controller.system):
                    for k in chosen:
                        for exists in (False, True):
                            await idle(controller)
                            before = controller.system.statistics()
                            t0 = time.time()
                            stages.begin(f"svc-{k}", t0)
                            if exists:
                                body = service_obj(k, cluster_ip=not real)
                                response = await server.request(http, "POST", services, body)
                                assert response.status == 201, response.body
                            else:
                                path = f"{services}/svc-{k}"
                                response = await server.request(http, "DELETE", path)
                                assert response.status == 200, response.body
                            stages.mark("returned")
                            received = await client.wait(k, exists)
                            latencies.append(received - t0)
                            await idle(controller)
                            stages.end(received)
                            after = controller.system.statistics()
                            messages.append(after.processed - before.processed)
                            routes_woken.append(
                                after.kinds["route"].processed - before.kinds["route"].processed
                            )
            figures["changes_load"] = [load_before, os.getloadavg()[0]]
            figures["stages"] = stages.summary()
            figures["stage_rows"] = stages.rows
            figures["stage_handled"] = stages.handled
            figures["server_histograms"] = mean_delta(histograms_before, await server.histograms())
            figures["kube_requests"] = mean_delta(requests_before, kube_requests(controller))
            figures["kube_in_flight"] = kube_in_flight(controller)
            await client.stop()
            figures["e2e_p50_ms"] = percentile(latencies, 0.5) * 1000
            figures["e2e_p99_ms"] = percentile(latencies, 0.99) * 1000
            print_stages(server_kind, figures)
            figures["messages_per_change"] = statistics.median(messages)
            figures["route_messages_per_change"] = statistics.median(routes_woken)

            # --- in memory: ours (router → actors → watches) vs the re-walk reference
            ours_time: list[float] = []
            ours_work: list[int] = []
            for k in chosen:
                for deleted in (True, False):
                    obj = service_obj(k)
                    change = ObjectChanged(
                        kind="Service",
                        namespace="default",
                        name=f"svc-{k}",
                        deleted=deleted,
                        resource_version="bench",
                        obj=obj,
                    )
                    checks_of = [(slots[i], own) for i, own in affected(k, n)]
                    before_processed = controller.system.statistics().processed
                    t0 = time.process_time()
                    controller.system.tell(INFORMER_ROUTER, change)
                    await until_all(checks_of, f"svc-{k}", not deleted)
                    await idle(controller)
                    ours_time.append(time.process_time() - t0)
                    ours_work.append(controller.system.statistics().processed - before_processed)

            if skip_status:
                figures["load_avg_end"] = os.getloadavg()[0]
                await controller.stop()
                return figures

            # --- becoming leader: every route's status is written once
            flow_before = await server.flow_control()
            lease = f"/apis/coordination.k8s.io/v1/namespaces/{server.lease_namespace}/leases"
            async with server.session() as http:
                response = await server.request(http, "DELETE", f"{lease}/interlock")
                assert response.status == 200, response.body
            assert controller.elector is not None
            while not controller.elector.is_leader:  # noqa: ASYNC110 - polling a flag
                await asyncio.sleep(0.01)
            leading = time.perf_counter()
            writer = controller.status_writer
            assert writer is not None
            while (s := writer.statistics()).writes < n or s.in_flight or s.pending:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
            figures["status_s"] = time.perf_counter() - leading
            figures["status_writes"] = writer.writes
            figures["status_concurrency"] = controller.config.status.concurrency
            figures["flow_control"] = flow_delta(flow_before, await server.flow_control())
            figures["load_avg_end"] = os.getloadavg()[0]
            await controller.stop()
        finally:
            await server.stop(keep=keep and skip_status)

    rewalk = build_rewalk(n)
    ref_time: list[float] = []
    ref_work: list[int] = []
    for k in chosen:
        key = ObjectKey(namespace="default", name=f"svc-{k}")
        for deleted in (True, False):
            visits = rewalk.visits
            t0 = time.process_time()
            rewalk.service_event(key, None if deleted else parse_service(service_obj(k)))
            ref_time.append(time.process_time() - t0)
            ref_work.append(rewalk.visits - visits)
    figures["ours_ms"] = statistics.median(ours_time) * 1000
    figures["ours_work"] = statistics.median(ours_work)
    figures["ref_ms"] = statistics.median(ref_time) * 1000
    figures["ref_work"] = statistics.median(ref_work)
    return figures


def machine() -> str:
    return f"{platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs"


def scaling_table(runs: list[dict[str, Any]]) -> str:
    """Work and time per change at each scale measured, to show what grows with the cluster."""
    rows = [
        "| Services / routes / watches | interlock: messages, ms | re-walk: backends visited, ms |",
        "|---:|---:|---:|",
    ]
    for f in sorted(runs, key=lambda r: r["scale"]):
        rows.append(
            f"| {f['scale']:,} | {f['ours_work']:.0f}, {f['ours_ms']:.2f} ms "
            f"| {f['ref_work']:,.0f}, {f['ref_ms']:.2f} ms |"
        )
    return "\n".join(rows)


def section(f: dict[str, Any], command: str, *, smaller: list[dict[str, Any]]) -> str:
    n = f["scale"]
    scale_note = (
        ""
        if n >= 10_000
        else f"\n**Scale: {n:,} (not the 10,000 of the issue's target); see the command.**\n"
    )
    ready = f"{f['ready_s']:.1f} s (CPU of this process: {f['ready_cpu_s']:.1f} s)"
    rss = (
        f"{f['rss_ready_mib']:.0f} / {f['rss_watch_state_mib']:.0f} / "
        f"{f['rss_watches_mib']:.0f} MiB"
    )
    per_stream = (f["rss_watches_mib"] - f["rss_watch_state_mib"]) * 1024 / n
    per_watch = (f["rss_watch_state_mib"] - f["rss_ready_mib"]) * 1024 / n
    opening = f"{f['watches_open_s']:.2f} s"
    latency = f"{f['e2e_p50_ms']:.1f} / {f['e2e_p99_ms']:.1f} ms"
    messages = f"{f['messages_per_change']:.0f}"
    ours = f"{f['ours_ms']:.2f} ms | {f['ours_work']:.0f} messages handled"
    ref = f"{f['ref_ms']:.2f} ms | {f['ref_work']:,.0f} backends visited"
    ratio = f"{f['ref_ms'] / max(1e-9, f['ours_ms']):.1f}x | —"
    status = f"{f['status_s']:.1f} s ({f['status_writes']:,})"
    return f"""{HEADING}

{n:,} Services, {n:,} HTTPRoutes (2 backends each: `r-i` → parent `svc-i`, backends `svc-(i+1)`
and `svc-(i+7)`), {n:,} open watches: `GET /v1/outbound/default/svc-i/80?watch=true` streams
held by a child process, as {n:,} mesh proxies would. The embedded API server runs in another
child process, so the RSS is the controller's own. The controller is a follower (another
replica holds the Lease), so no status write runs during the measurements. A change's latency
runs from the API request (delete or create of a Service) until every watch stream it affects
has delivered the new policy to the client. {f["changes"]} Services chosen at random are deleted and
re-created (2 changes each).
{scale_note}
```
{command}
```

Machine: {machine()} (shared with other engineers' work while measured).

| figure | value | target |
|---|---:|---:|
| start → ready (initial lists delivered, actors settled) | {ready} | ≤ 10 s |
| RSS after ready / + {n:,} watches (actors, policies) / + {n:,} HTTP streams | {rss} | ≤ 400 MiB |
| building {n:,} watches (first policy of each) | {f["watch_state_s"]:.2f} s | |
| opening {n:,} HTTP watch streams (first policy on every stream) | {opening} | |
| actors with the watches open | {f["actors"]:,} | |
| Service change → every affected stream has the new policy, p50 / p99 | {latency} | |
| messages handled per Service change (median, end to end) | {messages} | |
| … of which route-actor messages | {f["route_messages_per_change"]:.0f} | |
| on becoming leader: every route's status written (writes) | {status} | |

Same Service events, in memory (CPU time, medians), interlock's actors vs a reference that
re-walks every watch's routes on every Service event (the approach of the Linkerd pull
request; the reference only flips `exists` flags and rebuilds modified policies — its cheapest
form):

| | time per change | what it does per change |
|---|---:|---:|
| interlock (router → directory → subscribed routes → watches) | {ours} |
| re-walk reference | {ref} |
| time ratio (reference / interlock) | {ratio} |

The same comparison at {"each scale measured" if smaller else "this scale"} (medians per
change): interlock's work stays flat, the re-walk grows with the cluster.

{scaling_table([*smaller, f])}

Memory: a watch's state (its actor, its policy and the serialized body) costs
{per_watch:.1f} KiB; an open HTTP stream adds {per_stream:.1f} KiB: the socket, asyncio's
transport, a protocol object and one callback on the watch's slot (streams are served by
`interlock/api/policy_stream.py`, not by aiohttp's request handler, which kept about 12 KiB per
connection alive; `benchmarks/stream_memory.py` shows what remains, by type).

Reading the figures: a Service change costs interlock a fixed handful of messages — the
router, the ServiceDirectory, the routes that subscribed to that Service and the watches of
their parents — whatever the size of the cluster; the re-walk visits every backend of every
watch, so its cost grows with the cluster.
"""


def real_section(real: dict[str, Any], embedded: dict[str, Any] | None, command: str) -> str:
    """The real server's figures, beside the embedded server's from the same invocation."""
    n = real["scale"]

    def row(label: str, key: str, fmt: str) -> str:
        cells = [fmt.format(f[key]) if f is not None else "(not run)" for f in (embedded, real)]
        return f"| {label} | {cells[0]} | {cells[1]} |"

    rows = [
        row("start → ready (initial lists delivered, actors settled)", "ready_s", "{:.1f} s"),
        row("… CPU of the controller process", "ready_cpu_s", "{:.1f} s"),
        row("RSS after ready", "rss_ready_mib", "{:.0f} MiB"),
        row(f"RSS + {n:,} watches (actors, policies)", "rss_watch_state_mib", "{:.0f} MiB"),
        row(f"RSS + {n:,} HTTP watch streams", "rss_watches_mib", "{:.0f} MiB"),
        row(f"opening {n:,} HTTP watch streams", "watches_open_s", "{:.2f} s"),
        row("Service change → every affected stream updated, p50", "e2e_p50_ms", "{:.1f} ms"),
        row("Service change → every affected stream updated, p99", "e2e_p99_ms", "{:.1f} ms"),
        row("messages handled per Service change (median)", "messages_per_change", "{:.0f}"),
        row("on becoming leader: every route's status written", "status_s", "{:.1f} s"),
        row("… status writes", "status_writes", "{:,}"),
    ]
    flow = real.get("flow_control")
    in_flight = real["status_concurrency"]
    per_write_ms = 1000 * real["status_s"] * in_flight / max(1, real["status_writes"])
    if flow and not flow["rejected"] and flow["mean_wait_ms"] < per_write_ms / 20:
        shaped = (
            f"Here nothing was rejected and the queueing ({flow['mean_wait_ms']:.1f} ms) was "
            f"negligible beside the {per_write_ms:.0f} ms a write took: with {in_flight} writes "
            "in flight the controller stays below its priority level's share, so "
            "priority-and-fairness did not shape the figure; raising `status.concurrency` "
            "would move the bound there."
        )
    elif flow:
        shaped = (
            f"Here it did shape the figure: {flow['rejected']:,.0f} rejections were retried with "
            f"backoff and each write waited {flow['mean_wait_ms']:.1f} ms in the queues, of the "
            f"{per_write_ms:.0f} ms a write took."
        )
    else:
        shaped = ""
    if flow:
        fairness = (
            f"During the status phase the controller's requests were classified by flow schema "
            f"`{flow['flow_schema']}` into priority level `{flow['priority_level']}`: "
            f"{flow['dispatched']:,.0f} requests dispatched, {flow['rejected']:,.0f} rejected "
            f"(429), mean wait in the priority level's queues {flow['mean_wait_ms']:.2f} ms."
        )
    else:
        fairness = "No priority-and-fairness figures were read from the API server's /metrics."
    rate = real["status_writes"] / max(1e-9, real["status_s"])
    minutes_at_qps5 = real["status_writes"] / 5 / 60
    beside = (
        "beside the embedded API server measured in the same invocation (each in a process of "
        "its own)"
        if embedded is not None
        else "(the embedded column is empty: run with `--server both` to measure both)"
    )
    extra_mib = real["rss_ready_mib"] - (embedded or real)["rss_ready_mib"]
    memory = (
        f" After ready the controller's RSS is {extra_mib:+.0f} MiB against the real server, "
        "whose objects are larger (managedFields, server-set fields); that difference was not "
        "broken down further."
        if embedded is not None
        else ""
    )
    paragraphs = [
        f"The same workload as [Outbound](#outbound) ({n:,} Services, {n:,} HTTPRoutes, {n:,} "
        f"watch streams, {real['changes']} Services deleted and re-created) against a real "
        f"kube-apiserver {real['server_version']} and etcd from `hack/real-cluster.sh` on "
        f"loopback, {beside}. On the real server the objects are created as cluster admin "
        f"before the controller starts ({real['load_s']:.0f} s for the control plane and the "
        f"{2 * n:,} objects), and the controller runs as "
        "`system:serviceaccount:interlock-system:interlock`, the identity "
        "`manifests/rbac.yaml` grants: every list, watch, Lease call and status patch goes "
        "through TLS, token authentication, RBAC, admission, priority-and-fairness and etcd.",
        f"How the status figure is shaped: on becoming leader the controller writes "
        f"{real['status_writes']:,} statuses (one merge patch each on `httproutes/status`), at "
        f"most {real['status_concurrency']} in flight (`status.concurrency`), at {rate:,.0f} "
        "writes/s here. interlock applies no client-side rate limit: kubernetes-asyncio has "
        "none, and nothing like client-go's default QPS 5 / burst 10 (at which "
        f"{real['status_writes']:,} writes would take {minutes_at_qps5:.0f} minutes) is added; "
        "the only bound is the writes in flight, so the figure is the server's latency per "
        "write (TLS, authorization, admission, the CRD's OpenAPI and CEL validation, an etcd "
        f"write, on a machine shared by everything here) times {real['status_writes']:,} / "
        f"{real['status_concurrency']}.",
        "Reading the figures: the controller's own work is the same on both servers (the same "
        "messages per change, similar CPU to become ready); what differs is the server. The "
        "real one answers each request through TLS, authentication, RBAC, admission and an etcd "
        "round trip, which is what the end-to-end latency and the status writes pay; the "
        "embedded one is Python on the same 2 CPUs, which is why its lists can be slower "
        "to serve than a real server's watch cache under load." + memory,
        fairness
        + " Priority-and-fairness is what protects the server from a new leader: a service "
        "account's requests go to a non-exempt priority level with a bounded share of the "
        "server's concurrency, where they queue and at worst are answered 429 (which the "
        "status writer retries with backoff) instead of starving other clients. " + shaped,
    ]
    loads = [
        f[key]
        for f in (embedded, real)
        if f is not None
        for key in ("load_avg_start", "load_avg_end")
        if key in f
    ]
    load = f"{min(loads):.1f} to {max(loads):.1f}" if loads else "not recorded"
    intro, *notes = (
        textwrap.fill(paragraph, width=96, break_on_hyphens=False) for paragraph in paragraphs
    )
    after = "\n\n".join(notes)
    return f"""{REAL_HEADING}

{intro}

```
{command}
```

Machine: {machine()}, shared with other engineers' work while measured (1-minute load
average {load}); the real control plane shares the 2 CPUs with the controller and the watch
client. Compare the columns with each other, not with the [Outbound](#outbound) section's run.

| figure | embedded | real |
|---|---:|---:|
{chr(10).join(rows)}

{after}
"""


def run_child(args: argparse.Namespace, server: str, out: Path) -> dict[str, Any]:
    """One server's run in a process of its own (RSS figures mean nothing otherwise)."""
    command = [
        sys.executable,
        __file__,
        "--server",
        server,
        "--scale",
        str(args.scale),
        "--changes",
        str(args.changes),
        "--seed",
        str(args.seed),
        "--json",
        str(out),
    ]
    if server == "embedded":
        for scale in args.also_scale:
            command += ["--also-scale", str(scale)]
    if server == "real" and args.cluster_dir is not None:
        command += ["--cluster-dir", str(args.cluster_dir)]
    if args.changes_only:
        command += ["--changes-only"]
    if args.stages_json is not None:
        command += ["--stages-json", str(args.stages_json)]
    if args.keep:
        command += ["--keep"]
    import subprocess

    subprocess.run(command, check=True)
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", choices=["embedded", "real", "both"], default="embedded")
    parser.add_argument("--scale", type=int, default=10_000)
    parser.add_argument("--changes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--also-scale",
        type=int,
        action="append",
        default=[],
        help="embedded: also run at this (smaller) scale, for the work-versus-size table",
    )
    parser.add_argument(
        "--cluster-dir",
        type=Path,
        default=None,
        help="real: use the cluster hack/real-cluster.sh started in DIR (left running) "
        "instead of starting one",
    )
    parser.add_argument(
        "--write-docs",
        action="store_true",
        help="rewrite this benchmark's docs/benchmarks.md sections",
    )
    parser.add_argument(
        "--changes-only",
        action="store_true",
        help="stop after the Service changes and their stages (no leader phase, no re-walk "
        "reference, nothing written to the docs)",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="real, with --cluster-dir and --changes-only: leave the objects for the next run",
    )
    parser.add_argument(
        "--stages-json",
        type=Path,
        default=None,
        help="with --changes-only: also write each change's stages and handled messages here "
        "(one file per server: the server's name is added before the suffix)",
    )
    parser.add_argument("--json", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--watch-client", nargs=2, metavar=("URL", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.watch_client:
        asyncio.run(watch_client(args.watch_client[0], int(args.watch_client[1])))
        return
    quiet_logs()
    also = "".join(f" --also-scale {scale}" for scale in args.also_scale)
    command = (
        f".venv/bin/python benchmarks/outbound.py --server {args.server} --scale {args.scale} "
        f"--changes {args.changes}{also}"
    )
    if args.server == "both":
        with tempfile.TemporaryDirectory(prefix="interlock-bench-") as tmp:
            embedded = run_child(args, "embedded", Path(tmp) / "embedded.json")
            real = run_child(args, "real", Path(tmp) / "real.json")
        if args.changes_only:
            print(stage_table({"embedded": embedded["main"], "real": real["main"]}))
            return
        texts = [
            (HEADING, section(embedded["main"], command, smaller=embedded["smaller"])),
            (REAL_HEADING, real_section(real["main"], embedded["main"], command)),
        ]
    else:
        # The main scale first: RSS figures are only meaningful in a process that ran nothing
        # else.
        figures = asyncio.run(
            run(
                args.scale,
                args.changes,
                args.seed,
                server_kind=args.server,
                cluster_dir=args.cluster_dir,
                skip_status=args.changes_only,
                keep=args.keep,
            )
        )
        smaller = [
            asyncio.run(run(scale, args.changes, args.seed))
            for scale in (args.also_scale if args.server == "embedded" else [])
        ]
        if args.stages_json is not None:
            path = args.stages_json
            path.with_name(f"{path.stem}-{args.server}{path.suffix}").write_text(
                json.dumps(figures)
            )
        if args.json is not None:
            args.json.write_text(json.dumps({"main": figures, "smaller": smaller}))
            return
        if args.changes_only:
            print(stage_table({args.server: figures}))
            return
        if args.server == "embedded":
            texts = [(HEADING, section(figures, command, smaller=smaller))]
        else:
            texts = [(REAL_HEADING, real_section(figures, None, command))]
    for heading, text in texts:
        report(text, heading, write_docs=args.write_docs)


if __name__ == "__main__":
    main()
