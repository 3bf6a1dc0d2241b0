"""``/metrics``: Prometheus text that prometheus-client parses, with counters that move."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from interlock.actors.edge import EdgeBoard, RouteState
from interlock.api.admin import AdminApp
from interlock.api.metrics import MetricsSources, controller_sources, mount_metrics
from interlock.api.serving import serve
from interlock.config import Address
from interlock.kube.events import EventRecorderStatistics
from interlock.kube.informer import InformerStatistics
from interlock.kube.lease import LeaderElectorStatistics
from interlock.kube.status import StatusPatcherStatistics
from interlock.mailbox import Actor, ActorSystem

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


class Failing(Exception):
    pass


class Counting(Actor):
    """Handles ints; raises on negative ones (so failures and restarts can be counted)."""

    async def receive(self, message: object) -> None:
        if isinstance(message, int) and message < 0:
            raise Failing("negative")


def _informer(events: int, relists: int) -> InformerStatistics:
    # Every counter zero but these, whatever other counters the informer grows later.
    zeros: dict[str, object] = {field.name: 0 for field in dataclasses.fields(InformerStatistics)}
    return InformerStatistics(
        **{**zeros, "objects": events, "events": events, "relists": relists, "last_error": None}
    )


async def _scrape(url: str) -> tuple[str, Samples, set[str]]:
    async with aiohttp.ClientSession() as http, http.get(f"{url}/metrics") as response:
        assert response.status == 200
        content_type = response.headers["Content-Type"]
        text = await response.text()
    samples: Samples = {}
    families: set[str] = set()
    for family in text_string_to_metric_families(text):
        families.add(family.name)
        assert family.documentation, f"{family.name} has no HELP text"
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return content_type, samples, families


async def _until(predicate: Callable[[], bool], *, within: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def test_metrics_parse_and_counters_move_when_messages_flow() -> None:
    system = ActorSystem()
    informers = {"services": _informer(3, 0)}
    leader = LeaderElectorStatistics(
        is_leader=False,
        holder="",
        acquisitions=0,
        renewals=0,
        conflicts=0,
        failures=0,
        last_error=None,
    )
    patches = StatusPatcherStatistics(written=0, unchanged=0, gone=0, rejected=0, failed=0)
    board = EdgeBoard()
    board.host("demo.localhost").routes["r1"] = RouteState(route_id="r1", backend="default/a:80")
    admin = AdminApp(is_ready=lambda: True)
    mount_metrics(
        admin.app,
        MetricsSources(
            actors=system.statistics,
            informers=lambda: informers,
            status_patches=lambda: patches,
            edge_routes=lambda: board,
            leader=lambda: leader,
            events=lambda: EventRecorderStatistics(created=2, aggregated=1, failed=0),
        ),
    )
    site = await serve(admin.app, Address("127.0.0.1", 0))
    try:
        system.spawn("route/default/web", Counting)
        system.spawn("route/default/api", Counting)
        content_type, before, families = await _scrape(site.url)
        assert content_type.startswith("text/plain")
        assert {
            "interlock_actors",
            "interlock_mailbox_depth",
            "interlock_messages_handled",
            "interlock_messages_failed",
            "interlock_actor_restarts",
            "interlock_dead_letters",
            "interlock_informer_events",
            "interlock_informer_relists",
            "interlock_status_patches",
            "interlock_edge_routes",
            "interlock_edge_routes_failing",
            "interlock_leader",
            "interlock_kube_events",
            "process_resident_memory_bytes",
        } <= families
        route = (("kind", "route"),)
        assert before[("interlock_actors", route)] == 2
        assert before[("interlock_leader", ())] == 0

        for _ in range(5):
            system.tell("route/default/web", 1)
        system.tell("route/default/api", -1)
        system.tell("route/nowhere", 1)
        await _until(lambda: system.statistics().kinds["route"].restarts >= 1)
        informers["services"] = _informer(4, 1)
        leader = dataclasses.replace(leader, is_leader=True, acquisitions=1)
        patches = dataclasses.replace(patches, written=3, unchanged=1)
        board.host("demo.localhost").routes["r2"] = RouteState(
            route_id="r2", last_error="basicAuth: bad hash", permanent=True
        )
        _, after, _ = await _scrape(site.url)
    finally:
        await site.stop()
        await system.shutdown()

    handled = ("interlock_messages_handled_total", route)
    assert after[handled] >= before[handled] + 5
    assert after[("interlock_messages_failed_total", route)] == 1
    assert after[("interlock_actor_restarts_total", route)] == 1
    assert after[("interlock_dead_letters_total", ())] >= 1
    services = (("informer", "services"),)
    assert after[("interlock_informer_events_total", services)] == 4
    assert after[("interlock_informer_relists_total", services)] == 1
    assert after[("interlock_leader", ())] == 1
    assert after[("interlock_status_patches_total", (("outcome", "written"),))] == 3
    assert after[("interlock_status_patches_total", (("outcome", "unchanged"),))] == 1
    assert before[("interlock_edge_routes", (("state", "serving"),))] == 1
    assert after[("interlock_edge_routes", (("state", "no_backend"),))] == 1
    assert after[("interlock_edge_routes_failing", (("error", "permanent"),))] == 1
    assert after[("interlock_kube_events_total", (("outcome", "created"),))] == 2


async def test_groups_without_a_source_are_left_out() -> None:
    admin = AdminApp(is_ready=lambda: True)
    mount_metrics(admin.app, MetricsSources())
    site = await serve(admin.app, Address("127.0.0.1", 0))
    try:
        _, _, families = await _scrape(site.url)
    finally:
        await site.stop()
    assert not {name for name in families if name.startswith("interlock_")}


async def test_a_running_controller_exports_informer_and_actor_counters() -> None:
    from interlock.app import Controller
    from interlock.config import ControllerConfig

    controller = Controller(
        ControllerConfig(
            embedded=True,
            policy_addr=Address("127.0.0.1", 0),
            admin_addr=Address("127.0.0.1", 0),
            lease_duration=2.0,
            lease_renew_deadline=1.5,
            lease_retry_period=0.2,
        )
    )
    admin = AdminApp(is_ready=lambda: controller.ready)
    mount_metrics(admin.app, controller_sources(controller))
    site = await serve(admin.app, Address("127.0.0.1", 0))
    try:
        await controller.start()
        await controller.wait_ready()
        assert controller.elector is not None
        await _until(lambda: controller.elector is not None and controller.elector.is_leader)
        _, before, _ = await _scrape(site.url)
        assert controller.embedded is not None
        controller.embedded.store.create(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"ports": [{"name": "http", "port": 80}]},
            }
        )
        services = (("informer", "Service.v1"),)
        events = "interlock_informer_events_total"
        after = before
        deadline = asyncio.get_running_loop().time() + 10
        while after.get((events, services), 0) <= before.get((events, services), 0):
            assert asyncio.get_running_loop().time() < deadline, sorted(after)
            await asyncio.sleep(0.05)
            _, after, _ = await _scrape(site.url)
    finally:
        await site.stop()
        await controller.stop()
    assert after[("interlock_leader", ())] == 1
    handled = sum(v for (name, _), v in after.items() if name == "interlock_messages_handled_total")
    handled_before = sum(
        v for (name, _), v in before.items() if name == "interlock_messages_handled_total"
    )
    assert handled > handled_before
