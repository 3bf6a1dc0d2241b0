"""EdgeActor on a real ActorSystem against InProcessEdge / FaultyEdge: the fail-closed rules."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from interlock.actors import topics
from interlock.actors.edge import EdgeActor, EdgeSettings
from interlock.actors.edge_messages import (
    SECRET_KEY,
    HostPart,
    RecordEvent,
    SecretData,
    edge_address,
)
from interlock.actors.messages import (
    STATUS_WRITER,
)
from interlock.edge.faults import FaultyEdge
from interlock.edge.inprocess import InProcessEdge
from interlock.edge.provider import (
    BackendTarget,
    EdgeCall,
    EdgeProvider,
    ForwardingEdge,
)
from interlock.mailbox import ActorSystem, BackoffPolicy, Unpublished
from interlock.mailbox.testing import (
    ManualSleep,
    RecordingActor,
    capture_trace,
    wait_idle,
    wait_until,
)
from interlock.model.edge import ingress_host_routes
from interlock.model.edge_board import EdgeBoard
from interlock.model.ingress import parse_ingress
from interlock.model.meta import ObjectKey
from interlock.model.moduleset import Modules, SecretValue, parse_module_set, parse_secret
from interlock.model.service import ServicePortKey, parse_service
from tests.kit.edge_objects import ingress as ingress_json
from tests.kit.edge_routes import serve_route
from tests.kit.tls_certs import self_signed

HOST = "shop.example"
BACKOFF = BackoffPolicy(initial=1.0, maximum=8.0, jitter=0.5)


def ingress(name: str, *, path: str = "/", created: str = "2026-01-01T00:00:00Z") -> Any:
    return parse_ingress(
        ingress_json(
            name,
            HOST,
            modules="guard",
            path=path,
            class_name=None,
            uid=f"uid-{name}",
            created=created,
        )
    )


def module_set(modules: dict[str, Any]) -> Any:
    return parse_module_set(
        {"metadata": {"name": "guard", "namespace": "default"}, "spec": {"modules": modules}}
    )


SERVICE = parse_service(
    {"metadata": {"name": "web", "namespace": "default"}, "spec": {"ports": [{"port": 80}]}}
)
HEADERS_A = {"headers": {"request": {"add": {"X-Version": "a"}}}}
HEADERS_B = {"headers": {"request": {"add": {"X-Version": "b"}}}}
BAD_CIDR = {"ipRestriction": {"allow": ["10.0.0.0/33"]}}
BASIC_AUTH = {"basicAuth": {"secretRef": {"name": "users", "key": "htpasswd"}}}
HTPASSWD = "u:$2b$04$Szw.0F.Bv9LaUHdRjl2hXeUIki1gEPn/nZ9Ygn5Jmr1Xc6VL6el/C"
USERS = parse_secret(
    {"metadata": {"name": "users", "namespace": "default"}, "stringData": {"htpasswd": HTPASSWD}}
)


def part(
    name: str = "web",
    *,
    modules: dict[str, Any] | None = HEADERS_A,
    path: str = "/",
    created: str = "2026-01-01T00:00:00Z",
    with_service: bool = True,
    secrets: list[Any] | None = None,
) -> HostPart:
    obj = ingress(name, path=path, created=created)
    sets = (
        {}
        if modules is None
        else {ObjectKey(namespace="default", name="guard"): module_set(modules)}
    )
    services = {SERVICE.key: SERVICE} if with_service else {}
    routes = ingress_host_routes(obj, sets, {s.key: s for s in secrets or []}, services)[HOST]
    return HostPart(ingress=obj.key, uid=obj.metadata.uid, routes=tuple(routes))


@dataclass
class Edge:
    system: ActorSystem
    inner: InProcessEdge
    provider: FaultyEdge
    board: EdgeBoard
    sleep: ManualSleep
    events: list[object] = field(default_factory=list)
    adopt: bool = False
    missing_grace: float = 0.0

    def publish(self, value: HostPart) -> None:
        self.system.publish(topics.HOST.topic(HOST), str(value.ingress), value)
        self.system.spawn_or_get(edge_address(HOST), self.actor)

    def withdraw(self, value: HostPart) -> None:
        self.system.unpublish(topics.HOST.topic(HOST), str(value.ingress))

    def actor(self) -> EdgeActor:
        return EdgeActor(
            host=HOST,
            settings=EdgeSettings(
                provider=self.provider,
                board=self.board,
                backoff=BACKOFF,
                rng=random.Random(1),
                adopt_on_spawn=self.adopt,
                missing_grace=self.missing_grace,
            ),
        )

    def route(self, route_id: str = "Prefix:/") -> Any:
        return self.inner.snapshot_now().route(host=HOST, route_id=route_id)

    def reasons(self) -> list[str]:
        return [e.reason for e in self.events if isinstance(e, RecordEvent)]


async def started(sleep: ManualSleep, provider: EdgeProvider | None = None) -> Edge:
    system = ActorSystem(timer_sleep=sleep)
    inner = InProcessEdge()
    faulty = FaultyEdge(provider or inner)
    edge = Edge(system, inner, faulty, EdgeBoard(), sleep)
    system.spawn(STATUS_WRITER, lambda: RecordingActor(edge.events))
    return edge


@pytest.fixture
async def edge() -> AsyncIterator[Edge]:
    running = await started(ManualSleep(gated=True))
    yield running
    await running.system.shutdown()


async def test_modules_are_applied_before_the_backend_is_attached(edge: Edge) -> None:
    edge.publish(part())
    await wait_until(lambda: edge.route() is not None and edge.route().backend is not None)

    served = edge.provider.served_routes(host=HOST, route_id="Prefix:/")
    assert [c.method for c in served] == ["apply_modules", "attach_backend"]
    assert served[0].applied and served[0].backend is None
    assert served[1].modules == served[0].modules
    assert edge.route().backend == BackendTarget(ServicePortKey("default", "web", 80))
    await wait_idle(edge.system)
    assert edge.reasons() == ["ModulesApplied", "BackendAttached"]
    events = [e for e in edge.events if isinstance(e, RecordEvent)]
    assert events[0].regarding["uid"] == "uid-web"


async def test_a_new_route_whose_modules_fail_serves_without_a_backend(edge: Edge) -> None:
    edge.publish(part(modules=BAD_CIDR))
    await wait_until(lambda: edge.route() is not None)
    await wait_idle(edge.system)

    assert edge.route().backend is None
    assert edge.provider.plan.calls["attach_backend"] == 0
    assert edge.reasons() == ["ModulesFailed"]
    state = edge.board.route(host=HOST, route_id="Prefix:/")
    assert state is not None and state.reserved and state.permanent
    assert "10.0.0.0/33" in (state.last_error or "")

    # Fixing the ModuleSet serves the route, modules first.
    edge.publish(part(modules=HEADERS_A))
    await wait_until(lambda: edge.route().backend is not None)
    assert edge.route().modules["order"] == ["headers"]


async def test_a_missing_secret_is_applied_the_moment_it_appears(edge: Edge) -> None:
    edge.publish(part(modules=BASIC_AUTH))
    await wait_until(lambda: "ModulesFailed" in edge.reasons())
    assert edge.route().backend is None
    state = edge.board.route(host=HOST, route_id="Prefix:/")
    assert (
        state is not None and not state.permanent and "SecretNotFound" in (state.last_error or "")
    )
    assert edge.sleep.delays == []  # no timer: the Secret arrives as a new desired state

    edge.publish(part(modules=BASIC_AUTH, secrets=[USERS]))
    await wait_until(lambda: edge.route().backend is not None)
    assert edge.route().modules["order"] == ["basicAuth"]


async def test_an_existing_route_keeps_its_last_good_configuration(edge: Edge) -> None:
    edge.publish(part(modules=HEADERS_A))
    await wait_until(lambda: edge.route() is not None and edge.route().backend is not None)
    good = edge.route()
    calls = edge.provider.plan.calls.copy()

    edge.publish(part(modules=BAD_CIDR))
    await wait_until(lambda: edge.reasons().count("ModulesFailed") == 1)
    await wait_idle(edge.system)
    assert edge.route() == good
    assert edge.provider.plan.calls == calls  # nothing sent to the provider

    # A provider refusal of new modules also leaves the route as it was.
    edge.provider.plan.fail_next("apply_modules", kind="permanent")
    edge.publish(part(modules=HEADERS_B))
    await wait_until(lambda: edge.reasons().count("ModulesFailed") == 2)
    await wait_idle(edge.system)
    assert edge.route() == good
    message = [e for e in edge.events if isinstance(e, RecordEvent)][-1].message
    assert "keeps serving its previous modules and backend" in message


async def test_a_permanent_failure_is_not_retried_until_an_input_changes(edge: Edge) -> None:
    edge.provider.plan.fail_next("apply_modules", kind="permanent")
    edge.publish(part(modules=HEADERS_A))
    await wait_until(lambda: edge.provider.plan.injected["apply_modules"] == 1)
    await wait_idle(edge.system)
    # Unrelated messages (a retry reminder, a re-published equal part) do not retry it.
    edge.publish(part(modules=HEADERS_A))
    await wait_idle(edge.system)
    # The failed call and the reservation of the new route's path; no retry.
    assert edge.provider.plan.calls["apply_modules"] == 2
    assert edge.sleep.delays == []
    assert edge.route().backend is None  # reserved: answers 503

    edge.publish(part(modules=HEADERS_B))
    await wait_until(lambda: edge.route() is not None and edge.route().backend is not None)
    assert edge.provider.plan.calls["apply_modules"] == 3


async def test_transient_failures_are_retried_with_backoff_and_retry_after() -> None:
    running = await started(ManualSleep())  # timers fire at once; delays are recorded
    try:
        running.publish(part(modules=HEADERS_A))
        await wait_until(
            lambda: running.route() is not None and running.route().backend is not None
        )
        plan = running.provider.plan
        plan.fail_next("apply_modules", 2)
        running.publish(part(modules=HEADERS_B))
        await wait_until(
            lambda: (
                running.route().modules["modules"]["headers"]["request"]["add"]
                == {"X-Version": "b"}
            )
        )
        first, second = running.sleep.delays
        assert 1.0 <= first <= 1.5 and 2.0 <= second <= 3.0  # BACKOFF with jitter
        plan.fail_next("attach_backend", retry_after=7.0)
        running.publish(part(modules=HEADERS_B, with_service=False))
        await wait_until(lambda: running.route().backend.exists is False)
        assert running.sleep.delays[2] == 7.0  # the provider's Retry-After
        assert plan.injected["apply_modules"] == 2 and plan.injected["attach_backend"] == 1
        # One ModulesFailed for the first failure, not one per retry.
        await wait_idle(running.system)
        assert running.reasons().count("ModulesFailed") == 1
    finally:
        await running.system.shutdown()


async def test_the_next_retry_shows_on_the_board(edge: Edge) -> None:
    edge.provider.plan.fail_next("apply_modules", retry_after=30.0)
    edge.publish(part())
    await wait_until(lambda: edge.sleep.delays == [30.0])
    await wait_idle(edge.system)
    state = edge.board.to_json()["hosts"][0]["routes"][0]
    assert state["attempts"] == 1 and not state["permanent"]
    assert 29.0 <= state["nextRetryInSeconds"] <= 30.0
    assert "injected transient fault" in state["lastError"]
    edge.sleep.release()
    await wait_until(lambda: edge.route() is not None and edge.route().backend is not None)


class GatedEdge(ForwardingEdge):
    """An InProcessEdge whose apply_modules waits for the test, recording what it was given."""

    def __init__(self, inner: InProcessEdge) -> None:
        super().__init__(inner)
        self.applied: list[Modules] = []
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    async def before(self, call: EdgeCall) -> None:
        if call.method == "apply_modules":
            assert call.modules is not None
            self.applied.append(call.modules)
            self.entered.set()
            await self.gate.wait()


async def test_after_a_step_the_latest_desired_state_wins() -> None:
    inner = InProcessEdge()
    gated = GatedEdge(inner)
    running = await started(ManualSleep(), provider=gated)
    running.inner = inner
    try:
        running.publish(part(modules=HEADERS_A))
        await gated.entered.wait()
        # While the provider is busy with version a, b then c are desired.
        for version in ("b", "c"):
            running.publish(part(modules={"headers": {"request": {"add": {"X-Version": version}}}}))
        gated.gate.set()
        await wait_until(
            lambda: running.route() is not None and running.route().backend is not None
        )
        versions = [m.headers.request.add["X-Version"] for m in gated.applied if m.headers]
        assert versions == ["a", "c"]  # b was never applied: it was stale before its turn
        # The backend went to the route only once the latest modules were applied.
        served = running.provider.served_routes(host=HOST, route_id="Prefix:/")
        attached = [c for c in served if c.method == "attach_backend"]
        assert len(attached) == 1
    finally:
        await running.system.shutdown()


async def test_routes_no_longer_desired_are_removed_and_the_actor_stops(edge: Edge) -> None:
    first, second = part(path="/"), part("api", path="/api")
    edge.publish(first)
    edge.publish(second)
    await wait_until(
        lambda: edge.route("Prefix:/api") is not None and edge.route("Prefix:/api").backend
    )
    edge.withdraw(second)
    await wait_until(lambda: edge.route("Prefix:/api") is None)
    assert edge.route() is not None
    edge.withdraw(first)
    await wait_until(lambda: not edge.system.exists(edge_address(HOST)))
    assert edge.inner.snapshot_now().hosts == ()
    assert edge.board.hosts == {}


async def test_two_ingresses_on_one_path_the_older_wins_and_the_other_gets_a_conflict(
    edge: Edge,
) -> None:
    edge.publish(part("newer", modules=HEADERS_B, created="2026-02-01T00:00:00Z"))
    edge.publish(part("older", modules=HEADERS_A, created="2026-01-01T00:00:00Z"))
    await wait_until(lambda: "Conflict" in edge.reasons())
    await wait_until(lambda: edge.route() is not None and edge.route().backend is not None)
    await wait_idle(edge.system)
    served = edge.route().modules["modules"]["headers"]["request"]["add"]
    assert served == {"X-Version": "a"}  # the older Ingress's modules
    conflict = next(e for e in edge.events if isinstance(e, RecordEvent) and e.reason == "Conflict")
    assert conflict.regarding["name"] == "newer"
    assert "default/older" in conflict.message
    state = edge.board.route(host=HOST, route_id="Prefix:/")
    assert state is not None and state.ingress == "default/older"


async def test_a_missing_backend_service_is_attached_as_not_existing(edge: Edge) -> None:
    edge.publish(part(with_service=False))
    await wait_until(lambda: edge.route() is not None and edge.route().backend is not None)
    assert edge.route().backend.exists is False
    edge.publish(part(with_service=True))
    await wait_until(lambda: edge.route().backend.exists)


async def test_an_adopting_actor_removes_routes_it_does_not_want() -> None:
    running = await started(ManualSleep())
    running.adopt = True  # a data plane that outlived the controller (HttpEdge)
    try:
        await serve_route(running.inner, host=HOST, route_id="Prefix:/old", path="/old")
        running.publish(part())
        await wait_until(
            lambda: running.route() is not None and running.route().backend is not None
        )
        await wait_until(lambda: running.route("Prefix:/old") is None)
    finally:
        await running.system.shutdown()


async def test_a_restarted_data_plane_is_programmed_again_once_its_snapshot_is_read() -> None:
    running = await started(ManualSleep())
    running.adopt = True  # a data plane at --edge-admin-url, watched (edge-instance)
    try:
        running.system.publish(topics.EDGE_INSTANCE_TOPIC, "instance", "a")
        running.publish(part())
        await wait_until(
            lambda: running.route() is not None and running.route().backend is not None
        )
        await wait_idle(running.system)
        # It restarts empty; reading what it serves fails once (retried), then every route is
        # programmed again, modules before the backend.
        running.inner = running.provider.inner = InProcessEdge()
        running.provider.plan.fail_next("snapshot")
        running.provider.served.clear()
        running.system.publish(topics.EDGE_INSTANCE_TOPIC, "instance", "b")
        await wait_until(
            lambda: running.route() is not None and running.route().backend is not None
        )
        served = running.provider.served_routes(host=HOST, route_id="Prefix:/")
        assert [c.method for c in served] == ["apply_modules", "attach_backend"]
        assert running.provider.plan.injected["snapshot"] == 1
        # The same instance again changes nothing.
        calls = sum(running.provider.plan.calls.values())
        running.system.publish(topics.EDGE_INSTANCE_TOPIC, "instance", "b")
        await wait_idle(running.system)
        assert sum(running.provider.plan.calls.values()) == calls
    finally:
        await running.system.shutdown()


class CrashOnce(FaultyEdge):
    """Raises a bug-like error (not an EdgeError) on the first attach_backend."""

    crashed = False

    async def attach_backend(self, *, host: str, route_id: str, backend: BackendTarget) -> None:
        if not self.crashed:
            self.crashed = True
            raise RuntimeError("a bug in the provider")
        await super().attach_backend(host=host, route_id=route_id, backend=backend)


async def test_a_restarted_actor_learns_what_is_served_and_finishes_the_job() -> None:
    inner = InProcessEdge()
    running = await started(ManualSleep(), provider=CrashOnce(inner))
    running.inner = inner
    try:
        running.publish(part())
        await wait_until(
            lambda: running.route() is not None and running.route().backend is not None
        )
        assert running.system.statistics().restarts == 1
    finally:
        await running.system.shutdown()


async def test_secret_values_reach_neither_the_board_nor_the_trace(edge: Edge) -> None:
    with capture_trace(edge.system) as trace:
        edge.publish(part(modules=BASIC_AUTH, secrets=[USERS]))
        await wait_until(lambda: edge.route() is not None and edge.route().backend is not None)
        await wait_idle(edge.system)
    visible = str(edge.board.to_json()) + trace.text() + str(edge.events)
    assert "Szw.0F" not in visible and "u:$2b" not in visible
    assert "basicAuth" in str(edge.board.to_json())


def tls_part() -> HostPart:
    obj = ingress("web")
    raw = obj.model_dump(by_alias=True, mode="json")
    raw["spec"]["tls"] = [{"hosts": [HOST], "secretName": "shop-tls"}]
    with_tls = parse_ingress(raw)
    sets = {ObjectKey(namespace="default", name="guard"): module_set(HEADERS_A)}
    routes = ingress_host_routes(with_tls, sets, {}, {SERVICE.key: SERVICE})[HOST]
    return HostPart(ingress=with_tls.key, uid="uid-web", routes=tuple(routes))


async def test_the_tls_secret_of_the_ingress_is_installed_once_it_exists(edge: Edge) -> None:
    edge.publish(tls_part())
    await wait_until(lambda: edge.route() is not None and edge.route().backend is not None)
    await wait_idle(edge.system)
    assert edge.inner.certificates.hosts() == set()
    state = edge.board.host(HOST)
    assert state.tls_error == "TLS Secret default/shop-tls not found"

    cert, key = self_signed(HOST)
    tls = SecretData(
        key=ObjectKey(namespace="default", name="shop-tls"),
        values={"tls.crt": SecretValue(cert.encode()), "tls.key": SecretValue(key.encode())},
    )
    edge.system.publish(
        topics.SECRET.topic(ObjectKey(namespace="default", name="shop-tls")), SECRET_KEY, tls
    )
    await wait_until(lambda: edge.inner.certificates.hosts() == {HOST})
    assert edge.board.host(HOST).tls_error is None
    assert "BEGIN" not in str(edge.board.to_json())

    # The Ingress gone: routes and certificate are removed, then the actor stops.
    edge.withdraw(tls_part())
    await wait_until(lambda: not edge.system.exists(edge_address(HOST)))
    assert edge.inner.certificates.hosts() == set()


async def test_a_route_that_comes_back_is_tried_again_at_once(edge: Edge) -> None:
    edge.provider.plan.fail_next("apply_modules", kind="permanent")
    edge.publish(part())
    await wait_until(lambda: edge.provider.plan.injected["apply_modules"] == 1)
    await wait_until(lambda: edge.route() is not None)  # reserved: answers 503
    edge.withdraw(part())
    await wait_until(lambda: edge.route() is None)
    # The same Ingress again (deleted and re-created, say): a new route, not a known failure.
    edge.publish(part())
    await wait_until(lambda: edge.route() is not None and edge.route().backend is not None)


class CrashOnUnpublished(EdgeActor):
    """Raises (like a bug would) the first time it is handed an Unpublished."""

    crashes = [1]

    async def receive(self, message: object) -> object | None:
        if isinstance(message, Unpublished) and self.crashes[0]:
            self.crashes[0] -= 1
            raise RuntimeError("a bug while handling a removal")
        return await super().receive(message)


async def test_routes_are_removed_even_when_the_actor_crashed_handling_the_removal(
    edge: Edge,
) -> None:
    def actor() -> EdgeActor:
        return CrashOnUnpublished(
            host=HOST,
            settings=EdgeSettings(provider=edge.provider, board=edge.board),
        )

    edge.system.spawn(edge_address(HOST), actor)
    edge.publish(part())
    await wait_until(lambda: edge.route() is not None and edge.route().backend is not None)
    edge.withdraw(part())
    # The Unpublished was lost with the crash; the fresh instance has no retained value to go by.
    await wait_until(lambda: not edge.system.exists(edge_address(HOST)))
    assert edge.route() is None
    assert edge.system.statistics().restarts == 1


async def test_a_host_with_many_routes_costs_one_step_per_change(edge: Edge) -> None:
    routes = []
    for index in range(100):
        routes.extend(part(path=f"/p{index}").routes)
    big = HostPart(ingress=ObjectKey(namespace="default", name="web"), uid="", routes=tuple(routes))
    edge.publish(big)
    await wait_until(
        lambda: (
            len(edge.inner.routes_of(HOST) or {}) == 100
            and all(r.backend is not None for r in (edge.inner.routes_of(HOST) or {}).values())
        )
    )
    calls = sum(edge.provider.plan.calls.values())
    assert calls == 200  # modules then backend, once per route
    # One route changes: one step for it, none for the 99 others.
    changed = list(routes)
    changed[7] = part(path="/p7", modules=HEADERS_B).routes[0]
    edge.publish(HostPart(ingress=big.ingress, uid="", routes=tuple(changed)))
    await wait_until(lambda: sum(edge.provider.plan.calls.values()) == calls + 1)
    await wait_idle(edge.system)
    assert sum(edge.provider.plan.calls.values()) == calls + 1


async def test_a_failed_reservation_is_forgotten_once_the_modules_are_applied() -> None:
    # The modules step fails, then the reservation the actor makes instead fails too; when the
    # modules retry succeeds first, the route is healthy and must not keep reporting an error.
    running = await started(ManualSleep())
    try:
        running.provider.plan.fail_next("apply_modules", 2)
        running.publish(part())
        await wait_until(
            lambda: running.route() is not None and running.route().backend is not None
        )
        await wait_idle(running.system)
        state = running.board.to_json()["hosts"][0]["routes"][0]
        assert state["lastError"] is None
        assert state["nextRetryInSeconds"] is None
    finally:
        await running.system.shutdown()


async def test_a_missing_backend_is_a_warning_event_not_an_attachment(edge: Edge) -> None:
    edge.publish(part(with_service=False))
    await wait_until(lambda: "BackendNotFound" in edge.reasons())
    await wait_idle(edge.system)
    assert "BackendAttached" not in edge.reasons()
    warning = next(
        e for e in edge.events if isinstance(e, RecordEvent) and e.reason == "BackendNotFound"
    )
    assert warning.type == "Warning"
    assert "backend Service default/web does not exist" in warning.message
    edge.publish(part(with_service=True))
    await wait_until(lambda: "BackendAttached" in edge.reasons())


async def test_fixing_a_module_set_records_a_recovery_as_the_newest_event(edge: Edge) -> None:
    edge.publish(part(modules=HEADERS_A))
    await wait_until(lambda: edge.route() is not None and edge.route().backend is not None)
    edge.publish(part(modules=BAD_CIDR))
    await wait_until(lambda: "ModulesFailed" in edge.reasons())
    # Back to what is served: no step to take, yet the Warning must not stay the newest Event.
    edge.publish(part(modules=HEADERS_A))
    await wait_until(lambda: "ModulesRecovered" in edge.reasons())
    await wait_idle(edge.system)
    newest = [e for e in edge.events if isinstance(e, RecordEvent)][-1]
    assert (newest.type, newest.reason) == ("Normal", "ModulesRecovered")


async def test_references_applied_together_get_a_moment_before_a_warning(edge: Edge) -> None:
    edge.missing_grace = 2.0
    edge.publish(part(modules=BASIC_AUTH))
    await wait_until(lambda: edge.sleep.delays == [2.0])
    await wait_idle(edge.system)
    assert "ModulesFailed" not in edge.reasons(), "the Secret may be on its way"
    # It arrives: no Warning ever, even once the grace is over.
    edge.publish(part(modules=BASIC_AUTH, secrets=[USERS]))
    await wait_until(lambda: edge.route() is not None and edge.route().backend is not None)
    edge.sleep.release()
    await wait_idle(edge.system)
    assert "ModulesFailed" not in edge.reasons()


async def test_a_reference_still_missing_after_the_grace_is_reported(edge: Edge) -> None:
    edge.missing_grace = 2.0
    edge.publish(part(modules=BASIC_AUTH))
    await wait_until(lambda: edge.sleep.delays == [2.0])
    edge.sleep.release()
    await wait_until(lambda: "ModulesFailed" in edge.reasons())
    failed = next(e for e in edge.events if isinstance(e, RecordEvent))
    assert "SecretNotFound" in failed.message
