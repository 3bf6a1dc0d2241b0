"""``interlock run --edge-workers 2``: the controller programs two ``interlock edge`` worker
processes on one port as one data plane.

A ModuleSet that one worker refuses leaves the route on its last good chain in both workers,
and the route's state and Event name the worker; ``/metrics`` counts the requests of both.
The workers resolve backends through cluster DNS; here ``--upstream`` points ``default/web:80``
at a local backend instead.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import bcrypt
import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from interlock.cli import build_parser
from interlock.cli.run import config_from_args
from interlock.config import Address, EdgeConfig
from interlock.controller.app import Controller
from interlock.edge.faults import FaultyEdge
from interlock.kube.resources import INGRESS, INGRESS_CLASS, MODULE_SET, SECRET, SERVICE
from interlock.kube.transport import request_json
from interlock.mailbox import BackoffPolicy
from tests.kit.e2e_clients import Cluster, controller_config, eventually, object_events
from tests.kit.edge_objects import INGRESS_CLASS_OBJ, backend_service, ingress, module_set

pytestmark = pytest.mark.timeout(300)

CRDS = Path(__file__).resolve().parents[2] / "manifests" / "crds"
RESOURCES = {r.kind: r for r in (INGRESS, INGRESS_CLASS, MODULE_SET, SECRET, SERVICE)}
PASSWORD = "s3cret-pw"
HTPASSWD = "alice:" + bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
GOOD_AUTH = {"Authorization": "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()}
AUTH = {"basicAuth": {"realm": "shop", "secretRef": {"name": "users", "key": "htpasswd"}}}
HOST = "shop.example"


def test_the_flag_takes_a_count_or_auto() -> None:
    def parse(*extra: str) -> int:
        args = ["run", "--edge-addr", "127.0.0.1:0", *extra]
        return config_from_args(build_parser().parse_args(args)).edge.workers

    assert parse() == 1
    assert parse("--edge-workers", "3") == 3
    assert parse("--edge-workers", "auto") >= 1
    with pytest.raises(SystemExit, match="at least 1"):
        parse("--edge-workers", "0")
    with pytest.raises(SystemExit, match="needs --edge-addr"):
        config_from_args(build_parser().parse_args(["run", "--edge-workers", "2"]))


@dataclass
class Workers:
    controller: Controller
    url: str
    http: aiohttp.ClientSession
    api: Any

    async def create(self, obj: dict[str, Any]) -> None:
        path = RESOURCES[obj["kind"]].collection_path(namespace=obj["metadata"].get("namespace"))
        await request_json(self.api, method="POST", path=path, what="create", body=obj)

    async def set_spec(self, obj: dict[str, Any]) -> None:
        """A merge patch of ``spec``: no resourceVersion, so the controller's status writes
        in between cannot make it conflict."""
        resource = RESOURCES[obj["kind"]]
        meta = obj["metadata"]
        path = resource.object_path(namespace=meta.get("namespace"), name=meta["name"])
        await request_json(
            self.api,
            method="PATCH",
            path=path,
            what="patch",
            body={"spec": obj["spec"]},
            content_type="application/merge-patch+json",
        )

    async def statuses(self, count: int, **headers: str) -> list[int]:
        """``count`` requests, each on a connection of its own (SO_REUSEPORT spreads
        connections, not requests)."""
        answers = []
        for _ in range(count):
            async with (
                aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as one,
                one.get(self.url, headers={"Host": HOST, **headers}) as response,
            ):
                await response.read()
                answers.append(response.status)
        return answers


async def backend_app() -> web.AppRunner:
    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hello\n")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", hello)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner


@pytest.fixture
async def workers(cluster: Cluster, kubeconfig: str) -> AsyncIterator[Workers]:
    await cluster.apply_manifests([CRDS])
    backend = await backend_app()
    port = backend.addresses[0][1]
    config = controller_config(
        kubeconfig,
        identity="edge-workers",
        edge=EdgeConfig(addr=Address(host="127.0.0.1", port=0), workers=2),
    )
    controller = Controller(config)
    assert controller.edge is not None and controller.edge.workers is not None
    controller.edge.workers.child_args += ["--upstream", f"default/web:80=127.0.0.1:{port}"]
    controller.edge.backoff = BackoffPolicy(initial=0.02, maximum=0.2)
    await controller.start()
    try:
        await controller.wait_ready(within=120.0)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
            running = Workers(controller, controller.edge.url + "/", http, cluster.api)
            for obj in (
                INGRESS_CLASS_OBJ,
                backend_service("web"),
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": "users", "namespace": "default"},
                    "data": {"htpasswd": base64.b64encode(HTPASSWD.encode()).decode()},
                },
            ):
                await running.create(obj)
            yield running
    finally:
        await controller.stop()
        await backend.cleanup()


async def test_a_modules_change_one_worker_refuses_leaves_both_on_the_last_good_chain(
    workers: Workers,
) -> None:
    await workers.create(module_set("auth", AUTH))
    await workers.create(ingress("shop", HOST, modules="auth"))

    async def served() -> bool:
        return (await workers.statuses(1, **GOOD_AUTH)) == [200]

    await eventually(served, message=f"{HOST} answers through the workers")
    edge = workers.controller.edge
    assert edge is not None and edge.workers is not None
    fanout = edge.workers.provider
    refusing = FaultyEdge(fanout.workers[1])
    refusing.plan.fail_next("apply_modules", 1000, kind="permanent")
    fanout.workers[1] = refusing

    # Let anyone in: worker 2 refuses the chain, so both keep basicAuth.
    await workers.set_spec(module_set("auth", {"headers": {"request": {"set": {"x-a": "b"}}}}))

    def refused() -> bool:
        state = edge.inspect().route(host=HOST, route_id="Prefix:/")
        return state is not None and "edge worker 2 of 2" in (state.last_error or "")

    await eventually(refused, message="the route's state names the refusing worker")

    async def reported() -> bool:
        events = await object_events(workers.api, "shop", "ModulesFailed")
        return any("edge worker 2 of 2" in event["message"] for event in events)

    # The Event is written after the actor's state changed (by the StatusWriter).
    await eventually(reported, message="a ModulesFailed Event names the refusing worker")
    for worker in edge.workers.workers:
        route = (await worker.client.snapshot()).route(host=HOST, route_id="Prefix:/")
        assert route is not None and route.modules["order"] == ["basicAuth"]
    statuses = await workers.statuses(20)
    assert statuses == [401] * 20


async def test_metrics_add_up_the_requests_of_every_worker(workers: Workers) -> None:
    await workers.create(ingress("shop", HOST))

    async def served() -> bool:
        return (await workers.statuses(1)) == [200]

    await eventually(served, message=f"{HOST} answers through the workers")
    before = await edge_requests(workers)
    assert await workers.statuses(30) == [200] * 30
    edge = workers.controller.edge
    assert edge is not None and edge.workers is not None
    await edge.workers.refresh_traffic()
    per_worker = [
        sum(v for k, v in stats.requests.items() if k[1] == HOST)
        for stats in edge.workers.traffic()
    ]
    assert all(count > 0 for count in per_worker), per_worker  # both workers served
    assert await edge_requests(workers) == before + 30


async def edge_requests(workers: Workers) -> float:
    admin = workers.controller.admin_site
    assert admin is not None
    async with workers.http.get(admin.url + "/metrics") as response:
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
