"""A trace recorded from the real runtime: an external event fanning out, one handler failing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from interlock.mailbox import Actor, ActorSystem, Tracer
from interlock.mailbox.testing import wait_idle


@dataclass(frozen=True)
class ServiceChanged:
    namespace: str
    name: str

    def trace_summary(self) -> str:
        return f"Service {self.namespace}/{self.name}"


@dataclass(frozen=True)
class Recompute:
    route: str


class Directory(Actor):
    async def receive(self, message: object) -> None:
        assert isinstance(message, ServiceChanged)
        self.tell("route/default/web", Recompute(route="default/web"))
        self.tell("route/default/api", Recompute(route="default/api"))


class Route(Actor):
    async def receive(self, message: object) -> None:
        if isinstance(message, Recompute) and message.route == "default/api":
            raise RuntimeError("boom")


async def record_trace(path: Path) -> None:
    tracer = Tracer.to_file(path)
    system = ActorSystem(tracer=tracer)
    system.spawn("services", Directory)
    system.spawn("route/default/web", Route)
    system.spawn("route/default/api", Route)
    system.tell("services", ServiceChanged("default", "db"), correlation_id="corr-one")
    await wait_idle(system)
    system.tell("services", ServiceChanged("default", "cache"), correlation_id="corr-two")
    await wait_idle(system)
    await system.shutdown(1.0)
    tracer.close()


@pytest.fixture
async def trace_file(tmp_path: Path) -> Path:
    path = tmp_path / "trace.jsonl"
    await record_trace(path)
    with path.open("a") as f:
        f.write("not json\n")
    return path


@pytest.fixture
def recorder():
    return record_trace


# --- a trace with the controller's own pub/sub shapes ---------------------------------------------
# The runtime's real Published/Unpublished messages on the controller's topic names, actor
# start-up that subscribes (so retained values are delivered), one handler that fails: what the
# viewer's effect labels and hiding rules read.

ROUTE = "route/gateway.networking.k8s.io/default/echo-split"
WATCH = "watch/default/echo/80/default"


@dataclass(frozen=True)
class ObjectEvent:
    """Stands in for the informer's ObjectChanged: same trace summary."""

    kind: str
    name: str
    deleted: bool
    version: int

    def trace_summary(self) -> str:
        verb = "Deleted" if self.deleted else "Upserted"
        return f"{verb} {self.kind} default/{self.name} rv={self.version}"


@dataclass(frozen=True)
class ServiceValue:
    name: str


class ServiceDirectory(Actor):
    async def receive(self, message: object) -> None:
        assert isinstance(message, ObjectEvent)
        topic = f"service:default/{message.name}"
        if message.deleted:
            self.unpublish(topic, "service")
        else:
            self.publish(topic, "service", ServiceValue(message.name))


class RouteActor(Actor):
    async def started(self) -> None:
        self.subscribe("service:default/echo-v2")

    async def receive(self, message: object) -> None:
        self.publish("parent:default/echo", "gateway.networking.k8s.io/default/echo-split", 1)


class Watch(Actor):
    async def started(self) -> None:
        self.subscribe("parent:default/echo")

    async def receive(self, message: object) -> None:
        return None


class Broken(Actor):
    async def receive(self, message: object) -> None:
        raise RuntimeError("broken on purpose")


async def record_controller_trace(path: Path) -> None:
    tracer = Tracer.to_file(path)
    system = ActorSystem(tracer=tracer)
    system.spawn("service-directory", ServiceDirectory)
    system.publish("service:default/echo-v2", "service", ServiceValue("echo-v2"))
    system.spawn(WATCH, Watch)
    system.spawn(ROUTE, RouteActor)
    system.spawn("broken", Broken)
    await wait_idle(system)
    for version, deleted in ((2, True), (3, False)):
        event = ObjectEvent("Service", "echo-v2", deleted, version)
        system.tell("service-directory", event, correlation_id=event.trace_summary())
        await wait_idle(system)
    bad = ObjectEvent("ModuleSet", "broken", False, 4)
    system.tell("broken", bad, correlation_id=bad.trace_summary())
    await wait_idle(system)
    await system.shutdown(1.0)
    tracer.close()


@pytest.fixture
async def controller_trace(tmp_path: Path) -> Path:
    path = tmp_path / "controller-trace.jsonl"
    await record_controller_trace(path)
    return path
