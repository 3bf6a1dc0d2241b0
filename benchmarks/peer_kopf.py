"""interlock beside the peer a Python user would pick, kopf, doing the same outbound job.

The job: Services and HTTPRoutes in; out, for every Service port, the HTTPRoutes attached to it
with each backend's ``exists`` flag (does that Service exist?), served over HTTP as
``GET /v1/outbound/{namespace}/{service}/{port}``. The kopf operator is written the way kopf's
documentation teaches, in both of its styles:

- ``kopf-index``: ``@kopf.index`` handlers (Services by key, HTTPRoutes by parent port), the
  indices handed to a ``@kopf.on.startup`` handler that serves the policies, each computed from
  the indices when asked;
- ``kopf-event``: ``@kopf.on.event`` handlers keeping the same two maps in plain dicts.

No status is written and nothing is persisted by either (``on.event`` and ``index`` handlers
keep no progress annotations); kopf runs ``standalone`` (no peering objects) and cluster-wide,
its logging at WARNING as interlock's. It does what interlock does on this job and no more:
one parent kind (Service), ``exists`` flags, the route's backends; no ReferenceGrants, no
matches or filters, no watch streams, no Default route synthesized beyond a flag.

Each contestant runs in its own child process, one after the other, against the same embedded
API server (another child process, pre-loaded with N Services and N HTTPRoutes as
``benchmarks/outbound.py`` makes them). Measured for each:

- start → ready: from spawning the process (interpreter start and imports included) until its
  readiness endpoint answers 200 — interlock's ``/readyz`` (initial lists delivered, actors
  settled), the peers' ``/readyz`` (every Service and HTTPRoute seen: the peers are told N, a
  benchmark shortcut, since kopf has no "initial listing done" signal of its own);
- Service change → updated policy: delete (then re-create) ``svc-k`` through the API server and
  poll ``GET`` on the policy of ``svc-(k-1)``, whose route has ``svc-k`` as a backend, until its
  ``exists`` flag flipped (p50 / p99; the poll loop's resolution is about a millisecond);
- RSS of the child process (``/proc/PID/status``) when ready and after the changes.

    .venv/bin/pip install -e '.[bench]'
    .venv/bin/python benchmarks/peer_kopf.py [--scales 1000 10000] [--changes 20]
        [--ready-timeout 600] [--write-docs]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_report import report, rss_mib

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
HEADING = "## Beside kopf"
CONTESTANTS = ("interlock", "kopf-event", "kopf-index")


# ---- the peer: a kopf operator doing the outbound job -------------------------------------------

ServiceKey = tuple[str, str]
PortKey = tuple[str, str, int]


def parents_of(namespace: str, spec: dict[str, Any]) -> list[PortKey]:
    """The Service ports an HTTPRoute attaches to (its Service parentRefs)."""
    return [
        (ref.get("namespace", namespace), ref["name"], int(ref.get("port", 80)))
        for ref in spec.get("parentRefs", [])
        if ref.get("kind") == "Service"
    ]


def backends_of(namespace: str, spec: dict[str, Any]) -> list[list[dict[str, Any]]]:
    return [
        [
            {
                "namespace": ref.get("namespace", namespace),
                "name": ref["name"],
                "port": ref.get("port"),
                "weight": ref.get("weight", 1),
            }
            for ref in rule.get("backendRefs", [])
        ]
        for rule in spec.get("rules", [])
    ]


def build_policy(
    key: PortKey,
    service_exists: bool,
    routes: Iterable[tuple[str, list[list[dict[str, Any]]]]],
    exists: Any,
) -> dict[str, Any]:
    """The policy of one Service port: its routes, each backend with ``exists``."""
    namespace, service, port = key
    attached = [
        {
            "kind": "HTTPRoute",
            "namespace": namespace,
            "name": name,
            "rules": [
                {"backends": [{**b, "exists": (b["namespace"], b["name"]) in exists} for b in rule]}
                for rule in rules
            ],
        }
        for name, rules in sorted(routes)
    ]
    if not attached:
        backend = {"namespace": namespace, "name": service, "port": port, "exists": service_exists}
        attached = [{"kind": "Default", "rules": [{"backends": [backend]}]}]
    return {"namespace": namespace, "service": service, "port": port, "routes": attached}


async def serve_policies(port: int, policy_of: Any, ready: Any) -> Any:
    from aiohttp import web

    async def get_policy(request: web.Request) -> web.Response:
        m = request.match_info
        return web.json_response(policy_of((m["ns"], m["svc"], int(m["port"]))))

    async def readyz(request: web.Request) -> web.Response:
        return web.Response(status=200 if ready() else 503)

    app = web.Application()
    app.router.add_get("/v1/outbound/{ns}/{svc}/{port}", get_policy)
    app.router.add_get("/readyz", readyz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


def kopf_operator(style: str, port: int, expected: int) -> None:
    import logging

    import kopf

    registry = kopf.OperatorRegistry()
    routes_resource = ("gateway.networking.k8s.io", "v1", "httproutes")

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        return kopf.login_with_kubeconfig(**kwargs)  # $KUBECONFIG, as kopf's own default does

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False  # no Events: interlock, a follower, posts none either
        logging.getLogger().setLevel(logging.WARNING)

    if style == "index":

        @kopf.index("services", id="services", registry=registry)
        def services(namespace: str, name: str, **_: Any) -> dict[ServiceKey, bool]:
            return {(namespace, name): True}

        @kopf.index(*routes_resource, id="routes_by_parent", registry=registry)
        def routes_by_parent(
            namespace: str, name: str, spec: dict[str, Any], **_: Any
        ) -> dict[PortKey, tuple[str, list[list[dict[str, Any]]]]]:
            backends = backends_of(namespace, spec)
            return {key: (name, backends) for key in parents_of(namespace, spec)}

        @kopf.on.startup(registry=registry)
        async def serve(
            memo: kopf.Memo,
            services: kopf.Index[Any, Any],
            routes_by_parent: kopf.Index[Any, Any],
            **_: Any,
        ) -> None:
            def policy_of(key: PortKey) -> dict[str, Any]:
                return build_policy(
                    key, key[:2] in services, routes_by_parent.get(key, []), services
                )

            def ready() -> bool:
                return len(services) >= expected and len(routes_by_parent) >= expected

            memo.runner = await serve_policies(port, policy_of, ready)

    else:
        services_seen: set[ServiceKey] = set()
        routes: dict[PortKey, dict[str, list[list[dict[str, Any]]]]] = {}
        parents: dict[ServiceKey, list[PortKey]] = {}

        @kopf.on.event("services", registry=registry)
        def service_event(type: str | None, namespace: str, name: str, **_: Any) -> None:
            if type == "DELETED":
                services_seen.discard((namespace, name))
            else:
                services_seen.add((namespace, name))

        @kopf.on.event(*routes_resource, registry=registry)
        def route_event(
            type: str | None, namespace: str, name: str, spec: dict[str, Any], **_: Any
        ) -> None:
            for key in parents.pop((namespace, name), []):
                routes.get(key, {}).pop(name, None)
            if type == "DELETED":
                return
            keys = parents[(namespace, name)] = parents_of(namespace, spec)
            backends = backends_of(namespace, spec)
            for key in keys:
                routes.setdefault(key, {})[name] = backends

        @kopf.on.startup(registry=registry)
        async def serve(memo: kopf.Memo, **_: Any) -> None:
            def policy_of(key: PortKey) -> dict[str, Any]:
                attached = routes.get(key, {}).items()
                return build_policy(key, key[:2] in services_seen, attached, services_seen)

            def ready() -> bool:
                return len(services_seen) >= expected and len(parents) >= expected

            memo.runner = await serve_policies(port, policy_of, ready)

    @kopf.on.cleanup(registry=registry)
    async def stop_serving(memo: kopf.Memo, **_: Any) -> None:
        await memo.runner.cleanup()

    asyncio.run(
        kopf.operator(registry=registry, standalone=True, clusterwide=True, memo=kopf.Memo())
    )


# ---- the parent: one contestant at a time against the same API server ----------------------------


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@dataclass
class Figures:
    contestant: str
    scale: int
    ready_s: float | None = None
    rss_ready_mib: float | None = None
    rss_after_mib: float | None = None
    latencies_ms: list[float] = field(default_factory=list)
    note: str = ""


def child_command(contestant: str, *, kubeconfig: Path, port: int, admin: int, n: int) -> list[str]:
    if contestant == "interlock":
        return [
            sys.executable,
            "-m",
            "interlock",
            "run",
            "--kubeconfig",
            str(kubeconfig),
            "--policy-addr",
            f"127.0.0.1:{port}",
            "--admin-addr",
            f"127.0.0.1:{admin}",
            "--lease-namespace",
            "default",
            "--log-level",
            "WARNING",
        ]
    style = contestant.removeprefix("kopf-")
    return [sys.executable, __file__, "--peer", style, "--port", str(port), "--expected", str(n)]


def exists_in(policy: dict[str, Any], name: str) -> bool | None:
    for route in policy["routes"]:
        for rule in route["rules"]:
            for backend in rule["backends"]:
                if backend["name"] == name:
                    return bool(backend["exists"])
    return None


async def measure(
    contestant: str, n: int, server: Any, kubeconfig: Path, *, changes: int, ready_within: float
) -> Figures:
    import aiohttp
    from outbound import service_obj

    figures = Figures(contestant, n)
    port, admin = free_port(), free_port()
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        *child_command(contestant, kubeconfig=kubeconfig, port=port, admin=admin, n=n),
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    ready_url = f"http://127.0.0.1:{admin if contestant == 'interlock' else port}/readyz"
    policy = f"http://127.0.0.1:{port}/v1/outbound/default"
    try:
        async with aiohttp.ClientSession() as http, server.session() as api:
            while True:
                if process.returncode is not None:
                    figures.note = f"exited with {process.returncode} before ready"
                    return figures
                if time.perf_counter() - started > ready_within:
                    figures.note = f"not ready within {ready_within:.0f} s"
                    return figures
                try:
                    async with http.get(ready_url) as response:
                        if response.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.05)
            figures.ready_s = time.perf_counter() - started
            figures.rss_ready_mib = rss_mib(process.pid)

            async def policy_of(i: int) -> dict[str, Any]:
                async with http.get(f"{policy}/svc-{i}/80") as response:
                    assert response.status == 200, await response.text()
                    result: dict[str, Any] = json.loads(await response.text())
                    return result

            for i in random.Random(2).sample(range(n), 20):  # the job is done right
                got = await policy_of(i)
                assert exists_in(got, f"svc-{(i + 1) % n}") is True, (contestant, i, got)
            services = "/api/v1/namespaces/default/services"
            for k in random.Random(1).sample(range(n), changes):
                watched = (k - 1) % n
                for exists in (False, True):
                    t0 = time.perf_counter()
                    if exists:
                        body = service_obj(k)
                        response = await server.request(api, "POST", services, body)
                        assert response.status == 201, response.body
                    else:
                        response = await server.request(api, "DELETE", f"{services}/svc-{k}")
                        assert response.status == 200, response.body
                    while exists_in(await policy_of(watched), f"svc-{k}") is not exists:
                        if time.perf_counter() - t0 > 60:
                            raise RuntimeError(f"{contestant}: svc-{k} change not seen in 60 s")
                    figures.latencies_ms.append((time.perf_counter() - t0) * 1000)
            figures.rss_after_mib = rss_mib(process.pid)
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 30)
            except TimeoutError:
                process.kill()
                await process.wait()
    return figures


async def run(
    scales: list[int], changes: int, ready_within: float, contestants: list[str]
) -> list[Figures]:
    from api_servers import EmbeddedServer
    from outbound import objects

    results: list[Figures] = []
    for n in scales:
        with tempfile.TemporaryDirectory(prefix="interlock-bench-kopf-") as tmp:
            server = await EmbeddedServer.start(objects(n, real=False), Path(tmp))
            try:
                for contestant in contestants:
                    f = await measure(
                        contestant,
                        n,
                        server,
                        server.kubeconfig,
                        changes=changes,
                        ready_within=ready_within,
                    )
                    print(render_row(f), flush=True)
                    results.append(f)
            finally:
                await server.stop()
    return results


def render_row(f: Figures) -> str:
    def mib(value: float | None) -> str:
        return "—" if value is None else f"{value:.0f}"

    ready = "—" if f.ready_s is None else f"{f.ready_s:.1f} s"
    if f.latencies_ms:
        latency = (
            f"{percentile(f.latencies_ms, 0.5):.1f} / {percentile(f.latencies_ms, 0.99):.1f} ms"
        )
    else:
        latency = "—"
    return (
        f"| {f.scale:,} | {f.contestant} | {ready} | {latency} | {mib(f.rss_ready_mib)} / "
        f"{mib(f.rss_after_mib)} MiB | {f.note} |"
    )


TABLE_HEAD = (
    "| Services / routes | contestant | start → ready | change → policy p50 / p99 "
    "| RSS ready / after changes | note |\n|---:|---|---:|---:|---:|---|"
)


def section(results: list[Figures], command: str) -> str:
    rows = "\n".join(render_row(f) for f in results)
    ratios = []
    for n in sorted({f.scale for f in results}):
        at = {f.contestant: f for f in results if f.scale == n}
        ours = at.get("interlock")
        for peer in ("kopf-event", "kopf-index"):
            theirs = at.get(peer)
            if ours and theirs and ours.ready_s and theirs.ready_s and ours.rss_ready_mib:
                ratios.append(
                    f"- {n:,}: interlock ready in {ours.ready_s / theirs.ready_s:.0%} of "
                    f"{peer}'s time, RSS {ours.rss_ready_mib / (theirs.rss_ready_mib or 1):.0%} "
                    f"of its RSS (targets: ≤ 50%, ≤ 100%)"
                )
    load = os.getloadavg()[0]
    return f"""{HEADING}

