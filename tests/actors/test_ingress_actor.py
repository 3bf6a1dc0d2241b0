"""IngressActor and the edge directories on a real ActorSystem, fed informer-style changes."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from interlock.actors import topics
from interlock.actors.directories import (
    EndpointsDirectory,
    IngressClassDirectory,
    IngressDirectory,
    ModuleSetDirectory,
    SecretDirectory,
)
from interlock.actors.edge_messages import (
    ENDPOINTS_DIRECTORY,
    INGRESS_CLASS_DIRECTORY,
    INGRESS_DIRECTORY,
    MODULESET_DIRECTORY,
    SECRET_DIRECTORY,
    DesiredIngressStatus,
    DesiredModuleSetStatus,
    HostPart,
    RecordEvent,
    SecretData,
    ingress_address,
)
from interlock.actors.ingress import IngressActor
from interlock.actors.messages import (
    SERVICE_KEY,
    STATUS_WRITER,
    ObjectChanged,
)
from interlock.actors.topics import (
    INGRESS_STATUS_TOPIC,
    MODULESET_STATUS_TOPIC,
)
from interlock.controller.kinds import parsed
from interlock.mailbox import Actor, ActorSystem, Published, Unpublished
from interlock.mailbox.testing import RecordingActor, wait_idle, wait_until
from interlock.model.meta import ObjectKey
from interlock.model.service import parse_service
from tests.kit.edge_objects import ingress

HOST = "shop.example"
LOAD_BALANCER = {"ingress": [{"ip": "127.0.0.1"}]}
KIND_DIRECTORY = {
    "Ingress": INGRESS_DIRECTORY,
    "IngressClass": INGRESS_CLASS_DIRECTORY,
    "ModuleSet": MODULESET_DIRECTORY,
    "Secret": SECRET_DIRECTORY,
    "EndpointSlice": ENDPOINTS_DIRECTORY,
}

CLASS = {
    "kind": "IngressClass",
    "metadata": {"name": "interlock"},
    "spec": {"controller": "interlock.dev/ingress-controller"},
}


def ingress_obj(
    name: str = "web",
    *,
    modules: str = "guard",
    hosts: tuple[str, ...] = (HOST,),
    service: str = "web",
    class_name: str = "interlock",
) -> dict[str, Any]:
    return ingress(
        name,
        *hosts,
        backend=service,
        modules=modules,
        class_name=class_name,
        uid=f"uid-{name}",
        created="2026-01-01T00:00:00Z",
    )


def module_set_obj(modules: dict[str, Any], *, name: str = "guard") -> dict[str, Any]:
    return {
        "kind": "ModuleSet",
        "metadata": {"name": name, "namespace": "default", "generation": 1},
        "spec": {"modules": modules},
    }


def secret_obj(value: str, *, name: str = "users") -> dict[str, Any]:
    return {
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "default"},
        "stringData": {"htpasswd": value},
    }


BASIC_AUTH = {"basicAuth": {"secretRef": {"name": "users", "key": "htpasswd"}}}
HEADERS = {"headers": {"request": {"add": {"X-Team": "blue"}}}}


class EdgeStandIn(RecordingActor):
    """Stands in for an EdgeActor: the tests read the host topics themselves."""


@dataclass
class Edges:
    system: ActorSystem
    status: list[object] = field(default_factory=list)
    spawned: list[str] = field(default_factory=list)
    versions: itertools.count[int] = field(default_factory=itertools.count)

    def desired(self) -> list[object]:
        """The desired statuses published to the (stand-in) status writer, in order."""
        return [m.value for m in self.status if isinstance(m, Published)]

    def apply(self, obj: dict[str, Any], *, deleted: bool = False) -> None:
        meta = {**obj["metadata"], "resourceVersion": str(next(self.versions))}
        change = ObjectChanged.of({**obj, "metadata": meta}, deleted=deleted)
        self.system.tell(KIND_DIRECTORY[obj["kind"]], parsed(change))

    def delete(self, obj: dict[str, Any]) -> None:
        self.apply(obj, deleted=True)

    def service(self, name: str = "web") -> None:
        service = parse_service(
            {"metadata": {"name": name, "namespace": "default"}, "spec": {"ports": [{"port": 80}]}}
        )
        self.system.publish(
            topics.SERVICE.topic(ObjectKey(namespace="default", name=name)), SERVICE_KEY, service
        )

    def part(self, host: str = HOST, ingress: str = "default/web") -> HostPart | None:
        value = self.system.retained(topics.HOST.topic(host)).get(ingress)
        assert value is None or isinstance(value, HostPart)
        return value

    def events(self, reason: str) -> list[RecordEvent]:
        return [e for e in self.status if isinstance(e, RecordEvent) and e.reason == reason]

    def spawn_directories(self, ingress_actor: Callable[[ObjectKey], Actor]) -> None:
        """The stand-in status writer and the directories an IngressActor reads from."""
        self.system.spawn(STATUS_WRITER, lambda: RecordingActor(self.status))
        self.system.spawn(INGRESS_DIRECTORY, lambda: IngressDirectory(ingress_actor=ingress_actor))
        self.system.spawn(INGRESS_CLASS_DIRECTORY, IngressClassDirectory)
        self.system.spawn(MODULESET_DIRECTORY, ModuleSetDirectory)


@pytest.fixture
async def edges() -> AsyncIterator[Edges]:
    system = ActorSystem()
    running = Edges(system)

    def edge_actor(host: str) -> Actor:
        running.spawned.append(host)
        return EdgeStandIn()

    def ingress_actor(key: ObjectKey) -> Actor:
        return IngressActor(key=key, edge_actor=edge_actor, load_balancer=LOAD_BALANCER)

    running.spawn_directories(ingress_actor)
    system.subscribe(INGRESS_STATUS_TOPIC, STATUS_WRITER)
    system.subscribe(MODULESET_STATUS_TOPIC, STATUS_WRITER)
    system.spawn(SECRET_DIRECTORY, SecretDirectory)
    system.spawn(ENDPOINTS_DIRECTORY, EndpointsDirectory)
    running.apply(CLASS)
    yield running
    await system.shutdown()


async def test_the_first_part_already_carries_modules_that_exist(edges: Edges) -> None:
    seen: list[object] = []
    edges.system.spawn("watcher", lambda: RecordingActor(seen))
    edges.system.subscribe(topics.HOST.topic(HOST), "watcher")
    edges.service()
    edges.apply(module_set_obj(HEADERS))
    edges.apply(ingress_obj())
    await wait_until(lambda: edges.part() is not None)
    await wait_idle(edges.system)
    # Published once, complete: never a "ModuleSet not found" part while its value was queued.
    (published,) = seen
    assert isinstance(published, Published) and published.value == edges.part()
    part = edges.part()
    assert part is not None and part.uid == "uid-web"
    (route,) = part.routes
    assert route.module_error is None and route.modules.headers is not None
    assert route.backend.exists
    assert edges.spawned == [HOST]
    web = ObjectKey(namespace="default", name="web")
    assert DesiredIngressStatus(web, LOAD_BALANCER, "uid-web", {}) in edges.desired()


async def test_a_missing_secret_then_its_arrival(edges: Edges) -> None:
    edges.service()
    edges.apply(module_set_obj(BASIC_AUTH))
    edges.apply(ingress_obj())
    await wait_until(lambda: edges.part() is not None)
    part = edges.part()
    assert part is not None and part.routes[0].module_error is not None
    assert part.routes[0].module_error.reason == "SecretNotFound"

    edges.apply(secret_obj("u:hash"))
    await wait_until(lambda: (p := edges.part()) is not None and p.routes[0].module_error is None)
    part = edges.part()
    assert part is not None and set(part.routes[0].secrets) == {("users", "htpasswd")}


async def test_editing_the_module_set_republishes_and_unrelated_edits_do_not(
    edges: Edges,
) -> None:
    edges.service()
    edges.apply(module_set_obj(HEADERS))
    edges.apply(ingress_obj())
    await wait_until(lambda: edges.part() is not None)
    await wait_idle(edges.system)
    first = edges.part()

    # A resourceVersion bump and a ModuleSet nobody names change nothing.
    edges.apply(module_set_obj(HEADERS))
    edges.apply(module_set_obj({"compression": {}}, name="other"))
    await wait_idle(edges.system)
    assert edges.part() is first

    edges.apply(module_set_obj({"headers": {"request": {"add": {"X-Team": "red"}}}}))
    await wait_until(lambda: edges.part() is not first)
    part = edges.part()
    assert part is not None and part.routes[0].modules.headers is not None
    assert part.routes[0].modules.headers.request.add == {"X-Team": "red"}


async def test_an_ingress_of_another_class_is_not_ours(edges: Edges) -> None:
    edges.service()
    edges.apply(module_set_obj(HEADERS))
    edges.apply(ingress_obj(class_name="nginx"))
    await wait_idle(edges.system)
    assert edges.part() is None
    edges.apply(ingress_obj())
    await wait_until(lambda: edges.part() is not None)
    # Deleting our class withdraws what we served.
    edges.delete(CLASS)
    await wait_until(lambda: edges.part() is None)


async def test_hosts_left_are_unpublished_and_a_deleted_ingress_stops_its_actor(
    edges: Edges,
) -> None:
    edges.service()
    edges.apply(module_set_obj(HEADERS))
    edges.apply(ingress_obj(hosts=(HOST, "api.example")))
    await wait_until(lambda: edges.part("api.example") is not None)
    edges.apply(ingress_obj(hosts=(HOST,)))
    await wait_until(lambda: edges.part("api.example") is None)
    assert edges.part() is not None

    edges.delete(ingress_obj())
    await wait_until(lambda: edges.part() is None)
    await wait_until(lambda: not edges.system.exists(ingress_address("default", "web")))


async def test_broken_rules_are_reported_as_events_and_the_rest_is_served(edges: Edges) -> None:
    edges.service()
    edges.apply(module_set_obj(HEADERS))
    obj = ingress_obj()
    obj["spec"]["rules"].append({"host": "empty.example"})
    edges.apply(obj)
    await wait_until(lambda: edges.part() is not None)
    await wait_idle(edges.system)
    (event,) = edges.events("InvalidRule")
    assert event.type == "Warning" and event.regarding["name"] == "web"
    assert event.message.startswith("spec.rules[1].http: no paths for host empty.example")
    # Recomputing for another reason does not repeat the Event.
    edges.apply(module_set_obj({"headers": {"request": {"add": {"X-Team": "red"}}}}))
    await wait_idle(edges.system)
    assert len(edges.events("InvalidRule")) == 1


async def test_module_set_status_is_asked_for_only_when_it_changes(edges: Edges) -> None:
    edges.apply(module_set_obj({"ipRestriction": {"allow": ["10.0.0.0/33"]}}))
    await wait_until(lambda: any(isinstance(s, DesiredModuleSetStatus) for s in edges.desired()))
    (status,) = [s for s in edges.desired() if isinstance(s, DesiredModuleSetStatus)]
    assert status.conditions is not None
    (condition,) = status.conditions
    assert condition["status"] == "False" and "10.0.0.0/33" in condition["message"]
    # The informer then shows the written status: nothing more to write.
    written = module_set_obj({"ipRestriction": {"allow": ["10.0.0.0/33"]}})
    written["status"] = {"conditions": status.conditions}
    edges.apply(written)
    await wait_idle(edges.system)
    assert len([s for s in edges.desired() if isinstance(s, DesiredModuleSetStatus)]) == 1


async def test_secrets_and_endpoint_slices_are_published_only_when_changed(
    edges: Edges,
) -> None:
    edges.apply(secret_obj("u:one"))
    await wait_idle(edges.system)
    first = edges.system.retained(
        topics.SECRET.topic(ObjectKey(namespace="default", name="users"))
    )["secret"]
    assert isinstance(first, SecretData) and "u:one" not in repr(first)
    edges.apply(secret_obj("u:one"))
    await wait_idle(edges.system)
    assert (
        edges.system.retained(topics.SECRET.topic(ObjectKey(namespace="default", name="users")))[
            "secret"
        ]
        is first
    )

    slice_obj = {
        "kind": "EndpointSlice",
        "metadata": {
            "name": "web-abc",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": "web"},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.0.0.1"]}],
        "ports": [{"name": "", "port": 8080}],
    }
    edges.apply(slice_obj)
    await wait_until(
        lambda: (
            "web-abc"
            in edges.system.retained(
                topics.ENDPOINTS.topic(ObjectKey(namespace="default", name="web"))
            )
        )
    )
    edges.delete(slice_obj)
    await wait_until(
        lambda: (
            not edges.system.retained(
                topics.ENDPOINTS.topic(ObjectKey(namespace="default", name="web"))
            )
        )
    )


async def test_a_restarted_actor_recovers_and_still_follows_its_inputs() -> None:
    system = ActorSystem()
    crashes = [1]

    def edge_actor(host: str) -> Actor:
        if crashes[0]:
            crashes[0] -= 1
            raise RuntimeError("a bug while spawning the edge")
        return EdgeStandIn()

    running = Edges(system)
    running.spawn_directories(lambda key: IngressActor(key=key, edge_actor=edge_actor))
    try:
        running.apply(CLASS)
        running.service()
        running.apply(module_set_obj(HEADERS))
        running.apply(ingress_obj())
        await wait_until(lambda: running.part() is not None)
        assert system.statistics().restarts == 1
        address = ingress_address("default", "web")
        assert address in system.subscribers(
            topics.MODULESET.topic(ObjectKey(namespace="default", name="guard"))
        )

        running.apply(ingress_obj(modules="other"))
        await wait_until(
            lambda: (
                address
                not in system.subscribers(
                    topics.MODULESET.topic(ObjectKey(namespace="default", name="guard"))
                )
            )
        )
    finally:
        await system.shutdown()


class CrashOnIngressChange(IngressActor):
    """Raises (like a bug would) on the next change of its Ingress, once per arming."""

    armed = [0]

    async def receive(self, message: object) -> object | None:
        changes_ingress = isinstance(message, Published | Unpublished) and message.topic.startswith(
            "ingress:"
        )
        if changes_ingress and self.armed[0]:
            self.armed[0] -= 1
            raise RuntimeError("a bug while handling the Ingress")
        return await super().receive(message)


@pytest.fixture
async def crashing() -> AsyncIterator[Edges]:
    system = ActorSystem()
    running = Edges(system)
    running.spawn_directories(lambda key: CrashOnIngressChange(key=key, edge_actor=EdgeStandIn))
    running.apply(CLASS)
    running.service()
    running.apply(module_set_obj(HEADERS))
    yield running
    await system.shutdown()


async def test_a_host_left_while_crashing_is_still_withdrawn(crashing: Edges) -> None:
    crashing.apply(ingress_obj(hosts=("a.example",)))
    await wait_until(lambda: crashing.part("a.example") is not None)
    CrashOnIngressChange.armed[0] = 1
    crashing.apply(ingress_obj(hosts=("b.example",)))
    await wait_until(lambda: crashing.part("b.example") is not None)
    await wait_until(lambda: crashing.part("a.example") is None)
    assert crashing.system.statistics().restarts == 1


async def test_an_ingress_deleted_while_crashing_is_still_withdrawn(crashing: Edges) -> None:
    crashing.apply(ingress_obj())
    await wait_until(lambda: crashing.part() is not None)
    CrashOnIngressChange.armed[0] = 1
    crashing.delete(ingress_obj())
    await wait_until(lambda: crashing.part() is None)
    await wait_until(lambda: not crashing.system.exists(ingress_address("default", "web")))
    assert crashing.system.statistics().restarts == 1
