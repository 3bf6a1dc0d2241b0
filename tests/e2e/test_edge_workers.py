"""``interlock run --edge-workers 2``: the controller programs two ``interlock edge`` worker
processes on one port as one data plane, and pushes them its upstream tables.

The workers route as the controller's own edge does: an HTTPRoute splitting the backend
Service, a backendRef to a missing Service (500), a rewrite — the same answers as an in-process
edge over the same objects; an EndpointSlice change reaches both workers; a worker killed comes
back with its tables. A ModuleSet that one worker refuses leaves the route on its last good
chain in both, and the route's state and Event name the worker; ``/metrics`` counts the
requests of both. Backends are local servers behind Services and EndpointSlices, as pods.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from interlock.cli import build_parser
from interlock.cli.cpus import usable_cpus
from interlock.cli.run import config_from_args
from interlock.config import EdgeConfig
from interlock.controller.edge_half import worker_args
from interlock.edge.faults import FaultyEdge
from interlock.edge.workers import EdgeWorkers
from interlock.model.service import ServicePortKey
from tests.kit.e2e_clients import LOCAL, Cluster, StartController, eventually
from tests.kit.edge_env import (
    CRDS,
    GOOD_AUTH,
    HTPASSWD,
    Backend,
    Env,
    edge_env,
    endpoint_slice,
    secret,
)
from tests.kit.edge_objects import ingress, module_set, web_route
from tests.kit.lanes import ENDPOINT_HOST

pytestmark = pytest.mark.timeout(300)

AUTH = {"basicAuth": {"realm": "shop", "secretRef": {"name": "users", "key": "htpasswd"}}}
HOST = "shop.example"
SPLIT = "split.example"


def test_the_flag_takes_a_count_or_auto_and_auto_is_the_default() -> None:
    def parse(*extra: str) -> int:
        args = ["run", "--edge-addr", "127.0.0.1:0", *extra]
        return config_from_args(build_parser().parse_args(args)).edge.workers

    assert parse() == usable_cpus()
    assert parse("--edge-workers", "auto") == usable_cpus()
    assert parse("--edge-workers", "3") == 3
    assert parse("--edge-workers", "1") == 1
    with pytest.raises(SystemExit, match="at least 1"):
        parse("--edge-workers", "0")
    with pytest.raises(SystemExit, match="needs --edge-addr"):
        config_from_args(build_parser().parse_args(["run", "--edge-workers", "2"]))
    # Without an edge served here, auto asks for no worker.
    assert config_from_args(build_parser().parse_args(["run"])).edge.workers == 1


def test_with_access_log_every_worker_gets_it() -> None:
    def flags(*extra: str) -> list[str]:
        args = ["run", "--edge-addr", "127.0.0.1:0", "--edge-workers", "2", *extra]
        return worker_args(config_from_args(build_parser().parse_args(args)))

    assert "--access-log" in flags("--access-log")
    assert "--access-log" not in flags()


@pytest.fixture
async def env(cluster: Cluster, start_controller: StartController) -> AsyncIterator[Env]:
    await cluster.apply_manifests([CRDS])
    controller = await start_controller(
        identity="edge-workers", edge=EdgeConfig(addr=LOCAL, workers=2)
    )
    async with edge_env(cluster, controller) as running:
        yield running


def workers_of(env: Env) -> EdgeWorkers:
    edge = env.controller.edge
    assert edge is not None and edge.workers is not None
    return edge.workers


async def answers(url: str, host: str, path: str = "/", count: int = 1, **headers: str) -> list:
    """``(status, first body line)`` of ``count`` requests, each on a connection of its own
    (SO_REUSEPORT spreads connections over the workers, not requests)."""
    seen = []
    for _ in range(count):
        async with (
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as one,
            one.get(url + path, headers={"Host": host, **headers}) as response,
        ):
            body = await response.text()
            seen.append((response.status, body.split("\n", 1)[0]))
    return seen


async def served_per_worker(env: Env, host: str) -> list[float]:
    workers = workers_of(env)
    await workers.refresh_traffic()
    return [
        sum(v for k, v in stats.requests.items() if k[1] == host) for stats in workers.traffic()
    ]


def split_route() -> dict[str, Any]:
    """An HTTPRoute on ``web``: by path to blue, to a missing Service, and a weighted split
    whose only non-zero backend is green, behind a rewrite."""

    def rule(path: str, *backends: tuple[str, int], **extra: Any) -> dict[str, Any]:
        return {
            "matches": [{"path": {"type": "PathPrefix", "value": path}}],
            "backendRefs": [{"name": n, "port": 80, "weight": w} for n, w in backends],
            **extra,
        }

    rewrite = {
        "type": "URLRewrite",
        "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/moved"}},
    }
    return web_route(
        [
            rule("/blue", ("blue", 1)),
            rule("/ghost", ("ghost", 1)),
            rule("/split", ("green", 1), ("blue", 0), filters=[rewrite]),
        ]
    )


async def test_workers_route_as_the_in_process_edge_follow_endpoints_and_come_back_with_tables(
    env: Env, start_controller: StartController
) -> None:
    single = await start_controller(identity="edge-in-process", edge=EdgeConfig(addr=LOCAL))
    assert single.edge is not None
    await env.serve("blue")
    await env.serve("green")
    await env.kube.apply(ingress("split", SPLIT))
    await env.kube.apply(split_route())
    paths = ["/blue/a", "/ghost", "/split/b", "/elsewhere"]
    expected: dict[str, list] = {}

    async def in_process_routes() -> bool:
        for path in paths:
            expected[path] = await answers(single.edge.url, SPLIT, path)  # type: ignore[union-attr]
        return expected["/blue/a"] == [(200, "backend blue /blue/a")]

    await eventually(in_process_routes, message="the in-process edge serves the HTTPRoute")
    assert expected["/ghost"][0][0] == 500
    assert expected["/split/b"] == [(200, "backend green /moved/b")]
    assert expected["/elsewhere"][0][0] == 404

    async def identical() -> bool:
        for path in paths:
            if await answers(env.edge_url, SPLIT, path, count=4) != expected[path] * 4:
                return False
        return True

    await eventually(identical, message="both workers answer as the in-process edge")

    # blue's pods move: both workers follow the EndpointSlice.
    moved = Backend("blue")
    await moved.start()
    env.backends["blue-moved"] = moved
    await env.kube.apply(endpoint_slice(moved))

    edge = env.controller.edge
    assert edge is not None and edge.upstreams is not None and edge.pusher is not None
    pusher, tables = edge.pusher, edge.upstreams.tables

    def pushed() -> bool:
        blue = tables.addresses.get(ServicePortKey("default", "blue", 80))
        return blue == [(ENDPOINT_HOST, moved.port)] and pusher.in_sync()

    await eventually(pushed, message="both workers hold blue's new endpoint")
    before_requests, before = (
        len(env.backends["blue"].requests),
        await served_per_worker(env, SPLIT),
    )
    assert (
        await answers(env.edge_url, SPLIT, "/blue/a", count=20)
        == [(200, "backend blue /blue/a")] * 20
    )

    async def both_served() -> bool:  # counted once each answer was sent
        after = await served_per_worker(env, SPLIT)
        return sum(after) == sum(before) + 20 and all(
            a > b for a, b in zip(after, before, strict=True)
        )

    await eventually(both_served, message="both workers served some of the 20")
    assert len(env.backends["blue"].requests) == before_requests  # the old endpoint: nothing

    # A worker killed comes back with the tables, before it counts again.
    workers = workers_of(env)
    killed = workers.workers[0].pid
    os.kill(killed, signal.SIGKILL)

    def restarted() -> bool:
        return workers.restarts == 1 and workers.workers[0].pid != killed

    await eventually(restarted, message="the killed worker runs again")
    fresh = workers.workers[0]
    route = (await fresh.client.snapshot()).route(host=SPLIT, route_id="Prefix:/")
    assert route is not None and route.backend is not None
    for path in paths:
        assert await answers(env.edge_url, SPLIT, path, count=6) == expected[path] * 6
    assert len(env.backends["blue"].requests) == before_requests  # still the moved endpoint

    async def fresh_served() -> bool:
        return (await served_per_worker(env, SPLIT))[0] > 0

    await eventually(fresh_served, message="the new worker served some of them")


async def test_a_modules_change_one_worker_refuses_leaves_both_on_the_last_good_chain(
    env: Env,
) -> None:
    await env.kube.apply(secret("users", {"htpasswd": HTPASSWD}))
    await env.kube.apply(module_set("auth", AUTH))
    await env.kube.apply(ingress("shop", HOST, modules="auth"))

    async def served() -> bool:
        return await answers(env.edge_url, HOST, **GOOD_AUTH) == [(200, "backend web /")]

    await eventually(served, message=f"{HOST} answers through the workers")
    edge = env.controller.edge
    assert edge is not None
    fanout = workers_of(env).provider
    refusing = FaultyEdge(fanout.workers[1])
    refusing.plan.fail_next("apply_modules", 1000, kind="permanent")
    fanout.workers[1] = refusing

    # Let anyone in: worker 2 refuses the chain, so both keep basicAuth.
    await env.kube.apply(module_set("auth", {"headers": {"request": {"set": {"x-a": "b"}}}}))
    await env.until_route_error(HOST, "edge worker 2 of 2")
    # The Event is written after the actor's state changed (by the StatusWriter).
    events = await env.until_event("shop", "ModulesFailed")
    assert any("edge worker 2 of 2" in event["message"] for event in events)
    for worker in workers_of(env).workers:
        route = (await worker.client.snapshot()).route(host=HOST, route_id="Prefix:/")
        assert route is not None and route.modules["order"] == ["basicAuth"]
    assert [status for status, _ in await answers(env.edge_url, HOST, count=20)] == [401] * 20


async def test_metrics_add_up_the_requests_of_every_worker(env: Env) -> None:
    await env.kube.apply(ingress("shop", HOST))

    async def served() -> bool:
        return await answers(env.edge_url, HOST) == [(200, "backend web /")]

    await eventually(served, message=f"{HOST} answers through the workers")
    before = await edge_requests(env)
    assert [status for status, _ in await answers(env.edge_url, HOST, count=30)] == [200] * 30

    # A worker counts a request once its answer is sent, so the client may read the answer
    # before the count lands: wait for it (it was a race under load when asserted at once).
    async def summed() -> bool:
        return await edge_requests(env) == before + 30

    await eventually(summed, message="/metrics counts the 30 requests")
    per_worker = await served_per_worker(env, HOST)
    assert all(count > 0 for count in per_worker), per_worker  # both workers served


async def edge_requests(env: Env) -> float:
    admin = env.controller.admin_site
    assert admin is not None
    async with env.http.get(admin.url + "/metrics") as response:
        text = await response.text()
    total = 0.0
    for family in text_string_to_metric_families(text):
        if family.name == "interlock_http_requests":
            total += sum(
                sample.value
                for sample in family.samples
                if sample.name.endswith("_total") and sample.labels.get("target") == HOST
            )
    return total