The outbound job (Services and HTTPRoutes in, a per-Service-port policy with `exists` flags
out, over HTTP) done by interlock (`interlock run`, a follower) and by a kopf operator written
the way kopf's documentation teaches, in both styles: `kopf-index` (`@kopf.index` handlers, the
policy computed from the indices on each request) and `kopf-event` (`@kopf.on.event` handlers
keeping their own dicts). kopf runs standalone and cluster-wide, writes no status, posts no
Events, persists nothing. What the peer does not do: ReferenceGrants, matches and filters,
watch streams, the full policy document — it answers the `exists` question and no more, so
its per-request work is smaller than interlock's. Each contestant is a child process started
alone against the same embedded API server; ready is from spawning the process to its
`/readyz` answering 200 (the peers are told N: kopf has no "initial listing done" signal);
a change is a Service deleted or re-created until the policy of the Service whose route uses
it shows the new `exists` flag (polled over HTTP: about 1 ms resolution).

```
{command}
```

Machine: {platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs,
load average {load:.1f} at the end (shared with other engineers' work: one run, no repeats —
the figures are single measurements, not medians).

{TABLE_HEAD}
{rows}

{chr(10).join(ratios)}
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scales", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--ready-timeout", type=float, default=600.0)
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument(
        "--contestants",
        nargs="+",
        choices=CONTESTANTS,
        default=list(CONTESTANTS),
        help="who runs (kopf-index is not ready within 10 minutes at 10,000)",
    )
    parser.add_argument("--peer", choices=["index", "event"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--expected", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer:
        kopf_operator(args.peer, args.port, args.expected)
        return 0
    results = asyncio.run(run(args.scales, args.changes, args.ready_timeout, args.contestants))
    command = (
        f".venv/bin/python benchmarks/peer_kopf.py --scales {' '.join(map(str, args.scales))} "
        f"--changes {args.changes} --ready-timeout {args.ready_timeout:.0f}"
    )
    if args.contestants != list(CONTESTANTS):
        command += f" --contestants {' '.join(args.contestants)}"
    report(section(results, command), HEADING, write_docs=args.write_docs)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
