"""``/metrics``: Prometheus text that prometheus-client parses, with counters that move."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from interlock import __version__
from interlock.actors import topics
from interlock.actors.edge import EdgeActor, EdgeSettings
from interlock.actors.edge_messages import (
    HostPart,
    edge_address,
)
from interlock.actors.messages import (
    STATUS_WRITER,
)
from interlock.api.admin import AdminApp
from interlock.api.exposition import Registry
from interlock.api.metrics import (
    MetricsSources,
    controller_sources,
    metrics_registry,
    mount_metrics,
)
from interlock.api.serving import serve
from interlock.config import Address, EdgeConfig
from interlock.edge.faults import FaultyEdge
from interlock.edge.inprocess import InProcessEdge
from interlock.kube.events import EventRecorderStatistics
from interlock.kube.informer import InformerStatistics
from interlock.kube.lease import LeaderElectorStatistics
from interlock.kube.status import StatusPatcherStatistics
from interlock.mailbox import Actor, ActorSystem, BackoffPolicy
from interlock.mailbox.statistics import HANDLING_BUCKETS
from interlock.mailbox.testing import (
    ManualClock,
    ManualSleep,
    RecordingActor,
    handled_for,
    wait_idle,
    wait_until,
)
from interlock.model.edge import ingress_host_routes
from interlock.model.edge_board import RECONCILE_OUTCOMES, EdgeBoard, RouteState
from interlock.model.ingress import parse_ingress
from interlock.model.moduleset import parse_module_set
from interlock.model.service import parse_service
from tests.kit.edge_objects import ingress as ingress_json

if TYPE_CHECKING:
    from interlock.controller.app import Controller

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


async def _until(predicate: Callable[[], bool], *, within: float = 60.0) -> None:
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
            "interlock_edge_reconciles",
            "interlock_leader",
            "interlock_kube_events",
            "interlock_message_handling_seconds",
            "process_resident_memory_bytes",
            # What dashboards for any Python service look for, and the version serving.
            "interlock_build_info",
            "python_info",
            "python_gc_collections",
        } <= families
        route = (("kind", "route"),)
        assert before[("interlock_actors", route)] == 2
        assert before[("interlock_leader", ())] == 0
        assert before[("interlock_build_info", (("version", __version__),))] == 1

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
        board.reconciles["applied"] += 2
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
    assert after[("interlock_edge_reconciles_total", (("outcome", "applied"),))] == 2
    assert after[("interlock_edge_reconciles_total", (("outcome", "failed_permanent"),))] == 0

    # Every handler run (the failed one too) is one observation of its kind's histogram.
    runs = after[handled] + after[("interlock_messages_failed_total", route)]
    count = after[("interlock_message_handling_seconds_count", route)]
    assert count == runs >= 6
    infinity = (("kind", "route"), ("le", "+Inf"))
    assert after[("interlock_message_handling_seconds_bucket", infinity)] == count
    assert after[("interlock_message_handling_seconds_sum", route)] > 0


async def test_groups_without_a_source_are_left_out() -> None:
    admin = AdminApp(is_ready=lambda: True)
    mount_metrics(admin.app, MetricsSources())
    site = await serve(admin.app, Address("127.0.0.1", 0))
    try:
        _, _, families = await _scrape(site.url)
    finally:
        await site.stop()
    # The build info is the one family that needs no source.
    assert {name for name in families if name.startswith("interlock_")} == {"interlock_build_info"}


def _embedded_controller(**options: Any) -> Controller:
    """One replica on an embedded API server, with ``options`` on top of loopback addresses."""
    from interlock.config import (
        AdminConfig,
        ClusterConfig,
        ControllerConfig,
        LeadershipConfig,
        PolicyApiConfig,
    )
    from interlock.controller.app import Controller

    return Controller(
        ControllerConfig(
            cluster=ClusterConfig(embedded=True),
            policy=PolicyApiConfig(addr=Address("127.0.0.1", 0)),
            admin=AdminConfig(addr=Address("127.0.0.1", 0)),
            leadership=LeadershipConfig(duration=30.0, renew_deadline=20.0, retry_period=0.2),
            **options,
        )
    )


async def test_a_running_controller_exports_informer_and_actor_counters() -> None:
    controller = _embedded_controller()
    admin = AdminApp(is_ready=lambda: controller.ready)
    mount_metrics(admin.app, controller_sources(controller))
    site = await serve(admin.app, Address("127.0.0.1", 0))
    try:
        await controller.start()
        await controller.wait_ready()
        assert controller.elector is not None
        await _until(lambda: controller.inspect().leading)
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
        deadline = asyncio.get_running_loop().time() + 60
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


def _parse(registry: Registry) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(registry.exposition().decode()):
        assert family.documentation, f"{family.name} has no HELP text"
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


async def test_handling_seconds_is_a_cumulative_histogram_per_kind() -> None:
    timer = ManualClock(0.0)
    system = ActorSystem(timer=timer)
    try:
        await handled_for(system, timer, {"watch/a": (0.000002, 0.003, 0.5), "route/a": (30.0,)})
        samples = _parse(metrics_registry(MetricsSources(actors=system.statistics), process=False))
    finally:
        await system.shutdown(timeout=1.0)

    def buckets(kind: str) -> dict[float, float]:
        return {
            float(dict(labels)["le"]): value
            for (name, labels), value in samples.items()
            if name == "interlock_message_handling_seconds_bucket" and ("kind", kind) in labels
        }

    watch = buckets("watch")
    assert sorted(watch) == [*HANDLING_BUCKETS, math.inf]
    assert [watch[le] for le in (0.00001, 0.001, 0.01, 0.1, 1.0, math.inf)] == [1, 1, 2, 2, 3, 3]
    assert samples[("interlock_message_handling_seconds_count", (("kind", "watch"),))] == 3
    assert samples[
        ("interlock_message_handling_seconds_sum", (("kind", "watch"),))
    ] == pytest.approx(0.503002)
    route = buckets("route")
    assert route[10.0] == 0 and route[math.inf] == 1


# --- edge reconciles, driven through a real EdgeActor ----------------------------------------

HOST = "shop.example"


def _host_part(modules: dict[str, Any]) -> HostPart:
    ingress = parse_ingress(
        ingress_json(
            "web",
            HOST,
            modules="guard",
            class_name=None,
            uid="uid-web",
            created="2026-01-01T00:00:00Z",
        )
    )
    module_set = parse_module_set(
        {"metadata": {"name": "guard", "namespace": "default"}, "spec": {"modules": modules}}
    )
    service = parse_service(
        {"metadata": {"name": "web", "namespace": "default"}, "spec": {"ports": [{"port": 80}]}}
    )
    routes = ingress_host_routes(ingress, {module_set.key: module_set}, {}, {service.key: service})[
        HOST
    ]
    return HostPart(ingress=ingress.key, uid="uid-web", routes=tuple(routes))


def _headers(version: str) -> dict[str, Any]:
    return {"headers": {"request": {"add": {"X-Version": version}}}}


async def test_edge_reconciles_are_counted_by_outcome() -> None:
    sleep = ManualSleep(gated=True)
    system = ActorSystem(timer_sleep=sleep)
    inner = InProcessEdge()
    provider = FaultyEdge(inner)
    board = EdgeBoard()
    settings = EdgeSettings(
        provider=provider,
        board=board,
        backoff=BackoffPolicy(initial=1.0, maximum=8.0, jitter=0.5),
        rng=random.Random(1),
    )
    registry = metrics_registry(MetricsSources(edge_routes=lambda: board), process=False)

    def reconciles() -> dict[str, float]:
        return {
            dict(labels)["outcome"]: value
            for (name, labels), value in _parse(registry).items()
            if name == "interlock_edge_reconciles_total"
        }

    def served_backend() -> bool:
        route = inner.snapshot_now().route(host=HOST, route_id="Prefix:/")
        return route is not None and route.backend is not None

    def publish(part: HostPart) -> None:
        system.publish(topics.HOST.topic(HOST), str(part.ingress), part)
        system.spawn_or_get(edge_address(HOST), lambda: EdgeActor(host=HOST, settings=settings))

    system.spawn(STATUS_WRITER, RecordingActor)
    try:
        assert reconciles() == dict.fromkeys(RECONCILE_OUTCOMES, 0)

        # A new route whose modules fail for now: reserved (503), then retried and served.
        provider.plan.fail_next("apply_modules", kind="transient")
        publish(_host_part(_headers("a")))
        await wait_until(lambda: board.reconciles["reserved"] == 1)
        sleep.release()
        await wait_until(served_backend)
        await wait_idle(system)
        assert reconciles() == {
            **dict.fromkeys(RECONCILE_OUTCOMES, 0),
            "failed_transient": 1,
            "reserved": 1,
            "applied": 1,
            "attached": 1,
        }

        # New modules the provider refuses: the route keeps its configuration, not retried.
        provider.plan.fail_next("apply_modules", kind="permanent")
        publish(_host_part(_headers("b")))
        await wait_until(lambda: board.reconciles["failed_permanent"] == 1)

        # The Ingress goes away: its route is removed.
        system.unpublish(topics.HOST.topic(HOST), "default/web")
        await wait_until(lambda: inner.snapshot_now().route(host=HOST, route_id="Prefix:/") is None)
        await wait_idle(system)
        counted = reconciles()
    finally:
        await system.shutdown(timeout=1.0)

    assert counted["failed_permanent"] == 1
    assert counted["removed"] == 1
    assert counted["applied"] == 1
    assert counted["tls_set"] == 0


async def test_a_running_controller_with_an_edge_exports_reconciles_and_events() -> None:
    controller = _embedded_controller(edge=EdgeConfig(addr=Address("127.0.0.1", 0)))
    registry = metrics_registry(controller_sources(controller), process=False)
    created = ("interlock_kube_events_total", (("outcome", "created"),))
    applied = ("interlock_edge_reconciles_total", (("outcome", "applied"),))
    attached = ("interlock_edge_reconciles_total", (("outcome", "attached"),))
    try:
        await controller.start()
        await controller.wait_ready()
        await _until(lambda: controller.inspect().leading)
        before = _parse(registry)
        assert before[created] == 0 and before[applied] == 0
        assert controller.embedded is not None
        store = controller.embedded.store
        store.create(
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "IngressClass",
                "metadata": {"name": "interlock"},
                "spec": {"controller": "interlock.dev/ingress-controller"},
            }
        )
        store.create(
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "Ingress",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {
                    "ingressClassName": "interlock",
                    "rules": [
                        {
                            "host": "web.example",
                            "http": {
                                "paths": [
                                    {
                                        "path": "/",
                                        "pathType": "Prefix",
                                        "backend": {
                                            "service": {"name": "web", "port": {"number": 80}}
                                        },
                                    }
                                ]
                            },
                        }
                    ],
                },
            }
        )
        # ModulesApplied and BackendAttached, recorded by the leader as Kubernetes Events.
        await _until(lambda: _parse(registry).get(created, 0) >= 2, within=60.0)
        after = _parse(registry)
    finally:
        await controller.stop()

    # The families docs/operations.md lists, each with HELP text (``_parse`` checks it), from the
    # real wiring.
    exported = {name for name, _ in after}
    assert {
        "interlock_mailbox_depth",
        "interlock_messages_handled_total",
        "interlock_message_handling_seconds_bucket",
        "interlock_actor_restarts_total",
        "interlock_dead_letters_total",
        "interlock_informer_events_total",
        "interlock_informer_relists_total",
        "interlock_status_patches_total",
        "interlock_edge_reconciles_total",
        "interlock_kube_events_total",
        "interlock_leader",
    } <= exported
    ingress_informer = ("interlock_informer_events_total", (("informer", "Ingress.v1"),))
    assert after[ingress_informer] >= 1
    assert after[("interlock_leader", ())] == 1

    assert after[applied] == 1
    assert after[attached] == 1
    assert after[("interlock_kube_events_total", (("outcome", "failed"),))] == 0
